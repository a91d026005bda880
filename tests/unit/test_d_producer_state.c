/*
 * test_d_producer_state — the idempotent producers' table on its own:
 * duplicates of the last five batches, gaps, epochs, sequence wrap,
 * several batches of one producer in one request, many producers (growth,
 * expiry with back-shift deletion), snapshots (round trip, CRC, one above
 * the log end), and the rebuild from batch headers via seg_scan_headers;
 * transactions: the open transaction's first offset, markers, the first
 * unstable offset, snapshot v2 (v1 still read), aborts into the index.
 */
#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/replica/replica_producers.h"
#include "metadata/md.h"
#include "protocol/kp.h"
#include "segments/seg.h"
#include "tests/unit/unit_run.h"
#include "tests/unit/unit_tmpdir.h"

/* ---- helpers ------------------------------------------------------------------ */
static void setup(void)
{
    unit_tmpdir_make("pstate");
}

static void teardown(void)
{
    unit_tmpdir_remove();
}

/* Appends a batch of n records with the producer fields to out. */
static void add_batch(kp_buf *out, int64_t pid, int16_t epoch, int32_t seq, int n)
{
    kp_batch_builder bb;
    kp_bb_init(&bb, out, KP_CODEC_NONE);
    kp_bb_set_producer(&bb, pid, epoch, seq);
    for (int i = 0; i < n; i++)
        kp_bb_add(&bb, 1700000000000LL + i, NULL, 0, "v", 1, NULL, 0);
    ck_assert_int_gt(kp_bb_finish(&bb), 0);
    kp_bb_free(&bb);
}

/* What the broker does with one request's records at offset *next:
 * check, then (if to be appended) assign offsets and record.  Returns
 * the check's answer; *base gets the offset answered. */
static int produce(bk_pstate *ps, kp_buf *b, int64_t *next, int64_t *base)
{
    bk_pbatch dup;
    int rc = replica_pstate_check(ps, b->data, b->len, &dup);
    if (rc == BK_PS_DUPLICATE) {
        *base = dup.base_offset;
        return rc;
    }
    if (rc != KP_NONE)
        return rc;
    *base = *next;
    for (size_t at = 0; at < b->len;) {
        kp_batch h;
        ck_assert_int_eq(kp_batch_header(b->data + at, b->len - at, &h), 0);
        kp_batch_set_base_offset(b->data + at, *next);
        *next += h.LastOffsetDelta + 1;
        at += (size_t)h.BatchLength + KP_BATCH_LOG_OVERHEAD;
    }
    ck_assert_int_eq(replica_pstate_record(ps, b->data, b->len, 1000), 0);
    return KP_NONE;
}

static int produce1(bk_pstate *ps, int64_t pid, int16_t epoch, int32_t seq, int n,
                    int64_t *next, int64_t *base)
{
    kp_buf b;
    kp_buf_init(&b);
    add_batch(&b, pid, epoch, seq, n);
    int rc = produce(ps, &b, next, base);
    kp_buf_free(&b);
    return rc;
}

/* ---- sequence rules ---------------------------------------------------------------- */
START_TEST(test_retry_of_one_of_last_five_is_duplicate_with_original_offset)
{
    bk_pstate ps;
    replica_pstate_init(&ps);
    int64_t next = 0, base;
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(produce1(&ps, 7, 0, i * 2, 2, &next, &base), KP_NONE);
    ck_assert_int_eq(next, 14);
    for (int i = 2; i < 7; i++) {
        ck_assert_int_eq(produce1(&ps, 7, 0, i * 2, 2, &next, &base), BK_PS_DUPLICATE);
        ck_assert_int_eq(base, i * 2);
    }
    /* forgotten (sixth from the end): not a duplicate, and out of order */
    ck_assert_int_eq(produce1(&ps, 7, 0, 2, 2, &next, &base), KP_OUT_OF_ORDER_SEQUENCE_NUMBER);
    /* same first sequence, other length: not a duplicate either */
    ck_assert_int_eq(produce1(&ps, 7, 0, 12, 1, &next, &base), KP_OUT_OF_ORDER_SEQUENCE_NUMBER);
    ck_assert_int_eq(next, 14);
    replica_pstate_free(&ps);
}
END_TEST

START_TEST(test_gap_is_out_of_order)
{
    bk_pstate ps;
    replica_pstate_init(&ps);
    int64_t next = 0, base;
    ck_assert_int_eq(produce1(&ps, 1, 0, 0, 3, &next, &base), KP_NONE);
    ck_assert_int_eq(produce1(&ps, 1, 0, 4, 1, &next, &base), KP_OUT_OF_ORDER_SEQUENCE_NUMBER);
    ck_assert_int_eq(produce1(&ps, 1, 0, 2, 1, &next, &base), KP_OUT_OF_ORDER_SEQUENCE_NUMBER);
    ck_assert_int_eq(produce1(&ps, 1, 0, 3, 1, &next, &base), KP_NONE);
    ck_assert_int_eq(base, 3);
    replica_pstate_free(&ps);
}
END_TEST

START_TEST(test_epochs)
{
    bk_pstate ps;
    replica_pstate_init(&ps);
    int64_t next = 0, base;
    ck_assert_int_eq(produce1(&ps, 1, 3, 0, 1, &next, &base), KP_NONE);
    ck_assert_int_eq(produce1(&ps, 1, 2, 1, 1, &next, &base), KP_INVALID_PRODUCER_EPOCH);
    /* a new epoch starts at 0 */
    ck_assert_int_eq(produce1(&ps, 1, 4, 1, 1, &next, &base), KP_OUT_OF_ORDER_SEQUENCE_NUMBER);
    ck_assert_int_eq(produce1(&ps, 1, 4, 0, 1, &next, &base), KP_NONE);
    /* the old epoch's batch is no longer a duplicate: it is fenced */
    ck_assert_int_eq(produce1(&ps, 1, 3, 0, 1, &next, &base), KP_INVALID_PRODUCER_EPOCH);
    ck_assert_ptr_nonnull(replica_pstate_find(&ps, 1));
    ck_assert_int_eq(replica_pstate_find(&ps, 1)->epoch, 4);
    ck_assert_int_eq(replica_pstate_find(&ps, 1)->n, 1);
    replica_pstate_free(&ps);
}
END_TEST

START_TEST(test_unknown_producer_accepted_at_any_sequence)
{
    bk_pstate ps;
    replica_pstate_init(&ps);
    int64_t next = 0, base;
    ck_assert_int_eq(produce1(&ps, 9, 0, 1234, 2, &next, &base), KP_NONE);
    ck_assert_int_eq(produce1(&ps, 9, 0, 1236, 1, &next, &base), KP_NONE);
    ck_assert_int_eq(produce1(&ps, 9, 0, 1234, 2, &next, &base), BK_PS_DUPLICATE);
    ck_assert_int_eq(base, 0);
    replica_pstate_free(&ps);
}
END_TEST

START_TEST(test_sequence_wraps_at_int32_max)
{
    bk_pstate ps;
    replica_pstate_init(&ps);
    int64_t next = 0, base;
    /* INT32_MAX-1, INT32_MAX, then 0: the batch's last sequence wraps */
    ck_assert_int_eq(produce1(&ps, 5, 0, INT32_MAX - 1, 2, &next, &base), KP_NONE);
    ck_assert_int_eq(replica_pstate_find(&ps, 5)->batches[0].last_seq, INT32_MAX);
    ck_assert_int_eq(produce1(&ps, 5, 0, 0, 3, &next, &base), KP_NONE);
    ck_assert_int_eq(produce1(&ps, 5, 0, INT32_MAX - 1, 2, &next, &base), BK_PS_DUPLICATE);
    /* a batch crossing the wrap */
    ck_assert_int_eq(produce1(&ps, 6, 0, INT32_MAX, 3, &next, &base), KP_NONE);
    ck_assert_int_eq(replica_pstate_find(&ps, 6)->batches[0].last_seq, 1);
    ck_assert_int_eq(produce1(&ps, 6, 0, 2, 1, &next, &base), KP_NONE);
    replica_pstate_free(&ps);
}
END_TEST

START_TEST(test_several_batches_of_one_producer_in_one_request_chain)
{
    bk_pstate ps;
    replica_pstate_init(&ps);
    int64_t next = 0, base;
    kp_buf b;
    kp_buf_init(&b);
    add_batch(&b, 1, 0, 0, 2);
    add_batch(&b, 2, 0, 0, 1);
    add_batch(&b, 1, 0, 2, 2);
    ck_assert_int_eq(produce(&ps, &b, &next, &base), KP_NONE);
    ck_assert_int_eq(next, 5);
    ck_assert_int_eq(replica_pstate_find(&ps, 1)->n, 2);
    /* second batch out of order against the first of the same request */
    kp_buf_reset(&b);
    add_batch(&b, 1, 0, 4, 1);
    add_batch(&b, 1, 0, 6, 1);
    ck_assert_int_eq(produce(&ps, &b, &next, &base), KP_OUT_OF_ORDER_SEQUENCE_NUMBER);
    ck_assert_int_eq(next, 5);
    kp_buf_free(&b);
    replica_pstate_free(&ps);
}
END_TEST

START_TEST(test_transactional_accepted_negative_fields_refused)
{
    bk_pstate ps;
    replica_pstate_init(&ps);
    kp_buf b;
    kp_buf_init(&b);
    kp_batch_builder bb;
    kp_bb_init(&bb, &b, KP_CODEC_NONE);
    kp_bb_set_producer(&bb, 1, 0, 0);
    bb.extra_attrs = KP_ATTR_TRANSACTIONAL;
    kp_bb_add(&bb, 1, NULL, 0, "v", 1, NULL, 0);
    ck_assert_int_gt(kp_bb_finish(&bb), 0);
    kp_bb_free(&bb);
    bk_pbatch dup;
    ck_assert_int_eq(replica_pstate_check(&ps, b.data, b.len, &dup), KP_NONE);
    kp_buf_reset(&b);
    add_batch(&b, 1, 0, -1, 1);
    ck_assert_int_eq(replica_pstate_check(&ps, b.data, b.len, &dup), KP_CORRUPT_MESSAGE);
    /* no producer id at all: nothing to check */
    kp_buf_reset(&b);
    add_batch(&b, -1, -1, -1, 1);
    ck_assert_int_eq(replica_pstate_check(&ps, b.data, b.len, &dup), KP_NONE);
    ck_assert_int_eq(replica_pstate_check(NULL, b.data, b.len, &dup), KP_NONE);
    kp_buf_free(&b);
    replica_pstate_free(&ps);
}
END_TEST

/* ---- the table ----------------------------------------------------------------------- */
START_TEST(test_many_producers_grow_and_expire_with_back_shift)
{
    bk_pstate ps;
    replica_pstate_init(&ps);
    enum { N = 5000 };
    for (int64_t pid = 0; pid < N; pid++) {
        kp_batch h = { .BaseOffset = pid, .ProducerId = pid * 7919, .ProducerEpoch = 0,
                       .BaseSequence = 0, .LastOffsetDelta = 0 };
        /* odd pids seen long ago, even ones recently */
        ck_assert_int_eq(replica_pstate_apply(&ps, &h, pid % 2 ? 100 : 10000, NULL), 0);
    }
    ck_assert_uint_eq(ps.n, N);
    ck_assert_uint_ge(ps.cap * 3, ps.n * 4);
    ck_assert_uint_eq(replica_pstate_expire(&ps, 10000, 5000), N / 2);
    ck_assert_uint_eq(ps.n, N / 2);
    for (int64_t pid = 0; pid < N; pid++) {
        bk_producer *e = replica_pstate_find(&ps, pid * 7919);
        if (pid % 2) {
            ck_assert_ptr_null(e);
        } else {
            ck_assert_ptr_nonnull(e);
            ck_assert_int_eq(e->batches[e->head].base_offset, pid);
        }
    }
    replica_pstate_free(&ps);
}
END_TEST

/* ---- snapshots --------------------------------------------------------------------- */
static void fill(bk_pstate *ps, int64_t *next)
{
    int64_t base;
    for (int64_t pid = 100; pid < 110; pid++)
        for (int i = 0; i < (int)(pid - 100); i++)
            ck_assert_int_eq(produce1(ps, pid, (int16_t)(pid % 3), i, 1, next, &base), KP_NONE);
}

static void assert_same(const bk_pstate *a, const bk_pstate *b)
{
    ck_assert_uint_eq(a->n, b->n);
    ck_assert_int_eq(a->first_unstable, b->first_unstable);
    for (uint32_t i = 0; i < a->cap; i++) {
        const bk_producer *x = a->slots[i];
        if (!x)
            continue;
        const bk_producer *y = replica_pstate_find(b, x->pid);
        ck_assert_ptr_nonnull(y);
        ck_assert_int_eq(x->epoch, y->epoch);
        ck_assert_int_eq(x->n, y->n);
        ck_assert_int_eq(x->txn_first, y->txn_first);
        ck_assert_int_eq(x->coord_epoch, y->coord_epoch);
        for (int k = 0; k < x->n; k++) {      /* newest first on both sides */
            const bk_pbatch *p = &x->batches[(x->head + BK_PRODUCER_BATCHES - k) % BK_PRODUCER_BATCHES];
            const bk_pbatch *q = &y->batches[(y->head + BK_PRODUCER_BATCHES - k) % BK_PRODUCER_BATCHES];
            ck_assert_int_eq(p->first_seq, q->first_seq);
            ck_assert_int_eq(p->last_seq, q->last_seq);
            ck_assert_int_eq(p->base_offset, q->base_offset);
        }
    }
}

START_TEST(test_snapshot_round_trip_and_newest_usable_wins)
{
    bk_pstate ps, back;
    replica_pstate_init(&ps);
    replica_pstate_init(&back);
    int64_t next = 0;
    fill(&ps, &next);
    ck_assert_int_eq(replica_pstate_save(&ps, g_dir, 20), 0);
    ck_assert_int_eq(replica_pstate_save(&ps, g_dir, next), 0);
    ck_assert_int_eq(replica_pstate_save(&ps, g_dir, next + 100), 0);
    /* keeps the newest two */
    char path[128];
    snprintf(path, sizeof path, "%s/%020d.snapshot", g_dir, 20);
    ck_assert_int_ne(access(path, F_OK), 0);
    /* the one above the log end is dropped; the next one is used */
    ck_assert_int_eq(replica_pstate_load(&back, g_dir, next), next);
    snprintf(path, sizeof path, "%s/%020lld.snapshot", g_dir, (long long)(next + 100));
    ck_assert_int_ne(access(path, F_OK), 0);
    assert_same(&ps, &back);
    replica_pstate_free(&back);
    replica_pstate_free(&ps);
}
END_TEST

START_TEST(test_damaged_snapshot_ignored)
{
    bk_pstate ps, back;
    replica_pstate_init(&ps);
    replica_pstate_init(&back);
    int64_t next = 0;
    fill(&ps, &next);
    ck_assert_int_eq(replica_pstate_save(&ps, g_dir, next), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/%020lld.snapshot", g_dir, (long long)next);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, 20, SEEK_SET);
    fputc(0x55, f);
    fclose(f);
    ck_assert_int_eq(replica_pstate_load(&back, g_dir, next), -1);
    ck_assert_uint_eq(back.n, 0);
    replica_pstate_free(&ps);
    /* an empty table round-trips too */
    ck_assert_int_eq(replica_pstate_save(NULL, g_dir, next + 1), 0);
    ck_assert_int_eq(replica_pstate_load(&back, g_dir, next + 1), next + 1);
    ck_assert_uint_eq(back.n, 0);
    replica_pstate_free(&back);
}
END_TEST

/* ---- rebuild from the log ---------------------------------------------------------------- */
struct collect { bk_pstate *ps; int64_t count; int64_t first_base; };

static int collect_header(const uint8_t *hdr, void *arg)
{
    struct collect *c = arg;
    kp_batch h;
    ck_assert_int_eq(kp_batch_header(hdr, KP_BATCH_HEADER_SIZE, &h), 0);
    if (c->count++ == 0)
        c->first_base = h.BaseOffset;
    bk_marker m;
    size_t size = (size_t)h.BatchLength + KP_BATCH_LOG_OVERHEAD;
    bool marker = (h.Attributes & KP_ATTR_CONTROL) && size <= SEG_CONTROL_BATCH_MAX &&
                  replica_marker_parse(hdr, size, &m) == 0;
    if (h.ProducerId >= 0)
        ck_assert_int_eq(replica_pstate_apply(c->ps, &h, 0, marker ? &m : NULL), 0);
    return 0;
}

static int stop_after_3(const uint8_t *hdr, void *arg)
{
    (void)hdr;
    struct collect *c = arg;
    return ++c->count == 3 ? 7 : 0;
}

START_TEST(test_rebuild_from_headers_across_segments_matches_live_state)
{
    seg_open_opts o = { .dir = g_dir };
    seg_config_default(&o.cfg);
    o.cfg.segment_bytes = 4096;
    o.cfg.index_interval_bytes = 256;
    o.cfg.segment_index_bytes = 4096;
    seg_log *log;
    ck_assert_int_eq(seg_open(&o, &log), 0);
    bk_pstate live;
    replica_pstate_init(&live);
    kp_buf b;
    kp_buf_init(&b);
    int64_t next = 0, base;
    for (int i = 0; i < 300; i++) {
        kp_buf_reset(&b);
        if (i % 4 == 3)
            add_batch(&b, -1, -1, -1, 2);             /* not idempotent */
        else
            add_batch(&b, 40 + i % 3, 0, (i / 4) * 3, 3);
        ck_assert_int_eq(produce(&live, &b, &next, &base), KP_NONE);
        int64_t got;
        ck_assert_int_eq(seg_append(log, b.data, b.len, 0, &got), 0);
        ck_assert_int_eq(got, base);
    }
    ck_assert_int_gt(seg_segment_count(log), 3);
    bk_pstate back;
    replica_pstate_init(&back);
    struct collect c = { &back, 0, -1 };
    ck_assert_int_eq(seg_scan_headers(log, 0, collect_header, &c), 0);
    ck_assert_int_eq(c.count, 300);
    assert_same(&live, &back);
    /* from the middle of a batch: starts at the batch holding it */
    struct collect mid = { &back, 0, -1 };
    ck_assert_int_eq(seg_scan_headers(log, 500, collect_header, &mid), 0);
    ck_assert_int_le(mid.first_base, 500);
    ck_assert_int_gt(mid.first_base, 496);
    /* nothing at the log end; the callback's non-zero stops the walk */
    ck_assert_int_eq(seg_scan_headers(log, seg_log_end(log), stop_after_3, &mid), 0);
    mid.count = 0;
    ck_assert_int_eq(seg_scan_headers(log, 0, stop_after_3, &mid), 7);
    ck_assert_int_eq(mid.count, 3);
    replica_pstate_free(&back);
    replica_pstate_free(&live);
    kp_buf_free(&b);
    seg_close(log);
}
END_TEST


/* ---- transactions ------------------------------------------------------------------- */
static void add_txn_batch(kp_buf *out, int64_t pid, int16_t epoch, int32_t seq, int n,
                          bool transactional)
{
    kp_batch_builder bb;
    kp_bb_init(&bb, out, KP_CODEC_NONE);
    kp_bb_set_producer(&bb, pid, epoch, seq);
    bb.extra_attrs = transactional ? KP_ATTR_TRANSACTIONAL : 0;
    for (int i = 0; i < n; i++)
        kp_bb_add(&bb, 1700000000000LL + i, NULL, 0, "t", 1, NULL, 0);
    ck_assert_int_gt(kp_bb_finish(&bb), 0);
    kp_bb_free(&bb);
}

static int txn_produce(bk_pstate *ps, int64_t pid, int16_t epoch, int32_t seq, int n,
                       bool transactional, int64_t *next)
{
    kp_buf b;
    kp_buf_init(&b);
    add_txn_batch(&b, pid, epoch, seq, n, transactional);
    int64_t base;
    int rc = produce(ps, &b, next, &base);
    kp_buf_free(&b);
    return rc;
}

/* A marker at *next, as replica_txn.c appends it (check, build, record);
 * into log too when it is given. */
static int txn_marker(bk_pstate *ps, seg_log *log, int64_t pid, int16_t epoch, bool commit,
                      int32_t coord, int64_t *next)
{
    int rc = replica_pstate_check_marker(ps, pid, epoch, coord);
    if (rc != KP_NONE)
        return rc;
    uint8_t buf[REPLICA_MARKER_SIZE];
    bk_marker m = { .commit = commit, .coordinator_epoch = coord };
    size_t len = replica_marker_build(buf, pid, epoch, 5, &m, 1700000000000LL);
    ck_assert_uint_eq(len, REPLICA_MARKER_SIZE);
    if (log) {
        int64_t base;
        ck_assert_int_eq(seg_append(log, buf, len, 0, &base), 0);
        ck_assert_int_eq(base, *next);
    } else {
        kp_batch_set_base_offset(buf, *next);
    }
    *next += 1;
    ck_assert_int_eq(replica_pstate_record(ps, buf, len, 1000), 0);
    return KP_NONE;
}

START_TEST(test_marker_is_a_valid_control_batch_that_parses_back)
{
    uint8_t buf[REPLICA_MARKER_SIZE];
    bk_marker m = { .commit = true, .coordinator_epoch = 77 }, back;
    size_t len = replica_marker_build(buf, 4242, 3, 9, &m, 1700000000123LL);
    kp_batch h;
    ck_assert_int_eq(kp_batch_check_stored(buf, len, &h), (int64_t)len);
    ck_assert_int_eq(h.Attributes, KP_ATTR_TRANSACTIONAL | KP_ATTR_CONTROL);
    ck_assert_int_eq(h.ProducerId, 4242);
    ck_assert_int_eq(h.ProducerEpoch, 3);
    ck_assert_int_eq(h.BaseSequence, -1);
    ck_assert_int_eq(h.PartitionLeaderEpoch, 9);
    ck_assert_int_eq(h.RecordsCount, 1);
    ck_assert_int_eq(h.MaxTimestamp, 1700000000123LL);
    /* the record: key = version 0, type 1 (COMMIT); value = version 0, epoch 77 */
    static const uint8_t rec[] = { 0x20, 0, 0, 0, 0x08, 0, 0, 0, 1, 0x0c, 0, 0, 0, 0, 0, 77, 0 };
    ck_assert_mem_eq(buf + KP_BATCH_HEADER_SIZE, rec, sizeof rec);
    ck_assert_int_eq(replica_marker_parse(buf, len, &back), 0);
    ck_assert(back.commit);
    ck_assert_int_eq(back.coordinator_epoch, 77);
    m.commit = false;
    replica_marker_build(buf, 1, 0, 0, &m, 0);
    ck_assert_int_eq(replica_marker_parse(buf, len, &back), 0);
    ck_assert(!back.commit);
    ck_assert_int_eq(replica_marker_parse(buf, 70, &back), -1);    /* cut short */
}
END_TEST

START_TEST(test_transactions_open_close_and_move_the_first_unstable_offset)
{
    bk_pstate ps;
    replica_pstate_init(&ps);
    int64_t next = 0;
    ck_assert_int_eq(ps.first_unstable, -1);
    ck_assert_int_eq(txn_produce(&ps, 1, 0, 0, 2, false, &next), KP_NONE);  /* 0-1 idempotent */
    ck_assert_int_eq(ps.first_unstable, -1);
    ck_assert_int_eq(txn_produce(&ps, 1, 0, 2, 2, true, &next), KP_NONE);   /* 2-3 */
    ck_assert_int_eq(txn_produce(&ps, 2, 0, 0, 1, true, &next), KP_NONE);   /* 4 */
    ck_assert_int_eq(txn_produce(&ps, 1, 0, 4, 1, true, &next), KP_NONE);   /* 5 */
    ck_assert_int_eq(replica_pstate_find(&ps, 1)->txn_first, 2);
    ck_assert_int_eq(replica_pstate_find(&ps, 2)->txn_first, 4);
    ck_assert_int_eq(ps.first_unstable, 2);
    ck_assert_uint_eq(ps.open_txns, 2);
    /* inside its transaction a producer writes transactionally only */
    ck_assert_int_eq(txn_produce(&ps, 1, 0, 5, 1, false, &next), KP_INVALID_TXN_STATE);
    /* pid 1 commits at 6: pid 2's start is now the first unstable offset */
    ck_assert_int_eq(txn_marker(&ps, NULL, 1, 0, true, 4, &next), KP_NONE);
    ck_assert_int_eq(replica_pstate_find(&ps, 1)->txn_first, -1);
    ck_assert_int_eq(replica_pstate_find(&ps, 1)->coord_epoch, 4);
    ck_assert_int_eq(ps.first_unstable, 4);
    ck_assert_uint_eq(ps.open_txns, 1);
    /* the same epoch goes on with its sequence */
    ck_assert_int_eq(txn_produce(&ps, 1, 0, 5, 1, true, &next), KP_NONE);   /* 7 */
    ck_assert_int_eq(ps.first_unstable, 4);
    /* older coordinator or producer epochs are fenced */
    ck_assert_int_eq(replica_pstate_check_marker(&ps, 1, 0, 3), KP_TRANSACTION_COORDINATOR_FENCED);
    /* the coordinator aborts pid 2 with a bumped epoch */
    ck_assert_int_eq(txn_marker(&ps, NULL, 2, 1, false, 4, &next), KP_NONE); /* 8 */
    ck_assert_int_eq(ps.first_unstable, 7);
    ck_assert_int_eq(replica_pstate_check_marker(&ps, 2, 0, 4), KP_INVALID_PRODUCER_EPOCH);
    ck_assert_int_eq(txn_produce(&ps, 2, 0, 1, 1, true, &next), KP_INVALID_PRODUCER_EPOCH);
    ck_assert_int_eq(txn_produce(&ps, 2, 1, 1, 1, true, &next), KP_OUT_OF_ORDER_SEQUENCE_NUMBER);
    ck_assert_int_eq(txn_produce(&ps, 2, 1, 0, 1, true, &next), KP_NONE);  /* 9 */
    ck_assert_int_eq(ps.first_unstable, 7);
    ck_assert_int_eq(txn_marker(&ps, NULL, 1, 0, false, 4, &next), KP_NONE); /* 10 */
    ck_assert_int_eq(ps.first_unstable, 9);
    ck_assert_int_eq(txn_marker(&ps, NULL, 2, 1, true, 4, &next), KP_NONE);  /* 11 */
    ck_assert_int_eq(ps.first_unstable, -1);
    ck_assert_uint_eq(ps.open_txns, 0);
    /* a marker for a producer with no open transaction changes nothing else */
    ck_assert_int_eq(txn_marker(&ps, NULL, 2, 1, true, 4, &next), KP_NONE);
    ck_assert_int_eq(ps.first_unstable, -1);
    replica_pstate_free(&ps);
}
END_TEST

/* replica_producers.c P4 with many producers: their transactions open
 * and close in a scrambled order (the table grows meanwhile, idle ones
 * expire); after each step the first unstable offset is the smallest open
 * start, found here by brute force, and a snapshot loads back the same. */
START_TEST(test_first_unstable_is_the_smallest_open_start_among_many_producers)
{
    enum { PIDS = 300, STEPS = 3000 };
    static int64_t start[PIDS];
    static int32_t seq[PIDS];
    static int16_t epoch[PIDS];
    bk_pstate ps;
    replica_pstate_init(&ps);
    int64_t next = 0;
    uint32_t rnd = 12345;
    for (int k = 0; k < PIDS; k++)
        start[k] = -1;
    for (int step = 0; step < STEPS; step++) {
        rnd = rnd * 1103515245u + 12345u;
        int k = (int)((rnd >> 8) % PIDS);
        if (start[k] >= 0 && (rnd >> 4) % 3 == 0) {            /* ends it */
            bool commit = (rnd >> 6) & 1;
            ck_assert_int_eq(txn_marker(&ps, NULL, 100 + k, epoch[k], commit, 1, &next),
                             KP_NONE);
            start[k] = -1;
        } else {                                             /* opens or goes on */
            int64_t at = next;
            ck_assert_int_eq(txn_produce(&ps, 100 + k, epoch[k], seq[k], 1, true, &next),
                             KP_NONE);
            seq[k]++;
            if (start[k] < 0)
                start[k] = at;
        }
        int64_t want = -1;
        uint32_t open = 0;
        for (int j = 0; j < PIDS; j++)
            if (start[j] >= 0) {
                open++;
                if (want < 0 || start[j] < want)
                    want = start[j];
            }
        ck_assert_int_eq(ps.first_unstable, want);
        ck_assert_uint_eq(ps.open_txns, open);
        if (step % 1000 == 999) {        /* nothing open expires; a snapshot loads back */
            replica_pstate_expire(&ps, 1000 + 10, 5);
            ck_assert_int_eq(ps.first_unstable, want);
            bk_pstate back;
            replica_pstate_init(&back);
            ck_assert_int_eq(replica_pstate_save(&ps, g_dir, next), 0);
            ck_assert_int_eq(replica_pstate_load(&back, g_dir, next), next);
            ck_assert_int_eq(back.first_unstable, want);
            ck_assert_uint_eq(back.open_txns, open);
            for (int j = 0; j < PIDS; j++) {              /* and closes the same */
                const bk_producer *e = replica_pstate_find(&back, 100 + j);
                ck_assert_int_eq(e ? e->txn_first : -1, start[j]);
            }
            replica_pstate_free(&back);
        }
    }
    ck_assert_uint_gt(ps.n, 200);
    replica_pstate_free(&ps);
}
END_TEST

START_TEST(test_open_transaction_never_expires_and_survives_snapshot_v2)
{
    bk_pstate ps, back;
    replica_pstate_init(&ps);
    replica_pstate_init(&back);
    int64_t next = 0;
    ck_assert_int_eq(txn_produce(&ps, 1, 0, 0, 1, true, &next), KP_NONE);
    ck_assert_int_eq(txn_produce(&ps, 2, 0, 0, 1, false, &next), KP_NONE);
    ck_assert_int_eq(txn_marker(&ps, NULL, 3, 2, true, 6, &next), KP_NONE);
    ck_assert_int_eq(replica_pstate_expire(&ps, 1000 + 10, 5), 2);  /* 2 and 3, not 1 */
    ck_assert_ptr_nonnull(replica_pstate_find(&ps, 1));
    ck_assert_int_eq(txn_marker(&ps, NULL, 5, 1, true, 6, &next), KP_NONE);
    ck_assert_int_eq(txn_produce(&ps, 6, 0, 0, 1, true, &next), KP_NONE);   /* open at 4 */
    ck_assert_int_eq(replica_pstate_save(&ps, g_dir, next), 0);
    ck_assert_int_eq(replica_pstate_load(&back, g_dir, next), next);
    ck_assert_int_eq(replica_pstate_find(&back, 1)->txn_first, 0);
    ck_assert_int_eq(replica_pstate_find(&back, 6)->txn_first, 4);
    ck_assert_int_eq(replica_pstate_find(&back, 5)->coord_epoch, 6);
    ck_assert_int_eq(replica_pstate_find(&back, 5)->epoch, 1);
    ck_assert_int_eq(back.first_unstable, 0);
    ck_assert_uint_eq(back.open_txns, 2);
    replica_pstate_free(&back);
    replica_pstate_free(&ps);
}
END_TEST

START_TEST(test_snapshot_v1_still_loads)
{
    /* "SLPS", version 1, one producer: id 9, epoch 2, last ts 1000, one batch */
    kp_buf b;
    kp_buf_init(&b);
    kp_wr_raw(&b, "SLPS", 4);
    kp_wr_i16(&b, 1);
    kp_wr_i32(&b, 1);
    kp_wr_i64(&b, 9);
    kp_wr_i16(&b, 2);
    kp_wr_i64(&b, 1000);
    kp_wr_i8(&b, 1);
    kp_wr_i32(&b, 0);
    kp_wr_i32(&b, 4);
    kp_wr_i64(&b, 10);
    kp_wr_i32(&b, 4);
    kp_wr_i64(&b, 1700000000000LL);
    kp_wr_u32(&b, kp_crc32c(0, b.data, b.len));
    char path[128];
    snprintf(path, sizeof path, "%s/%020d.snapshot", g_dir, 15);
    FILE *f = fopen(path, "wb");
    ck_assert_uint_eq(fwrite(b.data, 1, b.len, f), b.len);
    fclose(f);
    kp_buf_free(&b);
    bk_pstate ps;
    replica_pstate_init(&ps);
    ck_assert_int_eq(replica_pstate_load(&ps, g_dir, 15), 15);
    const bk_producer *e = replica_pstate_find(&ps, 9);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->epoch, 2);
    ck_assert_int_eq(e->batches[e->head].last_seq, 4);
    ck_assert_int_eq(e->txn_first, -1);
    ck_assert_int_eq(e->coord_epoch, -1);
    ck_assert_int_eq(ps.first_unstable, -1);
    replica_pstate_free(&ps);
}
END_TEST

/* A fresh table rebuilt from every batch header of log (with its index). */
static void replay_all(bk_pstate *back, seg_log *log)
{
    replica_pstate_init(back);
    back->log = log;
    struct collect c = { back, 0, -1 };
    ck_assert_int_eq(seg_scan_headers(log, 0, collect_header, &c), 0);
}

START_TEST(test_abort_enters_the_index_and_a_header_replay_rebuilds_it)
{
    seg_open_opts o = { .dir = g_dir };
    seg_config_default(&o.cfg);
    seg_log *log;
    ck_assert_int_eq(seg_open(&o, &log), 0);
    bk_pstate live;
    replica_pstate_init(&live);
    live.log = log;
    kp_buf b;
    kp_buf_init(&b);
    int64_t next = 0, base;
    int32_t seq1 = 0, seq2 = 0;
    for (int round = 0; round < 3; round++) {          /* pid 1 aborts, pid 2 commits */
        kp_buf_reset(&b);
        add_txn_batch(&b, 1, 0, seq1, 2, true);
        ck_assert_int_eq(produce(&live, &b, &next, &base), KP_NONE);
        ck_assert_int_eq(seg_append(log, b.data, b.len, 0, &base), 0);
        kp_buf_reset(&b);
        add_txn_batch(&b, 2, 0, seq2, 1, true);
        ck_assert_int_eq(produce(&live, &b, &next, &base), KP_NONE);
        ck_assert_int_eq(seg_append(log, b.data, b.len, 0, &base), 0);
        seq1 += 2;
        seq2 += 1;
        ck_assert_int_eq(txn_marker(&live, log, 1, 0, false, 0, &next), KP_NONE);
        ck_assert_int_eq(txn_marker(&live, log, 2, 0, true, 0, &next), KP_NONE);
    }
    /* rounds of 5 offsets: pid 1 at r*5..r*5+1, its ABORT at r*5+3, while
     * pid 2's transaction (r*5+2) was still open: the LSO then was r*5+2 */
    seg_aborted_txn want[3], got[3];
    for (int r = 0; r < 3; r++)
        want[r] = (seg_aborted_txn){ 1, r * 5, r * 5 + 3, r * 5 + 2 };
    ck_assert_int_eq(seg_txn_collect(log, 0, next, got, 3), 3);
    ck_assert_mem_eq(got, want, sizeof want);
    ck_assert_int_eq(live.first_unstable, -1);
    /* forget and replay from the log: the same entries come back */
    seg_txn_forget_from(log, 0);
    ck_assert_int_eq(seg_txn_count(log), 0);
    bk_pstate back;
    replay_all(&back, log);
    ck_assert_int_eq(seg_txn_collect(log, 0, next, got, 3), 3);
    ck_assert_mem_eq(got, want, sizeof want);
    assert_same(&live, &back);
    replica_pstate_free(&back);
    replica_pstate_free(&live);
    kp_buf_free(&b);
    seg_close(log);
}
END_TEST

/* txnindex.c X3: the ABORT's index write fails (its path is a
 * directory): the entry is served from memory but not durable, so the
 * producer snapshot must wait (replica_producers.c); at reopen the file
 * is unreadable, the log asks a replay from its segment's base, and the
 * replay from there brings the entry back. */
START_TEST(test_a_failed_abort_index_write_is_not_durable_and_a_replay_restores_it)
{
    seg_open_opts o = { .dir = g_dir };
    seg_config_default(&o.cfg);
    seg_log *log;
    ck_assert_int_eq(seg_open(&o, &log), 0);
    char path[4200];
    snprintf(path, sizeof path, "%s/%020d.txnindex", g_dir, 0);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    kp_buf b;
    kp_buf_init(&b);
    add_txn_batch(&b, 1, 0, 0, 2, true);
    bk_pstate live;
    replica_pstate_init(&live);
    live.log = log;
    int64_t next = 0, base;
    ck_assert_int_eq(produce(&live, &b, &next, &base), KP_NONE);
    ck_assert_int_eq(seg_append(log, b.data, b.len, 0, &base), 0);
    ck_assert_int_eq(txn_marker(&live, log, 1, 0, false, 0, &next), KP_NONE);   /* 2 */
    seg_aborted_txn got[2], want = { 1, 0, 2, 3 };
    ck_assert_int_eq(seg_txn_collect(log, 0, next, got, 2), 1);
    ck_assert_mem_eq(&got[0], &want, sizeof want);
    ck_assert(!seg_txn_durable(log));
    ck_assert_int_eq(seg_flush(log, NULL), 0);
    ck_assert(!seg_txn_durable(log));                   /* still failing */
    replica_pstate_free(&live);
    seg_close(log);

    ck_assert_int_eq(seg_open(&o, &log), 0);
    ck_assert_int_eq(seg_txn_rebuild_from(log), 0);
    ck_assert_int_eq(seg_txn_count(log), 0);
    seg_txn_forget_from(log, 0);
    bk_pstate back;
    replay_all(&back, log);
    ck_assert_int_eq(seg_txn_collect(log, 0, next, got, 2), 1);
    ck_assert_mem_eq(&got[0], &want, sizeof want);
    ck_assert(!seg_txn_durable(log));
    ck_assert_int_eq(rmdir(path), 0);
    ck_assert_int_eq(seg_txn_retry(log), 0);
    ck_assert_int_eq(seg_flush(log, NULL), 0);
    ck_assert(seg_txn_durable(log));
    replica_pstate_free(&back);
    kp_buf_free(&b);
    seg_close(log);
}
END_TEST

/* ---- replica_producers.c P9: a mirror's source producers (daemon/link/link.c K17) ------------------ */
static void apply1(bk_pstate *ps, int64_t pid, int32_t seq, int64_t offset)
{
    kp_batch h = { .ProducerId = pid, .ProducerEpoch = 0, .BaseSequence = seq,
                   .LastOffsetDelta = 0, .BaseOffset = offset };
    ck_assert_int_eq(replica_pstate_apply(ps, &h, 1000, NULL), 0);
}

START_TEST(test_source_producers_never_judge_a_local_batch)
{
    bk_pstate ps;
    replica_pstate_init(&ps);
    int64_t next = 0, base;
    for (int i = 0; i < 3; i++)                  /* the source's 7 at 0..2, 8 at 3..5 */
        ck_assert_int_eq(produce1(&ps, 7, 0, i, 1, &next, &base), KP_NONE);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(produce1(&ps, 8, 0, i, 1, &next, &base), KP_NONE);
    ck_assert_int_eq(txn_produce(&ps, 10, 0, 0, 1, true, &next), KP_NONE);   /* open at 6 */
    /* 7 known but below the local start: its id is a local producer's now,
     * whose first batch (seq 0) is neither a duplicate nor out of order */
    ps.local_start = next;                       /* 7 */
    ck_assert_int_eq(produce1(&ps, 7, 0, 0, 1, &next, &base), KP_NONE);
    ck_assert_int_eq(base, 7);
    ck_assert_int_eq(produce1(&ps, 7, 0, 0, 1, &next, &base), BK_PS_DUPLICATE);
    ck_assert_int_eq(base, 7);                   /* its retry: the local batch */
    ck_assert_int_eq(produce1(&ps, 7, 0, 2, 1, &next, &base), KP_OUT_OF_ORDER_SEQUENCE_NUMBER);
    ck_assert_int_eq(produce1(&ps, 7, 0, 1, 1, &next, &base), KP_NONE);
    ck_assert_int_eq(replica_pstate_find(&ps, 7)->n, 2);
    /* the walk forgets 8, keeps 7 (local now) and 10 (its transaction open) */
    ck_assert_uint_eq(replica_pstate_local_start(&ps, 7), 1);
    ck_assert_ptr_null(replica_pstate_find(&ps, 8));
    ck_assert_ptr_nonnull(replica_pstate_find(&ps, 10));
    /* a replay that ran before the local start was known mixed 9's ring:
     * the source's (1,1) at 1 must not answer the local (1,1) */
    bk_pstate mixed;
    replica_pstate_init(&mixed);
    for (int i = 0; i < 3; i++)
        apply1(&mixed, 9, i, i);
    apply1(&mixed, 9, 0, 6);
    int64_t at = 7;
    ck_assert_int_eq(produce1(&mixed, 9, 0, 1, 1, &at, &base), BK_PS_DUPLICATE);
    ck_assert_uint_eq(replica_pstate_local_start(&mixed, 6), 0);
    ck_assert_int_eq(replica_pstate_find(&mixed, 9)->n, 1);
    ck_assert_int_eq(produce1(&mixed, 9, 0, 1, 1, &at, &base), KP_NONE);
    ck_assert_int_eq(base, 7);
    /* the snapshot (v3) keeps last_offset; a load then the walk forgets as before */
    apply1(&mixed, 11, 0, 3);
    ck_assert_int_eq(replica_pstate_save(&mixed, g_dir, at), 0);
    bk_pstate back;
    replica_pstate_init(&back);
    ck_assert_int_eq(replica_pstate_load(&back, g_dir, at), at);
    assert_same(&mixed, &back);
    ck_assert_int_eq(replica_pstate_find(&back, 9)->last_offset, 7);
    ck_assert_uint_eq(replica_pstate_local_start(&back, 6), 1);      /* 11 */
    ck_assert_ptr_null(replica_pstate_find(&back, 11));
    replica_pstate_free(&back);
    replica_pstate_free(&mixed);
    replica_pstate_free(&ps);
}
END_TEST

/* ---- producer ids (metadata/producers.c) ------------------------------------------ */
START_TEST(test_producer_id_blocks_are_disjoint_and_survive_reopen)
{
    char path[128], err[MD_ERRLEN];
    snprintf(path, sizeof path, "%s/sluice.db", g_dir);
    md_db *db;
    ck_assert_int_eq(md_open(path, &db, err, sizeof err), 0);
    int64_t a, b, c;
    ck_assert_int_eq(md_producer_id_allocate(db, 1000, &a, err, sizeof err), 0);
    ck_assert_int_eq(md_producer_id_allocate(db, 10, &b, err, sizeof err), 0);
    ck_assert_int_eq(a, 0);
    ck_assert_int_eq(b, 1000);
    ck_assert_int_ne(md_producer_id_allocate(db, 0, &c, err, sizeof err), 0);
    md_close(db);
    ck_assert_int_eq(md_open(path, &db, err, sizeof err), 0);
    ck_assert_int_eq(md_producer_id_allocate(db, 1000, &c, err, sizeof err), 0);
    ck_assert_int_eq(c, 1010);
    md_close(db);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_retry_of_one_of_last_five_is_duplicate_with_original_offset,
        test_gap_is_out_of_order, test_epochs, test_unknown_producer_accepted_at_any_sequence,
        test_sequence_wraps_at_int32_max,
        test_several_batches_of_one_producer_in_one_request_chain,
        test_transactional_accepted_negative_fields_refused,
        test_many_producers_grow_and_expire_with_back_shift,
        test_snapshot_round_trip_and_newest_usable_wins, test_damaged_snapshot_ignored,
        test_rebuild_from_headers_across_segments_matches_live_state,
        test_producer_id_blocks_are_disjoint_and_survive_reopen,
        test_source_producers_never_judge_a_local_batch,
        test_marker_is_a_valid_control_batch_that_parses_back,
        test_transactions_open_close_and_move_the_first_unstable_offset,
        test_first_unstable_is_the_smallest_open_start_among_many_producers,
        test_open_transaction_never_expires_and_survives_snapshot_v2,
        test_snapshot_v1_still_loads,
        test_abort_enters_the_index_and_a_header_replay_rebuilds_it,
        test_a_failed_abort_index_write_is_not_durable_and_a_replay_restores_it,
    };
    return unit_run("d_producer_state", "producer_state", tests, sizeof tests / sizeof *tests,
                    setup, teardown, 60);
}
