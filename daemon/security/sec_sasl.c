/*
 * daemon/security/sec_sasl.c — SASL on a SASL_PLAINTEXT / SASL_SSL listener, as Kafka's
 * SaslServerAuthenticator does it.
 *
 * Two ways in, both served (clients use either):
 *   - SaslHandshake v1 then SaslAuthenticate (librdkafka, Java): each SASL
 *     token travels in a SaslAuthenticate request and its answer.
 *   - SaslHandshake v0 then raw tokens (kafka-python 2.0.2): INT32 length
 *     and the bytes, no Kafka header, answered the same way
 *     (sec_sasl_raw_token; net_server.c routes the frames here while
 *     sec_sasl_raw_pending).
 *
 * States of a connection (sasl_conn.state), with the function of each
 * transition:
 *
 *   NONE ──handshake()──► HANDSHAKEN ──step(): SCRAM client-first──► SCRAM_FINAL
 *     ▲                        │ step(): PLAIN ok          │ step(): client-final ok
 *     │                        ▼                           ▼
 *     └──── (reauth) ──── AUTHENTICATED ◄──────────────────┘
 *   any failure ──► closed (after the error response, BK_RESPOND_CLOSE)
 *
 * Invariants:
 *   1. Until AUTHENTICATED has been reached once, only ApiVersions,
 *      SaslHandshake and SaslAuthenticate are served (sec_sasl_gate); any
 *      other request closes the connection, as Kafka does.
 *   2. A session lasts connections.max.reauth.ms (0: for ever) from its
 *      last successful authentication; after that, the next request other
 *      than a re-authentication closes the connection (KIP-368).  A
 *      re-authentication must name the same user.
 *   3. The event loop never stretches a key.  A SCRAM login is a SQLite
 *      point read, two HMACs and a hash there (kp_scram.h inv. 3).  A PLAIN
 *      login checked against the stored SCRAM credentials (inv. 6: a
 *      listener without JAAS users) is a point read and one SHA-256 (plain_digest) there; when
 *      that digest is not in plain_seen (a user's first login, a changed
 *      password, every wrong password, every unknown user) the PBKDF2 of
 *      the stored iteration count (about 2 ms at 4096 with SHA-256) runs on
 *      the janitor's thread (bk_worker_call on b->calls) and SaslAuthenticate (or the
 *      raw v0 token) is answered when it comes back (plain_done): the
 *      request is deferred (BK_DEFER), so the connection reads nothing
 *      else meanwhile (net_server.c inv. 1), and a connection closed meanwhile
 *      only detaches the job (plain_cancel; plain_done frees it).  The
 *      admin endpoint's Basic auth is the same check, cache and worker
 *      (sec_sasl_check_password: the HTTP answer waits for it; a client gone
 *      meanwhile cancels, plain_done frees).
 *   4. Failures never say which part was wrong (unknown user and wrong
 *      password get the same message, Kafka's), nor take a different
 *      time: an unknown user's PLAIN password is checked against a
 *      credential no password matches (nobody_cred, 4096 iterations), on
 *      the worker like any other; against JAAS users (inv. 6), a random
 *      secret's digest (jaas_plain_ok).
 *   5. plain_seen is bounded (PLAIN_SEEN entries, one per slot) and holds
 *      successes only, keyed by user and a digest of (stored key, salt,
 *      password): a wrong password can neither hit nor evict an entry, so
 *      it always costs the full PBKDF2 and leaves the right one cheap.
 *      Secrets are compared in constant time (CRYPTO_memcmp; kp_scram.h
 *      inv. 2); passwords copied into a job are cleansed when it ends.
 *   6. Whose password PLAIN checks, per listener, as Kafka's
 *      PlainServerCallbackHandler: when the listener's PlainLoginModule
 *      line (listener.name.<l>.plain.sasl.jaas.config, else
 *      sasl.jaas.config; bk_config_plain_users) has user_<name>="<pw>"
 *      options, those users are PLAIN's only ones: a user not listed is
 *      refused even when it has a SCRAM credential, and a listed one is
 *      checked against its option only (two SHA-256 and a constant-time
 *      compare, on the loop: nothing to stretch, nothing cached).  A
 *      listener whose line has none keeps the SCRAM credentials (inv. 3),
 *      Sluice's own extension, so setups without user_ options are
 *      unchanged.  The admin endpoint's Basic auth is not a listener and
 *      always uses the SCRAM credentials.
 */
#include "daemon/security/sec_sasl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "daemon/view/view.h"
#include "daemon/view/view_store.h"
#include "daemon/broker_config.h"
#include "daemon/worker.h"
#include "daemon/request.h"
#include "protocol/kp_scram.h"
#include "kp_msgs.h"

enum sasl_mech { M_PLAIN, M_SCRAM_SHA_256, M_SCRAM_SHA_512, M_COUNT };
static const char *const mech_names[M_COUNT] = { "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512" };

enum sasl_state { S_NONE, S_HANDSHAKEN, S_SCRAM_FINAL, S_AUTHENTICATED };

struct bk_sasl_conn {
    enum sasl_state state;
    enum sasl_mech mech;
    bool raw;                        /* SaslHandshake v0: tokens without headers */
    bool authenticated;              /* once (inv. 1) */
    char user[SCRAM_MAX_NAME];       /* the authenticated user */
    int64_t expires_ms;              /* wall clock; 0: never (inv. 2) */
    scram_server scram;
    char scram_user[SCRAM_MAX_NAME]; /* between the two SCRAM steps */
};

/* /metrics (loop thread). */
static uint64_t auth_ok[M_COUNT], auth_failed[M_COUNT], reauth_ok[M_COUNT];

#define FAILED_FMT "Authentication failed during %s due to invalid credentials with " \
                   "SASL mechanism %s"
#define PLAIN_FAILED "Authentication failed: Invalid username or password"

/* ---- mechanisms ----------------------------------------------------------------- */
static int mech_parse(const char *name, size_t len, enum sasl_mech *out)
{
    for (int m = 0; m < M_COUNT; m++)
        if (strlen(mech_names[m]) == len && !memcmp(mech_names[m], name, len)) {
            *out = (enum sasl_mech)m;
            return 0;
        }
    return -1;
}

/* The mechanisms conn's listener enables (bk_config_sasl_mechanisms), the
 * ones Sluice knows, in the configured order; names it does not serve
 * (GSSAPI, OAUTHBEARER) are left out. */
static int enabled_mechs(const bk_config *cfg, const bk_conn *conn, enum sasl_mech *out)
{
    int n = 0;
    const char *p = bk_config_sasl_mechanisms(cfg, net_conn_listener(conn));
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        enum sasl_mech m;
        if (e > p && !mech_parse(p, (size_t)(e - p), &m)) {
            bool dup = false;
            for (int i = 0; i < n; i++)
                dup |= out[i] == m;
            if (!dup)
                out[n++] = m;
        }
        p = e;
    }
    return n;
}

static bool mech_enabled(const bk_config *cfg, const bk_conn *conn, enum sasl_mech m)
{
    enum sasl_mech en[M_COUNT];
    int n = enabled_mechs(cfg, conn, en);
    for (int i = 0; i < n; i++)
        if (en[i] == m)
            return true;
    return false;
}

static scram_mech to_scram(enum sasl_mech m)
{
    return m == M_SCRAM_SHA_256 ? SCRAM_SHA_256 : m == M_SCRAM_SHA_512 ? SCRAM_SHA_512
                                                                       : SCRAM_UNKNOWN;
}

/* ---- per-connection state --------------------------------------------------------- */
static bk_sasl_conn *state_of(bk_conn *c)
{
    bk_sasl_conn **slot = net_conn_sasl(c);
    if (!*slot)
        *slot = calloc(1, sizeof **slot);
    return *slot;
}

void sec_sasl_conn_free(bk_conn *c)
{
    bk_sasl_conn **slot = net_conn_sasl(c);
    if (!*slot)
        return;
    kp_scram_server_clear(&(*slot)->scram);
    free(*slot);
    *slot = NULL;
}

bool sec_sasl_gate(bk_broker *b, bk_conn *c, int16_t api_key)
{
    if (!bk_secproto_is_sasl(net_conn_secproto(c)) || api_key == KP_API_API_VERSIONS ||
        api_key == KP_API_SASL_HANDSHAKE || api_key == KP_API_SASL_AUTHENTICATE)
        return true;
    bk_sasl_conn *s = state_of(c);
    if (!s || !s->authenticated) {
        BK_WARN("%s request from %s before SASL authentication; closing "
                "(ILLEGAL_SASL_STATE, as Kafka does)", kp_api_name(api_key), net_conn_peer(c));
        return false;
    }
    if (s->expires_ms && bk_now_ms() >= s->expires_ms) {
        BK_INFO("SASL session of %s from %s expired (connections.max.reauth.ms=%lld) "
                "without re-authentication; closing", net_conn_principal(c), net_conn_peer(c),
                (long long)b->cfg->connections_max_reauth_ms);
        return false;
    }
    return true;
}

bool sec_sasl_raw_pending(bk_conn *c)
{
    bk_sasl_conn *s = *net_conn_sasl(c);
    return s && s->raw && (s->state == S_HANDSHAKEN || s->state == S_SCRAM_FINAL);
}

/* ---- one token ----------------------------------------------------------------------- */
enum { STEP_FAIL = -1, STEP_CONTINUE = 0, STEP_DONE = 1, STEP_PENDING = 2 };

static int load_cred(bk_broker *b, const char *user, scram_mech m, scram_cred *out)
{
    md_scram_cred mc;
    if (md_user_get(b->db, user, kp_scram_mech_name(m), &mc) != 0 ||
        mc.key_len != kp_scram_key_len(m) || mc.salt_len > sizeof out->salt)
        return -1;
    memset(out, 0, sizeof *out);
    out->mech = m;
    memcpy(out->salt, mc.salt, mc.salt_len);
    out->salt_len = mc.salt_len;
    out->iterations = mc.iterations;
    memcpy(out->stored_key, mc.stored_key, mc.key_len);
    memcpy(out->server_key, mc.server_key, mc.key_len);
    return 0;
}

/* Succeeded as user: the principal, the session's end (inv. 2). */
static int authenticated(bk_broker *b, bk_conn *c, bk_sasl_conn *s, const char *user)
{
    bool reauth = s->authenticated;
    if (reauth && strcmp(user, s->user)) {
        BK_WARN("SASL re-authentication from %s as User:%s, not %s; closing",
                net_conn_peer(c), user, net_conn_principal(c));
        return STEP_FAIL;
    }
    snprintf(s->user, sizeof s->user, "%s", user);
    char principal[BK_PRINCIPAL_MAX];
    snprintf(principal, sizeof principal, "User:%s", user);
    net_conn_set_principal(c, principal);
    s->authenticated = true;
    s->state = S_AUTHENTICATED;
    s->raw = false;
    int64_t life = b->cfg->connections_max_reauth_ms;
    s->expires_ms = life > 0 ? bk_now_ms() + life : 0;
    (reauth ? reauth_ok : auth_ok)[s->mech]++;
    BK_INFO("SASL %s %s of %s from %s", mech_names[s->mech],
            reauth ? "re-authentication" : "authentication", principal, net_conn_peer(c));
    return STEP_DONE;
}

/* PLAIN logins already verified (inv. 3): a user's next login with the
 * same password against the same stored credential costs one SHA-256 of
 * (stored key, salt, password) instead of a PBKDF2.  One entry per slot of
 * a small hash table (bounded: PLAIN_SEEN entries, loop thread only); a
 * changed credential (new stored key) or another password misses and pays
 * the PBKDF2 again.  Only successes are kept, so a wrong password never
 * evicts nor replaces a user's entry (inv. 5). */
#define PLAIN_SEEN 1024
static struct plain_seen {
    char user[SCRAM_MAX_NAME];
    uint8_t digest[32];
    bool used;
} plain_seen[PLAIN_SEEN];

static void plain_digest(const scram_cred *c, const char *pw, size_t n, uint8_t out[32])
{
    EVP_MD_CTX *x = EVP_MD_CTX_new();
    unsigned int len = 0;
    if (!x || !EVP_DigestInit_ex(x, EVP_sha256(), NULL) ||
        !EVP_DigestUpdate(x, c->stored_key, kp_scram_key_len(c->mech)) ||
        !EVP_DigestUpdate(x, c->salt, c->salt_len) || !EVP_DigestUpdate(x, pw, n) ||
        !EVP_DigestFinal_ex(x, out, &len))
        memset(out, 0, 32);           /* never matches a stored digest of a success */
    EVP_MD_CTX_free(x);
}

/* The credential an unknown user is checked against, so that a login as
 * nobody costs the PBKDF2 a wrong password does (inv. 4): a random salt
 * and stored key no password derives (loop thread). */
static const scram_cred *nobody_cred(void)
{
    static scram_cred d;
    static bool made;
    if (!made) {
        d.mech = SCRAM_SHA_256;
        d.salt_len = 32;
        d.iterations = SCRAM_DEFAULT_ITERATIONS;
        if (RAND_bytes(d.salt, 32) != 1 || RAND_bytes(d.stored_key, 32) != 1)
            memset(d.stored_key, 0xa5, sizeof d.stored_key);
        made = true;
    }
    return &d;
}

/* One PLAIN check: gathered on the loop (credential, digest), the PBKDF2
 * on the janitor's thread (plain_run), settled on the loop (plain_done). */
typedef struct plain_job {
    bk_req *r;                       /* loop only; NULL once the connection is gone */
    /* Or, for sec_sasl_check_password: whom to tell (NULL once cancelled). */
    void (*check_done)(void *arg, bool ok);
    void *check_arg;
    scram_cred cred;                 /* the user's, or nobody_cred() */
    bool known;
    bool ok;                         /* plain_run's answer */
    char user[SCRAM_MAX_NAME];
    uint8_t digest[32];              /* plain_digest: the cache's key */
    size_t pwlen;
    char pw[];                       /* cleansed before free */
} plain_job;

static struct plain_seen *seen_slot(const char *user)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *q = user; *q; q++)
        h = (h ^ (uint8_t)*q) * 1099511628211ULL;
    return &plain_seen[h % PLAIN_SEEN];
}

/* The credential of user (SHA-256's, else SHA-512's: inv. 3), or nobody's. */
static plain_job *plain_prepare(bk_broker *b, const char *user, const char *pw, size_t n)
{
    static const scram_mech order[] = { SCRAM_SHA_256, SCRAM_SHA_512 };
    if (strlen(user) >= SCRAM_MAX_NAME)
        return NULL;
    plain_job *j = calloc(1, sizeof *j + n + 1);
    if (!j)
        return NULL;
    for (size_t i = 0; i < sizeof order / sizeof order[0] && !j->known; i++)
        j->known = !load_cred(b, user, order[i], &j->cred);
    if (!j->known)
        j->cred = *nobody_cred();
    snprintf(j->user, sizeof j->user, "%s", user);
    memcpy(j->pw, pw, n);
    j->pwlen = n;
    plain_digest(&j->cred, pw, n, j->digest);
    return j;
}

static void plain_job_free(plain_job *j)
{
    OPENSSL_cleanse(j->pw, j->pwlen);
    OPENSSL_cleanse(j->digest, sizeof j->digest);
    free(j);
}

/* A success seen before (constant-time on the digest: inv. 5). */
static bool plain_seen_hit(const plain_job *j)
{
    const struct plain_seen *e = seen_slot(j->user);
    return j->known && e->used && !strcmp(e->user, j->user) &&
           !CRYPTO_memcmp(e->digest, j->digest, sizeof j->digest);
}

/* Worker thread: the PBKDF2, the same for a known and an unknown user. */
static void plain_run(void *arg)
{
    plain_job *j = arg;
    bool match = kp_scram_verify_password(&j->cred, j->pw, j->pwlen);
    j->ok = match && j->known;
}

/* Loop thread, after plain_run: a success enters the cache.  j->ok. */
static bool plain_settle(const plain_job *j)
{
    if (j->ok) {
        struct plain_seen *e = seen_slot(j->user);
        snprintf(e->user, sizeof e->user, "%s", j->user);
        memcpy(e->digest, j->digest, sizeof e->digest);
        e->used = true;
    }
    return j->ok;
}

static void plain_done(void *arg);

/* The admin endpoint's Basic auth: PLAIN's check, with PLAIN's cache and
 * worker (inv. 3). */
bk_sasl_check *sec_sasl_check_password(bk_broker *b, const char *user, const char *pw, size_t n,
                                      void (*done)(void *arg, bool ok), void *arg)
{
    plain_job *j = plain_prepare(b, user, pw, n);
    if (!j) {
        done(arg, false);
        return NULL;
    }
    bool hit = plain_seen_hit(j);
    if (!hit) {
        j->check_done = done;
        j->check_arg = arg;
        if (bk_worker_call(b->calls, plain_run, plain_done, j) == 0)
            return j;
        plain_run(j);                /* no worker: here */
    }
    bool ok = hit || plain_settle(j);
    plain_job_free(j);
    done(arg, ok);
    return NULL;
}

void sec_sasl_check_cancel(bk_sasl_check *j)
{
    j->check_done = NULL;            /* plain_done frees it (replica_janitor.c inv. 4) */
}

static void plain_cancel(bk_req *r)
{
    plain_job *j = r->state;
    j->r = NULL;                     /* plain_done frees it (replica_janitor.c inv. 4) */
}

/* ---- PLAIN against the listener's JAAS users (inv. 6) ---------------------------- */
static void sha256_of(const void *p, size_t n, uint8_t out[32])
{
    unsigned int len = 0;
    if (!EVP_Digest(p, n, out, &len, EVP_sha256(), NULL))
        RAND_bytes(out, 32);         /* matches nothing */
}

/* Is pw user's password among u's (Kafka's PlainServerCallbackHandler)?
 * Every entry is looked at (names compared in constant time for their
 * length), and the offered password's digest is compared with the user's
 * password's, or an unknown user's with a random secret's, digested the
 * same way: a wrong password and an unknown user cost the same two
 * SHA-256 (inv. 4). */
static bool jaas_plain_ok(const bk_plain_users *u, const char *user, const char *pw, size_t n)
{
    static uint8_t nobody[32];
    static bool made;
    if (!made && RAND_bytes(nobody, sizeof nobody) == 1)
        made = true;
    size_t ulen = strlen(user);
    const char *expected = NULL;
    for (int i = 0; i < u->n; i++)
        if (strlen(u->v[i].name) == ulen && !CRYPTO_memcmp(u->v[i].name, user, ulen))
            expected = u->v[i].password;
    uint8_t want[32], got[32];
    if (expected)
        sha256_of(expected, strlen(expected), want);
    else
        sha256_of(nobody, sizeof nobody, want);
    sha256_of(pw, n, got);
    bool ok = !CRYPTO_memcmp(want, got, sizeof want) && expected && made;
    OPENSSL_cleanse(want, sizeof want);
    OPENSSL_cleanse(got, sizeof got);
    return ok;
}

static int step_plain(bk_req *r, bk_sasl_conn *s, const char *tok, size_t len)
{
    scram_plain p;
    char user[SCRAM_MAX_NAME];
    if (kp_scram_plain_parse(tok, len, &p) || p.user.len >= sizeof user)
        return STEP_FAIL;
    memcpy(user, p.user.p, p.user.len);
    user[p.user.len] = 0;
    if (p.authzid.len && (p.authzid.len != p.user.len || memcmp(p.authzid.p, user, p.user.len)))
        return STEP_FAIL;          /* Kafka: authorization id must match the user */
    const bk_plain_users *ju = bk_config_plain_users(r->b->cfg, net_conn_listener(r->conn));
    if (ju && ju->n)                 /* inv. 6: these users only, checked here */
        return jaas_plain_ok(ju, user, p.password.p, p.password.len)
               ? authenticated(r->b, r->conn, s, user) : STEP_FAIL;
    plain_job *j = plain_prepare(r->b, user, p.password.p, p.password.len);
    if (!j)
        return STEP_FAIL;
    if (plain_seen_hit(j)) {
        plain_job_free(j);
        return authenticated(r->b, r->conn, s, user);
    }
    j->r = r;
    if (bk_worker_call(r->b->calls, plain_run, plain_done, j) == 0) {
        r->state = j;
        r->cancel = plain_cancel;
        return STEP_PENDING;
    }
    plain_run(j);                    /* no worker (not started, no memory): here */
    bool ok = plain_settle(j);
    plain_job_free(j);
    return ok ? authenticated(r->b, r->conn, s, user) : STEP_FAIL;
}

static int step_scram(bk_broker *b, bk_conn *c, bk_sasl_conn *s, const char *tok, size_t len,
                      char *out, size_t cap, size_t *outlen)
{
    scram_mech m = to_scram(s->mech);
    if (s->state == S_HANDSHAKEN) {
        scram_client_first cf;
        scram_cred cred;
        if (kp_scram_client_first_parse(tok, len, &cf) || load_cred(b, cf.user, m, &cred))
            return STEP_FAIL;
        /* Kafka: an authorization id other than the user is refused. */
        if (cf.authzid.len && (cf.authzid.len != strlen(cf.user) ||
                               memcmp(cf.authzid.p, cf.user, cf.authzid.len)))
            return STEP_FAIL;
        uint8_t rnd[18];
        char snonce[32];
        if (RAND_bytes(rnd, sizeof rnd) != 1)
            return STEP_FAIL;
        kp_scram_b64_encode(rnd, sizeof rnd, snonce, sizeof snonce);   /* no ',' in base64 */
        int n = kp_scram_server_first(&s->scram, &cf, &cred, snonce, out, cap);
        if (n < 0)
            return STEP_FAIL;
        snprintf(s->scram_user, sizeof s->scram_user, "%s", cf.user);
        *outlen = (size_t)n;
        s->state = S_SCRAM_FINAL;
        return STEP_CONTINUE;
    }
    scram_client_final cf;
    int n = kp_scram_client_final_parse(tok, len, &cf) ? -1
            : kp_scram_server_final(&s->scram, &cf, out, cap);
    kp_scram_server_clear(&s->scram);
    if (n < 0)
        return STEP_FAIL;
    *outlen = (size_t)n;
    return authenticated(b, c, s, s->scram_user);
}

/* A failed step: counted, logged, the failure text in msg (inv. 4). */
static void step_failed(bk_conn *c, bk_sasl_conn *s, char *msg, size_t msglen)
{
    auth_failed[s->mech]++;
    if (s->mech == M_PLAIN)
        snprintf(msg, msglen, PLAIN_FAILED);
    else
        snprintf(msg, msglen, FAILED_FMT,
                 s->authenticated ? "re-authentication" : "authentication",
                 mech_names[s->mech]);
    BK_WARN("SASL %s authentication from %s failed; closing", mech_names[s->mech],
            net_conn_peer(c));
    s->state = S_NONE;
}

/* One client token; the answer token in out.  STEP_FAIL with *msg;
 * STEP_PENDING when a worker has the check (PLAIN: plain_done answers). */
static int step(bk_req *r, bk_sasl_conn *s, const uint8_t *tok, size_t len,
                char *out, size_t cap, size_t *outlen, char *msg, size_t msglen)
{
    *outlen = 0;
    int rc = s->mech == M_PLAIN ? step_plain(r, s, (const char *)tok, len)
                                : step_scram(r->b, r->conn, s, (const char *)tok, len, out, cap,
                                             outlen);
    if (rc == STEP_FAIL)
        step_failed(r->conn, s, msg, msglen);
    return rc;
}

/* SaslAuthenticate's response (v from the request's header): error and
 * message, or the answer token and the session's lifetime.  BK_RESPOND,
 * or BK_RESPOND_CLOSE after an error on a SASL listener. */
static int authenticate_answer(bk_req *r, int16_t err, const char *msg, const char *ans,
                               size_t n, int64_t lifetime_ms)
{
    kp_SaslAuthenticateResponse m;
    kp_init_SaslAuthenticateResponse(&m);
    m.ErrorCode = err;
    if (msg)
        m.ErrorMessage = kp_str_cstr(msg);
    m.AuthBytes = (kp_str){ ans, (int32_t)n };
    m.SessionLifetimeMs = lifetime_ms;   /* v1+: KIP-368 */
    kp_enc_SaslAuthenticateResponse(r->out, r->hdr.RequestApiVersion, &m);
    return err && bk_secproto_is_sasl(net_conn_secproto(r->conn)) ? BK_RESPOND_CLOSE
                                                                   : BK_RESPOND;
}

/* A step's result as SaslAuthenticate's response (st not PENDING). */
static int step_answer(bk_req *r, bk_sasl_conn *s, int st, const char *ans, size_t n,
                       const char *msg)
{
    if (st == STEP_FAIL)
        return authenticate_answer(r, KP_SASL_AUTHENTICATION_FAILED, msg, "", 0, 0);
    return authenticate_answer(r, KP_NONE, NULL, ans, n,
                               st == STEP_DONE && s->expires_ms
                               ? r->b->cfg->connections_max_reauth_ms : 0);
}

/* Loop thread: a PLAIN check came back from the worker (replica_janitor.c inv. 4). */
static void plain_done(void *arg)
{
    plain_job *j = arg;
    bk_req *r = j->r;
    bool ok = plain_settle(j);
    if (!r) {                        /* a Basic check, or the connection closed meanwhile */
        if (j->check_done)
            j->check_done(j->check_arg, ok);
        plain_job_free(j);
        return;
    }
    r->cancel = NULL;
    r->state = NULL;
    bk_sasl_conn *s = *net_conn_sasl(r->conn);
    int st = ok ? authenticated(r->b, r->conn, s, j->user) : STEP_FAIL;
    plain_job_free(j);
    char msg[256];
    if (st == STEP_FAIL)
        step_failed(r->conn, s, msg, sizeof msg);
    if (r->raw) {                    /* v0: an empty token, or just the close */
        if (st == STEP_FAIL)
            net_req_close(r, false);
        else
            net_req_finish(r);
        return;
    }
    if (step_answer(r, s, st, "", 0, msg) == BK_RESPOND)
        net_req_finish(r);
    else
        net_req_close(r, true);
}

int sec_sasl_raw_token(bk_req *r, const uint8_t *tok, size_t len)
{
    bk_sasl_conn *s = *net_conn_sasl(r->conn);
    char ans[512], msg[256];
    size_t n;
    int st = s ? step(r, s, tok, len, ans, sizeof ans, &n, msg, sizeof msg) : STEP_FAIL;
    if (st == STEP_FAIL)
        return -1;                   /* v0: Kafka just closes the connection */
    if (st == STEP_PENDING)
        return 1;
    kp_wr_raw(r->out, ans, n);       /* PLAIN: an empty token, as Kafka sends */
    return r->out->err ? -1 : 0;
}

/* ---- the two APIs ------------------------------------------------------------------- */
static kp_str *enabled_list(bk_req *r, int32_t *count)
{
    enum sasl_mech en[M_COUNT];
    int n = enabled_mechs(r->b->cfg, r->conn, en);
    kp_str *v = kp_arena_alloc(&r->arena, sizeof *v * (size_t)(n ? n : 1));
    for (int i = 0; v && i < n; i++)
        v[i] = kp_str_cstr(mech_names[en[i]]);
    *count = v ? n : 0;
    return v;
}

int sec_handle_sasl_handshake(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_SaslHandshakeRequest q;
    if (kp_dec_SaslHandshakeRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    kp_SaslHandshakeResponse m;
    kp_init_SaslHandshakeResponse(&m);
    m.Mechanisms = enabled_list(r, &m.Mechanisms_count);
    int rc = BK_RESPOND;
    enum sasl_mech mech;
    bk_sasl_conn *s = NULL;
    if (!bk_secproto_is_sasl(net_conn_secproto(r->conn))) {
        /* Kafka answers this on a listener without SASL. */
        m.ErrorCode = KP_ILLEGAL_SASL_STATE;
        m.Mechanisms_count = 0;
    } else if (!(s = state_of(r->conn))) {
        return BK_CLOSE;
    } else if (q.Mechanism.len < 0 || mech_parse(q.Mechanism.p, (size_t)q.Mechanism.len, &mech) ||
               !mech_enabled(r->b->cfg, r->conn, mech)) {
        BK_WARN("SASL mechanism %.*s from %s is not enabled on listener %s (%s); "
                "closing", q.Mechanism.len < 0 ? 0 : (int)q.Mechanism.len,
                q.Mechanism.p ? q.Mechanism.p : "", net_conn_peer(r->conn),
                net_conn_listener(r->conn) ? net_conn_listener(r->conn) : "-",
                bk_config_sasl_mechanisms(r->b->cfg, net_conn_listener(r->conn)));
        m.ErrorCode = KP_UNSUPPORTED_SASL_MECHANISM;
        rc = BK_RESPOND_CLOSE;
    } else if (s->state == S_HANDSHAKEN || s->state == S_SCRAM_FINAL ||
               (s->authenticated && v == 0)) {
        /* A second handshake mid-exchange; v0 cannot re-authenticate. */
        m.ErrorCode = KP_ILLEGAL_SASL_STATE;
        rc = BK_RESPOND_CLOSE;
    } else {
        s->mech = mech;
        s->state = S_HANDSHAKEN;
        s->raw = v == 0;
        m.ErrorCode = KP_NONE;
    }
    kp_enc_SaslHandshakeResponse(r->out, v, &m);
    return rc;
}

int sec_handle_sasl_authenticate(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_SaslAuthenticateRequest q;
    if (kp_dec_SaslAuthenticateRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    bk_sasl_conn *s = bk_secproto_is_sasl(net_conn_secproto(r->conn)) ? state_of(r->conn) : NULL;
    if (!s || s->raw || (s->state != S_HANDSHAKEN && s->state != S_SCRAM_FINAL))
        return authenticate_answer(r, KP_ILLEGAL_SASL_STATE,
                                   s ? "Unexpected SaslAuthenticate request: no "
                                       "SaslHandshake v1 before it"
                                     : "SaslAuthenticate on a listener without SASL",
                                   "", 0, 0);
    char ans[512], msg[256];
    size_t n = 0;
    int st = step(r, s, (const uint8_t *)(q.AuthBytes.p ? q.AuthBytes.p : ""),
                  q.AuthBytes.len < 0 ? 0 : (size_t)q.AuthBytes.len, ans, sizeof ans, &n,
                  msg, sizeof msg);
    if (st == STEP_PENDING)
        return BK_DEFER;             /* plain_done answers */
    return step_answer(r, s, st, ans, n, msg);
}

bool sec_sasl_authenticated(bk_conn *c)
{
    bk_sasl_conn *s = *net_conn_sasl(c);
    return s && s->authenticated;
}

/* ---- operators' changes ---------------------------------------------------------------- */
/* Kafka's checks of a credential change, in its order and words. */
static int check_user(scram_mech m, const char *mechanism, const char *name,
                      int64_t iterations, char *err, size_t errlen)
{
    if (m == SCRAM_UNKNOWN) {
        snprintf(err, errlen, "Unknown SCRAM mechanism %s: SCRAM-SHA-256 or SCRAM-SHA-512",
                 mechanism ? mechanism : "(null)");
        return KP_UNSUPPORTED_SASL_MECHANISM;
    }
    if (!name || !name[0]) {
        snprintf(err, errlen, "Username must not be empty");
        return KP_UNACCEPTABLE_CREDENTIAL;
    }
    /* Any name, as Kafka (SCRAM escapes ',' and '=', the znode name is
     * sanitized: cluster_users.c); only what no client could send is refused. */
    if (strlen(name) >= SCRAM_MAX_NAME) {
        snprintf(err, errlen, "Username is longer than %d bytes", SCRAM_MAX_NAME - 1);
        return KP_UNACCEPTABLE_CREDENTIAL;
    }
    if (!bk_utf8_valid(name, strlen(name))) {
        snprintf(err, errlen, "Username is not valid UTF-8");
        return KP_UNACCEPTABLE_CREDENTIAL;
    }
    if (iterations < SCRAM_MIN_ITERATIONS) {
        snprintf(err, errlen, "Too few iterations: %lld (at least %d)",
                 (long long)iterations, SCRAM_MIN_ITERATIONS);
        return KP_UNACCEPTABLE_CREDENTIAL;
    }
    if (iterations > SCRAM_MAX_ITERATIONS) {
        snprintf(err, errlen, "Too many iterations: %lld (at most %d)",
                 (long long)iterations, SCRAM_MAX_ITERATIONS);
        return KP_UNACCEPTABLE_CREDENTIAL;
    }
    return KP_NONE;
}

int sec_sasl_user_put_salted(bk_broker *b, const char *name, const char *mechanism,
                            const uint8_t *salt, size_t salt_len, int64_t iterations,
                            const uint8_t *salted, size_t salted_len, char *err, size_t errlen)
{
    scram_mech m = kp_scram_mech_parse(mechanism);
    int rc = check_user(m, mechanism, name, iterations, err, errlen);
    if (rc != KP_NONE)
        return rc;
    md_scram_cred mc = { .iterations = (int32_t)iterations, .key_len = kp_scram_key_len(m),
                         .created_at = bk_now_ms() };
    scram_cred c;
    if (!salt_len || salt_len > sizeof mc.salt ||
        kp_scram_cred_from_salted(m, salted, salted_len, &c)) {
        snprintf(err, errlen, "The salt (1 to %zu bytes) or the salted password (%zu bytes "
                 "for %s) has the wrong size", sizeof mc.salt, kp_scram_key_len(m), mechanism);
        return KP_UNACCEPTABLE_CREDENTIAL;
    }
    snprintf(mc.mechanism, sizeof mc.mechanism, "%s", mechanism);
    memcpy(mc.salt, salt, salt_len);
    mc.salt_len = salt_len;
    memcpy(mc.stored_key, c.stored_key, mc.key_len);
    memcpy(mc.server_key, c.server_key, mc.key_len);
    rc = b->store->scram_set(b, name, &mc, err, errlen);
    if (rc)
        return rc;
    BK_INFO("SCRAM credential %s for User:%s set", mechanism, name);
    return KP_NONE;
}

int sec_sasl_user_set(bk_broker *b, const char *name, const char *mechanism,
                     const char *password, int64_t iterations, char *err, size_t errlen)
{
    scram_mech m = kp_scram_mech_parse(mechanism);
    int rc = check_user(m, mechanism, name, iterations, err, errlen);
    if (rc != KP_NONE)
        return rc;
    if (!password || !password[0]) {
        snprintf(err, errlen, "Password must not be empty");
        return KP_UNACCEPTABLE_CREDENTIAL;
    }
    uint8_t salt[BK_SASL_SALT], salted[SCRAM_MAX_KEY];
    size_t kl = sec_sasl_salt(mechanism, password, iterations, salt, salted);
    if (!kl) {
        snprintf(err, errlen, "cannot derive the SCRAM credential");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    rc = sec_sasl_user_put_salted(b, name, mechanism, salt, sizeof salt, iterations, salted,
                                 kl, err, errlen);
    OPENSSL_cleanse(salted, sizeof salted);
    return rc;
}

size_t sec_sasl_salt(const char *mechanism, const char *password, int64_t iterations,
                    uint8_t salt[BK_SASL_SALT], uint8_t salted[SCRAM_MAX_KEY])
{
    scram_mech m = kp_scram_mech_parse(mechanism);
    if (m == SCRAM_UNKNOWN || !password || !password[0] || iterations < SCRAM_MIN_ITERATIONS ||
        iterations > SCRAM_MAX_ITERATIONS || RAND_bytes(salt, BK_SASL_SALT) != 1 ||
        kp_scram_salted_password(m, password, strlen(password), salt, BK_SASL_SALT,
                              (int32_t)iterations, salted))
        return 0;
    return kp_scram_key_len(m);
}

int sec_sasl_user_delete(bk_broker *b, const char *name, const char *mechanism,
                        char *err, size_t errlen)
{
    bool deleted;
    int rc = b->store->scram_delete(b, name ? name : "", mechanism ? mechanism : "",
                                    &deleted, err, errlen);
    if (rc)
        return rc;
    if (!deleted) {
        snprintf(err, errlen, "Attempt to delete a user credential that does not exist");
        return KP_RESOURCE_NOT_FOUND;
    }
    BK_INFO("SCRAM credential %s for User:%s deleted", mechanism, name);
    return KP_NONE;
}

void sec_sasl_metrics_render(kp_buf *o)
{
    static const struct { const char *name, *help; const uint64_t *v; } kinds[] = {
        { "sluice_successful_authentication_total", "SASL authentications that succeeded.",
          auth_ok },
        { "sluice_failed_authentication_total", "SASL authentications that failed.",
          auth_failed },
        { "sluice_successful_reauthentication_total",
          "SASL re-authentications (KIP-368) that succeeded.", reauth_ok },
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        char line[256];
        int n = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s counter\n",
                         kinds[k].name, kinds[k].help, kinds[k].name);
        kp_wr_raw(o, line, (size_t)n);
        for (int m = 0; m < M_COUNT; m++) {
            n = snprintf(line, sizeof line, "%s{mechanism=\"%s\"} %llu\n", kinds[k].name,
                         mech_names[m], (unsigned long long)kinds[k].v[m]);
            kp_wr_raw(o, line, (size_t)n);
        }
    }
}
