/*
 * daemon/replication/repl_fetcher.h — the replica fetchers (daemon/replication/repl_fetcher.c): in cluster
 * mode, every local replica led by another live broker is copied from its
 * leader with Kafka's Fetch (ReplicaId = broker.id), one connection and
 * one long-polled request per leader.  Standalone mode starts none.
 */
#ifndef SLUICE_FETCHER_H
#define SLUICE_FETCHER_H

#include "daemon/view/view.h"

/* cl_start / cl_stop: no fetcher runs before start or after stop. */
int  repl_fetchers_start(bk_broker *b);
void repl_fetchers_stop(bk_broker *b);
/* The view changed (a topic applied, the live brokers changed): the set
 * of followed partitions is recomputed once, on the next loop turn, for a
 * burst of calls.  Responses are checked against the view as it is when
 * they arrive, so nothing waits for that turn to be safe. */
void repl_fetchers_update(bk_broker *b);
/* /metrics: requests sent ahead of their answer's append (repl_fetcher.c F10), and
 * partitions' answers dropped by repl_fetcher.c F1 (not appended: the log end or the view
 * moved while they were out), since this process started. */
void repl_fetchers_counters(uint64_t *ahead, uint64_t *dropped);

/* Cuts a replica's log back to offset (a no-op at or past its end, but for
 * leader epochs starting there), with what goes with the log: the removed
 * segments to the janitor, the producer state as the log now has it, the
 * high watermark no higher than the end, the epoch checkpoint; a cut is
 * logged with why and leader (who it follows: "leader 2", a cluster
 * link's source).  0, or seg_truncate's error (nothing logged).  Shared by
 * the replica fetchers and the cluster links (daemon/link/link_conn.c). */
int repl_truncate(bk_broker *b, bk_partition *p, int64_t offset, const char *why,
                  const char *leader);
/* Where a log diverges from its leader's (Kafka's follower rule,
 * repl_fetcher.c apply_epoch), from the leader's OffsetForLeaderEpoch
 * answer (leader_epoch, end_offset) for the log's latest epoch: the
 * offset to cut at (never past the log end; hw when the leader has no
 * epochs), *done false when the log must ask again with its new latest
 * epoch; why says which case, for the log line. */
int64_t repl_epoch_cut(const seg_log *log, int64_t hw, int32_t leader_epoch,
                       int64_t end_offset, bool *done, char *why, size_t whylen);

/* ---- pure pieces (unit tested) ---------------------------------------------- */
/* This broker (self) follows a partition iff it hosts a replica of it and
 * another broker, alive, leads it. */
bool repl_follow_wanted(const bk_pview *v, int32_t self, bool leader_alive);
/* The longest prefix of buf made of whole batches (a leader may end a
 * response with a partial one, as Kafka's do): returns its length and
 * the records the batches' headers count (*records, may be NULL). */
size_t repl_fetch_whole_batches(const uint8_t *buf, size_t len, int64_t *records);
/* repl_fetcher.c F10: the offset a follower whose log ends at log_end may ask for next
 * before it appends the whole batches buf[0, whole) its leader answered
 * with HighWatermark leader_hw: where they end, when they start at or past
 * log_end (a compacted leader, segments/log.c L7), their offsets go up, and they end below leader_hw (so the
 * offset it reports early moves neither the high watermark nor the ISR);
 * log_end when whole is 0.  -1: not before the append. */
int64_t repl_fetch_ahead_offset(const uint8_t *buf, size_t whole, int64_t log_end,
                              int64_t leader_hw);
/* repl_fetcher.c F9: when (mono µs) a login done at now_us with the leader's
 * SessionLifetimeMs re-authenticates: permille (850 to 950, Kafka's
 * clients pick it at random so that logins spread) thousandths of the
 * lifetime later; 0 (never) for none (<= 0) or one past the clock's range
 * (a leader's value, which must not overflow). */
int64_t repl_fetch_reauth_at(int64_t now_us, int64_t lifetime_ms, int permille);
/* The same for a login done now, at a random permille: what a SASL
 * client of another broker (a replica fetcher, a cluster link's
 * connection) keeps to log in again on the same connection; 0: never. */
int64_t repl_fetch_reauth_due(int64_t lifetime_ms);
/* What a follower whose log ends at log_end does when its leader answers
 * OFFSET_OUT_OF_RANGE with leader_hw and leader_log_start (-1: unknown). */
enum bk_out_of_range {
    BK_OOR_TRUNCATE,         /* ahead of the leader: truncate to leader_hw */
    BK_OOR_BELOW_START,      /* behind the leader's log start */
    BK_OOR_RETRY,            /* in range after all: the leader's view moved */
};
enum bk_out_of_range repl_fetch_out_of_range(int64_t log_end, int64_t leader_hw,
                                           int64_t leader_log_start);

#endif
