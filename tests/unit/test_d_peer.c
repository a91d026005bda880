/*
 * test_d_peer — requests to another broker (daemon/replication/repl_peer.c)
 * through a real libevent loop against a small TCP peer in a thread of the
 * test: it reads each request with the broker's own header parser and
 * answers by what the body asks ("echo…": at once, then every held one
 * oldest first; "hold…": later; "silent…": never; "close…": closes the
 * connection; "huge…": a frame header of 2 GiB).  An answer's body is the
 * request's body, so a caller can check it got its own answer back.
 */
#include <arpa/inet.h>
#include <check.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/broker.h"
#include "daemon/replication/repl_isr.h"
#include "daemon/replication/repl_peer.h"
#include "daemon/view/view.h"
#include "tests/unit/unit_run.h"

#define PEER_ID 2
#define HELD_MAX 16

static int lfd = -1, port;
static pthread_t server;
static bk_broker b;
static bk_config cfg;
static repl_cluster repl;
static int connections;              /* accepted by the test peer */

static int read_full(int fd, uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

typedef struct held {
    int32_t corrid;
    bool flexible;
    uint8_t body[256];
    size_t len;
} held;

static void answer(int fd, const held *h)
{
    kp_buf out;
    kp_buf_init(&out);
    size_t frame = kp_wr_i32_placeholder(&out);
    kp_resp_hdr_write(&out, h->corrid, h->flexible);
    kp_wr_raw(&out, h->body, h->len);
    kp_wr_i32_at(&out, frame, (int32_t)(out.len - frame - 4));
    ck_assert_int_eq(write(fd, out.data, out.len), (ssize_t)out.len);
    kp_buf_free(&out);
}

static bool sasl_server;              /* the peer wants a PLAIN login first */

/* SaslHandshake v1 and SaslAuthenticate v2 (PLAIN: "\0peer\0secret") as
 * a broker answers them; false: the request is not the login's next step. */
static bool sasl_answer(int fd, const kp_req_hdr *h, kp_rd *r, bool *logged_in)
{
    held x = { .corrid = h->CorrelationId, .flexible = kp_resp_hdr_flexible(h) };
    kp_buf body;
    kp_buf_init(&body);
    if (h->RequestApiKey == KP_API_SASL_HANDSHAKE && h->RequestApiVersion == 1) {
        kp_wr_i16(&body, 0);
        kp_wr_i32(&body, 1);
        kp_wr_string(&body, "PLAIN", 5);
    } else if (h->RequestApiKey == KP_API_SASL_AUTHENTICATE && h->RequestApiVersion == 2) {
        static const char want[] = "\0peer\0secret";
        uint64_t n = kp_rd_uvarint(r);
        if (n != sizeof want || (size_t)(r->end - r->p) < n - 1 ||
            memcmp(r->p, want, n - 1) != 0)
            return false;
        kp_wr_i16(&body, 0);
        kp_wr_uvarint(&body, 0);                     /* ErrorMessage null */
        kp_wr_uvarint(&body, 1);                     /* AuthBytes empty */
        kp_wr_i64(&body, 0);                         /* SessionLifetimeMs */
        kp_wr_tags_empty(&body);
        *logged_in = true;
    } else {
        return false;
    }
    memcpy(x.body, body.data, body.len);
    x.len = body.len;
    kp_buf_free(&body);
    answer(fd, &x);
    return true;
}

static void serve(int fd)
{
    held hold[HELD_MAX];
    int nheld = 0;
    bool logged_in = false;
    uint8_t buf[4096];
    for (;;) {
        uint8_t hdr[4];
        if (read_full(fd, hdr, 4) != 0)
            return;
        uint32_t size = (uint32_t)hdr[0] << 24 | hdr[1] << 16 | hdr[2] << 8 | hdr[3];
        if (size > sizeof buf || read_full(fd, buf, size) != 0)
            return;
        kp_rd r;
        kp_req_hdr h;
        kp_rd_init(&r, buf, size);
        if (kp_req_hdr_read(&r, &h) != 0)
            return;
        if (sasl_server && !logged_in) {
            if (!sasl_answer(fd, &h, &r, &logged_in))
                return;                  /* anything else first: closed */
            continue;
        }
        held x = { .corrid = h.CorrelationId, .flexible = kp_resp_hdr_flexible(&h) };
        x.len = (size_t)(r.end - r.p);
        if (x.len > sizeof x.body)
            return;
        memcpy(x.body, r.p, x.len);
        if (x.len >= 4 && memcmp(x.body, "hold", 4) == 0 && nheld < HELD_MAX) {
            hold[nheld++] = x;
        } else if (x.len >= 5 && memcmp(x.body, "close", 5) == 0) {
            return;
        } else if (x.len >= 4 && memcmp(x.body, "huge", 4) == 0) {
            uint8_t big[8] = { 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1 };
            ck_assert_int_eq(write(fd, big, sizeof big), (ssize_t)sizeof big);
        } else if (x.len >= 4 && memcmp(x.body, "echo", 4) == 0) {
            answer(fd, &x);
            for (int i = 0; i < nheld; i++)
                answer(fd, &hold[i]);
            nheld = 0;
        }                                /* "silent": never answered */
    }
}

static void *server_main(void *arg)
{
    (void)arg;
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            return NULL;
        __atomic_add_fetch(&connections, 1, __ATOMIC_SEQ_CST);
        serve(fd);
        close(fd);
    }
}

static void setup(void)
{
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t alen = sizeof a;
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(lfd, 8), 0);
    ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
    port = ntohs(a.sin_port);
    connections = 0;
    ck_assert_int_eq(pthread_create(&server, NULL, server_main, NULL), 0);

    char err[256];
    bk_config_init(&cfg);
    ck_assert_int_eq(bk_config_set(&cfg, "listeners", "PLAINTEXT://127.0.0.1:19092", err,
                                   sizeof err), 0);
    ck_assert_int_eq(bk_config_set(&cfg, "broker.id", "1", err, sizeof err), 0);
    ck_assert_int_eq(bk_config_finish(&cfg, err, sizeof err), 0);
    memset(&b, 0, sizeof b);
    memset(&repl, 0, sizeof repl);
    b.cfg = &cfg;
    b.base = event_base_new();
    b.repl = &repl;
    view_cluster_start(&b);
    bk_view_broker *live = calloc(2, sizeof *live);
    live[0].id = 1;
    live[1].id = PEER_ID;
    snprintf(live[1].host, sizeof live[1].host, "127.0.0.1");
    live[1].port = port;
    view_set_brokers(&b, live, 2);
}

static void teardown(void)
{
    repl_peers_stop(&b);
    view_cluster_stop(&b);
    event_base_free(b.base);
    bk_config_free(&cfg);
    shutdown(lfd, SHUT_RDWR);
    close(lfd);
    pthread_join(server, NULL);
}

/* ---- calls and their answers ------------------------------------------------------ */

typedef struct answer_rec {
    int16_t error;
    char body[64];
    int calls;                       /* done ran this many times */
} answer_rec;

static int answered, expected;
static bool in_call;

static void on_done(void *arg, int16_t error, kp_rd *body)
{
    answer_rec *a = arg;
    ck_assert(!in_call);                             /* never from inside the call */
    a->error = error;
    a->calls++;
    if (body) {
        size_t n = (size_t)(body->end - body->p);
        ck_assert_uint_lt(n, sizeof a->body);
        memcpy(a->body, body->p, n);
        a->body[n] = 0;
    } else {
        ck_assert_int_ne(error, KP_NONE);
    }
    if (++answered == expected)
        event_base_loopbreak(b.base);
}

static void call(int32_t id, int16_t api, int16_t version, const char *body, int64_t timeout_ms,
                 answer_rec *a)
{
    in_call = true;
    repl_peer_call(&b, id, api, version, (const uint8_t *)body, strlen(body), timeout_ms,
                   on_done, a);
    in_call = false;
}

/* Runs the loop until `n` answers in all came (or 10 s passed). */
static void run_until(int n)
{
    expected = n;
    struct timeval tv = { 10, 0 };
    event_base_loopexit(b.base, &tv);
    if (answered < expected)
        event_base_dispatch(b.base);
    ck_assert_int_eq(answered, expected);
}

START_TEST(test_answers_reach_their_callers_whatever_their_order)
{
    uint64_t sent0, failed0, sent, failed;
    repl_peer_counters(&sent0, &failed0);
    answered = 0;
    answer_rec a[4] = { 0 };
    /* EndTxn v3 is flexible (header v2 out, response header v1 back);
     * v0 is not; ApiVersions v3 answers with header v0 although flexible. */
    call(PEER_ID, KP_API_END_TXN, 3, "hold-first", 5000, &a[0]);
    call(PEER_ID, KP_API_END_TXN, 0, "hold-second", 5000, &a[1]);
    call(PEER_ID, KP_API_API_VERSIONS, 3, "hold-third", 5000, &a[2]);
    call(PEER_ID, KP_API_WRITE_TXN_MARKERS, 1, "echo-last", 5000, &a[3]);
    ck_assert_int_eq(answered, 0);
    run_until(4);
    const char *want[4] = { "hold-first", "hold-second", "hold-third", "echo-last" };
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(a[i].calls, 1);
        ck_assert_int_eq(a[i].error, KP_NONE);
        ck_assert_str_eq(a[i].body, want[i]);
    }
    ck_assert_int_eq(connections, 1);                /* one connection per peer */
    repl_peer_counters(&sent, &failed);
    ck_assert_uint_eq(sent - sent0, 4);              /* /metrics */
    ck_assert_uint_eq(failed - failed0, 0);
}
END_TEST

START_TEST(test_a_broker_not_alive_is_not_available)
{
    answered = 0;
    answer_rec a = { 0 };
    call(7, KP_API_END_TXN, 3, "echo", 5000, &a);
    ck_assert_int_eq(a.calls, 0);
    run_until(1);
    ck_assert_int_eq(a.error, KP_BROKER_NOT_AVAILABLE);
    ck_assert_int_eq(connections, 0);
}
END_TEST

START_TEST(test_an_unanswered_call_times_out_alone_while_the_peer_answers)
{
    answered = 0;
    answer_rec a[3] = { 0 };
    call(PEER_ID, KP_API_END_TXN, 3, "silent", 2000, &a[0]);
    call(PEER_ID, KP_API_END_TXN, 3, "echo-meanwhile", 5000, &a[1]);
    run_until(2);
    ck_assert_int_eq(a[1].error, KP_NONE);
    ck_assert_int_eq(a[0].error, KP_REQUEST_TIMED_OUT);
    call(PEER_ID, KP_API_END_TXN, 3, "echo-after", 5000, &a[2]);
    run_until(3);
    ck_assert_int_eq(a[2].error, KP_NONE);
    ck_assert_str_eq(a[2].body, "echo-after");
    ck_assert_int_eq(a[0].calls, 1);
    ck_assert_int_eq(connections, 1);                /* the connection stayed */
}
END_TEST

/* Nothing back at all since the call went out: the connection is taken for
 * dead, every other waiting call fails, and the next call reconnects. */
START_TEST(test_a_silent_connection_is_dropped_at_a_timeout)
{
    answered = 0;
    answer_rec a[3] = { 0 };
    call(PEER_ID, KP_API_END_TXN, 3, "silent-short", 200, &a[0]);
    call(PEER_ID, KP_API_END_TXN, 3, "silent-long", 60000, &a[1]);
    run_until(2);
    ck_assert_int_eq(a[0].error, KP_REQUEST_TIMED_OUT);
    ck_assert_int_eq(a[1].error, KP_NETWORK_EXCEPTION);
    call(PEER_ID, KP_API_END_TXN, 3, "echo-after", 5000, &a[2]);
    run_until(3);
    ck_assert_int_eq(a[2].error, KP_NONE);
    ck_assert_str_eq(a[2].body, "echo-after");
    ck_assert_int_eq(connections, 2);
}
END_TEST

START_TEST(test_a_lost_connection_fails_every_waiting_call_then_reconnects)
{
    uint64_t sent0, failed0, sent, failed;
    repl_peer_counters(&sent0, &failed0);
    answered = 0;
    answer_rec a[4] = { 0 };
    call(PEER_ID, KP_API_END_TXN, 3, "hold-a", 5000, &a[0]);
    call(PEER_ID, KP_API_END_TXN, 3, "silent-b", 5000, &a[1]);
    call(PEER_ID, KP_API_END_TXN, 3, "close", 5000, &a[2]);
    run_until(3);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(a[i].error, KP_NETWORK_EXCEPTION);
    call(PEER_ID, KP_API_END_TXN, 3, "echo-again", 5000, &a[3]);
    run_until(4);
    ck_assert_int_eq(a[3].error, KP_NONE);
    ck_assert_str_eq(a[3].body, "echo-again");
    ck_assert_int_eq(connections, 2);
    repl_peer_counters(&sent, &failed);
    ck_assert_uint_eq(sent - sent0, 4);
    ck_assert_uint_eq(failed - failed0, 3);
}
END_TEST

START_TEST(test_an_impossible_frame_size_fails_the_connection)
{
    answered = 0;
    answer_rec a = { 0 };
    call(PEER_ID, KP_API_END_TXN, 3, "huge", 5000, &a);
    run_until(1);
    ck_assert_int_eq(a.error, KP_NETWORK_EXCEPTION);
}
END_TEST

START_TEST(test_stop_answers_every_waiting_call)
{
    answered = 0;
    answer_rec a[2] = { 0 };
    call(PEER_ID, KP_API_END_TXN, 3, "silent-1", 60000, &a[0]);
    call(PEER_ID, KP_API_END_TXN, 3, "silent-2", 60000, &a[1]);
    struct timeval tv = { 0, 200000 };               /* sent, not answered */
    event_base_loopexit(b.base, &tv);
    event_base_dispatch(b.base);
    ck_assert_int_eq(answered, 0);
    expected = 3;
    repl_peers_stop(&b);
    ck_assert_int_eq(answered, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(a[i].calls, 1);
        ck_assert_int_eq(a[i].error, KP_BROKER_NOT_AVAILABLE);
    }
}
END_TEST

/* A SASL_PLAINTEXT inter-broker listener: calls made before the login
 * wait for it (the peer closes on anything else first), then go out. */
START_TEST(test_calls_wait_for_the_sasl_login)
{
    char err[256];
    static const char *const kv[][2] = {
        { "listeners", "PLAINTEXT://127.0.0.1:19092,INTERNAL://127.0.0.1:19093" },
        { "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT" },
        { "inter.broker.listener.name", "INTERNAL" },
        { "zookeeper.connect", "127.0.0.1:2181" },   /* cluster mode: never dialled */
        { "sasl.mechanism.inter.broker.protocol", "PLAIN" },
        { "listener.name.internal.plain.sasl.jaas.config",
          "org.apache.kafka.common.security.plain.PlainLoginModule required "
          "username=\"peer\" password=\"secret\";" },
    };
    for (size_t i = 0; i < sizeof kv / sizeof *kv; i++)
        ck_assert_msg(bk_config_set(&cfg, kv[i][0], kv[i][1], err, sizeof err) == 0, "%s", err);
    ck_assert_msg(bk_config_finish(&cfg, err, sizeof err) == 0, "%s", err);
    bk_view_broker *live = calloc(2, sizeof *live);
    live[0].id = 1;
    live[1].id = PEER_ID;
    live[1].neps = 1;
    snprintf(live[1].eps[0].name, sizeof live[1].eps[0].name, "INTERNAL");
    snprintf(live[1].eps[0].host, sizeof live[1].eps[0].host, "127.0.0.1");
    live[1].eps[0].port = port;
    view_set_brokers(&b, live, 2);
    sasl_server = true;
    answered = 0;
    answer_rec a[2] = { 0 };
    call(PEER_ID, KP_API_END_TXN, 3, "hold-before", 5000, &a[0]);
    call(PEER_ID, KP_API_WRITE_TXN_MARKERS, 1, "echo-before", 5000, &a[1]);
    run_until(2);
    sasl_server = false;
    ck_assert_int_eq(a[0].error, KP_NONE);
    ck_assert_str_eq(a[0].body, "hold-before");
    ck_assert_int_eq(a[1].error, KP_NONE);
    ck_assert_str_eq(a[1].body, "echo-before");
    ck_assert_int_eq(connections, 1);
}
END_TEST

/* A call whose answer waits for the next loop turn is answered by a stop
 * that comes first (the loop may not run again). */
START_TEST(test_stop_answers_a_call_not_yet_answered)
{
    answered = 0;
    expected = 2;
    answer_rec a = { 0 };
    call(7, KP_API_END_TXN, 3, "echo", 5000, &a);    /* not alive: answered later */
    ck_assert_int_eq(a.calls, 0);
    repl_peers_stop(&b);
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(a.error, KP_BROKER_NOT_AVAILABLE);
    struct timeval tv = { 0, 100000 };
    event_base_loopexit(b.base, &tv);
    event_base_dispatch(b.base);
    ck_assert_int_eq(a.calls, 1);                    /* exactly once */
}
END_TEST

START_TEST(test_backoff_doubles_to_its_cap)
{
    ck_assert_int_eq(repl_peer_backoff_ms(0, 50, 1000), 0);
    ck_assert_int_eq(repl_peer_backoff_ms(1, 50, 1000), 50);
    ck_assert_int_eq(repl_peer_backoff_ms(2, 50, 1000), 100);
    ck_assert_int_eq(repl_peer_backoff_ms(5, 50, 1000), 800);
    ck_assert_int_eq(repl_peer_backoff_ms(6, 50, 1000), 1000);
    ck_assert_int_eq(repl_peer_backoff_ms(1000, 50, 1000), 1000);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_answers_reach_their_callers_whatever_their_order,
        test_a_broker_not_alive_is_not_available,
        test_an_unanswered_call_times_out_alone_while_the_peer_answers,
        test_a_silent_connection_is_dropped_at_a_timeout,
        test_a_lost_connection_fails_every_waiting_call_then_reconnects,
        test_an_impossible_frame_size_fails_the_connection,
        test_stop_answers_every_waiting_call,
        test_calls_wait_for_the_sasl_login,
        test_stop_answers_a_call_not_yet_answered,
        test_backoff_doubles_to_its_cap,
    };
    return unit_run("peer", "calls", tests, sizeof tests / sizeof *tests, setup, teardown, 30);
}
