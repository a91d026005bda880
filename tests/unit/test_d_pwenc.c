/*
 * test_d_pwenc — the password encoder (daemon/security/sec_pwenc.c, P1-P6):
 * sealed text opens to what was sealed, never holds it; another secret,
 * another owner or a changed byte does not open; the old secret opens
 * (stale); plain text opens as itself (stale); standalone's key file is
 * made once, 0600, and used again; cluster mode without the secret refuses
 * to seal, naming the setting.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon/broker_config.h"
#include "daemon/security/sec_pwenc.h"
#include "tests/unit/unit_run.h"
#include "tests/unit/unit_tmpdir.h"

static bk_config cfg;

static void setup(void)
{
    unit_tmpdir_make("pwenc");
    bk_config_init(&cfg);
}

static void teardown(void)
{
    bk_config_free(&cfg);
    unit_tmpdir_remove();
}

static sec_pwenc *make(const char *secret, const char *old, bool cluster)
{
    sec_pwenc *e;
    char err[256];
    snprintf(cfg.password_encoder_secret, sizeof cfg.password_encoder_secret, "%s", secret);
    snprintf(cfg.password_encoder_old_secret, sizeof cfg.password_encoder_old_secret, "%s", old);
    ck_assert_msg(sec_pwenc_new(&cfg, g_dir, cluster, &e, err, sizeof err) == 0, "%s", err);
    return e;
}

#define PLAIN "sasl.password=hunter2-long-enough\n"

START_TEST(test_sealed_opens_to_the_text_and_holds_none_of_it)
{
    sec_pwenc *e = make("s3cret", "", true);
    char a[2048], b[2048], out[2048], err[256];
    bool stale;
    ck_assert_int_eq(sec_pwenc_seal(e, "src", PLAIN, a, sizeof a, err, sizeof err), 0);
    ck_assert_int_eq(sec_pwenc_seal(e, "src", PLAIN, b, sizeof b, err, sizeof err), 0);
    ck_assert(sec_pwenc_sealed(a));
    ck_assert_ptr_null(strstr(a, "hunter2"));
    ck_assert_str_ne(a, b);                                 /* sec_pwenc.c P2: salt and IV */
    ck_assert(sec_pwenc_same(e, "src", a, b));
    ck_assert_int_eq(sec_pwenc_open(e, "src", a, out, sizeof out, &stale, err, sizeof err), 0);
    ck_assert_str_eq(out, PLAIN);
    ck_assert(!stale);
    /* sec_pwenc.c P3: another owner; a changed byte */
    ck_assert_int_eq(sec_pwenc_open(e, "other", a, out, sizeof out, &stale, err, sizeof err),
                     -1);
    a[strlen(a) - 6] ^= 1;
    ck_assert_int_eq(sec_pwenc_open(e, "src", a, out, sizeof out, &stale, err, sizeof err), -1);
    /* "" stays "", needing no key */
    ck_assert_int_eq(sec_pwenc_seal(NULL, "src", "", a, sizeof a, err, sizeof err), 0);
    ck_assert_str_eq(a, "");
    sec_pwenc_free(e);
}
END_TEST

START_TEST(test_another_secret_fails_and_the_old_secret_opens_stale)
{
    sec_pwenc *e1 = make("first", "", true), *e2 = make("second", "", true),
              *e3 = make("second", "first", true);
    char a[2048], out[2048], err[256];
    bool stale;
    ck_assert_int_eq(sec_pwenc_seal(e1, "src", PLAIN, a, sizeof a, err, sizeof err), 0);
    ck_assert_int_eq(sec_pwenc_open(e2, "src", a, out, sizeof out, &stale, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "password.encoder.secret"));
    ck_assert_int_eq(sec_pwenc_open(e3, "src", a, out, sizeof out, &stale, err, sizeof err), 0);
    ck_assert_str_eq(out, PLAIN);
    ck_assert(stale);
    ck_assert(!sec_pwenc_same(e3, "src", a, PLAIN));      /* cluster_links.c L7 */
    sec_pwenc_free(e1);
    sec_pwenc_free(e2);
    sec_pwenc_free(e3);
}
END_TEST

START_TEST(test_plain_opens_stale_and_cluster_without_secret_refuses)
{
    sec_pwenc *e = make("", "", true);
    char a[2048], out[2048], err[256];
    bool stale;
    ck_assert_int_eq(sec_pwenc_open(e, "src", PLAIN, out, sizeof out, &stale, err, sizeof err),
                     0);
    ck_assert_str_eq(out, PLAIN);
    ck_assert(stale);
    ck_assert_int_eq(sec_pwenc_seal(e, "src", PLAIN, a, sizeof a, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "cluster mode needs password.encoder.secret"));
    sec_pwenc_free(e);
}
END_TEST

START_TEST(test_standalone_key_file_is_made_once_0600_and_used_again)
{
    sec_pwenc *e1 = make("", "", false);
    char path[128], a[2048], out[2048], err[256];
    struct stat st;
    bool stale;
    snprintf(path, sizeof path, "%s/password-encoder.key", g_dir);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(sec_pwenc_seal(e1, "src", PLAIN, a, sizeof a, err, sizeof err), 0);
    sec_pwenc *e2 = make("", "", false);                    /* a restart */
    ck_assert_int_eq(sec_pwenc_open(e2, "src", a, out, sizeof out, &stale, err, sizeof err), 0);
    ck_assert(!stale);
    sec_pwenc *e3 = make("now-set", "", false);             /* the file: an old key */
    ck_assert_int_eq(sec_pwenc_open(e3, "src", a, out, sizeof out, &stale, err, sizeof err), 0);
    ck_assert(stale);
    sec_pwenc_free(e1);
    sec_pwenc_free(e2);
    sec_pwenc_free(e3);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_sealed_opens_to_the_text_and_holds_none_of_it,
        test_another_secret_fails_and_the_old_secret_opens_stale,
        test_plain_opens_stale_and_cluster_without_secret_refuses,
        test_standalone_key_file_is_made_once_0600_and_used_again,
    };
    return unit_run("d_pwenc", "pwenc", tests, sizeof tests / sizeof *tests, setup, teardown, 20);
}
