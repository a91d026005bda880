/*
 * libFuzzer target: partition recovery from arbitrary file contents — what
 * a torn write, a bad disk or a hand-edited directory leaves behind.
 *
 * Input layout (all of it optional; short inputs fall back to defaults):
 *
 *   0        1        2        4                                   size
 *   +--------+--------+--------+-----------------------------------+
 *   | flags  | split (2 bytes) | file bytes ...                    |
 *   +--------+--------+--------+-----------------------------------+
 *
 *   file bytes[0, split) become 00000000000000000000.log; the rest, if
 *   flags bit 0, a second segment whose base offset is the first's end as
 *   recovered (bit 1: a base 1000 further on, a gap); if bit 2, the second
 *   part is written as the first segment's .index instead; bit 3 opens
 *   with a recovery point past everything (the "already flushed" path);
 *   bit 4 (without 0 and 2): the second part is the partition's
 *   leader-epoch-checkpoint (segments/epochs.c); bit 5 (without 0, 2 and
 *   4): the first segment's .txnindex (segments/txnindex.c).
 *
 * Checks (abort = finding):
 *   1. seg_open never fails on contents alone (only on I/O errors).
 *   2. Every byte the log serves, from log start to log end, is whole
 *      batches that pass the stored-batch check (length, magic, CRC-32C)
 *      with offsets that increase — unless bit 3 said the data was flushed,
 *      where recovery trusts sealed segments by design.
 *   3. An append after recovery lands at the log end, and reopening the
 *      directory afterwards recovers exactly the same log end.
 *   4. The leader-epoch history, whatever the checkpoint file held, has
 *      increasing epochs and start offsets in order within [log start,
 *      log end] (epochs.c, E1).
 *   5. The aborted-transaction index, whatever the .txnindex held, has
 *      entries ordered by LastOffset, each within [log start, log end)
 *      and not before its FirstOffset; the file is cut to exactly those
 *      entries (txnindex.c X2), and a reopen loads the same ones.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "protocol/kp.h"
#include "segments/seg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_root[64];

static void put_file(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        abort();
    if (n && write(fd, p, n) != (ssize_t)n)
        abort();
    close(fd);
}

static void clear_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
}

/* (4) */
static void check_epochs(seg_log *log)
{
    seg_epoch_entry e[64];
    int n = seg_epoch_entries(log, e, 64);
    for (int i = 0; i < n && i < 64; i++)
        if (e[i].epoch < 0 || e[i].start_offset < seg_log_start(log) ||
            e[i].start_offset > seg_log_end(log) ||
            (i > 0 && (e[i].epoch <= e[i - 1].epoch ||
                       e[i].start_offset < e[i - 1].start_offset)))
            abort();
}

/* (5): the entries, into out (cap 4096); their count. */
#define TXN_CAP 4096
static int check_txns(seg_log *log, seg_aborted_txn *out)
{
    int n = seg_txn_collect(log, seg_log_start(log), INT64_MAX, out, TXN_CAP);
    if (n != seg_txn_count(log) || n > TXN_CAP)
        abort();
    for (int i = 0; i < n; i++)
        if (out[i].last_offset < seg_log_start(log) || out[i].last_offset >= seg_log_end(log) ||
            out[i].first_offset > out[i].last_offset ||
            (i > 0 && out[i].last_offset <= out[i - 1].last_offset))
            abort();
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/00000000000000000000.txnindex", g_root);
    if (seg_segment_count(log) == 1 && seg_log_start(log) == 0 &&
        (stat(path, &st) == 0 ? st.st_size : 0) != (off_t)n * 34)
        abort();                                /* txnindex.c X2 */
    return n;
}

/* Reads everything from log start; checks (2) when strict. */
static void read_all(seg_log *log, bool strict)
{
    int64_t off = seg_log_start(log), end = seg_log_end(log);
    int64_t last = off - 1;
    uint8_t *buf = NULL;
    while (off < end) {
        seg_range r;
        int rc = seg_read(log, off, INT64_MAX, 1 << 16, &r);
        if (rc != 0)
            abort();               /* inside [start, end]: always readable */
        if (r.len == 0)
            break;                 /* empty segments up to the end (a gap) */
        buf = realloc(buf, r.len);
        if (pread(r.fd, buf, r.len, r.pos) != (ssize_t)r.len)
            abort();
        size_t at = 0;
        int64_t next = off;
        while (at < r.len) {
            kp_batch h;
            int64_t n = kp_batch_check_stored(buf + at, r.len - at, &h);
            if (n <= 0) {
                if (strict)
                    abort();       /* served bytes that are not a whole batch */
                next = end;
                break;
            }
            if (strict && h.BaseOffset <= last)
                abort();           /* offsets went backwards */
            last = h.BaseOffset + h.LastOffsetDelta;
            next = last + 1;
            at += (size_t)n;
        }
        seg_range_release(&r);
        if (next <= off)
            break;
        off = next;
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_root[0]) {
        snprintf(g_root, sizeof g_root, "/tmp/sluice-fuzz-seg-XXXXXX");
        if (!mkdtemp(g_root))
            abort();
    }
    uint8_t flags = size > 0 ? data[0] : 0;
    size_t split = size > 2 ? (size_t)data[1] << 8 | data[2] : 0;
    const uint8_t *p = size > 3 ? data + 3 : data;
    size_t n = size > 3 ? size - 3 : 0;
    bool epochs = (flags & 21) == 16, txns = (flags & 53) == 32;
    if (!(flags & 5) && !epochs && !txns)
        split = n;
    if (split > n)
        split = n;
    clear_dir(g_root);
    put_file(g_root, "00000000000000000000.log", p, split);
    if (flags & 4)
        put_file(g_root, "00000000000000000000.index", p + split, n - split);
    if (epochs)
        put_file(g_root, "leader-epoch-checkpoint", p + split, n - split);
    if (txns)
        put_file(g_root, "00000000000000000000.txnindex", p + split, n - split);

    seg_open_opts o = { .dir = g_root, .log_start_offset = 0,
                        .recovery_point = (flags & 8) ? INT64_MAX / 2 : 0 };
    seg_config_default(&o.cfg);
    o.cfg.index_interval_bytes = 64;            /* many index entries */
    o.cfg.segment_index_bytes = 4096;
    seg_log *log;
    if (seg_open(&o, &log) != 0)
        abort();                                /* (1) */
    if ((flags & 1) && !(flags & 4) && n > split) {
        /* A second segment after the recovered end (or after a gap). */
        int64_t base = seg_log_end(log) + ((flags & 2) ? 1000 : 0);
        seg_close(log);
        char name[64];
        snprintf(name, sizeof name, "%020lld.log", (long long)base);
        put_file(g_root, name, p + split, n - split);
        o.recovery_point = (flags & 8) ? o.recovery_point : 0;
        if (seg_open(&o, &log) != 0)
            abort();
    }
    read_all(log, !(flags & 8));               /* (2) */
    check_epochs(log);                          /* (4) */
    static seg_aborted_txn t1[TXN_CAP], t2[TXN_CAP];
    int ntx = txns ? check_txns(log, t1) : 0;   /* (5) */
    if (txns) {
        seg_close(log);
        if (seg_open(&o, &log) != 0 || check_txns(log, t2) != ntx ||
            memcmp(t1, t2, (size_t)ntx * sizeof *t1) != 0)
            abort();
    }

    /* (3) the log goes on from where recovery left it. */
    kp_buf b;
    kp_buf_init(&b);
    kp_batch_builder bb;
    kp_bb_init(&bb, &b, KP_CODEC_NONE);
    kp_bb_add(&bb, 1700000000000, "k", 1, "v", 1, NULL, 0);
    kp_bb_finish(&bb);
    kp_bb_free(&bb);
    int64_t end = seg_log_end(log), base = -1;
    int rc = seg_append(log, b.data, b.len, 1700000000000, &base);
    kp_buf_free(&b);
    if (rc == 0 && base != end)
        abort();
    int64_t after = seg_log_end(log);
    seg_close(log);
    o.recovery_point = 0;
    if (seg_open(&o, &log) != 0)
        abort();
    if (rc == 0 && seg_log_end(log) != after)
        abort();
    seg_close(log);
    return 0;
}
