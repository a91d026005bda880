/*
 * daemon/sasl.h — SASL authentication of Kafka connections (sasl.c): the
 * SaslHandshake / SaslAuthenticate exchange, the gate that keeps every
 * other request out until it has succeeded, re-authentication
 * (connections.max.reauth.ms, KIP-368) and the credentials' admin path
 * (AlterUserScramCredentials, DescribeUserScramCredentials, SQL).
 *
 * The connection code (server.c) calls only what is declared here, and
 * only for connections of a SASL listener (security.h).
 */
#ifndef SLUICE_SASL_H
#define SLUICE_SASL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/broker.h"
#include "daemon/security.h"

typedef struct bk_sasl_conn bk_sasl_conn;

/* The connection's SASL state slot, NULL until its first request
 * (server.c owns the field; sasl.c the state). */
bk_sasl_conn **bk_conn_sasl(bk_conn *c);

/* Before a request of api_key is served on c: true to serve it; false
 * (logged) when c must be closed — a request other than ApiVersions,
 * SaslHandshake or SaslAuthenticate before authentication (Kafka's
 * ILLEGAL_SASL_STATE), or after the session expired. */
bool bk_sasl_gate(bk_broker *b, bk_conn *c, int16_t api_key);
/* After a SaslHandshake v0 the client sends raw SASL tokens, each an
 * INT32 length and the bytes, without a Kafka header; true while c
 * expects one. */
bool bk_sasl_raw_pending(bk_conn *c);
/* Serves one raw token: 0 with the answer's bytes (unframed) in out, or
 * -1 (logged) to close c. */
int bk_sasl_raw_token(bk_broker *b, bk_conn *c, const uint8_t *tok, size_t len, kp_buf *out);
/* c is closing. */
void bk_sasl_conn_free(bk_conn *c);
/* Is pw user's password, by the stored SCRAM credential (SHA-256's, else
 * SHA-512's)?  What PLAIN checks; also the admin endpoint's Basic auth.
 * A first check per user and password costs a PBKDF2 (~2 ms at 4096). */
bool bk_sasl_password_ok(bk_broker *b, const char *user, const char *pw, size_t n);

#define SCRAM_DEFAULT_ITERATIONS 4096   /* Kafka's */

/* Operators' changes (SQL, AlterUserScramCredentials): password → a new
 * salt and the derived keys (PBKDF2 once, here).  KP_NONE or a Kafka
 * error code with err. */
int bk_sasl_user_set(bk_broker *b, const char *name, const char *mechanism,
                     const char *password, int64_t iterations, char *err, size_t errlen);
/* AlterUserScramCredentials' form: the client salted the password. */
int bk_sasl_user_put_salted(bk_broker *b, const char *name, const char *mechanism,
                            const uint8_t *salt, size_t salt_len, int64_t iterations,
                            const uint8_t *salted, size_t salted_len, char *err, size_t errlen);
int bk_sasl_user_delete(bk_broker *b, const char *name, const char *mechanism,
                        char *err, size_t errlen);

/* Cluster mode (sasl_zk.c): credentials in ZooKeeper's /config/users.
 * publish: after a local change, write the user's credentials there;
 * resync: on every (re)connect, read them all (and watch); on_watch: true
 * when path was one of ours (handled). */
void bk_sasl_zk_publish(bk_broker *b, const char *name);
void bk_sasl_zk_resync(bk_broker *b);
bool bk_sasl_zk_on_watch(bk_broker *b, int type, const char *path);

/* /metrics: authentications per mechanism and outcome. */
void bk_sasl_metrics_render(kp_buf *out);

#endif
