/*
 * sluice-consume — print a topic's messages, built only on sluice.h.
 *
 * Without -g it assigns every partition (or -p) from -o; with -g it
 * subscribes in that group.  Plain output is the value (or key SEP value
 * with -K), one per line; -J prints JSON lines.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/sluice.h"
#define TOOL_NAME "sluice-consume"
#include "clients/tools/tool.h"

static const char usage[] =
"NAME\n"
"    sluice-consume - print messages of Kafka/Sluice topics to stdout\n"
"\n"
"SYNOPSIS\n"
"    sluice-consume -b BROKERS -t TOPIC [-t TOPIC..] [options]\n"
"\n"
"OPTIONS\n"
"    -b, --brokers HOST:PORT[,..]  bootstrap.servers (required)\n"
"    -t, --topic TOPIC             topic to read (repeatable with -g)\n"
"    -p, --partition N             only this partition (without -g; repeatable)\n"
"    -o, --offset WHERE            beginning, end, stored, an offset N, -N (N before\n"
"                                  the end), or @MS (first message at or after the\n"
"                                  timestamp MS); default beginning (stored with -g)\n"
"    -g, --group GROUP             consume in a consumer group (subscribe)\n"
"    -c, --count N                 exit after N messages\n"
"    -e, --exit-at-end             exit when every partition reached its end\n"
"    -J, --json                    JSON lines: topic, partition, offset, timestamp,\n"
"                                  key, value, headers\n"
"    -K, --key-delimiter SEP       print KEY SEP VALUE\n"
"    -X, --property KEY=VALUE      any configuration property (repeatable)\n"
"    -u, --line-buffered           flush stdout after every message\n"
"    -q, --quiet                   no summary on stderr\n"
"    -h, --help                    this text\n"
"\n"
"EXIT STATUS\n"
"    0 success, 1 error, 2 usage or configuration error\n";

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s; stop = 1; }

static void json_str(const void *p, int32_t len, int null)
{
    if (null) {
        fputs("null", stdout);
        return;
    }
    const unsigned char *s = p;
    putchar('"');
    for (int32_t i = 0; i < len; i++) {
        unsigned char ch = s[i];
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch == '\n')
            fputs("\\n", stdout);
        else if (ch == '\t')
            fputs("\\t", stdout);
        else if (ch == '\r')
            fputs("\\r", stdout);
        else if (ch < 0x20 || ch == 0x7f)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static bool picked(const int32_t *only, int n, int32_t p)
{
    for (int k = 0; k < n; k++)
        if (only[k] == p)
            return true;
    return false;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "brokers", 1, 0, 'b' }, { "topic", 1, 0, 't' }, { "partition", 1, 0, 'p' },
        { "offset", 1, 0, 'o' }, { "group", 1, 0, 'g' }, { "count", 1, 0, 'c' },
        { "exit-at-end", 0, 0, 'e' }, { "json", 0, 0, 'J' },
        { "key-delimiter", 1, 0, 'K' }, { "property", 1, 0, 'X' }, { "quiet", 0, 0, 'q' }, { "line-buffered", 0, 0, 'u' },
        { "help", 0, 0, 'h' }, { 0, 0, 0, 0 },
    };
    sl_conf *conf = sl_conf_new();
    const char *topics[64], *offset = NULL, *group = NULL, *delim = NULL;
    int nt = 0, json = 0, at_end = 0, quiet = 0, c;
    int32_t only[64];                /* -p: the partitions picked, none = all */
    int nonly = 0;
    long count = -1;
    while ((c = getopt_long(argc, argv, "b:t:p:o:g:c:eJK:X:quh", opts, NULL)) != -1) {
        switch (c) {
        case 'b': tool_set(conf, "bootstrap.servers", optarg); break;
        case 't':
            if (nt < 64)
                topics[nt++] = optarg;
            break;
        case 'p': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end || v < 0 || v > INT32_MAX || nonly == 64) {
                fprintf(stderr, "sluice-consume: -p %s: a partition number (at most 64 of them) "
                        "is expected\n", optarg);
                sl_conf_destroy(conf);
                return 2;
            }
            only[nonly++] = (int32_t)v;
            break;
        }
        case 'o': offset = optarg; break;
        case 'g': group = optarg; tool_set(conf, "group.id", optarg); break;
        case 'c': count = atol(optarg); break;
        case 'e': at_end = 1; tool_set(conf, "enable.partition.eof", "true"); break;
        case 'J': json = 1; break;
        case 'K': delim = optarg; break;
        case 'X':
            if (tool_set_property(conf, optarg)) {
                sl_conf_destroy(conf);
                return 2;
            }
            break;
        case 'q': quiet = 1; break;
        case 'u': setvbuf(stdout, NULL, _IOLBF, 0); break;
        case 'h': fputs(usage, stdout); sl_conf_destroy(conf); return 0;
        default: fputs(usage, stderr); sl_conf_destroy(conf); return 2;
        }
    }
    if (nt == 0 || (!group && nt != 1)) {
        fputs("sluice-consume: one -t TOPIC (several with -g) is required\n", stderr);
        sl_conf_destroy(conf);
        return 2;
    }
    if (group && offset && (!strcmp(offset, "beginning") || !strcmp(offset, "end")))
        tool_set(conf, "auto.offset.reset", !strcmp(offset, "beginning") ? "earliest" : "latest");
    else if (group)
        tool_set(conf, "auto.offset.reset", "earliest");
    char err[512];
    sl_consumer *cons = sl_consumer_new(conf, err, sizeof err);
    sl_conf_destroy(conf);
    if (!cons) {
        fprintf(stderr, "sluice-consume: %s\n", err);
        return 2;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    int nparts = 0;
    if (group) {
        int rc = sl_consumer_subscribe(cons, topics, nt);
        if (rc) {
            fprintf(stderr, "sluice-consume: subscribe: %s\n", sl_err_name(rc));
            return 1;
        }
    } else {
        int n = sl_consumer_partition_count(cons, topics[0], 10000);
        if (n < 0) {
            fprintf(stderr, "sluice-consume: %s: %s\n", topics[0], sl_err_name(n));
            sl_consumer_destroy(cons);
            return 1;
        }
        for (int k = 0; k < nonly; k++)
            if (only[k] >= n) {
                fprintf(stderr, "sluice-consume: %s has no partition %d (it has %d)\n",
                        topics[0], only[k], n);
                sl_consumer_destroy(cons);
                return 1;
            }
        sl_topic_partition *tp = calloc((size_t)n, sizeof *tp);
        for (int i = 0; i < n; i++) {
            if (nonly && !picked(only, nonly, i))
                continue;
            int64_t off = SL_OFFSET_BEGINNING;
            if (!offset || !strcmp(offset, "beginning"))
                off = SL_OFFSET_BEGINNING;
            else if (!strcmp(offset, "end"))
                off = SL_OFFSET_END;
            else if (!strcmp(offset, "stored"))
                off = SL_OFFSET_STORED;
            else if (offset[0] == '@') {
                int rc = sl_consumer_offset_for_time(cons, topics[0], i, atoll(offset + 1),
                                                     &off, 10000);
                if (rc) {
                    fprintf(stderr, "sluice-consume: offset for time: %s\n", sl_err_name(rc));
                    return 1;
                }
                if (off < 0)
                    off = SL_OFFSET_END;
            } else if (offset[0] == '-') {
                int64_t lo, hi;
                if (sl_consumer_watermarks(cons, topics[0], i, &lo, &hi, 10000) == 0) {
                    off = hi - atoll(offset + 1);
                    if (off < lo)
                        off = lo;
                }
            } else {
                off = atoll(offset);
            }
            tp[nparts++] = (sl_topic_partition){ topics[0], i, off, 0 };
        }
        int rc = sl_consumer_assign(cons, tp, nparts);
        free(tp);
        if (rc) {
            fprintf(stderr, "sluice-consume: assign: %s\n", sl_err_name(rc));
            return 1;
        }
    }
    long got = 0;
    int eofs = 0, status = 0;
    while (!stop && (count < 0 || got < count)) {
        sl_message m;
        int rc = sl_consumer_poll(cons, 500, &m);
        if (rc < 0) {
            fprintf(stderr, "sluice-consume: poll: %s\n", sl_err_name(rc));
            status = 1;
            break;
        }
        if (rc == 0)
            continue;
        if (m.err == SL_E_PARTITION_EOF) {
            if (at_end && !group && ++eofs >= nparts)
                break;
            if (at_end && group) {
                sl_topic_partition *a;
                int n = sl_consumer_assignment(cons, &a);
                free(a);
                if (++eofs >= n && n > 0)
                    break;
            }
            continue;
        }
        if (m.err) {
            fprintf(stderr, "sluice-consume: %s [%d]: %s\n", m.topic ? m.topic : "?",
                    m.partition, m.errstr);
            continue;
        }
        got++;
        if (json) {
            fputs("{\"topic\":", stdout);
            json_str(m.topic, (int32_t)strlen(m.topic), 0);
            printf(",\"partition\":%d,\"offset\":%lld,\"timestamp\":%lld,\"key\":",
                   m.partition, (long long)m.offset, (long long)m.timestamp);
            json_str(m.key, m.key_len, m.key == NULL);
            fputs(",\"value\":", stdout);
            json_str(m.value, m.value_len, m.value == NULL);
            fputs(",\"headers\":[", stdout);
            for (int i = 0; i < m.header_count; i++) {
                fputs(i ? ",[" : "[", stdout);
                json_str(m.headers[i].key, (int32_t)sl_header_key_len(&m.headers[i]), 0);
                putchar(',');
                json_str(m.headers[i].value, m.headers[i].value_len,
                         m.headers[i].value == NULL);
                putchar(']');
            }
            fputs("]}\n", stdout);
        } else {
            if (delim) {
                if (m.key)
                    fwrite(m.key, 1, (size_t)m.key_len, stdout);
                fputs(delim, stdout);
            }
            if (m.value)
                fwrite(m.value, 1, (size_t)m.value_len, stdout);
            putchar('\n');
        }
    }
    fflush(stdout);
    sl_consumer_close(cons);
    sl_consumer_destroy(cons);
    if (!quiet)
        fprintf(stderr, "sluice-consume: %ld message(s)\n", got);
    return status;
}
