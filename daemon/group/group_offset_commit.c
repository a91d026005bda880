/*
 * Committed offsets: gc_offsets_commit (the one path for a commit),
 * OffsetCommit v0-9, OffsetFetch v0-9 (decoded and encoded by the generated
 * codec, kp_msgs.h), and the offsets.retention.minutes timer.
 *
 * Design note.
 *
 * A commit comes from a consumer (OffsetCommit) or from an operator (the
 * SQL surface's UPDATE / INSERT of committed_offsets, applied on the loop
 * for a waiting SQL worker, daemon/sql_worker.c).  Both call
 * gc_offsets_commit, which validates as Kafka does (the coordinator
 * question first; for a member, group generation and member id as
 * doCommitOffsets; for an operator, a group without members, all or
 * nothing, with Kafka's wording; for every entry, topic/partition
 * existence and metadata size) and queues the valid entries on the
 * coordinator's batch.  A commit is acknowledged only once it is durable
 * in SQLite.  Durability costs one WAL fdatasync per sync, so nothing is
 * written by the caller: the end-of-turn event (daemon/group/group_persist.c,
 * run_turn) copies every queued commit of the loop turn — from all
 * connections and the operator — into one job (gc_commit_to_job, the
 * write half), together with the group state that changed in that turn,
 * and hands it to the metadata sync worker (daemon/md_sync.c), which
 * writes it in one transaction on its own connection and syncs the WAL.
 * Once that sync is reported, gc_commit_apply (the apply half) fills in
 * each entry's result and the caller's done answers: the OffsetCommit
 * response, or the SQL worker's wait.  Cost per partition on the loop:
 * copying one row; no SQL, no fsync, and the loop never waits.
 *
 * Invariants:
 *   O1. The caller's entries live until done runs or gc_groups_forget;
 *       an entry's result is KP_NONE exactly while it is queued to be
 *       stored, and final once done runs.
 *   O2. Every commit reaches SQLite through a job (no md_offset_commit on
 *       the loop's handle), so commits, group rows and deletes are
 *       written in the order they were queued (group_persist.c C6).
 *
 * Offsets are not cached in memory: OffsetFetch reads SQLite (one indexed
 * range scan per request), which is what an operator's SQL sees too.
 */
#include "daemon/security/sec_authz.h"
#include "daemon/group/group_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

/* ---- the one path: gc_offsets_commit ------------------------------------------- */

/* Kafka's handleCommitOffsets/doCommitOffsets: the error for the whole
 * request, or 0 to store.  *create: the group must be created (a simple
 * consumer committing for a group that does not exist yet). */
static int16_t commit_group_error(kp_str group, int32_t gen, kp_str member,
                                  kp_str instance, bool *create)
{
    *create = false;
    gc_group *g = gc_group_find(group.p ? group.p : "", group.len > 0 ? (size_t)group.len : 0);
    if (!g) {
        if (gen < 0) {
            *create = true;
            return KP_NONE;
        }
        return KP_ILLEGAL_GENERATION;
    }
    if (g->state == GC_DEAD)
        return KP_COORDINATOR_NOT_AVAILABLE;   /* being deleted: retry */
    if (gc_static_fenced(g, member, instance))
        return KP_FENCED_INSTANCE_ID;
    if (gen < 0 && g->state == GC_EMPTY)
        return KP_NONE;               /* offsets storage only */
    gc_member *m = gc_member_of(g, member);
    if (!m)
        return KP_UNKNOWN_MEMBER_ID;
    if (gen != g->generation)
        return KP_ILLEGAL_GENERATION;
    if (g->state == GC_COMPLETING)
        return KP_REBALANCE_IN_PROGRESS;
    gc_touch(m);                      /* Stable or PreparingRebalance */
    return KP_NONE;
}

/* An operator moves offsets only while nobody consumes (Kafka's
 * ResetOffsets rule, with its wording). */
static int operator_group_error(kp_str group, char *err, size_t errlen)
{
    gc_group *g = gc_group_find(group.p ? group.p : "", group.len > 0 ? (size_t)group.len : 0);
    if (g && g->state == GC_DEAD) {
        snprintf(err, errlen, "The group %s is being deleted; try again.", g->id);
        return KP_COORDINATOR_NOT_AVAILABLE;
    }
    if (g && g->nmembers > 0) {
        snprintf(err, errlen, "Assignments can only be reset if the group '%s' is "
                 "inactive, but the current state is %s.", g->id, gc_state_name(g->state));
        return KP_NON_EMPTY_GROUP;
    }
    return KP_NONE;
}

static int operator_entry_error(bk_broker *b, const md_offset *o, char *err, size_t errlen)
{
    if (o->result == KP_UNKNOWN_TOPIC_OR_PARTITION)
        snprintf(err, errlen, "Partition %.*s-%d does not exist.", (int)o->topic_len,
                 o->topic, o->partition);
    else if (o->result == KP_OFFSET_METADATA_TOO_LARGE)
        snprintf(err, errlen, "The metadata is longer than offset.metadata.max.bytes (%d).",
                 b->cfg->offset_metadata_max_bytes);
    return o->result;
}

int gc_offsets_commit(bk_broker *b, bk_offset_commit *c, char *err, size_t errlen)
{
    c->pending = NULL;
    err[0] = 0;
    int16_t cerr = gc_coordinator_error(c->group);
    if (cerr) {                       /* every entry, before any other check */
        for (size_t i = 0; i < c->n; i++)
            c->offs[i].result = cerr;
        if (c->by_operator)
            snprintf(err, errlen, "This broker is not the coordinator of group %.*s.",
                     c->group.len > 0 ? (int)c->group.len : 0, c->group.p ? c->group.p : "");
        return c->by_operator ? cerr : KP_NONE;
    }
    bool create = false;
    int16_t gerr = KP_NONE;
    if (c->by_operator) {
        int rc = operator_group_error(c->group, err, errlen);
        if (rc)
            return rc;
    } else if (c->txn) {
        gerr = gc_txn_group_error(c->group, c->generation, c->member_id, c->instance_id,
                                  &create);
    } else if (!c->delete_offsets) {
        gerr = commit_group_error(c->group, c->generation, c->member_id, c->instance_id,
                                  &create);
    }
    size_t to_store = 0;
    for (size_t i = 0; i < c->n; i++) {
        md_offset *o = &c->offs[i];
        kp_str topic = { o->topic, o->topic_len };
        if (c->authz && !sec_authorized(c->authz, BK_RES_TOPIC, topic, BK_OP_READ))
            o->result = KP_TOPIC_AUTHORIZATION_FAILED;      /* Kafka's, first */
        else if (o->topic_len <= 0 || !view_partition(b, topic, o->partition))
            o->result = KP_UNKNOWN_TOPIC_OR_PARTITION;
        else if (c->txn_verdict)      /* Kafka verifies before the member checks */
            o->result = c->txn_verdict;
        else if (gerr)
            o->result = gerr;
        else if (o->metadata_len > b->cfg->offset_metadata_max_bytes)
            o->result = KP_OFFSET_METADATA_TOO_LARGE;
        else
            o->result = KP_NONE;
        o->txn = c->txn;              /* pending until its transaction ends */
        o->producer_id = c->producer_id;
        o->producer_epoch = c->producer_epoch;
        to_store += o->result == KP_NONE;
        if (o->result && c->by_operator)
            return operator_entry_error(b, o, err, errlen);
    }
    if (to_store == 0)
        return KP_NONE;
    if (create) {
        gc_group *g = gc_group_create(c->group.p ? c->group.p : "",
                                      (size_t)(c->group.len > 0 ? c->group.len : 0));
        if (g)
            gc_mark_dirty(g);         /* the row an operator sees */
    }
    gc_wait *w = calloc(1, sizeof *w);
    if (!w) {
        for (size_t i = 0; i < c->n; i++)
            if (c->offs[i].result == KP_NONE)
                c->offs[i].result = KP_COORDINATOR_NOT_AVAILABLE;
        snprintf(err, errlen, "out of memory");
        return c->by_operator ? KP_UNKNOWN_SERVER_ERROR : KP_NONE;
    }
    w->next = w->prev = w;
    w->offs = c->offs;
    w->noffs = c->n;
    w->done = c->done;
    w->done_arg = c->arg;
    /* A transaction's offsets too, as its transactional batch: pending
     * in the log until its marker (group_log.c G8). */
    int16_t lerr = bk_cluster_mode(b) ? gc_log_commit_append(b, w) : KP_NONE;
    if (lerr) {                       /* group_log.c: the replicated record first */
        free(w);
        for (size_t i = 0; i < c->n; i++)
            if (c->offs[i].result == KP_NONE)
                c->offs[i].result = lerr;
        snprintf(err, errlen, "The offsets of group %.*s cannot be stored here now.",
                 c->group.len > 0 ? (int)c->group.len : 0, c->group.p ? c->group.p : "");
        return c->by_operator ? lerr : KP_NONE;
    }
    c->pending = w;
    /* An operator's commits (cadence_key 0) are rare: they join the batch
     * without teaching the cadence (group_persist.c C7) a pace. */
    gc_batch_add(w, c->cadence_key);
    return KP_NONE;
}

int gc_commit_to_job(gc_wait *w, gc_job *j)
{
    size_t n = 0;
    for (size_t i = 0; i < w->noffs; i++)
        n += w->offs[i].result == KP_NONE;
    w->job = j;
    w->job_first = 0;
    if (n == 0)
        return 0;
    md_offset *rows = gc_job_rows(j, n, &w->job_first);
    if (!rows)
        return MD_E_SQL;
    const char *group = NULL, *topic = NULL;
    const md_offset *prev = NULL;
    size_t k = 0;
    for (size_t i = 0; i < w->noffs; i++) {
        const md_offset *o = &w->offs[i];
        if (o->result != KP_NONE)
            continue;
        if (!group && !(group = gc_job_strndup(j, o->group_id, (size_t)o->group_len)))
            return MD_E_SQL;
        /* Entries of one topic are adjacent (as in a request): one copy. */
        if (!prev || (prev->topic != o->topic && (prev->topic_len != o->topic_len ||
                      memcmp(prev->topic, o->topic, (size_t)o->topic_len))))
            topic = NULL;
        if (!topic && !(topic = gc_job_strndup(j, o->topic, (size_t)o->topic_len)))
            return MD_E_SQL;
        prev = o;
        md_offset *x = &rows[k++];
        *x = *o;
        x->group_id = group;
        x->topic = topic;
        x->metadata = NULL;           /* stored as "" */
        if (o->metadata && o->metadata_len > 0 &&
            !(x->metadata = gc_job_strndup(j, o->metadata, (size_t)o->metadata_len)))
            return MD_E_SQL;
    }
    return 0;
}

void gc_commit_apply(gc_wait *w, int rc)
{
    size_t k = w->job_first;
    if (w->job && !rc)                /* its sync was reported: group_persist.c J1, J3 */
        rc = gc_job_rc(w->job);
    for (size_t i = 0; i < w->noffs; i++) {
        md_offset *o = &w->offs[i];
        if (o->result != KP_NONE)
            continue;
        if (!w->job || rc)            /* never stored, or failed */
            o->result = KP_COORDINATOR_NOT_AVAILABLE;
        else
            o->result = gc_job_row_result(w->job, k++);
    }
    w->job = NULL;
}

bool gc_commits_pending(const char *id)
{
    size_t len = strlen(id);
    const gc_wait *lists[2] = { &gc->batch, &gc->synced };
    for (int l = 0; l < 2; l++)
        for (const gc_wait *w = lists[l]->next; w != lists[l]; w = w->next)
            if (w->done && w->noffs > 0 && (size_t)w->offs[0].group_len == len &&
                !memcmp(w->offs[0].group_id, id, len))
                return true;
    return false;
}

/* ---- OffsetCommit v0-9 ------------------------------------------------------------ */

struct kc_topic {
    kp_str name;
    int32_t first, count;
};

/* One OffsetCommit request while it is answered; a single allocation.
 * r->state points here; offs point into the request's frame. */
struct kc_commit {
    int32_t ntopics, n;
    struct kc_topic *topics;
    md_offset *offs;                  /* request order */
    struct gc_wait *pending;
};

static struct kc_commit *kc_alloc(int32_t ntopics, int32_t n)
{
    size_t sz = sizeof(struct kc_commit) + (size_t)ntopics * sizeof(struct kc_topic) +
                (size_t)n * sizeof(md_offset) + 16;
    struct kc_commit *c = calloc(1, sz);
    if (!c)
        return NULL;
    c->ntopics = ntopics;
    c->n = n;
    c->topics = (struct kc_topic *)(c + 1);
    c->offs = (md_offset *)(c->topics + ntopics);
    return c;
}

static void write_commit_response(bk_req *r, const struct kc_commit *c)
{
    kp_buf_reset(r->out);
    kp_OffsetCommitResponse m;
    kp_init_OffsetCommitResponse(&m);
    kp_OffsetCommitResponse_OffsetCommitResponseTopic *t = bk_req_alloc(r, (size_t)c->ntopics,
                                                                        sizeof *t);
    kp_OffsetCommitResponse_OffsetCommitResponsePartition *p = bk_req_alloc(r, (size_t)c->n,
                                                                            sizeof *p);
    if (!t || !p) {
        BK_ERROR("OffsetCommit: no memory for the response");
        return;                       /* an empty body: the client's parse fails */
    }
    for (int32_t i = 0; i < c->n; i++)
        p[i] = (kp_OffsetCommitResponse_OffsetCommitResponsePartition){
            .PartitionIndex = c->offs[i].partition, .ErrorCode = (int16_t)c->offs[i].result,
        };
    for (int32_t i = 0; i < c->ntopics; i++)
        t[i] = (kp_OffsetCommitResponse_OffsetCommitResponseTopic){
            .Name = c->topics[i].name, .Partitions = p + c->topics[i].first,
            .Partitions_count = c->topics[i].count,
        };
    m.Topics = t;
    m.Topics_count = c->ntopics;
    int rc = kp_enc_OffsetCommitResponse(r->out, r->hdr.RequestApiVersion, &m);
    if (bk_req_encoded(r, "OffsetCommit", rc) != BK_RESPOND)
        kp_buf_reset(r->out);
}

static void kc_cancel(bk_req *r)
{
    struct kc_commit *c = r->state;
    if (c)
        gc_groups_forget(c->pending);
    gc_req_release(r, c);
}

static void kc_done(void *arg, int rc)
{
    (void)rc;                         /* the entries carry it */
    bk_req *r = arg;
    struct kc_commit *c = r->state;
    write_commit_response(r, c);
    gc_req_finish(r, c);
}

int gc_handle_offset_commit(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_OffsetCommitRequest q;
    if (kp_dec_OffsetCommitRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    int64_t total = 0;
    for (int32_t t = 0; t < q.Topics_count; t++)
        total += q.Topics[t].Partitions_count;
    if (total > INT32_MAX)
        return BK_CLOSE;
    struct kc_commit *c = kc_alloc(q.Topics_count, (int32_t)total);
    if (!c)
        return BK_CLOSE;
    kp_str group = q.GroupId, member = q.MemberId;
    kp_str instance = q.GroupInstanceId.len == 0 ? KP_STR_NULL : q.GroupInstanceId;
    int64_t retention = q.RetentionTimeMs;  /* v2-4; -1 (the default) after */
    int64_t now = bk_now_ms();
    int32_t k = 0;
    for (int32_t t = 0; t < q.Topics_count; t++) {
        const kp_OffsetCommitRequest_OffsetCommitRequestTopic *qt = &q.Topics[t];
        struct kc_topic *tp = &c->topics[t];
        tp->name = qt->Name;
        tp->first = k;
        tp->count = qt->Partitions_count;
        for (int32_t p = 0; p < tp->count; p++, k++) {
            const kp_OffsetCommitRequest_OffsetCommitRequestPartition *qp = &qt->Partitions[p];
            md_offset *o = &c->offs[k];
            o->group_id = group.p;
            o->group_len = group.len;
            o->topic = tp->name.p;
            o->topic_len = tp->name.len;
            o->partition = qp->PartitionIndex;
            o->offset = qp->CommittedOffset;
            o->leader_epoch = qp->CommittedLeaderEpoch;    /* -1 before v6 */
            o->metadata = qp->CommittedMetadata.p;
            o->metadata_len = qp->CommittedMetadata.len;
            /* v1's CommitTimestamp: the client's clock, -1 for ours (Kafka's
             * DEFAULT_TIMESTAMP); the decoder leaves -1 elsewhere */
            o->commit_time_ms = qp->CommitTimestamp != -1 ? qp->CommitTimestamp : now;
            o->expire_time_ms = retention >= 0 ? now + retention : -1;
        }
    }
    bk_offset_commit bc = {
        .group = group, .generation = q.GenerationIdOrMemberEpoch, .member_id = member,
        .instance_id = instance,
        .offs = c->offs, .n = (size_t)c->n, .done = kc_done, .arg = r,
        /* no connection: the fuzz harness; 0 teaches no pace (group_persist.c C7) */
        .cadence_key = r->conn ? net_conn_serial(r->conn) : 0, .authz = r,
    };
    char err[MD_ERRLEN];
    if (!sec_authorized(r, BK_RES_GROUP, group, BK_OP_READ))
        for (int32_t i = 0; i < c->n; i++)            /* Kafka's: all of them */
            c->offs[i].result = KP_GROUP_AUTHORIZATION_FAILED;
    else
        gc_offsets_commit(r->b, &bc, err, sizeof err);   /* a member's: no whole error */
    if (!bc.pending) {
        write_commit_response(r, c);
        free(c);
        return BK_RESPOND;
    }
    c->pending = bc.pending;
    r->state = c;
    r->cancel = kc_cancel;
    return BK_DEFER;
}

/* ---- OffsetFetch v0-9 ----------------------------------------------------------- */

/* SQLite's BINARY collation, which ordered the rows. */
static int cmp_topic(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

static const md_committed *find_row(const md_committed *rows, size_t n, kp_str topic,
                                    int32_t partition)
{
    size_t lo = 0, hi = n;
    size_t tlen = topic.len > 0 ? (size_t)topic.len : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_topic(rows[mid].topic, strlen(rows[mid].topic), topic.p, tlen);
        if (!c)
            c = rows[mid].partition < partition ? -1 : rows[mid].partition > partition;
        if (c == 0)
            return &rows[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static kp_OffsetFetchResponse_OffsetFetchResponsePartition
fetch_partition(int32_t partition, const md_committed *row, int16_t err)
{
    return (kp_OffsetFetchResponse_OffsetFetchResponsePartition){
        .PartitionIndex = partition,
        .CommittedOffset = row ? row->offset : -1,
        .CommittedLeaderEpoch = row ? row->leader_epoch : -1,   /* v5+ */
        .Metadata = row ? kp_str_cstr(row->metadata) : kp_str_cstr(""),
        .ErrorCode = err,
    };
}

/* One group's topics: the ones asked for (qn >= 0), or (null, qn < 0)
 * every committed one; strings point into rows.  0, or -1 when out of
 * memory. */
static int fetch_topics(bk_req *r, const kp_OffsetFetchRequest_OffsetFetchRequestTopic *qt,
                        int32_t qn, const md_committed *rows, size_t nrows, int16_t perr,
                        kp_OffsetFetchResponse_OffsetFetchResponseTopic **out, int32_t *nout)
{
    kp_OffsetFetchResponse_OffsetFetchResponseTopic *t;
    kp_OffsetFetchResponse_OffsetFetchResponsePartition *p;
    if (qn >= 0) {
        size_t np = 0;
        for (int32_t i = 0; i < qn; i++)
            np += (size_t)qt[i].PartitionIndexes_count;
        t = bk_req_alloc(r, (size_t)qn, sizeof *t);
        p = bk_req_alloc(r, np, sizeof *p);
        if ((!t && qn) || (!p && np))
            return -1;
        for (int32_t i = 0; i < qn; i++) {
            t[i] = (kp_OffsetFetchResponse_OffsetFetchResponseTopic){
                .Name = qt[i].Name, .Partitions = p,
                .Partitions_count = qt[i].PartitionIndexes_count,
            };
            /* A group's error (v0-1) is every partition's, before the
             * topic's DESCRIBE is asked (Kafka's getErrorResponse). */
            int16_t err = perr != KP_NONE ? perr
                        : sec_authorized(r, BK_RES_TOPIC, qt[i].Name, BK_OP_DESCRIBE)
                        ? KP_NONE : KP_TOPIC_AUTHORIZATION_FAILED;
            for (int32_t j = 0; j < qt[i].PartitionIndexes_count; j++) {
                int32_t idx = qt[i].PartitionIndexes[j];
                *p++ = fetch_partition(idx, err ? NULL : find_row(rows, nrows, qt[i].Name, idx),
                                       err);
            }
        }
        *out = t;
        *nout = qn;
        return 0;
    }
    int32_t distinct = 0;
    for (size_t i = 0; i < nrows; i++)
        distinct += i == 0 || strcmp(rows[i].topic, rows[i - 1].topic) != 0;
    t = bk_req_alloc(r, (size_t)distinct, sizeof *t);
    p = bk_req_alloc(r, nrows, sizeof *p);
    if ((!t && distinct) || (!p && nrows))
        return -1;
    *out = t;
    *nout = 0;
    for (size_t i = 0; i < nrows;) {
        size_t j = i;
        while (j < nrows && !strcmp(rows[j].topic, rows[i].topic))
            j++;
        if (!sec_authorized(r, BK_RES_TOPIC, kp_str_cstr(rows[i].topic), BK_OP_DESCRIBE)) {
            i = j;                    /* Kafka leaves out what one may not describe */
            continue;
        }
        ++*nout;
        *t++ = (kp_OffsetFetchResponse_OffsetFetchResponseTopic){
            .Name = kp_str_cstr(rows[i].topic), .Partitions = p, .Partitions_count = (int32_t)(j - i),
        };
        for (size_t k = i; k < j; k++)
            *p++ = fetch_partition(rows[k].partition, &rows[k], perr);
        i = j;
    }
    return 0;
}

/* One group of an OffsetFetch: its error (the coordinator question, or
 * the store) and its topics.  The rows it read stay in *rows until the
 * response is encoded.  0, or -1 when out of memory. */
typedef struct of_group {
    int16_t err;
    kp_OffsetFetchResponse_OffsetFetchResponseTopic *topics;
    int32_t ntopics;
    md_committed *rows;
    size_t nrows;
} of_group;

/* RequireStable (v7+, KIP-447): a partition with an offset pending in a
 * transaction answers UNSTABLE_OFFSET_COMMIT, no offset (Kafka's getOffsets);
 * the consumer retries until the transaction ends.  The pending rows are
 * read before the committed ones (fetch_group): each read is its own
 * SQLite snapshot, and the sync worker may complete the transaction in
 * between.  Pending first, a completion in between shows up in the
 * committed read; committed first, it would show in neither (no offset,
 * no error: the consumer would start over from its reset policy). */
static void mark_unstable(const md_committed *pend, size_t npend, of_group *o)
{
    for (int32_t i = 0; npend && i < o->ntopics; i++)
        for (int32_t j = 0; j < o->topics[i].Partitions_count; j++) {
            kp_OffsetFetchResponse_OffsetFetchResponsePartition *x = &o->topics[i].Partitions[j];
            if (x->ErrorCode == KP_NONE &&
                find_row(pend, npend, o->topics[i].Name, x->PartitionIndex))
                *x = fetch_partition(x->PartitionIndex, NULL, KP_UNSTABLE_OFFSET_COMMIT);
        }
}

static int fetch_group(bk_req *r, kp_str group,
                       const kp_OffsetFetchRequest_OffsetFetchRequestTopic *qt, int32_t qn,
                       bool require_stable, of_group *o)
{
    int16_t v = r->hdr.RequestApiVersion;
    *o = (of_group){ .err = !sec_authorized(r, BK_RES_GROUP, group, BK_OP_DESCRIBE)
                                ? KP_GROUP_AUTHORIZATION_FAILED : gc_coordinator_error(group) };
    md_committed *pend = NULL;
    size_t npend = 0;
    if (!o->err && require_stable && gc_txn_pending_list(r->b, group, &pend, &npend) != 0)
        o->err = KP_COORDINATOR_NOT_AVAILABLE;   /* v7+: the group's error alone */
    if (!o->err && md_offset_list(r->b->db, group.p, (size_t)group.len, &o->rows,
                                  &o->nrows) != 0)
        o->err = KP_COORDINATOR_NOT_AVAILABLE;
    int rc = 0;
    if (o->err && v >= 2)             /* Kafka answers a group's error alone */
        goto out;
    /* v0-1 have no top-level error: each partition carries it. */
    if (fetch_topics(r, qt, qn, o->rows, o->nrows, v < 2 ? o->err : KP_NONE, &o->topics,
                     &o->ntopics) != 0)
        rc = -1;
    else if (require_stable && !o->err)
        mark_unstable(pend, npend, o);
out:
    md_committed_free(pend, npend);
    return rc;
}

/* v8+ spells the same topics with other type names: copies, field for
 * field, into the v8 shapes (the request's into v0-7's, the answer's back). */
static const kp_OffsetFetchRequest_OffsetFetchRequestTopic *
request_topics_v8(bk_req *r, const kp_OffsetFetchRequest_OffsetFetchRequestGroup *g)
{
    kp_OffsetFetchRequest_OffsetFetchRequestTopic *t =
        bk_req_alloc(r, (size_t)(g->Topics_count > 0 ? g->Topics_count : 1), sizeof *t);
    for (int32_t i = 0; t && i < g->Topics_count; i++)
        t[i] = (kp_OffsetFetchRequest_OffsetFetchRequestTopic){
            .Name = g->Topics[i].Name, .PartitionIndexes = g->Topics[i].PartitionIndexes,
            .PartitionIndexes_count = g->Topics[i].PartitionIndexes_count,
        };
    return t;
}

static int response_group_v8(bk_req *r, kp_str id, const of_group *o,
                             kp_OffsetFetchResponse_OffsetFetchResponseGroup *out)
{
    *out = (kp_OffsetFetchResponse_OffsetFetchResponseGroup){ .GroupId = id, .ErrorCode = o->err };
    size_t np = 0;
    for (int32_t i = 0; i < o->ntopics; i++)
        np += (size_t)o->topics[i].Partitions_count;
    kp_OffsetFetchResponse_OffsetFetchResponseTopics *t = bk_req_alloc(r, (size_t)o->ntopics, sizeof *t);
    kp_OffsetFetchResponse_OffsetFetchResponsePartitions *p = bk_req_alloc(r, np, sizeof *p);
    if ((!t && o->ntopics) || (!p && np))
        return -1;
    out->Topics = t;
    out->Topics_count = o->ntopics;
    for (int32_t i = 0; i < o->ntopics; i++) {
        const kp_OffsetFetchResponse_OffsetFetchResponseTopic *src = &o->topics[i];
        t[i] = (kp_OffsetFetchResponse_OffsetFetchResponseTopics){
            .Name = src->Name, .Partitions = p, .Partitions_count = src->Partitions_count,
        };
        for (int32_t j = 0; j < src->Partitions_count; j++) {
            const kp_OffsetFetchResponse_OffsetFetchResponsePartition *x = &src->Partitions[j];
            *p++ = (kp_OffsetFetchResponse_OffsetFetchResponsePartitions){
                .PartitionIndex = x->PartitionIndex, .CommittedOffset = x->CommittedOffset,
                .CommittedLeaderEpoch = x->CommittedLeaderEpoch, .Metadata = x->Metadata,
                .ErrorCode = x->ErrorCode,
            };
        }
    }
    return 0;
}

/* OffsetFetch v0-9.  A null topic list (v2+) asks for every committed
 * offset of the group, an empty one for none (Kafka's isAllPartitions);
 * v8+ asks for several groups at once, each answered with its own error
 * (MemberId/MemberEpoch, v9, belong to KIP-848 groups: a classic group's
 * offsets are read by anyone, as Kafka does).  RequireStable (v7+):
 * mark_unstable. */
int gc_handle_offset_fetch(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_OffsetFetchRequest q;
    if (kp_dec_OffsetFetchRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;           /* a null Topics before v2, too (Kafka's rule) */
    int32_t ng = v >= 8 ? q.Groups_count : 1;
    of_group *og = bk_req_alloc(r, (size_t)(ng > 0 ? ng : 1), sizeof *og);
    kp_OffsetFetchResponse m;
    kp_init_OffsetFetchResponse(&m);
    int rc = og ? 0 : -1;
    int32_t done = 0;
    for (; rc == 0 && done < ng; done++) {
        if (v < 8) {
            rc = fetch_group(r, q.GroupId, q.Topics, q.Topics_count, v >= 7 && q.RequireStable,
                             &og[done]);
            continue;
        }
        const kp_OffsetFetchRequest_OffsetFetchRequestGroup *g = &q.Groups[done];
        const kp_OffsetFetchRequest_OffsetFetchRequestTopic *qt = request_topics_v8(r, g);
        rc = qt ? fetch_group(r, g->GroupId, qt, g->Topics_count, q.RequireStable, &og[done])
                : -1;
    }
    if (rc == 0 && v < 8) {
        m.ErrorCode = og[0].err;         /* v2+; v0-1 carry it per partition */
        m.Topics = og[0].topics;
        m.Topics_count = og[0].ntopics;
    } else if (rc == 0) {
        m.Groups = bk_req_alloc(r, (size_t)(ng > 0 ? ng : 1), sizeof *m.Groups);
        m.Groups_count = ng;
        rc = m.Groups ? 0 : -1;
        for (int32_t i = 0; rc == 0 && i < ng; i++)
            rc = response_group_v8(r, q.Groups[i].GroupId, &og[i], &m.Groups[i]);
    }
    rc = rc == 0 ? bk_req_encoded(r, "OffsetFetch", kp_enc_OffsetFetchResponse(r->out, v, &m))
                 : BK_CLOSE;
    for (int32_t i = 0; og && i < done; i++)   /* after encoding: m points into rows */
        md_committed_free(og[i].rows, og[i].nrows);
    return rc;
}

/* ---- retention ------------------------------------------------------------------- */

/* The rows retention removed, for their tombstones (cluster mode). */
typedef struct expired_rows {
    md_offset *v;
    size_t n, cap;
    bool failed, rolled_back;
} expired_rows;

static void note_expired(const char *group, const char *topic, int32_t partition, void *arg)
{
    expired_rows *e = arg;
    if (e->failed)
        return;
    if (e->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 64;
        md_offset *v = realloc(e->v, cap * sizeof *v);
        if (!v) {
            e->failed = true;
            return;
        }
        e->v = v;
        e->cap = cap;
    }
    md_offset *o = &e->v[e->n];
    *o = (md_offset){ .group_id = strdup(group), .topic = strdup(topic),
                      .partition = partition };
    if (!o->group_id || !o->topic) {
        free((char *)o->group_id);
        free((char *)o->topic);
        e->failed = true;
        return;
    }
    o->group_len = (int32_t)strlen(group);
    o->topic_len = (int32_t)strlen(topic);
    e->n++;
}

/* Kafka's cleanupGroupMetadata writes a tombstone for each expired offset
 * (and for a group it then removes), so the partition's next leader, and
 * compaction, do not bring them back. */
static void expired_tombstones(bk_broker *b, expired_rows *e)
{
    if (e->rolled_back)
        ;
    else if (e->failed)
        BK_ERROR("expiring committed offsets: out of memory; their tombstones were not "
                 "written (a new coordinator expires them again)");
    else if (e->n)
        gc_log_offsets_tombstone(b, e->v, e->n);
    for (size_t i = 0; i < e->n; i++) {
        free((char *)e->v[i].group_id);
        free((char *)e->v[i].topic);
    }
    free(e->v);
}

/* Whether group id has offsets pending in a transaction (an error: yes,
 * so the group stays). */
static bool txn_offsets_pending(bk_broker *b, const char *id)
{
    md_committed *rows;
    size_t n;
    if (gc_txn_pending_list(b, kp_str_cstr(id), &rows, &n) != 0)
        return true;
    md_committed_free(rows, n);
    return n > 0;
}

void gc_expire_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what; (void)arg;
    bk_broker *b = gc->b;
    /* The rules read group states from SQLite: make them current first.
     * They are written by the sync worker, so when some are on their way
     * the check runs again once they are durable (group_persist.c, gc_on_durable). */
    gc_save_dirty_now();
    if (gc->group_jobs > 0) {
        gc->expire_due = true;
        return;
    }
    gc->expire_due = false;
    int64_t expired = 0;
    char err[MD_ERRLEN];
    bool cluster = bk_cluster_mode(b);
    expired_rows rows = { 0 };
    if (md_offsets_expire(b->db, bk_now_ms(), b->cfg->offsets_retention_minutes * 60000,
                          cluster ? note_expired : NULL, &rows, &expired, err,
                          sizeof err) != 0) {
        BK_ERROR("expiring committed offsets failed: %s", err);
        rows.rolled_back = true;      /* no tombstones: nothing was removed */
    }
    else if (expired > 0)
        BK_INFO("removed %lld expired committed offsets (offsets.retention.minutes=%lld)",
                (long long)expired, (long long)b->cfg->offsets_retention_minutes);
    if (cluster)
        expired_tombstones(b, &rows);
    /* Kafka drops a group that is Empty and has no offsets left, pending
     * ones in a transaction included (GroupMetadata.hasOffsets). */
    size_t n = 0;
    gc_group **dead = calloc(gc->ngroups + 1, sizeof *dead);
    if (!dead)
        return;
    for (size_t i = 0; i < gc->hash_size; i++)
        for (gc_group *g = gc->hash[i]; g; g = g->hnext)
            if (g->state == GC_EMPTY && !g->pending && g->nmembers == 0 &&
                !gc_commits_pending(g->id) && md_group_offset_count(b->db, g->id) == 0 &&
                !txn_offsets_pending(b, g->id))
                dead[n++] = g;
    for (size_t i = 0; i < n; i++) {
        int rc = md_group_delete(b->db, dead[i]->id, err, sizeof err);
        if (rc && rc != KP_GROUP_ID_NOT_FOUND) {
            BK_ERROR("removing empty group %s failed: %s", dead[i]->id, err);
            continue;
        }
        BK_INFO("group %s removed: Empty with no committed offsets", dead[i]->id);
        if (cluster)
            gc_log_group_tombstone(b, dead[i]->id);
        gc_group_free(dead[i]);
    }
    free(dead);
}
