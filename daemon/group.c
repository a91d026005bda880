/*
 * The group coordinator: Kafka's classic group protocol, state in memory,
 * facts in SQLite.
 *
 * Design note.
 *
 * Standalone, this broker coordinates every group (bk_coordinator_of).
 * The coordinator is protocol-agnostic, as Kafka's is: members send opaque
 * metadata per protocol, the leader runs the assignor client-side (range,
 * roundrobin, cooperative-sticky …) and sends opaque assignments back.
 * This file keeps Kafka's GroupCoordinator semantics so clients' recovery
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
 *     Dead: DeleteGroups of an Empty group (then freed) or retention.
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
 *                       every waiting SyncGroup.
 *
 * Deferred responses.  A JoinGroup in a rebalance and a SyncGroup before
 * the leader's are answered later (BK_DEFER): the member holds a gc_wait.
 * Answers are never sent from inside a state change: they are written
 * into the request's response buffer and queued on the outbox, which one
 * event per loop turn drains *after* handing the turn's writes (dirty
 * groups + offset commits) to the metadata sync worker as one job
 * (daemon/group_job.c, daemon/md_sync.c): the worker writes the job in
 * one transaction on its own connection, then fdatasyncs the WAL.  The
 * turn parks its answers on the synced list, tagged with that sync's
 * number; they leave when the worker reports it done (on_durable).  Turns
 * that end while a sync runs submit nothing: their commits and state
 * changes wait in the batch and on_durable submits them as one job,
 * covered by the next sync — one job, one transaction and one fdatasync
 * per sync cycle however many turns and requests it covers (C6); and
 * commits wait, at most offsets.commit.linger.ms, for the commits other
 * connections are due to send (C7).  So (1) no handler is
 * re-entered while a group is half-updated (bk_req_finish may serve the
 * next pipelined request on that connection), and (2) a response that
 * reflects a state change or acknowledges a commit leaves only once that
 * state is durable, and the loop never waits for the disk.
 * If a connection dies, r->cancel drops the wait but keeps the member:
 * the session timeout decides whether it is gone.  (While a request is
 * deferred the connection is muted, so, as in Kafka, a close is usually
 * noticed only when the answer is written; a member whose JoinGroup
 * answer went nowhere is then evicted by its session timeout.)
 *
 * Timers (libevent, no polling): one session timer per member, re-armed
 * lazily (a heartbeat only stamps last_seen_us; the timer re-checks when it
 * fires), one join timer per group, one timer per pending member id, one
 * retention timer.  Nothing here writes SQLite per heartbeat.
 *
 * Persistence: a group is marked dirty at each state change (and when a
 * static member is replaced without a rebalance); the turn event writes
 * dirty groups with their members.  After a restart groups come back Empty
 * with their generation, protocol type and offsets; members are not
 * restored as live — they get UNKNOWN_MEMBER_ID and rejoin, which clients
 * do on their own.
 *
 * Invariants:
 *   C1. A gc_wait is in exactly one place: held by a member (join_w or
 *       sync_w, w->m set), in the outbox, in the commit batch, or in
 *       the synced list.
 *   C2. Only finish_synced (from the turn event or the sync worker's
 *       completion) calls bk_req_finish, and only for waits whose seq the
 *       worker has reported durable.
 *   C5. The synced list is in non-decreasing seq order (a turn tags its
 *       answers with the newest sequence number requested).
 *   C6. The turn event submits its job only when no sync is in flight
 *       (requested == durable); otherwise on_durable submits it when a
 *       sync finishes.  So at most one job per finished sync while syncs
 *       run back to back, and every pending batch, outbox and dirty group
 *       is submitted by the end of the sync in flight, or, under C7, when
 *       linger_ev fires after it.  Group rows reach
 *       SQLite only through jobs, in order (md_sync.c S5), so an older
 *       state never overwrites a newer one.
 *   C7. A batch of commits is submitted at once when no connection
 *       outside it is due to commit within offsets.commit.linger.ms of
 *       the batch's first commit (or three quarters of a batched
 *       connection's pace, if shorter); else when the due ones have come,
 *       are late, or that time has passed (daemon/commit_cadence.h learns
 *       each connection's pace from its commits); linger_ev runs the turn
 *       then.  Independent consumers do not commit in step: with each
 *       commit submitted on its own, 2,500 OffsetCommits/s from ten
 *       connections spread evenly made ~2,400 jobs and fdatasyncs a
 *       second (each fdatasync costs ~100 µs of CPU in this VM's
 *       block-device exits) and took 45 % of a core; waiting for the due
 *       ones (windows of up to 3 ms), ~270, at ~16 %.  A lone committer, or a
 *       connection that commits once, never waits: nothing is due to join
 *       it; consumers committing back to back re-commit right after each
 *       write and share the next one without waiting out the linger
 *       (ten of them: ~140k partition-commits/s, against ~76k when jobs
 *       were spaced a fixed 1 ms apart).  A sync in flight (C6) adds to
 *       the wait, and while commits wait, so do the turn's other answers
 *       (JoinGroup, SyncGroup) and dirty groups: a few ms, against
 *       rebalances that take seconds.  The price: the loop's own
 *       rare writes (recovery points, admin changes) may wait for the
 *       SQLite write lock behind a job (db.c busy_nap), and the worker
 *       runs at nice 19 (md_sync.c S7); a commit still in the batch when
 *       DeleteGroups runs is stored after the delete, as a commit that
 *       came after it.
 *   C3. Every member has a pending session timer; every group in
 *       PreparingRebalance has a pending join timer.
 *   C4. g->leader names a member of g, or is NULL iff g has no members.
 */
#include "daemon/group.h"
#include "daemon/md_sync.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

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

int32_t bk_coordinator_of(bk_broker *b, const char *group)
{
    (void)group;                      /* cluster mode will hash it */
    return b->cfg->broker_id;
}

/* The one path that deletes a group (DeleteGroups, the SQL surface): only
 * an Empty group, or one the coordinator does not hold, goes; its rows and
 * committed offsets leave SQLite first, then the in-memory group. */
int bk_group_delete(bk_broker *b, const char *id, char *err, size_t errlen)
{
    gc_group *g = gc ? gc_group_find(id, strlen(id)) : NULL;
    if (g && g->state != GC_EMPTY) {
        snprintf(err, errlen, "The group %s is not empty (state %s); stop its "
                 "consumers first.", id, gc_state_name(g->state));
        return KP_NON_EMPTY_GROUP;
    }
    /* A job in flight may still write this group's rows or offsets: let
     * it finish first, or they would come back after the delete.  Rare
     * (an admin's DeleteGroups), and md_group_delete syncs on the loop
     * anyway (db.c D2). */
    if (gc)
        gc_jobs_wait();
    int rc = md_group_delete(b->db, id, err, errlen);
    if (rc == KP_GROUP_ID_NOT_FOUND && !g) {
        snprintf(err, errlen, "The group id %s does not exist.", id);
        return rc;
    }
    if (rc != KP_NONE && rc != KP_GROUP_ID_NOT_FOUND) {
        BK_ERROR("deleting group %s failed: %s", id, err);
        return KP_UNKNOWN_SERVER_ERROR;
    }
    if (g) {
        g->state = GC_DEAD;
        gc_group_free(g);
    }
    BK_INFO("group %s deleted (with its committed offsets)", id);
    return KP_NONE;
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

static bool str_eq(const char *a, const char *p, size_t len)
{
    return a && strlen(a) == len && !memcmp(a, p, len);
}

static void tv_ms(struct timeval *tv, int64_t ms)
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
        if (str_eq(g->id, id, len))
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

static void member_free(gc_member *m)
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

/* Drops a wait a member holds without answering it (shutdown only). */
static void wait_drop(gc_wait *w)
{
    if (!w)
        return;
    w->r->cancel = NULL;
    w->r->state = NULL;
    gc_wait_unlink(w);
    free(w);
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
    while (g->members.next != &g->members) {
        gc_member *m = g->members.next;
        m->prev->next = m->next;
        m->next->prev = m->prev;
        wait_drop(m->join_w);
        wait_drop(m->sync_w);
        member_free(m);
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

gc_member *gc_member_find(gc_group *g, const char *id, size_t len)
{
    for (gc_member *m = g->members.next; m != &g->members; m = m->next)
        if (str_eq(m->id, id, len))
            return m;
    return NULL;
}

gc_member *gc_static_member(gc_group *g, const char *instance, size_t len)
{
    for (gc_member *m = g->members.next; m != &g->members; m = m->next)
        if (m->instance_id && str_eq(m->instance_id, instance, len))
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
    return s && !str_eq(s->id, member_id.p ? member_id.p : "",
                        member_id.len > 0 ? (size_t)member_id.len : 0);
}

bool gc_is_pending(gc_group *g, const char *id, size_t len)
{
    for (gc_pending *p = g->pending; p; p = p->next)
        if (str_eq(p->id, id, len))
            return true;
    return false;
}

void gc_remove_pending(gc_group *g, const char *id, size_t len)
{
    for (gc_pending **pp = &g->pending; *pp; pp = &(*pp)->next)
        if (str_eq((*pp)->id, id, len)) {
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

static void add_pending(gc_group *g, const char *id, int32_t session_ms)
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
    tv_ms(&tv, session_ms);
    evtimer_add(p->timer, &tv);
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

static const gc_proto *member_proto(const gc_member *m, const char *name)
{
    if (!name)
        return m->nprotos ? &m->protos[0] : NULL;
    for (int i = 0; i < m->nprotos; i++)
        if (!strcmp(m->protos[i].name, name))
            return &m->protos[i];
    return NULL;
}

/* Copies g's row and member rows into j (group_job.c).  0 or -1 (no
 * memory: g stays as it is, the caller keeps it dirty). */
static int group_to_job(gc_job *j, const gc_group *g)
{
    md_group *rec = gc_job_group(j, (size_t)g->nmembers);
    if (!rec)
        return -1;
    bool ok = true;
    md_group_member *mm = (md_group_member *)rec->members;
    size_t n = 0;
    for (const gc_member *m = g->members.next; m != &g->members; m = m->next, n++) {
        const gc_proto *p = member_proto(m, g->protocol);
        md_group_member *x = &mm[n];
        x->member_id = gc_job_strdup(j, m->id);
        x->instance_id = gc_job_strdup(j, m->instance_id);
        x->client_id = gc_job_strdup(j, m->client_id);
        x->client_host = gc_job_strdup(j, m->client_host);
        x->session_timeout_ms = m->session_timeout_ms;
        x->rebalance_timeout_ms = m->rebalance_timeout_ms;
        x->subscription_len = p ? p->meta_len : -1;
        x->subscription = p ? gc_job_blob(j, p->meta, p->meta_len) : NULL;
        x->assignment_len = m->assignment ? m->assignment_len : -1;
        x->assignment = gc_job_blob(j, m->assignment, x->assignment_len);
        ok = ok && x->member_id && x->client_id && x->client_host &&
             (x->instance_id || !m->instance_id) &&
             (x->subscription || x->subscription_len < 0) &&
             (x->assignment || x->assignment_len < 0);
    }
    rec->group_id = gc_job_strdup(j, g->id);
    rec->state = gc_state_name(g->state);              /* static */
    rec->protocol_type = gc_job_strdup(j, g->protocol_type);
    rec->protocol = gc_job_strdup(j, g->protocol);
    rec->generation = g->generation;
    rec->leader = gc_job_strdup(j, g->leader);
    rec->state_changed_at = g->state_changed_at;
    ok = ok && rec->group_id && (rec->protocol_type || !g->protocol_type) &&
         (rec->protocol || !g->protocol) && (rec->leader || !g->leader);
    return ok ? 0 : -1;
}

/* Moves every dirty group into j; one that does not fit stays dirty. */
static int dirty_to_job(gc_job *j)
{
    gc_group *keep = NULL;
    int rc = 0;
    while (gc->dirty) {
        gc_group *g = gc->dirty;
        gc->dirty = g->dirty_next;
        if (group_to_job(j, g) == 0) {
            g->dirty = false;
            g->dirty_next = NULL;
        } else {
            g->dirty_next = keep;
            keep = g;
            rc = -1;
        }
    }
    gc->dirty = keep;
    return rc;
}

void gc_save_dirty_now(void)
{
    if (!gc->dirty)
        return;
    gc_job *j = gc_job_take();
    if (!j) {
        BK_ERROR("saving group state: out of memory");
        return;
    }
    if (dirty_to_job(j) != 0)
        BK_ERROR("saving group state: out of memory");
    gc_job_submit(j);
    gc_jobs_release(bk_mdsync_durable());   /* run already when no worker */
}

/* ---- waits and the end of the loop turn ------------------------------------- */

static void wait_cancel(bk_req *r)
{
    gc_wait *w = r->state;
    if (!w)
        return;
    if (w->m) {
        /* The member stays: its session timer (always pending) now counts
         * from its last sign of life, as nothing keeps it alive any more. */
        if (w->is_sync)
            w->m->sync_w = NULL;
        else
            w->m->join_w = NULL;
        w->m = NULL;
    }
    free(w->commit);
    gc_wait_unlink(w);
    free(w);
    r->state = NULL;
    r->cancel = NULL;
}

gc_wait *gc_wait_new(bk_req *r)
{
    gc_wait *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->r = r;
    w->next = w->prev = w;
    r->state = w;
    r->cancel = wait_cancel;
    return w;
}

void gc_wait_unlink(gc_wait *w)
{
    w->prev->next = w->next;
    w->next->prev = w->prev;
    w->next = w->prev = w;
}

static void list_append(gc_wait *head, gc_wait *w)
{
    w->prev = head->prev;
    w->next = head;
    head->prev->next = w;
    head->prev = w;
}

static void list_move(gc_wait *to, gc_wait *from)
{
    to->next = to->prev = to;
    if (from->next == from)
        return;
    to->next = from->next;
    to->prev = from->prev;
    to->next->prev = to;
    to->prev->next = to;
    from->next = from->prev = from;
}

void gc_wait_answered(gc_wait *w)
{
    w->m = NULL;
    gc_wait_unlink(w);
    list_append(&gc->outbox, w);
    gc_schedule_turn();
}

void gc_schedule_turn(void)
{
    event_active(gc->turn_ev, EV_TIMEOUT, 0);
}

/* Answers every wait of the synced list whose sync (seq) has finished.
 * They are taken off the list first: answering may serve new requests.
 * sync_err: a failed WAL sync (md_sync.c S3) fails the offset commits;
 * join and sync answers go out anyway, logged by the worker. */
static void finish_synced(uint64_t durable, int sync_err)
{
    gc_wait out;
    out.next = out.prev = &out;
    while (gc->synced.next != &gc->synced && gc->synced.next->seq <= durable) {
        gc_wait *w = gc->synced.next;
        gc_wait_unlink(w);
        list_append(&out, w);
    }
    while (out.next != &out) {
        gc_wait *w = out.next;
        gc_wait_unlink(w);
        bk_req *r = w->r;
        if (w->commit)
            gc_commit_respond(w, w->rc ? w->rc : sync_err ? MD_E_SQL : 0);   /* J3 */
        free(w->commit);
        free(w);
        r->cancel = NULL;
        r->state = NULL;
        bk_req_finish(r);
    }
}

static void run_turn(bool after_sync);

/* The metadata sync worker finished the syncs up to seq.  What turns
 * gathered while it ran is written now, as one transaction — even if
 * another sync (requested elsewhere) is already running, so a steady
 * stream of other sync requests cannot hold the batch back. */
static void on_durable(uint64_t seq, int err)
{
    if (!gc)
        return;
    finish_synced(seq, err);
    gc_jobs_release(seq);
    if (gc->dirty || gc->batch.next != &gc->batch || gc->outbox.next != &gc->outbox)
        run_turn(true);
    if (gc->expire_due && !gc->dirty && gc->group_jobs == 0)
        gc_expire_tick(-1, 0, NULL);
}

/* End of the loop turn: one transaction for everything the turn changed
 * (dirty groups, offset commits), one WAL sync requested for it, and the
 * turn's answers queued behind that sync.  Every answer waits for the
 * newest sync requested so far, not only its own turn's: a JoinGroup
 * answered now may reflect a state stored by an earlier turn whose sync is
 * still running.  Lists are taken first: answering may serve new
 * requests, whose waits belong to the next run of this event. */
static void turn_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what; (void)arg;
    run_turn(false);
}

static void run_turn(bool after_sync)
{
    /* C6: while a sync runs, its answers cannot leave and nothing written
     * now could be durable before the next sync anyway: keep gathering,
     * and write everything in one transaction when it finishes. */
    if (!after_sync && bk_mdsync_requested() > bk_mdsync_durable())
        return;
    /* C7: commits wait, at most offsets.commit.linger.ms, for the
     * commits other connections are due to send. */
    if (gc->batch.next != &gc->batch) {
        int64_t now = bk_mono_us();
        int64_t until = cc_submit_at(&gc->cadence, now, gc->batch_first_us,
                                     gc->b->cfg->offsets_commit_linger_ms * 1000);
        if (until) {
            /* Re-armed only when the time moves: each is a timerfd_settime. */
            if (until != gc->linger_until || !evtimer_pending(gc->linger_ev, NULL)) {
                struct timeval tv = { (until - now) / 1000000, (until - now) % 1000000 };
                evtimer_add(gc->linger_ev, &tv);
                gc->linger_until = until;
            }
            return;
        }
        evtimer_del(gc->linger_ev);
    }
    gc_wait out, batch;
    list_move(&out, &gc->outbox);
    list_move(&batch, &gc->batch);
    int rc = 0;
    if (gc->dirty || batch.next != &batch) {
        /* The SQL runs on the sync worker (group_job.c): copy, submit. */
        /* Out of memory: a group that does not fit stays dirty for the
         * next turn; the commits are answered with an error (rows already
         * copied may still be stored: a retry stores them again). */
        gc_job *j = gc_job_take();
        if (!j || dirty_to_job(j) != 0)
            BK_ERROR("saving group state / offsets: out of memory");
        for (gc_wait *w = batch.next; rc == 0 && w != &batch; w = w->next)
            rc = j ? gc_commit_to_job(w, j) : MD_E_SQL;
        if (rc)
            for (gc_wait *w = batch.next; w != &batch; w = w->next)
                w->job = NULL;
        if (j)
            gc_job_submit(j);
    }
    uint64_t seq = bk_mdsync_requested();
    while (batch.next != &batch) {
        gc_wait *w = batch.next;
        gc_wait_unlink(w);
        w->rc = rc;
        list_append(&out, w);
    }
    while (out.next != &out) {
        gc_wait *w = out.next;
        gc_wait_unlink(w);
        w->seq = seq;
        list_append(&gc->synced, w);
    }
    finish_synced(bk_mdsync_durable(), bk_mdsync_error());
    gc_jobs_release(bk_mdsync_durable());
}

/* ---- members ----------------------------------------------------------------- */

void gc_touch(gc_member *m)
{
    m->last_seen_us = bk_mono_us();
}

static void session_cb(evutil_socket_t fd, short what, void *arg);

void gc_arm_session(gc_member *m)
{
    int64_t now = bk_mono_us();
    int64_t due_us = m->last_seen_us + (int64_t)m->session_timeout_ms * 1000;
    if (m->join_w || m->sync_w)
        due_us = now + (int64_t)m->session_timeout_ms * 1000;
    struct timeval tv;
    tv_ms(&tv, (due_us - now + 999) / 1000);
    evtimer_add(m->session_timer, &tv);
}

static void session_cb(evutil_socket_t fd, short what, void *arg)
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

static int copy_protos(gc_member *m, const gc_join_args *a)
{
    gc_proto *np = calloc((size_t)(a->nprotos ? a->nprotos : 1), sizeof *np);
    if (!np)
        return -1;
    for (int i = 0; i < a->nprotos; i++) {
        np[i].name = gc_strndup(a->proto_names[i].p, a->proto_names[i].len);
        int32_t ml = a->proto_metas[i].len < 0 ? 0 : a->proto_metas[i].len;
        np[i].meta = malloc((size_t)ml + 1);
        np[i].meta_len = ml;
        if (!np[i].name || !np[i].meta) {
            for (int j = 0; j <= i; j++) {
                free(np[j].name);
                free(np[j].meta);
            }
            free(np);
            return -1;
        }
        if (ml)
            memcpy(np[i].meta, a->proto_metas[i].p, (size_t)ml);
    }
    for (int i = 0; i < m->nprotos; i++) {
        free(m->protos[i].name);
        free(m->protos[i].meta);
    }
    free(m->protos);
    m->protos = np;
    m->nprotos = a->nprotos;
    return 0;
}

/* Kafka's MemberMetadata.matches: same protocols, same metadata, same order. */
static bool member_matches(const gc_member *m, const gc_join_args *a)
{
    if (m->nprotos != a->nprotos)
        return false;
    for (int i = 0; i < a->nprotos; i++) {
        const gc_proto *p = &m->protos[i];
        int32_t ml = a->proto_metas[i].len < 0 ? 0 : a->proto_metas[i].len;
        if (!str_eq(p->name, a->proto_names[i].p, (size_t)a->proto_names[i].len) ||
            p->meta_len != ml || (ml && memcmp(p->meta, a->proto_metas[i].p, (size_t)ml)))
            return false;
    }
    return true;
}

static bool member_supports(const gc_member *m, const char *p, size_t len)
{
    for (int i = 0; i < m->nprotos; i++)
        if (str_eq(m->protos[i].name, p, len))
            return true;
    return false;
}

/* Kafka's supportsProtocols: an Empty group takes any non-empty protocol
 * type and list; otherwise the type must match and one of the protocols
 * must be supported by every other member. */
static bool supports_protocols(gc_group *g, const gc_member *self, const gc_join_args *a)
{
    if (a->protocol_type.len <= 0 || a->nprotos <= 0)
        return false;
    if (g->state == GC_EMPTY || g->nmembers == 0)
        return true;
    if (!str_eq(g->protocol_type, a->protocol_type.p, (size_t)a->protocol_type.len))
        return false;
    for (int i = 0; i < a->nprotos; i++) {
        bool all = true;
        for (gc_member *m = g->members.next; all && m != &g->members; m = m->next)
            if (m != self && !member_supports(m, a->proto_names[i].p,
                                              (size_t)a->proto_names[i].len))
                all = false;
        if (all)
            return true;
    }
    return false;
}

/* Kafka's selectProtocol: among the protocols every member supports, the
 * one most members list first (ties: the first member's preference). */
static char *select_protocol(gc_group *g)
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
            if (!member_supports(m, first->protos[i].name, strlen(first->protos[i].name)))
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

static void set_leader(gc_group *g, const char *id)
{
    free(g->leader);
    g->leader = id ? strdup(id) : NULL;
}

static void group_add(gc_group *g, gc_member *m)
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
        set_leader(g, m->id);
}

/* Unlinks and frees m; its waits must already be answered or dropped. */
static void group_remove(gc_group *g, gc_member *m)
{
    m->prev->next = m->next;
    m->next->prev = m->prev;
    g->nmembers--;
    if (g->leader && !strcmp(g->leader, m->id))
        set_leader(g, g->nmembers ? g->members.next->id : NULL);
    member_free(m);
}

static void answer_join_error(gc_member *m, int16_t err, const char *member_id)
{
    gc_wait *w = m->join_w;
    if (!w)
        return;
    m->join_w = NULL;
    gc_write_join(w->r, err, -1, "", "", member_id, NULL);
    gc_wait_answered(w);
}

static void answer_sync(gc_member *m, int16_t err)
{
    gc_wait *w = m->sync_w;
    if (!w)
        return;
    m->sync_w = NULL;
    if (err == KP_NONE)
        gc_write_sync(w->r, err, m->assignment, m->assignment ? m->assignment_len : 0);
    else
        gc_write_sync(w->r, err, NULL, 0);
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
    tv_ms(&tv, ms);
    evtimer_add(g->join_timer, &tv);
}

static void prepare_rebalance(gc_group *g, const char *why)
{
    if (g->state == GC_COMPLETING)
        for (gc_member *m = g->members.next; m != &g->members; m = m->next) {
            free(m->assignment);
            m->assignment = NULL;
            m->assignment_len = 0;
            answer_sync(m, KP_REBALANCE_IN_PROGRESS);
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
    answer_join_error(m, KP_UNKNOWN_MEMBER_ID, "");
    answer_sync(m, KP_UNKNOWN_MEMBER_ID);
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
            set_leader(g, m->id);
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
            answer_sync(m, KP_UNKNOWN_MEMBER_ID);
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
        return;
    }
    g->protocol = select_protocol(g);
    gc_set_state(g, GC_COMPLETING);
    BK_INFO("group %s: stabilized generation %d with %d members, protocol %s, leader %s",
            g->id, g->generation, g->nmembers, g->protocol ? g->protocol : "-", g->leader);
    for (gc_member *m = g->members.next; m != &g->members; m = m->next) {
        gc_wait *w = m->join_w;
        if (w) {
            m->join_w = NULL;
            bool leads = !strcmp(m->id, g->leader);
            gc_write_join(w->r, KP_NONE, g->generation, g->protocol ? g->protocol : "",
                          g->leader, m->id, leads ? g : NULL);
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

/* ---- JoinGroup --------------------------------------------------------------- */

static char *new_member_id(const char *prefix)
{
    uint8_t u[16];
    if (getrandom(u, sizeof u, 0) != (ssize_t)sizeof u) {
        static uint64_t ctr;
        uint64_t x = (uint64_t)bk_mono_us() ^ (++ctr << 40);
        memcpy(u, &x, 8);
        memcpy(u + 8, &ctr, 8);
    }
    u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);   /* UUID v4, as Java's randomUUID */
    u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
    size_t n = strlen(prefix) + 38;
    char *s = malloc(n);
    if (!s)
        return NULL;
    snprintf(s, n, "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             prefix, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
             u[10], u[11], u[12], u[13], u[14], u[15]);
    return s;
}

static int join_error(bk_req *r, int16_t err, kp_str member_id)
{
    char *id = gc_strndup(member_id.p ? member_id.p : "", member_id.len < 0 ? 0 : member_id.len);
    gc_write_join(r, err, -1, "", "", id ? id : "", NULL);
    free(id);
    return BK_RESPOND;
}

static gc_member *member_new(bk_req *r, const gc_join_args *a, char *id)
{
    gc_member *m = calloc(1, sizeof *m);
    if (!m) {
        free(id);
        return NULL;
    }
    char host[80];
    gc_client_host(r, host, sizeof host);
    kp_str cid = r->hdr.ClientId;
    m->id = id;
    m->instance_id = gc_strndup(a->instance_id.p, a->instance_id.len);
    m->client_id = gc_strndup(cid.p ? cid.p : "", cid.len < 0 ? 0 : cid.len);
    m->client_host = strdup(host);
    m->protocol_type = gc_strndup(a->protocol_type.p, a->protocol_type.len);
    m->session_timeout_ms = a->session_timeout_ms;
    m->rebalance_timeout_ms = a->rebalance_timeout_ms;
    m->session_timer = evtimer_new(gc->b->base, session_cb, m);
    m->next = m->prev = m;
    if (!m->id || (a->instance_id.len >= 0 && !m->instance_id) || !m->client_id ||
        !m->client_host || !m->protocol_type || !m->session_timer || copy_protos(m, a)) {
        member_free(m);
        return NULL;
    }
    return m;
}

static int add_member_and_rebalance(bk_req *r, gc_group *g, const gc_join_args *a, char *id)
{
    gc_member *m = member_new(r, a, id);
    gc_wait *w = m ? gc_wait_new(r) : NULL;
    if (!w) {
        if (m)
            member_free(m);
        return join_error(r, KP_UNKNOWN_SERVER_ERROR, a->member_id);
    }
    m->is_new = true;
    if (g->state == GC_PREPARING && g->generation == 0)
        g->new_member_added = true;   /* extends the initial delay */
    group_add(g, m);
    m->join_w = w;
    w->m = m;
    gc_touch(m);
    gc_arm_session(m);
    if (!m->instance_id)
        gc_remove_pending(g, m->id, strlen(m->id));
    char why[160];
    snprintf(why, sizeof why, "adding new member %.100s", m->id);
    gc_maybe_prepare_rebalance(g, why);
    return BK_DEFER;
}

static int update_member_and_rebalance(bk_req *r, gc_group *g, gc_member *m,
                                       const gc_join_args *a, const char *why)
{
    gc_wait *w = gc_wait_new(r);
    if (!w || copy_protos(m, a)) {
        if (w) {
            r->state = NULL;
            r->cancel = NULL;
            free(w);
        }
        return join_error(r, KP_UNKNOWN_SERVER_ERROR, a->member_id);
    }
    m->session_timeout_ms = a->session_timeout_ms;
    m->rebalance_timeout_ms = a->rebalance_timeout_ms;
    /* The same member joining again on another connection: the older
     * request is obsolete. */
    answer_join_error(m, KP_REBALANCE_IN_PROGRESS, m->id);
    m->join_w = w;
    w->m = m;
    gc_touch(m);
    char reason[200];
    snprintf(reason, sizeof reason, "%s %.100s", why, m->id);
    gc_maybe_prepare_rebalance(g, reason);
    return BK_DEFER;
}

/* Kafka's updateStaticMemberAndRebalance: a static member rejoining with
 * an empty member id takes over its old identity under a new member id. */
static int replace_static_member(bk_req *r, gc_group *g, gc_member *m,
                                 const gc_join_args *a, char *new_id)
{
    gc_wait *w = gc_wait_new(r);
    if (!w || copy_protos(m, a)) {
        if (w) {
            r->state = NULL;
            r->cancel = NULL;
            free(w);
        }
        free(new_id);
        return join_error(r, KP_UNKNOWN_SERVER_ERROR, a->member_id);
    }
    char *old_id = m->id;
    char *current_leader = g->leader ? strdup(g->leader) : NULL;
    /* Fence a duplicate instance still waiting under the old id. */
    answer_join_error(m, KP_FENCED_INSTANCE_ID, old_id);
    answer_sync(m, KP_FENCED_INSTANCE_ID);
    m->id = new_id;
    if (g->leader && !strcmp(g->leader, old_id))
        set_leader(g, new_id);
    BK_INFO("group %s: static member %s (group.instance.id %s) rejoined as %s",
            g->id, old_id, m->instance_id, new_id);
    m->session_timeout_ms = a->session_timeout_ms;
    m->rebalance_timeout_ms = a->rebalance_timeout_ms;
    m->join_w = w;
    w->m = m;
    gc_touch(m);
    switch (g->state) {
    case GC_STABLE: {
        char *next = select_protocol(g);
        if (next && g->protocol && !strcmp(next, g->protocol)) {
            /* No rebalance.  The old leader id is returned so that the
             * member (even if it led) does not run a trivial assignment a
             * Stable group would not broadcast. */
            m->join_w = NULL;
            gc_write_join(r, KP_NONE, g->generation, g->protocol,
                          current_leader ? current_leader : "", m->id, NULL);
            gc_mark_dirty(g);
            gc_wait_answered(w);
        } else {
            gc_maybe_prepare_rebalance(g, "static member joined with a protocol change");
        }
        free(next);
        break;
    }
    case GC_COMPLETING:
        gc_maybe_prepare_rebalance(g, "updating metadata for a static member");
        break;
    default:
        break;
    }
    free(old_id);
    free(current_leader);
    return BK_DEFER;
}

int gc_join(bk_req *r, const gc_join_args *a)
{
    bk_config *cfg = r->b->cfg;
    if (a->group_id.len <= 0)
        return join_error(r, KP_INVALID_GROUP_ID, a->member_id);
    if (a->session_timeout_ms < cfg->group_min_session_timeout_ms ||
        a->session_timeout_ms > cfg->group_max_session_timeout_ms)
        return join_error(r, KP_INVALID_SESSION_TIMEOUT, a->member_id);
    bool unknown = a->member_id.len <= 0;
    gc_group *g = gc_group_find(a->group_id.p, (size_t)a->group_id.len);
    if (!g) {
        if (!unknown)
            return join_error(r, KP_UNKNOWN_MEMBER_ID, a->member_id);
        g = gc_group_create(a->group_id.p, (size_t)a->group_id.len);
        if (!g)
            return join_error(r, KP_UNKNOWN_SERVER_ERROR, a->member_id);
    }
    gc_member *self = unknown ? NULL
                      : gc_member_find(g, a->member_id.p, (size_t)a->member_id.len);
    if (!supports_protocols(g, self, a))
        return join_error(r, KP_INCONSISTENT_GROUP_PROTOCOL, a->member_id);
    int rc;
    if (unknown) {
        kp_str cid = r->hdr.ClientId;
        char *prefix = a->instance_id.len >= 0
                       ? gc_strndup(a->instance_id.p, a->instance_id.len)
                       : gc_strndup(cid.p ? cid.p : "", cid.len < 0 ? 0 : cid.len);
        char *id = prefix ? new_member_id(prefix) : NULL;
        free(prefix);
        if (!id)
            return join_error(r, KP_UNKNOWN_SERVER_ERROR, a->member_id);
        gc_member *old = a->instance_id.len >= 0
                         ? gc_static_member(g, a->instance_id.p, (size_t)a->instance_id.len)
                         : NULL;
        if (old) {
            rc = replace_static_member(r, g, old, a, id);
        } else if (a->require_known_member_id) {
            add_pending(g, id, a->session_timeout_ms);
            gc_write_join(r, KP_MEMBER_ID_REQUIRED, -1, "", "", id, NULL);
            free(id);
            rc = BK_RESPOND;
        } else {
            rc = add_member_and_rebalance(r, g, a, id);
        }
    } else if (gc_is_pending(g, a->member_id.p, (size_t)a->member_id.len)) {
        rc = add_member_and_rebalance(r, g, a, gc_strndup(a->member_id.p, a->member_id.len));
    } else if (gc_static_fenced(g, a->member_id, a->instance_id)) {
        rc = join_error(r, KP_FENCED_INSTANCE_ID, a->member_id);
    } else if (!self || (a->instance_id.len >= 0 &&
                         !gc_static_member(g, a->instance_id.p, (size_t)a->instance_id.len))) {
        rc = join_error(r, KP_UNKNOWN_MEMBER_ID, a->member_id);
    } else {
        switch (g->state) {
        case GC_PREPARING:
            rc = update_member_and_rebalance(r, g, self, a, "member joining during rebalance:");
            break;
        case GC_COMPLETING:
            if (member_matches(self, a)) {
                /* It missed the JoinGroup answer: resend this generation's. */
                bool leads = g->leader && !strcmp(g->leader, self->id);
                gc_write_join(r, KP_NONE, g->generation, g->protocol ? g->protocol : "",
                              g->leader, self->id, leads ? g : NULL);
                rc = BK_RESPOND;
            } else {
                rc = update_member_and_rebalance(r, g, self, a, "updating metadata of");
            }
            break;
        case GC_STABLE:
            if ((g->leader && !strcmp(g->leader, self->id)) || !member_matches(self, a)) {
                /* The leader rejoining forces a rebalance (topic metadata
                 * changes); so does a follower whose metadata changed
                 * (cooperative-sticky's owned partitions). */
                rc = update_member_and_rebalance(r, g, self, a,
                                                 "leader or changed member rejoining:");
            } else {
                gc_write_join(r, KP_NONE, g->generation, g->protocol ? g->protocol : "",
                              g->leader, self->id, NULL);
                rc = BK_RESPOND;
            }
            break;
        default:
            rc = join_error(r, KP_UNKNOWN_MEMBER_ID, a->member_id);
            break;
        }
    }
    if (g->state == GC_PREPARING)
        gc_try_complete_join(g);
    return rc;
}

void gc_write_join(bk_req *r, int16_t err, int32_t generation, const char *protocol,
                   const char *leader, const char *member_id, gc_group *members_of)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_buf *o = r->out;
    kp_buf_reset(o);
    if (v >= 2)
        kp_wr_i32(o, 0);                            /* ThrottleTimeMs */
    kp_wr_i16(o, err);
    kp_wr_i32(o, generation);
    kp_wr_string(o, protocol ? protocol : "", -1);  /* ProtocolName */
    kp_wr_string(o, leader ? leader : "", -1);
    kp_wr_string(o, member_id ? member_id : "", -1);
    if (!members_of) {
        kp_wr_array(o, 0);
        return;
    }
    kp_wr_array(o, members_of->nmembers);
    for (gc_member *m = members_of->members.next; m != &members_of->members; m = m->next) {
        kp_wr_string(o, m->id, -1);
        if (v >= 5)
            kp_wr_string(o, m->instance_id, -1);    /* NULL → null */
        const gc_proto *p = member_proto(m, members_of->protocol);
        kp_wr_bytes(o, p ? (const void *)p->meta : "", p ? p->meta_len : 0);
    }
}

/* ---- SyncGroup, Heartbeat, LeaveGroup ------------------------------------------ */

void gc_write_sync(bk_req *r, int16_t err, const uint8_t *assignment, int32_t len)
{
    kp_buf *o = r->out;
    kp_buf_reset(o);
    if (r->hdr.RequestApiVersion >= 1)
        kp_wr_i32(o, 0);
    kp_wr_i16(o, err);
    kp_wr_bytes(o, assignment ? (const void *)assignment : "", assignment ? len : 0);
}

int gc_sync(bk_req *r, kp_str group_id, int32_t generation, kp_str member_id,
            kp_str instance_id, int nassign, const kp_str *assign_ids,
            const kp_str *assign_bytes)
{
    int16_t err = KP_NONE;
    gc_group *g = NULL;
    gc_member *m = NULL;
    if (group_id.len <= 0)
        err = KP_INVALID_GROUP_ID;
    else if (!(g = gc_group_find(group_id.p, (size_t)group_id.len)))
        err = KP_UNKNOWN_MEMBER_ID;
    else if (gc_static_fenced(g, member_id, instance_id))
        err = KP_FENCED_INSTANCE_ID;
    else if (!(m = gc_member_find(g, member_id.p ? member_id.p : "",
                                  member_id.len > 0 ? (size_t)member_id.len : 0)))
        err = KP_UNKNOWN_MEMBER_ID;
    else if (generation != g->generation)
        err = KP_ILLEGAL_GENERATION;
    else if (g->state == GC_EMPTY)
        err = KP_UNKNOWN_MEMBER_ID;
    else if (g->state == GC_PREPARING)
        err = KP_REBALANCE_IN_PROGRESS;
    if (err) {
        gc_write_sync(r, err, NULL, 0);
        return BK_RESPOND;
    }
    gc_touch(m);
    if (g->state == GC_STABLE) {
        gc_write_sync(r, KP_NONE, m->assignment, m->assignment ? m->assignment_len : 0);
        return BK_RESPOND;
    }
    /* CompletingRebalance: wait for the leader's assignments. */
    gc_wait *w = gc_wait_new(r);
    if (!w) {
        gc_write_sync(r, KP_UNKNOWN_SERVER_ERROR, NULL, 0);
        return BK_RESPOND;
    }
    answer_sync(m, KP_REBALANCE_IN_PROGRESS);     /* an obsolete duplicate */
    m->sync_w = w;
    w->m = m;
    w->is_sync = true;
    if (!g->leader || strcmp(g->leader, m->id))
        return BK_DEFER;
    BK_INFO("group %s: assignment received from leader %s for generation %d",
            g->id, m->id, g->generation);
    for (gc_member *x = g->members.next; x != &g->members; x = x->next) {
        const kp_str *a = NULL;
        for (int i = 0; i < nassign; i++)
            if (str_eq(x->id, assign_ids[i].p, assign_ids[i].len > 0 ? (size_t)assign_ids[i].len : 0))
                a = &assign_bytes[i];
        int32_t len = a && a->len > 0 ? a->len : 0;
        uint8_t *copy = malloc((size_t)len + 1);
        if (!copy)
            continue;
        if (len)
            memcpy(copy, a->p, (size_t)len);
        free(x->assignment);
        x->assignment = copy;
        x->assignment_len = len;
    }
    gc_set_state(g, GC_STABLE);
    for (gc_member *x = g->members.next; x != &g->members; x = x->next)
        if (x->sync_w) {
            answer_sync(x, KP_NONE);
            gc_touch(x);
        }
    return BK_DEFER;
}

int16_t gc_heartbeat(kp_str group_id, int32_t generation, kp_str member_id,
                     kp_str instance_id)
{
    if (group_id.len <= 0)
        return KP_INVALID_GROUP_ID;
    gc_group *g = gc_group_find(group_id.p, (size_t)group_id.len);
    if (!g)
        return KP_UNKNOWN_MEMBER_ID;
    if (gc_static_fenced(g, member_id, instance_id))
        return KP_FENCED_INSTANCE_ID;
    gc_member *m = gc_member_find(g, member_id.p ? member_id.p : "",
                                  member_id.len > 0 ? (size_t)member_id.len : 0);
    if (!m)
        return KP_UNKNOWN_MEMBER_ID;
    if (generation != g->generation)
        return KP_ILLEGAL_GENERATION;
    switch (g->state) {
    case GC_COMPLETING:
    case GC_STABLE:
        gc_touch(m);
        return KP_NONE;
    case GC_PREPARING:
        gc_touch(m);
        return KP_REBALANCE_IN_PROGRESS;
    default:
        return KP_UNKNOWN_MEMBER_ID;
    }
}

int16_t gc_leave(kp_str group_id, kp_str member_id)
{
    if (group_id.len <= 0)
        return KP_INVALID_GROUP_ID;
    gc_group *g = gc_group_find(group_id.p, (size_t)group_id.len);
    if (!g)
        return KP_UNKNOWN_MEMBER_ID;
    const char *mid = member_id.p ? member_id.p : "";
    size_t mlen = member_id.len > 0 ? (size_t)member_id.len : 0;
    if (gc_is_pending(g, mid, mlen)) {
        gc_leave_pending(g, mid, mlen);
        return KP_NONE;
    }
    gc_member *m = gc_member_find(g, mid, mlen);
    if (!m)
        return KP_UNKNOWN_MEMBER_ID;
    BK_INFO("group %s: member %s has left", g->id, m->id);
    gc_remove_member_and_update(g, m, "member left the group (LeaveGroup)");
    return KP_NONE;
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
                answer_join_error(m, KP_NOT_COORDINATOR, m->id);
                answer_sync(m, KP_NOT_COORDINATOR);
            }
}

int bk_groups_init(bk_broker *b)
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
    gc->turn_ev = event_new(b->base, -1, 0, turn_cb, NULL);
    gc->linger_ev = evtimer_new(b->base, turn_cb, NULL);
    gc->expire_timer = event_new(b->base, -1, EV_PERSIST, gc_expire_tick, NULL);
    gc->sig_term = evsignal_new(b->base, SIGTERM, on_stop, NULL);
    gc->sig_int = evsignal_new(b->base, SIGINT, on_stop, NULL);
    if (!gc->hash || !gc->turn_ev || !gc->linger_ev || !gc->expire_timer || !gc->sig_term ||
        !gc->sig_int) {
        BK_ERROR("group coordinator: out of memory");
        return -1;
    }
    /* Walk first, write after: md_group_foreach holds a read statement. */
    if (md_group_foreach(b->db, load_group, NULL) != 0) {
        BK_ERROR("group coordinator: cannot load groups from the metadata store");
        return -1;
    }
    gc_save_dirty_now();
    bk_mdsync_listen(on_durable);
    struct timeval tv;
    tv_ms(&tv, b->cfg->offsets_retention_check_interval_ms);
    event_add(gc->expire_timer, &tv);
    event_add(gc->sig_term, NULL);
    event_add(gc->sig_int, NULL);
    BK_INFO("group coordinator: %zu groups loaded (members rejoin), "
            "group.initial.rebalance.delay.ms=%lld", gc->ngroups,
            (long long)b->cfg->group_initial_rebalance_delay_ms);
    return 0;
}

void bk_groups_shutdown(bk_broker *b)
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
    while (gc->outbox.next != &gc->outbox)
        wait_drop(gc->outbox.next);
    while (gc->batch.next != &gc->batch) {
        gc_wait *w = gc->batch.next;
        free(w->commit);
        wait_drop(w);
    }
    while (gc->synced.next != &gc->synced) {
        gc_wait *w = gc->synced.next;
        free(w->commit);
        wait_drop(w);
    }
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
