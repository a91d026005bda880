/*
 * daemon/group/group_log_txn.c — transactional offset commits met while a
 * partition of __consumer_offsets is loaded or followed (group_log.c G8).
 *
 * Design note.
 *
 * In cluster mode a TxnOffsetCommit is appended to the group's partition
 * as Kafka's GroupMetadataManager.storeOffsets appends it: one batch with
 * the producer's ProducerId and ProducerEpoch, BaseSequence 0 and the
 * transactional attribute (group_log.c, gc_log_commit_append).  What it
 * means is only known when that producer's control batch follows in the
 * log (the marker the transaction coordinator writes, replica_txn.c), as
 * Kafka's loadGroupsAndOffsets keeps pendingOffsets per producer:
 *
 *   transactional OffsetCommit record ──gc_ltxn_add──► pending (per producer,
 *                                                      a later one of the same
 *                                                      key replaces it)
 *   its producer's marker ──gc_ltxn_marker──► COMMIT: emitted, in the order
 *                                                     they were pending
 *                                             ABORT:  dropped
 *   the end of a load ──gc_ltxn_to_job──► still pending: pending rows
 *                                         (pending_txn_offsets), which the
 *                                         coming marker completes
 *                                         (gc_txn_complete)
 *
 * A follower keeps its pending set in memory across its reads (it holds
 * no pending rows: it answers no OffsetFetch of the group); a start over
 * (part_reset) forgets it with the rest.  Memory: one entry per pending
 * key, owned copies of its strings; none once the markers came.
 *
 * Invariants:
 *   L1. An entry is pending for exactly one producer and key (group,
 *       topic, partition); gc_ltxn_add replaces the earlier one.
 *   L2. gc_ltxn_marker removes every entry of its producer, emitting them
 *       (commit) in the order they were added, or not (abort).
 */
#include "daemon/group/group_int.h"

#include <stdlib.h>
#include <string.h>

void gc_ltxn_clear(gc_ltxn *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->rows[i].strings);
    free(t->rows);
    *t = (gc_ltxn){ 0 };
}

static bool same_key(const md_offset *o, int64_t pid, kp_str group, kp_str topic,
                     int32_t partition)
{
    return o->producer_id == pid && o->partition == partition && o->group_len == group.len &&
           o->topic_len == topic.len && !memcmp(o->group_id, group.p, (size_t)group.len) &&
           !memcmp(o->topic, topic.p, (size_t)topic.len);
}

int gc_ltxn_add(gc_ltxn *t, int64_t pid, int16_t epoch, kp_str group, kp_str topic,
                int32_t partition, const md_offset *o)
{
    if (group.len <= 0 || topic.len <= 0)
        return 0;
    int32_t mlen = o->metadata && o->metadata_len > 0 ? o->metadata_len : 0;
    char *s = malloc((size_t)group.len + (size_t)topic.len + (size_t)mlen + 3);
    if (!s)
        return -1;
    size_t i = 0;
    while (i < t->n && !same_key(&t->rows[i].o, pid, group, topic, partition))
        i++;
    if (i == t->n && t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        gc_ltxn_row *v = realloc(t->rows, cap * sizeof *v);
        if (!v) {
            free(s);
            return -1;
        }
        t->rows = v;
        t->cap = cap;
    }
    if (i == t->n)
        t->n++;
    else
        free(t->rows[i].strings);     /* L1: the later commit of the key */
    gc_ltxn_row *r = &t->rows[i];
    r->strings = s;
    r->o = *o;
    r->o.group_id = memcpy(s, group.p, (size_t)group.len);
    s[group.len] = 0;
    s += group.len + 1;
    r->o.topic = memcpy(s, topic.p, (size_t)topic.len);
    s[topic.len] = 0;
    s += topic.len + 1;
    r->o.metadata = mlen ? memcpy(s, o->metadata, (size_t)mlen) : NULL;
    s[mlen] = 0;
    r->o.metadata_len = mlen;
    r->o.group_len = group.len;
    r->o.topic_len = topic.len;
    r->o.partition = partition;
    r->o.producer_id = pid;
    r->o.producer_epoch = epoch;
    r->o.txn = true;
    return 0;
}

int gc_ltxn_marker(gc_ltxn *t, const kp_batch *h, const kp_record *rec, gc_ltxn_fn emit,
                   void *arg)
{
    /* Kafka's EndTransactionMarker key: Version INT16 0, Type INT16 (0 ABORT,
     * 1 COMMIT); replica_producers.c draws the whole batch. */
    kp_rd k;
    kp_rd_init(&k, rec->Key.p, rec->Key.len > 0 ? (size_t)rec->Key.len : 0);
    int16_t version = kp_rd_i16(&k), type = kp_rd_i16(&k);
    if (!kp_rd_ok(&k) || version != 0 || (type != 0 && type != 1) || h->ProducerId < 0)
        return 0;                     /* not a marker this broker reads */
    int rc = 0;
    size_t kept = 0;
    for (size_t i = 0; i < t->n; i++) {
        gc_ltxn_row *r = &t->rows[i];
        if (r->o.producer_id != h->ProducerId) {
            t->rows[kept++] = *r;     /* L2: order kept */
            continue;
        }
        if (type == 1 && rc == 0) {
            md_offset o = r->o;
            o.txn = false;
            o.producer_id = -1;
            o.producer_epoch = -1;
            rc = emit(arg, &o);
        }
        free(r->strings);
    }
    t->n = kept;
    return rc;
}

int gc_ltxn_to_job(const gc_ltxn *t, gc_job **job)
{
    if (t->n == 0)
        return 0;
    if (!*job && !(*job = gc_job_take()))
        return -1;
    size_t first;
    md_offset *rows = gc_job_rows(*job, t->n, &first);
    if (!rows)
        return -1;
    for (size_t i = 0; i < t->n; i++) {
        const md_offset *o = &t->rows[i].o;
        rows[i] = *o;
        rows[i].group_id = gc_job_strndup(*job, o->group_id, (size_t)o->group_len);
        rows[i].topic = gc_job_strndup(*job, o->topic, (size_t)o->topic_len);
        rows[i].metadata = o->metadata ? gc_job_strndup(*job, o->metadata,
                                                        (size_t)o->metadata_len) : NULL;
        rows[i].result = KP_NONE;
        if (!rows[i].group_id || !rows[i].topic || (o->metadata && !rows[i].metadata))
            return -1;
    }
    return 0;
}
