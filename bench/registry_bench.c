/*
 * The schema registry (issue 31): registrations per second, then
 * GET /schemas/ids/{id} with keep-alive (what every deserializer does once
 * per new id; the target is >= 20,000 requests/s on this machine).
 *
 * One standalone broker with its registry on a free port.  Registrations
 * go one after another over one keep-alive connection (each is answered
 * once its _schemas record is appended and covered: the write path), to
 * distinct subjects so no compatibility check refuses them.  Then
 * `threads` client threads, each with its own keep-alive connection, GET
 * random ids for `seconds`.  Printed: registrations/s, GETs/s, and the
 * broker's CPU seconds per 1,000 GETs.
 *
 * Then `versions` versions of one subject (compatibility NONE, so no check
 * runs and what grows is the subject alone), registered one after another:
 * printed per window of 100 (the first, the one after version 100, the
 * last): registrations/s and the CPU time of the broker's loop thread
 * (its main thread, /proc/PID/task/PID/stat) per registration, which is
 * where a per-registration cost that grows with the subject would show.
 *
 *   build/bench/registry_bench [schemas] [seconds] [threads] [versions] [basic]
 *       (defaults 500, 3, 2, 1500; the versions step is skipped with 0 or basic)
 *
 * basic: the broker has an authorizer (daemon/registry/sr_auth.c) and every
 * request logs in as User:bench with HTTP Basic, whose SUBJECT ACL
 * (PREFIXED bench-, READ and WRITE) each request is checked against: the
 * cost of authentication and ACLs, to compare with a run without.
 */
#include "bench/bench_common.h"

#include <pthread.h>

#define BENCH_BASIC "Authorization: Basic YmVuY2g6YmVuY2gtcHc=\r\n"   /* bench:bench-pw */
static const char *auth_header = "";

typedef struct hconn {
    int fd;
    char buf[65536];
    size_t have;
} hconn;

/* One request, its answer's status (body skipped); -1 on a broken
 * connection. */
static int http_call(hconn *c, const char *req, size_t len)
{
    if (bench_write_all(c->fd, req, len))
        return -1;
    for (;;) {
        char *end = c->have ? memmem(c->buf, c->have, "\r\n\r\n", 4) : NULL;
        if (end) {
            size_t head = (size_t)(end - c->buf) + 4;
            char *cl = memmem(c->buf, head, "Content-Length:", 15);
            size_t body = cl ? strtoul(cl + 15, NULL, 10) : 0;
            if (c->have >= head + body) {
                int status = atoi(c->buf + 9);
                memmove(c->buf, c->buf + head + body, c->have - head - body);
                c->have -= head + body;
                return status;
            }
        }
        if (c->have == sizeof c->buf)
            return -1;
        ssize_t n = read(c->fd, c->buf + c->have, sizeof c->buf - c->have);
        if (n <= 0)
            return -1;
        c->have += (size_t)n;
    }
}

typedef struct getter {
    int port, nids;
    double until;
    long done, failed;
    unsigned seed;
} getter;

static void *get_loop(void *arg)
{
    getter *g = arg;
    hconn *c = calloc(1, sizeof *c);
    c->fd = bench_connect(g->port);
    char req[256];
    while (c->fd >= 0 && bench_now() < g->until) {
        for (int k = 0; k < 64; k++) {
            int id = 1 + (int)(rand_r(&g->seed) % (unsigned)g->nids);
            int n = snprintf(req, sizeof req, "GET /schemas/ids/%d HTTP/1.1\r\nHost: b\r\n%s"
                             "Accept: application/vnd.schemaregistry.v1+json\r\n\r\n", id,
                             auth_header);
            if (http_call(c, req, (size_t)n) == 200)
                g->done++;
            else
                g->failed++;
        }
    }
    if (c->fd >= 0)
        close(c->fd);
    free(c);
    return NULL;
}

/* utime + stime of one thread of pid, in seconds. */
static double thread_cpu_seconds(pid_t pid, pid_t tid)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    return bench_stat_cpu_seconds(path);
}

/* A POST of body to path; its status. */
static int post(hconn *c, const char *method, const char *path, const char *body)
{
    char req[1024];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: b\r\nContent-Type: "
                     "application/vnd.schemaregistry.v1+json\r\nContent-Length: %zu\r\n\r\n%s",
                     method, path, strlen(body), body);
    return http_call(c, req, (size_t)n);
}

/* One subject grown to `versions` versions; the windows of 100 printed. */
static int one_subject(pid_t pid, int port, int versions)
{
    hconn *c = calloc(1, sizeof *c);
    if ((c->fd = bench_connect(port)) < 0 ||
        post(c, "PUT", "/config/one-value", "{\"compatibility\": \"NONE\"}") != 200) {
        fprintf(stderr, "registry_bench: cannot set one-value's compatibility\n");
        return 1;
    }
    int win[3] = { 1, 101, versions - 99 };
    double t0 = 0, cpu0 = 0;
    char body[512];
    for (int v = 1; v <= versions; v++) {
        for (int k = 0; k < 3; k++)
            if (v == win[k]) {
                t0 = bench_now();
                cpu0 = thread_cpu_seconds(pid, pid);
            }
        snprintf(body, sizeof body, "{\"schema\": \"{\\\"type\\\":\\\"record\\\","
                 "\\\"name\\\":\\\"V%d\\\",\\\"fields\\\":[{\\\"name\\\":"
                 "\\\"f\\\",\\\"type\\\":\\\"long\\\"}]}\"}", v);
        int st = post(c, "POST", "/subjects/one-value/versions", body);
        if (st != 200) {
            fprintf(stderr, "registry_bench: version %d answered %d\n", v, st);
            return 1;
        }
        for (int k = 0; k < 3; k++)
            if (v == win[k] + 99 && win[k] >= 1)
                printf("one subject, versions %4d-%4d: %6.0f registrations/s, loop thread "
                       "CPU %.2f ms per registration\n", win[k], v,
                       100 / (bench_now() - t0),
                       (thread_cpu_seconds(pid, pid) - cpu0) * 1000 / 100);
    }
    close(c->fd);
    free(c);
    return 0;
}

int main(int argc, char **argv)
{
    int nschemas = argc > 1 ? atoi(argv[1]) : 500;
    double seconds = argc > 2 ? atof(argv[2]) : 3;
    int nthreads = argc > 3 ? atoi(argv[3]) : 2;
    bool basic = false;
    int versions = 1500;
    for (int i = 4; i < argc; i++)
        if (!strcmp(argv[i], "basic"))
            basic = true;
        else
            versions = atoi(argv[i]);
    if (basic)
        versions = 0;                 /* one_subject logs in as nobody */
    if (nschemas < 1 || seconds <= 0 || nthreads < 1 || nthreads > 64 ||
        (versions && versions < 200)) {
        fprintf(stderr, "usage: registry_bench [schemas] [seconds] [threads] [versions "
                "(0, or >= 200)] [basic]\n");
        return 2;
    }
    bench_catch_signals((unsigned)(seconds + 300));
    int rport = bench_free_port();
    char rl[80];
    snprintf(rl, sizeof rl, "schema.registry.listeners=http://127.0.0.1:%d", rport);
    int aport = bench_free_port();
    char al[80];
    snprintf(al, sizeof al, "admin.listeners=http://127.0.0.1:%d", aport);
    /* basic: no ACL names the cluster, so allow.everyone.if.no.acl.found
     * lets this program make the user and its ACLs over /sql. */
    const char *plain[] = { rl, "admin.listeners=none", NULL };
    const char *authz[] = { rl, al, "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                            "allow.everyone.if.no.acl.found=true", NULL };
    bench_broker b = { 0 };
    bench_broker_start(&b, basic ? authz : plain);
    static const char *const setup[] = {
        "INSERT INTO scram_credentials (name, mechanism, password) VALUES ('bench', "
        "'SCRAM-SHA-256', 'bench-pw')",
        "INSERT INTO acls (resource_type, resource_name, pattern_type, principal, operation, "
        "permission) VALUES ('SUBJECT', 'bench-', 'PREFIXED', 'User:bench', 'READ', 'ALLOW')",
        "INSERT INTO acls (resource_type, resource_name, pattern_type, principal, operation, "
        "permission) VALUES ('SUBJECT', 'bench-', 'PREFIXED', 'User:bench', 'WRITE', 'ALLOW')",
    };
    for (size_t i = 0; basic && i < sizeof setup / sizeof *setup; i++) {
        bench_http_res hr = { 0 };
        int rc = -1;
        for (int k = 0; k < 2000 && (rc = bench_http(aport, "POST", "/sql", setup[i], &hr)); k++)
            usleep(5000);
        if (rc || hr.status != 200) {
            fprintf(stderr, "registry_bench: %s: %d %s\n", setup[i], hr.status,
                    hr.body ? hr.body : "");
            kp_buf_free(&hr.raw);
            bench_broker_cleanup(&b);
            return 1;
        }
        kp_buf_free(&hr.raw);
    }
    if (basic)
        auth_header = BENCH_BASIC;
    hconn *c = calloc(1, sizeof *c);
    for (int i = 0; i < 2000 && (c->fd = bench_connect(rport)) < 0; i++)
        usleep(5000);
    if (c->fd < 0) {
        fprintf(stderr, "registry_bench: the registry does not listen\n");
        bench_broker_cleanup(&b);
        return 1;
    }
    char body[512], req[1024];
    double t0 = bench_now();
    for (int i = 0; i < nschemas; i++) {
        int bl = snprintf(body, sizeof body, "{\"schema\": \"{\\\"type\\\":\\\"record\\\","
                          "\\\"name\\\":\\\"R%d\\\",\\\"fields\\\":[{\\\"name\\\":\\\"f\\\","
                          "\\\"type\\\":\\\"long\\\"}]}\"}", i);
        int n = snprintf(req, sizeof req, "POST /subjects/bench-%d-value/versions HTTP/1.1\r\n"
                         "Host: b\r\n%sContent-Type: application/vnd.schemaregistry.v1+json\r\n"
                         "Content-Length: %d\r\n\r\n%s", i, auth_header, bl, body);
        int st = http_call(c, req, (size_t)n);
        if (st != 200) {
            fprintf(stderr, "registry_bench: registration %d answered %d\n", i, st);
            bench_broker_cleanup(&b);
            return 1;
        }
    }
    double reg_s = bench_now() - t0;
    close(c->fd);
    free(c);
    double cpu0 = bench_cpu_seconds(b.pid);
    getter g[64];
    pthread_t th[64];
    double until = bench_now() + seconds;
    t0 = bench_now();
    for (int i = 0; i < nthreads; i++) {
        g[i] = (getter){ .port = rport, .nids = nschemas, .until = until, .seed = 7u + (unsigned)i };
        pthread_create(&th[i], NULL, get_loop, &g[i]);
    }
    long done = 0, failed = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        done += g[i].done;
        failed += g[i].failed;
    }
    double get_s = bench_now() - t0, cpu = bench_cpu_seconds(b.pid) - cpu0;
    int rc = versions ? one_subject(b.pid, rport, versions) : 0;
    bench_broker_cleanup(&b);
    printf("%sregistrations: %d in %.2f s = %.0f/s (one connection, each answered once "
           "durable)\n", basic ? "[authorizer, Basic login, SUBJECT ACLs] " : "", nschemas, reg_s,
           nschemas / reg_s);
    printf("GET /schemas/ids/{id}: %ld in %.2f s = %.0f requests/s over %d keep-alive "
           "connections (%ld failed); broker CPU %.3f s per 1,000\n", done, get_s,
           done / get_s, nthreads, failed, done ? cpu * 1000 / (double)done : 0);
    return rc || failed || !done;
}
