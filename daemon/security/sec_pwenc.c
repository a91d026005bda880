/*
 * daemon/security/sec_pwenc.c — the password encoder: secret settings
 * encrypted at rest (cluster links' secrets, daemon/link/link.c K4), in
 * the manner of Kafka's PasswordEncoder (password.encoder.*).
 *
 * A sealed value, as stored in SQLite and in ZooKeeper:
 *
 *   "sluice-pwenc:v1:" base64( salt[16] | iv[12] | ciphertext[n] | tag[16] )
 *
 *   master key  = PBKDF2-HMAC-SHA512(secret, "sluice password.encoder v1",
 *                                    password.encoder.iterations, 32 bytes)
 *   value key   = HMAC-SHA256(master key, salt)
 *   ciphertext  = AES-256-GCM(value key, iv, plain text, AAD = owner name)
 *
 * Design note.
 *   P1. The KDF runs once per secret, at start (sec_pwenc_new, before the
 *       loop serves anything), never per value or per connection: the
 *       per-value salt only feeds one HMAC.  Kafka derives per value with
 *       the value's salt; a fixed PBKDF2 salt is what lets every broker of
 *       a cluster derive the same master key from the same secret with no
 *       shared state but the setting.
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

struct sec_pwenc {
    uint8_t key[NKEYS][KEY_LEN];
    bool have[NKEYS];                /* P4: [0] seals and opens, the rest open */
    bool cluster;
};

static int derive(const char *secret, int iterations, uint8_t out[KEY_LEN])
{
    return PKCS5_PBKDF2_HMAC(secret, (int)strlen(secret), (const unsigned char *)KDF_SALT,
                             (int)strlen(KDF_SALT), iterations, EVP_sha512(), KEY_LEN,
                             out) == 1 ? 0 : -1;
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
    sec_pwenc *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    e->cluster = cluster;
    const char *secret = cfg->password_encoder_secret, *old = cfg->password_encoder_old_secret;
    int it = cfg->password_encoder_iterations, rc = 0, k = 0;
    if (secret[0])
        rc = derive(secret, it, e->key[k]), e->have[k++] = rc == 0;
    else
        k = 1;                           /* [0] the key file's, below, or none */
    if (!rc && old[0])
        rc = derive(old, it, e->key[k]), e->have[k++] = rc == 0;
    if (!rc && !cluster) {
        char hex[2 * KEY_LEN + 8];
        bool found;
        rc = key_file(data_dir, !secret[0], hex, sizeof hex, &found, err, errlen);
        int at = secret[0] ? k : 0;
        if (!rc && found)
            rc = derive(hex, it, e->key[at]), e->have[at] = rc == 0;
        OPENSSL_cleanse(hex, sizeof hex);
        if (rc) {
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
    if (!e || !e->have[0])
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
        rc = value_key(e->key[0], raw, vkey);
    if (!rc)
        rc = gcm(true, vkey, raw + SALT_LEN, owner, (const uint8_t *)plain, (int)n,
                 raw + SALT_LEN + IV_LEN, raw + SALT_LEN + IV_LEN + n);
    OPENSSL_cleanse(vkey, sizeof vkey);
    if (!rc) {
        size_t pl = strlen(SEC_PWENC_PREFIX);
        memcpy(out, SEC_PWENC_PREFIX, pl);
        EVP_EncodeBlock((uint8_t *)out + pl, raw, (int)raw_len);
    } else {
        snprintf(err, errlen, "cannot encrypt the secret settings");
    }
    if (raw)
        OPENSSL_cleanse(raw, raw_len);
    free(raw);
    return rc;
}

int sec_pwenc_open(const sec_pwenc *e, const char *owner, const char *text, char *out,
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
    const char *b64 = text + strlen(SEC_PWENC_PREFIX);
    size_t bl = strlen(b64);
    uint8_t *raw = malloc(bl / 4 * 3 + 3);
    int raw_len = raw && bl % 4 == 0 ? EVP_DecodeBlock(raw, (const uint8_t *)b64, (int)bl) : -1;
    if (raw_len > 0)                     /* EVP_DecodeBlock counts the padding */
        raw_len -= (bl > 0 && b64[bl - 1] == '=') + (bl > 1 && b64[bl - 2] == '=');
    int n = raw_len - SALT_LEN - IV_LEN - TAG_LEN, rc = -1;
    if (n < 0 || (size_t)n >= cap) {
        free(raw);
        snprintf(err, errlen, "the stored secret settings are damaged (not this encoder's "
                 "form)");
        return -1;
    }
    bool any = false;
    for (int k = 0; k < NKEYS && rc != 0; k++) {
        uint8_t vkey[KEY_LEN];
        if (!e || !e->have[k])
            continue;
        any = true;
        if (value_key(e->key[k], raw, vkey) == 0 &&
            gcm(false, vkey, raw + SALT_LEN, owner, raw + SALT_LEN + IV_LEN, n, (uint8_t *)out,
                raw + SALT_LEN + IV_LEN + n) == 0) {
            out[n] = 0;
            *stale = k > 0;
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

bool sec_pwenc_same(const sec_pwenc *e, const char *owner, const char *a, const char *b)
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
