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
 *   T6. Certificate and key files are read only when they are regular
 *       files (opened non-blocking, checked on the descriptor read): a
 *       FIFO, device or socket is refused with "KEY PATH is not a regular
 *       file", so no thread (the SQL worker at a link's INSERT, the
 *       janitor's at its rebuild, the loop at startup) ever waits on one.
 */
#include "daemon/security/sec_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "daemon/broker.h"
#include "daemon/broker_config.h"

/* T6: a PEM file larger than this is refused (a CA bundle is < 1 MiB). */
#define SEC_TLS_FILE_MAX (16 << 20)

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

/* T6: a certificate file's text, read through one descriptor opened
 * non-blocking and checked to be a regular file: a FIFO, a device, a
 * socket or a directory is refused by name at once, never waited on (a
 * FIFO nobody writes held the thread that read it forever).  NULL with
 * err ("KEY PATH: why"); else a NUL-terminated copy for the caller to
 * free. */
static char *file_text(const char *key, const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s %s: %s", key, path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > SEC_TLS_FILE_MAX) {
        snprintf(err, errlen, "%s %s %s", key, path,
                 S_ISFIFO(st.st_mode) ? "is not a regular file (a FIFO): not read"
                 : S_ISDIR(st.st_mode) ? "is not a regular file (a directory)"
                 : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)
                     ? "is not a regular file (a device): not read"
                 : S_ISSOCK(st.st_mode) ? "is not a regular file (a socket): not read"
                 : S_ISREG(st.st_mode) ? "is larger than 16 MiB: not a PEM file"
                 : "is not a regular file: not read");
        close(fd);
        return NULL;
    }
    char *text = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (text && got < (size_t)st.st_size) {
        ssize_t n = read(fd, text + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;                        /* shorter now: what was there */
        got += (size_t)n;
    }
    if (!text)
        snprintf(err, errlen, "%s %s: out of memory", key, path);
    else
        text[got] = 0;
    close(fd);
    return text;
}

/* Whether the thread's newest OpenSSL error is PEM's "no start line" (no
 * more blocks of the kind asked: the normal end of a chain), or none. */
static bool pem_no_start(void)
{
    unsigned long e = ERR_peek_last_error();
    return !e || (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE);
}

/* The text of an OpenSSL failure: its reason ("key values mismatch",
 * "no start line"), else the library's string. */
static const char *ossl_reason(char *buf, size_t cap)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    if (r)
        snprintf(buf, cap, "%s", r);
    else
        sec_tls_error(buf, cap);
    ERR_clear_error();
    return buf;
}

/* A certificate chain (the first one the entity's, the rest its chain)
 * and its private key, as PEM texts.  0, or -1 with err naming what. */
static int use_chain(SSL_CTX *ctx, const char *chain, const char *chain_what, const char *key,
                     const char *key_what, const char *password, char *err, size_t errlen)
{
    char e[256];
    BIO *bio = BIO_new_mem_buf(chain, -1);
    /* T3: every read names password_cb (an encrypted block never prompts) */
    X509 *x = bio ? PEM_read_bio_X509_AUX(bio, NULL, password_cb, NULL) : NULL;
    int ok = x && SSL_CTX_use_certificate(ctx, x) == 1;
    X509_free(x);
    if (!ok) {
        if (bio && !x && pem_no_start())
            snprintf(err, errlen, "%s: no PEM certificate in it", chain_what);
        else
            snprintf(err, errlen, "%s: %s", chain_what, ossl_reason(e, sizeof e));
        ERR_clear_error();
        BIO_free(bio);
        return -1;
    }
    while ((x = PEM_read_bio_X509(bio, NULL, password_cb, NULL)))
        if (SSL_CTX_add_extra_chain_cert(ctx, x) != 1) {   /* takes x */
            X509_free(x);
            ok = 0;
            break;
        }
    if (!ok || !pem_no_start()) {        /* the chain's end is "no start line" only */
        snprintf(err, errlen, "%s: a certificate of its chain: %s", chain_what,
                 ossl_reason(e, sizeof e));
        BIO_free(bio);
        return -1;
    }
    ERR_clear_error();
    BIO_free(bio);
    bio = BIO_new_mem_buf(key, -1);
    EVP_PKEY *k = bio ? PEM_read_bio_PrivateKey(bio, NULL, password_cb, (void *)password)
                      : NULL;
    ok = k && SSL_CTX_use_PrivateKey(ctx, k) == 1;
    if (!ok && !k && (pem_no_start() || !strstr(key, "PRIVATE KEY")))
        snprintf(err, errlen, "%s: no PEM private key in it", key_what);
    else if (!ok)
        snprintf(err, errlen, "%s: %s%s", key_what, ossl_reason(e, sizeof e),
                 k || !strstr(key, "ENCRYPTED") ? ""
                 : password && password[0] ? " (a wrong ssl.key.password?)"
                 : " (the key is encrypted: ssl.key.password is needed)");
    ERR_clear_error();
    EVP_PKEY_free(k);
    BIO_free(bio);
    return ok ? 0 : -1;
}

/* The chain file and its key's (ssl.keystore.location: both in one;
 * a client's ssl.certificate.location and ssl.key.location), else the
 * inline chain and key; files read by file_text (T6). */
static int load_keystore(SSL_CTX *ctx, const sec_tls_files *c, char *err, size_t errlen)
{
    SSL_CTX_set_default_passwd_cb(ctx, password_cb);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, (void *)c->key_password);
    int rc;
    if (c->chain_file[0]) {
        char chain_what[1200], key_what[1200];
        const char *key_key = c->key_file[0] ? c->key_key : c->chain_key;
        const char *key_file = c->key_file[0] ? c->key_file : c->chain_file;
        snprintf(chain_what, sizeof chain_what, "%s %s", c->chain_key, c->chain_file);
        snprintf(key_what, sizeof key_what, "%s %s", key_key, key_file);
        char *chain = file_text(c->chain_key, c->chain_file, err, errlen);
        char *key = !chain ? NULL : c->key_file[0] ? file_text(key_key, key_file, err, errlen)
                                                   : chain;
        rc = key ? use_chain(ctx, chain, chain_what, key, key_what, c->key_password, err,
                             errlen) : -1;
        if (key && key != chain) {
            OPENSSL_cleanse(key, strlen(key));
            free(key);
        }
        if (chain) {
            OPENSSL_cleanse(chain, strlen(chain));
            free(chain);
        }
    } else if (c->chain_pem[0]) {
        rc = use_chain(ctx, c->chain_pem, "ssl.keystore.certificate.chain", c->key_pem,
                       "ssl.keystore.key", c->key_password, err, errlen);
    } else {
        return 0;                 /* a client without a certificate */
    }
    if (rc)
        return -1;
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        snprintf(err, errlen, "the keystore's private key does not match its certificate");
        return -1;
    }
    return 0;
}

/* The certificates (and CRLs) of a PEM text into ctx's store (a server's
 * also the CAs a client may pick its certificate by); how many
 * certificates, or -1 with why (a block that does not read: the whole
 * text is refused, as OpenSSL's file loader refused it). */
static int add_cas(SSL_CTX *ctx, const char *pem, bool server, char *why, size_t whylen)
{
    BIO *bio = BIO_new_mem_buf(pem, -1);
    STACK_OF(X509_INFO) *infos = bio ? PEM_X509_INFO_read_bio(bio, NULL, password_cb, NULL)
                                     : NULL;
    if (!infos) {
        ossl_reason(why, whylen);
        BIO_free(bio);
        return -1;
    }
    X509_STORE *st = SSL_CTX_get_cert_store(ctx);
    int n = 0;
    for (int i = 0; infos && i < sk_X509_INFO_num(infos); i++) {
        X509_INFO *it = sk_X509_INFO_value(infos, i);
        if (it->x509 && X509_STORE_add_cert(st, it->x509) == 1) {
            n++;
            if (server)
                SSL_CTX_add_client_CA(ctx, it->x509);
        }
        if (it->crl)
            X509_STORE_add_crl(st, it->crl);
    }
    sk_X509_INFO_pop_free(infos, X509_INFO_free);
    BIO_free(bio);
    ERR_clear_error();
    return n;
}

static int load_truststore(SSL_CTX *ctx, const sec_tls_files *c, bool server,
                           char *err, size_t errlen)
{
    if (c->ca_file[0]) {
        char *pem = file_text(c->ca_key, c->ca_file, err, errlen);   /* T6 */
        char why[256];
        int n = pem ? add_cas(ctx, pem, server, why, sizeof why) : -2;
        free(pem);
        if (n == 0)
            snprintf(err, errlen, "%s %s: no PEM certificate in it", c->ca_key, c->ca_file);
        else if (n == -1)
            snprintf(err, errlen, "%s %s: %s", c->ca_key, c->ca_file, why);
        if (n <= 0)
            return -1;
    } else if (c->ca_pem[0]) {
        char why[256];
        int n = add_cas(ctx, c->ca_pem, false, why, sizeof why);
        if (n <= 0) {
            snprintf(err, errlen, "ssl.truststore.certificates: %s",
                     n ? why : "no PEM certificate");
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

/* The cause of a client connection's failure in plain words: OpenSSL's
 * reason ("certificate verify failed", "wrong version number") with the
 * certificate's problem, or the system's error, or who closed during the
 * handshake.  libevent queues SSL_get_error()'s code (SSL_ERROR_SSL,
 * SSL_ERROR_SYSCALL: "error:00000005:lib(0)...", no cause) before the
 * real errors: those codes are skipped. */
const char *sec_tls_event_why(struct bufferevent *bev, short what, const char *eof, char *buf,
                              size_t len)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);               /* NULL: not TLS */
    int sock_err = EVUTIL_SOCKET_ERROR();
    unsigned long e, cause = 0;
    bool queued = false;
    while (ssl && (e = bufferevent_get_openssl_error(bev)) != 0) {
        queued = true;
        if (!cause && !(ERR_GET_LIB(e) == 0 && ERR_GET_REASON(e) < 16))
            cause = e;                   /* the first real one */
    }
    if (what & BEV_EVENT_TIMEOUT)
        return "no answer in time";
    if (!ssl)
        return what & BEV_EVENT_EOF ? eof : "connection error";
    bool handshake = !SSL_is_init_finished(ssl);
    long v = SSL_get_verify_result(ssl);
    if (cause && ERR_SYSTEM_ERROR(cause)) {
        snprintf(buf, len, "TLS%s: %s", handshake ? " handshake" : "",
                 strerror(ERR_GET_REASON(cause)));
    } else if (cause) {
        const char *r = ERR_reason_error_string(cause);
        int at;
        if (r)
            at = snprintf(buf, len, "TLS%s: %s", handshake ? " handshake" : "", r);
        else {
            at = snprintf(buf, len, "TLS: ");
            if (at > 0 && (size_t)at < len)
                ERR_error_string_n(cause, buf + at, len - (size_t)at);
            at = (int)strlen(buf);
        }
        if (at > 0 && (size_t)at < len && v != X509_V_OK)  /* which certificate problem */
            snprintf(buf + at, len - (size_t)at, " (the server's certificate: %s)",
                     X509_verify_cert_error_string(v));
        else if (at > 0 && (size_t)at < len && ERR_GET_LIB(cause) == ERR_LIB_SSL &&
                 (ERR_GET_REASON(cause) == SSL_R_WRONG_VERSION_NUMBER ||
                  ERR_GET_REASON(cause) == SSL_R_PACKET_LENGTH_TOO_LONG))
            snprintf(buf + at, len - (size_t)at, " (the other side does not speak TLS there?)");
    } else if (handshake && v != X509_V_OK) {
        snprintf(buf, len, "TLS handshake: the server's certificate: %s",
                 X509_verify_cert_error_string(v));
    } else if (handshake && (what & BEV_EVENT_ERROR) && sock_err) {
        snprintf(buf, len, "TLS handshake: %s", evutil_socket_error_to_string(sock_err));
    } else if (handshake) {
        snprintf(buf, len, "TLS handshake: %s before it finished (not a TLS listener?)", eof);
    } else if (what & BEV_EVENT_EOF) {
        return eof;                      /* T5 */
    } else if (queued && sock_err) {
        snprintf(buf, len, "TLS: %s", evutil_socket_error_to_string(sock_err));
    } else {
        return "connection error";
    }
    return buf;
}
