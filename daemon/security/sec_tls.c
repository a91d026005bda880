/*
 * TLS: contexts from Kafka's ssl.* keys (PEM only), kernel TLS detection,
 * and the peer principal.
 *
 * One server context serves every TLS listener and the admin https
 * endpoint; one client context serves broker-to-broker connections (the
 * replica fetcher); each cluster link has a client context of its own,
 * from its ssl.* settings (sec_tls_client_ctx_new, daemon/link/link_conn.c).  Both are made on first use and live until
 * sec_tls_free; an SSL object holds its own reference to its context.
 *
 * Invariants:
 *   T1. Only TLS 1.2 and 1.3 are ever negotiated (ssl.enabled.protocols
 *       narrows that further); renegotiation is off.
 *   T2. ssl.client.auth=required fails a handshake without a client
 *       certificate that chains to the truststore; requested fails one
 *       with a certificate that does not, and lets one without through
 *       as User:ANONYMOUS (Java's wantClientAuth).
 *   T3. A private key is never read from a terminal: an encrypted key
 *       without ssl.key.password fails startup instead of prompting.
 *   T4. The server sends no session tickets: after the handshake the only
 *       records on the wire are application data, so a connection whose
 *       sending OpenSSL moved into the kernel (kTLS) can write with
 *       writev/sendfile straight to the socket (daemon/net/net_server.c).
 *   T5. A client connection (replica fetcher, cluster link) whose server
 *       closes without close_notify (an idle close by a broker that does
 *       not send one) sees EOF, not the error "unexpected eof while
 *       reading"; a message cut short still fails its length check.  The
 *       server sends close_notify when it closes an idle connection.
 */
#include "daemon/security/sec_tls.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "daemon/broker.h"
#include "daemon/broker_config.h"

struct bk_tls {
    SSL_CTX *server, *client;
};

const char *sec_tls_error(char *buf, size_t cap)
{
    unsigned long e = ERR_get_error();
    if (!e) {
        snprintf(buf, cap, "no OpenSSL error");
        return buf;
    }
    ERR_error_string_n(e, buf, cap);
    ERR_clear_error();
    return buf;
}

/* T3: the password given, or nothing (never a prompt). */
static int password_cb(char *buf, int size, int rwflag, void *u)
{
    (void)rwflag;
    const char *pw = u;
    if (!pw || !pw[0])
        return 0;
    int n = (int)strlen(pw);
    if (n > size)
        n = size;
    memcpy(buf, pw, (size_t)n);
    return n;
}

static int versions(SSL_CTX *ctx, const char *enabled)
{
    bool v12 = strstr(enabled, "TLSv1.2") != NULL, v13 = strstr(enabled, "TLSv1.3") != NULL;
    if (!v12 && !v13)
        return -1;
    SSL_CTX_set_min_proto_version(ctx, v12 ? TLS1_2_VERSION : TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, v13 ? TLS1_3_VERSION : TLS1_2_VERSION);
    return 0;
}

/* The chain file and its key's (ssl.keystore.location: both in one;
 * a client's ssl.certificate.location and ssl.key.location), else the
 * inline chain and key. */
static int load_keystore(SSL_CTX *ctx, const sec_tls_files *c, char *err, size_t errlen)
{
    char e[256];
    SSL_CTX_set_default_passwd_cb(ctx, password_cb);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, (void *)c->key_password);
    if (c->chain_file[0]) {
        const char *key = c->key_file[0] ? c->key_file : c->chain_file;
        if (SSL_CTX_use_certificate_chain_file(ctx, c->chain_file) != 1) {
            snprintf(err, errlen, "%s %s: %s", c->chain_key, c->chain_file,
                     sec_tls_error(e, sizeof e));
            return -1;
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
            snprintf(err, errlen, "%s %s: %s", c->key_file[0] ? c->key_key : c->chain_key, key,
                     sec_tls_error(e, sizeof e));
            return -1;
        }
    } else if (c->chain_pem[0]) {
        BIO *bio = BIO_new_mem_buf(c->chain_pem, -1);
        X509 *x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
        int ok = x && SSL_CTX_use_certificate(ctx, x) == 1;
        X509_free(x);
        while (ok && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL)))
            ok = SSL_CTX_add_extra_chain_cert(ctx, x) == 1;   /* takes x */
        ERR_clear_error();                                    /* the chain's end */
        BIO_free(bio);
        bio = BIO_new_mem_buf(c->key_pem, -1);
        EVP_PKEY *k = ok && bio ? PEM_read_bio_PrivateKey(bio, NULL, password_cb,
                                                         (void *)c->key_password) : NULL;
        ok = k && SSL_CTX_use_PrivateKey(ctx, k) == 1;
        EVP_PKEY_free(k);
        BIO_free(bio);
        if (!ok) {
            snprintf(err, errlen, "ssl.keystore.certificate.chain / ssl.keystore.key: %s",
                     sec_tls_error(e, sizeof e));
            return -1;
        }
    } else {
        return 0;                 /* a client without a certificate */
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, errlen, "the keystore's private key does not match its certificate");
        return -1;
    }
    return 0;
}

static int load_truststore(SSL_CTX *ctx, const sec_tls_files *c, bool server,
                           char *err, size_t errlen)
{
    char e[256];
    if (c->ca_file[0]) {
        if (SSL_CTX_load_verify_locations(ctx, c->ca_file, NULL) != 1) {
            snprintf(err, errlen, "%s %s: %s", c->ca_key, c->ca_file,
                     sec_tls_error(e, sizeof e));
            return -1;
        }
        if (server)               /* the CAs a client may pick its certificate by */
            SSL_CTX_set_client_CA_list(ctx, SSL_load_client_CA_file(c->ca_file));
    } else if (c->ca_pem[0]) {
        BIO *bio = BIO_new_mem_buf(c->ca_pem, -1);
        X509_STORE *st = SSL_CTX_get_cert_store(ctx);
        X509 *x;
        int n = 0;
        while (bio && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
            X509_STORE_add_cert(st, x);
            X509_free(x);
            n++;
        }
        ERR_clear_error();
        BIO_free(bio);
        if (!n) {
            snprintf(err, errlen, "ssl.truststore.certificates: no PEM certificate");
            return -1;
        }
    } else if (!server) {
        SSL_CTX_set_default_verify_paths(ctx);
    }
    return 0;
}

static struct bk_tls *tls_of(bk_broker *b)
{
    if (!b->tls)
        b->tls = calloc(1, sizeof *b->tls);
    return b->tls;
}

/* The broker's own ssl.* keys as files and PEM texts. */
static sec_tls_files broker_files(const bk_config *c)
{
    return (sec_tls_files){
        .chain_key = "ssl.keystore.location", .chain_file = c->ssl_keystore_location,
        .key_key = "ssl.keystore.location", .key_file = "",
        .chain_pem = c->ssl_keystore_certificate_chain, .key_pem = c->ssl_keystore_key,
        .key_password = c->ssl_key_password,
        .ca_key = "ssl.truststore.location", .ca_file = c->ssl_truststore_location,
        .ca_pem = c->ssl_truststore_certificates,
        .protocols = c->ssl_enabled_protocols };
}

static SSL_CTX *ctx_new(const bk_config *cfg, const sec_tls_files *c, bool server, char *err,
                        size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!ctx) {
        snprintf(err, errlen, "cannot make a TLS context");
        return NULL;
    }
    long opts = SSL_OP_NO_RENEGOTIATION;              /* T1 */
    if (!server)                                      /* T5 */
        opts |= SSL_OP_IGNORE_UNEXPECTED_EOF;
#ifdef SSL_OP_ENABLE_KTLS
    opts |= SSL_OP_ENABLE_KTLS;
#endif
    SSL_CTX_set_options(ctx, (uint64_t)opts);
    /* Writes resume with the same bytes at a new address (the output
     * buffer may move) and report each record as it goes. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (versions(ctx, c->protocols) ||
        load_keystore(ctx, c, err, errlen) ||
        load_truststore(ctx, c, server, err, errlen)) {
        if (!err[0])
            snprintf(err, errlen, "ssl.enabled.protocols: no TLS version");
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (server) {
        SSL_CTX_set_num_tickets(ctx, 0);               /* T4 */
        SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"sluice", 6);
        int mode = SSL_VERIFY_NONE;                    /* T2 */
        if (!strcmp(cfg->ssl_client_auth, "required"))
            mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
        else if (!strcmp(cfg->ssl_client_auth, "requested"))
            mode = SSL_VERIFY_PEER;
        SSL_CTX_set_verify(ctx, mode, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    }
    return ctx;
}

static SSL_CTX *ctx_get(bk_broker *b, bool server, char *err, size_t errlen)
{
    struct bk_tls *t = tls_of(b);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    SSL_CTX **slot = server ? &t->server : &t->client;
    if (!*slot) {
        sec_tls_files f = broker_files(b->cfg);
        err[0] = 0;
        *slot = ctx_new(b->cfg, &f, server, err, errlen);
    }
    return *slot;
}

SSL_CTX *sec_tls_server_ctx(bk_broker *b, char *err, size_t errlen)
{
    return ctx_get(b, true, err, errlen);
}

SSL_CTX *sec_tls_client_ctx(bk_broker *b, char *err, size_t errlen)
{
    return ctx_get(b, false, err, errlen);
}

SSL_CTX *sec_tls_client_ctx_new(const sec_tls_files *f, char *err, size_t errlen)
{
    err[0] = 0;
    return ctx_new(NULL, f, false, err, errlen);
}

void sec_tls_free(bk_broker *b)
{
    if (!b->tls)
        return;
    SSL_CTX_free(b->tls->server);
    SSL_CTX_free(b->tls->client);
    free(b->tls);
    b->tls = NULL;
}

/* The kernel's "tls" ULP can only be set on a connected socket, so the
 * probe makes a loopback connection and throws it away. */
bool sec_tls_kernel_available(void)
{
    static int known = -1;
    if (known >= 0)
        return known;
    known = 0;
#ifdef TCP_ULP
    int l = socket(AF_INET, SOCK_STREAM, 0), s = socket(AF_INET, SOCK_STREAM, 0), a = -1;
    struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof in;
    if (l >= 0 && s >= 0 && bind(l, (struct sockaddr *)&in, sizeof in) == 0 &&
        listen(l, 1) == 0 && getsockname(l, (struct sockaddr *)&in, &len) == 0 &&
        connect(s, (struct sockaddr *)&in, sizeof in) == 0 &&
        (a = accept(l, NULL, NULL)) >= 0)
        known = setsockopt(s, SOL_TCP, TCP_ULP, "tls", sizeof "tls") == 0;
    if (a >= 0) close(a);
    if (s >= 0) close(s);
    if (l >= 0) close(l);
#endif
    return known;
}

bool sec_tls_ktls_send(SSL *ssl)
{
#if defined(BIO_get_ktls_send) && !defined(OPENSSL_NO_KTLS)
    return BIO_get_ktls_send(SSL_get_wbio(ssl)) == 1;
#else
    (void)ssl;
    return false;
#endif
}

int sec_tls_peer_principal(SSL *ssl, char *buf, size_t cap)
{
    X509 *cert = SSL_get0_peer_certificate(ssl);
    if (!cert || SSL_get_verify_result(ssl) != X509_V_OK)
        return -1;
    BIO *bio = BIO_new(BIO_s_mem());
    if (!bio)
        return -1;
    /* RFC 2253: most specific first, as Java's X500Principal.getName(). */
    X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
    char *p;
    long n = BIO_get_mem_data(bio, &p);
    snprintf(buf, cap, "User:%.*s", (int)n, p);
    BIO_free(bio);
    return 0;
}

struct bufferevent *sec_tls_client_bev(bk_broker *b, const char *host, char *err,
                                       size_t errlen, const char **why)
{
    SSL_CTX *ctx = sec_tls_client_ctx(b, err, errlen);
    if (!ctx) {
        *why = err;
        return NULL;
    }
    return sec_tls_client_bev_ctx(b->base, ctx, host,
                                  b->cfg->ssl_endpoint_identification_algorithm[0], why);
}

struct bufferevent *sec_tls_client_bev_ctx(struct event_base *base, SSL_CTX *ctx,
                                           const char *host, bool check_host, const char **why)
{
    SSL *ssl = SSL_new(ctx);
    if (!ssl) {
        *why = "cannot make a TLS connection";
        return NULL;
    }
    struct in6_addr ip;               /* SNI names hosts, never addresses (RFC 6066) */
    if (inet_pton(AF_INET, host, &ip) != 1 && inet_pton(AF_INET6, host, &ip) != 1)
        SSL_set_tlsext_host_name(ssl, host);
    if (check_host)
        SSL_set1_host(ssl, host);
    struct bufferevent *bev = bufferevent_openssl_socket_new(base, -1, ssl,
                                                             BUFFEREVENT_SSL_CONNECTING,
                                                             BEV_OPT_CLOSE_ON_FREE);
    if (bev) {                        /* EOF without close_notify is EOF */
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    } else {
        SSL_free(ssl);
        *why = "cannot create a socket";
    }
    return bev;
}

const char *sec_tls_event_why(struct bufferevent *bev, short what, const char *eof, char *buf,
                              size_t len)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);               /* NULL: not TLS */
    unsigned long tls_err = ssl ? bufferevent_get_openssl_error(bev) : 0;
    if (what & BEV_EVENT_TIMEOUT)
        return "no answer in time";
    if (tls_err) {
        long v = SSL_get_verify_result(ssl);
        size_t at = (size_t)snprintf(buf, len, "TLS: ");
        ERR_error_string_n(tls_err, buf + at, len - at);
        at = strlen(buf);
        if (v != X509_V_OK && at < len)  /* which certificate problem */
            snprintf(buf + at, len - at, " (the server's certificate: %s)",
                     X509_verify_cert_error_string(v));
        return buf;
    }
    return what & BEV_EVENT_EOF ? eof : "connection error";
}
