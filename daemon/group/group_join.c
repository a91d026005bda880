/*
 * daemon/group/group_join.c — the member requests: JoinGroup (with static
 * membership, KIP-345), SyncGroup, Heartbeat, LeaveGroup.
 *
 * Design note.
 *
 * The decisions follow Kafka's GroupCoordinator handleJoinGroup /
 * handleSyncGroup / handleHeartbeat / handleLeaveGroup, error for error;
 * the rebalance state machine they drive is in daemon/group/group_coordinator.c.
 *
 * Static membership: a member with a group.instance.id keeps its place
 * across restarts.  Rejoining with an empty member id it takes over its
 * old identity under a new member id (replace_static_member); a Stable
 * group whose protocol does not change is not rebalanced, and the older
 * id is fenced (FENCED_INSTANCE_ID) wherever it still waits or calls.
 * In cluster mode the replacement is stored first (replacement_store:
 * Kafka's storeGroup of the group as it is, the new id in it) and its
 * JoinGroup answered once that record is replicated; if it is not, the
 * member goes back to its old id and the JoinGroup gets the error.
 * Replacements of several members may be stored at once, each its own
 * record and its own answer; a later record holds the earlier new ids
 * too, as Kafka's does.
 *
 * SyncGroup in cluster mode: the leader's assignments are stored first
 * (store_assignment: Kafka's storeGroup, the GroupMetadata record in
 * __consumer_offsets, held until replicated as a commit is); the group
 * stays CompletingRebalance meanwhile, and only then turns Stable and
 * answers every waiting SyncGroup.  A failed store answers them all with
 * Kafka's mapping of the append's error and rebalances the group.
 *
 * Invariants:
 *   M1. A member has at most one deferred JoinGroup (join_w) and one
 *       SyncGroup (sync_w); a newer one answers the older with
 *       REBALANCE_IN_PROGRESS (or FENCED_INSTANCE_ID for a replaced
 *       static member) before taking its place.
 *   M2. g->store_w is set only while the group is CompletingRebalance in
 *       the generation it stores; g->replacing is non-empty only while it
 *       is Stable, one entry per replacement being stored (the member
 *       holding its new id has its JoinGroup in join_w; once replaced
 *       again its JoinGroup is fenced (M1), no member holds the id, and
 *       the outcome only frees the entry).  A rebalance or the group's
 *       end cancels them all (gc_store_cancel), so an outcome applies to
 *       that generation and that replacement; a replacement cancels none.
 */
#include "daemon/group/group_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <event2/event.h>

static int copy_protos(gc_member *m, const gc_join_args *a)
{
    gc_proto *np = calloc((size_t)(a->nprotos ? a->nprotos : 1), sizeof *np);
    if (!np)
        return -1;
    for (int i = 0; i < a->nprotos; i++) {
        np[i].name = gc_strndup(a->protos[i].Name.p, a->protos[i].Name.len);
        int32_t ml = a->protos[i].Metadata.len < 0 ? 0 : a->protos[i].Metadata.len;
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
            memcpy(np[i].meta, a->protos[i].Metadata.p, (size_t)ml);
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
        kp_str name = a->protos[i].Name, meta = a->protos[i].Metadata;
        int32_t ml = meta.len < 0 ? 0 : meta.len;
        if (!gc_str_eq(p->name, name.p, (size_t)name.len) ||
            p->meta_len != ml || (ml && memcmp(p->meta, meta.p, (size_t)ml)))
            return false;
    }
    return true;
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
    if (!gc_str_eq(g->protocol_type, a->protocol_type.p, (size_t)a->protocol_type.len))
        return false;
    for (int i = 0; i < a->nprotos; i++) {
        bool all = true;
        for (gc_member *m = g->members.next; all && m != &g->members; m = m->next)
            if (m != self && !gc_member_supports(m, a->protos[i].Name.p,
                                              (size_t)a->protos[i].Name.len))
                all = false;
        if (all)
            return true;
    }
    return false;
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
    gc_write_join(r, err, NULL, "", id ? id : "", NULL);
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
    bk_req_client_host(r, host, sizeof host);
    kp_str cid = r->hdr.ClientId;
    m->id = id;
    m->instance_id = gc_strndup(a->instance_id.p, a->instance_id.len);
    m->client_id = gc_strndup(cid.p ? cid.p : "", cid.len < 0 ? 0 : cid.len);
    m->client_host = strdup(host);
    m->protocol_type = gc_strndup(a->protocol_type.p, a->protocol_type.len);
    m->session_timeout_ms = a->session_timeout_ms;
    m->rebalance_timeout_ms = a->rebalance_timeout_ms;
    m->session_timer = evtimer_new(gc->b->base, gc_session_cb, m);
    m->next = m->prev = m;
    if (!m->id || (a->instance_id.len >= 0 && !m->instance_id) || !m->client_id ||
        !m->client_host || !m->protocol_type || !m->session_timer || copy_protos(m, a)) {
        gc_member_free(m);
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
            gc_member_free(m);
        return join_error(r, KP_UNKNOWN_SERVER_ERROR, a->member_id);
    }
    m->is_new = true;
    if (g->state == GC_PREPARING && g->generation == 0)
        g->new_member_added = true;   /* extends the initial delay */
    gc_group_add(g, m);
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

/* A known member joins again: a wait for r and its new protocols, or NULL
 * (no memory; m unchanged). */
static gc_wait *rejoin_wait(bk_req *r, gc_member *m, const gc_join_args *a)
{
    gc_wait *w = gc_wait_new(r);
    if (w && copy_protos(m, a)) {
        r->state = NULL;
        r->cancel = NULL;
        free(w);
        w = NULL;
    }
    return w;
}

static int update_member_and_rebalance(bk_req *r, gc_group *g, gc_member *m,
                                       const gc_join_args *a, const char *why)
{
    gc_wait *w = rejoin_wait(r, m, a);
    if (!w)
        return join_error(r, KP_UNKNOWN_SERVER_ERROR, a->member_id);
    m->session_timeout_ms = a->session_timeout_ms;
    m->rebalance_timeout_ms = a->rebalance_timeout_ms;
    /* The same member joining again on another connection: the older
     * request is obsolete. */
    gc_answer_join_error(m, KP_REBALANCE_IN_PROGRESS, m->id);
    m->join_w = w;
    w->m = m;
    gc_touch(m);
    char reason[200];
    snprintf(reason, sizeof reason, "%s %.100s", why, m->id);
    gc_maybe_prepare_rebalance(g, reason);
    return BK_DEFER;
}

/* A static member's replacement being stored (cluster mode, M2): what
 * its JoinGroup answer names, and what the member goes back to if the
 * record is not replicated. */
typedef struct gc_replacement {
    struct gc_replacement *next;      /* g->replacing */
    gc_group *g;
    gc_wait *w;                       /* its record, held until replicated */
    char *old_id, *new_id;
    char *leader;                     /* the leader before it (NULL: none) */
    int32_t old_sto, old_rto;         /* the timeouts the member had */
} gc_replacement;

static int16_t store_group(gc_group *g, bk_group_done_fn done, void *arg, gc_wait **held);

/* A replacement's JoinGroup answer: its new id, the leader before it. */
static void replacement_joined(gc_group *g, gc_member *m, const char *leader)
{
    gc_wait *w = m->join_w;
    m->join_w = NULL;
    gc_write_join(w->r, KP_NONE, g, leader ? leader : "", m->id, NULL);
    gc_wait_answered(w);
}
static void replacement_store(gc_group *g, gc_member *m, char *old_id, char *leader,
                              int32_t old_sto, int32_t old_rto);

/* Kafka's updateStaticMemberAndRebalance: a static member rejoining with
 * an empty member id takes over its old identity under a new member id. */
static int replace_static_member(bk_req *r, gc_group *g, gc_member *m,
                                 const gc_join_args *a, char *new_id)
{
    gc_wait *w = rejoin_wait(r, m, a);
    if (!w) {
        free(new_id);
        return join_error(r, KP_UNKNOWN_SERVER_ERROR, a->member_id);
    }
    char *old_id = m->id;
    char *current_leader = g->leader ? strdup(g->leader) : NULL;
    int32_t old_sto = m->session_timeout_ms, old_rto = m->rebalance_timeout_ms;
    /* Fence a duplicate instance still waiting under the old id. */
    gc_answer_join_error(m, KP_FENCED_INSTANCE_ID, old_id);
    gc_answer_sync(m, KP_FENCED_INSTANCE_ID);
    m->id = new_id;
    if (g->leader && !strcmp(g->leader, old_id))
        gc_set_leader(g, new_id);
    BK_INFO("group %s: static member %s (group.instance.id %s) rejoined as %s",
            g->id, old_id, m->instance_id, new_id);
    m->session_timeout_ms = a->session_timeout_ms;
    m->rebalance_timeout_ms = a->rebalance_timeout_ms;
    m->join_w = w;
    w->m = m;
    gc_touch(m);
    switch (g->state) {
    case GC_STABLE: {
        char *next = gc_select_protocol(g);
        if (next && g->protocol && !strcmp(next, g->protocol)) {
            /* No rebalance.  The old leader id is returned so that the
             * member (even if it led) does not run a trivial assignment a
             * Stable group would not broadcast.  Cluster mode: answered
             * once the group with the new id is replicated (M2), so the
             * next coordinator knows it. */
            gc_mark_dirty(g);
            if (bk_cluster_mode(gc->b)) {
                replacement_store(g, m, old_id, current_leader, old_sto, old_rto);
                old_id = current_leader = NULL;
            } else {
                replacement_joined(g, m, current_leader);
            }
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
    int16_t cerr = gc_coordinator_error(a->group_id);
    if (cerr)
        return join_error(r, cerr, a->member_id);
    if (a->session_timeout_ms < cfg->group_min_session_timeout_ms ||
        a->session_timeout_ms > cfg->group_max_session_timeout_ms)
        return join_error(r, KP_INVALID_SESSION_TIMEOUT, a->member_id);
    bool unknown = a->member_id.len <= 0;
    gc_group *g = gc_group_find(a->group_id.p, (size_t)a->group_id.len);
    if (g && g->state == GC_DEAD)
        return join_error(r, KP_COORDINATOR_NOT_AVAILABLE, a->member_id);   /* being deleted */
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
            gc_add_pending(g, id, a->session_timeout_ms);
            gc_write_join(r, KP_MEMBER_ID_REQUIRED, NULL, "", id, NULL);
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
                gc_write_join(r, KP_NONE, g, g->leader, self->id, leads ? g : NULL);
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
                gc_write_join(r, KP_NONE, g, g->leader, self->id, NULL);
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

void gc_write_join(bk_req *r, int16_t err, const gc_group *g, const char *leader,
                   const char *member_id, gc_group *members_of)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_buf_reset(r->out);
    kp_JoinGroupResponse m;
    kp_init_JoinGroupResponse(&m);
    m.ErrorCode = err;
    m.GenerationId = g ? g->generation : -1;
    /* v7+: the group's protocol type and name, both null in an error
     * (Kafka's JoinGroupResult); older versions have "" for no name. */
    if (g) {
        m.ProtocolType = kp_str_cstr(g->protocol_type);          /* NULL → null */
        m.ProtocolName = kp_str_cstr(g->protocol ? g->protocol : "");
    } else {
        m.ProtocolName = v >= 7 ? KP_STR_NULL : kp_str_cstr("");
    }
    if (v < 7)
        m.ProtocolType = KP_STR_NULL;     /* ignorable: not on the wire */
    m.Leader = kp_str_cstr(leader ? leader : "");
    m.MemberId = kp_str_cstr(member_id ? member_id : "");
    kp_JoinGroupResponse_JoinGroupResponseMember *jm = NULL;
    if (members_of) {
        jm = bk_req_alloc(r, (size_t)members_of->nmembers, sizeof *jm);
        if (!jm) {                                  /* no memory: the member retries */
            m.ErrorCode = KP_COORDINATOR_NOT_AVAILABLE;
            m.GenerationId = -1;
        }
    }
    if (jm) {
        for (gc_member *x = members_of->members.next; x != &members_of->members; x = x->next) {
            const gc_proto *p = gc_member_proto(x, members_of->protocol);
            jm[m.Members_count++] = (kp_JoinGroupResponse_JoinGroupResponseMember){
                .MemberId = kp_str_cstr(x->id),
                .GroupInstanceId = kp_str_cstr(x->instance_id),          /* NULL → null */
                .Metadata = p ? (kp_str){ (const char *)p->meta, p->meta_len }
                              : (kp_str){ "", 0 },
            };
        }
        m.Members = jm;
    }
    if (bk_req_encoded(r, "JoinGroup", kp_enc_JoinGroupResponse(r->out, v, &m)) != BK_RESPOND)
        kp_buf_reset(r->out);
}

/* ---- SyncGroup, Heartbeat, LeaveGroup ------------------------------------------ */

void gc_write_sync(bk_req *r, int16_t err, const gc_member *x)
{
    kp_buf_reset(r->out);
    kp_SyncGroupResponse m;
    kp_init_SyncGroupResponse(&m);
    m.ErrorCode = err;
    m.Assignment = x && x->assignment ? (kp_str){ (const char *)x->assignment,
                                                   x->assignment_len }
                                       : (kp_str){ "", 0 };
    if (x && r->hdr.RequestApiVersion >= 5) {       /* v5: null in an error */
        m.ProtocolType = kp_str_cstr(x->g->protocol_type);
        m.ProtocolName = kp_str_cstr(x->g->protocol);
    }
    int rc = kp_enc_SyncGroupResponse(r->out, r->hdr.RequestApiVersion, &m);
    if (bk_req_encoded(r, "SyncGroup", rc) != BK_RESPOND)
        kp_buf_reset(r->out);
}

/* Completing → Stable: every waiting SyncGroup gets its assignment. */
static void stabilize(gc_group *g)
{
    gc_set_state(g, GC_STABLE);
    for (gc_member *x = g->members.next; x != &g->members; x = x->next)
        if (x->sync_w) {
            gc_answer_sync(x, KP_NONE);
            gc_touch(x);
        }
}

/* Kafka's resetAndPropagateAssignmentError, then a new rebalance: the
 * assignments were not stored, so nobody gets one; err as Kafka's
 * storeGroup maps the append's (a timeout: REBALANCE_IN_PROGRESS). */
static int16_t store_error(int16_t err)
{
    if (err == KP_REQUEST_TIMED_OUT)
        return KP_REBALANCE_IN_PROGRESS;
    if (err != KP_NOT_COORDINATOR && err != KP_COORDINATOR_NOT_AVAILABLE)
        return KP_UNKNOWN_SERVER_ERROR;
    return err;
}

static void store_failed(gc_group *g, int16_t err)
{
    err = store_error(err);
    BK_WARN("group %s: storing the assignment of generation %d failed (error %d); "
            "the members rejoin", g->id, g->generation, err);
    for (gc_member *x = g->members.next; x != &g->members; x = x->next) {
        free(x->assignment);
        x->assignment = NULL;
        x->assignment_len = 0;
        gc_answer_sync(x, err);
    }
    gc_maybe_prepare_rebalance(g, "error when storing group assignment during SyncGroup");
}

/* gc_log_group_hold's done: the record is replicated (rc 0) or not. */
static void assignment_stored(void *arg, int rc)
{
    gc_group *g = arg;
    g->store_w = NULL;                /* freed by group_log.c */
    if (rc)
        store_failed(g, (int16_t)rc);
    else
        stabilize(g);
}

static void replacement_free(gc_replacement *rp)
{
    free(rp->old_id);
    free(rp->new_id);
    free(rp->leader);
    free(rp);
}

static void store_drop(gc_wait **w)
{
    gc_log_forget(*w);
    free(*w);
    *w = NULL;
}

void gc_store_cancel(gc_group *g)
{
    if (g->store_w)
        store_drop(&g->store_w);
    while (g->replacing) {
        gc_replacement *rp = g->replacing;
        g->replacing = rp->next;
        store_drop(&rp->w);
        replacement_free(rp);
    }
}

/* Stores g (its GroupMetadata record) and, with done, holds the answer
 * until it is replicated (*held, done(arg, rc) then): 1 while held, 0
 * stored and replicated already, else the error (Kafka's storeGroup
 * mapping not yet applied). */
static int16_t store_group(gc_group *g, bk_group_done_fn done, void *arg, gc_wait **held)
{
    gc_wait *w = calloc(1, sizeof *w);
    if (!w)
        return KP_COORDINATOR_NOT_AVAILABLE;
    w->next = w->prev = w;
    w->done = done;
    w->done_arg = arg;
    int16_t e = gc_log_group_store(gc->b, g, w);
    if (!e && (e = gc_log_group_hold(w)) == 1) {
        *held = w;
        return 1;
    }
    free(w);
    return e;
}

/* The answer of a static member's replacement, once stored (err 0) or
 * not: then, as Kafka's updateStaticMemberAndRebalance, the member goes
 * back to its old id and timeouts, and its JoinGroup gets the error.  m
 * is the member still holding rp's new id (NULL: none, it was replaced
 * again and its JoinGroup is answered already). */
static void replacement_answer(gc_group *g, gc_member *m, gc_replacement *rp, int16_t err)
{
    if (m && err) {
        err = store_error(err);
        BK_WARN("group %s: storing static member %s's new id %s failed (error %d); it keeps "
                "its old id", g->id, rp->old_id, m->id, err);
        if (g->leader && !strcmp(g->leader, m->id))
            gc_set_leader(g, rp->old_id);
        free(m->id);
        m->id = rp->old_id;
        rp->old_id = NULL;
        m->session_timeout_ms = rp->old_sto;
        m->rebalance_timeout_ms = rp->old_rto;
        gc_answer_join_error(m, err, "");
        gc_touch(m);
        gc_mark_dirty(g);
    } else if (m && m->join_w) {
        replacement_joined(g, m, rp->leader);
    }
}

/* gc_log_group_hold's done for a replacement: rp leaves g->replacing. */
static void replacement_stored(void *arg, int rc)
{
    gc_replacement *rp = arg;
    gc_group *g = rp->g;
    rp->w = NULL;                     /* freed by group_log.c */
    gc_replacement **pp = &g->replacing;
    while (*pp != rp)
        pp = &(*pp)->next;
    *pp = rp->next;
    replacement_answer(g, gc_member_find(g, rp->new_id, strlen(rp->new_id)), rp, (int16_t)rc);
    replacement_free(rp);
}

/* Kafka's storeGroup of a replacement: the group as it is now, m with its
 * new id (and any other replacement still being stored with theirs, each
 * its own record), m's JoinGroup answered when it is replicated.  Takes
 * old_id and leader. */
static void replacement_store(gc_group *g, gc_member *m, char *old_id, char *leader,
                              int32_t old_sto, int32_t old_rto)
{
    gc_replacement *rp = calloc(1, sizeof *rp);
    if (!rp) {
        free(old_id);
        free(leader);
        gc_answer_join_error(m, KP_COORDINATOR_NOT_AVAILABLE, "");
        return;
    }
    *rp = (gc_replacement){ .g = g, .old_id = old_id, .new_id = strdup(m->id),
                            .leader = leader, .old_sto = old_sto, .old_rto = old_rto };
    int16_t e = !rp->new_id ? KP_COORDINATOR_NOT_AVAILABLE
                : store_group(g, replacement_stored, rp, &rp->w);
    if (e == 1) {
        gc_replacement **pp = &g->replacing;
        while (*pp)
            pp = &(*pp)->next;
        *pp = rp;
        return;
    }
    replacement_answer(g, m, rp, e);
    replacement_free(rp);
}

/* The leader's assignments are in: in cluster mode the group's
 * GroupMetadata record goes to __consumer_offsets first and the SyncGroup
 * answers wait until it is replicated, as an acks=all append (Kafka's
 * storeGroup), so the group's next coordinator has this generation and
 * its members; meanwhile the group stays Completing (its members'
 * SyncGroups wait, their heartbeats are accepted). */
static void store_assignment(gc_group *g)
{
    if (!bk_cluster_mode(gc->b)) {
        stabilize(g);
        return;
    }
    int16_t e = store_group(g, assignment_stored, g, &g->store_w);
    if (e == 1)
        return;
    if (e)
        store_failed(g, e);
    else
        stabilize(g);
}

int gc_sync(bk_req *r, kp_str group_id, int32_t generation, kp_str member_id,
            kp_str instance_id, kp_str protocol_type, kp_str protocol_name, int nassign,
            const kp_SyncGroupRequest_SyncGroupRequestAssignment *assign)
{
    int16_t err = KP_NONE;
    gc_group *g = NULL;
    gc_member *m = NULL;
    if (!(g = gc_member_group(group_id, &err)))
        ;                             /* err says why */
    else if (gc_static_fenced(g, member_id, instance_id))
        err = KP_FENCED_INSTANCE_ID;
    else if (!(m = gc_member_of(g, member_id)))
        err = KP_UNKNOWN_MEMBER_ID;
    else if (generation != g->generation)
        err = KP_ILLEGAL_GENERATION;
    /* v5 names what the member expects (null before, and allowed) */
    else if (protocol_type.len >= 0 &&
             !gc_str_eq(g->protocol_type ? g->protocol_type : "", protocol_type.p,
                        (size_t)protocol_type.len))
        err = KP_INCONSISTENT_GROUP_PROTOCOL;
    else if (protocol_name.len >= 0 &&
             !gc_str_eq(g->protocol ? g->protocol : "", protocol_name.p, (size_t)protocol_name.len))
        err = KP_INCONSISTENT_GROUP_PROTOCOL;
    else if (g->state == GC_EMPTY)
        err = KP_UNKNOWN_MEMBER_ID;
    else if (g->state == GC_PREPARING)
        err = KP_REBALANCE_IN_PROGRESS;
    if (err) {
        gc_write_sync(r, err, NULL);
        return BK_RESPOND;
    }
    gc_touch(m);
    if (g->state == GC_STABLE) {
        gc_write_sync(r, KP_NONE, m);
        return BK_RESPOND;
    }
    /* CompletingRebalance: wait for the leader's assignments. */
    gc_wait *w = gc_wait_new(r);
    if (!w) {
        gc_write_sync(r, KP_UNKNOWN_SERVER_ERROR, NULL);
        return BK_RESPOND;
    }
    gc_answer_sync(m, KP_REBALANCE_IN_PROGRESS);     /* an obsolete duplicate */
    m->sync_w = w;
    w->m = m;
    w->is_sync = true;
    if (!g->leader || strcmp(g->leader, m->id) || g->store_w)
        return BK_DEFER;              /* the leader's, or its store, is awaited */
    BK_INFO("group %s: assignment received from leader %s for generation %d",
            g->id, m->id, g->generation);
    for (gc_member *x = g->members.next; x != &g->members; x = x->next) {
        const kp_str *a = NULL;
        for (int i = 0; i < nassign; i++)
            if (gc_str_eq(x->id, assign[i].MemberId.p, (size_t)assign[i].MemberId.len))
                a = &assign[i].Assignment;
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
    store_assignment(g);
    return BK_DEFER;
}

int16_t gc_heartbeat(kp_str group_id, int32_t generation, kp_str member_id,
                     kp_str instance_id)
{
    int16_t err;
    gc_group *g = gc_member_group(group_id, &err);
    if (!g)
        return err;
    if (gc_static_fenced(g, member_id, instance_id))
        return KP_FENCED_INSTANCE_ID;
    gc_member *m = gc_member_of(g, member_id);
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

int16_t gc_leave_member(gc_group *g, kp_str member_id, kp_str instance_id)
{
    const char *mid = member_id.p ? member_id.p : "";
    size_t mlen = member_id.len > 0 ? (size_t)member_id.len : 0;
    gc_member *m;
    if (instance_id.len >= 0) {
        /* A static member leaves by its instance id; a member id given
         * with it must be the current one. */
        m = gc_static_member(g, instance_id.p ? instance_id.p : "", (size_t)instance_id.len);
        if (!m)
            return KP_UNKNOWN_MEMBER_ID;
        if (mlen && !gc_str_eq(m->id, mid, mlen))
            return KP_FENCED_INSTANCE_ID;
    } else {
        if (gc_is_pending(g, mid, mlen)) {
            gc_leave_pending(g, mid, mlen);
            return KP_NONE;
        }
        if (!(m = gc_member_find(g, mid, mlen)))
            return KP_UNKNOWN_MEMBER_ID;
    }
    BK_INFO("group %s: member %s has left", g->id, m->id);
    gc_remove_member_and_update(g, m, "member left the group (LeaveGroup)");
    return KP_NONE;
}

int16_t gc_leave(kp_str group_id, kp_str member_id)
{
    int16_t err;
    gc_group *g = gc_member_group(group_id, &err);
    if (!g)
        return err;
    return gc_leave_member(g, member_id, KP_STR_NULL);
}
