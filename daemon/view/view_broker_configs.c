/*
 * daemon/view/view_broker_configs.c — dynamic broker configs, as Kafka's
 * DynamicBrokerConfig keeps them for its log configs.
 *
 * Design note.
 *
 * A topic's effective config is its override, else the broker's default
 * for that key, else Kafka's default (metadata/config.c).  The broker's
 * default has three layers, most specific first:
 *
 *   this broker's dynamic set   AlterConfigs on BROKER "<id>"   source 2
 *   the cluster-wide default    AlterConfigs on BROKER ""       source 3
 *   the properties file         (and --override)                source 4
 *
 * The dynamic keys are the broker keys of the topic-level configs
 * (log.retention.ms, log.segment.bytes, message.max.bytes, ...): the ones
 * Kafka reconfigures at runtime for every log (DynamicLogConfig).  Any
 * other key, static or unknown, is refused with Kafka's words.
 *
 * The sets live in SQLite (broker_configs, metadata/broker_configs.c); a
 * change is stored first, then applied: b->cfg->topic_defaults is rebuilt
 * from the three layers and every topic re-resolves its config
 * (view_topic_apply), so retention, segment rolling, flushing and produce
 * limits follow at once.  In cluster mode ZooKeeper's /config/brokers/
 * holds the sets, as in Kafka (daemon/cluster/cluster_broker_configs.c): a change is
 * validated here, written there, and adopted (stored, applied) by every
 * broker it concerns as it reads the znode back; SQLite is each broker's
 * local copy, applied at startup before ZooKeeper is reached.
 *
 * Invariants:
 *   Y1. b->cfg->topic_defaults = file ⊕ default set ⊕ own set, rebuilt
 *       after every change and at startup (view_broker_configs_init).
 *   Y2. A set is validated whole before anything is stored or applied.
 * State is the loop thread's.
 */
#include "daemon/view/view_broker_configs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/view/view_store.h"

static struct {
    bool ready;
    md_kv *file;                      /* topic-level names, from the file */
    size_t nfile;
    md_kv *dflt, *self;               /* broker keys: "" and this broker's */
    size_t ndflt, nself;
} dyn;

static const md_config_def *def_of_broker_key(const char *key)
{
    size_t n;
    const md_config_def *defs = md_config_defs(&n);
    for (size_t i = 0; i < n; i++)
        if (defs[i].broker_key && !strcmp(defs[i].broker_key, key))
            return &defs[i];
    return NULL;
}

/* Dynamic keys that are not topic-level defaults: the replication
 * throttles in bytes/s (Kafka's; kafka-reassign-partitions --throttle sets
 * both).  Absent, or 0, is unthrottled, as Kafka's default Long.MAX_VALUE.
 * The follower's is applied by the replica fetchers to the partitions this
 * broker is being added to (daemon/replication/repl_fetcher.c), the leader's to what it
 * serves of them to the replicas being added (daemon/api/api_fetch.c).  Both
 * may also be set in the properties file (daemon/broker_config.c). */
static const char *const broker_only[] = {
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
};

static bool broker_only_key(const char *key)
{
    for (size_t i = 0; i < sizeof broker_only / sizeof broker_only[0]; i++)
        if (!strcmp(broker_only[i], key))
            return true;
    return false;
}

bool view_broker_config_dynamic(const char *key)
{
    return def_of_broker_key(key) != NULL || broker_only_key(key);
}

int64_t view_broker_config_rate(const bk_broker *b, const char *key)
{
    int8_t src;
    const char *v = view_broker_config_dynamic_value(key, false, &src);
    long long r = v ? strtoll(v, NULL, 10)
                    : !strcmp(key, "leader.replication.throttled.rate")
                        ? b->cfg->leader_replication_throttled_rate
                        : b->cfg->follower_replication_throttled_rate;
    /* Above 1 TB/s: none (bk_tbucket's arithmetic stays within int64). */
    return r > 0 && r < 1000000000000LL ? (int64_t)r : 0;
}

static const char *kv_find(const md_kv *kv, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(kv[i].name, name))
            return kv[i].value;
    return NULL;
}

const char *view_broker_config_dynamic_value(const char *key, bool def_only, int8_t *source)
{
    const char *v = def_only ? NULL : kv_find(dyn.self, dyn.nself, key);
    if (v) {
        *source = 2;                  /* DYNAMIC_BROKER_CONFIG */
        return v;
    }
    if ((v = kv_find(dyn.dflt, dyn.ndflt, key)))
        *source = 3;                  /* DYNAMIC_DEFAULT_BROKER_CONFIG */
    return v;
}

const md_kv *view_broker_configs_static(bk_broker *b, size_t *n)
{
    if (!dyn.ready) {                 /* not initialised (tests, fuzzing) */
        *n = b->cfg->ntopic_defaults;
        return b->cfg->topic_defaults;
    }
    *n = dyn.nfile;
    return dyn.file;
}

static md_kv *kv_copy(const md_kv *kv, size_t n)
{
    md_kv *c = calloc(n + 1, sizeof *c);
    for (size_t i = 0; c && i < n; i++) {
        c[i].name = strdup(kv[i].name);
        c[i].value = strdup(kv[i].value);
        if (!c[i].name || !c[i].value) {
            md_kv_free(c, i + 1);
            return NULL;
        }
    }
    return c;
}

/* Y1: the merged topic defaults into b->cfg.  0, or -1 out of memory
 * (b->cfg unchanged). */
static int rebuild(bk_broker *b)
{
    size_t ndefs;
    const md_config_def *defs = md_config_defs(&ndefs);
    md_kv *out = calloc(ndefs + dyn.nfile + 1, sizeof *out);
    if (!out)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < ndefs; i++) {
        const md_config_def *d = &defs[i];
        int8_t src;
        const char *v = d->broker_key ? view_broker_config_dynamic_value(d->broker_key, false, &src)
                                      : NULL;
        if (!v)
            v = kv_find(dyn.file, dyn.nfile, d->name);
        if (!v)
            continue;
        out[n].name = strdup(d->name);
        out[n].value = strdup(v);
        if (!out[n].name || !out[n].value) {
            md_kv_free(out, n + 1);
            return -1;
        }
        n++;
    }
    md_kv_free(b->cfg->topic_defaults, b->cfg->ntopic_defaults);
    b->cfg->topic_defaults = out;
    b->cfg->ntopic_defaults = n;
    return 0;
}

struct names {
    char (*v)[MD_TOPIC_NAME_MAX + 1];
    size_t n, cap;
};

static void count_one(bk_topic *t, void *arg)
{
    (void)t;
    ((struct names *)arg)->cap++;
}

static void collect_name(bk_topic *t, void *arg)
{
    struct names *s = arg;
    if (s->n < s->cap)
        snprintf(s->v[s->n++], sizeof s->v[0], "%s", t->name);
}

/* Every topic re-resolves its config against the new defaults (names
 * first: applying may touch the table being walked). */
static void apply_all(bk_broker *b)
{
    struct names s = { 0 };
    view_topics_foreach(b, count_one, &s);
    if (!(s.v = calloc(s.cap + 1, sizeof *s.v))) {
        BK_ERROR("dynamic broker configs: out of memory applying them to topics");
        return;
    }
    view_topics_foreach(b, collect_name, &s);
    for (size_t i = 0; i < s.n; i++) {
        char err[MD_ERRLEN];
        if (view_topic_apply(b, s.v[i], err, sizeof err) != KP_NONE)
            BK_ERROR("topic %s: new broker defaults not applied: %s", s.v[i], err);
    }
    free(s.v);
}

/* The file layer, captured once (view_broker_configs_init, or the first
 * change where init did not run: the fuzz harness).  0 or -1. */
static int capture_file(bk_broker *b)
{
    if (dyn.ready)
        return 0;
    if (!(dyn.file = kv_copy(b->cfg->topic_defaults, b->cfg->ntopic_defaults)))
        return -1;
    dyn.nfile = b->cfg->ntopic_defaults;
    dyn.ready = true;
    return 0;
}

int view_broker_configs_get(bk_broker *b, const char *resource, md_kv **kv, size_t *n)
{
    (void)b;
    const md_kv *src = resource[0] ? dyn.self : dyn.dflt;
    size_t ns = resource[0] ? dyn.nself : dyn.ndflt;
    *kv = kv_copy(src, ns);
    *n = *kv ? ns : 0;
    return *kv ? KP_NONE : KP_UNKNOWN_SERVER_ERROR;
}

int view_broker_configs_set(bk_broker *b, const char *resource, const md_kv *kv, size_t n,
                          bool validate_only, bk_topic_op *op, char *msg, size_t msglen)
{
    msg[0] = 0;
    /* Y2: every key dynamic (all the others named at once, as Kafka) ... */
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (view_broker_config_dynamic(kv[i].name) || used >= msglen)
            continue;
        if (used == 0)
            used = (size_t)snprintf(msg, msglen, "Invalid config value for resource "
                                    "ConfigResource(type=BROKER, name='%s'): Cannot update "
                                    "these configs dynamically: Set(%s", resource, kv[i].name);
        else
            used += (size_t)snprintf(msg + used, msglen - used, ", %s", kv[i].name);
    }
    if (used) {
        if (used < msglen)
            snprintf(msg + used, msglen - used, ")");
        return KP_INVALID_REQUEST;
    }
    /* ... and every value valid for its topic-level config. */
    for (size_t i = 0; i < n; i++) {
        const md_config_def *d = def_of_broker_key(kv[i].name);
        if (!d) {                     /* a throttle: a long >= 0 */
            char *end;
            errno = 0;
            long long r = strtoll(kv[i].value, &end, 10);
            if (errno || end == kv[i].value || *end || r < 0) {
                snprintf(msg, msglen, "Invalid value %s for configuration %s: Value must "
                         "be a non-negative long.", kv[i].value, kv[i].name);
                return KP_INVALID_CONFIG;
            }
            continue;
        }
        int rc = md_config_check(d->name, kv[i].value, msg, msglen);
        if (rc != KP_NONE)
            return rc;
    }
    if (validate_only)
        return KP_NONE;
    return b->store->broker_configs_set(b, resource, kv, n, op, msg, msglen);
}

static bool same_set(const md_kv *a, size_t na, const md_kv *b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++) {
        const char *v = kv_find(b, nb, a[i].name);
        if (!v || strcmp(v, a[i].value))
            return false;
    }
    return true;
}

int view_broker_configs_adopt(bk_broker *b, const char *resource, const md_kv *kv, size_t n)
{
    md_kv **set = resource[0] ? &dyn.self : &dyn.dflt;
    size_t *nset = resource[0] ? &dyn.nself : &dyn.ndflt;
    if (dyn.ready && same_set(*set, *nset, kv, n))
        return KP_NONE;               /* a resync reading what is applied already */
    md_kv *copy = capture_file(b) == 0 ? kv_copy(kv, n) : NULL;
    if (!copy)
        return KP_UNKNOWN_SERVER_ERROR;
    char err[MD_ERRLEN];
    if (md_broker_configs_replace(b->db, resource, kv, n, err, sizeof err) != 0) {
        md_kv_free(copy, n);
        BK_ERROR("storing the dynamic configs of broker resource '%s' failed: %s", resource,
                 err);
        return KP_UNKNOWN_SERVER_ERROR;
    }
    md_kv_free(*set, *nset);
    *set = copy;
    *nset = n;
    if (rebuild(b) != 0)
        BK_ERROR("dynamic broker configs stored but not applied: out of memory");
    else
        apply_all(b);
    BK_INFO("dynamic configs of broker resource '%s' set (%zu keys)", resource, n);
    return KP_NONE;
}

int view_broker_configs_init(bk_broker *b)
{
    char self[16];
    snprintf(self, sizeof self, "%d", b->cfg->broker_id);
    if (capture_file(b) != 0 || md_broker_configs(b->db, "", &dyn.dflt, &dyn.ndflt) != 0 ||
        md_broker_configs(b->db, self, &dyn.self, &dyn.nself) != 0) {
        BK_ERROR("cannot read the dynamic broker configs");
        return -1;
    }
    if (dyn.ndflt + dyn.nself == 0)
        return 0;
    if (rebuild(b) != 0)
        return -1;
    apply_all(b);
    BK_INFO("applied %zu dynamic broker configs", dyn.ndflt + dyn.nself);
    return 0;
}
