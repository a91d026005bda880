/*
 * Topic admin APIs, every version Kafka defines: CreateTopics v0-7,
 * DeleteTopics v0-6, CreatePartitions v0-3 (flexible from v5, v4 and v2).
 * CreateTopics v5+ answers each created topic's partition count,
 * replication factor and configs (as DescribeConfigs lists them), v7+ its
 * topic id; DeleteTopics v6+ names a topic by name or by id.
 *
 * Each handler works in two passes:
 *   1. decode the whole body (kp_dec_<Api>Request, protocol/msgs.c: strings
 *      are slices into the frame, arrays come from r->arena).  Nothing
 *      changes in this pass: a malformed request closes the connection with
 *      no side effect.
 *   2. act on each entry in request order through the one path for topic
 *      changes (view_topic_create / view_topic_delete / view_topic_add_partitions)
 *      and fill its result in the response struct (in r->arena), encoded
 *      once every entry has its answer (kp_enc_<Api>Response).  One
 *      entry's failure never stops the others.  A change the store
 *      confirms later (cluster mode) is waited for through bk_topic_wait
 *      (daemon/api/api_topic_wait.c), which answers each entry in its own slot and
 *      the whole request when the last is in, for at most TimeoutMs.
 *
 * Checks are made in the order a Kafka (ZooKeeper-mode) broker makes them,
 * with its messages, so a request with several problems gets the error
 * Kafka would give.  What metadata/ checks itself (name rules, the '.'/'_'
 * collision, config names and values) is left to it.
 *
 * Brokers named in a manual assignment must be alive (view_broker_alive) and
 * the replication factor no more than the live brokers (standalone: this
 * one broker, so 1).  A valid manual assignment is stored as given.
 *
 * Decisions where Kafka leaves room:
 *   - CreateTopics below v4 with NumPartitions/ReplicationFactor -1 and no
 *     assignment resolves the broker defaults, as Kafka's broker does (only
 *     Kafka's client refuses to send that below v4).
 *   - DeleteTopics with delete.topic.enable=false: INVALID_REQUEST below v3,
 *     TOPIC_DELETION_DISABLED from v3 (KafkaApis does exactly this).
 *   - A name repeated in one DeleteTopics request is deleted once and every
 *     copy gets that result (Kafka deletes a set and answers each entry).
 *   - TimeoutMs bounds the wait for a change the store confirms later
 *     (cluster mode); standalone changes are complete before the answer.
 *   - CreateTopics v5+ with validateOnly answers the partition count and
 *     replication factor it would use, and no configs (there is no topic
 *     to describe yet).
 *   - DeleteTopics v6 with both a name and an id: INVALID_REQUEST ("You
 *     may not specify both topic name and topic id."), an id no topic has:
 *     UNKNOWN_TOPIC_ID (KafkaApis' checks).
 */
#include "daemon/security/sec_authz.h"
#include "daemon/api/api_topic_wait.h"
#include "kp_msgs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------------- */

/* Kafka's rights: CREATE on the cluster or the topic to create it, ALTER on
 * the topic to add partitions (daemon/security/sec_authz.c). */
static bool topic_op_authorized(bk_req *r, kp_str name, int op)
{
    return sec_authorized(r, BK_RES_TOPIC, name, op) ||
           (op == BK_OP_CREATE && BK_AUTHZ_CLUSTER(r, BK_OP_CREATE));
}

static int cmp_idx_by_name(const void *x, const void *y, void *arg)
{
    const kp_str *names = arg;
    int32_t i = *(const int32_t *)x, j = *(const int32_t *)y;
    int c = kp_str_cmp(names[i], names[j]);
    return c ? c : (i > j) - (i < j);
}

/* Per-request scratch, from the request's arena: names, first occurrence,
 * duplicate flag. */
struct dups {
    kp_str *names;
    int32_t *first;
    bool *dup;
};

static int dups_alloc(kp_arena *a, struct dups *d, int32_t n)
{
    size_t m = (size_t)n + 1;
    d->names = kp_arena_alloc(a, m * sizeof *d->names);
    d->first = kp_arena_alloc(a, m * sizeof *d->first);
    d->dup = kp_arena_alloc(a, m * sizeof *d->dup);
    return d->names && d->first && d->dup ? 0 : -1;
}

/* first[i] = the lowest index holding the same name as i; dup[i] = the name
 * occurs more than once.  O(n log n), so a request listing a million names
 * costs a sort, not a square.  0, or -1 when out of memory. */
static int find_dups(kp_arena *a, struct dups *d, int32_t n)
{
    int32_t *idx = kp_arena_alloc(a, ((size_t)n + 1) * sizeof *idx);
    if (!idx)
        return -1;
    for (int32_t i = 0; i < n; i++)
        idx[i] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, cmp_idx_by_name, d->names);
    for (int32_t k = 0; k < n;) {
        int32_t e = k + 1;
        while (e < n && kp_str_cmp(d->names[idx[k]], d->names[idx[e]]) == 0)
            e++;
        for (int32_t m = k; m < e; m++) {
            d->first[idx[m]] = idx[k];
            d->dup[idx[m]] = e - k > 1;
        }
        k = e;
    }
    return 0;
}

/* A response being answered, in r->arena: bk_topic_wait's ctx.  Its
 * entries get their answers through answer_entry, in request order. */
typedef struct answer {
    bk_req *r;
    struct dups d;
    const void *topics;              /* the request's entries, in r->arena */
    const struct create_api *api;    /* CreateTopics, CreatePartitions */
    int32_t n, timeout_ms;
    bool validate_only;
    const void *entries;             /* the response's; NULL: out of memory */
    union {
        kp_CreateTopicsResponse CreateTopics;
        kp_DeleteTopicsResponse DeleteTopics;
        kp_CreatePartitionsResponse CreatePartitions;
    } m;
} answer;

/* For a request naming n topics (the caller fills a->d.names). */
static answer *answer_new(bk_req *r, int32_t n)
{
    answer *a = kp_arena_alloc(&r->arena, sizeof *a);
    if (!a || dups_alloc(&r->arena, &a->d, n))
        return NULL;
    a->r = r;
    return a;
}

/* Once the names and the response's entries (NULL: out of memory) are
 * there: finds the duplicates and starts the wait.  NULL: out of memory. */
static bk_topic_wait *answer_wait(answer *a, const void *entries, int32_t n,
                                  int32_t timeout_ms, bk_topic_result_fn result,
                                  void (*finish)(void *ctx))
{
    if (!entries || find_dups(&a->r->arena, &a->d, n))
        return NULL;
    return api_topic_wait_new(a->r, timeout_ms, result, finish, a);
}

/* One entry's code and, with_text, its message (null on success). */
static void answer_entry(answer *a, int rc, const char *msg, bool with_text,
                         int16_t *code, kp_str *text)
{
    *code = bk_wire_code(rc);
    *text = KP_STR_NULL;
    if (with_text && rc != KP_NONE && kp_arena_str(&a->r->arena, msg, text))
        kp_buf_fail(a->r->out, KP_E_NOMEM);             /* the server closes */
}

/* CreateTopics and CreatePartitions are answered alike by create_topics():
 * every entry names a topic; a name given twice is refused in each copy
 * (dup_msg, Kafka's words for that API); the others go through the API's
 * one(), waited for when the store confirms later; a result carries its
 * message from version text_from on; finish() completes the results just
 * before they are encoded. */
typedef struct create_slot {
    kp_str *name;
    int16_t *code;
    kp_str *text;
} create_slot;

typedef struct create_api {
    int16_t text_from;
    const char *dup_msg;
    int authz_op;                    /* BK_OP_CREATE, BK_OP_ALTER */
    /* Decodes the request into a new answer (create_answer) and fills its
     * names; NULL: malformed or out of memory (the server closes). */
    answer *(*start)(bk_req *r);
    void (*results)(answer *a);      /* the response, a->entries its results */
    create_slot (*slot)(answer *a, int32_t i);
    int (*one)(answer *a, int32_t i, bk_topic_op *op, char *msg, size_t msglen);
    void (*finish)(answer *a);       /* fills what is left and encodes */
} create_api;

/* For a create request's n entries (topics, in r->arena); NULL: out of memory. */
static answer *create_answer(bk_req *r, int32_t n, const void *topics, int32_t timeout_ms,
                             bool validate_only)
{
    answer *a = answer_new(r, n);
    if (!a)
        return NULL;
    a->topics = topics;
    a->n = n;
    a->timeout_ms = timeout_ms;
    a->validate_only = validate_only;
    return a;
}

static void create_result(void *ctx, int32_t i, int rc, const char *msg)
{
    answer *a = ctx;
    create_slot s = a->api->slot(a, i);
    answer_entry(a, rc, msg, a->r->hdr.RequestApiVersion >= a->api->text_from, s.code, s.text);
}

static void create_finish(void *ctx)
{
    answer *a = ctx;
    a->api->finish(a);
}

static int create_topics(bk_req *r, const create_api *api)
{
    answer *a = api->start(r);
    if (!a)
        return BK_CLOSE;
    a->api = api;
    api->results(a);
    bk_topic_wait *w = answer_wait(a, a->entries, a->n, a->timeout_ms, create_result,
                                   create_finish);
    if (!w)
        return BK_CLOSE;
    for (int32_t i = 0; i < a->n; i++) {
        char msg[MD_ERRLEN];
        int rc;
        create_slot s = api->slot(a, i);
        *s.name = a->d.names[i];
        if (a->d.dup[i]) {
            snprintf(msg, sizeof msg, "%s", api->dup_msg);
            rc = KP_INVALID_REQUEST;
        } else if (!topic_op_authorized(r, a->d.names[i], api->authz_op)) {
            snprintf(msg, sizeof msg, "Authorization failed.");
            rc = KP_TOPIC_AUTHORIZATION_FAILED;
        } else {
            rc = api->one(a, i, api_topic_wait_op(w, i), msg, sizeof msg);
        }
        api_topic_wait_result(w, i, rc, msg);
    }
    return api_topic_wait_start(w);
}

/* ---- CreateTopics ------------------------------------------------------------- */

typedef kp_CreateTopicsRequest_CreatableTopic ct_topic;

/* Checks the manual assignment names only live brokers, each once per
 * partition, partitions 0..n-1 each exactly once (KRaft's messages, which
 * are the more precise).  Sets *rf and, when it is valid, *out: the
 * replicas in partition order (n × rf, preference order; the caller
 * frees), as view_topic_create stores them. */
static int check_assignment(bk_broker *b, const ct_topic *t, int16_t *rf,
                            int32_t **out, char *msg, size_t msglen)
{
    int32_t n = t->Assignments_count, replicas = -1;
    bool *seen = calloc((size_t)n + 1, 1);
    bool out_of_range = false;
    int rc = KP_NONE;
    *out = NULL;
    if (!seen) {
        snprintf(msg, msglen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    for (int32_t i = 0; i < n && rc == KP_NONE; i++) {
        const kp_CreateTopicsRequest_CreatableReplicaAssignment *as = &t->Assignments[i];
        int32_t pidx = as->PartitionIndex;
        int32_t nb = as->BrokerIds_count;
        if (pidx >= 0 && pidx < n) {
            if (seen[pidx]) {
                snprintf(msg, msglen, "Found multiple manual partition "
                         "assignments for partition %d", pidx);
                rc = KP_INVALID_REPLICA_ASSIGNMENT;
                break;
            }
            seen[pidx] = true;
        } else {
            out_of_range = true;
        }
        if (nb <= 0) {
            snprintf(msg, msglen, "The manual partition assignment includes "
                     "an empty replica list.");
            rc = KP_INVALID_REPLICA_ASSIGNMENT;
            break;
        }
        for (int32_t j = 0; j < nb && rc == KP_NONE; j++) {
            int32_t id = as->BrokerIds[j];
            bool again = false;
            for (int32_t k = 0; k < j && k < MD_REPLICAS_MAX; k++)
                again |= as->BrokerIds[k] == id;  /* bounded: no n² */
            if (!view_broker_alive(b, id)) {
                snprintf(msg, msglen, "The manual partition assignment includes "
                         "broker %d, but no such broker is registered.", id);
                rc = KP_INVALID_REPLICA_ASSIGNMENT;
            } else if (again) {
                snprintf(msg, msglen, "The manual partition assignment includes "
                         "the broker %d more than once.", id);
                rc = KP_INVALID_REPLICA_ASSIGNMENT;
            }
        }
        if (rc != KP_NONE)
            break;
        if (replicas >= 0 && nb != replicas) {
            snprintf(msg, msglen, "The manual partition assignment includes a "
                     "partition with %d replica(s), but this is not consistent "
                     "with previous partitions, which have %d replica(s).",
                     nb, replicas);
            rc = KP_INVALID_REPLICA_ASSIGNMENT;
            break;
        }
        replicas = nb;
    }
    if (rc == KP_NONE && out_of_range) {
        snprintf(msg, msglen, "partitions should be a consecutive 0-based "
                 "integer sequence");
        rc = KP_INVALID_REPLICA_ASSIGNMENT;
    }
    free(seen);
    *rf = (int16_t)replicas;
    if (rc != KP_NONE)
        return rc;
    /* Valid: every broker is live and distinct, so replicas <= live count. */
    int32_t *r = malloc((size_t)n * (size_t)replicas * sizeof *r);
    if (!r) {
        snprintf(msg, msglen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    for (int32_t i = 0; i < n; i++) {
        const kp_CreateTopicsRequest_CreatableReplicaAssignment *as = &t->Assignments[i];
        memcpy(r + (size_t)as->PartitionIndex * (size_t)replicas, as->BrokerIds,
               (size_t)replicas * sizeof *r);
    }
    *out = r;
    return KP_NONE;
}

static int create_one(bk_broker *b, const ct_topic *t, bool validate_only,
                      bk_topic_op *op, char *msg, size_t msglen)
{
    msg[0] = 0;
    kp_str nm = t->Name;
    if (view_topic_find(b, nm.p, (size_t)nm.len)) {
        snprintf(msg, msglen, "Topic '%.*s' already exists.", (int)nm.len, nm.p);
        return KP_TOPIC_ALREADY_EXISTS;
    }
    /* Null config values, all named at once as Kafka does. */
    int32_t nconfigs = t->Configs_count;
    size_t used = 0;
    for (int32_t i = 0; i < nconfigs; i++) {
        kp_str k = t->Configs[i].Name;
        if (t->Configs[i].Value.len >= 0)
            continue;
        if (used == 0)
            used = (size_t)snprintf(msg, msglen, "Null value not supported for "
                                    "topic configs: ");
        else if (used < msglen)
            used += (size_t)snprintf(msg + used, msglen - used, ",");
        if (used < msglen)
            used += (size_t)snprintf(msg + used, msglen - used, "%.*s",
                                     (int)(k.len > 0 ? k.len : 0), k.p ? k.p : "");
    }
    if (used)
        return KP_INVALID_CONFIG;

    int32_t partitions = t->NumPartitions;
    int16_t rf = t->ReplicationFactor;
    int32_t *assignment = NULL;          /* NULL: the broker assigns */
    if (t->Assignments_count > 0) {
        if (partitions != -1 || rf != -1) {
            snprintf(msg, msglen, "Both numPartitions or replicationFactor and "
                     "replicasAssignments were set. Both cannot be used at the "
                     "same time.");
            return KP_INVALID_REQUEST;
        }
        int rc = check_assignment(b, t, &rf, &assignment, msg, msglen);
        if (rc != KP_NONE)
            return rc;
        partitions = t->Assignments_count;
    } else {
        if (partitions == -1)
            partitions = b->cfg->num_partitions;
        if (rf == -1)
            rf = b->cfg->default_replication_factor;
        if (partitions <= 0) {
            snprintf(msg, msglen, "Number of partitions must be larger than 0.");
            return KP_INVALID_PARTITIONS;
        }
        if (rf <= 0) {
            snprintf(msg, msglen, "Replication factor must be larger than 0.");
            return KP_INVALID_REPLICATION_FACTOR;
        }
        int rc = view_check_replication(b, rf, msg, msglen);
        if (rc != KP_NONE)
            return rc;
    }

    /* Name rules, collision and config checks are metadata/'s. */
    int rc = md_topic_name_check(nm.p, (size_t)nm.len, msg, msglen);
    if (rc != KP_NONE) {
        free(assignment);
        return rc;
    }
    char name[MD_TOPIC_NAME_MAX + 1];
    kp_str_copy(nm, name, sizeof name);

    md_kv *kv = calloc((size_t)nconfigs + 1, sizeof *kv);
    bool oom = kv == NULL;
    for (int32_t i = 0; kv && i < nconfigs; i++) {
        kv[i].name = bk_slice_dup(t->Configs[i].Name, &oom);
        kv[i].value = bk_slice_dup(t->Configs[i].Value, &oom);
    }
    if (oom) {
        snprintf(msg, msglen, "out of memory");
        rc = KP_UNKNOWN_SERVER_ERROR;
    } else {
        rc = view_topic_create(b, name, partitions, rf, assignment, kv,
                             (size_t)nconfigs, validate_only, op, msg, msglen);
    }
    if (kv)
        md_kv_free(kv, (size_t)nconfigs);
    free(assignment);
    return rc;
}

/* CreateTopics v5+: what was created (or, validateOnly, would be). */
typedef kp_CreateTopicsResponse_CreatableTopicResult ct_result;

struct ct_configs { answer *a; ct_result *res; };

static void ct_config(void *arg, const char *name, const char *value, int8_t source,
                      bool sensitive)
{
    struct ct_configs *c = arg;
    kp_CreateTopicsResponse_CreatableTopicConfigs *e = &c->res->Configs[c->res->Configs_count++];
    *e = (kp_CreateTopicsResponse_CreatableTopicConfigs){
        .ReadOnly = false, .ConfigSource = source, .IsSensitive = sensitive,
        .Value = KP_STR_NULL,
    };
    if (kp_arena_str(&c->a->r->arena, name, &e->Name) ||
        (value && kp_arena_str(&c->a->r->arena, value, &e->Value)))
        kp_buf_fail(c->a->r->out, KP_E_NOMEM);         /* the server closes */
}

static void ct_fill(answer *a)
{
    bk_req *r = a->r;
    if (r->hdr.RequestApiVersion < 5)
        return;
    const ct_topic *q = a->topics;
    size_t ndefs;
    md_config_defs(&ndefs);
    for (int32_t i = 0; i < a->m.CreateTopics.Topics_count; i++) {
        ct_result *res = &a->m.CreateTopics.Topics[i];
        /* Java's defaults for a result that created nothing */
        res->Configs_count = 0;
        res->NumPartitions = -1;
        res->ReplicationFactor = -1;
        if (res->ErrorCode != KP_NONE)
            continue;
        const bk_topic *t = view_topic_find(r->b, res->Name.p, (size_t)res->Name.len);
        /* Kafka: configs and metadata only to whom may DESCRIBE_CONFIGS */
        if (!sec_authorized(r, BK_RES_TOPIC, res->Name, BK_OP_DESCRIBE_CONFIGS)) {
            res->TopicConfigErrorCode = KP_TOPIC_AUTHORIZATION_FAILED;
            if (t && r->hdr.RequestApiVersion >= 7)
                memcpy(res->TopicId, t->id, 16);
            continue;
        }
        if (!t) {                                       /* validateOnly */
            const ct_topic *x = &q[i];
            res->NumPartitions = x->Assignments_count > 0 ? x->Assignments_count
                                 : x->NumPartitions == -1 ? r->b->cfg->num_partitions
                                 : x->NumPartitions;
            res->ReplicationFactor =
                x->Assignments_count > 0 ? (int16_t)x->Assignments[0].BrokerIds_count
                : x->ReplicationFactor == -1 ? r->b->cfg->default_replication_factor
                : x->ReplicationFactor;
            res->Configs_count = 0;
            continue;
        }
        if (r->hdr.RequestApiVersion >= 7)
            memcpy(res->TopicId, t->id, 16);
        res->NumPartitions = t->npartitions;
        res->ReplicationFactor = (int16_t)(t->npartitions > 0 ? t->parts[0].nreplicas : 0);
        res->Configs = kp_arena_alloc(&r->arena, (ndefs + 1) * sizeof *res->Configs);
        if (!res->Configs) {
            kp_buf_fail(r->out, KP_E_NOMEM);
            return;
        }
        res->Configs_count = 0;
        struct ct_configs c = { a, res };
        if (api_topic_configs_list(r->b, t->name, ct_config, &c) != KP_NONE)
            res->TopicConfigErrorCode = KP_UNKNOWN_SERVER_ERROR;  /* Kafka's tag 0 */
    }
}

static answer *ct_start(bk_req *r)
{
    kp_CreateTopicsRequest q;
    if (kp_dec_CreateTopicsRequest(&r->body, r->hdr.RequestApiVersion, &q, &r->arena))
        return NULL;
    /* validateOnly is v1+ (the decoder leaves it false below) */
    answer *a = create_answer(r, q.Topics_count, q.Topics, q.timeoutMs, q.validateOnly);
    for (int32_t i = 0; a && i < a->n; i++)
        a->d.names[i] = q.Topics[i].Name;
    return a;
}

static void ct_results(answer *a)
{
    kp_CreateTopicsResponse *m = &a->m.CreateTopics;
    kp_init_CreateTopicsResponse(m);
    m->Topics_count = a->n;
    m->Topics = kp_arena_alloc(&a->r->arena, ((size_t)a->n + 1) * sizeof *m->Topics);
    a->entries = m->Topics;
}

static create_slot ct_slot(answer *a, int32_t i)
{
    kp_CreateTopicsResponse_CreatableTopicResult *e = &a->m.CreateTopics.Topics[i];
    return (create_slot){ &e->Name, &e->ErrorCode, &e->ErrorMessage };
}

static int ct_one(answer *a, int32_t i, bk_topic_op *op, char *msg, size_t msglen)
{
    const ct_topic *t = a->topics;
    return create_one(a->r->b, &t[i], a->validate_only, op, msg, msglen);
}

static void ct_finish(answer *a)
{
    ct_fill(a);
    kp_enc_CreateTopicsResponse(a->r->out, a->r->hdr.RequestApiVersion, &a->m.CreateTopics);
}

/* Messages v1+. */
static const create_api create_topics_api = {
    1, "Found multiple entries for this topic.", BK_OP_CREATE,
    ct_start, ct_results, ct_slot, ct_one, ct_finish,
};

int api_handle_create_topics(bk_req *r)
{
    return create_topics(r, &create_topics_api);
}

/* ---- DeleteTopics ---------------------------------------------------------------- */

static void dt_result(void *ctx, int32_t i, int rc, const char *err)
{
    answer *a = ctx;
    if (rc != KP_NONE && rc != KP_INVALID_REQUEST && rc != KP_UNKNOWN_TOPIC_ID &&
        err[0])                                         /* the delete failed */
        BK_WARN("deleting topic %.*s failed: %s", (int)a->d.names[i].len,
                a->d.names[i].p, err);
    answer_entry(a, rc, err, a->r->hdr.RequestApiVersion >= 5 && err[0],  /* v5+ */
                 &a->m.DeleteTopics.Responses[i].ErrorCode,
                 &a->m.DeleteTopics.Responses[i].ErrorMessage);
}

static void dt_finish(void *ctx)
{
    answer *a = ctx;
    kp_DeleteTopicsResponse *m = &a->m.DeleteTopics;
    for (int32_t i = 0; i < m->Responses_count; i++)   /* deleted once */
        if (m->Responses[i].ErrorCode != KP_UNKNOWN_TOPIC_ID &&   /* v6: refused alone */
            m->Responses[i].ErrorCode != KP_TOPIC_AUTHORIZATION_FAILED &&
            m->Responses[i].ErrorCode != KP_INVALID_REQUEST)
            m->Responses[i].ErrorCode = m->Responses[a->d.first[i]].ErrorCode;
    kp_enc_DeleteTopicsResponse(a->r->out, a->r->hdr.RequestApiVersion, m);
}

struct id_search { const uint8_t *id; bk_topic *found; };

static void match_id(bk_topic *t, void *arg)
{
    struct id_search *s = arg;
    if (!memcmp(t->id, s->id, 16))
        s->found = t;
}

/* A scan: DeleteTopics by id is rare and the topic count small. */
static bk_topic *topic_by_id(bk_broker *b, const uint8_t id[16])
{
    struct id_search s = { id, NULL };
    view_topics_foreach(b, match_id, &s);
    return s.found;
}

int api_handle_delete_topics(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    bk_broker *b = r->b;
    kp_DeleteTopicsRequest q;
    if (kp_dec_DeleteTopicsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    int32_t n = v >= 6 ? q.Topics_count : q.TopicNames_count;   /* v6+: names or ids */
    answer *a = answer_new(r, n);
    if (!a)
        return BK_CLOSE;
    kp_DeleteTopicsResponse *m = &a->m.DeleteTopics;
    kp_init_DeleteTopicsResponse(m);
    m->Responses_count = n;
    m->Responses = kp_arena_alloc(&r->arena, ((size_t)n + 1) * sizeof *m->Responses);
    if (!m->Responses)
        return BK_CLOSE;
    /* Each entry's name (by id: the topic's, "" when no topic has it) and
     * its id; an entry refused before any lookup keeps its error here. */
    int16_t *early = kp_arena_alloc(&r->arena, ((size_t)n + 1) * sizeof *early);
    if (!early)
        return BK_CLOSE;
    for (int32_t i = 0; i < n; i++) {
        kp_DeleteTopicsResponse_DeletableTopicResult *res = &m->Responses[i];
        early[i] = KP_NONE;
        if (v < 6) {
            a->d.names[i] = q.TopicNames[i];
            continue;
        }
        const kp_DeleteTopicsRequest_DeleteTopicState *ts = &q.Topics[i];
        bool by_id = !kp_msg_uuid_zero(ts->TopicId);
        memcpy(res->TopicId, ts->TopicId, 16);
        a->d.names[i] = ts->Name.len >= 0 ? ts->Name : kp_str_cstr("");
        if (by_id && ts->Name.len >= 0) {
            early[i] = KP_INVALID_REQUEST;
        } else if (by_id) {
            const bk_topic *t = topic_by_id(b, ts->TopicId);
            if (!t)
                early[i] = KP_UNKNOWN_TOPIC_ID;
            else if (!sec_authorized(r, BK_RES_TOPIC, kp_str_cstr(t->name), BK_OP_DESCRIBE))
                early[i] = KP_TOPIC_AUTHORIZATION_FAILED;  /* Kafka: its name is not told */
            else if (kp_arena_str(&r->arena, t->name, &a->d.names[i]))
                return BK_CLOSE;              /* a copy: the delete frees t */
        } else {
            const bk_topic *t = view_topic_find(b, ts->Name.p, (size_t)(ts->Name.len > 0 ? ts->Name.len : 0));
            if (t)
                memcpy(res->TopicId, t->id, 16);
        }
    }
    bk_topic_wait *w = answer_wait(a, m->Responses, n, q.TimeoutMs, dt_result, dt_finish);
    if (!w)
        return BK_CLOSE;
    for (int32_t i = 0; i < n; i++) {
        kp_str nm = a->d.names[i];
        char err[MD_ERRLEN] = "";
        int rc = KP_NONE;                               /* copies: dt_finish */
        /* v6: null for an id no topic has (Kafka's answer) */
        m->Responses[i].Name = v >= 6 && (early[i] == KP_UNKNOWN_TOPIC_ID ||
                                          early[i] == KP_TOPIC_AUTHORIZATION_FAILED)
                               ? KP_STR_NULL : nm;
        if (early[i] == KP_INVALID_REQUEST) {
            snprintf(err, sizeof err, "You may not specify both topic name and topic id.");
            rc = KP_INVALID_REQUEST;
        } else if (early[i] == KP_TOPIC_AUTHORIZATION_FAILED) {
            rc = KP_TOPIC_AUTHORIZATION_FAILED;
        } else if (early[i]) {
            snprintf(err, sizeof err, "This server does not host this topic ID.");
            rc = early[i];
        } else if (!b->cfg->delete_topic_enable) {
            rc = v >= 3 ? KP_TOPIC_DELETION_DISABLED : KP_INVALID_REQUEST;
        } else if (!sec_authorized(r, BK_RES_TOPIC, nm, BK_OP_DELETE)) {
            rc = KP_TOPIC_AUTHORIZATION_FAILED;
        } else if (a->d.first[i] != i) {
            /* deleted once: dt_finish copies the first copy's answer */
        } else if (!view_topic_find(b, nm.p, (size_t)nm.len)) {
            rc = KP_UNKNOWN_TOPIC_OR_PARTITION;
        } else {
            char name[MD_TOPIC_NAME_MAX + 1];
            kp_str_copy(nm, name, sizeof name);        /* found: a legal name */
            rc = view_topic_delete(b, name, api_topic_wait_op(w, i), err, sizeof err);
        }
        api_topic_wait_result(w, i, rc, err);
    }
    return api_topic_wait_start(w);
}

/* ---- CreatePartitions ------------------------------------------------------------- */

typedef kp_CreatePartitionsRequest_CreatePartitionsTopic cp_topic;

/* Kafka's checks of a manual assignment for new partitions
 * (ZkAdminManager.createPartitions, AdminZkClient.validateReplicaAssignment).
 * Valid: *out gets the replicas of the new partitions in order (increment
 * × rf, rf the topic's; the caller frees). */
static int check_new_assignment(bk_broker *b, const cp_topic *t,
                                int32_t increment, int16_t rf, int32_t **out,
                                char *msg, size_t msglen)
{
    *out = NULL;
    int32_t nassign = t->Assignments_count;
    /* Unknown brokers first, all of them named (each once, in order). */
    size_t used = 0;
    int32_t shown[16];
    int nshown = 0;
    for (int32_t i = 0; i < nassign; i++) {
        const kp_CreatePartitionsRequest_CreatePartitionsAssignment *as = &t->Assignments[i];
        for (int32_t j = 0; j < as->BrokerIds_count; j++) {
            int32_t id = as->BrokerIds[j];
            if (view_broker_alive(b, id))
                continue;
            bool again = false;
            for (int k = 0; k < nshown; k++)
                again |= shown[k] == id;
            if (again || nshown == (int)(sizeof shown / sizeof shown[0]))
                continue;
            shown[nshown++] = id;
            if (used < msglen)
                used += (size_t)snprintf(msg + used, msglen - used, "%s%d",
                                         used ? ", " : "Unknown broker(s) in "
                                         "replica assignment: ", id);
        }
    }
    if (used) {
        if (used < msglen)
            snprintf(msg + used, msglen - used, ".");
        return KP_INVALID_REPLICA_ASSIGNMENT;
    }
    if (nassign != increment) {
        snprintf(msg, msglen, "Increasing the number of partitions by %d but "
                 "%d assignments provided.", increment, nassign);
        return KP_INVALID_REPLICA_ASSIGNMENT;
    }
    for (int32_t i = 0; i < nassign; i++) {
        const kp_CreatePartitionsRequest_CreatePartitionsAssignment *as = &t->Assignments[i];
        int32_t nb = as->BrokerIds_count;
        int32_t pid = t->Count - increment + i;
        if (nb <= 0) {
            snprintf(msg, msglen, "Cannot have replication factor of 0 for "
                     "partition id %d.", pid);
            return KP_INVALID_REPLICA_ASSIGNMENT;
        }
        bool dup = false;
        for (int32_t j = 0; j < nb; j++)
            for (int32_t k = 0; k < j && k < MD_REPLICAS_MAX; k++)
                dup |= as->BrokerIds[k] == as->BrokerIds[j];
        if (dup) {
            used = (size_t)snprintf(msg, msglen, "Duplicate brokers not allowed "
                                    "in replica assignment: ");
            for (int32_t j = 0; j < nb && used < msglen; j++)
                used += (size_t)snprintf(msg + used, msglen - used, "%s%d",
                                         j ? ", " : "", as->BrokerIds[j]);
            if (used < msglen)
                snprintf(msg + used, msglen - used, " for partition id %d.", pid);
            return KP_INVALID_REPLICA_ASSIGNMENT;
        }
        if (nb != rf) {
            snprintf(msg, msglen, "Inconsistent replication factor between "
                     "partitions, partition 0 has %d while partitions [%d] have "
                     "replication factors [%d], respectively.", (int)rf, pid, nb);
            return KP_INVALID_REPLICA_ASSIGNMENT;
        }
    }
    int32_t *r = malloc(((size_t)increment * (size_t)rf + 1) * sizeof *r);
    if (!r) {
        snprintf(msg, msglen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    for (int32_t i = 0; i < nassign; i++)
        memcpy(r + (size_t)i * (size_t)rf, t->Assignments[i].BrokerIds,
               (size_t)rf * sizeof *r);
    *out = r;
    return KP_NONE;
}

static int add_partitions_one(bk_broker *b, const cp_topic *t, bool validate_only,
                              bk_topic_op *op, char *msg, size_t msglen)
{
    msg[0] = 0;
    kp_str nm = t->Name;
    bk_topic *bt = view_topic_find(b, nm.p, (size_t)nm.len);
    if (!bt) {
        snprintf(msg, msglen, "The topic '%.*s' does not exist.",
                 nm.len > MD_TOPIC_NAME_MAX ? MD_TOPIC_NAME_MAX : (int)nm.len, nm.p);
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    }
    if (bk_mirror_partitions_refused(b, bt->name, msg, msglen))
        return KP_INVALID_REQUEST;
    int32_t old = bt->npartitions;
    if (t->Count == old) {
        snprintf(msg, msglen, "Topic already has %d partitions.", old);
        return KP_INVALID_PARTITIONS;
    }
    if (t->Count < old) {
        snprintf(msg, msglen, "Topic currently has %d partitions, which is higher "
                 "than the requested %d.", old, t->Count);
        return KP_INVALID_PARTITIONS;
    }
    int32_t *assignment = NULL;          /* NULL: the broker assigns */
    if (t->Assignments_count >= 0) {     /* -1: null, the broker chooses */
        int rc = check_new_assignment(b, t, t->Count - old,
                                      (int16_t)(bt->npartitions ? bt->parts[0].nreplicas : 1),
                                      &assignment, msg, msglen);
        if (rc != KP_NONE)
            return rc;
    }
    int rc = view_topic_add_partitions(b, bt->name, t->Count, assignment, validate_only,
                                     op, msg, msglen);
    free(assignment);
    return rc;
}

static answer *cp_start(bk_req *r)
{
    kp_CreatePartitionsRequest q;
    if (kp_dec_CreatePartitionsRequest(&r->body, r->hdr.RequestApiVersion, &q, &r->arena))
        return NULL;
    answer *a = create_answer(r, q.Topics_count, q.Topics, q.TimeoutMs, q.ValidateOnly);
    for (int32_t i = 0; a && i < a->n; i++)
        a->d.names[i] = q.Topics[i].Name;
    return a;
}

static void cp_results(answer *a)
{
    kp_CreatePartitionsResponse *m = &a->m.CreatePartitions;
    kp_init_CreatePartitionsResponse(m);
    m->Results_count = a->n;
    m->Results = kp_arena_alloc(&a->r->arena, ((size_t)a->n + 1) * sizeof *m->Results);
    a->entries = m->Results;
}

static create_slot cp_slot(answer *a, int32_t i)
{
    kp_CreatePartitionsResponse_CreatePartitionsTopicResult *e = &a->m.CreatePartitions.Results[i];
    return (create_slot){ &e->Name, &e->ErrorCode, &e->ErrorMessage };
}

static int cp_one(answer *a, int32_t i, bk_topic_op *op, char *msg, size_t msglen)
{
    const cp_topic *t = a->topics;
    return add_partitions_one(a->r->b, &t[i], a->validate_only, op, msg, msglen);
}

static void cp_finish(answer *a)
{
    kp_enc_CreatePartitionsResponse(a->r->out, a->r->hdr.RequestApiVersion,
                                    &a->m.CreatePartitions);
}

static const create_api create_partitions_api = {
    0, "Duplicate topic in request.", BK_OP_ALTER,
    cp_start, cp_results, cp_slot, cp_one, cp_finish,
};

int api_handle_create_partitions(bk_req *r)
{
    return create_topics(r, &create_partitions_api);
}
