/*
 * protocol/kp_scram.h — the SASL mechanisms' messages and their cryptography:
 * PLAIN (RFC 4616) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677),
 * with Kafka's details.  Pure functions over bytes (OpenSSL's libcrypto
 * for the digests): no connection, no SQLite, no event loop.  Shared by
 * the broker (its listeners' exchange, daemon/security/sec_sasl.c; its
 * replica fetcher's login, sec_sasl_client.c) and libsluice (clients/
 * client_sasl.c); tests/fuzz/fuzz_sasl_scram.c drives the parsers directly.
 *
 * Invariants:
 *   1. A parser reads exactly len bytes (the token is not NUL-terminated)
 *      and either fills its output completely or returns -1; its output
 *      slices point into the token.
 *   2. Every comparison of a secret (stored key, proof) is constant-time
 *      (CRYPTO_memcmp).
 *   3. The server never sees or keeps a password for SCRAM: it stores
 *      StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
 *      HMAC(SaltedPassword, "Server Key"), and a login costs it two HMACs
 *      and a hash (PBKDF2 runs on the client).  PLAIN is the exception: the
 *      client sends its password, and checking it against the stored
 *      credential costs one PBKDF2 (kp_scram_verify_password).
 */
#ifndef SLUICE_KP_SCRAM_H
#define SLUICE_KP_SCRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Kafka's ScramMechanism enum (AlterUserScramCredentials): 0 unknown. */
typedef enum scram_mech {
    SCRAM_UNKNOWN = 0,
    SCRAM_SHA_256 = 1,
    SCRAM_SHA_512 = 2,
} scram_mech;

#define SCRAM_MAX_KEY 64             /* SHA-512 */
#define SCRAM_MAX_NAME 256           /* a user name, decoded, with its NUL */
#define SCRAM_MIN_ITERATIONS 4096    /* Kafka's minimum and default */
#define SCRAM_MAX_ITERATIONS 16384   /* Kafka's maximum */

/* A byte slice inside a token. */
typedef struct scram_str {
    const char *p;
    size_t len;
} scram_str;

/* "SCRAM-SHA-256" → SCRAM_SHA_256; anything else SCRAM_UNKNOWN. */
scram_mech kp_scram_mech_parse(const char *name);
const char *kp_scram_mech_name(scram_mech m);     /* NULL for UNKNOWN */
size_t kp_scram_key_len(scram_mech m);            /* 32, 64; 0 unknown */

/* A stored credential (the users table's columns). */
typedef struct scram_cred {
    scram_mech mech;
    uint8_t salt[64];
    size_t salt_len;
    int32_t iterations;
    uint8_t stored_key[SCRAM_MAX_KEY];
    uint8_t server_key[SCRAM_MAX_KEY];
} scram_cred;

/* From a SaltedPassword (what AlterUserScramCredentials sends, or
 * PBKDF2's output): stored and server keys.  0 or -1. */
int kp_scram_cred_from_salted(scram_mech m, const uint8_t *salted, size_t salted_len,
                           scram_cred *c);
/* PBKDF2-HMAC(password, salt, iterations) into salted (kp_scram_key_len). */
int kp_scram_salted_password(scram_mech m, const char *password, size_t pwlen,
                          const uint8_t *salt, size_t salt_len, int32_t iterations,
                          uint8_t *salted);
/* PLAIN's check: does password give c's stored key?  True or false. */
bool kp_scram_verify_password(const scram_cred *c, const char *password, size_t pwlen);

/* ---- base64 (RFC 4648, padded) ---- */
/* Encodes n bytes into out (cap ≥ 4*ceil(n/3)+1, NUL-terminated); length. */
size_t kp_scram_b64_encode(const uint8_t *in, size_t n, char *out, size_t cap);
/* Decodes; -1 on a character or padding outside the alphabet, or when the
 * result exceeds cap.  Else the decoded length. */
int kp_scram_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap);

/* ---- PLAIN: [authzid] NUL authcid NUL passwd ---- */
typedef struct scram_plain {
    scram_str authzid, user, password;
} scram_plain;
int kp_scram_plain_parse(const char *tok, size_t len, scram_plain *out);

/* ---- SCRAM client-first: gs2-header client-first-bare ----
 *   "n,," | "n,a=<authzid>,"   then   "n=<saslname>,r=<nonce>[,ext...]"
 * Kafka accepts only the "n" channel-binding flag; extensions (Kafka's
 * "tokenauth=true") are kept as a slice, unparsed. */
typedef struct scram_client_first {
    scram_str gs2_header;            /* "n,," including the final comma */
    scram_str authzid;               /* len 0: none */
    char user[SCRAM_MAX_NAME];       /* saslname decoded (=2C → ',', =3D → '=') */
    scram_str nonce;
    scram_str bare;                  /* client-first-bare, for AuthMessage */
    scram_str extensions;            /* after "r=...,", len 0: none */
} scram_client_first;
int kp_scram_client_first_parse(const char *tok, size_t len, scram_client_first *out);

/* ---- SCRAM client-final ----
 *   "c=<b64 gs2 header>,r=<nonce>[,ext...],p=<b64 proof>" */
typedef struct scram_client_final {
    uint8_t channel_binding[128];    /* c= decoded */
    size_t channel_binding_len;
    scram_str nonce;
    scram_str without_proof;         /* everything before ",p=", for AuthMessage */
    uint8_t proof[SCRAM_MAX_KEY];
    size_t proof_len;
} scram_client_final;
int kp_scram_client_final_parse(const char *tok, size_t len, scram_client_final *out);

/* ---- the server side of one exchange ---- */
typedef struct scram_server {
    scram_mech mech;
    scram_cred cred;
    char *auth_message;              /* client-first-bare,server-first, (malloc'd) */
    size_t auth_len;
    char nonce[160];                 /* client nonce + server nonce */
    char gs2[64];                    /* the client-first's gs2 header */
    size_t gs2_len;
} scram_server;

/* Writes server-first ("r=..,s=..,i=..") into out (cap bytes) for a parsed
 * client-first and the user's credential; snonce is the server's random
 * part (printable, no comma).  Keeps what the final step needs in s.
 * Returns the length, or -1 (a nonce or header too long, out of memory). */
int kp_scram_server_first(scram_server *s, const scram_client_first *cf, const scram_cred *cred,
                       const char *snonce, char *out, size_t cap);
/* Checks a parsed client-final against s; on success writes server-final
 * ("v=<b64 ServerSignature>") into out and returns its length; -1 when the
 * channel binding, the nonce or the proof is wrong. */
int kp_scram_server_final(scram_server *s, const scram_client_final *cf, char *out, size_t cap);
void kp_scram_server_clear(scram_server *s);

/* ---- the client side of one exchange (a replica fetcher's login) ----
 *   client-first  "n,,n=<saslname>,r=<cnonce>"
 *   server-first  "r=<cnonce snonce>,s=<b64 salt>,i=<iterations>"
 *   client-final  "c=biws,r=<nonce>,p=<b64 ClientProof>"
 *   server-final  "v=<b64 ServerSignature>" (checked: the server knew the
 *                 credential) or "e=<error>" */
typedef struct scram_client {
    scram_mech mech;
    char cnonce[64];
    char bare[SCRAM_MAX_NAME * 3 + 96]; /* client-first-bare, for AuthMessage */
    uint8_t server_signature[SCRAM_MAX_KEY];   /* expected in server-final */
} scram_client;

/* A parsed server-first; its slices point into the token (inv. 1). */
typedef struct scram_server_first_msg {
    scram_str nonce;
    uint8_t salt[64];
    size_t salt_len;
    int32_t iterations;
} scram_server_first_msg;

/* Writes client-first for user into out; cnonce printable, no comma.
 * The length, or -1 (too long). */
int kp_scram_client_first_write(scram_client *c, scram_mech m, const char *user,
                             const char *cnonce, char *out, size_t cap);
/* Parses server-first: the nonce must extend the client's, the salt be
 * base64, the iteration count within [SCRAM_MIN_ITERATIONS,
 * SCRAM_MAX_ITERATIONS] (what Kafka's client accepts; the bound also caps
 * the PBKDF2 the client pays).  0 or -1. */
int kp_scram_server_first_parse(const scram_client *c, const char *tok, size_t len,
                             scram_server_first_msg *out);
/* client-final from the SaltedPassword for sf's salt and iterations; keeps
 * the ServerSignature to expect.  The length, or -1. */
int kp_scram_client_final_write(scram_client *c, const scram_server_first_msg *sf,
                             const char *server_first, size_t sflen, const uint8_t *salted,
                             char *out, size_t cap);
/* Is tok the server-final with the expected ServerSignature (constant
 * time, inv. 2)? */
bool kp_scram_client_verify(const scram_client *c, const char *tok, size_t len);

#endif
