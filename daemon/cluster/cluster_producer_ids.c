/*
 * daemon/cluster/cluster_producer_ids.c — producer ids unique across the
 * cluster (b->on_producer_id_next in cluster mode, broker.h), as Kafka's
 * ZkProducerIdManager reserves them: ZooKeeper's /latest_producer_id_block
 * holds the last block any broker took,
 *
 *   {"version":1,"broker":<id>,"block_start":"<n>","block_end":"<n>"}
 *
 * and a broker takes the next PID_BLOCK ids by writing the znode
 * conditionally on the version it read (a race lost: ZBADVERSION, read
 * again).  No such znode, or an empty one: the first block starts at 0.
 *
 * States of the reservation (b->cl->pids):
 *
 *   none ──prefetch / next──► fetching: get ─► set (or create) ─┬─ ok ─► held
 *     ▲                          ▲              ZBADVERSION,    │
 *     │                          └───────────── ZNODEEXISTS ────┘
 *     └── any other error: retry_us (backoff), on the next call after it
 *   held ──90 % of it given──► fetching the next one (kept in pre_*)
 *
 * Invariants:
 *   PB1. An id is handed out only from a block whose znode write succeeded,
 *        so no two brokers, and no two lives of a broker, share an id: the
 *        unused rest of a block is skipped after a restart.
 *   PB2. With no id at hand the answer is COORDINATOR_LOAD_IN_PROGRESS
 *        (retriable: the client asks again), never a wait on the loop;
 *        every ZooKeeper round trip is asynchronous (cluster_zk.h).
 *   PB3. At most one fetch is in flight; its callbacks need nothing but
 *        b (ZooKeeper drops them at cl_stop), so nothing is allocated for it.
 */
#include "daemon/cluster/cluster.h"
#include "daemon/cluster/cluster_zk.h"
#include "daemon/cluster/cluster_zk_json.h"

#include <stdio.h>

#define PID_BLOCK 1000
#define PID_PATH "/latest_producer_id_block"
#define PID_RETRY_MIN_MS 100
#define PID_RETRY_MAX_MS 5000

static void fetch(bk_broker *b);

static void fetch_failed(bk_broker *b, const char *what, int rc)
{
    struct cl_pid_blocks *p = &b->cl->pids;
    p->fetching = false;
    int64_t ms = PID_RETRY_MIN_MS;
    for (int i = 0; i < p->failures && ms < PID_RETRY_MAX_MS; i++)
        ms *= 2;
    p->failures++;
    p->retry_us = bk_mono_us() + (ms < PID_RETRY_MAX_MS ? ms : PID_RETRY_MAX_MS) * 1000;
    BK_WARN("producer ids: cannot reserve a block in " PID_PATH " (%s: %s); "
            "InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS until it is",
            what, rc ? cl_zk_rc_str(rc) : "malformed");
}

/* PB1: the write succeeded; the block is ours. */
static void reserved(bk_broker *b)
{
    struct cl_pid_blocks *p = &b->cl->pids;
    int64_t start = p->want_start, end = start + PID_BLOCK;
    p->fetching = false;
    p->failures = 0;
    if (p->next >= p->end) {
        p->next = start;
        p->end = end;
    } else {
        p->pre_start = start;
        p->pre_end = end;
    }
    BK_INFO("producer ids: reserved %lld..%lld in " PID_PATH, (long long)start,
            (long long)(end - 1));
}

static void on_written(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    if (!b->cl)
        return;
    if (r->rc == ZOK)
        reserved(b);
    else if (r->rc == ZBADVERSION || r->rc == ZNODEEXISTS)
        fetch(b);                        /* another broker took it: the next one */
    else
        fetch_failed(b, "write", r->rc);
}

static void on_read(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    if (!b->cl)
        return;
    struct cl_pid_blocks *p = &b->cl->pids;
    int64_t last = -1;                   /* no block yet: the first is 0.. */
    if (r->rc != ZOK && r->rc != ZNONODE) {
        fetch_failed(b, "read", r->rc);
        return;
    }
    if (r->rc == ZOK && r->len > 0) {
        char err[256];
        if (cl_zj_pid_block_parse(r->data, (size_t)r->len, &last, err, sizeof err) != 0) {
            BK_ERROR("producer ids: " PID_PATH " is not a producer id block: %s", err);
            fetch_failed(b, "parse", 0);
            return;
        }
    }
    if (last > INT64_MAX - 2 * PID_BLOCK) {
        BK_ERROR("producer ids: every producer id has been handed out (" PID_PATH
                 " ends at %lld)", (long long)last);
        fetch_failed(b, "exhausted", 0);
        return;
    }
    p->want_start = last + 1;
    kp_buf out;
    kp_buf_init(&out);
    cl_zj_pid_block_format(b->cfg->broker_id, p->want_start, p->want_start + PID_BLOCK - 1,
                           &out);
    if (r->rc == ZNONODE)
        cl_zk_create(b->zk, PID_PATH, (const char *)out.data, (int)out.len, 0, on_written,
                     NULL);
    else                                 /* conditional on what we read */
        cl_zk_set(b->zk, PID_PATH, (const char *)out.data, (int)out.len, r->stat.version,
                  on_written, NULL);
    kp_buf_free(&out);
}

static void fetch(bk_broker *b)
{
    b->cl->pids.fetching = true;
    cl_zk_get(b->zk, PID_PATH, false, on_read, NULL);
}

void cl_producer_ids_prefetch(bk_broker *b)
{
    struct cl_pid_blocks *p = &b->cl->pids;
    if (!p->fetching && p->next >= p->end && p->pre_end == 0)
        fetch(b);
}

int16_t cl_producer_id_next(bk_broker *b, int64_t *pid)
{
    struct cl_pid_blocks *p = &b->cl->pids;
    if (p->next >= p->end && p->pre_end > 0) {
        p->next = p->pre_start;
        p->end = p->pre_end;
        p->pre_start = p->pre_end = 0;
    }
    bool have = p->next < p->end;
    if (have)
        *pid = p->next++;
    /* The next block when 90 % of this one is given (or none is held). */
    bool low = p->end - p->next <= PID_BLOCK / 10;
    if (low && p->pre_end == 0 && !p->fetching && bk_mono_us() >= p->retry_us)
        fetch(b);
    return have ? KP_NONE : KP_COORDINATOR_LOAD_IN_PROGRESS;   /* PB2 */
}
