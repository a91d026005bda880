/*
 * protocol/scram.c — PLAIN and SCRAM messages and keys (design note and
 * invariants in kp_scram.h).
 *
 * RFC 5802 §3, with Kafka's ScramSaslServer choices:
 *   SaltedPassword  = PBKDF2-HMAC-H(password, salt, i)
 *   ClientKey       = HMAC(SaltedPassword, "Client Key")
 *   StoredKey       = H(ClientKey)
 *   ServerKey       = HMAC(SaltedPassword, "Server Key")
 *   AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
 *   ClientSignature = HMAC(StoredKey, AuthMessage)
 *   ClientProof     = ClientKey XOR ClientSignature       (the client sends it)
 *   ServerSignature = HMAC(ServerKey, AuthMessage)        (the server's proof)
 * The server recovers ClientKey = ClientProof XOR ClientSignature and
 * accepts when H(ClientKey) = StoredKey.
 */
#include "protocol/kp_scram.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

scram_mech kp_scram_mech_parse(const char *name)
{
    if (!name)
        return SCRAM_UNKNOWN;
    if (!strcmp(name, "SCRAM-SHA-256"))
        return SCRAM_SHA_256;
    if (!strcmp(name, "SCRAM-SHA-512"))
        return SCRAM_SHA_512;
    return SCRAM_UNKNOWN;
}

const char *kp_scram_mech_name(scram_mech m)
{
    return m == SCRAM_SHA_256 ? "SCRAM-SHA-256" : m == SCRAM_SHA_512 ? "SCRAM-SHA-512" : NULL;
}

size_t kp_scram_key_len(scram_mech m)
{
    return m == SCRAM_SHA_256 ? 32 : m == SCRAM_SHA_512 ? 64 : 0;
}

static const EVP_MD *digest(scram_mech m)
{
    return m == SCRAM_SHA_256 ? EVP_sha256() : m == SCRAM_SHA_512 ? EVP_sha512() : NULL;
}

static int hmac(scram_mech m, const uint8_t *key, size_t klen, const void *msg, size_t n,
                uint8_t *out)
{
    unsigned int olen = 0;
    return HMAC(digest(m), key, (int)klen, msg, n, out, &olen) ? 0 : -1;
}

static int hash(scram_mech m, const uint8_t *in, size_t n, uint8_t *out)
{
    unsigned int olen = 0;
    return EVP_Digest(in, n, out, &olen, digest(m), NULL) ? 0 : -1;
}

int kp_scram_cred_from_salted(scram_mech m, const uint8_t *salted, size_t salted_len,
                           scram_cred *c)
{
    size_t kl = kp_scram_key_len(m);
    uint8_t client_key[SCRAM_MAX_KEY];
    if (!kl || salted_len != kl)
        return -1;
    c->mech = m;
    if (hmac(m, salted, kl, "Client Key", 10, client_key) ||
        hash(m, client_key, kl, c->stored_key) ||
        hmac(m, salted, kl, "Server Key", 10, c->server_key))
        return -1;
    OPENSSL_cleanse(client_key, sizeof client_key);
    return 0;
}

int kp_scram_salted_password(scram_mech m, const char *password, size_t pwlen,
                          const uint8_t *salt, size_t salt_len, int32_t iterations,
                          uint8_t *salted)
{
    size_t kl = kp_scram_key_len(m);
    if (!kl || iterations < 1)
        return -1;
    return PKCS5_PBKDF2_HMAC(password, (int)pwlen, salt, (int)salt_len, iterations,
                             digest(m), (int)kl, salted) == 1 ? 0 : -1;
}

bool kp_scram_verify_password(const scram_cred *c, const char *password, size_t pwlen)
{
    uint8_t salted[SCRAM_MAX_KEY];
    scram_cred d;
    size_t kl = kp_scram_key_len(c->mech);
    bool ok = kl &&
              !kp_scram_salted_password(c->mech, password, pwlen, c->salt, c->salt_len,
                                     c->iterations, salted) &&
              !kp_scram_cred_from_salted(c->mech, salted, kl, &d) &&
              !CRYPTO_memcmp(d.stored_key, c->stored_key, kl);
    OPENSSL_cleanse(salted, sizeof salted);
    return ok;
}

/* ---- base64 ---------------------------------------------------------------- */
static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t kp_scram_b64_encode(const uint8_t *in, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < cap; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n) v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n) v |= in[i + 2];
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? b64[v & 63] : '=';
    }
    if (cap)
        out[o < cap ? o : cap - 1] = 0;
    return o;
}

static int b64_value(char ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
}

int kp_scram_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap)
{
    if (n % 4)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            if (in[i + k] == '=' && i + 4 == n && k >= 2) {
                v[k] = 0;
                pad++;
                continue;
            }
            if (pad || (v[k] = b64_value(in[i + k])) < 0)
                return -1;           /* a character after '=', or outside */
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        size_t take = 3 - (size_t)pad;
        /* Canonical only (RFC 4648 3.5): the bits a pad drops must be 0, so
         * each byte string has exactly one encoding ("VS=" is not "VQ="). */
        if ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff)))
            return -1;
        if (o + take > cap)
            return -1;
        out[o++] = (uint8_t)(w >> 16);
        if (take > 1) out[o++] = (uint8_t)(w >> 8);
        if (take > 2) out[o++] = (uint8_t)w;
    }
    return (int)o;
}

/* ---- PLAIN ------------------------------------------------------------------ */
int kp_scram_plain_parse(const char *tok, size_t len, scram_plain *out)
{
    const char *z1 = memchr(tok, 0, len);
    if (!z1)
        return -1;
    const char *u = z1 + 1;
    const char *z2 = memchr(u, 0, len - (size_t)(u - tok));
    if (!z2)
        return -1;
    const char *pw = z2 + 1;
    size_t pwlen = len - (size_t)(pw - tok);
    /* RFC 4616: no further NUL; Kafka also wants a user and a password. */
    if (memchr(pw, 0, pwlen) || z2 == u || pwlen == 0)
        return -1;
    out->authzid = (scram_str){ tok, (size_t)(z1 - tok) };
    out->user = (scram_str){ u, (size_t)(z2 - u) };
    out->password = (scram_str){ pw, pwlen };
    return 0;
}

/* ---- SCRAM messages --------------------------------------------------------- */
/* The attribute value from p (after "x="), up to the next ',' or end. */
static scram_str attr_value(const char *p, const char *end)
{
    const char *c = memchr(p, ',', (size_t)(end - p));
    return (scram_str){ p, (size_t)((c ? c : end) - p) };
}

static bool starts(const char *p, const char *end, const char *lit)
{
    size_t n = strlen(lit);
    return (size_t)(end - p) >= n && !memcmp(p, lit, n);
}

/* RFC 5802's printable: %x21-2B / %x2D-7E (no comma). */
static bool printable(scram_str s)
{
    for (size_t i = 0; i < s.len; i++)
        if ((unsigned char)s.p[i] < 0x21 || (unsigned char)s.p[i] > 0x7e || s.p[i] == ',')
            return false;
    return s.len > 0;
}

/* saslname: "=2C" is ',', "=3D" is '='; any other '=' is malformed. */
static int saslname_decode(scram_str s, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < s.len; i++) {
        char ch = s.p[i];
        if (ch == '=') {
            if (s.len - i < 3)
                return -1;
            if (s.p[i + 1] == '2' && s.p[i + 2] == 'C')
                ch = ',';
            else if (s.p[i + 1] == '3' && s.p[i + 2] == 'D')
                ch = '=';
            else
                return -1;
            i += 2;
        } else if (ch == 0) {
            return -1;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = ch;
    }
    out[o] = 0;
    return o ? 0 : -1;
}

/* ",r=<printable nonce>" at p: the nonce and what follows it, or NULL. */
static const char *nonce_attr(const char *p, const char *end, scram_str *nonce)
{
    if (!starts(p, end, ",r="))
        return NULL;
    *nonce = attr_value(p + 3, end);
    return printable(*nonce) ? p + 3 + nonce->len : NULL;
}

int kp_scram_client_first_parse(const char *tok, size_t len, scram_client_first *out)
{
    const char *end = tok + len, *p = tok;
    memset(out, 0, sizeof *out);
    if (!starts(p, end, "n,"))
        return -1;
    p += 2;
    if (starts(p, end, "a=")) {
        out->authzid = attr_value(p + 2, end);
        p += 2 + out->authzid.len;
    }
    if (p >= end || *p != ',')
        return -1;
    p++;
    out->gs2_header = (scram_str){ tok, (size_t)(p - tok) };
    out->bare = (scram_str){ p, (size_t)(end - p) };
    if (!starts(p, end, "n="))
        return -1;
    scram_str name = attr_value(p + 2, end);
    if (saslname_decode(name, out->user, sizeof out->user))
        return -1;
    p += 2 + name.len;
    if (!(p = nonce_attr(p, end, &out->nonce)))
        return -1;
    if (p < end) {                   /* ",ext=..." */
        if (*p != ',' || p + 1 == end)
            return -1;
        out->extensions = (scram_str){ p + 1, (size_t)(end - p - 1) };
    }
    return 0;
}

int kp_scram_client_final_parse(const char *tok, size_t len, scram_client_final *out)
{
    const char *end = tok + len, *p = tok;
    memset(out, 0, sizeof *out);
    if (!starts(p, end, "c="))
        return -1;
    scram_str cb = attr_value(p + 2, end);
    int n = kp_scram_b64_decode(cb.p, cb.len, out->channel_binding, sizeof out->channel_binding);
    if (n < 0)
        return -1;
    out->channel_binding_len = (size_t)n;
    p += 2 + cb.len;
    if (!(p = nonce_attr(p, end, &out->nonce)))
        return -1;
    /* The proof is the last attribute (RFC 5802 §7), after any extensions. */
    const char *last = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == ',')
            last = q;
    if (!last || !starts(last, end, ",p="))
        return -1;
    out->without_proof = (scram_str){ tok, (size_t)(last - tok) };
    scram_str proof = { last + 3, (size_t)(end - last - 3) };
    n = kp_scram_b64_decode(proof.p, proof.len, out->proof, sizeof out->proof);
    if (n <= 0)
        return -1;
    out->proof_len = (size_t)n;
    return 0;
}

/* ---- the server's two steps -------------------------------------------------- */
int kp_scram_server_first(scram_server *s, const scram_client_first *cf, const scram_cred *cred,
                       const char *snonce, char *out, size_t cap)
{
    size_t sn = strlen(snonce);
    kp_scram_server_clear(s);
    if (cf->nonce.len + sn >= sizeof s->nonce || cf->gs2_header.len > sizeof s->gs2 ||
        cred->salt_len > sizeof cred->salt || !kp_scram_key_len(cred->mech))
        return -1;
    memcpy(s->nonce, cf->nonce.p, cf->nonce.len);
    memcpy(s->nonce + cf->nonce.len, snonce, sn + 1);
    memcpy(s->gs2, cf->gs2_header.p, cf->gs2_header.len);
    s->gs2_len = cf->gs2_header.len;
    s->mech = cred->mech;
    s->cred = *cred;
    char salt64[96];
    kp_scram_b64_encode(cred->salt, cred->salt_len, salt64, sizeof salt64);
    int n = snprintf(out, cap, "r=%s,s=%s,i=%d", s->nonce, salt64, (int)cred->iterations);
    if (n < 0 || (size_t)n >= cap)
        return -1;
    /* AuthMessage's first two parts; the client-final's part comes later. */
    s->auth_len = cf->bare.len + 1 + (size_t)n + 1;
    s->auth_message = malloc(s->auth_len);
    if (!s->auth_message)
        return -1;
    memcpy(s->auth_message, cf->bare.p, cf->bare.len);
    s->auth_message[cf->bare.len] = ',';
    memcpy(s->auth_message + cf->bare.len + 1, out, (size_t)n);
    s->auth_message[s->auth_len - 1] = ',';
    return n;
}

/* Kafka's check (ScramSaslServer.verifyClientProof): the client-final's
 * nonce ENDS WITH the server-first's.  librdkafka up to at least 2.0.2
 * sends its own nonce again in front of the combined one ("r=" cnonce
 * cnonce snonce), and computes its proof over what it sent; Kafka accepts
 * it, and so do we.  The proof still covers the nonce as sent. */
static bool nonce_matches(scram_str got, const char *want)
{
    size_t n = strlen(want);
    return got.len >= n && !memcmp(got.p + got.len - n, want, n);
}

int kp_scram_server_final(scram_server *s, const scram_client_final *cf, char *out, size_t cap)
{
    size_t kl = kp_scram_key_len(s->mech);
    if (!kl || !s->auth_message)
        return -1;
    if (cf->channel_binding_len != s->gs2_len ||
        memcmp(cf->channel_binding, s->gs2, s->gs2_len) ||
        !nonce_matches(cf->nonce, s->nonce) ||
        cf->proof_len != kl)
        return -1;
    size_t alen = s->auth_len + cf->without_proof.len;
    char *am = malloc(alen);
    if (!am)
        return -1;
    memcpy(am, s->auth_message, s->auth_len);
    memcpy(am + s->auth_len, cf->without_proof.p, cf->without_proof.len);
    uint8_t sig[SCRAM_MAX_KEY], client_key[SCRAM_MAX_KEY], stored[SCRAM_MAX_KEY];
    int rc = -1;
    if (!hmac(s->mech, s->cred.stored_key, kl, am, alen, sig)) {
        for (size_t i = 0; i < kl; i++)
            client_key[i] = cf->proof[i] ^ sig[i];
        if (!hash(s->mech, client_key, kl, stored) &&
            !CRYPTO_memcmp(stored, s->cred.stored_key, kl) &&
            !hmac(s->mech, s->cred.server_key, kl, am, alen, sig) && cap > 2) {
            memcpy(out, "v=", 2);
            rc = 2 + (int)kp_scram_b64_encode(sig, kl, out + 2, cap - 2);
        }
    }
    OPENSSL_cleanse(client_key, sizeof client_key);
    free(am);
    return rc;
}

void kp_scram_server_clear(scram_server *s)
{
    free(s->auth_message);
    OPENSSL_cleanse(s, sizeof *s);
}

/* ---- the client's steps ------------------------------------------------------ */
int kp_scram_client_first_write(scram_client *c, scram_mech m, const char *user,
                             const char *cnonce, char *out, size_t cap)
{
    memset(c, 0, sizeof *c);
    size_t nl = strlen(cnonce);
    if (!kp_scram_key_len(m) || nl >= sizeof c->cnonce)
        return -1;
    c->mech = m;
    memcpy(c->cnonce, cnonce, nl + 1);
    /* saslname: ',' and '=' escaped (RFC 5802 5.1) */
    size_t o = 0;
    o += (size_t)snprintf(c->bare, sizeof c->bare, "n=");
    for (const char *p = user; *p; p++) {
        const char *rep = *p == ',' ? "=2C" : *p == '=' ? "=3D" : NULL;
        size_t k = rep ? 3 : 1;
        if (o + k + 1 >= sizeof c->bare)
            return -1;
        memcpy(c->bare + o, rep ? rep : p, k);
        o += k;
    }
    int n = snprintf(c->bare + o, sizeof c->bare - o, ",r=%s", cnonce);
    if (n < 0 || (size_t)n >= sizeof c->bare - o)
        return -1;
    n = snprintf(out, cap, "n,,%s", c->bare);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

int kp_scram_server_first_parse(const scram_client *c, const char *tok, size_t len,
                             scram_server_first_msg *out)
{
    const char *end = tok + len, *p = tok;
    memset(out, 0, sizeof *out);
    if (!starts(p, end, "r="))
        return -1;
    out->nonce = attr_value(p + 2, end);
    size_t cn = strlen(c->cnonce);
    if (!printable(out->nonce) || out->nonce.len <= cn || memcmp(out->nonce.p, c->cnonce, cn))
        return -1;                   /* the server's part must follow ours */
    p += 2 + out->nonce.len;
    if (!starts(p, end, ",s="))
        return -1;
    scram_str salt = attr_value(p + 3, end);
    int n = kp_scram_b64_decode(salt.p, salt.len, out->salt, sizeof out->salt);
    if (n <= 0)
        return -1;
    out->salt_len = (size_t)n;
    p += 3 + salt.len;
    if (!starts(p, end, ",i="))
        return -1;
    scram_str it = attr_value(p + 3, end);
    int64_t v = 0;
    for (size_t i = 0; i < it.len; i++) {
        if (it.p[i] < '0' || it.p[i] > '9' || v > SCRAM_MAX_ITERATIONS)
            return -1;
        v = v * 10 + (it.p[i] - '0');
    }
    if (!it.len || v < SCRAM_MIN_ITERATIONS || v > SCRAM_MAX_ITERATIONS)
        return -1;
    out->iterations = (int32_t)v;
    return 0;                        /* extensions after i= are ignored */
}

int kp_scram_client_final_write(scram_client *c, const scram_server_first_msg *sf,
                             const char *server_first, size_t sflen, const uint8_t *salted,
                             char *out, size_t cap)
{
    size_t kl = kp_scram_key_len(c->mech);
    /* client-final-without-proof: "c=biws" is base64("n,,") */
    int wn = snprintf(out, cap, "c=biws,r=%.*s", (int)sf->nonce.len, sf->nonce.p);
    if (!kl || wn < 0 || (size_t)wn >= cap)
        return -1;
    size_t blen = strlen(c->bare), alen = blen + 1 + sflen + 1 + (size_t)wn;
    char *am = malloc(alen);
    if (!am)
        return -1;
    memcpy(am, c->bare, blen);
    am[blen] = ',';
    memcpy(am + blen + 1, server_first, sflen);
    am[blen + 1 + sflen] = ',';
    memcpy(am + blen + 2 + sflen, out, (size_t)wn);
    uint8_t client_key[SCRAM_MAX_KEY], stored[SCRAM_MAX_KEY], sig[SCRAM_MAX_KEY],
            server_key[SCRAM_MAX_KEY];
    int rc = -1;
    if (!hmac(c->mech, salted, kl, "Client Key", 10, client_key) &&
        !hash(c->mech, client_key, kl, stored) &&
        !hmac(c->mech, stored, kl, am, alen, sig) &&
        !hmac(c->mech, salted, kl, "Server Key", 10, server_key) &&
        !hmac(c->mech, server_key, kl, am, alen, c->server_signature)) {
        for (size_t i = 0; i < kl; i++)
            sig[i] ^= client_key[i];     /* ClientProof */
        char proof[SCRAM_MAX_KEY * 2];
        kp_scram_b64_encode(sig, kl, proof, sizeof proof);
        int n = snprintf(out + wn, cap - (size_t)wn, ",p=%s", proof);
        if (n > 0 && (size_t)n < cap - (size_t)wn)
            rc = wn + n;
    }
    OPENSSL_cleanse(client_key, sizeof client_key);
    OPENSSL_cleanse(server_key, sizeof server_key);
    free(am);
    return rc;
}

bool kp_scram_client_verify(const scram_client *c, const char *tok, size_t len)
{
    size_t kl = kp_scram_key_len(c->mech);
    uint8_t got[SCRAM_MAX_KEY];
    int n = len > 2 && !memcmp(tok, "v=", 2)
            ? kp_scram_b64_decode(tok + 2, len - 2, got, sizeof got) : -1;
    return kl && n == (int)kl && !CRYPTO_memcmp(got, c->server_signature, kl);
}
