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
 *
 * The floor (issue 33: a mirror topic's batches carry another cluster's
 * producer ids, link.c K7): /sluice/producer_id_floor holds, as a block
 * 0..floor-1 in the same JSON, the ids no broker may hand out.
 *
 *   PB4. Raised before use: bk_producer_id_floor(above) answers KP_NONE
 *        only once the floor in ZooKeeper is above `above` (rounded up to a
 *        block); until then COORDINATOR_LOAD_IN_PROGRESS and a raise runs
 *        (one at a time, PB3's way: get the block znode, get the floor
 *        znode, then one multi that lifts /latest_producer_id_block to end
 *        at floor-1 or later and writes the floor, each conditional on the
 *        version read; a race lost: read again).  The link appends a
 *        mirror's batch only after that (link.c K7), so every producer id in
 *        any mirror partition lies below the floor ZooKeeper holds.
 *   PB5. No block taken after a raise holds an id below its floor: the same
 *        multi lifted the block counter (PB1's versioned write fails for a
 *        broker that read the counter before).  A block held from before is
 *        cut at the floor as soon as the broker learns it (cut()): every
 *        broker keeps a watch on the floor znode (a data watch, or an
 *        exists watch while there is none: a get leaves no watch then).
 *   PB6. A broker learns a floor before it applies any mirror state
 *        written after that floor: ZooKeeper delivers one session's watch
 *        events and replies in zxid order, the floor znode is read first at
 *        each (re)connect (cluster_session.c) and again at once on its
 *        watch, and a mirror leaves mirroring (a later write: the batches
 *        were appended after their floor, PB4) only by a znode write that
 *        comes after.  Until it applied 'promoted' / 'failed_over', a broker
 *        refuses producers of the topic (link.c K1).
 *   PB7. No id is handed out while the floor is unknown (no connection to
 *        ZooKeeper, or the read after a reconnect not back): a floor raised
 *        meanwhile would not have cut the block held here.  A read that
 *        fails (other than a lost connection, which PB7's reconnect read
 *        covers) makes the floor unknown as well, until the next read
 *        succeeds: the next InitProducerId's (PB8) sends it, and re-arms
 *        the watch.
 *   PB8. No id is handed out from what a watch told: before an
 *        InitProducerId is answered (daemon/producer_ids.c P1) the floor is
 *        read afresh, a sync then a get sent after the request arrived
 *        (cl_producer_ids_fresh), and the blocks cut at it.  PB6's watch
 *        may be late (a broker paused, or busy, when a mirror was promoted:
 *        issue 33: the source's producer id handed out again after the
 *        failover); the fresh read sees every floor written before the
 *        request, and PB4 wrote the floor before any batch carrying such
 *        an id was appended.
 */
#include "daemon/cluster/cluster.h"
#include "daemon/cluster/cluster_zk.h"
#include "daemon/cluster/cluster_zk_json.h"

#include <stdio.h>
#include <string.h>

#define PID_BLOCK 1000
#define PID_PATH "/latest_producer_id_block"
#define FLOOR_PATH "/sluice/producer_id_floor"
#define PID_RETRY_MIN_MS 100
#define PID_RETRY_MAX_MS 5000

static void fetch(bk_broker *b);

/* PB5: the ids below the floor in the blocks held here are dropped. */
static void cut(struct cl_pid_blocks *p)
{
    if (p->next < p->floor)
        p->next = p->floor < p->end ? p->floor : p->end;
    if (p->pre_end > 0 && p->pre_start < p->floor) {
        p->pre_start = p->floor;
        if (p->pre_start >= p->pre_end)
            p->pre_start = p->pre_end = 0;
    }
}

/* A floor read or written: taken if higher, the blocks cut. */
static void floor_learned(bk_broker *b, int64_t floor, const char *how)
{
    struct cl_pid_blocks *p = &b->cl->pids;
    if (floor <= p->floor)
        return;
    p->floor = floor;
    cut(p);
    BK_INFO("producer ids: the floor is %lld (%s): no id below it is handed out here, "
            "they are another cluster's (mirror topics)", (long long)floor, how);
}

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
    cut(p);                              /* PB5: never needed, never harmful */
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
    bool have = p->next < p->end && p->floor_known;          /* PB7 */
    if (have)
        *pid = p->next++;
    /* The next block when 90 % of this one is given (or none is held). */
    bool low = p->end - p->next <= PID_BLOCK / 10;
    if (low && p->pre_end == 0 && !p->fetching && bk_mono_us() >= p->retry_us)
        fetch(b);
    return have ? KP_NONE : KP_COORDINATOR_LOAD_IN_PROGRESS;   /* PB2 */
}

/* ---- the floor (PB4-PB7) ------------------------------------------------------------ */
static void raise_step(bk_broker *b);

/* The floor znode's answer: a block 0..floor-1; -1 not one. */
static int64_t floor_parse(const zk_result *r)
{
    int64_t last = -1;
    char err[256];
    if (r->rc == ZNONODE || (r->rc == ZOK && r->len <= 0))
        return 0;
    if (cl_zj_pid_block_parse(r->data, (size_t)r->len, &last, err, sizeof err) != 0) {
        BK_ERROR("producer ids: " FLOOR_PATH " is not a producer id block: %s", err);
        return -1;
    }
    return last + 1;
}

static void on_floor_exists(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    if (b->cl && r->rc == ZOK)
        cl_producer_ids_floor_read(b);   /* created meanwhile: read it */
}

static void on_floor_read(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    if (!b->cl)
        return;
    if (r->rc != ZOK && r->rc != ZNONODE) {
        /* PB7: unknown until a read succeeds (the next InitProducerId's,
         * PB8, or the next reconnect's), which sets the watch again */
        if (b->cl->pids.floor_known)
            BK_WARN("producer ids: cannot read " FLOOR_PATH " (%s): no id is handed out "
                    "until it is read", cl_zk_rc_str(r->rc));
        b->cl->pids.floor_known = false;
        return;
    }
    if (r->rc == ZNONODE)                /* a get leaves no watch on a missing znode */
        cl_zk_exists(b->zk, FLOOR_PATH, true, on_floor_exists, NULL);
    int64_t floor = floor_parse(r);
    if (floor < 0) {
        b->cl->pids.floor_known = false; /* PB7: unknown, no id handed out */
        return;
    }
    floor_learned(b, floor, "read from " FLOOR_PATH);
    b->cl->pids.floor_known = true;
}

/* PB8: the fresh read's get, then the waiting InitProducerIds go on. */
static void on_fresh_read(bk_broker *b, const zk_result *r, void *arg)
{
    if (!b->cl)
        return;
    on_floor_read(b, r, arg);
    bk_producer_ids_synced(b);
}

static void on_fresh_sync(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    if (!b->cl)
        return;
    if (r->rc != ZOK) {                  /* the get would not be fresh: unknown */
        b->cl->pids.floor_known = false;
        bk_producer_ids_synced(b);
        return;
    }
    cl_zk_get(b->zk, FLOOR_PATH, true, on_fresh_read, NULL);
}

void cl_producer_ids_fresh(bk_broker *b)
{
    cl_zk_sync(b->zk, FLOOR_PATH, on_fresh_sync, NULL);
}

void cl_producer_ids_floor_read(bk_broker *b)
{
    cl_zk_get(b->zk, FLOOR_PATH, true, on_floor_read, NULL);
}

void cl_producer_ids_floor_lost(bk_broker *b)
{
    b->cl->pids.floor_known = false;
}

bool cl_producer_ids_on_watch(bk_broker *b, int type, const char *path)
{
    (void)type;
    if (strcmp(path, FLOOR_PATH))
        return false;
    cl_producer_ids_floor_read(b);       /* PB6: at once, and the watch again */
    return true;
}

static void raise_failed(bk_broker *b, const char *what, int rc)
{
    struct cl_pid_blocks *p = &b->cl->pids;
    int64_t ms = PID_RETRY_MIN_MS;
    for (int i = 0; i < p->raise_failures && ms < PID_RETRY_MAX_MS; i++)
        ms *= 2;
    p->raising = false;
    p->raise_failures++;
    p->raise_retry_us = bk_mono_us() + (ms < PID_RETRY_MAX_MS ? ms : PID_RETRY_MAX_MS) * 1000;
    BK_WARN("producer ids: cannot raise the floor to %lld in " FLOOR_PATH " (%s: %s); "
            "mirror topics wait for it", (long long)p->raise_to, what,
            rc ? cl_zk_rc_str(rc) : "malformed");
}

static void on_raised(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    if (!b->cl)
        return;
    struct cl_pid_blocks *p = &b->cl->pids;
    if (r->rc == ZBADVERSION || r->rc == ZNODEEXISTS || r->rc == ZNONODE) {
        raise_step(b);                   /* another broker wrote one of them: again */
        return;
    }
    if (r->rc != ZOK) {
        raise_failed(b, "write", r->rc);
        return;
    }
    p->raising = false;
    p->raise_failures = 0;
    floor_learned(b, p->raise_writing, "raised here");
}

static void on_raise_floor(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    if (!b->cl)
        return;
    struct cl_pid_blocks *p = &b->cl->pids;
    if (r->rc != ZOK && r->rc != ZNONODE) {
        raise_failed(b, "read", r->rc);
        return;
    }
    int64_t have = floor_parse(r);
    if (have < 0) {
        raise_failed(b, "parse", 0);
        return;
    }
    if (have >= p->raise_to) {           /* another broker raised it far enough */
        p->raising = false;
        floor_learned(b, have, "raised by another broker");
        return;
    }
    zk_txn *t = cl_zk_txn_new();
    if (!t) {
        raise_failed(b, "out of memory", 0);
        return;
    }
    kp_buf blk, fl;
    p->raise_writing = p->raise_to;
    kp_buf_init(&blk);
    kp_buf_init(&fl);
    /* PB5: the counter first ends at floor-1 or later, in the same multi. */
    if (p->raise_last < p->raise_to - 1) {
        cl_zj_pid_block_format(b->cfg->broker_id, p->raise_last + 1, p->raise_to - 1, &blk);
        if (p->raise_block_version < 0)
            cl_zk_txn_create(t, PID_PATH, (const char *)blk.data, (int)blk.len, 0);
        else
            cl_zk_txn_set(t, PID_PATH, (const char *)blk.data, (int)blk.len,
                          p->raise_block_version);
    }
    cl_zj_pid_block_format(b->cfg->broker_id, 0, p->raise_to - 1, &fl);
    if (r->rc == ZNONODE)
        cl_zk_txn_create(t, FLOOR_PATH, (const char *)fl.data, (int)fl.len, 0);
    else
        cl_zk_txn_set(t, FLOOR_PATH, (const char *)fl.data, (int)fl.len, r->stat.version);
    kp_buf_free(&blk);
    kp_buf_free(&fl);
    cl_zk_txn_commit(b->zk, t, on_raised, NULL);
}

static void on_raise_block(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    if (!b->cl)
        return;
    struct cl_pid_blocks *p = &b->cl->pids;
    int64_t last = -1;
    char err[256];
    if (r->rc != ZOK && r->rc != ZNONODE) {
        raise_failed(b, "read", r->rc);
        return;
    }
    if (r->rc == ZOK && r->len > 0 &&
        cl_zj_pid_block_parse(r->data, (size_t)r->len, &last, err, sizeof err) != 0) {
        BK_ERROR("producer ids: " PID_PATH " is not a producer id block: %s", err);
        raise_failed(b, "parse", 0);
        return;
    }
    p->raise_last = last;
    p->raise_block_version = r->rc == ZOK ? r->stat.version : -1;
    cl_zk_get(b->zk, FLOOR_PATH, false, on_raise_floor, NULL);
}

static void raise_step(bk_broker *b)
{
    b->cl->pids.raising = true;
    cl_zk_get(b->zk, PID_PATH, false, on_raise_block, NULL);
}

int16_t cl_producer_id_floor(bk_broker *b, int64_t above)
{
    struct cl_pid_blocks *p = &b->cl->pids;
    if (above < p->floor)
        return KP_NONE;                  /* the common case: below the floor (PB4) */
    if (above > INT64_MAX - 2 * PID_BLOCK)
        return KP_COORDINATOR_NOT_AVAILABLE;
    int64_t floor = (above / PID_BLOCK + 1) * PID_BLOCK;
    if (floor > p->raise_to)
        p->raise_to = floor;             /* a raise in flight takes it on its retry */
    if (!p->raising && bk_mono_us() >= p->raise_retry_us)
        raise_step(b);
    return KP_COORDINATOR_LOAD_IN_PROGRESS;
}
