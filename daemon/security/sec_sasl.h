/*
 * daemon/security/sec_sasl.h — SASL authentication of Kafka connections (sec_sasl.c): the
 * SaslHandshake / SaslAuthenticate exchange, the gate that keeps every
 * other request out until it has succeeded, re-authentication
 * (connections.max.reauth.ms, KIP-368) and the credentials' admin path
 * (AlterUserScramCredentials, DescribeUserScramCredentials, SQL).
 *
 * The connection code (net_server.c) calls only what is declared here, and
 * only for connections of a SASL listener (sec_peer.h).
 */
#ifndef SLUICE_SASL_H
#define SLUICE_SASL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/broker.h"
#include "daemon/security/sec_peer.h"

typedef struct bk_sasl_conn bk_sasl_conn;

/* The connection's SASL state slot, NULL until its first request
 * (net_server.c owns the field; sec_sasl.c the state). */
bk_sasl_conn **net_conn_sasl(bk_conn *c);

/* Before a request of api_key is served on c: true to serve it; false
 * (logged) when c must be closed — a request other than ApiVersions,
 * SaslHandshake or SaslAuthenticate before authentication (Kafka's
 * ILLEGAL_SASL_STATE), or after the session expired. */
bool sec_sasl_gate(bk_broker *b, bk_conn *c, int16_t api_key);
/* After a SaslHandshake v0 the client sends raw SASL tokens, each an
 * INT32 length and the bytes, without a Kafka header; true while c
 * expects one. */
bool sec_sasl_raw_pending(bk_conn *c);
/* Serves one raw token of r->conn (r set up by net_server.c, r->raw): 0 with
 * the answer's bytes (unframed) in r->out; 1 deferred (a PLAIN check on a
 * worker: it ends in net_req_finish or net_req_close, and r->cancel is set);
 * -1 (logged) to close the connection. */
struct bk_req;
int sec_sasl_raw_token(struct bk_req *r, const uint8_t *tok, size_t len);
/* Has c's login succeeded (once at least)? */
bool sec_sasl_authenticated(bk_conn *c);
/* c is closing. */
void sec_sasl_conn_free(bk_conn *c);
/* Is pw user's password, by the stored SCRAM credential (SHA-256's, else
 * SHA-512's)?  What PLAIN checks, for the admin endpoint's Basic auth:
 * done(arg, ok) runs on the loop, at once (returning NULL) for a repeat of a
 * right password (the cache), else once the PBKDF2 came back from a worker
 * (sec_sasl.c inv. 3); until then the returned check may be cancelled, and done
 * is then never called. */
typedef struct plain_job bk_sasl_check;
bk_sasl_check *sec_sasl_check_password(bk_broker *b, const char *user, const char *pw, size_t n,
                                      void (*done)(void *arg, bool ok), void *arg);
void sec_sasl_check_cancel(bk_sasl_check *check);

#define SCRAM_DEFAULT_ITERATIONS 4096   /* Kafka's */

/* Operators' changes (SQL, AlterUserScramCredentials): password → a new
 * salt and the derived keys (PBKDF2 once, here).  KP_NONE or a Kafka
 * error code with err. */
int sec_sasl_user_set(bk_broker *b, const char *name, const char *mechanism,
                     const char *password, int64_t iterations, char *err, size_t errlen);
/* The slow half of sec_sasl_user_set, for a thread other than the loop
 * (the SQL workers do it before handing the write over): a new salt and
 * the PBKDF2.  The salted password's length, or 0 when the mechanism, the
 * password or the iteration count would be refused (user_set then says
 * why) or the derivation failed. */
#define BK_SASL_SALT 32
#include "protocol/kp_scram.h"
size_t sec_sasl_salt(const char *mechanism, const char *password, int64_t iterations,
                    uint8_t salt[BK_SASL_SALT], uint8_t salted[SCRAM_MAX_KEY]);
/* AlterUserScramCredentials' form: the client salted the password. */
int sec_sasl_user_put_salted(bk_broker *b, const char *name, const char *mechanism,
                            const uint8_t *salt, size_t salt_len, int64_t iterations,
                            const uint8_t *salted, size_t salted_len, char *err, size_t errlen);
int sec_sasl_user_delete(bk_broker *b, const char *name, const char *mechanism,
                        char *err, size_t errlen);

/* Cluster mode (cluster_users.c): credentials in ZooKeeper's /config/users.
 * publish: after a local change, write the user's credentials there;
 * resync: on every (re)connect, read them all (and watch); on_watch: true
 * when path was one of ours (handled). */
void cl_sasl_zk_publish(bk_broker *b, const char *name);
void cl_sasl_zk_resync(bk_broker *b);
bool cl_sasl_zk_on_watch(bk_broker *b, int type, const char *path);

/* /metrics: authentications per mechanism and outcome. */
void sec_sasl_metrics_render(kp_buf *out);

#endif
