/*
 * Produce and fetch over TLS as a ratio of plaintext, same run, same
 * broker (issue 18's TLS figure).
 *
 *   build/bench/rdkafka_tls_bench [path/to/sluiced] [messages]
 *       (sluiced also from $SLUICED; default build/sluiced; 1,000,000)
 *
 * One sluiced with a PLAINTEXT and an SSL listener (a CA and a broker
 * certificate made with the openssl command in the scratch directory,
 * RSA 2048).  Per listener: N messages of 100 bytes produced through
 * librdkafka (linger.ms=5, acks=1, no compression) into a topic of its
 * own, then all N consumed from the beginning.  Printed: msgs/s and MB/s
 * and broker CPU per phase, TLS/plaintext ratios, and whether the kernel
 * offers kernel TLS (the "tls" TCP ULP) — with it, sluiced sends fetches
 * with sendfile through kTLS; without it, SSL_write encrypts from the
 * mmapped segment (daemon/net/net_server.c inv. 8).
 */
#include "bench/bench_rdkafka.h"

#include "daemon/security/sec_tls.h"

static void report(const char *what, const char *who, bench_rk_phase p)
{
    double mb = (double)p.msgs * BENCH_RK_MSG_SIZE / 1e6;
    printf("%-8s %-9s %9ld msgs in %6.2f s: %10.0f msgs/s %7.1f MB/s   broker CPU %.2f s "
           "= %.1f CPU-s/GB\n", what, who, p.msgs, p.secs, p.msgs / p.secs, mb / p.secs,
           p.cpu, p.cpu / (mb / 1000));
}

static void sh(const char *cmd)
{
    if (system(cmd) != 0) {
        fprintf(stderr, "failed: %s\n", cmd);
        bench_kill_live();
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1)
        setenv("SLUICED", argv[1], 1);
    long n = argc > 2 ? atol(argv[2]) : 1000000;
    bench_broker b = { 0 };
    bench_mkdtemp(b.dir, sizeof b.dir, "sluice-tls-bench");
    char cmd[2048], ca[512], pem[512], lst[160], ks[600], ts[600];
    snprintf(cmd, sizeof cmd,
             "cd %s && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem "
             "-days 2 -subj /CN=bench-ca 2>/dev/null && "
             "openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr "
             "-subj /CN=localhost 2>/dev/null && "
             "echo subjectAltName=DNS:localhost,IP:127.0.0.1 > san.ext && "
             "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "-out srv.crt -days 2 -extfile san.ext 2>/dev/null && cat srv.crt srv.key > srv.pem",
             b.dir);
    sh(cmd);
    snprintf(ca, sizeof ca, "%s/ca.pem", b.dir);
    snprintf(pem, sizeof pem, "%s/srv.pem", b.dir);
    b.port = bench_free_port();
    int tls_port = bench_free_port();
    snprintf(lst, sizeof lst, "listeners=PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d", b.port,
             tls_port);
    snprintf(ks, sizeof ks, "ssl.keystore.location=%s", pem);
    snprintf(ts, sizeof ts, "ssl.truststore.location=%s", ca);
    snprintf(b.log, sizeof b.log, "%s.log", b.dir);
    const char *const extra[] = { lst, ks, ts, "auto.create.topics.enable=false", NULL };
    bench_broker_start(&b, extra);
    int fd = bench_connect(b.port);
    const char *const tcfg[] = { "segment.bytes", "1073741824", NULL };
    if (fd < 0 || bench_create_topic(fd, "bench-plain", 1, tcfg) != 0 ||
        bench_create_topic(fd, "bench-tls", 1, tcfg) != 0) {
        fprintf(stderr, "cannot create the topics\n");
        bench_broker_cleanup(&b);
        return 1;
    }
    close(fd);

    char bs[64];
    long pn = 0, tn = 0;
    snprintf(bs, sizeof bs, "127.0.0.1:%d", b.port);
    bench_rk_phase pp = bench_rk_produce(bs, "bench-plain", n, b.pid);
    bench_rk_phase pc = bench_rk_consume(bs, "bench-plain", &pn, b.pid);

    const char *const ssl_conf[] = { "security.protocol", "ssl", "ssl.ca.location", ca, NULL };
    bench_rk_extra = ssl_conf;
    snprintf(bs, sizeof bs, "127.0.0.1:%d", tls_port);
    bench_rk_phase tp = bench_rk_produce(bs, "bench-tls", n, b.pid);
    bench_rk_phase tc = bench_rk_consume(bs, "bench-tls", &tn, b.pid);
    bench_rk_extra = NULL;
    bench_broker_cleanup(&b);

    bool ktls = sec_tls_kernel_available();
    printf("librdkafka %s, %s; %ld messages of %d bytes, linger.ms=5 acks=1, 1 partition\n",
           rd_kafka_version_str(), OpenSSL_version(OPENSSL_VERSION), n, BENCH_RK_MSG_SIZE);
    printf("kernel TLS (tcp ULP \"tls\"): %s\n", ktls
           ? "available: sluiced sends fetches through kTLS (sendfile stays zero-copy)"
           : "not available: sluiced encrypts fetches from mmapped segments with SSL_write");
    report("produce", "plaintext", pp);
    report("produce", "TLS", tp);
    report("consume", "plaintext", pc);
    report("consume", "TLS", tc);
    printf("ratio TLS/plaintext: produce %.2f, fetch %.2f (msgs/s); broker CPU per message "
           "produce %.2fx, fetch %.2fx\n",
           (tp.msgs / tp.secs) / (pp.msgs / pp.secs), (tc.msgs / tc.secs) / (pc.msgs / pc.secs),
           (tp.cpu / tp.msgs) / (pp.cpu / pp.msgs), (tc.cpu / tc.msgs) / (pc.cpu / pc.msgs));
    return (pp.msgs == n && tp.msgs == n && pc.msgs == n && tc.msgs == n) ? 0 : 1;
}
