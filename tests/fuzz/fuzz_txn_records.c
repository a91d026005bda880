/*
 * libFuzzer target: the transaction records a broker reads back from its
 * own logs (issue 30) — what a bad disk, a hand-edited segment or another
 * broker's replicated bytes may hold.
 *
 * Input layout (the first byte chooses the decoder):
 *
 *   0x00 | batch bytes ...
 *       a control batch as the log stores it, given to
 *       replica_marker_parse (daemon/replica/replica_producers.c: the
 *       producer state's replay and the append path read markers so).
 *   0x01 | flags | KeyLength (2 bytes) | key bytes | value bytes ...
 *       one __transaction_state record, given to txn_log_decode
 *       (daemon/txn/txn_log.c: the coordinator's load turns each record
 *       into a transactional id's state so); flags bit 0: a null value
 *       (a tombstone), the value bytes then unused.
 *
 * Key and value are copied into buffers of exactly their size, so ASan
 * sees any read past them.  Checks (abort = finding):
 *   1. A marker that parses builds again (replica_marker_build) into a
 *      batch that parses to the same type and coordinator epoch.
 *   2. A record decodes to SKIP, TOMBSTONE (only for a null value) or
 *      STATE; the id it names lies within the key; a state's partitions
 *      are ntps NUL-terminated topic names, all freed (leaks are findings).
 * Seeds: real markers and __transaction_state records written by the
 * broker for a confluent-kafka transactional producer
 * (tests/fuzz/capture_seeds.py --txn).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/replica/replica_producers.h"
#include "daemon/txn/txn_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
void __wrap_net_req_finish(bk_req *r);

/* Every target links with -Wl,--wrap=net_req_finish (Makefile); the
 * coordinator's files the decoders bring along refer to it, and nothing
 * here ever finishes a request. */
void __wrap_net_req_finish(bk_req *r)
{
    (void)r;
    abort();
}

static void need(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "txn_records: %s\n", what);
        abort();
    }
}

static void marker(const uint8_t *p, size_t n)
{
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, p, n);
    bk_marker m;
    if (replica_marker_parse(copy, n, &m) == 0) {           /* (1) */
        uint8_t out[REPLICA_MARKER_SIZE];
        size_t len = replica_marker_build(out, 7, 1, 0, &m, 1700000000000);
        bk_marker back;
        need(len == REPLICA_MARKER_SIZE && replica_marker_parse(out, len, &back) == 0,
             "a built marker does not parse");
        need(back.commit == m.commit && back.coordinator_epoch == m.coordinator_epoch,
             "marker round trip");
    }
    free(copy);
}

static void state_record(const uint8_t *p, size_t n)
{
    if (n < 3)
        return;
    bool null_value = p[0] & 1;
    size_t klen = (size_t)p[1] << 8 | p[2];
    p += 3;
    n -= 3;
    if (klen > n)
        klen = n;
    uint8_t *key = malloc(klen ? klen : 1), *val = malloc(n - klen ? n - klen : 1);
    memcpy(key, p, klen);
    memcpy(val, p + klen, n - klen);
    kp_record r = { .Key = { (const char *)key, (int32_t)klen },
                    .Value = { (const char *)val, null_value ? -1 : (int32_t)(n - klen) } };
    kp_arena arena;
    kp_arena_init(&arena, 0);
    kp_str id = { NULL, 0 };
    txn_rec rec;
    int what = txn_log_decode(&r, &arena, &id, &rec);            /* (2) */
    need(what == TXN_DEC_SKIP || what == TXN_DEC_TOMBSTONE || what == TXN_DEC_STATE,
         "an unknown answer");
    need(what != TXN_DEC_TOMBSTONE || null_value, "a tombstone with a value");
    if (what != TXN_DEC_SKIP)
        need(id.len > 0 && (const uint8_t *)id.p >= key &&
             (const uint8_t *)id.p + id.len <= key + klen, "the id is not in the key");
    if (what == TXN_DEC_STATE) {
        for (size_t i = 0; i < rec.ntps; i++)
            need(rec.tps[i].topic && strlen(rec.tps[i].topic) < 65536, "a partition's topic");
        txn_rec_free(&rec);
    }
    kp_arena_free(&arena);
    free(key);
    free(val);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] == 0)
        marker(data + 1, size - 1);
    else if (data[0] == 1)
        state_record(data + 1, size - 1);
    return 0;
}
