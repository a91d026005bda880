/*
 * Connection storm (issue 18): N SCRAM-SHA-256 logins at once against a
 * SASL_PLAINTEXT listener, and a normal, already authenticated client's
 * Produce latency before and during the storm.
 *
 * The storm is N raw sockets driven in lock step: all connect, all send
 * SaslHandshake v1, all read its answer, all send client-first, ... so
 * the broker has up to N exchanges in flight at each step.  The client
 * side's PBKDF2 (4096 iterations) runs once, not per login: the salt is the
 * user's, so every login of one user salts the same way, and the bench
 * measures the server (which does no PBKDF2 for SCRAM: daemon/security/sec_sasl.c
 * inv. 3), not the client.
 *
 *   build/bench/sasl_storm_bench [logins]     (default 1000)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "bench/bench_common.h"
#include "protocol/kp_scram.h"

#define USER "storm"
#define PASSWORD "storm-password"

static void die(const char *what)
{
    fprintf(stderr, "sasl_storm_bench: %s\n", what);
    exit(1);
}

/* ---- the client side of SCRAM-SHA-256 ---------------------------------------- */
static uint8_t salted[32];
static bool have_salted;

static void req_handshake(kp_buf *q)
{
    kp_buf_reset(q);
    kp_req_hdr_write(q, KP_API_SASL_HANDSHAKE, 1, 1, "storm");
    kp_wr_string(q, "SCRAM-SHA-256", -1);
}

static void req_authenticate(kp_buf *q, const char *tok, size_t n)
{
    kp_buf_reset(q);
    kp_req_hdr_write(q, KP_API_SASL_AUTHENTICATE, 1, 2, "storm");
    kp_wr_bytes(q, tok, (int32_t)n);
}

/* SaslHandshake v1 answer: its ErrorCode. */
static int handshake_error(const kp_buf *r)
{
    kp_rd rd;
    kp_rd_init(&rd, r->data, r->len);
    kp_rd_i32(&rd);
    return kp_rd_i16(&rd);
}

/* SaslAuthenticate v1 answer: ErrorCode, AuthBytes copied into tok. */
static int authenticate_answer(const kp_buf *r, char *tok, size_t cap)
{
    kp_rd rd;
    kp_rd_init(&rd, r->data, r->len);
    kp_rd_i32(&rd);
    int err = kp_rd_i16(&rd);
    kp_rd_string(&rd);
    kp_str b = kp_rd_bytes(&rd);
    if (rd.err || b.len < 0 || (size_t)b.len >= cap)
        return err ? err : -1;
    memcpy(tok, b.p, (size_t)b.len);
    tok[b.len] = 0;
    return err;
}

typedef struct login {
    int fd;
    char cnonce[32];
    char first_bare[96];
    char tok[512];
} login;

static void client_first(login *l)
{
    static unsigned long seq;
    snprintf(l->cnonce, sizeof l->cnonce, "storm%lu%08x", ++seq, (unsigned)rand());
    snprintf(l->first_bare, sizeof l->first_bare, "n=" USER ",r=%s", l->cnonce);
    snprintf(l->tok, sizeof l->tok, "n,,%s", l->first_bare);
}

/* From server-first in l->tok, the client-final into l->tok. */
static int client_final(login *l)
{
    char sf[512];
    snprintf(sf, sizeof sf, "%s", l->tok);
    char *r = strstr(sf, "r="), *s = strstr(sf, ",s="), *i = strstr(sf, ",i=");
    if (!r || !s || !i)
        return -1;
    char nonce[200];
    snprintf(nonce, sizeof nonce, "%.*s", (int)(s - r - 2), r + 2);
    if (!have_salted) {
        uint8_t salt[64];
        int n = kp_scram_b64_decode(s + 3, (size_t)(i - s - 3), salt, sizeof salt);
        if (n <= 0 || kp_scram_salted_password(SCRAM_SHA_256, PASSWORD, strlen(PASSWORD), salt,
                                            (size_t)n, atoi(i + 3), salted))
            return -1;
        have_salted = true;
    }
    char wp[256], am[1024];
    snprintf(wp, sizeof wp, "c=biws,r=%s", nonce);
    int an = snprintf(am, sizeof am, "%s,%s,%s", l->first_bare, sf, wp);
    uint8_t ck[32], sk[32], sig[32], proof[32];
    unsigned int len;
    HMAC(EVP_sha256(), salted, 32, (const uint8_t *)"Client Key", 10, ck, &len);
    EVP_Digest(ck, 32, sk, &len, EVP_sha256(), NULL);
    HMAC(EVP_sha256(), sk, 32, (const uint8_t *)am, (size_t)an, sig, &len);
    for (int k = 0; k < 32; k++)
        proof[k] = ck[k] ^ sig[k];
    char p64[64];
    kp_scram_b64_encode(proof, 32, p64, sizeof p64);
    snprintf(l->tok, sizeof l->tok, "%s,p=%s", wp, p64);
    return 0;
}

/* One blocking login on fd: 0 or -1. */
static int login_blocking(int fd)
{
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    login l = { .fd = fd };
    int rc = -1;
    req_handshake(&q);
    if (bench_roundtrip(fd, &q, &r) || handshake_error(&r))
        goto out;
    client_first(&l);
    req_authenticate(&q, l.tok, strlen(l.tok));
    if (bench_roundtrip(fd, &q, &r) || authenticate_answer(&r, l.tok, sizeof l.tok) ||
        client_final(&l))
        goto out;
    req_authenticate(&q, l.tok, strlen(l.tok));
    if (bench_roundtrip(fd, &q, &r) || authenticate_answer(&r, l.tok, sizeof l.tok))
        goto out;
    rc = 0;
out:
    kp_buf_free(&q);
    kp_buf_free(&r);
    return rc;
}

/* ---- the normal client ---------------------------------------------------------- */
static atomic_int phase;              /* 0 before, 1 storm, 2 stop */
static double max_lat[2], sum_lat[2];
static long nreq[2];
static int port;

static void *normal_client(void *arg)
{
    (void)arg;
    int fd = bench_connect(port);
    if (fd < 0 || login_blocking(fd))
        die("normal client: cannot log in");
    bench_set_timeout(fd, 30);
    if (bench_create_topic(fd, "storm-normal", 1, NULL))
        die("normal client: cannot create its topic");
    kp_buf batch, q, r;
    if (bench_batch(&batch, 10, 100, 'n'))
        die("cannot build a batch");
    kp_buf_init(&q);
    kp_buf_init(&r);
    bench_produce_req(&q, 7, "normal", "storm-normal", 1, &batch);
    int ph;
    while ((ph = atomic_load(&phase)) < 2) {
        double t0 = bench_now();
        if (bench_roundtrip(fd, &q, &r) || bench_produce_error(&r))
            die("normal client: produce failed");
        double lat = bench_now() - t0;
        if (lat > max_lat[ph])
            max_lat[ph] = lat;
        sum_lat[ph] += lat;
        nreq[ph]++;
        usleep(2000);
    }
    close(fd);
    kp_buf_free(&batch);
    kp_buf_free(&q);
    kp_buf_free(&r);
    return NULL;
}

/* ---- setup: a user through the admin endpoint's SQL ------------------------------- */
static void add_user(int admin_port)
{
    const char *sql = "INSERT INTO scram_credentials (name, mechanism, password) "
                      "VALUES ('" USER "', 'SCRAM-SHA-256', '" PASSWORD "')";
    char req[512];
    int n = snprintf(req, sizeof req, "POST /sql HTTP/1.0\r\nHost: x\r\nContent-Length: %zu\r\n"
                     "\r\n%s", strlen(sql), sql);
    int fd = -1;
    for (int i = 0; i < 100 && (fd = bench_connect(admin_port)) < 0; i++)
        usleep(20000);
    if (fd < 0 || bench_write_all(fd, req, (size_t)n))
        die("cannot reach the admin endpoint");
    char resp[256] = "";
    ssize_t got = read(fd, resp, sizeof resp - 1);
    close(fd);
    if (got < 12 || strncmp(resp + 9, "200", 3))
        die("cannot add the SCRAM user through SQL");
}

static void recv_or_die(int fd, kp_buf *r, const char *what)
{
    if (bench_recv_frame(fd, r)) {
        fprintf(stderr, "sasl_storm_bench: %s: connection lost\n", what);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    if (n < 1)
        die("usage: sasl_storm_bench [logins]");
    bench_catch_signals(300);
    /* N sockets here and N in the broker (which inherits the limit). */
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < (rlim_t)n * 2 + 100) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    bench_broker b = { 0 };
    b.port = port = bench_free_port();
    int admin_port = bench_free_port();
    char listen[80], admin[80];
    snprintf(listen, sizeof listen, "listeners=SASL_PLAINTEXT://127.0.0.1:%d", port);
    snprintf(admin, sizeof admin, "admin.listeners=http://127.0.0.1:%d", admin_port);
    const char *extra[] = { listen, admin, NULL };
    bench_broker_start(&b, extra);
    add_user(admin_port);

    pthread_t th;
    pthread_create(&th, NULL, normal_client, NULL);
    usleep(1500000);                           /* the "before" figures */

    login *ls = calloc((size_t)n, sizeof *ls);
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    atomic_store(&phase, 1);
    double t0 = bench_now();
    for (int i = 0; i < n; i++) {
        if ((ls[i].fd = bench_connect(port)) < 0)
            die("storm: cannot connect");
        bench_set_timeout(ls[i].fd, 60);
        req_handshake(&q);
        if (bench_send_frame(ls[i].fd, &q))
            die("storm: send");
    }
    for (int i = 0; i < n; i++) {
        recv_or_die(ls[i].fd, &r, "handshake");
        if (handshake_error(&r))
            die("storm: handshake refused");
        client_first(&ls[i]);
        req_authenticate(&q, ls[i].tok, strlen(ls[i].tok));
        if (bench_send_frame(ls[i].fd, &q))
            die("storm: send");
    }
    for (int i = 0; i < n; i++) {
        recv_or_die(ls[i].fd, &r, "client-first");
        if (authenticate_answer(&r, ls[i].tok, sizeof ls[i].tok) || client_final(&ls[i]))
            die("storm: server-first refused");
        req_authenticate(&q, ls[i].tok, strlen(ls[i].tok));
        if (bench_send_frame(ls[i].fd, &q))
            die("storm: send");
    }
    int ok = 0;
    for (int i = 0; i < n; i++) {
        recv_or_die(ls[i].fd, &r, "client-final");
        ok += authenticate_answer(&r, ls[i].tok, sizeof ls[i].tok) == 0 &&
              !strncmp(ls[i].tok, "v=", 2);
    }
    double storm = bench_now() - t0;
    atomic_store(&phase, 2);
    pthread_join(th, NULL);
    double cpu = bench_cpu_seconds(b.pid);
    for (int i = 0; i < n; i++)
        close(ls[i].fd);
    printf("sasl_storm: %d SCRAM-SHA-256 logins at once: %d served in %.3f s "
           "(%.0f logins/s); broker CPU %.2f s in all\n", n, ok, storm, ok / storm, cpu);
    printf("sasl_storm: normal client's produce (acks=1): before the storm max %.1f ms, "
           "mean %.2f ms (%ld requests); during it max %.1f ms, mean %.2f ms (%ld requests)\n",
           max_lat[0] * 1e3, nreq[0] ? sum_lat[0] / (double)nreq[0] * 1e3 : 0.0, nreq[0],
           max_lat[1] * 1e3, nreq[1] ? sum_lat[1] / (double)nreq[1] * 1e3 : 0.0, nreq[1]);
    bench_broker_stop(&b);
    bench_broker_cleanup(&b);
    free(ls);
    kp_buf_free(&q);
    kp_buf_free(&r);
    return ok == n ? 0 : 1;
}
