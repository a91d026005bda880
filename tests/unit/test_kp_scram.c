/* protocol/scram.c: RFC 7677's SCRAM-SHA-256 exchange byte for byte, the
 * PLAIN check against a stored credential, librdkafka's doubled nonce, and
 * malformed messages refused. */
#include <check.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "protocol/kp_scram.h"
#include "tests/unit/unit_run.h"

/* RFC 7677 §3: user "user", password "pencil". */
static const char rfc_first[] = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
static const char rfc_snonce[] = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
static const char rfc_server_first[] =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
static const char rfc_final[] =
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
static const char rfc_server_final[] = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

static void rfc_cred(scram_cred *c)
{
    uint8_t salted[SCRAM_MAX_KEY];
    memset(c, 0, sizeof *c);
    int n = kp_scram_b64_decode("W22ZaJ0SNY7soEsUEjb6gQ==", 24, c->salt, sizeof c->salt);
    ck_assert_int_eq(n, 16);
    c->salt_len = 16;
    c->iterations = 4096;
    ck_assert_int_eq(kp_scram_salted_password(SCRAM_SHA_256, "pencil", 6, c->salt, 16, 4096,
                                           salted), 0);
    ck_assert_int_eq(kp_scram_cred_from_salted(SCRAM_SHA_256, salted, 32, c), 0);
}

static int server_first(scram_server *s, const scram_cred *c, char *out, size_t cap)
{
    scram_client_first cf;
    ck_assert_int_eq(kp_scram_client_first_parse(rfc_first, strlen(rfc_first), &cf), 0);
    ck_assert_str_eq(cf.user, "user");
    return kp_scram_server_first(s, &cf, c, rfc_snonce, out, cap);
}

START_TEST(test_rfc7677_exchange_byte_for_byte)
{
    scram_cred c;
    rfc_cred(&c);
    scram_server s = { 0 };
    char out[512];
    int n = server_first(&s, &c, out, sizeof out);
    ck_assert_int_eq(n, (int)strlen(rfc_server_first));
    ck_assert_str_eq(out, rfc_server_first);
    scram_client_final cf;
    ck_assert_int_eq(kp_scram_client_final_parse(rfc_final, strlen(rfc_final), &cf), 0);
    n = kp_scram_server_final(&s, &cf, out, sizeof out);
    ck_assert_int_eq(n, (int)strlen(rfc_server_final));
    ck_assert_str_eq(out, rfc_server_final);
    kp_scram_server_clear(&s);
}
END_TEST

START_TEST(test_wrong_proof_nonce_or_binding_is_refused)
{
    scram_cred c;
    rfc_cred(&c);
    static const char *const bad[] = {
        /* proof of another password */
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        "p=AHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        /* a nonce without the server's part */
        "c=biws,r=rOprNGfwEbeRWgbNEkqO,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        /* channel binding "y,," instead of the client-first's "n,," */
        "c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        scram_server s = { 0 };
        char out[512];
        ck_assert_int_gt(server_first(&s, &c, out, sizeof out), 0);
        scram_client_final cf;
        int rc = kp_scram_client_final_parse(bad[i], strlen(bad[i]), &cf);
        if (rc == 0)
            rc = kp_scram_server_final(&s, &cf, out, sizeof out);
        ck_assert_msg(rc < 0, "accepted %s", bad[i]);
        kp_scram_server_clear(&s);
    }
}
END_TEST

/* librdkafka sends cnonce + (cnonce + snonce), its proof computed over
 * that; Kafka checks that the nonce ends with the server's, so do we. */
START_TEST(test_doubled_client_nonce_is_accepted_as_kafka_does)
{
    scram_cred c;
    rfc_cred(&c);
    scram_server s = { 0 };
    char out[512];
    ck_assert_int_gt(server_first(&s, &c, out, sizeof out), 0);
    const char *wp = "c=biws,r=rOprNGfwEbeRWgbNEkqOrOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
    char am[512];
    int an = snprintf(am, sizeof am, "%s,%s,%s", rfc_first + 3, rfc_server_first, wp);
    uint8_t salted[32], client_key[32], sig[32], proof[32];
    unsigned int l;
    kp_scram_salted_password(SCRAM_SHA_256, "pencil", 6, c.salt, c.salt_len, 4096, salted);
    HMAC(EVP_sha256(), salted, 32, (const uint8_t *)"Client Key", 10, client_key, &l);
    HMAC(EVP_sha256(), c.stored_key, 32, (const uint8_t *)am, (size_t)an, sig, &l);
    for (int i = 0; i < 32; i++)
        proof[i] = client_key[i] ^ sig[i];
    char p64[64], t[512];
    kp_scram_b64_encode(proof, 32, p64, sizeof p64);
    snprintf(t, sizeof t, "%s,p=%s", wp, p64);
    scram_client_final cf;
    ck_assert_int_eq(kp_scram_client_final_parse(t, strlen(t), &cf), 0);
    ck_assert_int_gt(kp_scram_server_final(&s, &cf, out, sizeof out), 0);
    kp_scram_server_clear(&s);
}
END_TEST

START_TEST(test_plain_checks_the_stored_credential)
{
    scram_cred c;
    rfc_cred(&c);
    ck_assert(kp_scram_verify_password(&c, "pencil", 6));
    ck_assert(!kp_scram_verify_password(&c, "pencil2", 7));
    scram_plain p;
    ck_assert_int_eq(kp_scram_plain_parse("\0user\0pencil", 12, &p), 0);
    ck_assert_int_eq((int)p.authzid.len, 0);
    ck_assert_int_eq((int)p.user.len, 4);
    ck_assert_int_eq((int)p.password.len, 6);
    static const struct { const char *tok; size_t len; } bad[] = {
        { "user\0pencil", 11 }, { "\0\0pencil", 8 }, { "\0user\0", 6 },
        { "\0user\0pen\0cil", 13 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(kp_scram_plain_parse(bad[i].tok, bad[i].len, &p) == -1, "bad PLAIN %zu", i);
}
END_TEST

START_TEST(test_client_first_forms)
{
    scram_client_first cf;
    const char *ok = "n,a=us=2Cer,n=us=2Cer=3D,r=abc,tokenauth=true";
    ck_assert_int_eq(kp_scram_client_first_parse(ok, strlen(ok), &cf), 0);
    ck_assert_str_eq(cf.user, "us,er=");
    ck_assert_int_eq((int)cf.extensions.len, (int)strlen("tokenauth=true"));
    static const char *const bad[] = {
        "", "n", "n,,", "y,,n=u,r=a", "p=tls,,n=u,r=a", "n,,n=,r=a", "n,,n=u", "n,,n=u,r=",
        "n,,n=u=2,r=a", "n,,n=u=41,r=a", "n,,n=u,r=a,", "n,,m=x,n=u,r=a",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(kp_scram_client_first_parse(bad[i], strlen(bad[i]), &cf) == -1,
                      "accepted %s", bad[i]);
}
END_TEST

START_TEST(test_base64_round_trip_and_garbage)
{
    uint8_t in[7] = { 0, 1, 2, 0xfd, 0xfe, 0xff, 0x80 }, out[16];
    char enc[32];
    for (size_t n = 0; n <= sizeof in; n++) {
        size_t e = kp_scram_b64_encode(in, n, enc, sizeof enc);
        ck_assert_int_eq(kp_scram_b64_decode(enc, e, out, sizeof out), (int)n);
        ck_assert(!memcmp(in, out, n));
    }
    static const char *const bad[] = { "A", "AB=C", "A===", "====", "AB*D", "AA==AAAA",
                                       "AB==", "AAB=" /* non-zero pad bits: not canonical */ };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(kp_scram_b64_decode(bad[i], strlen(bad[i]), out, sizeof out) == -1,
                      "accepted %s", bad[i]);
}
END_TEST

/* The client side (a replica fetcher's login): RFC 7677's messages byte
 * for byte from the client's nonce and password, the server's signature
 * checked, a bad server-first refused. */
START_TEST(test_client_rfc7677_exchange_byte_for_byte)
{
    scram_client c;
    char out[512];
    int n = kp_scram_client_first_write(&c, SCRAM_SHA_256, "user", "rOprNGfwEbeRWgbNEkqO", out,
                                     sizeof out);
    ck_assert_int_eq(n, (int)strlen(rfc_first));
    ck_assert_str_eq(out, rfc_first);
    scram_server_first_msg sf;
    ck_assert_int_eq(kp_scram_server_first_parse(&c, rfc_server_first, strlen(rfc_server_first),
                                              &sf), 0);
    ck_assert_int_eq(sf.iterations, 4096);
    uint8_t salted[SCRAM_MAX_KEY];
    ck_assert_int_eq(kp_scram_salted_password(SCRAM_SHA_256, "pencil", 6, sf.salt, sf.salt_len,
                                           sf.iterations, salted), 0);
    n = kp_scram_client_final_write(&c, &sf, rfc_server_first, strlen(rfc_server_first), salted,
                                 out, sizeof out);
    ck_assert_int_eq(n, (int)strlen(rfc_final));
    ck_assert_str_eq(out, rfc_final);
    ck_assert(kp_scram_client_verify(&c, rfc_server_final, strlen(rfc_server_final)));
    static const char *const wrong[] = {
        "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G5=",   /* another signature */
        "e=invalid-proof", "v=", "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
    };
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++)
        ck_assert_msg(!kp_scram_client_verify(&c, wrong[i], strlen(wrong[i])), "%s", wrong[i]);
}
END_TEST

START_TEST(test_client_refuses_bad_server_first_and_escapes_names)
{
    scram_client c;
    char out[512];
    ck_assert_int_gt(kp_scram_client_first_write(&c, SCRAM_SHA_512, "a,b=c", "abc", out,
                                              sizeof out), 0);
    ck_assert_str_eq(out, "n,,n=a=2Cb=3Dc,r=abc");
    scram_server_first_msg sf;
    static const char *const bad[] = {
        "r=abc,s=QUJD,i=4096",          /* the server added no nonce of its own */
        "r=xyzDEF,s=QUJD,i=4096",       /* not our nonce first */
        "r=abcDEF,s=QUJD,i=4095",       /* below Kafka's minimum */
        "r=abcDEF,s=QUJD,i=16385",      /* above its maximum: an unbounded PBKDF2 */
        "r=abcDEF,s=Q,i=4096", "r=abcDEF,i=4096", "r=abcDEF,s=QUJD", "s=QUJD,r=abcDEF,i=4096",
        "r=abcDEF,s=QUJD,i=40x6",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(kp_scram_server_first_parse(&c, bad[i], strlen(bad[i]), &sf) == -1,
                      "accepted %s", bad[i]);
    ck_assert_int_eq(kp_scram_server_first_parse(&c, "r=abcDEF,s=QUJD,i=16384", 23, &sf), 0);
    ck_assert_int_eq((int)sf.salt_len, 3);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_rfc7677_exchange_byte_for_byte, test_wrong_proof_nonce_or_binding_is_refused,
        test_doubled_client_nonce_is_accepted_as_kafka_does, test_plain_checks_the_stored_credential,
        test_client_first_forms, test_base64_round_trip_and_garbage,
        test_client_rfc7677_exchange_byte_for_byte,
        test_client_refuses_bad_server_first_and_escapes_names,
    };
    return unit_run("scram", "scram", tests, sizeof tests / sizeof *tests, NULL, NULL, 0);
}
