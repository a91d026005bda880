/*
 * daemon/cluster/cluster_leaders.c — leadership moves beyond failover: controlled
 * shutdown, preferred-leader election (ElectLeaders and Kafka's automatic
 * leader rebalance), and brokers that died or are leaving taken out of
 * the ISRs they were in.
 *
 * Controlled shutdown (Kafka's ControlledShutdown, API 7, done through a
 * request znode here, as /admin/delete_topics is for deletions):
 *
 *   SIGTERM ──► cl_controlled_shutdown: refuse produce
 *               (NOT_LEADER_OR_FOLLOWER, which clients retry), follow no
 *               new leader, keep serving fetches and fetching
 *   phase 1 ──► every ISR follower of what it leads has fetched to its
 *               log end (followers_level), or
 *               controlled.shutdown.retry.backoff.ms passed:
 *               create the ephemeral /admin/controlled_shutdown/<id>
 *   phase 2 ──► every broker watches that directory
 *               (cl_shutdowns_refresh); the controller, for each partition
 *               reconcile_topic looks at (cl_ctl_leaders_adjust):
 *                 leader leaving   → the first replica in the ISR that is
 *                                    alive and not leaving leads; epoch + 1
 *                 follower leaving → out of the ISR
 *   done    ──► its view shows it leads nothing another ISR member could
 *               lead and is in no ISR of a live leader, or
 *               controlled.shutdown.max.retries attempts of
 *               controlled.shutdown.retry.backoff.ms each ran out: the
 *               server drains and the broker exits as before.
 *
 * A broker that dies leaves the ISRs it was in at once (Kafka's
 * onBrokerFailure): cl_ctl_leaders_brokers_changed marks them, the reconcile
 * that follows writes them.  A broker whose log directory failed
 * (cluster_logdirs.c) counts as leaving (cl_broker_shutting) for as long as its
 * registration lasts.
 *
 * Preferred-leader election: a partition marked in cl_topic.marks (by
 * ElectLeaders, or by the imbalance check every
 * leader.imbalance.check.interval.seconds when a broker's share of
 * preferred partitions led elsewhere passes
 * leader.imbalance.per.broker.percentage) is led by its first replica at
 * the next reconcile, if that replica is alive, in the ISR and not leaving.
 *
 * Invariants:
 *   L1. A broker in cl->shutting is never made leader here, and a leader
 *       leaving keeps its leadership only when no other ISR member could
 *       take it.
 *   L2. The ISR is only shrunk here while the partition keeps a live
 *       leader, and never loses that leader: an offline partition keeps
 *       its last ISR, as Kafka's does.
 *   L3. Every change goes through reconcile_topic's versioned,
 *       epoch-checked writes (cluster_controller.c C1-C3); nothing here writes
 *       a state znode itself.
 *   L4. A leader never adds a leaving broker back into an ISR
 *       (cl_broker_shutting, checked by repl_isr.c's expand).
 *   L5. A mark (cl_topic.marks) is cleared when the partition's reconcile
 *       decides on it, done or not; a dead broker's ISR places are
 *       marked once, when it dies (a write that then fails leaves them to
 *       the leader's replica.lag.time.max.ms).
 *   L6. A broker stays leaving (cl_broker_shutting) from its request
 *       znode until it registers anew, or until a replica fetch's longest
 *       wait (LEFT_GRACE_MS) passed after its registration went: a leaving
 *       broker deletes its registration, that znode and its session at
 *       the end (cl_stop), and its last fetches (a parked one completes
 *       later) must not take it back into an ISR the controller took it
 *       out of; nobody would take it out again but
 *       replica.lag.time.max.ms.
 *   L7. A broker that registered anew while it was seen alive (a new
 *       registration czxid: a bounce, Kafka's broker epoch of KIP-380)
 *       leaves every ISR it was in at the next reconcile of each such
 *       partition (not as leader: cluster_recovery.c elects), whatever was
 *       written to that state meanwhile; its log may be an older copy, so
 *       only its leader's catch-up check (repl_isr.c) takes it back.
 */
#include "daemon/cluster/cluster.h"
#include "daemon/replication/repl_fetcher.h"
#include "daemon/replica/replica.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#define CS_PATH "/admin/controlled_shutdown"
#define CTL_MARK_PREFERRED 1         /* lead by the first replica if it can */
#define CTL_MARK_DEAD 2              /* a broker in its ISR died: out with it */
#define CTL_MARK_BOUNCED 4           /* a broker in its ISR registered anew (L7) */
#define CS_POLL_MS 50

static bool marks_grow(cl_topic *ct, int32_t n)
{
    if (ct->nmarks >= n)
        return true;
    uint8_t *m = realloc(ct->marks, (size_t)n);
    if (!m)
        return false;
    memset(m + ct->nmarks, 0, (size_t)(n - ct->nmarks));
    ct->marks = m;
    ct->nmarks = n;
    return true;
}

static bool has_id(const int32_t *ids, int32_t n, int32_t id)
{
    for (int32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

/* The registration timestamp of live broker id; -1 when it has none. */
static int64_t registered_ms(bk_cluster *cl, int32_t id)
{
    for (int i = 0; i < cl->nbrokers; i++)
        if (cl->brokers[i].id == id)
            return cl->brokers[i].timestamp_ms;
    return -1;
}

/* L6: drops the brokers that left and registered anew (a restart), or
 * whose last fetch has had time to arrive since their registration went. */
static void left_prune(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    int64_t now = bk_mono_us() / 1000, grace = b->cfg->replica_fetch_wait_max_ms + 1000;
    int m = 0;
    for (int i = 0; i < cl->nleft; i++) {
        int32_t id = cl->left[i];
        bool alive = view_broker_alive(b, id);
        if (alive && registered_ms(cl, id) != cl->left_reg_ms[i])
            continue;                             /* registered anew */
        int64_t gone = alive ? -1 : cl->left_gone_ms[i] >= 0 ? cl->left_gone_ms[i] : now;
        if (gone >= 0 && now - gone > grace)
            continue;
        cl->left[m] = id;
        cl->left_reg_ms[m] = cl->left_reg_ms[i];
        cl->left_gone_ms[m++] = gone;
    }
    cl->nleft = m;
}

bool cl_broker_shutting(bk_broker *b, int32_t id)
{
    bk_cluster *cl = b->cl;
    if (!cl)
        return false;
    if (has_id(cl->shutting, cl->nshutting, id) || cl_broker_dir_failed(b, id))
        return true;                              /* its log dir failed: cluster_logdirs.c */
    left_prune(b);
    return has_id(cl->left, cl->nleft, id);
}

/* Seen registering anew since it was last seen alive (L7). */
static bool bounced(bk_broker *b, int32_t id)
{
    bk_cluster *cl = b->cl;
    for (int i = 0; i < cl->nseen_alive; i++)
        if (cl->seen_alive[i] == id)
            return cl->seen_bounced[i] && cl->seen_czxid[i] == cl_broker_czxid(b, id);
    return false;
}

static bool eligible(bk_broker *b, int32_t id)
{
    return view_broker_alive(b, id) && !cl_broker_shutting(b, id);
}

/* ---- who is leaving: /admin/controlled_shutdown ------------------------------------ */

static int id_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void on_shutdowns(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    bk_cluster *cl = b->cl;
    if (!cl || r->rc != ZOK)
        return;                          /* NONODE cannot be (a base path); a reconnect reads again */
    int32_t ids[CL_MAX_BROKERS];
    int n = 0;
    for (int i = 0; i < r->nchildren && n < CL_MAX_BROKERS; i++) {
        char *end;
        long id = strtol(r->children[i], &end, 10);
        if (*end == 0 && end != r->children[i] && id >= 0 && id <= INT32_MAX)
            ids[n++] = (int32_t)id;
    }
    qsort(ids, (size_t)n, sizeof *ids, id_cmp);
    left_prune(b);
    for (int i = 0; i < cl->nshutting; i++) {     /* L6 */
        int32_t id = cl->shutting[i];
        if (!has_id(ids, n, id) && !has_id(cl->left, cl->nleft, id) &&
            cl->nleft < CL_MAX_BROKERS) {
            bool alive = view_broker_alive(b, id);
            cl->left[cl->nleft] = id;
            cl->left_reg_ms[cl->nleft] = alive ? registered_ms(cl, id) : -1;
            cl->left_gone_ms[cl->nleft++] = alive ? -1 : bk_mono_us() / 1000;
        }
    }
    bool same = n == cl->nshutting && !memcmp(ids, cl->shutting, (size_t)n * sizeof *ids);
    memcpy(cl->shutting, ids, (size_t)n * sizeof *ids);
    cl->nshutting = n;
    if (same)
        return;
    for (int i = 0; i < n; i++)
        if (cl->active)
            BK_INFO("controller: broker %d asked for a controlled shutdown", (int)ids[i]);
    cl_ctl_reconcile(b, NULL);
}

void cl_shutdowns_refresh(bk_broker *b)
{
    if (b->cl && b->zk)
        cl_zk_children(b->zk, CS_PATH, true, on_shutdowns, NULL);
}

/* ---- this broker leaving ------------------------------------------------------------ */

struct cl_cshut {
    struct event *poll;
    void (*done)(bk_broker *b);
    bool asked;                      /* the request znode is out (phase 2) */
    int attempt;                     /* 1.. controlled.shutdown.max.retries */
    int64_t attempt_start_ms;
    int remaining;
};

struct remain_arg { bk_broker *b; int n; };

static void count_remaining(bk_topic *t, void *arg)
{
    struct remain_arg *a = arg;
    int32_t me = a->b->cfg->broker_id;
    for (int32_t p = 0; p < t->npartitions; p++) {
        const bk_pview *v = &t->parts[p];
        if (v->leader == me) {
            for (int32_t i = 0; i < v->nisr; i++)
                if (v->isr[i] != me && eligible(a->b, v->isr[i])) {
                    a->n++;                       /* another could lead it */
                    break;
                }
        } else if (v->leader >= 0 && view_broker_alive(a->b, v->leader) &&
                   has_id(v->isr, v->nisr, me)) {
            a->n++;                               /* its HW still counts on us */
        }
    }
}

static int remaining(bk_broker *b)
{
    struct remain_arg a = { b, 0 };
    view_topics_foreach(b, count_remaining, &a);
    return a.n;
}

/* Phase 1: every other ISR member of each partition led here has fetched
 * up to this broker's log end in the current leader epoch, so whichever
 * the controller picks has every record this broker has (produce is
 * refused meanwhile: cl_cluster_leaving).  A follower that fetches below
 * the high watermark leaves the ISR (repl_isr.c) and is not waited for. */
struct level_arg { bk_broker *b; bool level; };

static void replica_level(bk_partition *p, void *arg)
{
    struct level_arg *a = arg;
    const bk_pview *v = &p->topic->parts[p->id];
    int32_t me = a->b->cfg->broker_id;
    if (!a->level || v->leader != me)
        return;
    int64_t end = seg_log_end(p->log);
    for (int32_t i = 0; i < v->nisr; i++) {
        int32_t id = v->isr[i];
        if (id == me || !eligible(a->b, id))
            continue;
        bool known = false;
        for (int32_t k = 0; k < p->nfollowers && p->followers_epoch == p->leader_epoch; k++)
            if (p->followers[k].id == id)
                known = p->followers[k].log_end >= end;
        if (!known) {
            a->level = false;
            return;
        }
    }
}

static bool followers_level(bk_broker *b)
{
    struct level_arg a = { b, true };
    replica_replicas_foreach(b, replica_level, &a);
    return a.level;
}

/* From the SIGTERM to the exit, the drain included. */
bool cl_cluster_leaving(bk_broker *b)
{
    return b->cl && b->cl->cshut;
}

static void on_cs_created(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    if (r->rc != ZOK && r->rc != ZNODEEXISTS && b->cl && b->cl->cshut)
        BK_WARN("controlled shutdown: cannot create %s/%d (%s); retried", CS_PATH,
                (int)b->cfg->broker_id, cl_zk_rc_str(r->rc));
}

static void cs_request(bk_broker *b)
{
    char path[64];
    snprintf(path, sizeof path, CS_PATH "/%d", (int)b->cfg->broker_id);
    cl_zk_create(b->zk, path, NULL, -1, ZOO_EPHEMERAL, on_cs_created, NULL);
}

static void cs_finish(bk_broker *b, const char *how)
{
    struct cl_cshut *cs = b->cl->cshut;
    BK_INFO("controlled shutdown: %s", how);
    void (*done)(bk_broker *) = cs->done;
    cs->done = NULL;
    event_del(cs->poll);
    if (done)
        done(b);
}

static void on_cs_poll(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    bk_broker *b = arg;
    struct cl_cshut *cs = b->cl->cshut;
    if (!cs->done || b->stopping)
        return;                                   /* a second signal stopped it */
    cs->remaining = remaining(b);
    if (cs->remaining == 0) {
        cs_finish(b, "no leadership or ISR place left to move; stopping");
        return;
    }
    int64_t now = bk_mono_us() / 1000;
    bool attempt_over = now - cs->attempt_start_ms >= b->cfg->controlled_shutdown_retry_backoff_ms;
    if (!cs->asked) {
        if (!followers_level(b) && !attempt_over)
            return;
        BK_INFO("controlled shutdown: %s; asking controller %d to move %d partition(s)",
                attempt_over ? "followers not level in time" : "followers level",
                (int)view_controller_id(b), cs->remaining);
        cs->asked = true;
        cs->attempt_start_ms = now;               /* the first attempt starts here */
        cs_request(b);
        return;
    }
    if (!attempt_over)
        return;
    if (cs->attempt >= b->cfg->controlled_shutdown_max_retries) {
        char how[160];
        snprintf(how, sizeof how, "%d partition(s) not moved after %d attempt(s) "
                 "(controlled.shutdown.max.retries); stopping anyway", cs->remaining,
                 cs->attempt);
        cs_finish(b, how);
        return;
    }
    cs->attempt++;
    cs->attempt_start_ms = now;
    BK_WARN("controlled shutdown: %d partition(s) still to move; attempt %d of %d",
            cs->remaining, cs->attempt, (int)b->cfg->controlled_shutdown_max_retries);
    cs_request(b);
}

int cl_controlled_shutdown(bk_broker *b, void (*done)(bk_broker *b))
{
    bk_cluster *cl = b->cl;
    if (!cl || !b->cfg->controlled_shutdown_enable || cl->cshut || !cl->registered ||
        !cl_zk_connected(b->zk) || view_controller_id(b) < 0)
        return -1;                                /* nobody to ask: stop as before */
    if (remaining(b) == 0)
        return -1;
    struct cl_cshut *cs = calloc(1, sizeof *cs);
    if (!cs)
        return -1;
    cs->poll = event_new(b->base, -1, EV_PERSIST, on_cs_poll, b);
    struct timeval tv = { 0, CS_POLL_MS * 1000 };
    if (bk_event_add(cs->poll, &tv, "controlled shutdown poll") != 0) {
        if (cs->poll)
            event_free(cs->poll);
        free(cs);
        return -1;                                /* stop as before */
    }
    cs->done = done;
    cs->attempt = 1;
    cs->attempt_start_ms = bk_mono_us() / 1000;
    cl->cshut = cs;
    /* A leaving broker keeps fetching what it follows (its log stays as
     * complete as it can until it stops), but starts following nothing
     * new (repl_fetcher.c, cl_cluster_leaving): following the new leader of
     * what it led would first cut its log back to its high watermark,
     * which it may know late.  No leader takes it back into an ISR (L4). */
    repl_fetchers_update(b);
    BK_INFO("controlled shutdown: produce refused until the followers are level, then "
            "controller %d moves %d partition(s)", (int)view_controller_id(b), remaining(b));
    return 0;
}

bool cl_controlled_shutdown_running(bk_broker *b)
{
    return b->cl && b->cl->cshut && b->cl->cshut->done;
}

void cl_controlled_shutdown_end(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    if (!cl || !cl->cshut)
        return;
    char path[64];
    snprintf(path, sizeof path, CS_PATH "/%d", (int)b->cfg->broker_id);
    if (b->zk)
        cl_zk_delete_own_now(b->zk, path);
    event_free(cl->cshut->poll);
    free(cl->cshut);
    cl->cshut = NULL;
}

/* ---- the controller's part ------------------------------------------------------------ */

static void log_election(const char *topic, int32_t p, const bk_pview *v,
                         const md_partition_state *st, const char *why)
{
    BK_INFO("partition %s-%d: leader %d -> %d, leader epoch %d (%s)", topic, (int)p,
            (int)v->leader, (int)st->leader, (int)st->leader_epoch, why);
}

static int32_t first_eligible_in_isr(bk_broker *b, const bk_pview *v,
                                     const md_partition_state *st)
{
    for (int32_t i = 0; i < v->nreplicas; i++)
        if (has_id(st->isr, st->nisr, v->replicas[i]) && eligible(b, v->replicas[i]))
            return v->replicas[i];
    return -1;
}

bool cl_ctl_leaders_adjust(bk_broker *b, cl_topic *ct, const char *topic, int32_t p,
                        const bk_pview *v, md_partition_state *st)
{
    uint8_t mark = p < ct->nmarks ? ct->marks[p] : 0;
    bool changed = false, prefer = mark & CTL_MARK_PREFERRED;
    const char *why = NULL;
    char whybuf[64];
    if (mark)
        ct->marks[p] = 0;                         /* L5: decided now, done or not */
    if (st->leader >= 0 && cl_broker_shutting(b, st->leader)) {          /* L1 */
        int32_t lead = first_eligible_in_isr(b, v, st);
        if (lead >= 0) {
            snprintf(whybuf, sizeof whybuf, cl_broker_dir_failed(b, st->leader)
                     ? "log directory of broker %d failed" : "controlled shutdown of broker %d",
                     (int)st->leader);
            why = whybuf;
            st->leader = lead;
            changed = true;
        }
    }
    if (prefer && v->nreplicas > 0 && st->leader != v->replicas[0] &&
        has_id(st->isr, st->nisr, v->replicas[0]) && eligible(b, v->replicas[0])) {
        st->leader = v->replicas[0];
        why = "preferred replica";
        changed = true;
    }
    if (st->leader >= 0 && view_broker_alive(b, st->leader)) {             /* L2 */
        int32_t m = 0;
        for (int32_t i = 0; i < st->nisr; i++) {
            int32_t id = st->isr[i];
            bool dead = !view_broker_alive(b, id);
            bool bounce = !dead && (mark & CTL_MARK_BOUNCED) && bounced(b, id);    /* L7 */
            if (id == st->leader || (!cl_broker_shutting(b, id) && !bounce &&
                                     !(dead && (mark & CTL_MARK_DEAD))))
                st->isr[m++] = id;
            else
                BK_INFO("partition %s-%d: broker %d leaves the ISR (%s)", topic, (int)p,
                        (int)id, dead ? "broker gone" : bounce ? "it registered anew: "
                        "restarted, or its session expired" : cl_broker_dir_failed(b, id)
                        ? "its log directory failed" : "controlled shutdown");
        }
        if (m != st->nisr) {
            st->nisr = m;
            changed = true;
            cl_ctl_isr_counted(b, true);
        }
    }
    if (st->leader != v->leader) {
        st->leader_epoch = v->leader_epoch + 1;
        if (!why && v->leader >= 0 && cl_broker_dir_failed(b, v->leader)) {
            snprintf(whybuf, sizeof whybuf, "log directory of broker %d failed",
                     (int)v->leader);                 /* cluster_controller.c's failover */
            why = whybuf;
        }
        log_election(topic, p, v, st, why ? why : st->leader < 0 ? "no live ISR member"
                     : "leader gone");
    }
    return changed;
}

/* Kafka's onBrokerFailure: the replicas of a broker that just died leave
 * the ISRs they were in, so the high watermark need not wait
 * replica.lag.time.max.ms for them.  Only at the death (L5): a leader may
 * take a broker that is not registered into its ISR later (it fetched).
 * A broker that registered anew (L7) is marked the same way, as Kafka's
 * controller takes a bounced broker epoch for a failure and a start. */
struct dead_arg { const int32_t *gone; int ngone; uint8_t mark; bk_broker *b; };

static void mark_dead_topic(bk_topic *t, void *arg)
{
    struct dead_arg *a = arg;
    cl_topic *ct = NULL;
    for (int32_t p = 0; p < t->npartitions; p++) {
        const bk_pview *v = &t->parts[p];
        bool hit = false;
        for (int i = 0; i < a->ngone && !hit; i++)
            hit = a->gone[i] != v->leader && has_id(v->isr, v->nisr, a->gone[i]);
        if (!hit)
            continue;
        if (!ct && (!(ct = cl_mirror_topic(a->b, t->name, true)) || !marks_grow(ct, t->npartitions)))
            return;
        ct->marks[p] |= a->mark;
    }
}

void cl_ctl_leaders_brokers_changed(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    int32_t now[CL_MAX_BROKERS], gone[CL_MAX_BROKERS], anew[CL_MAX_BROKERS];
    int64_t czxid[CL_MAX_BROKERS];
    bool bounce[CL_MAX_BROKERS];
    int n = view_live_brokers(b, now, CL_MAX_BROKERS), ngone = 0, nanew = 0;
    if (n > CL_MAX_BROKERS)
        n = CL_MAX_BROKERS;
    for (int i = 0; i < cl->nseen_alive; i++)
        if (!has_id(now, n, cl->seen_alive[i]))
            gone[ngone++] = cl->seen_alive[i];
    for (int j = 0; j < n; j++) {                 /* L7: the same id, a new czxid */
        czxid[j] = cl_broker_czxid(b, now[j]);
        bounce[j] = false;
        for (int i = 0; i < cl->nseen_alive; i++) {
            if (cl->seen_alive[i] != now[j])
                continue;
            bool again = cl->seen_czxid[i] && czxid[j] && cl->seen_czxid[i] != czxid[j];
            bounce[j] = again || (cl->seen_bounced[i] && cl->seen_czxid[i] == czxid[j]);
            if (again) {
                anew[nanew++] = now[j];
                BK_INFO("broker %d registered anew (registration czxid %lld, was %lld): "
                        "it restarted or its session expired; it leaves the ISRs it was in",
                        (int)now[j], (long long)czxid[j], (long long)cl->seen_czxid[i]);
            }
        }
    }
    memcpy(cl->seen_alive, now, (size_t)n * sizeof *now);
    memcpy(cl->seen_czxid, czxid, (size_t)n * sizeof *czxid);
    memcpy(cl->seen_bounced, bounce, (size_t)n * sizeof *bounce);
    cl->nseen_alive = n;
    /* Every broker marks, not only the controller: when the controller
     * itself died, the broker elected next applies the marks in its
     * first reconcile. */
    if (ngone) {
        struct dead_arg a = { gone, ngone, CTL_MARK_DEAD, b };
        view_topics_foreach(b, mark_dead_topic, &a);
    }
    if (nanew) {
        struct dead_arg a = { anew, nanew, CTL_MARK_BOUNCED, b };
        view_topics_foreach(b, mark_dead_topic, &a);
    }
}

/* ---- preferred-leader election ----------------------------------------------------------- */

int cl_ctl_elect_preferred(bk_broker *b, const char *topic, int32_t p)
{
    bk_cluster *cl = b->cl;
    if (!cl || !cl->active)
        return KP_NOT_CONTROLLER;
    bk_topic *t = view_topic_find(b, topic, strlen(topic));
    if (!t || p < 0 || p >= t->npartitions)
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    const bk_pview *v = &t->parts[p];
    if (v->nreplicas == 0)
        return KP_PREFERRED_LEADER_NOT_AVAILABLE;
    if (v->leader == v->replicas[0] && view_broker_alive(b, v->leader))
        return KP_ELECTION_NOT_NEEDED;
    if (!has_id(v->isr, v->nisr, v->replicas[0]) || !eligible(b, v->replicas[0]))
        return KP_PREFERRED_LEADER_NOT_AVAILABLE;
    cl_topic *ct = cl_mirror_topic(b, topic, true);
    if (!ct || !marks_grow(ct, t->npartitions))
        return KP_UNKNOWN_SERVER_ERROR;
    ct->marks[p] |= CTL_MARK_PREFERRED;
    return KP_NONE;
}

/* Kafka's checkAndTriggerAutoLeaderRebalance: per preferred broker, the
 * share of its partitions led elsewhere; above the percentage, each of
 * those whose preferred replica could lead is marked. */
struct imbalance {
    bk_broker *b;
    int32_t ids[CL_MAX_BROKERS];
    int32_t total[CL_MAX_BROKERS], off[CL_MAX_BROKERS];
    int n;
    bool marking;
    int marked;
};

static int broker_slot(struct imbalance *im, int32_t id)
{
    for (int i = 0; i < im->n; i++)
        if (im->ids[i] == id)
            return i;
    return -1;
}

static void imbalance_topic(bk_topic *t, void *arg)
{
    struct imbalance *im = arg;
    bool any = false;
    for (int32_t p = 0; p < t->npartitions; p++) {
        const bk_pview *v = &t->parts[p];
        if (v->nreplicas == 0 || v->zk_version < 0)
            continue;
        int s = broker_slot(im, v->replicas[0]);
        if (s < 0)
            continue;                             /* preferred replica not alive */
        if (!im->marking) {
            im->total[s]++;
            im->off[s] += v->leader != v->replicas[0];
        } else if ((int64_t)im->off[s] * 100 >
                       (int64_t)im->total[s] * im->b->cfg->leader_imbalance_per_broker_percentage &&
                   cl_ctl_elect_preferred(im->b, t->name, p) == KP_NONE) {
            any = true;
            im->marked++;
        }
    }
    if (any)
        cl_ctl_reconcile(im->b, t->name);
}

static void check_imbalance(bk_broker *b)
{
    struct imbalance *im = calloc(1, sizeof *im);
    if (!im)
        return;
    im->b = b;
    im->n = view_live_brokers(b, im->ids, CL_MAX_BROKERS);
    if (im->n > CL_MAX_BROKERS)
        im->n = CL_MAX_BROKERS;
    view_topics_foreach(b, imbalance_topic, im);
    im->marking = true;
    view_topics_foreach(b, imbalance_topic, im);
    if (im->marked)
        BK_INFO("controller: leader imbalance: %d partition(s) moved back to their "
                "preferred replica", im->marked);
    free(im);
}

void cl_ctl_leaders_tick(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    int64_t now = bk_mono_us() / 1000;
    if (!cl->active || !b->cfg->auto_leader_rebalance_enable) {
        cl->imbalance_checked_ms = now;           /* a new controller waits an interval */
        return;
    }
    if (now - cl->imbalance_checked_ms < b->cfg->leader_imbalance_check_interval_seconds * 1000)
        return;
    cl->imbalance_checked_ms = now;
    check_imbalance(b);
}

/* ---- counters for /metrics ---------------------------------------------------------------- */

static uint64_t isr_shrinks, isr_expands;

void cl_ctl_isr_counted(bk_broker *b, bool shrink)
{
    (void)b;
    if (shrink)
        isr_shrinks++;
    else
        isr_expands++;
}

void cl_isr_counters(uint64_t *shrinks, uint64_t *expands)
{
    *shrinks = isr_shrinks;
    *expands = isr_expands;
}
