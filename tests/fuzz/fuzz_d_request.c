/*
 * libFuzzer target: one request frame (without its 4-byte length prefix)
 * through the broker's real dispatch — kp_req_hdr_read, api_find, the
 * version check, then the API's handler — against a real broker state: an
 * md_db and partition logs in a temporary directory, the group
 * coordinator, the transaction coordinator and the fsync worker running on an event_base that nobody
 * dispatches except this harness.  Every API in daemon/api/api_dispatch.c is
 * reachable; the seed corpus (tests/fuzz/corpus/fuzz_d_request/) holds
 * frames captured from kcat, confluent-kafka and kafka-python.
 *
 * What stands in for daemon/net/net_server.c:
 *   - the connection: r->conn is NULL (handlers that name the peer check);
 *   - net_req_finish: linked with -Wl,--wrap=net_req_finish, so deferred
 *     handlers (Fetch long-poll, JoinGroup/SyncGroup waits, OffsetCommit
 *     batching) finish into __wrap_net_req_finish below, which only records
 *     it.  After BK_DEFER the harness turns the loop a few times without
 *     blocking (joins complete: group.initial.rebalance.delay.ms is 0),
 *     then cancels what is still waiting, as a closing connection does;
 *   - file ranges are released as the connection would after sending.
 *
 * The state carries over between inputs (topics, groups, offsets), so the
 * fuzzer builds on what earlier inputs created; topics are dropped when
 * more than a handful exist, to keep every execution cheap.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "daemon/view/view.h"
#include "daemon/replica/replica.h"
#include "daemon/request.h"
#include "daemon/group/group.h"
#include "daemon/txn/txn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
void __wrap_net_req_finish(bk_req *r);

static bk_broker B;
static bk_config CFG;
static bk_req *g_waiting;      /* the deferred request, until finished */
static bool g_finished;

void __wrap_net_req_finish(bk_req *r)
{
    if (r == g_waiting)
        g_finished = true;
}

static void setup(void)
{
    char tmpl[] = "/tmp/sluice-fuzz-req-XXXXXX";
    char err[512];
    if (!mkdtemp(tmpl))
        abort();
    /* Not removed at exit: libFuzzer _exits; the directory is small. */
    bk_config_init(&CFG);
    snprintf(CFG.log_dirs, sizeof CFG.log_dirs, "%s", tmpl);
    CFG.group_initial_rebalance_delay_ms = 0;
    if (bk_config_finish(&CFG, err, sizeof err))
        abort();
    /* Few descriptors: a CreateTopics/CreatePartitions for thousands of
     * partitions (allowed: up to 10000 per topic) then fails fast at
     * open(2) and exercises the rollback, instead of spending seconds
     * creating files (a timeout, not a bug). */
    struct rlimit nofile = { 256, 256 };
    setrlimit(RLIMIT_NOFILE, &nofile);
    evthread_use_pthreads();
    B.cfg = &CFG;
    snprintf(B.data_dir, sizeof B.data_dir, "%s", tmpl);
    char db[4200];
    snprintf(db, sizeof db, "%s/sluice.db", tmpl);
    replica_install(&B);                 /* the view opens local replicas, as main.c */
    if (md_open(db, &B.db, err, sizeof err) || !(B.base = event_base_new()) ||
        view_topics_load(&B) || gc_groups_init(&B) || txn_start(&B) ||
        replica_flusher_start(&B)) {
        fprintf(stderr, "fuzz_d_request: setup failed: %s\n", err);
        abort();
    }
    /* A topic with data, so Fetch/ListOffsets inputs find bytes to serve. */
    if (view_topic_create(&B, "t", 2, 1, NULL, NULL, 0, false, NULL, err, sizeof err))
        abort();
    kp_buf batch;
    kp_buf_init(&batch);
    kp_batch_builder bb;
    kp_bb_init(&bb, &batch, KP_CODEC_NONE);
    kp_bb_add(&bb, bk_now_ms(), "k", 1, "v", 1, NULL, 0);
    kp_bb_finish(&bb);
    kp_bb_free(&bb);
    bk_topic *t = view_topic_find(&B, "t", 1);
    bk_partition *p = t ? t->parts[0].local : NULL;
    int64_t base;
    if (!p || seg_append(p->log, batch.data, batch.len, bk_now_ms(), &base))
        abort();
    replica_partition_appended(&B, p, 1);
    kp_buf_free(&batch);
}

static void drop_topic(bk_topic *t, void *arg)
{
    /* Collected first: deleting inside the walk would unlink under it. */
    char (*names)[MD_TOPIC_NAME_MAX + 1] = arg;
    for (int i = 0; i < 64; i++)
        if (!names[i][0] && strcmp(t->name, "t") != 0) {
            snprintf(names[i], sizeof names[i], "%s", t->name);
            return;
        }
}

static void trim_topics(void)
{
    if (B.ntopics <= 8)
        return;
    static char names[64][MD_TOPIC_NAME_MAX + 1];
    memset(names, 0, sizeof names);
    view_topics_foreach(&B, drop_topic, names);
    char err[MD_ERRLEN];
    for (int i = 0; i < 64 && names[i][0]; i++)
        view_topic_delete(&B, names[i], NULL, err, sizeof err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    if (!ready) {
        setup();
        ready = true;
    }
    /* As server.c: the frame must be at least a header long and is a
     * writable buffer of exactly its size (Produce rewrites in place). */
    if (size < 8 || size > (1u << 20))
        return -1;
    uint8_t *frame = malloc(size);
    memcpy(frame, data, size);

    bk_req r;
    memset(&r, 0, sizeof r);
    kp_arena_init(&r.arena, 0);
    kp_rd rd;
    kp_rd_init(&rd, frame, size);
    int rc = kp_req_hdr_read(&rd, &r.hdr);
    const bk_api *api = api_find(r.hdr.RequestApiKey);
    bool served = api &&
        (rc == 0 || (api->key == KP_API_API_VERSIONS &&
                     r.hdr.RequestApiVersion > api->max_version)) &&
        (api->key == KP_API_API_VERSIONS ||
         (r.hdr.RequestApiVersion >= api->min_version &&
          r.hdr.RequestApiVersion <= api->max_version));
    if (!served) {
        kp_arena_free(&r.arena);
        free(frame);
        return 0;
    }
    kp_buf out;
    kp_buf_init(&out);
    r.b = &B;
    r.conn = NULL;
    r.body = rd;
    r.out = &out;
    r.received_us = bk_mono_us();
    rc = api->handler(&r);
    if (rc == BK_DEFER) {
        g_waiting = &r;
        g_finished = false;
        for (int i = 0; i < 4 && !g_finished; i++)
            event_base_loop(B.base, EVLOOP_NONBLOCK);
        if (!g_finished && r.cancel)
            r.cancel(&r);
        g_waiting = NULL;
    }
    /* What the connection does after sending. */
    for (int i = 0; i < r.npieces; i++)
        seg_range_release(&r.pieces[i].range);
    free(r.pieces);
    kp_arena_free(&r.arena);
    kp_buf_free(&out);
    free(frame);
    /* Timers and fsync completions that came due meanwhile. */
    event_base_loop(B.base, EVLOOP_NONBLOCK);
    trim_topics();
    return 0;
}
