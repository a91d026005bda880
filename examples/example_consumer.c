/*
 * examples/example_consumer.c — the smallest useful libsluice group consumer.
 *
 *   cc example_consumer.c $(pkg-config --cflags --libs libsluice) -o consumer
 *   ./consumer localhost:9092 my-group my-topic [max-messages]
 *
 * Joins the group, prints every message it is assigned, commits offsets
 * automatically (enable.auto.commit), and leaves the group on exit.
 */
#include <sluice.h>
#include <stdio.h>
#include <stdlib.h>

static void on_rebalance(sl_consumer *c, int event, const sl_topic_partition *parts,
                         int count, void *opaque)
{
    (void)c; (void)opaque;
    for (int i = 0; i < count; i++)
        fprintf(stderr, "%s %s [%d]\n", event == SL_REBALANCE_ASSIGN ? "assigned" : "revoked",
                parts[i].topic, parts[i].partition);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s BROKERS GROUP TOPIC [MAX]\n", argv[0]);
        return 2;
    }
    long max = argc > 4 ? atol(argv[4]) : -1;
    char err[512];
    sl_conf *conf = sl_conf_new();
    if (sl_conf_set(conf, "bootstrap.servers", argv[1], err, sizeof err) ||
        sl_conf_set(conf, "group.id", argv[2], err, sizeof err) ||
        sl_conf_set(conf, "auto.offset.reset", "earliest", err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    sl_conf_set_rebalance_cb(conf, on_rebalance);
    sl_consumer *c = sl_consumer_new(conf, err, sizeof err);
    sl_conf_destroy(conf);
    if (!c) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const char *topics[] = { argv[3] };
    sl_consumer_subscribe(c, topics, 1);
    for (long n = 0; max < 0 || n < max;) {
        sl_message m;
        if (sl_consumer_poll(c, 1000, &m) != 1)
            continue;
        if (m.err) {
            fprintf(stderr, "%s\n", m.errstr);
            continue;
        }
        printf("%s [%d] @%lld: %.*s\n", m.topic, m.partition, (long long)m.offset,
               (int)m.value_len, m.value ? (const char *)m.value : "");
        n++;
    }
    sl_consumer_close(c);
    sl_consumer_destroy(c);
    return 0;
}
