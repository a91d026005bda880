/*
 * group.c — the consumer group member: coordinator discovery, the
 * JoinGroup/SyncGroup rebalance, heartbeats, max.poll.interval.ms,
 * LeaveGroup, and the rebalance events poll serves.  The subscription
 * (literal names and regexes) is subscription.c's.
 *
 * Member states (grp->state) and who moves them:
 *
 *   IDLE ──subscribe──► JOIN ──(JoinGroup answer)──► SYNC ──(SyncGroup)──► STABLE
 *    ▲                   ▲   leader: ASSIGN_WAIT (metadata of all members'   │
 *    │                   │   topics) then SYNC                                │
 *    │                   └── REVOKE_WAIT ◄── rejoin needed (heartbeat says     │
 *    │                        (app's revoke    REBALANCE_IN_PROGRESS, new     ◄┘
 *    │                         callback)       subscription or regex match,
 *    │                                         errors)
 *    ├── unsubscribe / close (LeaveGroup)
 *    └── POLL_LEFT ◄── any state but IDLE: the application did not poll for
 *          │          max.poll.interval.ms (LeaveGroup, assignment revoked)
 *          └──(the application's next poll: MAX_POLL_EXCEEDED)──► JOIN
 *
 * Heartbeats go out from the background thread in STABLE and in
 * REVOKE_WAIT, so an application whose revoke callback runs long keeps its
 * membership (the broker answers REBALANCE_IN_PROGRESS and counts the
 * session as alive).  What bounds the callback is max.poll.interval.ms:
 * time in callbacks is time outside poll, and it is the rebalance timeout
 * the broker waits for our JoinGroup.
 *
 * max.poll.interval.ms, as librdkafka and the Java client enforce it: the
 * application must call sl_consumer_poll at least that often (waiting
 * inside poll counts as polling).  Otherwise the member leaves the group
 * so the others get its partitions instead of waiting on a stuck
 * application; the next poll returns SL_E_MAX_POLL_EXCEEDED and rejoins.
 *
 * Eager protocol: before rejoining, the member gives its partitions up —
 * the revoke callback runs (from the application's poll), positions are
 * auto-committed, the assignment is cleared — then JoinGroup is sent.  The
 * commit and the JoinGroup travel on the same coordinator connection, so
 * the broker sees the commit first.
 *
 * Offsets live in group_offsets.c, the leader's assignors in assignor.c;
 * the state they share is in sl_grp.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/sl_grp.h"
#include "kp_msgs.h"

/* ---- helpers ---------------------------------------------------------------- */

sl_topic_partition *sl_grp_tps_export(const sl_tp *tps, int n)
{
    size_t names = 0;
    for (int i = 0; i < n; i++)
        names += strlen(tps[i].topic) + 1;
    sl_topic_partition *o = malloc(sizeof *o * (size_t)n + names + 1);
    if (!o)
        return NULL;
    char *s = (char *)(o + n);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(tps[i].topic) + 1;
        memcpy(s, tps[i].topic, len);
        o[i] = (sl_topic_partition){ s, tps[i].partition, tps[i].offset, 0 };
        s += len;
    }
    return o;
}

void sl_grp_ev_push(sl_client *cl, int type, int err, sl_topic_partition *tps, int n)
{
    sl_grp *g = cl->grp;
    g_event *e = calloc(1, sizeof *e);
    if (!e) {
        free(tps);
        return;
    }
    e->type = type;
    e->err = err;
    e->tps = tps;
    e->n = n;
    if (g->ev_tail)
        g->ev_tail->next = e;
    else
        g->ev_head = e;
    g->ev_tail = e;
    pthread_cond_broadcast(&cl->cond);
}

void sl_grp_free_tps(sl_tp *t, int n)
{
    for (int i = 0; i < n; i++)
        free(t[i].topic);
    free(t);
}

static void members_free(sl_grp *g)
{
    for (int i = 0; i < g->n_members; i++) {
        free(g->members[i].id);
        for (int j = 0; j < g->members[i].n_topics; j++)
            free(g->members[i].topics[j]);
        free(g->members[i].topics);
        free(g->members[i].out);
    }
    free(g->members);
    g->members = NULL;
    g->n_members = 0;
}

static void set_str(char **slot, kp_str s)
{
    char *d = s.len >= 0 ? sl_strndup(s.p ? s.p : "", (size_t)s.len) : NULL;
    free(*slot);
    *slot = d;
}

void sl_grp_coord_lost(sl_client *cl)
{
    cl->grp->coord = -1;
}

static void rejoin(sl_client *cl, const char *why)
{
    sl_grp *g = cl->grp;
    if (sl_sub_empty(&g->sub))
        return;
    sl_log(cl, 6, "group %s: rejoining (%s)", cl->conf.group_id, why);
    g->state = G_REVOKE_WAIT;
    g->revoke_done = false;
    if (g->n_assigned && cl->conf.rebalance_cb) {
        sl_topic_partition *t = sl_grp_tps_export(g->assigned, g->n_assigned);
        if (t)
            sl_grp_ev_push(cl, SL_REBALANCE_REVOKE, 0, t, g->n_assigned);
        else
            g->revoke_done = true;
    } else {
        g->revoke_done = true;
    }
}

bool sl_grp_coord_error(int ec)
{
    return ec == SL_ERR_NOT_COORDINATOR || ec == SL_ERR_COORDINATOR_NOT_AVAILABLE ||
           ec == KP_COORDINATOR_LOAD_IN_PROGRESS || ec == SL_E_TRANSPORT ||
           ec == SL_E_TIMED_OUT;
}

/* ---- FindCoordinator -------------------------------------------------------- */

static void handle_find_coord(sl_client *cl, sl_broker *b, int err, sl_frame *f,
                              kp_rd *r, int16_t ver, void *ctx)
{
    (void)b; (void)f; (void)ctx;
    sl_grp *g = cl->grp;
    if (!g)
        return;
    g->coord_inflight = false;
    int32_t node = -1;
    int ec = err ? -1 : sl_find_coordinator_read(cl, r, ver, &node);
    if (err || ec != 0) {
        g->coord_retry_at = sl_now_ms() + cl->conf.retry_backoff_ms * 2;
        sl_log(cl, 7, "group %s: FindCoordinator: %s", cl->conf.group_id,
               sl_err_name(err ? err : ec));
        return;
    }
    g->coord = node;
    sl_log(cl, 7, "group %s: coordinator is %d", cl->conf.group_id, node);
    pthread_cond_broadcast(&cl->cond);
}

int sl_find_coordinator_read(sl_client *cl, kp_rd *r, int16_t ver, int32_t *node)
{
    kp_FindCoordinatorResponse m;
    kp_arena a;                                           /* no arrays before v4 */
    kp_arena_init(&a, 0);
    int rc = kp_dec_FindCoordinatorResponse(r, ver, &m, &a);
    kp_arena_free(&a);
    if (rc)
        return -1;
    if (m.ErrorCode)
        return m.ErrorCode;
    if (m.Host.len <= 0 || m.Host.len >= 256)
        return -1;
    char h[256];
    kp_str_copy(m.Host, h, sizeof h);                     /* Host points into the frame */
    sl_broker_add(cl, m.NodeId, h, m.Port);
    *node = m.NodeId;
    return 0;
}

kp_buf *sl_grp_op_req(sl_client *cl, sl_op *op, sl_broker *b, int16_t api,
                      int16_t lo, int16_t hi, int16_t *ver)
{
    int16_t v = sl_api_version(b, api, lo, hi);
    if (v < 0) {
        sl_op_finish(cl, op, SL_E_UNSUPPORTED, "coordinator lacks %s v%d-%d",
                     kp_api_name(api), lo, hi);
        return NULL;
    }
    *ver = v;
    return sl_req_begin(cl, b, api, v);
}

sl_broker *sl_grp_coord_ready(sl_client *cl, int64_t now)
{
    sl_grp *g = cl->grp;
    if (g->coord >= 0) {
        sl_broker *b = sl_broker_ready(cl, g->coord);
        if (b)
            return b;
        /* Its broker is gone or a connection to it failed (next_connect is
         * set by a failure): ask again who coordinates — another broker
         * takes the group over when one dies — instead of waiting out the
         * op's timeout for this one to return. */
        b = sl_broker_find(cl, g->coord);
        if (b && (b->state != SL_B_DOWN || b->next_connect == 0))
            return NULL;                                  /* connecting */
        sl_log(cl, 6, "group %s: coordinator %d unreachable, asking again",
               cl->conf.group_id, g->coord);
        g->coord = -1;
        if (g->coord_retry_at < now + cl->conf.retry_backoff_ms)
            g->coord_retry_at = now + cl->conf.retry_backoff_ms;
    }
    if (g->coord_inflight || now < g->coord_retry_at)
        return NULL;
    sl_broker *b = sl_any_broker(cl);
    if (!b)
        return NULL;
    int16_t v = sl_api_version(b, KP_API_FIND_COORDINATOR, 0, 2);
    if (v < 0) {
        g->coord_retry_at = now + 5000;
        sl_log(cl, 3, "broker %d lacks FindCoordinator: no group support", b->id);
        return NULL;
    }
    sl_find_coordinator_req(sl_req_begin(cl, b, KP_API_FIND_COORDINATOR, v), v,
                            cl->conf.group_id);
    sl_req_end(cl, b, handle_find_coord, NULL);
    g->coord_inflight = true;
    return NULL;
}

void sl_find_coordinator_req(kp_buf *w, int16_t v, const char *group_id)
{
    kp_FindCoordinatorRequest q;
    kp_init_FindCoordinatorRequest(&q);                   /* KeyType 0: a group */
    q.Key = kp_str_cstr(group_id);
    kp_enc_FindCoordinatorRequest(w, v, &q);
}

int32_t sl_grp_coordinator(sl_client *cl)
{
    return cl->grp ? cl->grp->coord : -1;
}

/* ---- JoinGroup / SyncGroup ------------------------------------------------------ */

/* ConsumerProtocolSubscription v0, the protocols' metadata: the consumer
 * protocol's own format inside JoinGroup's bytes (not a Kafka API message,
 * so not generated). */
static void write_subscription(kp_buf *w, sl_grp *g)
{
    kp_wr_i16(w, 0);                                      /* Version */
    kp_wr_array(w, g->sub.n_topics);
    for (int i = 0; i < g->sub.n_topics; i++)
        kp_wr_string(w, g->sub.topics[i], -1);
    kp_wr_bytes(w, NULL, -1);                             /* UserData */
}

/* The version of a group-protocol API to use with the coordinator, or -1
 * (logged, and the group retries in 5 s) when it offers none of 0..max. */
static int16_t protocol_version(sl_client *cl, sl_broker *b, int16_t api,
                                int16_t max, const char *name)
{
    int16_t v = sl_api_version(b, api, 0, max);
    if (v < 0) {
        sl_log(cl, 3, "coordinator lacks %s v0-%d", name, max);
        cl->grp->retry_at = sl_now_ms() + 5000;
    }
    return v;
}

static void send_sync(sl_client *cl, sl_broker *b);

/* The answer to the JoinGroup or SyncGroup in flight came (or failed): the
 * group, to handle it in, if it is still in that state; else NULL. */
static sl_grp *answered(sl_client *cl, int state)
{
    sl_grp *g = cl->grp;
    if (!g)
        return NULL;
    g->inflight = false;
    return g->state == state ? g : NULL;
}

static void handle_sync(sl_client *cl, sl_broker *b, int err, sl_frame *f, kp_rd *r,
                        int16_t ver, void *ctx)
{
    (void)b; (void)f; (void)ctx;
    sl_grp *g = answered(cl, G_SYNC);
    if (!g)
        return;
    int16_t ec = -1;
    kp_SyncGroupResponse m;
    kp_init_SyncGroupResponse(&m);
    if (!err) {
        kp_arena ar;                                      /* SyncGroup has no arrays */
        kp_arena_init(&ar, 0);
        ec = kp_dec_SyncGroupResponse(r, ver, &m, &ar) ? -1 : m.ErrorCode;
        kp_arena_free(&ar);
    }
    kp_str asg = m.Assignment;                            /* into the frame */
    int e = err ? err : ec;
    if (e) {
        if (sl_grp_coord_error(e))
            sl_grp_coord_lost(cl);
        if (e == SL_ERR_UNKNOWN_MEMBER_ID || e == SL_ERR_ILLEGAL_GENERATION) {
            free(g->member_id);
            g->member_id = NULL;
        }
        g->state = G_JOIN;
        g->retry_at = sl_now_ms() + (e == SL_ERR_REBALANCE_IN_PROGRESS ? 0 : cl->conf.retry_backoff_ms);
        sl_log(cl, 6, "group %s: SyncGroup: %s", cl->conf.group_id, sl_err_name(e));
        return;
    }
    /* ConsumerProtocolAssignment: Version, [Topic, [Partition]], UserData */
    sl_tp *tps = NULL;
    int n = 0, cap = 0;
    if (asg.len > 0) {
        kp_rd a;
        kp_rd_init(&a, asg.p, (size_t)asg.len);
        (void)kp_rd_i16(&a);
        int32_t nt = kp_rd_array(&a, 6);
        for (int32_t i = 0; i < nt && kp_rd_ok(&a); i++) {
            kp_str t = kp_rd_string(&a);
            int32_t np = kp_rd_array(&a, 4);
            for (int32_t j = 0; j < np && kp_rd_ok(&a); j++) {
                int32_t p = kp_rd_i32(&a);
                if (n == cap) {
                    cap = cap ? cap * 2 : 16;
                    sl_tp *nt2 = realloc(tps, sizeof *nt2 * (size_t)cap);
                    if (!nt2)
                        break;
                    tps = nt2;
                }
                tps[n].topic = sl_strndup(t.p ? t.p : "", t.len > 0 ? (size_t)t.len : 0);
                tps[n].partition = p;
                tps[n].offset = SL_OFFSET_STORED;
                n++;
            }
        }
    }
    sl_grp_free_tps(g->assigned, g->n_assigned);
    g->assigned = tps;
    g->n_assigned = n;
    g->state = G_STABLE;
    int64_t now = sl_now_ms();
    g->next_hb = now + cl->conf.heartbeat_interval_ms;
    g->next_autocommit = now + cl->conf.auto_commit_interval_ms;
    sl_cons_set_assignment(cl, tps, n, true);
    sl_log(cl, 6, "group %s: generation %d, %d partition(s) assigned", cl->conf.group_id,
           g->generation, n);
    if (cl->conf.rebalance_cb) {
        sl_topic_partition *t = sl_grp_tps_export(tps, n);
        if (t || n == 0)
            sl_grp_ev_push(cl, SL_REBALANCE_ASSIGN, 0, t, n);
    }
}

/* ConsumerProtocolAssignment v0 of member m (the consumer protocol's own
 * format inside SyncGroup's bytes): its partitions grouped by topic (they
 * were given topic by topic, but roundrobin interleaves members, not
 * topics). */
static void write_assignment(kp_buf *w, const g_member *m)
{
    kp_wr_i16(w, 0);                                      /* Version */
    size_t cnt_pos = kp_wr_i32_placeholder(w);
    int32_t ntop = 0;
    for (int j = 0; j < m->n_out; j++) {
        bool first = true;
        for (int k = 0; k < j && first; k++)
            first = strcmp(m->out[k].topic, m->out[j].topic) != 0;
        if (!first)
            continue;
        ntop++;
        kp_wr_string(w, m->out[j].topic, -1);
        int32_t np = 0;
        for (int k = j; k < m->n_out; k++)
            np += strcmp(m->out[k].topic, m->out[j].topic) == 0;
        kp_wr_array(w, np);
        for (int k = j; k < m->n_out; k++)
            if (strcmp(m->out[k].topic, m->out[j].topic) == 0)
                kp_wr_i32(w, m->out[k].partition);
    }
    kp_wr_i32_at(w, cnt_pos, ntop);
    kp_wr_bytes(w, NULL, -1);                             /* UserData */
}

static void send_sync(sl_client *cl, sl_broker *b)
{
    sl_grp *g = cl->grp;
    int16_t v = protocol_version(cl, b, KP_API_SYNC_GROUP, 3, "SyncGroup");
    if (v < 0)
        return;
    /* Every assignment into one buffer first, sliced once it stops moving. */
    kp_buf asg;
    kp_buf_init(&asg);
    size_t *ends = calloc((size_t)g->n_members + 1, sizeof *ends);
    kp_SyncGroupRequest_SyncGroupRequestAssignment *sa =
        calloc((size_t)g->n_members + 1, sizeof *sa);
    for (int i = 0; ends && sa && i < g->n_members; i++) {
        write_assignment(&asg, &g->members[i]);
        ends[i] = asg.len;
    }
    if (!ends || !sa || asg.err) {
        sl_log(cl, 3, "group %s: SyncGroup: out of memory", cl->conf.group_id);
        g->retry_at = sl_now_ms() + cl->conf.retry_backoff_ms;
        g->state = G_JOIN;
        members_free(g);
        free(ends);
        free(sa);
        kp_buf_free(&asg);
        return;
    }
    kp_SyncGroupRequest q;
    kp_init_SyncGroupRequest(&q);                         /* GroupInstanceId null */
    q.GroupId = kp_str_cstr(cl->conf.group_id);
    q.GenerationId = g->generation;
    q.MemberId = kp_str_cstr(g->member_id ? g->member_id : "");
    for (int i = 0; i < g->n_members; i++) {
        size_t start = i ? ends[i - 1] : 0;
        sa[i].MemberId = kp_str_cstr(g->members[i].id);
        sa[i].Assignment = (kp_str){ (const char *)asg.data + start,
                                     (int32_t)(ends[i] - start) };
    }
    q.Assignments = sa;
    q.Assignments_count = g->n_members;
    kp_enc_SyncGroupRequest(sl_req_begin(cl, b, KP_API_SYNC_GROUP, v), v, &q);
    sl_req_end(cl, b, handle_sync, NULL);
    free(ends);
    free(sa);
    kp_buf_free(&asg);
    g->inflight = true;
    g->state = G_SYNC;
    members_free(g);
}

/* Leader: compute the assignment once the metadata of every topic is in. */
static void leader_assign(sl_client *cl, sl_broker *b)
{
    sl_grp *g = cl->grp;
    char **topics;
    int nt = sl_grp_all_topics(g, &topics);
    /* Fresh metadata (partition counts may have changed), like the Java
     * leader.  It also lets followers' SyncGroups arrive first, which
     * librdkafka's mock coordinator needs (a real one parks them). */
    bool ready = cl->md_epoch != g->assign_md_epoch;
    for (int i = 0; i < nt; i++) {
        sl_mtopic *t = sl_md_topic(cl, topics[i], true);
        if (t && !t->known) {
            sl_md_want(cl, topics[i]);
            ready = false;
        }
    }
    if (!ready) {
        free(topics);
        g->state = G_ASSIGN_WAIT;
        return;
    }
    sl_grp_assign(cl, g, topics, nt);
    free(topics);
    send_sync(cl, b);
}

/* A JoinGroup answer (decoded into j; e: its error, or the transport's). */
static void join_answered(sl_client *cl, sl_broker *b, int e, const kp_JoinGroupResponse *j)
{
    sl_grp *g = cl->grp;
    kp_str proto = j->ProtocolName, leader = j->Leader, member = j->MemberId;
    int32_t gen = j->GenerationId;
    if (e == KP_MEMBER_ID_REQUIRED) {
        set_str(&g->member_id, member);
        g->retry_at = 0;
        return;                                           /* join again at once */
    }
    if (e) {
        if (sl_grp_coord_error(e))
            sl_grp_coord_lost(cl);
        if (e == SL_ERR_UNKNOWN_MEMBER_ID || e == SL_ERR_ILLEGAL_GENERATION) {
            free(g->member_id);
            g->member_id = NULL;
        }
        g->retry_at = sl_now_ms() + (e == SL_ERR_REBALANCE_IN_PROGRESS ? 0
                                     : cl->conf.retry_backoff_ms * 5);
        sl_log(cl, 6, "group %s: JoinGroup: %s", cl->conf.group_id, sl_err_name(e));
        return;
    }
    set_str(&g->member_id, member);
    set_str(&g->protocol, proto);
    g->generation = gen;
    members_free(g);
    bool is_leader = member.len == leader.len && member.len >= 0 &&
                     memcmp(member.p, leader.p, (size_t)member.len) == 0;
    if (!is_leader) {
        send_sync(cl, b);
        return;
    }
    int32_t nm = j->Members_count;
    g->members = calloc(nm > 0 ? (size_t)nm : 1, sizeof *g->members);
    for (int32_t i = 0; g->members && i < nm; i++) {
        kp_str id = j->Members[i].MemberId, md = j->Members[i].Metadata;
        g_member *m = &g->members[g->n_members++];
        m->id = sl_strndup(id.p ? id.p : "", id.len > 0 ? (size_t)id.len : 0);
        /* ConsumerProtocolSubscription: Version, [Topic], UserData */
        kp_rd s;
        kp_rd_init(&s, md.p, md.len > 0 ? (size_t)md.len : 0);
        (void)kp_rd_i16(&s);                              /* Version */
        int32_t nt = kp_rd_array(&s, 2);
        m->topics = calloc(nt > 0 ? (size_t)nt : 1, sizeof *m->topics);
        for (int32_t k = 0; m->topics && k < nt && kp_rd_ok(&s); k++) {
            kp_str t = kp_rd_string(&s);
            if (kp_rd_ok(&s) && t.len > 0)
                m->topics[m->n_topics++] = sl_strndup(t.p, (size_t)t.len);
        }
    }
    if (!g->members) {
        members_free(g);
        g->retry_at = sl_now_ms() + cl->conf.retry_backoff_ms;
        return;
    }
    sl_log(cl, 6, "group %s: leader of generation %d (%d members, %s)",
           cl->conf.group_id, gen, g->n_members, g->protocol ? g->protocol : "?");
    g->assign_md_epoch = cl->md_epoch;
    sl_md_refresh(cl);
    leader_assign(cl, b);
}

static void handle_join(sl_client *cl, sl_broker *b, int err, sl_frame *f, kp_rd *r,
                        int16_t ver, void *ctx)
{
    (void)f; (void)ctx;
    sl_grp *g = answered(cl, G_JOIN);
    if (!g)
        return;
    int16_t ec = -1;
    kp_JoinGroupResponse m;
    kp_init_JoinGroupResponse(&m);
    kp_arena ar;
    kp_arena_init(&ar, 0);
    if (!err)
        ec = kp_dec_JoinGroupResponse(r, ver, &m, &ar) ? -1 : m.ErrorCode;
    int e = err ? err : ec;
    join_answered(cl, b, e, &m);
    kp_arena_free(&ar);
}

static void send_join(sl_client *cl, sl_broker *b)
{
    sl_grp *g = cl->grp;
    int16_t v = protocol_version(cl, b, KP_API_JOIN_GROUP, 5, "JoinGroup");
    if (v < 0)
        return;
    kp_buf sub;
    kp_buf_init(&sub);
    write_subscription(&sub, g);
    kp_JoinGroupRequest_JoinGroupRequestProtocol
        protos[sizeof cl->conf.assignors / sizeof cl->conf.assignors[0]];
    int np = cl->conf.n_assignors;                        /* conf.c: at most 2 */
    for (int i = 0; i < np; i++)
        protos[i] = (kp_JoinGroupRequest_JoinGroupRequestProtocol){
            .Name = kp_str_cstr(cl->conf.assignors[i] == SL_ASSIGN_RANGE ? "range" : "roundrobin"),
            .Metadata = { (const char *)sub.data, (int32_t)sub.len },
        };
    kp_JoinGroupRequest q;
    kp_init_JoinGroupRequest(&q);                         /* GroupInstanceId null */
    q.GroupId = kp_str_cstr(cl->conf.group_id);
    q.SessionTimeoutMs = cl->conf.session_timeout_ms;
    q.RebalanceTimeoutMs = cl->conf.max_poll_interval_ms; /* v1+ (ignorable before) */
    q.MemberId = kp_str_cstr(g->member_id ? g->member_id : "");
    q.ProtocolType = kp_str_cstr("consumer");
    q.Protocols = protos;
    q.Protocols_count = np;
    kp_enc_JoinGroupRequest(sl_req_begin(cl, b, KP_API_JOIN_GROUP, v), v, &q);
    kp_buf_free(&sub);
    sl_req_end(cl, b, handle_join, NULL);
    g->inflight = true;
}

/* ---- Heartbeat ------------------------------------------------------------------ */

static void handle_heartbeat(sl_client *cl, sl_broker *b, int err, sl_frame *f, kp_rd *r,
                             int16_t ver, void *ctx)
{
    (void)b; (void)f; (void)ctx;
    sl_grp *g = cl->grp;
    if (!g)
        return;
    g->hb_inflight = false;
    int16_t ec = -1;
    if (!err) {
        kp_HeartbeatResponse m;
        kp_arena a;                                       /* no arrays */
        kp_arena_init(&a, 0);
        ec = kp_dec_HeartbeatResponse(r, ver, &m, &a) ? -1 : m.ErrorCode;
        kp_arena_free(&a);
    }
    int e = err ? err : ec;
    if (!e || (g->state != G_STABLE && g->state != G_REVOKE_WAIT))
        return;
    if (sl_grp_coord_error(e)) {
        sl_grp_coord_lost(cl);
        return;
    }
    if (e == SL_ERR_UNKNOWN_MEMBER_ID || e == SL_ERR_ILLEGAL_GENERATION) {
        free(g->member_id);
        g->member_id = NULL;
    }
    /* In REVOKE_WAIT the rejoin is already under way (the usual answer
     * there is REBALANCE_IN_PROGRESS); a lost member id makes it fresh. */
    if (g->state == G_STABLE)
        rejoin(cl, sl_err_name(e));
}

static void send_heartbeat(sl_client *cl, sl_broker *b)
{
    sl_grp *g = cl->grp;
    int16_t v = sl_api_version(b, KP_API_HEARTBEAT, 0, 3);
    if (v < 0)
        return;
    kp_HeartbeatRequest q;
    kp_init_HeartbeatRequest(&q);                         /* GroupInstanceId null */
    q.GroupId = kp_str_cstr(cl->conf.group_id);
    q.GenerationId = g->generation;
    q.MemberId = kp_str_cstr(g->member_id ? g->member_id : "");
    kp_enc_HeartbeatRequest(sl_req_begin(cl, b, KP_API_HEARTBEAT, v), v, &q);
    sl_req_end(cl, b, handle_heartbeat, NULL);
    g->hb_inflight = true;
}

static void heartbeat_tick(sl_client *cl, sl_broker *b, int64_t now, int64_t *next)
{
    sl_grp *g = cl->grp;
    if (!g->hb_inflight && now >= g->next_hb) {
        send_heartbeat(cl, b);
        g->next_hb = now + cl->conf.heartbeat_interval_ms;
    }
    if (g->next_hb < *next)
        *next = g->next_hb;
}

/* ---- LeaveGroup ---------------------------------------------------------------- */

typedef struct leave_op {
    sl_op op;
    char *member_id;
} leave_op;

static void leave_free(sl_op *op)
{
    free(((leave_op *)op)->member_id);
    free(op);
}

static void handle_leave(sl_client *cl, sl_broker *b, int err, sl_frame *f, kp_rd *r,
                         int16_t ver, void *ctx)
{
    (void)b; (void)f;
    leave_op *l = ctx;
    int16_t ec = 0;
    if (!err) {
        kp_LeaveGroupResponse m;
        kp_arena a;                                       /* Members: v3+ only */
        kp_arena_init(&a, 0);
        /* A short answer reads as success, as before: we are leaving anyway. */
        ec = kp_dec_LeaveGroupResponse(r, ver, &m, &a) ? 0 : m.ErrorCode;
        kp_arena_free(&a);
    }
    sl_op_finish(cl, &l->op, err ? err : ec, NULL);
}

static int leave_step(sl_client *cl, sl_op *op, int64_t now)
{
    leave_op *l = (leave_op *)op;
    sl_broker *b = sl_grp_coord_ready(cl, now);
    if (!b)
        return 0;
    int16_t v;
    kp_buf *w = sl_grp_op_req(cl, op, b, KP_API_LEAVE_GROUP, 0, 2, &v);
    if (!w)
        return 1;
    kp_LeaveGroupRequest q;
    kp_init_LeaveGroupRequest(&q);
    q.GroupId = kp_str_cstr(cl->conf.group_id);
    q.MemberId = kp_str_cstr(l->member_id);
    kp_enc_LeaveGroupRequest(w, v, &q);
    sl_req_end(cl, b, handle_leave, l);
    return 1;
}

/* Queues a LeaveGroup for the current member id, or returns NULL when
 * there is none (or no memory).  detached: nobody waits for it. */
static leave_op *leave_submit(sl_client *cl, int timeout_ms, bool detached)
{
    sl_grp *g = cl->grp;
    if (!g->member_id || !*g->member_id)
        return NULL;
    leave_op *l = calloc(1, sizeof *l);
    if (!l || !(l->member_id = strdup(g->member_id))) {
        free(l);
        return NULL;
    }
    l->op.step = leave_step;
    l->op.free_fn = leave_free;
    l->op.deadline = sl_now_ms() + timeout_ms;
    l->op.detached = detached;
    sl_op_submit(cl, &l->op);
    return l;
}

/* Gives the assignment up: the group's record of it and the consumer's. */
static void drop_assignment(sl_client *cl)
{
    sl_grp *g = cl->grp;
    sl_grp_free_tps(g->assigned, g->n_assigned);
    g->assigned = NULL;
    g->n_assigned = 0;
    sl_cons_set_assignment(cl, NULL, 0, true);
}

static void forget_membership(sl_grp *g)
{
    free(g->member_id);
    g->member_id = NULL;
    g->generation = -1;
}

/* Leaves the group: revoke (callback on this application thread), final
 * auto commit, LeaveGroup.  Lock held; dropped while waiting. */
static int leave(sl_client *cl, sl_consumer *cons, int timeout_ms)
{
    sl_grp *g = cl->grp;
    int rc = 0;
    if (g->n_assigned && cl->conf.rebalance_cb && cons) {
        sl_topic_partition *t = sl_grp_tps_export(g->assigned, g->n_assigned);
        int n = g->n_assigned;
        pthread_mutex_unlock(&cl->lock);
        if (t)
            cl->conf.rebalance_cb(cons, SL_REBALANCE_REVOKE, t, n, cl->conf.opaque);
        free(t);
        pthread_mutex_lock(&cl->lock);
    }
    if (cl->conf.enable_auto_commit && g->state == G_STABLE)
        rc = sl_grp_commit_positions(cl);
    drop_assignment(cl);
    if (g->state != G_IDLE) {
        leave_op *l = leave_submit(cl, timeout_ms, false);
        if (l)
            sl_op_wait(cl, &l->op, timeout_ms, NULL, 0);
    }
    forget_membership(g);
    g->state = G_IDLE;
    return rc;
}

/* max.poll.interval.ms (design note above).  True when the member has
 * just left the group for it. */
static bool poll_interval_exceeded(sl_client *cl, int64_t now, int64_t *next)
{
    sl_grp *g = cl->grp;
    sl_cons *c = cl->cons;
    if (c->in_poll_wait || c->polls != g->polls_seen) {
        g->polls_seen = c->polls;
        c->last_poll = now;
    }
    int64_t due = c->last_poll + cl->conf.max_poll_interval_ms;
    if (now < due) {
        if (due < *next)
            *next = due;
        return false;
    }
    snprintf(g->poll_errstr, sizeof g->poll_errstr,
             "application maximum poll interval (%d ms) exceeded by %lld ms",
             cl->conf.max_poll_interval_ms, (long long)(now - due));
    sl_log(cl, 4, "group %s: %s: leaving the group", cl->conf.group_id, g->poll_errstr);
    leave_submit(cl, cl->conf.request_timeout_ms, true);
    if (g->n_assigned && cl->conf.rebalance_cb) {
        sl_topic_partition *t = sl_grp_tps_export(g->assigned, g->n_assigned);
        if (t)
            sl_grp_ev_push(cl, SL_REBALANCE_REVOKE, 0, t, g->n_assigned);
    }
    drop_assignment(cl);
    forget_membership(g);
    g->state = G_POLL_LEFT;
    pthread_cond_broadcast(&cl->cond);
    return true;
}

bool sl_grp_poll_error(sl_client *cl, sl_message *m)
{
    sl_grp *g = cl->grp;
    if (g->state != G_POLL_LEFT)
        return false;
    m->err = SL_E_MAX_POLL_EXCEEDED;
    m->errstr = g->poll_errstr;
    m->offset = SL_OFFSET_INVALID;
    m->key_len = m->value_len = -1;
    g->state = G_JOIN;                                    /* rejoin now */
    g->retry_at = 0;
    sl_wakeup(cl);
    return true;
}

/* ---- the member's clock ---------------------------------------------------------- */

void sl_grp_tick(sl_client *cl, int64_t now, int64_t *next)
{
    sl_grp *g = cl->grp;
    sl_grp_stored_tick(cl, now);
    if (g->state == G_IDLE) {
        if (cl->cons->mode == SL_MODE_ASSIGN)
            sl_grp_autocommit_tick(cl, now, next);
        return;
    }
    if (g->state == G_POLL_LEFT || poll_interval_exceeded(cl, now, next))
        return;
    if (sl_sub_update(cl, &g->sub))
        g->sub_changed = true;
    if (g->sub_changed && g->state == G_JOIN && !g->inflight)
        g->sub_changed = false;               /* the next JoinGroup carries it */
    if (g->sub_changed && g->state == G_STABLE) {
        g->sub_changed = false;
        rejoin(cl, "subscribed topics changed");
    }
    if (g->state == G_REVOKE_WAIT) {
        if (!g->revoke_done) {
            sl_broker *b = sl_grp_coord_ready(cl, now);
            if (b && g->member_id)
                heartbeat_tick(cl, b, now, next);
            return;
        }
        if (cl->conf.enable_auto_commit && g->n_assigned) {
            if (!sl_grp_coord_ready(cl, now))
                return;
            sl_grp_auto_commit(cl, now);
        }
        drop_assignment(cl);
        g->state = G_JOIN;
        g->retry_at = 0;
    }
    sl_broker *b = sl_grp_coord_ready(cl, now);
    if (!b) {
        if (g->coord_retry_at > now && g->coord_retry_at < *next)
            *next = g->coord_retry_at;
        return;
    }
    switch (g->state) {
    case G_JOIN:
        if (!g->inflight && sl_sub_ready(&g->sub)) {
            if (g->retry_at > now) {
                if (g->retry_at < *next)
                    *next = g->retry_at;
            } else {
                send_join(cl, b);
            }
        }
        break;
    case G_ASSIGN_WAIT:
        leader_assign(cl, b);
        break;
    case G_STABLE:
        heartbeat_tick(cl, b, now, next);
        sl_grp_autocommit_tick(cl, now, next);
        break;
    default:
        break;
    }
}

bool sl_grp_has_events(sl_client *cl)
{
    return cl->grp && cl->grp->ev_head != NULL;
}

void sl_grp_serve_events(sl_client *cl, sl_consumer *cons)
{
    sl_grp *g = cl->grp;
    while (g->ev_head) {
        g_event *e = g->ev_head;
        g->ev_head = e->next;
        if (!g->ev_head)
            g->ev_tail = NULL;
        pthread_mutex_unlock(&cl->lock);
        if (e->type == EV_COMMIT) {
            if (cl->conf.commit_cb)
                cl->conf.commit_cb(cons, e->err, e->tps, e->n, cl->conf.opaque);
        } else if (cl->conf.rebalance_cb) {
            cl->conf.rebalance_cb(cons, e->type, e->tps, e->n, cl->conf.opaque);
        }
        pthread_mutex_lock(&cl->lock);
        if (e->type == SL_REBALANCE_REVOKE) {
            g->revoke_done = true;
            sl_wakeup(cl);
        }
        free(e->tps);
        free(e);
    }
}

int sl_grp_subscribe(sl_client *cl, const char *const *topics, int n)
{
    sl_grp *g = cl->grp;
    char why[256];
    int rc = sl_sub_set(cl, &g->sub, topics, n, why, sizeof why);
    if (rc) {
        sl_log(cl, 3, "group %s: %s", cl->conf.group_id, why);
        return rc;
    }
    g->sub_changed = false;
    if (n == 0) {
        if (g->state != G_IDLE)
            leave(cl, cl->app_handle, cl->conf.request_timeout_ms);
        return 0;
    }
    if (g->state == G_IDLE || g->state == G_POLL_LEFT) {
        g->state = G_JOIN;
        g->retry_at = 0;
        cl->cons->last_poll = sl_coarse_ms();
    } else {
        rejoin(cl, "subscription changed");
    }
    return 0;
}

int sl_grp_close(sl_client *cl, int timeout_ms)
{
    sl_grp *g = cl->grp;
    int rc = 0;
    sl_grp_commits_drain(cl, timeout_ms);
    if (g->state != G_IDLE)
        rc = leave(cl, cl->app_handle, timeout_ms < 5000 ? timeout_ms : 5000);
    else if (cl->cons->mode == SL_MODE_ASSIGN && cl->conf.enable_auto_commit)
        rc = sl_grp_commit_positions(cl);
    sl_grp_serve_events(cl, cl->app_handle);
    return rc;
}

void sl_grp_init(sl_client *cl)
{
    sl_grp *g = calloc(1, sizeof *g);
    if (!g)
        return;
    g->coord = -1;
    g->generation = -1;
    cl->grp = g;
}

void sl_grp_free(sl_client *cl)
{
    sl_grp *g = cl->grp;
    if (!g)
        return;
    sl_grp_stored_free(cl);
    members_free(g);
    sl_grp_free_tps(g->assigned, g->n_assigned);
    sl_sub_clear(cl, &g->sub);
    while (g->ev_head) {
        g_event *e = g->ev_head;
        g->ev_head = e->next;
        free(e->tps);
        free(e);
    }
    free(g->member_id);
    free(g->protocol);
    free(g);
    cl->grp = NULL;
}
