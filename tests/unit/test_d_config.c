/* Broker configuration: Kafka's keys, defaults, and refusals that name
 * the key. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/broker_config.h"
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

/* java.util.Properties' separators, as Kafka reads its file: white space
 * alone separates too; a line without a value is a key with an empty one,
 * refused by name without the line quoted whole. */
START_TEST(test_properties_separators)
{
    char *p = write_file("broker.id 4\nnum.partitions\t = 7\nlog.dirs  :/tmp/z\n"
                         "default.replication.factor=  1\n");
    bk_config c;
    bk_config_init(&c);
    char err[512] = "";
    ck_assert_int_eq(bk_config_load(&c, p, err, sizeof err), 0);
    ck_assert_int_eq(bk_config_finish(&c, err, sizeof err), 0);
    ck_assert_int_eq(c.broker_id, 4);
    ck_assert_int_eq(c.num_partitions, 7);
    ck_assert_str_eq(c.log_dirs, "/tmp/z");
    bk_config_free(&c);
    unlink(p);

    p = write_file("broker.id=1\nS3cret-passw0rd\n");
    bk_config_init(&c);
    ck_assert_int_eq(bk_config_load(&c, p, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, ":2:"));
    ck_assert_msg(!strstr(err, "S3cret"), "the line is quoted: %s", err);
    bk_config_free(&c);
    unlink(p);
    p = write_file("num.partitions\n");
    bk_config_init(&c);
    ck_assert_int_eq(bk_config_load(&c, p, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "num.partitions"));
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
    ck_assert_int_eq(bk_config_set(&c, "zookeeper.connect", "127.0.0.1:", err, sizeof err), 0);
    ck_assert_int_eq(bk_config_finish(&c, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "zookeeper.connect"));
    bk_config_free(&c);
}
END_TEST

/* zookeeper.connect: Kafka's form, and what an operator's typo looks like. */
START_TEST(test_zk_connect_form)
{
    char err[256];
    const char *good[] = { "127.0.0.1:2181", "a:1,b:2,c-3.example:65535",
                           "zk:2181/sluice", "zk:2181/a/b", "zk:2181/" };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        ck_assert_msg(bk_zk_connect_check(good[i], err, sizeof err) == 0, "%s: %s", good[i], err);
    const char *bad[] = { "", "zk", "zk:", ":2181", "zk:0", "zk:65536", "zk:2181,",
                          "zk:21x1", "zk:2181/a/", "zk:2181//a", "/chroot", "zk:2181/a b",
                          "z k:2181", "zk:1234567" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        ck_assert_msg(bk_zk_connect_check(bad[i], err, sizeof err) == -1, "%s passed", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, "zookeeper.connect"));
    }
    bk_config c;
    bk_config_init(&c);
    ck_assert_int_eq(bk_config_set(&c, "zookeeper.connect", "127.0.0.1:2181/s", err, sizeof err), 0);
    ck_assert_int_eq(bk_config_set(&c, "zookeeper.session.timeout.ms", "6000", err, sizeof err), 0);
    ck_assert_int_eq(bk_config_finish(&c, err, sizeof err), 0);
    ck_assert_int_eq(c.zookeeper_connection_timeout_ms, 6000);
    ck_assert_int_eq(bk_config_set(&c, "zookeeper.session.timeout.ms", "5", err, sizeof err), -1);
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

/* A value for k other than its default, in the text bk_config_render
 * gives back for it. */
static const char *sample_value(const bk_config_key *k, char *buf, size_t cap)
{
    switch (k->type) {
    case BK_CT_INT:
    case BK_CT_LONG:
        snprintf(buf, cap, "%lld", (long long)(k->min + 1 <= k->max ? k->min + 1 : k->min));
        if (k->dflt && !strcmp(buf, k->dflt))
            snprintf(buf, cap, "%lld", (long long)k->min);
        return buf;
    case BK_CT_BOOL:
        return k->dflt && !strcmp(k->dflt, "true") ? "false" : "true";
    case BK_CT_DOUBLE:
        return "12345";
    case BK_CT_STRING:
        return "sample-value";
    case BK_CT_LISTENERS:
    case BK_CT_ADVERTISED:
        return "PLAINTEXT://10.1.2.3:1234";
    case BK_CT_UNIT:
        return "7";
    }
    return NULL;
}

START_TEST(test_every_table_key_parses_into_what_describe_renders)
{
    size_t n;
    const bk_config_key *keys = bk_config_keys(&n);
    ck_assert_uint_ge(n, 40);
    for (size_t i = 0; i < n; i++) {
        const bk_config_key *k = &keys[i];
        ck_assert_ptr_eq(bk_config_key_find(k->name), k);
        ck_assert_msg(k->doc && k->doc[0], "%s has no documentation", k->name);
        ck_assert_msg(!md_config_def_by_broker_key(k->name),
                      "%s is in both tables", k->name);
        bk_config c;
        bk_config_init(&c);
        char err[512] = "", want[64], got[4200];
        /* the default, as bk_config_init applied it, reads back as given */
        if (k->dflt && k->type != BK_CT_DOUBLE) {
            const char *v = bk_config_render(&c, k, got, sizeof got);
            ck_assert_msg(v && !strcmp(v, k->dflt), "%s renders %s, default %s",
                          k->name, v ? v : "(null)", k->dflt);
        }
        const char *sample = sample_value(k, want, sizeof want);
        ck_assert_msg(bk_config_set(&c, k->name, sample, err, sizeof err) == 0,
                      "%s=%s: %s", k->name, sample, err);
        const char *v = bk_config_render(&c, k, got, sizeof got);
        ck_assert_msg(v && !strcmp(v, sample), "%s=%s renders as %s", k->name, sample,
                      v ? v : "(null)");
        if (k->type == BK_CT_UNIT) {
            char ms[32];
            snprintf(ms, sizeof ms, "%lld", (long long)(7 * k->mult));
            ck_assert_str_eq(value_of(&c, k->topic_key), ms);
        }
        bk_config_free(&c);
    }
}
END_TEST

START_TEST(test_defaults_are_the_tables)
{
    bk_config c;
    bk_config_init(&c);
    ck_assert_int_eq(c.broker_id, 0);
    ck_assert_str_eq(c.listen_host, "127.0.0.1");
    ck_assert_int_eq(c.listen_port, 9092);
    ck_assert_str_eq(c.log_dirs, "./data");
    ck_assert_int_eq(c.connection_max_queued_bytes, 64 << 20);
    ck_assert_int_eq(c.default_replication_factor, 1);
    ck_assert(c.log_cleaner_io_max_bytes_per_second > 1e308);
    ck_assert_int_eq(c.group_initial_rebalance_delay_ms, 3000);
    ck_assert_int_eq(c.offsets_commit_linger_ms, 5);
    /* unit keys' defaults are metadata/'s: nothing looks set by the file */
    ck_assert_uint_eq(c.ntopic_defaults, 0);
    bk_config_free(&c);
}
END_TEST

START_TEST(test_leadership_keys_have_kafkas_defaults_and_ranges)
{
    bk_config c;
    bk_config_init(&c);
    ck_assert(c.controlled_shutdown_enable);
    ck_assert_int_eq(c.controlled_shutdown_max_retries, 3);
    ck_assert_int_eq(c.controlled_shutdown_retry_backoff_ms, 5000);
    ck_assert(c.auto_leader_rebalance_enable);
    ck_assert_int_eq(c.leader_imbalance_check_interval_seconds, 300);
    ck_assert_int_eq(c.leader_imbalance_per_broker_percentage, 10);
    char err[512];
    ck_assert_int_eq(bk_config_set(&c, "leader.imbalance.per.broker.percentage", "101", err,
                                   sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "leader.imbalance.per.broker.percentage"));
    ck_assert_int_eq(bk_config_set(&c, "controlled.shutdown.max.retries", "0", err,
                                   sizeof err), -1);
    ck_assert_int_eq(bk_config_set(&c, "controlled.shutdown.enable", "false", err, sizeof err),
                     0);
    ck_assert(!c.controlled_shutdown_enable);
    bk_config_free(&c);
}
END_TEST

START_TEST(test_only_secrets_are_sensitive_and_topic_keys_are_accepted)
{
    size_t n;
    const bk_config_key *keys = bk_config_keys(&n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(keys[i].sensitive == (!strcmp(keys[i].name, "admin.token") ||
                                            !strcmp(keys[i].name, "ssl.keystore.key") ||
                                            !strcmp(keys[i].name, "ssl.key.password") ||
                                            !strcmp(keys[i].name, "password.encoder.secret") ||
                                            !strcmp(keys[i].name,
                                                    "password.encoder.old.secret") ||
                                            !strcmp(keys[i].name, "sasl.jaas.config")),
                      "%s", keys[i].name);
    size_t nd;
    const md_config_def *defs = md_config_defs(&nd);
    for (size_t i = 0; i < nd; i++) {
        if (!defs[i].broker_key)
            continue;
        bk_config c;
        bk_config_init(&c);
        char err[512] = "";
        ck_assert_msg(bk_config_set(&c, defs[i].broker_key, defs[i].default_value, err,
                                    sizeof err) == 0, "%s: %s", defs[i].broker_key, err);
        ck_assert_str_eq(value_of(&c, defs[i].name), defs[i].default_value);
        bk_config_free(&c);
    }
}
END_TEST

START_TEST(test_unit_precedence_is_per_config)
{
    /* The finest-unit rank once lived in a file-static array: a second
     * config saw the first one's log.retention.ms and ignored its hours. */
    bk_config a, b;
    bk_config_init(&a);
    bk_config_init(&b);
    char err[512];
    ck_assert_int_eq(bk_config_set(&a, "log.retention.ms", "5000", err, sizeof err), 0);
    ck_assert_int_eq(bk_config_set(&b, "log.retention.hours", "1", err, sizeof err), 0);
    ck_assert_str_eq(value_of(&a, "retention.ms"), "5000");
    ck_assert_str_eq(value_of(&b, "retention.ms"), "3600000");
    ck_assert_int_eq(bk_config_set(&b, "log.retention.minutes", "2", err, sizeof err), 0);
    ck_assert_int_eq(bk_config_set(&b, "log.retention.hours", "5", err, sizeof err), 0);
    ck_assert_str_eq(value_of(&b, "retention.ms"), "120000");
    ck_assert_str_eq(b.log_retention_hours, "5");        /* described as written */
    bk_config_free(&a);
    bk_config_free(&b);
}
END_TEST

static int set_all(bk_config *c, const char *const *kv, char *err, size_t errlen)
{
    for (; kv[0]; kv += 2)
        if (bk_config_set(c, kv[0], kv[1], err, errlen))
            return -1;
    return bk_config_finish(c, err, errlen);
}

START_TEST(test_named_listeners_resolve_through_the_protocol_map)
{
    bk_config c;
    bk_config_init(&c);
    char err[512] = "";
    const char *kv[] = {
        "advertised.listeners", "EXTERNAL://broker1.example:9093",   /* before listeners */
        "listeners", "INTERNAL://0.0.0.0:9092,EXTERNAL://:9093,PLAINTEXT://127.0.0.1:9094",
        "listener.security.protocol.map", "INTERNAL:SSL,EXTERNAL:SASL_SSL",
        "inter.broker.listener.name", "internal",
        "ssl.keystore.location", "/nonexistent.pem", NULL };
    ck_assert_msg(set_all(&c, kv, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(c.nlisteners, 3);
    ck_assert_str_eq(c.listeners[0].name, "INTERNAL");
    ck_assert_int_eq(c.listeners[0].proto, BK_SEC_SSL);
    ck_assert_str_eq(c.listeners[0].adv_host, "127.0.0.1");   /* all addresses: loopback */
    ck_assert_int_eq(c.listeners[1].proto, BK_SEC_SASL_SSL);
    ck_assert_str_eq(c.listeners[1].adv_host, "broker1.example");
    ck_assert_int_eq(c.listeners[2].proto, BK_SEC_PLAINTEXT);
    ck_assert_int_eq(c.inter_broker_listener, 0);
    /* the first listener is what listen_* name */
    ck_assert_int_eq(c.listen_port, 9092);
    ck_assert_int_eq(c.listen_proto, BK_SEC_SSL);
    char buf[512];
    bk_config_endpoints(&c, buf, sizeof buf);
    ck_assert_str_eq(buf, "INTERNAL://127.0.0.1:9092,EXTERNAL://broker1.example:9093,"
                          "PLAINTEXT://127.0.0.1:9094");
    bk_config_protocol_map(&c, buf, sizeof buf);
    ck_assert_str_eq(buf, "INTERNAL:SSL,EXTERNAL:SASL_SSL,PLAINTEXT:PLAINTEXT");
    bk_config_free(&c);

    bk_config_init(&c);                 /* security.inter.broker.protocol picks by name */
    const char *kv2[] = { "listeners", "PLAINTEXT://:1,SSL://:2",
                          "security.inter.broker.protocol", "SSL",
                          "ssl.keystore.location", "/x.pem", NULL };
    ck_assert_msg(set_all(&c, kv2, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(c.inter_broker_listener, 1);
    bk_config_free(&c);
}
END_TEST

START_TEST(test_listener_mistakes_are_named)
{
    struct { const char *kv[9]; const char *says; } cases[] = {
        { { "listeners", "INTERNAL://:1", NULL }, "listener INTERNAL has no security protocol" },
        { { "listeners", "PLAINTEXT://:1,plaintext://:2", NULL }, "distinct names" },
        { { "listeners", "SSL://:1", NULL }, "ssl.keystore.location" },
        { { "advertised.listeners", "SSL://h:1", NULL }, "SSL is not a listener" },
        { { "inter.broker.listener.name", "X", NULL }, "inter-broker listener X" },
        { { "inter.broker.listener.name", "PLAINTEXT", "security.inter.broker.protocol",
            "PLAINTEXT", NULL }, "cannot both be set" },
        { { "ssl.client.auth", "sometimes", NULL }, "ssl.client.auth" },
        { { "ssl.enabled.protocols", "TLSv1.1", NULL }, "ssl.enabled.protocols" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bk_config c;
        bk_config_init(&c);
        char err[512] = "";
        ck_assert_int_eq(set_all(&c, cases[i].kv, err, sizeof err), -1);
        ck_assert_msg(strstr(err, cases[i].says), "case %zu: %s", i, err);
        bk_config_free(&c);
    }
}
END_TEST

#define SCRAM_LM "org.apache.kafka.common.security.scram.ScramLoginModule"
#define PLAIN_LM "org.apache.kafka.common.security.plain.PlainLoginModule"

START_TEST(test_inter_broker_sasl_login_from_the_jaas_line)
{
    bk_config c;
    bk_config_init(&c);
    char err[512] = "";
    /* The listener's own line wins over sasl.jaas.config; quotes, escapes
     * and spaces inside values are read as the JVM's JAAS parser does. */
    const char *kv[] = {
        "zookeeper.connect", "zk:2181",
        "listeners", "PLAINTEXT://:1,Internal://:2",
        "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name", "INTERNAL",
        "sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512",
        "sasl.jaas.config", PLAIN_LM " required username=\"other\" password=\"x\";",
        "listener.name.internal.scram-sha-512.sasl.jaas.config",
        "  " SCRAM_LM "  required\n username=\"ad min\"  password=\"p\\\"w;=\\\\d\" ;  ", NULL };
    ck_assert_msg(set_all(&c, kv, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(c.ib_sasl_user, "ad min");
    ck_assert_str_eq(c.ib_sasl_password, "p\"w;=\\d");
    bk_config_free(&c);

    bk_config_init(&c);                 /* defaults: PLAIN from sasl.jaas.config */
    const char *kv2[] = { "listeners", "SASL_PLAINTEXT://:1", "zookeeper.connect", "zk:2181",
                          "sasl.jaas.config", PLAIN_LM " required username=admin password=s3;",
                          NULL };
    ck_assert_msg(set_all(&c, kv2, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(c.sasl_mechanism_inter_broker_protocol, "PLAIN");
    ck_assert_str_eq(c.ib_sasl_user, "admin");
    ck_assert_str_eq(c.ib_sasl_password, "s3");
    bk_config_free(&c);

    /* Not needed: a SASL listener that is not the inter-broker one, or
     * standalone (no replica fetchers), even with a SASL first listener. */
    const char *kv3[] = { "listeners", "PLAINTEXT://:1,SASL_PLAINTEXT://:2",
                          "zookeeper.connect", "zk:2181", NULL };
    const char *kv4[] = { "listeners", "SASL_PLAINTEXT://:1", NULL };
    const char *const *ok[] = { kv3, kv4 };
    for (size_t i = 0; i < 2; i++) {
        bk_config_init(&c);
        ck_assert_msg(set_all(&c, ok[i], err, sizeof err) == 0, "%zu: %s", i, err);
        ck_assert_str_eq(c.ib_sasl_user, "");
        bk_config_free(&c);
    }
}
END_TEST

START_TEST(test_listener_mechanisms_override_the_global_list)
{
    bk_config c;
    bk_config_init(&c);
    char err[512] = "";
    const char *kv[] = {
        "zookeeper.connect", "zk:2181",
        "listeners", "Internal://:1,SASL_PLAINTEXT://:2",
        "listener.security.protocol.map", "INTERNAL:SASL_PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name", "INTERNAL",
        "sasl.enabled.mechanisms", "SCRAM-SHA-256",
        "listener.name.internal.sasl.enabled.mechanisms", "PLAIN",
        "sasl.jaas.config", PLAIN_LM " required username=admin password=s3;", NULL };
    ck_assert_msg(set_all(&c, kv, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(bk_config_sasl_mechanisms(&c, "INTERNAL"), "PLAIN");
    ck_assert_str_eq(bk_config_sasl_mechanisms(&c, "SASL_PLAINTEXT"), "SCRAM-SHA-256");
    ck_assert_str_eq(bk_config_sasl_mechanisms(&c, NULL), "SCRAM-SHA-256");
    ck_assert_int_eq(bk_config_set(&c, "listener.name.internal.sasl.enabled.mechanisms",
                                   "SCRAM-SHA-512", err, sizeof err), 0);
    ck_assert_str_eq(bk_config_sasl_mechanisms(&c, "INTERNAL"), "SCRAM-SHA-512");
    ck_assert_int_eq(c.nlmechs, 1);
    bk_config_free(&c);
}
END_TEST

START_TEST(test_inter_broker_sasl_mistakes_are_named)
{
    struct { const char *kv[7]; const char *says; } cases[] = {
        { { "listeners", "SASL_PLAINTEXT://:1", NULL },
          "listener.name.sasl_plaintext.plain.sasl.jaas.config" },
        { { "listeners", "SASL_SSL://:1", "ssl.keystore.location", "/x.pem", NULL },
          "is SASL_SSL: set the broker's own credentials" },
        { { "listeners", "SASL_PLAINTEXT://:1", "sasl.mechanism.inter.broker.protocol",
            "GSSAPI", NULL }, "GSSAPI is not supported" },
        { { "listeners", "SASL_PLAINTEXT://:1", "sasl.enabled.mechanisms", "SCRAM-SHA-256",
            NULL }, "must be included in sasl.enabled.mechanisms" },
        { { "listeners", "SASL_PLAINTEXT://:1", "sasl.jaas.config",
            SCRAM_LM " required username=\"a\" password=\"b\";", NULL },
          "does not do PLAIN" },
        { { "listeners", "SASL_PLAINTEXT://:1", "sasl.jaas.config",
            PLAIN_LM " required username=\"a\" password=\"b\"", NULL }, "ending with ';'" },
        { { "listeners", "SASL_PLAINTEXT://:1", "sasl.jaas.config",
            PLAIN_LM " required username=\"a;", NULL }, "no closing quote" },
        { { "listeners", "SASL_PLAINTEXT://:1", "sasl.jaas.config",
            PLAIN_LM " username=\"a\" password=\"b\";", NULL }, "the flag after" },
        { { "listeners", "SASL_PLAINTEXT://:1", "sasl.jaas.config",
            PLAIN_LM " required username=\"a\";", NULL }, "needs username" },
        { { "listeners", "SASL_PLAINTEXT://:1", "sasl.jaas.config",
            PLAIN_LM " required username \"a\";", NULL }, "option username has no value" },
        { { "listener.name.x.sasl.jaas.config", "y", NULL },
          "listener.name.<listener>.<mechanism>.sasl.jaas.config" },
        /* The inter-broker listener's own list is the one that counts. */
        { { "listeners", "SASL_PLAINTEXT://:1", "listener.name.sasl_plaintext.sasl.enabled."
            "mechanisms", "SCRAM-SHA-256", NULL },
          "must be included in listener.name.sasl_plaintext.sasl.enabled.mechanisms "
          "when SASL is used for inter-broker communication (PLAIN is not in SCRAM-SHA-256)" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bk_config c;
        bk_config_init(&c);
        char err[512] = "";
        ck_assert_int_eq(bk_config_set(&c, "zookeeper.connect", "zk:2181", err, sizeof err), 0);
        ck_assert_int_eq(set_all(&c, cases[i].kv, err, sizeof err), -1);
        ck_assert_msg(strstr(err, cases[i].says), "case %zu: %s", i, err);
        bk_config_free(&c);
    }
    /* A password (or user name) longer than the broker keeps is refused,
     * not cut short (the login would fail with a password nobody set). */
    for (int user = 0; user < 2; user++) {
        char longv[301], line[700], err[512] = "";
        memset(longv, 'p', 300);
        longv[300] = 0;
        snprintf(line, sizeof line, PLAIN_LM " required username=\"%s\" password=\"%s\";",
                 user ? longv : "a", user ? "b" : longv);
        const char *kv[] = { "zookeeper.connect", "zk:2181", "listeners", "SASL_PLAINTEXT://:1",
                             "sasl.jaas.config", line, NULL };
        bk_config c;
        bk_config_init(&c);
        ck_assert_int_eq(set_all(&c, kv, err, sizeof err), -1);
        ck_assert_msg(strstr(err, user ? "username is too long" : "password is too long"),
                      "%s", err);
        bk_config_free(&c);
    }
}
END_TEST

/* Kafka's PlainServerCallbackHandler users: the user_<name> options of the
 * listener's PlainLoginModule line, its own key before sasl.jaas.config;
 * a ScramLoginModule's options are no PLAIN users. */
START_TEST(test_plain_users_come_from_the_listeners_plain_line)
{
    bk_config c;
    bk_config_init(&c);
    char err[512] = "";
    const char *kv[] = {
        "listeners", "SASL_PLAINTEXT://:1,Other://:2,Third://:3",
        "listener.security.protocol.map",
        "SASL_PLAINTEXT:SASL_PLAINTEXT,OTHER:SASL_PLAINTEXT,THIRD:SASL_SSL",
        "ssl.keystore.location", "/x.pem",
        "sasl.jaas.config", PLAIN_LM " required username=b password=s user_b=s;",
        "listener.name.other.plain.sasl.jaas.config",
        PLAIN_LM " required user_alice=\"alice-secret\" user_b\u00f6b=\"p w;\" "
        "user_x@example.com=\"1\";",
        "listener.name.third.plain.sasl.jaas.config", SCRAM_LM " required user_bob=x;", NULL };
    ck_assert_msg(set_all(&c, kv, err, sizeof err) == 0, "%s", err);
    const bk_plain_users *u = bk_config_plain_users(&c, "OTHER");
    ck_assert_ptr_nonnull(u);
    ck_assert_int_eq(u->n, 3);
    ck_assert_str_eq(u->v[0].name, "alice");
    ck_assert_str_eq(u->v[0].password, "alice-secret");
    ck_assert_str_eq(u->v[1].name, "b\u00f6b");
    ck_assert_str_eq(u->v[1].password, "p w;");
    ck_assert_str_eq(u->v[2].name, "x@example.com");
    u = bk_config_plain_users(&c, "sasl_plaintext");     /* sasl.jaas.config's */
    ck_assert_int_eq(u->n, 1);
    ck_assert_str_eq(u->v[0].name, "b");
    ck_assert_int_eq(bk_config_plain_users(&c, "THIRD")->n, 0);
    ck_assert_ptr_null(bk_config_plain_users(&c, "NONE"));
    bk_config_free(&c);
    ck_assert_int_eq(c.plain_users[1].n, 0);
}
END_TEST

START_TEST(test_plain_user_mistakes_are_named)
{
    char longv[301], longn[400], longp[400];
    memset(longv, 'n', 300);
    longv[300] = 0;
    snprintf(longn, sizeof longn, PLAIN_LM " required user_%s=x;", longv);
    snprintf(longp, sizeof longp, PLAIN_LM " required user_a=\"%s\";", longv);
    struct { const char *line, *says; } cases[] = {
        { PLAIN_LM " required user_=x;", "option user_ names no user" },
        { PLAIN_LM " required user_a=\"\";", "option user_a has an empty password" },
        { PLAIN_LM " required user_a=x user_a=y;", "option user_a is given twice" },
        { PLAIN_LM " required user_a=x user_b;", "option user_b has no value" },
        { PLAIN_LM " required user_a==secret;", "expected a name or value at '='" },
        { longn, "the user name is too long (at most 255 bytes)" },
        { longp, "option user_a: the password is too long (at most 255 bytes)" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *kv[] = { "listeners", "SASL_PLAINTEXT://:1",
                             "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                             cases[i].line, NULL };
        bk_config c;
        bk_config_init(&c);
        char err[512] = "";
        ck_assert_int_eq(set_all(&c, kv, err, sizeof err), -1);
        ck_assert_msg(strstr(err, "Invalid value for configuration "
                              "listener.name.sasl_plaintext.plain.sasl.jaas.config: "),
                      "case %zu: %s", i, err);
        ck_assert_msg(strstr(err, cases[i].says), "case %zu: %s", i, err);
        ck_assert_msg(!strstr(err, "secret") && !strstr(err, "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"),
                      "case %zu quotes a value: %s", i, err);
        bk_config_free(&c);
    }
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_loads_kafka_keys, test_properties_separators, test_finest_retention_unit_wins,
        test_unknown_key_is_named,
        test_invalid_values_are_named, test_zk_connect_form, test_offsets_commit_linger_is_bounded,
        test_every_table_key_parses_into_what_describe_renders, test_defaults_are_the_tables,
        test_only_secrets_are_sensitive_and_topic_keys_are_accepted,
        test_unit_precedence_is_per_config, test_leadership_keys_have_kafkas_defaults_and_ranges,
        test_named_listeners_resolve_through_the_protocol_map,
        test_listener_mistakes_are_named, test_inter_broker_sasl_login_from_the_jaas_line,
        test_inter_broker_sasl_mistakes_are_named,
        test_listener_mechanisms_override_the_global_list,
        test_plain_users_come_from_the_listeners_plain_line, test_plain_user_mistakes_are_named,
    };
    return unit_run("daemon config", "config", tests, sizeof tests / sizeof *tests, NULL, NULL, 0);
}
