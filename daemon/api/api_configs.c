/*
 * Config admin APIs, every version Kafka defines: DescribeConfigs v0-4
 * (ConfigType and, when asked, Documentation from v3), AlterConfigs v0-2,
 * IncrementalAlterConfigs v0-1 (flexible: DescribeConfigs v4,
 * AlterConfigs v2, IncrementalAlterConfigs v1).
 *
 * Resources (Kafka's ConfigResource.Type ids):
 *   TOPIC (2)   every topic-level config of metadata/'s definitions, valued
 *               topic override → broker default (properties file, under the
 *               broker key) → Kafka's default, with that source (1, 4, 5).
 *               Alterable: AlterConfigs replaces all overrides at once,
 *               IncrementalAlterConfigs edits them.  The new set is always
 *               written with view_topic_configs_set, the one path for topic
 *               configs (SQL writes take it too), which validates every
 *               entry before writing any (one transaction) and applies
 *               the result to the running topic.
 *   BROKER (4)  named by the broker id as a string: every key the config
 *               parser accepts (daemon/broker_config.c's table, then topic
 *               defaults under their broker keys), sensitive ones
 *               (admin.token) as null, source 4 when they differ from the
 *               built-in default (they came from the file or --override),
 *               else 5.  The topic defaults' broker keys are dynamic
 *               (daemon/view/view_broker_configs.c): alterable on this broker's id
 *               (source 2) and on the empty name, the cluster-wide default
 *               (source 3, which describes as just that set), applied live;
 *               every other key is read-only and refused by name.
 *   anything else: INVALID_REQUEST, as Kafka does for unknown types.
 *
 * As elsewhere: decode everything first (kp_dec_<Api>Request; nothing
 * changes on a malformed request), then act per resource in request order,
 * filling the response struct from r->arena (every string copied there, as
 * values are rendered into stack buffers or read from freed overrides),
 * encoded once every resource has its answer (a topic's new set that the
 * store confirms later, in cluster mode, is waited for through
 * bk_topic_wait, daemon/api/api_topic_wait.c, and so is a BROKER resource's set,
 * which goes to ZooKeeper's /config/brokers/ there).  One resource's failure does not stop the next.
 * Errors carry Kafka's codes and wording.
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
#include "daemon/security/sec_authz.h"
#include "daemon/view/view_broker_configs.h"
#include "daemon/api/api_topic_wait.h"
#include "kp_msgs.h"

#include <stddef.h>
#include <sys/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RT_TOPIC = 2, RT_BROKER = 4, RT_BROKER_LOGGER = 8, RT_CLIENT_METRICS = 16 };
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
    case RT_BROKER_LOGGER: return "BROKER_LOGGER";
    default: return "UNKNOWN";
    }
}

/* ErrorCode and ErrorMessage (null on success) of one result.  0, or -1
 * when the arena is exhausted (the caller closes). */
static int result_set(kp_arena *a, int rc, const char *msg, int16_t *code,
                      kp_str *message)
{
    *code = bk_wire_code(rc);
    *message = KP_STR_NULL;
    return rc != KP_NONE && kp_arena_str(a, msg, message) ? -1 : 0;
}

static const char *kv_get(const md_kv *kv, size_t n, const char *name)
{
    for (size_t i = n; i-- > 0;)              /* last one wins */
        if (kv[i].name && !strcmp(kv[i].name, name))
            return kv[i].value;
    return NULL;
}

/* ---- DescribeConfigs ------------------------------------------------------------ */

typedef kp_DescribeConfigsRequest_DescribeConfigsResource dc_res;
typedef kp_DescribeConfigsResponse_DescribeConfigsResult dc_result;

struct dc_out {
    kp_arena *a;
    int16_t v;
    bool synonyms;
    bool docs;               /* IncludeDocumentation (v3+) */
    const dc_res *res;
    dc_result *out;          /* Configs has room for every key */
    int err;                 /* KP_E_NOMEM, latched */
};

static bool key_wanted(const dc_res *res, const char *name)
{
    if (res->ConfigurationKeys_count <= 0)
        return true;
    size_t len = strlen(name);
    for (int32_t i = 0; i < res->ConfigurationKeys_count; i++) {
        kp_str s = res->ConfigurationKeys[i];
        if (s.len == (int32_t)len && !memcmp(s.p, name, len))
            return true;
    }
    return false;
}

/* s copied into the arena; NULL is null. */
static kp_str dc_str(struct dc_out *d, const char *s)
{
    kp_str r = KP_STR_NULL;
    if (s && !d->err)
        d->err = kp_arena_str(d->a, s, &r);
    return r;
}

/* One DescribeConfigsResourceResult.  syn[] is the synonym chain, most
 * specific first; its first entry's source is the config's source. */
struct syn { const char *name, *value; int8_t source; };

/* Kafka's ConfigEntry.ConfigType ids (DescribeConfigs v3+). */
enum { CT_BOOLEAN = 1, CT_STRING = 2, CT_INT = 3, CT_LONG = 5, CT_DOUBLE = 6, CT_LIST = 7,
       CT_PASSWORD = 9 };

static int8_t topic_config_type(const md_config_def *def)
{
    switch (def->type) {
    case MD_CT_LONG:   return CT_LONG;
    case MD_CT_INT:    return CT_INT;
    case MD_CT_DOUBLE: return CT_DOUBLE;
    case MD_CT_BOOL:   return CT_BOOLEAN;
    case MD_CT_LIST:   return CT_LIST;
    default:           return CT_STRING;
    }
}

static int8_t broker_config_type(const bk_config_key *k)
{
    if (k->sensitive)
        return CT_PASSWORD;
    switch (k->type) {
    case BK_CT_INT:    return CT_INT;
    case BK_CT_LONG:   return CT_LONG;
    case BK_CT_BOOL:   return CT_BOOLEAN;
    case BK_CT_DOUBLE: return CT_DOUBLE;
    case BK_CT_UNIT:   return CT_LONG;
    default:           return CT_STRING;
    }
}

static void write_entry(struct dc_out *d, const char *name, const char *value,
                        bool read_only, bool sensitive, int8_t type, const char *doc,
                        const struct syn *syn, int nsyn)
{
    kp_DescribeConfigsResponse_DescribeConfigsResourceResult *e =
        &d->out->Configs[d->out->Configs_count++];
    int8_t source = syn[0].source;
    e->Name = dc_str(d, name);
    e->Value = dc_str(d, sensitive ? NULL : value);
    e->ReadOnly = read_only;
    if (d->v == 0)
        e->IsDefault = source == MD_SRC_DEFAULT;
    else
        e->ConfigSource = source;
    e->IsSensitive = sensitive;
    /* v3+ (both ignorable before): the type always, the text when asked */
    e->ConfigType = d->v >= 3 ? type : 0;
    e->Documentation = d->v >= 3 && d->docs ? dc_str(d, doc ? doc : "") : KP_STR_NULL;
    int n = d->v >= 1 && d->synonyms ? nsyn : 0;        /* Synonyms: v1+ */
    e->Synonyms_count = n;
    e->Synonyms = kp_arena_alloc(d->a, (size_t)n * sizeof *e->Synonyms);
    if (!e->Synonyms) {
        e->Synonyms_count = 0;
        d->err = KP_E_NOMEM;
        return;
    }
    for (int i = 0; i < n; i++) {
        e->Synonyms[i].Name = dc_str(d, syn[i].name);
        e->Synonyms[i].Value = dc_str(d, sensitive ? NULL : syn[i].value);
        e->Synonyms[i].Source = syn[i].source;
    }
}

/* The dynamic layers of a broker key (a topic-level config's broker
 * default, or a replication throttle), most specific first
 * (daemon/view/view_broker_configs.c): how many went into syn. */
static int broker_layers(const char *key, struct syn *syn)
{
    int n = 0;
    int8_t src;
    const char *v;
    if (!key)
        return 0;
    if ((v = view_broker_config_dynamic_value(key, false, &src)) && src == 2)
        syn[n++] = (struct syn){ key, v, 2 };
    if ((v = view_broker_config_dynamic_value(key, true, &src)))
        syn[n++] = (struct syn){ key, v, 3 };
    return n;
}

/* Every topic-level config with its effective value and synonym chain
 * (topic override, broker default, Kafka's default). */
typedef void (*topic_entry_fn)(void *arg, const md_config_def *def, const char *value,
                               const struct syn *syn, int nsyn);

static void each_topic_config(bk_broker *b, const md_kv *over, size_t nover,
                              topic_entry_fn fn, void *arg)
{
    const bk_config *c = b->cfg;
    size_t ndefs;
    const md_config_def *defs = md_config_defs(&ndefs);
    for (size_t i = 0; i < ndefs; i++) {
        const md_config_def *def = &defs[i];
        const char *value = md_config_effective(c->topic_defaults, c->ntopic_defaults,
                                                over, nover, def->name, NULL);
        const char *bkey = def->broker_key ? def->broker_key : def->name;
        struct syn syn[5];
        int n = 0;
        const char *tv = kv_get(over, nover, def->name);
        size_t nst;
        const md_kv *st = view_broker_configs_static(b, &nst);
        const char *bv = kv_get(st, nst, def->name);
        if (tv)
            syn[n++] = (struct syn){ def->name, tv, MD_SRC_TOPIC };
        n += broker_layers(def->broker_key, &syn[n]);
        if (bv)
            syn[n++] = (struct syn){ bkey, bv, MD_SRC_BROKER };
        syn[n++] = (struct syn){ bkey, def->default_value, MD_SRC_DEFAULT };
        fn(arg, def, value, syn, n);
    }
}

static void describe_topic_entry(void *arg, const md_config_def *def, const char *value,
                                 const struct syn *syn, int nsyn)
{
    struct dc_out *d = arg;
    if (key_wanted(d->res, def->name))
        write_entry(d, def->name, value, false, def->sensitive, topic_config_type(def),
                    def->doc, syn, nsyn);
}

static void describe_topic(bk_broker *b, struct dc_out *d, const md_kv *over,
                           size_t nover)
{
    each_topic_config(b, over, nover, describe_topic_entry, d);
}

struct list_args { bk_config_entry_fn fn; void *arg; };

static void list_topic_entry(void *arg, const md_config_def *def, const char *value,
                             const struct syn *syn, int nsyn)
{
    (void)nsyn;
    struct list_args *l = arg;
    l->fn(l->arg, def->name, def->sensitive ? NULL : value, syn[0].source, def->sensitive);
}

int api_topic_configs_list(bk_broker *b, const char *topic, bk_config_entry_fn fn, void *arg)
{
    md_kv *over = NULL;
    size_t nover = 0;
    if (md_topic_configs(b->db, topic, &over, &nover))
        return KP_UNKNOWN_SERVER_ERROR;
    struct list_args l = { fn, arg };
    each_topic_config(b, over, nover, list_topic_entry, &l);
    md_kv_free(over, nover);
    return KP_NONE;
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
    /* Every broker key of the parser's own table (daemon/broker_config.c C1). */
    size_t nkeys;
    const bk_config_key *keys = bk_config_keys(&nkeys);
    for (size_t i = 0; i < nkeys; i++) {
        const bk_config_key *k = &keys[i];
        if (!key_wanted(d->res, k->name))
            continue;
        char vbuf[4200], dbuf[4200];
        const char *value = bk_config_render(c, k, vbuf, sizeof vbuf);
        const char *def = bk_config_render(&dflt, k, dbuf, sizeof dbuf);
        struct syn syn[4];
        /* the replication throttles are dynamic: their layers first */
        bool dynamic = strstr(k->name, ".replication.throttled.rate") != NULL;
        int n = dynamic ? broker_layers(k->name, syn) : 0;
        if (!same(value, def))
            syn[n++] = (struct syn){ k->name, value, MD_SRC_BROKER };
        syn[n++] = (struct syn){ k->name, def, MD_SRC_DEFAULT };
        write_entry(d, k->name, syn[0].value, !dynamic, k->sensitive, broker_config_type(k),
                    k->doc, syn, n);
    }
    /* Topic defaults under their broker keys. */
    size_t ndefs;
    const md_config_def *defs = md_config_defs(&ndefs);
    for (size_t i = 0; i < ndefs; i++) {
        const md_config_def *def = &defs[i];
        if (!def->broker_key || !key_wanted(d->res, def->broker_key))
            continue;
        size_t nst;
        const md_kv *st = view_broker_configs_static(b, &nst);
        const char *bv = kv_get(st, nst, def->name);
        struct syn syn[4];
        int n = broker_layers(def->broker_key, syn);
        if (bv)
            syn[n++] = (struct syn){ def->broker_key, bv, MD_SRC_BROKER };
        syn[n++] = (struct syn){ def->broker_key, def->default_value, MD_SRC_DEFAULT };
        /* dynamic: not read-only (Kafka's answer for reconfigurable keys) */
        write_entry(d, def->broker_key, syn[0].value, false, def->sensitive,
                    topic_config_type(def), def->doc, syn, n);
    }
}

/* A BROKER resource's name: "" (the cluster-wide default) or this
 * broker's id, copied into id; else INVALID_REQUEST with Kafka's text. */
static int broker_target(bk_broker *b, kp_str nm, char id[16], char *msg, size_t msglen)
{
    id[0] = 0;
    if (nm.len <= 0)
        return KP_NONE;
    char *end;
    long v = 0;
    bool integer = nm.len < 16;
    if (integer) {
        kp_str_copy(nm, id, 16);
        v = strtol(id, &end, 10);
        integer = *end == 0 && v >= INT32_MIN && v <= INT32_MAX && strlen(id) == (size_t)nm.len;
    }
    if (!integer) {
        snprintf(msg, msglen, "Broker id must be an integer, but it is: %.*s",
                 slice_len(nm) > 64 ? 64 : slice_len(nm), nm.p);
        return KP_INVALID_REQUEST;
    }
    if (v != b->cfg->broker_id) {
        snprintf(msg, msglen, "Unexpected broker id, expected %d or empty string, but "
                 "received %ld", b->cfg->broker_id, v);
        return KP_INVALID_REQUEST;
    }
    return KP_NONE;
}

/* The cluster-wide default resource (""): its dynamic set, each key with
 * source DYNAMIC_DEFAULT_BROKER_CONFIG (Kafka describes only those). */
static void describe_broker_default(bk_broker *b, struct dc_out *d)
{
    md_kv *kv;
    size_t n;
    if (view_broker_configs_get(b, "", &kv, &n) != KP_NONE) {
        d->err = KP_E_NOMEM;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (!key_wanted(d->res, kv[i].name))
            continue;
        struct syn syn[1] = { { kv[i].name, kv[i].value, 3 } };
        write_entry(d, kv[i].name, kv[i].value, false, false, CT_STRING, NULL, syn, 1);
    }
    md_kv_free(kv, n);
}

/* Kafka's rights on configs: the topic's, or the cluster's for a broker
 * (daemon/security/sec_authz.c).  KP_NONE or the authorization error. */
static int config_authz(bk_req *r, int8_t type, kp_str name, int op)
{
    if (type == RT_TOPIC)
        return sec_authorized(r, BK_RES_TOPIC, name, op) ? KP_NONE : KP_TOPIC_AUTHORIZATION_FAILED;
    /* Kafka: a broker's loggers and client metrics are the cluster's too
     * (refused so before they are found unsupported here). */
    if (type == RT_BROKER || type == RT_BROKER_LOGGER || type == RT_CLIENT_METRICS)
        return BK_AUTHZ_CLUSTER(r, op) ? KP_NONE : KP_CLUSTER_AUTHORIZATION_FAILED;
    return KP_NONE;
}

/* Fills one result.  0, or -1 when the arena is exhausted. */
static int describe_one(bk_req *r, struct dc_out *d)
{
    bk_broker *b = r->b;
    const dc_res *res = d->res;
    dc_result *out = d->out;
    kp_str nm = res->ResourceName;
    char msg[MD_ERRLEN];
    int rc = KP_NONE;
    md_kv *over = NULL;
    size_t nover = 0;
    bk_topic *t = NULL;

    if ((rc = config_authz(r, res->ResourceType, nm, BK_OP_DESCRIBE_CONFIGS)) != KP_NONE) {
        snprintf(msg, sizeof msg, "Authorization failed.");
    } else if (res->ResourceType == RT_TOPIC) {
        rc = md_topic_name_check(nm.p, (size_t)slice_len(nm), msg, sizeof msg);
        if (rc == KP_NONE && !(t = view_topic_find(b, nm.p, (size_t)nm.len))) {
            snprintf(msg, sizeof msg, "Topic '%.*s' does not exist.", slice_len(nm), nm.p);
            rc = KP_UNKNOWN_TOPIC_OR_PARTITION;
        }
        if (rc == KP_NONE && (rc = md_topic_configs(b->db, t->name, &over, &nover))) {
            snprintf(msg, sizeof msg, "Cannot read the configs of topic %.200s.", t->name);
            rc = KP_UNKNOWN_SERVER_ERROR;
        }
    } else if (res->ResourceType == RT_BROKER) {
        char id[16];
        rc = broker_target(b, nm, id, msg, sizeof msg);
    } else {
        snprintf(msg, sizeof msg, "Unsupported resource type: %s",
                 resource_type_name(res->ResourceType));
        rc = KP_INVALID_REQUEST;
    }

    out->ResourceType = res->ResourceType;
    out->ResourceName = nm;
    if (result_set(d->a, rc, msg, &out->ErrorCode, &out->ErrorMessage))
        d->err = KP_E_NOMEM;
    size_t ndefs, nkeys;
    md_config_defs(&ndefs);
    bk_config_keys(&nkeys);
    out->Configs_count = 0;
    out->Configs = kp_arena_alloc(d->a, (ndefs + nkeys) * sizeof *out->Configs);
    if (!out->Configs)
        d->err = KP_E_NOMEM;
    else if (rc == KP_NONE && res->ResourceType == RT_TOPIC)
        describe_topic(b, d, over, nover);
    else if (rc == KP_NONE && nm.len > 0)
        describe_broker(b, d);
    else if (rc == KP_NONE)                            /* "": the dynamic defaults */
        describe_broker_default(b, d);
    md_kv_free(over, nover);
    return d->err ? -1 : 0;
}

int api_handle_describe_configs(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_DescribeConfigsRequest q;
    if (kp_dec_DescribeConfigsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    kp_DescribeConfigsResponse m;
    kp_init_DescribeConfigsResponse(&m);
    m.Results_count = q.Resources_count;
    m.Results = kp_arena_alloc(&r->arena, (size_t)m.Results_count * sizeof *m.Results);
    if (!m.Results)
        return BK_CLOSE;
    for (int32_t i = 0; i < q.Resources_count; i++) {
        /* IncludeSynonyms is v1+ (the decoder leaves it false below). */
        struct dc_out d = { .a = &r->arena, .v = v, .synonyms = q.IncludeSynonyms,
                            .docs = q.IncludeDocumentation,
                            .res = &q.Resources[i], .out = &m.Results[i] };
        if (describe_one(r, &d))
            return BK_CLOSE;
    }
    kp_enc_DescribeConfigsResponse(r->out, v, &m);
    return BK_RESPOND;
}

/* ---- AlterConfigs / IncrementalAlterConfigs --------------------------------------- */

typedef kp_AlterConfigsRequest_AlterConfigsResource ac_res;
typedef kp_IncrementalAlterConfigsRequest_AlterConfigsResource iac_res;

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
    if (!(*t = view_topic_find(b, nm.p, (size_t)nm.len))) {
        snprintf(msg, msglen, "Topic %.*s does not exist.", slice_len(nm), nm.p);
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    }
    return KP_NONE;
}

/* What an alter changes: a topic's overrides, or a broker resource's
 * dynamic set ("" the cluster-wide default, else this broker's id). */
struct target {
    int8_t type;
    bk_topic *t;
    char broker[16];
};

static int alter_target(bk_broker *b, int8_t type, kp_str nm, struct target *tg, char *msg,
                        size_t msglen)
{
    tg->type = type;
    if (type == RT_TOPIC)
        return alter_topic_target(b, nm, &tg->t, msg, msglen);
    if (type == RT_BROKER)
        return broker_target(b, nm, tg->broker, msg, msglen);
    snprintf(msg, msglen, "AlterConfigs is only supported for topics and "
             "brokers, but resource type is %s", resource_type_name(type));
    return KP_INVALID_REQUEST;
}

/* The target's current set, for an incremental edit.  KP_NONE or an error. */
static int target_current(bk_broker *b, const struct target *tg, struct kvset *s, char *msg,
                          size_t msglen)
{
    int rc = tg->type == RT_BROKER ? view_broker_configs_get(b, tg->broker, &s->kv, &s->n)
                                   : md_topic_configs(b->db, tg->t->name, &s->kv, &s->n);
    if (rc != KP_NONE)
        snprintf(msg, msglen, "Cannot read the configs of %s %.200s.",
                 tg->type == RT_BROKER ? "broker" : "topic",
                 tg->type == RT_BROKER ? tg->broker : tg->t->name);
    s->cap = s->n;
    return rc == KP_NONE ? KP_NONE : KP_UNKNOWN_SERVER_ERROR;
}

/* The full new set: a topic's through the one path for topic configs, a
 * broker's through daemon/view/view_broker_configs.c (in cluster mode answered once
 * ZooKeeper has it, through op as a topic's). */
static int store_set(bk_broker *b, const struct target *tg, const struct kvset *s,
                     bool validate_only, bk_topic_op *op, char *msg, size_t msglen)
{
    if (tg->type == RT_BROKER)
        return view_broker_configs_set(b, tg->broker, s->kv, s->n, validate_only, op, msg,
                                     msglen);
    return view_topic_configs_set(b, tg->t->name, s->kv, s->n, validate_only, op, msg, msglen);
}

static int alter_one(bk_broker *b, const ac_res *res, bool validate_only,
                     bk_topic_op *op, char *msg, size_t msglen)
{
    msg[0] = 0;
    struct target tg;
    int rc = alter_target(b, res->ResourceType, res->ResourceName, &tg, msg, msglen);
    if (rc != KP_NONE && res->ResourceType != RT_TOPIC)
        return rc;                    /* a topic's name checks come after the nulls */
    /* Null values first, all named, in Kafka's words. */
    size_t used = 0;
    for (int32_t i = 0; i < res->Configs_count; i++) {
        kp_str k = res->Configs[i].Name, v = res->Configs[i].Value;
        if (v.len >= 0 || used >= msglen)
            continue;
        used += (size_t)snprintf(msg + used, msglen - used, "%s%.*s",
                                 used ? "," : "Null value not supported for : ",
                                 slice_len(k), k.p);
    }
    if (used)
        return KP_INVALID_REQUEST;
    if (rc != KP_NONE)
        return rc;
    struct kvset s = { 0 };
    bool oom = false;
    for (int32_t i = 0; i < res->Configs_count && !oom; i++) {
        char *name = bk_slice_dup(res->Configs[i].Name, &oom);
        char *value = bk_slice_dup(res->Configs[i].Value, &oom);
        if (oom || kvset_put(&s, name, value))
            oom = true;
    }
    if (oom) {
        snprintf(msg, msglen, "out of memory");
        rc = KP_UNKNOWN_SERVER_ERROR;
    } else {
        rc = store_set(b, &tg, &s, validate_only, op, msg, msglen);
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
static int has_duplicate_key(const iac_res *res)
{
    int32_t n = res->Configs_count;
    kp_str *keys = malloc(((size_t)n + 1) * sizeof *keys);
    if (!keys)
        return -1;
    for (int32_t i = 0; i < n; i++)
        keys[i] = res->Configs[i].Name;
    qsort(keys, (size_t)n, sizeof *keys, cmp_slices);
    int dup = 0;
    for (int32_t i = 1; i < n && !dup; i++)
        dup = kp_str_cmp(keys[i - 1], keys[i]) == 0;
    free(keys);
    return dup;
}

static int incremental_one(bk_broker *b, const iac_res *res, bool validate_only,
                           bk_topic_op *op, char *msg, size_t msglen)
{
    msg[0] = 0;
    if (res->ResourceType != RT_TOPIC && res->ResourceType != RT_BROKER) {
        struct target none;
        return alter_target(b, res->ResourceType, res->ResourceName, &none, msg, msglen);
    }
    int dup = has_duplicate_key(res);
    if (dup) {
        snprintf(msg, msglen, dup > 0 ? "Error due to duplicate config keys"
                                      : "out of memory");
        return dup > 0 ? KP_INVALID_REQUEST : KP_UNKNOWN_SERVER_ERROR;
    }
    struct target tg;
    int rc = alter_target(b, res->ResourceType, res->ResourceName, &tg, msg, msglen);
    if (rc != KP_NONE)
        return rc;
    struct kvset s = { 0 };
    if ((rc = target_current(b, &tg, &s, msg, msglen)) != KP_NONE)
        return rc;
    for (int32_t i = 0; i < res->Configs_count && rc == KP_NONE; i++) {
        const kp_IncrementalAlterConfigsRequest_AlterableConfig *c = &res->Configs[i];
        rc = apply_op(b, &s, c->Name, c->ConfigOperation, c->Value, msg, msglen);
    }
    if (rc == KP_NONE)
        rc = store_set(b, &tg, &s, validate_only, op, msg, msglen);
    kvset_free(&s);
    return rc;
}

/* ---- the handlers ------------------------------------------------------------ */

/* AlterConfigs and IncrementalAlterConfigs differ in their request entries
 * (an incremental one carries a ConfigOperation) and in their generated
 * types, but their messages have the same shape and each resource is
 * answered alike: alter_configs() decodes everything, then applies each
 * resource through its API's few typed calls (struct alter_api).  Neither
 * request carries a timeout: a wait gets the op's default. */
typedef struct alter_answer {
    bk_req *r;
    const struct alter_api *api;
    union {
        kp_AlterConfigsRequest ac;
        kp_IncrementalAlterConfigsRequest iac;
    } q;
    union {
        kp_AlterConfigsResponse ac;
        kp_IncrementalAlterConfigsResponse iac;
    } m;
} alter_answer;

/* Resource i's fields in the response. */
typedef struct alter_slot {
    int8_t *type;
    kp_str *name;
    int16_t *code;
    kp_str *text;
} alter_slot;

typedef struct alter_api {
    /* Decodes the request into a->q and gives a->m its Responses, each
     * named after its resource: their count, or -1 (malformed, or out of
     * memory: the server closes). */
    int32_t (*start)(alter_answer *a);
    alter_slot (*slot)(alter_answer *a, int32_t i);
    /* Resource i, once authorized: the op's wait, its message in msg. */
    int (*one)(alter_answer *a, int32_t i, bk_topic_op *op, char *msg, size_t msglen);
    void (*encode)(alter_answer *a);
} alter_api;

static int32_t ac_start(alter_answer *a)
{
    kp_AlterConfigsResponse *m = &a->m.ac;
    if (kp_dec_AlterConfigsRequest(&a->r->body, a->r->hdr.RequestApiVersion, &a->q.ac,
                                   &a->r->arena) != 0)
        return -1;
    kp_init_AlterConfigsResponse(m);
    m->Responses_count = a->q.ac.Resources_count;
    m->Responses = kp_arena_alloc(&a->r->arena, (size_t)m->Responses_count * sizeof *m->Responses);
    for (int32_t i = 0; m->Responses && i < m->Responses_count; i++) {
        m->Responses[i].ResourceType = a->q.ac.Resources[i].ResourceType;
        m->Responses[i].ResourceName = a->q.ac.Resources[i].ResourceName;
    }
    return m->Responses ? m->Responses_count : -1;
}

static alter_slot ac_slot(alter_answer *a, int32_t i)
{
    kp_AlterConfigsResponse_AlterConfigsResourceResponse *e = &a->m.ac.Responses[i];
    return (alter_slot){ &e->ResourceType, &e->ResourceName, &e->ErrorCode, &e->ErrorMessage };
}

static int ac_one(alter_answer *a, int32_t i, bk_topic_op *op, char *msg, size_t msglen)
{
    return alter_one(a->r->b, &a->q.ac.Resources[i], a->q.ac.ValidateOnly, op, msg, msglen);
}

static void ac_encode(alter_answer *a)
{
    kp_enc_AlterConfigsResponse(a->r->out, a->r->hdr.RequestApiVersion, &a->m.ac);
}

static const alter_api alter_configs_api = { ac_start, ac_slot, ac_one, ac_encode };

static int32_t iac_start(alter_answer *a)
{
    kp_IncrementalAlterConfigsRequest *q = &a->q.iac;
    if (kp_dec_IncrementalAlterConfigsRequest(&a->r->body, a->r->hdr.RequestApiVersion, q,
                                              &a->r->arena) != 0)
        return -1;
    kp_IncrementalAlterConfigsResponse *m = &a->m.iac;
    kp_init_IncrementalAlterConfigsResponse(m);
    m->Responses = kp_arena_alloc(&a->r->arena, (size_t)q->Resources_count * sizeof *m->Responses);
    if (!m->Responses)
        return -1;
    m->Responses_count = q->Resources_count;
    for (int32_t i = 0; i < q->Resources_count; i++) {
        m->Responses[i].ResourceType = q->Resources[i].ResourceType;
        m->Responses[i].ResourceName = q->Resources[i].ResourceName;
    }
    return q->Resources_count;
}

static alter_slot iac_slot(alter_answer *a, int32_t i)
{
    kp_IncrementalAlterConfigsResponse_AlterConfigsResourceResponse *e = &a->m.iac.Responses[i];
    return (alter_slot){ &e->ResourceType, &e->ResourceName, &e->ErrorCode, &e->ErrorMessage };
}

static int iac_one(alter_answer *a, int32_t i, bk_topic_op *op, char *msg, size_t msglen)
{
    return incremental_one(a->r->b, &a->q.iac.Resources[i], a->q.iac.ValidateOnly, op, msg,
                           msglen);
}

static void iac_encode(alter_answer *a)
{
    kp_enc_IncrementalAlterConfigsResponse(a->r->out, a->r->hdr.RequestApiVersion, &a->m.iac);
}

static const alter_api incremental_alter_configs_api = {
    iac_start, iac_slot, iac_one, iac_encode,
};

static void alter_result(void *ctx, int32_t i, int rc, const char *msg)
{
    alter_answer *a = ctx;
    alter_slot s = a->api->slot(a, i);
    if (result_set(&a->r->arena, rc, msg, s.code, s.text))
        kp_buf_fail(a->r->out, KP_E_NOMEM);          /* the server closes */
}

static void alter_finish(void *ctx)
{
    alter_answer *a = ctx;
    a->api->encode(a);
}

static int alter_configs(bk_req *r, const alter_api *api)
{
    alter_answer *a = kp_arena_alloc(&r->arena, sizeof *a);
    if (!a)
        return BK_CLOSE;
    a->r = r;
    a->api = api;
    int32_t n = api->start(a);
    bk_topic_wait *w;
    if (n < 0 || !(w = api_topic_wait_new(r, 0, alter_result, alter_finish, a)))
        return BK_CLOSE;
    for (int32_t i = 0; i < n; i++) {
        char msg[MD_ERRLEN];
        alter_slot s = api->slot(a, i);
        int rc = config_authz(r, *s.type, *s.name, BK_OP_ALTER_CONFIGS);
        if (rc != KP_NONE)
            snprintf(msg, sizeof msg, "Authorization failed.");
        else
            rc = api->one(a, i, api_topic_wait_op(w, i), msg, sizeof msg);
        api_topic_wait_result(w, i, rc, msg);
    }
    return api_topic_wait_start(w);
}

int api_handle_alter_configs(bk_req *r)
{
    return alter_configs(r, &alter_configs_api);
}

int api_handle_incremental_alter_configs(bk_req *r)
{
    return alter_configs(r, &incremental_alter_configs_api);
}
