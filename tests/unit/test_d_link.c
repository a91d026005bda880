/*
 * test_d_link — the pure pieces of cluster links (daemon/link/link.c):
 * which settings are secret (stored apart, shown masked: link.c K4), and
 * PLAIN's username and password out of a sasl.jaas.config value as
 * Kafka's clients write it; the bootstrap servers, tried in turn
 * (link_conn.c).
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "daemon/link/link.h"
#include "daemon/link/link_int.h"
#include "tests/unit/unit_run.h"

START_TEST(test_secret_settings)
{
    ck_assert(link_setting_secret("sasl.jaas.config"));
    ck_assert(link_setting_secret("sasl.password"));
    ck_assert(link_setting_secret("ssl.keystore.password"));
    ck_assert(link_setting_secret("ssl.key.password"));
    ck_assert(!link_setting_secret("sasl.username"));
    ck_assert(!link_setting_secret("security.protocol"));
    ck_assert(!link_setting_secret("fetch.max.bytes"));
}
END_TEST

START_TEST(test_jaas_plain)
{
    char u[32], p[32];
    ck_assert(link_jaas_plain("org.apache.kafka.common.security.plain.PlainLoginModule "
                              "required username=\"alice\" password=\"s3 cr;et\";",
                              u, sizeof u, p, sizeof p));
    ck_assert_str_eq(u, "alice");
    ck_assert_str_eq(p, "s3 cr;et");
    ck_assert(link_jaas_plain("X required password=pw username=bob;", u, sizeof u, p, sizeof p));
    ck_assert_str_eq(u, "bob");
    ck_assert_str_eq(p, "pw");
    /* user_alice= (a server's user list) is not username= */
    ck_assert(!link_jaas_plain("X required user_alice=\"x\" password=\"y\";", u, sizeof u, p,
                               sizeof p));
    ck_assert(!link_jaas_plain("X required username=\"unterminated;", u, sizeof u, p, sizeof p));
    ck_assert(!link_jaas_plain("X required username=\"a-name-longer-than-the-buffer-given\" "
                               "password=\"y\";", u, 8, p, sizeof p));
}
END_TEST

START_TEST(test_bootstrap_nth)
{
    char host[64], err[256];
    int port = 0, n = 0;
    const char *list = "a.example:9092,127.0.0.1:19093,[::1]:7";
    ck_assert_int_eq(lk_bootstrap_nth(list, 0, host, sizeof host, &port, &n, err, sizeof err), 0);
    ck_assert_str_eq(host, "a.example");
    ck_assert_int_eq(port, 9092);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(lk_bootstrap_nth(list, 1, host, sizeof host, &port, &n, err, sizeof err), 0);
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_int_eq(port, 19093);
    ck_assert_int_eq(lk_bootstrap_nth(list, 2, host, sizeof host, &port, &n, err, sizeof err), 0);
    ck_assert_str_eq(host, "[::1]");
    ck_assert_int_eq(port, 7);
    /* Every entry is checked, whichever is asked for. */
    const char *bad[] = { "", "h", "h:", ":1", "h:0", "h:65536", "h:1,", "h:1,x", "h:1x",
                          "h:1,,h:2", NULL };
    for (int i = 0; bad[i]; i++) {
        err[0] = 0;
        ck_assert_msg(lk_bootstrap_nth(bad[i], 0, host, sizeof host, &port, &n, err,
                                       sizeof err) != 0, "accepted '%s'", bad[i]);
        ck_assert(strstr(err, "bootstrap_servers"));
    }
    ck_assert(lk_bootstrap_nth(NULL, 0, host, sizeof host, &port, &n, err, sizeof err) != 0);
    ck_assert(lk_bootstrap_nth("a-very-long-host-name:1", 0, host, 8, &port, &n, err,
                               sizeof err) != 0);
}
END_TEST

static int pick(const char *filters, const char *name)
{
    char json[1024], err[512];
    snprintf(json, sizeof json, "{\"topicFilters\": [%s]}", filters);
    return link_filters_pick(json, "topicFilters", name, err, sizeof err);
}

/* Confluent's filters: an INCLUDE picks, an EXCLUDE wins over it, a
 * LITERAL "*" matches all; nothing is picked without an INCLUDE. */
START_TEST(test_filters)
{
    const char *all = "{\"name\": \"*\", \"patternType\": \"LITERAL\", "
                      "\"filterType\": \"INCLUDE\"}";
    const char *pre = "{\"name\": \"orders-\", \"patternType\": \"PREFIXED\"}";
    const char *no = "{\"name\": \"orders-test\", \"patternType\": \"PREFIXED\", "
                     "\"filterType\": \"EXCLUDE\"}";
    char two[512];
    ck_assert_int_eq(pick(all, "anything"), 1);
    ck_assert_int_eq(pick(pre, "orders-eu"), 1);
    ck_assert_int_eq(pick(pre, "orders"), 0);
    ck_assert_int_eq(pick(pre, "xorders-eu"), 0);
    snprintf(two, sizeof two, "%s, %s", pre, no);
    ck_assert_int_eq(pick(two, "orders-eu"), 1);
    ck_assert_int_eq(pick(two, "orders-test-1"), 0);
    ck_assert_int_eq(pick(no, "orders-eu"), 0);                  /* no INCLUDE */
    ck_assert_int_eq(pick("{\"name\": \"a\"}", "a"), 1);          /* LITERAL, INCLUDE */
    ck_assert_int_eq(pick("{\"name\": \"a\"}", "ab"), 0);
    ck_assert_int_eq(pick("", "a"), 0);
    /* refused */
    char err[512];
    ck_assert_int_eq(link_filters_pick("{\"topicFilters\": [", "topicFilters", "a", err,
                                       sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "is not JSON"));
    ck_assert_int_eq(pick("{\"name\": \"a\", \"patternType\": \"MATCH\"}", "a"), -1);
    ck_assert_int_eq(pick("{\"name\": 3}", "a"), -1);
    ck_assert_int_eq(pick("{\"name\": \"\"}", "a"), -1);
    ck_assert_int_eq(link_filters_pick("{\"groupFilters\": []}", "topicFilters", "a", err,
                                       sizeof err), -1);
    ck_assert_int_eq(link_filters_pick("[1]", "topicFilters", "a", err, sizeof err), -1);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = { test_secret_settings, test_jaas_plain, test_bootstrap_nth,
                                   test_filters };
    return unit_run("d_link", "link", tests, sizeof tests / sizeof *tests, NULL, NULL, 10);
}
