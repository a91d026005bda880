/*
 * Transactions on this machine (issue 30, "Performance"): a real ZooKeeper
 * and three brokers (bench_cluster.h's cluster), one partition of
 * __transaction_state (transaction.state.log.num.partitions=1, RF 3,
 * min.isr 2) so that every transactional id has the same coordinator.
 *
 *   build/bench/txn_bench [path/to/sluiced] [messages per produce round]
 *                         [fill MiB] [seconds per small-transaction load]
 *                         [parallel producers]
 *       (sluiced also from $SLUICED; defaults build/sluiced, 100000, 128,
 *        5, 8; $BENCH_KEEP=1 keeps the scratch directory and its logs,
 *        $BENCH_TIMEOUT the watchdog's seconds, default 900;
 *        $BENCH_STEPS=produce,read,small runs only those steps; small
 *        includes smallraw)
 *
 * Printed, each on a labelled line with its target (never asserted):
 *   produce  librdkafka, 1 KiB records to one partition of an RF-3 topic
 *            (min.insync.replicas=2), acks=all, linger.ms=5: a
 *            transactional producer committing every 100 ms against the
 *            idempotent producer, alternating rounds (T I, I T, ...), the
 *            clock from the first record to the last commit (flush);
 *            msgs/s each (medians) and their ratio (target >= 0.95); the
 *            CPU-ms per GB of the brokers and the clients, each side, and
 *            its ratio (steadier than the rates on a shared machine); per
 *            side, the requests per GB the brokers answered (Produce, i.e.
 *            the client's batches, Fetch, the transactions' own) and their
 *            mean time in the broker (each broker's /metrics); the share
 *            of the transactional rounds the application spent blocked in
 *            commit_transaction (which flushes what is queued) and
 *            begin_transaction.  $BENCH_CALLGRIND=idempotent or
 *            =transactional: that side's rounds only, the brokers under
 *            valgrind's callgrind, counted from the first round to the last
 *            (callgrind_control -z, -d): instructions per MB produced, each
 *            broker; user space only (the kernel's copies are not counted).
 *   read     two one-partition RF-3 topics filled by a transactional
 *            producer (1,000 records of 1 KiB per transaction), in one
 *            every 10th transaction aborted; each read from offset 0 to
 *            the end of the partition with isolation.level
 *            read_uncommitted and read_committed, alternating; the
 *            records delivered are counted and must be all of them
 *            (uncommitted) or the committed ones; MB/s of the log read
 *            (records scanned x 1 KiB, the same bytes for both) and of the
 *            records delivered; ratio committed/uncommitted of the log
 *            rates (target >= 0.95); per level, the CPU-ms per GB of log of
 *            the brokers and of this bench's consumer.
 *   small    transactions of one 1 KiB record each (begin, produce,
 *            commit_transaction) on an RF-3 topic, acks=all, through the
 *            one coordinator, by 1 producer and then by N producers on N
 *            threads (own transactional ids, own partitions): transactions
 *            per second and commit_transaction latency p50/p99 (targets
 *            >= 1,000/s and p99 <= 50 ms); the CPU-ms per transaction of
 *            the brokers and of the librdkafka clients (this process), the
 *            machine's busy cores (every session's, /proc/stat), and the
 *            bound that cost sets: cores / CPU per transaction, and the
 *            bound of each side alone (the clients', the brokers'), and
 *            whether 1,000/s fits that bound or which side rules it out.
 *   smallraw the same load by librdkafka-free producers (raw_run: one
 *            thread and two blocking sockets each, AddPartitionsToTxn v1,
 *            Produce v7 acks=all of one transactional record, EndTxn v1,
 *            one after the other as librdkafka sends them): the brokers'
 *            cost and rate when the client costs next to nothing; EndTxn
 *            latency, and the CONCURRENT_TRANSACTIONS answers it retried.
 *
 * Exit status: 0 when every step ran (whatever the figures), 1 when
 * something failed (a broker that would not start, a transaction that
 * failed, a count that did not match); the broker logs' tails are printed.
 */
#include "bench/bench_cluster.h"
#include "bench/bench_rdkafka.h"
#include "kp_msgs.h"

#include <pthread.h>

#define TXN_MSG_SIZE     1024
#define COMMIT_EVERY_S   0.1
#define PRODUCE_ROUNDS   5          /* per side */
#define FILL_TXN_RECS    1000       /* records per transaction of the read step's fill */
#define ABORT_EVERY      10         /* every 10th transaction of the fill aborted */
#define READ_ROUNDS      5          /* per isolation level and topic */
#define SMALL_PARTITIONS 16
#define MAX_SMALL        64         /* producers of the small step */

static const char *const rf3_cfg[] = { "min.insync.replicas", "2", "segment.bytes", "1073741824",
                                       NULL };
static char payload[TXN_MSG_SIZE];

/* ---- helpers ------------------------------------------------------------ */

static void txn_ok(rd_kafka_error_t *e, const char *what)
{
    if (e) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        die("%s: %s", what, msg);
    }
}

/* An RF-3 topic of `partitions` created through broker 1 and led
 * everywhere; the bootstrap of its partition 0's leader into bs. */
static void create_rf3(const char *topic, int32_t partitions, char *bs, size_t n)
{
    int fd = connect_or_die(&brokers[0]);
    int rc = bench_create_topic_rf(fd, topic, partitions, 3, rf3_cfg, 30000);
    close(fd);
    if (rc != 0)
        die("CreateTopics %s (RF 3) through broker 1: error %d", topic, rc);
    bench_md md;
    if (wait_led(0, topic, partitions, 0, 30, &md) < 0)
        die("%s is not led in broker 1's Metadata after 30 s", topic);
    int li = index_of_id(md.leader0);
    if (li < 0)
        die("%s is led by unknown broker %d", topic, md.leader0);
    snprintf(bs, n, "127.0.0.1:%d", brokers[li].port);
}

/* A producer (bench_rk_producer_conf: linger.ms=5, large queues) with
 * acks=all, idempotent, and transactional when tid is set (its
 * transactions initialised); metadata of topic warmed up. */
static rd_kafka_t *producer_new(const char *bs, const char *tid, const char *linger,
                                const char *topic, rd_kafka_topic_t **rkt)
{
    rd_kafka_conf_t *c = bench_rk_producer_conf(bs, "all", "none");
    bench_rk_conf(c, "enable.idempotence", "true");
    bench_rk_conf(c, "linger.ms", linger);
    if (tid)
        bench_rk_conf(c, "transactional.id", tid);
    rd_kafka_t *rk = bench_rk_producer_new(c);
    if (tid)
        txn_ok(rd_kafka_init_transactions(rk, 30000), "init_transactions");
    *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md;
    if (rd_kafka_metadata(rk, 0, *rkt, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR)
        rd_kafka_metadata_destroy(md);
    return rk;
}

static void producer_free(rd_kafka_t *rk, rd_kafka_topic_t *rkt)
{
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
}

/* ---- where the CPU goes ---------------------------------------------------- */

/* CPU seconds so far: every process on the machine, this bench (its
 * librdkafka clients), each broker; and the clock. */
typedef struct cpu_mark {
    double wall, machine, self, broker[NBROKERS];
} cpu_mark;

/* Seconds the machine's CPUs were not idle, from /proc/stat's first line
 * (user nice system idle iowait irq softirq steal; ticks): it counts the
 * processes that exit in between, which a sum over /proc misses. */
static double busy_seconds(void)
{
    unsigned long long v[8] = { 0 };
    FILE *f = fopen("/proc/stat", "r");
    int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                       &v[3], &v[4], &v[5], &v[6], &v[7]) : 0;
    if (f)
        fclose(f);
    if (n < 5)
        return 0;
    unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    return (double)busy / (double)sysconf(_SC_CLK_TCK);
}

static cpu_mark cpu_now(void)
{
    cpu_mark c = { bench_now(), busy_seconds(), bench_cpu_seconds(getpid()), { 0 } };
    for (int i = 0; i < NBROKERS; i++)
        c.broker[i] = bench_cpu_seconds(brokers[i].pid);
    return c;
}

/* sum += z - a, field by field (several rounds of one side). */
static void cpu_add(cpu_mark *sum, const cpu_mark *a, const cpu_mark *z)
{
    sum->wall += z->wall - a->wall;
    sum->machine += z->machine - a->machine;
    sum->self += z->self - a->self;
    for (int i = 0; i < NBROKERS; i++)
        sum->broker[i] += z->broker[i] - a->broker[i];
}

/* One line: the cores busy on the machine between a and z (out of the
 * ones it has), and the CPU-ms per `unit` of the brokers and the clients.
 * Returns the CPU-seconds per unit of both together. */
static double cpu_print(const char *step, const cpu_mark *a, const cpu_mark *z, double units,
                      const char *unit)
{
    double wall = z->wall - a->wall, bk = 0;
    char per[96];
    int n = 0;
    for (int i = 0; i < NBROKERS; i++) {
        double d = z->broker[i] - a->broker[i];
        bk += d;
        n += snprintf(per + n, sizeof per - (size_t)n, "%s%.3f", i ? " " : "", d * 1e3 / units);
    }
    printf("%s:   CPU: machine %.2f of %ld cores busy (every session's); per %s: brokers "
           "%.3f ms (%s), this bench's clients %.3f ms\n", step,
           (z->machine - a->machine) / wall, sysconf(_SC_NPROCESSORS_ONLN), unit,
           bk * 1e3 / units, per, (z->self - a->self) * 1e3 / units);
    return (bk + z->self - a->self) / units;
}

/* ---- where the requests go ------------------------------------------------ */

/* Requests answered and the seconds they took (sluice_requests_total and
 * sluice_request_duration_seconds_sum of each broker's /metrics, its admin
 * listener): Produce, Fetch (the followers' and __transaction_state's
 * replication), AddPartitionsToTxn (the client's and KIP-890's verifying
 * ones), EndTxn, and the transactions' others (WriteTxnMarkers,
 * InitProducerId, FindCoordinator, ...) together. */
enum { RQ_PRODUCE, RQ_FETCH, RQ_ADD, RQ_END, RQ_TXN, RQ_N };

typedef struct req_mark {
    double n[NBROKERS][RQ_N], secs[RQ_N];
} req_mark;

static int req_kind(const char *api, size_t len)
{
    static const char *const names[] = { "Produce", "Fetch", "AddPartitionsToTxn", "EndTxn",
                                         "AddOffsetsToTxn", "WriteTxnMarkers", "TxnOffsetCommit",
                                         "InitProducerId", "FindCoordinator", NULL };
    for (int i = 0; names[i]; i++)
        if (strlen(names[i]) == len && !memcmp(api, names[i], len))
            return i < RQ_TXN ? i : RQ_TXN;
    return -1;
}

/* Adds the value of each `<key><api>"} value` line of text to out[kind]. */
static void req_scan(const char *text, const char *key, double *out, size_t stride)
{
    size_t klen = strlen(key);
    for (const char *l = strstr(text, key); l; l = strstr(l + 1, key)) {
        const char *api = l + klen, *q = strchr(api, '"');
        int k = q ? req_kind(api, (size_t)(q - api)) : -1;
        if (k >= 0 && q[1] == '}')
            out[(size_t)k * stride] += strtod(q + 2, NULL);
    }
}

static req_mark req_now(void)
{
    req_mark m = { { { 0 } }, { 0 } };
    for (int i = 0; i < NBROKERS; i++) {
        bench_http_res res = { 0 };
        if (bench_http(cluster_admin_port[i], "GET", "/metrics", NULL, &res) || res.status != 200)
            die("GET /metrics of broker %d failed", i + 1);
        req_scan(res.body, "sluice_requests_total{api=\"", m.n[i], 1);
        req_scan(res.body, "sluice_request_duration_seconds_sum{api=\"", m.secs, 1);
        kp_buf_free(&res.raw);
    }
    return m;
}

static void req_add(req_mark *sum, const req_mark *a, const req_mark *z)
{
    for (int k = 0; k < RQ_N; k++) {
        for (int i = 0; i < NBROKERS; i++)
            sum->n[i][k] += z->n[i][k] - a->n[i][k];
        sum->secs[k] += z->secs[k] - a->secs[k];
    }
}

/* Two lines: requests per GB answered by all brokers, per kind (Fetch by
 * broker), the mean batch (the leader's Produce requests are the client's
 * batches: one partition, one batch per request); the mean time from a
 * request's arrival to its answer, per kind. */
static void req_print(const char *step, const req_mark *m, double gb)
{
    double tot[RQ_N] = { 0 };
    char per[96];
    int n = 0;
    for (int i = 0; i < NBROKERS; i++) {
        for (int k = 0; k < RQ_N; k++)
            tot[k] += m->n[i][k];
        n += snprintf(per + n, sizeof per - (size_t)n, "%s%.0f", i ? " " : "",
                      m->n[i][RQ_FETCH] / gb);
    }
    /* More AddPartitionsToTxn than EndTxn: the client retried some (a
     * CONCURRENT_TRANSACTIONS answer costs librdkafka a 20 ms backoff). */
    printf("%s:   requests per GB: Produce %.0f (mean batch %.1f KiB), Fetch %.0f (%s), "
           "AddPartitionsToTxn %.0f (%.2f per EndTxn), EndTxn %.0f, other transactions' %.0f\n",
           step, tot[RQ_PRODUCE] / gb,
           tot[RQ_PRODUCE] > 0 ? gb * 1e9 / tot[RQ_PRODUCE] / 1024 : 0, tot[RQ_FETCH] / gb, per,
           tot[RQ_ADD] / gb, tot[RQ_END] > 0 ? tot[RQ_ADD] / tot[RQ_END] : 0, tot[RQ_END] / gb,
           tot[RQ_TXN] / gb);
    double ms[RQ_N];
    for (int k = 0; k < RQ_N; k++)
        ms[k] = tot[k] > 0 ? m->secs[k] * 1e3 / tot[k] : 0;
    printf("%s:   mean ms in the broker: Produce %.2f, Fetch %.2f, AddPartitionsToTxn %.2f, "
           "EndTxn %.2f\n", step, ms[RQ_PRODUCE], ms[RQ_FETCH], ms[RQ_ADD], ms[RQ_END]);
}

/* ---- produce: transactional vs idempotent -------------------------------- */

/* n records to partition 0; tid: transactional, a commit every 100 ms.
 * Returns msgs/s. */
static double produce_round(const char *bs, const char *topic, const char *tid, long n,
                            long *commits, double *blocked)
{
    rd_kafka_topic_t *rkt;
    rd_kafka_t *rk = producer_new(bs, tid, "5", topic, &rkt);
    bench_rk_delivered = bench_rk_failed = 0;
    *commits = 0;
    double t0 = bench_now(), next = t0 + COMMIT_EVERY_S;
    if (tid)
        txn_ok(rd_kafka_begin_transaction(rk), "begin_transaction");
    for (long i = 0; i < n; i++) {
        bench_rk_produce_one(rk, rkt, 0, payload, sizeof payload, i);
        if (tid && (i & 15) == 15 && bench_now() >= next) {
            double c0 = bench_now();
            txn_ok(rd_kafka_commit_transaction(rk, 60000), "commit_transaction");
            ++*commits;
            txn_ok(rd_kafka_begin_transaction(rk), "begin_transaction");
            next = bench_now() + COMMIT_EVERY_S;
            *blocked += next - COMMIT_EVERY_S - c0;
        }
    }
    if (tid) {
        double c0 = bench_now();
        txn_ok(rd_kafka_commit_transaction(rk, 60000), "commit_transaction");
        ++*commits;
        *blocked += bench_now() - c0;
    } else {
        rd_kafka_flush(rk, 120000);
    }
    double secs = bench_now() - t0;
    if (bench_rk_failed || bench_rk_delivered != n)
        die("produce round (%s): %ld delivered, %ld failed of %ld", tid ? "transactional" :
            "idempotent", (long)bench_rk_delivered, (long)bench_rk_failed, n);
    producer_free(rk, rkt);
    return (double)n / secs;
}

/* ---- $BENCH_CALLGRIND: one side's instructions, broker by broker ---------- */

/* -1: both sides as usual; else the side (0 idempotent, 1 transactional)
 * whose rounds run alone, the brokers under callgrind (cg_wrap). */
static int cg_side = -1;

/* The brokers run through a script in the scratch directory that execs
 * sluiced under callgrind (the broker keeps valgrind's pid). */
static void cg_wrap(void)
{
    const char *side = getenv("BENCH_CALLGRIND");
    if (!side || !*side)
        return;
    cg_side = !strcmp(side, "transactional") ? 1 : !strcmp(side, "idempotent") ? 0 : -2;
    if (cg_side < 0)
        die("BENCH_CALLGRIND=%s: idempotent or transactional", side);
    static char wrap[300];
    snprintf(wrap, sizeof wrap, "%s/sluiced-callgrind", bench_scratch);
    FILE *f = fopen(wrap, "w");
    if (!f || fprintf(f, "#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s/"
                      "cg.%%p.out %s \"$@\"\n", bench_scratch, bench_sluiced_path()) < 0 ||
        fclose(f) || chmod(wrap, 0755))
        die("cannot write %s", wrap);
    setenv("SLUICED", wrap, 1);
}

static void cg_control(const char *what)
{
    for (int i = 0; i < NBROKERS; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "callgrind_control %s %d >/dev/null 2>&1", what,
                 (int)brokers[i].pid);
        if (system(cmd) != 0)
            die("%s failed (valgrind installed?)", cmd);
    }
}

/* After cg_control("-d"): each broker's instructions per MB of mb. */
static void cg_print(double mb)
{
    printf("produce: callgrind, %s side only: instructions per MB produced (user space), "
           "broker", cg_side ? "transactional" : "idempotent");
    for (int i = 0; i < NBROKERS; i++) {
        char path[300], line[256];
        snprintf(path, sizeof path, "%s/cg.%d.out.1", bench_scratch, (int)brokers[i].pid);
        FILE *f = fopen(path, "r");
        double total = -1;
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "totals:", 7))
                total = atof(line + 7);
        if (f)
            fclose(f);
        printf(" %d: %.0f", i + 1, total / mb);
    }
    printf(" ($BENCH_KEEP=1 keeps %s/cg.*.out.1 for callgrind_annotate)\n", bench_scratch);
}

static void bench_produce(long n)
{
    char bs[64];
    create_rf3("txn-produce", 1, bs, sizeof bs);
    /* side 0 idempotent, 1 transactional */
    double rate[2][PRODUCE_ROUNDS], pair[PRODUCE_ROUNDS];
    cpu_mark zero = { .wall = 0 }, used[2] = { { .wall = 0 }, { .wall = 0 } };
    req_mark reqs[2] = { { { { 0 } }, { 0 } }, { { { 0 } }, { 0 } } };
    long commits[PRODUCE_ROUNDS];
    double blocked = 0;             /* in commit_transaction + begin_transaction */
    long ncommits = 0;
    if (cg_side >= 0)
        cg_control("-z");
    for (int r = 0; r < PRODUCE_ROUNDS; r++) {
        for (int k = 0; k < 2; k++) {
            int side = (k == 0) == (r % 2 == 0);
            rate[side][r] = 1;
            if (cg_side >= 0 && side != cg_side)
                continue;
            long c = 0;
            req_mark q0 = req_now();
            cpu_mark c0 = cpu_now();
            rate[side][r] = produce_round(bs, "txn-produce", side ? "bench-produce" : NULL, n, &c,
                                          &blocked);
            cpu_mark c1 = cpu_now();
            req_mark q1 = req_now();
            cpu_add(&used[side], &c0, &c1);
            req_add(&reqs[side], &q0, &q1);
            if (side) {
                commits[r] = c;
                ncommits += c;
            }
            printf("produce: round %d %-13s %9.0f msgs/s\n", r + 1,
                   side ? "transactional" : "idempotent", rate[side][r]);
        }
        pair[r] = rate[1][r] / rate[0][r];
    }
    if (cg_side >= 0) {
        cg_control("-d");
        cg_print((double)n * TXN_MSG_SIZE * PRODUCE_ROUNDS / 1e6);
        return;
    }
    double med[2] = { bench_median(rate[0], PRODUCE_ROUNDS), bench_median(rate[1], PRODUCE_ROUNDS) };
    printf("produce: librdkafka %s, %ld records of %d bytes per round, RF 3 acks=all "
           "min.insync.replicas=2, linger.ms=5, 1 partition, %d rounds per side alternating; "
           "medians:\n", rd_kafka_version_str(), n, TXN_MSG_SIZE, PRODUCE_ROUNDS);
    printf("produce: idempotent    %9.0f msgs/s (%.1f MB/s)\n", med[0],
           med[0] * TXN_MSG_SIZE / 1e6);
    printf("produce: transactional %9.0f msgs/s (%.1f MB/s), a commit every %.0f ms (%ld "
           "commits in round 1)\n", med[1], med[1] * TXN_MSG_SIZE / 1e6, COMMIT_EVERY_S * 1e3,
           commits[0]);
    printf("produce: ratio transactional/idempotent %.3f (target >= 0.95); median of the %d "
           "pairs' ratios %.3f\n", med[1] / med[0], PRODUCE_ROUNDS,
           bench_median(pair, PRODUCE_ROUNDS));
    /* CPU per GB: what the machine's load moves least (ticks of 10 ms). */
    double gb = (double)n * TXN_MSG_SIZE * PRODUCE_ROUNDS / 1e9;
    double cpu_i = cpu_print("produce: idempotent", &zero, &used[0], gb, "GB");
    req_print("produce: idempotent", &reqs[0], gb);
    double cpu_t = cpu_print("produce: transactional", &zero, &used[1], gb, "GB");
    req_print("produce: transactional", &reqs[1], gb);
    printf("produce: transactional: the application blocked in commit_transaction + "
           "begin_transaction %.1f %% of its rounds' time (%.2f ms per commit)\n",
           100 * blocked / used[1].wall, blocked * 1e3 / (double)ncommits);
    printf("produce: CPU (brokers + clients) per GB transactional/idempotent %.3f\n",
           cpu_t / cpu_i);
}

/* ---- read: read_committed vs read_uncommitted ----------------------------- */

/* Fills partition 0 of topic with txns transactions of FILL_TXN_RECS
 * records; every ABORT_EVERY-th aborted when aborts.  Returns the records
 * committed. */
static long fill(const char *bs, const char *topic, long txns, bool aborts)
{
    rd_kafka_topic_t *rkt;
    rd_kafka_t *rk = producer_new(bs, topic, "5", topic, &rkt);
    long committed = 0, i = 0;
    for (long t = 0; t < txns; t++) {
        txn_ok(rd_kafka_begin_transaction(rk), "begin_transaction");
        for (int k = 0; k < FILL_TXN_RECS; k++)
            bench_rk_produce_one(rk, rkt, 0, payload, sizeof payload, i++);
        if (aborts && t % ABORT_EVERY == ABORT_EVERY - 1) {
            /* An abort drops what is still queued: flush first, so that
             * the aborted records are in the log, as they would be. */
            rd_kafka_flush(rk, 60000);
            txn_ok(rd_kafka_abort_transaction(rk, 60000), "abort_transaction");
        } else {
            txn_ok(rd_kafka_commit_transaction(rk, 60000), "commit_transaction");
            committed += FILL_TXN_RECS;
        }
    }
    producer_free(rk, rkt);
    return committed;
}

typedef struct read_result {
    double secs;   /* first record to the end of the partition */
    long recs;     /* records delivered */
} read_result;

/* Reads partition 0 of topic from its start to its end (the partition
 * EOF event) at isolation level iso. */
static read_result read_all(const char *bs, const char *topic, const char *iso)
{
    rd_kafka_conf_t *c = bench_rk_conf_new(bs);
    bench_rk_conf(c, "isolation.level", iso);
    bench_rk_conf(c, "enable.partition.eof", "true");
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    if (!rk)
        die("consumer: %s", err);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    rd_kafka_consume_start(rkt, 0, RD_KAFKA_OFFSET_BEGINNING);
    read_result res = { 0, 0 };
    double t0 = 0, deadline = bench_now() + 120;
    bool eof = false;
    rd_kafka_message_t *batch[4096];
    while (!eof && bench_now() < deadline) {
        ssize_t k = rd_kafka_consume_batch(rkt, 0, 100, batch, 4096);
        for (ssize_t i = 0; i < k; i++) {
            if (batch[i]->err == RD_KAFKA_RESP_ERR__PARTITION_EOF && res.recs > 0)
                eof = true;
            else if (batch[i]->err == RD_KAFKA_RESP_ERR_NO_ERROR && batch[i]->len == TXN_MSG_SIZE)
                res.recs++;
            else if (batch[i]->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                die("consume %s (%s): %s", topic, iso, rd_kafka_message_errstr(batch[i]));
            rd_kafka_message_destroy(batch[i]);
        }
        if (k > 0 && t0 == 0)
            t0 = bench_now();
    }
    res.secs = bench_now() - t0;
    if (!eof)
        die("consume %s (%s): no end of partition within 120 s (%ld records)", topic, iso,
            res.recs);
    rd_kafka_consume_stop(rkt, 0);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return res;
}

static void read_topic(const char *bs, const char *topic, long total, long committed)
{
    static const char *const iso[2] = { "read_uncommitted", "read_committed" };
    double log_rate[2][READ_ROUNDS], got_rate[2][READ_ROUNDS];
    cpu_mark zero = { .wall = 0 }, used[2] = { { .wall = 0 }, { .wall = 0 } };
    for (int r = 0; r < READ_ROUNDS; r++)
        for (int k = 0; k < 2; k++) {
            int side = (k == 0) == (r % 2 == 0);
            cpu_mark c0 = cpu_now();
            read_result res = read_all(bs, topic, iso[side]);
            cpu_mark c1 = cpu_now();
            cpu_add(&used[side], &c0, &c1);
            long want = side ? committed : total;
            if (res.recs != want)
                die("%s %s: %ld records delivered, not %ld", topic, iso[side], res.recs, want);
            log_rate[side][r] = (double)total * TXN_MSG_SIZE / 1e6 / res.secs;
            got_rate[side][r] = (double)res.recs * TXN_MSG_SIZE / 1e6 / res.secs;
        }
    double med[2];
    for (int side = 0; side < 2; side++) {
        med[side] = bench_median(log_rate[side], READ_ROUNDS);
        printf("read: %-20s %-16s %7.1f MB/s of log, %7.1f MB/s delivered (%ld records)\n", topic,
               iso[side], med[side], bench_median(got_rate[side], READ_ROUNDS),
               side ? committed : total);
        char step[64];
        snprintf(step, sizeof step, "read: %s %s", topic, iso[side]);
        (void)cpu_print(step, &zero, &used[side], (double)total * TXN_MSG_SIZE * READ_ROUNDS / 1e9,
                  "GB of log");
    }
    printf("read: %-20s ratio read_committed/read_uncommitted %.3f (target >= 0.95)\n", topic,
           med[1] / med[0]);
}

static void bench_read(long mib)
{
    long txns = (mib << 20) / ((long)FILL_TXN_RECS * TXN_MSG_SIZE);
    txns = txns < ABORT_EVERY ? ABORT_EVERY : txns;
    char bs_clean[64], bs_aborts[64];
    create_rf3("txn-read-committed", 1, bs_clean, sizeof bs_clean);
    create_rf3("txn-read-aborts", 1, bs_aborts, sizeof bs_aborts);
    double t0 = bench_now();
    long c_clean = fill(bs_clean, "txn-read-committed", txns, false);
    long c_aborts = fill(bs_aborts, "txn-read-aborts", txns, true);
    long total = txns * FILL_TXN_RECS;
    printf("read: filled 2 topics with %ld transactions of %d records of %d bytes each "
           "(every %dth aborted in txn-read-aborts) in %.1f s; %d reads per level, alternating, "
           "medians:\n", txns, FILL_TXN_RECS, TXN_MSG_SIZE, ABORT_EVERY, bench_now() - t0,
           READ_ROUNDS);
    read_topic(bs_clean, "txn-read-committed", total, c_clean);
    read_topic(bs_aborts, "txn-read-aborts", total, c_aborts);
}

/* ---- small: one record per transaction ------------------------------------ */

typedef struct small_producer {
    pthread_t th;
    int id;
    const char *bs;
    double start, until;
    long txns;
    double *lat;     /* commit_transaction seconds, one per transaction */
    long cap;
} small_producer;

static void *small_run(void *arg)
{
    small_producer *sp = arg;
    char tid[32];
    snprintf(tid, sizeof tid, "bench-small-%d", sp->id);
    rd_kafka_topic_t *rkt;
    rd_kafka_t *rk = producer_new(sp->bs, tid, "0", "txn-small", &rkt);
    int32_t part = sp->id % SMALL_PARTITIONS;
    while (bench_now() < sp->start)
        usleep(1000);
    while (bench_now() < sp->until && sp->txns < sp->cap) {
        txn_ok(rd_kafka_begin_transaction(rk), "begin_transaction");
        bench_rk_produce_one(rk, rkt, part, payload, sizeof payload, 1);
        double t = bench_now();
        txn_ok(rd_kafka_commit_transaction(rk, 60000), "commit_transaction");
        sp->lat[sp->txns++] = bench_now() - t;
    }
    producer_free(rk, rkt);
    return NULL;
}

/* Percentile p (nearest rank) of v, sorted here. */
static double percentile(double *v, long n, double p)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    long k = (long)(p * (double)n + 0.999999) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* ---- small, raw: the same transactions without librdkafka ------------------- */

/* A librdkafka-free transactional producer on its own thread, blocking
 * sockets, one request at a time as librdkafka sends them for one record
 * (AddPartitionsToTxn v1 to the coordinator, Produce v7 acks=all with a
 * transactional batch to the partition's leader, EndTxn v1 commit): what
 * the brokers cost and allow when the client costs almost nothing. */
typedef struct raw_producer {
    small_producer sp;
    int coord_fd, leader_fd;
    int64_t pid;
    int16_t epoch;
    int32_t cid;
    long retries;                     /* CONCURRENT_TRANSACTIONS answers */
    kp_buf q, r, batch;
    kp_arena a;
} raw_producer;

#define RAW_TOPIC "txn-small"
#define RAW_CONCURRENT 51             /* CONCURRENT_TRANSACTIONS */

/* The request in rp->q (raw_hdr, then its body) and its response into
 * rp->r; a reader over the response past the correlation id. */
static kp_rd raw_call(raw_producer *rp, int fd, int16_t api)
{
    kp_buf_reset(&rp->r);
    if (bench_roundtrip(fd, &rp->q, &rp->r))
        die("small raw %d: api %d: the connection failed", rp->sp.id, api);
    kp_rd rd;
    kp_rd_init(&rd, rp->r.data, rp->r.len);
    kp_rd_i32(&rd);
    kp_arena_reset(&rp->a);
    return rd;
}

static void raw_hdr(raw_producer *rp, int16_t api, int16_t v)
{
    kp_buf_reset(&rp->q);
    kp_req_hdr_write(&rp->q, api, v, ++rp->cid, "txn-bench-raw");
}

static int raw_port(int32_t node)
{
    int i = index_of_id(node);
    if (i < 0)
        die("small raw: unknown broker %d", node);
    return brokers[i].port;
}

static int raw_connect(int port)
{
    int fd = bench_connect(port);
    if (fd < 0)
        die("small raw: cannot connect to port %d", port);
    bench_set_timeout(fd, 60);
    return fd;
}

/* FindCoordinator and InitProducerId (retried while the coordinator
 * loads), the partition's leader from Metadata; both connections open. */
static void raw_init(raw_producer *rp, const char *tid, int32_t part)
{
    kp_buf_init(&rp->q);
    kp_buf_init(&rp->r);
    kp_arena_init(&rp->a, 0);
    int fd = raw_connect(brokers[0].port);
    raw_hdr(rp, KP_API_METADATA, 1);
    kp_wr_array(&rp->q, 1);           /* Metadata v1: the topics' names */
    kp_wr_string(&rp->q, RAW_TOPIC, -1);
    kp_rd rd = raw_call(rp, fd, KP_API_METADATA);
    kp_MetadataResponse mr;
    int32_t leader = -1;
    if (kp_dec_MetadataResponse(&rd, 1, &mr, &rp->a) == 0 && mr.Topics_count == 1)
        for (int32_t k = 0; k < mr.Topics[0].Partitions_count; k++)
            if (mr.Topics[0].Partitions[k].PartitionIndex == part)
                leader = mr.Topics[0].Partitions[k].LeaderId;
    rp->leader_fd = raw_connect(raw_port(leader));
    double deadline = bench_now() + 30;
    int16_t err = -1;
    while (err && bench_now() < deadline) {
        kp_FindCoordinatorRequest fq = { .Key = kp_str_cstr(tid), .KeyType = 1 };
        raw_hdr(rp, KP_API_FIND_COORDINATOR, 1);
        kp_enc_FindCoordinatorRequest(&rp->q, 1, &fq);
        rd = raw_call(rp, fd, KP_API_FIND_COORDINATOR);
        kp_FindCoordinatorResponse fr;
        if (kp_dec_FindCoordinatorResponse(&rd, 1, &fr, &rp->a) || (err = fr.ErrorCode)) {
            usleep(50000);
            continue;
        }
        rp->coord_fd = raw_connect(raw_port(fr.NodeId));
        kp_InitProducerIdRequest iq;
        kp_init_InitProducerIdRequest(&iq);
        iq.TransactionalId = kp_str_cstr(tid);
        iq.TransactionTimeoutMs = 60000;
        raw_hdr(rp, KP_API_INIT_PRODUCER_ID, 1);
        kp_enc_InitProducerIdRequest(&rp->q, 1, &iq);
        rd = raw_call(rp, rp->coord_fd, KP_API_INIT_PRODUCER_ID);
        kp_InitProducerIdResponse ir;
        if (kp_dec_InitProducerIdResponse(&rd, 1, &ir, &rp->a) || (err = ir.ErrorCode)) {
            close(rp->coord_fd);
            usleep(50000);
            continue;
        }
        rp->pid = ir.ProducerId;
        rp->epoch = ir.ProducerEpoch;
    }
    close(fd);
    if (err)
        die("small raw %d: no producer id for %s within 30 s (error %d)", rp->sp.id, tid, err);
}

/* AddPartitionsToTxn v1 for (RAW_TOPIC, part): its error. */
static int16_t raw_add(raw_producer *rp, const char *tid, int32_t part)
{
    kp_AddPartitionsToTxnRequest q;
    kp_init_AddPartitionsToTxnRequest(&q);
    kp_AddPartitionsToTxnRequest_AddPartitionsToTxnTopic t = {
        .Name = kp_str_cstr(RAW_TOPIC), .Partitions = &part, .Partitions_count = 1 };
    q.V3AndBelowTransactionalId = kp_str_cstr(tid);
    q.V3AndBelowProducerId = rp->pid;
    q.V3AndBelowProducerEpoch = rp->epoch;
    q.V3AndBelowTopics = &t;
    q.V3AndBelowTopics_count = 1;
    raw_hdr(rp, KP_API_ADD_PARTITIONS_TO_TXN, 1);
    kp_enc_AddPartitionsToTxnRequest(&rp->q, 1, &q);
    kp_rd rd = raw_call(rp, rp->coord_fd, KP_API_ADD_PARTITIONS_TO_TXN);
    kp_AddPartitionsToTxnResponse m;
    if (kp_dec_AddPartitionsToTxnResponse(&rd, 1, &m, &rp->a) ||
        m.ResultsByTopicV3AndBelow_count != 1 ||
        m.ResultsByTopicV3AndBelow[0].ResultsByPartition_count != 1)
        return -1;
    return m.ResultsByTopicV3AndBelow[0].ResultsByPartition[0].PartitionErrorCode;
}

/* Produce v7, acks=all: one transactional record, sequence seq. */
static int16_t raw_produce(raw_producer *rp, const char *tid, int32_t part, int32_t seq)
{
    kp_batch_builder bb;
    kp_buf_reset(&rp->batch);
    kp_bb_init(&bb, &rp->batch, KP_CODEC_NONE);
    kp_bb_set_producer(&bb, rp->pid, rp->epoch, seq);
    bb.extra_attrs = KP_ATTR_TRANSACTIONAL;
    kp_bb_add(&bb, (int64_t)(bench_now() * 1e3), NULL, 0, payload, sizeof payload, NULL, 0);
    if (kp_bb_finish(&bb) < 0)
        die("small raw: cannot build a batch");
    kp_bb_free(&bb);
    kp_ProduceRequest_PartitionProduceData pd = {
        .Index = part, .Records = { (const char *)rp->batch.data, (int32_t)rp->batch.len } };
    kp_ProduceRequest_TopicProduceData td = { .Name = kp_str_cstr(RAW_TOPIC),
                                              .PartitionData = &pd, .PartitionData_count = 1 };
    kp_ProduceRequest q = { .TransactionalId = kp_str_cstr(tid), .Acks = -1,
                            .TimeoutMs = 30000, .TopicData = &td, .TopicData_count = 1 };
    raw_hdr(rp, KP_API_PRODUCE, 7);
    kp_enc_ProduceRequest(&rp->q, 7, &q);
    kp_rd rd = raw_call(rp, rp->leader_fd, KP_API_PRODUCE);
    kp_ProduceResponse m;
    if (kp_dec_ProduceResponse(&rd, 7, &m, &rp->a) || m.Responses_count != 1 ||
        m.Responses[0].PartitionResponses_count != 1)
        return -1;
    return m.Responses[0].PartitionResponses[0].ErrorCode;
}

static int16_t raw_end(raw_producer *rp, const char *tid)
{
    kp_EndTxnRequest q = { .TransactionalId = kp_str_cstr(tid), .ProducerId = rp->pid,
                           .ProducerEpoch = rp->epoch, .Committed = true };
    raw_hdr(rp, KP_API_END_TXN, 1);
    kp_enc_EndTxnRequest(&rp->q, 1, &q);
    kp_rd rd = raw_call(rp, rp->coord_fd, KP_API_END_TXN);
    kp_EndTxnResponse m;
    return kp_dec_EndTxnResponse(&rd, 1, &m, &rp->a) ? -1 : m.ErrorCode;
}

/* Calls one of the above until it is not CONCURRENT_TRANSACTIONS (a
 * client's retry, 20 ms apart); its error. */
#define RAW_RETRY(rp, call) ({                                               \
        int16_t e_;                                                          \
        while ((e_ = (call)) == RAW_CONCURRENT) {                            \
            (rp)->retries++;                                                 \
            usleep(20000);                                                   \
        }                                                                    \
        e_; })

static void *raw_run(void *arg)
{
    raw_producer *rp = arg;
    small_producer *sp = &rp->sp;
    char tid[32];
    snprintf(tid, sizeof tid, "bench-raw-%d", sp->id);
    int32_t part = sp->id % SMALL_PARTITIONS;
    raw_init(rp, tid, part);
    kp_buf_init(&rp->batch);
    while (bench_now() < sp->start)
        usleep(1000);
    int16_t e;
    while (bench_now() < sp->until && sp->txns < sp->cap) {
        if ((e = RAW_RETRY(rp, raw_add(rp, tid, part))) != 0)
            die("small raw %d: AddPartitionsToTxn: error %d", sp->id, e);
        if ((e = raw_produce(rp, tid, part, (int32_t)sp->txns)) != 0)
            die("small raw %d: Produce: error %d", sp->id, e);
        double t = bench_now();
        if ((e = RAW_RETRY(rp, raw_end(rp, tid))) != 0)
            die("small raw %d: EndTxn: error %d", sp->id, e);
        sp->lat[sp->txns++] = bench_now() - t;
    }
    close(rp->coord_fd);
    close(rp->leader_fd);
    kp_buf_free(&rp->q);
    kp_buf_free(&rp->r);
    kp_buf_free(&rp->batch);
    kp_arena_free(&rp->a);
    return NULL;
}

/* n producers for secs, librdkafka's (small_run) or raw ones (raw_run);
 * the figures, and the bound the CPU per transaction sets.  Returns the
 * transactions per second. */
static double small_load(const char *bs, int n, double secs, bool raw)
{
    static raw_producer rp[MAX_SMALL];
    long cap = (long)(secs * 20000) + 1;
    /* Producers start (init_transactions) before the clock. */
    double start = bench_now() + 3, until = start + secs;
    memset(rp, 0, sizeof rp);
    for (int i = 0; i < n; i++) {
        small_producer *sp = &rp[i].sp;
        *sp = (small_producer){ .id = i, .bs = bs, .start = start, .until = until, .cap = cap,
                                .lat = malloc(sizeof(double) * (size_t)cap) };
        if (!sp->lat || pthread_create(&sp->th, NULL, raw ? raw_run : small_run,
                                       raw ? (void *)&rp[i] : (void *)sp))
            die("small: cannot start producer %d", i);
    }
    while (bench_now() < start)
        usleep(1000);
    cpu_mark c0 = cpu_now();
    long total = 0, retries = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(rp[i].sp.th, NULL);
        total += rp[i].sp.txns;
        retries += rp[i].retries;
    }
    cpu_mark c1 = cpu_now();
    double took = bench_now() - start;
    double *all = malloc(sizeof(double) * (size_t)(total ? total : 1));
    long k = 0;
    for (int i = 0; i < n; i++) {
        memcpy(all + k, rp[i].sp.lat, sizeof(double) * (size_t)rp[i].sp.txns);
        k += rp[i].sp.txns;
        free(rp[i].sp.lat);
    }
    const char *who = raw ? "raw" : "";
    printf("small%s: %2d producer%s %7.0f transactions/s (target >= 1,000), %s p50 %.1f ms p99 "
           "%.1f ms (target <= 50) over %ld transactions", who, n, n > 1 ? "s" : " ",
           (double)total / took, raw ? "EndTxn" : "commit_transaction",
           percentile(all, total, 0.50) * 1e3, percentile(all, total, 0.99) * 1e3, total);
    if (raw)
        printf(", %ld CONCURRENT_TRANSACTIONS retries", retries);
    printf("\n");
    char step[16];
    snprintf(step, sizeof step, "small%s", who);
    double per = cpu_print(step, &c0, &c1, (double)total, "transaction");
    double cli = (c1.self - c0.self) / (double)total, bk = per - cli;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    /* The machine's bound at that cost: all its cores on brokers and
     * clients, nothing else running; and on each side alone. */
    printf("%s:   bound: %ld cores / %.2f CPU-ms per transaction = %.0f transactions/s at most "
           "on this machine (the clients alone: %.0f/s, the brokers alone: %.0f/s)\n", step,
           cores, per * 1e3, (double)cores / per, (double)cores / cli, (double)cores / bk);
    /* The target against that bound: which side's CPU rules it out. */
    double need = (double)cores / 1000.0;
    printf("%s:   1,000/s needs <= %.2f CPU-ms per transaction on %ld cores: %s\n", step,
           need * 1e3, cores, cli > need ? "ruled out by the clients' own CPU alone"
           : per > need ? "ruled out by brokers and clients together (each alone fits)"
           : "within this machine's bound");
    free(all);
    return (double)total / took;
}

static void bench_small(double secs, int producers)
{
    char bs[64];
    create_rf3("txn-small", SMALL_PARTITIONS, bs, sizeof bs);
    printf("small: one record of %d bytes per transaction, RF 3 acks=all, linger.ms=0, one "
           "coordinator (__transaction_state has 1 partition), %.0f s per load; producers on "
           "their own threads, transactional ids and partitions:\n", TXN_MSG_SIZE, secs);
    small_load(bs, 1, secs, false);
    small_load(bs, producers, secs, false);
    printf("smallraw: the same with librdkafka-free producers (one thread each, blocking "
           "sockets, AddPartitionsToTxn v1, Produce v7, EndTxn v1 in turn), to tell the "
           "brokers' cost from the clients':\n");
    small_load(bs, 1, secs, true);
    small_load(bs, producers, secs, true);
}

/* ---- main ---------------------------------------------------------------- */

static bool step_on(const char *name)
{
    const char *steps = getenv("BENCH_STEPS");
    return !steps || !*steps || strstr(steps, name);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        setenv("SLUICED", argv[1], 1);
    long msgs = argc > 2 ? atol(argv[2]) : 100000;
    long mib = argc > 3 ? atol(argv[3]) : 128;
    double secs = argc > 4 ? atof(argv[4]) : 5;
    int producers = argc > 5 ? atoi(argv[5]) : 8;
    if (msgs <= 0 || mib <= 0 || secs <= 0 || producers < 1 || producers > MAX_SMALL) {
        fprintf(stderr, "txn_bench: bad arguments (producers 1..%d)\n", MAX_SMALL);
        return 2;
    }
    const char *tmo = getenv("BENCH_TIMEOUT");
    bench_catch_signals(tmo ? (unsigned)atoi(tmo) : 900);
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *cg = getenv("BENCH_CALLGRIND");
    printf("txn_bench: reproduce with: %s%s%s%s%s%sflock /tmp/sluice-bench.lock %s %s %ld %ld %g "
           "%d\n", cg ? "BENCH_CALLGRIND=" : "", cg ? cg : "", cg ? " " : "",
           getenv("BENCH_STEPS") ? "BENCH_STEPS=" : "",
           getenv("BENCH_STEPS") ? getenv("BENCH_STEPS") : "", getenv("BENCH_STEPS") ? " " : "",
           argv[0], bench_sluiced_path(), msgs, mib, secs, producers);
    if (access("/usr/share/java/zookeeper.jar", R_OK)) {
        printf("txn_bench: skipped: no ZooKeeper server (/usr/share/java/zookeeper.jar; "
               "`make deps` installs it)\n");
        return 0;
    }
    /* One coordinator for every transactional id, before $BENCH_OVERRIDES'
     * own (which bench_broker_start appends, so they win). */
    char ov[1200];
    snprintf(ov, sizeof ov, "transaction.state.log.num.partitions=1 %s",
             getenv("BENCH_OVERRIDES") ? getenv("BENCH_OVERRIDES") : "");
    setenv("BENCH_OVERRIDES", ov, 1);
    memset(payload, 't', sizeof payload);
    for (int i = 0; i < NBROKERS; i++)
        cluster_admin_port[i] = bench_free_port();      /* /metrics: req_now */
    bench_mkdtemp(bench_scratch, sizeof bench_scratch, "sluice-txn-bench");
    bench_track(0, false);            /* registers the atexit cleanup */
    cg_wrap();
    zk_server_start();
    zk_client_open();
    cluster_start();
    if (step_on("produce"))
        bench_produce(msgs);
    if (step_on("read"))
        bench_read(mib);
    if (step_on("small"))
        bench_small(secs, producers);
    for (int i = 0; i < NBROKERS; i++)
        bench_broker_stop(&brokers[i]);
    zookeeper_close(zh);
    zk_server_stop();
    return 0;
}
