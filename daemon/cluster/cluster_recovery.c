/*
 * daemon/cluster/cluster_recovery.c — electing a leader when no ISR member stayed up:
 * the longest log wins, not the first broker back (KIP-966's unclean
 * recovery, applied to clean elections too).
 *
 * A partition's ISR says who held every committed record when its state
 * znode was written.  A broker that restarted since then (its registration
 * is younger than the state: registration czxid > state mzxid, Kafka's
 * broker epoch) may have come back on an older copy of its data directory,
 * so its place in that ISR proves nothing about the log it has now.  Such
 * a member is "returning"; one registered before the state was written is
 * "current".
 *
 *   each broker, every new session, before it registers (cl_recovery_publish):
 *     /broker_log_ends/<id> ← the ZooKeeper session it registers in, then
 *     for each local replica the log's last leader epoch, end offset and
 *     high watermark, one line each:
 *
 *         sluice-log-ends 2 <session id, decimal>\n
 *         <last leader epoch> <log end offset> <high watermark> <partition> <topic>\n ...
 *
 *   the controller, for a partition with a state and an ISR of two or more
 *   whose leader is not a live current member (cl_ctl_recovery_adjust):
 *     a live current ISR member      → it leads (epoch + 1); the returning
 *                                      members leave the ISR
 *     no ISR member alive            → as before (no write, or unclean)
 *     only returning members alive   → read their log ends (async), then
 *       every ISR member is back     → the longest log leads at once
 *       some are not                 → wait leader.recovery.wait.ms from the
 *                                      first look, then the longest of those
 *                                      back leads
 *     the winner leads at epoch + 1 with ISR = {winner}; the others catch
 *     up from it and the leader takes them back into the ISR.
 *
 * "Longest": the highest last leader epoch, then the highest end offset,
 * then the earliest in the replica list (what OffsetForLeaderEpoch would
 * tell a follower: the log with the newer epoch has every committed record
 * of the older ones).
 *
 * Invariants:
 *   R1. A state written here names one leader and ISR = {leader} when the
 *       leader is a returning broker: a returning member never enters an
 *       ISR but through its leader's catch-up check (repl_isr.c).
 *   R2. A partition waiting here gets no write at all (nor from
 *       cluster_leaders.c or cluster_reassign.c: reconcile_topic skips it), so its
 *       state's mzxid stays older than the returning members'.
 *   R3. Log ends are read for a broker's current registration only
 *       (keyed by its czxid); an answer for an older one is dropped, and
 *       text naming another session than the registration's (a run whose
 *       write failed left the previous run's) is read as none published.
 *   R4. Nothing here blocks the loop: the log ends are read with cl_zk_get and
 *       the answer reconciles again; the wait ends on the cluster tick.
 *   R5. A broker that the view names leader of a partition whose ISR lists
 *       others, and whose state is older than this broker's registration
 *       (it led before it restarted) or not known to be younger (not
 *       registered yet, the state not read in this session), does not act
 *       as leader (bk_partition.held: produce and fetch get
 *       NOT_LEADER_OR_FOLLOWER, no ISR writes, no epoch started in its
 *       log) until the controller writes a state after its registration.
 *   R6. A partition with a live current leader keeps no returning member
 *       in its ISR: the reconcile takes it out (a write, after which the
 *       leader's catch-up check alone takes it back).  cluster_leaders.c L7
 *       does the same when a later write would make it look current.
 */
#include "daemon/cluster/cluster.h"
#include "daemon/replica/replica.h"
#include "segments/seg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LE_ROOT "/broker_log_ends"
#define LE_HEAD "sluice-log-ends 2 "        /* then the session id and \n */
#define LE_MAX_BYTES (1000 * 1000)   /* under ZooKeeper's default jute.maxbuffer */

typedef struct le_broker {
    int32_t id;
    int64_t czxid;                   /* the registration these are for (R3) */
    bool loading, loaded;
    char *text;
    cl_log_end *e;
    int n;
} le_broker;

struct cl_recovery {
    int64_t deadline_ms;             /* the earliest wait's end; 0 none */
    int nbrokers;
    /* never moved (cl_ctl_recovery_adjust holds pointers across lookups) */
    le_broker brokers[CL_MAX_BROKERS];
};

static int64_t mono_ms(void)
{
    return bk_mono_us() / 1000;
}

static struct cl_recovery *rec_of(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    if (!cl->rec && !(cl->rec = calloc(1, sizeof *cl->rec)))
        abort();
    return cl->rec;
}

void cl_recovery_free(bk_broker *b)
{
    struct cl_recovery *r = b->cl ? b->cl->rec : NULL;
    if (!r)
        return;
    for (int i = 0; i < r->nbrokers; i++) {
        free(r->brokers[i].text);
        free(r->brokers[i].e);
    }
    free(r);
    b->cl->rec = NULL;
}

/* ---- the states' mzxids (the mirror's reads) -------------------------------------------- */

static bool rec_grow(cl_topic *ct, int32_t n)
{
    if (ct->nrecovery >= n)
        return true;
    int64_t *m = realloc(ct->state_mzxid, (size_t)n * sizeof *m);
    if (!m)
        return false;
    ct->state_mzxid = m;
    int64_t *s = realloc(ct->recovery_since_ms, (size_t)n * sizeof *s);
    if (!s)
        return false;
    ct->recovery_since_ms = s;
    for (int32_t i = ct->nrecovery; i < n; i++)
        m[i] = s[i] = 0;
    ct->nrecovery = n;
    return true;
}

void cl_recovery_state_read(bk_broker *b, const char *topic, int32_t p, int64_t mzxid)
{
    cl_topic *ct = cl_mirror_topic(b, topic, true);
    if (!ct || p < 0 || !rec_grow(ct, p + 1))
        return;
    if (mzxid > ct->state_mzxid[p])              /* zxids only grow */
        ct->state_mzxid[p] = mzxid;
}

static int64_t state_mzxid(const cl_topic *ct, int32_t p)
{
    return ct && p < ct->nrecovery ? ct->state_mzxid[p] : 0;
}

/* Live broker id's registration (cl->brokers is ascending), or NULL. */
static const zj_broker *registration(bk_broker *b, int32_t id)
{
    bk_cluster *cl = b->cl;
    int lo = 0, hi = cl->nbrokers - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (cl->brokers[mid].id == id)
            return &cl->brokers[mid];
        if (cl->brokers[mid].id < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

int64_t cl_broker_czxid(bk_broker *b, int32_t id)
{
    const zj_broker *z = registration(b, id);
    return z ? z->czxid : 0;
}

/* Registered before the state was written (unknown: as before, current). */
static bool current(bk_broker *b, int32_t id, int64_t mzxid)
{
    int64_t c = cl_broker_czxid(b, id);
    return c == 0 || c < mzxid;
}

/* ---- publishing this broker's log ends --------------------------------------------------- */

typedef struct le_publish {
    kp_buf text;
    void (*then)(bk_broker *b);
    char path[64];
} le_publish;

struct le_fill { kp_buf *out; int skipped; };

static void fill_one(bk_partition *p, void *arg)
{
    struct le_fill *f = arg;
    if (!p->log)
        return;                                   /* no log to speak of: read as none */
    char line[MD_TOPIC_NAME_MAX + 80];
    cl_log_end e = { p->topic->name, p->id, seg_epoch_latest(p->log), seg_log_end(p->log),
                     p->high_watermark };
    int n = cl_log_ends_line(line, sizeof line, &e);
    if (n < 0 || f->out->len + (size_t)n > LE_MAX_BYTES) {
        f->skipped++;
        return;
    }
    kp_wr_raw(f->out, line, (size_t)n);
}

static void publish_done(bk_broker *b, le_publish *lp, int rc)
{
    if (rc != ZOK)
        BK_WARN("zookeeper: cannot write %s (%s): if no ISR member of a partition stays "
                "up, the controller takes this broker's logs for empty", lp->path,
                cl_zk_rc_str(rc));
    void (*then)(bk_broker *) = lp->then;
    kp_buf_free(&lp->text);
    free(lp);
    if (b->cl && then)
        then(b);
}

static void on_le_created(bk_broker *b, const zk_result *r, void *arg)
{
    publish_done(b, arg, r->rc);
}

static void on_le_root(bk_broker *b, const zk_result *r, void *arg)
{
    le_publish *lp = arg;
    if (r->rc != ZOK && r->rc != ZNODEEXISTS) {
        publish_done(b, lp, r->rc);
        return;
    }
    cl_zk_create(b->zk, lp->path, (const char *)lp->text.data, (int)lp->text.len, 0,
              on_le_created, lp);
}

static void on_le_set(bk_broker *b, const zk_result *r, void *arg)
{
    le_publish *lp = arg;
    if (r->rc == ZNONODE)                         /* the first start of this broker */
        cl_zk_create(b->zk, LE_ROOT, NULL, -1, 0, on_le_root, lp);
    else
        publish_done(b, lp, r->rc);
}

void cl_recovery_publish(bk_broker *b, void (*then)(bk_broker *b))
{
    le_publish *lp = calloc(1, sizeof *lp);
    if (!lp)
        abort();
    kp_buf_init(&lp->text);
    lp->then = then;
    snprintf(lp->path, sizeof lp->path, LE_ROOT "/%d", (int)b->cfg->broker_id);
    char head[64];
    int n = cl_log_ends_head(head, sizeof head, cl_zk_session_id(b->zk));
    kp_wr_raw(&lp->text, head, n > 0 ? (size_t)n : 0);
    struct le_fill f = { &lp->text, 0 };
    replica_replicas_foreach(b, fill_one, &f);
    if (f.skipped)
        BK_WARN("zookeeper: %s lists only part of this broker's replicas (%d left out: "
                "over %d bytes); the controller takes their logs for empty", lp->path,
                f.skipped, LE_MAX_BYTES);
    cl_zk_set(b->zk, lp->path, (const char *)lp->text.data, (int)lp->text.len, -1, on_le_set, lp);
}

/* ---- reading a broker's log ends (controller) -------------------------------------------- */

static int entry_cmp(const void *a, const void *b)
{
    const cl_log_end *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

/* A decimal number followed by stop, in [*s, end); *s moves past stop. */
static bool parse_i64(const char **s, const char *end, char stop, int64_t *out)
{
    const char *q = *s;
    bool neg = q < end && *q == '-';
    q += neg;
    if (q >= end || *q < '0' || *q > '9')
        return false;
    int64_t v = 0;
    while (q < end && *q >= '0' && *q <= '9') {
        int d = *q++ - '0';
        if (v > (INT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (q >= end || *q != stop)
        return false;
    *out = neg ? -v : v;
    *s = q + 1;
    return true;
}

int cl_log_ends_head(char *out, size_t cap, int64_t session)
{
    int n = snprintf(out, cap, LE_HEAD "%lld\n", (long long)session);
    return n > 0 && (size_t)n < cap ? n : -1;
}

int cl_log_ends_parse(char *text, int64_t *session, cl_log_end **out)
{
    char *s = text, *nl = strchr(s, '\n');
    const char *h = text + sizeof LE_HEAD - 1;
    cl_log_end *e = NULL;
    int n = 0, cap = 0;
    *out = NULL;
    *session = 0;
    if (!nl || strncmp(s, LE_HEAD, sizeof LE_HEAD - 1) || !parse_i64(&h, nl + 1, '\n', session))
        return 0;
    for (s = nl + 1; *s; s = nl + 1) {
        if (!(nl = strchr(s, '\n')))
            break;
        int64_t epoch, end, hw, part;
        const char *q = s;
        if (!parse_i64(&q, nl, ' ', &epoch) || !parse_i64(&q, nl, ' ', &end) ||
            !parse_i64(&q, nl, ' ', &hw) || !parse_i64(&q, nl, ' ', &part) || part < 0 || part > INT32_MAX || epoch < -1 ||
            epoch > INT32_MAX || q >= nl || nl - q > MD_TOPIC_NAME_MAX)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            cl_log_end *g = realloc(e, (size_t)cap * sizeof *g);
            if (!g)
                break;                            /* what is parsed, sorted */
            e = g;
        }
        *nl = 0;
        e[n++] = (cl_log_end){ q, (int32_t)part, (int32_t)epoch, end, hw };
    }
    if (n)
        qsort(e, (size_t)n, sizeof *e, entry_cmp);
    *out = e;
    return n;
}

const cl_log_end *cl_log_ends_find(const cl_log_end *e, int n, const char *topic, int32_t p)
{
    cl_log_end key = { topic, p, 0, 0, 0 };
    return n > 0 ? bsearch(&key, e, (size_t)n, sizeof *e, entry_cmp) : NULL;
}

int cl_log_ends_line(char *out, size_t cap, const cl_log_end *e)
{
    int n = snprintf(out, cap, "%d %lld %lld %d %s\n", (int)e->epoch, (long long)e->end,
                     (long long)e->hw, (int)e->partition, e->topic);
    return n > 0 && (size_t)n < cap ? n : -1;
}

static void le_clear(le_broker *lb)
{
    free(lb->text);
    free(lb->e);
    lb->text = NULL;
    lb->e = NULL;
    lb->n = 0;
}

/* id's slot; a full table reuses the slot of a broker not registered now
 * (one being read is never reused: its answer names it by id). */
static le_broker *le_slot(bk_broker *b, int32_t id)
{
    struct cl_recovery *r = rec_of(b);
    le_broker *spare = NULL;
    for (int i = 0; i < r->nbrokers; i++) {
        if (r->brokers[i].id == id)
            return &r->brokers[i];
        if (!spare && !r->brokers[i].loading && !view_broker_alive(b, r->brokers[i].id))
            spare = &r->brokers[i];
    }
    le_broker *lb = r->nbrokers < CL_MAX_BROKERS ? &r->brokers[r->nbrokers++] : spare;
    if (!lb)
        return NULL;                              /* over CL_MAX_BROKERS being read */
    le_clear(lb);
    *lb = (le_broker){ .id = id };
    return lb;
}

typedef struct le_read { int32_t id; int64_t czxid, session; } le_read;

static void on_le_read(bk_broker *b, const zk_result *r, void *arg)
{
    le_read *rd = arg;
    le_broker *lb = le_slot(b, rd->id);
    if (lb && lb->czxid == rd->czxid) {
        lb->loading = false;
        if (r->rc == ZOK || r->rc == ZNONODE) {           /* none: no logs known */
            le_clear(lb);
            size_t len = r->rc == ZOK && r->len > 0 ? (size_t)r->len : 0;
            if (!(lb->text = malloc(len + 1)))
                abort();
            memcpy(lb->text, len ? r->data : "", len);
            lb->text[len] = 0;
            int64_t session;
            lb->n = cl_log_ends_parse(lb->text, &session, &lb->e);
            if (r->rc == ZOK && session != rd->session) {             /* R3 */
                BK_WARN("controller: " LE_ROOT "/%d names ZooKeeper session 0x%llx, not "
                        "0x%llx of broker %d's registration (its write in this run failed, "
                        "or an older version wrote it): ignored, its logs are taken for "
                        "empty", (int)rd->id, (unsigned long long)session,
                        (unsigned long long)rd->session, (int)rd->id);
                free(lb->e);
                lb->e = NULL;
                lb->n = 0;
            }
            lb->loaded = true;
            BK_INFO("controller: read the log ends broker %d published (%d replica(s)%s)",
                    (int)rd->id, lb->n, r->rc == ZNONODE ? ", none published" : "");
        }
    }
    free(rd);
    if (r->rc == ZOK || r->rc == ZNONODE)
        cl_ctl_reconcile(b, NULL);                   /* R4 */
}

/* The log ends of live broker id's current registration; NULL while they
 * are being read (the answer reconciles again). */
static le_broker *log_ends(bk_broker *b, int32_t id)
{
    const zj_broker *z = registration(b, id);
    int64_t czxid = z ? z->czxid : 0;
    le_broker *lb = le_slot(b, id);
    if (!lb)
        return NULL;                              /* read again at the next reconcile */
    if (lb->czxid == czxid && lb->loaded)
        return lb;
    if (lb->czxid == czxid && lb->loading)
        return NULL;
    lb->czxid = czxid;                            /* R3 */
    lb->loaded = false;
    lb->loading = true;
    le_read *rd = malloc(sizeof *rd);
    if (!rd)
        abort();
    *rd = (le_read){ id, czxid, z ? z->session : 0 };
    char path[64];
    snprintf(path, sizeof path, LE_ROOT "/%d", (int)id);
    cl_zk_get(b->zk, path, false, on_le_read, rd);
    return NULL;
}

/* What lb published for topic-p; none: an empty log (epoch, end, hw -1). */
static cl_log_end end_of(const le_broker *lb, const char *topic, int32_t p)
{
    const cl_log_end *e = cl_log_ends_find(lb->e, lb->n, topic, p);
    return e ? *e : (cl_log_end){ topic, p, -1, -1, -1 };
}

/* ---- the election (controller) ---------------------------------------------------------- */

static bool in_ids(const int32_t *ids, int32_t n, int32_t id)
{
    for (int32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

static void ids_text(const int32_t *ids, int32_t n, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = 0;
    for (int32_t i = 0; i < n && at < cap; i++)
        at += (size_t)snprintf(out + at, cap - at, i ? ",%d" : "%d", (int)ids[i]);
}

/* Of the returning ISR members back[], the one whose log holds the most
 * (ties: the earlier in the replica list).  A member whose log ends below
 * the high watermark another one recorded lacks committed records: its
 * data directory is older than the cluster's, and the log says so. */
static int32_t longest(const bk_topic *t, int32_t p, const int32_t *back, int32_t nback,
                       le_broker **ends)
{
    const bk_pview *v = &t->parts[p];
    int32_t best = -1, kb = 0;
    cl_log_end e[MD_REPLICAS_MAX];
    int64_t hw = -1;
    int32_t hw_id = -1;
    for (int32_t k = 0; k < nback; k++) {
        e[k] = end_of(ends[k], t->name, p);
        if (e[k].hw > hw) {
            hw = e[k].hw;
            hw_id = back[k];
        }
    }
    for (int32_t i = 0; i < v->nreplicas; i++)
        for (int32_t k = 0; k < nback; k++)
            if (back[k] == v->replicas[i] &&
                (best < 0 || e[k].epoch > e[kb].epoch ||
                 (e[k].epoch == e[kb].epoch && e[k].end > e[kb].end))) {
                best = back[k];
                kb = k;
            }
    if (best < 0) {                               /* not among the replicas: cannot be */
        best = back[0];
        kb = 0;
    }
    for (int32_t k = 0; k < nback; k++)
        if (e[k].end < hw)
            BK_WARN("partition %s-%d: broker %d's log (last leader epoch %d, end %lld) ends "
                    "below the high watermark %lld broker %d recorded: its data directory "
                    "is older than what the cluster recorded; %s", t->name, (int)p,
                    (int)back[k], (int)e[k].epoch, (long long)e[k].end, (long long)hw,
                    (int)hw_id, back[k] == best ? "it leads anyway, the longest log back"
                    : "it follows the longest log and catches up");
    return best;
}

int cl_ctl_recovery_adjust(bk_broker *b, cl_topic *ct, const bk_topic *t, int32_t p,
                        md_partition_state *st)
{
    const bk_pview *v = &t->parts[p];
    if (v->zk_version < 0 || v->nisr < 2 || !rec_grow(ct, p + 1))
        return CTL_REC_NONE;                      /* a lone ISR member: as before (cluster_controller.c C4) */
    int64_t mz = state_mzxid(ct, p);
    bool leader_alive = v->leader >= 0 && view_broker_alive(b, v->leader);
    if (mz == 0)                                  /* not read in this session yet */
        return leader_alive ? CTL_REC_NONE : CTL_REC_WAIT;
    if (leader_alive && current(b, v->leader, mz)) {
        ct->recovery_since_ms[p] = 0;
        st->nisr = 0;                             /* R6 */
        for (int32_t i = 0; i < v->nisr; i++) {
            int32_t id = v->isr[i];
            if (id == v->leader || !view_broker_alive(b, id) || current(b, id, mz))
                st->isr[st->nisr++] = id;
            else
                BK_INFO("partition %s-%d: broker %d leaves the ISR (it registered after the "
                        "state was written: restarted, or its session expired)", t->name,
                        (int)p, (int)id);
        }
        if (st->nisr == v->nisr)
            return CTL_REC_NONE;
        cl_ctl_isr_counted(b, true);
        return CTL_REC_ELECT;
    }
    int32_t lead = -1, back[MD_REPLICAS_MAX], nback = 0, nalive = 0;
    for (int32_t i = 0; i < v->nisr; i++) {
        int32_t id = v->isr[i];
        if (!view_broker_alive(b, id))
            continue;
        nalive++;
        if (cl_broker_shutting(b, id))
            continue;
        if (!current(b, id, mz))
            back[nback++] = id;
        else if (lead < 0 && id != v->leader)
            lead = id;
    }
    if (lead >= 0) {                              /* one stayed up: it leads */
        ct->recovery_since_ms[p] = 0;
        st->leader = lead;
        st->leader_epoch = v->leader_epoch + 1;
        st->nisr = 0;
        for (int32_t i = 0; i < v->nisr; i++)
            if (v->isr[i] != v->leader && !in_ids(back, nback, v->isr[i]))
                st->isr[st->nisr++] = v->isr[i];
        return CTL_REC_ELECT;
    }
    if (nback == 0) {                             /* nobody to compare: as before */
        ct->recovery_since_ms[p] = 0;
        return CTL_REC_NONE;
    }
    le_broker *ends[MD_REPLICAS_MAX];
    bool reading = false;
    for (int32_t k = 0; k < nback; k++)
        reading |= !(ends[k] = log_ends(b, back[k]));
    if (reading)
        return CTL_REC_WAIT;                      /* R4: the answer reconciles */
    int64_t now = mono_ms(), wait = b->cfg->leader_recovery_wait_ms;
    char backs[64], isr[64];
    ids_text(back, nback, backs, sizeof backs);
    ids_text(v->isr, v->nisr, isr, sizeof isr);
    bool all = nalive == v->nisr;
    if (!all) {
        if (!ct->recovery_since_ms[p]) {
            ct->recovery_since_ms[p] = now;
            BK_INFO("partition %s-%d: no member of ISR [%s] stayed up; waiting up to %lld ms "
                    "(leader.recovery.wait.ms) for the others to return before electing "
                    "the longest log of those back (back: %s)", t->name, (int)p, isr,
                    (long long)wait, backs);
        }
        int64_t until = ct->recovery_since_ms[p] + wait;
        if (now < until) {
            struct cl_recovery *r = rec_of(b);
            if (!r->deadline_ms || until < r->deadline_ms)
                r->deadline_ms = until;
            return CTL_REC_WAIT;
        }
    }
    int32_t best = longest(t, p, back, nback, ends);
    ct->recovery_since_ms[p] = 0;
    if (all)
        BK_INFO("partition %s-%d: every member of ISR [%s] restarted since its last state; "
                "broker %d has the longest log and leads at leader epoch %d", t->name,
                (int)p, isr, (int)best, (int)v->leader_epoch + 1);
    else
        BK_WARN("partition %s-%d: ISR [%s]: only %s came back within leader.recovery.wait.ms "
                "(%lld ms); broker %d has the longest log of those and leads at leader epoch "
                "%d with what it has; records only the others had are lost if they return",
                t->name, (int)p, isr, backs, (long long)wait, (int)best,
                (int)v->leader_epoch + 1);
    st->leader = best;
    st->leader_epoch = v->leader_epoch + 1;
    st->nisr = 1;                                 /* R1 */
    st->isr[0] = best;
    return CTL_REC_ELECT;
}

void cl_ctl_recovery_tick(bk_broker *b)
{
    struct cl_recovery *r = b->cl->rec;
    if (!r || !r->deadline_ms || mono_ms() < r->deadline_ms)
        return;
    r->deadline_ms = 0;
    cl_ctl_reconcile(b, NULL);
}

/* ---- this broker's own leaderships (R5) ----------------------------------------------- */

void cl_recovery_view_changed(bk_broker *b, bk_partition *p)
{
    bk_cluster *cl = b->cl;
    const bk_pview *v = &p->topic->parts[p->id];
    uint8_t held = 0;
    if (cl && v->leader == b->cfg->broker_id && v->nisr >= 2) {
        /* Not registered in this run yet, or the state not read in this
         * session: not known, so held (a view loaded from SQLite must not
         * start an epoch in the log either: repl_isr_view_changed). */
        int64_t mz = state_mzxid(cl_mirror_topic(b, p->topic->name, false), p->id);
        held = !cl->reg_czxid || !mz ? 1 : mz < cl->reg_czxid ? 2 : 0;
    }
    if (held == 2 && p->held != 2 && p->log) {
        int32_t last = seg_epoch_latest(p->log);
        char isr[64];
        ids_text(v->isr, v->nisr, isr, sizeof isr);
        BK_WARN("partition %s-%d: this broker led it (leader epoch %d, ISR [%s]) before it "
                "restarted (or its session expired); not leading until the controller has "
                "compared the ISR's logs (log end %lld, last leader epoch %d%s)",
                p->topic->name, (int)p->id, (int)v->leader_epoch, isr, (long long)seg_log_end(p->log), (int)last,
                last < v->leader_epoch ? ": behind the epoch the ISR last listed it at, so "
                "its data directory may be older than what the cluster recorded" : "");
    } else if (!held && p->held == 2 && v->leader == b->cfg->broker_id) {
        BK_INFO("partition %s-%d: leading again (leader epoch %d)", p->topic->name,
                (int)p->id, (int)v->leader_epoch);
    }
    p->held = held;
}

static void recompute(bk_partition *p, void *arg)
{
    repl_isr_view_changed(arg, p);
}

void cl_recovery_registered(bk_broker *b, int64_t czxid)
{
    b->cl->reg_czxid = czxid;
    replica_replicas_foreach(b, recompute, b);
}
