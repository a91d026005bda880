/*
 * admin/sql_worker.c — SQL off the event loop.
 *
 * A small pool of worker threads, each with its own read-only SQLite
 * connection carrying the operator surface (sql_surface.c), runs the
 * statements of POST /sql and the lag part of GET /metrics.  The event
 * loop never waits for SQL:
 *
 *   loop                         worker
 *   ────                         ──────
 *   sq_submit(job) ──queue──►    sq_run(job)            (may take seconds)
 *   (a bk_worker: daemon/worker.c)
 *                                  │ a write?  ──writes──► loop applies it
 *                                  │           ◄──signal── (bk_topic_*, md_*)
 *                                  │ live numbers? ─snap_ev─► loop publishes
 *                                  │               ◄─snap_cv─ a snapshot
 *   job->done(job) ◄──worker.h W3──
 *
 * Invariants:
 *   1. Only the loop thread touches broker state (topics, logs, groups,
 *      b->db).  Workers see it through published snapshots (immutable,
 *      refcounted) and their own SQLite connections.
 *   2. A write is applied by the loop between two events, exactly as a
 *      Kafka admin request would be: same functions, same validation, same
 *      error text.  The worker blocks for it; the loop never blocks for a
 *      worker.  An offset write or a group delete goes through the group
 *      coordinator's pipeline (gc_offsets_commit, gc_group_delete), as
 *      OffsetCommit and DeleteGroups do: the loop answers it (write_done)
 *      only once it is durable, serving other events meanwhile.  A topic
 *      write the store confirms later (cluster mode: bk_topic_op) is
 *      answered the same way, through a bk_topic_wait (topic_write).
 *   3. On stop, waiting writes are failed and workers are interrupted and
 *      joined before the loop's state is torn down.
 *   4. Workers run SQ_WORKER_NICE below the broker's scheduling priority:
 *      a query is best-effort work next to produce and fetch, so on a busy
 *      box it takes the CPU the data path leaves (a 50,000-row consumer_lag
 *      costs ~25 ms of CPU).  Nothing the loop waits for is held by a
 *      worker while it runs (the mutex only guards the queues and the
 *      snapshot pointer; its SQLite connection is its own, read-only, WAL),
 *      so a slow worker cannot hold the loop back.
 */
#include "admin/sql_worker.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/crypto.h>
#include <sqlite3.h>

#include "daemon/security/sec_authz.h"
#include "daemon/view/view.h"
#include "daemon/replica/replica_logdir.h"
#include "daemon/group/group.h"
#include "daemon/replica/replica.h"
#include "daemon/security/sec_sasl.h"
#include "daemon/api/api_topic_wait.h"
#include "daemon/txn/txn.h"
#include "daemon/registry/registry.h"
#include "daemon/link/link.h"

#define SQ_WORKERS 2
#define SQ_WORKER_NICE 10
/* A statement sees live numbers at least as new as its own start (read your
 * writes: a produce acknowledged before the query shows in it).  The cost
 * is one loop round trip per statement that reads partitions. */
#define SNAP_FRESH_US 0
#define SNAP_WAIT_S 5

typedef struct sq_wreq {
    struct sq_wreq *next;             /* a->writes, then a->applying */
    const sq_write *w;
    int rc;
    char *err;
    size_t errlen;
    bool done;
    pthread_cond_t cv;
    /* a write the loop answers later (offset_set, group_delete, topic_write) */
    struct bk_admin *a;
    md_offset o;
    struct gc_wait *pending;
    bk_topic_wait *topic_wait;
    sr_sql_call *schema_call;         /* SQ_SCHEMA_*: the registry's answer pending */
    const sq_job *job;                /* the statement's (who writes: schema_write) */
    /* SQ_SCRAM_SET: salted by the worker (the PBKDF2 off the loop) */
    uint8_t salt[BK_SASL_SALT], salted[SCRAM_MAX_KEY];
    size_t salted_len;
    lk_tls_pre tls;                   /* SQ_LINK_CREATE: its files read by the worker */
    char *kept;                       /* SQ_LINK_KEPT: the config with its kept secrets */
    size_t kept_cap;
    uint64_t kept_base;               /* SQ_LINK_KEPT: the row they came from (link.c K16) */
} sq_wreq;

/* apply_write's "answered later, when the write is durable". */
#define SQ_LATER INT_MIN

static void write_answered(struct bk_admin *a, sq_wreq *r, int rc);

void sq_job_free(sq_job *j)
{
    if (!j)
        return;
    free(j->sql);
    free(j->principal);
    free(j->host);
    if (j->authorization)
        OPENSSL_cleanse(j->authorization, strlen(j->authorization));
    free(j->authorization);
    sq_topic_set_free(j->readable);
    sq_result_free(&j->res);
    free(j);
}

/* ---- snapshots (loop side) ------------------------------------------------------- */
struct snap_count { size_t n, pool, fol, prod; };

/* The follower states a leader keeps belong to one leader epoch
 * (cl_isr.c I4); older ones say nothing of the current followers. */
static int32_t followers_known(const bk_partition *p)
{
    return p->leading && p->followers_epoch == p->leader_epoch ? p->nfollowers : 0;
}
/* Live numbers exist for the local replicas only (the view's other
 * partitions keep their stored numbers); one name per topic in the pool. */
static void count_topic(bk_topic *t, void *arg)
{
    struct snap_count *c = arg;
    for (int32_t i = 0; i < t->npartitions; i++)
        if (t->parts[i].local) {
            c->n++;
            c->fol += (size_t)followers_known(t->parts[i].local);
            c->prod += t->parts[i].local->producers ? t->parts[i].local->producers->n : 0;
        }
    c->pool += strlen(t->name) + 1;
}

struct snap_fill { sq_snap *s; size_t i, at; };

/* The partition's producers, as DescribeProducers tells them. */
static void fill_producers(sq_snap *s, sq_live *l, const bk_pstate *ps)
{
    l->first_producer = s->nprod;
    for (uint32_t i = 0; ps && i < ps->cap; i++) {
        const bk_producer *e = ps->slots[i];
        if (!e)
            continue;
        const bk_pbatch *last = e->n > 0 ? &e->batches[e->head] : NULL;
        s->prod[s->nprod++] = (sq_producer){
            .producer_id = e->pid, .epoch = e->epoch,
            .last_sequence = last ? last->last_seq : -1,
            .last_timestamp = last ? last->timestamp : -1,
            .coordinator_epoch = e->coord_epoch, .txn_start = e->txn_first,
        };
    }
    l->nproducers = (uint32_t)(s->nprod - l->first_producer);
}
static void fill_topic(bk_topic *t, void *arg)
{
    struct snap_fill *f = arg;
    size_t len = strlen(t->name);
    char *name = f->s->pool + f->at;
    memcpy(name, t->name, len + 1);
    f->at += len + 1;
    for (int32_t i = 0; i < t->npartitions; i++) {
        bk_partition *p = t->parts[i].local;
        if (!p)
            continue;
        sq_live *l = &f->s->rows[f->i++];
        l->topic = name;
        l->partition = p->id;
        l->log_start_offset = seg_log_start(p->log);
        l->log_end_offset = seg_log_end(p->log);
        l->high_watermark = p->high_watermark;
        l->last_stable_offset = replica_partition_lso(p);
        l->size_bytes = (int64_t)seg_size_bytes(p->log);
        l->segments = seg_segment_count(p->log);
        l->last_timestamp = seg_max_timestamp(p->log);
        l->bytes_in = p->bytes_in;
        l->messages_in = p->messages_in;
        l->bytes_out = p->bytes_out;
        l->leading = p->leading;
        l->first_follower = f->s->nfol;
        l->nfollowers = followers_known(p);
        for (int32_t k = 0; k < l->nfollowers; k++)
            f->s->fol[f->s->nfol++] = (sq_follower){ p->followers[k].id,
                                                     p->followers[k].log_end };
        fill_producers(f->s, l, p->producers);
    }
}

/* The transactional ids coordinated here (daemon/txn/txn_ops.c): counted,
 * then copied with their strings into one pool. */
struct txn_fill { sq_snap *s; size_t n, pool, at; };

static void count_txn(const txn_row *row, void *arg)
{
    struct txn_fill *f = arg;
    f->n++;
    f->pool += strlen(row->id) + 1 + txn_row_partitions(row, NULL, 0) + 1;
}

static void fill_txn(const txn_row *row, void *arg)
{
    struct txn_fill *f = arg;
    size_t id = strlen(row->id) + 1, parts = txn_row_partitions(row, NULL, 0) + 1;
    if (f->s->ntxn >= f->n || f->at + id + parts > f->pool)
        return;                       /* cannot grow between the passes; defensive */
    char *p = f->s->txn_pool + f->at;
    memcpy(p, row->id, id);
    txn_row_partitions(row, p + id, parts);
    f->at += id + parts;
    f->s->txn[f->s->ntxn++] = (sq_txn){
        .id = p, .partitions = p + id, .state = row->state, .producer_id = row->pid,
        .epoch = row->epoch, .start_ms = row->start_ms, .update_ms = row->update_ms,
        .timeout_ms = row->timeout_ms,
    };
}

static int snap_txns(sq_snap *s)
{
    struct txn_fill f = { s, 0, 0, 0 };
    txn_rows_foreach(count_txn, &f);
    if (!f.n)
        return 0;
    if (!(s->txn = malloc(f.n * sizeof *s->txn)) || !(s->txn_pool = malloc(f.pool)))
        return -1;
    txn_rows_foreach(fill_txn, &f);
    return 0;
}

/* Cost: O(partitions + transactional ids) copies of a few integers, no I/O. */
static void publish_snapshot(struct bk_admin *a)
{
    struct snap_count c = { 0, 0, 0, 0 };
    view_topics_foreach(a->b, count_topic, &c);
    sq_snap *s = sq_snap_new(c.n, c.pool);
    if (s && ((c.fol && !(s->fol = malloc(c.fol * sizeof *s->fol))) ||
              (c.prod && !(s->prod = malloc(c.prod * sizeof *s->prod))) || snap_txns(s))) {
        sq_snap_unref(s);
        s = NULL;
    }
    if (!s)
        return;
    struct snap_fill f = { s, 0, 0 };
    view_topics_foreach(a->b, fill_topic, &f);
    bk_logdir_info ld;
    replica_logdir_info_get(&ld);
    s->has_logdir = true;
    s->logdir_failed = ld.failed;
    s->logdir_failed_ms = ld.failed_ms;
    s->logdir_failures = (int64_t)ld.failures;
    snprintf(s->logdir_error, sizeof s->logdir_error, "%s", ld.error);
    sq_snap_sort(s);
    pthread_mutex_lock(&a->mu);
    sq_snap *old = a->snap;
    a->snap = s;
    a->snap_wanted = false;
    pthread_cond_broadcast(&a->snap_cv);
    pthread_mutex_unlock(&a->mu);
    sq_snap_unref(old);
}

static void on_snap(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    publish_snapshot(arg);
}

/* Worker side: a snapshot taken after now - SNAP_FRESH_US, asking the loop
 * for a new one when needed (bounded wait: a loop stuck for SNAP_WAIT_S
 * yields an older one; a busy box can starve the loop for a second, and an
 * older snapshot then hides records already acknowledged). */
static sq_snap *worker_live(void *arg)
{
    struct bk_admin *a = arg;
    pthread_mutex_lock(&a->mu);
    int64_t now = sq_mono_us();
    if (!a->snap || now - a->snap->taken_us > SNAP_FRESH_US) {
        if (!a->snap_wanted && !a->stopping) {
            a->snap_wanted = true;
            event_active(a->snap_ev, EV_READ, 0);
        }
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += SNAP_WAIT_S;
        while (!a->stopping && (!a->snap || a->snap->taken_us < now) &&
               pthread_cond_timedwait(&a->snap_cv, &a->mu, &dl) != ETIMEDOUT)
            ;
    }
    sq_snap *s = a->snap;
    if (s)
        sq_snap_ref(s);
    pthread_mutex_unlock(&a->mu);
    return s;
}

/* ---- writes (loop side) --------------------------------------------------------------- */
static int topic_target(bk_broker *b, const char *name, bk_topic **t, char *err, size_t errlen)
{
    if (!name) {
        snprintf(err, errlen, "a topic name is required");
        return KP_INVALID_TOPIC_EXCEPTION;
    }
    *t = view_topic_find(b, name, strlen(name));
    if (!*t) {
        snprintf(err, errlen, "Topic %s does not exist.", name);
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    }
    return KP_NONE;
}

/* A write the coordinator answers once it is durable: the worker keeps
 * waiting, the loop goes on (applying_add), and write_done wakes it. */
static void applying_add(struct bk_admin *a, sq_wreq *r, struct gc_wait *pending)
{
    r->pending = pending;
    r->a = a;
    r->next = a->applying;            /* loop thread only */
    a->applying = r;
}

static void write_done(void *arg, int rc)
{
    sq_wreq *r = arg;
    struct bk_admin *a = r->a;
    for (sq_wreq **pp = &a->applying; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    if (r->w->op == SQ_OFFSET_SET) {
        int res = r->o.result;
        if (rc) {
            snprintf(r->err, r->errlen, "Storing the offset failed; see the broker log.");
            res = KP_UNKNOWN_SERVER_ERROR;
        } else if (res == KP_UNKNOWN_TOPIC_OR_PARTITION) {
            snprintf(r->err, r->errlen, "Partition %s-%lld does not exist.", r->w->s2,
                     (long long)r->w->i1);
        } else if (res != KP_NONE) {
            /* The topic was there when the commit was queued: what failed
             * is storing it (cluster mode: replicating the record in
             * __consumer_offsets, e.g. NOT_ENOUGH_REPLICAS). */
            snprintf(r->err, r->errlen, "Storing the offset of %s-%lld failed: %s.",
                     r->w->s2, (long long)r->w->i1, kp_error_name(res));
        }
        rc = res;
    }
    write_answered(a, r, rc);
}

/* An operator's offset write, through the path OffsetCommit takes. */
static int offset_set(struct bk_admin *a, sq_wreq *r)
{
    const sq_write *w = r->w;
    if (w->i1 < 0 || w->i1 > INT32_MAX) {
        snprintf(r->err, r->errlen, "Partition %s-%lld does not exist.", w->s2,
                 (long long)w->i1);
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    }
    r->o = (md_offset){
        .group_id = w->s1, .group_len = (int32_t)strlen(w->s1),
        .topic = w->s2, .topic_len = (int32_t)strlen(w->s2),
        .partition = (int32_t)w->i1, .offset = w->i2, .leader_epoch = -1,
        .metadata = w->s3, .metadata_len = w->s3 ? (int32_t)strlen(w->s3) : 0,
        .commit_time_ms = bk_now_ms(), .expire_time_ms = -1,
    };
    bk_offset_commit c = {
        .group = kp_str_cstr(w->s1), .generation = -1,
        .member_id = KP_STR_NULL, .instance_id = KP_STR_NULL, .by_operator = true,
        .offs = &r->o, .n = 1, .done = write_done, .arg = r,
    };
    int rc = gc_offsets_commit(a->b, &c, r->err, r->errlen);
    if (rc != KP_NONE || !c.pending)
        return rc;
    applying_add(a, r, c.pending);
    return SQ_LATER;
}

/* DELETE FROM consumer_groups, through the path DeleteGroups takes. */
static int group_delete(struct bk_admin *a, sq_wreq *r)
{
    bk_group_deletion d = { .group_id = r->w->s1 ? r->w->s1 : "", .done = write_done,
                            .arg = r, .err = r->err, .errlen = r->errlen };
    int rc = gc_group_delete(a->b, &d);
    if (rc != KP_NONE || !d.pending)
        return rc;
    applying_add(a, r, d.pending);
    return SQ_LATER;
}

/* UPDATE partitions SET replicas: the target "1,2,3" (s2; NULL cancels)
 * through the path AlterPartitionReassignments takes. */
static int partition_reassign(bk_broker *b, const sq_write *w, bk_topic_op *op, char *err,
                              size_t errlen)
{
    int32_t ids[MD_REPLICAS_MAX + 1];
    int32_t n = 0;
    for (const char *p = w->s2; p && *p;) {
        char *end;
        long id = strtol(p, &end, 10);
        if (end == p || id < 0 || id > INT32_MAX || (*end && *end != ',') ||
            n > MD_REPLICAS_MAX) {
            snprintf(err, errlen, "partitions.replicas must be broker ids separated by "
                     "commas, e.g. '1,2,3' (at most %d), or NULL to cancel a reassignment",
                     MD_REPLICAS_MAX);
            return KP_INVALID_REPLICA_ASSIGNMENT;
        }
        ids[n++] = (int32_t)id;
        p = *end ? end + 1 : end;
    }
    if (w->i1 < 0 || w->i1 > INT32_MAX) {
        snprintf(err, errlen, "Partition %s-%lld does not exist.", w->s1, (long long)w->i1);
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    }
    bk_reassign ra = { .partition = (int32_t)w->i1, .replicas = ids,
                       .nreplicas = w->s2 ? n : -1 };
    int rc = cl_partitions_reassign_request(b, w->s1, &ra, 1, op, err, errlen);
    if (ra.error != KP_NONE) {
        snprintf(err, errlen, "%s", ra.msg);
        return ra.error;
    }
    return rc;
}

/* INSERT / DELETE on acls, through the path CreateAcls and DeleteAcls take
 * (daemon/security/sec_authz.c sec_acl_apply, answered through op once ZooKeeper
 * confirmed it in cluster mode); names checked as CreateAcls checks them. */
static int acl_write(bk_broker *b, const sq_write *w, bk_topic_op *op, char *err,
                     size_t errlen)
{
    md_acl row = { .resource_type = (char *)w->s1, .resource_name = (char *)w->s2,
                   .pattern_type = (char *)w->s3, .principal = (char *)w->s4,
                   .host = (char *)w->s5, .operation = (char *)w->s6,
                   .permission = (char *)w->s7 };
    bool add = w->op == SQ_ACL_CREATE;
    if (add) {
        int rc = sec_acl_validate(sec_res_parse(w->s1), kp_str_cstr(w->s2), sec_pat_parse(w->s3),
                                 kp_str_cstr(w->s4), kp_str_cstr(w->s5), sec_op_parse(w->s6),
                                 sec_perm_parse(w->s7), err, errlen);
        if (rc != KP_NONE)
            return rc;
    }
    return sec_acl_apply(b, add ? NULL : &row, !add, add ? &row : NULL, add, op, err, errlen);
}

static int apply_write(bk_broker *b, const sq_write *w, lk_tls_pre *tls, bk_topic_op *op,
                       char *err, size_t errlen)
{
    bk_topic *t;
    int rc;
    err[0] = 0;
    switch (w->op) {
    case SQ_TOPIC_CREATE: {
        int64_t np = w->i1 < 0 ? b->cfg->num_partitions : w->i1;
        int64_t rf = w->i2 < 0 ? b->cfg->default_replication_factor : w->i2;
        if (np > INT32_MAX || rf > INT16_MAX) {
            snprintf(err, errlen, "Number of partitions or replication factor is too large.");
            return np > INT32_MAX ? KP_INVALID_PARTITIONS : KP_INVALID_REPLICATION_FACTOR;
        }
        return view_topic_create(b, w->s1, (int32_t)np, (int16_t)rf, NULL, NULL, 0, false,
                               op, err, errlen);
    }
    case SQ_TOPIC_DELETE:
        if (!b->cfg->delete_topic_enable) {
            snprintf(err, errlen, "Topic deletion is disabled.");
            return KP_TOPIC_DELETION_DISABLED;
        }
        if ((rc = topic_target(b, w->s1, &t, err, errlen)) != KP_NONE)
            return rc;
        return view_topic_delete(b, w->s1, op, err, errlen);
    case SQ_TOPIC_PARTITIONS:
        if (w->i1 > INT32_MAX || w->i1 < 0) {
            snprintf(err, errlen, "Number of partitions must be larger than 0.");
            return KP_INVALID_PARTITIONS;
        }
        if ((rc = topic_target(b, w->s1, &t, err, errlen)) != KP_NONE)
            return rc;
        if (bk_mirror_partitions_refused(b, w->s1, err, errlen))
            return KP_INVALID_REQUEST;
        return view_topic_add_partitions(b, w->s1, (int32_t)w->i1, NULL, false, op,
                                       err, errlen);
    case SQ_CONFIG_SET:
    case SQ_CONFIG_UNSET:
        if ((rc = topic_target(b, w->s1, &t, err, errlen)) != KP_NONE)
            return rc;
        return view_topic_config_edit(b, w->s1, w->s2 ? w->s2 : "",
                                    w->op == SQ_CONFIG_SET ? w->s3 : NULL, op,
                                    err, errlen);
    case SQ_PARTITION_REASSIGN:
        if ((rc = topic_target(b, w->s1, &t, err, errlen)) != KP_NONE)
            return rc;
        return partition_reassign(b, w, op, err, errlen);
    case SQ_ACL_CREATE:
    case SQ_ACL_DELETE:
        return acl_write(b, w, op, err, errlen);
    case SQ_LINK_CREATE:
        return link_create(b, w->s1, w->s2, w->s3, tls, err, errlen);
    case SQ_LINK_UPDATE:
        return link_update(b, w->s1, w->s2, w->s3, w->link_base, tls, err, errlen);
    case SQ_LINK_DELETE:
        return link_delete(b, w->s1, err, errlen);
    case SQ_MIRROR_CREATE:
        return link_mirror_create(b, w->s1, w->s2, w->s3, w->s4, err, errlen);
    case SQ_MIRROR_DELETE:
        return link_mirror_delete(b, w->s1, err, errlen);
    case SQ_MIRROR_STATE:
        return link_mirror_state(b, w->s1, w->s2, op, err, errlen);
    case SQ_GROUP_DELETE:
    case SQ_OFFSET_SET:
    case SQ_SCRAM_SET:
    case SQ_SCRAM_DELETE:
    case SQ_TXN_ABORT:
    case SQ_SCHEMA_REGISTER:
    case SQ_SCHEMA_DELETE:
    case SQ_SUBJECT_CONFIG:
    case SQ_LINK_KEPT:
        break;                        /* on_writes: their own paths */
    }
    return KP_INVALID_REQUEST;
}

static void topic_result(void *ctx, int32_t i, int rc, const char *err)
{
    sq_wreq *r = ctx;
    (void)i;                          /* one write: entry 0 */
    r->rc = rc;
    if (err != r->err)
        snprintf(r->err, r->errlen, "%s", err);
    const sq_write *w = r->w;
    if (rc == KP_NONE && (w->op == SQ_TOPIC_CREATE || w->op == SQ_TOPIC_DELETE))
        BK_INFO("topic %s %s through SQL", w->s1,
                w->op == SQ_TOPIC_CREATE ? "created" : "deleted");
    if (rc == KP_NONE && (w->op == SQ_ACL_CREATE || w->op == SQ_ACL_DELETE))
        BK_INFO("ACL %s through SQL: %s %s %s %s %s from %s",
                w->op == SQ_ACL_CREATE ? "created" : "deleted", w->s7, w->s4, w->s6, w->s1,
                w->s2, w->s5);
}

static void topic_finish(void *ctx)
{
    sq_wreq *r = ctx;
    r->topic_wait = NULL;
    write_done(r, r->rc);
}

/* A topic (or ACL) write, answered (topic_finish) once the store confirms it: at
 * once standalone; in cluster mode when its op is done, or after
 * admin.sql.timeout.ms. */
static int topic_write(struct bk_admin *a, sq_wreq *r)
{
    int64_t t = a->b->cfg->admin_sql_timeout_ms;
    bk_topic_wait *tw = api_topic_wait_new(NULL, (int32_t)(t > INT32_MAX ? INT32_MAX : t),
                                          topic_result, topic_finish, r);
    if (!tw) {
        snprintf(r->err, r->errlen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    r->a = a;
    int rc = apply_write(a->b, r->w, &r->tls, api_topic_wait_op(tw, 0), r->err, r->errlen);
    api_topic_wait_result(tw, 0, rc, r->err);
    /* Answered already (r may be gone with its worker), or waiting. */
    if (api_topic_wait_start(tw) == BK_DEFER) {
        r->topic_wait = tw;
        applying_add(a, r, NULL);
    }
    return SQ_LATER;
}

/* A SCRAM credential through SQL (the worker ran the PBKDF2: worker_write;
 * daemon/security/sec_sasl.c the users table); durable when the call returns. */
static int scram_write(struct bk_admin *a, sq_wreq *r)
{
    const sq_write *w = r->w;
    if (w->op == SQ_SCRAM_DELETE)
        return sec_sasl_user_delete(a->b, w->s1, w->s2, r->err, r->errlen);
    if (!w->s3) {
        snprintf(r->err, r->errlen, "scram_credentials: a password is required");
        return KP_UNACCEPTABLE_CREDENTIAL;
    }
    int64_t iterations = w->i1 < 0 ? SCRAM_DEFAULT_ITERATIONS : w->i1;
    if (r->salted_len)
        return sec_sasl_user_put_salted(a->b, w->s1, w->s2, r->salt, sizeof r->salt, iterations,
                                       r->salted, r->salted_len, r->err, r->errlen);
    /* Refused (sec_sasl_salt said so): sec_sasl_user_set says why. */
    return sec_sasl_user_set(a->b, w->s1, w->s2, w->s3, iterations, r->err, r->errlen);
}

/* UPDATE transactions SET state = 'CompleteAbort': the coordinator aborts
 * the transaction as its timeout would; answered once the abort is started
 * (PrepareAbort queued), the markers follow. */
static int txn_abort(struct bk_admin *a, sq_wreq *r)
{
    const sq_write *w = r->w;
    if (w->i2 < INT16_MIN || w->i2 > INT16_MAX) {
        snprintf(r->err, r->errlen, "transactions.producer_epoch is out of range");
        return KP_INVALID_REQUEST;
    }
    return txn_operator_abort(a->b, w->s1 ? w->s1 : "", w->i1, (int16_t)w->i2, r->err,
                              r->errlen);
}

/* The registry answered a schema write (daemon/registry/sr_sql.c): its
 * message is the statement's error, Confluent's text and code. */
static void schema_answered(void *arg, int status, int code, const char *msg)
{
    sq_wreq *r = arg;
    r->schema_call = NULL;
    int rc = KP_NONE;
    if (status != 200) {
        /* The code first: Confluent's details may outrun the error's room. */
        snprintf(r->err, r->errlen, "schema registry error_code %d: %s", code, msg);
        rc = status >= 400 && status < 500 ? KP_INVALID_REQUEST : KP_UNKNOWN_SERVER_ERROR;
    } else {
        const sq_write *w = r->w;
        if (w->op == SQ_SCHEMA_REGISTER)
            BK_INFO("schema registry: registered under %s through SQL", w->s1);
        else if (w->op == SQ_SUBJECT_CONFIG)
            BK_INFO("schema registry: %s of %s %s through SQL", w->i1 ? "mode" : "compatibility",
                    w->s1, w->s2 ? w->s2 : "cleared");
        else if (w->i1)
            BK_INFO("schema registry: %s deleted %s version %lld through SQL",
                    w->i2 ? "permanently" : "soft", w->s1, (long long)w->i1);
        else
            BK_INFO("schema registry: %s deleted subject %s through SQL",
                    w->i2 ? "permanently" : "soft", w->s1);
    }
    write_done(r, rc);
}

/* INSERT, DELETE and UPDATE on subjects: the registry's own REST write
 * (sr_sql.c says why it is sent, not called), answered once durable.  Who
 * may: the statement's principal as its REST request would, on SUBJECT
 * ACLs (WRITE, DELETE, ALTER_CONFIGS), checked by the registry (sr_sql.c
 * Q3) — not the cluster ALTER of SQL's other writes (sql_surface.c). */
static int schema_write(struct bk_admin *a, sq_wreq *r)
{
    const sq_write *w = r->w;
    if (!r->job) {                    /* a worker's statement always has one (my_job) */
        snprintf(r->err, r->errlen, "subjects: no statement to name the writer");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    const sr_sql_from from = { .principal = r->job->principal, .host = r->job->host,
                               .authorization = r->job->authorization };
    if (w->op == SQ_SCHEMA_DELETE && (w->i1 < 0 || w->i1 > INT32_MAX)) {
        snprintf(r->err, r->errlen, "subjects.version must be 1..2147483647");
        return KP_INVALID_REQUEST;
    }
    r->schema_call = w->op == SQ_SCHEMA_REGISTER
        ? sr_sql_register(a->b, &from, w->s1, w->s2, w->s3, w->s4, schema_answered, r, r->err,
                          r->errlen)
        : w->op == SQ_SUBJECT_CONFIG
        ? sr_sql_setting(a->b, &from, w->s1, w->i1 != 0, w->s2, schema_answered, r, r->err,
                         r->errlen)
        : sr_sql_delete(a->b, &from, w->s1, (int32_t)w->i1, w->i2 != 0, schema_answered, r,
                        r->err, r->errlen);
    if (!r->schema_call)
        return KP_INVALID_REQUEST;
    applying_add(a, r, NULL);
    return SQ_LATER;
}

/* Wakes the worker waiting for r. */
static void write_answered(struct bk_admin *a, sq_wreq *r, int rc)
{
    pthread_mutex_lock(&a->mu);
    r->rc = rc;
    r->done = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&a->mu);
}

static void on_writes(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    struct bk_admin *a = arg;
    pthread_mutex_lock(&a->mu);
    sq_wreq *list = a->writes;
    a->writes = NULL;
    pthread_mutex_unlock(&a->mu);
    /* The list is newest first; apply in arrival order. */
    sq_wreq *rev = NULL;
    while (list) {
        sq_wreq *n = list->next;
        list->next = rev;
        rev = list;
        list = n;
    }
    for (sq_wreq *r = rev, *n; r; r = n) {
        n = r->next;
        int rc = r->w->op == SQ_OFFSET_SET ? offset_set(a, r)
               : r->w->op == SQ_GROUP_DELETE ? group_delete(a, r)
               : r->w->op == SQ_SCRAM_SET || r->w->op == SQ_SCRAM_DELETE ? scram_write(a, r)
               : r->w->op == SQ_TXN_ABORT ? txn_abort(a, r)
               : r->w->op == SQ_LINK_KEPT ? link_config_kept(a->b, r->w->s1, r->w->s2, r->w->s3,
                                                             r->kept, r->kept_cap, &r->kept_base,
                                                             r->err, r->errlen)
               : r->w->op == SQ_SCHEMA_REGISTER || r->w->op == SQ_SCHEMA_DELETE ||
                 r->w->op == SQ_SUBJECT_CONFIG ? schema_write(a, r)
               : topic_write(a, r);
        if (rc != SQ_LATER)
            write_answered(a, r, rc);
    }
}

/* The job a worker thread runs (job_run): whose statement writes. */
static __thread const sq_job *my_job;

/* Worker side: hands r to the loop and waits for its verdict. */
static int loop_verdict(struct bk_admin *a, sq_wreq *r)
{
    pthread_cond_init(&r->cv, NULL);
    pthread_mutex_lock(&a->mu);
    if (a->stopping) {
        pthread_mutex_unlock(&a->mu);
        pthread_cond_destroy(&r->cv);
        snprintf(r->err, r->errlen, "the broker is shutting down");
        return KP_BROKER_NOT_AVAILABLE;
    }
    r->next = a->writes;
    a->writes = r;
    event_active(a->write_ev, EV_READ, 0);
    while (!r->done)
        pthread_cond_wait(&r->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
    pthread_cond_destroy(&r->cv);
    return r->rc;
}

/* UPDATE cluster_links whose config keeps secrets as SELECT shows them
 * (link.c K16): the loop gives their stored values first, so that the
 * certificate files are read here with the whole config, as an INSERT's. */
static int link_kept(struct bk_admin *a, const sq_write *w, sq_write *upd, char **kept,
                     char *err, size_t errlen)
{
    *kept = NULL;
    if (w->op != SQ_LINK_UPDATE || !w->s3 || !strstr(w->s3, LINK_MASK))
        return KP_NONE;
    size_t cap = LINK_CONFIG_KEPT_MAX;
    sq_write k = { .op = SQ_LINK_KEPT, .s1 = w->s1, .s2 = w->s2, .s3 = w->s3 };
    sq_wreq r = { .w = &k, .err = err, .errlen = errlen, .rc = KP_UNKNOWN_SERVER_ERROR,
                  .job = my_job, .kept = calloc(1, cap), .kept_cap = cap };
    if (!r.kept) {
        snprintf(err, errlen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    int rc = loop_verdict(a, &r);
    if (rc != KP_NONE) {
        OPENSSL_cleanse(r.kept, cap);
        free(r.kept);
        return rc;
    }
    *upd = *w;
    upd->s3 = *kept = r.kept;
    upd->link_base = r.kept_base;     /* checked at apply: the row unchanged since */
    return KP_NONE;
}

/* Worker side: hands w to the loop and waits for its verdict. */
static int worker_write(void *arg, const sq_write *w, char *err, size_t errlen)
{
    struct bk_admin *a = arg;
    sq_write upd;
    char *kept;
    int rc = link_kept(a, w, &upd, &kept, err, errlen);
    if (rc != KP_NONE)
        return rc;
    if (kept)
        w = &upd;
    sq_wreq r = { .w = w, .err = err, .errlen = errlen, .rc = KP_UNKNOWN_SERVER_ERROR,
                  .job = my_job };
    if (w->op == SQ_SCRAM_SET)       /* the PBKDF2 here, not on the loop */
        r.salted_len = sec_sasl_salt(w->s2, w->s3, w->i1 < 0 ? SCRAM_DEFAULT_ITERATIONS : w->i1,
                                    r.salt, r.salted);
    if (w->op == SQ_LINK_CREATE || w->op == SQ_LINK_UPDATE)   /* its files here, not the loop */
        link_tls_prepare(w->s3, &r.tls);
    rc = loop_verdict(a, &r);
    OPENSSL_cleanse(r.salted, sizeof r.salted);
    link_tls_pre_free(&r.tls);        /* unless the link took it over */
    if (kept) {
        OPENSSL_cleanse(kept, LINK_CONFIG_KEPT_MAX);
        free(kept);
    }
    return rc;
}

/* ---- workers --------------------------------------------------------------------------- */
static void run_metrics(sq_conn *c, sq_job *j)
{
    sqlite3_stmt *st;
    kp_buf *o = &j->res.out;
    if (sqlite3_prepare_v2(sq_db(c), "SELECT group_id, topic, partition, lag, committed "
                           "FROM consumer_lag ORDER BY 1, 2, 3", -1, &st, NULL) != SQLITE_OK) {
        kp_buf_printf(o, "# consumer lag unavailable: %s\n", sqlite3_errmsg(sq_db(c)));
        return;
    }
    kp_buf_printf(o, "# HELP sluice_consumer_group_lag Messages between a group's committed "
                  "offset and the high watermark.\n# TYPE sluice_consumer_group_lag gauge\n");
    kp_buf second;
    kp_buf_init(&second);
    kp_buf_printf(&second, "# HELP sluice_consumer_group_committed_offset The group's "
                  "committed offset.\n# TYPE sluice_consumer_group_committed_offset gauge\n");
    while (sqlite3_step(st) == SQLITE_ROW) {
        /* Group ids are free text: escape for the label syntax. */
        char gid[512];
        const char *g = (const char *)sqlite3_column_text(st, 0);
        size_t k = 0;
        for (; g && *g && k + 2 < sizeof gid; g++) {
            if (*g == '"' || *g == '\\') gid[k++] = '\\';
            if (*g == '\n') { gid[k++] = '\\'; gid[k++] = 'n'; continue; }
            gid[k++] = *g;
        }
        gid[k] = 0;
        const char *topic = (const char *)sqlite3_column_text(st, 1);
        int part = sqlite3_column_int(st, 2);
        kp_buf_printf(o, "sluice_consumer_group_lag{group=\"%s\",topic=\"%s\",partition=\"%d\"} %lld\n",
                      gid, topic, part, (long long)sqlite3_column_int64(st, 3));
        kp_buf_printf(&second, "sluice_consumer_group_committed_offset{group=\"%s\",topic=\"%s\","
                      "partition=\"%d\"} %lld\n", gid, topic, part,
                      (long long)sqlite3_column_int64(st, 4));
    }
    sqlite3_finalize(st);
    kp_wr_raw(o, second.data, second.len);
    kp_buf_free(&second);
}

/* The worker thread's own connection (thread_start). */
static __thread sq_conn *my_conn;

static void thread_start(void *arg, int idx)
{
    struct bk_admin *a = arg;
    my_conn = a->conns[idx];
    /* Linux: a thread's nice value is its own (invariant 4). */
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    if (errno == 0)
        (void)setpriority(PRIO_PROCESS, (id_t)gettid(),
                          nice + SQ_WORKER_NICE < 19 ? nice + SQ_WORKER_NICE : 19);
}

static void job_run(bk_work *w, int thread)
{
    (void)thread;
    sq_job *j = (sq_job *)w;
    sq_conn *c = my_conn;
    if (atomic_load(&j->cancelled))
        return;
    if (j->kind == SQ_JOB_SQL) {
        c->read_only = j->read_only;
        c->readable = j->readable;
        my_job = j;
        sq_run(c, j->sql, j->format, j->headers, &j->res);
        my_job = NULL;
        c->read_only = false;
        c->readable = NULL;
    }
    else
        run_metrics(c, j);
}

static void job_done(bk_work *w)
{
    sq_job *j = (sq_job *)w;
    j->done(j);
}

void sq_submit(bk_broker *b, sq_job *j)
{
    struct bk_admin *a = b->admin;
    j->w.run = job_run;
    j->w.done = job_done;
    j->queued_us = bk_mono_us();
    bk_worker_submit(a->wk, &j->w, 0);
}

int sq_workers_start(bk_broker *b, char *err, size_t errlen)
{
    struct bk_admin *a = b->admin;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->snap_cv, NULL);
    a->write_ev = event_new(b->base, -1, 0, on_writes, a);
    a->snap_ev = event_new(b->base, -1, 0, on_snap, a);
    a->snap_timer = event_new(b->base, -1, EV_PERSIST, on_snap, a);
    if (!a->write_ev || !a->snap_ev || !a->snap_timer) {
        snprintf(err, errlen, "cannot create admin events");
        return -1;
    }
    struct timeval sec = { 1, 0 };
    if (bk_event_add(a->snap_timer, &sec, "admin snapshot timer") != 0) {
        snprintf(err, errlen, "cannot arm the admin snapshot timer");
        return -1;
    }
    publish_snapshot(a);

    char dbpath[4200];
    snprintf(dbpath, sizeof dbpath, "%s/sluice.db", b->data_dir);
    sq_env env = {
        .data_dir = b->data_dir, .broker_id = b->cfg->broker_id, .broker_alive = true,
        .broker_defaults = b->cfg->topic_defaults, .nbroker_defaults = b->cfg->ntopic_defaults,
        .live = worker_live, .write = worker_write, .arg = a,
        .max_rows = b->cfg->admin_sql_max_rows, .timeout_ms = b->cfg->admin_sql_timeout_ms,
    };
    a->nthreads = SQ_WORKERS;
    a->conns = calloc((size_t)a->nthreads, sizeof *a->conns);
    if (!a->conns) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < a->nthreads; i++)
        if (sq_open(dbpath, &env, &a->conns[i], err, errlen))
            return -1;
    bk_worker_opts o = { .name = "sluice-sql", .nthreads = a->nthreads,
                         .thread_start = thread_start, .arg = a };
    if (bk_worker_new(b->base, &o, &a->wk) != 0) {
        snprintf(err, errlen, "cannot start an SQL worker thread");
        return -1;
    }
    return 0;
}

/* Under a->mu: wakes every worker waiting on list with an error. */
static void fail_writes(sq_wreq *list)
{
    for (sq_wreq *r = list; r; r = r->next) {
        snprintf(r->err, r->errlen, "the broker is shutting down");
        r->rc = KP_BROKER_NOT_AVAILABLE;
        r->done = true;
        pthread_cond_signal(&r->cv);
    }
}

void sq_workers_stop(bk_broker *b)
{
    struct bk_admin *a = b->admin;
    if (!a || !a->write_ev)
        return;
    pthread_mutex_lock(&a->mu);
    a->stopping = true;
    pthread_cond_broadcast(&a->snap_cv);
    fail_writes(a->writes);           /* the loop will not apply them */
    a->writes = NULL;
    for (sq_wreq *r = a->applying; r; r = r->next) {
        if (r->topic_wait)
            api_topic_wait_cancel(r->topic_wait);   /* its op may still answer */
        else if (r->schema_call)
            sr_sql_cancel(r->schema_call);          /* freed by sr_stop */
        else
            gc_groups_forget(r->pending);
    }
    fail_writes(a->applying);         /* nor answer these */
    a->applying = NULL;
    pthread_mutex_unlock(&a->mu);
    if (a->wk)
        bk_worker_quit(a->wk, false); /* queued jobs stay queued (sq_workers_free) */
    for (int i = 0; a->conns && i < a->nthreads; i++)
        if (a->conns[i])
            sq_interrupt(a->conns[i]);
    if (a->wk)
        bk_worker_join(a->wk);
    for (int i = 0; a->conns && i < SQ_WORKERS; i++)
        sq_close(a->conns[i]);
    free(a->conns);
    a->conns = NULL;
}

/* After evhttp is freed (its close callbacks cancel jobs first). */
void sq_workers_free(bk_broker *b)
{
    struct bk_admin *a = b->admin;
    if (!a || !a->write_ev)
        return;
    /* Jobs never run or never answered: their HTTP requests die with evhttp. */
    if (a->wk) {
        for (bk_work *w = bk_worker_take_all(a->wk), *n; w; w = n) {
            n = w->next;
            sq_job_free((sq_job *)w);
        }
        bk_worker_free(a->wk);
        a->wk = NULL;
    }
    event_free(a->write_ev);
    event_free(a->snap_ev);
    event_free(a->snap_timer);
    a->write_ev = NULL;
    sq_snap_unref(a->snap);
    a->snap = NULL;
    pthread_cond_destroy(&a->snap_cv);
    pthread_mutex_destroy(&a->mu);
}
