/*
 * test_d_registry — the schema registry's model (daemon/registry/
 * sr_state.c): the _schemas records it writes, byte for byte in
 * Confluent's format, and what applying them in log order leaves
 * (sr_state.c M1: schemas kept while named; sr_state.c M2: ids never go down);
 * and whose SQL write a request is (sr_sql.c Q3: only this process's
 * secret names a principal).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/registry/sr_int.h"
#include "tests/unit/unit_run.h"

#include <event2/http.h>

static sr_registry r;

static void setup(void)
{
    memset(&r, 0, sizeof r);
    strcpy(r.compat, "BACKWARD");
    strcpy(r.mode, "READWRITE");
}

static void teardown(void)
{
    sr_state_free(&r);
}

/* Applies key/value (value NULL: a tombstone); both freed. */
static void apply(char *key, char *val)
{
    ck_assert_ptr_nonnull(key);
    ck_assert_int_eq(sr_state_apply(&r, key, strlen(key), val, val ? (ssize_t)strlen(val) : -1),
                     0);
    free(key);
    free(val);
}

static void put(const char *subject, int32_t version, int32_t id, const char *text, bool del)
{
    apply(sr_key_schema(subject, version),
          sr_val_schema(subject, version, id, "AVRO", text, "[]", del));
}

START_TEST(test_records_are_confluents_byte_for_byte)
{
    char *k = sr_key_schema("orders-value", 3);
    ck_assert_str_eq(k, "{\"keytype\":\"SCHEMA\",\"subject\":\"orders-value\",\"version\":3,"
                        "\"magic\":1}");
    free(k);
    k = sr_key_config(NULL);
    ck_assert_str_eq(k, "{\"keytype\":\"CONFIG\",\"subject\":null,\"magic\":0}");
    free(k);
    k = sr_key_mode("s");
    ck_assert_str_eq(k, "{\"keytype\":\"MODE\",\"subject\":\"s\",\"magic\":0}");
    free(k);
    k = sr_key_delete_subject("s");
    ck_assert_str_eq(k, "{\"keytype\":\"DELETE_SUBJECT\",\"subject\":\"s\",\"magic\":0}");
    free(k);
    char *v = sr_val_schema("s", 1, 7, "AVRO", "\"int\"", "[]", false);
    ck_assert_str_eq(v, "{\"subject\":\"s\",\"version\":1,\"id\":7,\"schema\":\"\\\"int\\\"\","
                        "\"deleted\":false}");
    free(v);
    v = sr_val_schema("s", 1, 7, "JSON", "{}", "[{\"name\":\"n\",\"subject\":\"t\","
                      "\"version\":1}]", true);
    ck_assert_str_eq(v, "{\"subject\":\"s\",\"version\":1,\"id\":7,\"schemaType\":\"JSON\","
                        "\"references\":[{\"name\":\"n\",\"subject\":\"t\",\"version\":1}],"
                        "\"schema\":\"{}\",\"deleted\":true}");
    free(v);
    v = sr_val_setting(true, "FULL");
    ck_assert_str_eq(v, "{\"compatibilityLevel\":\"FULL\"}");
    free(v);
}
END_TEST

START_TEST(test_log_order_decides_versions_deletions_and_ids)
{
    put("s", 1, 1, "\"int\"", false);
    put("s", 2, 2, "\"long\"", false);
    put("t", 1, 1, "\"int\"", false);
    sr_subject *s = sr_subject_find(&r, "s");
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(sr_version_latest(s, false)->version, 2);
    ck_assert_ptr_eq(sr_schema_find(&r, "AVRO", "\"int\"", "[]"), sr_schema_by_id(&r, 1));
    ck_assert_int_eq(sr_schema_by_id(&r, 1)->uses, 2);
    /* a soft delete of the subject: every version up to the one named */
    apply(sr_key_delete_subject("s"), sr_val_delete_subject("s", 2));
    ck_assert_uint_eq(sr_subject_live(s), 0);
    ck_assert_ptr_null(sr_version_latest(s, false));
    /* permanent: tombstones; schema 1 stays while t names it (sr_state.c M1) */
    apply(sr_key_schema("s", 1), NULL);
    apply(sr_key_schema("s", 2), NULL);
    ck_assert_ptr_null(sr_subject_find(&r, "s"));
    ck_assert_ptr_nonnull(sr_schema_by_id(&r, 1));
    ck_assert_ptr_null(sr_schema_by_id(&r, 2));
    apply(sr_key_schema("t", 1), NULL);
    ck_assert_ptr_null(sr_schema_by_id(&r, 1));
    ck_assert_uint_eq(r.nschemas, 0);
    ck_assert_int_eq(r.max_id, 2);                       /* sr_state.c M2 */
    /* a rewrite of a version (its soft delete) replaces it */
    put("u", 1, 5, "\"string\"", false);
    put("u", 1, 5, "\"string\"", true);
    ck_assert_uint_eq(sr_subject_find(&r, "u")->nv, 1);
    ck_assert(sr_version_find(sr_subject_find(&r, "u"), 1)->deleted);
    ck_assert_int_eq(sr_schema_by_id(&r, 5)->uses, 1);
}
END_TEST

START_TEST(test_settings_set_and_cleared)
{
    apply(sr_key_config(NULL), sr_val_setting(true, "FULL"));
    ck_assert_str_eq(sr_compat_of(&r, NULL), "FULL");
    apply(sr_key_config("s"), sr_val_setting(true, "NONE"));
    apply(sr_key_mode("s"), sr_val_setting(false, "READONLY"));
    sr_subject *s = sr_subject_find(&r, "s");
    ck_assert_str_eq(sr_compat_of(&r, s), "NONE");
    ck_assert_str_eq(sr_mode_of(&r, s), "READONLY");
    apply(sr_key_config("s"), NULL);
    apply(sr_key_mode("s"), NULL);
    ck_assert_ptr_null(sr_subject_find(&r, "s"));        /* nothing of its own left */
    apply(sr_key_config(NULL), NULL);
    ck_assert_str_eq(r.compat, "BACKWARD");
}
END_TEST

START_TEST(test_records_it_cannot_read_are_skipped)
{
    const char *bad[][2] = {
        { "not json", "{}" },
        { "{\"keytype\":\"NOOP\",\"magic\":0}", "{}" },
        { "{\"keytype\":\"SCHEMA\",\"subject\":\"s\",\"version\":0,\"magic\":1}",
          "{\"id\":1,\"schema\":\"x\"}" },
        { "{\"keytype\":\"SCHEMA\",\"subject\":\"s\",\"version\":1,\"magic\":1}", "[1" },
        { "{\"keytype\":\"SCHEMA\",\"subject\":\"s\",\"version\":1,\"magic\":1}",
          "{\"id\":-4,\"schema\":\"x\"}" },
        { "{\"keytype\":\"CONFIG\",\"subject\":\"s\",\"magic\":0}", "{\"compatibilityLevel\":3}" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_int_eq(sr_state_apply(&r, bad[i][0], strlen(bad[i][0]), bad[i][1],
                                        (ssize_t)strlen(bad[i][1])), 0);
    ck_assert_uint_eq(r.nschemas, 0);
    sr_subject *s = sr_subject_find(&r, "s");
    ck_assert(!s || s->nv == 0);
    /* a value that does not parse is not a tombstone */
    put("s", 1, 1, "\"int\"", false);
    const char *key = "{\"keytype\":\"SCHEMA\",\"subject\":\"s\",\"version\":1,\"magic\":1}";
    ck_assert_int_eq(sr_state_apply(&r, key, strlen(key), "{\"id", 4), 0);
    ck_assert_ptr_nonnull(sr_version_find(sr_subject_find(&r, "s"), 1));
}
END_TEST

/* sr_sql_who of a request carrying header value v (NULL: none). */
static int who(const char *v, const char **principal, char *host, size_t hostlen)
{
    static struct evhttp_request *req;
    if (req)
        evhttp_request_free(req);
    req = evhttp_request_new(NULL, NULL);
    if (v)
        ck_assert_int_eq(evhttp_add_header(evhttp_request_get_input_headers(req),
                                           SR_SQL_HEADER, v), 0);
    return sr_sql_who(&r, req, principal, host, hostlen);
}

START_TEST(test_only_this_processs_secret_names_a_sql_principal)
{
    char err[128], host[SR_HOST_MAX], v[512];
    const char *p = "unset";
    ck_assert_int_eq(sr_sql_start(&r, err, sizeof err), 0);
    ck_assert_uint_eq(strlen(r.sql_secret), SR_SQL_SECRET_HEX);
    ck_assert_int_eq(who(NULL, &p, host, sizeof host), 0);            /* not from SQL */
    snprintf(v, sizeof v, "%s 10.0.0.7 User:CN=a b,O=c", r.sql_secret);
    ck_assert_int_eq(who(v, &p, host, sizeof host), 1);
    ck_assert_str_eq(p, "User:CN=a b,O=c");
    ck_assert_str_eq(host, "10.0.0.7");
    snprintf(v, sizeof v, "%s -", r.sql_secret);                      /* may do all */
    ck_assert_int_eq(who(v, &p, host, sizeof host), 1);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(host, "");
    /* forgeries: another secret (one hex digit off), none, short, no host */
    snprintf(v, sizeof v, "%s 127.0.0.1 User:admin", r.sql_secret);
    v[5] = v[5] == '0' ? '1' : '0';
    ck_assert_int_eq(who(v, &p, host, sizeof host), -1);
    ck_assert_int_eq(who("User:admin", &p, host, sizeof host), -1);
    ck_assert_int_eq(who("", &p, host, sizeof host), -1);
    snprintf(v, sizeof v, "%.*s 127.0.0.1", SR_SQL_SECRET_HEX - 1, r.sql_secret);
    ck_assert_int_eq(who(v, &p, host, sizeof host), -1);
    snprintf(v, sizeof v, "%s ", r.sql_secret);
    ck_assert_int_eq(who(v, &p, host, sizeof host), -1);
    /* each start draws another */
    char first[sizeof r.sql_secret];
    memcpy(first, r.sql_secret, sizeof first);
    ck_assert_int_eq(sr_sql_start(&r, err, sizeof err), 0);
    ck_assert_str_ne(first, r.sql_secret);
    snprintf(v, sizeof v, "%s 127.0.0.1 User:admin", first);
    ck_assert_int_eq(who(v, &p, host, sizeof host), -1);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_records_are_confluents_byte_for_byte,
                             test_log_order_decides_versions_deletions_and_ids,
                             test_settings_set_and_cleared,
                             test_records_it_cannot_read_are_skipped,
                             test_only_this_processs_secret_names_a_sql_principal };
    return unit_run("d_registry", "registry", tests, sizeof tests / sizeof *tests, setup,
                    teardown, 0);
}
