/*
 * daemon/group/group_commit_cadence.h — when to write the offset commits gathered so
 * far: now, or a little later because another connection's commit is due
 * (the linger of daemon/group/group_persist.c, C7).  Pure bookkeeping, no I/O, no clock
 * of its own: the caller passes the time (monotonic µs).
 *
 * Design note.  Every write of commits costs one transaction and one
 * fdatasync (~100 µs of CPU on a VM's block device), so commits should
 * share them; but a commit waiting for company nobody sends only adds
 * latency.  Consumers that commit after every poll commit at a steady
 * pace, so each connection's next commit is predictable from its last
 * ones: the table keeps, per connection, the time of its latest commit
 * and the smoothed gap between its commits.  A gathered batch is written
 *   - at once when no connection outside it is due before its deadline:
 *     the first commit's arrival + offsets.commit.linger.ms, or sooner
 *     (K4); so a lone committer, or one-off commits, never wait;
 *   - else when the last of those due connections has committed (the
 *     caller asks again on each arrival), or is late by a quarter of its
 *     gap (it is not coming), or at the deadline, whichever is first.
 * Consumers committing back to back (each waits for its answer) all
 * re-commit right after a write, so they share the next one; consumers on
 * their own timers, spread over a period, share one write per linger, or
 * per three quarters of their period when that is shorter.
 *
 * Invariants:
 *   K1. One entry per connection, keyed by its serial (net_conn_serial:
 *       never reused, so a new connection never inherits a closed one's
 *       pace); when the table is full the entry committed longest ago is
 *       reused, which loses that connection's history, never a commit.
 *       A closed connection's entry stays until reused: it can be waited
 *       for once more, until it is late (a quarter of its gap).
 *   K2. gap_us is 0 until a connection has committed twice within
 *       CC_MAX_GAP_US; an entry without a gap is never waited for.
 *   K3. gc_cadence_submit_at never returns a time past first_us + linger_us.
 *   K4. Nor past three quarters of a batched connection's gap after its
 *       commit: a consumer that commits every 4 ms has its commit
 *       submitted within 3 ms, so that with the write it is answered
 *       about when its next commit is due and keeps its own pace (its
 *       heartbeats, too, queue behind the commit on the coordinator
 *       connection, as one connection's requests are served one at a
 *       time).
 */
#ifndef SLUICE_COMMIT_CADENCE_H
#define SLUICE_COMMIT_CADENCE_H

#include <stdint.h>

#define CC_SLOTS      256
#define CC_MAX_GAP_US 10000000      /* a longer pause starts the history over */

typedef struct cc_entry {
    uint64_t conn;                  /* the connection's serial; 0: a free slot */
    int64_t last_us;                /* its latest commit's arrival */
    int64_t gap_us;                 /* smoothed time between its commits (K2) */
} cc_entry;

typedef struct cc_table {
    cc_entry e[CC_SLOTS];
} cc_table;

/* A commit from connection conn (its serial, never 0) arrived at now_us. */
void gc_cadence_note(cc_table *t, uint64_t conn, int64_t now_us);

/* The batch holds every commit that arrived since its oldest, at
 * first_us (a write takes the whole batch, so a connection whose latest
 * commit came before first_us has none in it).  Returns 0 to write it
 * now, else the time (> now_us) to ask again, unless a commit comes
 * first. */
int64_t gc_cadence_submit_at(const cc_table *t, int64_t now_us, int64_t first_us, int64_t linger_us);

#endif
