/*
 * daemon/cluster/cluster_mirror.c — the mirror: what ZooKeeper holds, written into this
 * broker's SQLite and applied to the running broker, kept in step through
 * watches.
 *
 *   watch fires ──► cl_mirror_refresh_topic(t) ──► get /brokers/topics/t       (watch)
 *                                           get /config/topics/t        (watch)
 *                                           get …/partitions/<p>/state  (watch, each p)
 *                   all answers in ──► md_topic_mirror_put (one transaction)
 *                                  ──► view_topic_apply(t)   (view_topics.c: view, replicas)
 *                                  ──► cl_topic_applied(t) (waiting writes, controller)
 *
 * Brokers (/brokers/ids, children watch) and the controller (/controller)
 * are mirrored the same way.  A watch fires once and says only "changed":
 * every refresh reads the znodes again and re-arms their watches.  Watches
 * can be missed across a reconnect or a new session, so cl_mirror_resync reads
 * everything again (cluster_session.c calls it on every (re)connect); topics
 * the store has and ZooKeeper no longer does are deleted then.
 *
 * Invariants:
 *   M1. At most one refresh per topic runs; events meanwhile set `again`,
 *       so a burst of state changes (a controller re-electing 3,000
 *       partitions of one topic) costs two refreshes, not 3,000.
 *   M2. A refresh that failed half-way (connection lost) changes nothing:
 *       the store keeps the last whole picture, and the resync after the
 *       reconnect brings the rest.
 *   M3. The store is written before the apply half runs, and in one
 *       transaction per topic, so SQL never shows half a topic.
 *   M4. A znode a refresh found missing carries an exists watch, and if it
 *       exists by the time that watch is set, the topic is read again: a
 *       state written between the two calls is never missed.
 *   M5. A state znode's watch reads that state alone (and the others whose
 *       watches fired meanwhile, in one pass per topic): when a controller
 *       re-elects 3,000 partitions, each broker reads 3,000 znodes, not
 *       every partition of every topic they belong to.  A state read is
 *       applied only if its znode version is newer than the view's, so a
 *       slower whole-topic refresh cannot put an older one back.
 */
#include "daemon/cluster/cluster.h"
#include "daemon/replica/replica_logdir.h"

#include <event2/event.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the mirror's topics ------------------------------------------------------------ */

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (uint8_t)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

cl_topic *cl_mirror_topic(bk_broker *b, const char *name, bool create)
{
    bk_cluster *cl = b->cl;
    if (cl->thash_size) {
        size_t slot = hash_name(name) & (cl->thash_size - 1);
        for (cl_topic *t = cl->thash[slot]; t; t = t->hnext)
            if (!strcmp(t->name, name))
                return t;
    }
    if (!create || strlen(name) > MD_TOPIC_NAME_MAX)
        return NULL;
    if (cl->ntopics + 1 > cl->thash_size / 2) {
        size_t nsize = cl->thash_size ? cl->thash_size * 2 : 64;
        cl_topic **nh = calloc(nsize, sizeof *nh);
        if (!nh)
            abort();
        for (size_t i = 0; i < cl->thash_size; i++)
            for (cl_topic *x = cl->thash[i], *next; x; x = next) {
                next = x->hnext;
                size_t s = hash_name(x->name) & (nsize - 1);
                x->hnext = nh[s];
                nh[s] = x;
            }
        free(cl->thash);
        cl->thash = nh;
        cl->thash_size = nsize;
    }
    cl_topic *t = calloc(1, sizeof *t);
    if (!t)
        abort();
    snprintf(t->name, sizeof t->name, "%s", name);
    t->assign_version = t->config_version = -1;
    size_t slot = hash_name(name) & (cl->thash_size - 1);
    t->hnext = cl->thash[slot];
    cl->thash[slot] = t;
    cl->ntopics++;
    return t;
}

static void forget_topic(bk_broker *b, cl_topic *t)
{
    bk_cluster *cl = b->cl;
    size_t slot = hash_name(t->name) & (cl->thash_size - 1);
    for (cl_topic **pp = &cl->thash[slot]; *pp; pp = &(*pp)->hnext)
        if (*pp == t) {
            *pp = t->hnext;
            cl->ntopics--;
            free(t->dirty);
            free(t->expect);
            free(t->marks);
            free(t->state_mzxid);
            free(t->recovery_since_ms);
            free(t);
            return;
        }
}

void cl_mirror_free(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    for (size_t i = 0; i < cl->thash_size; i++)
        for (cl_topic *x = cl->thash[i], *next; x; x = next) {
            next = x->hnext;
            free(x->dirty);
            free(x->expect);
            free(x->marks);
            free(x->state_mzxid);
            free(x->recovery_since_ms);
            free(x);
        }
    free(cl->thash);
    cl->dirty_topics = NULL;
    if (cl->dirty_ev)
        event_free(cl->dirty_ev);
    cl->dirty_ev = NULL;
    cl->thash = NULL;
    cl->thash_size = cl->ntopics = 0;
    free(cl->brokers);
    cl->brokers = NULL;
    cl->nbrokers = 0;
    view_set_brokers(b, NULL, 0);
}

/* ---- one topic ---------------------------------------------------------------------------- */

typedef struct mr_fetch mr_fetch;
typedef struct mr_part { mr_fetch *f; int32_t p; } mr_part;

struct mr_fetch {
    bk_broker *b;
    char name[MD_TOPIC_NAME_MAX + 1];
    int pending;
    bool failed, gone;
    int assign_version, config_version;
    int64_t created_ms;              /* the topic znode's ctime */
    zj_topic a;
    mr_part *parts;                  /* [a.npartitions] callback args */
    md_kv *cfg;
    size_t ncfg;
};

/* The exists watch left on a znode a refresh found missing (a state the
 * controller has not written yet, a config not made): when it was created
 * between the get and this call, no "created" event will come, so the
 * topic is read again now (M4). */
static void on_missing_watched(bk_broker *b, const zk_result *r, void *arg)
{
    char *topic = arg;
    if (r->rc == ZOK)
        cl_mirror_refresh_topic(b, topic);
    free(topic);
}

static void watch_missing(bk_broker *b, const char *path, const char *topic)
{
    char *t = strdup(topic);
    if (!t)
        abort();
    cl_zk_exists(b->zk, path, true, on_missing_watched, t);
}

static void fetch_finish(mr_fetch *f);

static void fetch_dec(mr_fetch *f)
{
    if (--f->pending == 0)
        fetch_finish(f);
}

static void on_config(bk_broker *b, const zk_result *r, void *arg)
{
    mr_fetch *f = arg;
    char path[MD_TOPIC_NAME_MAX + 32], err[256];
    if (r->rc == ZOK) {
        f->config_version = r->stat.version;
        if (r->len > 0 && cl_zj_config_parse(r->data, (size_t)r->len, &f->cfg, &f->ncfg,
                                           err, sizeof err) != 0)
            BK_ERROR("zookeeper: /config/topics/%s is not Kafka's config JSON (%s); "
                     "the topic's overrides are ignored until it is fixed", f->name, err);
    } else if (r->rc == ZNONODE) {
        f->config_version = -1;
        snprintf(path, sizeof path, "/config/topics/%s", f->name);
        watch_missing(b, path, f->name);          /* a watch for its creation */
    } else {
        f->failed = true;
    }
    fetch_dec(f);
}

static void on_state(bk_broker *b, const zk_result *r, void *arg)
{
    mr_part *pa = arg;
    mr_fetch *f = pa->f;
    md_partition_state *st = &f->a.parts[pa->p];
    char err[256];
    if (r->rc == ZOK) {
        if (cl_zj_state_parse(r->data ? r->data : "", r->len > 0 ? (size_t)r->len : 0, st,
                           err, sizeof err) != 0)
            BK_ERROR("zookeeper: the state of %s-%d is not Kafka's JSON (%s); the "
                     "partition is shown without a leader until it is fixed", f->name,
                     (int)pa->p, err);
        st->zk_version = r->stat.version;
        cl_recovery_state_read(b, f->name, pa->p, r->stat.mzxid);
    } else if (r->rc == ZNONODE) {
        char path[MD_TOPIC_NAME_MAX + 64];
        snprintf(path, sizeof path, "/brokers/topics/%s/partitions/%d/state", f->name,
                 (int)pa->p);
        watch_missing(b, path, f->name);
    } else {
        f->failed = true;
    }
    fetch_dec(f);
}

static void on_assignment(bk_broker *b, const zk_result *r, void *arg)
{
    mr_fetch *f = arg;
    char err[256], path[MD_TOPIC_NAME_MAX + 64];
    if (r->rc == ZNONODE) {
        f->gone = true;
        fetch_finish(f);
        return;
    }
    if (r->rc != ZOK) {
        f->failed = true;
        fetch_finish(f);
        return;
    }
    f->assign_version = r->stat.version;
    f->created_ms = r->stat.ctime;
    if (cl_zj_topic_parse(r->data ? r->data : "", r->len > 0 ? (size_t)r->len : 0, &f->a,
                            err, sizeof err) != 0) {
        BK_ERROR("zookeeper: /brokers/topics/%s is not Kafka's assignment JSON (%s); "
                 "the topic is left as it was", f->name, err);
        f->failed = true;
        fetch_finish(f);
        return;
    }
    int32_t n = f->a.npartitions;
    for (int32_t p = 0; p < n; p++) {
        md_partition_state *st = &f->a.parts[p];
        st->leader = -1;
        st->leader_epoch = 0;
        st->controller_epoch = 0;
        st->zk_version = -1;
        st->nisr = 0;
    }
    if (!(f->parts = calloc((size_t)(n ? n : 1), sizeof *f->parts)))
        abort();
    f->pending = 1 + n;
    snprintf(path, sizeof path, "/config/topics/%s", f->name);
    cl_zk_get(b->zk, path, true, on_config, f);
    for (int32_t p = 0; p < n; p++) {
        f->parts[p] = (mr_part){ f, p };
        snprintf(path, sizeof path, "/brokers/topics/%s/partitions/%d/state", f->name, (int)p);
        cl_zk_get(b->zk, path, true, on_state, &f->parts[p]);
    }
}

static void write_topic(bk_broker *b, mr_fetch *f)
{
    char err[MD_ERRLEN];
    err[0] = 0;
    if (f->gone) {
        md_topic mt;
        if (md_topic_get(b->db, f->name, &mt) == KP_NONE) {
            BK_INFO("topic %s: deleted in ZooKeeper; deleting it here", f->name);
            md_topic_delete(b->db, f->name, err, sizeof err);
        }
    } else {
        md_mirror_topic mt = {
            .name = f->name, .npartitions = f->a.npartitions, .parts = f->a.parts,
            .configs = f->cfg, .nconfigs = f->ncfg, .created_at_ms = f->created_ms,
        };
        memcpy(mt.id, f->a.id, sizeof mt.id);
        if (!f->a.has_id) {
            /* A version 1/2 znode (no topic_id): every broker derives the
             * same id from the name, so the mirrors agree. */
            uint64_t h1 = hash_name(f->name), h2 = h1 * 0x9E3779B97F4A7C15ULL ^ 0x5851F42D4C957F2DULL;
            memcpy(mt.id, &h1, 8);
            memcpy(mt.id + 8, &h2, 8);
            mt.id[6] = (uint8_t)((mt.id[6] & 0x0f) | 0x40);
        }
        size_t skipped = 0;
        if (md_topic_mirror_put(b->db, &mt, &skipped, err, sizeof err) != 0) {
            BK_ERROR("topic %s: cannot store what ZooKeeper has: %s", f->name, err);
            return;
        }
        if (skipped)
            BK_WARN("topic %s: %zu config override(s) in /config/topics/%s are not valid "
                    "and are ignored: %s", f->name, skipped, f->name, err);
    }
    if (view_topic_apply(b, f->name, err, sizeof err) != KP_NONE)
        BK_ERROR("topic %s: %s", f->name, err);
}

static void fetch_finish(mr_fetch *f)
{
    bk_broker *b = f->b;
    cl_topic *t = cl_mirror_topic(b, f->name, false);
    if (!f->failed)
        write_topic(b, f);
    if (t) {
        if (!f->failed && !f->gone) {
            t->assign_version = f->assign_version;
            t->config_version = f->config_version;
        }
        t->refreshing = false;
        if (t->resync && !t->again) {
            t->resync = false;
            if (--b->cl->resync_pending == 0)
                cl_mirror_resync_done(b);
        }
    }
    cl_zj_topic_free(&f->a);
    free(f->parts);
    md_kv_free(f->cfg, f->ncfg);
    char name[MD_TOPIC_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s", f->name);
    bool gone = f->gone && !f->failed;
    free(f);
    if (t && t->again) {
        t->again = false;
        cl_mirror_refresh_topic(b, name);
        return;
    }
    if (t && gone && !t->writes && !t->deleting && !t->states_fetching && !t->dirty_listed)
        forget_topic(b, t);
    cl_topic_applied(b, name);
}

void cl_mirror_refresh_topic(bk_broker *b, const char *name)
{
    cl_topic *t = cl_mirror_topic(b, name, true);
    if (!t)
        return;                                   /* a name ZooKeeper should not hold */
    if (t->refreshing) {
        t->again = true;                          /* M1 */
        return;
    }
    t->refreshing = true;
    mr_fetch *f = calloc(1, sizeof *f);
    if (!f)
        abort();
    f->b = b;
    snprintf(f->name, sizeof f->name, "%s", name);
    f->assign_version = f->config_version = -1;
    char path[MD_TOPIC_NAME_MAX + 32];
    snprintf(path, sizeof path, "/brokers/topics/%s", name);
    cl_zk_get(b->zk, path, true, on_assignment, f);
}

/* ---- one partition's state (M5) --------------------------------------------------------------- */

typedef struct sf_part {
    struct sf_fetch *f;
    int32_t p;
    int rc, version;
    md_partition_state st;
} sf_part;

typedef struct sf_fetch {
    char name[MD_TOPIC_NAME_MAX + 1];
    int n, pending;
    sf_part parts[];
} sf_fetch;

static void states_finish(bk_broker *b, sf_fetch *f)
{
    cl_topic *ct = cl_mirror_topic(b, f->name, false);
    bk_topic *t = view_topic_find(b, f->name, strlen(f->name));
    bool whole = !t;                              /* gone, or not applied yet */
    char err[MD_ERRLEN];
    int written = 0;
    if (t && md_begin(b->db) == 0) {
        for (int i = 0; i < f->n; i++) {
            sf_part *sp = &f->parts[i];
            if (sp->rc == ZNONODE || sp->p >= t->npartitions) {
                whole = true;                     /* deleted, or the topic changed */
                continue;
            }
            const bk_pview *v = &t->parts[sp->p];
            if (sp->rc != ZOK || sp->version <= v->zk_version)
                continue;                         /* lost, or no newer than the view */
            md_partition_state st = sp->st;
            st.nreplicas = v->nreplicas;
            memcpy(st.replicas, v->replicas, sizeof st.replicas);
            st.adding = v->adding;
            st.removing = v->removing;
            st.zk_version = sp->version;
            if (md_partition_state_set(b->db, f->name, sp->p, &st, err, sizeof err) != 0) {
                BK_ERROR("partition %s-%d: cannot store its state: %s", f->name, (int)sp->p,
                         err);
                whole = true;
                continue;
            }
            written++;
        }
        if (md_commit(b->db) != 0) {
            BK_ERROR("topic %s: cannot store partition states", f->name);
            whole = true;
        }
    }
    if (written && view_topic_apply(b, f->name, err, sizeof err) != KP_NONE)
        BK_ERROR("topic %s: %s", f->name, err);
    if (ct) {
        ct->states_fetching = false;
        if (ct->ndirty && !ct->dirty_listed) {
            ct->dirty_listed = true;
            ct->next_dirty = b->cl->dirty_topics;
            b->cl->dirty_topics = ct;
            event_active(b->cl->dirty_ev, EV_TIMEOUT, 0);
        }
    }
    char name[MD_TOPIC_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s", f->name);
    free(f);
    if (whole)
        cl_mirror_refresh_topic(b, name);
    else if (written)
        cl_topic_applied(b, name);
}

static void on_state_one(bk_broker *b, const zk_result *r, void *arg)
{
    sf_part *sp = arg;
    sf_fetch *f = sp->f;
    char err[256];
    sp->rc = r->rc;
    if (r->rc == ZOK) {
        sp->version = r->stat.version;
        cl_recovery_state_read(b, f->name, sp->p, r->stat.mzxid);
        if (cl_zj_state_parse(r->data ? r->data : "", r->len > 0 ? (size_t)r->len : 0, &sp->st,
                           err, sizeof err) != 0) {
            BK_ERROR("zookeeper: the state of %s-%d is not Kafka's JSON (%s)", f->name,
                     (int)sp->p, err);
            sp->rc = ZAPIERROR;
        }
    } else if (r->rc == ZNONODE) {
        char path[MD_TOPIC_NAME_MAX + 64];
        snprintf(path, sizeof path, "/brokers/topics/%s/partitions/%d/state", f->name,
                 (int)sp->p);
        watch_missing(b, path, f->name);
    }
    if (--f->pending == 0)
        states_finish(b, f);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void fetch_states(bk_broker *b, cl_topic *ct)
{
    qsort(ct->dirty, (size_t)ct->ndirty, sizeof *ct->dirty, cmp_i32);
    int n = 0;
    for (int i = 0; i < ct->ndirty; i++)
        if (!n || ct->dirty[n - 1] != ct->dirty[i])
            ct->dirty[n++] = ct->dirty[i];
    sf_fetch *f = calloc(1, sizeof *f + (size_t)n * sizeof *f->parts);
    if (!f)
        abort();
    snprintf(f->name, sizeof f->name, "%s", ct->name);
    f->n = f->pending = n;
    ct->ndirty = 0;
    ct->states_fetching = true;
    char path[MD_TOPIC_NAME_MAX + 64];
    for (int i = 0; i < n; i++) {
        sf_part *sp = &f->parts[i];
        sp->f = f;
        sp->p = ct->dirty[i];
        sp->st.leader = -1;
        snprintf(path, sizeof path, "/brokers/topics/%s/partitions/%d/state", ct->name,
                 (int)sp->p);
        cl_zk_get(b->zk, path, true, on_state_one, sp);
    }
}

static void on_dirty(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    bk_broker *b = arg;
    cl_topic *list = b->cl->dirty_topics;
    b->cl->dirty_topics = NULL;
    for (cl_topic *ct = list, *next; ct; ct = next) {
        next = ct->next_dirty;
        ct->dirty_listed = false;
        if (ct->refreshing) {
            ct->again = true;                     /* the whole refresh reads them */
            ct->ndirty = 0;
        } else if (!ct->states_fetching && ct->ndirty) {
            fetch_states(b, ct);
        }                                         /* else: states_finish lists it again */
    }
}

static void refresh_state(bk_broker *b, const char *topic, int32_t p)
{
    cl_topic *ct = cl_mirror_topic(b, topic, false);
    if (!ct || !view_topic_find(b, topic, strlen(topic))) {
        cl_mirror_refresh_topic(b, topic);               /* not in the view: read it whole */
        return;
    }
    if (ct->refreshing) {
        ct->again = true;
        return;
    }
    if (ct->ndirty == ct->capdirty) {
        int cap = ct->capdirty ? ct->capdirty * 2 : 16;
        int32_t *nd = realloc(ct->dirty, (size_t)cap * sizeof *nd);
        if (!nd)
            abort();
        ct->dirty = nd;
        ct->capdirty = cap;
    }
    ct->dirty[ct->ndirty++] = p;
    bk_cluster *cl = b->cl;
    if (!ct->dirty_listed && !ct->states_fetching) {
        ct->dirty_listed = true;
        ct->next_dirty = cl->dirty_topics;
        cl->dirty_topics = ct;
    }
    if (!cl->dirty_ev && !(cl->dirty_ev = event_new(b->base, -1, 0, on_dirty, b)))
        abort();
    event_active(cl->dirty_ev, EV_TIMEOUT, 0);
}

/* "/brokers/topics/<t>/partitions/<p>/state" → true with t, p. */
static bool state_path(const char *path, char *topic, size_t cap, int32_t *p)
{
    static const char pre[] = "/brokers/topics/";
    if (strncmp(path, pre, sizeof pre - 1))
        return false;
    const char *s = path + sizeof pre - 1, *e = strchr(s, '/');
    if (!e || (size_t)(e - s) >= cap || strncmp(e, "/partitions/", 12))
        return false;
    const char *num = e + 12, *end = strchr(num, '/');
    if (!end || strcmp(end, "/state") || cl_zj_id_parse(num, (size_t)(end - num), p) != 0)
        return false;
    memcpy(topic, s, (size_t)(e - s));
    topic[e - s] = 0;
    return true;
}

/* ---- the topic list ------------------------------------------------------------------------ */

typedef struct list_ctx { char **names; int n; } list_ctx;

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct stale_ctx { bk_broker *b; list_ctx l; bool resync; } stale_ctx;

static void refresh_if_stale(bk_topic *t, void *arg)
{
    stale_ctx *c = arg;
    char *key = t->name;
    if (c->l.n > 0 &&                    /* bsearch(NULL, 0): undefined (UBSan) */
        bsearch(&key, c->l.names, (size_t)c->l.n, sizeof *c->l.names, cmp_cstr))
        return;
    cl_topic *ct = cl_mirror_topic(c->b, t->name, true);
    if (c->resync && ct && !ct->resync) {
        ct->resync = true;
        c->b->cl->resync_pending++;
    }
    cl_mirror_refresh_topic(c->b, t->name);              /* it will find the znode gone */
}

static void on_topic_list(bk_broker *b, const zk_result *r, void *arg)
{
    bool resync = arg != NULL;
    bk_cluster *cl = b->cl;
    if (resync && (intptr_t)arg != cl->resync_gen)
        return;                                   /* an old session's resync */
    if (r->rc != ZOK) {
        if (resync) {
            cl->resync_running = false;
            BK_WARN("zookeeper: cannot list /brokers/topics (%s); the mirror resyncs "
                    "when the connection is back", cl_zk_rc_str(r->rc));
        }
        return;
    }
    if (resync)
        cl->resync_pending++;                     /* held until the list is walked */
    for (int i = 0; i < r->nchildren; i++) {
        const char *name = r->children[i];
        bool known = view_topic_find(b, name, strlen(name)) != NULL;
        if (!resync && known)
            continue;                             /* its own watches cover it */
        cl_topic *ct = cl_mirror_topic(b, name, true);
        if (!ct)
            continue;
        if (resync && !ct->resync) {
            ct->resync = true;
            cl->resync_pending++;
        }
        cl_mirror_refresh_topic(b, name);
    }
    stale_ctx c = { b, { r->children, r->nchildren }, resync };
    view_topics_foreach(b, refresh_if_stale, &c);
    if (resync && --cl->resync_pending == 0)
        cl_mirror_resync_done(b);
}

void cl_mirror_check_topics(bk_broker *b)
{
    cl_zk_children(b->zk, "/brokers/topics", true, on_topic_list, NULL);
}

/* ---- brokers and the controller ------------------------------------------------------------ */

typedef struct brokers_fetch {
    int pending, n;
    bool failed;
    zj_broker *list;
} brokers_fetch;
typedef struct broker_arg { brokers_fetch *f; int i; } broker_arg;

static int cmp_broker(const void *a, const void *b)
{
    const zj_broker *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* The view's copy of the live brokers: what Metadata and assignment ask
 * (id, endpoints, rack), the rest (czxid, timestamps) staying here.  Out
 * of memory the view keeps the list it had, as a failed fetch does. */
static void publish_brokers(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    int n = cl->nbrokers;
    bk_view_broker *v = n > 0 ? calloc((size_t)n, sizeof *v) : NULL;
    if (n > 0 && !v) {
        BK_ERROR("zookeeper: out of memory: the view keeps the brokers it had");
        return;
    }
    _Static_assert(sizeof v->host == sizeof cl->brokers->host &&
                   sizeof v->rack == sizeof cl->brokers->rack &&
                   sizeof v->eps == sizeof cl->brokers->eps &&
                   BK_VIEW_EPS_MAX == ZJ_EPS_MAX, "bk_view_broker mirrors zj_broker");
    for (int i = 0; i < n; i++) {
        const zj_broker *z = &cl->brokers[i];
        v[i].id = z->id;
        v[i].port = z->port;
        memcpy(v[i].host, z->host, sizeof v[i].host);
        memcpy(v[i].rack, z->rack, sizeof v[i].rack);
        v[i].neps = z->neps;
        for (int e = 0; e < z->neps && e < BK_VIEW_EPS_MAX; e++) {
            memcpy(v[i].eps[e].name, z->eps[e].name, sizeof v[i].eps[e].name);
            memcpy(v[i].eps[e].host, z->eps[e].host, sizeof v[i].eps[e].host);
            v[i].eps[e].port = z->eps[e].port;
        }
    }
    view_set_brokers(b, v, n);
}

static void brokers_finish(bk_broker *b, brokers_fetch *f)
{
    bk_cluster *cl = b->cl;
    if (!f->failed) {
        int m = 0;
        for (int i = 0; i < f->n; i++)
            if (f->list[i].id >= 0)
                f->list[m++] = f->list[i];
        qsort(f->list, (size_t)m, sizeof *f->list, cmp_broker);
        free(cl->brokers);
        cl->brokers = f->list;
        cl->nbrokers = m;
        f->list = NULL;
        publish_brokers(b);
        md_broker_row rows[CL_MAX_BROKERS];
        int nrows = m < CL_MAX_BROKERS ? m : CL_MAX_BROKERS;
        for (int i = 0; i < nrows; i++)
            rows[i] = (md_broker_row){ .id = cl->brokers[i].id, .host = cl->brokers[i].host,
                                       .port = cl->brokers[i].port,
                                       .rack = cl->brokers[i].rack[0] ? cl->brokers[i].rack : NULL,
                                       .endpoints = cl->brokers[i].endpoints,
                                       .registered_at_ms = cl->brokers[i].timestamp_ms };
        char err[MD_ERRLEN];
        if (md_brokers_mirror(b->db, rows, (size_t)nrows, err, sizeof err) != 0)
            BK_ERROR("zookeeper: cannot store the brokers: %s", err);
    }
    free(f->list);
    free(f);
    cl->brokers_refreshing = false;
    if (cl->brokers_again) {
        cl->brokers_again = false;
        cl_mirror_refresh_brokers(b);
        return;
    }
    cl_brokers_changed(b);
}

static void on_broker(bk_broker *b, const zk_result *r, void *arg)
{
    broker_arg *ba = arg;
    brokers_fetch *f = ba->f;
    zj_broker *z = &f->list[ba->i];
    int32_t id = z->id;
    char err[256];
    if (r->rc == ZOK) {
        if (cl_zj_broker_parse(r->data ? r->data : "", r->len > 0 ? (size_t)r->len : 0, z,
                            err, sizeof err) != 0) {
            BK_ERROR("zookeeper: /brokers/ids/%d is not Kafka's registration JSON (%s); "
                     "that broker is ignored", (int)id, err);
            z->id = -1;
        } else {
            z->id = id;
            z->czxid = r->stat.czxid;
            z->session = r->stat.ephemeralOwner;
        }
    } else if (r->rc == ZNONODE) {
        z->id = -1;                               /* gone since the listing */
    } else {
        f->failed = true;
    }
    free(ba);
    if (--f->pending == 0)
        brokers_finish(b, f);
}

static void on_broker_list(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    brokers_fetch *f = calloc(1, sizeof *f);
    if (!f)
        abort();
    if (r->rc != ZOK) {
        f->failed = true;
        brokers_finish(b, f);
        return;
    }
    f->n = r->nchildren;
    if (!(f->list = calloc((size_t)(f->n ? f->n : 1), sizeof *f->list)))
        abort();
    f->pending = 1;
    for (int i = 0; i < f->n; i++) {
        char *end;
        long id = strtol(r->children[i], &end, 10);
        f->list[i].id = -1;
        if (*end || id < 0 || id > INT32_MAX)
            continue;
        f->list[i].id = (int32_t)id;
        broker_arg *ba = malloc(sizeof *ba);
        if (!ba)
            abort();
        *ba = (broker_arg){ f, i };
        char path[64];
        snprintf(path, sizeof path, "/brokers/ids/%ld", id);
        f->pending++;
        cl_zk_get(b->zk, path, false, on_broker, ba);
    }
    if (--f->pending == 0)
        brokers_finish(b, f);
}

void cl_mirror_refresh_brokers(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    if (cl->brokers_refreshing) {
        cl->brokers_again = true;
        return;
    }
    cl->brokers_refreshing = true;
    cl_zk_children(b->zk, "/brokers/ids", true, on_broker_list, NULL);
}

/* As watch_missing, for /controller: made meanwhile, so read it now. */
static void on_controller_watched(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    if (r->rc == ZOK)
        cl_mirror_refresh_controller(b);
}

/* For SQL: the controller and its epoch, as the mirror saw them last. */
static void on_controller_epoch(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    int32_t epoch = 0;
    char err[128];
    if (r->rc == ZOK && cl_zj_epoch_parse(r->data ? r->data : "", r->len > 0 ? (size_t)r->len : 0,
                                       &epoch, err, sizeof err) != 0)
        epoch = 0;
    if (r->rc == ZOK || r->rc == ZNONODE)
        md_controller_set(b->db, view_controller_id(b), epoch);
}

static void on_controller(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    bk_cluster *cl = b->cl;
    char err[256];
    if (r->rc == ZOK) {
        int32_t id = -1;
        if (cl_zj_controller_parse(r->data ? r->data : "", r->len > 0 ? (size_t)r->len : 0, &id,
                                NULL, err, sizeof err) != 0)
            BK_ERROR("zookeeper: /controller is not Kafka's JSON (%s)", err);
        bool ours = id == b->cfg->broker_id && r->stat.ephemeralOwner == cl_zk_session_id(b->zk);
        if (cl->active && !ours)
            cl_ctl_resign(b, "another broker holds /controller");
        if (id != view_controller_id(b)) {
            BK_INFO("controller: broker %d", (int)id);
            cl_logdir_renotify(b);                /* a new controller learns it (cluster_logdirs.c) */
        }
        view_set_controller(b, id);
    } else if (r->rc == ZNONODE) {
        if (view_controller_id(b) != -1)
            BK_INFO("controller: none (broker %d is gone); electing", (int)view_controller_id(b));
        view_set_controller(b, -1);
        if (cl->active)
            cl_ctl_resign(b, "/controller vanished");
        cl_zk_exists(b->zk, "/controller", true, on_controller_watched, NULL);
        cl_ctl_elect(b);
    } else {
        return;
    }
    cl_zk_get(b->zk, "/controller_epoch", false, on_controller_epoch, NULL);
}

void cl_mirror_refresh_controller(bk_broker *b)
{
    cl_zk_get(b->zk, "/controller", true, on_controller, NULL);
}

/* ---- resync and watches ---------------------------------------------------------------------- */

void cl_mirror_resync(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    if (cl->resync_running) {
        cl->resync_again = true;
        return;
    }
    cl->resync_running = true;
    cl_mirror_refresh_brokers(b);
    cl_mirror_refresh_controller(b);
    cl_shutdowns_refresh(b);
    cl_zk_children(b->zk, "/brokers/topics", true, on_topic_list, (void *)++cl->resync_gen);
}

void cl_mirror_resync_reset(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    cl->resync_running = cl->resync_again = false;
    cl->resync_pending = 0;
    cl->resync_gen++;
    for (size_t i = 0; i < cl->thash_size; i++)
        for (cl_topic *t = cl->thash[i]; t; t = t->hnext)
            t->resync = false;
}

void cl_mirror_resync_done(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    cl->resync_running = false;
    if (!cl->synced)
        BK_INFO("zookeeper: mirror in step (%zu topics)", b->ntopics);
    cl->synced = true;
    cl_fence_update(b);
    if (cl->resync_again) {
        cl->resync_again = false;
        cl_mirror_resync(b);
    }
    cl_brokers_changed(b);
}

/* "/brokers/topics/<t>[/partitions/<p>/state]" or "/config/topics/<t>" →
 * t, else NULL. */
static const char *topic_of(const char *path, const char *prefix, char *out, size_t cap)
{
    size_t n = strlen(prefix);
    if (strncmp(path, prefix, n))
        return NULL;
    const char *s = path + n, *e = strchr(s, '/');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    if (!len || len >= cap)
        return NULL;
    memcpy(out, s, len);
    out[len] = 0;
    return out;
}

void cl_mirror_on_watch(bk_broker *b, int type, const char *path)
{
    char t[MD_TOPIC_NAME_MAX + 2];
    int32_t p;
    if (type == ZOO_NOTWATCHING_EVENT)
        return;
    if (!strcmp(path, "/brokers/ids"))
        cl_mirror_refresh_brokers(b);
    else if (!strcmp(path, "/controller"))
        cl_mirror_refresh_controller(b);
    else if (!strcmp(path, "/brokers/topics"))
        cl_mirror_check_topics(b);
    else if (!strcmp(path, "/admin/delete_topics"))
        cl_ctl_refresh_deletions(b);
    else if (!strcmp(path, "/admin/controlled_shutdown"))
        cl_shutdowns_refresh(b);
    else if (cl_ctl_logdirs_path(path))
        cl_ctl_logdirs_refresh(b);
    else if (cl_broker_configs_path(path))
        cl_broker_configs_refresh(b);
    else if ((type == ZOO_CHANGED_EVENT || type == ZOO_CREATED_EVENT) &&
             state_path(path, t, sizeof t, &p))
        refresh_state(b, t, p);
    else if (topic_of(path, "/brokers/topics/", t, sizeof t) ||
             topic_of(path, "/config/topics/", t, sizeof t))
        cl_mirror_refresh_topic(b, t);
}
