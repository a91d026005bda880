/*
 * Config admin APIs: DescribeConfigs v0-2, AlterConfigs v0-1,
 * IncrementalAlterConfigs v0 (none flexible).
 *
 * Resources (Kafka's ConfigResource.Type ids):
 *   TOPIC (2)   every topic-level config of metadata/'s definitions, valued
 *               topic override → broker default (properties file, under the
 *               broker key) → Kafka's default, with that source (1, 4, 5).
 *               Alterable: AlterConfigs replaces all overrides at once,
 *               IncrementalAlterConfigs edits them.  The new set is always
 *               written with bk_topic_configs_set, the one path for topic
 *               configs (SQL writes take it too), which validates every
 *               entry before writing any (one transaction) and applies
 *               the result to the running topic.
 *   BROKER (4)  named by the broker id as a string: every key the config
 *               parser accepts (daemon/config.c's table, then topic
 *               defaults under their broker keys), read-only, sensitive
 *               ones (admin.token) as null, source 4 when they differ from the
 *               built-in default (they came from the file or --override),
 *               else 5.  The empty name is the cluster-wide dynamic default
 *               in Kafka: we have none, so it describes as an empty list.
 *               Altering brokers is refused (INVALID_REQUEST): there are no
 *               dynamic broker configs; edit the properties file.
 *   anything else: INVALID_REQUEST, as Kafka does for unknown types.
 *
 * As elsewhere: parse everything first (nothing changes on a malformed
 * request), then act per resource in request order; one resource's failure
 * does not stop the next.  Errors carry Kafka's codes and wording.
 *
 * Decisions where Kafka leaves room:
 *   - DescribeConfigs with an empty (not null) key list describes all keys,
 *     as Kafka 3.x does; unknown requested keys are omitted, as Kafka does.
 *   - Bad config values are INVALID_CONFIG (as a KRaft broker answers; a
 *     ZooKeeper-mode broker wraps them in INVALID_REQUEST).
 *   - APPEND/SUBTRACT start from the effective value (override, else broker
 *     default, else Kafka's default); Kafka's ZooKeeper path skips the
 *     broker default, which is an oversight we do not copy.
 */
#include "daemon/cluster.h"
#include "daemon/request.h"

#include <stddef.h>
#include <sys/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RT_TOPIC = 2, RT_BROKER = 4 };
enum { OP_SET = 0, OP_DELETE = 1, OP_APPEND = 2, OP_SUBTRACT = 3 };

/* ---- helpers ------------------------------------------------------------------- */

static int slice_len(kp_str s)
{
    return s.len > 0 ? (int)s.len : 0;
}

static const char *resource_type_name(int8_t t)
{
    switch (t) {
    case RT_TOPIC: return "TOPIC";
    case RT_BROKER: return "BROKER";
    case 8: return "BROKER_LOGGER";
    default: return "UNKNOWN";
    }
}

static const char *kv_get(const md_kv *kv, size_t n, const char *name)
{
    for (size_t i = n; i-- > 0;)              /* last one wins */
        if (kv[i].name && !strcmp(kv[i].name, name))
            return kv[i].value;
    return NULL;
}

/* ---- DescribeConfigs ------------------------------------------------------------ */

struct dc_res {
    int8_t type;
    kp_str name;
    int32_t nkeys;           /* <= 0: all */
    kp_rd keys;              /* at the first ConfigurationKeys string */
};

struct dc_out {
    kp_buf *o;
    int16_t v;
    bool synonyms;
    const struct dc_res *res;
    int32_t count;           /* entries written */
};

static bool key_wanted(const struct dc_res *res, const char *name)
{
    if (res->nkeys <= 0)
        return true;
    size_t len = strlen(name);
    kp_rd k = res->keys;
    for (int32_t i = 0; i < res->nkeys; i++) {
        kp_str s = kp_rd_string(&k);
        if (s.len == (int32_t)len && !memcmp(s.p, name, len))
            return true;
    }
    return false;
}

/* One DescribeConfigsResourceResult.  syn[] is the synonym chain, most
 * specific first; its first entry's source is the config's source. */
struct syn { const char *name, *value; int8_t source; };

static void write_entry(struct dc_out *d, const char *name, const char *value,
                        bool read_only, bool sensitive, const struct syn *syn,
                        int nsyn)
{
    kp_buf *o = d->o;
    int8_t source = syn[0].source;
    kp_wr_string(o, name, -1);
    kp_wr_string(o, sensitive ? NULL : value, -1);
    kp_wr_bool(o, read_only);
    if (d->v == 0)
        kp_wr_bool(o, source == MD_SRC_DEFAULT);      /* IsDefault */
    else
        kp_wr_i8(o, source);                          /* ConfigSource */
    kp_wr_bool(o, sensitive);
    if (d->v >= 1) {
        int n = d->synonyms ? nsyn : 0;
        kp_wr_array(o, n);
        for (int i = 0; i < n; i++) {
            kp_wr_string(o, syn[i].name, -1);
            kp_wr_string(o, sensitive ? NULL : syn[i].value, -1);
            kp_wr_i8(o, syn[i].source);
        }
    }
    d->count++;
}

static void describe_topic(bk_broker *b, struct dc_out *d, const md_kv *over,
                           size_t nover)
{
    const bk_config *c = b->cfg;
    size_t ndefs;
    const md_config_def *defs = md_config_defs(&ndefs);
    for (size_t i = 0; i < ndefs; i++) {
        const md_config_def *def = &defs[i];
        if (!key_wanted(d->res, def->name))
            continue;
        const char *value = md_config_effective(c->topic_defaults, c->ntopic_defaults,
                                                over, nover, def->name, NULL);
        const char *bkey = def->broker_key ? def->broker_key : def->name;
        struct syn syn[3];
        int n = 0;
        const char *tv = kv_get(over, nover, def->name);
        const char *bv = kv_get(c->topic_defaults, c->ntopic_defaults, def->name);
        if (tv)
            syn[n++] = (struct syn){ def->name, tv, MD_SRC_TOPIC };
        if (bv)
            syn[n++] = (struct syn){ bkey, bv, MD_SRC_BROKER };
        syn[n++] = (struct syn){ bkey, def->default_value, MD_SRC_DEFAULT };
        write_entry(d, def->name, value, false, def->sensitive, syn, n);
    }
}

static bool same(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static void describe_broker(bk_broker *b, struct dc_out *d)
{
    static bk_config dflt;
    static bool dflt_ready;
    if (!dflt_ready) {                      /* loop thread only */
        bk_config_init(&dflt);
        dflt_ready = true;
    }
    const bk_config *c = b->cfg;
    /* Every broker key of the parser's own table (daemon/config.c C1). */
    size_t nkeys;
    const bk_config_key *keys = bk_config_keys(&nkeys);
    for (size_t i = 0; i < nkeys; i++) {
        const bk_config_key *k = &keys[i];
        if (!key_wanted(d->res, k->name))
            continue;
        char vbuf[4200], dbuf[4200];
        const char *value = bk_config_render(c, k, vbuf, sizeof vbuf);
        const char *def = bk_config_render(&dflt, k, dbuf, sizeof dbuf);
        struct syn syn[2];
        int n = 0;
        if (!same(value, def))
            syn[n++] = (struct syn){ k->name, value, MD_SRC_BROKER };
        syn[n++] = (struct syn){ k->name, def, MD_SRC_DEFAULT };
        write_entry(d, k->name, value, true, k->sensitive, syn, n);
    }
    /* Topic defaults under their broker keys. */
    size_t ndefs;
    const md_config_def *defs = md_config_defs(&ndefs);
    for (size_t i = 0; i < ndefs; i++) {
        const md_config_def *def = &defs[i];
        if (!def->broker_key || !key_wanted(d->res, def->broker_key))
            continue;
        const char *bv = kv_get(c->topic_defaults, c->ntopic_defaults, def->name);
        struct syn syn[2];
        int n = 0;
        if (bv)
            syn[n++] = (struct syn){ def->broker_key, bv, MD_SRC_BROKER };
        syn[n++] = (struct syn){ def->broker_key, def->default_value, MD_SRC_DEFAULT };
        write_entry(d, def->broker_key, bv ? bv : def->default_value, true,
                    def->sensitive, syn, n);
    }
}

/* Writes ErrorCode .. Configs of one result. */
static void describe_one(bk_req *r, struct dc_out *d)
{
    bk_broker *b = r->b;
    kp_buf *o = d->o;
    const struct dc_res *res = d->res;
    kp_str nm = res->name;
    char msg[MD_ERRLEN];
    int rc = KP_NONE;
    md_kv *over = NULL;
    size_t nover = 0;
    bk_topic *t = NULL;

    if (res->type == RT_TOPIC) {
        rc = md_topic_name_check(nm.p, (size_t)slice_len(nm), msg, sizeof msg);
        if (rc == KP_NONE && !(t = bk_topic_find(b, nm.p, (size_t)nm.len))) {
            snprintf(msg, sizeof msg, "Topic '%.*s' does not exist.", slice_len(nm), nm.p);
            rc = KP_UNKNOWN_TOPIC_OR_PARTITION;
        }
        if (rc == KP_NONE && (rc = md_topic_configs(b->db, t->name, &over, &nover))) {
            snprintf(msg, sizeof msg, "Cannot read the configs of topic %.200s.", t->name);
            rc = KP_UNKNOWN_SERVER_ERROR;
        }
    } else if (res->type == RT_BROKER) {
        if (nm.len > 0) {
            char id[16], *end;
            long v = 0;
            bool integer = nm.len < (int32_t)sizeof id;
            if (integer) {
                kp_str_copy(nm, id, sizeof id);
                v = strtol(id, &end, 10);
                integer = *end == 0 && v >= INT32_MIN && v <= INT32_MAX &&
                          strlen(id) == (size_t)nm.len;
            }
            if (!integer) {
                snprintf(msg, sizeof msg, "Broker id must be an integer, but it is: "
                         "%.*s", slice_len(nm) > 64 ? 64 : slice_len(nm), nm.p);
                rc = KP_INVALID_REQUEST;
            } else if (v != b->cfg->broker_id) {
                snprintf(msg, sizeof msg, "Unexpected broker id, expected %d or "
                         "empty string, but received %ld", b->cfg->broker_id, v);
                rc = KP_INVALID_REQUEST;
            }
        }
    } else {
        snprintf(msg, sizeof msg, "Unsupported resource type: %s",
                 resource_type_name(res->type));
        rc = KP_INVALID_REQUEST;
    }

    kp_wr_i16(o, bk_wire_code(rc));
    kp_wr_string(o, rc == KP_NONE ? NULL : msg, -1);
    kp_wr_i8(o, res->type);
    kp_wr_str(o, nm);
    size_t at = kp_wr_i32_placeholder(o);              /* Configs count */
    d->count = 0;
    if (rc == KP_NONE && res->type == RT_TOPIC)
        describe_topic(b, d, over, nover);
    else if (rc == KP_NONE && nm.len > 0)              /* "" = dynamic defaults: none */
        describe_broker(b, d);
    kp_wr_i32_at(o, at, d->count);
    md_kv_free(over, nover);
}

int bk_handle_describe_configs(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_rd *in = &r->body;
    /* ResourceType(1) ResourceName(2) ConfigurationKeys(4) */
    int32_t n = kp_rd_array_nn(in, 7);
    struct dc_res *res = calloc((size_t)n + 1, sizeof *res);
    if (!res)
        return BK_CLOSE;
    for (int32_t i = 0; i < n; i++) {
        res[i].type = kp_rd_i8(in);
        res[i].name = kp_rd_string_nn(in);
        res[i].nkeys = kp_rd_array(in, 2);              /* nullable: all */
        res[i].keys = *in;
        for (int32_t j = 0; j < res[i].nkeys; j++)
            kp_rd_string_nn(in);
    }
    bool synonyms = v >= 1 ? kp_rd_bool(in) : false;    /* IncludeSynoyms */
    if (!kp_rd_ok(in)) {
        free(res);
        return BK_CLOSE;
    }
    kp_buf *o = r->out;
    kp_wr_i32(o, 0);                                    /* ThrottleTimeMs */
    kp_wr_array(o, n);
    for (int32_t i = 0; i < n; i++) {
        struct dc_out d = { .o = o, .v = v, .synonyms = synonyms, .res = &res[i] };
        describe_one(r, &d);
    }
    free(res);
    return BK_RESPOND;
}

/* ---- AlterConfigs / IncrementalAlterConfigs --------------------------------------- */

struct ac_res {
    int8_t type;
    kp_str name;
    int32_t nconfigs;
    kp_rd configs;           /* at the first AlterableConfig */
};

/* A growable set of overrides, strings owned. */
struct kvset {
    md_kv *kv;
    size_t n, cap;
};

static void kvset_free(struct kvset *s)
{
    md_kv_free(s->kv, s->n);
    s->kv = NULL;
    s->n = s->cap = 0;
}

static ssize_t kvset_find(const struct kvset *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->kv[i].name, name))
            return (ssize_t)i;
    return -1;
}

/* Takes ownership of name and value (freed on failure too).  0 or -1. */
static int kvset_put(struct kvset *s, char *name, char *value)
{
    ssize_t i = kvset_find(s, name);
    if (i >= 0) {
        free(name);
        free(s->kv[i].value);
        s->kv[i].value = value;
        return 0;
    }
    if (s->n == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 8;
        md_kv *nk = realloc(s->kv, ncap * sizeof *nk);
        if (!nk) {
            free(name);
            free(value);
            return -1;
        }
        s->kv = nk;
        s->cap = ncap;
    }
    s->kv[s->n++] = (md_kv){ name, value };
    return 0;
}

static void kvset_del(struct kvset *s, const char *name)
{
    ssize_t i = kvset_find(s, name);
    if (i < 0)
        return;
    free(s->kv[i].name);
    free(s->kv[i].value);
    s->kv[i] = s->kv[--s->n];
}

/* Whether the comma-separated list has item [p, p+len). */
static bool list_has(const char *list, const char *p, size_t len)
{
    for (const char *q = list; *q;) {
        size_t l = strcspn(q, ",");
        if (l == len && !memcmp(q, p, len))
            return true;
        q += l + (q[l] == ',');
    }
    return false;
}

/* APPEND: old items, then the new items old lacks.  SUBTRACT: old items
 * that are not in value.  Empty items are dropped.  NULL when out of
 * memory. */
static char *list_edit(const char *old, const char *value, int op)
{
    char *out = malloc(strlen(old) + strlen(value) + 2);
    if (!out)
        return NULL;
    size_t n = 0;
    const char *src[2] = { old, op == OP_APPEND ? value : "" };
    for (int k = 0; k < 2; k++)
        for (const char *q = src[k]; *q;) {
            size_t l = strcspn(q, ",");
            bool keep = l > 0;
            if (keep && k == 0 && op == OP_SUBTRACT)
                keep = !list_has(value, q, l);
            if (keep && k == 1) {
                out[n] = 0;
                keep = !list_has(out, q, l);
            }
            if (keep) {
                if (n)
                    out[n++] = ',';
                memcpy(out + n, q, l);
                n += l;
            }
            q += l + (q[l] == ',');
        }
    out[n] = 0;
    return out;
}

/* Topic checks common to both APIs; *t on success. */
static int alter_topic_target(bk_broker *b, kp_str nm, bk_topic **t, char *msg,
                              size_t msglen)
{
    if (nm.len == 0) {
        snprintf(msg, msglen, "Default topic resources are not allowed.");
        return KP_INVALID_REQUEST;
    }
    int rc = md_topic_name_check(nm.p, (size_t)slice_len(nm), msg, msglen);
    if (rc != KP_NONE)
        return rc;
    if (!(*t = bk_topic_find(b, nm.p, (size_t)nm.len))) {
        snprintf(msg, msglen, "Topic %.*s does not exist.", slice_len(nm), nm.p);
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    }
    return KP_NONE;
}

/* The full new override set, through the one path for topic configs. */
static int store_overrides(bk_broker *b, bk_topic *t, const struct kvset *s,
                           bool validate_only, char *msg, size_t msglen)
{
    return bk_topic_configs_set(b, t->name, s->kv, s->n, validate_only, msg, msglen);
}

static int not_topic(int8_t type, char *msg, size_t msglen)
{
    if (type == RT_BROKER)
        snprintf(msg, msglen, "Dynamic broker configs are not supported: set "
                 "broker configs in the properties file and restart.");
    else
        snprintf(msg, msglen, "AlterConfigs is only supported for topics and "
                 "brokers, but resource type is %s", resource_type_name(type));
    return KP_INVALID_REQUEST;
}

static int alter_one(bk_broker *b, const struct ac_res *res, bool validate_only,
                     char *msg, size_t msglen)
{
    msg[0] = 0;
    if (res->type != RT_TOPIC)
        return not_topic(res->type, msg, msglen);
    /* Null values first, all named, in Kafka's words. */
    kp_rd c = res->configs;
    size_t used = 0;
    for (int32_t i = 0; i < res->nconfigs; i++) {
        kp_str k = kp_rd_string(&c), v = kp_rd_string(&c);
        if (v.len >= 0 || used >= msglen)
            continue;
        used += (size_t)snprintf(msg + used, msglen - used, "%s%.*s",
                                 used ? "," : "Null value not supported for : ",
                                 slice_len(k), k.p);
    }
    if (used)
        return KP_INVALID_REQUEST;
    bk_topic *t;
    int rc = alter_topic_target(b, res->name, &t, msg, msglen);
    if (rc != KP_NONE)
        return rc;
    struct kvset s = { 0 };
    bool oom = false;
    c = res->configs;
    for (int32_t i = 0; i < res->nconfigs && !oom; i++) {
        char *name = bk_slice_dup(kp_rd_string(&c), &oom);
        char *value = bk_slice_dup(kp_rd_string(&c), &oom);
        if (oom || kvset_put(&s, name, value))
            oom = true;
    }
    if (oom) {
        snprintf(msg, msglen, "out of memory");
        rc = KP_UNKNOWN_SERVER_ERROR;
    } else {
        rc = store_overrides(b, t, &s, validate_only, msg, msglen);
    }
    kvset_free(&s);
    return rc;
}

/* One operation applied to the working set s.  KP_NONE or an error. */
static int apply_op(bk_broker *b, struct kvset *s, kp_str k, int8_t op, kp_str v,
                    char *msg, size_t msglen)
{
    if (op < OP_SET || op > OP_SUBTRACT) {
        snprintf(msg, msglen, "Unknown config operation type %d for config key: "
                 "%.*s", op, slice_len(k), k.p);
        return KP_INVALID_REQUEST;
    }
    if (v.len < 0 && op != OP_DELETE) {
        snprintf(msg, msglen, "Null value not supported for : %.*s", slice_len(k), k.p);
        return KP_INVALID_REQUEST;
    }
    bool oom = false;
    char *name = bk_slice_dup(k, &oom);
    char *value = op == OP_DELETE ? NULL : bk_slice_dup(v, &oom);
    int rc = KP_NONE;
    if (oom) {
        snprintf(msg, msglen, "out of memory");
        rc = KP_UNKNOWN_SERVER_ERROR;
    } else if (op == OP_SET) {
        if (kvset_put(s, name, value)) {
            snprintf(msg, msglen, "out of memory");
            return KP_UNKNOWN_SERVER_ERROR;
        }
        return KP_NONE;                    /* s owns name and value */
    } else if (op == OP_DELETE) {
        kvset_del(s, name);
    } else {
        const md_config_def *def = md_config_def_find(name);
        if (!def) {
            snprintf(msg, msglen, "Unknown topic config name: %.200s", name);
            rc = KP_INVALID_CONFIG;
        } else if (def->type != MD_CT_LIST) {
            snprintf(msg, msglen, "Config value %s is not allowed for config key: %s",
                     op == OP_APPEND ? "append" : "subtract", name);
            rc = KP_INVALID_REQUEST;
        } else {
            ssize_t i = kvset_find(s, name);
            const char *old = i >= 0 ? s->kv[i].value
                : md_config_effective(b->cfg->topic_defaults, b->cfg->ntopic_defaults,
                                      NULL, 0, name, NULL);
            char *nv = list_edit(old ? old : "", value, op);
            int e = nv ? kvset_put(s, name, nv) : -1;
            if (nv)
                name = NULL;               /* s owns it, or kvset_put freed it */
            if (e) {
                snprintf(msg, msglen, "out of memory");
                rc = KP_UNKNOWN_SERVER_ERROR;
            }
        }
    }
    free(name);
    free(value);
    return rc;
}

static int cmp_slices(const void *x, const void *y)
{
    return kp_str_cmp(*(const kp_str *)x, *(const kp_str *)y);
}

/* 1 if a config key repeats, 0 if not, -1 out of memory. */
static int has_duplicate_key(const struct ac_res *res)
{
    kp_str *keys = malloc(((size_t)res->nconfigs + 1) * sizeof *keys);
    if (!keys)
        return -1;
    kp_rd c = res->configs;
    for (int32_t i = 0; i < res->nconfigs; i++) {
        keys[i] = kp_rd_string(&c);
        kp_rd_i8(&c);
        kp_rd_string(&c);
    }
    qsort(keys, (size_t)res->nconfigs, sizeof *keys, cmp_slices);
    int dup = 0;
    for (int32_t i = 1; i < res->nconfigs && !dup; i++)
        dup = kp_str_cmp(keys[i - 1], keys[i]) == 0;
    free(keys);
    return dup;
}

static int incremental_one(bk_broker *b, const struct ac_res *res,
                           bool validate_only, char *msg, size_t msglen)
{
    msg[0] = 0;
    if (res->type != RT_TOPIC)
        return not_topic(res->type, msg, msglen);
    int dup = has_duplicate_key(res);
    if (dup) {
        snprintf(msg, msglen, dup > 0 ? "Error due to duplicate config keys"
                                      : "out of memory");
        return dup > 0 ? KP_INVALID_REQUEST : KP_UNKNOWN_SERVER_ERROR;
    }
    bk_topic *t;
    int rc = alter_topic_target(b, res->name, &t, msg, msglen);
    if (rc != KP_NONE)
        return rc;
    struct kvset s = { 0 };
    if (md_topic_configs(b->db, t->name, &s.kv, &s.n) != KP_NONE) {
        snprintf(msg, msglen, "Cannot read the configs of topic %.200s.", t->name);
        return KP_UNKNOWN_SERVER_ERROR;
    }
    s.cap = s.n;
    kp_rd c = res->configs;
    for (int32_t i = 0; i < res->nconfigs && rc == KP_NONE; i++) {
        kp_str k = kp_rd_string(&c);
        int8_t op = kp_rd_i8(&c);
        kp_str v = kp_rd_string(&c);
        rc = apply_op(b, &s, k, op, v, msg, msglen);
    }
    if (rc == KP_NONE)
        rc = store_overrides(b, t, &s, validate_only, msg, msglen);
    kvset_free(&s);
    return rc;
}

/* Both APIs share their request and response shapes; an incremental entry
 * carries a ConfigOperation between Name and Value.  Parse everything, then
 * apply each resource with one(). */
typedef int alter_fn(bk_broker *b, const struct ac_res *res, bool validate_only,
                     char *msg, size_t msglen);

static int handle_alter(bk_req *r, bool incremental, alter_fn *one)
{
    kp_rd *in = &r->body;
    /* ResourceType(1) ResourceName(2) Configs(4) */
    int32_t n = kp_rd_array_nn(in, 7);
    struct ac_res *res = calloc((size_t)n + 1, sizeof *res);
    if (!res)
        return BK_CLOSE;
    for (int32_t i = 0; i < n; i++) {
        res[i].type = kp_rd_i8(in);
        res[i].name = kp_rd_string_nn(in);
        /* Name(2) [ConfigOperation(1)] Value(2) */
        res[i].nconfigs = kp_rd_array_nn(in, incremental ? 5 : 4);
        res[i].configs = *in;
        for (int32_t j = 0; j < res[i].nconfigs; j++) {
            kp_rd_string_nn(in);                        /* Name */
            if (incremental)
                kp_rd_i8(in);                           /* ConfigOperation */
            kp_rd_string(in);                           /* Value (nullable) */
        }
    }
    bool validate_only = kp_rd_bool(in);
    if (!kp_rd_ok(in)) {
        free(res);
        return BK_CLOSE;
    }
    kp_buf *o = r->out;
    kp_wr_i32(o, 0);                                    /* ThrottleTimeMs */
    kp_wr_array(o, n);
    for (int32_t i = 0; i < n; i++) {
        char msg[MD_ERRLEN];
        int rc = one(r->b, &res[i], validate_only, msg, sizeof msg);
        kp_wr_i16(o, bk_wire_code(rc));
        kp_wr_string(o, rc == KP_NONE ? NULL : msg, -1);
        kp_wr_i8(o, res[i].type);
        kp_wr_str(o, res[i].name);
    }
    free(res);
    return BK_RESPOND;
}

int bk_handle_alter_configs(bk_req *r)
{
    return handle_alter(r, false, alter_one);
}

int bk_handle_incremental_alter_configs(bk_req *r)
{
    return handle_alter(r, true, incremental_one);
}
