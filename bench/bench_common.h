/*
 * Shared pieces of the benchmarks: start a sluiced on a free loopback port
 * with a fresh data directory, talk raw Kafka frames to it, read its CPU
 * time.  Header-only so each benchmark stays one program.
 */
#ifndef SLUICE_BENCH_COMMON_H
#define SLUICE_BENCH_COMMON_H

#include <dirent.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "protocol/kp.h"

typedef struct bench_broker {
    pid_t pid;
    int port;
    char dir[256];
    char bin[1024];
    char log[300];         /* its stderr goes here when set (else /dev/null) */
    double listen_wait;    /* seconds bench_broker_start waits for it to listen; 0: 10 */
} bench_broker;

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline int bench_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &len)) {
        perror("bench: free port");
        exit(1);
    }
    close(fd);
    return ntohs(a.sin_port);
}

static inline int bench_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* The sluiced binary: $SLUICED, else build/sluiced. */
static inline const char *bench_sluiced_path(void)
{
    const char *p = getenv("SLUICED");
    return p && *p ? p : "build/sluiced";
}

/* Brokers (and other servers) started and not stopped yet.  At exit (a
 * die() in any thread, or a return that skipped the cleanup) they are
 * killed: an orphan broker would keep the bench lock that `flock` handed
 * down to it.  Then bench_scratch, when set, is removed: a directory that
 * holds every data directory of a bench that starts several servers. */
#define BENCH_MAX_LIVE 8
static pid_t bench_live[BENCH_MAX_LIVE];
static char bench_scratch[200];     /* shorter than a bench_broker dir */
static bool bench_keep_scratch;        /* $BENCH_KEEP: leave it for a post-mortem */

/* rm -rf through fork and execve: safe in a signal handler, where
 * system() is not. */
static inline void bench_rm_tree(const char *dir)
{
    char *const argv[] = { "rm", "-rf", "--", (char *)dir, NULL };
    char *const envp[] = { NULL };
    pid_t p = fork();
    if (p == 0) {
        execve("/bin/rm", argv, envp);
        _exit(127);
    }
    if (p > 0)
        waitpid(p, NULL, 0);
}

/* Only async-signal-safe calls: it also runs from bench_on_signal. */
static inline void bench_kill_live(void)
{
    for (int i = 0; i < BENCH_MAX_LIVE; i++)
        if (bench_live[i] > 0) {
            kill(bench_live[i], SIGKILL);
            waitpid(bench_live[i], NULL, 0);
            bench_live[i] = 0;
        }
    if (bench_scratch[0] && !bench_keep_scratch)
        bench_rm_tree(bench_scratch);
}

/* SIGINT, SIGTERM, SIGHUP and a watchdog's SIGALRM: kill what was
 * started, then die of the same signal (the exit status says so). */
static inline void bench_on_signal(int sig)
{
    if (sig == SIGALRM) {
        static const char msg[] = "bench: timed out (watchdog), killing what it started\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
    }
    bench_kill_live();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Installs bench_on_signal, ignores SIGPIPE (a broker stopped on purpose
 * must not kill the bench that writes to it), and arms a watchdog of
 * `seconds` (0: none). */
static inline void bench_catch_signals(unsigned seconds)
{
    struct sigaction sa = { .sa_handler = bench_on_signal };
    sigemptyset(&sa.sa_mask);
    const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGALRM };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    alarm(seconds);
}

/* A fresh directory under $BENCH_TMPDIR (or /tmp) into *dir (size n);
 * exits on failure. */
static inline void bench_mkdtemp(char *dir, size_t n, const char *name)
{
    snprintf(dir, n, "%s/%s-XXXXXX", getenv("BENCH_TMPDIR") ? getenv("BENCH_TMPDIR") : "/tmp",
             name);
    if (!mkdtemp(dir)) {
        perror("bench: mkdtemp");
        exit(1);
    }
}

/* In a child between fork and exec: die with the bench even if it is
 * SIGKILLed (no atexit then), and undo the bench's SIGPIPE ignore, which
 * exec would otherwise hand down. */
static inline void bench_child_setup(void)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGPIPE, SIG_DFL);
}

static inline void bench_track(pid_t pid, bool live)
{
    static bool registered;
    if (!registered && atexit(bench_kill_live) == 0)
        registered = true;
    bench_keep_scratch = getenv("BENCH_KEEP") != NULL;
    for (int i = 0; i < BENCH_MAX_LIVE; i++)
        if (bench_live[i] == (live ? 0 : pid)) {
            bench_live[i] = live ? pid : 0;
            return;
        }
}

/* Starts sluiced (extra: NULL-terminated "key=value" overrides, then
 * those of $BENCH_OVERRIDES) and waits
 * until it accepts connections (b->listen_wait, default 10 s, at most).
 * Returns seconds taken. */
static inline double bench_broker_start(bench_broker *b, const char *const *extra)
{
    if (!b->port)
        b->port = bench_free_port();
    if (!b->dir[0])
        bench_mkdtemp(b->dir, sizeof b->dir, "sluice-bench");
    snprintf(b->bin, sizeof b->bin, "%s", bench_sluiced_path());
    char listen[64], dirs[300];
    snprintf(listen, sizeof listen, "listeners=PLAINTEXT://127.0.0.1:%d", b->port);
    snprintf(dirs, sizeof dirs, "log.dirs=%s", b->dir);
    const char *argv[64];
    int n = 0;
    argv[n++] = b->bin;
    argv[n++] = "--override"; argv[n++] = listen;
    argv[n++] = "--override"; argv[n++] = dirs;
    for (int i = 0; extra && extra[i] && n < 60; i++) {
        argv[n++] = "--override";
        argv[n++] = extra[i];
    }
    /* $BENCH_OVERRIDES: more key=value overrides, separated by spaces, to
     * try a setting without a rebuild (cut up in a copy: a bench may start
     * several brokers). */
    char more[1024];
    snprintf(more, sizeof more, "%s", getenv("BENCH_OVERRIDES") ? getenv("BENCH_OVERRIDES") : "");
    for (char *save = NULL, *kv = strtok_r(more, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
        if (n >= 62) {
            fprintf(stderr, "bench: too many overrides, from %s on ignored\n", kv);
            break;
        }
        argv[n++] = "--override";
        argv[n++] = kv;
    }
    argv[n] = NULL;
    double t0 = bench_now();
    b->pid = fork();
    if (b->pid == 0) {
        bench_child_setup();
        if (b->log[0] || !getenv("BENCH_VERBOSE")) {
            FILE *f = freopen(b->log[0] ? b->log : "/dev/null", "a", stderr);
            (void)f;
        }
        execv(b->bin, (char *const *)argv);
        _exit(127);
    }
    if (b->pid > 0)
        bench_track(b->pid, true);
    for (;;) {
        int fd = bench_connect(b->port);
        if (fd >= 0) {
            close(fd);
            break;
        }
        int st;
        if (waitpid(b->pid, &st, WNOHANG) == b->pid) {
            bench_track(b->pid, false);
            fprintf(stderr, "bench: %s exited during startup\n", b->bin);
            exit(1);
        }
        double wait = b->listen_wait > 0 ? b->listen_wait : 10;
        if (bench_now() - t0 > wait) {
            fprintf(stderr, "bench: %s did not listen within %.0f s\n", b->bin, wait);
            kill(b->pid, SIGKILL);
            exit(1);
        }
        usleep(1000);
    }
    return bench_now() - t0;
}

/* SIGTERM and wait (10 s, then SIGKILL).  Returns seconds taken. */
static inline double bench_broker_stop(bench_broker *b)
{
    double t0 = bench_now();
    if (b->pid <= 0)
        return 0;
    kill(b->pid, SIGTERM);
    bench_track(b->pid, false);
    for (int i = 0; i < 10000; i++) {
        if (waitpid(b->pid, NULL, WNOHANG) == b->pid) {
            b->pid = 0;
            return bench_now() - t0;
        }
        usleep(1000);
    }
    kill(b->pid, SIGKILL);
    waitpid(b->pid, NULL, 0);
    b->pid = 0;
    return bench_now() - t0;
}

static inline void bench_broker_cleanup(bench_broker *b)
{
    if (b->pid > 0)
        bench_broker_stop(b);
    if (b->dir[0]) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", b->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "bench: could not remove %s\n", b->dir);
    }
}

/* qsort comparator for doubles (for medians). */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v); n > 0. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* utime + stime from a /proc stat file, in seconds. */
static inline double bench_stat_cpu_seconds(const char *path)
{
    char buf[4096];
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    unsigned long long ut = 0, st = 0;
    /* fields after ')': state(3) ... utime(14) stime(15) */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* utime + stime of a process, in seconds (from /proc/PID/stat). */
static inline double bench_cpu_seconds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    return bench_stat_cpu_seconds(path);
}

/* CPU seconds used by every process on the machine, kernel threads
 * included: the sum of bench_cpu_seconds over /proc (a process's figure
 * keeps its finished threads).  /proc/stat's per-CPU counters are ticks
 * sampled and miss short bursts; these are scheduler run times.  IRQ time
 * and processes that exit between two readings are not counted. */
static inline double bench_machine_cpu_seconds(void)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    double sum = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        double s = bench_cpu_seconds((pid_t)atoi(e->d_name));
        if (s > 0)
            sum += s;
    }
    closedir(d);
    return sum;
}

static inline int bench_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static inline int bench_read_all(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Sends one request frame whose header+body is in req (the 4-byte size
 * prefix is added here).  0 or -1. */
static inline int bench_send_frame(int fd, const kp_buf *req)
{
    uint8_t len[4] = { (uint8_t)(req->len >> 24), (uint8_t)(req->len >> 16),
                       (uint8_t)(req->len >> 8), (uint8_t)req->len };
    /* One writev (one syscall per request on the client side); the rest
     * of a short write goes out with write(). */
    struct iovec iov[2] = { { len, 4 }, { req->data, req->len } };
    ssize_t w;
    do
        w = writev(fd, iov, 2);
    while (w < 0 && errno == EINTR);
    if (w < 0)
        return -1;
    size_t done = (size_t)w;
    if (done < 4 && bench_write_all(fd, len + done, 4 - done))
        return -1;
    size_t body = done > 4 ? done - 4 : 0;
    return bench_write_all(fd, req->data + body, req->len - body);
}

/* Reads one response frame into resp (size prefix stripped).  0 or -1. */
static inline int bench_recv_frame(int fd, kp_buf *resp)
{
    uint8_t len[4];
    if (bench_read_all(fd, len, 4))
        return -1;
    size_t n = (size_t)len[0] << 24 | (size_t)len[1] << 16 | (size_t)len[2] << 8 | len[3];
    kp_buf_reset(resp);
    uint8_t *dst = kp_buf_reserve(resp, n);
    if (!dst || bench_read_all(fd, dst, n))
        return -1;
    resp->len = n;
    return 0;
}

/* One request, one response (pipelining callers use the two halves). */
static inline int bench_roundtrip(int fd, const kp_buf *req, kp_buf *resp)
{
    return bench_send_frame(fd, req) || bench_recv_frame(fd, resp) ? -1 : 0;
}

/* Send and receive timeouts on a socket: a broker that stops answering
 * fails the call (-1) instead of hanging the bench. */
static inline void bench_set_timeout(int fd, double seconds)
{
    struct timeval tv = { (time_t)seconds, (suseconds_t)((seconds - (time_t)seconds) * 1e6) };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* A CreateTopics v0 request for one topic with `partitions` partitions of
 * replication factor rf and the request's TimeoutMs, into q (initialised).
 * assign: NULL, or the manual assignment, rf broker ids per partition. */
static inline void bench_create_topic_req(kp_buf *q, const char *name, int32_t partitions,
                                          int16_t rf, const int32_t *assign,
                                          const char *const *configs /* k,v,…,NULL */,
                                          int32_t timeout_ms)
{
    kp_buf_init(q);
    kp_req_hdr_write(q, KP_API_CREATE_TOPICS, 0, 1, "bench");
    kp_wr_array(q, 1);
    kp_wr_string(q, name, -1);
    kp_wr_i32(q, assign ? -1 : partitions);
    kp_wr_i16(q, assign ? -1 : rf);
    kp_wr_array(q, assign ? partitions : 0);  /* Assignments */
    for (int32_t p = 0; assign && p < partitions; p++) {
        kp_wr_i32(q, p);
        kp_wr_array(q, rf);
        for (int16_t k = 0; k < rf; k++)
            kp_wr_i32(q, assign[(size_t)p * (size_t)rf + (size_t)k]);
    }
    int nc = 0;
    while (configs && configs[nc * 2])
        nc++;
    kp_wr_array(q, nc);
    for (int i = 0; i < nc; i++) {
        kp_wr_string(q, configs[2 * i], -1);
        kp_wr_string(q, configs[2 * i + 1], -1);
    }
    kp_wr_i32(q, timeout_ms);
}

/* The one topic's ErrorCode in a CreateTopics v0 response, or -1. */
static inline int bench_create_topic_error(const kp_buf *r)
{
    kp_rd rd;
    kp_rd_init(&rd, r->data, r->len);
    kp_rd_i32(&rd);                           /* correlation id */
    int rc = -1;
    if (kp_rd_array(&rd, 4) == 1) {
        kp_rd_string(&rd);
        rc = kp_rd_i16(&rd);
    }
    return kp_rd_ok(&rd) ? rc : -1;
}

/* CreateTopics v0 for one topic, one round trip; the topic's error code
 * or -1. */
static inline int bench_create_topic_rf(int fd, const char *name, int32_t partitions, int16_t rf,
                                        const char *const *configs /* k,v,k,v,NULL */,
                                        int32_t timeout_ms)
{
    kp_buf q, r;
    bench_create_topic_req(&q, name, partitions, rf, NULL, configs, timeout_ms);
    kp_buf_init(&r);
    int rc = bench_roundtrip(fd, &q, &r) == 0 ? bench_create_topic_error(&r) : -1;
    kp_buf_free(&q);
    kp_buf_free(&r);
    return rc;
}

/* CreateTopics v0 for one topic, replication factor 1, 30 s. */
static inline int bench_create_topic(int fd, const char *name, int32_t partitions,
                                     const char *const *configs /* k,v,k,v,NULL */)
{
    return bench_create_topic_rf(fd, name, partitions, 1, configs, 30000);
}

/* What a Metadata v1 response says, in the few figures benches wait on. */
#define BENCH_MD_MAX_BROKERS 16
typedef struct bench_md {
    int32_t controller;                 /* ControllerId; -1: none */
    int nbrokers;
    int32_t broker_id[BENCH_MD_MAX_BROKERS];
    int32_t broker_port[BENCH_MD_MAX_BROKERS];
    int ntopics;                        /* those without a topic error */
    long partitions;                    /* of those topics */
    long led;                           /* of which with a leader (>= 0) */
    long under_replicated;              /* of which with fewer in sync than replicas */
    int16_t topic_error;                /* the first topic's ErrorCode */
    int32_t leader0;                    /* its partition 0's LeaderId; -1: none */
    int32_t replica0;                   /* and first replica; -1: none */
} bench_md;

/* Metadata v1 for one topic (NULL: every topic; "": none, only brokers
 * and controller) into *md.  0, or -1 on an I/O error or a malformed
 * response. */
static inline int bench_metadata(int fd, const char *topic, bench_md *md)
{
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    kp_req_hdr_write(&q, KP_API_METADATA, 1, 1, "bench");
    if (topic && !*topic) {
        kp_wr_array(&q, 0);
    } else if (topic) {
        kp_wr_array(&q, 1);
        kp_wr_string(&q, topic, -1);
    } else {
        kp_wr_array(&q, -1);                  /* null: all topics */
    }
    memset(md, 0, sizeof *md);
    md->controller = md->leader0 = md->replica0 = -1;
    int rc = bench_roundtrip(fd, &q, &r);
    if (rc == 0) {
        kp_rd rd;
        kp_rd_init(&rd, r.data, r.len);
        kp_rd_i32(&rd);                       /* correlation id */
        int32_t nb = kp_rd_array(&rd, 12);
        for (int32_t i = 0; i < nb; i++) {
            int32_t id = kp_rd_i32(&rd);
            kp_rd_string(&rd);                /* Host */
            int32_t port = kp_rd_i32(&rd);
            kp_rd_string(&rd);                /* Rack */
            if (md->nbrokers < BENCH_MD_MAX_BROKERS) {
                md->broker_id[md->nbrokers] = id;
                md->broker_port[md->nbrokers++] = port;
            }
        }
        md->controller = kp_rd_i32(&rd);
        int32_t nt = kp_rd_array(&rd, 5);
        for (int32_t t = 0; t < nt; t++) {
            int16_t terr = kp_rd_i16(&rd);
            kp_rd_string(&rd);                /* Name */
            kp_rd_bool(&rd);                  /* IsInternal */
            if (t == 0)
                md->topic_error = terr;
            md->ntopics += terr == 0;
            int32_t np = kp_rd_array(&rd, 18);
            for (int32_t p = 0; p < np; p++) {
                kp_rd_i16(&rd);               /* ErrorCode */
                int32_t index = kp_rd_i32(&rd);
                int32_t leader = kp_rd_i32(&rd), replica = -1, count[2] = { 0, 0 };
                for (int k = 0; k < 2; k++) { /* ReplicaNodes, IsrNodes */
                    int32_t nr = count[k] = kp_rd_array(&rd, 4);
                    for (int32_t j = 0; j < nr; j++) {
                        int32_t id = kp_rd_i32(&rd);
                        if (k == 0 && j == 0)
                            replica = id;
                    }
                }
                if (terr == 0) {
                    md->partitions++;
                    md->led += leader >= 0;
                    md->under_replicated += count[1] < count[0];
                }
                if (t == 0 && index == 0) {
                    md->leader0 = leader;
                    md->replica0 = replica;
                }
            }
        }
        rc = kp_rd_ok(&rd) ? 0 : -1;
    }
    kp_buf_free(&q);
    kp_buf_free(&r);
    return rc;
}

/* An uncompressed batch of `records` records, no key, each value
 * value_size bytes of `fill`, CreateTime 1700000000000 + i, into batch
 * (initialised here).  0, or -1 when the builder fails. */
static inline int bench_batch(kp_buf *batch, int records, size_t value_size, char fill)
{
    kp_buf_init(batch);
    char *value = malloc(value_size ? value_size : 1);
    if (!value)
        return -1;
    memset(value, fill, value_size);
    kp_batch_builder bb;
    kp_bb_init(&bb, batch, KP_CODEC_NONE);
    for (int i = 0; i < records; i++)
        kp_bb_add(&bb, 1700000000000LL + i, NULL, 0, value, (int32_t)value_size, NULL, 0);
    int rc = kp_bb_finish(&bb) < 0 ? -1 : 0;
    kp_bb_free(&bb);
    free(value);
    return rc;
}

/* Produce v7 (acks=1): the same batch to partitions [0, nparts) of topic. */
static inline void bench_produce_req(kp_buf *q, int32_t cid, const char *client,
                                     const char *topic, int32_t nparts, const kp_buf *batch)
{
    kp_buf_reset(q);
    kp_req_hdr_write(q, KP_API_PRODUCE, 7, cid, client);
    kp_wr_string(q, NULL, -1);                /* TransactionalId */
    kp_wr_i16(q, 1);                          /* Acks */
    kp_wr_i32(q, 30000);                      /* TimeoutMs */
    kp_wr_array(q, 1);
    kp_wr_string(q, topic, -1);
    kp_wr_array(q, nparts);
    for (int32_t p = 0; p < nparts; p++) {
        kp_wr_i32(q, p);
        kp_wr_bytes(q, batch->data, (int32_t)batch->len);
    }
}

/* First non-zero ErrorCode of a Produce v7 response (-1: malformed). */
static inline int bench_produce_error(const kp_buf *r)
{
    kp_rd rd;
    kp_rd_init(&rd, r->data, r->len);
    kp_rd_i32(&rd);                           /* correlation id */
    int err = 0;
    int32_t nt = kp_rd_array(&rd, 4);
    for (int32_t t = 0; t < nt; t++) {
        kp_rd_string(&rd);
        int32_t np = kp_rd_array(&rd, 30);
        for (int32_t p = 0; p < np; p++) {
            kp_rd_i32(&rd);                   /* Index */
            int16_t e = kp_rd_i16(&rd);
            kp_rd_i64(&rd);                   /* BaseOffset */
            kp_rd_i64(&rd);                   /* LogAppendTimeMs */
            kp_rd_i64(&rd);                   /* LogStartOffset */
            if (e && !err)
                err = e;
        }
    }
    return kp_rd_ok(&rd) ? err : -1;
}

/* ---- HTTP (a broker's admin listener: /metrics, /sql) ------------------------ */
typedef struct bench_http_res {
    int status;
    long rows;                        /* X-Sluice-Rows, -1 if absent */
    kp_buf raw;                       /* whole response */
    const char *body;
    size_t body_len;
} bench_http_res;

/* One HTTP request to 127.0.0.1:port on a fresh connection ("Connection:
 * close": read to EOF); res->raw is the caller's to free.  0 or -1. */
static inline int bench_http(int port, const char *method, const char *path, const char *body,
                             bench_http_res *res)
{
    int fd = bench_connect(port);
    if (fd < 0)
        return -1;
    char head[512];
    size_t blen = body ? strlen(body) : 0;
    int hn = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: text/plain\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      method, path, port, blen);
    if (bench_write_all(fd, head, (size_t)hn) || (blen && bench_write_all(fd, body, blen))) {
        close(fd);
        return -1;
    }
    kp_buf_reset(&res->raw);
    for (;;) {
        uint8_t *p = kp_buf_reserve(&res->raw, 65536);
        if (!p) {
            close(fd);
            return -1;
        }
        ssize_t r = read(fd, p, 65536);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        res->raw.len += (size_t)r;
    }
    close(fd);
    *(char *)kp_buf_reserve(&res->raw, 1) = 0;
    const char *s = (const char *)res->raw.data;
    const char *eoh = strstr(s, "\r\n\r\n");
    if (!eoh || sscanf(s, "HTTP/1.%*d %d", &res->status) != 1)
        return -1;
    res->rows = -1;
    for (const char *l = strstr(s, "\r\n"); l && l < eoh; l = strstr(l + 2, "\r\n"))
        if (!strncasecmp(l + 2, "X-Sluice-Rows:", 14))
            res->rows = strtol(l + 16, NULL, 10);
    res->body = eoh + 4;
    res->body_len = res->raw.len - (size_t)(res->body - s);
    return 0;
}

/* Throughput of a raw producer: MB/s of record values (wall clock) and the
 * broker's CPU seconds per GB of them. */
typedef struct bench_produce_result {
    double mbps, cpu_per_gb;
} bench_produce_result;

/* Sends batch (records x value_size bytes of values) to partition 0 of
 * topic as Produce v7, acks=1, BENCH_PIPELINE requests in flight, until
 * mb MB of values went out; a refusal fails the run.  0 or -1. */
#define BENCH_PIPELINE 5
static inline int bench_produce_measure(const bench_broker *b, const char *topic,
                                        const kp_buf *batch, int records, size_t value_size,
                                        double mb, bench_produce_result *out)
{
    int fd = bench_connect(b->port);
    if (fd < 0)
        return -1;
    bench_set_timeout(fd, 60);
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    double per_req = (double)records * (double)value_size / 1e6;
    long total = (long)(mb / per_req) + 1, sent = 0, got = 0;
    int rc = 0;
    double cpu0 = bench_cpu_seconds(b->pid), t0 = bench_now();
    while (got < total && rc == 0) {
        while (sent < total && sent - got < BENCH_PIPELINE && rc == 0) {
            bench_produce_req(&q, (int32_t)sent, "produce-bench", topic, 1, batch);
            rc = bench_send_frame(fd, &q);
            sent++;
        }
        if (rc == 0 && (bench_recv_frame(fd, &r) != 0 || bench_produce_error(&r) != 0)) {
            fprintf(stderr, "produce failed (error %d)\n", bench_produce_error(&r));
            rc = -1;
        }
        got++;
    }
    double secs = bench_now() - t0, cpu = bench_cpu_seconds(b->pid) - cpu0;
    double done = (double)got * per_req;
    out->mbps = done / secs;
    out->cpu_per_gb = cpu / (done / 1000);
    kp_buf_free(&q);
    kp_buf_free(&r);
    close(fd);
    return rc;
}

#endif
