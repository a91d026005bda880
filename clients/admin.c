/*
 * admin.c — sl_admin: topics, configs, groups and their offsets.
 *
 * Every call is one op (client.c) run by the background thread and waited
 * on by the caller, bounded by its timeout.  An op's step picks its broker
 * (the controller for topic changes, any broker for configs, every broker
 * for ListGroups, the group's coordinator for offsets), sends one request
 * and returns; the response handler fills the op's results and finishes
 * it.  The waiter moves the results out before the op is freed, so a
 * late answer after a timeout only touches the (abandoned) op.
 *
 * Topic and config requests are encoded and their responses decoded by the
 * generated codec (kp_msgs.h), the broker's own: each response handler
 * decodes into an arena of its own, freed when it returns (admin answers
 * are rare and small; nothing decoded outlives the handler but strings
 * copied with dup_str).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clients/sl_int.h"
#include "kp_msgs.h"

struct sl_admin {
    sl_client *cl;
};

enum { A_CREATE, A_DELETE, A_DESCRIBE, A_ALTER, A_LIST_GROUPS, A_GROUP_OFFSETS, A_LIST_TOPICS };

typedef struct adm_op {
    sl_op op;
    int kind;
    char *name;
    int32_t partitions;
    int16_t rf;
    char **kv;                /* NULL-terminated key, value, … */
    int rtype;
    int timeout_ms;
    /* progress */
    int32_t coord;
    bool coord_asked;
    int32_t *asked;           /* ListGroups: brokers asked */
    int n_asked, pending;
    /* results */
    sl_config_entry *entries;
    int n_entries;
    char **groups;            /* ListGroups: groups; A_LIST_TOPICS: topics */
    int n_groups;
    sl_topic_partition *tps;
    int n_tps, cap_tps;
} adm_op;

static void kv_free(char **kv)
{
    for (int i = 0; kv && kv[i]; i++)
        free(kv[i]);
    free(kv);
}

static void adm_free(sl_op *op)
{
    adm_op *a = (adm_op *)op;
    free(a->name);
    kv_free(a->kv);
    free(a->asked);
    sl_config_entries_free(a->entries, a->n_entries);
    sl_admin_groups_free(a->groups, a->n_groups);
    sl_topic_partitions_free(a->tps, a->n_tps);
    free(a);
}

static char *dup_str(kp_str s)
{
    return s.len < 0 ? NULL : sl_strndup(s.p ? s.p : "", (size_t)s.len);
}

/* ---- response handlers ------------------------------------------------------- */

static void finish_ec(sl_client *cl, adm_op *a, int err, int16_t ec, kp_str msg)
{
    int e = err ? err : ec;
    if (!e) {
        sl_op_finish(cl, &a->op, 0, NULL);
        return;
    }
    sl_op_finish(cl, &a->op, e, "%s%s%.*s", sl_err_name(e), msg.len > 0 ? ": " : "",
                 msg.len > 0 ? (int)msg.len : 0, msg.len > 0 ? msg.p : "");
}

static void handle_create(sl_client *cl, sl_broker *b, int err, sl_frame *f, kp_rd *r,
                          int16_t ver, void *ctx)
{
    (void)b; (void)f;
    int16_t ec = 0;
    kp_str msg = KP_STR_NULL;                           /* into the frame */
    kp_arena ar;
    kp_arena_init(&ar, 0);
    kp_CreateTopicsResponse m;
    if (!err && kp_dec_CreateTopicsResponse(r, ver, &m, &ar) != 0)
        err = SL_E_BAD_MSG;
    for (int32_t i = 0; !err && i < m.Topics_count; i++) {
        ec = m.Topics[i].ErrorCode;
        msg = m.Topics[i].ErrorMessage;                 /* v1+; "" below */
    }
    kp_arena_free(&ar);
    if (ec == KP_NOT_CONTROLLER)
        sl_md_refresh(cl);
    finish_ec(cl, ctx, err, ec, msg);
}

static void handle_delete(sl_client *cl, sl_broker *b, int err, sl_frame *f, kp_rd *r,
                          int16_t ver, void *ctx)
{
    (void)b; (void)f;
    int16_t ec = 0;
    kp_arena ar;
    kp_arena_init(&ar, 0);
    kp_DeleteTopicsResponse m;
    if (!err && kp_dec_DeleteTopicsResponse(r, ver, &m, &ar) != 0)
        err = SL_E_BAD_MSG;
    for (int32_t i = 0; !err && i < m.Responses_count; i++)
        ec = m.Responses[i].ErrorCode;
    kp_arena_free(&ar);
    finish_ec(cl, ctx, err, ec, KP_STR_NULL);
}

static void handle_describe(sl_client *cl, sl_broker *b, int err, sl_frame *f, kp_rd *r,
                            int16_t ver, void *ctx)
{
    (void)b; (void)f;
    adm_op *a = ctx;
    int16_t ec = 0;
    kp_str msg = KP_STR_NULL;
    kp_arena ar;
    kp_arena_init(&ar, 0);
    kp_DescribeConfigsResponse m;
    if (!err && kp_dec_DescribeConfigsResponse(r, ver, &m, &ar) != 0)
        err = SL_E_BAD_MSG;
    for (int32_t i = 0; !err && i < m.Results_count; i++) {
        const kp_DescribeConfigsResponse_DescribeConfigsResult *res = &m.Results[i];
        ec = res->ErrorCode;
        msg = res->ErrorMessage;
        int32_t nc = res->Configs_count;
        if (nc > 0 && !a->entries)
            a->entries = calloc((size_t)nc, sizeof *a->entries);
        for (int32_t j = 0; j < nc && a->entries && a->n_entries < nc; j++) {
            const kp_DescribeConfigsResponse_DescribeConfigsResourceResult *c = &res->Configs[j];
            sl_config_entry *e = &a->entries[a->n_entries++];
            e->name = dup_str(c->Name);
            e->value = dup_str(c->Value);
            e->read_only = c->ReadOnly;
            e->is_default = ver == 0 ? c->IsDefault
                                     : c->ConfigSource == 5;   /* DEFAULT_CONFIG */
            e->is_sensitive = c->IsSensitive;
        }
    }
    kp_arena_free(&ar);
    finish_ec(cl, a, err, ec, msg);
}

static void handle_alter(sl_client *cl, sl_broker *b, int err, sl_frame *f, kp_rd *r,
                         int16_t ver, void *ctx)
{
    (void)b; (void)f;
    int16_t ec = 0;
    kp_str msg = KP_STR_NULL;
    kp_arena ar;
    kp_arena_init(&ar, 0);
    kp_AlterConfigsResponse m;
    if (!err && kp_dec_AlterConfigsResponse(r, ver, &m, &ar) != 0)
        err = SL_E_BAD_MSG;
    for (int32_t i = 0; !err && i < m.Responses_count; i++) {
        ec = m.Responses[i].ErrorCode;
        msg = m.Responses[i].ErrorMessage;
    }
    kp_arena_free(&ar);
    finish_ec(cl, ctx, err, ec, msg);
}

static void handle_list_groups(sl_client *cl, sl_broker *b, int err, sl_frame *f,
                               kp_rd *r, int16_t ver, void *ctx)
{
    (void)b; (void)f;
    adm_op *a = ctx;
    kp_arena ar;
    kp_arena_init(&ar, 0);
    kp_ListGroupsResponse m;
    if (!err && kp_dec_ListGroupsResponse(r, ver, &m, &ar) != 0)
        err = SL_E_BAD_MSG;
    if (!err) {
        int32_t n = m.Groups_count;
        char **g = n > 0 ? realloc(a->groups, sizeof *g * (size_t)(a->n_groups + n)) : NULL;
        if (g)
            a->groups = g;
        for (int32_t i = 0; g && i < n; i++)
            a->groups[a->n_groups++] = dup_str(m.Groups[i].GroupId);
        if (m.ErrorCode && !a->op.err)
            a->op.err = m.ErrorCode;
    }
    kp_arena_free(&ar);
    if (err && !a->op.err)
        a->op.err = err;
    if (--a->pending == 0 && a->coord_asked && !a->op.done) {
        int e = a->op.err;
        sl_op_finish(cl, &a->op, e, e ? "ListGroups: %s" : NULL, sl_err_name(e));
    }
}

/* Metadata for all topics: the names, internal topics left out. */
static void handle_list_topics(sl_client *cl, sl_broker *b, int err, sl_frame *f,
                               kp_rd *r, int16_t ver, void *ctx)
{
    (void)b; (void)f;
    adm_op *a = ctx;
    kp_arena ar;
    kp_arena_init(&ar, 0);
    kp_MetadataResponse m;
    if (!err && kp_dec_MetadataResponse(r, ver, &m, &ar) != 0)
        err = SL_E_BAD_MSG;
    int32_t n = err ? 0 : m.Topics_count;
    char **g = n > 0 ? calloc((size_t)n, sizeof *g) : NULL;
    if (n > 0 && !g)
        err = SL_E_NOMEM;
    for (int32_t i = 0; g && i < n; i++) {
        const kp_MetadataResponse_MetadataResponseTopic *mt = &m.Topics[i];
        if (mt->IsInternal || mt->Name.len <= 0 || (mt->ErrorCode && mt->Partitions_count <= 0))
            continue;
        if (!(g[a->n_groups] = dup_str(mt->Name))) {
            err = SL_E_NOMEM;
            break;
        }
        a->n_groups++;
    }
    a->groups = g;
    kp_arena_free(&ar);
    sl_op_finish(cl, &a->op, err, err ? "Metadata: %s" : NULL, sl_err_name(err));
}

static void handle_coord(sl_client *cl, sl_broker *b, int err, sl_frame *f, kp_rd *r,
                         int16_t ver, void *ctx)
{
    (void)b; (void)f;
    adm_op *a = ctx;
    int ec = err ? -1 : sl_find_coordinator_read(cl, r, ver, &a->coord);
    a->coord_asked = false;
    if (a->coord < 0) {
        if (ec == KP_GROUP_ID_NOT_FOUND) {
            sl_op_finish(cl, &a->op, ec, "group %s: %s", a->name, sl_err_name(ec));
            return;
        }
    }
    if (!a->op.done)
        sl_op_submit(cl, &a->op);                         /* next step */
}

static void group_offset_one(void *ctx, kp_str t, int32_t p, int64_t off, int16_t ec)
{
    adm_op *a = ctx;
    if (a->n_tps == a->cap_tps) {
        int cap = a->cap_tps ? a->cap_tps * 2 : 16;
        sl_topic_partition *n = realloc(a->tps, sizeof *n * (size_t)cap);
        if (!n)
            return;                                       /* partial list */
        a->tps = n;
        a->cap_tps = cap;
    }
    a->tps[a->n_tps++] = (sl_topic_partition){ dup_str(t), p, off, ec };
}

static void handle_group_offsets(sl_client *cl, sl_broker *b, int err, sl_frame *f,
                                 kp_rd *r, int16_t ver, void *ctx)
{
    (void)b; (void)f;
    adm_op *a = ctx;
    int e = err ? err : sl_offset_fetch_read(r, ver, group_offset_one, a);
    if (e == SL_ERR_NOT_COORDINATOR || e == SL_ERR_COORDINATOR_NOT_AVAILABLE) {
        a->coord = -1;
        sl_topic_partitions_free(a->tps, a->n_tps);
        a->tps = NULL;
        a->n_tps = a->cap_tps = 0;
        sl_op_submit(cl, &a->op);
        return;
    }
    sl_op_finish(cl, &a->op, e, e ? "OffsetFetch: %s" : NULL, sl_err_name(e));
}

/* ---- step ---------------------------------------------------------------------- */

/* Pairs in kv (NULL-terminated key, value, …). */
static int32_t kv_pairs(char **kv)
{
    int32_t n = 0;
    while (kv && kv[n])
        n++;
    return n / 2;
}

static int bad_version(sl_client *cl, adm_op *a, const char *api)
{
    sl_op_finish(cl, &a->op, SL_E_UNSUPPORTED, "broker lacks a usable %s version", api);
    return 1;
}

static int adm_step(sl_client *cl, sl_op *op, int64_t now)
{
    (void)now;
    adm_op *a = (adm_op *)op;
    if (cl->md_last_ok == 0) {                            /* learn brokers first */
        sl_md_refresh(cl);
        return 0;
    }
    sl_broker *b;
    if (a->kind == A_CREATE || a->kind == A_DELETE) {
        b = cl->controller_id >= 0 ? sl_broker_ready(cl, cl->controller_id) : sl_any_broker(cl);
    } else if (a->kind == A_GROUP_OFFSETS && a->coord >= 0) {
        b = sl_broker_ready(cl, a->coord);
    } else {
        b = sl_any_broker(cl);
    }
    if (!b)
        return 0;
    int16_t v;
    int32_t nkv = kv_pairs(a->kv);
    switch (a->kind) {
    case A_CREATE: {
        if ((v = sl_api_version(b, KP_API_CREATE_TOPICS, 0, 4)) < 0)
            return bad_version(cl, a, "CreateTopics");
        kp_CreateTopicsRequest_CreatableTopicConfig *cfg = calloc((size_t)nkv + 1, sizeof *cfg);
        if (!cfg)
            return 0;                                     /* retried on the next step */
        for (int32_t i = 0; i < nkv; i++)
            cfg[i] = (kp_CreateTopicsRequest_CreatableTopicConfig){
                kp_str_cstr(a->kv[2 * i]), kp_str_cstr(a->kv[2 * i + 1]) };
        kp_CreateTopicsRequest_CreatableTopic t = {
            .Name = kp_str_cstr(a->name), .NumPartitions = a->partitions,
            .ReplicationFactor = a->rf, .Configs = cfg, .Configs_count = nkv,
        };                                                /* no Assignments */
        kp_CreateTopicsRequest q;
        kp_init_CreateTopicsRequest(&q);                  /* validateOnly false */
        q.Topics = &t;
        q.Topics_count = 1;
        q.timeoutMs = a->timeout_ms;
        kp_enc_CreateTopicsRequest(sl_req_begin(cl, b, KP_API_CREATE_TOPICS, v), v, &q);
        free(cfg);
        sl_req_end(cl, b, handle_create, a);
        return 1;
    }
    case A_DELETE: {
        if ((v = sl_api_version(b, KP_API_DELETE_TOPICS, 0, 3)) < 0)
            return bad_version(cl, a, "DeleteTopics");
        kp_str name = kp_str_cstr(a->name);
        kp_DeleteTopicsRequest q;
        kp_init_DeleteTopicsRequest(&q);
        q.TopicNames = &name;                             /* v0-5: by name */
        q.TopicNames_count = 1;
        q.TimeoutMs = a->timeout_ms;
        kp_enc_DeleteTopicsRequest(sl_req_begin(cl, b, KP_API_DELETE_TOPICS, v), v, &q);
        sl_req_end(cl, b, handle_delete, a);
        return 1;
    }
    case A_DESCRIBE: {
        if ((v = sl_api_version(b, KP_API_DESCRIBE_CONFIGS, 0, 2)) < 0)
            return bad_version(cl, a, "DescribeConfigs");
        kp_DescribeConfigsRequest_DescribeConfigsResource res = {
            .ResourceType = (int8_t)a->rtype, .ResourceName = kp_str_cstr(a->name),
            .ConfigurationKeys_count = -1,                /* all keys */
        };
        kp_DescribeConfigsRequest q;
        kp_init_DescribeConfigsRequest(&q);               /* IncludeSynonyms false */
        q.Resources = &res;
        q.Resources_count = 1;
        kp_enc_DescribeConfigsRequest(sl_req_begin(cl, b, KP_API_DESCRIBE_CONFIGS, v), v, &q);
        sl_req_end(cl, b, handle_describe, a);
        return 1;
    }
    case A_ALTER: {
        if ((v = sl_api_version(b, KP_API_ALTER_CONFIGS, 0, 1)) < 0)
            return bad_version(cl, a, "AlterConfigs");
        kp_AlterConfigsRequest_AlterableConfig *cfg = calloc((size_t)nkv + 1, sizeof *cfg);
        if (!cfg)
            return 0;
        for (int32_t i = 0; i < nkv; i++)
            cfg[i] = (kp_AlterConfigsRequest_AlterableConfig){
                kp_str_cstr(a->kv[2 * i]), kp_str_cstr(a->kv[2 * i + 1]) };
        kp_AlterConfigsRequest_AlterConfigsResource res = {
            .ResourceType = (int8_t)a->rtype, .ResourceName = kp_str_cstr(a->name),
            .Configs = cfg, .Configs_count = nkv,
        };
        kp_AlterConfigsRequest q;
        kp_init_AlterConfigsRequest(&q);                  /* ValidateOnly false */
        q.Resources = &res;
        q.Resources_count = 1;
        kp_enc_AlterConfigsRequest(sl_req_begin(cl, b, KP_API_ALTER_CONFIGS, v), v, &q);
        free(cfg);
        sl_req_end(cl, b, handle_alter, a);
        return 1;
    }
    case A_LIST_GROUPS: {
        /* Ask every broker the metadata names. */
        bool waiting = false;
        if (!a->asked)
            a->asked = calloc((size_t)cl->n_brokers + 1, sizeof *a->asked);
        if (!a->asked)
            return 0;
        for (int i = 0; i < cl->n_brokers; i++) {
            sl_broker *x = cl->brokers[i];
            bool done = false;
            if (x->id < 0)
                continue;
            for (int k = 0; k < a->n_asked; k++)
                done |= a->asked[k] == x->id;
            if (done)
                continue;
            sl_broker *rb = sl_broker_ready(cl, x->id);
            if (!rb) {
                waiting = true;
                continue;
            }
            if ((v = sl_api_version(rb, KP_API_LIST_GROUPS, 0, 2)) < 0)
                return bad_version(cl, a, "ListGroups");
            if (a->n_asked <= cl->n_brokers)
                a->asked[a->n_asked++] = x->id;
            kp_ListGroupsRequest lq;                      /* no fields before v4 */
            kp_init_ListGroupsRequest(&lq);
            kp_enc_ListGroupsRequest(sl_req_begin(cl, rb, KP_API_LIST_GROUPS, v), v, &lq);
            a->pending++;
            sl_req_end(cl, rb, handle_list_groups, a);
        }
        if (waiting)
            return 0;
        a->coord_asked = true;                            /* "all asked" */
        if (a->pending == 0) {
            int e = a->op.err;
            sl_op_finish(cl, &a->op, e, e ? "ListGroups: %s" : NULL, sl_err_name(e));
        }
        return 1;
    }
    case A_LIST_TOPICS: {
        if ((v = sl_api_version(b, KP_API_METADATA, 1, 5)) < 0)
            return bad_version(cl, a, "Metadata");
        kp_MetadataRequest q;
        kp_init_MetadataRequest(&q);
        q.Topics_count = -1;                              /* null: all topics (v1+) */
        q.AllowAutoTopicCreation = false;
        kp_enc_MetadataRequest(sl_req_begin(cl, b, KP_API_METADATA, v), v, &q);
        sl_req_end(cl, b, handle_list_topics, a);
        return 1;
    }
    case A_GROUP_OFFSETS:
        if (a->coord < 0) {
            if (a->coord_asked)
                return 1;
            if ((v = sl_api_version(b, KP_API_FIND_COORDINATOR, 0, 2)) < 0)
                return bad_version(cl, a, "FindCoordinator");
            sl_find_coordinator_req(sl_req_begin(cl, b, KP_API_FIND_COORDINATOR, v), v, a->name);
            sl_req_end(cl, b, handle_coord, a);
            a->coord_asked = true;
            return 1;
        }
        if ((v = sl_api_version(b, KP_API_OFFSET_FETCH, 2, 5)) < 0)
            return bad_version(cl, a, "OffsetFetch (v2+)");
        kp_OffsetFetchRequest oq;
        kp_init_OffsetFetchRequest(&oq);
        oq.GroupId = kp_str_cstr(a->name);
        oq.Topics_count = -1;                             /* all topics (v2+) */
        kp_enc_OffsetFetchRequest(sl_req_begin(cl, b, KP_API_OFFSET_FETCH, v), v, &oq);
        sl_req_end(cl, b, handle_group_offsets, a);
        return 1;
    }
    return 1;
}

/* ---- public API ---------------------------------------------------------------- */

static adm_op *adm_new(int kind, const char *name, int timeout_ms)
{
    adm_op *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->kind = kind;
    a->name = name ? strdup(name) : NULL;
    a->coord = -1;
    a->timeout_ms = timeout_ms < 0 ? 30000 : timeout_ms;
    a->op.step = adm_step;
    a->op.free_fn = adm_free;
    a->op.deadline = sl_now_ms() + a->timeout_ms;
    if (name && !a->name) {
        free(a);
        return NULL;
    }
    return a;
}

static char **kv_copy(const char *const *kv)
{
    int n = 0;
    while (kv && kv[n])
        n++;
    char **d = calloc((size_t)n + 1, sizeof *d);
    for (int i = 0; d && i < n; i++)
        if (!(d[i] = strdup(kv[i]))) {
            kv_free(d);
            return NULL;
        }
    return d;
}

/* adm_new with a copy of configs; NULL when out of memory. */
static adm_op *adm_new_kv(int kind, const char *name, const char *const *configs,
                          int timeout_ms)
{
    adm_op *a = adm_new(kind, name, timeout_ms);
    if (a && !(a->kv = kv_copy(configs))) {
        adm_free(&a->op);
        return NULL;
    }
    return a;
}

/* Runs the op; on success moves results into *res (caller frees). */
static int run(sl_admin *ad, adm_op *a, adm_op *res, char *errbuf, size_t size)
{
    sl_client *cl = ad->cl;
    pthread_mutex_lock(&cl->lock);
    sl_op_submit(cl, &a->op);
    int64_t deadline = sl_now_ms() + a->timeout_ms + 1000;
    while (!a->op.done)
        if (sl_cond_wait_until(cl, deadline) == ETIMEDOUT && !a->op.done)
            break;
    if (a->op.done && res) {
        *res = *a;
        a->entries = NULL;
        a->n_entries = 0;
        a->groups = NULL;
        a->n_groups = 0;
        a->tps = NULL;
        a->n_tps = 0;
    }
    int rc = sl_op_wait(cl, &a->op, 0, errbuf, size);
    pthread_mutex_unlock(&cl->lock);
    return rc;
}

sl_admin *sl_admin_new(const sl_conf *conf, char *errbuf, size_t size)
{
    sl_client *cl = sl_client_new(conf, "admin", errbuf, size);
    if (!cl)
        return NULL;
    sl_admin *a = calloc(1, sizeof *a);
    if (!a) {
        sl_client_free(cl);
        return NULL;
    }
    a->cl = cl;
    cl->app_handle = a;
    if (sl_client_start(cl, errbuf, size) != 0) {
        free(a);
        sl_client_free(cl);
        return NULL;
    }
    return a;
}

void sl_admin_destroy(sl_admin *a)
{
    if (!a)
        return;
    sl_client_stop(a->cl);
    sl_client_free(a->cl);
    free(a);
}

int sl_admin_create_topic(sl_admin *ad, const char *topic, int32_t partitions,
                          int16_t rf, const char *const *configs, int timeout_ms,
                          char *errbuf, size_t size)
{
    if (!ad || !topic || partitions == 0 || partitions < -1)
        return SL_E_INVALID_ARG;
    adm_op *a = adm_new_kv(A_CREATE, topic, configs, timeout_ms);
    if (!a)
        return SL_E_NOMEM;
    a->partitions = partitions;
    a->rf = rf;
    return run(ad, a, NULL, errbuf, size);
}

int sl_admin_delete_topic(sl_admin *ad, const char *topic, int timeout_ms,
                          char *errbuf, size_t size)
{
    if (!ad || !topic)
        return SL_E_INVALID_ARG;
    adm_op *a = adm_new(A_DELETE, topic, timeout_ms);
    if (!a)
        return SL_E_NOMEM;
    return run(ad, a, NULL, errbuf, size);
}

int sl_admin_describe_configs(sl_admin *ad, int rtype, const char *name,
                              sl_config_entry **entries, int *count, int timeout_ms,
                              char *errbuf, size_t size)
{
    if (!ad || !name || !entries || !count)
        return SL_E_INVALID_ARG;
    adm_op *a = adm_new(A_DESCRIBE, name, timeout_ms), res;
    if (!a)
        return SL_E_NOMEM;
    a->rtype = rtype;
    memset(&res, 0, sizeof res);
    int rc = run(ad, a, &res, errbuf, size);
    *entries = res.entries;
    *count = res.n_entries;
    if (rc) {
        sl_config_entries_free(res.entries, res.n_entries);
        *entries = NULL;
        *count = 0;
    }
    return rc;
}

int sl_admin_alter_configs(sl_admin *ad, int rtype, const char *name,
                           const char *const *configs, int timeout_ms,
                           char *errbuf, size_t size)
{
    if (!ad || !name)
        return SL_E_INVALID_ARG;
    adm_op *a = adm_new_kv(A_ALTER, name, configs, timeout_ms);
    if (!a)
        return SL_E_NOMEM;
    a->rtype = rtype;
    return run(ad, a, NULL, errbuf, size);
}

/* ListGroups or the topics' Metadata: a list of names. */
static int list_names(sl_admin *ad, int kind, char ***names, int *count, int timeout_ms,
                      char *errbuf, size_t size)
{
    if (!ad || !names || !count)
        return SL_E_INVALID_ARG;
    adm_op *a = adm_new(kind, NULL, timeout_ms), res;
    if (!a)
        return SL_E_NOMEM;
    memset(&res, 0, sizeof res);
    int rc = run(ad, a, &res, errbuf, size);
    *names = res.groups;
    *count = res.n_groups;
    return rc;
}

int sl_admin_list_groups(sl_admin *ad, char ***groups, int *count, int timeout_ms,
                         char *errbuf, size_t size)
{
    return list_names(ad, A_LIST_GROUPS, groups, count, timeout_ms, errbuf, size);
}

int sl_admin_list_topics(sl_admin *ad, char ***topics, int *count, int timeout_ms,
                         char *errbuf, size_t size)
{
    return list_names(ad, A_LIST_TOPICS, topics, count, timeout_ms, errbuf, size);
}

int sl_admin_list_group_offsets(sl_admin *ad, const char *group,
                                sl_topic_partition **parts, int *count, int timeout_ms,
                                char *errbuf, size_t size)
{
    if (!ad || !group || !parts || !count)
        return SL_E_INVALID_ARG;
    adm_op *a = adm_new(A_GROUP_OFFSETS, group, timeout_ms), res;
    if (!a)
        return SL_E_NOMEM;
    memset(&res, 0, sizeof res);
    int rc = run(ad, a, &res, errbuf, size);
    *parts = res.tps;
    *count = res.n_tps;
    return rc;
}

int sl_admin_partition_count(sl_admin *ad, const char *topic, int timeout_ms)
{
    if (!ad || !topic)
        return SL_E_INVALID_ARG;
    sl_mtopic *t;
    pthread_mutex_lock(&ad->cl->lock);
    int rc = sl_md_wait_topic(ad->cl, topic, sl_deadline(timeout_ms), &t);
    if (rc == 0)
        rc = t->npart;
    pthread_mutex_unlock(&ad->cl->lock);
    return rc;
}

void sl_config_entries_free(sl_config_entry *e, int n)
{
    for (int i = 0; e && i < n; i++) {
        free(e[i].name);
        free(e[i].value);
    }
    free(e);
}

void sl_admin_groups_free(char **g, int n)
{
    for (int i = 0; g && i < n; i++)
        free(g[i]);
    free(g);
}

void sl_topic_partitions_free(sl_topic_partition *t, int n)
{
    for (int i = 0; t && i < n; i++)
        free((char *)t[i].topic);
    free(t);
}
