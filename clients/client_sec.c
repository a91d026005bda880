/*
 * client_sec.c — libsluice's security, with librdkafka's properties:
 * security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), TLS with
 * OpenSSL on client.c's nonblocking sockets (ssl.*), and the SASL login
 * (sasl.mechanism PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; the SCRAM messages
 * and keys are protocol/kp_scram.h, shared with the broker).
 *
 * A connection goes TCP connect → SL_B_TLS (SSL_connect until done; its
 * WANT_READ / WANT_WRITE choose the poll events) → SL_B_APIVERSIONS →
 * SL_B_SASL (SaslHandshake v1, then one SaslAuthenticate v1+ per token,
 * as librdkafka does) → SL_B_UP, so no other request is sent before the
 * login has succeeded (sl_broker_ready returns only SL_B_UP brokers).
 *
 * Invariants:
 *   1. A refused login (wrong password, unknown user, a mechanism the
 *      broker does not offer) or a failed TLS handshake (certificate, host
 *      name) is the handle's end: logged once at level 3 with the cause
 *      (the broker's message, OpenSSL's verify result), cl->auth_err set,
 *      no connection started again (client.c io_main), every waiting call
 *      returning SL_E_AUTHENTICATION (ops, metadata waits, consumer poll).
 *      Retrying a wrong password only loads the broker and hides the cause.
 *      A connection lost during either step is an ordinary transport error
 *      (reconnect with backoff), a close without close_notify included.  A
 *      certificate alert on a read before SL_B_UP is a refused handshake
 *      (TLS 1.3 sends it after the client's SSL_connect has returned).
 *   2. Bytes OpenSSL already decrypted (SSL_pending) are read before the
 *      thread polls again: poll(2) cannot see them (client.c io_main).
 *   3. SSL_write is retried with the stream's same unwritten bytes, which
 *      may have moved (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER: b->out grows)
 *      and may be longer (new requests appended), never shorter.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "clients/sl_int.h"
#include "kp_msgs.h"

#define SASL_HANDSHAKE_V 1

/* SCRAM's SaltedPassword for the last salt and iteration count seen: a
 * broker (or a cluster sharing its users) gives the same ones on every
 * connection, so the PBKDF2 runs once per handle. */
struct sl_salted {
    uint8_t salt[64];
    size_t salt_len;
    int32_t iterations;
    uint8_t key[SCRAM_MAX_KEY];
};

static bool sec_tls(const sl_client *cl)
{
    return cl->conf.security_protocol & SL_SEC_SSL;
}

static bool sec_sasl(const sl_client *cl)
{
    return cl->conf.security_protocol & SL_SEC_SASL_PLAINTEXT;
}

static scram_mech sec_scram_mech(const sl_client *cl)
{
    return cl->conf.sasl_mechanism == SL_SASL_SCRAM_SHA_256 ? SCRAM_SHA_256
         : cl->conf.sasl_mechanism == SL_SASL_SCRAM_SHA_512 ? SCRAM_SHA_512 : SCRAM_UNKNOWN;
}

static const char *sec_mech_name(const sl_client *cl)
{
    scram_mech m = sec_scram_mech(cl);
    return m == SCRAM_UNKNOWN ? "PLAIN" : kp_scram_mech_name(m);
}

/* OpenSSL's queued errors as one line (and the queue emptied). */
static void sec_ssl_errors(char *buf, size_t size)
{
    unsigned long e;
    size_t at = 0;
    buf[0] = 0;
    while ((e = ERR_get_error()) != 0) {
        char one[256];
        ERR_error_string_n(e, one, sizeof one);
        if (at < size)
            at += (size_t)snprintf(buf + at, size - at, "%s%s", at ? "; " : "", one);
    }
    if (!buf[0])
        snprintf(buf, size, "unknown TLS error");
}

static int sec_key_password_cb(char *buf, int size, int rwflag, void *u)
{
    (void)rwflag;
    const char *pw = u;
    int n = pw ? (int)strlen(pw) : 0;
    if (n >= size)
        return 0;
    memcpy(buf, pw ? pw : "", (size_t)n);
    return n;
}

/* ---- creation ------------------------------------------------------------------ */

static int sec_ctx_new(sl_client *cl, char *errbuf, size_t size)
{
    const sl_conf *c = &cl->conf;
    char why[512];
    const char *const files[][2] = {
        { "ssl.ca.location", c->ssl_ca_location },
        { "ssl.certificate.location", c->ssl_certificate_location },
        { "ssl.key.location", c->ssl_key_location },
    };
    for (int i = 0; i < 3; i++) {
        if (files[i][1] && access(files[i][1], R_OK) != 0) {
            sl_errbuf(errbuf, size, "%s: cannot read \"%s\": %s", files[i][0], files[i][1],
                      strerror(errno));
            return SL_E_CONF;
        }
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        sec_ssl_errors(why, sizeof why);
        sl_errbuf(errbuf, size, "security.protocol: cannot create a TLS context: %s", why);
        return SL_E_CONF;
    }
    cl->ssl_ctx = ctx;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* A peer's close without close_notify (a broker restarting, even mid-
     * handshake) is the peer's close, not a TLS failure (inv. 1): OpenSSL 3
     * would report it as SSL_ERROR_SSL.  Kafka's frames catch truncation. */
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    const char *what = NULL, *file = NULL;
    if (c->ssl_ca_location) {
        if (SSL_CTX_load_verify_locations(ctx, c->ssl_ca_location, NULL) != 1)
            what = "ssl.ca.location", file = c->ssl_ca_location;
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        what = "ssl.ca.location (unset: the system's CA store)", file = "";
    }
    if (!what && c->ssl_key_password)
        SSL_CTX_set_default_passwd_cb_userdata(ctx, c->ssl_key_password);
    SSL_CTX_set_default_passwd_cb(ctx, sec_key_password_cb);
    if (!what && c->ssl_certificate_location &&
        SSL_CTX_use_certificate_chain_file(ctx, c->ssl_certificate_location) != 1)
        what = "ssl.certificate.location", file = c->ssl_certificate_location;
    if (!what && c->ssl_key_location &&
        SSL_CTX_use_PrivateKey_file(ctx, c->ssl_key_location, SSL_FILETYPE_PEM) != 1)
        what = "ssl.key.location", file = c->ssl_key_location;
    if (!what && (!c->ssl_certificate_location != !c->ssl_key_location)) {
        sl_errbuf(errbuf, size, "%s: required with %s (a client certificate needs both)",
                  c->ssl_key_location ? "ssl.certificate.location" : "ssl.key.location",
                  c->ssl_key_location ? "ssl.key.location" : "ssl.certificate.location");
        return SL_E_CONF;
    }
    if (!what && c->ssl_key_location && SSL_CTX_check_private_key(ctx) != 1)
        what = "ssl.key.location (does not match ssl.certificate.location)",
        file = c->ssl_key_location;
    if (what) {
        sec_ssl_errors(why, sizeof why);
        sl_errbuf(errbuf, size, "%s: cannot load \"%s\": %s", what, file, why);
        return SL_E_CONF;
    }
    return 0;
}

int sl_sec_init(sl_client *cl, char *errbuf, size_t size)
{
    const sl_conf *c = &cl->conf;
    if (sec_sasl(cl)) {
        if (!c->sasl_username || !*c->sasl_username) {
            sl_errbuf(errbuf, size, "sasl.username: required with security.protocol=%s",
                      sec_tls(cl) ? "SASL_SSL" : "SASL_PLAINTEXT");
            return SL_E_CONF;
        }
        if (!c->sasl_password) {
            sl_errbuf(errbuf, size, "sasl.password: required with security.protocol=%s",
                      sec_tls(cl) ? "SASL_SSL" : "SASL_PLAINTEXT");
            return SL_E_CONF;
        }
    }
    if (!sec_tls(cl)) {
        const char *set = c->ssl_ca_location ? "ssl.ca.location"
                        : c->ssl_certificate_location ? "ssl.certificate.location"
                        : c->ssl_key_location ? "ssl.key.location" : NULL;
        if (set)
            sl_log(cl, 4, "%s is set but security.protocol=%s does not use TLS", set,
                   sec_sasl(cl) ? "SASL_PLAINTEXT" : "PLAINTEXT");
        return 0;
    }
    return sec_ctx_new(cl, errbuf, size);
}

void sl_sec_free(sl_client *cl)
{
    SSL_CTX_free(cl->ssl_ctx);
    cl->ssl_ctx = NULL;
    if (cl->salted)
        OPENSSL_cleanse(cl->salted, sizeof *cl->salted);
    free(cl->salted);
    cl->salted = NULL;
}

void sl_sec_fatal(sl_client *cl, sl_broker *b, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!cl->auth_err) {                      /* inv. 1: once */
        cl->auth_err = SL_E_AUTHENTICATION;
        snprintf(cl->auth_msg, sizeof cl->auth_msg, "%.100s:%d: %s", b->host, b->port, msg);
        sl_log(cl, 3, "%s", cl->auth_msg);
    }
    sl_conn_fail(cl, b, SL_E_AUTHENTICATION, msg);
}

/* ---- TLS ------------------------------------------------------------------------- */

int sl_sec_tls_start(sl_client *cl, sl_broker *b)
{
    if (!cl->ssl_ctx)
        return 0;
    SSL *ssl = SSL_new(cl->ssl_ctx);
    if (!ssl || SSL_set_fd(ssl, b->fd) != 1) {
        SSL_free(ssl);
        return -1;
    }
    b->ssl = ssl;
    b->tls_want_write = false;
    unsigned char ip[16];
    bool is_ip = inet_pton(AF_INET, b->host, ip) == 1 || inet_pton(AF_INET6, b->host, ip) == 1;
    if (!is_ip)
        SSL_set_tlsext_host_name(ssl, b->host);          /* SNI */
    if (cl->conf.ssl_endpoint_identification) {
        X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
        if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, b->host) != 1
                  : SSL_set1_host(ssl, b->host) != 1)
            return -1;
    }
    b->state = SL_B_TLS;
    b->tls_deadline = sl_now_ms() + cl->conf.request_timeout_ms;
    return 1;
}

int sl_sec_tls_step(sl_client *cl, sl_broker *b)
{
    ERR_clear_error();
    int rc = SSL_connect(b->ssl);
    if (rc == 1) {
        sl_log(cl, 7, "%s:%d/%d: TLS %s, %s", b->host, b->port, b->id,
               SSL_get_version(b->ssl), SSL_get_cipher_name(b->ssl));
        b->tls_want_write = false;
        return 1;
    }
    int e = SSL_get_error(b->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        b->tls_want_write = e == SSL_ERROR_WANT_WRITE;
        return 0;
    }
    long vr = SSL_get_verify_result(b->ssl);
    if (vr != X509_V_OK) {
        ERR_clear_error();
        sl_sec_fatal(cl, b, "TLS handshake failed: certificate verify failed: %s%s",
                     X509_verify_cert_error_string(vr),
                     vr == X509_V_ERR_HOSTNAME_MISMATCH || vr == X509_V_ERR_IP_ADDRESS_MISMATCH
                     ? " (ssl.endpoint.identification.algorithm=https checks the name in "
                       "bootstrap.servers; none turns it off)"
                     : vr == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                       vr == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
                       vr == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT
                     ? " (is ssl.ca.location the CA that signed the broker's certificate?)" : "");
        return -1;
    }
    if (e == SSL_ERROR_SSL) {
        char why[512];
        sec_ssl_errors(why, sizeof why);
        sl_sec_fatal(cl, b, "TLS handshake failed: %s", why);
        return -1;
    }
    /* SSL_ERROR_SYSCALL / ZERO_RETURN: the connection went away (inv. 1). */
    char why[300];
    snprintf(why, sizeof why, "connection lost during the TLS handshake%s%s",
             errno ? ": " : "", errno ? strerror(errno) : "");
    ERR_clear_error();
    sl_conn_fail(cl, b, SL_E_TRANSPORT, why);
    return -1;
}

void sl_sec_close(sl_broker *b)
{
    SSL_free(b->ssl);
    b->ssl = NULL;
    b->tls_want_write = false;
    free(b->server_first);
    b->server_first = NULL;
    OPENSSL_cleanse(&b->scram, sizeof b->scram);
}

/* The broker's alert refusing our certificate.  In TLS 1.3 the client's
 * SSL_connect is done before the server has checked the certificate, so the
 * refusal arrives on the first SSL_read. */
static bool sec_cert_refused(unsigned long err)
{
    switch (ERR_GET_REASON(err)) {
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
#ifdef SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
#endif
        return true;
    default:
        return false;
    }
}

/* An SSL_read/SSL_write that did not move bytes: -1 with errno EAGAIN
 * (retry after poll), 0 for the peer's close, -1 with another errno.
 * A certificate refused before the login is done ends the handle (inv. 1):
 * b is down then, and -1 with EAGAIN sends the caller back to poll. */
static long sec_io_error(sl_client *cl, sl_broker *b, int rc)
{
    int e = SSL_get_error(b->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        b->tls_want_write = e == SSL_ERROR_WANT_WRITE;
        errno = EAGAIN;
        return -1;
    }
    if (e == SSL_ERROR_SSL && b->state != SL_B_UP && sec_cert_refused(ERR_peek_error())) {
        char why[512];
        sec_ssl_errors(why, sizeof why);
        sl_sec_fatal(cl, b, "TLS handshake failed: the broker refused the client "
                     "certificate (ssl.certificate.location, ssl.key.location): %s", why);
        errno = EAGAIN;
        return -1;
    }
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    if (e == SSL_ERROR_SYSCALL && !ERR_peek_error())
        return errno ? -1 : 0;
    char why[512];
    sec_ssl_errors(why, sizeof why);
    sl_log(cl, 4, "%s:%d/%d: TLS: %s", b->host, b->port, b->id, why);
    errno = EPROTO;
    return -1;
}

long sl_sec_read(sl_client *cl, sl_broker *b, void *p, size_t n)
{
    ERR_clear_error();
    errno = 0;
    int rc = SSL_read(b->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
    if (rc > 0) {
        b->tls_want_write = false;
        return rc;
    }
    return sec_io_error(cl, b, rc);
}

long sl_sec_writev(sl_client *cl, sl_broker *b, const struct iovec *iov, int n)
{
    size_t done = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t *p = iov[i].iov_base;
        size_t left = iov[i].iov_len;
        while (left) {
            ERR_clear_error();
            errno = 0;
            int rc = SSL_write(b->ssl, p, left > INT_MAX ? INT_MAX : (int)left);
            if (rc <= 0) {
                long r = sec_io_error(cl, b, rc);
                if (done)
                    return (long)done;     /* the error comes back on the next call */
                if (r == 0)
                    errno = EPIPE;
                return -1;
            }
            b->tls_want_write = false;
            done += (size_t)rc;
            p += rc;
            left -= (size_t)rc;
        }
    }
    return (long)done;
}

/* ---- SASL ------------------------------------------------------------------------ */

static sl_resp_cb sec_answer;

/* Sends a token of n bytes, then wipes it (a password, a proof); n < 0:
 * there is none, for the reason fail gives (inv. 1). */
static void sec_auth_send(sl_client *cl, sl_broker *b, char *tok, int n, const char *fail)
{
    if (n < 0) {
        sl_sec_fatal(cl, b, "SASL %s: %s", sec_mech_name(cl), fail);
        return;
    }
    int16_t v = sl_api_version(b, KP_API_SASL_AUTHENTICATE, 1, 2);
    kp_SaslAuthenticateRequest q;
    kp_init_SaslAuthenticateRequest(&q);
    q.AuthBytes = (kp_str){ tok, n };
    kp_enc_SaslAuthenticateRequest(sl_req_begin(cl, b, KP_API_SASL_AUTHENTICATE, v), v, &q);
    sl_req_end(cl, b, sec_answer, NULL);
    OPENSSL_cleanse(tok, (size_t)n);
    b->sasl_step++;
}

bool sl_sec_sasl_start(sl_client *cl, sl_broker *b)
{
    if (!sec_sasl(cl))
        return false;
    b->state = SL_B_SASL;
    b->sasl_step = 0;
    if (sl_api_version(b, KP_API_SASL_HANDSHAKE, SASL_HANDSHAKE_V, SASL_HANDSHAKE_V) < 0 ||
        sl_api_version(b, KP_API_SASL_AUTHENTICATE, 1, 2) < 0) {
        sl_sec_fatal(cl, b, "SASL: the broker offers no SaslHandshake v1 and SaslAuthenticate "
                            "v1+ (is this a SASL listener?)");
        return true;
    }
    kp_SaslHandshakeRequest q;
    kp_init_SaslHandshakeRequest(&q);
    q.Mechanism = kp_str_cstr(sec_mech_name(cl));
    kp_enc_SaslHandshakeRequest(sl_req_begin(cl, b, KP_API_SASL_HANDSHAKE, SASL_HANDSHAKE_V),
                                SASL_HANDSHAKE_V, &q);
    sl_req_end(cl, b, sec_answer, &b->sasl_step);   /* ctx: the handshake's */
    return true;
}

/* The first token: PLAIN's "\0user\0password", or SCRAM's client-first. */
static void sec_first_token(sl_client *cl, sl_broker *b)
{
    const char *user = cl->conf.sasl_username, *pw = cl->conf.sasl_password;
    scram_mech m = sec_scram_mech(cl);
    char tok[SCRAM_MAX_NAME * 3 + 512];
    int n;
    if (m == SCRAM_UNKNOWN) {
        n = snprintf(tok, sizeof tok, "%c%s%c%s", 0, user, 0, pw);
        if ((size_t)n >= sizeof tok)
            n = -1;
    } else {
        uint8_t rnd[24];
        char cnonce[48];
        if (RAND_bytes(rnd, sizeof rnd) != 1) {
            sl_conn_fail(cl, b, SL_E_TRANSPORT, "no random bytes for the SCRAM nonce");
            return;
        }
        kp_scram_b64_encode(rnd, sizeof rnd, cnonce, sizeof cnonce);   /* no ',' */
        n = kp_scram_client_first_write(&b->scram, m, user, cnonce, tok, sizeof tok);
    }
    sec_auth_send(cl, b, tok, n, "sasl.username (or sasl.password) is too long");
}

/* -1: the answer does not decode. */
static int sec_handshake_answer(sl_client *cl, sl_broker *b, kp_rd *r, int16_t ver)
{
    kp_SaslHandshakeResponse h;
    if (kp_dec_SaslHandshakeResponse(r, ver, &h, &cl->arena) != 0)
        return -1;
    if (h.ErrorCode != 0) {
        char offered[200] = "";
        size_t at = 0;
        for (int32_t i = 0; i < h.Mechanisms_count && at < sizeof offered; i++)
            at += (size_t)snprintf(offered + at, sizeof offered - at, "%s%.*s", i ? ", " : "",
                                   (int)h.Mechanisms[i].len,
                                   h.Mechanisms[i].p ? h.Mechanisms[i].p : "");
        sl_sec_fatal(cl, b, "SASL: the broker does not enable sasl.mechanism=%s (it offers %s; "
                            "%s)", sec_mech_name(cl), offered[0] ? offered : "none",
                     sl_err_name(h.ErrorCode));
        return 0;
    }
    sec_first_token(cl, b);
    return 0;
}

/* SCRAM's SaltedPassword for sf (cached, struct sl_salted). */
static const uint8_t *sec_salted(sl_client *cl, scram_mech m, const scram_server_first_msg *sf)
{
    struct sl_salted *s = cl->salted;
    if (s && s->salt_len == sf->salt_len && s->iterations == sf->iterations &&
        !memcmp(s->salt, sf->salt, sf->salt_len))
        return s->key;
    if (!s && !(s = cl->salted = calloc(1, sizeof *s)))
        return NULL;
    s->salt_len = 0;                          /* invalid until computed */
    const char *pw = cl->conf.sasl_password;
    if (kp_scram_salted_password(m, pw, strlen(pw), sf->salt, sf->salt_len, sf->iterations,
                                 s->key) != 0)
        return NULL;
    memcpy(s->salt, sf->salt, sf->salt_len);
    s->salt_len = sf->salt_len;
    s->iterations = sf->iterations;
    return s->key;
}

/* SCRAM's client-final for the server-first tok. */
static void sec_client_final(sl_client *cl, sl_broker *b, const char *tok, size_t n)
{
    scram_mech m = sec_scram_mech(cl);
    scram_server_first_msg sf;
    char fin[512];
    free(b->server_first);
    b->server_first = malloc(n + 1);
    if (!b->server_first) {
        sl_conn_fail(cl, b, SL_E_NOMEM, "out of memory");
        return;
    }
    memcpy(b->server_first, tok, n);
    if (kp_scram_server_first_parse(&b->scram, b->server_first, n, &sf) != 0) {
        sl_sec_fatal(cl, b, "SASL %s: the broker's server-first message is malformed (or its "
                            "nonce or iteration count is unacceptable)", sec_mech_name(cl));
        return;
    }
    const uint8_t *salted = sec_salted(cl, m, &sf);
    int len = salted ? kp_scram_client_final_write(&b->scram, &sf, b->server_first, n, salted,
                                                   fin, sizeof fin) : -1;
    sec_auth_send(cl, b, fin, len, "cannot compute the client proof");
}

static int sec_auth_answer(sl_client *cl, sl_broker *b, kp_rd *r, int16_t ver)
{
    kp_SaslAuthenticateResponse a;
    if (kp_dec_SaslAuthenticateResponse(r, ver, &a, &cl->arena) != 0)
        return -1;
    scram_mech m = sec_scram_mech(cl);
    if (a.ErrorCode != 0) {
        sl_sec_fatal(cl, b, "SASL %s authentication as %s failed: %.*s (%s)",
                     sec_mech_name(cl), cl->conf.sasl_username,
                     a.ErrorMessage.p && a.ErrorMessage.len > 0 ? (int)a.ErrorMessage.len : 0,
                     a.ErrorMessage.p ? a.ErrorMessage.p : "", sl_err_name(a.ErrorCode));
        return 0;
    }
    const char *tok = a.AuthBytes.p ? (const char *)a.AuthBytes.p : "";
    size_t n = a.AuthBytes.len > 0 ? (size_t)a.AuthBytes.len : 0;
    if (m != SCRAM_UNKNOWN && b->sasl_step == 1) {
        sec_client_final(cl, b, tok, n);
        return 0;
    }
    if (m != SCRAM_UNKNOWN && !kp_scram_client_verify(&b->scram, tok, n)) {
        sl_sec_fatal(cl, b, "SASL %s: the broker's server signature is wrong (it does not hold "
                            "this user's credential)", sec_mech_name(cl));
        return 0;
    }
    OPENSSL_cleanse(&b->scram, sizeof b->scram);
    sl_log(cl, 7, "%s:%d/%d: SASL %s login as %s", b->host, b->port, b->id, sec_mech_name(cl),
           cl->conf.sasl_username);
    sl_conn_up(cl, b);
    return 0;
}

/* SaslHandshake's answer (ctx set) or SaslAuthenticate's. */
static void sec_answer(sl_client *cl, sl_broker *b, int err, sl_frame *f, kp_rd *r, int16_t ver,
                       void *ctx)
{
    (void)f;
    if (err)
        return;                               /* conn_fail already ran */
    if ((ctx ? sec_handshake_answer : sec_auth_answer)(cl, b, r, ver) < 0)
        sl_conn_fail(cl, b, SL_E_BAD_MSG, ctx ? "malformed SaslHandshake answer"
                                              : "malformed SaslAuthenticate answer");
}
