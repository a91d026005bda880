/*
 * The group coordinator: Kafka's classic group protocol, state in memory,
 * facts in SQLite.  This file keeps the group table, the rebalance state
 * machine, the timers, startup and shutdown; daemon/group/group_join.c the
 * member requests (JoinGroup with static membership, SyncGroup,
 * Heartbeat, LeaveGroup); daemon/group/group_offset_commit.c the offset APIs;
 * daemon/group/group_persist.c the persistence pipeline, the deferred answers
 * and group delete; daemon/group/group_api.c the wire parsing.
 *
 * Design note.
 *
 * Standalone, this broker coordinates every group (gc_coordinator_of,
 * asked by every group API through gc_coordinator_error).
 * The coordinator is protocol-agnostic, as Kafka's is: members send opaque
 * metadata per protocol, the leader runs the assignor client-side (range,
 * roundrobin, cooperative-sticky …) and sends opaque assignments back.
 * These files keep Kafka's GroupCoordinator semantics so clients' recovery
 * logic sees the errors it expects, in the places it expects them.
 *
 * States (Kafka's names) and who moves a group between them:
 *
 *     Empty ──join──► PreparingRebalance ──complete_join──► CompletingRebalance
 *       ▲                ▲    │ (all members rejoined, or                │
 *       │                │    │  rebalance timeout, or initial delay)    │ leader's
 *       │                │    └──no members left──► Empty                │ SyncGroup
 *       │                └── member joins/leaves/expires, leader rejoins ┤
 *       │                                                                ▼
 *       └───────────── (last member leaves: via Preparing) ◄───────── Stable
 *     Dead: DeleteGroups of an Empty group (gc_group_delete, group_persist.c:
 *     Dead until the delete is durable, then freed); retention frees an
 *     Empty group without offsets directly.
 *
 *   prepare_rebalance   Stable/Completing/Empty → Preparing.  From Empty it
 *                       waits group.initial.rebalance.delay.ms (extended
 *                       while new members keep arriving, up to the
 *                       rebalance timeout), as Kafka's InitialDelayedJoin.
 *   complete_join       Preparing → Completing (or Empty): drops dynamic
 *                       members that did not rejoin, bumps the generation,
 *                       picks the protocol all members support with the
 *                       most first-choice votes, answers every JoinGroup
 *                       (the leader's with the member list).
 *   gc_sync (leader)    Completing → Stable: stores assignments, answers
 *                       every waiting SyncGroup (group_join.c).
 *
 * Answers are never sent from inside a state change: a JoinGroup in a
 * rebalance or a SyncGroup before the leader's is deferred (the member
 * holds a gc_wait), its answer written into the request's buffer and
 * queued; group_persist.c sends it once the state it reflects is durable
 * (its invariants: group_persist.c C1, C2, C5-C7).
 *
 * Timers (libevent, no polling): one session timer per member, re-armed
 * lazily (a heartbeat only stamps last_seen_us; the timer re-checks when it
 * fires), one join timer per group, one timer per pending member id, one
 * retention timer.  Nothing here writes SQLite per heartbeat.
 *
 * Persistence: a group is marked dirty at each state change (and when a
 * static member is replaced without a rebalance); the end-of-turn event
 * (group_persist.c) writes dirty groups with their members.  After a
 * restart groups come back Empty with their generation, protocol type and
 * offsets; members are not restored as live — they get UNKNOWN_MEMBER_ID
 * and rejoin, which clients do on their own.  In cluster mode the group's
 * log decides instead (group_log.c): a new coordinator has the group as
 * its last completed rebalance stored it, Stable with its members.
 *
 * Invariants (C1, C2, C5-C7: group_persist.c):
 *   C3. Every member has a pending session timer; every group in
 *       PreparingRebalance has a pending join timer.
 *   C4. g->leader names a member of g, or is NULL iff g has no members.
 */
#include "daemon/group/group_int.h"
#include "daemon/md_sync.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

gc_coord *gc;

const char *gc_state_name(enum gc_state s)
{
    switch (s) {
    case GC_EMPTY: return "Empty";
    case GC_PREPARING: return "PreparingRebalance";
    case GC_COMPLETING: return "CompletingRebalance";
    case GC_STABLE: return "Stable";
    case GC_DEAD: return "Dead";
    }
    return "Dead";
}

/* Cluster mode: the leader of the group's partition of __consumer_offsets
 * (daemon/group/group_log.c), so the group's state is where its coordinator's
 * death cannot lose it.  -1: none yet. */
int32_t gc_coordinator_of(bk_broker *b, const char *group)
{
    if (!bk_cluster_mode(b))
        return b->cfg->broker_id;
    return gc_log_coordinator_of(b, group, strlen(group));
}

/* The coordinator question, in one place for every group API: NOT_COORDINATOR
 * when another broker coordinates group id (cluster mode; standalone this
 * broker coordinates them all), else 0.  The handlers place the error where
 * their version wants it. */
int16_t gc_coordinator_error(kp_str id)
{
    char small[256], *name = small;
    size_t len = id.len > 0 ? (size_t)id.len : 0;
    if (len >= sizeof small && !(name = malloc(len + 1)))
        return KP_COORDINATOR_NOT_AVAILABLE;
    if (len)
        memcpy(name, id.p, len);
    name[len] = 0;
    int16_t err = !bk_cluster_mode(gc->b) ? KP_NONE : gc_log_coordinator_error(gc->b, name, len);
    if (name != small)
        free(name);
    return err;
}

char *gc_strndup(const char *p, int32_t len)
{
    if (len < 0)
        return NULL;
    char *s = malloc((size_t)len + 1);
    if (!s)
        return NULL;
    if (len)
        memcpy(s, p, (size_t)len);
    s[len] = 0;
    return s;
}

bool gc_str_eq(const char *a, const char *p, size_t len)
{
    return a && strlen(a) == len && !memcmp(a, p, len);
}

void gc_tv_ms(struct timeval *tv, int64_t ms)
{
    if (ms < 0)
        ms = 0;
    tv->tv_sec = (time_t)(ms / 1000);
    tv->tv_usec = (suseconds_t)(ms % 1000) * 1000;
}

/* ---- the group table ------------------------------------------------------ */

static size_t hash_str(const char *p, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return (size_t)h;
}

gc_group *gc_group_find(const char *id, size_t len)
{
    if (!gc || !id)
        return NULL;
    for (gc_group *g = gc->hash[hash_str(id, len) % gc->hash_size]; g; g = g->hnext)
        if (gc_str_eq(g->id, id, len))
            return g;
    return NULL;
}

static void hash_grow(void)
{
    size_t ns = gc->hash_size * 2;
    gc_group **nh = calloc(ns, sizeof *nh);
    if (!nh)
        return;                       /* longer chains; still correct */
    for (size_t i = 0; i < gc->hash_size; i++)
        for (gc_group *g = gc->hash[i], *next; g; g = next) {
            next = g->hnext;
            size_t k = hash_str(g->id, strlen(g->id)) % ns;
            g->hnext = nh[k];
            nh[k] = g;
        }
    free(gc->hash);
    gc->hash = nh;
    gc->hash_size = ns;
}

static void join_timer_cb(evutil_socket_t fd, short what, void *arg);

gc_group *gc_group_create(const char *id, size_t len)
{
    gc_group *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->id = gc_strndup(id, (int32_t)len);
    g->join_timer = evtimer_new(gc->b->base, join_timer_cb, g);
    if (!g->id || !g->join_timer) {
        free(g->id);
        if (g->join_timer)
            event_free(g->join_timer);
        free(g);
        return NULL;
    }
    g->members.next = g->members.prev = &g->members;
    g->state = GC_EMPTY;
    g->state_changed_at = bk_now_ms();
    if (gc->ngroups + 1 > gc->hash_size)
        hash_grow();
    size_t k = hash_str(id, len) % gc->hash_size;
    g->hnext = gc->hash[k];
    gc->hash[k] = g;
    gc->ngroups++;
    return g;
}

void gc_member_free(gc_member *m)
{
    if (m->session_timer)
        event_free(m->session_timer);
    for (int i = 0; i < m->nprotos; i++) {
        free(m->protos[i].name);
        free(m->protos[i].meta);
    }
    free(m->protos);
    free(m->id);
    free(m->instance_id);
    free(m->client_id);
    free(m->client_host);
    free(m->protocol_type);
    free(m->assignment);
    free(m);
}

static void pending_free(gc_pending *p)
{
    if (p->timer)
        event_free(p->timer);
    free(p->id);
    free(p);
}

void gc_group_free(gc_group *g)
{
    gc_group **pp = &gc->hash[hash_str(g->id, strlen(g->id)) % gc->hash_size];
    for (; *pp; pp = &(*pp)->hnext)
        if (*pp == g) {
            *pp = g->hnext;
            gc->ngroups--;
            break;
        }
    for (gc_group **d = &gc->dirty; *d; d = &(*d)->dirty_next)
        if (*d == g) {
            *d = g->dirty_next;
            break;
        }
    gc_store_cancel(g);
    while (g->members.next != &g->members) {
        gc_member *m = g->members.next;
        m->prev->next = m->next;
        m->next->prev = m->prev;
        gc_wait_drop(m->join_w);
        gc_wait_drop(m->sync_w);
        gc_member_free(m);
    }
    while (g->pending) {
        gc_pending *p = g->pending;
        g->pending = p->next;
        pending_free(p);
    }
    event_free(g->join_timer);
    free(g->id);
    free(g->protocol_type);
    free(g->protocol);
    free(g->leader);
    free(g);
}

void gc_group_unload(gc_group *g)
{
    for (gc_member *m = g->members.next; m != &g->members; m = m->next) {
        gc_answer_join_error(m, KP_NOT_COORDINATOR, m->id);
        gc_answer_sync(m, KP_NOT_COORDINATOR);
    }
    gc_group_free(g);
}

gc_member *gc_member_find(gc_group *g, const char *id, size_t len)
{
    for (gc_member *m = g->members.next; m != &g->members; m = m->next)
        if (gc_str_eq(m->id, id, len))
            return m;
    return NULL;
}

gc_member *gc_member_of(gc_group *g, kp_str member_id)
{
    return gc_member_find(g, member_id.p ? member_id.p : "",
                          member_id.len > 0 ? (size_t)member_id.len : 0);
}

gc_group *gc_member_group(kp_str group_id, int16_t *err)
{
    gc_group *g = NULL;
    if (group_id.len <= 0)
        *err = KP_INVALID_GROUP_ID;
    else if ((*err = gc_coordinator_error(group_id)) == KP_NONE &&
             !(g = gc_group_find(group_id.p, (size_t)group_id.len)))
        *err = KP_UNKNOWN_MEMBER_ID;
    return g;
}

gc_member *gc_static_member(gc_group *g, const char *instance, size_t len)
{
    for (gc_member *m = g->members.next; m != &g->members; m = m->next)
        if (m->instance_id && gc_str_eq(m->instance_id, instance, len))
            return m;
    return NULL;
}

/* Kafka's isStaticMemberFenced: the instance id is known under another
 * member id. */
bool gc_static_fenced(gc_group *g, kp_str member_id, kp_str instance_id)
{
    if (instance_id.len < 0)
        return false;
    gc_member *s = gc_static_member(g, instance_id.p, (size_t)instance_id.len);
    return s && !gc_str_eq(s->id, member_id.p ? member_id.p : "",
                        member_id.len > 0 ? (size_t)member_id.len : 0);
}

bool gc_is_pending(gc_group *g, const char *id, size_t len)
{
    for (gc_pending *p = g->pending; p; p = p->next)
        if (gc_str_eq(p->id, id, len))
            return true;
    return false;
}

void gc_remove_pending(gc_group *g, const char *id, size_t len)
{
    for (gc_pending **pp = &g->pending; *pp; pp = &(*pp)->next)
        if (gc_str_eq((*pp)->id, id, len)) {
            gc_pending *p = *pp;
            *pp = p->next;
            pending_free(p);
            return;
        }
}

/* A pending member that leaves or never comes back. */
void gc_leave_pending(gc_group *g, const char *id, size_t len)
{
    gc_remove_pending(g, id, len);
    if (g->state == GC_PREPARING)
        gc_try_complete_join(g);
}

static void pending_expire_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    gc_pending *p = arg;
    gc_group *g = p->g;
    BK_INFO("group %s: pending member %s did not rejoin within its session timeout",
            g->id, p->id);
    char *id = strdup(p->id);
    if (id)
        gc_leave_pending(g, id, strlen(id));
    free(id);
}

void gc_add_pending(gc_group *g, const char *id, int32_t session_ms)
{
    gc_pending *p = calloc(1, sizeof *p);
    if (!p)
        return;
    p->g = g;
    p->id = strdup(id);
    p->timer = evtimer_new(gc->b->base, pending_expire_cb, p);
    if (!p->id || !p->timer) {
        pending_free(p);
        return;
    }
    struct timeval tv;
    gc_tv_ms(&tv, session_ms);
    if (bk_event_add(p->timer, &tv, "pending member's session") != 0) {
        pending_free(p);               /* as if never pending: it joins again */
        return;
    }
    p->next = g->pending;
    g->pending = p;
}

/* ---- state, persistence ------------------------------------------------------ */

void gc_mark_dirty(gc_group *g)
{
    if (!g->dirty) {
        g->dirty = true;
        g->dirty_next = gc->dirty;
        gc->dirty = g;
    }
    gc_schedule_turn();
}

void gc_set_state(gc_group *g, enum gc_state s)
{
    g->state = s;
    g->state_changed_at = bk_now_ms();
    gc_mark_dirty(g);
}

const gc_proto *gc_member_proto(const gc_member *m, const char *name)
{
    if (!name)
        return m->nprotos ? &m->protos[0] : NULL;
    for (int i = 0; i < m->nprotos; i++)
        if (!strcmp(m->protos[i].name, name))
            return &m->protos[i];
    return NULL;
}

/* ---- members ----------------------------------------------------------------- */

void gc_touch(gc_member *m)
{
    m->last_seen_us = bk_mono_us();
}


void gc_arm_session(gc_member *m)
{
    int64_t now = bk_mono_us();
    int64_t due_us = m->last_seen_us + (int64_t)m->session_timeout_ms * 1000;
    if (m->join_w || m->sync_w)
        due_us = now + (int64_t)m->session_timeout_ms * 1000;
    struct timeval tv;
    gc_tv_ms(&tv, (due_us - now + 999) / 1000);
    /* Unarmed, the member is not expired by time; it still leaves, and is
     * re-armed at its next heartbeat. */
    bk_event_add(m->session_timer, &tv, "member session");
}

void gc_session_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    gc_member *m = arg;
    gc_group *g = m->g;
    int64_t now = bk_mono_us();
    /* Kafka's shouldKeepAlive: a member waiting for its JoinGroup or
     * SyncGroup answer cannot heartbeat (its connection is muted), so it
     * is alive; except a new member stuck in a join for 5 minutes. */
    if (m->join_w && m->is_new &&
        now - m->last_seen_us >= (int64_t)GC_NEW_MEMBER_JOIN_TIMEOUT_MS * 1000) {
        BK_INFO("group %s: new member %s did not complete its join; removing it",
                g->id, m->id);
        gc_remove_member_and_update(g, m, "new member join timeout");
        return;
    }
    if (m->join_w || m->sync_w ||
        now < m->last_seen_us + (int64_t)m->session_timeout_ms * 1000) {
        gc_arm_session(m);
        return;
    }
    BK_INFO("group %s: member %s has failed (no heartbeat within session.timeout.ms=%d), "
            "removing it from the group", g->id, m->id, m->session_timeout_ms);
    gc_remove_member_and_update(g, m, "session timeout");
}

bool gc_member_supports(const gc_member *m, const char *p, size_t len)
{
    for (int i = 0; i < m->nprotos; i++)
        if (gc_str_eq(m->protos[i].name, p, len))
            return true;
    return false;
}

/* Kafka's selectProtocol: among the protocols every member supports, the
 * one most members list first (ties: the first member's preference). */
char *gc_select_protocol(gc_group *g)
{
    gc_member *first = g->members.next;
    if (first == &g->members)
        return NULL;
    int best = -1, best_votes = -1;
    int *votes = calloc((size_t)first->nprotos + 1, sizeof *votes);
    if (!votes)
        return NULL;
    bool *cand = calloc((size_t)first->nprotos + 1, sizeof *cand);
    if (!cand) {
        free(votes);
        return NULL;
    }
    for (int i = 0; i < first->nprotos; i++) {
        cand[i] = true;
        for (gc_member *m = first->next; m != &g->members; m = m->next)
            if (!gc_member_supports(m, first->protos[i].name, strlen(first->protos[i].name)))
                cand[i] = false;
    }
    for (gc_member *m = first; m != &g->members; m = m->next)
        for (int j = 0; j < m->nprotos; j++) {
            int k = -1;
            for (int i = 0; i < first->nprotos; i++)
                if (cand[i] && !strcmp(first->protos[i].name, m->protos[j].name))
                    k = i;
            if (k >= 0) {
                votes[k]++;
                break;
            }
        }
    for (int i = 0; i < first->nprotos; i++)
        if (cand[i] && votes[i] > best_votes) {
            best = i;
            best_votes = votes[i];
        }
    char *out = best >= 0 ? strdup(first->protos[best].name) : NULL;
    free(votes);
    free(cand);
    return out;
}

void gc_set_leader(gc_group *g, const char *id)
{
    free(g->leader);
    g->leader = id ? strdup(id) : NULL;
}

void gc_group_add(gc_group *g, gc_member *m)
{
    if (g->nmembers == 0) {
        free(g->protocol_type);
        g->protocol_type = m->protocol_type ? strdup(m->protocol_type) : NULL;
    }
    m->g = g;
    m->prev = g->members.prev;
    m->next = &g->members;
    g->members.prev->next = m;
    g->members.prev = m;
    g->nmembers++;
    if (!g->leader)
        gc_set_leader(g, m->id);
}

/* Unlinks and frees m; its waits must already be answered or dropped. */
static void group_remove(gc_group *g, gc_member *m)
{
    m->prev->next = m->next;
    m->next->prev = m->prev;
    g->nmembers--;
    if (g->leader && !strcmp(g->leader, m->id))
        gc_set_leader(g, g->nmembers ? g->members.next->id : NULL);
    gc_member_free(m);
}

void gc_answer_join_error(gc_member *m, int16_t err, const char *member_id)
{
    gc_wait *w = m->join_w;
    if (!w)
        return;
    m->join_w = NULL;
    gc_write_join(w->r, err, NULL, "", member_id, NULL);
    gc_wait_answered(w);
}

void gc_answer_sync(gc_member *m, int16_t err)
{
    gc_wait *w = m->sync_w;
    if (!w)
        return;
    m->sync_w = NULL;
    gc_write_sync(w->r, err, err == KP_NONE ? m : NULL);
    gc_wait_answered(w);
}

static int32_t rebalance_timeout(gc_group *g)
{
    int32_t t = 0;
    for (gc_member *m = g->members.next; m != &g->members; m = m->next)
        if (m->rebalance_timeout_ms > t)
            t = m->rebalance_timeout_ms;
    return t;
}

static void arm_join_timer(gc_group *g, int64_t ms)
{
    struct timeval tv;
    gc_tv_ms(&tv, ms);
    /* Unarmed, the rebalance completes once every member has joined. */
    bk_event_add(g->join_timer, &tv, "group join");
}

static void prepare_rebalance(gc_group *g, const char *why)
{
    gc_store_cancel(g);               /* its outcome no longer matters */
    if (g->state == GC_COMPLETING)
        for (gc_member *m = g->members.next; m != &g->members; m = m->next) {
            free(m->assignment);
            m->assignment = NULL;
            m->assignment_len = 0;
            gc_answer_sync(m, KP_REBALANCE_IN_PROGRESS);
            gc_touch(m);
        }
    bool initial = g->state == GC_EMPTY;
    int32_t rto = rebalance_timeout(g);
    gc_set_state(g, GC_PREPARING);
    BK_INFO("group %s: preparing to rebalance (generation %d, %d members): %s",
            g->id, g->generation, g->nmembers, why);
    g->new_member_added = false;
    if (initial) {
        int64_t delay = gc->b->cfg->group_initial_rebalance_delay_ms;
        g->initial_delay = true;
        g->initial_remaining_ms = rto - delay > 0 ? rto - delay : 0;
        arm_join_timer(g, delay);
    } else {
        g->initial_delay = false;
        arm_join_timer(g, rto);
        gc_try_complete_join(g);
    }
}

void gc_maybe_prepare_rebalance(gc_group *g, const char *why)
{
    if (g->state == GC_STABLE || g->state == GC_COMPLETING || g->state == GC_EMPTY)
        prepare_rebalance(g, why);
}

void gc_remove_member_and_update(gc_group *g, gc_member *m, const char *why)
{
    /* A removed member's waiting requests learn it at once. */
    gc_answer_join_error(m, KP_UNKNOWN_MEMBER_ID, "");
    gc_answer_sync(m, KP_UNKNOWN_MEMBER_ID);
    group_remove(g, m);
    switch (g->state) {
    case GC_STABLE:
    case GC_COMPLETING:
        gc_maybe_prepare_rebalance(g, why);
        break;
    case GC_PREPARING:
        gc_try_complete_join(g);
        break;
    default:
        break;
    }
}

static bool elect_joined_leader(gc_group *g)
{
    if (!g->leader)
        return false;
    gc_member *l = gc_member_find(g, g->leader, strlen(g->leader));
    if (l && l->join_w)
        return true;
    for (gc_member *m = g->members.next; m != &g->members; m = m->next)
        if (m->join_w) {
            BK_INFO("group %s: leader %s did not rejoin; %s leads", g->id, g->leader, m->id);
            gc_set_leader(g, m->id);
            return true;
        }
    return false;
}

static void complete_join(gc_group *g)
{
    evtimer_del(g->join_timer);
    g->initial_delay = false;
    for (gc_member *m = g->members.next, *next; m != &g->members; m = next) {
        next = m->next;
        if (!m->join_w && !m->instance_id) {
            BK_INFO("group %s: member %s did not rejoin in time; removing it", g->id, m->id);
            gc_answer_sync(m, KP_UNKNOWN_MEMBER_ID);
            group_remove(g, m);
        }
    }
    if (!elect_joined_leader(g) && g->nmembers > 0) {
        /* Only static members that did not rejoin remain: wait another
         * rebalance timeout, until their session timeouts remove them. */
        BK_WARN("group %s could not complete rebalance because no members rejoined", g->id);
        arm_join_timer(g, rebalance_timeout(g));
        return;
    }
    g->generation++;
    free(g->protocol);
    g->protocol = NULL;
    if (g->nmembers == 0) {
        gc_set_state(g, GC_EMPTY);
        BK_INFO("group %s with generation %d is now empty", g->id, g->generation);
        /* Kafka's onCompleteJoin stores the Empty group, waited for by
         * nobody (a failure is only logged). */
        if (bk_cluster_mode(gc->b))
            (void)gc_log_group_store(gc->b, g, NULL);
        return;
    }
    g->protocol = gc_select_protocol(g);
    gc_set_state(g, GC_COMPLETING);
    BK_INFO("group %s: stabilized generation %d with %d members, protocol %s, leader %s",
            g->id, g->generation, g->nmembers, g->protocol ? g->protocol : "-", g->leader);
    for (gc_member *m = g->members.next; m != &g->members; m = m->next) {
        gc_wait *w = m->join_w;
        if (w) {
            m->join_w = NULL;
            bool leads = !strcmp(m->id, g->leader);
            gc_write_join(w->r, KP_NONE, g, g->leader, m->id, leads ? g : NULL);
            gc_wait_answered(w);
        }
        gc_touch(m);
        m->is_new = false;
    }
}

static bool all_joined(gc_group *g)
{
    if (g->pending)
        return false;
    for (gc_member *m = g->members.next; m != &g->members; m = m->next)
        if (!m->join_w)
            return false;
    return true;
}

void gc_try_complete_join(gc_group *g)
{
    if (g->state == GC_PREPARING && !g->initial_delay && all_joined(g))
        complete_join(g);
}

static void join_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    gc_group *g = arg;
    if (g->state != GC_PREPARING)
        return;
    if (g->initial_delay && g->new_member_added && g->initial_remaining_ms > 0) {
        int64_t delay = gc->b->cfg->group_initial_rebalance_delay_ms;
        if (delay > g->initial_remaining_ms)
            delay = g->initial_remaining_ms;
        g->new_member_added = false;
        g->initial_remaining_ms -= delay;
        arm_join_timer(g, delay);
        return;
    }
    complete_join(g);
}

/* ---- startup and shutdown ------------------------------------------------------ */

static int load_group(const md_group *rec, void *arg)
{
    (void)arg;
    gc_group *g = gc_group_create(rec->group_id, strlen(rec->group_id));
    if (!g)
        return -1;
    g->generation = rec->generation;
    g->protocol_type = rec->protocol_type ? strdup(rec->protocol_type) : NULL;
    /* Members are not restored as live: the group comes back Empty and
     * they rejoin (their old member ids get UNKNOWN_MEMBER_ID). */
    if (!strcmp(rec->state, "Empty") && rec->nmembers == 0) {
        g->state_changed_at = rec->state_changed_at;
    } else {
        g->dirty = true;
        g->dirty_next = gc->dirty;
        gc->dirty = g;
    }
    return 0;
}

/* SIGTERM/SIGINT: joins and syncs waiting for other members would hold
 * the shutdown drain; answer them now (Kafka answers NOT_COORDINATOR when
 * a coordinator unloads a group), so clients go and look for one. */
static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what; (void)arg;
    for (size_t i = 0; i < gc->hash_size; i++)
        for (gc_group *g = gc->hash[i]; g; g = g->hnext)
            for (gc_member *m = g->members.next; m != &g->members; m = m->next) {
                gc_answer_join_error(m, KP_NOT_COORDINATOR, m->id);
                gc_answer_sync(m, KP_NOT_COORDINATOR);
            }
}

int gc_groups_init(bk_broker *b)
{
    gc = calloc(1, sizeof *gc);
    if (!gc)
        return -1;
    gc->b = b;
    gc->hash_size = 64;
    gc->hash = calloc(gc->hash_size, sizeof *gc->hash);
    gc->outbox.next = gc->outbox.prev = &gc->outbox;
    gc->batch.next = gc->batch.prev = &gc->batch;
    gc->synced.next = gc->synced.prev = &gc->synced;
    gc->jobs_tail = &gc->jobs;
    gc->turn_ev = event_new(b->base, -1, 0, gc_turn_cb, NULL);
    gc->linger_ev = evtimer_new(b->base, gc_turn_cb, NULL);
    gc->expire_timer = event_new(b->base, -1, EV_PERSIST, gc_expire_tick, NULL);
    gc->sig_term = evsignal_new(b->base, SIGTERM, on_stop, NULL);
    gc->sig_int = evsignal_new(b->base, SIGINT, on_stop, NULL);
    if (!gc->hash || !gc->turn_ev || !gc->linger_ev || !gc->expire_timer || !gc->sig_term ||
        !gc->sig_int) {
        BK_ERROR("group coordinator: out of memory");
        return -1;
    }
    /* Walk first, write after: md_group_foreach holds a read statement.
     * Cluster mode: only a coordinator holds a group, loaded from its
     * partition of __consumer_offsets (group_log.c G5), not from here. */
    if (!bk_cluster_mode(b) && md_group_foreach(b->db, load_group, NULL) != 0) {
        BK_ERROR("group coordinator: cannot load groups from the metadata store");
        return -1;
    }
    gc_save_dirty_now();
    if (bk_cluster_mode(b) && gc_log_start(b) != 0)
        return -1;
    bk_mdsync_listen(gc_on_durable);
    struct timeval tv;
    gc_tv_ms(&tv, b->cfg->offsets_retention_check_interval_ms);
    if (bk_event_add(gc->expire_timer, &tv, "offsets retention check") != 0 ||
        bk_event_add(gc->sig_term, NULL, "coordinator SIGTERM") != 0 ||
        bk_event_add(gc->sig_int, NULL, "coordinator SIGINT") != 0)
        return -1;
    BK_INFO("group coordinator: %zu groups loaded (members rejoin), "
            "group.initial.rebalance.delay.ms=%lld", gc->ngroups,
            (long long)b->cfg->group_initial_rebalance_delay_ms);
    return 0;
}

void gc_groups_shutdown(bk_broker *b)
{
    (void)b;
    if (!gc)
        return;
    /* Connections are closed (their waits cancelled); keep what changed,
     * and let the worker finish every job before they are freed. */
    gc_save_dirty_now();
    bk_mdsync_listen(NULL);
    for (size_t i = 0; i < gc->hash_size; i++)
        while (gc->hash[i])
            gc_group_free(gc->hash[i]);
    /* Commits still queued belong to closed connections or stopped SQL
     * workers (both cancel theirs first): nobody waits for them. */
    gc_wait *lists[3] = { &gc->outbox, &gc->batch, &gc->synced };
    for (int i = 0; i < 3; i++)
        while (lists[i]->next != lists[i])
            gc_wait_drop(lists[i]->next);
    gc_log_stop();
    gc_jobs_free();
    event_free(gc->turn_ev);
    event_free(gc->linger_ev);
    event_free(gc->expire_timer);
    event_free(gc->sig_term);
    event_free(gc->sig_int);
    free(gc->hash);
    free(gc);
    gc = NULL;
}
