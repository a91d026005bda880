/*
 * daemon/security/sec_pwenc.h — the password encoder (sec_pwenc.c): secret
 * settings kept encrypted at rest, as Kafka's PasswordEncoder keeps dynamic
 * password configs (password.encoder.secret), for the cluster links'
 * secrets (daemon/link/link.c K4; cluster_links.c carries only this form).
 */
#ifndef SLUICE_SEC_PWENC_H
#define SLUICE_SEC_PWENC_H

#include <stdbool.h>
#include <stddef.h>

#include "daemon/broker_config.h"

typedef struct sec_pwenc sec_pwenc;

/* What every sealed value starts with; then "v1:" (old: the configured
 * iterations) or "v2:<parameters>:" (sec_pwenc.c P7), then base64. */
#define SEC_PWENC_PREFIX "sluice-pwenc:"
/* v2's parameters at their longest (iterations up to 10000000). */
#define SEC_PWENC_HEAD_MAX \
    (sizeof SEC_PWENC_PREFIX "v2:PBKDF2WithHmacSHA512:AES/GCM/NoPadding:256:10000000:" - 1)
/* The longest plain text (strlen) whose sealed form fits cap bytes with its
 * NUL: the head, then base64 of salt (16), IV (12), the text, tag (16). */
#define SEC_PWENC_PLAIN_MAX(cap) ((((cap) - SEC_PWENC_HEAD_MAX - 1) / 4) * 3 - 44)
/* password.encoder.secret's shortest length (sec_pwenc_new refuses less). */
#define SEC_PWENC_SECRET_MIN 16

/* At start, before the loop serves anything: derives the keys (PBKDF2,
 * once) from password.encoder.secret and .old.secret; standalone without
 * the secret, from <data_dir>/password-encoder.key, made once (0600).
 * Cluster mode without the secret: *out has no sealing key (sealing
 * refused with a message that names the setting).  A secret (or old
 * secret) shorter than SEC_PWENC_SECRET_MIN is refused.  0, or -1 with
 * err. */
int sec_pwenc_new(const bk_config *cfg, const char *data_dir, bool cluster, sec_pwenc **out,
                  char *err, size_t errlen);
void sec_pwenc_free(sec_pwenc *e);
/* True when text is in the sealed form (else it is plain, or empty). */
bool sec_pwenc_sealed(const char *text);
/* plain ("" stays "") sealed for the owner's name (bound in: a value copied
 * to another owner does not open) into out.  0, or -1 with err. */
int sec_pwenc_seal(const sec_pwenc *e, const char *owner, const char *plain, char *out,
                   size_t cap, char *err, size_t errlen);
/* text opened into out: a sealed value with the current key or an old one
 * (*stale true then: seal it again), or a plain one from before (*stale
 * true; also when sealed with other parameters than the settings': sec_pwenc.c P7).
 * 0, or -1 with err naming password.encoder.secret. */
int sec_pwenc_open(sec_pwenc *e, const char *owner, const char *text, char *out,
                   size_t cap, bool *stale, char *err, size_t errlen);
/* True when a and b are equal strings, or both sealed with the current key
 * and open to the same plain text (a plain or old-key value is not the same
 * as anything else: it is to be sealed again). */
bool sec_pwenc_same(sec_pwenc *e, const char *owner, const char *a, const char *b);

#endif
