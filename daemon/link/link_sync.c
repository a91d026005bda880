/*
 * daemon/link/link_sync.c — what a cluster link syncs besides the mirror
 * topics' bytes (issue 33 Deliver 1's filters and 3), with Confluent
 * Cluster Linking's setting names:
 *
 *   consumer.offset.sync.enable (false), consumer.offset.sync.ms (30000),
 *   consumer.offset.group.filters: every interval the source's groups
 *     (ListGroups) that the filters include, their committed offsets
 *     (OffsetFetch v8, every group in one request) of this link's mirror
 *     topics, written here through the one path OffsetCommit takes
 *     (gc_offsets_commit, an operator's commit: stored as any commit, so a
 *     restart keeps them).  No filter: no group (Confluent's default).
 *   auto.create.mirror.topics.enable (false), .filters: the link's
 *     Metadata asks for every source topic; each one the filters include
 *     becomes a mirror topic of the same name (as an INSERT INTO
 *     mirror_topics would), new ones as they appear.
 *
 * Filters are Confluent's JSON: {"groupFilters" | "topicFilters": [{"name":
 * "…", "patternType": "LITERAL" | "PREFIXED", "filterType": "INCLUDE" |
 * "EXCLUDE"}]}; a name is included when an INCLUDE filter matches it and
 * no EXCLUDE filter does; a LITERAL "*" matches every name.
 *
 * Invariants:
 *   S1. A synced offset is never past the mirror's log end (clamped to
 *       it): a consumer that fails over may re-read, never skip.
 *   S2. Only groups with no member here are written (gc_offsets_commit's
 *       operator rule answers NON_EMPTY_GROUP otherwise: skipped); only
 *       mirror topics still mirroring (active, paused, promoting): a
 *       promoted or failed-over topic's offsets are the destination's own.
 *   S3. Internal topics (__*, _schemas) are never picked by filters; a
 *       picked name that is a normal local topic is left alone and listed
 *       in cluster_links.topics_skipped.
 *   S4. The sync's requests share the link's one connection and its one
 *       request in flight (link_conn.c C2); its state reaches SQLite once
 *       per round (cluster_links.offsets_synced_at, groups_synced,
 *       sync_error), never per offset.
 *
 * Not built: FindCoordinator — OffsetFetch goes to the bootstrap broker,
 * the coordinator of every group of a standalone source; a multi-broker
 * source needs the coordinator's connection here (one per source broker,
 * as the fetch's).  ACL sync (acl.sync.enable) is refused as a setting.
 */
#include "daemon/link/link_int.h"
#include "daemon/view/view.h"
#include "daemon/group/group.h"
#include "daemon/replica/replica.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LS_LIST_GROUPS_VERSION 4
#define LS_OFFSET_FETCH_VERSION 8
#define LS_SYNC_MS_MIN 100

enum ls_stage { LS_IDLE, LS_LISTING, LS_GROUPS_KNOWN, LS_FETCHING };

/* One group's offsets on their way into the coordinator (its strings
 * after offs, living until done or forget: group.h). */
typedef struct ls_commit {
    struct lk_sync *sync;
    struct gc_wait *pending;
    struct ls_commit *next;
    size_t n;
    md_offset offs[];
} ls_commit;

typedef struct lk_sync {
    lk_link *link;
    enum ls_stage stage;
    int64_t due_us;                      /* mono: the next round */
    char **groups;                       /* the round's groups, filtered */
    int ngroups, groups_cap;
    ls_commit *commits;                  /* in flight */
    int32_t round_synced;                /* this round's groups stored */
    bool round_open;                     /* waiting for its commits */
    char error[MD_ERRLEN];               /* this round's first error */
    /* counted for /metrics */
    int32_t groups_synced;               /* the last round's */
    uint64_t rounds, offsets_total, skipped_active;
    int64_t synced_at_ms;                /* -1: never */
    /* topics picked by the filters, to create; names left alone (S3) */
    char **create;
    int ncreate, create_cap;
    char skipped[1024];
} lk_sync;

/* ---- settings ---------------------------------------------------------------- */
static bool filter_match(const lk_filter *f, const char *name)
{
    if (!f->prefixed)
        return !strcmp(f->name, "*") || !strcmp(f->name, name);
    return !strncmp(f->name, name, strlen(f->name));
}

static bool filters_pick(const lk_filters *fs, const char *name)
{
    bool in = false;
    for (int i = 0; i < fs->n; i++)
        if (filter_match(&fs->f[i], name)) {
            if (fs->f[i].exclude)
                return false;
            in = true;
        }
    return in;
}

static const char *json_text(json_t *o, const char *key, const char *dflt)
{
    json_t *v = json_object_get(o, key);
    return v ? json_string_value(v) : dflt;       /* not a string: NULL */
}

/* Confluent's filter JSON (top: "groupFilters" or "topicFilters") into
 * out.  KP_NONE or KP_INVALID_CONFIG with err. */
static int filters_parse(const char *setting, const char *top, const char *v, lk_filters *out,
                         char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loads(v, 0, &je), *arr = root ? json_object_get(root, top) : NULL;
    int rc = KP_INVALID_CONFIG;
    out->n = 0;
    if (!root)
        snprintf(err, errlen, "cluster_links.config: %s is not JSON (%s at character %d)",
                 setting, je.text, je.position);
    else if (!json_is_array(arr))
        snprintf(err, errlen, "cluster_links.config: %s must be {\"%s\": [{\"name\": …, "
                 "\"patternType\": \"LITERAL\"|\"PREFIXED\", \"filterType\": "
                 "\"INCLUDE\"|\"EXCLUDE\"}, …]}", setting, top);
    else if (json_array_size(arr) > LK_FILTERS_MAX)
        snprintf(err, errlen, "cluster_links.config: %s: at most %d filters", setting,
                 LK_FILTERS_MAX);
    else
        rc = KP_NONE;
    for (size_t i = 0; rc == KP_NONE && i < json_array_size(arr); i++) {
        json_t *o = json_array_get(arr, i);
        const char *name = json_text(o, "name", NULL);
        const char *pt = json_text(o, "patternType", "LITERAL");
        const char *ft = json_text(o, "filterType", "INCLUDE");
        lk_filter *f = &out->f[out->n];
        if (!json_is_object(o) || !name || !*name || strlen(name) >= sizeof f->name) {
            snprintf(err, errlen, "cluster_links.config: %s: filter %zu needs a \"name\" of 1 "
                     "to %zu characters", setting, i + 1, sizeof f->name - 1);
            rc = KP_INVALID_CONFIG;
        } else if (!pt || (strcmp(pt, "LITERAL") && strcmp(pt, "PREFIXED"))) {
            snprintf(err, errlen, "cluster_links.config: %s: filter %zu: unknown patternType "
                     "'%s' (LITERAL or PREFIXED)", setting, i + 1, pt ? pt : "?");
            rc = KP_INVALID_CONFIG;
        } else if (!ft || (strcmp(ft, "INCLUDE") && strcmp(ft, "EXCLUDE"))) {
            snprintf(err, errlen, "cluster_links.config: %s: filter %zu: unknown filterType "
                     "'%s' (INCLUDE or EXCLUDE)", setting, i + 1, ft ? ft : "?");
            rc = KP_INVALID_CONFIG;
        } else {
            snprintf(f->name, sizeof f->name, "%s", name);
            f->prefixed = !strcmp(pt, "PREFIXED");
            f->exclude = !strcmp(ft, "EXCLUDE");
            out->n++;
        }
    }
    json_decref(root);
    return rc;
}

static int setting_bool(const char *k, const char *v, bool *out, char *err, size_t errlen)
{
    if (strcmp(v, "true") && strcmp(v, "false")) {
        snprintf(err, errlen, "cluster_links.config: %s=%s: true or false", k, v);
        return KP_INVALID_CONFIG;
    }
    *out = !strcmp(v, "true");
    return KP_NONE;
}

void lk_sync_defaults(lk_link *l)
{
    l->sync_cfg.offsets_ms = 30000;
}

int lk_sync_setting(lk_link *l, const char *k, const char *v, char *err, size_t errlen)
{
    lk_sync_cfg *c = &l->sync_cfg;
    bool on = false;
    if (!strcmp(k, "consumer.offset.sync.enable"))
        return setting_bool(k, v, &c->offsets, err, errlen);
    if (!strcmp(k, "auto.create.mirror.topics.enable"))
        return setting_bool(k, v, &c->auto_topics, err, errlen);
    if (!strcmp(k, "consumer.offset.group.filters"))
        return filters_parse(k, "groupFilters", v, &c->groups, err, errlen);
    if (!strcmp(k, "auto.create.mirror.topics.filters"))
        return filters_parse(k, "topicFilters", v, &c->topics, err, errlen);
    if (!strcmp(k, "consumer.offset.sync.ms")) {
        char *e;
        long long x = strtoll(v, &e, 10);
        if (!*v || *e || x < LS_SYNC_MS_MIN || x > INT32_MAX) {
            snprintf(err, errlen, "cluster_links.config: consumer.offset.sync.ms=%s: %d to %d",
                     v, LS_SYNC_MS_MIN, INT32_MAX);
            return KP_INVALID_CONFIG;
        }
        c->offsets_ms = x;
        return KP_NONE;
    }
    if (!strcmp(k, "acl.sync.enable") || !strcmp(k, "acl.filters")) {
        int rc = !strcmp(k, "acl.filters") ? KP_INVALID_CONFIG
                                            : setting_bool(k, v, &on, err, errlen);
        if (rc == KP_NONE && !on)
            return KP_NONE;
        snprintf(err, errlen, "cluster_links.config: %s: ACL sync is not built yet", k);
        return KP_INVALID_CONFIG;
    }
    return -1;
}

/* ---- state ------------------------------------------------------------------- */
static lk_sync *sync_of(lk_link *l)
{
    if (!l->sync && (l->sync = calloc(1, sizeof *l->sync))) {
        l->sync->link = l;
        l->sync->synced_at_ms = -1;
    }
    return l->sync;
}

static void names_free(char **v, int *n)
{
    for (int i = 0; i < *n; i++)
        free(v[i]);
    *n = 0;
}

static bool names_add(char ***v, int *n, int *cap, const char *p, size_t len)
{
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        char **nv = realloc(*v, (size_t)nc * sizeof *nv);
        if (!nv)
            return false;
        *v = nv;
        *cap = nc;
    }
    char *s = strndup(p, len);
    if (!s)
        return false;
    (*v)[(*n)++] = s;
    return true;
}

void lk_sync_free(lk_link *l)
{
    lk_sync *s = l->sync;
    if (!s)
        return;
    while (s->commits) {
        ls_commit *c = s->commits;
        s->commits = c->next;
        gc_groups_forget(c->pending);    /* done will not run */
        free(c);
    }
    names_free(s->groups, &s->ngroups);
    names_free(s->create, &s->ncreate);
    free(s->groups);
    free(s->create);
    free(s);
    l->sync = NULL;
}

static void note_error(lk_sync *s, const char *why)
{
    if (!s->error[0])
        snprintf(s->error, sizeof s->error, "%s", why);
}

/* S4: a round's end, once its commits are stored. */
static void round_store(lk_sync *s)
{
    lk_link *l = s->link;
    char err[MD_ERRLEN];
    if (s->round_open) {
        if (s->commits)
            return;
        s->round_open = false;
        s->groups_synced = s->round_synced;
        s->synced_at_ms = bk_now_ms();
        s->rounds++;
        if (s->error[0])
            BK_WARN("cluster link %s: consumer offset sync: %s", l->name, s->error);
    }
    if (md_link_sync_status(l->b->db, l->name, s->synced_at_ms, s->groups_synced,
                            s->error[0] ? s->error : NULL, s->skipped, err, sizeof err) != 0)
        BK_ERROR("cluster link %s: cannot store its sync state: %s", l->name, err);
}

static void commit_done(void *arg, int rc)
{
    ls_commit *c = arg;
    lk_sync *s = c->sync;
    for (ls_commit **pp = &s->commits; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    if (rc == 0) {
        s->round_synced++;
        s->offsets_total += c->n;
    } else {
        note_error(s, "storing synced offsets failed");
    }
    free(c);
    round_store(s);
}

/* The mirror of this link whose source is topic and whose offsets are
 * synced (S2), or NULL. */
static lk_mirror *synced_mirror(lk_link *l, kp_str topic)
{
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        if (m->link == l && m->created && kp_str_eq(topic, m->source) &&
            (m->state == LK_ACTIVE || m->state == LK_PAUSED || m->state == LK_PROMOTING))
            return m;
    return NULL;
}

/* One group of the OffsetFetch answer into the coordinator (S1, S2). */
static void group_sync(lk_sync *s, const kp_OffsetFetchResponse_OffsetFetchResponseGroup *g)
{
    lk_link *l = s->link;
    bk_broker *b = l->b;
    char why[MD_ERRLEN];
    size_t n = 0, chars = (size_t)g->GroupId.len + 1;
    if (g->ErrorCode != KP_NONE) {
        snprintf(why, sizeof why, "OffsetFetch of group %.*s: %s", (int)g->GroupId.len,
                 g->GroupId.p, kp_error_name(g->ErrorCode));
        note_error(s, why);
        return;
    }
    for (int32_t t = 0; t < g->Topics_count; t++) {
        const lk_mirror *m = synced_mirror(l, g->Topics[t].Name);
        for (int32_t p = 0; m && p < g->Topics[t].Partitions_count; p++) {
            n++;
            chars += strlen(m->topic) + 1 + (size_t)(g->Topics[t].Partitions[p].Metadata.len > 0
                                                     ? g->Topics[t].Partitions[p].Metadata.len : 0);
        }
    }
    if (n == 0)
        return;
    ls_commit *c = calloc(1, sizeof *c + n * sizeof(md_offset) + chars);
    if (!c) {
        note_error(s, "out of memory");
        return;
    }
    char *pool = (char *)&c->offs[n];
    memcpy(pool, g->GroupId.p, (size_t)g->GroupId.len);
    pool[g->GroupId.len] = 0;
    const char *group = pool;
    pool += g->GroupId.len + 1;
    int64_t now = bk_now_ms();
    for (int32_t t = 0; t < g->Topics_count; t++) {
        const lk_mirror *m = synced_mirror(l, g->Topics[t].Name);
        for (int32_t k = 0; m && k < g->Topics[t].Partitions_count; k++) {
            const kp_OffsetFetchResponse_OffsetFetchResponsePartitions *p =
                &g->Topics[t].Partitions[k];
            const bk_pview *v = p->PartitionIndex < m->nparts
                ? view_partition(b, kp_str_cstr(m->topic), p->PartitionIndex) : NULL;
            if (p->ErrorCode != KP_NONE || p->CommittedOffset < 0 || !v || !v->local)
                continue;
            int64_t end = seg_log_end(v->local->log);
            size_t tl = strlen(m->topic), ml = p->Metadata.len > 0 ? (size_t)p->Metadata.len : 0;
            memcpy(pool, m->topic, tl + 1);
            c->offs[c->n] = (md_offset){
                .group_id = group, .group_len = g->GroupId.len,
                .topic = pool, .topic_len = (int32_t)tl, .partition = p->PartitionIndex,
                .offset = p->CommittedOffset < end ? p->CommittedOffset : end,     /* S1 */
                .leader_epoch = -1,      /* the source's epochs are not this log's */
                .metadata = pool + tl + 1, .metadata_len = (int32_t)ml,
                .commit_time_ms = now, .expire_time_ms = -1,
            };
            pool += tl + 1;
            if (ml)
                memcpy(pool, p->Metadata.p, ml);
            pool += ml;
            c->n++;
        }
    }
    c->sync = s;
    bk_offset_commit oc = {
        .group = { group, g->GroupId.len }, .generation = -1, .member_id = KP_STR_NULL,
        .instance_id = KP_STR_NULL, .by_operator = true,    /* S2: no member here */
        .offs = c->offs, .n = c->n, .done = commit_done, .arg = c,
    };
    int rc = c->n ? gc_offsets_commit(b, &oc, why, sizeof why) : KP_NONE;
    if (rc == KP_NONE && oc.pending) {
        c->pending = oc.pending;
        c->next = s->commits;
        s->commits = c;
        return;
    }
    if (rc == KP_NON_EMPTY_GROUP)
        s->skipped_active++;             /* active here: its own offsets */
    else if (rc != KP_NONE)
        note_error(s, why);
    free(c);
}

/* ---- requests and answers ---------------------------------------------------- */
static bool syncing_any(const lk_link *l)
{
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        if (m->link == l && m->created &&
            (m->state == LK_ACTIVE || m->state == LK_PAUSED || m->state == LK_PROMOTING))
            return true;
    return false;
}

bool lk_sync_send(lk_link *l, int64_t now_us, int64_t *next_us)
{
    lk_sync *s;
    if (!l->sync_cfg.offsets || !(s = sync_of(l)))
        return false;
    if (s->stage == LS_GROUPS_KNOWN) {
        kp_OffsetFetchRequest_OffsetFetchRequestGroup *gs =
            kp_arena_alloc(&l->arena, (size_t)s->ngroups * sizeof *gs);
        if (!gs)
            return false;
        for (int i = 0; i < s->ngroups; i++)
            gs[i] = (kp_OffsetFetchRequest_OffsetFetchRequestGroup){
                .GroupId = kp_str_cstr(s->groups[i]), .MemberId = KP_STR_NULL,
                .MemberEpoch = -1, .Topics_count = -1 };     /* every topic */
        kp_OffsetFetchRequest q;
        kp_init_OffsetFetchRequest(&q);
        q.Groups = gs;
        q.Groups_count = s->ngroups;
        q.RequireStable = true;          /* no offsets of an open transaction */
        s->stage = LS_FETCHING;
        lk_conn_send(l, KP_API_OFFSET_FETCH, LS_OFFSET_FETCH_VERSION, &q);
        return true;
    }
    if (s->stage != LS_IDLE || s->round_open)
        return false;
    if (now_us < s->due_us) {
        if (s->due_us < *next_us)
            *next_us = s->due_us;
        return false;
    }
    s->due_us = now_us + l->sync_cfg.offsets_ms * 1000;
    if (!syncing_any(l) || l->sync_cfg.groups.n == 0)
        return false;
    kp_ListGroupsRequest q;
    kp_init_ListGroupsRequest(&q);
    q.StatesFilter_count = 0;
    q.TypesFilter_count = 0;
    s->stage = LS_LISTING;
    s->error[0] = 0;
    s->round_synced = 0;
    lk_conn_send(l, KP_API_LIST_GROUPS, LS_LIST_GROUPS_VERSION, &q);
    return true;
}

int lk_sync_answer(lk_link *l, int16_t api, kp_rd *r)
{
    lk_sync *s = sync_of(l);
    char why[MD_ERRLEN];
    if (!s)
        return -1;
    kp_rd_tags(r);                       /* both flexible: response header v1 */
    if (api == KP_API_LIST_GROUPS) {
        kp_ListGroupsResponse lr;
        if (kp_dec_ListGroupsResponse(r, LS_LIST_GROUPS_VERSION, &lr, &l->arena) != 0)
            return -1;
        names_free(s->groups, &s->ngroups);
        s->stage = LS_IDLE;
        s->round_open = true;
        if (lr.ErrorCode != KP_NONE) {
            snprintf(why, sizeof why, "ListGroups: %s", kp_error_name(lr.ErrorCode));
            note_error(s, why);
        }
        for (int32_t i = 0; lr.ErrorCode == KP_NONE && i < lr.Groups_count; i++) {
            char id[MD_TOPIC_NAME_MAX + 1];
            kp_str g = lr.Groups[i].GroupId;
            if (g.len <= 0 || (size_t)g.len >= sizeof id)
                continue;
            memcpy(id, g.p, (size_t)g.len);
            id[g.len] = 0;
            if (filters_pick(&l->sync_cfg.groups, id) &&
                !names_add(&s->groups, &s->ngroups, &s->groups_cap, id, (size_t)g.len))
                note_error(s, "out of memory");
        }
        if (s->ngroups > 0)
            s->stage = LS_GROUPS_KNOWN;
        else
            round_store(s);
        return 0;
    }
    kp_OffsetFetchResponse fr;
    if (kp_dec_OffsetFetchResponse(r, LS_OFFSET_FETCH_VERSION, &fr, &l->arena) != 0)
        return -1;
    s->stage = LS_IDLE;
    for (int32_t i = 0; i < fr.Groups_count; i++)
        group_sync(s, &fr.Groups[i]);
    round_store(s);
    return 0;
}

/* ---- topics picked by filters ------------------------------------------------------ */
void lk_sync_topic_seen(lk_link *l, kp_str name)
{
    lk_sync *s = sync_of(l);
    char t[MD_TOPIC_NAME_MAX + 1];
    if (!s || name.len <= 0 || (size_t)name.len >= sizeof t)
        return;
    memcpy(t, name.p, (size_t)name.len);
    t[name.len] = 0;
    if (!strncmp(t, "__", 2) || !strcmp(t, "_schemas") || !filters_pick(&l->sync_cfg.topics, t))
        return;                          /* S3 */
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        if (!strcmp(m->topic, t) || (m->link == l && !strcmp(m->source, t)))
            return;
    for (int i = 0; i < s->ncreate; i++)
        if (!strcmp(s->create[i], t))
            return;
    if (!view_topic_find(l->b, t, strlen(t))) {
        if (!names_add(&s->create, &s->ncreate, &s->create_cap, t, strlen(t)))
            BK_WARN("cluster link %s: out of memory for topic %s", l->name, t);
        return;
    }
    /* S3: listed once, in SQL and the log. */
    size_t have = strlen(s->skipped), tl = strlen(t);
    for (const char *p = s->skipped; (p = strstr(p, t)); p += tl)
        if ((p == s->skipped || p[-1] == ',') && (p[tl] == ',' || !p[tl]))
            return;
    if (have + tl + 2 > sizeof s->skipped)
        return;
    snprintf(s->skipped + have, sizeof s->skipped - have, "%s%s", have ? "," : "", t);
    BK_WARN("cluster link %s: source topic %s matches auto.create.mirror.topics.filters but is "
            "a normal topic here: not mirrored", l->name, t);
    round_store(s);
}

bool lk_sync_topics_create(lk_link *l)
{
    lk_sync *s = l->sync;
    char err[MD_ERRLEN + 64];
    while (s && s->ncreate > 0) {
        char *t = s->create[--s->ncreate];
        /* As an INSERT INTO mirror_topics; its kick may send the next
         * request from inside (then the connection is WAITING). */
        int rc = link_mirror_create(l->b, t, l->name, NULL, NULL, err, sizeof err);
        if (rc != KP_NONE)
            BK_WARN("cluster link %s: cannot mirror source topic %s picked by its filters: %s",
                    l->name, t, err);
        else
            BK_INFO("cluster link %s: source topic %s picked by auto.create.mirror.topics."
                    "filters", l->name, t);
        free(t);
    }
    return l->conn != LK_READY;
}

void lk_sync_metrics(lk_set *set, kp_buf *out)
{
    kp_buf_printf(out, "# HELP sluice_link_offset_sync_groups Groups whose offsets the last "
                  "consumer offset sync round stored.\n"
                  "# TYPE sluice_link_offset_sync_groups gauge\n"
                  "# HELP sluice_link_offset_sync_rounds_total Consumer offset sync rounds.\n"
                  "# TYPE sluice_link_offset_sync_rounds_total counter\n"
                  "# HELP sluice_link_offset_sync_offsets_total Offsets stored by the sync.\n"
                  "# TYPE sluice_link_offset_sync_offsets_total counter\n"
                  "# HELP sluice_link_offset_sync_skipped_active_total Groups not synced: "
                  "members here.\n"
                  "# TYPE sluice_link_offset_sync_skipped_active_total counter\n"
                  "# HELP sluice_link_offset_sync_error 1 when the last round had an error.\n"
                  "# TYPE sluice_link_offset_sync_error gauge\n");
    for (lk_link *l = set->links; l; l = l->next) {
        const lk_sync *s = l->sync;
        if (!l->sync_cfg.offsets || !s)
            continue;
        kp_buf_printf(out, "sluice_link_offset_sync_groups{link=\"%s\"} %d\n"
                      "sluice_link_offset_sync_rounds_total{link=\"%s\"} %llu\n"
                      "sluice_link_offset_sync_offsets_total{link=\"%s\"} %llu\n"
                      "sluice_link_offset_sync_skipped_active_total{link=\"%s\"} %llu\n"
                      "sluice_link_offset_sync_error{link=\"%s\"} %d\n",
                      l->name, (int)s->groups_synced, l->name, (unsigned long long)s->rounds,
                      l->name, (unsigned long long)s->offsets_total, l->name,
                      (unsigned long long)s->skipped_active, l->name, s->error[0] ? 1 : 0);
    }
}
