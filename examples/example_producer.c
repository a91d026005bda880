/*
 * examples/example_producer.c — the smallest useful libsluice producer.
 *
 *   cc example_producer.c $(pkg-config --cflags --libs libsluice) -o producer
 *   ./producer localhost:9092 my-topic       # one message per stdin line
 *
 * Each line goes out asynchronously; delivery reports come back through
 * sl_poll()/sl_flush() on this thread.
 */
#include <sluice.h>
#include <stdio.h>
#include <string.h>

static void on_delivery(const sl_delivery *d, void *opaque)
{
    (void)opaque;
    if (d->err)
        fprintf(stderr, "failed: %s\n", d->errstr);
    else
        fprintf(stderr, "delivered to %s [%d] at offset %lld\n", d->topic, d->partition,
                (long long)d->offset);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s BROKERS TOPIC < lines\n", argv[0]);
        return 2;
    }
    char err[512];
    sl_conf *conf = sl_conf_new();
    if (sl_conf_set(conf, "bootstrap.servers", argv[1], err, sizeof err) ||
        sl_conf_set(conf, "compression.type", "zstd", err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    sl_conf_set_delivery_cb(conf, on_delivery);
    sl_producer *p = sl_producer_new(conf, err, sizeof err);
    sl_conf_destroy(conf);
    if (!p) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strcspn(line, "\n");
        int rc;
        while ((rc = sl_produce(p, argv[2], SL_PARTITION_ANY, NULL, 0, line, n, NULL, 0, 0,
                                NULL)) == SL_E_QUEUE_FULL)
            sl_poll(p, 100);
        if (rc)
            fprintf(stderr, "produce: %s\n", sl_err_name(rc));
        sl_poll(p, 0);
    }
    int rc = sl_flush(p, 10000);
    sl_producer_destroy(p);
    return rc ? 1 : 0;
}
