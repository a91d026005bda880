/*
 * Cluster mode on this machine (issue 15, "Performance"): a real ZooKeeper
 * and three brokers on free loopback ports, everything in one scratch
 * directory that is removed at exit.
 *
 *   build/bench/cluster_bench [path/to/sluiced] [messages per produce run]
 *                             [small partitions] [large partitions]
 *                             [catch-up MiB]
 *       (sluiced also from $SLUICED; defaults build/sluiced, 1000000,
 *        1000, 10000, 1024; $BENCH_KEEP=1 keeps the scratch directory and
 *        its logs, $BENCH_TIMEOUT the watchdog's seconds, default 600;
 *        $BENCH_STEPS=failover,catchup,… runs only those steps, in the
 *        order below)
 *
 * Printed, each on a labelled line with its target (never asserted):
 *   propagation  100 topics created one at a time through broker 1; for
 *                each, from sending CreateTopics to broker 3's Metadata
 *                naming a leader for its partition: p50, p99.
 *   produce      the librdkafka load of rdkafka_produce_bench (bench_rk_
 *                produce) against a standalone sluiced and against the
 *                cluster-mode leader of a one-partition RF-1 topic,
 *                alternating (S C, C S, …) and taking medians, since the
 *                machine is shared: both rates, broker CPU per GB, and the
 *                ratio (of the medians, and the median of the pairs').
 *   acks=all     the same load to the leader of an RF-1 topic with acks=1
 *                and of an RF-3 topic (min.insync.replicas=2) with
 *                acks=all, alternating; each run's rate and the CPU per GB
 *                of its leader and of the other two brokers, medians and
 *                their ratio (issue 16).  $BENCH_RK_CONF="linger.ms=50 …"
 *                changes the client's settings for both sides.
 *   latency      produce → consume of an RF-3 topic with acks=all at
 *                10,000 msgs/s: p50, p99 (issue 16).
 *   failover     an idempotent librdkafka producer sends 1,000 msgs/s with
 *                acks=all to an RF-3 topic (min.insync.replicas=2) while
 *                its leader is SIGKILLed, three times, then stopped with
 *                SIGTERM (controlled shutdown), three times, each followed
 *                by a restart and a full ISR: from the signal to the first
 *                acknowledgement by another broker, the produce errors
 *                delivered to the client and its error events; medians
 *                against session timeout + 1 s and 1 s (issue 16).
 *   catchup      a follower of an RF-2 topic stopped, `catch-up MiB`
 *                written to the leader with acks=1, read back once with
 *                fetch_bench's consumer read (bench_fetch.h), the follower
 *                started: from its start to its return to the ISR; both
 *                rates and their ratio (target >= 0.7, issue 16); then
 *                the same bytes written into a new file in the follower's
 *                log directory (removed after): this run's bound for
 *                writes into new page-cache pages, and catch-up/that.
 *   takeover     with `small` and then `large` partitions in the cluster
 *                (RF 1, brokers' session timeout 6 s), 3 s after the last
 *                partition was led (TAKEOVER_SETTLE_S): the controller is
 *                stopped with SIGTERM (its broker closes its ZooKeeper
 *                session at shutdown, so /controller should vanish at once;
 *                a SIGKILL would leave it for the session timeout) and the
 *                clock runs from this bench's ZooKeeper watch seeing
 *                /controller deleted to a CreateTopics of a new topic, sent
 *                to another broker, answered with success and its partition
 *                led in that broker's Metadata (polled meanwhile).  Tries
 *                with TimeoutMs 5 s, each under a new name, until one does;
 *                what the first got is printed when it did not.  The
 *                stopped broker is started again after each.  Three
 *                takeovers per size; each, their medians, the ratio
 *                large/small, and SIGTERM → znode gone.
 *   restart      at `large` RF-1 partitions, a broker that is not the
 *                controller stopped (SIGTERM) and started again: seconds
 *                until it listens and until every partition is led again.
 *   re-election  replication has landed: on a fresh cluster (its own chroot),
 *                3,000 RF-2 partitions all led by one broker that is not the
 *                controller; once every ISR is full that broker is SIGKILLed
 *                and the clock runs from its /brokers/ids znode vanishing
 *                (session expiry) to the last of the 3,000 state znodes
 *                changing (watched from here), and on to the controller's
 *                Metadata naming a leader for each again.
 *
 * Exit status: 0 when every step ran (whatever the figures), 1 when
 * something failed (a broker or ZooKeeper that would not start, a topic
 * that never appeared, a takeover that never happened); the broker logs'
 * tails are printed then.  Every process started here is killed by PID
 * at exit, on a signal, and on the watchdog's alarm.
 */
#include "bench/bench_cluster.h"
#include "bench/bench_fetch.h"
#include "bench/bench_rdkafka.h"

#include <poll.h>
#include <pthread.h>

#define PROP_TOPICS 100
#define PRODUCE_RUNS 7                /* per side */
#define PRODUCE_TOPIC "bench-produce"
#define TAKEOVER_SETTLE_S 3          /* after filling, before stopping the controller */
#define TAKEOVER_RUNS 3               /* per size; the median is printed */
#define TAKEOVER_TRY_MS 5000          /* TimeoutMs of each takeover CreateTopics */
#define REELECT_TOPICS 3              /* of 1000 partitions: 3,000 led by one broker */

static bool failed;                   /* a step failed: exit 1 at the end */
static int prop_unled;                /* topics the propagation step saw no leader for */

/* ---- propagation ------------------------------------------------------- */

/* Nearest rank: the smallest sample with at least p of them at or below. */
static double percentile(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    int k = (int)(p * n + 0.999999) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static void bench_propagation(void)
{
    double seen[PROP_TOPICS], acked[PROP_TOPICS];
    int n = 0, missing = 0;
    int fd1 = connect_or_die(&brokers[0]), fd3 = connect_or_die(&brokers[2]);
    for (int t = 0; t < PROP_TOPICS; t++) {
        char name[32];
        snprintf(name, sizeof name, "prop-%d", t);
        double t0 = bench_now();
        int rc = bench_create_topic(fd1, name, 1, NULL);
        double ack = bench_now() - t0;
        if (rc != 0) {
            fprintf(stderr, "cluster_bench: CreateTopics %s on broker 1: error %d\n", name, rc);
            missing++;
            continue;
        }
        bench_md md;
        for (;;) {
            if (bench_metadata(fd3, name, &md))
                die("Metadata from broker 3 failed");
            if (md.topic_error == 0 && md.leader0 >= 0)
                break;
            if (bench_now() - t0 > 10)
                break;
            usleep(1000);
        }
        if (md.topic_error || md.leader0 < 0) {
            fprintf(stderr, "cluster_bench: %s not led in broker 3's Metadata after 10 s "
                    "(ErrorCode %d, leader %d)\n", name, md.topic_error, md.leader0);
            missing++;
            prop_unled += md.topic_error == 0;
            continue;
        }
        seen[n] = bench_now() - t0;
        acked[n++] = ack;
    }
    close(fd1);
    close(fd3);
    if (n)
        printf("propagation: %d topics created through broker 1, led in broker 3's Metadata: "
               "p50 %.1f ms, p99 %.1f ms (target p99 <= 500 ms); CreateTopics answered "
               "p50 %.1f ms, p99 %.1f ms\n", n, percentile(seen, n, 0.5) * 1000,
               percentile(seen, n, 0.99) * 1000, percentile(acked, n, 0.5) * 1000,
               percentile(acked, n, 0.99) * 1000);
    if (missing) {
        printf("propagation: FAILED for %d of %d topics (see above)\n", missing, PROP_TOPICS);
        failed = true;
    }
}

/* ---- produce: standalone vs cluster-mode leader ------------------------ */

static const char *const produce_topic_cfg[] = { "segment.bytes", "1073741824", NULL };

static void bench_produce(long msgs)
{
    snprintf(standalone.dir, sizeof standalone.dir, "%s/standalone", bench_scratch);
    snprintf(standalone.log, sizeof standalone.log, "%s/standalone.log", bench_scratch);
    if (mkdir(standalone.dir, 0700))
        die("mkdir %s: %s", standalone.dir, strerror(errno));
    const char *const extra[] = { "auto.create.topics.enable=false", "admin.listeners=", NULL };
    bench_broker_start(&standalone, extra);
    int fd = connect_or_die(&standalone);
    if (bench_create_topic(fd, PRODUCE_TOPIC, 1, produce_topic_cfg) != 0)
        die("cannot create %s on the standalone broker", PRODUCE_TOPIC);
    close(fd);
    fd = connect_or_die(&brokers[0]);
    if (bench_create_topic(fd, PRODUCE_TOPIC, 1, produce_topic_cfg) != 0)
        die("cannot create %s through broker 1", PRODUCE_TOPIC);
    close(fd);
    bench_md md;
    if (wait_led(0, PRODUCE_TOPIC, 1, 0, 10, &md) < 0)
        die("%s has no leader in broker 1's Metadata after 10 s", PRODUCE_TOPIC);
    int li = index_of_id(md.leader0);
    if (li < 0)
        die("%s is led by unknown broker %d", PRODUCE_TOPIC, md.leader0);

    char sbs[64], cbs[64];
    snprintf(sbs, sizeof sbs, "127.0.0.1:%d", standalone.port);
    snprintf(cbs, sizeof cbs, "127.0.0.1:%d", brokers[li].port);
    /* side 0 standalone, 1 cluster; per run: msgs/s and broker CPU-s/GB */
    double rate[2][PRODUCE_RUNS], cpu[2][PRODUCE_RUNS], pair[PRODUCE_RUNS];
    for (int r = 0; r < PRODUCE_RUNS; r++) {
        for (int k = 0; k < 2; k++) {
            /* S C, C S, S C, …: neither side always runs first. */
            int side = (k == 0) == (r % 2 == 1);
            bench_rk_phase p = bench_rk_produce(side ? cbs : sbs, PRODUCE_TOPIC, msgs,
                                                side ? brokers[li].pid : standalone.pid);
            if (p.msgs != msgs)
                die("produce run %d to the %s broker: %ld of %ld delivered", r + 1,
                    side ? "cluster-mode" : "standalone", p.msgs, msgs);
            rate[side][r] = p.msgs / p.secs;
            cpu[side][r] = p.cpu / ((double)p.msgs * BENCH_RK_MSG_SIZE / 1e9);
        }
        pair[r] = rate[1][r] / rate[0][r];
    }
    bench_broker_stop(&standalone);
    printf("produce: librdkafka %s, %ld msgs of %d bytes per run, linger.ms=5 acks=1, "
           "1 partition, %d runs per side alternating; medians:\n", rd_kafka_version_str(), msgs,
           BENCH_RK_MSG_SIZE, PRODUCE_RUNS);
    double med[2];
    for (int side = 0; side < 2; side++) {
        double lo = rate[side][0], hi = rate[side][0];
        for (int r = 1; r < PRODUCE_RUNS; r++) {
            lo = rate[side][r] < lo ? rate[side][r] : lo;
            hi = rate[side][r] > hi ? rate[side][r] : hi;
        }
        med[side] = bench_median(rate[side], PRODUCE_RUNS);
        char who[32];
        snprintf(who, sizeof who, side ? "cluster mode (broker %d)" : "standalone", li + 1);
        printf("produce: %-24s %9.0f msgs/s (runs %.0f..%.0f), broker CPU %.2f CPU-s/GB\n",
               who, med[side], lo, hi, bench_median(cpu[side], PRODUCE_RUNS));
    }
    printf("produce: ratio cluster/standalone %.3f (target >= 0.95); median of the %d "
           "back-to-back pairs' ratios %.3f\n", med[1] / med[0], PRODUCE_RUNS,
           bench_median(pair, PRODUCE_RUNS));
}

/* ---- acks=all with replication factor 3 --------------------------------- */

/* Issue 16's first figure: the same librdkafka load to the leader of a
 * one-partition RF-1 topic with acks=1 and of an RF-3 topic
 * (min.insync.replicas=2) with acks=all, alternating, medians. */
static void bench_acks_all(long msgs)
{
    static const char *const rf3_cfg[] = { "segment.bytes", "1073741824",
                                           "min.insync.replicas", "2", NULL };
    const char *names[2] = { "bench-rf1", "bench-rf3" };
    int fd = connect_or_die(&brokers[0]);
    if (bench_create_topic_rf(fd, names[0], 1, 1, produce_topic_cfg, 30000) != 0 ||
        bench_create_topic_rf(fd, names[1], 1, 3, rf3_cfg, 30000) != 0)
        die("cannot create %s and %s through broker 1", names[0], names[1]);
    close(fd);
    char bs[2][64];
    int li[2];
    for (int k = 0; k < 2; k++) {
        bench_md md;
        if (wait_led(0, names[k], 1, 0, 10, &md) < 0 || (li[k] = index_of_id(md.leader0)) < 0)
            die("%s has no leader in broker 1's Metadata after 10 s", names[k]);
        snprintf(bs[k], sizeof bs[k], "127.0.0.1:%d", brokers[li[k]].port);
    }
    /* Per run: msgs/s; CPU-s per GB of the leader and of the two other
     * brokers together (an RF-3 run also pays two followers).  Not the
     * machine's: on a shared machine processes that exit between two
     * readings make that sum meaningless, negative even. */
    double rate[2][PRODUCE_RUNS], pair[PRODUCE_RUNS];
    double cpu_lead[2][PRODUCE_RUNS], cpu_rest[2][PRODUCE_RUNS];
    for (int r = 0; r < PRODUCE_RUNS; r++) {
        for (int k = 0; k < 2; k++) {
            int side = (k == 0) == (r % 2 == 1);
            double c0[NBROKERS];
            for (int i = 0; i < NBROKERS; i++)
                c0[i] = bench_cpu_seconds(brokers[i].pid);
            bench_rk_phase p = bench_rk_produce_acks(bs[side], names[side], msgs,
                                                     brokers[li[side]].pid, side ? "all" : "1");
            if (p.msgs != msgs)
                die("produce run %d to %s: %ld of %ld delivered", r + 1, names[side], p.msgs,
                    msgs);
            double gb = (double)p.msgs * BENCH_RK_MSG_SIZE / 1e9;
            cpu_rest[side][r] = 0;
            for (int i = 0; i < NBROKERS; i++) {
                double c = (bench_cpu_seconds(brokers[i].pid) - c0[i]) / gb;
                if (i == li[side])
                    cpu_lead[side][r] = c;
                else
                    cpu_rest[side][r] += c;
            }
            rate[side][r] = p.msgs / p.secs;
            printf("acks=all: run %d %s: %.0f msgs/s, CPU-s/GB leader %.2f, other brokers "
                   "%.2f\n", r + 1, side ? "RF 3 acks=all" : "RF 1 acks=1  ", rate[side][r],
                   cpu_lead[side][r], cpu_rest[side][r]);
        }
        pair[r] = rate[1][r] / rate[0][r];
    }
    for (int side = 0; side < 2; side++)
        printf("acks=all: %s medians: CPU-s/GB leader %.2f, other brokers %.2f\n",
               side ? "RF 3 acks=all" : "RF 1 acks=1", bench_median(cpu_lead[side], PRODUCE_RUNS),
               bench_median(cpu_rest[side], PRODUCE_RUNS));
    double rf1 = bench_median(rate[0], PRODUCE_RUNS), rf3 = bench_median(rate[1], PRODUCE_RUNS);
    printf("acks=all: librdkafka, %ld msgs of %d bytes per run, linger.ms=%s, %d runs per side "
           "alternating; RF 1 acks=1 (leader broker %d) %.0f msgs/s, RF 3 acks=all "
           "min.insync.replicas=2 (leader broker %d) %.0f msgs/s; ratio %.3f (target >= 0.5); "
           "median of the pairs' ratios %.3f\n", msgs, BENCH_RK_MSG_SIZE,
           getenv("BENCH_RK_CONF") ? "5 then $BENCH_RK_CONF" : "5", PRODUCE_RUNS,
           li[0] + 1, rf1, li[1] + 1, rf3, rf3 / rf1, bench_median(pair, PRODUCE_RUNS));
}

/* ---- end-to-end latency, RF 3 acks=all ----------------------------------- */

#define E2E_RATE 10000                /* msgs/s */
#define E2E_SECS 5

typedef struct e2e_producer {
    const char *bootstrap, *topic;
    long acked;
    atomic_int done;
} e2e_producer;

static void e2e_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    if (!m->err)
        ((e2e_producer *)opaque)->acked++;
}

/* E2E_RATE msgs/s for E2E_SECS, each carrying the time it was sent. */
static void *e2e_produce(void *arg)
{
    e2e_producer *ep = arg;
    rd_kafka_conf_t *c = bench_rk_conf_new(ep->bootstrap);
    bench_rk_conf(c, "acks", "all");
    bench_rk_conf(c, "linger.ms", "1");
    rd_kafka_conf_set_dr_msg_cb(c, e2e_dr);
    rd_kafka_conf_set_opaque(c, ep);
    char err[512], payload[BENCH_RK_MSG_SIZE] = { 0 };
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
    if (!rk)
        die("e2e producer: %s", err);
    double t0 = bench_now();
    for (long i = 0; i < (long)E2E_RATE * E2E_SECS; i++) {
        double due = t0 + (double)i / E2E_RATE, now;
        while ((now = bench_now()) < due)
            if (due - now > 0.0002)
                usleep((useconds_t)((due - now) * 1e6));
        memcpy(payload, &now, sizeof now);
        rd_kafka_resp_err_t e = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(ep->topic), RD_KAFKA_V_PARTITION(0),
            RD_KAFKA_V_VALUE(payload, sizeof payload), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_END);
        if (e)
            die("e2e produce: %s", rd_kafka_err2str(e));
        rd_kafka_poll(rk, 0);
    }
    rd_kafka_flush(rk, 30000);
    rd_kafka_destroy(rk);
    atomic_store(&ep->done, 1);
    return NULL;
}

/* Issue 16: produce → consume with RF 3 and acks=all at E2E_RATE msgs/s; a
 * consumer (librdkafka, fetch.wait.max.ms=100) on the leader sees a message
 * only once the high watermark covers it, so this includes replication. */
static void bench_latency(void)
{
    static const char *const cfg[] = { "min.insync.replicas", "2", NULL };
    const char *topic = "bench-e2e";
    int fd = connect_or_die(&brokers[0]);
    if (bench_create_topic_rf(fd, topic, 1, 3, cfg, 30000) != 0)
        die("cannot create %s through broker 1", topic);
    close(fd);
    bench_md md;
    int li;
    if (wait_led(0, topic, 1, 0, 10, &md) < 0 || (li = index_of_id(md.leader0)) < 0)
        die("%s has no leader in broker 1's Metadata after 10 s", topic);
    char bs[64];
    snprintf(bs, sizeof bs, "127.0.0.1:%d", brokers[li].port);
    rd_kafka_conf_t *c = bench_rk_conf_new(bs);
    bench_rk_conf(c, "group.id", "bench-e2e");
    bench_rk_conf(c, "enable.auto.commit", "false");
    bench_rk_conf(c, "fetch.wait.max.ms", "100");
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    if (!rk)
        die("e2e consumer: %s", err);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    for (double t = bench_now(); bench_now() - t < 1;) {     /* connected, fetching */
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (m)
            rd_kafka_message_destroy(m);
    }
    long want = (long)E2E_RATE * E2E_SECS, got = 0;
    double *lat = malloc((size_t)want * sizeof *lat), done_at = 0;
    if (!lat)
        die("out of memory");
    e2e_producer ep = { .bootstrap = bs, .topic = topic };
    pthread_t th;
    if (pthread_create(&th, NULL, e2e_produce, &ep))
        die("pthread_create");
    while (got < want) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        double now = bench_now();
        if (m && !m->err && m->len == BENCH_RK_MSG_SIZE) {
            double sent;
            memcpy(&sent, m->payload, sizeof sent);
            lat[got++] = (now - sent) * 1000;
        }
        if (m)
            rd_kafka_message_destroy(m);
        if (!done_at && atomic_load(&ep.done))
            done_at = now;
        if (done_at && now - done_at > 5)
            break;
    }
    pthread_join(th, NULL);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    if (!got) {
        printf("latency: FAILED: none of %ld messages consumed\n", want);
        failed = true;
        free(lat);
        return;
    }
    double p50 = percentile(lat, (int)got, 0.50), p99 = percentile(lat, (int)got, 0.99);
    printf("latency: RF 3 acks=all min.insync.replicas=2, %d msgs/s for %d s of %d bytes "
           "(librdkafka, linger.ms=1; consumer on leader broker %d, fetch.wait.max.ms=100): "
           "p50 %.1f ms, p99 %.1f ms (target p99 <= 20 ms), max %.1f ms; %ld acked, %ld of %ld "
           "consumed\n", E2E_RATE, E2E_SECS, BENCH_RK_MSG_SIZE, li + 1, p50, p99,
           lat[got - 1], ep.acked, got, want);
    free(lat);
}

/* ---- failover: SIGKILL and controlled shutdown of a leader (issue 16) ---- */

#define FAILOVER_RUNS 3               /* per kind; each and the median printed */
#define FAILOVER_RATE 1000            /* msgs/s, acks=all */
#define FAILOVER_TOPIC "bench-failover"
#define FAILOVER_BACKOFF_MAX_KEY "reconnect.backoff.max.ms"
#define FAILOVER_BACKOFF_MAX_MS "100"

/* A librdkafka producer on its own thread sending FAILOVER_RATE msgs/s
 * to an RF-3 topic with acks=all.  Its callbacks (on that thread, inside
 * rd_kafka_poll) count delivery failures and error events and note the
 * first acknowledgement, once armed, from a broker other than the old
 * leader. */
typedef struct fo_producer {
    const char *bootstrap;
    atomic_int stop;
    pthread_mutex_t mu;
    long acked, failed, events;       /* failed: delivery reports with an error */
    char first_failure[160];
    bool armed;
    int32_t old_leader;
    double t_first_new;               /* 0: not yet */
    int32_t new_leader;
} fo_producer;

static void fo_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    fo_producer *fp = opaque;
    double now = bench_now();
    int32_t by = rd_kafka_message_broker_id(m);
    pthread_mutex_lock(&fp->mu);
    if (m->err) {
        if (!fp->failed++)
            snprintf(fp->first_failure, sizeof fp->first_failure, "%s",
                     rd_kafka_err2str(m->err));
    } else {
        fp->acked++;
        if (fp->armed && !fp->t_first_new && by >= 0 && by != fp->old_leader) {
            fp->t_first_new = now;
            fp->new_leader = by;
        }
    }
    pthread_mutex_unlock(&fp->mu);
}

/* Errors librdkafka reports besides delivery (a connection to the dead
 * broker refused, "all brokers down"): it retries them itself. */
static void fo_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk; (void)err; (void)reason;
    fo_producer *fp = opaque;
    pthread_mutex_lock(&fp->mu);
    fp->events++;
    pthread_mutex_unlock(&fp->mu);
}

static void *fo_produce(void *arg)
{
    fo_producer *fp = arg;
    rd_kafka_conf_t *c = bench_rk_conf_new(fp->bootstrap);
    bench_rk_conf(c, "acks", "all");
    bench_rk_conf(c, "enable.idempotence", "true");
    bench_rk_conf(c, "linger.ms", "1");
    bench_rk_conf(c, "message.timeout.ms", "60000");
    /* Each new leader here is a broker restarted seconds before, to which
     * librdkafka's reconnect backoff (exponential, up to 10 s by default)
     * would otherwise add its own seconds: the broker's failover is what
     * is measured. */
    bench_rk_conf(c, "reconnect.backoff.ms", "10");
    bench_rk_conf(c, FAILOVER_BACKOFF_MAX_KEY, FAILOVER_BACKOFF_MAX_MS);
    rd_kafka_conf_set_dr_msg_cb(c, fo_dr);
    rd_kafka_conf_set_error_cb(c, fo_error);
    rd_kafka_conf_set_opaque(c, fp);
    char err[512], payload[BENCH_RK_MSG_SIZE];
    memset(payload, 'f', sizeof payload);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
    if (!rk)
        die("failover producer: %s", err);
    double t0 = bench_now();
    for (long i = 0; !atomic_load(&fp->stop); i++) {
        double due = t0 + (double)i / FAILOVER_RATE, now;
        while ((now = bench_now()) < due) {
            rd_kafka_poll(rk, 0);
            if (due - now > 0.0002)
                usleep((useconds_t)((due - now) * 1e6));
        }
        rd_kafka_resp_err_t e = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(FAILOVER_TOPIC), RD_KAFKA_V_PARTITION(0),
            RD_KAFKA_V_VALUE(payload, sizeof payload), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 10);
        else if (e)
            die("failover produce: %s", rd_kafka_err2str(e));
        rd_kafka_poll(rk, 0);
    }
    rd_kafka_flush(rk, 60000);
    rd_kafka_destroy(rk);
    return NULL;
}

/* Waits (`secs` at most) until a live broker's Metadata has topic with
 * every partition led and every ISR full.  Seconds taken, or -1. */
static double wait_isr_full(const char *topic, double secs, bench_md *md)
{
    double t0 = bench_now();
    while (bench_now() - t0 < secs) {
        for (int i = 0; i < NBROKERS; i++) {
            if (brokers[i].pid <= 0)
                continue;
            int fd = bench_connect(brokers[i].port);
            if (fd < 0)
                continue;
            bench_set_timeout(fd, 5);
            int rc = bench_metadata(fd, topic, md);
            close(fd);
            if (rc == 0 && md->topic_error == 0 && md->partitions > 0 &&
                md->led == md->partitions && md->under_replicated == 0)
                return bench_now() - t0;
            break;
        }
        usleep(10000);
    }
    return -1;
}

/* One failover: the topic's leader stopped by `sig` while fp produces; the
 * clock runs from the signal to the first acknowledgement by another
 * broker.  Then the stopped broker is started again and the ISR waited
 * full.  Seconds, or -1 (printed why); *failed_out, *events_out: the
 * delivery failures and error events seen from the signal until then. */
static double failover_once(fo_producer *fp, int sig, long *failed_out, long *events_out,
                            double *exit_out)
{
    bench_md md;
    if (wait_isr_full(FAILOVER_TOPIC, 60, &md) < 0)
        die("failover: %s not led with a full ISR after 60 s", FAILOVER_TOPIC);
    int li = index_of_id(md.leader0);
    if (li < 0 || brokers[li].pid <= 0)
        die("failover: %s led by broker %d, not a live one", FAILOVER_TOPIC, md.leader0);
    sleep(1);                         /* acknowledgements flowing from this leader */
    pthread_mutex_lock(&fp->mu);
    long failed0 = fp->failed, events0 = fp->events, acked0 = fp->acked;
    fp->armed = true;
    fp->old_leader = md.leader0;
    fp->t_first_new = 0;
    pthread_mutex_unlock(&fp->mu);
    if (!acked0)
        die("failover: nothing acknowledged before stopping the leader");
    double t_sig = bench_now();
    kill(brokers[li].pid, sig);
    *exit_out = -1;
    double t_new = 0, limit = atof(SESSION_TIMEOUT_MS) / 1000 + 30;
    while (bench_now() - t_sig < limit) {
        if (*exit_out < 0 && waitpid(brokers[li].pid, NULL, WNOHANG) == brokers[li].pid) {
            *exit_out = bench_now() - t_sig;
            bench_track(brokers[li].pid, false);
            brokers[li].pid = 0;
        }
        pthread_mutex_lock(&fp->mu);
        t_new = fp->t_first_new;
        pthread_mutex_unlock(&fp->mu);
        if (t_new && *exit_out >= 0)
            break;
        usleep(500);
    }
    if (brokers[li].pid > 0)
        bench_broker_stop(&brokers[li]);
    sleep(1);                         /* errors of the switch reported meanwhile */
    pthread_mutex_lock(&fp->mu);
    fp->armed = false;
    *failed_out = fp->failed - failed0;
    *events_out = fp->events - events0;
    pthread_mutex_unlock(&fp->mu);
    cluster_broker_start(li);
    if (!t_new) {
        printf("failover: FAILED: no acknowledgement from a broker other than %d within %.0f s "
               "of %s\n", li + 1, limit, sig == SIGKILL ? "SIGKILL" : "SIGTERM");
        return -1;
    }
    return t_new - t_sig;
}

static void bench_failover(void)
{
    static const char *const cfg[] = { "min.insync.replicas", "2", NULL };
    int fd = connect_or_die(&brokers[0]);
    if (bench_create_topic_rf(fd, FAILOVER_TOPIC, 1, 3, cfg, 30000) != 0)
        die("cannot create %s through broker 1", FAILOVER_TOPIC);
    close(fd);
    char bs[200];
    snprintf(bs, sizeof bs, "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", brokers[0].port,
             brokers[1].port, brokers[2].port);
    fo_producer fp = { .bootstrap = bs, .mu = PTHREAD_MUTEX_INITIALIZER };
    pthread_t th;
    if (pthread_create(&th, NULL, fo_produce, &fp))
        die("pthread_create");
    double session = atof(SESSION_TIMEOUT_MS) / 1000;
    static const int sigs[2] = { SIGKILL, SIGTERM };
    double med[2] = { -1, -1 };
    long all_failed[2] = { 0, 0 };
    for (int k = 0; k < 2; k++) {
        const char *what = k ? "controlled shutdown (SIGTERM)" : "SIGKILL";
        double t[FAILOVER_RUNS];
        int n = 0;
        for (int r = 0; r < FAILOVER_RUNS; r++) {
            long nfailed = 0, nevents = 0;
            double exit_s = -1;
            double s = failover_once(&fp, sigs[k], &nfailed, &nevents, &exit_s);
            all_failed[k] += nfailed;
            if (s < 0) {
                failed = true;
                continue;
            }
            t[n++] = s;
            printf("failover: %s of leader broker %d: first acks=all produce acknowledged by "
                   "broker %d after %.1f ms; %ld produce error(s) delivered to the client%s%s, "
                   "%ld client error event(s) (retried by librdkafka); the broker exited after "
                   "%.1f ms\n", what, fp.old_leader, fp.new_leader, s * 1000, nfailed,
                   nfailed ? ", the first: " : "", nfailed ? fp.first_failure : "", nevents,
                   exit_s * 1000);
        }
        if (n)
            med[k] = bench_median(t, n);
    }
    atomic_store(&fp.stop, 1);
    pthread_join(th, NULL);
    bench_md md;
    if (wait_isr_full(FAILOVER_TOPIC, 60, &md) < 0)
        die("failover: %s not led with a full ISR 60 s after the last restart", FAILOVER_TOPIC);
    printf("failover: RF 3 acks=all min.insync.replicas=2, librdkafka idempotent at %d msgs/s "
           "(" FAILOVER_BACKOFF_MAX_KEY "=" FAILOVER_BACKOFF_MAX_MS "), "
           "zookeeper.session.timeout.ms=%s; SIGKILL: median of %d %.0f ms (target <= %.0f ms "
           "= session timeout + 1 s; margin %.0f ms), %ld produce error(s); controlled shutdown: "
           "median %.0f ms (target <= 1000 ms; margin %.0f ms), %ld produce error(s) (target 0); "
           "%ld acknowledged, %ld failed in all\n", FAILOVER_RATE, SESSION_TIMEOUT_MS,
           FAILOVER_RUNS, med[0] * 1000, session * 1000 + 1000,
           session * 1000 + 1000 - med[0] * 1000, all_failed[0], med[1] * 1000,
           1000 - med[1] * 1000, all_failed[1], fp.acked, fp.failed);
}

/* ---- catch-up: a follower far behind, against a consumer's read --------- */

#define CATCHUP_TOPIC "bench-catchup"

/* This machine's bound for a follower's appends in this run: seconds to
 * write `bytes` with 1 MiB pwrites into a new file in dir (new page-cache
 * pages, as the follower's appends; no fsync, as theirs), the file removed
 * after.  -1 when it cannot be written. */
static double fresh_write_secs(const char *dir, long bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/fresh-write-bound", dir);
    size_t chunk = 1 << 20;
    char *buf = malloc(chunk);
    int fd = buf ? open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600) : -1;
    double t0 = bench_now(), t = -1;
    if (fd >= 0) {
        memset(buf, 'x', chunk);
        long off = 0;
        while (off < bytes) {
            size_t n = (size_t)(bytes - off) < chunk ? (size_t)(bytes - off) : chunk;
            ssize_t w = pwrite(fd, buf, n, off);
            if (w <= 0)
                break;
            off += w;
        }
        if (off == bytes)
            t = bench_now() - t0;
        int err = errno;
        close(fd);
        unlink(path);
        errno = err;
    }
    free(buf);
    return t;
}

/* A one-partition RF-2 topic led by broker L with follower F: F is stopped
 * (SIGTERM), `bytes` written to L with acks=1 (bench_fetch_fill), the
 * same bytes read back from L by fetch_bench's consumer read
 * (bench_fetch_pass) and then F started again; the clock runs from its
 * start to L's Metadata showing it back in the ISR (its log end offset
 * reached L's: nothing is produced meanwhile). */
static void bench_catchup(long bytes)
{
    static const char *const cfg[] = { "segment.bytes", "1073741824", NULL };
    int L = 0, F = 1;
    int32_t assign[2] = { L + 1, F + 1 };
    bench_md md;
    if (!wait_brokers(L, NBROKERS, 30, &md))
        die("catch-up: broker %d sees %d brokers, not %d", L + 1, md.nbrokers, NBROKERS);
    int fd = connect_or_die(&brokers[L]);
    kp_buf q, r;
    bench_create_topic_req(&q, CATCHUP_TOPIC, 1, 2, assign, cfg, 30000);
    kp_buf_init(&r);
    int rc = bench_roundtrip(fd, &q, &r) ? -1 : bench_create_topic_error(&r);
    if (rc != 0)
        die("catch-up: CreateTopics %s on [%d, %d]: error %d", CATCHUP_TOPIC, L + 1, F + 1, rc);
    if (wait_isr_full(CATCHUP_TOPIC, 30, &md) < 0 || md.leader0 != L + 1)
        die("catch-up: %s not led by broker %d with a full ISR after 30 s (leader %d)",
            CATCHUP_TOPIC, L + 1, md.leader0);
    bench_broker_stop(&brokers[F]);
    /* Out of the ISR first (controlled shutdown, or replica.lag.time.max.ms):
     * until then the high watermark, and so the consumer's read, stays. */
    double t0 = bench_now();
    while (bench_metadata(fd, CATCHUP_TOPIC, &md) == 0 && md.under_replicated == 0 &&
           bench_now() - t0 < 60)
        usleep(10000);
    if (md.under_replicated == 0)
        die("catch-up: stopped follower %d still in the ISR after 60 s", F + 1);
    double t_out = bench_now() - t0;

    bench_fetcher fe;
    bench_fetcher_init(&fe, CATCHUP_TOPIC, "cluster_bench", 4, 7);
    t0 = bench_now();
    long wrote = bench_fetch_fill(&fe, fd, bytes);
    double t_fill = bench_now() - t0;
    if (wrote < 0)
        die("catch-up: writing %ld bytes to broker %d failed", bytes, L + 1);
    t0 = bench_now();
    long read = bench_fetch_pass(&fe, fd, &q, &r);
    double t_read = bench_now() - t0;
    if (read < 0)
        die("catch-up: reading %s back from broker %d failed", CATCHUP_TOPIC, L + 1);

    double t_start = bench_now();
    double listen = cluster_broker_start(F);
    double t_isr = 0;
    while (bench_now() - t_start < 600) {
        if (bench_metadata(fd, CATCHUP_TOPIC, &md))
            die("catch-up: Metadata from broker %d failed", L + 1);
        if (md.under_replicated == 0) {
            t_isr = bench_now();
            break;
        }
        usleep(5000);
    }
    close(fd);
    kp_buf_free(&q);
    kp_buf_free(&r);
    kp_arena_free(&fe.arena);
    if (!t_isr) {
        printf("catch-up: FAILED: follower %d not back in the ISR 600 s after its start\n", F + 1);
        failed = true;
        return;
    }
    double t_fresh = fresh_write_secs(brokers[F].dir, wrote);
    double c_rate = (double)wrote / 1e6 / (t_isr - t_start);
    double f_rate = (double)read / 1e6 / t_read, w_rate = (double)wrote / 1e6 / t_fill;
    double fresh_rate = t_fresh > 0 ? (double)wrote / 1e6 / t_fresh : -1;
    /* The follower writes what it fetches (new page-cache pages), the
     * consumer read does not: the leader's own write of the same bytes is
     * printed beside it as the write path's rate in this run. */
    /* The process start is not catch-up: the rate from its listening on
     * (its fetchers start after that) is printed beside the target's. */
    double l_rate = t_isr - t_start > listen ? (double)wrote / 1e6 / (t_isr - t_start - listen)
                                             : -1;
    printf("catch-up: follower broker %d %.0f MiB behind (it left the ISR %.1f s after its "
           "SIGTERM): back in the ISR %.2f s after its start (listening after %.2f s) = %.0f "
           "MB/s (%.0f MB/s from its listening on); fetch_bench's consumer read of the same "
           "%.0f MiB from leader %d (1 MiB Fetch v4, one pass): %.2f s = %.0f MB/s; ratio %.2f "
           "(target >= 0.7; %.2f from listening); the leader wrote them (Produce acks=1, %.1f "
           "MB batches) at %.0f MB/s: catch-up/write %.2f\n", F + 1, wrote / 1048576.0, t_out,
           t_isr - t_start, listen, c_rate, l_rate, read / 1048576.0, L + 1, t_read, f_rate,
           c_rate / f_rate, l_rate / f_rate,
           (double)BENCH_FETCH_BATCH_RECS * BENCH_FETCH_VALUE_SIZE / 1e6, w_rate,
           c_rate / w_rate);
    /* The target's ratio above stays against the consumer read; this is
     * how near the catch-up came to what this machine can write. */
    if (fresh_rate > 0)
        printf("catch-up: the same %.0f MiB written into a new file in follower %d's log "
               "directory just after (1 MiB pwrites, no fsync: new page-cache pages, this "
               "machine's bound for the follower's appends): %.2f s = %.0f MB/s; "
               "catch-up/fresh-write %.2f\n", wrote / 1048576.0, F + 1, t_fresh, fresh_rate,
               c_rate / fresh_rate);
    else
        printf("catch-up: cannot write the fresh-write bound into %s: %s\n", brokers[F].dir,
               strerror(errno));
}

/* ---- controller takeover ----------------------------------------------- */

static int bulk_topics, takeover_topics;

/* Tops the cluster up to `target` partitions (every topic counted) with
 * topics of at most 1000 partitions, through broker 1; waits until broker
 * 3 has a leader for each.  The partition count reached. */
static long fill_to(long target)
{
    double t0 = bench_now();
    bench_md md;
    int fd = connect_or_die(&brokers[0]);
    if (bench_metadata(fd, NULL, &md))
        die("Metadata from broker 1 failed");
    long have = md.partitions;
    while (have < target) {
        int n = target - have > 1000 ? 1000 : (int)(target - have);
        char name[32];
        snprintf(name, sizeof name, "bulk-%d", bulk_topics++);
        int rc = bench_create_topic_rf(fd, name, n, 1, NULL, 60000);
        if (rc != 0)
            die("CreateTopics %s (%d partitions) through broker 1: error %d", name, n, rc);
        have += n;
    }
    close(fd);
    /* Those the propagation step saw without a leader stay so: say so
     * once, there, rather than fail every step after it. */
    if (wait_led(2, NULL, have, prop_unled, 120, &md) < 0)
        die("after 120 s broker 3's Metadata has %ld partitions, %ld of them led, not %ld",
            md.partitions, md.led, have);
    printf("takeover: cluster filled to %ld partitions in %.1f s\n", md.partitions,
           bench_now() - t0);
    return md.partitions;
}

/* One CreateTopics of a one-partition topic sent on fdc, the same
 * broker's Metadata for it polled on fdm while the answer is awaited (a
 * partition may be led before, or without, a successful answer). */
typedef struct probe {
    int rc;                           /* ErrorCode; -1: no answer (reconnect fdc) */
    double t_answer, t_led;           /* t_led 0: not led by the answer */
    int32_t replica;                  /* where its partition was placed; -1: unseen */
} probe;

static probe probe_create(int fdc, int fdm, const char *name, double deadline)
{
    probe pr = { -1, 0, 0, -1 };
    kp_buf q, r;
    bench_create_topic_req(&q, name, 1, 1, NULL, NULL, TAKEOVER_TRY_MS);
    kp_buf_init(&r);
    bool sent = bench_send_frame(fdc, &q) == 0;
    while (sent && bench_now() < deadline) {
        struct pollfd pfd = { .fd = fdc, .events = POLLIN };
        if (poll(&pfd, 1, 1) > 0) {
            pr.rc = bench_recv_frame(fdc, &r) == 0 ? bench_create_topic_error(&r) : -1;
            break;
        }
        bench_md md;
        if (!pr.t_led && bench_metadata(fdm, name, &md) == 0 && md.topic_error == 0) {
            pr.replica = md.replica0;
            if (md.leader0 >= 0)
                pr.t_led = bench_now();
        }
    }
    pr.t_answer = bench_now();
    kp_buf_free(&q);
    kp_buf_free(&r);
    return pr;
}

/* One takeover; its seconds, or -1 (printed why). */
static double takeover_once(long partitions)
{
    bench_md md;
    if (!wait_brokers(0, NBROKERS, 30, &md))
        die("broker 1 sees %d brokers, not %d", md.nbrokers, NBROKERS);
    /* Settled first: filling the cluster leaves each broker opening logs and
     * storing thousands of partition states for a while after the last is
     * led, and a loop still busy with that answers late whatever the
     * controller does; the takeover is measured on a cluster at rest. */
    sleep(TAKEOVER_SETTLE_S);
    int c = index_of_id(md.controller);
    if (c < 0)
        die("controller id %d is none of the brokers", md.controller);
    int x = c == 0 ? 1 : 0;           /* where the CreateTopics go */
    struct Stat st;
    atomic_store(&controller_gone_ns, 0);
    int zrc = zoo_exists(zh, CHROOT "/controller", 1, &st);
    if (zrc != ZOK)
        die("zoo_exists " CHROOT "/controller: %s", zerror(zrc));

    double t_term = bench_now();
    kill(brokers[c].pid, SIGTERM);
    while (!atomic_load(&controller_gone_ns) && bench_now() - t_term < 15)
        usleep(200);
    long long gone_ns = atomic_load(&controller_gone_ns);
    if (!gone_ns) {
        printf("takeover: FAILED, %ld partitions: " CHROOT "/controller still there 15 s after "
               "SIGTERM to controller broker %d\n", partitions, c + 1);
        bench_broker_stop(&brokers[c]);
        return -1;
    }
    double t_gone = (double)gone_ns / 1e9, deadline = t_gone + 30;

    /* Tries until a CreateTopics is accepted and its partition led.  Each
     * try names a new topic: one answered with an error may have been
     * written all the same, so the next try measures a new request, not
     * that topic's fate.  TOPIC_ALREADY_EXISTS counts as accepted. */
    int fdc = connect_or_die(&brokers[x]), fdm = connect_or_die(&brokers[x]), tries = 0;
    probe first = { 0 }, pr = { 0 };
    double t_done = 0;
    while (!t_done && bench_now() < deadline) {
        char name[32];
        snprintf(name, sizeof name, "takeover-%d", takeover_topics++);
        pr = probe_create(fdc, fdm, name, deadline);
        if (!tries++)
            first = pr;
        if (pr.rc == 0 || pr.rc == 36) {
            while (!pr.t_led && bench_now() < deadline) {
                if (bench_metadata(fdm, name, &md))
                    die("Metadata from broker %d failed", x + 1);
                if (md.topic_error == 0 && md.leader0 >= 0)
                    pr.t_led = bench_now();
                else
                    usleep(1000);
            }
            if (pr.t_led)
                t_done = pr.t_led > pr.t_answer ? pr.t_led : pr.t_answer;
            break;
        }
        if (pr.rc < 0) {              /* no answer: the connection's state is unknown */
            close(fdc);
            fdc = connect_or_die(&brokers[x]);
        }
        usleep(5000);
    }
    bench_metadata(fdm, "", &md);
    close(fdc);
    close(fdm);
    bench_broker_stop(&brokers[c]);

    char about_first[200] = "";
    if (tries > 1 || !t_done) {
        int n = snprintf(about_first, sizeof about_first, "; the first answered %d after %.1f ms",
                         first.rc, (first.t_answer - t_gone) * 1000);
        if (first.t_led && n > 0 && (size_t)n < sizeof about_first)
            n += snprintf(about_first + n, sizeof about_first - (size_t)n,
                          ", its partition led after %.1f ms", (first.t_led - t_gone) * 1000);
        if (first.replica >= 0 && n > 0 && (size_t)n < sizeof about_first)
            snprintf(about_first + n, sizeof about_first - (size_t)n,
                     ", placed on broker %d", first.replica);
    }
    if (!t_done) {
        printf("takeover: FAILED, %ld partitions: within 30 s of " CHROOT "/controller vanishing "
               "no CreateTopics to broker %d was accepted with its partition led (%d tries%s; "
               "the last answered %d, placed on broker %d; broker %d was stopped)\n", partitions,
               x + 1, tries, about_first, pr.rc, pr.replica, c + 1);
        return -1;
    }
    printf("takeover: %ld partitions: %.1f ms from " CHROOT "/controller vanishing to a CreateTopics "
           "accepted by broker %d and its partition led (answer %.1f ms, leader %.1f ms; %d tries"
           "%s); new controller %d; SIGTERM to znode gone %.1f ms\n", partitions,
           (t_done - t_gone) * 1000, x + 1, (pr.t_answer - t_gone) * 1000,
           (pr.t_led - t_gone) * 1000, tries, about_first, md.controller,
           (t_gone - t_term) * 1000);
    return t_done - t_gone;
}

/* The stopped controller back, so the next size starts from 3 brokers
 * with every partition led again (RF 1: its partitions were offline). */
static void rejoin(void)
{
    for (int i = 0; i < NBROKERS; i++)
        if (brokers[i].pid <= 0) {
            double listen = cluster_broker_start(i);
            if (listen > 1)
                printf("takeover: broker %d restarted, listening after %.1f s\n", i + 1, listen);
            bench_md md;
            if (!wait_brokers(i, NBROKERS, 30, &md))
                die("restarted broker %d sees %d brokers after 30 s", i + 1, md.nbrokers);
        }
    bench_md md;
    if (wait_led(2, NULL, 1, prop_unled, 60, &md) < 0) {
        printf("takeover: WARNING: 60 s after the old controller came back, %ld of %ld "
               "partitions have a leader\n", md.led, md.partitions);
        failed = true;
    }
}

/* The median of TAKEOVER_RUNS takeovers with the cluster filled to
 * target partitions (one takeover is tens of milliseconds: a single one
 * is mostly the machine's noise); -1 if one failed. */
static double takeover_median(long target)
{
    double t[TAKEOVER_RUNS];
    long have = fill_to(target);
    for (int i = 0; i < TAKEOVER_RUNS; i++) {
        if (i)
            rejoin();
        if ((t[i] = takeover_once(have)) < 0)
            return -1;
    }
    return bench_median(t, TAKEOVER_RUNS);
}

static void bench_takeover(long small, long large)
{
    double t_small = takeover_median(small), t_large = -1;
    if (t_small >= 0) {
        rejoin();
        t_large = takeover_median(large);
    }
    if (t_small < 0 || t_large < 0) {
        failed = true;
        return;
    }
    printf("takeover: median of %d: %.0f ms with %ld, %.0f ms with %ld partitions (target <= "
           "1000 ms each); ratio %.2f (target <= 1.5)\n", TAKEOVER_RUNS, t_small * 1000, small,
           t_large * 1000, large, t_large / t_small);
}

/* ---- restart of a broker that holds many partitions ---------------------- */

/* The cluster at `target` RF-1 partitions (a third led by each broker); a
 * broker that is not the controller is stopped with SIGTERM and started
 * again: seconds until it listens, and until broker 3's (or another's)
 * Metadata has every partition led again. */
static void bench_restart(long target)
{
    long have = fill_to(target);
    rejoin();
    bench_md md;
    if (!wait_brokers(0, NBROKERS, 30, &md) || index_of_id(md.controller) < 0)
        die("restart: broker 1 sees %d brokers and controller %d", md.nbrokers, md.controller);
    int c = index_of_id(md.controller), d = (c + 1) % NBROKERS;
    sleep(TAKEOVER_SETTLE_S);
    double stop = bench_broker_stop(&brokers[d]);
    double t0 = bench_now();
    double listen = cluster_broker_start(d);
    double led = wait_led(c, NULL, have, prop_unled, 120, &md);
    if (led < 0) {
        printf("restart: FAILED: 120 s after broker %d restarted, %ld of %ld partitions led\n",
               d + 1, md.led, md.partitions);
        failed = true;
        return;
    }
    printf("restart: broker %d with ~%ld of %ld RF-1 partitions (SIGTERM took %.2f s): "
           "listening %.2f s after exec (target: a few seconds), every partition led again in "
           "controller %d's Metadata after %.2f s\n", d + 1, have / NBROKERS, have, stop,
           listen, c + 1, bench_now() - t0);
}

/* ---- leader re-election (RF 2) ------------------------------------------ */

static atomic_int states_changed;
static atomic_llong last_change_ns, broker_gone_ns;

/* ZooKeeper client thread: a watched partition state changed. */
static void state_watcher(zhandle_t *h, int type, int state, const char *path, void *ctx)
{
    (void)h; (void)state; (void)path; (void)ctx;
    if (type == ZOO_CHANGED_EVENT || type == ZOO_DELETED_EVENT) {
        atomic_store(&last_change_ns, (long long)(bench_now() * 1e9));
        atomic_fetch_add(&states_changed, 1);
    }
}

/* ZooKeeper client thread: the watched /brokers/ids/<id> went (its
 * session expired). */
static void broker_watcher(zhandle_t *h, int type, int state, const char *path, void *ctx)
{
    (void)h; (void)state; (void)path; (void)ctx;
    if (type == ZOO_DELETED_EVENT)
        atomic_store(&broker_gone_ns, (long long)(bench_now() * 1e9));
}

/* A fresh cluster (its own chroot and directories, so nothing of the
 * takeover's 10,000 RF-1 partitions weighs on it): REELECT_TOPICS topics
 * of 1000 partitions with replicas [D, F], F alternating between the two
 * others, so D, not the controller, leads all of them.  Once every ISR is
 * full, each partition's state znode is watched and D SIGKILLed; the clock
 * runs from /brokers/ids/D vanishing (its session expiring) to the last
 * of the states changing (the controller's new leader and ISR). */
static void bench_reelection(void)
{
    for (int i = 0; i < NBROKERS; i++) {
        bench_broker_stop(&brokers[i]);
        memset(&brokers[i], 0, sizeof brokers[i]);
    }
    snprintf(cluster_chroot, sizeof cluster_chroot, "%s-reelect", CHROOT);
    cluster_tag = "reelect-";
    zk_create_chroot();
    cluster_start();
    bench_md md;
    if (!wait_brokers(0, NBROKERS, 30, &md))
        die("broker 1 sees %d brokers, not %d", md.nbrokers, NBROKERS);
    int c = index_of_id(md.controller), d = (c + 1) % NBROKERS;
    int32_t others[2] = { (d + 1) % NBROKERS + 1, (d + 2) % NBROKERS + 1 };
    int32_t *assign = calloc(2000, sizeof *assign);
    if (c < 0 || !assign)
        die("re-election: controller %d, or out of memory", md.controller);
    double t0 = bench_now();
    int fd = connect_or_die(&brokers[c]);
    for (int t = 0; t < REELECT_TOPICS; t++) {
        for (int p = 0; p < 1000; p++) {
            assign[2 * p] = d + 1;
            assign[2 * p + 1] = others[p % 2];
        }
        char name[32];
        snprintf(name, sizeof name, "reelect-%d", t);
        kp_buf q, r;
        bench_create_topic_req(&q, name, 1000, 2, assign, NULL, 60000);
        kp_buf_init(&r);
        int rc = bench_roundtrip(fd, &q, &r) ? -1 : bench_create_topic_error(&r);
        kp_buf_free(&q);
        kp_buf_free(&r);
        if (rc != 0)
            die("CreateTopics %s (1000 partitions on [%d, %d|%d]): error %d", name, d + 1,
                others[0], others[1], rc);
    }
    free(assign);
    long want = REELECT_TOPICS * 1000L;
    for (;;) {
        if (bench_metadata(fd, NULL, &md))
            die("Metadata from broker %d failed", c + 1);
        if (md.partitions >= want && md.led == md.partitions && md.under_replicated == 0)
            break;
        if (bench_now() - t0 > 90)
            die("re-election: 90 s after creating %ld RF-2 partitions led by broker %d, broker "
                "%d's Metadata has %ld of them, %ld led, %ld with an ISR short of its replicas",
                want, d + 1, c + 1, md.partitions, md.led, md.under_replicated);
        usleep(200000);
    }
    printf("re-election: %ld partitions, RF 2, led by broker %d, every ISR full after %.1f s\n",
           want, d + 1, bench_now() - t0);

    char path[128];
    struct Stat st;
    atomic_store(&broker_gone_ns, 0);
    atomic_store(&states_changed, 0);
    snprintf(path, sizeof path, "%s/brokers/ids/%d", cluster_chroot, d + 1);
    int zrc = zoo_wexists(zh, path, broker_watcher, NULL, &st);
    for (int t = 0; zrc == ZOK && t < REELECT_TOPICS; t++)
        for (int p = 0; zrc == ZOK && p < 1000; p++) {
            snprintf(path, sizeof path, "%s/brokers/topics/reelect-%d/partitions/%d/state",
                     cluster_chroot, t, p);
            zrc = zoo_wexists(zh, path, state_watcher, NULL, &st);
        }
    if (zrc != ZOK)
        die("re-election: watching %s: %s", path, zerror(zrc));
    int early = atomic_load(&states_changed);   /* changed before the kill: not ours */

    double t_kill = bench_now();
    kill(brokers[d].pid, SIGKILL);
    waitpid(brokers[d].pid, NULL, 0);
    bench_track(brokers[d].pid, false);
    brokers[d].pid = 0;
    while (!atomic_load(&broker_gone_ns) && bench_now() - t_kill < 30)
        usleep(1000);
    long long gone_ns = atomic_load(&broker_gone_ns);
    while (gone_ns && atomic_load(&states_changed) - early < want &&
           bench_now() - (double)gone_ns / 1e9 < 60)
        usleep(1000);
    int changed = atomic_load(&states_changed) - early;
    double t_gone = (double)gone_ns / 1e9, t_last = (double)atomic_load(&last_change_ns) / 1e9;
    /* What clients see: the controller's own Metadata naming a leader
     * for each again (a dead broker is not named). */
    double t_md = 0;
    while (gone_ns && bench_now() - t_gone < 60) {
        if (bench_metadata(fd, NULL, &md))
            die("Metadata from broker %d failed", c + 1);
        if (md.partitions >= want && md.led == md.partitions) {
            t_md = bench_now();
            break;
        }
        usleep(5000);
    }
    close(fd);
    char seen[96] = "not within 60 s";
    if (t_md)
        snprintf(seen, sizeof seen, "after %.1f ms", (t_md - t_gone) * 1000);
    if (!gone_ns || changed < want) {
        printf("re-election: FAILED: %s; %d of %ld partition states changed%s\n",
               gone_ns ? "broker's znode went" : "/brokers/ids of the SIGKILLed broker still "
               "there after 30 s", changed, want, gone_ns ? " within 60 s" : "");
        failed = true;
        return;
    }
    printf("re-election: %ld partitions led by SIGKILLed broker %d: %.1f ms from its session "
           "expiring (/brokers/ids/%d deleted, %.1f s after the kill) to the last of their "
           "states changing in ZooKeeper (no target in the issue); all led again in controller "
           "%d's Metadata %s\n", want, d + 1, (t_last - t_gone) * 1000, d + 1, t_gone - t_kill,
           c + 1, seen);
    if (early)
        printf("re-election: (%d of the watched states changed before the kill)\n", early);
}

/* $BENCH_STEPS: a comma-separated subset of the steps to run (propagation,
 * produce, acks, latency, failover, catchup, takeover, restart,
 * reelection); unset or empty: every step. */
static bool step_on(const char *name)
{
    const char *steps = getenv("BENCH_STEPS");
    if (!steps || !*steps)
        return true;
    size_t n = strlen(name);
    for (const char *p = steps; (p = strstr(p, name)); p += n)
        if ((p == steps || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        setenv("SLUICED", argv[1], 1);
    long msgs = argc > 2 ? atol(argv[2]) : 1000000;
    long small = argc > 3 ? atol(argv[3]) : 1000;
    long large = argc > 4 ? atol(argv[4]) : 10000;
    long catchup_mib = argc > 5 ? atol(argv[5]) : 1024;
    const char *tmo = getenv("BENCH_TIMEOUT");
    bench_catch_signals(tmo ? (unsigned)atoi(tmo) : 600);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("BENCH_RK_CONF"))
        printf("cluster_bench: BENCH_RK_CONF=\"%s\" (librdkafka settings of the produce "
               "loads)\n", getenv("BENCH_RK_CONF"));
    printf("cluster_bench: reproduce with: %s%s%sflock /tmp/sluice-bench.lock %s %s %ld %ld %ld "
           "%ld\n", getenv("BENCH_STEPS") ? "BENCH_STEPS=" : "",
           getenv("BENCH_STEPS") ? getenv("BENCH_STEPS") : "", getenv("BENCH_STEPS") ? " " : "",
           argv[0], bench_sluiced_path(), msgs, small, large, catchup_mib);
    if (access("/usr/share/java/zookeeper.jar", R_OK)) {
        printf("cluster_bench: skipped: no ZooKeeper server (/usr/share/java/zookeeper.jar; "
               "`make deps` installs it)\n");
        return 0;
    }
    bench_mkdtemp(bench_scratch, sizeof bench_scratch, "sluice-cluster-bench");
    bench_track(0, false);            /* registers the atexit cleanup */
    zk_server_start();
    zk_client_open();
    cluster_start();
    if (step_on("propagation"))
        bench_propagation();
    if (step_on("produce"))
        bench_produce(msgs);
    if (step_on("acks"))
        bench_acks_all(msgs);
    if (step_on("latency"))
        bench_latency();
    if (step_on("failover"))
        bench_failover();
    if (step_on("catchup"))
        bench_catchup(catchup_mib << 20);
    if (step_on("takeover"))
        bench_takeover(small, large);
    if (step_on("restart"))
        bench_restart(large);
    if (step_on("reelection"))
        bench_reelection();
    for (int i = 0; i < NBROKERS; i++)
        bench_broker_stop(&brokers[i]);
    zookeeper_close(zh);
    zk_server_stop();
    if (failed)
        print_logs();
    return failed ? 1 : 0;
}
