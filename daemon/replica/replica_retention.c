/*
 * daemon/replica/replica_retention.c — time and size retention, the log start offset
 * (DeleteRecords), deleted topics' files, and the start/stop of the
 * background workers that do the file work (replica_janitor.c, replica_cleaner.c).
 *
 * Every log.retention.check.interval.ms the loop walks the partitions of
 * topics whose cleanup.policy contains "delete" and asks segments/ to drop
 * whole closed segments older than retention.ms or beyond retention.bytes
 * (seg_delete_old).  That is a decision over a few numbers per segment;
 * the chosen segments leave the log at once (log start moves, fetches
 * below it get OFFSET_OUT_OF_RANGE); the janitor thread renames their
 * files *.deleted at once and unlinks them after file.delete.delay.ms.
 * The loop never renames, unlinks, compacts or fsyncs for retention.
 *
 * Each deletion logs one line and counts in /metrics
 * (sluice_log_segments_deleted_total, sluice_log_bytes_deleted_total).
 */
#include "daemon/view/view.h"
#include "daemon/replica/replica.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <event2/event.h>

static void account(bk_broker *b, bk_partition *p, int n, uint64_t freed,
                    int64_t t0_us, const char *why)
{
    if (n <= 0)
        return;
    p->segments_deleted += (uint64_t)n;
    p->bytes_deleted += freed;
    replica_janitor_dead(b, seg_take_dead(p->log), p->topic->cfg.file_delete_delay_ms);
    BK_INFO("deleted %d segments of %s-%d (%s): %llu bytes freed, log start "
            "now %lld, %.2f ms (files unlinked after %lld ms)", n,
            p->topic->name, p->id, why, (unsigned long long)freed,
            (long long)seg_log_start(p->log),
            (double)(bk_mono_us() - t0_us) / 1000.0,
            (long long)p->topic->cfg.file_delete_delay_ms);
}

struct tick_arg { bk_broker *b; int64_t now; };

static void retention_replica(bk_partition *p, void *arg)
{
    struct tick_arg *a = arg;
    const md_topic_config *tc = &p->topic->cfg;
    if (!tc->cleanup_delete)
        return;
    int64_t rms = tc->retention_ms;
    int64_t before = rms < 0 ? INT64_MIN : a->now - rms;
    int64_t t0 = bk_mono_us();
    uint64_t freed = 0;
    int n = seg_delete_old(p->log, before, tc->retention_bytes, &freed);
    account(a->b, p, n, freed, t0, "retention");
}

void replica_retention_tick(bk_broker *b)
{
    struct tick_arg a = { b, bk_now_ms() };
    replica_replicas_foreach(b, retention_replica, &a);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    replica_retention_tick(arg);
}

int replica_delete_records(bk_broker *b, bk_partition *p, int64_t offset,
                      int64_t *low_watermark)
{
    if (offset == -1)
        offset = p->high_watermark;
    if (offset < 0 || offset > p->high_watermark)
        return KP_OFFSET_OUT_OF_RANGE;
    int64_t t0 = bk_mono_us();
    uint64_t freed = 0;
    int n = seg_advance_log_start(p->log, offset, &freed);
    if (n < 0)
        return n == SEG_E_RANGE ? KP_OFFSET_OUT_OF_RANGE : KP_KAFKA_STORAGE_ERROR;
    account(b, p, n, freed, t0, "DeleteRecords");
    *low_watermark = seg_log_start(p->log);
    /* The new log start is a fact worth keeping at once: a restart must
     * not serve the deleted records again. */
    if (md_log_bookmarks_save(b->db, p->topic->name, p->id, *low_watermark,
                                  seg_recovery_point(p->log),
                                  p->high_watermark) == KP_NONE) {
        p->saved_log_start = *low_watermark;
        p->saved_recovery_point = seg_recovery_point(p->log);
        p->saved_hw = p->high_watermark;
    }
    return KP_NONE;
}

void replica_partition_log_delete(bk_broker *b, bk_partition *p)
{
    /* Kafka's "<topic>-<p>.<id>-delete": the name is free for a new topic
     * at once; the janitor removes the files. */
    static unsigned seq;
    char dir[8400];
    snprintf(dir, sizeof dir, "%s/%s-%d.%llx%x-delete", b->data_dir,
             p->topic->name, p->id, (unsigned long long)bk_now_ms(), seq++);
    if (seg_rename_dir(p->log, dir) != 0) {
        BK_WARN("cannot rename the directory of %s-%d for deletion; "
                "removing it in place", p->topic->name, p->id);
    }
    replica_janitor_destroy_log(b, p->log);
    p->log = NULL;
}

/* Leftovers of topic deletions a crash or stop interrupted. */
static void sweep_deleted_dirs(bk_broker *b)
{
    DIR *d = opendir(b->data_dir);
    if (!d)
        return;
    struct dirent *e;
    char path[8400];
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > 7 && !strcmp(e->d_name + n - 7, "-delete")) {
            snprintf(path, sizeof path, "%s/%s", b->data_dir, e->d_name);
            replica_janitor_remove_dir(b, path);
        }
    }
    closedir(d);
}

int replica_retention_start(bk_broker *b)
{
    if (replica_janitor_start(b) != 0)
        return -1;
    sweep_deleted_dirs(b);
    if (replica_cleaner_start(b) != 0)
        return -1;
    b->retention_timer = event_new(b->base, -1, EV_PERSIST, tick_cb, b);
    int64_t ms = b->cfg->log_retention_check_interval_ms;
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
    if (!b->retention_timer || event_add(b->retention_timer, &tv) != 0)
        return -1;
    return 0;
}

void replica_retention_stop(bk_broker *b)
{
    if (b->retention_timer)
        event_free(b->retention_timer);
    b->retention_timer = NULL;
    replica_cleaner_stop(b);
}

void replica_retention_shutdown(bk_broker *b)
{
    replica_janitor_stop(b);
}
