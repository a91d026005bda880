/* Broker configuration: Kafka's keys, defaults, and refusals that name
 * the key. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/config.h"
#include "tests/unit/unit_run.h"

static char *write_file(const char *text)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/sluice-cfg-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static const char *value_of(const bk_config *c, const char *name)
{
    for (size_t i = 0; i < c->ntopic_defaults; i++)
        if (!strcmp(c->topic_defaults[i].name, name))
            return c->topic_defaults[i].value;
    return NULL;
}

START_TEST(test_loads_kafka_keys)
{
    char *p = write_file("# comment\n! also comment\n\nbroker.id=3\n"
                         "listeners=PLAINTEXT://127.0.0.1:19092\n"
                         "log.dirs = /tmp/x,/tmp/y\nnum.partitions: 6\n"
                         "auto.create.topics.enable=false\n"
                         "log.retention.hours=24\nlog.segment.bytes=1048576\n"
                         "log.flush.interval.ms=1000\n");
    bk_config c;
    bk_config_init(&c);
    char err[512] = "";
    ck_assert_int_eq(bk_config_load(&c, p, err, sizeof err), 0);
    ck_assert_int_eq(bk_config_finish(&c, err, sizeof err), 0);
    ck_assert_int_eq(c.broker_id, 3);
    ck_assert_str_eq(c.listen_host, "127.0.0.1");
    ck_assert_int_eq(c.listen_port, 19092);
    ck_assert_str_eq(c.advertised_host, "127.0.0.1");
    ck_assert_int_eq(c.advertised_port, 19092);
    ck_assert_str_eq(c.log_dirs, "/tmp/x");
    ck_assert_int_eq(c.num_partitions, 6);
    ck_assert(!c.auto_create_topics_enable);
    ck_assert_str_eq(value_of(&c, "retention.ms"), "86400000");
    ck_assert_str_eq(value_of(&c, "segment.bytes"), "1048576");
    ck_assert_str_eq(value_of(&c, "flush.ms"), "1000");
    bk_config_free(&c);
    unlink(p);
}
END_TEST

START_TEST(test_finest_retention_unit_wins)
{
    bk_config c;
    bk_config_init(&c);
    char err[512];
    ck_assert_int_eq(bk_config_set(&c, "log.retention.ms", "5000", err, sizeof err), 0);
    ck_assert_int_eq(bk_config_set(&c, "log.retention.hours", "1", err, sizeof err), 0);
    ck_assert_str_eq(value_of(&c, "retention.ms"), "5000");
    bk_config_free(&c);
}
END_TEST

START_TEST(test_unknown_key_is_named)
{
    char *p = write_file("broker.id=1\nlog.retention.dayz=3\n");
    bk_config c;
    bk_config_init(&c);
    char err[512] = "";
    ck_assert_int_eq(bk_config_load(&c, p, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "log.retention.dayz"));
    ck_assert_ptr_nonnull(strstr(err, ":2:"));
    bk_config_free(&c);
    unlink(p);
}
END_TEST

START_TEST(test_invalid_values_are_named)
{
    bk_config c;
    bk_config_init(&c);
    char err[512];
    ck_assert_int_eq(bk_config_set(&c, "num.partitions", "zero", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "num.partitions"));
    ck_assert_int_eq(bk_config_set(&c, "num.partitions", "0", err, sizeof err), -1);
    ck_assert_int_eq(bk_config_set(&c, "auto.create.topics.enable", "yes", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "auto.create.topics.enable"));
    ck_assert_int_eq(bk_config_set(&c, "listeners", "nonsense", err, sizeof err), -1);
    ck_assert_int_eq(bk_config_set(&c, "log.cleanup.policy", "shred", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "log.cleanup.policy"));
    ck_assert_int_eq(bk_config_set(&c, "log.segment.bytes", "12abc", err, sizeof err), -1);
    ck_assert_int_eq(bk_config_set(&c, "zookeeper.connect", "127.0.0.1:2181", err, sizeof err), 0);
    ck_assert_int_eq(bk_config_finish(&c, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "zookeeper.connect"));
    bk_config_free(&c);
}
END_TEST

START_TEST(test_offsets_commit_linger_is_bounded)
{
    bk_config c;
    bk_config_init(&c);
    char err[512];
    ck_assert_int_eq(c.offsets_commit_linger_ms, 5);
    ck_assert_int_eq(bk_config_set(&c, "offsets.commit.linger.ms", "0", err, sizeof err), 0);
    ck_assert_int_eq(c.offsets_commit_linger_ms, 0);
    ck_assert_int_eq(bk_config_set(&c, "offsets.commit.linger.ms", "1000", err, sizeof err), 0);
    ck_assert_int_eq(c.offsets_commit_linger_ms, 1000);
    ck_assert_int_eq(bk_config_set(&c, "offsets.commit.linger.ms", "1001", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "offsets.commit.linger.ms"));
    ck_assert_int_eq(bk_config_set(&c, "offsets.commit.linger.ms", "-1", err, sizeof err), -1);
    ck_assert_int_eq(c.offsets_commit_linger_ms, 1000);
    bk_config_free(&c);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_loads_kafka_keys, test_finest_retention_unit_wins, test_unknown_key_is_named,
        test_invalid_values_are_named, test_offsets_commit_linger_is_bounded,
    };
    return unit_run("daemon config", "config", tests, sizeof tests / sizeof *tests, NULL, NULL, 0);
}
