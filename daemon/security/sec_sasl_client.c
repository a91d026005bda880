/*
 * daemon/security/sec_sasl_client.c — the inter-broker SASL client (design
 * note and invariants SC1-SC3 in sec_sasl_client.h).
 */
#include "daemon/security/sec_sasl_client.h"
#include "daemon/broker_config.h"
#include "daemon/security/sec_peer.h"
#include "daemon/worker.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp_msgs.h"

bool sec_sasl_client_wanted(const bk_broker *b)
{
    return bk_secproto_is_sasl(b->cfg->listeners[b->cfg->inter_broker_listener].proto);
}

void sec_sasl_client_init(bk_sasl_client *c, bk_sasl_keys *k, const bk_sasl_client_ops *ops,
                         void *conn, int32_t peer)
{
    memset(c, 0, sizeof *c);
    c->keys = k;
    c->ops = ops;
    c->conn = conn;
    c->peer = peer;
}

void sec_sasl_client_reset(bk_sasl_client *c)
{
    c->step = 0;
    c->salting = false;
    c->done_once = false;
    OPENSSL_cleanse(&c->scram, sizeof c->scram);
}

/* The login failed: one line naming the leader and what it said, then
 * the usual backoff (ops->fail): the partitions stay unfetched, so this
 * broker stays out of their ISR until a login succeeds. */
static void sasl_fail(bk_sasl_client *c, const char *what)
{
    const bk_sasl_keys *k = c->keys;
    char why[1024];
    snprintf(why, sizeof why, "SASL %s %s as User:%s failed: %s", k->mechanism,
             c->done_once ? "re-authentication" : "authentication", k->user, what);
    c->ops->fail(c->conn, why);
}

void sec_sasl_client_start(bk_sasl_client *c)
{
    kp_SaslHandshakeRequest q;
    kp_init_SaslHandshakeRequest(&q);
    q.Mechanism = kp_str_cstr(c->keys->mechanism);
    c->step = 0;
    c->ops->send(c->conn, KP_API_SASL_HANDSHAKE, BK_SASL_HANDSHAKE_VERSION, &q);
}

static void sasl_token(bk_sasl_client *c, const char *tok, size_t n)
{
    kp_SaslAuthenticateRequest q;
    kp_init_SaslAuthenticateRequest(&q);
    q.AuthBytes = (kp_str){ tok, (int32_t)n };
    c->step++;
    c->ops->send(c->conn, KP_API_SASL_AUTHENTICATE, BK_SASL_AUTH_VERSION, &q);
}

/* The first token: PLAIN's "\0user\0password" or SCRAM's client-first. */
static void sasl_first_token(bk_sasl_client *c)
{
    const bk_sasl_keys *k = c->keys;
    scram_mech m = kp_scram_mech_parse(k->mechanism);
    char tok[SCRAM_MAX_NAME * 3 + 128];
    int n;
    if (m == SCRAM_UNKNOWN) {                    /* PLAIN (bk_config_finish, link.c) */
        size_t ul = strlen(k->user), pl = strlen(k->password);
        if (ul + pl + 2 > sizeof tok) {
            sasl_fail(c, "the user name and password are too long");
            return;
        }
        tok[0] = 0;
        memcpy(tok + 1, k->user, ul);
        tok[1 + ul] = 0;
        memcpy(tok + 2 + ul, k->password, pl);
        n = (int)(2 + ul + pl);
    } else {
        uint8_t rnd[24];
        char cnonce[40];
        if (RAND_bytes(rnd, sizeof rnd) != 1) {
            c->ops->fail(c->conn, "no random bytes for a SCRAM nonce");
            return;
        }
        kp_scram_b64_encode(rnd, sizeof rnd, cnonce, sizeof cnonce);  /* no ',' */
        n = kp_scram_client_first_write(&c->scram, m, k->user, cnonce, tok, sizeof tok);
    }
    if (n < 0) {
        sasl_fail(c, "the user name is too long");
        return;
    }
    sasl_token(c, tok, (size_t)n);
    OPENSSL_cleanse(tok, sizeof tok);
}

/* ---- the keys (SC2) ------------------------------------------------------------- */

/* The PBKDF2 of the broker's password for a salt, on the janitor's
 * thread; one at a time per broker.  keys is NULL once disowned. */
typedef struct sasl_salt_job {
    bk_sasl_keys *keys;
    scram_mech mech;
    uint8_t salt[64];
    size_t salt_len;
    int32_t iterations;
    char password[256];
    uint8_t out[SCRAM_MAX_KEY];
    int rc;
} sasl_salt_job;

static void salt_run(void *arg)
{
    sasl_salt_job *j = arg;
    j->rc = kp_scram_salted_password(j->mech, j->password, strlen(j->password), j->salt,
                                  j->salt_len, j->iterations, j->out);
}

/* Loop thread: cached, and every client waiting for it goes on (one
 * whose leader sent another salt starts a job again). */
static void salt_done(void *arg)
{
    sasl_salt_job *j = arg;
    bk_sasl_keys *k = j->keys;
    bool ok = j->rc == 0;
    if (k) {
        k->job = NULL;
        if (ok) {
            memcpy(k->key, j->out, sizeof k->key);
            memcpy(k->salt, j->salt, j->salt_len);
            k->salt_len = j->salt_len;
            k->iterations = j->iterations;
            k->mech = j->mech;
        }
    }
    OPENSSL_cleanse(j, sizeof *j);
    free(j);
    if (k)
        k->salted(k->owner, ok);
}

void sec_sasl_keys_init(bk_sasl_keys *k, bk_broker *b, void (*salted)(void *owner, bool ok),
                       void *owner)
{
    memset(k, 0, sizeof *k);
    k->b = b;
    k->salted = salted;
    k->owner = owner;
    k->mechanism = b->cfg->sasl_mechanism_inter_broker_protocol;
    k->user = b->cfg->ib_sasl_user;
    k->password = b->cfg->ib_sasl_password;
    k->who = "replica fetcher";
}

void sec_sasl_keys_login(bk_sasl_keys *k, const char *mechanism, const char *user,
                         const char *password, const char *who)
{
    k->mechanism = mechanism;
    k->user = user;
    k->password = password;
    k->who = who;
}

void sec_sasl_keys_free(bk_sasl_keys *k)
{
    if (k->job)
        k->job->keys = NULL;             /* the janitor's done() frees it */
    OPENSSL_cleanse(k->key, sizeof k->key);
}

static bool keys_cached(const bk_sasl_keys *k, scram_mech m, const scram_server_first_msg *sf)
{
    return k->mech == m && k->iterations == sf->iterations &&
           k->salt_len == sf->salt_len && !memcmp(k->salt, sf->salt, sf->salt_len);
}

/* Starts the PBKDF2 for sf unless one runs already.  0 or -1. */
static int salt_start(bk_sasl_keys *k, scram_mech m, const scram_server_first_msg *sf)
{
    if (k->job)
        return 0;                        /* its end resumes every waiter */
    sasl_salt_job *j = calloc(1, sizeof *j);
    if (!j)
        return -1;
    j->keys = k;
    j->mech = m;
    memcpy(j->salt, sf->salt, sf->salt_len);
    j->salt_len = sf->salt_len;
    j->iterations = sf->iterations;
    snprintf(j->password, sizeof j->password, "%s", k->password);
    if (bk_worker_call(k->b->calls, salt_run, salt_done, j) != 0) {
        OPENSSL_cleanse(j, sizeof *j);
        free(j);
        return -1;
    }
    k->job = j;
    return 0;
}

/* SCRAM's client-final for the server-first kept in c, once the
 * SaltedPassword for its salt is known (else the client waits for it). */
static void sasl_client_final(bk_sasl_client *c)
{
    bk_sasl_keys *k = c->keys;
    scram_mech m = kp_scram_mech_parse(k->mechanism);
    scram_server_first_msg sf;
    char fin[512];
    int n;
    c->salting = false;
    if (kp_scram_server_first_parse(&c->scram, c->server_first, c->server_first_len, &sf) != 0) {
        sasl_fail(c, "the leader's server-first message is malformed (or its nonce or "
                     "iteration count is unacceptable)");
        return;
    }
    if (!keys_cached(k, m, &sf)) {
        if (salt_start(k, m, &sf) != 0) {
            c->ops->fail(c->conn, "cannot start the SCRAM key derivation");
            return;
        }
        c->salting = true;               /* nothing is sent meanwhile */
        return;
    }
    n = kp_scram_client_final_write(&c->scram, &sf, c->server_first, c->server_first_len,
                                 k->key, fin, sizeof fin);
    if (n < 0) {
        sasl_fail(c, "cannot compute the client proof");
        return;
    }
    sasl_token(c, fin, (size_t)n);
    OPENSSL_cleanse(fin, sizeof fin);
}

void sec_sasl_client_resume(bk_sasl_client *c, bool ok)
{
    if (ok)
        sasl_client_final(c);
    else
        c->ops->fail(c->conn, "the SCRAM key derivation failed");
}

/* ---- the answers ---------------------------------------------------------------- */

static void handshake_answer(bk_sasl_client *c, kp_rd *r, kp_arena *arena)
{
    kp_SaslHandshakeResponse h;
    char msg[300];
    if (kp_dec_SaslHandshakeResponse(r, BK_SASL_HANDSHAKE_VERSION, &h, arena) != 0) {
        c->ops->fail(c->conn, "malformed SaslHandshake answer");
        return;
    }
    if (h.ErrorCode != KP_NONE) {
        size_t at = 0;
        char offered[200] = "";
        for (int32_t i = 0; i < h.Mechanisms_count && at < sizeof offered; i++)
            at += (size_t)snprintf(offered + at, sizeof offered - at, "%s%.*s",
                                   i ? "," : "", (int)h.Mechanisms[i].len,
                                   h.Mechanisms[i].p ? h.Mechanisms[i].p : "");
        snprintf(msg, sizeof msg, "SaslHandshake error %d (the leader offers %s)",
                 h.ErrorCode, offered[0] ? offered : "no mechanism");
        sasl_fail(c, msg);
        return;
    }
    sasl_first_token(c);
}

void sec_sasl_client_answer(bk_sasl_client *c, int16_t api, kp_rd *r, kp_arena *arena)
{
    const bk_sasl_keys *k = c->keys;
    scram_mech m = kp_scram_mech_parse(k->mechanism);
    char msg[300];
    if (api == KP_API_SASL_HANDSHAKE) {
        handshake_answer(c, r, arena);
        return;
    }
    kp_rd_tags(r);                       /* response header v1 (BK_SASL_AUTH_VERSION 2) */
    kp_SaslAuthenticateResponse a;
    if (kp_dec_SaslAuthenticateResponse(r, BK_SASL_AUTH_VERSION, &a, arena) != 0) {
        c->ops->fail(c->conn, "malformed SaslAuthenticate answer");
        return;
    }
    if (a.ErrorCode != KP_NONE) {
        snprintf(msg, sizeof msg, "%.*s (error %d)",
                 a.ErrorMessage.len > 0 ? (int)a.ErrorMessage.len : 0,
                 a.ErrorMessage.p ? a.ErrorMessage.p : "", a.ErrorCode);
        sasl_fail(c, msg);
        return;
    }
    const char *tok = a.AuthBytes.p ? a.AuthBytes.p : "";
    size_t tlen = a.AuthBytes.len > 0 ? (size_t)a.AuthBytes.len : 0;
    if (m != SCRAM_UNKNOWN && c->step == 1) {            /* server-first */
        if (tlen >= sizeof c->server_first) {
            sasl_fail(c, "the leader's server-first message is too long");
            return;
        }
        memcpy(c->server_first, tok, tlen);
        c->server_first_len = tlen;
        sasl_client_final(c);
        return;
    }
    if (m != SCRAM_UNKNOWN && !kp_scram_client_verify(&c->scram, tok, tlen)) {   /* SC3 */
        sasl_fail(c, "the leader's server signature is wrong (it does not hold this user's "
                     "credential)");
        return;
    }
    OPENSSL_cleanse(&c->scram, sizeof c->scram);
    if (!c->done_once)
        BK_INFO("%s for broker %d: SASL %s authentication as User:%s succeeded", k->who,
                c->peer, k->mechanism, k->user);
    c->done_once = true;
    c->ops->authenticated(c->conn, a.SessionLifetimeMs);
}
