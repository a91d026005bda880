/* TLS contexts from the ssl.* keys, and the helpers the connection code,
 * the replica fetcher and the admin endpoint share (daemon/security/sec_tls.c). */
#ifndef SLUICE_TLS_H
#define SLUICE_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

struct bk_broker;

/* Where a context's certificates come from: files (a key file "" means
 * the key is in the chain file) or else inline PEM texts; each *_key is
 * the setting's name, for error messages. */
typedef struct sec_tls_files {
    const char *chain_key, *chain_file, *key_key, *key_file;
    const char *chain_pem, *key_pem, *key_password;
    const char *ca_key, *ca_file, *ca_pem;    /* no CA at all: the system's */
    const char *protocols;                    /* ssl.enabled.protocols */
} sec_tls_files;

/* The server context (listeners, admin https), made on first call.
 * NULL with err when the keystore or truststore cannot be loaded. */
SSL_CTX *sec_tls_server_ctx(struct bk_broker *b, char *err, size_t errlen);
/* The client context broker-to-broker connections use: the same keystore
 * (presented when the other side asks), the truststore to verify with. */
SSL_CTX *sec_tls_client_ctx(struct bk_broker *b, char *err, size_t errlen);
/* A client connection's bufferevent speaking TLS to host (not yet
 * connected) with the client context: SNI for a host name, the name
 * checked when ssl.endpoint.identification.algorithm is set, EOF without
 * close_notify taken as EOF.  NULL with *why (err holds the context's
 * reason). */
struct bufferevent;
struct bufferevent *sec_tls_client_bev(struct bk_broker *b, const char *host, char *err,
                                       size_t errlen, const char **why);
/* A new client context from f (another client than the broker's own:
 * a cluster link, daemon/link/link_conn.c), the peer verified; the
 * caller frees it.  NULL with err. */
SSL_CTX *sec_tls_client_ctx_new(const sec_tls_files *f, char *err, size_t errlen);
/* As sec_tls_client_bev, with ctx; check_host: the certificate must name
 * host (ssl.endpoint.identification.algorithm=https). */
struct event_base;
struct bufferevent *sec_tls_client_bev_ctx(struct event_base *base, SSL_CTX *ctx,
                                           const char *host, bool check_host, const char **why);
/* Why a client bufferevent's event callback got `what` (an error, EOF or
 * a timeout): the TLS error in buf with the certificate's problem when
 * verification failed, else a static string; eof names who closed. */
const char *sec_tls_event_why(struct bufferevent *bev, short what, const char *eof, char *buf,
                              size_t len);
/* Whether this kernel takes the "tls" TCP upper-layer protocol (kernel
 * TLS), probed once on a loopback connection. */
bool sec_tls_kernel_available(void);
/* Whether OpenSSL moved this connection's sending into the kernel. */
bool sec_tls_ktls_send(SSL *ssl);
/* "User:CN=...,O=..." (RFC 2253, Kafka's default principal builder) of
 * the verified peer certificate; 0, or -1 when there is none. */
int  sec_tls_peer_principal(SSL *ssl, char *buf, size_t cap);
/* The first OpenSSL error, for log lines ("certificate verify failed"). */
const char *sec_tls_error(char *buf, size_t cap);
void sec_tls_free(struct bk_broker *b);

#endif
