/*
 * daemon/security/sec_pwenc.c — the password encoder: secret settings
 * encrypted at rest (cluster links' secrets, daemon/link/link.c K4), in
 * the manner of Kafka's PasswordEncoder (password.encoder.*).
 *
 * A sealed value, as stored in SQLite and in ZooKeeper:
 *
 *   "sluice-pwenc:v2:PBKDF2WithHmacSHA512:AES/GCM/NoPadding:256:<iterations>:"
 *       base64( salt[16] | iv[12] | ciphertext[n] | tag[16] )
 *   (older: "sluice-pwenc:v1:" base64(...), the iterations those of the
 *   setting)
 *
 *   master key  = PBKDF2-HMAC-SHA512(secret, "sluice password.encoder v1",
 *                                    <iterations>, 32 bytes)
 *   value key   = HMAC-SHA256(master key, salt)
 *   ciphertext  = AES-256-GCM(value key, iv, plain text, AAD = owner name)
 *
 * Design note.
 *   P1. The KDF runs once per secret, at start (sec_pwenc_new, before the
 *       loop serves anything), never per value or per connection: the
 *       per-value salt only feeds one HMAC.  Kafka derives per value with
 *       the value's salt; a fixed PBKDF2 salt is what lets every broker of
 *       a cluster derive the same master key from the same secret with no
 *       shared state but the setting.  Not the cluster id: a broker reads
 *       it from ZooKeeper after the loop runs (and the first broker of a
 *       cluster makes it then), so the key could not be derived before
 *       serving, and values would not open on a cluster restored under a
 *       new id; the per-value salt already makes each value's key its own.
 *   P2. Salt and IV are random per value (RAND_bytes): sealing one text
 *       twice gives two values; compare opened texts (sec_pwenc_same).
 *   P3. The owner (a link's name) is the AAD: a value moved to another
 *       row does not open.
 *   P4. Keys: [0] the current one (password.encoder.secret; standalone
 *       without it, the key file), then old ones that only open
 *       (password.encoder.old.secret; the key file when the secret is set).
 *       Cluster mode without the secret has none: sealing is refused with
 *       a message naming the setting, and opening a sealed value fails
 *       likewise (the caller logs it and stores it as the link's error).
 *   P5. Standalone's key file (<data dir>/password-encoder.key, 32 random
 *       bytes as hex, 0600, made with O_EXCL once): the SQLite file alone
 *       (a copy, a backup, an SQL dump) never holds a usable secret; the
 *       data directory whole does, which is the same trust as the segment
 *       files in it.  Losing the file loses the links' secrets (the error
 *       says so), nothing else.
 *   P6. A plain value (written before the encoder) opens as itself,
 *       flagged stale: the caller seals it again (migration at start).
 *   P7. A value names the parameters it was sealed with (as Kafka's
 *       PasswordEncoder stores keyFactoryAlgorithm, cipherAlgorithm,
 *       keyLength and iterations with each value): a change of
 *       password.encoder.iterations keeps every value readable, each
 *       flagged stale and sealed again with the new count.  The master
 *       keys for another count are derived when such a value is first
 *       opened and kept (NSETS counts; P1's start-time derivation covers
 *       the configured one, and the reseal at start the stored rows, so on
 *       the loop this is a value from another broker during a rolling
 *       change, once per count).  v1 values open with the configured count.
 *   P8. A secret shorter than SEC_PWENC_SECRET_MIN characters is refused
 *       at start (Kafka takes any length; a short one is guessable by
 *       anyone who reads the sealed values, which ZooKeeper's open ACL
 *       lets everyone with access to the ensemble do).
 */
#include "daemon/security/sec_pwenc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#define KDF_SALT "sluice password.encoder v1"
#define KEY_FILE "password-encoder.key"
#define SALT_LEN 16
#define IV_LEN 12
#define TAG_LEN 16
#define KEY_LEN 32
#define NKEYS 3
#define NSETS 4                          /* P7: iteration counts kept */
#define V1 SEC_PWENC_PREFIX "v1:"
#define V2 SEC_PWENC_PREFIX "v2:PBKDF2WithHmacSHA512:AES/GCM/NoPadding:256:"
#define ITER_MIN 1024                    /* broker_config.c's bounds */
#define ITER_MAX 10000000

typedef struct kset {
    int iterations;                      /* 0: unused */
    uint8_t key[NKEYS][KEY_LEN];
} kset;

struct sec_pwenc {
    char *secret[NKEYS];                 /* P4: [0] seals and opens, the rest open; P7 */
    kset set[NSETS];                     /* [0]: the configured iterations (P1) */
    int next;                            /* P7: the slot a new count takes */
    bool cluster;
};

static int derive(const char *secret, int iterations, uint8_t out[KEY_LEN])
{
    return PKCS5_PBKDF2_HMAC(secret, (int)strlen(secret), (const unsigned char *)KDF_SALT,
                             (int)strlen(KDF_SALT), iterations, EVP_sha512(), KEY_LEN,
                             out) == 1 ? 0 : -1;
}

/* The keys for iterations (P7): set[0], a kept set, or a slot derived now
 * (the oldest derived one replaced when all are taken).  NULL on failure. */
static const kset *keys_for(sec_pwenc *e, int iterations)
{
    for (int i = 0; i < NSETS; i++)
        if (e->set[i].iterations == iterations)
            return &e->set[i];
    kset *k = &e->set[1 + e->next];
    e->next = (e->next + 1) % (NSETS - 1);
    OPENSSL_cleanse(k, sizeof *k);
    for (int i = 0; i < NKEYS; i++)
        if (e->secret[i] && derive(e->secret[i], iterations, k->key[i]) != 0) {
            OPENSSL_cleanse(k, sizeof *k);
            return NULL;
        }
    k->iterations = iterations;
    return k;
}

static int keep_secret(sec_pwenc *e, int at, const char *secret)
{
    size_t n = strlen(secret) + 1;
    if (!(e->secret[at] = malloc(n)))
        return -1;
    memcpy(e->secret[at], secret, n);
    return derive(secret, e->set[0].iterations, e->set[0].key[at]);
}

/* P5: the key file's text (64 hex digits), made when missing. */
static int key_file(const char *dir, bool make, char *hex, size_t cap, bool *found, char *err,
                    size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/" KEY_FILE, dir);
    *found = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && make) {
        uint8_t raw[KEY_LEN];
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 || RAND_bytes(raw, sizeof raw) != 1) {
            snprintf(err, errlen, "cannot make %s: %s", path, fd < 0 ? strerror(errno)
                                                                     : "no random bytes");
            if (fd >= 0)
                close(fd);
            return -1;
        }
        for (size_t i = 0; i < sizeof raw; i++)
            snprintf(hex + 2 * i, cap - 2 * i, "%02x", raw[i]);
        OPENSSL_cleanse(raw, sizeof raw);
        ssize_t w = write(fd, hex, 2 * KEY_LEN);
        int rc = w == 2 * KEY_LEN && fsync(fd) == 0 ? 0 : -1;
        close(fd);
        if (rc != 0) {
            unlink(path);
            snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
            return -1;
        }
        *found = true;
        return 0;
    }
    if (fd < 0)
        return errno == ENOENT ? 0 : (snprintf(err, errlen, "cannot read %s: %s", path,
                                               strerror(errno)), -1);
    ssize_t n = read(fd, hex, cap - 1);
    close(fd);
    if (n < 2 * KEY_LEN) {
        snprintf(err, errlen, "%s is not a key (64 hex digits); remove it only if no cluster "
                 "link has secrets", path);
        return -1;
    }
    hex[2 * KEY_LEN] = 0;
    *found = true;
    return 0;
}

int sec_pwenc_new(const bk_config *cfg, const char *data_dir, bool cluster, sec_pwenc **out,
                  char *err, size_t errlen)
{
    *out = NULL;
    if (strcmp(cfg->password_encoder_keyfactory_algorithm, "PBKDF2WithHmacSHA512") ||
        strcmp(cfg->password_encoder_cipher_algorithm, "AES/GCM/NoPadding")) {
        snprintf(err, errlen, "password.encoder.keyfactory.algorithm must be "
                 "PBKDF2WithHmacSHA512 and password.encoder.cipher.algorithm AES/GCM/NoPadding");
        return -1;
    }
    const char *secret = cfg->password_encoder_secret, *old = cfg->password_encoder_old_secret;
    if ((secret[0] && strlen(secret) < SEC_PWENC_SECRET_MIN) ||
        (old[0] && strlen(old) < SEC_PWENC_SECRET_MIN)) {
        snprintf(err, errlen, "%s is shorter than %d characters: anyone who reads a sealed "
                 "value (SQLite, ZooKeeper) could guess it; set a longer random one (P8)",
                 secret[0] && strlen(secret) < SEC_PWENC_SECRET_MIN
                 ? "password.encoder.secret" : "password.encoder.old.secret",
                 SEC_PWENC_SECRET_MIN);
        return -1;
    }
    sec_pwenc *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    e->cluster = cluster;
    e->set[0].iterations = cfg->password_encoder_iterations;
    int rc = 0, k = 0;
    if (secret[0])
        rc = keep_secret(e, k++, secret);
    else
        k = 1;                           /* [0] the key file's, below, or none */
    if (!rc && old[0])
        rc = keep_secret(e, k++, old);
    if (!rc && !cluster) {
        char hex[2 * KEY_LEN + 8];
        bool found;
        rc = key_file(data_dir, !secret[0], hex, sizeof hex, &found, err, errlen);
        if (!rc && found)
            rc = keep_secret(e, secret[0] ? k : 0, hex);
        OPENSSL_cleanse(hex, sizeof hex);
        if (rc) {
            if (found)
                snprintf(err, errlen, "password.encoder: cannot derive the key");
            sec_pwenc_free(e);
            return -1;
        }
    }
    if (rc) {
        snprintf(err, errlen, "password.encoder: cannot derive the key");
        sec_pwenc_free(e);
        return -1;
    }
    *out = e;
    return 0;
}

void sec_pwenc_free(sec_pwenc *e)
{
    if (!e)
        return;
    for (int i = 0; i < NKEYS; i++)
        if (e->secret[i]) {
            OPENSSL_cleanse(e->secret[i], strlen(e->secret[i]));
            free(e->secret[i]);
        }
    OPENSSL_cleanse(e, sizeof *e);
    free(e);
}

bool sec_pwenc_sealed(const char *text)
{
    return text && !strncmp(text, SEC_PWENC_PREFIX, strlen(SEC_PWENC_PREFIX));
}

static int value_key(const uint8_t master[KEY_LEN], const uint8_t *salt, uint8_t out[KEY_LEN])
{
    unsigned len = 0;
    return HMAC(EVP_sha256(), master, KEY_LEN, salt, SALT_LEN, out, &len) && len == KEY_LEN
           ? 0 : -1;
}

/* AES-256-GCM one way or the other; the tag written (seal) or checked. */
static int gcm(bool seal, const uint8_t key[KEY_LEN], const uint8_t *iv, const char *owner,
               const uint8_t *in, int n, uint8_t *out, uint8_t *tag)
{
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int len = 0, fin = 0, ok = x &&
        EVP_CipherInit_ex(x, EVP_aes_256_gcm(), NULL, NULL, NULL, seal) == 1 &&
        EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_IVLEN, IV_LEN, NULL) == 1 &&
        EVP_CipherInit_ex(x, NULL, NULL, key, iv, seal) == 1 &&
        EVP_CipherUpdate(x, NULL, &len, (const uint8_t *)owner, (int)strlen(owner)) == 1 &&
        (n == 0 || EVP_CipherUpdate(x, out, &len, in, n) == 1) &&
        (seal || EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) == 1) &&
        EVP_CipherFinal_ex(x, out + (n ? len : 0), &fin) == 1 &&
        (!seal || EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) == 1);
    EVP_CIPHER_CTX_free(x);
    return ok ? 0 : -1;
}

static int no_key(const sec_pwenc *e, char *err, size_t errlen)
{
    snprintf(err, errlen, e && e->cluster
             ? "cluster mode needs password.encoder.secret (the same on every broker) to "
               "keep a cluster link's secret settings; set it and restart"
             : "no password.encoder key: set password.encoder.secret");
    return -1;
}

int sec_pwenc_seal(const sec_pwenc *e, const char *owner, const char *plain, char *out,
                   size_t cap, char *err, size_t errlen)
{
    size_t n = strlen(plain);
    if (n == 0) {
        if (cap)
            out[0] = 0;
        return 0;
    }
    if (!e || !e->secret[0])
        return no_key(e, err, errlen);
    if (n > SEC_PWENC_PLAIN_MAX(cap)) {
        snprintf(err, errlen, "the secret settings are longer than %zu bytes",
                 (size_t)SEC_PWENC_PLAIN_MAX(cap));
        return -1;
    }
    size_t raw_len = SALT_LEN + IV_LEN + n + TAG_LEN;
    uint8_t *raw = malloc(raw_len), vkey[KEY_LEN];
    int rc = raw && RAND_bytes(raw, SALT_LEN + IV_LEN) == 1 ? 0 : -1;
    if (!rc)
        rc = value_key(e->set[0].key[0], raw, vkey);
    if (!rc)
        rc = gcm(true, vkey, raw + SALT_LEN, owner, (const uint8_t *)plain, (int)n,
                 raw + SALT_LEN + IV_LEN, raw + SALT_LEN + IV_LEN + n);
    OPENSSL_cleanse(vkey, sizeof vkey);
    if (!rc) {
        int pl = snprintf(out, cap, V2 "%d:", e->set[0].iterations);   /* P7 */
        EVP_EncodeBlock((uint8_t *)out + pl, raw, (int)raw_len);
    } else {
        snprintf(err, errlen, "cannot encrypt the secret settings");
    }
    if (raw)
        OPENSSL_cleanse(raw, raw_len);
    free(raw);
    return rc;
}

/* P7: the iterations a sealed value names (v1: the setting's) and where
 * its base64 starts; -1 when the head is not one this encoder writes. */
static int head(const sec_pwenc *e, const char *text, const char **b64)
{
    if (!strncmp(text, V1, strlen(V1))) {
        *b64 = text + strlen(V1);
        return e ? e->set[0].iterations : ITER_MIN;
    }
    if (strncmp(text, V2, strlen(V2)))
        return -1;
    char *end;
    long it = strtol(text + strlen(V2), &end, 10);
    if (*end != ':' || it < ITER_MIN || it > ITER_MAX)
        return -1;
    *b64 = end + 1;
    return (int)it;
}

int sec_pwenc_open(sec_pwenc *e, const char *owner, const char *text, char *out,
                   size_t cap, bool *stale, char *err, size_t errlen)
{
    *stale = false;
    if (!sec_pwenc_sealed(text)) {       /* P6 */
        if (snprintf(out, cap, "%s", text ? text : "") >= (int)cap) {
            snprintf(err, errlen, "the secret settings are too long");
            return -1;
        }
        *stale = text && text[0];
        return 0;
    }
    const char *b64 = "";
    int iterations = head(e, text, &b64);
    size_t bl = strlen(b64);
    uint8_t *raw = malloc(bl / 4 * 3 + 3);
    int raw_len = raw && bl % 4 == 0 ? EVP_DecodeBlock(raw, (const uint8_t *)b64, (int)bl) : -1;
    if (raw_len > 0)                     /* EVP_DecodeBlock counts the padding */
        raw_len -= (bl > 0 && b64[bl - 1] == '=') + (bl > 1 && b64[bl - 2] == '=');
    int n = raw_len - SALT_LEN - IV_LEN - TAG_LEN, rc = -1;
    if (iterations < 0 || n < 0 || (size_t)n >= cap) {
        free(raw);
        snprintf(err, errlen, "the stored secret settings are damaged (not this encoder's "
                 "form: %s)", iterations < 0 ? "unknown parameters" : "length");
        return -1;
    }
    bool any = false;
    const kset *ks = e ? keys_for(e, iterations) : NULL;
    for (int k = 0; k < NKEYS && rc != 0; k++) {
        uint8_t vkey[KEY_LEN];
        if (!e || !e->secret[k])
            continue;
        any = true;
        if (ks && value_key(ks->key[k], raw, vkey) == 0 &&
            gcm(false, vkey, raw + SALT_LEN, owner, raw + SALT_LEN + IV_LEN, n, (uint8_t *)out,
                raw + SALT_LEN + IV_LEN + n) == 0) {
            out[n] = 0;
            *stale = k > 0 || ks != &e->set[0];    /* P7: sealed again with the setting */
            rc = 0;
        }
        OPENSSL_cleanse(vkey, sizeof vkey);
    }
    OPENSSL_cleanse(raw, (size_t)raw_len);
    free(raw);
    if (rc != 0) {
        OPENSSL_cleanse(out, cap);
        if (!any)
            return no_key(e, err, errlen);
        snprintf(err, errlen, "cannot decrypt the stored secret settings: "
                 "password.encoder.secret is not the one they were encrypted with (a wrong "
                 "secret, or a lost password-encoder.key); set the right one, or "
                 "password.encoder.old.secret, and restart");
    }
    return rc;
}

bool sec_pwenc_same(sec_pwenc *e, const char *owner, const char *a, const char *b)
{
    if (!strcmp(a, b))
        return true;
    size_t cap = strlen(a) + strlen(b) + 1;
    char *pa = malloc(cap), *pb = malloc(cap), err[64];
    bool sa = true, sb = true, same = pa && pb &&
        sec_pwenc_open(e, owner, a, pa, cap, &sa, err, sizeof err) == 0 &&
        sec_pwenc_open(e, owner, b, pb, cap, &sb, err, sizeof err) == 0 && !strcmp(pa, pb) &&
        !sa && !sb;                      /* plain or an old key's: to be sealed again */
    if (pa)
        OPENSSL_cleanse(pa, cap);
    if (pb)
        OPENSSL_cleanse(pb, cap);
    free(pa);
    free(pb);
    return same;
}
