/*
 * daemon/txn/txn_ops.c — the transaction coordinator as an operator sees it
 * (issue 30, Operations): the counters of /metrics, the rows of the SQL
 * transactions view (admin/sql_worker.c copies them into its snapshot, on
 * the loop), and the operator's abort of a hanging transaction, which takes
 * the path a timeout takes (txn_coord_abort: epoch bumped, PrepareAbort,
 * markers, CompleteAbort).
 */
#include "daemon/txn/txn_int.h"

#include <stdio.h>
#include <string.h>

static struct {
    int64_t commits, aborts, timeout_aborts, operator_aborts;
} ops;

/* Kafka's TransactionState names. */
const char *txn_state_name(int8_t s)
{
    static const char *const names[] = { "Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
                                         "CompleteCommit", "CompleteAbort", "Dead",
                                         "PrepareEpochFence" };
    return s >= 0 && s < (int8_t)(sizeof names / sizeof names[0]) ? names[s] : "Unknown";
}

static bool is_open(int8_t s)
{
    return s == TXN_ONGOING || s == TXN_PREPARE_COMMIT || s == TXN_PREPARE_ABORT ||
           s == TXN_PREPARE_EPOCH_FENCE;
}

void txn_ops_completed(bool commit)
{
    if (commit)
        ops.commits++;
    else
        ops.aborts++;
}

void txn_ops_timeout_abort(void)
{
    ops.timeout_aborts++;
}

static void count_open(txn_meta *m, void *arg)
{
    if (m->cur.pid >= 0 && txn_log_epoch(m->part) >= 0 && is_open(m->cur.state))
        ++*(int64_t *)arg;
}

void txn_stats_get(txn_stats *s)
{
    *s = (txn_stats){ .commits = ops.commits, .aborts = ops.aborts,
                      .timeout_aborts = ops.timeout_aborts,
                      .operator_aborts = ops.operator_aborts };
    txn_meta_foreach(count_open, &s->ongoing);
}

/* ---- the SQL view -------------------------------------------------------------------- */
struct rows_visit { void (*fn)(const txn_row *row, void *arg); void *arg; };

static void visit_row(txn_meta *m, void *arg)
{
    struct rows_visit *v = arg;
    if (m->cur.pid < 0 || txn_log_epoch(m->part) < 0)
        return;                       /* never written, or no longer led here */
    txn_row row = { .id = m->id, .state = txn_state_name(m->cur.state), .pid = m->cur.pid,
                    .epoch = m->cur.epoch, .timeout_ms = m->cur.timeout_ms,
                    .start_ms = is_open(m->cur.state) ? m->cur.start_ms : -1,
                    .update_ms = m->cur.update_ms, .m = m };
    v->fn(&row, v->arg);
}

void txn_rows_foreach(void (*fn)(const txn_row *row, void *arg), void *arg)
{
    struct rows_visit v = { fn, arg };
    txn_meta_foreach(visit_row, &v);
}

size_t txn_row_partitions(const txn_row *row, char *buf, size_t cap)
{
    const txn_rec *c = &((const txn_meta *)row->m)->cur;
    size_t len = 0;
    if (cap)
        buf[0] = 0;
    for (size_t k = 0; k < c->ntps; k++) {
        int n = snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0, "%s%s-%d",
                         k ? "," : "", c->tps[k].topic, (int)c->tps[k].partition);
        len += n > 0 ? (size_t)n : 0;
    }
    return len;
}

/* ---- the operator's abort -------------------------------------------------------------- */
int16_t txn_operator_abort(bk_broker *b, const char *id, int64_t pid, int16_t epoch,
                           char *err, size_t errlen)
{
    size_t len = strlen(id);
    int32_t part;
    int16_t e = txn_log_owner(b, id, len, &part);
    if (e != KP_NONE) {
        snprintf(err, errlen, "This broker does not coordinate transactional id %s now (%s).",
                 id, kp_error_name(e));
        return e;
    }
    txn_meta *m = txn_meta_find(id, len);
    if (!m || m->cur.pid < 0) {
        snprintf(err, errlen, "Transactional id %s is unknown.", id);
        return KP_TRANSACTIONAL_ID_NOT_FOUND;
    }
    if (m->cur.pid != pid || m->cur.epoch != epoch || m->pending || m->markers) {
        snprintf(err, errlen, "Transactional id %s changed meanwhile (producer id %lld, "
                 "epoch %d, %s%s); read it again.", id, (long long)m->cur.pid, m->cur.epoch,
                 txn_state_name(m->cur.state), m->pending || m->markers ? ", being written" : "");
        return KP_CONCURRENT_TRANSACTIONS;
    }
    if (m->cur.state != TXN_ONGOING) {
        snprintf(err, errlen, "Transactional id %s is %s: only an Ongoing transaction can be "
                 "aborted.", id, txn_state_name(m->cur.state));
        return KP_INVALID_TXN_STATE;
    }
    BK_INFO("aborting transaction %s (producer id %lld, epoch %d) open for %lld ms, at an "
            "operator's request (SQL)", m->id, (long long)m->cur.pid, m->cur.epoch,
            (long long)(bk_now_ms() - m->cur.start_ms));
    if ((e = txn_coord_abort(b, m)) != KP_NONE) {
        snprintf(err, errlen, "Aborting transactional id %s failed: %s.", id, kp_error_name(e));
        return e;
    }
    ops.operator_aborts++;
    return KP_NONE;
}
