/*
 * daemon/api/api_produce.c — Produce (API key 0), v0–v11.
 *
 * The hot path.  Per partition the cost is: one CRC-32C pass per batch
 * (kp_batch_validate), one pass over its records (kp_batch_validate_records,
 * protocol/validate.c; compressed batches are decompressed into the
 * validator's kept buffer first), a few in-place header rewrites, one seg_append
 * (one write(2) for all the partition's batches), and counter updates.
 * No allocation, no copy of message bytes, no SQLite.  The request is
 * decoded and the response encoded by the generated codec (kp_msgs.h);
 * its arrays come from the request arena, which keeps its chunk between
 * requests, so a steady stream of produces does not malloc.
 *
 * The batches are rewritten in place inside the request frame: the frame
 * buffer belongs to the connection (daemon/net/net_server.c, c->frame), is
 * writable, and lives until the response is sent, so casting away the
 * const of r->body's bytes is safe here.
 *
 * Order of checks per partition (first failure wins, nothing appended):
 *   acks not in {-1, 0, 1}          INVALID_REQUIRED_ACKS
 *   topic/partition unknown         UNKNOWN_TOPIC_OR_PARTITION (Produce
 *                                   never auto-creates; Metadata does)
 *   not the leader                  NOT_LEADER_OR_FOLLOWER
 *   log in its error state          KAFKA_STORAGE_ERROR (at most once a
 *                                   second a produce first tries
 *                                   seg_reset_error: writes resume by
 *                                   themselves once space is freed)
 *   no batches                      CORRUPT_MESSAGE
 *   per batch:
 *     Magic != 2                    UNSUPPORTED_FOR_MESSAGE_FORMAT (logged)
 *     bad framing / CRC / counts    CORRUPT_MESSAGE
 *     control batch or delete-horizon bit from a client
 *                                   INVALID_RECORD with ErrorMessage (v8+;
 *                                   CORRUPT_MESSAGE before v8), as Kafka
 *     size > max.message.bytes      MESSAGE_TOO_LARGE
 *     zstd and Produce < v7         UNSUPPORTED_COMPRESSION_TYPE
 *     every record (Kafka's LogValidator, protocol/validate.c):
 *       codec stream that does not decode, a record whose framing is
 *       wrong, RecordsCount not what the records area holds
 *                                   CORRUPT_MESSAGE
 *       OffsetDelta not 0..n-1 in order, null key on a compacted topic
 *                                   INVALID_RECORD (CORRUPT_MESSAGE
 *                                   before v8)
 *       CreateTime timestamp further than message.timestamp.before.max.ms
 *       behind or after.max.ms ahead of the broker clock (each defaults
 *       to difference.max.ms; -1 = no timestamp is exempt)
 *                                   INVALID_TIMESTAMP
 *       with confluent.value|key.schema.validation: a non-null value
 *       (key) not in the registry's wire format, with an unknown id, an
 *       id not registered under its subject, or (level decode) an Avro
 *       body that does not decode (bk_broker.schema_check,
 *       daemon/registry/sr_validate.c, called from the same walk)
 *                                   INVALID_RECORD (CORRUPT_MESSAGE
 *                                   before v8); an id or subject not
 *       known while this broker's registry still catches up with
 *       _schemas (no replica here, sr_follow.c)
 *                                   NOT_ENOUGH_REPLICAS (retriable, as
 *                                   verify_txn's "not yet"), no RecordErrors
 *     v8+ answers these with ErrorMessage ("Record 3 in batch: ...") and
 *     RecordErrors naming the record; nothing of the partition's request
 *     is stored, other partitions carry on.
 *   idempotent batches (ProducerId >= 0; daemon/replica/replica_producers.c):
 *     a retry of one of the producer's last 5 batches
 *                                   NONE with that batch's offset, nothing
 *                                   appended
 *     older epoch                   INVALID_PRODUCER_EPOCH
 *     sequence gap                  OUT_OF_ORDER_SEQUENCE_NUMBER
 *     a non-transactional batch from a producer with an open transaction
 *                                   INVALID_TXN_STATE (a transactional
 *                                   batch opens or continues the
 *                                   producer's transaction: the LSO holds
 *                                   there until a marker ends it)
 *   seg_append failure              KAFKA_STORAGE_ERROR (RECORD_LIST_TOO_LARGE
 *                                   for a batch larger than segment.bytes)
 *
 * acks=-1.  Standalone, it is answered like acks=1: the leader is the
 * whole ISR.  In cluster mode (issue 16):
 *   ISR smaller than min.insync.replicas   NOT_ENOUGH_REPLICAS, before
 *                                          anything is appended
 *   after the append, the answer waits until the high watermark reaches
 *   the end of the appended batches (Kafka's DelayedProduce):
 *
 *     handler ──(HW below some partition's end)──► WAITING
 *        WAITING ── HW moves / partition deleted / leadership lost
 *                   (replica_partition_notify → pw_recheck, the request's
 *                   bk_deferred: replica_deferred.h) ──► CHECK (next turn)
 *        CHECK ── every partition done ──► net_req_finish
 *              └─ else ──► WAITING again
 *        WAITING ── TimeoutMs passes ──► REQUEST_TIMED_OUT for the rest
 *
 *   A partition is done when its HW reached its end (NONE, or
 *   NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR is below
 *   min.insync.replicas by then), or when this broker no longer leads it
 *   (NOT_LEADER_OR_FOLLOWER).  As with Fetch's long-poll, no partition
 *   pointer survives a return to the loop (waiters are unlinked when
 *   woken; CHECK looks partitions up again by name), and the response
 *   structs stay in the request arena until the answer is encoded.
 * acks=0 gets no response (protocol/README.md §1).  A request without a ProducerId
 * costs nothing more; one with it costs one hash lookup per batch before
 * the append and one update after it.
 *
 * Versions.  v3+ carry record batches v2 (the hot path above).  v0–v2
 * carry the old message sets (magic 0 and 1; kafka-python pinned to
 * api_version (0, 8, 2) or (0, 10) sends them): each partition's set is
 * up-converted to one batch v2 by kp_legacy_to_batch (protocol/legacy.c)
 * into a buffer of its own, and that batch takes the same checks and
 * append as any other.  This is off the hot path, for old clients only:
 * one buffer per partition, the messages copied once (counted in
 * /metrics as sluice_produce_up_converted_*).  Magic 0 has no timestamp:
 * its records keep -1 (NO_TIMESTAMP), exempt from the timestamp-difference
 * check, as in Kafka; LogAppendTime topics stamp them as any batch.
 * v8+ add RecordErrors/ErrorMessage (filled for a refused record, above);
 * v9+ are flexible; v10+
 * answer NOT_LEADER_OR_FOLLOWER with the CurrentLeader of the partition
 * and the leaders' NodeEndpoints (KIP-951, daemon/api/api_leader_hint.c).
 */
#include "daemon/view/view.h"
#include "daemon/api/api_leader_hint.h"
#include "daemon/api/api_txn_verify.h"
#include "daemon/replica/replica_logdir.h"
#include "daemon/net/net_metrics.h"
#include "daemon/replica/replica.h"
#include "daemon/replica/replica_deferred.h"
#include "daemon/security/sec_authz.h"
#include "daemon/request.h"
#include "daemon/replica/replica_producers.h"
#include "daemon/txn/txn.h"
#include "daemon/replication/repl_peer.h"
#include "daemon/security/sec_peer.h"
#include "kp_msgs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct produce_result {
    int16_t error;
    kp_str error_message;         /* v8+; null when none */
    kp_ProduceResponse_BatchIndexAndErrorMessage *record_error;  /* v8+, or NULL */
    int64_t base_offset;
    int64_t log_append_time;
    int64_t log_start;
    int64_t wait_end;             /* acks=-1, cluster: the HW to wait for; -1 none */
    int32_t leader_id, leader_epoch;  /* NOT_LEADER_OR_FOLLOWER hint; -1 none */
} produce_result;

static const char *client_of(const bk_req *r, char *buf, size_t cap)
{
    if (r->hdr.ClientId.len < 0)
        return "(null client id)";
    kp_str_copy(r->hdr.ClientId, buf, cap);
    return buf;
}

/* Record validation is on unless SLUICE_TEST_SKIP_RECORD_VALIDATION=1 is
 * in the environment at the first produce: a TEST-ONLY switch for
 * bench/rdkafka_validate_bench.c's with/without ratio (README, bad input).  One
 * validator serves the loop thread, which runs every produce. */
static int validation_on = -1;
static kp_validator validator;

static bool records_validated(void)
{
    if (validation_on < 0) {
        const char *e = getenv("SLUICE_TEST_SKIP_RECORD_VALIDATION");
        validation_on = !(e && strcmp(e, "1") == 0);
        kp_validator_init(&validator);
        if (!validation_on)
            BK_WARN("SLUICE_TEST_SKIP_RECORD_VALIDATION=1: records are NOT "
                    "validated (test only)");
    }
    return validation_on;
}

/* The batch-level timestamp check kept for the test-only no-validation
 * mode: BaseTimestamp and MaxTimestamp instead of every record. */
static bool batch_timestamps_ok(const kp_batch *bh, const kp_val_rules *vr)
{
    return bh->MaxTimestamp < 0 || (kp_val_timestamp_ok(vr, bh->BaseTimestamp) &&
                                    kp_val_timestamp_ok(vr, bh->MaxTimestamp));
}

/* A bound of INT64_MAX / 2 or more is no bound (INT64_MAX for the validator). */
static int64_t ts_bound(int64_t ms)
{
    return ms < INT64_MAX / 2 ? ms : INT64_MAX;
}

static uint64_t pv_be(const uint8_t *q, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | q[i];
    return v;
}

/* The topic's schema checks (issue 31; bk_broker.schema_check), run by
 * the validator on each record as it walks the batch. */
typedef struct schema_checks {
    bk_broker *b;
    bk_schema_ctx key, value;
} schema_checks;

static int schema_on_record(void *arg, int32_t i, const kp_record *rec, bool whole,
                            kp_val_fault *f)
{
    schema_checks *sc = arg;
    char why[144];
    bk_schema_ctx *c[2] = { &sc->value, &sc->key };
    const kp_str *bytes[2] = { &rec->Value, &rec->Key };
    for (int k = 0; k < 2; k++) { /* a null value or key passes, as Confluent Server's */
        int rc = c[k]->rule->on && bytes[k]->len >= 0
                 ? sc->b->schema_check(sc->b, c[k], (const uint8_t *)bytes[k]->p,
                                       (size_t)bytes[k]->len, whole, why, sizeof why) : 0;
        if (rc == -2) {               /* not known yet: the whole batch, retriable */
            int e = kp_val_record_fault(f, KP_NOT_ENOUGH_REPLICAS, i, "%s", why);
            f->record = -1;
            return e;
        }
        if (rc != 0)
            return kp_val_record_fault(f, KP_INVALID_RECORD, i, "%s", why);
    }
    return 0;
}

/* Sets vr's callback when the topic checks schemas.  KP_NONE, or
 * INVALID_RECORD (f filled) when it does and no registry runs here. */
static int16_t schema_checks_init(bk_req *r, bk_partition *p, schema_checks *sc,
                                  kp_val_rules *vr, kp_val_fault *f)
{
    const md_topic_config *tc = &p->topic->cfg;
    if (!tc->key_schema.on && !tc->value_schema.on)
        return KP_NONE;
    if (!r->b->schema_check) {
        f->error = KP_INVALID_RECORD;
        f->record = -1;
        snprintf(f->message, sizeof f->message, "Topic %.60s validates schemas, and this "
                 "broker runs no schema registry (schema.registry.listeners)", p->topic->name);
        return f->error;
    }
    *sc = (schema_checks){
        .b = r->b,
        .key = { .topic = p->topic->name, .key = true, .rule = &tc->key_schema, .last_ok = -1 },
        .value = { .topic = p->topic->name, .rule = &tc->value_schema, .last_ok = -1 },
    };
    vr->on_record = schema_on_record;
    vr->arg = sc;
    return KP_NONE;
}

/* Validates every batch of one partition's records in place; on success
 * fills *messages and applies the broker's rewrites (leader epoch,
 * LogAppendTime; a CreateTime batch's MaxTimestamp and type when they
 * disagree with its records).  Returns KP_NONE or the partition's error code; a
 * record-level refusal also fills *f (f->error == the code returned). */
static int16_t check_batches(bk_req *r, bk_partition *p, uint8_t *data,
                             size_t len, int64_t now, int64_t *messages,
                             bool *idempotent, kp_batch *first, kp_val_fault *f)
{
    const md_topic_config *tc = &p->topic->cfg;
    int16_t ver = r->hdr.RequestApiVersion;
    int64_t count = 0;
    size_t at = 0;
    bool validate = records_validated();
    int64_t before = ts_bound(tc->message_timestamp_before_max_ms);
    int64_t after = ts_bound(tc->message_timestamp_after_max_ms);
    kp_val_rules vr = {
        .key_required = tc->cleanup_compact,
        .check_timestamps = !tc->log_append_time && (before != INT64_MAX || after != INT64_MAX),
        .now_ms = now,
        .before_max_ms = before,
        .after_max_ms = after,
    };
    f->error = KP_NONE;
    schema_checks sc;
    if (schema_checks_init(r, p, &sc, &vr, f) != KP_NONE)
        return ver >= 8 ? f->error : (f->error = KP_CORRUPT_MESSAGE);
    validate |= vr.on_record != NULL;       /* schema checks ride the record walk */
    while (at < len) {
        uint8_t *q = data + at;
        size_t left = len - at;
        /* Kafka's ProduceRequest.validateRecords (v3+): one batch per
         * partition, which every client sends; so the batch verify_txn
         * checks is the only one (a second could carry another producer's
         * transaction, never verified). */
        if (at > 0 && ver >= 3) {
            f->error = ver >= 8 ? KP_INVALID_RECORD : KP_CORRUPT_MESSAGE;
            f->record = -1;
            snprintf(f->message, sizeof f->message, "Produce requests with version %d "
                     "are only allowed to contain exactly one record batch per partition",
                     ver);
            return f->error;
        }
        /* Magic sits at byte 16 in every message format (v0/v1 message
         * sets included), so an old client is told precisely. */
        if (left > KP_BATCH_OFF_Magic && q[KP_BATCH_OFF_Magic] != KP_BATCH_MAGIC) {
            char cid[128];
            BK_WARN("Produce from client %s to %s-%d: message format v%d "
                    "(magic %d) refused; only record batch v2 is supported "
                    "(upgrade the client or set api.version.request=true)",
                    client_of(r, cid, sizeof cid), p->topic->name, p->id,
                    q[KP_BATCH_OFF_Magic], q[KP_BATCH_OFF_Magic]);
            return KP_UNSUPPORTED_FOR_MESSAGE_FORMAT;
        }
        kp_batch bh;
        int64_t size = kp_batch_validate(q, left, &bh);
        if (size == KP_E_MAGIC)
            return KP_UNSUPPORTED_FOR_MESSAGE_FORMAT;
        if (size < 0)
            return KP_CORRUPT_MESSAGE;
        /* Control batches and delete horizons are the broker's to write:
         * a client-set horizon would get its tombstones dropped early. */
        if (bh.Attributes & (KP_ATTR_CONTROL | KP_ATTR_DELETE_HORIZON)) {
            /* Kafka's LogValidator: an InvalidRecordException, named in
             * the v8+ answer's ErrorMessage */
            f->error = ver >= 8 ? KP_INVALID_RECORD : KP_CORRUPT_MESSAGE;
            f->record = -1;
            snprintf(f->message, sizeof f->message, "%s",
                     (bh.Attributes & KP_ATTR_CONTROL)
                     ? "Clients are not allowed to write control records"
                     : "Clients are not allowed to set a batch's delete horizon");
            return f->error;
        }
        if (size > tc->max_message_bytes)
            return KP_MESSAGE_TOO_LARGE;
        if ((bh.Attributes & KP_ATTR_CODEC_MASK) == KP_CODEC_ZSTD && ver < 7)
            return KP_UNSUPPORTED_COMPRESSION_TYPE;
        if (validate) {
            if (kp_batch_validate_records(&validator, q, (size_t)size, &bh, &vr, f) < 0) {
                if (f->error == KP_INVALID_RECORD && ver < 8)
                    f->error = KP_CORRUPT_MESSAGE;   /* no INVALID_RECORD before v8 */
                return f->error;
            }
            /* CreateTime: the batch says what its records say, as Kafka's
             * LogValidator sets it; a client's LogAppendTime bit or a
             * MaxTimestamp its records do not hold would steer consumers'
             * timestamps, time-based retention and lookups. */
            if (!tc->log_append_time &&
                ((bh.Attributes & KP_ATTR_LOG_APPEND_TIME) ||
                 bh.MaxTimestamp != validator.max_timestamp))
                kp_batch_set_max_timestamp(q, false, validator.max_timestamp);
        } else if (!batch_timestamps_ok(&bh, &vr)) {
            return KP_INVALID_TIMESTAMP;
        }
        count += (int64_t)bh.LastOffsetDelta + 1;
        *idempotent |= bh.ProducerId >= 0;
        if (at == 0)
            *first = bh;
        at += (size_t)size;
    }
    if (count == 0)
        return KP_CORRUPT_MESSAGE;
    /* Everything is valid: now rewrite (LogAppendTime costs a CRC pass). */
    for (at = 0; at < len;) {
        uint8_t *q = data + at;
        int64_t size = kp_batch_size(q, len - at);
        kp_batch_set_leader_epoch(q, p->leader_epoch);
        if (tc->log_append_time)
            kp_batch_set_log_append_time(q, now);
        at += (size_t)size;
    }
    *messages = count;
    return KP_NONE;
}

/* A failed log is retried by the produces that find it failed, at most
 * once per STORAGE_RETRY_MS: cheap (a truncate and one fdatasync), and no
 * timer is needed for a partition nobody writes to. */
#define STORAGE_RETRY_MS 1000

static bool storage_recovered(bk_partition *p)
{
    int64_t now = bk_now_ms();
    if (now < p->storage_retry_ms)
        return false;
    p->storage_retry_ms = now + STORAGE_RETRY_MS;
    if (seg_reset_error(p->log) != 0)
        return false;
    if (!replica_logdir_failed())         /* else replica_logdir.c says so once an append succeeds */
        BK_INFO("%s-%d takes writes again (log end %lld)", p->topic->name, p->id,
                (long long)seg_log_end(p->log));
    return true;
}

static void append_partition(bk_req *r, kp_str txn_id, bk_partition *p, int16_t acks,
                             uint8_t *data, size_t len, produce_result *res);

/* A batch refused for its records: logged at INFO, and on v8+ told to the
 * client in ErrorMessage and RecordErrors (from r->arena; error path only). */
static void refused_records(bk_req *r, bk_partition *p, const kp_val_fault *f,
                            produce_result *res)
{
    char cid[128];
    BK_INFO("Produce from client %s to %s-%d refused (error %d): %s",
            client_of(r, cid, sizeof cid), p->topic->name, p->id, f->error, f->message);
    if (r->hdr.RequestApiVersion < 8)
        return;
    if (kp_arena_str(&r->arena, f->message, &res->error_message) != 0) {
        res->error_message = KP_STR_NULL;
        return;
    }
    if (f->record < 0)
        return;
    res->record_error = kp_arena_alloc(&r->arena, sizeof *res->record_error);
    if (res->record_error)
        *res->record_error = (kp_ProduceResponse_BatchIndexAndErrorMessage){
            .BatchIndex = f->record, .BatchIndexErrorMessage = res->error_message };
}

/* Produce v0-2: the partition's magic 0/1 message set as one batch v2 in
 * conv (the caller frees it).  KP_NONE with *data and *len pointing into conv,
 * or the partition's error.  A set that already holds batches v2 is left
 * as it is. */
static int16_t up_convert(bk_req *r, bk_partition *p, uint8_t **data, size_t *len,
                          kp_buf *conv)
{
    if (*len > KP_BATCH_OFF_Magic && (*data)[KP_BATCH_OFF_Magic] == KP_BATCH_MAGIC)
        return KP_NONE;
    int32_t count = 0;
    size_t cap = (size_t)p->topic->cfg.max_message_bytes * 4 + (1 << 20);
    int64_t n = kp_legacy_to_batch(*data, *len, conv, cap, &count);
    if (n < 0) {
        char cid[128];
        BK_WARN("Produce v%d from client %s to %s-%d: message set refused (%d)",
                r->hdr.RequestApiVersion, client_of(r, cid, sizeof cid),
                p->topic->name, p->id, (int)n);
        return n == KP_E_MAGIC ? KP_UNSUPPORTED_FOR_MESSAGE_FORMAT
             : n == KP_E_NOMEM ? KP_UNKNOWN_SERVER_ERROR : KP_CORRUPT_MESSAGE;
    }
    net_metrics_converted(KP_API_PRODUCE, (uint64_t)n);
    *data = conv->data;
    *len = (size_t)n;
    return KP_NONE;
}

static void produce_partition(bk_req *r, kp_str txn_id, int16_t acks, kp_str topic,
                              int32_t index, kp_str records, produce_result *res,
                              bk_hint_nodes *hints)
{
    bk_broker *b = r->b;
    res->error = KP_NONE;
    res->error_message = KP_STR_NULL;
    res->record_error = NULL;
    res->base_offset = -1;
    res->log_append_time = -1;
    res->log_start = -1;
    res->wait_end = -1;
    res->leader_id = res->leader_epoch = -1;

    if (acks != -1 && acks != 0 && acks != 1) {
        res->error = KP_INVALID_REQUIRED_ACKS;
        return;
    }
    if (!sec_authorized(r, BK_RES_TOPIC, topic, BK_OP_WRITE)) {
        res->error = KP_TOPIC_AUTHORIZATION_FAILED;
        return;
    }
    bk_partition *p;
    int lrc = view_leader_replica(b, topic, index, &p);
    if (lrc == KP_NONE && bk_cluster_mode(b) && cl_cluster_leaving(b))
        lrc = KP_NOT_LEADER_OR_FOLLOWER;          /* controlled shutdown: cluster_leaders.c */
    if (lrc != KP_NONE) {
        res->error = (int16_t)lrc;
        if (lrc == KP_NOT_LEADER_OR_FOLLOWER && r->hdr.RequestApiVersion >= 10)
            api_leader_hint(b, topic, index, &res->leader_id, &res->leader_epoch, hints);
        return;
    }
    /* link.c K1: a mirror topic is the link's to write until promoted.
     * INVALID_REQUEST: not retriable, so the producer fails at once with
     * the ErrorMessage (TOPIC_AUTHORIZATION_FAILED would send the operator
     * to the ACLs). */
    const char *mirror_msg;
    if (bk_mirror_refuses(b, p->topic->name, &mirror_msg)) {
        res->error = KP_INVALID_REQUEST;
        res->error_message = kp_str_cstr(mirror_msg);
        return;
    }
    /* link.c K14: never a batch under an epoch below the log's latest (the
     * history would be dropped, epochs.c E1) or, in a promoted mirror, at
     * the source's: retriable, the fresh epoch is on its way. */
    if (p->leader_epoch < p->min_epoch ||
        (bk_cluster_mode(b) && p->leader_epoch < seg_epoch_latest(p->log))) {
        res->error = KP_NOT_LEADER_OR_FOLLOWER;
        return;
    }
    bool all = acks == -1 && bk_cluster_mode(b);
    if (all && repl_isr_size(p) < p->topic->cfg.min_insync_replicas) {
        res->error = KP_NOT_ENOUGH_REPLICAS;
        return;
    }
    if (seg_failed(p->log) && !storage_recovered(p)) {
        res->error = KP_KAFKA_STORAGE_ERROR;
        return;
    }
    if (records.len <= 0) {
        res->error = KP_CORRUPT_MESSAGE;
        return;
    }
    /* The frame is writable and ours until the response is sent (top). */
    uint8_t *data = (uint8_t *)(uintptr_t)records.p;
    size_t len = (size_t)records.len;
    if (r->hdr.RequestApiVersion < 3) {
        kp_buf conv;
        kp_buf_init(&conv);
        res->error = up_convert(r, p, &data, &len, &conv);
        if (res->error == KP_NONE)
            append_partition(r, txn_id, p, acks, data, len, res);
        kp_buf_free(&conv);
        return;
    }
    append_partition(r, txn_id, p, acks, data, len, res);
}

/* Checks and appends one partition's batches (in the frame, or the
 * up-converted batch of an old produce). */
/* KIP-890 (transaction.partition.verification.enable): a transactional
 * batch for a partition where its producer has no transaction open yet is
 * appended only once the coordinator says the partition is in the
 * producer's ongoing transaction, so a late or stray write cannot open a
 * transaction nobody will end (and hold the LSO forever).  The open
 * transaction in the partition's producer state is the cache: only the
 * first batch per partition per transaction asks.  Kafka's codes
 * (ReplicaManager): not in it -> INVALID_TXN_STATE; a stale epoch ->
 * INVALID_PRODUCER_EPOCH; the coordinator busy, loading or unreachable ->
 * NOT_ENOUGH_REPLICAS, which every client retries.  This broker's own
 * coordinator answers at once (txn_verify_partition); another broker's
 * answers AddPartitionsToTxn v4 VerifyOnly first (pv_start, below), and
 * the request is then run again with its verdicts. */
static int16_t pv_verdict(const bk_partition *p, int16_t err);

static int16_t verify_txn(bk_req *r, kp_str txn_id, bk_partition *p,
                          const kp_batch *bh, produce_result *res)
{
    if (!(bh->Attributes & KP_ATTR_TRANSACTIONAL) ||
        !r->b->cfg->transaction_partition_verification_enable)
        return KP_NONE;
    if (txn_id.len < 0)                           /* api_handle_produce refused it already */
        return KP_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    const bk_producer *e = p->producers ? replica_pstate_find(p->producers, bh->ProducerId)
                                        : NULL;
    if (e && e->epoch == bh->ProducerEpoch && e->txn_first >= 0)
        return KP_NONE;                           /* verified when it began here */
    int16_t err = txn_verify_partition(r->b, txn_id, bh->ProducerId, bh->ProducerEpoch,
                                       p->topic->name, p->id);
    if (err == KP_NOT_COORDINATOR)                /* another broker's id: its answer */
        err = pv_verdict(p, err);
    switch (err) {
    case KP_NONE:
        return KP_NONE;
    case KP_NOT_COORDINATOR:                      /* not asked: retriable */
        return KP_NOT_ENOUGH_REPLICAS;
    case KP_INVALID_TXN_STATE:
        res->error_message = kp_str_cstr("Partition was not added to the transaction");
        return err;
    case KP_PRODUCER_FENCED:                      /* Produce's code for a stale epoch */
        return KP_INVALID_PRODUCER_EPOCH;
    case KP_COORDINATOR_LOAD_IN_PROGRESS:
    case KP_COORDINATOR_NOT_AVAILABLE:
    case KP_CONCURRENT_TRANSACTIONS:
    case KP_BROKER_NOT_AVAILABLE:
    case KP_NETWORK_EXCEPTION:
    case KP_REQUEST_TIMED_OUT:
        return KP_NOT_ENOUGH_REPLICAS;
    default:
        return err;
    }
}

static void append_partition(bk_req *r, kp_str txn_id, bk_partition *p, int16_t acks,
                             uint8_t *data, size_t len, produce_result *res)
{
    bk_broker *b = r->b;
    bool all = acks == -1 && bk_cluster_mode(b);
    int64_t now = bk_now_ms();
    int64_t messages = 0;
    bool idempotent = false;
    kp_val_fault f;
    kp_batch first = { .ProducerId = -1 };
    res->error = check_batches(r, p, data, len, now, &messages, &idempotent, &first, &f);
    if (res->error != KP_NONE) {
        if (f.error != KP_NONE)
            refused_records(r, p, &f, res);
        return;
    }
    if (idempotent) {
        bk_pbatch dup;
        int rc = replica_pstate_check(p->producers, data, len, &dup);
        if (rc == BK_PS_DUPLICATE) {
            /* A retry whose first attempt was appended: same answer again. */
            res->error = KP_NONE;
            res->base_offset = dup.base_offset;
            if (p->topic->cfg.log_append_time)
                res->log_append_time = dup.timestamp;
            res->log_start = seg_log_start(p->log);
            if (all)              /* the first attempt's batch must be replicated too */
                res->wait_end = dup.base_offset + dup.offset_delta + 1;
            return;
        }
        if (rc != KP_NONE) {
            res->error = (int16_t)rc;
            return;
        }
    }
    if ((res->error = verify_txn(r, txn_id, p, &first, res)) != KP_NONE)
        return;

    int64_t base = -1;
    int rc = seg_append(p->log, data, len, now, &base);
    if (rc != 0) {
        if (rc == SEG_E_TOOBIG) {
            res->error = KP_RECORD_LIST_TOO_LARGE;
        } else if (rc == SEG_E_INVALID) {
            res->error = KP_CORRUPT_MESSAGE;
        } else {
            res->error = KP_KAFKA_STORAGE_ERROR;
            if (!replica_logdir_fault(b, p, "appending to", seg_last_errno(p->log)))
                BK_ERROR("append to %s-%d failed (%d, %s): partition refuses "
                         "writes (KAFKA_STORAGE_ERROR) until the disk takes them again",
                         p->topic->name, p->id, rc, strerror(seg_last_errno(p->log)));
            p->storage_retry_ms = now + STORAGE_RETRY_MS;
        }
        return;
    }
    if (idempotent && (!p->producers ||
                       replica_pstate_record(p->producers, data, len, now) != 0))
        BK_WARN("%s-%d: producer state not recorded (out of memory): a retry "
                "of this batch would be appended again", p->topic->name, p->id);
    if (replica_logdir_failed())
        replica_logdir_recovered(b, p);                /* standalone only */
    p->bytes_in += len;
    res->base_offset = base;
    if (p->topic->cfg.log_append_time)
        res->log_append_time = now;
    res->log_start = seg_log_start(p->log);
    replica_partition_appended(b, p, messages);   /* HW, flush policy, waiters */
    if (all)
        res->wait_end = seg_log_end(p->log);
}

/* ---- acks=all in cluster mode: waiting for the high watermark -------------- */

typedef kp_ProduceResponse_PartitionProduceResponse produce_part_out;

typedef struct pw_part {
    kp_str topic;                 /* in the request frame, held until the answer
                                     (net_server.c reads no more while deferred) */
    int32_t partition;
    int64_t end;                  /* the HW that answers it */
    produce_part_out *out;        /* its entry in the response (r->arena) */
    bool done;
    bk_waiter w;                  /* on pw->wait while it waits */
} pw_part;

typedef struct produce_wait {
    bk_req *r;
    kp_ProduceResponse m;
    int n;
    pw_part *parts;
    bk_deferred wait;             /* TimeoutMs, and the parts' waiters */
} produce_wait;

static void pw_free(produce_wait *pw)
{
    replica_deferred_free(&pw->wait);         /* pw itself is in r->arena */
}

static void pw_fail(pw_part *pp, int16_t err)
{
    pp->done = true;
    pp->out->ErrorCode = err;
    pp->out->BaseOffset = -1;            /* as Kafka's error responses */
    pp->out->LogAppendTimeMs = -1;
    pp->out->LogStartOffset = -1;
}

/* Decides every partition it can; links waiters on the rest.  true: all done. */
static bool pw_check(produce_wait *pw)
{
    bk_broker *b = pw->r->b;
    bool all_done = true;
    for (int i = 0; i < pw->n; i++) {
        pw_part *pp = &pw->parts[i];
        if (pp->done)
            continue;
        bk_partition *p;
        int rc = view_leader_replica(b, pp->topic, pp->partition, &p);
        if (rc != KP_NONE) {
            pw_fail(pp, (int16_t)rc);
        } else if (p->high_watermark >= pp->end) {
            pp->done = true;
            if (repl_isr_size(p) < p->topic->cfg.min_insync_replicas)
                pw_fail(pp, KP_NOT_ENOUGH_REPLICAS_AFTER_APPEND);
        } else {
            replica_deferred_watch(&pw->wait, p, &pp->w, false);
            all_done = false;
        }
    }
    if (!all_done)
        return false;
    replica_deferred_unwatch(&pw->wait);
    return true;
}

static void pw_finish(produce_wait *pw)
{
    bk_req *r = pw->r;
    r->state = NULL;
    r->cancel = NULL;
    r->expire = NULL;
    pw_free(pw);
    kp_enc_ProduceResponse(r->out, r->hdr.RequestApiVersion, &pw->m);
    net_req_finish(r);             /* may start the next request on r */
}

/* The loop turn after a watched partition moved (no waiter linked). */
static void pw_recheck(void *arg)
{
    produce_wait *pw = arg;
    if (pw_check(pw))
        pw_finish(pw);
}

static void pw_timeout(void *arg)
{
    produce_wait *pw = arg;
    pw_check(pw);                 /* what is done now counts */
    for (int i = 0; i < pw->n; i++)
        if (!pw->parts[i].done)
            pw_fail(&pw->parts[i], KP_REQUEST_TIMED_OUT);
    pw_finish(pw);
}

static void pw_cancel(bk_req *r)
{
    produce_wait *pw = r->state;
    r->state = NULL;
    r->cancel = NULL;
    r->expire = NULL;
    if (pw)
        pw_free(pw);
}

/* Shutdown: answer now (the timeout path, on the next loop turn). */
static void pw_expire(bk_req *r)
{
    produce_wait *pw = r->state;
    replica_deferred_expire(&pw->wait);
}

/* After the appends of an acks=-1 produce in cluster mode: BK_DEFER, or
 * BK_RESPOND with the response encoded (nothing to wait for, or no way to
 * wait: shutting down or out of memory answers REQUEST_TIMED_OUT at once). */
static int pw_start(bk_req *r, const kp_ProduceResponse *m, pw_part *parts, int n,
                    int32_t timeout_ms)
{
    produce_wait *pw = kp_arena_alloc(&r->arena, sizeof *pw);
    if (!pw)
        return BK_CLOSE;
    *pw = (produce_wait){ .r = r, .m = *m, .n = n, .parts = parts };
    replica_deferred_init(&pw->wait, pw_recheck, pw_timeout, pw);
    if (pw_check(pw)) {
        kp_enc_ProduceResponse(r->out, r->hdr.RequestApiVersion, &pw->m);
        return r->out->err ? BK_CLOSE : BK_RESPOND;
    }
    if (r->b->stopping || replica_deferred_arm(&pw->wait, r->b->base, timeout_ms) != 0) {
        pw_free(pw);
        for (int i = 0; i < n; i++)
            if (!parts[i].done)
                pw_fail(&parts[i], KP_REQUEST_TIMED_OUT);
        kp_enc_ProduceResponse(r->out, r->hdr.RequestApiVersion, &pw->m);
        return r->out->err ? BK_CLOSE : BK_RESPOND;
    }
    r->state = pw;
    r->cancel = pw_cancel;
    r->expire = pw_expire;
    return BK_DEFER;
}

typedef kp_ProduceResponse_TopicProduceResponse produce_topic_out;

/* ---- KIP-890 verification by another broker's coordinator ------------------------
 * PV1  Before anything is appended, pv_start looks for the partitions whose
 *      first batch needs a verification another broker (the leader of the
 *      id's __transaction_state partition) must give; if any, the request
 *      is deferred while one AddPartitionsToTxn v4 VerifyOnly goes there
 *      (repl_peer_call), then run again from its first byte with the
 *      verdicts (pv_cur), which verify_txn uses instead of asking.  So a
 *      request appends in one run only, and waits for at most one call.
 * PV2  One malloc per request that waits (not per message, not per
 *      partition); a connection gone meanwhile leaves pv->r NULL and the
 *      answer frees it. */
typedef struct pv_part {
    kp_str topic;                     /* in the request frame, held while deferred */
    int32_t partition;
    int16_t err;                      /* the coordinator's answer; PV_ASK until it came */
} pv_part;

#define PV_ASK (-1)

typedef struct produce_verify {
    bk_req *r;                        /* first: api_verify_cancel */
    kp_rd body;                       /* the request body, from its start */
    int n;
    pv_part parts[];
} produce_verify;

static const produce_verify *pv_cur;  /* during the second run only (PV1) */

/* In the second run, a partition the coordinator was not asked about
 * (its open transaction ended, or its leadership came, during the wait)
 * has no verdict: refused with a retriable code, never appended unverified. */
static int16_t pv_verdict(const bk_partition *p, int16_t err)
{
    if (!pv_cur)
        return err;
    for (int i = 0; i < pv_cur->n; i++)
        if (pv_cur->parts[i].partition == p->id &&
            kp_str_eq(pv_cur->parts[i].topic, p->topic->name))
            return pv_cur->parts[i].err;
    return KP_NOT_ENOUGH_REPLICAS;
}

/* The partition's batch (only one: check_batches), when it is
 * transactional and its producer has no transaction open there at its
 * epoch (verify_txn's cache). */
static bool pv_needed(bk_partition *p, kp_str records, int64_t *pid, int16_t *epoch)
{
    const uint8_t *q = (const uint8_t *)records.p;
    if (records.len < KP_BATCH_OFF_RecordsCount + 4 || q[KP_BATCH_OFF_Magic] != KP_BATCH_MAGIC ||
        !(pv_be(q + KP_BATCH_OFF_Attributes, 2) & KP_ATTR_TRANSACTIONAL))
        return false;
    *pid = (int64_t)pv_be(q + KP_BATCH_OFF_ProducerId, 8);
    *epoch = (int16_t)pv_be(q + KP_BATCH_OFF_ProducerEpoch, 2);
    const bk_producer *e = p->producers ? replica_pstate_find(p->producers, *pid) : NULL;
    return !(e && e->epoch == *epoch && e->txn_first >= 0);
}

/* The coordinator's answer: each partition's verdict, then the second run. */
static void pv_done(void *arg, int16_t error, kp_rd *body)
{
    produce_verify *pv = arg;
    bk_req *r = pv->r;
    if (!r) {
        free(pv);
        return;
    }
    kp_AddPartitionsToTxnResponse m;
    kp_arena a;
    kp_arena_init(&a, 0);
    int16_t all = error ? KP_COORDINATOR_NOT_AVAILABLE : api_verify_decode(body, &m, &a);
    for (int i = 0; i < pv->n; i++) {
        pv_part *pp = &pv->parts[i];
        if (pp->err != PV_ASK)
            continue;                         /* refused before asking */
        pp->err = all != KP_NONE ? all : api_verify_part(&m, pp->topic, pp->partition);
    }
    kp_arena_free(&a);
    pv_cur = pv;
    api_verify_rerun(r, pv->body, api_handle_produce);
    pv_cur = NULL;
    free(pv);
}

/* PV1: BK_DEFER when a verification was sent; else 0 (run as usual). */
static int pv_start(bk_req *r, const kp_ProduceRequest *q, kp_rd body0)
{
    bk_broker *b = r->b;
    if (pv_cur || q->TransactionalId.len <= 0 || !bk_cluster_mode(b) ||
        !b->cfg->transaction_partition_verification_enable || !b->txn_coordinator_of)
        return 0;
    int32_t coord = -2;
    int64_t pid = -1;
    int16_t epoch = -1;
    int n = 0, nids = 0, most = 0;
    for (int32_t t = 0; t < q->TopicData_count; t++)
        most += q->TopicData[t].PartitionData_count > 0 ? q->TopicData[t].PartitionData_count : 0;
    produce_verify *pv = NULL;
    kp_AddPartitionsToTxnRequest_AddPartitionsToTxnTopic *tt = NULL;
    int32_t *ids = NULL;
    int nt = 0;
    for (int32_t t = 0; t < q->TopicData_count; t++) {
        const kp_ProduceRequest_TopicProduceData *qt = &q->TopicData[t];
        bool topic_open = false;
        for (int32_t i = 0; i < qt->PartitionData_count; i++) {
            bk_partition *p;
            int64_t bpid;
            int16_t bepoch;
            if (!sec_authorized(r, BK_RES_TOPIC, qt->Name, BK_OP_WRITE) ||
                view_leader_replica(b, qt->Name, qt->PartitionData[i].Index, &p) != KP_NONE ||
                !pv_needed(p, qt->PartitionData[i].Records, &bpid, &bepoch))
                continue;
            if (coord == -2) {
                coord = b->txn_coordinator_of(b, q->TransactionalId.p,
                                              (size_t)q->TransactionalId.len);
                if (coord == b->cfg->broker_id)
                    return 0;                 /* ours: verify_txn asks it directly */
                pid = bpid;
                epoch = bepoch;
                pv = calloc(1, sizeof *pv + (size_t)most * sizeof pv->parts[0]);
                tt = bk_req_alloc(r, (size_t)q->TopicData_count, sizeof *tt);
                ids = bk_req_alloc(r, (size_t)most, sizeof *ids);
                if (!pv || !tt || !ids) {
                    free(pv);
                    return 0;                 /* no memory: refused, retriably (verify_txn) */
                }
            }
            /* one producer per request: another's batches are refused */
            bool ask = bpid == pid && bepoch == epoch;
            pv->parts[n++] = (pv_part){ qt->Name, p->id,
                                        ask ? PV_ASK : KP_INVALID_PRODUCER_EPOCH };
            if (!ask)
                continue;
            if (!topic_open) {
                tt[nt++] = (kp_AddPartitionsToTxnRequest_AddPartitionsToTxnTopic){
                    .Name = qt->Name, .Partitions = &ids[nids], .Partitions_count = 0 };
                topic_open = true;
            }
            ids[nids++] = p->id;
            tt[nt - 1].Partitions_count++;
        }
    }
    if (!pv)
        return 0;
    pv->r = r;
    pv->body = body0;
    pv->n = n;
    kp_AddPartitionsToTxnRequest_AddPartitionsToTxnTransaction x = {
        .TransactionalId = q->TransactionalId, .ProducerId = pid, .ProducerEpoch = epoch,
        .Topics = tt, .Topics_count = nt };
    /* No coordinator now (coord -1): the batches are refused with a
     * retriable error. */
    if (api_verify_send(r, coord, &x, q->TimeoutMs > 0 ? q->TimeoutMs : 30000, pv_done,
                        pv) != 0) {
        free(pv);
        return 0;
    }
    return BK_DEFER;
}

/* Kafka's ProduceRequest.hasTransactionalRecords: a transactional batch in
 * any partition's records (headers only, as far as they parse; what does
 * not parse is refused later, per partition). */
static bool has_txn_records(const kp_ProduceRequest *q)
{
    for (int32_t t = 0; t < q->TopicData_count; t++)
        for (int32_t i = 0; i < q->TopicData[t].PartitionData_count; i++) {
            kp_str rec = q->TopicData[t].PartitionData[i].Records;
            const uint8_t *d = (const uint8_t *)rec.p;
            size_t len = rec.len > 0 ? (size_t)rec.len : 0, at = 0;
            while (len - at >= KP_BATCH_HEADER_SIZE && d[at + KP_BATCH_OFF_Magic] == KP_BATCH_MAGIC) {
                if (pv_be(d + at + KP_BATCH_OFF_Attributes, 2) & KP_ATTR_TRANSACTIONAL)
                    return true;
                int64_t size = kp_batch_size(d + at, len - at);
                if (size <= 0 || (size_t)size > len - at)
                    break;
                at += (size_t)size;
            }
        }
    return false;
}

int api_handle_produce(bk_req *r)
{
    int16_t ver = r->hdr.RequestApiVersion;
    /* The whole request is decoded before anything is appended, so a
     * malformed request changes nothing.  Records are slices of the frame
     * (no copy); the arrays come from r->arena, whose kept chunk serves a
     * request of up to ~100 partitions without a malloc. */
    kp_ProduceRequest q;
    kp_rd body0 = r->body;
    if (kp_dec_ProduceRequest(&r->body, ver, &q, &r->arena) != 0)
        return BK_CLOSE;

    kp_ProduceResponse m;
    kp_init_ProduceResponse(&m);
    int32_t nt = q.TopicData_count < 0 ? 0 : q.TopicData_count;
    produce_topic_out *topics = NULL;
    if (nt > 0 && !(topics = kp_arena_alloc(&r->arena, (size_t)nt * sizeof *topics)))
        return BK_CLOSE;
    bool any_error = false;
    bk_hint_nodes hints = { .n = 0 };
    /* Kafka's KafkaApis: records with a transactional batch need a
     * transactional id and WRITE on it, else every partition is refused
     * with TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing is appended
     * (a null id would let a made-up producer id open a transaction no
     * coordinator knows, holding the LSO forever). */
    bool txn_denied = has_txn_records(&q) && (q.TransactionalId.len < 0 ||
        !sec_authorized(r, BK_RES_TRANSACTIONAL_ID, q.TransactionalId, BK_OP_WRITE));
    int vrc = txn_denied ? 0 : pv_start(r, &q, body0);
    if (vrc)
        return vrc;
    /* acks=-1 in cluster mode: one pw_part per appended partition. */
    pw_part *waits = NULL;
    int nwaits = 0;
    for (int32_t t = 0; t < nt; t++) {
        const kp_ProduceRequest_TopicProduceData *qt = &q.TopicData[t];
        int32_t np = qt->PartitionData_count < 0 ? 0 : qt->PartitionData_count;
        produce_part_out *parts = NULL;
        if (np > 0 && !(parts = kp_arena_alloc(&r->arena, (size_t)np * sizeof *parts)))
            return BK_CLOSE;
        topics[t] = (produce_topic_out){ .Name = qt->Name, .PartitionResponses = parts,
                                         .PartitionResponses_count = np };
        for (int32_t i = 0; i < np; i++) {
            const kp_ProduceRequest_PartitionProduceData *qp = &qt->PartitionData[i];
            produce_result res = { .error = KP_TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                   .error_message = KP_STR_NULL, .base_offset = -1,
                                   .log_append_time = -1, .log_start = -1, .wait_end = -1,
                                   .leader_id = -1, .leader_epoch = -1 };
            if (!txn_denied)
                produce_partition(r, q.TransactionalId, q.Acks, qt->Name, qp->Index,
                                  qp->Records, &res, &hints);
            if (res.wait_end >= 0) {
                if (!waits) {
                    size_t most = 0;
                    for (int32_t k = 0; k < nt; k++)
                        most += q.TopicData[k].PartitionData_count < 0
                                    ? 0 : (size_t)q.TopicData[k].PartitionData_count;
                    if (!(waits = kp_arena_alloc(&r->arena, most * sizeof *waits)))
                        return BK_CLOSE;
                }
                waits[nwaits++] = (pw_part){ .topic = qt->Name, .partition = qp->Index,
                                             .end = res.wait_end, .out = &parts[i] };
            }
            any_error |= res.error != KP_NONE;
            /* LogAppendTimeMs (v2+) and LogStartOffset (v5+) are -1 when
             * unknown, their JSON default, so older versions encode. */
            parts[i] = (produce_part_out){
                .Index = qp->Index,
                .ErrorCode = res.error,
                .BaseOffset = res.base_offset,
                .LogAppendTimeMs = ver >= 2 ? res.log_append_time : -1,
                .LogStartOffset = ver >= 5 ? res.log_start : -1,
                .ErrorMessage = res.error_message,
                .RecordErrors = res.record_error,
                .RecordErrors_count = res.record_error ? 1 : 0,
                .CurrentLeader = { .LeaderId = res.leader_id, .LeaderEpoch = res.leader_epoch },
            };
        }
    }
    if (q.Acks == 0 && any_error) {
        /* As Kafka: an acks=0 producer hears of a failure only by losing
         * its connection, which makes it refresh metadata. */
        char cid[128];
        BK_INFO("Produce with acks=0 from client %s failed; closing its "
                "connection so it refreshes metadata", client_of(r, cid, sizeof cid));
        return BK_CLOSE_QUIET;
    }
    if (q.Acks == 0)
        return BK_NO_RESPONSE;
    m.Responses = topics;
    m.Responses_count = nt;
    if (hints.n > 0) {
        bk_broker_info info[BK_HINT_MAX_NODES];
        int n = api_hint_endpoints(r->b, net_conn_listener(r->conn), &hints, info);
        kp_ProduceResponse_NodeEndpoint *ne = kp_arena_alloc(&r->arena, sizeof *ne * (size_t)n + 1);
        if (!ne)
            return BK_CLOSE;
        BK_HINT_FILL_ENDPOINTS(ne, info, n);
        m.NodeEndpoints = ne;
        m.NodeEndpoints_count = n;
    }
    if (nwaits > 0)
        return pw_start(r, &m, waits, nwaits, q.TimeoutMs);
    kp_enc_ProduceResponse(r->out, ver, &m);
    return r->out->err ? BK_CLOSE : BK_RESPOND;
}
