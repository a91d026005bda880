/*
 * daemon/link/link_sync.c — what a cluster link syncs besides the mirror
 * topics' bytes (issue 33 Deliver 1's filters and 3), with Confluent
 * Cluster Linking's setting names:
 *
 *   consumer.offset.sync.enable (false), consumer.offset.sync.ms (30000),
 *   consumer.offset.group.filters: every interval the source's groups
 *     (ListGroups on every source broker) that the filters include, their
 *     committed offsets (OffsetFetch on each group's coordinator: v8 its
 *     groups in one request, v6-v7 one a request: S8) of this link's mirror topics, written
 *     here through the one path OffsetCommit takes (gc_offsets_commit, an
 *     operator's commit: stored as any commit, so a restart keeps them;
 *     in a cluster through the group's coordinator here: S9).  No filter:
 *     no group (Confluent's default).
 *   auto.create.mirror.topics.enable (false), .filters: the link's
 *     Metadata asks for every source topic; each one the filters include
 *     becomes a mirror topic of the same name (as an INSERT INTO
 *     mirror_topics would), new ones as they appear.
 *   acl.sync.enable (false), acl.sync.ms (5000): every interval the
 *     source's LITERAL ACLs (DescribeAcls) of this link's mirrored source
 *     topics (under the mirror's name) and of the groups the group filters
 *     pick are made the destination's (sec_acl_apply, the path CreateAcls
 *     takes), and removed when the source removed them.  PREFIXED and
 *     wildcard ACLs are not copied.
 *   acl.filters (unset): Confluent's {"aclFilters": [{"resourceFilter":
 *     {"resourceType", "name", "patternType"}, "accessFilter": {"principal",
 *     "host", "operation", "permissionType"}}]}, each field optional (any),
 *     names as Confluent (lower case) or Kafka (upper case) writes them:
 *     set, only the ACLs above that one of its filters matches are synced
 *     (S10).  A resourceType other than topic, group or any, and
 *     patternType prefixed, are refused (never synced here).
 *
 * Filters are Confluent's JSON: {"groupFilters" | "topicFilters": [{"name":
 * "…", "patternType": "LITERAL" | "PREFIXED", "filterType": "INCLUDE" |
 * "EXCLUDE"}]}; a name is included when an INCLUDE filter matches it and
 * no EXCLUDE filter does; a LITERAL "*" matches every name but "*" (S6).
 *
 * Invariants:
 *   S1. A synced offset is never past the mirror's high watermark (clamped
 *       to it; not the log end, which a truncation may cut back): a
 *       consumer that fails over may re-read, never skip.
 *   S2. Only groups with no member here are written (gc_offsets_commit's
 *       operator rule answers NON_EMPTY_GROUP otherwise: skipped); only
 *       mirror topics still mirroring (active, paused, promoting): a
 *       promoted or failed-over topic's offsets are the destination's own.
 *   S3. Internal topics (__*, _schemas, _confluent-*) are never picked by
 *       filters, and at most LS_CREATE_MAX are picked per Metadata; a
 *       picked name that is a normal local topic is left alone and listed
 *       in cluster_links.topics_skipped.
 *   S4. ApiVersions, FindCoordinator and DescribeAcls go on the link's
 *       bootstrap connection, ListGroups and OffsetFetch on an admin
 *       connection to the source broker (link_conn.c lk_admin_peer_get: not
 *       the one its Fetches wait on), whose failures are the sync's error
 *       (sync_error), never the link's last_error (mirroring is fine); each
 *       connection has one request in flight (link_conn.c C2).  The sync's state reaches SQLite once per
 *       round (cluster_links.offsets_synced_at, groups_synced,
 *       sync_error), never per offset; a round ends when every broker
 *       answered or its connection closed, and its commits are stored.
 *   S5. An ACL is removed here only if this link added it (link_acls,
 *       marked after the add: a crash between leaves it as a local one;
 *       unmarked after the removal applied: a failed or interrupted one is
 *       retried the next round); an ACL that existed here already is never
 *       marked, so a local ACL is never touched.  A round's marks are one
 *       transaction; at most LS_ACLS_MAX ACLs are synced (more: none, the
 *       error in sync_error), each one valid (sec_acl_validate).
 *   S6. A resource named "*" (Kafka's wildcard: every topic or group) is
 *       never picked by a filter and its ACLs are never copied: a source's
 *       wildcard grant is no grant over every local topic or group.
 *   S7. Only the groups a round asked about (those the filters pick) are
 *       written: a group in an OffsetFetch answer that was not asked for
 *       is dropped, whatever the source says.
 *   S8. A round, as Kafka's admin client lists and fetches groups: the
 *       source's FindCoordinator versions once per bootstrap connection
 *       (ApiVersions: v4 batches every group in one request, v3 asks one
 *       group at a time, older: no sync, said in sync_error), and so its
 *       OffsetFetch (v8 every group of a coordinator in one request, v6-v7
 *       one group a request: a Kafka 2.4-2.8 source) and ListGroups (v4,
 *       or v3; older than any of these three: no sync); ListGroups
 *       on every broker the last Metadata named (a group is listed by its
 *       coordinator; one listed twice, while it moves, counts once);
 *       FindCoordinator (key type GROUP) of the groups the filters pick;
 *       OffsetFetch of each coordinator's groups on its connection.  A
 *       broker that cannot be reached costs its groups this round (the
 *       error in sync_error), not the others'; a group whose coordinator
 *       moved in between answers NOT_COORDINATOR and is synced next round.
 *   S9. Cluster destination: every broker runs the link, and each syncs
 *       only the groups it coordinates (gc_coordinator_of), so each
 *       group's offsets are stored by its coordinator, replicated as any
 *       commit (a consumer sees them through any broker, and after that
 *       coordinator's death through its successor, which syncs them from
 *       then on).
 *   S10. acl.filters narrows, never widens: an ACL is synced when S5-S6
 *       and the scope above take it and one filter matches it (the source's
 *       resource name); one a changed filter no longer picks becomes a
 *       local one (as one out of scope, S5), never removed.
 *   S11. Cluster destination, a mirror partition of which the group's
 *       coordinator holds no replica: its high watermark (S1) is asked of
 *       the partition's leader (ListOffsets latest, read_uncommitted,
 *       through repl_peer_call: no wait on the loop); an entry whose leader
 *       does not answer is not written this round (sync_error says so).
 *       A follower's own high watermark is used as it is (never past the
 *       leader's).
 */
#include "daemon/link/link_int.h"
#include "daemon/view/view.h"
#include "daemon/group/group.h"
#include "daemon/replica/replica.h"
#include "daemon/security/sec_authz.h"
#include "daemon/md_sync.h"
#include "daemon/replication/repl_peer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LS_LIST_GROUPS_VERSION 4         /* the newest asked; 3 the oldest (flexible) */
#define LS_LIST_GROUPS_OLDEST 3
#define LS_OFFSET_FETCH_BATCHED 8        /* many groups a request */
#define LS_OFFSET_FETCH_ONE 6            /* one group, flexible (Kafka 2.4+); 7: RequireStable */
#define LS_OFFSET_FETCH_STABLE 7
#define LS_API_VERSIONS_VERSION 2
#define LS_FIND_BATCHED 4                /* FindCoordinator: many keys a request */
#define LS_FIND_ONE 3                    /* one key, flexible (Kafka 2.4+) */
#define LS_LIST_OFFSETS_VERSION 4        /* S11: to a destination broker */
#define LS_HW_TIMEOUT_MS 10000
#define LS_DESCRIBE_ACLS_VERSION 1
#define LS_SYNC_MS_MIN 100
#define LS_ACL_FIELDS 7                  /* as md_acl's, tab-separated */
#define LS_ACLS_MAX 10000                /* ACLs a link syncs (a round's bound) */
#define LS_CREATE_MAX 1000               /* mirrors auto-created per Metadata (S3) */

/* A round: ApiVersions (once per bootstrap connection) → ListGroups on
 * every source broker → FindCoordinator → OffsetFetch on each coordinator
 * (S8). */
enum ls_stage { LS_IDLE, LS_VERSIONS, LS_LISTING, LS_FINDING, LS_FETCHING };
enum ls_ask { LS_ASK_NONE, LS_ASK_LIST, LS_ASK_FETCH };

/* A source broker: from Metadata, or a coordinator FindCoordinator named. */
typedef struct ls_node {
    int32_t id, port;
    char host[256];
    bool listed;                         /* in the last Metadata's brokers */
    enum ls_ask ask;                     /* this round's request for it */
    bool out;                            /* sent, not answered */
    int fetch_next;                      /* OffsetFetch below v8: the next group to ask */
    int fetch_group;                     /* … the one asked (s->groups index); -1 */
} ls_node;

/* One group's offsets on their way into the coordinator (its strings
 * after offs, living until done or forget: group.h). */
typedef struct ls_commit {
    struct lk_sync *sync;                /* NULL: the link went (S11's calls free it) */
    struct gc_wait *pending;
    struct ls_commit *next;
    int32_t *leader;                     /* [n]: S11, the leader asked for the entry's
                                          * high watermark; -1: known */
    int hw_out;                          /* S11: calls out */
    size_t n;
    md_offset offs[];
} ls_commit;

typedef struct lk_sync {
    lk_link *link;
    enum ls_stage stage;
    int64_t due_us;                      /* mono: the next round */
    char **groups;                       /* the round's groups, filtered, sorted */
    int ngroups, groups_cap;
    int32_t *coord;                      /* [ngroups]: its coordinator (nodes index); -1 */
    ls_node *nodes;                      /* the source's brokers and coordinators */
    int nnodes, nodes_cap;
    int fc_next;                         /* FindCoordinator v3: the next group's index */
    bool fc_out;
    int16_t fc_version;                  /* the source's FindCoordinator; -1: unknown */
    int16_t of_version, lg_version;      /* OffsetFetch, ListGroups asked (with fc_version) */
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
    bool create_capped;                  /* more than LS_CREATE_MAX this Metadata */
    char skipped[1024];
    /* ACLs (S5) */
    int64_t acls_due_us;
    bool acls_out;                       /* DescribeAcls in flight */
    bool ours_loaded;
    char **ours;                         /* the ACLs this link added, as keys */
    size_t nours;
    char acl_error[MD_ERRLEN];
    uint64_t acls_added, acls_removed;
} lk_sync;

/* ---- settings ---------------------------------------------------------------- */
static bool filter_match(const lk_filter *f, const char *name)
{
    if (!strcmp(name, "*"))
        return false;                    /* S6: the name of every resource */
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

int link_filters_pick(const char *json, const char *top, const char *name, char *err,
                      size_t errlen)
{
    lk_filters fs;
    if (filters_parse(top, top, json, &fs, err, errlen) != KP_NONE)
        return -1;
    return filters_pick(&fs, name);
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
    l->sync_cfg.acls_ms = 5000;
    l->sync_cfg.nacl_f = -1;
}

/* One of acl.filters' enumerated fields: absent is "any"; Confluent writes
 * them in lower case ("topic", "read", "allow"), Kafka's names in upper. */
static int acl_enum(json_t *o, const char *key, int (*parse)(const char *), int i,
                    char *err, size_t errlen)
{
    json_t *v = json_object_get(o, key);
    char up[64];
    if (!v)
        return BK_OP_ANY;                /* 1: ANY in every enum */
    const char *t = json_string_value(v);
    size_t n = t ? strlen(t) : 0;
    for (size_t k = 0; k < n && k < sizeof up - 1; k++)
        up[k] = t[k] >= 'a' && t[k] <= 'z' ? (char)(t[k] - 32) : t[k];
    up[n < sizeof up ? n : sizeof up - 1] = 0;
    if (!strcmp(up, "TRANSACTIONALID"))
        snprintf(up, sizeof up, "TRANSACTIONAL_ID");
    int x = t && n < sizeof up ? parse(up) : 0;
    if (x <= 0)
        snprintf(err, errlen, "cluster_links.config: acl.filters: filter %d: unknown %s '%s'",
                 i, key, t ? t : "(not a string)");
    return x;
}

static int acl_text(json_t *o, const char *key, char *out, size_t cap, int i, char *err,
                    size_t errlen)
{
    json_t *v = json_object_get(o, key);
    const char *t = v ? json_string_value(v) : "";
    if (!t || strlen(t) >= cap || strchr(t, '\t')) {
        snprintf(err, errlen, "cluster_links.config: acl.filters: filter %d: \"%s\" must be "
                 "a string of at most %zu characters", i, key, cap - 1);
        return KP_INVALID_CONFIG;
    }
    snprintf(out, cap, "%s", t);
    return KP_NONE;
}

/* Confluent's acl.filters: {"aclFilters": [{"resourceFilter": {"resourceType",
 * "name", "patternType"}, "accessFilter": {"principal", "host", "operation",
 * "permissionType"}}]}, each field optional (any).  S10. */
static int acl_filters_parse(const char *v, lk_sync_cfg *c, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loads(v, 0, &je), *arr = root ? json_object_get(root, "aclFilters") : NULL;
    int rc = KP_INVALID_CONFIG;
    c->nacl_f = 0;
    if (!root)
        snprintf(err, errlen, "cluster_links.config: acl.filters is not JSON (%s at character "
                 "%d)", je.text, je.position);
    else if (!json_is_array(arr))
        snprintf(err, errlen, "cluster_links.config: acl.filters must be {\"aclFilters\": "
                 "[{\"resourceFilter\": {\"resourceType\", \"name\", \"patternType\"}, "
                 "\"accessFilter\": {\"principal\", \"host\", \"operation\", "
                 "\"permissionType\"}}, …]}");
    else if (json_array_size(arr) > LK_FILTERS_MAX)
        snprintf(err, errlen, "cluster_links.config: acl.filters: at most %d filters",
                 LK_FILTERS_MAX);
    else
        rc = KP_NONE;
    for (size_t i = 0; rc == KP_NONE && i < json_array_size(arr); i++) {
        json_t *o = json_array_get(arr, i), *rf = json_object_get(o, "resourceFilter"),
               *af = json_object_get(o, "accessFilter");
        lk_acl_filter *f = &c->acl_f[c->nacl_f];
        int n = (int)i + 1, pat;
        rc = KP_INVALID_CONFIG;
        if (!json_is_object(o) || (rf && !json_is_object(rf)) || (af && !json_is_object(af)))
            snprintf(err, errlen, "cluster_links.config: acl.filters: filter %d must be "
                     "{\"resourceFilter\": {…}, \"accessFilter\": {…}}", n);
        else if ((f->res = (int8_t)acl_enum(rf, "resourceType", sec_res_parse, n, err,
                                            errlen)) <= 0 ||
                 (pat = acl_enum(rf, "patternType", sec_pat_parse, n, err, errlen)) <= 0 ||
                 (f->op = (int8_t)acl_enum(af, "operation", sec_op_parse, n, err,
                                           errlen)) <= 0 ||
                 (f->perm = (int8_t)acl_enum(af, "permissionType", sec_perm_parse, n, err,
                                             errlen)) <= 0)
            ;                            /* err says which */
        else if (f->res != BK_RES_ANY && f->res != BK_RES_TOPIC && f->res != BK_RES_GROUP)
            snprintf(err, errlen, "cluster_links.config: acl.filters: filter %d: resourceType "
                     "%s: only the ACLs of topics and groups are synced (topic, group or any)",
                     n, sec_res_name(f->res));
        else if (pat == BK_PAT_PREFIXED)
            snprintf(err, errlen, "cluster_links.config: acl.filters: filter %d: patternType "
                     "prefixed: only LITERAL ACLs are synced (literal, match or any)", n);
        else if (acl_text(rf, "name", f->name, sizeof f->name, n, err, errlen) == KP_NONE &&
                 acl_text(af, "principal", f->principal, sizeof f->principal, n, err,
                          errlen) == KP_NONE &&
                 acl_text(af, "host", f->host, sizeof f->host, n, err, errlen) == KP_NONE) {
            c->nacl_f++;
            rc = KP_NONE;
        }
    }
    json_decref(root);
    if (rc != KP_NONE)
        c->nacl_f = -1;
    return rc;
}

/* S10: acl.filters (when set) picks the ACL of fields f (a key's: type,
 * name here, pattern, principal, host, operation, permission) whose
 * resource is named source at the source. */
static bool acl_filtered_in(const lk_sync_cfg *c, const char *source, char *const f[])
{
    int res = sec_res_parse(f[0]), op = sec_op_parse(f[5]), perm = sec_perm_parse(f[6]);
    for (int i = 0; i < c->nacl_f; i++) {
        const lk_acl_filter *x = &c->acl_f[i];
        if ((x->res == BK_RES_ANY || x->res == res) && (!x->name[0] || !strcmp(x->name, source)) &&
            (!x->principal[0] || !strcmp(x->principal, f[3])) &&
            (!x->host[0] || !strcmp(x->host, f[4])) &&
            (x->op == BK_OP_ANY || x->op == op) && (x->perm == BK_PERM_ANY || x->perm == perm))
            return true;
    }
    return c->nacl_f < 0;                /* not set: every ACL in scope */
}

int lk_sync_setting(lk_link *l, const char *k, const char *v, char *err, size_t errlen)
{
    lk_sync_cfg *c = &l->sync_cfg;
    if (!strcmp(k, "consumer.offset.sync.enable"))
        return setting_bool(k, v, &c->offsets, err, errlen);
    if (!strcmp(k, "auto.create.mirror.topics.enable"))
        return setting_bool(k, v, &c->auto_topics, err, errlen);
    if (!strcmp(k, "consumer.offset.group.filters"))
        return filters_parse(k, "groupFilters", v, &c->groups, err, errlen);
    if (!strcmp(k, "auto.create.mirror.topics.filters"))
        return filters_parse(k, "topicFilters", v, &c->topics, err, errlen);
    if (!strcmp(k, "acl.sync.enable"))
        return setting_bool(k, v, &c->acls, err, errlen);
    if (!strcmp(k, "consumer.offset.sync.ms") || !strcmp(k, "acl.sync.ms")) {
        char *e;
        long long x = strtoll(v, &e, 10);
        if (!*v || *e || x < LS_SYNC_MS_MIN || x > INT32_MAX) {
            snprintf(err, errlen, "cluster_links.config: %s=%s: %d to %d", k, v,
                     LS_SYNC_MS_MIN, INT32_MAX);
            return KP_INVALID_CONFIG;
        }
        *(!strcmp(k, "acl.sync.ms") ? &c->acls_ms : &c->offsets_ms) = x;
        return KP_NONE;
    }
    if (!strcmp(k, "acl.filters"))
        return acl_filters_parse(v, c, err, errlen);
    return -1;
}

/* ---- state ------------------------------------------------------------------- */
static lk_sync *sync_of(lk_link *l)
{
    if (!l->sync && (l->sync = calloc(1, sizeof *l->sync))) {
        l->sync->link = l;
        l->sync->synced_at_ms = -1;
        l->sync->fc_version = -1;
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

static void keys_free(char **v, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        free(v[i]);
    *n = 0;
}

static void note_error(lk_sync *s, const char *why);
static void round_store(lk_sync *s);

static void asks_clear(lk_sync *s)
{
    for (int i = 0; i < s->nnodes; i++)
        s->nodes[i].ask = LS_ASK_NONE, s->nodes[i].out = false;
}

static ls_node *node_of(const lk_sync *s, int32_t id)
{
    for (int i = 0; s && i < s->nnodes; i++)
        if (s->nodes[i].id == id)
            return &s->nodes[i];
    return NULL;
}

bool lk_sync_wants(const lk_link *l, int32_t node)
{
    const ls_node *n = node_of(l->sync, node);
    return n && n->ask != LS_ASK_NONE;
}

void lk_sync_conn_failed(lk_link *l, int32_t node, const char *why)
{
    ls_node *n = l->sync ? node_of(l->sync, node) : NULL;
    if (n && n->ask != LS_ASK_NONE)      /* an idle one closing is no error */
        note_error(l->sync, why);
}

void lk_sync_forgotten(lk_link *l, int32_t node)
{
    lk_sync *s = l->sync;
    char why[MD_ERRLEN];
    if (!s)
        return;
    if (node >= 0) {                     /* S8: that broker's part of the round is lost */
        ls_node *n = node_of(s, node);
        if (!n || n->ask == LS_ASK_NONE)
            return;
        snprintf(why, sizeof why, "source broker %d (%.64s:%d): the connection closed before "
                 "its %s answer", (int)node, n->host, (int)n->port,
                 n->ask == LS_ASK_LIST ? "ListGroups" : "OffsetFetch");
        note_error(s, why);
        n->ask = LS_ASK_NONE;
        n->out = false;
        lk_peer_poke(&l->boot);          /* the round goes on from lk_sync_send */
        return;
    }
    s->fc_version = -1;                  /* the next bootstrap server may differ */
    s->fc_out = false;
    asks_clear(s);
    if (s->stage != LS_IDLE) {
        s->stage = LS_IDLE;
        note_error(s, "the connection to the source closed during the round");
        if (!s->commits)
            round_store(s);
    }
    s->acls_out = false;
}

void lk_sync_free(lk_link *l)
{
    lk_sync *s = l->sync;
    if (!s)
        return;
    while (s->commits) {
        ls_commit *c = s->commits;
        s->commits = c->next;
        if (c->hw_out > 0) {
            c->sync = NULL;              /* S11: its last call frees it */
            continue;
        }
        gc_groups_forget(c->pending);    /* done will not run */
        free(c);
    }
    names_free(s->groups, &s->ngroups);
    names_free(s->create, &s->ncreate);
    keys_free(s->ours, &s->nours);
    free(s->groups);
    free(s->coord);
    free(s->nodes);
    free(s->create);
    free(s->ours);
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
        if (s->commits || s->stage != LS_IDLE)
            return;                      /* more to come: coordinators, commits */
        s->round_open = false;
        s->groups_synced = s->round_synced;
        s->synced_at_ms = bk_now_ms();
        s->rounds++;
        if (s->error[0])
            BK_WARN("cluster link %s: consumer offset sync: %s", l->name, s->error);
    }
    if (md_link_sync_status(l->b->db, l->name, s->synced_at_ms, s->groups_synced,
                            s->error[0] ? s->error : s->acl_error[0] ? s->acl_error : NULL,
                            s->skipped, err, sizeof err) != 0)
        BK_ERROR("cluster link %s: cannot store its sync state: %s", l->name, err);
}

static void unlink_commit(lk_sync *s, ls_commit *c)
{
    for (ls_commit **pp = &s->commits; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
}

static void commit_done(void *arg, int rc)
{
    ls_commit *c = arg;
    lk_sync *s = c->sync;
    unlink_commit(s, c);
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

static void hw_release(ls_commit *c);

/* One group's offsets into the coordinator (gc_offsets_commit, an
 * operator's commit), its entries clamped (S1); c freed or kept until
 * commit_done. */
static void commit_send(lk_sync *s, ls_commit *c)
{
    bk_broker *b = s->link->b;
    char why[MD_ERRLEN];
    if (c->n == 0) {
        unlink_commit(s, c);
        free(c);
        round_store(s);
        return;
    }
    bk_offset_commit oc = {
        .group = { c->offs[0].group_id, c->offs[0].group_len }, .generation = -1,
        .member_id = KP_STR_NULL, .instance_id = KP_STR_NULL,
        .by_operator = true,             /* S2: no member here */
        .offs = c->offs, .n = c->n, .done = commit_done, .arg = c,
    };
    int rc = gc_offsets_commit(b, &oc, why, sizeof why);
    if (rc == KP_NONE && oc.pending) {
        c->pending = oc.pending;         /* on s->commits until commit_done */
        return;
    }
    if (rc == KP_NON_EMPTY_GROUP)
        s->skipped_active++;             /* active here: its own offsets */
    else if (rc != KP_NONE)
        note_error(s, why);
    unlink_commit(s, c);
    free(c);
    round_store(s);
}

/* S11: a ListOffsets call to a mirror partition's leader, for the high
 * watermarks of c's entries it leads (this broker holds no replica). */
typedef struct ls_hw_call {
    ls_commit *c;
    int32_t leader;
} ls_hw_call;

static void hw_done(void *arg, int16_t error, kp_rd *body)
{
    ls_hw_call *k = arg;
    ls_commit *c = k->c;
    kp_ListOffsetsResponse lr;
    kp_arena a;
    kp_arena_init(&a, KP_ARENA_LIMIT_DEFAULT);
    bool ok = c->sync && error == KP_NONE &&
              kp_dec_ListOffsetsResponse(body, LS_LIST_OFFSETS_VERSION, &lr, &a) == 0;
    for (int32_t t = 0; ok && t < lr.Topics_count; t++)
        for (int32_t p = 0; p < lr.Topics[t].Partitions_count; p++) {
            const kp_ListOffsetsResponse_ListOffsetsPartitionResponse *r =
                &lr.Topics[t].Partitions[p];
            for (size_t i = 0; r->ErrorCode == KP_NONE && r->Offset >= 0 && i < c->n; i++)
                if (c->leader[i] == k->leader && r->PartitionIndex == c->offs[i].partition &&
                    kp_str_eq(lr.Topics[t].Name, c->offs[i].topic)) {
                    if (r->Offset < c->offs[i].offset)
                        c->offs[i].offset = r->Offset;     /* S1 */
                    c->leader[i] = -1;
                }
        }
    kp_arena_free(&a);
    free(k);
    hw_release(c);
}

/* One of c's high watermark calls (or hw_ask's hold) ended: the last one
 * sends what is known. */
static void hw_release(ls_commit *c)
{
    if (--c->hw_out > 0)
        return;
    if (!c->sync) {                      /* the link went meanwhile */
        free(c);
        return;
    }
    size_t n = 0;                        /* no high watermark: not synced this round */
    for (size_t i = 0; i < c->n; i++)
        if (c->leader[i] < 0)
            c->offs[n++] = c->offs[i];
    if (n < c->n) {
        char why[MD_ERRLEN];
        snprintf(why, sizeof why, "group %s: the high watermark of %zu mirror partitions "
                 "not known (their leaders did not answer)", c->offs[0].group_id, c->n - n);
        note_error(c->sync, why);
    }
    c->n = n;
    commit_send(c->sync, c);
}

/* S11: one ListOffsets (latest, read_uncommitted: the high watermark) to
 * each leader of c's entries this broker holds no replica of. */
static void hw_ask(lk_sync *s, ls_commit *c)
{
    bk_broker *b = s->link->b;
    kp_buf body;
    kp_buf_init(&body);
    c->hw_out = 1;                       /* held while the calls go out */
    for (size_t i = 0; i < c->n; i++) {
        int32_t leader = c->leader[i];
        bool first = leader >= 0;
        for (size_t j = 0; first && j < i; j++)
            first = c->leader[j] != leader;
        if (!first)
            continue;
        size_t np = 0;
        for (size_t j = i; j < c->n; j++)
            np += c->leader[j] == leader;
        kp_ListOffsetsRequest_ListOffsetsPartition *ps = calloc(np, sizeof *ps);
        kp_ListOffsetsRequest_ListOffsetsTopic *ts = calloc(np, sizeof *ts);
        ls_hw_call *k = calloc(1, sizeof *k);
        if (!ps || !ts || !k) {
            free(ps);
            free(ts);
            free(k);
            continue;                    /* its entries dropped in hw_done */
        }
        np = 0;
        for (size_t j = i; j < c->n; j++)
            if (c->leader[j] == leader) {
                ps[np] = (kp_ListOffsetsRequest_ListOffsetsPartition){
                    .PartitionIndex = c->offs[j].partition, .CurrentLeaderEpoch = -1,
                    .Timestamp = -1, .MaxNumOffsets = 1 };
                ts[np] = (kp_ListOffsetsRequest_ListOffsetsTopic){
                    .Name = { c->offs[j].topic, c->offs[j].topic_len }, .Partitions = &ps[np],
                    .Partitions_count = 1 };
                np++;
            }
        kp_ListOffsetsRequest q;
        kp_init_ListOffsetsRequest(&q);
        q.ReplicaId = -1;                /* a consumer's: bounded by the high watermark */
        q.IsolationLevel = 0;
        q.Topics = ts;
        q.Topics_count = (int32_t)np;
        kp_buf_reset(&body);
        kp_enc_ListOffsetsRequest(&body, LS_LIST_OFFSETS_VERSION, &q);
        *k = (ls_hw_call){ .c = c, .leader = leader };
        c->hw_out++;
        if (body.err)
            hw_done(k, KP_UNKNOWN_SERVER_ERROR, NULL);
        else
            repl_peer_call(b, leader, KP_API_LIST_OFFSETS, LS_LIST_OFFSETS_VERSION, body.data,
                           body.len, LS_HW_TIMEOUT_MS, hw_done, k);
        free(ps);
        free(ts);
    }
    kp_buf_free(&body);
    hw_release(c);                       /* the hold */
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
    ls_commit *c = calloc(1, sizeof *c + n * (sizeof(md_offset) + sizeof(int32_t)) + chars);
    if (!c) {
        note_error(s, "out of memory");
        return;
    }
    c->leader = (int32_t *)&c->offs[n];
    char *pool = (char *)&c->leader[n];
    bool ask = false;
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
            if (p->ErrorCode != KP_NONE || p->CommittedOffset < 0 || !v ||
                (!v->local && (!bk_cluster_mode(b) || v->leader < 0)))
                continue;
            /* S1; S11: no replica here, the leader's asked */
            int64_t end = v->local ? v->local->high_watermark : p->CommittedOffset;
            c->leader[c->n] = v->local ? -1 : v->leader;
            ask |= !v->local;
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
    c->next = s->commits;                /* until stored (S4: the round waits) */
    s->commits = c;
    if (ask)
        hw_ask(s, c);
    else
        commit_send(s, c);
}

static bool syncing_any(const lk_link *l)
{
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        if (m->link == l && m->created &&
            (m->state == LK_ACTIVE || m->state == LK_PAUSED || m->state == LK_PROMOTING))
            return true;
    return false;
}

/* ---- ACLs (acl.sync.enable; S5) --------------------------------------------------- */
/* A mirror of this link that syncs (S2) named topic here, or NULL. */
static const lk_mirror *synced_mirror_here(const lk_link *l, const char *topic)
{
    for (const lk_mirror *m = l->set->mirrors; m; m = m->next)
        if (m->link == l && m->created && !strcmp(m->topic, topic) &&
            (m->state == LK_ACTIVE || m->state == LK_PAUSED || m->state == LK_PROMOTING))
            return m;
    return NULL;
}

/* key's fields into f (pointers into buf, a copy of key). */
static bool key_split(const char *key, char *buf, size_t cap, char *f[LS_ACL_FIELDS])
{
    if (snprintf(buf, cap, "%s", key) >= (int)cap)
        return false;
    char *p = buf;
    for (int i = 0; i < LS_ACL_FIELDS; i++) {
        f[i] = p;
        p = strchr(p, '\t');
        if (!p != (i == LS_ACL_FIELDS - 1))
            return false;
        if (p)
            *p++ = 0;
    }
    return true;
}

/* The ACL key is one this link syncs now: its topic a syncing mirror's,
 * its group one the filters pick; one named "*" (S6) is in scope (a copy
 * made before S6 is removed), never wanted. */
static bool acl_in_scope(const lk_link *l, char *const f[LS_ACL_FIELDS])
{
    if (!strcmp(f[1], "*"))
        return true;                     /* S6: never wanted, so removed if ours */
    if (!strcmp(f[0], "TOPIC")) {
        const lk_mirror *m = synced_mirror_here(l, f[1]);
        return m && acl_filtered_in(&l->sync_cfg, m->source, f);
    }
    return !strcmp(f[0], "GROUP") && filters_pick(&l->sync_cfg.groups, f[1]) &&
           acl_filtered_in(&l->sync_cfg, f[1], f);
}

static md_acl acl_row(char *const f[LS_ACL_FIELDS])
{
    return (md_acl){ .resource_type = f[0], .resource_name = f[1], .pattern_type = f[2],
                     .principal = f[3], .host = f[4], .operation = f[5], .permission = f[6] };
}

/* An ACL equal to f that is here already (local or ours). */
static bool acl_here(bk_broker *b, char *const f[LS_ACL_FIELDS])
{
    const bk_acl **got = NULL;
    size_t n = 0;
    bk_acl_filter q = {
        .res = (int8_t)sec_res_parse(f[0]), .pat = BK_PAT_LITERAL,
        .op = (int8_t)sec_op_parse(f[5]), .perm = (int8_t)sec_perm_parse(f[6]),
        .name = kp_str_cstr(f[1]), .principal = kp_str_cstr(f[3]), .host = kp_str_cstr(f[4]),
    };
    if (sec_authz_select(b->authz, &q, &got, &n) != 0)
        return true;                     /* unknown: left alone */
    free(got);
    return n > 0;
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* k in v, sorted (key_cmp): O(log n), a round stays O(n log n). */
static bool keys_has(char *const *v, size_t n, const char *k)
{
    return n > 0 && bsearch(&k, v, n, sizeof *v, key_cmp) != NULL;
}

static bool acls_send(lk_link *l, lk_sync *s, int64_t now_us, int64_t *next_us)
{
    if (!l->sync_cfg.acls || s->acls_out)
        return false;
    if (now_us < s->acls_due_us) {
        if (s->acls_due_us < *next_us)
            *next_us = s->acls_due_us;
        return false;
    }
    s->acls_due_us = now_us + l->sync_cfg.acls_ms * 1000;
    if (!syncing_any(l))
        return false;
    kp_DescribeAclsRequest q;
    kp_init_DescribeAclsRequest(&q);
    q.ResourceTypeFilter = BK_RES_ANY;
    q.ResourceNameFilter = KP_STR_NULL;
    q.PatternTypeFilter = BK_PAT_LITERAL;
    q.PrincipalFilter = KP_STR_NULL;
    q.HostFilter = KP_STR_NULL;
    q.Operation = BK_OP_ANY;
    q.PermissionType = BK_PERM_ANY;
    s->acls_out = true;
    lk_conn_send(l, KP_API_DESCRIBE_ACLS, LS_DESCRIBE_ACLS_VERSION, &q);
    return true;
}

/* Logged and stored (cluster_links.sync_error) once per distinct error. */
static void acl_error(lk_sync *s, const char *why)
{
    if (!strcmp(s->acl_error, why ? why : ""))
        return;
    if (why)
        BK_WARN("cluster link %s: ACL sync: %s", s->link->name, why);
    snprintf(s->acl_error, sizeof s->acl_error, "%.*s", (int)sizeof s->acl_error - 1,
             why ? why : "");
    round_store(s);
}

/* The source's valid ACLs in scope, as keys (malloc'd); -1: out of memory,
 * -2: more than LS_ACLS_MAX. */
static int acls_wanted(lk_link *l, const kp_DescribeAclsResponse *ar, char ***want,
                       int *nwant, int *cap)
{
    for (int32_t i = 0; i < ar->Resources_count; i++) {
        const kp_DescribeAclsResponse_DescribeAclsResource *res = &ar->Resources[i];
        char name[MD_TOPIC_NAME_MAX + 1];
        if (res->PatternType != BK_PAT_LITERAL || res->ResourceName.len <= 0 ||
            (size_t)res->ResourceName.len >= sizeof name ||
            kp_str_eq(res->ResourceName, "*"))
            continue;                                /* S6 */
        memcpy(name, res->ResourceName.p, (size_t)res->ResourceName.len);
        name[res->ResourceName.len] = 0;
        const char *here = NULL;
        if (res->ResourceType == BK_RES_TOPIC) {
            const lk_mirror *m = synced_mirror(l, res->ResourceName);
            here = m ? m->topic : NULL;              /* under the mirror's name */
        } else if (res->ResourceType == BK_RES_GROUP &&
                   filters_pick(&l->sync_cfg.groups, name)) {
            here = name;
        }
        for (int32_t k = 0; here && k < res->Acls_count; k++) {
            const kp_DescribeAclsResponse_AclDescription *a = &res->Acls[k];
            const char *op = sec_op_name(a->Operation), *perm = sec_perm_name(a->PermissionType);
            char key[1024], why[MD_ERRLEN], buf[1024], *f[LS_ACL_FIELDS];
            if (*nwant >= LS_ACLS_MAX)
                return -2;
            if (sec_acl_validate(res->ResourceType, res->ResourceName, res->PatternType,
                                 a->Principal, a->Host, a->Operation, a->PermissionType, why,
                                 sizeof why) != KP_NONE ||
                !op || !perm || a->Principal.len <= 0 || a->Host.len <= 0 ||
                memchr(a->Principal.p, '\t', (size_t)a->Principal.len) ||
                memchr(a->Host.p, '\t', (size_t)a->Host.len) ||
                snprintf(key, sizeof key, "%s\t%s\tLITERAL\t%.*s\t%.*s\t%s\t%s",
                         sec_res_name(res->ResourceType), here, (int)a->Principal.len,
                         a->Principal.p, (int)a->Host.len, a->Host.p, op, perm)
                    >= (int)sizeof key ||
                !key_split(key, buf, sizeof buf, f) || !acl_filtered_in(&l->sync_cfg, name, f))
                continue;                            /* S10 */
            if (!names_add(want, nwant, cap, key, strlen(key)))
                return -1;
        }
    }
    return 0;
}

/* The marks of a round (S5) in one transaction: unmark[i] and added[i]
 * (ours[i], want[i]) false when not to be changed.  Its WAL sync on the
 * metadata sync worker. */
static void acls_mark(lk_link *l, lk_sync *s, const bool *unmark, char **want, const bool *added,
                      int nwant)
{
    md_db *db = l->b->db;
    char err[MD_ERRLEN];
    bool txn = md_begin(db) == 0;
    for (size_t i = 0; i < s->nours; i++)
        if (unmark[i] && md_link_acl_mark(db, l->name, s->ours[i], false, err, sizeof err) == 0) {
            free(s->ours[i]);
            s->ours[i] = NULL;
        }
    size_t n = 0, nadd = 0;
    for (size_t i = 0; i < s->nours; i++)
        if (s->ours[i])
            s->ours[n++] = s->ours[i];
    s->nours = n;
    for (int i = 0; i < nwant; i++)
        nadd += added[i];
    char **grown = realloc(s->ours, (s->nours + nadd + 1) * sizeof *grown);
    if (grown)
        s->ours = grown;
    for (int i = 0; grown && i < nwant; i++)
        if (added[i] && md_link_acl_mark(db, l->name, want[i], true, err, sizeof err) == 0) {
            s->ours[s->nours++] = want[i];
            want[i] = NULL;
        }
    if (txn && md_commit(db) == 0)
        bk_mdsync_request();
    if (s->nours > 1)                /* qsort(NULL, 0) is undefined */
        qsort(s->ours, s->nours, sizeof *s->ours, key_cmp);
}

/* S5: what the source has and this link added differ: added, removed.
 * want sorted (key_cmp).  An ACL to remove stays ours (marked) until the
 * removal is applied: on failure the next round retries it. */
static void acls_apply(lk_link *l, lk_sync *s, char **want, int nwant)
{
    bk_broker *b = l->b;
    char err[MD_ERRLEN], why[MD_ERRLEN + 64];
    char (*buf)[1024] = calloc((size_t)nwant + s->nours + 1, sizeof *buf);
    md_acl *add = calloc((size_t)nwant + 1, sizeof *add);
    md_acl *del = calloc(s->nours + 1, sizeof *del);
    bool *added = calloc((size_t)nwant + 1, sizeof *added);
    bool *unmark = calloc(s->nours + 1, sizeof *unmark), *dels = calloc(s->nours + 1, 1);
    size_t nadd = 0, ndel = 0, nb = 0;
    char *f[LS_ACL_FIELDS];
    if (!buf || !add || !del || !added || !unmark || !dels) {
        acl_error(s, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < s->nours; i++) {
        if (keys_has(want, (size_t)nwant, s->ours[i]) ||
            !key_split(s->ours[i], buf[nb], sizeof buf[nb], f))
            continue;
        if (acl_in_scope(l, f)) {        /* removed at the source */
            del[ndel++] = acl_row(f);
            dels[i] = true;
            nb++;
        } else {                         /* no longer synced: a local one from now on */
            unmark[i] = true;
        }
    }
    for (int i = 0; i < nwant; i++) {
        if (keys_has(s->ours, s->nours, want[i]) ||
            !key_split(want[i], buf[nb], sizeof buf[nb], f) || acl_here(b, f))
            continue;                    /* ours already, or a local one: not touched */
        add[nadd++] = acl_row(f);
        added[i] = true;
        nb++;
    }
    if (ndel + nadd > 0 && sec_acl_apply(b, del, ndel, add, nadd, NULL, err, sizeof err)
                           != KP_NONE) {
        snprintf(why, sizeof why, "cannot change the ACLs here: %s", err);
        acl_error(s, why);
        memset(added, 0, (size_t)nwant * sizeof *added);
    } else {
        if (ndel + nadd > 0)
            BK_INFO("cluster link %s: ACLs synced from the source: %zu added, %zu removed",
                    l->name, nadd, ndel);
        s->acls_removed += ndel;
        s->acls_added += nadd;
        acl_error(s, NULL);
        for (size_t i = 0; i < s->nours; i++)
            unmark[i] |= dels[i];        /* applied: unmarked now (S5) */
    }
    acls_mark(l, s, unmark, want, added, nwant);
out:
    free(dels);
    free(buf);
    free(add);
    free(del);
    free(added);
    free(unmark);
}

static int acls_answer(lk_link *l, lk_sync *s, kp_rd *r)
{
    kp_DescribeAclsResponse ar;
    char err[MD_ERRLEN], why[MD_ERRLEN];
    if (kp_dec_DescribeAclsResponse(r, LS_DESCRIBE_ACLS_VERSION, &ar, &l->boot.arena) != 0)
        return -1;
    s->acls_out = false;
    if (ar.ErrorCode != KP_NONE) {
        snprintf(why, sizeof why, "DescribeAcls: %s%s%.*s", kp_error_name(ar.ErrorCode),
                 ar.ErrorMessage.len > 0 ? ": " : "",
                 ar.ErrorMessage.len > 0 ? (int)ar.ErrorMessage.len : 0,
                 ar.ErrorMessage.len > 0 ? ar.ErrorMessage.p : "");
        acl_error(s, why);
        return 0;
    }
    if (!s->ours_loaded) {
        if (md_link_acl_list(l->b->db, l->name, &s->ours, &s->nours, err, sizeof err) != 0) {
            acl_error(s, err);
            return 0;
        }
        if (s->nours > 1)                /* qsort(NULL, 0) is undefined */
            qsort(s->ours, s->nours, sizeof *s->ours, key_cmp);
        s->ours_loaded = true;
    }
    char **want = NULL;
    int nwant = 0, cap = 0;
    int rc = acls_wanted(l, &ar, &want, &nwant, &cap);
    if (rc == -2) {
        snprintf(why, sizeof why, "the source has more than %d ACLs this link syncs: none "
                 "synced", LS_ACLS_MAX);
        acl_error(s, why);
    } else if (rc != 0) {
        acl_error(s, "out of memory");
    } else {
        if (nwant > 1)
            qsort(want, (size_t)nwant, sizeof *want, key_cmp);
        int n = 0;                       /* one of each: a source may repeat one */
        for (int i = 0; i < nwant; i++)
            if (n > 0 && !strcmp(want[n - 1], want[i]))
                free(want[i]);
            else
                want[n++] = want[i];
        nwant = n;
        acls_apply(l, s, want, nwant);
    }
    for (int i = 0; i < nwant; i++)
        free(want[i]);
    free(want);
    return 0;
}

/* ---- requests and answers ---------------------------------------------------- */

/* A source broker by id (added, or its address updated); NULL: out of
 * memory. */
static ls_node *node_add(lk_sync *s, int32_t id, kp_str host, int32_t port)
{
    ls_node *n = node_of(s, id);
    if (!n) {
        if (s->nnodes == s->nodes_cap) {
            int nc = s->nodes_cap ? s->nodes_cap * 2 : 8;
            ls_node *nv = realloc(s->nodes, (size_t)nc * sizeof *nv);
            if (!nv)
                return NULL;
            s->nodes = nv;
            s->nodes_cap = nc;
        }
        n = &s->nodes[s->nnodes++];
        *n = (ls_node){ .id = id };
    }
    if (host.len > 0 && (size_t)host.len < sizeof n->host) {
        memcpy(n->host, host.p, (size_t)host.len);
        n->host[host.len] = 0;
        n->port = port;
    }
    return n;
}

void lk_sync_brokers(lk_link *l, const kp_MetadataResponse_MetadataResponseBroker *br,
                     int32_t n)
{
    lk_sync *s = l->sync_cfg.offsets ? sync_of(l) : NULL;    /* the first Metadata's too */
    if (!s)
        return;
    for (int i = 0; i < s->nnodes; i++)
        s->nodes[i].listed = false;      /* gone from the cluster: not listed on */
    for (int32_t i = 0; i < n; i++) {
        ls_node *x = br[i].NodeId >= 0 ? node_add(s, br[i].NodeId, br[i].Host, br[i].Port)
                                        : NULL;
        if (x)
            x->listed = true;
    }
}

/* S8: n's request asked of its connection (made or woken); false: none. */
static bool node_ask(lk_link *l, ls_node *n, enum ls_ask ask)
{
    lk_peer *c = lk_admin_peer_get(l, n->id, kp_str_cstr(n->host), n->port);
    if (!c || !c->host[0])
        return false;
    n->ask = ask;                        /* after lk_peer_get: a moved one closes first */
    n->out = false;
    n->fetch_next = 0;
    n->fetch_group = -1;
    lk_peer_poke(c);
    return true;
}

static bool asks_left(const lk_sync *s)
{
    for (int i = 0; i < s->nnodes; i++)
        if (s->nodes[i].ask != LS_ASK_NONE)
            return true;
    return false;
}

static void round_end(lk_sync *s)
{
    asks_clear(s);
    s->stage = LS_IDLE;
    round_store(s);                      /* or once its commits are stored */
}

/* S8: ListGroups on every source broker Metadata named. */
static void listing_start(lk_link *l, lk_sync *s)
{
    int asked = 0;
    names_free(s->groups, &s->ngroups);
    s->stage = LS_LISTING;
    for (int i = 0; i < s->nnodes; i++)
        asked += s->nodes[i].listed && node_ask(l, &s->nodes[i], LS_ASK_LIST);
    if (asked == 0) {
        note_error(s, "no source broker known to list groups on (no Metadata answer yet)");
        round_end(s);
    }
}

/* S8: the groups' coordinators asked (FindCoordinator, on the bootstrap
 * connection); true: a request went out. */
static bool finding_send(lk_link *l, lk_sync *s)
{
    kp_FindCoordinatorRequest q;
    kp_init_FindCoordinatorRequest(&q);
    q.KeyType = 0;                       /* a group */
    if (s->fc_version >= LS_FIND_BATCHED) {
        kp_str *keys = kp_arena_alloc(&l->boot.arena, (size_t)s->ngroups * sizeof *keys);
        if (!keys)
            return false;
        for (int i = 0; i < s->ngroups; i++)
            keys[i] = kp_str_cstr(s->groups[i]);
        q.CoordinatorKeys = keys;
        q.CoordinatorKeys_count = s->ngroups;
        s->fc_next = s->ngroups;
    } else {
        q.Key = kp_str_cstr(s->groups[s->fc_next++]);
    }
    s->fc_out = true;
    lk_conn_send(l, KP_API_FIND_COORDINATOR,
                 s->fc_version >= LS_FIND_BATCHED ? LS_FIND_BATCHED : s->fc_version, &q);
    return true;
}

/* S8: OffsetFetch of each coordinator's groups, on its connection. */
static void fetching_start(lk_link *l, lk_sync *s)
{
    s->stage = LS_FETCHING;
    for (int i = 0; i < s->ngroups; i++) {
        ls_node *n = s->coord[i] >= 0 ? &s->nodes[s->coord[i]] : NULL;
        if (n && n->ask != LS_ASK_FETCH && !node_ask(l, n, LS_ASK_FETCH)) {
            char why[MD_ERRLEN];
            snprintf(why, sizeof why, "group %s: no connection to its coordinator, source "
                     "broker %d", s->groups[i], (int)n->id);
            note_error(s, why);
        }
    }
}

/* The round's next step on the bootstrap connection (S8); true: a request
 * went out. */
static bool round_step(lk_link *l, lk_sync *s)
{
    if (s->stage == LS_LISTING) {
        if (asks_left(s))
            return false;
        if (s->ngroups > 1)
            qsort(s->groups, (size_t)s->ngroups, sizeof *s->groups, key_cmp);
        int n = 0;                       /* one of each: listed by two brokers (moved) */
        for (int i = 0; i < s->ngroups; i++)
            if (n > 0 && !strcmp(s->groups[n - 1], s->groups[i]))
                free(s->groups[i]);
            else
                s->groups[n++] = s->groups[i];
        s->ngroups = n;
        int32_t *coord = realloc(s->coord, (size_t)(n + 1) * sizeof *coord);
        if (!coord) {
            note_error(s, "out of memory");
            round_end(s);
            return false;
        }
        s->coord = coord;
        for (int i = 0; i < n; i++)
            coord[i] = -1;
        s->fc_next = 0;
        s->stage = LS_FINDING;
    }
    if (s->stage == LS_FINDING) {
        if (s->fc_out)
            return false;
        if (s->fc_next < s->ngroups)
            return finding_send(l, s);
        fetching_start(l, s);
    }
    if (s->stage == LS_FETCHING && !asks_left(s))
        round_end(s);
    return false;
}

bool lk_sync_send(lk_link *l, int64_t now_us, int64_t *next_us)
{
    lk_sync *s;
    if ((!l->sync_cfg.offsets && !l->sync_cfg.acls) || !(s = sync_of(l)))
        return false;
    if (acls_send(l, s, now_us, next_us))
        return true;
    if (!l->sync_cfg.offsets || s->stage == LS_VERSIONS)
        return false;
    if (s->stage != LS_IDLE)
        return round_step(l, s);
    if (s->round_open)
        return false;
    if (now_us < s->due_us) {
        if (s->due_us < *next_us)
            *next_us = s->due_us;
        return false;
    }
    s->due_us = now_us + l->sync_cfg.offsets_ms * 1000;
    if (!syncing_any(l) || l->sync_cfg.groups.n == 0)
        return false;
    s->error[0] = 0;
    s->round_synced = 0;
    s->round_open = true;
    if (s->fc_version >= 0) {
        listing_start(l, s);
        return false;
    }
    kp_ApiVersionsRequest q;             /* which FindCoordinator the source has */
    kp_init_ApiVersionsRequest(&q);
    s->stage = LS_VERSIONS;
    lk_conn_send(l, KP_API_API_VERSIONS, LS_API_VERSIONS_VERSION, &q);
    return true;
}

/* n's next group from i on (OffsetFetch below v8), or -1. */
static int fetch_next_of(const lk_sync *s, int32_t me, int i)
{
    for (; i < s->ngroups; i++)
        if (s->coord[i] == me)
            return i;
    return -1;
}

/* S8: a source older than Kafka 3.0 (OffsetFetch below v8) is asked one
 * group a request, as Kafka's admin client does: top-level GroupId. */
static bool fetch_one_send(lk_peer *c, lk_sync *s, ls_node *n, int32_t me)
{
    int i = fetch_next_of(s, me, n->fetch_next);
    if (i < 0)
        return false;
    kp_OffsetFetchRequest q;
    kp_init_OffsetFetchRequest(&q);
    q.GroupId = kp_str_cstr(s->groups[i]);
    q.Topics_count = -1;                 /* every topic */
    q.RequireStable = true;              /* v7; v6 has none */
    n->fetch_group = i;
    n->fetch_next = i + 1;
    n->out = true;
    lk_peer_send(c, KP_API_OFFSET_FETCH, s->of_version, &q);
    return true;
}

bool lk_sync_peer_send(lk_peer *c)
{
    lk_link *l = c->link;
    lk_sync *s = l->sync;
    ls_node *n = c->admin ? node_of(s, c->node) : NULL;
    if (!n || n->ask == LS_ASK_NONE || n->out)
        return false;
    if (n->ask == LS_ASK_LIST) {
        kp_ListGroupsRequest q;
        kp_init_ListGroupsRequest(&q);
        q.StatesFilter_count = 0;
        q.TypesFilter_count = 0;
        n->out = true;
        lk_peer_send(c, KP_API_LIST_GROUPS, s->lg_version, &q);
        return true;
    }
    int32_t me = (int32_t)(n - s->nodes), k = 0;
    if (s->of_version < LS_OFFSET_FETCH_BATCHED)
        return fetch_one_send(c, s, n, me);
    kp_OffsetFetchRequest_OffsetFetchRequestGroup *gs =
        kp_arena_alloc(&c->arena, (size_t)s->ngroups * sizeof *gs);
    if (!gs)
        return false;
    for (int i = 0; i < s->ngroups; i++)
        if (s->coord[i] == me)
            gs[k++] = (kp_OffsetFetchRequest_OffsetFetchRequestGroup){
                .GroupId = kp_str_cstr(s->groups[i]), .MemberId = KP_STR_NULL,
                .MemberEpoch = -1, .Topics_count = -1 };     /* every topic */
    kp_OffsetFetchRequest q;
    kp_init_OffsetFetchRequest(&q);
    q.Groups = gs;
    q.Groups_count = k;
    q.RequireStable = true;              /* no offsets of an open transaction */
    n->out = true;
    lk_peer_send(c, KP_API_OFFSET_FETCH, s->of_version, &q);
    return true;
}

/* The source's ApiVersions: FindCoordinator batched (v4) or one a key;
 * OffsetFetch batched (v8) or one group a request (v6-v7); ListGroups v4
 * or v3 (S8). */
static int versions_answer(lk_link *l, lk_sync *s, kp_rd *r, kp_arena *a)
{
    kp_ApiVersionsResponse vr;
    if (kp_dec_ApiVersionsResponse(r, LS_API_VERSIONS_VERSION, &vr, a) != 0)
        return -1;
    if (s->stage != LS_VERSIONS)
        return 0;
    static const struct { int16_t api, oldest; const char *name; } need[] = {
        { KP_API_FIND_COORDINATOR, LS_FIND_ONE, "FindCoordinator" },
        { KP_API_OFFSET_FETCH, LS_OFFSET_FETCH_ONE, "OffsetFetch" },
        { KP_API_LIST_GROUPS, LS_LIST_GROUPS_OLDEST, "ListGroups" },
    };
    int16_t max[3] = { -1, -1, -1 };
    for (int32_t i = 0; vr.ErrorCode == KP_NONE && i < vr.ApiKeys_count; i++)
        for (int k = 0; k < 3; k++)
            if (vr.ApiKeys[i].ApiKey == need[k].api)
                max[k] = vr.ApiKeys[i].MaxVersion;
    for (int k = 0; k < 3; k++)
        if (max[k] < need[k].oldest) {
            char why[MD_ERRLEN];
            snprintf(why, sizeof why, "the source has no %s v%d or later (%s): offsets not "
                     "synced", need[k].name, need[k].oldest,
                     vr.ErrorCode ? kp_error_name(vr.ErrorCode) : "too old");
            note_error(s, why);
            round_end(s);
            return 0;
        }
    s->fc_version = max[0] >= LS_FIND_BATCHED ? LS_FIND_BATCHED : LS_FIND_ONE;
    s->of_version = max[1] >= LS_OFFSET_FETCH_BATCHED ? LS_OFFSET_FETCH_BATCHED
        : max[1] >= LS_OFFSET_FETCH_STABLE ? LS_OFFSET_FETCH_STABLE : LS_OFFSET_FETCH_ONE;
    s->lg_version = max[2] >= LS_LIST_GROUPS_VERSION ? LS_LIST_GROUPS_VERSION
        : LS_LIST_GROUPS_OLDEST;
    listing_start(l, s);
    return 0;
}

/* The group's index in s->groups (sorted), or -1. */
static int group_index(const lk_sync *s, kp_str group)
{
    char id[MD_TOPIC_NAME_MAX + 1], *k = id;
    if (group.len <= 0 || (size_t)group.len >= sizeof id)
        return -1;
    memcpy(id, group.p, (size_t)group.len);
    id[group.len] = 0;
    char **at = s->ngroups > 0 ? bsearch(&k, s->groups, (size_t)s->ngroups, sizeof *s->groups,
                                         key_cmp) : NULL;
    return at ? (int)(at - s->groups) : -1;
}

static void coordinator_is(lk_sync *s, kp_str group, int16_t err, int32_t node, kp_str host,
                           int32_t port)
{
    char why[MD_ERRLEN];
    int i = group_index(s, group);
    ls_node *n;
    if (i < 0)
        return;                          /* S7: not asked */
    if (err != KP_NONE || node < 0) {
        snprintf(why, sizeof why, "FindCoordinator of group %s: %s", s->groups[i],
                 kp_error_name(err ? err : KP_COORDINATOR_NOT_AVAILABLE));
        note_error(s, why);
    } else if (!(n = node_add(s, node, host, port))) {
        note_error(s, "out of memory");
    } else {
        s->coord[i] = (int32_t)(n - s->nodes);
    }
}

/* This broker writes group's offsets: standalone every group, a cluster
 * destination's broker the groups it coordinates (S9). */
static bool coordinated_here(bk_broker *b, const char *group)
{
    return gc_coordinator_of(b, group) == b->cfg->broker_id;
}

static void groups_listed(lk_link *l, lk_sync *s, ls_node *n, const kp_ListGroupsResponse *lr)
{
    char why[MD_ERRLEN];
    if (lr->ErrorCode != KP_NONE) {
        snprintf(why, sizeof why, "ListGroups on source broker %d: %s", (int)n->id,
                 kp_error_name(lr->ErrorCode));
        note_error(s, why);
        return;
    }
    for (int32_t i = 0; i < lr->Groups_count; i++) {
        char id[MD_TOPIC_NAME_MAX + 1];
        kp_str g = lr->Groups[i].GroupId;
        if (g.len <= 0 || (size_t)g.len >= sizeof id)
            continue;
        memcpy(id, g.p, (size_t)g.len);
        id[g.len] = 0;
        if (filters_pick(&l->sync_cfg.groups, id) && coordinated_here(l->b, id) &&
            !names_add(&s->groups, &s->ngroups, &s->groups_cap, id, (size_t)g.len))
            note_error(s, "out of memory");
    }
}

/* An OffsetFetch v6-v7 answer: the group n asked (its top-level fields
 * as v8's group, for group_sync; S7: only the asked group). */
static void fetch_one_answer(lk_sync *s, ls_node *n, int32_t me, const kp_OffsetFetchResponse *fr,
                             kp_arena *a)
{
    int k = n->fetch_group;
    n->fetch_group = -1;
    if (k < 0 || k >= s->ngroups || s->coord[k] != me)
        return;
    kp_OffsetFetchResponse_OffsetFetchResponseGroup g = {
        .GroupId = kp_str_cstr(s->groups[k]), .ErrorCode = fr->ErrorCode };
    g.Topics = fr->Topics_count > 0 ? kp_arena_alloc(a, (size_t)fr->Topics_count * sizeof *g.Topics)
                                    : NULL;
    for (int32_t t = 0; g.Topics && t < fr->Topics_count; t++) {
        const kp_OffsetFetchResponse_OffsetFetchResponseTopic *ft = &fr->Topics[t];
        kp_OffsetFetchResponse_OffsetFetchResponseTopics *gt = &g.Topics[g.Topics_count];
        gt->Name = ft->Name;
        gt->Partitions_count = 0;
        gt->Partitions = ft->Partitions_count > 0
            ? kp_arena_alloc(a, (size_t)ft->Partitions_count * sizeof *gt->Partitions) : NULL;
        for (int32_t p = 0; gt->Partitions && p < ft->Partitions_count; p++)
            gt->Partitions[gt->Partitions_count++] =
                (kp_OffsetFetchResponse_OffsetFetchResponsePartitions){
                    .PartitionIndex = ft->Partitions[p].PartitionIndex,
                    .CommittedOffset = ft->Partitions[p].CommittedOffset,
                    .CommittedLeaderEpoch = ft->Partitions[p].CommittedLeaderEpoch,
                    .Metadata = ft->Partitions[p].Metadata,
                    .ErrorCode = ft->Partitions[p].ErrorCode };
        if (ft->Partitions_count > 0 && !gt->Partitions) {
            note_error(s, "out of memory");
            return;
        }
        g.Topics_count++;
    }
    if (fr->Topics_count > 0 && !g.Topics) {
        note_error(s, "out of memory");
        return;
    }
    group_sync(s, &g);
}

int lk_sync_answer(lk_peer *c, int16_t api, kp_rd *r)
{
    lk_link *l = c->link;
    lk_sync *s = sync_of(l);
    if (!s)
        return -1;
    if (api == KP_API_DESCRIBE_ACLS)
        return acls_answer(l, s, r);
    if (api == KP_API_API_VERSIONS)      /* response header v0, always */
        return versions_answer(l, s, r, &c->arena);
    kp_rd_tags(r);                       /* the others flexible: response header v1 */
    if (api == KP_API_FIND_COORDINATOR) {
        kp_FindCoordinatorResponse fr;
        int16_t v = s->fc_version >= LS_FIND_BATCHED ? LS_FIND_BATCHED : LS_FIND_ONE;
        if (kp_dec_FindCoordinatorResponse(r, v, &fr, &c->arena) != 0)
            return -1;
        if (s->stage != LS_FINDING || !s->fc_out)
            return 0;
        s->fc_out = false;
        if (v >= LS_FIND_BATCHED)
            for (int32_t i = 0; i < fr.Coordinators_count; i++)
                coordinator_is(s, fr.Coordinators[i].Key, fr.Coordinators[i].ErrorCode,
                               fr.Coordinators[i].NodeId, fr.Coordinators[i].Host,
                               fr.Coordinators[i].Port);
        else if (s->fc_next > 0)
            coordinator_is(s, kp_str_cstr(s->groups[s->fc_next - 1]), fr.ErrorCode,
                           fr.NodeId, fr.Host, fr.Port);
        return 0;                        /* next_request: round_step goes on */
    }
    ls_node *n = c->admin ? node_of(s, c->node) : NULL;
    bool mine = n && n->out &&
        n->ask == (api == KP_API_LIST_GROUPS ? LS_ASK_LIST : LS_ASK_FETCH);
    if (api == KP_API_LIST_GROUPS) {
        kp_ListGroupsResponse lr;
        if (kp_dec_ListGroupsResponse(r, s->lg_version, &lr, &c->arena) != 0)
            return -1;
        if (mine && s->stage == LS_LISTING)
            groups_listed(l, s, n, &lr);
    } else {
        kp_OffsetFetchResponse fr;
        if (kp_dec_OffsetFetchResponse(r, s->of_version, &fr, &c->arena) != 0)
            return -1;
        int32_t me = n ? (int32_t)(n - s->nodes) : -1;
        if (s->of_version < LS_OFFSET_FETCH_BATCHED && mine && s->stage == LS_FETCHING) {
            fetch_one_answer(s, n, me, &fr, &c->arena);
            if (fetch_next_of(s, me, n->fetch_next) >= 0) {
                n->out = false;          /* its next group: next_request sends it */
                return 0;
            }
        }
        for (int32_t i = 0; mine && s->stage == LS_FETCHING && i < fr.Groups_count; i++) {
            int k = group_index(s, fr.Groups[i].GroupId);
            if (k >= 0 && s->coord[k] == me)           /* S7: asked of this broker */
                group_sync(s, &fr.Groups[i]);
        }
    }
    if (mine) {
        n->ask = LS_ASK_NONE;
        n->out = false;
        lk_peer_poke(&l->boot);          /* round_step there */
    }
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
    if (!strncmp(t, "__", 2) || !strcmp(t, "_schemas") || !strncmp(t, "_confluent-", 11) ||
        !filters_pick(&l->sync_cfg.topics, t))
        return;                          /* S3 */
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        if (!strcmp(m->topic, t) || (m->link == l && !strcmp(m->source, t)))
            return;
    for (int i = 0; i < s->ncreate; i++)
        if (!strcmp(s->create[i], t))
            return;
    if (!view_topic_find(l->b, t, strlen(t))) {
        if (s->ncreate >= LS_CREATE_MAX)
            s->create_capped = true;     /* S3: the next Metadata's */
        else if (!names_add(&s->create, &s->ncreate, &s->create_cap, t, strlen(t)))
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

void lk_sync_metadata_done(lk_link *l)
{
    char why[MD_ERRLEN + 64];
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        if (m->link == l && m->in_request) {       /* asked, not in the answer */
            snprintf(why, sizeof why, "source topic %s: does not exist on the source",
                     m->source);
            lk_mirror_error(m, why);
        }
}

bool lk_sync_topics_create(lk_link *l)
{
    lk_sync *s = l->sync;
    char err[MD_ERRLEN + 64];
    if (s && s->create_capped) {
        BK_WARN("cluster link %s: more than %d source topics to mirror picked by "
                "auto.create.mirror.topics.filters: the rest after the next Metadata",
                l->name, LS_CREATE_MAX);
        s->create_capped = false;
    }
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
    return l->boot.conn != LK_READY;
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
    kp_buf_printf(out, "# HELP sluice_link_acls_synced_total ACLs a link added from its "
                  "source.\n"
                  "# TYPE sluice_link_acls_synced_total counter\n"
                  "# HELP sluice_link_acls_removed_total Synced ACLs a link removed (the source "
                  "removed them).\n"
                  "# TYPE sluice_link_acls_removed_total counter\n");
    for (lk_link *l = set->links; l; l = l->next)
        if (l->sync_cfg.acls && l->sync)
            kp_buf_printf(out, "sluice_link_acls_synced_total{link=\"%s\"} %llu\n"
                          "sluice_link_acls_removed_total{link=\"%s\"} %llu\n", l->name,
                          (unsigned long long)l->sync->acls_added, l->name,
                          (unsigned long long)l->sync->acls_removed);
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
