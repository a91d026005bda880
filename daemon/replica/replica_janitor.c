/*
 * daemon/replica/replica_janitor.c — the thread that removes files, so the loop never does.
 *
 * Three kinds of work arrive from the loop, each with a time it is due:
 *   - a seg_dead list (segments retention, DeleteRecords or a compaction
 *     swap took out of a log): renamed *.deleted at once (if the swap did
 *     not already), unlinked when file.delete.delay.ms has passed, so a fetch that found
 *     the segment just before still opens nothing stale (it holds the fd
 *     anyway, seg_range);
 *   - a whole seg_log of a deleted topic, its directory already renamed
 *     "<topic>-<p>.<id>-delete": seg_destroy (close, unlink, rmdir);
 *   - a directory path (such leftovers found at startup): seg_remove_dir;
 *   - a leader-epoch-checkpoint snapshot (segments/epochs.c, E4): written
 *     with its fdatasyncs here, due at once, so snapshots of one partition
 *     are written in the order they were taken (invariant 1 keeps equal due
 *     times in queue order);
 *   - a call (bk_worker_call on b->calls, which is this worker while it
 *     runs): CPU work the loop must not do, such as a PLAIN login's PBKDF2
 *     (sec_sasl.c inv. 3) or the replica fetcher's SCRAM key
 *     (sec_sasl_client.c); run here, due at once, and its done() posted
 *     back to the loop.
 *
 * The thread and its queue are a bk_worker (daemon/worker.c) of one
 * thread; each item is a bk_work with its due time.
 *
 * Invariants:
 *   1. Items run by due time, equal due times in queue order (worker.h
 *      W1, one thread); the thread sleeps until the head is due.
 *   2. Nothing here touches a log the loop still owns: a seg_dead list and
 *      a destroyed log were handed over whole.
 *   3. replica_janitor_stop does everything still queued at once (a stopping
 *      broker does not wait out delays: the files are *.deleted already and
 *      seg_open would remove them anyway: worker.h W6, drain), then joins,
 *      then runs the done() of every call (on the loop thread, as always).
 *   4. A call's done() runs exactly once, on the loop thread, after its
 *      run() has returned; the arg is the caller's until then (a caller
 *      whose requester went away marks arg, never frees it early).
 */
#include "daemon/view/view.h"
#include "daemon/worker.h"

#include <stdlib.h>
#include <string.h>

typedef struct jan_item {
    bk_work w;                       /* first: a bk_work * is a jan_item * */
    seg_dead *dead;
    bool rename_only;                /* first half of a dead list's removal */
    seg_log *log;
    char *dir;
    seg_epoch_ckpt *epochs;
} jan_item;

typedef struct bk_janitor {
    bk_worker *wk;
} bk_janitor;

/* The janitor's thread (or the loop when there is none): the slow part,
 * unlink, rmdir, a call.  Frees the item unless it is a call (its done()
 * is yet to run: worker.h W4). */
static void do_item(bk_work *w, int thread)
{
    (void)thread;
    jan_item *it = (jan_item *)w;
    if (it->rename_only) {
        seg_dead_rename(it->dead);   /* the unlink item still owns it */
        free(it);
        return;
    }
    if (it->dead)
        seg_dead_unlink(it->dead);
    if (it->log && seg_destroy(it->log) != 0)
        BK_WARN("janitor: could not remove every file of a deleted partition");
    if (it->dir && seg_remove_dir(it->dir) != 0)
        BK_WARN("janitor: could not remove %s", it->dir);
    /* A failed write leaves the previous file, and the next change writes
     * the whole history again; a restart relearns the tail from the log. */
    if (it->epochs && seg_epoch_write_checkpoint(it->epochs) != 0)
        BK_WARN("janitor: could not write a leader-epoch-checkpoint");
    free(it->dir);
    free(it);
}

int replica_janitor_start(bk_broker *b)
{
    bk_janitor *j = calloc(1, sizeof *j);
    if (!j)
        return -1;
    bk_worker_opts o = { .name = "sluice-janitor", .nthreads = 1 };
    if (bk_worker_new(b->base, &o, &j->wk) != 0) {
        BK_ERROR("janitor: cannot start its worker");
        free(j);
        return -1;
    }
    b->janitor = j;
    b->calls = j->wk;                /* bk_worker_call's (inv. 4) */
    return 0;
}

static void enqueue(bk_broker *b, jan_item *it, int64_t delay_ms)
{
    bk_janitor *j = b->janitor;
    it->w.run = do_item;
    it->w.done = NULL;
    if (!j) {                        /* not started (tests, shutdown) */
        do_item(&it->w, 0);
        return;
    }
    bk_worker_submit(j->wk, &it->w, delay_ms > 0 ? delay_ms * 1000 : 0);
}

void replica_janitor_dead(bk_broker *b, seg_dead *d, int64_t delay_ms)
{
    if (!d)
        return;
    jan_item *it = calloc(1, sizeof *it), *ren = calloc(1, sizeof *ren);
    if (!it || !ren) {
        free(it);
        free(ren);
        seg_dead_unlink(d);          /* no memory to wait: unlink now */
        return;
    }
    /* Rename *.deleted now (the loop only detached), unlink after the
     * delay; equal due times keep queue order, so the rename goes first. */
    ren->dead = d;
    ren->rename_only = true;
    enqueue(b, ren, 0);
    it->dead = d;
    enqueue(b, it, delay_ms);
}

void replica_janitor_destroy_log(bk_broker *b, seg_log *log)
{
    jan_item *it = calloc(1, sizeof *it);
    if (!it) {
        seg_destroy(log);
        return;
    }
    it->log = log;
    enqueue(b, it, 0);
}

void replica_janitor_remove_dir(bk_broker *b, const char *dir)
{
    jan_item *it = calloc(1, sizeof *it);
    if (!it || !(it->dir = strdup(dir))) {
        free(it);
        return;
    }
    enqueue(b, it, 0);
}

void replica_janitor_epochs(bk_broker *b, seg_epoch_ckpt *c)
{
    jan_item *it = calloc(1, sizeof *it);
    if (!it) {
        seg_epoch_write_checkpoint(c);   /* no memory to queue: here */
        return;
    }
    it->epochs = c;
    enqueue(b, it, 0);
}

void replica_janitor_stop(bk_broker *b)
{
    bk_janitor *j = b->janitor;
    if (!j)
        return;
    b->calls = NULL;
    bk_worker_quit(j->wk, true);     /* inv. 3 */
    bk_worker_join(j->wk);
    bk_worker_finish(j->wk);
    bk_worker_free(j->wk);
    free(j);
    b->janitor = NULL;
}
