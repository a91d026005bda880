/*
 * Topic admin APIs: CreateTopics v0-4, DeleteTopics v0-3, CreatePartitions
 * v0-1 (none flexible).
 *
 * Each handler works in two passes:
 *   1. parse the whole body, keeping slices into the frame and, for nested
 *      arrays (replica assignments, configs), a copy of the cursor at their
 *      start so they can be read again later.  Nothing changes in this
 *      pass: a malformed request closes the connection with no side effect.
 *   2. act on each entry in request order through the one path for topic
 *      changes (bk_topic_create / bk_topic_delete / bk_topic_add_partitions)
 *      and write its result.  One entry's failure never stops the others.
 *
 * Checks are made in the order a Kafka (ZooKeeper-mode) broker makes them,
 * with its messages, so a request with several problems gets the error
 * Kafka would give.  What metadata/ checks itself (name rules, the '.'/'_'
 * collision, config names and values) is left to it.
 *
 * Brokers named in a manual assignment must be alive (bk_broker_alive) and
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
 *   - TimeoutMs is read and ignored: every change here is synchronous.
 */
#include "daemon/cluster.h"
#include "daemon/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------------- */

static int cmp_idx_by_name(const void *x, const void *y, void *arg)
{
    const kp_str *names = arg;
    int32_t i = *(const int32_t *)x, j = *(const int32_t *)y;
    int c = kp_str_cmp(names[i], names[j]);
    return c ? c : (i > j) - (i < j);
}

/* first[i] = the lowest index holding the same name as i; dup[i] = the name
 * occurs more than once.  O(n log n), so a request listing a million names
 * costs a sort, not a square.  0, or -1 when out of memory. */
static int find_dups(const kp_str *names, int32_t n, int32_t *first, bool *dup)
{
    int32_t *idx = malloc(((size_t)n + 1) * sizeof *idx);
    if (!idx)
        return -1;
    for (int32_t i = 0; i < n; i++)
        idx[i] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, cmp_idx_by_name, (void *)names);
    for (int32_t k = 0; k < n;) {
        int32_t e = k + 1;
        while (e < n && kp_str_cmp(names[idx[k]], names[idx[e]]) == 0)
            e++;
        for (int32_t m = k; m < e; m++) {
            first[idx[m]] = idx[k];
            dup[idx[m]] = e - k > 1;
        }
        k = e;
    }
    free(idx);
    return 0;
}

/* Per-request scratch: names, first occurrence, duplicate flag. */
struct dups {
    kp_str *names;
    int32_t *first;
    bool *dup;
};

static int dups_alloc(struct dups *d, int32_t n)
{
    size_t m = (size_t)n + 1;
    d->names = calloc(m, sizeof *d->names);
    d->first = calloc(m, sizeof *d->first);
    d->dup = calloc(m, sizeof *d->dup);
    return d->names && d->first && d->dup ? 0 : -1;
}

static void dups_free(struct dups *d)
{
    free(d->names);
    free(d->first);
    free(d->dup);
}

/* A handler's per-entry array (n + 1 zeroed entries of size bytes) and its
 * dups scratch; NULL, with nothing left allocated, when out of memory. */
static void *entries_alloc(int32_t n, size_t size, struct dups *d)
{
    void *e = calloc((size_t)n + 1, size);
    if (!e || dups_alloc(d, n)) {
        free(e);
        dups_free(d);
        return NULL;
    }
    return e;
}

/* The end of a parse: true when the body was well formed and the repeated
 * names are marked; otherwise frees entries and d (the caller closes). */
static bool parse_done(kp_rd *in, int32_t n, void *entries, struct dups *d)
{
    if (kp_rd_ok(in) && !find_dups(d->names, n, d->first, d->dup))
        return true;
    free(entries);
    dups_free(d);
    return false;
}

/* ---- CreateTopics ------------------------------------------------------------- */

struct ct_topic {
    kp_str name;
    int32_t num_partitions;
    int16_t replication_factor;
    int32_t nassign;
    kp_rd assign;            /* at the first CreatableReplicaAssignment */
    int32_t nconfigs;
    kp_rd configs;           /* at the first CreateableTopicConfig */
};

/* Reads the manual assignment again and checks it names only live
 * brokers, each once per partition, partitions 0..n-1 each exactly once
 * (KRaft's messages, which are the more precise).  Sets *rf and, when it
 * is valid, *out: the replicas in partition order (n × rf, preference
 * order; the caller frees), as bk_topic_create stores them. */
static int check_assignment(bk_broker *b, const struct ct_topic *t, int16_t *rf,
                            int32_t **out, char *msg, size_t msglen)
{
    int32_t n = t->nassign, replicas = -1;
    bool *seen = calloc((size_t)n + 1, 1);
    bool out_of_range = false;
    int rc = KP_NONE;
    *out = NULL;
    if (!seen) {
        snprintf(msg, msglen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    kp_rd a = t->assign;
    for (int32_t i = 0; i < n && rc == KP_NONE; i++) {
        int32_t pidx = kp_rd_i32(&a);
        int32_t nb = kp_rd_array(&a, 4);
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
        int32_t ids[MD_REPLICAS_MAX];
        for (int32_t j = 0; j < nb; j++) {
            int32_t id = kp_rd_i32(&a);
            if (rc != KP_NONE)
                continue;
            bool again = false;
            for (int32_t k = 0; k < j && k < MD_REPLICAS_MAX; k++)
                again |= ids[k] == id;
            if (j < MD_REPLICAS_MAX)
                ids[j] = id;
            if (!bk_broker_alive(b, id)) {
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
    a = t->assign;
    for (int32_t i = 0; i < n; i++) {
        int32_t pidx = kp_rd_i32(&a);
        int32_t nb = kp_rd_array(&a, 4);
        for (int32_t j = 0; j < nb; j++)
            r[(size_t)pidx * (size_t)replicas + (size_t)j] = kp_rd_i32(&a);
    }
    *out = r;
    return KP_NONE;
}

static int create_one(bk_broker *b, const struct ct_topic *t, bool validate_only,
                      char *msg, size_t msglen)
{
    msg[0] = 0;
    kp_str nm = t->name;
    if (bk_topic_find(b, nm.p, (size_t)nm.len)) {
        snprintf(msg, msglen, "Topic '%.*s' already exists.", (int)nm.len, nm.p);
        return KP_TOPIC_ALREADY_EXISTS;
    }
    /* Null config values, all named at once as Kafka does. */
    kp_rd c = t->configs;
    size_t used = 0;
    for (int32_t i = 0; i < t->nconfigs; i++) {
        kp_str k = kp_rd_string(&c), v = kp_rd_string(&c);
        if (v.len >= 0)
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

    int32_t partitions = t->num_partitions;
    int16_t rf = t->replication_factor;
    int32_t *assignment = NULL;          /* NULL: the broker assigns */
    if (t->nassign > 0) {
        if (partitions != -1 || rf != -1) {
            snprintf(msg, msglen, "Both numPartitions or replicationFactor and "
                     "replicasAssignments were set. Both cannot be used at the "
                     "same time.");
            return KP_INVALID_REQUEST;
        }
        int rc = check_assignment(b, t, &rf, &assignment, msg, msglen);
        if (rc != KP_NONE)
            return rc;
        partitions = t->nassign;
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
        int rc = bk_view_check_replication(b, rf, msg, msglen);
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

    md_kv *kv = calloc((size_t)t->nconfigs + 1, sizeof *kv);
    bool oom = kv == NULL;
    c = t->configs;
    for (int32_t i = 0; kv && i < t->nconfigs; i++) {
        kv[i].name = bk_slice_dup(kp_rd_string(&c), &oom);
        kv[i].value = bk_slice_dup(kp_rd_string(&c), &oom);
    }
    if (oom) {
        snprintf(msg, msglen, "out of memory");
        rc = KP_UNKNOWN_SERVER_ERROR;
    } else {
        rc = bk_topic_create(b, name, partitions, rf, assignment, kv,
                             (size_t)t->nconfigs, validate_only, msg, msglen);
    }
    if (kv)
        md_kv_free(kv, (size_t)t->nconfigs);
    free(assignment);
    return rc;
}

int bk_handle_create_topics(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_rd *in = &r->body;
    /* Name(2) NumPartitions(4) ReplicationFactor(2) Assignments(4) Configs(4) */
    int32_t n = kp_rd_array_nn(in, 16);
    struct dups d = { 0 };
    struct ct_topic *topics = entries_alloc(n, sizeof *topics, &d);
    if (!topics)
        return BK_CLOSE;
    for (int32_t i = 0; i < n; i++) {
        struct ct_topic *t = &topics[i];
        t->name = kp_rd_string_nn(in);
        t->num_partitions = kp_rd_i32(in);
        t->replication_factor = kp_rd_i16(in);
        t->nassign = kp_rd_array_nn(in, 8);
        t->assign = *in;
        for (int32_t j = 0; j < t->nassign; j++) {
            kp_rd_i32(in);                              /* PartitionIndex */
            int32_t nb = kp_rd_array_nn(in, 4);            /* BrokerIds */
            kp_rd_skip(in, (size_t)nb * 4);
        }
        t->nconfigs = kp_rd_array_nn(in, 4);
        t->configs = *in;
        for (int32_t j = 0; j < t->nconfigs; j++) {
            kp_rd_string_nn(in);                           /* Name */
            kp_rd_string(in);                           /* Value (nullable) */
        }
        d.names[i] = t->name;
    }
    kp_rd_i32(in);                                      /* timeoutMs */
    bool validate_only = v >= 1 ? kp_rd_bool(in) : false;
    if (!parse_done(in, n, topics, &d))
        return BK_CLOSE;

    kp_buf *o = r->out;
    if (v >= 2)
        kp_wr_i32(o, 0);                                /* ThrottleTimeMs */
    kp_wr_array(o, n);
    for (int32_t i = 0; i < n; i++) {
        char msg[MD_ERRLEN];
        int rc;
        if (d.dup[i]) {
            snprintf(msg, sizeof msg, "Found multiple entries for this topic.");
            rc = KP_INVALID_REQUEST;
        } else {
            rc = create_one(r->b, &topics[i], validate_only, msg, sizeof msg);
        }
        kp_wr_str(o, topics[i].name);
        kp_wr_i16(o, bk_wire_code(rc));
        if (v >= 1)
            kp_wr_string(o, rc == KP_NONE ? NULL : msg, -1);
    }
    free(topics);
    dups_free(&d);
    return BK_RESPOND;
}

/* ---- DeleteTopics ---------------------------------------------------------------- */

int bk_handle_delete_topics(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_rd *in = &r->body;
    bk_broker *b = r->b;
    int32_t n = kp_rd_array_nn(in, 2);
    struct dups d = { 0 };
    int16_t *codes = entries_alloc(n, sizeof *codes, &d);
    if (!codes)
        return BK_CLOSE;
    for (int32_t i = 0; i < n; i++)
        d.names[i] = kp_rd_string_nn(in);
    kp_rd_i32(in);                                      /* TimeoutMs */
    if (!parse_done(in, n, codes, &d))
        return BK_CLOSE;

    kp_buf *o = r->out;
    if (v >= 1)
        kp_wr_i32(o, 0);                                /* ThrottleTimeMs */
    kp_wr_array(o, n);
    for (int32_t i = 0; i < n; i++) {
        kp_str nm = d.names[i];
        int rc;
        if (!b->cfg->delete_topic_enable) {
            rc = v >= 3 ? KP_TOPIC_DELETION_DISABLED : KP_INVALID_REQUEST;
        } else if (d.first[i] != i) {
            rc = codes[d.first[i]];                     /* deleted once */
        } else if (!bk_topic_find(b, nm.p, (size_t)nm.len)) {
            rc = KP_UNKNOWN_TOPIC_OR_PARTITION;
        } else {
            char name[MD_TOPIC_NAME_MAX + 1], err[MD_ERRLEN];
            kp_str_copy(nm, name, sizeof name);        /* found: a legal name */
            rc = bk_topic_delete(b, name, err, sizeof err);
            if (rc != KP_NONE)
                BK_WARN("deleting topic %s failed: %s", name, err);
        }
        codes[i] = bk_wire_code(rc);
        kp_wr_str(o, nm);
        kp_wr_i16(o, codes[i]);
    }
    free(codes);
    dups_free(&d);
    return BK_RESPOND;
}

/* ---- CreatePartitions ------------------------------------------------------------- */

struct cp_topic {
    kp_str name;
    int32_t count;
    int32_t nassign;         /* -1: null (broker chooses) */
    kp_rd assign;            /* at the first CreatePartitionsAssignment */
};

/* Kafka's checks of a manual assignment for new partitions
 * (ZkAdminManager.createPartitions, AdminZkClient.validateReplicaAssignment).
 * Valid: *out gets the replicas of the new partitions in order (increment
 * × rf, rf the topic's; the caller frees). */
static int check_new_assignment(bk_broker *b, const struct cp_topic *t,
                                int32_t increment, int16_t rf, int32_t **out,
                                char *msg, size_t msglen)
{
    *out = NULL;
    kp_rd a = t->assign;
    /* Unknown brokers first, all of them named (each once, in order). */
    size_t used = 0;
    int32_t shown[16];
    int nshown = 0;
    for (int32_t i = 0; i < t->nassign; i++) {
        int32_t nb = kp_rd_array(&a, 4);
        for (int32_t j = 0; j < nb; j++) {
            int32_t id = kp_rd_i32(&a);
            if (bk_broker_alive(b, id))
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
    if (t->nassign != increment) {
        snprintf(msg, msglen, "Increasing the number of partitions by %d but "
                 "%d assignments provided.", increment, t->nassign);
        return KP_INVALID_REPLICA_ASSIGNMENT;
    }
    a = t->assign;
    for (int32_t i = 0; i < t->nassign; i++) {
        kp_rd here = a;
        int32_t nb = kp_rd_array(&a, 4);
        int32_t pid = t->count - increment + i;
        if (nb <= 0) {
            snprintf(msg, msglen, "Cannot have replication factor of 0 for "
                     "partition id %d.", pid);
            return KP_INVALID_REPLICA_ASSIGNMENT;
        }
        int32_t ids[MD_REPLICAS_MAX];
        bool dup = false;
        for (int32_t j = 0; j < nb; j++) {
            int32_t id = kp_rd_i32(&a);
            for (int32_t k = 0; k < j && k < MD_REPLICAS_MAX; k++)
                dup |= ids[k] == id;
            if (j < MD_REPLICAS_MAX)
                ids[j] = id;
        }
        if (dup) {
            kp_rd_array(&here, 4);
            used = (size_t)snprintf(msg, msglen, "Duplicate brokers not allowed "
                                    "in replica assignment: ");
            for (int32_t j = 0; j < nb && used < msglen; j++)
                used += (size_t)snprintf(msg + used, msglen - used, "%s%d",
                                         j ? ", " : "", kp_rd_i32(&here));
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
    a = t->assign;
    for (int32_t i = 0; i < t->nassign; i++) {
        int32_t nb = kp_rd_array(&a, 4);
        for (int32_t j = 0; j < nb; j++)
            r[(size_t)i * (size_t)rf + (size_t)j] = kp_rd_i32(&a);
    }
    *out = r;
    return KP_NONE;
}

static int add_partitions_one(bk_broker *b, const struct cp_topic *t,
                              bool validate_only, char *msg, size_t msglen)
{
    msg[0] = 0;
    kp_str nm = t->name;
    bk_topic *bt = bk_topic_find(b, nm.p, (size_t)nm.len);
    if (!bt) {
        snprintf(msg, msglen, "The topic '%.*s' does not exist.",
                 nm.len > MD_TOPIC_NAME_MAX ? MD_TOPIC_NAME_MAX : (int)nm.len, nm.p);
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    }
    int32_t old = bt->npartitions;
    if (t->count == old) {
        snprintf(msg, msglen, "Topic already has %d partitions.", old);
        return KP_INVALID_PARTITIONS;
    }
    if (t->count < old) {
        snprintf(msg, msglen, "Topic currently has %d partitions, which is higher "
                 "than the requested %d.", old, t->count);
        return KP_INVALID_PARTITIONS;
    }
    int32_t *assignment = NULL;          /* NULL: the broker assigns */
    if (t->nassign >= 0) {
        int rc = check_new_assignment(b, t, t->count - old,
                                      (int16_t)(bt->npartitions ? bt->parts[0].nreplicas : 1),
                                      &assignment, msg, msglen);
        if (rc != KP_NONE)
            return rc;
    }
    int rc = bk_topic_add_partitions(b, bt->name, t->count, assignment, validate_only,
                                     msg, msglen);
    free(assignment);
    return rc;
}

int bk_handle_create_partitions(bk_req *r)
{
    kp_rd *in = &r->body;
    /* Name(2) Count(4) Assignments(4) */
    int32_t n = kp_rd_array_nn(in, 10);
    struct dups d = { 0 };
    struct cp_topic *topics = entries_alloc(n, sizeof *topics, &d);
    if (!topics)
        return BK_CLOSE;
    for (int32_t i = 0; i < n; i++) {
        struct cp_topic *t = &topics[i];
        t->name = kp_rd_string_nn(in);
        t->count = kp_rd_i32(in);
        t->nassign = kp_rd_array(in, 4);                /* nullable */
        t->assign = *in;
        for (int32_t j = 0; j < t->nassign; j++) {
            int32_t nb = kp_rd_array_nn(in, 4);            /* BrokerIds */
            kp_rd_skip(in, (size_t)nb * 4);
        }
        d.names[i] = t->name;
    }
    kp_rd_i32(in);                                      /* TimeoutMs */
    bool validate_only = kp_rd_bool(in);
    if (!parse_done(in, n, topics, &d))
        return BK_CLOSE;

    kp_buf *o = r->out;
    kp_wr_i32(o, 0);                                    /* ThrottleTimeMs */
    kp_wr_array(o, n);
    for (int32_t i = 0; i < n; i++) {
        char msg[MD_ERRLEN];
        int rc;
        if (d.dup[i]) {
            snprintf(msg, sizeof msg, "Duplicate topic in request.");
            rc = KP_INVALID_REQUEST;
        } else {
            rc = add_partitions_one(r->b, &topics[i], validate_only, msg, sizeof msg);
        }
        kp_wr_str(o, topics[i].name);
        kp_wr_i16(o, bk_wire_code(rc));
        kp_wr_string(o, rc == KP_NONE ? NULL : msg, -1);
    }
    free(topics);
    dups_free(&d);
    return BK_RESPOND;
}
