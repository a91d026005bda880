/*
 * libFuzzer target: the SASL token parsers of protocol/scram.c — PLAIN's
 * message, SCRAM's client-first and client-final, base64 — and the server's
 * two SCRAM steps over whatever parses.  The input is one token, or two
 * separated by the first NUL byte (client-first, then client-final); each
 * goes to the parsers from a heap copy of exactly its length (libFuzzer's
 * buffer), so ASan sees any read past the end.  Whatever parses must be
 * consistent: slices inside the token, a NUL-terminated user without ',',
 * base64 that decodes to the bytes it was made from.  A crash, sanitizer
 * report, leak or broken consistency is a finding.  A login must never
 * succeed unless it carries RFC 7677's own proof (the credential is the
 * RFC's): a fuzzer that finds another has found a flaw.  The first token
 * also goes to the client's parser of a server-first (what a leader sends a
 * replica fetcher), whose output must stay in bounds: a nonce extending
 * the client's, iterations within Kafka's range.  Seeds: real clients' tokens
 * (tests/fuzz/corpus/fuzz_sasl_scram/).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/kp_scram.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void need(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "sasl_scram: %s\n", what);
        abort();
    }
}

static bool inside(scram_str s, const char *tok, size_t len)
{
    return !s.len || (s.p >= tok && s.p + s.len <= tok + len);
}

static scram_cred cred;
static const char rfc_proof[] = "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";

static void init_cred(void)
{
    static bool done;
    if (done)
        return;
    uint8_t salted[SCRAM_MAX_KEY];
    cred.salt_len = (size_t)kp_scram_b64_decode("W22ZaJ0SNY7soEsUEjb6gQ==", 24, cred.salt,
                                             sizeof cred.salt);
    cred.iterations = 4096;
    need(!kp_scram_salted_password(SCRAM_SHA_256, "pencil", 6, cred.salt, cred.salt_len, 4096,
                                salted) &&
         !kp_scram_cred_from_salted(SCRAM_SHA_256, salted, 32, &cred), "credential");
    done = true;
}

static void b64_check(const char *tok, size_t len)
{
    uint8_t dec[256], again[256];
    char enc[400];
    int n = kp_scram_b64_decode(tok, len, dec, sizeof dec);
    if (n < 0)
        return;
    size_t e = kp_scram_b64_encode(dec, (size_t)n, enc, sizeof enc);
    need(e == len, "base64 decoded to a length that encodes differently");
    need(kp_scram_b64_decode(enc, e, again, sizeof again) == n && !memcmp(dec, again, (size_t)n),
         "base64 round trip changed the bytes");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_cred();
    const uint8_t *z = memchr(data, 0, size);
    size_t l1 = z ? (size_t)(z - data) : size;
    char *t1 = malloc(l1 ? l1 : 1);
    memcpy(t1, data, l1);

    scram_plain p;
    if (kp_scram_plain_parse((const char *)data, size, &p) == 0) {
        need(inside(p.authzid, (const char *)data, size) && inside(p.user, (const char *)data, size) &&
             inside(p.password, (const char *)data, size), "PLAIN slice outside the token");
        need(p.user.len && p.password.len, "PLAIN without user or password");
        need(!memchr(p.password.p, 0, p.password.len), "PLAIN password with a NUL");
    }
    b64_check(t1, l1);

    scram_client_first cf;
    if (kp_scram_client_first_parse(t1, l1, &cf) == 0) {
        need(inside(cf.nonce, t1, l1) && inside(cf.bare, t1, l1) &&
             inside(cf.gs2_header, t1, l1) && inside(cf.extensions, t1, l1),
             "client-first slice outside the token");
        need(cf.user[0] && strlen(cf.user) < sizeof cf.user, "client-first user");
        need(cf.nonce.len && !memchr(cf.nonce.p, ',', cf.nonce.len), "client-first nonce");
        scram_server s = { 0 };
        char out[512];
        int n = kp_scram_server_first(&s, &cf, &cred, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", out,
                                   sizeof out);
        if (n >= 0 && z) {
            size_t l2 = size - l1 - 1;
            char *t2 = malloc(l2 ? l2 : 1);
            memcpy(t2, z + 1, l2);
            scram_client_final fin;
            if (kp_scram_client_final_parse(t2, l2, &fin) == 0) {
                need(inside(fin.nonce, t2, l2) && inside(fin.without_proof, t2, l2),
                     "client-final slice outside the token");
                need(fin.proof_len > 0 && fin.proof_len <= SCRAM_MAX_KEY, "proof length");
                /* Only RFC 7677's own exchange may pass. */
                int ok = kp_scram_server_final(&s, &fin, out, sizeof out);
                need(ok < 0 || memmem(t2, l2, rfc_proof, strlen(rfc_proof)),
                     "a SCRAM login succeeded without the password's proof");
            }
            free(t2);
        }
        kp_scram_server_clear(&s);
    }
    static scram_client client;
    if (!client.mech) {
        char first[128];
        need(kp_scram_client_first_write(&client, SCRAM_SHA_256, "user", "rOprNGfwEbeRWgbNEkqO",
                                      first, sizeof first) > 0, "client-first");
    }
    scram_server_first_msg sf;
    if (kp_scram_server_first_parse(&client, t1, l1, &sf) == 0) {
        need(inside(sf.nonce, t1, l1) && sf.nonce.len > strlen(client.cnonce) &&
             !memcmp(sf.nonce.p, client.cnonce, strlen(client.cnonce)), "server-first nonce");
        need(sf.iterations >= SCRAM_MIN_ITERATIONS && sf.iterations <= SCRAM_MAX_ITERATIONS &&
             sf.salt_len > 0 && sf.salt_len <= sizeof sf.salt, "server-first salt or count");
    }
    scram_client_final fin;
    if (kp_scram_client_final_parse(t1, l1, &fin) == 0)
        need(inside(fin.nonce, t1, l1) && inside(fin.without_proof, t1, l1),
             "client-final slice outside the token");
    free(t1);
    return 0;
}
