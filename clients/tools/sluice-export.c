/*
 * sluice-export — copy topics into Avro Object Container Files, a Hive-style
 * tree a data lake reads, exactly once (issue 32), built only on sluice.h
 * and Avro C.
 *
 * Each partition is exported by one worker thread (--parallel N threads,
 * partitions spread over them, each with its own consumer).  A completed
 * file is handed to the worker's finisher thread, which makes it durable
 * while the worker reads and writes the next files.  On start the file
 * names are the authority: the last complete file's last offset + 1 is
 * where the partition resumes, whatever the group says (a commit lost to a
 * kill is redone), and temporary leftovers are removed.  Records are read
 * read_committed.
 *
 * What always holds:
 *   X1. A file is written under a hidden temporary name; it gets its final
 *       name (a rename that never replaces, never over offsets a file
 *       holds) only after an fsync, and its directory is fsynced before the
 *       partition's next offset is committed.
 *   X2. A worker's completed files go to its finisher in a FIFO of at most
 *       EX_PENDING (K = 4) files; the finisher does X1's fsync, rename and
 *       directory fsync, in that order, and marks the file done.  The commit
 *       stays on the worker's thread (libsluice: sl_consumer_commit is for
 *       the application thread that polls): the worker commits the done
 *       files in FIFO order, so a partition's commits follow its files.
 *   X3. A finisher that fails (EIO, ENOSPC, a rename refused) reports the
 *       partition, the file and the cause and fails the run (exit 2); once
 *       the run has failed the finishers remove the files still queued and
 *       the workers their open ones (a .tmp whose rename itself failed is
 *       left to the next run's scan), which redoes them.
 *   X4. A worker waits for its finisher to be empty before it gives a
 *       partition up (a rebalance's revoke), before its final synchronous
 *       commit (--until-end, SIGTERM) and before it exits.
 *   X5. Between X4's waits the worker blocks on its finisher only for a
 *       free slot in X2's FIFO: fsyncs and renames overlap the reading and
 *       writing of the next files.  The final commit is one request for
 *       all the worker's partitions (ex_commit_final).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <avro.h>

#include "clients/sluice.h"
#include "clients/tools/export_files.h"
#include "clients/tools/export_ocf.h"
#include "clients/tools/export_registry.h"

#define TOOL "sluice-export"
#define EXIT_USAGE 1
#define EXIT_RUNTIME 2
#define EXIT_STOPPED 3      /* --until-end stopped by a signal before the end */
#define MAX_TOPICS 64
#define TIMEOUT_MS 15000
#define LOCK_WAIT_MS 120000   /* --group: for the previous owner of a partition */

static const char usage[] =
"NAME\n"
"    sluice-export - load Kafka/Sluice topics into Avro files, exactly once\n"
"\n"
"SYNOPSIS\n"
"    sluice-export --bootstrap HOST:PORT --topic TOPIC [--topic TOPIC..] --to DIR\n"
"    sluice-export --bootstrap HOST:PORT --topic-regex REGEX --to DIR\n"
"                  [options]\n"
"\n"
"    Every partition of every topic is copied into\n"
"        DIR/<topic>/partition=<p>/<topic>+<p>+<first offset>+<last offset>.avro\n"
"    (Kafka Connect's names: the offsets are in the name).  A file is written as\n"
"    .<topic>+<p>+<first>.<pid>-<random>.avro.tmp, fsynced, renamed (never over\n"
"    a file, never over offsets a file holds), its directory fsynced, then\n"
"    the partition's next offset is committed to the group.  A run resumes each\n"
"    partition after its last complete file (the files are the authority, the\n"
"    group's offset only when a partition has none) and removes *.tmp leftovers,\n"
"    so a run killed at any point and run again loses and duplicates nothing.\n"
"    One process at a time exports a partition: it holds an flock() on\n"
"    DIR/.sluice-export-locks/<topic>+<p>.lock (the pid inside).  A run that\n"
"    finds a partition locked (an earlier run still going) exits 2 naming it\n"
"    and the holder; a --group member waits (up to 120 s) for the previous\n"
"    owner to let go.\n"
"    Only committed transactional records are exported (read_committed).\n"
"\n"
"OPTIONS\n"
"    -b, --bootstrap HOST:PORT[,..]  bootstrap.servers (required)\n"
"    -t, --topic TOPIC             topic to export (repeatable)\n"
"    -R, --schema-registry URL     values in the registry's wire format (byte 0, a\n"
"                                  4-byte schema id, an Avro body) are written as\n"
"                                  native Avro records of the schema registered\n"
"                                  under the id (GET URL/schemas/ids/ID); a file\n"
"                                  holds one schema, a new id starts a new file.\n"
"                                  A value that is not framed, has an unknown id or\n"
"                                  does not decode with its schema goes into the\n"
"                                  envelope (below), in a file of its own kind: a\n"
"                                  topic that mixes them gets more, smaller files.\n"
"                                  A native record is the value only (its offsets:\n"
"                                  the file name).  URL: http://HOST:PORT[/PATH];\n"
"                                  an unreachable registry fails the run (exit 2)\n"
"    -U, --schema-registry-user USER:PASSWORD   basic auth for the registry\n"
"    -r, --topic-regex REGEX       also every topic whose whole name matches this\n"
"                                  POSIX extended regex (internal topics never),\n"
"                                  listed once at start: a topic created later\n"
"                                  is taken by the next run\n"
"    -d, --to DIR                  root of the tree (required)\n"
"    -e, --until-end               export up to each partition's end at start (its\n"
"                                  last stable offset), then exit; without it,\n"
"                                  follow new records until SIGTERM/SIGINT, which\n"
"                                  completes and commits the open files, exit 0\n"
"    -S, --stall-timeout MS        with --until-end: no record and no end from the\n"
"                                  broker for MS ms (default 60000: several\n"
"                                  request.timeout.ms) fails the run (exit 2),\n"
"                                  naming the partition and the last error\n"
"    -f, --from WHERE              where a partition with no file and no committed\n"
"                                  offset starts: beginning (default), end, or a\n"
"                                  timestamp in ms since the epoch\n"
"    -g, --group GROUP             export as a member of this consumer group: the\n"
"                                  processes (on any machines, one tree they all\n"
"                                  see) run with the same GROUP share the\n"
"                                  partitions and take over those of one that\n"
"                                  stops; each resumes after the files.  Without\n"
"                                  it this process exports every partition and\n"
"                                  commits to -X group.id, else to\n"
"                                  sluice-export-<first topic> (or -<REGEX>), as a\n"
"                                  non-member\n"
"    -P, --parallel N              worker threads (default 1), partitions spread\n"
"                                  over them (with --group: N group members)\n"
"    -c, --codec CODEC             null (default), deflate, snappy, xz or\n"
"                                  zstandard: each block compressed as the Avro\n"
"                                  specification says (Python's avro reads all\n"
"                                  but xz, Java's and Spark's all five)\n"
"    -n, --max-records N           roll a file after N records (default 100000)\n"
"    -B, --max-bytes N             roll a file after N bytes of keys, values and\n"
"                                  headers (default 134217728)\n"
"    -i, --max-interval MS         roll a file MS ms after it was opened\n"
"                                  (default 600000; continuous mode)\n"
"    -F, --format FORMAT           avro (default) or jsonl (one JSON object per\n"
"                                  line, the same fields; bytes as strings where\n"
"                                  each byte is one code point U+0000..U+00FF)\n"
"    -L, --layout LAYOUT           partition (default): DIR/<topic>/partition=<p>/;\n"
"                                  time: DIR/<topic>/dt=YYYY-MM-DD/hour=HH/ by each\n"
"                                  record's timestamp (UTC; a record of another hour\n"
"                                  than the open file's starts a new file)\n"
"    -N, --dry-run                 print what would be exported, write nothing\n"
"    -X, --property KEY=VALUE      any libsluice (librdkafka-style) client\n"
"                                  property, security included (repeatable):\n"
"                                  security.protocol PLAINTEXT, SSL, SASL_PLAINTEXT\n"
"                                  or SASL_SSL; sasl.mechanism PLAIN, SCRAM-SHA-256\n"
"                                  or SCRAM-SHA-512, sasl.username, sasl.password;\n"
"                                  ssl.ca.location, ssl.certificate.location,\n"
"                                  ssl.key.location, ssl.key.password,\n"
"                                  ssl.endpoint.identification.algorithm (https:\n"
"                                  the default, or none).  A refused login or an\n"
"                                  untrusted broker stops the run at once (exit 2)\n"
"    -q, --quiet                   no summary\n"
"    -h, --help                    this text\n"
"\n"
"RECORDS\n"
"    Each record is an Avro record io.sluice.export.KafkaRecord that keeps every\n"
"    byte:  topic: string, partition_id: int (not \"partition\": the directory\n"
"    key partition=<p> is a column of its own in Hive), offset: long, timestamp: long (ms),\n"
"    timestamp_type: int (0 create time, 1 log append time), key: [null, bytes],\n"
"    value: [null, bytes], headers: array of io.sluice.export.Header\n"
"    {key: string, value: [null, bytes]}.  A header key is written whole (a NUL\n"
"    byte inside too) with its bytes as they are (a key that is not UTF-8\n"
"    breaks Avro's string rule; some readers refuse such a file): Kafka\n"
"    clients send UTF-8 keys.  Values in the schema\n"
"    registry's wire format (magic 0, 4-byte schema id, Avro body) are kept as\n"
"    they are, unless --schema-registry writes them natively.\n"
"\n"
"GAPS\n"
"    Records removed by retention before the export reached them are reported\n"
"    on stderr (\"gap\": partition, offsets, count) and in the summary.\n"
"\n"
"EXAMPLE\n"
"    sluice-export --bootstrap 127.0.0.1:9092 --topic clicks --to /data/lake \\\n"
"        --until-end --parallel 4 --codec snappy --max-records 500000\n"
"    # hourly from cron:\n"
"    # 5 * * * *  sluice-export -b broker:9092 -t clicks -d /data/lake -e -q\n"
"    # then, in DuckDB:  SELECT count(*) FROM read_avro('/data/lake/clicks/*/*.avro');\n"
"    # a secured cluster (SCRAM over TLS):\n"
"    sluice-export -b broker:9093 -t clicks -d /data/lake -e \\\n"
"        -X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512 \\\n"
"        -X sasl.username=loader -X sasl.password=secret \\\n"
"        -X ssl.ca.location=/etc/ssl/kafka-ca.pem\n"
"\n"
"EXIT STATUS\n"
"    0 done, 1 usage or configuration error, 2 runtime error (the message names\n"
"    the partition, the file and the cause; a partition locked by another run;\n"
"    --until-end without progress for --stall-timeout), 3 --until-end stopped by\n"
"    SIGTERM/SIGINT before the end (the files written are complete)\n";

static const char envelope_schema[] =
    "{\"type\":\"record\",\"name\":\"KafkaRecord\",\"namespace\":\"io.sluice.export\","
    "\"fields\":["
    "{\"name\":\"topic\",\"type\":\"string\"},"
    "{\"name\":\"partition_id\",\"type\":\"int\"},"
    "{\"name\":\"offset\",\"type\":\"long\"},"
    "{\"name\":\"timestamp\",\"type\":\"long\"},"
    "{\"name\":\"timestamp_type\",\"type\":\"int\"},"
    "{\"name\":\"key\",\"type\":[\"null\",\"bytes\"]},"
    "{\"name\":\"value\",\"type\":[\"null\",\"bytes\"]},"
    "{\"name\":\"headers\",\"type\":{\"type\":\"array\",\"items\":"
    "{\"type\":\"record\",\"name\":\"Header\",\"fields\":["
    "{\"name\":\"key\",\"type\":\"string\"},"
    "{\"name\":\"value\",\"type\":[\"null\",\"bytes\"]}]}}}]}";


/* ---- options ----------------------------------------------------------------- */

typedef struct opts {
    const char *topics[MAX_TOPICS];
    int ntopics;
    const char *dir, *from, *group, *codec, *regex;
    const char *registry, *registry_user;   /* --schema-registry URL, USER:PASSWORD */
    int until_end, parallel, jsonl, dry_run, quiet;
    int fleet;                /* --group: partitions shared as a consumer group */
    int layout_time;          /* --layout time: dt=YYYY-MM-DD/hour=HH/ */
    int64_t max_records, max_bytes, max_interval_ms;
    int64_t stall_ms;         /* --until-end: no progress for this long fails */
    int fetch_wait_set;       /* -X fetch.max.wait.ms given */
} opts;

static opts O = {
    .from = "beginning", .codec = "null", .parallel = 1,
    .max_records = 100000, .max_bytes = 128 << 20, .max_interval_ms = 600000,
    .stall_ms = 60000,
};
static sl_conf *base_conf;

static volatile sig_atomic_t stop_signal;
static _Atomic int failed;                   /* a worker or a finisher hit a runtime error */
static void ex_on_signal(int s) { (void)s; stop_signal = 1; }

static int64_t ex_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- one partition ------------------------------------------------------------- */

typedef struct xpart {
    const char *topic;
    int32_t partition;
    char root[PATH_MAX];      /* DIR/<topic> */
    char dir[PATH_MAX + 128]; /* of the open file: partition=<p>, or dt=/hour= */
    int64_t hour;             /* --layout time: the open file's hour (ms / 3600000) */
    int64_t sid;              /* the open file's schema id, -1: the envelope */
    int64_t start;            /* first offset this run exports */
    int64_t end;              /* --until-end: stop before it; else -1 */
    int done;
    int lock_fd;              /* DIR/.sluice-export-locks/<topic>+<p>.lock, flock()ed
                                 while this process owns the partition; -1 */
    struct worker *owner;     /* the worker exporting it now, or NULL */
    /* the open file (n > 0) */
    ex_ocf *aw;               /* the Avro writer (not --format jsonl) */
    FILE *fp;
    char tmp[PATH_MAX * 3];
    int64_t first, last, n, bytes, opened_ms;
    /* totals of this run */
    int64_t files, records, rec_bytes, gap_records;
    int64_t commit_next;      /* the offset last committed (async), 0: none */
    /* for the progress line (main thread), relaxed atomics: records and
     * bytes read (files open included) and the next offset */
    int64_t prog_records, prog_bytes, prog_next;
} xpart;

typedef struct ex_buf {
    char *p;
    size_t len, cap;
} ex_buf;

/* A completed file on its way to its final name (X2). */
typedef struct ex_job {
    xpart *xp;
    FILE *fp;                 /* flushed, fsynced and closed by the finisher */
    char tmp[PATH_MAX * 3];
    char dir[PATH_MAX + 128]; /* xp->dir moves on with --layout time */
    int64_t first, last, n, bytes;
    int ok;                   /* set by the finisher: renamed, directory fsynced */
} ex_job;

#define EX_PENDING 4          /* K: files a worker may have at its finisher */

/* The worker's finisher: jobs[head..done) are finished and wait for the
 * worker to commit them, jobs[done..tail) are queued (indexes mod K). */
typedef struct ex_finisher {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t queued;    /* tail moved, or stop */
    pthread_cond_t finished;  /* done moved */
    ex_job jobs[EX_PENDING];
    unsigned head, done, tail;
    int stop, started;
} ex_finisher;

typedef struct worker {
    pthread_t th;
    ex_finisher fin;
    xpart **parts;            /* its share; with --group, every partition */
    int n;
    int assigned;             /* --group: holds an assignment (maybe empty) */
    sl_consumer *cons;
    avro_schema_t schema;
    ex_buf enc;               /* the envelope being encoded */
    ex_registry *reg;         /* --schema-registry: this worker's cache */
} worker;

#define PFAIL(xp, ...) ex_fail(xp, __VA_ARGS__)

static void ex_fail(const xpart *xp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ex_fail(const xpart *xp, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, TOOL ": error: %s [%d]: %s\n", xp->topic, xp->partition, msg);
    failed = 1;
}

/* "<topic>+<p>+<first>+<last>.avro" (or .jsonl) of this partition: its
 * last offset, else -1. */
static int64_t ex_name_last(const xpart *xp, const char *name)
{
    size_t tl = strlen(xp->topic);
    if (strncmp(name, xp->topic, tl) != 0 || name[tl] != '+')
        return -1;
    char *e;
    long p = strtol(name + tl + 1, &e, 10);
    if (*e != '+' || p != xp->partition)
        return -1;
    long long first = strtoll(e + 1, &e, 10);
    if (*e != '+')
        return -1;
    long long last = strtoll(e + 1, &e, 10);
    if ((strcmp(e, ".avro") != 0 && strcmp(e, ".jsonl") != 0) || last < first)
        return -1;
    return last;
}

/* Takes the partition's lock, DIR/.sluice-export-locks/<topic>+<p>.lock
 * (outside the topic's tree, which readers list): one process at a time
 * scans, writes and renames a partition's files, so a second run (cron
 * overlapping) or a paused group member that lost the partition cannot
 * write the same offsets.  The holder's pid is in the file.  Waits up to
 * wait_ms (0: not at all).  0, or -1 (reported). */
static int ex_lock(xpart *xp, int64_t wait_ms)
{
    if (xp->lock_fd >= 0 || O.dry_run)
        return 0;
    char path[PATH_MAX * 2], holder[32];
    snprintf(path, sizeof path, "%s/.sluice-export-locks", O.dir);
    if (ex_mkdirs(path) != 0) {
        PFAIL(xp, "creating %s: %s", path, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/.sluice-export-locks/%s+%d.lock", O.dir, xp->topic,
             xp->partition);
    int fd = ex_lock_file(path, wait_ms, &stop_signal, holder, sizeof holder);
    if (fd == EX_LOCK_HELD)
        PFAIL(xp, "exported by another process (pid %s, lock %s): not exported by this one",
              holder[0] ? holder : "unknown", path);
    else if (fd < 0)
        PFAIL(xp, "locking %s: %s", path, strerror(errno));
    if (fd < 0)
        return -1;
    xp->lock_fd = fd;
    return 0;
}

static void ex_unlock(xpart *xp)
{
    if (xp->lock_fd >= 0)
        close(xp->lock_fd);            /* releases the flock */
    xp->lock_fd = -1;
}

/* In one directory: removes this partition's *.tmp leftovers (unless dry)
 * and returns its last complete file's last offset, -1 if none, -2 on an
 * error.  Called holding the partition's lock (ex_lock): every *.tmp of the
 * partition is then a leftover of a process that no longer writes it.  Only names of this partition are touched: with --layout time the
 * directories are shared with the other partitions (and their writers). */
static int64_t ex_scan_one(xpart *xp, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return -1;
        PFAIL(xp, "%s: %s", dir, strerror(errno));
        return -2;
    }
    char tmp_prefix[PATH_MAX];
    int tpl = snprintf(tmp_prefix, sizeof tmp_prefix, ".%s+%d+", xp->topic, xp->partition);
    int64_t last = -1;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len > 4 && !strcmp(de->d_name + len - 4, ".tmp")) {
            if (strncmp(de->d_name, tmp_prefix, (size_t)tpl) != 0)
                continue;
            char path[PATH_MAX * 2];
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            if (!O.dry_run && unlink(path) != 0) {
                PFAIL(xp, "removing %s: %s", path, strerror(errno));
                last = -2;
                break;
            }
            continue;
        }
        int64_t l = ex_name_last(xp, de->d_name);
        if (l > last)
            last = l;
    }
    closedir(d);
    return last;
}

/* ex_scan_one over the partition's directory, or over every
 * dt=*\/hour=* of the topic with --layout time. */
static int64_t ex_scan_dir(xpart *xp)
{
    if (!O.layout_time)
        return ex_scan_one(xp, xp->dir);
    DIR *days = opendir(xp->root);
    if (!days)
        return errno == ENOENT ? -1 : (PFAIL(xp, "%s: %s", xp->root, strerror(errno)), -2);
    int64_t last = -1;
    struct dirent *day, *hour;
    while (last != -2 && (day = readdir(days))) {
        if (strncmp(day->d_name, "dt=", 3) != 0)
            continue;
        char ddir[PATH_MAX * 2], hdir[PATH_MAX * 3];
        snprintf(ddir, sizeof ddir, "%s/%s", xp->root, day->d_name);
        DIR *hours = opendir(ddir);
        while (hours && last != -2 && (hour = readdir(hours))) {
            if (strncmp(hour->d_name, "hour=", 5) != 0)
                continue;
            snprintf(hdir, sizeof hdir, "%s/%s", ddir, hour->d_name);
            int64_t l = ex_scan_one(xp, hdir);
            if (l == -2 || l > last)
                last = l;
        }
        if (hours)
            closedir(hours);
    }
    closedir(days);
    return last;
}

static void ex_commit_failed(const char *topic, int32_t partition, int64_t next, int err)
{
    /* The files stay the authority: the next file's commit, or the next
     * run, redoes it. */
    fprintf(stderr, TOOL ": warning: %s [%d]: commit of offset %" PRId64 ": %s\n",
            topic, partition, next, sl_err_name(err));
}

/* Async commits' results (served by sl_consumer_poll). */
static void ex_commit_cb(sl_consumer *c, int err, const sl_topic_partition *tps, int n,
                         void *opaque)
{
    (void)c; (void)opaque;
    for (int i = 0; i < n; i++)
        if (err || tps[i].err)
            ex_commit_failed(tps[i].topic, tps[i].partition, tps[i].offset,
                             err ? err : tps[i].err);
}

/* Records the partition's position in the group.  Asynchronous while
 * exporting: a coordinator that went away must not stall the files (a
 * synchronous commit waits out request.timeout.ms), and the files are the
 * authority anyway; synchronous once at the end (ex_commit_final). */
static void ex_commit(worker *w, xpart *xp, int64_t next)
{
    sl_topic_partition tp = { xp->topic, xp->partition, next, 0 };
    xp->commit_next = next;
    int rc = sl_consumer_commit(w->cons, &tp, 1, 1);
    if (rc)
        ex_commit_failed(xp->topic, xp->partition, next, rc);
}

/* One synchronous OffsetCommit for all the worker's partitions: the
 * broker answers a connection's requests in order, so each request waits
 * behind the fetch in flight (fetch.max.wait.ms when at the end), once
 * rather than once a partition.  Without --group the fetching is stopped
 * first (no fetch is sent after the one in flight). */
static void ex_commit_final(worker *w)
{
    sl_topic_partition *tps = calloc((size_t)w->n + 1, sizeof *tps);
    int n = 0;
    for (int i = 0; tps && i < w->n; i++) {
        xpart *xp = w->parts[i];
        if (xp->owner == w && xp->commit_next > 0)
            tps[n++] = (sl_topic_partition){ xp->topic, xp->partition, xp->commit_next, 0 };
    }
    if (!O.fleet)
        sl_consumer_assign(w->cons, NULL, 0);
    int rc = n ? sl_consumer_commit(w->cons, tps, n, 0) : 0;
    for (int k = 0; k < n; k++)
        if (rc || tps[k].err)
            ex_commit_failed(tps[k].topic, tps[k].partition, tps[k].offset, rc ? rc : tps[k].err);
    free(tps);
}

static void ex_gap(xpart *xp, int64_t from, int64_t to)
{
    xp->gap_records += to - from;
    fprintf(stderr, TOOL ": gap: %s [%d]: offsets %" PRId64 "..%" PRId64
            " (%" PRId64 " records) were removed by retention before the export\n",
            xp->topic, xp->partition, from, to - 1, to - from);
}

/* Errors a leader change or a restarting broker causes: tried again. */
static int ex_transient(int rc)
{
    return rc == SL_E_TIMED_OUT || rc == SL_E_TRANSPORT || rc == SL_ERR_REQUEST_TIMED_OUT ||
           rc == SL_ERR_NOT_LEADER_OR_FOLLOWER || rc == SL_ERR_LEADER_NOT_AVAILABLE ||
           rc == SL_ERR_UNKNOWN_SERVER_ERROR;
}

/* The partition's low and high (read_committed: last stable) offsets,
 * with up to 5 tries over transient errors. */
static int ex_watermarks(worker *w, xpart *xp, int64_t *lo, int64_t *hi)
{
    int rc = 0;
    for (int try = 1; try <= 5 && !stop_signal; try++) {
        rc = sl_consumer_watermarks(w->cons, xp->topic, xp->partition, lo, hi, TIMEOUT_MS);
        if (rc == 0 || !ex_transient(rc))
            return rc;
        fprintf(stderr, TOOL ": warning: %s [%d]: watermarks: %s (try %d of 5)\n",
                xp->topic, xp->partition, sl_err_name(rc), try);
        sleep(1);
    }
    return rc;
}

/* Where the partition starts and (with --until-end) ends; 0 or -1. */
static int ex_prepare(worker *w, xpart *xp)
{
    /* A group member waits for the previous owner to let go (bounded by
     * max.poll.interval.ms, as the rebalance callback is); a run of its
     * own does not. */
    if (ex_lock(xp, O.fleet ? LOCK_WAIT_MS : 0) != 0)
        return -1;
    /* What this member committed while it owned the partition before is
     * stale now (another member may have exported and committed beyond
     * it): the final commit must not send it back. */
    xp->commit_next = 0;
    int64_t last = ex_scan_dir(xp), lo, hi, start;
    int fresh = 0;            /* neither a file nor a committed offset */
    if (last == -2)
        return -1;
    int rc = ex_watermarks(w, xp, &lo, &hi);
    if (rc) {
        PFAIL(xp, "watermarks: %s", sl_err_name(rc));
        return -1;
    }
    if (last >= 0) {
        start = last + 1;
    } else {
        /* --from only when the group answered and has no offset: a lookup
         * that failed (the coordinator moving, gone) is no "none". */
        sl_topic_partition tp = { xp->topic, xp->partition, SL_OFFSET_INVALID, 0 };
        for (int try = 1; try <= 5 && !stop_signal; try++) {
            tp.offset = SL_OFFSET_INVALID;
            tp.err = 0;
            rc = sl_consumer_committed(w->cons, &tp, 1, TIMEOUT_MS);
            if (!rc && tp.err)
                rc = tp.err;
            if (rc == 0)
                break;
            fprintf(stderr, TOOL ": warning: %s [%d]: committed offset: %s (try %d of 5)\n",
                    xp->topic, xp->partition, sl_err_name(rc), try);
            sleep(1);
        }
        if (rc) {
            PFAIL(xp, "committed offset of the group: %s", sl_err_name(rc));
            return -1;
        }
        if (tp.offset >= 0) {
            start = tp.offset;
        } else if ((fresh = 1) && !strcmp(O.from, "beginning")) {
            start = lo;
        } else if (!strcmp(O.from, "end")) {
            start = hi;
        } else {
            rc = sl_consumer_offset_for_time(w->cons, xp->topic, xp->partition,
                                             atoll(O.from), &start, TIMEOUT_MS);
            if (rc) {
                PFAIL(xp, "offset for time %s: %s", O.from, sl_err_name(rc));
                return -1;
            }
            if (start < 0)
                start = hi;
        }
    }
    if (start < lo) {
        ex_gap(xp, start, lo);
        start = lo;
    }
    xp->start = start;
    __atomic_store_n(&xp->prog_next, start, __ATOMIC_RELAXED);
    __atomic_store_n(&xp->end, O.until_end ? hi : -1, __ATOMIC_RELAXED);
    xp->done = O.until_end && start >= hi;
    if (last >= 0 && !O.dry_run) {
        sl_topic_partition tp = { xp->topic, xp->partition, SL_OFFSET_INVALID, 0 };
        if (sl_consumer_committed(w->cons, &tp, 1, TIMEOUT_MS) != 0 || tp.offset != last + 1)
            ex_commit(w, xp, last + 1);        /* a commit lost to a kill */
    }
    /* The first run records where --from put it: a run that wrote nothing
     * (--from end, nothing new) must not start over from the beginning. */
    if (fresh && !O.dry_run)
        ex_commit(w, xp, start);
    return 0;
}

/* ---- files ------------------------------------------------------------------------ */

/* The schema's JSON text (malloc'd), for a file's header; NULL: ENOMEM. */
static char *ex_schema_json(avro_schema_t schema)
{
    for (size_t cap = 4096; cap <= (64u << 20); cap *= 4) {
        char *buf = malloc(cap);
        avro_writer_t wr = buf ? avro_writer_memory(buf, (int64_t)cap) : NULL;
        if (!wr) {
            free(buf);
            break;
        }
        int rc = avro_schema_to_json(schema, wr);
        int64_t n = avro_writer_tell(wr);
        avro_writer_free(wr);
        if (rc == 0 && (size_t)n < cap) {
            buf[n] = 0;
            return buf;
        }
        free(buf);
    }
    errno = ENOMEM;
    return NULL;
}

/* Opens a file for records from first on, in schema (the envelope or a
 * registered one, sid). */
static int ex_open(xpart *xp, int64_t first, int64_t timestamp, avro_schema_t schema,
                   int64_t sid)
{
    if (O.layout_time) {
        time_t secs = timestamp > 0 ? (time_t)(timestamp / 1000) : 0;
        struct tm tm;
        gmtime_r(&secs, &tm);
        snprintf(xp->dir, sizeof xp->dir, "%s/dt=%04d-%02d-%02d/hour=%02d", xp->root,
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour);
        xp->hour = secs / 3600;
    }
    /* Unique (pid, random): a name no other writer can have open. */
    snprintf(xp->tmp, sizeof xp->tmp, "%s/.%s+%d+%" PRId64 ".%ld-%08lx.%s.tmp", xp->dir,
             xp->topic, xp->partition, first, (long)getpid(),
             (unsigned long)random() & 0xffffffffUL, O.jsonl ? "jsonl" : "avro");
    if (ex_mkdirs(xp->dir) != 0) {
        PFAIL(xp, "creating %s: %s", xp->dir, strerror(errno));
        return -1;
    }
    int fd = open(xp->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    xp->fp = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!xp->fp) {
        if (fd >= 0)
            close(fd);
        PFAIL(xp, "creating %s: %s", xp->tmp, strerror(errno));
        return -1;
    }
    char *json = O.jsonl ? NULL : ex_schema_json(schema);
    xp->aw = json ? ex_ocf_open(xp->fp, json, O.codec) : NULL;
    free(json);
    if (!O.jsonl && !xp->aw) {
        PFAIL(xp, "creating %s: %s", xp->tmp, strerror(errno ? errno : ENOMEM));
        fclose(xp->fp);
        xp->fp = NULL;
        unlink(xp->tmp);
        return -1;
    }
    xp->first = xp->last = first;
    xp->sid = sid;
    xp->n = xp->bytes = 0;
    xp->opened_ms = ex_now_ms();
    return 0;
}

/* Gives up the open file after a write failed: the temporary file is
 * removed at once (a full disk gets its room back). */
static void ex_abandon(xpart *xp)
{
    if (!xp->fp)
        return;
    ex_ocf_free(xp->aw);
    xp->aw = NULL;
    fclose(xp->fp);
    xp->fp = NULL;
    unlink(xp->tmp);
}

/* 1 when a complete file of the partition in dir holds an offset of
 * first..last (a range written already must not be written twice), 0 if
 * none, -1 on an error. */
static int ex_overlaps(const xpart *xp, const char *dir, int64_t first, int64_t last)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int hit = 0;
    struct dirent *de;
    while (!hit && (de = readdir(d))) {
        int64_t l = ex_name_last(xp, de->d_name);
        if (l < 0)
            continue;
        long long f = strtoll(strchr(de->d_name + strlen(xp->topic) + 1, '+') + 1, NULL, 10);
        hit = f <= last && l >= first;
    }
    closedir(d);
    return hit;
}

/* ---- the finisher (X2-X5) ------------------------------------------------------ */

/* The finisher's part of X1: flush, fsync, rename, fsync the directory.
 * 0, or -1 reported (the temporary file is removed unless the rename or
 * what follows failed: then the next run's scan removes or keeps it). */
static int ex_job_complete(ex_job *j)
{
    const xpart *xp = j->xp;
    int err = 0;
    if (fflush(j->fp) != 0 || fsync(fileno(j->fp)) != 0)
        err = errno;
    if (fclose(j->fp) != 0 && !err)
        err = errno;
    j->fp = NULL;
    if (err) {
        PFAIL(xp, "writing %s: %s", j->tmp, strerror(err));
        unlink(j->tmp);
        return -1;
    }
    char final[PATH_MAX * 3];
    snprintf(final, sizeof final, "%s/%s+%d+%" PRId64 "+%" PRId64 ".%s", j->dir, xp->topic,
             xp->partition, j->first, j->last, O.jsonl ? "jsonl" : "avro");
    int ov = ex_overlaps(xp, j->dir, j->first, j->last);
    if (ov != 0) {
        PFAIL(xp, "%s: offsets %" PRId64 "..%" PRId64 " are in a file there already (%s "
              "not renamed)%s%s", j->dir, j->first, j->last, j->tmp, ov < 0 ? ": " : "",
              ov < 0 ? strerror(errno) : "");
        unlink(j->tmp);
        return -1;
    }
    if (ex_rename_new(j->tmp, final) != 0) {
        PFAIL(xp, "renaming %s to %s: %s", j->tmp, final, strerror(errno));
        return -1;
    }
    if (ex_fsync_path(j->dir) != 0) {
        PFAIL(xp, "fsync of directory %s: %s", j->dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* A queued file given up after the run failed (X3). */
static void ex_job_abandon(ex_job *j)
{
    fclose(j->fp);
    j->fp = NULL;
    unlink(j->tmp);
}

static void *ex_finisher_main(void *arg)
{
    ex_finisher *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (f->done == f->tail && !f->stop)
            pthread_cond_wait(&f->queued, &f->mu);
        if (f->done == f->tail)
            break;                              /* stopped, nothing queued */
        ex_job *j = &f->jobs[f->done % EX_PENDING];
        pthread_mutex_unlock(&f->mu);
        int give_up = failed;
        if (give_up)
            ex_job_abandon(j);
        j->ok = !give_up && ex_job_complete(j) == 0;
        pthread_mutex_lock(&f->mu);
        __atomic_store_n(&f->done, f->done + 1, __ATOMIC_RELEASE);   /* ex_reap peeks */
        pthread_cond_signal(&f->finished);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static int ex_finisher_start(worker *w)
{
    ex_finisher *f = &w->fin;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->queued, NULL);
    pthread_cond_init(&f->finished, NULL);
    int rc = pthread_create(&f->th, NULL, ex_finisher_main, f);
    if (rc != 0) {
        fprintf(stderr, TOOL ": error: starting a finisher: %s\n", strerror(rc));
        failed = 1;
        return -1;
    }
    f->started = 1;
    return 0;
}

static void ex_commit(worker *w, xpart *xp, int64_t next);

/* Commits the files the finisher has done, in FIFO order (X2), then waits
 * until at most `most` files are at the finisher, committing each as it is
 * done.  Worker thread. */
static void ex_reap(worker *w, unsigned most)
{
    ex_finisher *f = &w->fin;
    if (!f->started)
        return;
    if (__atomic_load_n(&f->done, __ATOMIC_ACQUIRE) == f->head &&
        f->tail - f->head <= most)
        return;                 /* the poll loop's usual case: no lock taken */
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (f->head != f->done) {
            ex_job *j = &f->jobs[f->head % EX_PENDING];
            f->head++;          /* the slot is reused only by this thread */
            pthread_mutex_unlock(&f->mu);
            if (j->ok) {
                xpart *xp = j->xp;
                xp->files++;
                xp->records += j->n;
                xp->rec_bytes += j->bytes;
                ex_commit(w, xp, j->last + 1);
            }
            pthread_mutex_lock(&f->mu);
        }
        if (f->tail - f->head <= most)
            break;
        pthread_cond_wait(&f->finished, &f->mu);
    }
    pthread_mutex_unlock(&f->mu);
}

/* X4: every file handed over is finished and committed (or given up). */
static void ex_drain(worker *w)
{
    ex_reap(w, 0);
}

/* Drains and joins the finisher. */
static void ex_finisher_stop(worker *w)
{
    ex_finisher *f = &w->fin;
    if (!f->started)
        return;
    ex_drain(w);
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_signal(&f->queued);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->th, NULL);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->queued);
    pthread_cond_destroy(&f->finished);
    f->started = 0;
}

/* Completes the open file: its last block is written here, the rest of X1
 * and the commit follow through the finisher (ex_reap).  0 or -1 (the
 * temporary file is removed). */
static int ex_finish(worker *w, xpart *xp)
{
    if (!xp->fp)
        return 0;
    const char *what = "";
    int closed = O.jsonl ? 0 : ex_ocf_close(xp->aw, &what);
    xp->aw = NULL;
    if (closed != 0) {
        int e = errno ? errno : EIO;         /* ENOSPC when the disk is full */
        ex_abandon(xp);
        PFAIL(xp, "writing %s: %s: %s", xp->tmp, strerror(e), what);
        return -1;
    }
    ex_finisher *f = &w->fin;
    ex_reap(w, EX_PENDING - 1);              /* a free slot (X5) */
    ex_job *j = &f->jobs[f->tail % EX_PENDING];
    j->xp = xp;
    j->fp = xp->fp;
    j->first = xp->first;
    j->last = xp->last;
    j->n = xp->n;
    j->bytes = xp->bytes;
    j->ok = 0;
    memcpy(j->tmp, xp->tmp, sizeof j->tmp);
    memcpy(j->dir, xp->dir, sizeof j->dir);
    xp->fp = NULL;
    pthread_mutex_lock(&f->mu);
    f->tail++;
    pthread_cond_signal(&f->queued);
    pthread_mutex_unlock(&f->mu);
    return 0;
}

/* ---- the envelope in Avro's binary encoding ------------------------------------ */
/* Written straight into a buffer of the worker's (no generic value: a
 * field set through avro_value_* costs a call, a copy and at times an
 * allocation), then handed to the writer with append_encoded. */

static void ex_put_long(ex_buf *b, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);          /* zigzag */
    while (z > 0x7f) {
        b->p[b->len++] = (char)(0x80 | (z & 0x7f));
        z >>= 7;
    }
    b->p[b->len++] = (char)z;
}

static void ex_put_bytes(ex_buf *b, const void *p, size_t len)
{
    ex_put_long(b, (int64_t)len);
    if (len)
        memcpy(b->p + b->len, p, len);
    b->len += len;
}

/* ["null", "bytes"]: the branch, then the bytes. */
static void ex_put_nullable(ex_buf *b, const void *p, int32_t len)
{
    ex_put_long(b, p != NULL);
    if (p)
        ex_put_bytes(b, p, (size_t)len);
}

/* The envelope of m in w->enc.  0, or -1 out of memory. */
static int ex_encode_envelope(worker *w, const sl_message *m)
{
    ex_buf *b = &w->enc;
    size_t tl = strlen(m->topic);
    size_t need = 128 + tl + (size_t)(m->key ? m->key_len : 0) +   /* 12 varints <= 10 B */
                  (size_t)(m->value ? m->value_len : 0);
    for (int i = 0; i < m->header_count; i++)
        need += 32 + sl_header_key_len(&m->headers[i]) +
                (size_t)(m->headers[i].value ? m->headers[i].value_len : 0);
    if (need > b->cap) {
        size_t cap = need > 2 * b->cap ? need : 2 * b->cap;
        char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    b->len = 0;
    ex_put_bytes(b, m->topic, tl);
    ex_put_long(b, m->partition);
    ex_put_long(b, m->offset);
    ex_put_long(b, m->timestamp);
    ex_put_long(b, m->timestamp_type);
    ex_put_nullable(b, m->key, m->key_len);
    ex_put_nullable(b, m->value, m->value_len);
    if (m->header_count > 0) {                    /* one block of n items, then 0 */
        ex_put_long(b, m->header_count);
        for (int i = 0; i < m->header_count; i++) {
            ex_put_bytes(b, m->headers[i].key, sl_header_key_len(&m->headers[i]));
            ex_put_nullable(b, m->headers[i].value, m->headers[i].value_len);
        }
    }
    ex_put_long(b, 0);
    return 0;
}

/* JSON string of bytes, each byte one code point (lossless, latin-1). */
static void ex_json_bytes(FILE *fp, const void *p, int32_t len)
{
    if (!p) {
        fputs("null", fp);
        return;
    }
    const unsigned char *s = p;
    putc('"', fp);
    for (int32_t i = 0; i < len; i++) {
        if (s[i] == '"' || s[i] == '\\')
            fprintf(fp, "\\%c", s[i]);
        else if (s[i] < 0x20 || s[i] >= 0x7f)
            fprintf(fp, "\\u%04x", s[i]);
        else
            putc(s[i], fp);
    }
    putc('"', fp);
}

static void ex_append_json(FILE *fp, const sl_message *m)
{
    fputs("{\"topic\":", fp);
    ex_json_bytes(fp, m->topic, (int32_t)strlen(m->topic));
    fprintf(fp, ",\"partition_id\":%d,\"offset\":%" PRId64 ",\"timestamp\":%" PRId64
            ",\"timestamp_type\":%d,\"key\":", m->partition, m->offset, m->timestamp,
            m->timestamp_type);
    ex_json_bytes(fp, m->key, m->key_len);
    fputs(",\"value\":", fp);
    ex_json_bytes(fp, m->value, m->value_len);
    fputs(",\"headers\":[", fp);
    for (int i = 0; i < m->header_count; i++) {
        fputs(i ? ",{\"key\":" : "{\"key\":", fp);
        ex_json_bytes(fp, m->headers[i].key, (int32_t)sl_header_key_len(&m->headers[i]));
        fputs(",\"value\":", fp);
        ex_json_bytes(fp, m->headers[i].value, m->headers[i].value_len);
        putc('}', fp);
    }
    fputs("]}\n", fp);
}

/* Writes one record, opening and rolling files.  0 or -1. */
static int ex_write(worker *w, xpart *xp, const sl_message *m)
{
    /* --layout time: a record of another hour starts a file there. */
    if (xp->fp && O.layout_time && (m->timestamp > 0 ? m->timestamp / 3600000 : 0) != xp->hour &&
        ex_finish(w, xp) != 0)
        return -1;
    /* --schema-registry: a value framed and decoding with its registered
     * schema is written natively; a file holds one schema (or the
     * envelope), a change starts the next file. */
    avro_schema_t schema = w->schema;
    const char *body = NULL;
    int32_t body_len = 0;
    int64_t sid = -1;
    if (w->reg) {
        char err[512];
        sid = ex_reg_classify(w->reg, m->value, m->value_len, &schema, &body, &body_len,
                              err, sizeof err);
        if (sid == EX_REG_ERROR) {
            PFAIL(xp, "offset %" PRId64 ": schema registry: %s", m->offset, err);
            return -1;
        }
        if (sid < 0)
            schema = w->schema;
        if (xp->fp && sid != xp->sid && ex_finish(w, xp) != 0)
            return -1;
    }
    if (!xp->fp && ex_open(xp, m->offset, m->timestamp, schema, sid < 0 ? -1 : sid) != 0)
        return -1;
    if (O.jsonl) {
        ex_append_json(xp->fp, m);
        if (ferror(xp->fp)) {
            PFAIL(xp, "writing %s: %s", xp->tmp, strerror(errno));
            ex_abandon(xp);
            return -1;
        }
    } else {
        if (!body && ex_encode_envelope(w, m) != 0) {
            PFAIL(xp, "offset %" PRId64 ": out of memory", m->offset);
            return -1;
        }
        const char *what = "";
        if (ex_ocf_append(xp->aw, body ? body : w->enc.p,
                          body ? (size_t)body_len : w->enc.len, &what)) {
            int e = errno;           /* ENOSPC, EIO, … when the block went to disk */
            PFAIL(xp, "writing offset %" PRId64 " to %s: %s: %s", m->offset, xp->tmp,
                  strerror(e), what);
            ex_abandon(xp);
            return -1;
        }
    }
    int64_t size = m->key_len + m->value_len;
    for (int i = 0; i < m->header_count; i++)
        size += (int64_t)sl_header_key_len(&m->headers[i]) + m->headers[i].value_len;
    xp->last = m->offset;
    xp->n++;
    xp->bytes += size;
    __atomic_store_n(&xp->prog_records, xp->prog_records + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&xp->prog_bytes, xp->prog_bytes + size, __ATOMIC_RELAXED);
    __atomic_store_n(&xp->prog_next, m->offset + 1, __ATOMIC_RELAXED);
    if (xp->n >= O.max_records || xp->bytes >= O.max_bytes)
        return ex_finish(w, xp);
    return 0;
}

/* ---- the worker loop ------------------------------------------------------------- */

static xpart *ex_find(worker *w, const char *topic, int32_t partition)
{
    for (int i = 0; i < w->n; i++)
        if (w->parts[i]->partition == partition && !strcmp(w->parts[i]->topic, topic))
            return w->parts[i]->owner == w ? w->parts[i] : NULL;
    return NULL;
}

static int ex_reached_end(worker *w, xpart *xp)
{
    xp->done = 1;
    return ex_finish(w, xp);
}

/* A consumer error event: the end of a partition, records removed by
 * retention (a gap), or a transient error (reported, retried). */
static int ex_event(worker *w, xpart *xp, const sl_message *m)
{
    if (m->err == SL_E_PARTITION_EOF)
        return O.until_end && !xp->done ? ex_reached_end(w, xp) : 0;
    if (m->err == SL_E_BAD_MSG) {
        /* Skipping would lose the records of the batch for good: stop, the
         * open file is not completed (a rerun redoes it). */
        PFAIL(xp, "offset %" PRId64 ": %s: not exported (check the broker's log)",
              m->offset, m->errstr ? m->errstr : sl_err_name(m->err));
        return -1;
    }
    if (m->err == SL_ERR_OFFSET_OUT_OF_RANGE) {
        int64_t lo, hi, pos = m->offset;
        int rc = ex_watermarks(w, xp, &lo, &hi);
        if (rc) {
            PFAIL(xp, "offset %" PRId64 " out of range, watermarks: %s", pos, sl_err_name(rc));
            return -1;
        }
        if (pos >= 0 && pos < lo) {
            if (ex_finish(w, xp) != 0)
                return -1;
            ex_gap(xp, pos, lo);
            return sl_consumer_seek(w->cons, xp->topic, xp->partition, lo) ? -1 : 0;
        }
        PFAIL(xp, "offset %" PRId64 " out of range (log %" PRId64 "..%" PRId64 ")",
              pos, lo, hi);
        return -1;
    }
    fprintf(stderr, TOOL ": warning: %s [%d]: %s\n", xp->topic, xp->partition,
            m->errstr ? m->errstr : sl_err_name(m->err));
    return 0;
}

/* --until-end and no record, end or error event for O.stall_ms (the
 * broker gone, every try failing): each open partition fails, naming the
 * last warning seen. */
static void ex_stalled(worker *w, const char *last_err)
{
    for (int i = 0; i < w->n; i++) {
        xpart *p = w->parts[i];
        if (p->owner == w && !p->done)
            PFAIL(p, "no progress for %" PRId64 " ms (--stall-timeout) at offset %" PRId64
                  ": %s", O.stall_ms, __atomic_load_n(&p->prog_next, __ATOMIC_RELAXED),
                  last_err[0] ? last_err : "no records and no error from the broker");
    }
}

static int ex_consume(worker *w)
{
    int64_t next_tick = ex_now_ms() + 200, progress_ms = ex_now_ms();
    char last_err[256] = "";
    for (;;) {
        if (stop_signal || failed)
            break;
        int open = 0;
        for (int i = 0; i < w->n; i++)
            open += w->parts[i]->owner == w && !w->parts[i]->done;
        if (open == 0 && O.until_end && (!O.fleet || w->assigned))
            break;
        ex_reap(w, EX_PENDING);            /* commit what the finisher did */
        sl_message m;
        int rc = sl_consumer_poll(w->cons, 200, &m);
        if (rc < 0) {
            fprintf(stderr, TOOL ": error: poll: %s\n", sl_err_name(rc));
            failed = 1;
            break;
        }
        xpart *xp = rc == 1 && m.topic ? ex_find(w, m.topic, m.partition) : NULL;
        if (rc == 1 && m.err && m.err != SL_E_PARTITION_EOF)
            snprintf(last_err, sizeof last_err, "%s", m.errstr ? m.errstr : sl_err_name(m.err));
        else if (rc == 1)
            progress_ms = ex_now_ms();
        if (xp && m.err && ex_event(w, xp, &m) != 0)
            break;
        if (xp && !m.err && !xp->done) {
            if (xp->end >= 0 && m.offset >= xp->end) {
                if (ex_reached_end(w, xp) != 0)
                    break;
            } else if (ex_write(w, xp, &m) != 0 ||
                       (xp->end >= 0 && m.offset + 1 >= xp->end && ex_reached_end(w, xp))) {
                break;
            }
        }
        int64_t now = ex_now_ms();
        if (O.until_end && (!O.fleet || w->assigned) && now - progress_ms >= O.stall_ms) {
            ex_stalled(w, last_err);
            break;
        }
        if (now < next_tick)
            continue;
        next_tick = now + 200;
        for (int i = 0; i < w->n; i++) {
            xpart *p = w->parts[i];
            if (p->owner == w && p->fp && now - p->opened_ms >= O.max_interval_ms && ex_finish(w, p) != 0)
                break;
        }
        if (failed)
            break;
    }
    /* Stopped: complete and commit what is open; after a failure (here or
     * in another worker) give it up instead — its records are written again
     * by the next run, and the writer's memory is freed. */
    for (int i = 0; i < w->n; i++)
        if (w->parts[i]->owner == w) {
            if (failed)
                ex_abandon(w->parts[i]);
            else
                ex_finish(w, w->parts[i]);
        }
    ex_drain(w);                           /* X4 */
    return failed ? -1 : 0;
}

/* After a failure (a stall, a broker gone) the commits still out and the
 * LeaveGroup are not waited for: the files are the authority on restart,
 * and a scheduler should get the exit code when the error is printed, not
 * request.timeout.ms later. */
static void ex_close(worker *w)
{
    if (failed)
        sl_consumer_close_within(w->cons, 0);
    else
        sl_consumer_close(w->cons);
    sl_consumer_destroy(w->cons);
}

static void ex_dry_run_line(const xpart *xp)
{
    if (xp->end >= 0)
        printf("would export %s [%d]: offsets %" PRId64 "..%" PRId64 " (up to %" PRId64
               " records) into %s\n", xp->topic, xp->partition, xp->start, xp->end - 1,
               xp->end - xp->start, xp->dir);
    else
        printf("would export %s [%d]: from offset %" PRId64 ", following, into %s\n",
               xp->topic, xp->partition, xp->start, xp->dir);
}

/* --group: partitions given up are completed and committed first (the
 * next owner resumes after their files); partitions received resume after
 * their last complete file, whoever wrote it. */
static void ex_rebalance(sl_consumer *c, int event, const sl_topic_partition *tps, int n,
                         void *opaque)
{
    worker *w = opaque;
    (void)c;
    /* --until-end ends a member when its assignment is done: not between
     * giving partitions up and receiving the next ones. */
    w->assigned = event == SL_REBALANCE_ASSIGN;
    for (int i = 0; i < n; i++) {
        xpart *xp = NULL;
        for (int k = 0; k < w->n && !xp; k++)
            if (w->parts[k]->partition == tps[i].partition &&
                !strcmp(w->parts[k]->topic, tps[i].topic))
                xp = w->parts[k];
        if (!xp) {
            fprintf(stderr, TOOL ": warning: %s [%d]: a partition created after the start is "
                    "not exported (restart to include it)\n", tps[i].topic, tps[i].partition);
            continue;
        }
        if (event == SL_REBALANCE_REVOKE) {
            if (xp->owner == w) {
                ex_finish(w, xp);
                ex_drain(w);           /* X4: renamed and committed first */
            }
            xp->owner = NULL;
            ex_unlock(xp);             /* the next owner may start */
            continue;
        }
        xp->owner = w;
        if (ex_prepare(w, xp) != 0)
            return;
        if (!xp->done && sl_consumer_seek(w->cons, xp->topic, xp->partition, xp->start) != 0)
            PFAIL(xp, "seek to %" PRId64 " failed", xp->start);
    }
}

static void ex_worker_group(worker *w)
{
    int rc = sl_consumer_subscribe(w->cons, O.topics, O.ntopics);
    if (rc) {
        fprintf(stderr, TOOL ": error: subscribe: %s\n", sl_err_name(rc));
        failed = 1;
        return;
    }
    ex_consume(w);
}

static int workers_done;

/* On a terminal, once a second: records/s and MB/s over the last second,
 * with --until-end the records left and the time to done. */
static void ex_progress(xpart *parts, int n, int nw)
{
    int64_t prev_r = 0, prev_b = 0;
    double t_prev = ex_now_ms() / 1000.0;
    while (__atomic_load_n(&workers_done, __ATOMIC_RELAXED) < nw) {
        usleep(200000);
        double t = ex_now_ms() / 1000.0;
        if (t - t_prev < 1.0)
            continue;
        int64_t r = 0, b = 0, left = 0;
        for (int i = 0; i < n; i++) {
            int64_t end = __atomic_load_n(&parts[i].end, __ATOMIC_RELAXED);
            int64_t next = __atomic_load_n(&parts[i].prog_next, __ATOMIC_RELAXED);
            r += __atomic_load_n(&parts[i].prog_records, __ATOMIC_RELAXED);
            b += __atomic_load_n(&parts[i].prog_bytes, __ATOMIC_RELAXED);
            if (end > next)
                left += end - next;
        }
        double rps = (double)(r - prev_r) / (t - t_prev);
        fprintf(stderr, "\r" TOOL ": %" PRId64 " records, %.0f records/s, %.1f MB/s", r, rps,
                (double)(b - prev_b) / (t - t_prev) / 1e6);
        if (O.until_end)
            fprintf(stderr, ", %" PRId64 " left (offsets), %s%.0f s to done   ", left,
                    rps > 0 ? "" : "~", rps > 0 ? (double)left / rps : 0.0);
        prev_r = r;
        prev_b = b;
        t_prev = t;
    }
    fputc('\n', stderr);
}

static void ex_worker_run(worker *w);

static void *ex_worker(void *arg)
{
    ex_worker_run(arg);
    __atomic_add_fetch(&workers_done, 1, __ATOMIC_RELAXED);
    return NULL;
}

static void ex_worker_run(worker *w)
{
    char err[512];
    sl_conf *conf = sl_conf_dup(base_conf);
    sl_conf_set_opaque(conf, w);
    sl_conf_set_commit_cb(conf, ex_commit_cb);
    if (O.fleet)
        sl_conf_set_rebalance_cb(conf, ex_rebalance);
    w->cons = sl_consumer_new(conf, err, sizeof err);
    sl_conf_destroy(conf);
    if (!w->cons) {
        fprintf(stderr, TOOL ": error: %s\n", err);
        failed = 1;
        return;
    }
    if (ex_finisher_start(w) != 0) {
        ex_close(w);
        return;
    }
    if (O.fleet) {
        ex_worker_group(w);
        ex_finisher_stop(w);
        if (!failed)
            ex_commit_final(w);
        ex_close(w);
        return;
    }
    sl_topic_partition *tp = calloc((size_t)w->n, sizeof *tp);
    int na = 0;
    for (int i = 0; i < w->n && !failed; i++) {
        xpart *xp = w->parts[i];
        xp->owner = w;
        if (ex_prepare(w, xp) != 0)
            break;
        if (O.dry_run) {
            ex_dry_run_line(xp);
            xp->done = 1;
        }
        if (!xp->done)
            tp[na++] = (sl_topic_partition){ xp->topic, xp->partition, xp->start, 0 };
    }
    if (!failed && na > 0) {
        int rc = sl_consumer_assign(w->cons, tp, na);
        if (rc) {
            fprintf(stderr, TOOL ": error: assign: %s\n", sl_err_name(rc));
            failed = 1;
        } else {
            ex_consume(w);
        }
    }
    free(tp);
    ex_finisher_stop(w);
    if (!failed)             /* a stalled run must not wait out a commit too */
        ex_commit_final(w);
    ex_close(w);
}

/* ---- main -------------------------------------------------------------------------- */

static void ex_usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, TOOL ": ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(sluice-export --help for the options)\n");
    exit(EXIT_USAGE);
}

static void ex_conf(const char *k, const char *v)
{
    char err[512];
    if (sl_conf_set(base_conf, k, v, err, sizeof err) != 0)
        ex_usage_error("%s", err);
}

static int64_t ex_number(const char *opt, const char *v, int64_t min)
{
    char *e;
    errno = 0;
    long long n = strtoll(v, &e, 10);
    if (errno || *e || e == v || n < min) {
        fprintf(stderr, TOOL ": %s: invalid number \"%s\" (at least %" PRId64 ")\n",
                opt, v, min);
        exit(EXIT_USAGE);
    }
    return n;
}

static void ex_parse(int argc, char **argv)
{
    static const struct option lo[] = {
        { "bootstrap", 1, 0, 'b' }, { "topic", 1, 0, 't' }, { "topic-regex", 1, 0, 'r' }, { "to", 1, 0, 'd' },
        { "until-end", 0, 0, 'e' }, { "from", 1, 0, 'f' }, { "group", 1, 0, 'g' },
        { "parallel", 1, 0, 'P' }, { "codec", 1, 0, 'c' }, { "max-records", 1, 0, 'n' },
        { "max-bytes", 1, 0, 'B' }, { "max-interval", 1, 0, 'i' }, { "format", 1, 0, 'F' },
        { "dry-run", 0, 0, 'N' }, { "schema-registry", 1, 0, 'R' },
        { "schema-registry-user", 1, 0, 'U' }, { "layout", 1, 0, 'L' }, { "property", 1, 0, 'X' }, { "quiet", 0, 0, 'q' },
        { "stall-timeout", 1, 0, 'S' }, { "help", 0, 0, 'h' }, { 0, 0, 0, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "b:t:r:d:ef:g:P:c:n:B:i:F:NL:X:qhR:U:S:", lo, NULL)) != -1) {
        switch (c) {
        case 'b': ex_conf("bootstrap.servers", optarg); break;
        case 't':
            if (O.ntopics == MAX_TOPICS)
                ex_usage_error("at most %s topics", "64");
            O.topics[O.ntopics++] = optarg;
            break;
        case 'r': O.regex = optarg; break;
        case 'R': O.registry = optarg; break;
        case 'U': O.registry_user = optarg; break;
        case 'd': O.dir = optarg; break;
        case 'e': O.until_end = 1; break;
        case 'f': O.from = optarg; break;
        case 'g': O.group = optarg; break;
        case 'P': O.parallel = (int)ex_number("--parallel", optarg, 1); break;
        case 'c': O.codec = optarg; break;
        case 'n': O.max_records = ex_number("--max-records", optarg, 1); break;
        case 'B': O.max_bytes = ex_number("--max-bytes", optarg, 1); break;
        case 'i': O.max_interval_ms = ex_number("--max-interval", optarg, 1); break;
        case 'S': O.stall_ms = ex_number("--stall-timeout", optarg, 1); break;
        case 'F':
            if (strcmp(optarg, "avro") && strcmp(optarg, "jsonl"))
                ex_usage_error("--format: \"%s\" (expected avro or jsonl)", optarg);
            O.jsonl = !strcmp(optarg, "jsonl");
            break;
        case 'N': O.dry_run = 1; break;
        case 'L':
            if (strcmp(optarg, "partition") && strcmp(optarg, "time"))
                ex_usage_error("--layout: \"%s\" (expected partition or time)", optarg);
            O.layout_time = !strcmp(optarg, "time");
            break;
        case 'X': {
            char *eq = strchr(optarg, '=');
            if (!eq)
                ex_usage_error("-X wants KEY=VALUE, not \"%s\"", optarg);
            *eq = 0;
            ex_conf(optarg, eq + 1);
            O.fetch_wait_set |= !strcmp(optarg, "fetch.max.wait.ms");
            break;
        }
        case 'q': O.quiet = 1; break;
        case 'h':
            printf("%s\nSCHEMA (Avro, of every record)\n    %s\n", usage, envelope_schema);
            exit(0);
        default: fputs(usage, stderr); exit(EXIT_USAGE);
        }
    }
    if (optind < argc)
        ex_usage_error("unexpected argument \"%s\"", argv[optind]);
    char bs[8];
    if (sl_conf_get(base_conf, "bootstrap.servers", bs, sizeof bs) != 0 || !bs[0])
        ex_usage_error("%s is required", "--bootstrap");
    if ((O.ntopics == 0 && !O.regex) || !O.dir)
        ex_usage_error("%s are required", "--topic (or --topic-regex) and --to");
    if (O.registry && O.jsonl)
        ex_usage_error("--schema-registry %s", "writes Avro: not with --format jsonl");
    char rerr[512];
    ex_registry *probe = O.registry ? ex_reg_new(O.registry, O.registry_user, rerr, sizeof rerr)
                                    : NULL;
    if (O.registry && !probe)
        ex_usage_error("%s", rerr);
    ex_reg_free(probe);
    regex_t re;
    if (O.regex && regcomp(&re, O.regex, REG_EXTENDED | REG_NOSUB) != 0)
        ex_usage_error("--topic-regex: \"%s\" is not a valid extended regex", O.regex);
    if (O.regex)
        regfree(&re);
    if (strcmp(O.from, "beginning") && strcmp(O.from, "end"))
        ex_number("--from", O.from, 0);
    if (!ex_ocf_codec_known(O.codec))
        ex_usage_error("--codec: \"%s\" (expected null, deflate, snappy, xz or zstandard)",
                       O.codec);
    for (int i = 0; i < O.ntopics; i++)
        if (!O.topics[i][0] || strchr(O.topics[i], '/') || !strcmp(O.topics[i], ".") ||
            !strcmp(O.topics[i], ".."))
            ex_usage_error("invalid topic name \"%s\"", O.topics[i]);
}

static void ex_summary(xpart *parts, int n)
{
    int64_t files = 0, records = 0, bytes = 0, gaps = 0;
    for (int i = 0; i < n; i++) {
        xpart *xp = &parts[i];
        printf("%s [%d]: %" PRId64 " file(s), %" PRId64 " record(s), %" PRId64 " byte(s)",
               xp->topic, xp->partition, xp->files, xp->records, xp->rec_bytes);
        if (xp->gap_records)
            printf(", gap of %" PRId64 " record(s)", xp->gap_records);
        putchar('\n');
        files += xp->files;
        records += xp->records;
        bytes += xp->rec_bytes;
        gaps += xp->gap_records;
    }
    printf("total: %" PRId64 " file(s), %" PRId64 " record(s), %" PRId64 " byte(s), %"
           PRId64 " record(s) in gaps\n", files, records, bytes, gaps);
}

static int ex_cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* --topic-regex: the topics whose whole name matches, added to O.topics in
 * name order (a --topic named twice is taken once).  The names stay
 * allocated for the run.  Exits when listing fails or nothing matches. */
static void ex_match_topics(void)
{
    char err[512], anchored[1024];
    regex_t re;
    snprintf(anchored, sizeof anchored, "^(%s)$", O.regex);
    if (regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB) != 0)
        ex_usage_error("--topic-regex: \"%s\" is not a valid extended regex", O.regex);
    sl_admin *a = sl_admin_new(base_conf, err, sizeof err);
    char **names = NULL;
    int n = 0, rc = a ? sl_admin_list_topics(a, &names, &n, TIMEOUT_MS, err, sizeof err) : -1;
    sl_admin_destroy(a);
    if (rc != 0) {
        fprintf(stderr, TOOL ": error: listing the topics: %s\n", err);
        exit(EXIT_RUNTIME);
    }
    qsort(names, (size_t)n, sizeof *names, ex_cmp_names);
    int matched = 0;
    for (int i = 0; i < n; i++) {
        int dup = 0;
        for (int k = 0; k < O.ntopics; k++)
            dup |= !strcmp(O.topics[k], names[i]);
        if (dup || regexec(&re, names[i], 0, NULL, 0) != 0)
            continue;
        matched++;
        if (O.ntopics == MAX_TOPICS)
            ex_usage_error("--topic-regex matches more than %s topics", "64");
        O.topics[O.ntopics++] = names[i];
        names[i] = NULL;
    }
    regfree(&re);
    sl_admin_groups_free(names, n);
    if (matched == 0) {
        fprintf(stderr, TOOL ": error: no topic matches --topic-regex \"%s\"\n", O.regex);
        exit(EXIT_RUNTIME);
    }
}

/* The partitions of every topic (asked of the cluster), or NULL. */
static xpart *ex_partitions(int *count)
{
    char err[512];
    sl_consumer *c = sl_consumer_new(base_conf, err, sizeof err);
    if (!c) {
        fprintf(stderr, TOOL ": %s\n", err);
        exit(EXIT_USAGE);
    }
    xpart *parts = NULL;
    int n = 0;
    for (int t = 0; t < O.ntopics; t++) {
        int np = sl_consumer_partition_count(c, O.topics[t], TIMEOUT_MS);
        if (np <= 0) {
            fprintf(stderr, TOOL ": error: topic %s: %s\n", O.topics[t], sl_err_name(np));
            free(parts);
            parts = NULL;
            break;
        }
        xpart *grown = realloc(parts, sizeof *parts * (size_t)(n + np));
        if (!grown) {
            free(parts);
            parts = NULL;
            break;
        }
        parts = grown;
        for (int p = 0; p < np; p++, n++) {
            memset(&parts[n], 0, sizeof parts[n]);
            parts[n].topic = O.topics[t];
            parts[n].partition = p;
            parts[n].lock_fd = -1;
            snprintf(parts[n].root, sizeof parts[n].root, "%s/%s", O.dir, O.topics[t]);
            if (O.layout_time)
                snprintf(parts[n].dir, sizeof parts[n].dir, "%s", parts[n].root);
            else
                snprintf(parts[n].dir, sizeof parts[n].dir, "%s/partition=%d",
                         parts[n].root, p);
        }
    }
    sl_consumer_destroy(c);
    *count = n;
    return parts;
}

int main(int argc, char **argv)
{
    base_conf = sl_conf_new();
    ex_parse(argc, argv);
    srandom((unsigned)getpid() ^ (unsigned)time(NULL));
    int named = O.ntopics;                /* O.topics[named..]: matched, allocated */
    if (O.regex)
        ex_match_topics();
    /* The group offsets go to: --group (as a member), else -X group.id
     * (commits only, no membership), else sluice-export-<first topic>
     * (-<regex> with --topic-regex: the matches may change). */
    char group[512];
    if (sl_conf_get(base_conf, "group.id", group, sizeof group) != 0 || !group[0] || O.group)
        snprintf(group, sizeof group, "%s%s", O.group ? "" : "sluice-export-",
                 O.group ? O.group : O.regex ? O.regex : O.topics[0]);
    ex_conf("group.id", group);
    ex_conf("enable.auto.commit", "false");
    ex_conf("auto.offset.reset", "none");
    ex_conf("enable.partition.eof", "true");
    ex_conf("isolation.level", "read_committed");
    /* --until-end reads what is there: a fetch that waits for more (500 ms
     * by default) only delays the final commit queued behind it. */
    if (O.until_end && !O.fetch_wait_set)
        ex_conf("fetch.max.wait.ms", "100");

    avro_schema_t probe;
    if (avro_schema_from_json_length(envelope_schema, sizeof envelope_schema - 1, &probe)) {
        fprintf(stderr, TOOL ": error: envelope schema: %s\n", avro_strerror());
        return EXIT_RUNTIME;
    }
    avro_schema_decref(probe);

    int n;
    xpart *parts = ex_partitions(&n);
    if (!parts)
        return EXIT_RUNTIME;
    struct sigaction sa = { .sa_handler = ex_on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int nw = O.parallel < n ? O.parallel : n;
    worker *ws = NULL;
    xpart **slots = calloc((size_t)n, sizeof *slots);
    O.fleet = O.group && !O.dry_run;
    if (O.fleet)
        nw = O.parallel;                  /* members; the group spreads the partitions */
    ws = realloc(ws, sizeof *ws * (size_t)nw);
    memset(ws, 0, sizeof *ws * (size_t)nw);
    for (int i = 0; i < nw; i++) {
        avro_schema_from_json_length(envelope_schema, sizeof envelope_schema - 1, &ws[i].schema);
        if (O.registry && !(ws[i].reg = ex_reg_new(O.registry, O.registry_user, NULL, 0))) {
            fprintf(stderr, TOOL ": error: out of memory\n");
            return EXIT_RUNTIME;
        }
    }
    /* Partition i goes to worker i % nw; with --group each sees them all. */
    int per = (n + nw - 1) / nw;
    for (int i = 0; i < n && O.fleet; i++)
        slots[i] = &parts[i];
    for (int i = 0; i < nw && O.fleet; i++) {
        ws[i].parts = slots;
        ws[i].n = n;
    }
    for (int i = 0; i < n && !O.fleet; i++) {
        worker *w = &ws[i % nw];
        w->parts = slots + (size_t)(i % nw) * (size_t)per;
        w->parts[w->n++] = &parts[i];
    }
    for (int i = 0; i < nw; i++)
        if (pthread_create(&ws[i].th, NULL, ex_worker, &ws[i]) != 0) {
            fprintf(stderr, TOOL ": error: starting a worker: %s\n", strerror(errno));
            return EXIT_RUNTIME;
        }
    if (isatty(2) && !O.quiet && !O.dry_run)
        ex_progress(parts, n, nw);
    for (int i = 0; i < nw; i++) {
        pthread_join(ws[i].th, NULL);
        free(ws[i].enc.p);
        avro_schema_decref(ws[i].schema);
        ex_reg_free(ws[i].reg);
    }
    if (!O.quiet && !O.dry_run)
        ex_summary(parts, n);
    free(ws);
    free(slots);
    for (int i = named; i < O.ntopics; i++)
        free((char *)O.topics[i]);
    sl_conf_destroy(base_conf);
    if (failed) {
        free(parts);
        return EXIT_RUNTIME;
    }
    int left = 0;             /* --until-end stopped before every partition's end */
    for (int i = 0; i < n; i++)
        left += O.until_end && !parts[i].done;
    free(parts);
    if (left && stop_signal) {
        fprintf(stderr, TOOL ": stopped by a signal before the end of %d partition(s) "
                "(the files written are complete; run again to go on)\n", left);
        return EXIT_STOPPED;
    }
    return 0;
}
