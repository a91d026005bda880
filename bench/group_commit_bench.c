/*
 * Offset commits under load (issue 4, Performance): how many partition
 * commits per second the coordinator sustains from 10 groups × 8
 * partitions committing after every poll, and what that does to the
 * broker's produce throughput.
 *
 * Each of the 10 groups has one member (JoinGroup v5 + SyncGroup v3, so
 * commits go through the generation/member checks) on its own connection,
 * owning the 8 partitions of the topic; a "poll" is modelled as nothing
 * more than the next OffsetCommit v7 of all 8 partitions at a higher
 * offset, back to back — the heaviest commit pattern a consumer can make.
 * One client thread drives the 10 connections over poll().  The producer
 * is one connection sending Produce v7 (acks=1) with a pre-built
 * 100-record batch, PIPELINE (Kafka's default max.in.flight, 5) requests
 * in flight, to a topic that keeps only its newest 256 MiB (see main).
 *
 * Clients and broker share the machine's 2 cores, and the producer alone
 * already keeps both busy (the broker's loop, plus the producer's own
 * loopback sends), so every extra request stream costs produce throughput
 * whatever it asks; the control phase measures that floor.
 *
 * Paced commits come from the ten groups staggered evenly over each
 * period, as independent consumers would, not in step: in-step bursts of
 * ten would share one sync each and flatter the broker.
 *
 * Phases (SECONDS each):
 *   1. commits alone, unthrottled            → partition-commits/s (target
 *                                              >= 20,000)
 *   2. ApiVersions alone, unthrottled        → the request floor
 *   3. commits, then ApiVersions, paced at the target request rate alone
 *                                            → broker and all-process CPU
 *                                              per request, answer times
 *   4. produce alone, a warm-up to the page cache's steady state
 *   5. rounds × (produce alone, produce + commits paced at 20,000/s,
 *      produce + the same connections sending ApiVersions at the same
 *      request rate — a control: what any request at that rate costs)
 *                                            → median produce ratio (target:
 *                                              < 10 % drop; counted only if
 *                                              commits kept >= 97 % of their
 *                                              pace), and the control's
 *   6. produce + commits unthrottled         → both, for the record
 *
 * Cluster mode (issue 16: group state in the replicated __consumer_offsets,
 * RF 3): with $BENCH_BOOTSTRAP=host:port of a running cluster (e.g. `make
 * run-cluster`, 127.0.0.1:9092) no broker is started; the commit topic is
 * created with replication factor 3, each member connects to its group's
 * coordinator (FindCoordinator), and only phase 1 runs: partition-commits/s
 * answered once replicated, and the machine's CPU for them.
 *
 *   build/bench/group_commit_bench [path/to/sluiced] [seconds per phase] [rounds]
 *       (sluiced also from $SLUICED; default build/sluiced; 8 s per phase;
 *       5 rounds; $BENCH_CLIENT_NICE: the commit client's nice, e.g. 19;
 *       $BENCH_OVERRIDES: broker keys, e.g. offsets.commit.linger.ms=0)
 */
#include "bench/bench_common.h"

#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdatomic.h>

#define GROUPS        10
#define PARTITIONS    8
#define TARGET        20000.0       /* partition-commits/s */
#define PIPELINE      5
#define BATCH_RECS    100
#define VALUE_SIZE    100
#define MAX_ROUNDS    32

#define MAX_LAT       (1 << 20)

static const char *commit_topic = "commit-bench";
/* Answer times of the current phase's requests (commit_loop only). */
static double lat[MAX_LAT];
static size_t nlat;
static const char *produce_topic = "produce-bench";
static atomic_bool running;

static bench_broker broker;

/* exit() kills the broker (bench_common.h, bench_kill_live). */
static void die(const char *what)
{
    fprintf(stderr, "group_commit_bench: %s\n", what);
    exit(1);
}

/* ---- group membership ----------------------------------------------------------------- */
typedef struct member {
    int fd;
    char group[32];
    char id[256];
    int32_t generation;
    /* results of the current phase */
    uint64_t commits;               /* partition-commits acknowledged */
    uint64_t errors;
    double pace;                    /* requests/s, 0 = unthrottled */
    bool control;                   /* send ApiVersions instead (control phase) */
} member;

static kp_str read_str(kp_rd *rd, char *out, size_t cap)
{
    kp_str s = kp_rd_string(rd);
    if (out)
        kp_str_copy(s, out, cap);
    return s;
}

static int16_t join(member *m, kp_buf *q, kp_buf *r)
{
    kp_buf_reset(q);
    kp_req_hdr_write(q, KP_API_JOIN_GROUP, 5, 1, "commit-bench");
    kp_wr_string(q, m->group, -1);
    kp_wr_i32(q, 60000);                        /* SessionTimeoutMs */
    kp_wr_i32(q, 60000);                        /* RebalanceTimeoutMs */
    kp_wr_string(q, m->id, -1);
    kp_wr_string(q, NULL, 0);                   /* GroupInstanceId */
    kp_wr_string(q, "consumer", -1);
    kp_wr_array(q, 1);
    kp_wr_string(q, "range", -1);
    kp_wr_bytes(q, "m", 1);
    if (bench_roundtrip(m->fd, q, r))
        die("JoinGroup: connection lost");
    kp_rd rd;
    kp_rd_init(&rd, r->data, r->len);
    kp_rd_i32(&rd);                             /* correlation id */
    kp_rd_i32(&rd);                             /* ThrottleTimeMs */
    int16_t err = kp_rd_i16(&rd);
    m->generation = kp_rd_i32(&rd);
    read_str(&rd, NULL, 0);                     /* ProtocolName */
    read_str(&rd, NULL, 0);                     /* Leader */
    read_str(&rd, m->id, sizeof m->id);
    if (!kp_rd_ok(&rd))
        die("JoinGroup: short response");
    return err;
}

static void join_and_sync(member *m, kp_buf *q, kp_buf *r)
{
    m->id[0] = 0;
    int16_t err = join(m, q, r);
    /* Cluster mode: the coordinator may still be loading its partition. */
    for (int i = 0; i < 300 && err == KP_COORDINATOR_LOAD_IN_PROGRESS; i++) {
        usleep(100000);
        err = join(m, q, r);
    }
    if (err == KP_MEMBER_ID_REQUIRED)
        err = join(m, q, r);
    if (err)
        die("JoinGroup failed");
    kp_buf_reset(q);
    kp_req_hdr_write(q, KP_API_SYNC_GROUP, 3, 2, "commit-bench");
    kp_wr_string(q, m->group, -1);
    kp_wr_i32(q, m->generation);
    kp_wr_string(q, m->id, -1);
    kp_wr_string(q, NULL, 0);
    kp_wr_array(q, 1);
    kp_wr_string(q, m->id, -1);
    kp_wr_bytes(q, "all-8", 5);
    if (bench_roundtrip(m->fd, q, r))
        die("SyncGroup: connection lost");
    kp_rd rd;
    kp_rd_init(&rd, r->data, r->len);
    kp_rd_i32(&rd);
    kp_rd_i32(&rd);
    if (kp_rd_i16(&rd) != 0 || !kp_rd_ok(&rd))
        die("SyncGroup failed");
}

/* ---- the commit loop: one OffsetCommit v7 of 8 partitions per "poll" ------------------ */
/* One thread drives all GROUPS members, each with one request in flight,
 * over poll(): real consumers run on other machines, and ten client
 * threads waking thousands of times a second would take the cores the
 * broker is being measured on. */
static void write_commit(member *m, kp_buf *q, int64_t offset)
{
    kp_buf_reset(q);
    kp_req_hdr_write(q, KP_API_OFFSET_COMMIT, 7, 3, "commit-bench");
    kp_wr_string(q, m->group, -1);
    kp_wr_i32(q, m->generation);
    kp_wr_string(q, m->id, -1);
    kp_wr_string(q, NULL, 0);                   /* GroupInstanceId */
    kp_wr_array(q, 1);
    kp_wr_string(q, commit_topic, -1);
    kp_wr_array(q, PARTITIONS);
    for (int32_t p = 0; p < PARTITIONS; p++) {
        kp_wr_i32(q, p);
        kp_wr_i64(q, offset + p);
        kp_wr_i32(q, -1);                       /* CommittedLeaderEpoch */
        kp_wr_string(q, NULL, 0);               /* CommittedMetadata */
    }
}

static void count_commit_response(member *m, const kp_buf *r)
{
    kp_rd rd;
    kp_rd_init(&rd, r->data, r->len);
    kp_rd_i32(&rd);
    kp_rd_i32(&rd);
    int32_t nt = kp_rd_array(&rd, 0);
    for (int32_t t = 0; t < nt; t++) {
        kp_rd_string(&rd);
        int32_t np = kp_rd_array(&rd, 0);
        for (int32_t i = 0; i < np; i++) {
            kp_rd_i32(&rd);
            if (kp_rd_i16(&rd) == 0)
                m->commits++;
            else
                m->errors++;
        }
    }
    if (!kp_rd_ok(&rd))
        die("OffsetCommit: short response");
}

static void *commit_loop(void *arg)
{
    member *ms = arg;
    /* $BENCH_CLIENT_NICE: this thread's nice, to stand in for consumers
     * on other machines (it then yields the cores to the producer and
     * the broker). */
    if (getenv("BENCH_CLIENT_NICE"))
        (void)setpriority(PRIO_PROCESS, (id_t)gettid(), atoi(getenv("BENCH_CLIENT_NICE")));
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    static int64_t offset = 0;
    struct pollfd pfd[GROUPS];
    bool inflight[GROUPS] = { false };
    double due[GROUPS], sent[GROUPS], t0 = bench_now();
    uint64_t k[GROUPS] = { 0 };
    /* Paced groups start staggered across one interval: independent
     * consumers do not commit in step. */
    for (int g = 0; g < GROUPS; g++) {
        pfd[g] = (struct pollfd){ .fd = ms[g].fd, .events = POLLIN };
        due[g] = ms[g].pace > 0 ? t0 + (double)g / GROUPS / ms[g].pace : t0;
    }
    int outstanding = 0;
    while (atomic_load(&running) || outstanding > 0) {
        double now = bench_now(), next = now + 0.1;
        for (int g = 0; g < GROUPS; g++) {
            if (inflight[g] || !atomic_load(&running))
                continue;
            if (ms[g].pace > 0 && due[g] > now) {
                if (due[g] < next)
                    next = due[g];
                continue;
            }
            offset += 100;
            if (ms[g].control) {
                kp_buf_reset(&q);
                kp_req_hdr_write(&q, KP_API_API_VERSIONS, 0, 4, "commit-bench");
            } else {
                write_commit(&ms[g], &q, offset);
            }
            if (bench_send_frame(ms[g].fd, &q))
                die("OffsetCommit: connection lost");
            sent[g] = bench_now();
            inflight[g] = true;
            outstanding++;
            if (ms[g].pace > 0)
                due[g] = t0 + ((double)++k[g] + (double)g / GROUPS) / ms[g].pace;
        }
        /* ppoll to the microsecond: poll's milliseconds would round a
         * wait under 1 ms down to 0 and spin. */
        double wait = next - bench_now();
        if (wait < 0)
            wait = 0;
        struct timespec ts = { (time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9) };
        for (int g = 0; g < GROUPS; g++)
            pfd[g].events = inflight[g] ? POLLIN : 0;
        if (ppoll(pfd, GROUPS, &ts, NULL) < 0 && errno != EINTR)
            die("ppoll");
        for (int g = 0; g < GROUPS; g++) {
            if (!(pfd[g].revents & (POLLIN | POLLERR | POLLHUP)))
                continue;
            if (bench_recv_frame(ms[g].fd, &r))
                die("OffsetCommit: connection lost");
            if (nlat < MAX_LAT)
                lat[nlat++] = bench_now() - sent[g];
            inflight[g] = false;
            outstanding--;
            if (ms[g].control)
                ms[g].commits += PARTITIONS;        /* a request's worth */
            else
                count_commit_response(&ms[g], &r);
        }
    }
    kp_buf_free(&q);
    kp_buf_free(&r);
    return NULL;
}

/* ---- the produce loop ------------------------------------------------------------------ */
typedef struct producer {
    int fd;
    kp_buf req;                     /* one Produce v7 frame, reused */
    uint64_t messages, errors;
} producer;

static void *produce_loop(void *arg)
{
    producer *p = arg;
    kp_buf r;
    kp_buf_init(&r);
    int inflight = 0;
    while (atomic_load(&running)) {
        while (inflight < PIPELINE) {
            if (bench_send_frame(p->fd, &p->req))
                die("Produce: connection lost");
            inflight++;
        }
        if (bench_recv_frame(p->fd, &r))
            die("Produce: connection lost");
        inflight--;
        if (bench_produce_error(&r) == 0)
            p->messages += BATCH_RECS;
        else
            p->errors++;
    }
    while (inflight-- > 0)                      /* drain, not counted */
        if (bench_recv_frame(p->fd, &r))
            die("Produce: connection lost");
    kp_buf_free(&r);
    return NULL;
}

static void build_produce(producer *p)
{
    kp_buf batch;
    kp_buf_init(&batch);
    kp_batch_builder bb;
    kp_bb_init(&bb, &batch, KP_CODEC_NONE);
    char value[VALUE_SIZE];
    memset(value, 'p', sizeof value);
    for (int i = 0; i < BATCH_RECS; i++)
        kp_bb_add(&bb, 1700000000000LL + i, NULL, 0, value, VALUE_SIZE, NULL, 0);
    if (kp_bb_finish(&bb) < 0)
        die("cannot build a batch");
    kp_bb_free(&bb);
    kp_buf_init(&p->req);
    bench_produce_req(&p->req, 4, "commit-bench", produce_topic, 1, &batch);
    kp_buf_free(&batch);
}

/* ---- phases ------------------------------------------------------------------------------- */
typedef struct result {
    double secs;
    double msgs_per_s;              /* 0 when the producer did not run */
    double commits_per_s;
    double p50_ms, p99_ms;          /* request answer times */
    uint64_t errors;
} result;

static result run_phase(member *ms, double pace_total, producer *p, double seconds,
                        bool control)
{
    pthread_t ct, pt;
    for (int g = 0; ms && g < GROUPS; g++) {
        ms[g].commits = ms[g].errors = 0;
        ms[g].control = control;
        ms[g].pace = pace_total > 0 ? pace_total / PARTITIONS / GROUPS : 0;
    }
    if (p)
        p->messages = p->errors = 0;
    atomic_store(&running, true);
    nlat = 0;
    double t0 = bench_now();
    if (ms)
        pthread_create(&ct, NULL, commit_loop, ms);
    if (p)
        pthread_create(&pt, NULL, produce_loop, p);
    usleep((useconds_t)(seconds * 1e6));
    atomic_store(&running, false);
    double secs = bench_now() - t0;
    result res = { .secs = secs };
    if (ms)
        pthread_join(ct, NULL);
    for (int g = 0; ms && g < GROUPS; g++) {
        res.commits_per_s += (double)ms[g].commits;
        res.errors += ms[g].errors;
    }
    if (p) {
        pthread_join(pt, NULL);
        res.msgs_per_s = (double)p->messages / secs;
        res.errors += p->errors;
    }
    res.commits_per_s /= secs;
    if (nlat) {
        qsort(lat, nlat, sizeof *lat, bench_cmp_double);
        res.p50_ms = 1e3 * lat[nlat / 2];
        res.p99_ms = 1e3 * lat[nlat * 99 / 100];
    }
    return res;
}

/* Cluster mode: the port of group's coordinator as broker fd answers
 * FindCoordinator v1, retried while __consumer_offsets is created and
 * led (COORDINATOR_NOT_AVAILABLE); dies after 30 s. */
static int coordinator_port(int fd, const char *group)
{
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    int port = -1;
    for (int i = 0; i < 300 && port < 0; i++) {
        kp_buf_reset(&q);
        kp_req_hdr_write(&q, KP_API_FIND_COORDINATOR, 1, 5, "commit-bench");
        kp_wr_string(&q, group, -1);
        kp_wr_i8(&q, 0);                        /* KeyType: group */
        if (bench_roundtrip(fd, &q, &r))
            die("FindCoordinator: connection lost");
        kp_rd rd;
        kp_rd_init(&rd, r.data, r.len);
        kp_rd_i32(&rd);                         /* correlation id */
        kp_rd_i32(&rd);                         /* ThrottleTimeMs */
        int16_t err = kp_rd_i16(&rd);
        kp_rd_string(&rd);                      /* ErrorMessage */
        kp_rd_i32(&rd);                         /* NodeId */
        kp_rd_string(&rd);                      /* Host */
        int32_t p = kp_rd_i32(&rd);
        if (!kp_rd_ok(&rd))
            die("FindCoordinator: short response");
        if (err == 0)
            port = p;
        else
            usleep(100000);
    }
    kp_buf_free(&q);
    kp_buf_free(&r);
    if (port < 0)
        die("no coordinator within 30 s");
    return port;
}

/* Cluster mode: phase 1 only, against the running cluster at bootstrap. */
static int run_cluster(const char *bootstrap, double seconds)
{
    const char *colon = strrchr(bootstrap, ':');
    int port = colon ? atoi(colon + 1) : 0;
    int admin = port > 0 ? bench_connect(port) : -1;
    if (admin < 0)
        die("cannot connect to $BENCH_BOOTSTRAP");
    int rc = bench_create_topic_rf(admin, commit_topic, PARTITIONS, 3, NULL, 30000);
    if (rc != 0 && rc != KP_TOPIC_ALREADY_EXISTS)
        die("cannot create the commit topic with replication factor 3");
    usleep(500000);                             /* every mirror shows it */
    static member ms[GROUPS];
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    for (int g = 0; g < GROUPS; g++) {
        snprintf(ms[g].group, sizeof ms[g].group, "bench-group-%d", g);
        ms[g].fd = bench_connect(coordinator_port(admin, ms[g].group));
        if (ms[g].fd < 0)
            die("cannot connect to a coordinator");
        join_and_sync(&ms[g], &q, &r);
    }
    kp_buf_free(&q);
    kp_buf_free(&r);
    close(admin);
    printf("group_commit_bench (cluster %s, commit topic RF 3, group state in "
           "__consumer_offsets): %d groups x %d partitions, one member and connection each, "
           "%.0f s\n", bootstrap, GROUPS, PARTITIONS, seconds);
    fflush(stdout);
    double m0 = bench_machine_cpu_seconds();
    result commits = run_phase(ms, 0, NULL, seconds, false);
    double m1 = bench_machine_cpu_seconds();
    printf("  commits alone (unthrottled, answered once replicated): %9.0f partition-commits/s "
           "(%.0f OffsetCommit/s, answered in %.2f ms median, %.2f ms p99; all processes "
           "CPU %.0f%%)  target >= %.0f: %s\n",
           commits.commits_per_s, commits.commits_per_s / PARTITIONS, commits.p50_ms,
           commits.p99_ms, 100 * (m1 - m0) / commits.secs, TARGET,
           commits.commits_per_s >= TARGET ? "met" : "MISSED");
    if (commits.errors)
        printf("  %llu partitions answered with an error\n",
               (unsigned long long)commits.errors);
    for (int g = 0; g < GROUPS; g++)
        close(ms[g].fd);
    return commits.errors ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        setenv("SLUICED", argv[1], 1);
    double seconds = argc > 2 ? atof(argv[2]) : 8.0;
    if (seconds <= 0)
        seconds = 8.0;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    if (rounds < 1 || rounds > MAX_ROUNDS)
        rounds = 5;
    if (getenv("BENCH_BOOTSTRAP"))
        return run_cluster(getenv("BENCH_BOOTSTRAP"), seconds);
    /* The produce topic keeps its newest 256 MiB (64 MiB segments, checked
     * every second): older segments go before the kernel writes their
     * dirty pages back, so the produce rate measures the broker's CPU, not
     * the disk's writeback, which swings by ±30 % from second to second
     * on these machines and would drown the difference being measured. */
    const char *overrides[] = { "group.initial.rebalance.delay.ms=0",
                                "log.retention.check.interval.ms=1000", NULL };
    const char *const produce_cfg[] = { "segment.bytes", "67108864",
                                        "retention.bytes", "268435456",
                                        "file.delete.delay.ms", "0", NULL };
    bench_broker_start(&broker, overrides);
    int admin = bench_connect(broker.port);
    if (admin < 0)
        die("cannot connect");
    if (bench_create_topic(admin, commit_topic, PARTITIONS, NULL) != 0 ||
        bench_create_topic(admin, produce_topic, 1, produce_cfg) != 0)
        die("cannot create the topics");
    close(admin);

    static member ms[GROUPS];
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    for (int g = 0; g < GROUPS; g++) {
        ms[g].fd = bench_connect(broker.port);
        if (ms[g].fd < 0)
            die("cannot connect");
        snprintf(ms[g].group, sizeof ms[g].group, "bench-group-%d", g);
        join_and_sync(&ms[g], &q, &r);
    }
    kp_buf_free(&q);
    kp_buf_free(&r);
    producer p;
    build_produce(&p);
    p.fd = bench_connect(broker.port);
    if (p.fd < 0)
        die("cannot connect");

    printf("group_commit_bench: %d groups x %d partitions, one member and connection "
           "each; producer: Produce v7 acks=1, %d x %d B records per batch, %d in flight; "
           "%.0f s per phase, %d rounds\n", GROUPS, PARTITIONS, BATCH_RECS, VALUE_SIZE, PIPELINE,
           seconds, rounds);
    fflush(stdout);
    double cpu0 = bench_cpu_seconds(broker.pid);
    result commits = run_phase(ms, 0, NULL, seconds, false);
    double cpu1 = bench_cpu_seconds(broker.pid);
    printf("  commits alone (unthrottled):         %9.0f partition-commits/s  "
           "(%.0f OffsetCommit/s; broker CPU %.0f%%, %.1f us per request)  "
           "target >= %.0f: %s\n",
           commits.commits_per_s, commits.commits_per_s / PARTITIONS,
           100 * (cpu1 - cpu0) / commits.secs,
           1e6 * (cpu1 - cpu0) / (commits.commits_per_s / PARTITIONS * commits.secs), TARGET,
           commits.commits_per_s >= TARGET ? "met" : "MISSED");
    fflush(stdout);
    result pings = run_phase(ms, 0, NULL, seconds, true);
    double cpu1b = bench_cpu_seconds(broker.pid);
    printf("  control: ApiVersions alone (unthrottled, same connections): %.0f requests/s "
           "(broker CPU %.0f%%, %.1f us per request)\n", pings.commits_per_s / PARTITIONS,
           100 * (cpu1b - cpu1) / pings.secs,
           1e6 * (cpu1b - cpu1) / (pings.commits_per_s / PARTITIONS * pings.secs));
    fflush(stdout);
    /* What the paced streams alone cost: the producer's loss is about the
     * CPU they take from the machine (broker, client and kernel alike). */
    for (int c = 0; c <= 1; c++) {
        double b0 = bench_cpu_seconds(broker.pid), m0 = bench_machine_cpu_seconds();
        result paced = run_phase(ms, TARGET, NULL, seconds, c == 1);
        double b1 = bench_cpu_seconds(broker.pid), m1 = bench_machine_cpu_seconds();
        double reqs = paced.commits_per_s / PARTITIONS * paced.secs;
        printf("  %s at %.0f requests/s alone: broker CPU %.1f%%, all processes %.1f%% "
               "(%.1f us per request); answered in %.2f ms median, %.2f ms p99\n",
               c ? "control: ApiVersions" : "OffsetCommit", reqs / paced.secs,
               100 * (b1 - b0) / paced.secs, 100 * (m1 - m0) / paced.secs, 1e6 * (m1 - m0) / reqs,
               paced.p50_ms, paced.p99_ms);
        fflush(stdout);
    }
    /* Produce throughput depends on the page cache's state: the first
     * seconds of appends add dirty pages with no writeback running; after
     * that the kernel's flusher writes back all the time, on the same two
     * cores.  So the producer first warms up to that steady state, then
     * produce-alone and produce-with-commits phases alternate, and the
     * ratio is the median of the rounds' ratios. */
    result warm = run_phase(NULL, 0, &p, 3 * seconds, false);
    printf("  produce warm-up (not counted):       %9.0f msgs/s\n", warm.msgs_per_s);
    fflush(stdout);
    double ratios[MAX_ROUNDS], controls[MAX_ROUNDS], paces[MAX_ROUNDS];
    uint64_t errors = commits.errors + warm.errors;
    for (int i = 0; i < rounds; i++) {
        double c0 = bench_cpu_seconds(broker.pid);
        result base = run_phase(NULL, 0, &p, seconds, false);
        double c1 = bench_cpu_seconds(broker.pid);
        result paced = run_phase(ms, TARGET, &p, seconds, false);
        double c2 = bench_cpu_seconds(broker.pid);
        result ctl = run_phase(ms, TARGET, &p, seconds, true);
        ratios[i] = paced.msgs_per_s / base.msgs_per_s;
        controls[i] = ctl.msgs_per_s / base.msgs_per_s;
        paces[i] = paced.commits_per_s;
        errors += base.errors + paced.errors + ctl.errors;
        printf("  round %d: produce alone %9.0f msgs/s (broker CPU %.0f%%); with commits "
               "%9.0f msgs/s (broker CPU %.0f%%; commits %.0f/s, answered in %.2f ms median, "
               "%.2f ms p99): ratio %.3f; control %.3f\n",
               i + 1, base.msgs_per_s, 100 * (c1 - c0) / base.secs, paced.msgs_per_s,
               100 * (c2 - c1) / paced.secs, paced.commits_per_s, paced.p50_ms, paced.p99_ms,
               ratios[i], controls[i]);
        fflush(stdout);
    }
    double ratio = bench_median(ratios, rounds), control = bench_median(controls, rounds);
    /* A drop measured while the commits fell behind their pace (answers
     * too slow for one commit in flight per group) proves nothing. */
    double pace = bench_median(paces, rounds);
    printf("  control: ApiVersions at the commits' request rate (%.0f/s): median ratio %.3f, "
           "drop %.1f%%\n", TARGET / PARTITIONS, control, 100 * (1 - control));
    printf("  produce with commits at %.0f/s (median kept: %.0f/s): median ratio %.3f, "
           "drop %.1f%%  target drop < 10%%: %s\n", TARGET, pace, ratio, 100 * (1 - ratio),
           pace < 0.97 * TARGET ? "NOT MEASURED (commits fell behind)"
                                : ratio > 0.9 ? "met" : "MISSED");
    /* What commits cost beyond any request at their rate: the rounds'
     * paired differences, so a round's noise hits both alike. */
    double extra[MAX_ROUNDS];
    for (int i = 0; i < rounds; i++)
        extra[i] = controls[i] - ratios[i];
    printf("  commits' own share (control ratio - commit ratio, median of the rounds): "
           "%.1f points\n", 100 * bench_median(extra, rounds));
    fflush(stdout);
    double c3 = bench_cpu_seconds(broker.pid);
    result both = run_phase(ms, 0, &p, seconds, false);
    double c4 = bench_cpu_seconds(broker.pid);
    printf("  produce + commits unthrottled:       %9.0f msgs/s  (commits %.0f/s; "
           "broker CPU %.0f%%)\n", both.msgs_per_s, both.commits_per_s,
           100 * (c4 - c3) / both.secs);
    errors += both.errors;
    if (errors)
        printf("  %llu requests or partitions answered with an error\n",
               (unsigned long long)errors);
    for (int g = 0; g < GROUPS; g++)
        close(ms[g].fd);
    close(p.fd);
    kp_buf_free(&p.req);
    bench_broker_cleanup(&broker);
    return errors ? 1 : 0;
}
