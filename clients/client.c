/*
 * client.c — the handle core: the background I/O thread, broker
 * connections, request/response plumbing, ApiVersions negotiation, ops.
 *
 * Connection states (per sl_broker), with the function doing each step:
 *
 *   DOWN --conn_start--> CONNECTING --conn_established--> APIVERSIONS
 *     ^                                                      | handle_apiversions
 *     +------------- conn_fail (any error, timeout) ---------+--> UP
 *
 * Invariants:
 *   1. Requests are only encoded for an UP broker (the version is chosen
 *      from its ApiVersions answer), straight into b->out; the sl_req goes
 *      on b's wait FIFO, since Kafka answers in request order.
 *      Large regions (Produce record batches) are not copied into b->out
 *      but referenced (sl_req_ref) and written in place by sendmsg.
 *   2. A response whose correlation id is not the FIFO head is a protocol
 *      error: the connection is dropped.
 *   3. conn_fail calls every waiting request's callback with an error
 *      exactly once, in FIFO order, so modules can requeue in order.
 *   4. Only the I/O thread touches sockets.  It holds cl->lock except in
 *      poll(2), so callbacks and ticks run under the lock.
 *   5. Module deadlines are whole milliseconds of sl_now_ms (which
 *      truncates); the thread sleeps until exactly the start of the
 *      millisecond due (ppoll, ns), so a linger.ms or backoff expires on
 *      time instead of up to 1 ms late from rounding the sleep down to a
 *      poll(2) millisecond count measured from a truncated "now".
 *
 * ApiVersions: v3 first (flexible body, header v0 answer); on
 * UNSUPPORTED_VERSION or an unparsable answer, v0 (protocol/README.md §7.3).
 * Frames: read through a 64 KiB staging buffer; a frame larger than what
 * is staged gets its own allocation and is read into place (a fetch
 * response is never copied twice).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "clients/sl_int.h"
#include "kp_msgs.h"

#define SL_MAX_FRAME (256 << 20)
/* Before the login is done (TLS, ApiVersions, SASL) an answer is small: a
 * peer that is not a Kafka broker, or one not yet trusted, gets no 256 MiB
 * allocation out of us. */
#define SL_MAX_FRAME_LOGIN (1 << 20)

int64_t sl_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* For stamps taken per message (the consumer's poll): the coarse clock
 * reads the kernel's last tick without the TSC arithmetic. */
int64_t sl_coarse_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t sl_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t sl_deadline(int timeout_ms)
{
    return timeout_ms < 0 ? -1 : sl_now_ms() + timeout_ms;
}

void sl_log(sl_client *cl, int level, const char *fmt, ...)
{
    if (level > cl->conf.log_level)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (cl->conf.log_cb)
        cl->conf.log_cb(level, msg, cl->conf.opaque);
    else
        fprintf(stderr, "%%%d|libsluice|%s| %s\n", level, cl->name, msg);
}

void sl_frame_unref(sl_frame *f)
{
    if (f && --f->refs == 0)
        free(f);
}

void sl_wakeup(sl_client *cl)
{
    uint64_t one = 1;
    ssize_t n = write(cl->wake_fd, &one, sizeof one);
    (void)n;   /* EAGAIN: the counter is already non-zero, the thread will wake */
}

int sl_cond_wait_until(sl_client *cl, int64_t deadline)
{
    if (deadline < 0)
        return pthread_cond_wait(&cl->cond, &cl->lock);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t left = deadline - sl_now_ms();
    if (left <= 0)
        return ETIMEDOUT;
    ts.tv_sec += left / 1000;
    ts.tv_nsec += (left % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return pthread_cond_timedwait(&cl->cond, &cl->lock, &ts);
}

/* ---- brokers ---------------------------------------------------------- */

sl_broker *sl_broker_find(sl_client *cl, int32_t id)
{
    for (int i = 0; i < cl->n_brokers; i++)
        if (cl->brokers[i]->id == id)
            return cl->brokers[i];
    return NULL;
}

sl_broker *sl_broker_add(sl_client *cl, int32_t id, const char *host, int port)
{
    sl_broker *b = sl_broker_find(cl, id);
    if (b) {
        if (strcmp(b->host, host) != 0 || b->port != port) {
            char *h = strdup(host);
            if (h) {
                free(b->host);
                b->host = h;
                b->port = port;
            }
        }
        return b;
    }
    sl_broker **nb = realloc(cl->brokers, sizeof *nb * (size_t)(cl->n_brokers + 1));
    if (!nb)
        return NULL;
    cl->brokers = nb;
    b = calloc(1, sizeof *b);
    if (!b || !(b->host = strdup(host))) {
        free(b);
        return NULL;
    }
    b->id = id;
    b->port = port;
    b->fd = -1;
    b->state = SL_B_DOWN;
    b->backoff_ms = cl->conf.reconnect_backoff_ms;
    kp_buf_init(&b->out);
    cl->brokers[cl->n_brokers++] = b;
    return b;
}

int16_t sl_api_version(const sl_broker *b, int16_t api, int16_t lo, int16_t hi)
{
    if (api < 0 || api >= SL_API_MAX || b->vmax[api] < 0)
        return -1;
    int16_t v = hi < b->vmax[api] ? hi : b->vmax[api];
    return v >= lo && v >= b->vmin[api] ? v : -1;
}

sl_broker *sl_broker_ready(sl_client *cl, int32_t id)
{
    sl_broker *b = sl_broker_find(cl, id);
    if (!b)
        return NULL;
    if (b->state == SL_B_UP)
        return b;
    b->wanted = true;
    return NULL;
}

sl_broker *sl_any_broker(sl_client *cl)
{
    sl_broker *fallback = NULL;
    for (int i = 0; i < cl->n_brokers; i++) {
        sl_broker *b = cl->brokers[i];
        if (b->state == SL_B_UP) {
            if (b->id >= 0)
                return b;
            fallback = b;
        }
    }
    if (fallback)
        return fallback;
    /* Nothing is up: want the first known broker that may connect now,
     * bootstrap entries included, rotating so one dead address does not
     * block the others. */
    for (int i = 0; i < cl->n_brokers; i++) {
        sl_broker *b = cl->brokers[i];
        if (b->state != SL_B_DOWN)
            return NULL;           /* a connection is on its way */
    }
    int64_t now = sl_now_ms();
    for (int i = 0; i < cl->n_brokers; i++)
        if (cl->brokers[i]->next_connect <= now) {
            cl->brokers[i]->wanted = true;
            return NULL;
        }
    if (cl->n_brokers)
        cl->brokers[0]->wanted = true;
    return NULL;
}

/* ---- requests --------------------------------------------------------- */

kp_buf *sl_req_begin(sl_client *cl, sl_broker *b, int16_t api, int16_t ver)
{
    b->open_frame = kp_wr_i32_placeholder(&b->out);
    b->open_ref_bytes = b->ref_bytes;
    b->open_api = api;
    b->open_ver = ver;
    kp_req_hdr_write(&b->out, api, ver, cl->next_corrid, cl->conf.client_id);
    return &b->out;
}

void sl_req_end(sl_client *cl, sl_broker *b, sl_resp_cb *cb, void *ctx)
{
    size_t p = b->open_frame;
    kp_wr_i32_at(&b->out, p,
                 (int32_t)(b->out.len - p - 4 + b->ref_bytes - b->open_ref_bytes));
    int16_t api = b->open_api, ver = b->open_ver;
    int32_t corrid = cl->next_corrid++;
    if (cl->next_corrid < 0)
        cl->next_corrid = 0;
    if (!cb)
        return;
    sl_req *r = calloc(1, sizeof *r);
    if (!r) {
        cb(cl, b, SL_E_NOMEM, NULL, NULL, ver, ctx);
        return;
    }
    r->corrid = corrid;
    r->api = api;
    r->ver = ver;
    r->cb = cb;
    r->ctx = ctx;
    int64_t extra = api == KP_API_FETCH ? cl->conf.fetch_max_wait_ms : 0;
    if (api == KP_API_JOIN_GROUP)
        extra = cl->conf.max_poll_interval_ms;
    r->deadline = sl_now_ms() + cl->conf.request_timeout_ms + extra;
    if (b->wait_tail)
        b->wait_tail->next = r;
    else
        b->wait_head = r;
    b->wait_tail = r;
    b->n_wait++;
}

int sl_req_ref(sl_broker *b, const void *p, size_t len)
{
    if (b->n_refs == b->cap_refs) {
        int cap = b->cap_refs ? b->cap_refs * 2 : 16;
        sl_oref *n = realloc(b->refs, sizeof *n * (size_t)cap);
        if (!n) {
            kp_wr_raw(&b->out, p, len);
            return SL_E_NOMEM;
        }
        b->refs = n;
        b->cap_refs = cap;
    }
    b->refs[b->n_refs++] = (sl_oref){ b->out.len, p, len };
    b->ref_bytes += len;
    return 0;
}

static bool out_pending(const sl_broker *b)
{
    return b->out.len + b->ref_bytes > b->out_sent;
}

static void out_reset(sl_broker *b)
{
    if (b->state != SL_B_UP && b->out.data)   /* a SASL token (a password) may be there */
        OPENSSL_cleanse(b->out.data, b->out.len);
    kp_buf_reset(&b->out);
    b->n_refs = 0;
    b->ref_bytes = 0;
    b->out_sent = 0;
}

/* ---- connections ---------------------------------------------------------- */

void sl_conn_fail(sl_client *cl, sl_broker *b, int err, const char *why)
{
    if (b->state != SL_B_DOWN && err != SL_E_AUTHENTICATION)   /* that one is logged */
        sl_log(cl, err == SL_E_DESTROYED ? 7 : b->state == SL_B_UP ? 4 : 6,
               "%s:%d/%d: %s", b->host, b->port,
               b->id, why);
    sl_sec_close(b);
    if (b->fd >= 0)
        close(b->fd);
    b->fd = -1;
    b->state = SL_B_DOWN;
    out_reset(b);             /* before the callbacks: referenced batches may go */
    b->rlen = 0;
    if (b->rx) {
        free(b->rx);
        b->rx = NULL;
    }
    b->next_connect = sl_now_ms() + b->backoff_ms;
    b->backoff_ms = b->backoff_ms * 2 > cl->conf.reconnect_backoff_max_ms
                    ? cl->conf.reconnect_backoff_max_ms : b->backoff_ms * 2;
    if (b->backoff_ms < 10)
        b->backoff_ms = 10;
    sl_req *r = b->wait_head;
    b->wait_head = b->wait_tail = NULL;
    b->n_wait = 0;
    while (r) {
        sl_req *next = r->next;
        r->cb(cl, b, err, NULL, NULL, r->ver, r->ctx);
        free(r);
        r = next;
    }
    /* Leadership may have moved: learn it again. */
    sl_md_refresh(cl);
    pthread_cond_broadcast(&cl->cond);
}

static void send_apiversions(sl_client *cl, sl_broker *b)
{
    int16_t v = (int16_t)b->apiver_try;
    kp_ApiVersionsRequest q;
    kp_init_ApiVersionsRequest(&q);
    if (v >= 3) {
        q.ClientSoftwareName = kp_str_cstr("libsluice");
        q.ClientSoftwareVersion = kp_str_cstr(SL_VERSION_STR);
    }
    kp_enc_ApiVersionsRequest(sl_req_begin(cl, b, KP_API_API_VERSIONS, v), v, &q);
    extern sl_resp_cb sl_handle_apiversions;
    sl_req_end(cl, b, sl_handle_apiversions, NULL);
}

void sl_handle_apiversions(sl_client *cl, sl_broker *b, int err, sl_frame *f,
                           kp_rd *r, int16_t ver, void *ctx)
{
    (void)f; (void)ctx;
    if (err)
        return;                    /* conn_fail already ran */
    /* A broker that does not know our version answers with a v0-shaped
     * body and UNSUPPORTED_VERSION: that fails to decode as v3, and either
     * way the retry below asks again with v0. */
    kp_ApiVersionsResponse m;
    bool parsed = kp_dec_ApiVersionsResponse(r, ver, &m, &cl->arena) == 0;
    int16_t ec = parsed ? m.ErrorCode : -1;
    int16_t vmin[SL_API_MAX], vmax[SL_API_MAX];
    for (int i = 0; i < SL_API_MAX; i++)
        vmin[i] = vmax[i] = -1;
    for (int32_t i = 0; parsed && ec == 0 && i < m.ApiKeys_count; i++) {
        const kp_ApiVersionsResponse_ApiVersion *k = &m.ApiKeys[i];
        if (k->ApiKey >= 0 && k->ApiKey < SL_API_MAX) {
            vmin[k->ApiKey] = k->MinVersion;
            vmax[k->ApiKey] = k->MaxVersion;
        }
    }
    kp_arena_reset(&cl->arena);
    if (ec != 0) {
        sl_log(cl, 7, "%s:%d: ApiVersions v%d answer: error %d, %s", b->host, b->port, ver,
               ec, parsed ? "parsed" : "unparsable");
        if (b->apiver_try > 0) {
            b->apiver_try = 0;     /* protocol/README.md §7.3: retry with v0 */
            send_apiversions(cl, b);
            return;
        }
        sl_conn_fail(cl, b, SL_E_UNSUPPORTED, "ApiVersions failed");
        return;
    }
    memcpy(b->vmin, vmin, sizeof vmin);
    memcpy(b->vmax, vmax, sizeof vmax);
    sl_log(cl, 7, "%s:%d/%d: ApiVersions v%d", b->host, b->port, b->id, ver);
    if (!sl_sec_sasl_start(cl, b))     /* else the login ends in sl_conn_up */
        sl_conn_up(cl, b);
}

void sl_conn_up(sl_client *cl, sl_broker *b)
{
    b->state = SL_B_UP;
    b->backoff_ms = cl->conf.reconnect_backoff_ms;
    sl_log(cl, 7, "%s:%d/%d: up", b->host, b->port, b->id);
    pthread_cond_broadcast(&cl->cond);
}

/* TLS done (or none): ApiVersions. */
static void conn_apiversions(sl_client *cl, sl_broker *b)
{
    b->state = SL_B_APIVERSIONS;
    b->apiver_try = 3;
    send_apiversions(cl, b);
}

/* TCP connected: the TLS handshake (client_sec.c), or ApiVersions. */
static void conn_established(sl_client *cl, sl_broker *b)
{
    int rc = sl_sec_tls_start(cl, b);
    if (rc < 0)
        sl_conn_fail(cl, b, SL_E_NOMEM, "cannot start TLS");
    else if (rc == 0)
        conn_apiversions(cl, b);
    else if (sl_sec_tls_step(cl, b) == 1)
        conn_apiversions(cl, b);
}

/* recv(2) and sendmsg(2), through TLS on a secured connection. */
static ssize_t conn_recv(sl_client *cl, sl_broker *b, void *p, size_t n)
{
    return b->ssl ? sl_sec_read(cl, b, p, n) : recv(b->fd, p, n, 0);
}

static ssize_t conn_send(sl_client *cl, sl_broker *b, const struct iovec *iov, int n)
{
    if (b->ssl)
        return sl_sec_writev(cl, b, iov, n);
    struct msghdr mh = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n };
    return sendmsg(b->fd, &mh, MSG_NOSIGNAL);
}

static void conn_start(sl_client *cl, sl_broker *b)
{
    char port[16];
    snprintf(port, sizeof port, "%d", b->port);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct addrinfo *ai = NULL;
    b->state = SL_B_CONNECTING;    /* so conn_fail logs */
    int rc = getaddrinfo(b->host, port, &hints, &ai);
    if (rc != 0 || !ai) {
        char why[300];
        snprintf(why, sizeof why, "resolve failed: %s", gai_strerror(rc));
        sl_conn_fail(cl, b, SL_E_TRANSPORT, why);
        return;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(ai);
        sl_conn_fail(cl, b, SL_E_TRANSPORT, strerror(errno));
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (cl->conf.socket_send_buffer_bytes > 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &cl->conf.socket_send_buffer_bytes,
                   sizeof cl->conf.socket_send_buffer_bytes);
    b->fd = fd;
    rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc == 0)
        conn_established(cl, b);
    else if (errno != EINPROGRESS)
        sl_conn_fail(cl, b, SL_E_TRANSPORT, strerror(errno));
}

/* One complete frame: match it with the FIFO head and dispatch. */
static int dispatch(sl_client *cl, sl_broker *b, sl_frame *f)
{
    sl_req *r = b->wait_head;
    kp_rd rd;
    kp_rd_init(&rd, f->data, f->len);
    int32_t corrid = kp_rd_i32(&rd);
    if (!r || !kp_rd_ok(&rd) || corrid != r->corrid) {
        sl_frame_unref(f);
        sl_conn_fail(cl, b, SL_E_BAD_MSG, "response out of order");
        return -1;
    }
    b->wait_head = r->next;
    if (!b->wait_head)
        b->wait_tail = NULL;
    b->n_wait--;
    /* Non-flexible response header v0 is all we use, except ApiVersions
     * (always header v0 too). */
    if (r->api != KP_API_API_VERSIONS && r->ver >= kp_api_first_flexible(r->api))
        kp_rd_tags(&rd);
    r->cb(cl, b, 0, f, &rd, r->ver, r->ctx);
    kp_arena_reset(&cl->arena);    /* what the callback decoded is done with */
    free(r);
    sl_frame_unref(f);
    return b->fd < 0 ? -1 : 0;     /* the callback may have failed b */
}

static sl_frame *frame_new(size_t len)
{
    sl_frame *f = malloc(sizeof *f + len);
    if (f) {
        f->refs = 1;
        f->len = len;
    }
    return f;
}

/* One conn_recv for conn_read: the bytes read (> 0); -1 to try again
 * (EINTR); 0 to stop reading for now: nothing more until the socket is
 * readable (EAGAIN), or the connection failed (closed by the broker, an
 * error: sl_conn_fail done). */
static ssize_t conn_read_some(sl_client *cl, sl_broker *b, void *p, size_t len)
{
    ssize_t n = conn_recv(cl, b, p, len);
    if (n > 0)
        return n;
    if (n == 0) {
        sl_conn_fail(cl, b, SL_E_TRANSPORT, "connection closed by broker");
        return 0;
    }
    if (errno == EINTR)
        return -1;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
        sl_conn_fail(cl, b, SL_E_TRANSPORT, strerror(errno));
    return 0;
}

static void conn_read(sl_client *cl, sl_broker *b)
{
    for (;;) {
        if (b->rx) {               /* large frame: read into place */
            ssize_t n = conn_read_some(cl, b, b->rx->data + b->rx_got, b->rx->len - b->rx_got);
            if (n < 0)
                continue;
            if (n == 0)
                return;
            b->rx_got += (size_t)n;
            if (b->rx_got < b->rx->len)
                continue;
            sl_frame *f = b->rx;
            b->rx = NULL;
            if (dispatch(cl, b, f) < 0)
                return;
            continue;
        }
        ssize_t n = conn_read_some(cl, b, b->rbuf + b->rlen, sizeof b->rbuf - b->rlen);
        if (n < 0)
            continue;
        if (n == 0)
            return;
        b->rlen += (size_t)n;
        size_t off = 0;
        while (b->rlen - off >= 4) {
            const uint8_t *p = b->rbuf + off;
            uint32_t len = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                           (uint32_t)p[2] << 8 | p[3];
            if (len < 4 || len > (b->state == SL_B_UP ? SL_MAX_FRAME : SL_MAX_FRAME_LOGIN)) {
                sl_conn_fail(cl, b, SL_E_BAD_MSG, "bad frame length");
                return;
            }
            sl_frame *f = frame_new(len);
            if (!f) {
                sl_conn_fail(cl, b, SL_E_NOMEM, "out of memory");
                return;
            }
            size_t have = b->rlen - off - 4;
            if (have >= len) {
                memcpy(f->data, p + 4, len);
                off += 4 + len;
                if (dispatch(cl, b, f) < 0)
                    return;
                continue;
            }
            memcpy(f->data, p + 4, have);
            b->rx = f;
            b->rx_got = have;
            off = b->rlen;
            break;
        }
        memmove(b->rbuf, b->rbuf + off, b->rlen - off);
        b->rlen -= off;
    }
}

/* Fills iov with the unwritten part of b's stream: out's bytes up to each
 * reference, the reference, ..., out's tail.  Returns the count (≤ max). */
static int out_iov(const sl_broker *b, struct iovec *iov, int max)
{
    size_t skip = b->out_sent, at = 0;
    int n = 0;
    for (int i = 0; i <= b->n_refs && n < max; i++) {
        size_t end = i < b->n_refs ? b->refs[i].at : b->out.len;
        const uint8_t *seg[2] = { b->out.data + at, i < b->n_refs ? b->refs[i].p : NULL };
        size_t len[2] = { end - at, i < b->n_refs ? b->refs[i].len : 0 };
        for (int k = 0; k < 2 && n < max; k++) {
            if (skip >= len[k]) {
                skip -= len[k];
                continue;
            }
            iov[n++] = (struct iovec){ (void *)(seg[k] + skip), len[k] - skip };
            skip = 0;
        }
        at = end;
    }
    return n;
}

static void conn_write(sl_client *cl, sl_broker *b)
{
    while (out_pending(b)) {
        struct iovec iov[64];
        ssize_t n = conn_send(cl, b, iov, out_iov(b, iov, 64));
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            sl_conn_fail(cl, b, SL_E_TRANSPORT, strerror(errno));
            return;
        }
        b->out_sent += (size_t)n;
    }
    out_reset(b);
}

/* ---- ops -------------------------------------------------------------------- */

void sl_op_submit(sl_client *cl, sl_op *op)
{
    op->next = cl->ops;
    cl->ops = op;
    sl_wakeup(cl);
}

void sl_op_finish(sl_client *cl, sl_op *op, int err, const char *fmt, ...)
{
    op->err = err;
    op->errstr[0] = 0;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(op->errstr, sizeof op->errstr, fmt, ap);
        va_end(ap);
    }
    op->done = true;
    if (op->abandoned || op->detached)
        op->free_fn(op);
    else
        pthread_cond_broadcast(&cl->cond);
}

int sl_op_wait(sl_client *cl, sl_op *op, int timeout_ms, char *errbuf, size_t size)
{
    int64_t deadline = sl_deadline(timeout_ms);
    while (!op->done) {
        if (sl_cond_wait_until(cl, deadline) == ETIMEDOUT && !op->done) {
            op->abandoned = true;
            sl_errbuf(errbuf, size, "timed out after %d ms", timeout_ms);
            return SL_E_TIMED_OUT;
        }
    }
    int err = op->err;
    if (err)
        sl_errbuf(errbuf, size, "%s", op->errstr[0] ? op->errstr : sl_err_name(err));
    op->free_fn(op);
    return err;
}

static void ops_run(sl_client *cl, int64_t now)
{
    sl_op **pp = &cl->ops;
    while (*pp) {
        sl_op *op = *pp;
        if (op->abandoned) {
            *pp = op->next;
            op->free_fn(op);
            continue;
        }
        if (cl->auth_err) {                /* client_sec.c inv. 1 */
            *pp = op->next;
            sl_op_finish(cl, op, cl->auth_err, "%s", cl->auth_msg);
            continue;
        }
        if (op->deadline > 0 && now >= op->deadline) {
            *pp = op->next;
            sl_op_finish(cl, op, SL_E_TIMED_OUT, "timed out");
            continue;
        }
        /* step may submit new ops (at the head), so unlink first. */
        *pp = op->next;
        if (op->step(cl, op, now) == 0) {
            op->next = *pp;
            *pp = op;
            pp = &op->next;
        }
    }
}

/* ---- the thread ------------------------------------------------------------- */

static void *io_main(void *arg)
{
    sl_client *cl = arg;
    struct pollfd *pfd = NULL;
    int pfd_cap = 0;
    pthread_mutex_lock(&cl->lock);
    while (!cl->terminate) {
        int64_t now = sl_now_ms();
        int64_t next = now + 1000;
        sl_md_tick(cl, now, &next);
        ops_run(cl, now);
        if (cl->prod)
            sl_prod_tick(cl, now, &next);
        if (cl->grp)
            sl_grp_tick(cl, now, &next);
        if (cl->cons)
            sl_cons_tick(cl, now, &next);
        now = sl_now_ms();
        if (cl->ops && next > now + 10)
            next = now + 10;

        if (pfd_cap < cl->n_brokers + 1) {
            struct pollfd *np = realloc(pfd, sizeof *np * (size_t)(cl->n_brokers + 8));
            if (!np) {
                pthread_mutex_unlock(&cl->lock);
                usleep(10000);
                pthread_mutex_lock(&cl->lock);
                continue;
            }
            pfd = np;
            pfd_cap = cl->n_brokers + 8;
        }
        pfd[0] = (struct pollfd){ .fd = cl->wake_fd, .events = POLLIN };
        int nfd = 1;
        for (int i = 0; i < cl->n_brokers; i++) {
            sl_broker *b = cl->brokers[i];
            if (b->state == SL_B_DOWN && b->wanted && !cl->auth_err) {
                if (b->next_connect <= now) {
                    b->wanted = false;
                    conn_start(cl, b);
                } else if (b->next_connect < next) {
                    next = b->next_connect;
                }
            }
            if (b->fd < 0)
                continue;
            if (b->wait_head && b->wait_head->deadline <= now) {
                sl_conn_fail(cl, b, SL_E_TIMED_OUT, "request timed out");
                continue;
            }
            if (b->state == SL_B_TLS) {
                if (b->tls_deadline <= now) {
                    sl_conn_fail(cl, b, SL_E_TIMED_OUT, "TLS handshake timed out");
                    continue;
                }
                if (b->tls_deadline < next)
                    next = b->tls_deadline;
            }
            if (b->wait_head && b->wait_head->deadline < next)
                next = b->wait_head->deadline;
            bool handshaking = b->state == SL_B_CONNECTING || b->state == SL_B_TLS;
            if (!handshaking && out_pending(b))
                conn_write(cl, b);
            if (!handshaking && b->fd >= 0 && b->ssl && SSL_pending(b->ssl) > 0)
                conn_read(cl, b);          /* client_sec.c inv. 2 */
            if (b->fd < 0)
                continue;
            short ev = POLLIN;
            if (b->state == SL_B_CONNECTING || b->tls_want_write ||
                (!handshaking && out_pending(b)))
                ev |= POLLOUT;
            pfd[nfd++] = (struct pollfd){ .fd = b->fd, .events = ev };
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t wait_ns = next * 1000000 - ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
        if (wait_ns < 0)
            wait_ns = 0;
        ts = (struct timespec){ .tv_sec = wait_ns / 1000000000, .tv_nsec = wait_ns % 1000000000 };
        pthread_mutex_unlock(&cl->lock);
        int rc = ppoll(pfd, (nfds_t)nfd, &ts, NULL);
        pthread_mutex_lock(&cl->lock);
        if (rc <= 0)
            continue;
        if (pfd[0].revents) {
            uint64_t v;
            ssize_t n = read(cl->wake_fd, &v, sizeof v);
            (void)n;
        }
        for (int i = 1; i < nfd; i++) {
            if (!pfd[i].revents)
                continue;
            sl_broker *b = NULL;
            for (int j = 0; j < cl->n_brokers; j++)
                if (cl->brokers[j]->fd == pfd[i].fd)
                    b = cl->brokers[j];
            if (!b)
                continue;
            if (b->state == SL_B_CONNECTING) {
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(b->fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err) {
                    sl_conn_fail(cl, b, SL_E_TRANSPORT, strerror(err));
                    continue;
                }
                conn_established(cl, b);
                continue;
            }
            if (b->state == SL_B_TLS) {
                if (sl_sec_tls_step(cl, b) == 1)
                    conn_apiversions(cl, b);
                continue;
            }
            /* Through TLS a read may wait for POLLOUT (and a write for
             * POLLIN): try both. */
            if (b->ssl || (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                conn_read(cl, b);
            if (b->fd >= 0 && (b->ssl || (pfd[i].revents & POLLOUT)) && out_pending(b))
                conn_write(cl, b);
        }
    }
    pthread_mutex_unlock(&cl->lock);
    free(pfd);
    return NULL;
}

/* ---- lifecycle --------------------------------------------------------------- */

static int parse_bootstrap(sl_client *cl, const char *list, char *errbuf, size_t size)
{
    int32_t id = -1;
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ", ");
        if (len) {
            char item[300];
            if (len >= sizeof item) {
                sl_errbuf(errbuf, size, "bootstrap.servers: entry too long");
                return SL_E_CONF;
            }
            memcpy(item, p, len);
            item[len] = 0;
            char *h = item;
            char *sch = strstr(h, "://");
            if (sch)
                h = sch + 3;
            char *colon = strrchr(h, ':');
            int port = 9092;
            if (colon && (!strchr(h, ']') || colon > strchr(h, ']'))) {
                *colon = 0;
                char *end;
                long v = strtol(colon + 1, &end, 10);
                if (*end || v <= 0 || v > 65535) {
                    sl_errbuf(errbuf, size, "bootstrap.servers: bad port in \"%.*s\"",
                              (int)len, p);
                    return SL_E_CONF;
                }
                port = (int)v;
            }
            if (*h == '[') {
                h++;
                char *rb = strchr(h, ']');
                if (rb)
                    *rb = 0;
            }
            if (!*h) {
                sl_errbuf(errbuf, size, "bootstrap.servers: empty host in \"%.*s\"",
                          (int)len, p);
                return SL_E_CONF;
            }
            if (!sl_broker_add(cl, id--, h, port))
                return SL_E_NOMEM;
        }
        p += len;
        while (*p == ',' || *p == ' ')
            p++;
    }
    if (id == -1) {
        sl_errbuf(errbuf, size, "bootstrap.servers: no brokers listed");
        return SL_E_CONF;
    }
    return 0;
}

sl_client *sl_client_new(const sl_conf *conf, const char *kind,
                         char *errbuf, size_t size)
{
    if (!conf) {
        sl_errbuf(errbuf, size, "NULL configuration");
        return NULL;
    }
    if (!conf->bootstrap_servers) {
        sl_errbuf(errbuf, size, "bootstrap.servers: required property not set");
        return NULL;
    }
    sl_client *cl = calloc(1, sizeof *cl);
    if (!cl || sl_conf_copy(&cl->conf, conf) != 0) {
        free(cl);
        sl_errbuf(errbuf, size, "out of memory");
        return NULL;
    }
    static const char hex[] = "0123456789abcdef";
    uintptr_t u = (uintptr_t)cl >> 4;
    snprintf(cl->name, sizeof cl->name, "%s#%c%c%c%c", kind, hex[u & 15],
             hex[(u >> 4) & 15], hex[(u >> 8) & 15], hex[(u >> 12) & 15]);
    pthread_mutex_init(&cl->lock, NULL);
    kp_arena_init(&cl->arena, 0);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cl->cond, &ca);
    pthread_condattr_destroy(&ca);
    cl->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    cl->controller_id = -1;
    cl->md_needed = true;
    if (cl->wake_fd < 0 ||
        parse_bootstrap(cl, cl->conf.bootstrap_servers, errbuf, size) != 0 ||
        sl_sec_init(cl, errbuf, size) != 0) {
        if (cl->wake_fd < 0)
            sl_errbuf(errbuf, size, "eventfd: %s", strerror(errno));
        sl_client_free(cl);
        return NULL;
    }
    return cl;
}

int sl_client_start(sl_client *cl, char *errbuf, size_t size)
{
    int rc = pthread_create(&cl->thread, NULL, io_main, cl);
    if (rc) {
        sl_errbuf(errbuf, size, "pthread_create: %s", strerror(rc));
        return SL_E_NOMEM;
    }
    cl->thread_started = true;
    return 0;
}

void sl_client_stop(sl_client *cl)
{
    if (cl->thread_started) {
        pthread_mutex_lock(&cl->lock);
        cl->terminate = true;
        pthread_mutex_unlock(&cl->lock);
        sl_wakeup(cl);
        pthread_join(cl->thread, NULL);
        cl->thread_started = false;
    }
    pthread_mutex_lock(&cl->lock);
    for (int i = 0; i < cl->n_brokers; i++) {
        sl_broker *b = cl->brokers[i];
        if (b->fd >= 0 || b->wait_head)
            sl_conn_fail(cl, b, SL_E_DESTROYED, "handle destroyed");
    }
    while (cl->ops) {
        sl_op *op = cl->ops;
        cl->ops = op->next;
        sl_op_finish(cl, op, SL_E_DESTROYED, "handle destroyed");
    }
    pthread_mutex_unlock(&cl->lock);
}

void sl_client_free(sl_client *cl)
{
    if (!cl)
        return;
    for (int i = 0; i < cl->n_brokers; i++) {
        sl_broker *b = cl->brokers[i];
        sl_sec_close(b);
        if (b->fd >= 0)
            close(b->fd);
        out_reset(b);
        kp_buf_free(&b->out);
        free(b->refs);
        free(b->rx);
        free(b->host);
        free(b);
    }
    free(cl->brokers);
    for (int i = 0; i < cl->n_topics; i++) {
        free(cl->topics[i]->name);
        free(cl->topics[i]->parts);
        free(cl->topics[i]);
    }
    free(cl->topics);
    if (cl->wake_fd >= 0)
        close(cl->wake_fd);
    pthread_mutex_destroy(&cl->lock);
    pthread_cond_destroy(&cl->cond);
    kp_arena_free(&cl->arena);
    sl_sec_free(cl);
    sl_conf_free_fields(&cl->conf);
    free(cl);
}
