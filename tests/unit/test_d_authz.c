/*
 * test_d_authz — the authorizer's matcher and decision cache
 * (daemon/security/sec_authz.c): Kafka's rules for patterns, principals, hosts,
 * implied operations, DENY over ALLOW, super.users and
 * allow.everyone.if.no.acl.found, and a cached decision that follows a
 * reload of the ACL set.
 */
#include <check.h>
#include <string.h>

#include "daemon/security/sec_authz.h"
#include "tests/unit/unit_run.h"

#define ME "User:alice"
#define HOST "10.0.0.1"

static md_acl acl(const char *type, const char *name, const char *pat, const char *who,
                  const char *host, const char *op, const char *perm)
{
    return (md_acl){ .resource_type = (char *)type, .resource_name = (char *)name,
                     .pattern_type = (char *)pat, .principal = (char *)who,
                     .host = (char *)host, .operation = (char *)op, .permission = (char *)perm };
}

static bk_authz *with(const md_acl *rows, size_t n, const char *super, bool everyone)
{
    bk_authz *az;
    ck_assert_int_eq(sec_authz_new(true, super, everyone, &az), 0);
    ck_assert_int_eq(sec_authz_load(az, rows, n), 0);
    return az;
}

static bool may(bk_authz *az, const char *who, int res, const char *name, int op)
{
    return sec_authz_check(az, who, HOST, res, kp_str_cstr(name), op);
}

START_TEST(test_literal_prefixed_and_wildcard_names)
{
    md_acl rows[] = {
        acl("TOPIC", "orders", "LITERAL", ME, "*", "READ", "ALLOW"),
        acl("TOPIC", "logs-", "PREFIXED", ME, "*", "WRITE", "ALLOW"),
        acl("GROUP", "*", "LITERAL", ME, "*", "READ", "ALLOW"),
        /* the schema registry's type (100): matched as the others */
        acl("SUBJECT", "orders-", "PREFIXED", ME, "*", "READ", "ALLOW"),
        acl("SUBJECT", "orders-secret", "LITERAL", ME, "*", "ALL", "DENY"),
    };
    bk_authz *az = with(rows, 5, NULL, false);
    ck_assert(may(az, ME, BK_RES_TOPIC, "orders", BK_OP_READ));
    ck_assert(!may(az, ME, BK_RES_TOPIC, "orders2", BK_OP_READ));     /* literal is exact */
    ck_assert(may(az, ME, BK_RES_TOPIC, "logs-app", BK_OP_WRITE));
    ck_assert(may(az, ME, BK_RES_TOPIC, "logs-", BK_OP_WRITE));
    ck_assert(!may(az, ME, BK_RES_TOPIC, "logs", BK_OP_WRITE));
    ck_assert(may(az, ME, BK_RES_GROUP, "any-group", BK_OP_READ));   /* "*" */
    ck_assert(!may(az, ME, BK_RES_TOPIC, "any-group", BK_OP_READ));  /* types differ */
    ck_assert(may(az, ME, BK_RES_SUBJECT, "orders-value", BK_OP_DESCRIBE));
    ck_assert(!may(az, ME, BK_RES_SUBJECT, "orders-value", BK_OP_WRITE));
    ck_assert(!may(az, ME, BK_RES_SUBJECT, "orders-secret", BK_OP_READ));  /* DENY wins */
    ck_assert(!may(az, ME, BK_RES_SUBJECT, "orders", BK_OP_READ));
    sec_authz_free(az);
}
END_TEST

START_TEST(test_principals_hosts_and_implied_operations)
{
    md_acl rows[] = {
        acl("TOPIC", "t", "LITERAL", "User:*", "*", "WRITE", "ALLOW"),
        acl("TOPIC", "u", "LITERAL", ME, "10.0.0.2", "READ", "ALLOW"),
        acl("TOPIC", "c", "LITERAL", ME, HOST, "ALTER_CONFIGS", "ALLOW"),
        acl("CLUSTER", BK_CLUSTER_NAME, "LITERAL", ME, "*", "ALL", "ALLOW"),
    };
    bk_authz *az = with(rows, 4, NULL, false);
    ck_assert(may(az, "User:bob", BK_RES_TOPIC, "t", BK_OP_WRITE));   /* User:* */
    ck_assert(may(az, "User:bob", BK_RES_TOPIC, "t", BK_OP_DESCRIBE)); /* WRITE ⇒ DESCRIBE */
    ck_assert(!may(az, "User:bob", BK_RES_TOPIC, "t", BK_OP_READ));
    ck_assert(!may(az, ME, BK_RES_TOPIC, "u", BK_OP_READ));           /* another host */
    ck_assert(may(az, ME, BK_RES_TOPIC, "c", BK_OP_DESCRIBE_CONFIGS));
    ck_assert(!may(az, ME, BK_RES_TOPIC, "c", BK_OP_DESCRIBE));
    ck_assert(may(az, ME, BK_RES_CLUSTER, BK_CLUSTER_NAME, BK_OP_CLUSTER_ACTION));  /* ALL */
    ck_assert(!may(az, "User:bob", BK_RES_CLUSTER, BK_CLUSTER_NAME, BK_OP_ALTER));
    sec_authz_free(az);
}
END_TEST

START_TEST(test_deny_wins_super_users_and_no_acl)
{
    md_acl rows[] = {
        acl("TOPIC", "", "PREFIXED", ME, "*", "ALL", "ALLOW"),
        acl("TOPIC", "secret", "LITERAL", ME, "*", "READ", "DENY"),
        acl("TOPIC", "ops", "LITERAL", "User:carol", "*", "READ", "ALLOW"),
    };
    bk_authz *az = with(rows, 3, " User:root ;User:admin", true);
    ck_assert(!may(az, ME, BK_RES_TOPIC, "secret", BK_OP_READ));      /* DENY wins */
    ck_assert(may(az, ME, BK_RES_TOPIC, "secret", BK_OP_WRITE));
    ck_assert(may(az, "User:root", BK_RES_TOPIC, "secret", BK_OP_READ));   /* super */
    ck_assert(may(az, "User:admin", BK_RES_GROUP, "g", BK_OP_DELETE));
    ck_assert(!may(az, "User:dave", BK_RES_TOPIC, "ops", BK_OP_READ));  /* named: no */
    ck_assert(may(az, "User:dave", BK_RES_GROUP, "g", BK_OP_READ));     /* unnamed: everyone */
    sec_authz_free(az);
    az = with(rows, 3, NULL, false);
    ck_assert(!may(az, "User:dave", BK_RES_GROUP, "g", BK_OP_READ));    /* default: closed */
    sec_authz_free(az);
}
END_TEST

START_TEST(test_cached_decision_follows_reload)
{
    md_acl one = acl("TOPIC", "t", "LITERAL", ME, "*", "WRITE", "ALLOW");
    bk_authz *az = with(&one, 1, NULL, false);
    for (int i = 0; i < 3; i++)                                      /* a miss, then hits */
        ck_assert(may(az, ME, BK_RES_TOPIC, "t", BK_OP_WRITE));
    md_acl two[] = { one, acl("TOPIC", "t", "LITERAL", ME, "*", "WRITE", "DENY") };
    ck_assert_int_eq(sec_authz_load(az, two, 2), 0);
    ck_assert(!may(az, ME, BK_RES_TOPIC, "t", BK_OP_WRITE));
    ck_assert_int_eq(sec_authz_load(az, NULL, 0), 0);
    ck_assert(!may(az, ME, BK_RES_TOPIC, "t", BK_OP_WRITE));
    bk_authz *off;
    ck_assert_int_eq(sec_authz_new(false, NULL, false, &off), 0);
    ck_assert(may(off, ME, BK_RES_TOPIC, "t", BK_OP_WRITE));          /* no authorizer */
    sec_authz_free(off);
    sec_authz_free(az);
}
END_TEST

START_TEST(test_any_resource_of_a_type)
{
    md_acl rows[] = {
        acl("TOPIC", "t", "LITERAL", ME, "*", "WRITE", "ALLOW"),
        acl("TOPIC", "*", "LITERAL", "User:bob", "*", "ALL", "DENY"),
        acl("TOPIC", "u", "LITERAL", "User:bob", "*", "WRITE", "ALLOW"),
    };
    bk_authz *az = with(rows, 3, NULL, false);
    ck_assert(sec_authz_any(az, ME, HOST, BK_RES_TOPIC, BK_OP_WRITE));     /* WRITE on t */
    ck_assert(sec_authz_any(az, ME, HOST, BK_RES_TOPIC, BK_OP_DESCRIBE));  /* implied */
    ck_assert(!sec_authz_any(az, ME, HOST, BK_RES_TOPIC, BK_OP_READ));
    ck_assert(!sec_authz_any(az, "User:bob", HOST, BK_RES_TOPIC, BK_OP_WRITE)); /* denied on all */
    ck_assert(!sec_authz_any(az, "User:carol", HOST, BK_RES_TOPIC, BK_OP_WRITE));
    sec_authz_free(az);
}
END_TEST

START_TEST(test_filters_and_validation)
{
    md_acl rows[] = {
        acl("TOPIC", "t", "LITERAL", ME, "*", "READ", "ALLOW"),
        acl("TOPIC", "t-", "PREFIXED", ME, "*", "WRITE", "ALLOW"),
        acl("TOPIC", "*", "LITERAL", "User:bob", "*", "READ", "DENY"),
        acl("SUBJECT", "t", "LITERAL", ME, "*", "READ", "ALLOW"),
    };
    bk_authz *az = with(rows, 4, NULL, false);
    const bk_acl **sel;
    size_t n;
    /* SUBJECT (Sluice's own, sec_authz.h) only when asked for by type */
    bk_acl_filter any = { .res = BK_RES_ANY, .pat = BK_PAT_ANY, .op = BK_OP_ANY,
                          .perm = BK_PERM_ANY, .name = KP_STR_NULL, .principal = KP_STR_NULL,
                          .host = KP_STR_NULL };
    ck_assert_int_eq(sec_authz_select(az, &any, &sel, &n), 0);
    ck_assert_uint_eq(n, 3);
    free(sel);
    any.res = BK_RES_SUBJECT;
    ck_assert_int_eq(sec_authz_select(az, &any, &sel, &n), 0);
    ck_assert(n == 1 && !strcmp(sec_res_name(sel[0]->res), "SUBJECT"));
    free(sel);
    ck_assert_int_eq(sec_res_parse("SUBJECT"), BK_RES_SUBJECT);
    ck_assert_ptr_null(sec_res_name(99));
    bk_acl_filter match = { .res = BK_RES_TOPIC, .pat = BK_PAT_MATCH, .op = BK_OP_ANY,
                            .perm = BK_PERM_ANY, .name = kp_str_cstr("t-1"),
                            .principal = KP_STR_NULL, .host = KP_STR_NULL };
    ck_assert_int_eq(sec_authz_select(az, &match, &sel, &n), 0);
    ck_assert_uint_eq(n, 2);                                         /* t- and * */
    free(sel);
    bk_acl_filter lit = match;
    lit.pat = BK_PAT_LITERAL;
    lit.name = kp_str_cstr("t");
    ck_assert_int_eq(sec_authz_select(az, &lit, &sel, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(sel[0]->name, "t");
    free(sel);
    char err[128];
    ck_assert_int_eq(sec_acl_validate(BK_RES_CLUSTER, kp_str_cstr("x"), BK_PAT_LITERAL,
                                     kp_str_cstr(ME), kp_str_cstr("*"), BK_OP_ALL,
                                     BK_PERM_ALLOW, err, sizeof err), KP_INVALID_REQUEST);
    ck_assert_int_eq(sec_acl_validate(BK_RES_TOPIC, kp_str_cstr("x"), BK_PAT_MATCH,
                                     kp_str_cstr(ME), kp_str_cstr("*"), BK_OP_ALL,
                                     BK_PERM_ALLOW, err, sizeof err), KP_INVALID_REQUEST);
    ck_assert_int_eq(sec_acl_validate(BK_RES_TOPIC, kp_str_cstr("x"), BK_PAT_LITERAL,
                                     kp_str_cstr("alice"), kp_str_cstr("*"), BK_OP_ALL,
                                     BK_PERM_ALLOW, err, sizeof err), KP_INVALID_REQUEST);
    ck_assert_int_eq(sec_acl_validate(BK_RES_TOPIC, kp_str_cstr("x"), BK_PAT_PREFIXED,
                                     kp_str_cstr(ME), kp_str_cstr("*"), BK_OP_READ,
                                     BK_PERM_DENY, err, sizeof err), KP_NONE);
    sec_authz_free(az);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_literal_prefixed_and_wildcard_names,
                             test_principals_hosts_and_implied_operations,
                             test_deny_wins_super_users_and_no_acl,
                             test_cached_decision_follows_reload, test_any_resource_of_a_type,
                             test_filters_and_validation };
    return unit_run("authz", "matcher", tests, sizeof tests / sizeof *tests, NULL, NULL, 0);
}
