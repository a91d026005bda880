/*
 * daemon/security/sec_sasl_client.h — the inter-broker SASL client: the
 * login a replica fetcher (daemon/replication/repl_fetcher.c, F9) does on
 * a SASL_PLAINTEXT / SASL_SSL inter-broker listener, with
 * sasl.mechanism.inter.broker.protocol (PLAIN, SCRAM-SHA-256/512) and the
 * broker's JAAS credentials.
 *
 * The same client logs a cluster link in to its source (daemon/link/
 * link_conn.c) with the link's own mechanism and credentials
 * (sec_sasl_keys_login).
 *
 * The client owns the exchange (which token is next, SCRAM's state, the
 * messages of a failure); its connection owns the socket and is reached
 * through three calls (bk_sasl_client_ops): send a request, fail (close
 * and back off), authenticated (go on, with the leader's
 * SessionLifetimeMs for KIP-368).
 *
 *   start ─SaslHandshake─► answer ─first token─► answer ─┬─ PLAIN: authenticated
 *                                                       └─ SCRAM server-first:
 *         salted key cached? ─yes─► client-final ─► answer: verify ─► authenticated
 *                             └no─► salting (the PBKDF2 on the janitor) ─► resume
 *
 * Invariants:
 *   SC1. Nothing but SaslHandshake and SaslAuthenticate is sent through
 *        ops->send until ops->authenticated ran.
 *   SC2. SCRAM's SaltedPassword for the broker's password is computed off
 *        the loop (bk_worker_call on b->calls), once per salt, iteration count and
 *        mechanism (bk_sasl_keys, one per broker); every client salting
 *        for it is resumed when it is known (keys' salted callback).
 *   SC3. A server-final without the ServerSignature the password gives
 *        fails the login.
 */
#ifndef SLUICE_SEC_SASL_CLIENT_H
#define SLUICE_SEC_SASL_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/broker.h"
#include "protocol/kp_scram.h"
#include "protocol/kp.h"

typedef struct bk_sasl_client_ops {
    void (*send)(void *conn, int16_t api, int16_t version, const void *req);
    void (*fail)(void *conn, const char *why);
    void (*authenticated)(void *conn, int64_t session_lifetime_ms);
} bk_sasl_client_ops;

/* SC2: the SaltedPassword of the broker's password for the last salt and
 * iteration count a leader sent (one credential for every leader). */
typedef struct bk_sasl_keys {
    bk_broker *b;
    struct sasl_salt_job *job;           /* in flight, or NULL */
    void (*salted)(void *owner, bool ok);    /* resume every salting client */
    void *owner;
    /* The login (sec_sasl_keys_init: the broker's inter-broker one;
     * sec_sasl_keys_login: another owner's, kept alive by it). */
    const char *mechanism;               /* PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 */
    const char *user, *password;
    const char *who;                     /* log lines: "replica fetcher", ... */
    scram_mech mech;
    uint8_t salt[64];
    size_t salt_len;
    int32_t iterations;
    uint8_t key[SCRAM_MAX_KEY];
} bk_sasl_keys;

typedef struct bk_sasl_client {
    bk_sasl_keys *keys;
    const bk_sasl_client_ops *ops;
    void *conn;
    int32_t peer;                        /* the leader's broker id (log lines) */
    int step;                            /* tokens sent in this exchange */
    bool done_once;                      /* this connection authenticated */
    bool salting;                        /* waits for the keys (SC2) */
    scram_client scram;
    char server_first[512];              /* for SCRAM's AuthMessage */
    size_t server_first_len;
} bk_sasl_client;

/* SaslHandshake v1 (tokens in SaslAuthenticate, re-authentication
 * allowed); SaslAuthenticate v2 (flexible; SessionLifetimeMs since v1). */
#define BK_SASL_HANDSHAKE_VERSION 1
#define BK_SASL_AUTH_VERSION 2

/* This broker's inter-broker listener is SASL_*. */
bool sec_sasl_client_wanted(const bk_broker *b);
void sec_sasl_keys_init(bk_sasl_keys *k, bk_broker *b, void (*salted)(void *owner, bool ok),
                       void *owner);
/* Another login than the broker's inter-broker one (strings kept alive
 * by the caller as long as k): who names the connection in log lines. */
void sec_sasl_keys_login(bk_sasl_keys *k, const char *mechanism, const char *user,
                         const char *password, const char *who);
/* A job still in flight is disowned: its end touches nothing of k. */
void sec_sasl_keys_free(bk_sasl_keys *k);
void sec_sasl_client_init(bk_sasl_client *c, bk_sasl_keys *k, const bk_sasl_client_ops *ops,
                         void *conn, int32_t peer);
/* The connection closed: the next login starts afresh. */
void sec_sasl_client_reset(bk_sasl_client *c);
/* SaslHandshake, on a new connection or to re-authenticate. */
void sec_sasl_client_start(bk_sasl_client *c);
/* The answer to the request of api the client sent (r after the
 * correlation id; arena reset by the caller). */
void sec_sasl_client_answer(bk_sasl_client *c, int16_t api, kp_rd *r, kp_arena *arena);
/* The keys' salted callback, for a salting client. */
void sec_sasl_client_resume(bk_sasl_client *c, bool ok);

#endif
