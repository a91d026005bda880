/*
 * tests/unit/test_d_log_ends.c — /broker_log_ends/<id>'s lines
 * (daemon/cluster/cluster_recovery.c): what a broker writes parses back to the same
 * values, found by topic and partition; a znode someone else wrote (a
 * wrong first line, cut lines, numbers out of range, no newline at the
 * end, bytes of every value) never crashes the controller and yields only
 * the lines that are whole.  The first line names the ZooKeeper session
 * (cluster_recovery.c R3); text without it (an older version's) yields nothing.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/cluster/cluster.h"
#include "tests/unit/unit_run.h"

static int64_t session;

static int parse(const char *text, cl_log_end **e, char **buf)
{
    *buf = strdup(text);
    ck_assert_ptr_nonnull(*buf);
    return cl_log_ends_parse(*buf, &session, e);
}

START_TEST(test_lines_written_parse_back_and_are_found)
{
    char text[4096], line[320];
    ck_assert_int_eq(cl_log_ends_head(text, sizeof text, 0x1004a2b3c4d5e6fLL),
                     (int)strlen(text));
    const char *topics[] = { "zeta", "alpha", "__consumer_offsets", "alpha" };
    int32_t parts[] = { 3, 7, 49, 0 }, epochs[] = { 5, -1, 0, 2147483647 };
    int64_t ends[] = { 1200, 0, 9223372036854775807LL, 42 }, hws[] = { 1100, -1, 7, 42 };
    for (int i = 0; i < 4; i++) {
        cl_log_end w = { topics[i], parts[i], epochs[i], ends[i], hws[i] };
        int n = cl_log_ends_line(line, sizeof line, &w);
        ck_assert_int_eq(n, (int)strlen(line));
        strcat(text, line);
    }
    cl_log_end *e;
    char *buf;
    ck_assert_int_eq(parse(text, &e, &buf), 4);
    ck_assert(session == 0x1004a2b3c4d5e6fLL);
    for (int i = 0; i < 4; i++) {
        const cl_log_end *f = cl_log_ends_find(e, 4, topics[i], parts[i]);
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(f->epoch, epochs[i]);
        ck_assert(f->end == ends[i]);
        ck_assert(f->hw == hws[i]);
    }
    ck_assert_ptr_null(cl_log_ends_find(e, 4, "alpha", 1));
    ck_assert_ptr_null(cl_log_ends_find(e, 4, "alph", 7));
    ck_assert_ptr_null(cl_log_ends_find(NULL, 0, "alpha", 7));
    char small[8];
    cl_log_end w = { "topic", 0, 1, 100000, 100000 };
    ck_assert_int_eq(cl_log_ends_line(small, sizeof small, &w), -1);
    ck_assert_int_eq(cl_log_ends_head(small, sizeof small, 1), -1);
    free(e);
    free(buf);
}
END_TEST

START_TEST(test_malformed_lines_are_left_out)
{
    static const char *const bad[] = {
        "1 2 2 3\n",                      /* no topic */
        "1 2 2 3 \n",                     /* empty topic */
        "1 2 3 t\n",                      /* no high watermark */
        "x 2 2 3 t\n",
        "1 2 2 -3 t\n",                   /* negative partition */
        "1 2 2 2147483648 t\n",           /* partition past int32 */
        "-2 2 2 3 t\n",                   /* epoch below -1 */
        "2147483648 2 2 3 t\n",
        "1 99999999999999999999 2 3 t\n", /* past int64 */
        "1  2 2 3 t\n",
        "- 2 2 3 t\n",
        "\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[256];
        snprintf(text, sizeof text, "sluice-log-ends 2 7\n0 10 10 0 good\n%s1 20 20 1 good\n",
                 bad[i]);
        cl_log_end *e;
        char *buf;
        ck_assert_msg(parse(text, &e, &buf) == 2, "line %zu: %s", i, bad[i]);
        ck_assert(cl_log_ends_find(e, 2, "good", 1)->end == 20);
        free(e);
        free(buf);
    }
    char long_topic[400] = "sluice-log-ends 2 7\n1 2 2 3 ";
    memset(long_topic + strlen(long_topic), 'a', 300);
    strcat(long_topic, "\n");
    cl_log_end *e;
    char *buf;
    ck_assert_int_eq(parse(long_topic, &e, &buf), 0);
    free(e);
    free(buf);
}
END_TEST

START_TEST(test_a_wrong_header_or_a_cut_line_yields_nothing_more)
{
    static const char *const texts[] = {
        "", "sluice-log-ends 2 7", "sluice-log-ends 1\n1 2 2 3 t\n",
        "sluice-log-ends 2\n1 2 2 3 t\n", "sluice-log-ends 2 \n1 2 2 3 t\n",
        "sluice-log-ends 2 x7\n1 2 2 3 t\n", "sluice-log-ends 2 7 \n1 2 2 3 t\n",
        "sluice-log-ends 3 7\n1 2 2 3 t\n", "{\"version\":1}\n1 2 2 3 t\n",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        cl_log_end *e;
        char *buf;
        ck_assert_int_eq(parse(texts[i], &e, &buf), 0);
        ck_assert(session == 0);
        free(e);
        free(buf);
    }
    cl_log_end *e;
    char *buf;
    ck_assert_int_eq(parse("sluice-log-ends 2 -7\n1 2 2 3 t\n4 5 5 6 cut", &e, &buf), 1);
    ck_assert(session == -7);
    free(e);
    free(buf);
}
END_TEST

/* Every byte value in every position of a short line: no crash, no read
 * past the text (ASan), at most the two whole lines. */
START_TEST(test_every_byte_anywhere_never_crashes)
{
    const char *base = "sluice-log-ends 2 7\n7 123 100 4 topic\n8 456 400 5 other\n";
    size_t len = strlen(base);
    char text[128];
    for (size_t at = 0; at < len; at++)
        for (int c = 1; c < 256; c++) {
            memcpy(text, base, len + 1);
            text[at] = (char)c;
            cl_log_end *e;
            int n = cl_log_ends_parse(text, &session, &e);
            ck_assert_int_le(n, 3);
            free(e);
        }
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_lines_written_parse_back_and_are_found,
        test_malformed_lines_are_left_out,
        test_a_wrong_header_or_a_cut_line_yields_nothing_more,
        test_every_byte_anywhere_never_crashes,
    };
    return unit_run("d_log_ends", "log_ends", tests, sizeof tests / sizeof *tests, NULL, NULL,
                    0);
}
