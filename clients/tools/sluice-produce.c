/*
 * sluice-produce — write stdin lines to a topic, built only on sluice.h.
 *
 * One message per line (newline stripped).  With -K SEP each line is
 * KEY SEP VALUE.  Exit status 0 when every message was acknowledged.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/sluice.h"
#define TOOL_NAME "sluice-produce"
#include "clients/tools/tool.h"

static const char usage[] =
"NAME\n"
"    sluice-produce - produce lines from stdin to a Kafka/Sluice topic\n"
"\n"
"SYNOPSIS\n"
"    sluice-produce -b BROKERS -t TOPIC [options] < lines\n"
"\n"
"OPTIONS\n"
"    -b, --brokers HOST:PORT[,..]  bootstrap.servers (required)\n"
"    -t, --topic TOPIC             topic to write to (required)\n"
"    -p, --partition N             partition (default: partitioner, murmur2 of the key)\n"
"    -K, --key-delimiter SEP       split each line at the first SEP into key and value\n"
"    -H, --header NAME=VALUE       add a header to every message (repeatable)\n"
"    -z, --compression CODEC       none, gzip, snappy, lz4 or zstd\n"
"    -a, --acks ACKS               all, 1 or 0 (acks 1/0 turn idempotence off)\n"
"    -X, --property KEY=VALUE      any configuration property (repeatable)\n"
"    -q, --quiet                   no summary on stderr\n"
"    -h, --help                    this text\n"
"\n"
"EXIT STATUS\n"
"    0 all messages delivered, 1 some failed, 2 usage or configuration error\n";

static long ok, failed;

static void dr(const sl_delivery *d, void *opaque)
{
    (void)opaque;
    if (d->err) {
        failed++;
        if (failed <= 5)
            fprintf(stderr, "sluice-produce: delivery to %s [%d] failed: %s\n",
                    d->topic, d->partition, d->errstr);
    } else {
        ok++;
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "brokers", 1, 0, 'b' }, { "topic", 1, 0, 't' }, { "partition", 1, 0, 'p' },
        { "key-delimiter", 1, 0, 'K' }, { "header", 1, 0, 'H' },
        { "compression", 1, 0, 'z' }, { "acks", 1, 0, 'a' }, { "property", 1, 0, 'X' },
        { "quiet", 0, 0, 'q' }, { "help", 0, 0, 'h' }, { 0, 0, 0, 0 },
    };
    sl_conf *conf = sl_conf_new();
    const char *topic = NULL, *delim = NULL;
    int32_t partition = SL_PARTITION_ANY;
    sl_header hdrs[64];
    int nh = 0, quiet = 0, c;
    char *acks = NULL;
    while ((c = getopt_long(argc, argv, "b:t:p:K:H:z:a:X:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'b': tool_set(conf, "bootstrap.servers", optarg); break;
        case 't': topic = optarg; break;
        case 'p': partition = atoi(optarg); break;
        case 'K': delim = optarg; break;
        case 'H': {
            char *eq = strchr(optarg, '=');
            if (!eq || nh == 64) {
                fprintf(stderr, "sluice-produce: -H wants NAME=VALUE\n");
                return 2;
            }
            *eq = 0;
            hdrs[nh++] = (sl_header){ optarg, eq + 1, (int32_t)strlen(eq + 1), 0 };
            break;
        }
        case 'z': tool_set(conf, "compression.type", optarg); break;
        case 'a': acks = optarg; break;
        case 'X':
            if (tool_set_property(conf, optarg))
                return 2;
            break;
        case 'q': quiet = 1; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (acks)
        tool_set_acks(conf, acks);
    if (!topic) {
        fputs("sluice-produce: -t TOPIC is required\n", stderr);
        return 2;
    }
    sl_conf_set_delivery_cb(conf, dr);
    char err[512];
    sl_producer *p = sl_producer_new(conf, err, sizeof err);
    sl_conf_destroy(conf);
    if (!p) {
        fprintf(stderr, "sluice-produce: %s\n", err);
        return 2;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long sent = 0;
    size_t dlen = delim ? strlen(delim) : 0;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        if (len && line[len - 1] == '\n')
            line[--len] = 0;
        const char *key = NULL, *val = line;
        size_t klen = 0, vlen = (size_t)len;
        if (delim) {
            char *d = strstr(line, delim);
            if (d) {
                key = line;
                klen = (size_t)(d - line);
                val = d + dlen;
                vlen = (size_t)len - klen - dlen;
            }
        }
        int rc;
        while ((rc = sl_produce(p, topic, partition, key, klen, val, vlen,
                                nh ? hdrs : NULL, nh, 0, NULL)) == SL_E_QUEUE_FULL)
            sl_poll(p, 10);
        if (rc) {
            fprintf(stderr, "sluice-produce: %s\n", sl_err_name(rc));
            failed++;
            break;
        }
        sent++;
        sl_poll(p, 0);
    }
    free(line);
    if (sl_flush(p, 60000) != 0)
        fprintf(stderr, "sluice-produce: flush timed out with %d message(s) outstanding\n",
                sl_outq_len(p));
    sl_producer_destroy(p);
    if (!quiet)
        fprintf(stderr, "sluice-produce: %ld sent, %ld delivered, %ld failed\n", sent, ok,
                failed);
    return failed || ok != sent ? 1 : 0;
}
