/*
 * cluster_bench's cluster, described once: a real ZooKeeper server (the
 * Debian package's, in the foreground) and NBROKERS brokers on free
 * loopback ports in the scratch directory, this bench's own ZooKeeper
 * client that watches /controller, and the waits on a broker's Metadata
 * (brokers registered, partitions led) the steps are built from; die()
 * prints the logs' tails and exits.  The steps themselves stay in
 * cluster_bench.c and txn_bench.c.  Header-only like bench_common.h.
 */
#ifndef SLUICE_BENCH_CLUSTER_H
#define SLUICE_BENCH_CLUSTER_H

#include "bench/bench_common.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/stat.h>
/* The synchronous calls (zoo_create, zoo_exists) exist in the threaded
 * library only, which is the one linked. */
#define THREADED
#include <zookeeper/zookeeper.h>

#define NBROKERS 3
#define CHROOT "/sluice-bench"
#define SESSION_TIMEOUT_MS "6000"
#define RESTART_LISTEN_S 120         /* a broker's start may take this long before it fails */

static bench_broker brokers[NBROKERS];
static char cluster_chroot[64] = CHROOT;  /* the brokers' chroot */
static const char *cluster_tag = "";      /* prefix of their directories */
static char broker_extra[NBROKERS][5][128];
/* A broker's admin listener (/metrics): on 127.0.0.1 at that port when set
 * before its first start; 0: none. */
static int cluster_admin_port[NBROKERS];
static bench_broker standalone;
static pid_t zk_pid;
static int zk_port;
static char zk_dir[300];
static zhandle_t *zh;

/* ---- failure: say what, show the logs, exit (atexit kills the rest) ---- */

static void print_tail(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char buf[3000];
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *start = size > (long)sizeof buf - 1 ? strchr(buf, '\n') : NULL;
    fprintf(stderr, "---- last lines of %s\n%s\n", path, start ? start + 1 : buf);
}

static void print_logs(void)
{
    for (int i = 0; i < NBROKERS; i++)
        print_tail(brokers[i].log);
    print_tail(standalone.log);
    char p[400];
    snprintf(p, sizeof p, "%s/zookeeper.out", zk_dir);
    print_tail(p);
}

static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cluster_bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    print_logs();
    if (bench_keep_scratch)
        fprintf(stderr, "cluster_bench: kept %s\n", bench_scratch);
    exit(1);
}

/* ---- ZooKeeper: the server, and a client that watches /controller ------ */

static bool zk_ruok(void)
{
    int fd = bench_connect(zk_port);
    if (fd < 0)
        return false;
    bench_set_timeout(fd, 2);
    char ans[5] = { 0 };
    bool ok = bench_write_all(fd, "ruok", 4) == 0 && bench_read_all(fd, ans, 4) == 0 &&
              !strcmp(ans, "imok");
    close(fd);
    return ok;
}

/* The Debian package's server in the foreground, data in the scratch
 * directory; waits for "imok" (30 s at most: a JVM on a busy machine). */
static void zk_server_start(void)
{
    zk_port = bench_free_port();
    snprintf(zk_dir, sizeof zk_dir, "%s/zookeeper", bench_scratch);
    char cfg[400], out[400];
    snprintf(cfg, sizeof cfg, "%s/zoo.cfg", zk_dir);
    snprintf(out, sizeof out, "%s/zookeeper.out", zk_dir);
    FILE *f = mkdir(zk_dir, 0700) ? NULL : fopen(cfg, "w");
    if (!f)
        die("cannot write %s: %s", cfg, strerror(errno));
    fprintf(f, "tickTime=500\ndataDir=%s/data\nclientPort=%d\nclientPortAddress=127.0.0.1\n"
               "minSessionTimeout=1000\nmaxSessionTimeout=60000\nadmin.enableServer=false\n"
               "4lw.commands.whitelist=*\n", zk_dir, zk_port);
    fclose(f);
    char logdir[420];
    snprintf(logdir, sizeof logdir, "-Dzookeeper.log.dir=%s", zk_dir);
    double t0 = bench_now();
    zk_pid = fork();
    if (zk_pid == 0) {
        bench_child_setup();
        int fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        /* log4j on the class path so that the server's log (sessions
         * opened, closed, expired) lands in zookeeper.out; a small heap and
         * the quick JIT: it is a test server on a shared machine. */
        execlp("java", "java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
               "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:"
               "/usr/share/java/log4j-1.2.jar:/etc/zookeeper/conf",
               logdir, "-Dzookeeper.root.logger=INFO,CONSOLE",
               "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg, (char *)NULL);
        _exit(127);
    }
    if (zk_pid < 0)
        die("fork: %s", strerror(errno));
    bench_track(zk_pid, true);
    while (!zk_ruok()) {
        if (waitpid(zk_pid, NULL, WNOHANG) == zk_pid) {
            bench_track(zk_pid, false);
            print_tail(out);
            die("ZooKeeper exited during startup");
        }
        if (bench_now() - t0 > 30)
            die("ZooKeeper did not answer ruok within 30 s");
        usleep(50000);
    }
    printf("zookeeper: listening on 127.0.0.1:%d after %.1f s\n", zk_port, bench_now() - t0);
}

static void zk_server_stop(void)
{
    if (zk_pid <= 0)
        return;
    kill(zk_pid, SIGTERM);
    for (int i = 0; i < 500 && waitpid(zk_pid, NULL, WNOHANG) != zk_pid; i++)
        usleep(10000);
    bench_track(zk_pid, false);
    kill(zk_pid, SIGKILL);
    waitpid(zk_pid, NULL, 0);
    zk_pid = 0;
}

static atomic_int cl_zk_connected;
static atomic_llong controller_gone_ns;  /* when the watch saw /controller go; 0: not yet */

/* Runs on the ZooKeeper client's thread: records and returns. */
static void zk_watcher(zhandle_t *h, int type, int state, const char *path, void *ctx)
{
    (void)h; (void)ctx;
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE)
        atomic_store(&cl_zk_connected, 1);
    if (type == ZOO_DELETED_EVENT && path && !strcmp(path, CHROOT "/controller"))
        atomic_store(&controller_gone_ns, (long long)(bench_now() * 1e9));
}

/* The brokers' chroot, created as an operator would before pointing
 * brokers at it. */
static void zk_create_chroot(void)
{
    int rc = zoo_create(zh, cluster_chroot, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    if (rc != ZOK && rc != ZNODEEXISTS)
        die("creating %s in ZooKeeper: %s", cluster_chroot, zerror(rc));
}

/* Connects (no chroot: this client names full paths) and creates the
 * brokers' chroot. */
static void zk_client_open(void)
{
    char log[400], hostport[64];
    snprintf(log, sizeof log, "%s/zkclient.log", zk_dir);
    FILE *lf = fopen(log, "a");
    if (lf)
        zoo_set_log_stream(lf);
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    snprintf(hostport, sizeof hostport, "127.0.0.1:%d", zk_port);
    zh = zookeeper_init(hostport, zk_watcher, 10000, NULL, NULL, 0);
    double t0 = bench_now();
    while (zh && !atomic_load(&cl_zk_connected) && bench_now() - t0 < 10)
        usleep(10000);
    if (!zh || !atomic_load(&cl_zk_connected))
        die("the bench's ZooKeeper client could not connect to %s", hostport);
    zk_create_chroot();
}

/* ---- brokers ----------------------------------------------------------- */

static int connect_or_die(const bench_broker *b)
{
    int fd = bench_connect(b->port);
    if (fd < 0)
        die("cannot connect to the broker on port %d", b->port);
    bench_set_timeout(fd, 90);
    return fd;
}

/* Starts broker i; seconds until it listened (RESTART_LISTEN_S at most:
 * the restart step measures a slow start rather than dying of it). */
static double cluster_broker_start(int i)
{
    bench_broker *b = &brokers[i];
    b->listen_wait = RESTART_LISTEN_S;
    if (!b->dir[0]) {
        snprintf(b->dir, sizeof b->dir, "%s/%sbroker%d", bench_scratch, cluster_tag, i + 1);
        snprintf(b->log, sizeof b->log, "%s/%sbroker%d.log", bench_scratch, cluster_tag, i + 1);
        if (mkdir(b->dir, 0700))
            die("mkdir %s: %s", b->dir, strerror(errno));
        snprintf(broker_extra[i][0], sizeof broker_extra[i][0], "broker.id=%d", i + 1);
        snprintf(broker_extra[i][1], sizeof broker_extra[i][1],
                 "zookeeper.connect=127.0.0.1:%d%s", zk_port, cluster_chroot);
        snprintf(broker_extra[i][2], sizeof broker_extra[i][2],
                 "zookeeper.session.timeout.ms=" SESSION_TIMEOUT_MS);
        snprintf(broker_extra[i][3], sizeof broker_extra[i][3], "auto.create.topics.enable=false");
        if (cluster_admin_port[i])
            snprintf(broker_extra[i][4], sizeof broker_extra[i][4],
                     "admin.listeners=127.0.0.1:%d", cluster_admin_port[i]);
        else
            snprintf(broker_extra[i][4], sizeof broker_extra[i][4], "admin.listeners=");
    }
    const char *const extra[] = { broker_extra[i][0], broker_extra[i][1], broker_extra[i][2],
                                  broker_extra[i][3], broker_extra[i][4], NULL };
    return bench_broker_start(b, extra);
}

static int index_of_id(int32_t id)
{
    return id >= 1 && id <= NBROKERS ? id - 1 : -1;
}

/* Waits (`secs` at most) until broker i's Metadata lists `want` brokers
 * and a controller.  The last answer goes to *md. */
static bool wait_brokers(int i, int want, double secs, bench_md *md)
{
    int fd = connect_or_die(&brokers[i]);
    double t0 = bench_now();
    bool ok = false;
    while (!ok && bench_now() - t0 < secs) {
        if (bench_metadata(fd, "", md))
            die("Metadata from broker %d failed", i + 1);
        ok = md->nbrokers == want && md->controller >= 0;
        if (!ok)
            usleep(20000);
    }
    close(fd);
    return ok;
}

/* Waits (`secs` at most) until broker i's Metadata has topic (NULL:
 * every topic) with at least `min_partitions` partitions, a leader for
 * each but `unled_ok` of them.  Seconds taken, or -1. */
static double wait_led(int i, const char *topic, long min_partitions, long unled_ok, double secs,
                       bench_md *md)
{
    int fd = connect_or_die(&brokers[i]);
    double t0 = bench_now(), took = -1;
    while (bench_now() - t0 < secs) {
        if (bench_metadata(fd, topic, md))
            die("Metadata from broker %d failed", i + 1);
        if (md->topic_error == 0 && md->partitions >= min_partitions && md->partitions > 0 &&
            md->led + unled_ok >= md->partitions) {
            took = bench_now() - t0;
            break;
        }
        usleep(topic ? 1000 : 100000);
    }
    close(fd);
    return took;
}

static void cluster_start(void)
{
    double t0 = bench_now();
    for (int i = 0; i < NBROKERS; i++)
        cluster_broker_start(i);
    bench_md md;
    for (int i = 0; i < NBROKERS; i++)
        if (!wait_brokers(i, NBROKERS, 30, &md))
            die("broker %d sees %d broker(s) and controller %d after 30 s, not a cluster of %d "
                "(does this sluiced have cluster mode?)", i + 1, md.nbrokers, md.controller,
                NBROKERS);
    printf("cluster: %d brokers (ports %d %d %d) registered, controller %d, after %.1f s\n",
           NBROKERS, brokers[0].port, brokers[1].port, brokers[2].port, md.controller,
           bench_now() - t0);
}

#endif
