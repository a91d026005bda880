/*
 * The group membership APIs, every version Kafka defines: FindCoordinator
 * v0-6 (batched keys from v4), JoinGroup v0-9, SyncGroup v0-5, Heartbeat
 * v0-4, LeaveGroup v0-5 (batched members from v3), ListGroups v0-5 (state
 * filter from v4, type filter from v5), DescribeGroups v0-5, DeleteGroups
 * v0-2.  Requests are decoded and responses encoded by the generated codec
 * (kp_msgs.h, from protocol/messages/: flexible versions and their tagged
 * fields included); the decisions live in daemon/group/group_join.c and
 * daemon/group/group_coordinator.c.  Fields newer than Kafka's classic group protocol have
 * fixed answers: JoinGroup v9 SkipAssignment false (the leader always
 * assigns), ListGroups v5 GroupType "classic".
 *
 * A decoded request borrows from the frame and r->arena (protocol/msgs.c
 * M1), both kept until the request is answered, deferred or not; the
 * coordinator copies whatever it keeps longer (member ids, protocols,
 * assignments).  Response arrays come from r->arena too (bk_req_alloc).
 * The decoder is Kafka's: a null where the schema has none (a group id,
 * a protocol's metadata, an assignments array) closes the connection.
 */
#include "daemon/security/sec_authz.h"
#include "daemon/group/group_int.h"
#include "daemon/security/sec_peer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kp_msgs.h"

/* Kafka's answer to a JoinGroup, SyncGroup, Heartbeat or LeaveGroup the
 * principal may not make (READ on the group, daemon/security/sec_authz.c):
 * the response's defaults with GROUP_AUTHORIZATION_FAILED. */
static int gc_denied(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    const int16_t denied = KP_GROUP_AUTHORIZATION_FAILED;
    union {
        kp_JoinGroupResponse join;
        kp_SyncGroupResponse sync;
        kp_HeartbeatResponse heartbeat;
        kp_LeaveGroupResponse leave;
    } m;
    switch (r->hdr.RequestApiKey) {
    case KP_API_JOIN_GROUP:
        kp_init_JoinGroupResponse(&m.join);
        m.join.ErrorCode = denied;
        return bk_req_encoded(r, "JoinGroup", kp_enc_JoinGroupResponse(r->out, v, &m.join));
    case KP_API_SYNC_GROUP:
        kp_init_SyncGroupResponse(&m.sync);
        m.sync.ErrorCode = denied;
        return bk_req_encoded(r, "SyncGroup", kp_enc_SyncGroupResponse(r->out, v, &m.sync));
    case KP_API_HEARTBEAT:
        kp_init_HeartbeatResponse(&m.heartbeat);
        m.heartbeat.ErrorCode = denied;
        return bk_req_encoded(r, "Heartbeat", kp_enc_HeartbeatResponse(r->out, v, &m.heartbeat));
    default:
        kp_init_LeaveGroupResponse(&m.leave);
        m.leave.ErrorCode = denied;
        return bk_req_encoded(r, "LeaveGroup", kp_enc_LeaveGroupResponse(r->out, v, &m.leave));
    }
}

/* READ on the group: what JoinGroup, SyncGroup, Heartbeat and LeaveGroup need. */
static bool gc_may_read(bk_req *r, kp_str group)
{
    return sec_authorized(r, BK_RES_GROUP, group, BK_OP_READ);
}

/* ---- FindCoordinator v0-6 ------------------------------------------------------ */

/* One key's coordinator: KeyType 0 (group), 1 (transaction: the
 * transaction coordinator's answer, b->txn_coordinator_of, daemon/txn/);
 * share groups (2, v6) are not served. */
static void find_one(bk_req *r, int8_t key_type, kp_str key,
                     kp_FindCoordinatorResponse_Coordinator *c)
{
    *c = (kp_FindCoordinatorResponse_Coordinator){
        .Key = key, .NodeId = -1, .Host = kp_str_cstr(""), .Port = -1,
        .ErrorMessage = KP_STR_NULL,                /* null when all is well */
    };
    /* Kafka's getCoordinator asks DESCRIBE on the transactional id
     * before anything else of a transaction key. */
    if (key_type == 1 && !sec_authorized(r, BK_RES_TRANSACTIONAL_ID, key, BK_OP_DESCRIBE)) {
        c->ErrorCode = KP_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        return;
    }
    if (key_type == 2 || (key_type == 1 && !r->b->txn_coordinator_of)) {
        c->ErrorCode = KP_COORDINATOR_NOT_AVAILABLE;
        c->ErrorMessage = kp_str_cstr(key_type == 1
                                      ? "transactions are not supported by this broker"
                                      : "share groups are not supported by this broker");
        return;
    }
    if (key_type != 0 && key_type != 1) {
        c->ErrorCode = KP_INVALID_REQUEST;
        c->ErrorMessage = kp_str_cstr("unknown coordinator key type");
        return;
    }
    if (key_type == 0 && !sec_authorized(r, BK_RES_GROUP, key, BK_OP_DESCRIBE)) {
        c->ErrorCode = KP_GROUP_AUTHORIZATION_FAILED;
        return;
    }
    char name[256];
    kp_str_copy(key, name, sizeof name);
    int32_t id = key_type == 1 ? r->b->txn_coordinator_of(r->b, key.p, key.len > 0 ?
                                                          (size_t)key.len : 0)
                               : gc_coordinator_of(r->b, name);
    bk_broker_info live[1024];
    int n = view_brokers_info(r->b, net_conn_listener(r->conn), live, 1024);
    c->ErrorCode = KP_COORDINATOR_NOT_AVAILABLE;
    for (int i = 0; i < n; i++)
        if (live[i].id == id) {
            c->ErrorCode = KP_NONE;
            c->NodeId = id;
            c->Host = kp_str_cstr(live[i].host);
            c->Port = live[i].port;
        }
}

int gc_handle_find_coordinator(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_FindCoordinatorRequest q;
    if (kp_dec_FindCoordinatorRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    kp_FindCoordinatorResponse m;
    kp_init_FindCoordinatorResponse(&m);
    if (v >= 4) {                                   /* one answer per key */
        int32_t n = q.CoordinatorKeys_count;
        m.Coordinators = bk_req_alloc(r, (size_t)(n > 0 ? n : 1), sizeof *m.Coordinators);
        if (!m.Coordinators)
            return BK_CLOSE;
        for (int32_t i = 0; i < n; i++)
            find_one(r, q.KeyType, q.CoordinatorKeys[i], &m.Coordinators[i]);
        m.Coordinators_count = n;
    } else {
        kp_FindCoordinatorResponse_Coordinator c;
        find_one(r, q.KeyType, q.Key, &c);
        m.ErrorCode = c.ErrorCode;
        m.ErrorMessage = c.ErrorMessage;
        m.NodeId = c.NodeId;
        m.Host = c.Host;
        m.Port = c.Port;
    }
    return bk_req_encoded(r, "FindCoordinator", kp_enc_FindCoordinatorResponse(r->out, v, &m));
}

/* ---- JoinGroup v0-9 -------------------------------------------------------------- */

int gc_handle_join_group(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_JoinGroupRequest q;
    if (kp_dec_JoinGroupRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    if (!gc_may_read(r, q.GroupId))
        return gc_denied(r);
    gc_join_args a = {
        .group_id = q.GroupId, .session_timeout_ms = q.SessionTimeoutMs,
        /* v0: Kafka's rule (the schema's default is -1) */
        .rebalance_timeout_ms = q.RebalanceTimeoutMs < 0 ? q.SessionTimeoutMs
                                                          : q.RebalanceTimeoutMs,
        .member_id = q.MemberId,
        /* "" is not an identity */
        .instance_id = q.GroupInstanceId.len == 0 ? KP_STR_NULL : q.GroupInstanceId,
        .protocol_type = q.ProtocolType,
        .nprotos = q.Protocols_count,
        .protos = q.Protocols,
    };
    a.require_known_member_id = v >= 4 && a.instance_id.len < 0;
    return gc_join(r, &a);
}

/* ---- SyncGroup v0-5 -------------------------------------------------------------- */

int gc_handle_sync_group(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_SyncGroupRequest q;
    if (kp_dec_SyncGroupRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    if (!gc_may_read(r, q.GroupId))
        return gc_denied(r);
    kp_str instance = q.GroupInstanceId.len == 0 ? KP_STR_NULL : q.GroupInstanceId;
    return gc_sync(r, q.GroupId, q.GenerationId, q.MemberId, instance, q.ProtocolType,
                   q.ProtocolName, q.Assignments_count, q.Assignments);
}

/* ---- Heartbeat v0-4, LeaveGroup v0-5 -------------------------------------------- */

int gc_handle_heartbeat(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_HeartbeatRequest q;
    if (kp_dec_HeartbeatRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    if (!gc_may_read(r, q.GroupId))
        return gc_denied(r);
    kp_str instance = q.GroupInstanceId.len == 0 ? KP_STR_NULL : q.GroupInstanceId;
    kp_HeartbeatResponse m;
    kp_init_HeartbeatResponse(&m);
    m.ErrorCode = gc_heartbeat(q.GroupId, q.GenerationId, q.MemberId, instance);
    return bk_req_encoded(r, "Heartbeat", kp_enc_HeartbeatResponse(r->out, v, &m));
}

int gc_handle_leave_group(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_LeaveGroupRequest q;
    if (kp_dec_LeaveGroupRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    if (!gc_may_read(r, q.GroupId))
        return gc_denied(r);
    kp_LeaveGroupResponse m;
    kp_init_LeaveGroupResponse(&m);
    if (v < 3) {
        /* v0-2: the member's own error is the response's error. */
        m.ErrorCode = gc_leave(q.GroupId, q.MemberId);
        return bk_req_encoded(r, "LeaveGroup", kp_enc_LeaveGroupResponse(r->out, v, &m));
    }
    /* v3+: a group-level error alone, else one answer per member (an
     * unknown group: UNKNOWN_MEMBER_ID for each, as Kafka). */
    int16_t gerr;
    gc_group *g = gc_member_group(q.GroupId, &gerr);
    if (!g && gerr != KP_UNKNOWN_MEMBER_ID) {
        m.ErrorCode = gerr;
        return bk_req_encoded(r, "LeaveGroup", kp_enc_LeaveGroupResponse(r->out, v, &m));
    }
    int32_t n = q.Members_count;
    m.Members = bk_req_alloc(r, (size_t)(n > 0 ? n : 1), sizeof *m.Members);
    if (!m.Members)
        return BK_CLOSE;
    for (int32_t i = 0; i < n; i++) {
        const kp_LeaveGroupRequest_MemberIdentity *x = &q.Members[i];
        /* A member leaving may free the group (the last one of an
         * offsets-less group does not: Empty groups stay), so look again. */
        g = gc_member_group(q.GroupId, &gerr);
        m.Members[i] = (kp_LeaveGroupResponse_MemberResponse){
            .MemberId = x->MemberId, .GroupInstanceId = x->GroupInstanceId,
            .ErrorCode = g ? gc_leave_member(g, x->MemberId, x->GroupInstanceId) : gerr,
        };
    }
    m.Members_count = n;
    return bk_req_encoded(r, "LeaveGroup", kp_enc_LeaveGroupResponse(r->out, v, &m));
}

/* Kafka compares filter entries without regard to case. */
static bool strncasecmp_str(kp_str s, const char *name)
{
    return s.len >= 0 && (size_t)s.len == strlen(name) &&
           strncasecmp(s.p, name, (size_t)s.len) == 0;
}

/* ---- ListGroups v0-5 ---------------------------------------------------------------- */

int gc_handle_list_groups(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_ListGroupsRequest q;
    if (kp_dec_ListGroupsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    kp_ListGroupsResponse m;
    kp_init_ListGroupsResponse(&m);
    kp_ListGroupsResponse_ListedGroup *lg = bk_req_alloc(r, gc->ngroups, sizeof *lg);
    if (!lg)
        return BK_CLOSE;
    /* TypesFilter (v5): every group here is "classic"; an empty filter
     * (or none) passes all, as does an empty StatesFilter (v4). */
    bool classic = q.TypesFilter_count <= 0;
    for (int32_t i = 0; i < q.TypesFilter_count; i++)
        classic |= strncasecmp_str(q.TypesFilter[i], "classic");
    int32_t n = 0;
    /* Kafka: DESCRIBE on the cluster lists all, else those one may describe. */
    bool all = BK_AUTHZ_CLUSTER(r, BK_OP_DESCRIBE);
    for (size_t i = 0; classic && i < gc->hash_size; i++)
        for (gc_group *g = gc->hash[i]; g && (size_t)n < gc->ngroups; g = g->hnext) {
            if (!all && !sec_authorized(r, BK_RES_GROUP, kp_str_cstr(g->id), BK_OP_DESCRIBE))
                continue;
            const char *state = gc_state_name(g->state);
            bool wanted = q.StatesFilter_count <= 0;
            for (int32_t k = 0; k < q.StatesFilter_count; k++)
                wanted |= strncasecmp_str(q.StatesFilter[k], state);
            if (!wanted)
                continue;
            lg[n++] = (kp_ListGroupsResponse_ListedGroup){
                .GroupId = kp_str_cstr(g->id),
                .ProtocolType = kp_str_cstr(g->protocol_type ? g->protocol_type : ""),
                .GroupState = kp_str_cstr(v >= 4 ? state : ""),      /* ignorable */
                .GroupType = kp_str_cstr(v >= 5 ? "classic" : ""),
            };
        }
    m.Groups = lg;
    m.Groups_count = n;
    return bk_req_encoded(r, "ListGroups", kp_enc_ListGroupsResponse(r->out, v, &m));
}

/* ---- DescribeGroups v0-5 ------------------------------------------------------------ */

static kp_str bytes_or_empty(const void *p, int32_t len)
{
    return p ? (kp_str){ p, len } : (kp_str){ "", 0 };
}

/* 0, or -1 when out of memory. */
static int describe_one(bk_req *r, kp_DescribeGroupsResponse_DescribedGroup *d, kp_str id,
                        bool include_ops)
{
    int16_t err = !sec_authorized(r, BK_RES_GROUP, id, BK_OP_DESCRIBE)
                  ? KP_GROUP_AUTHORIZATION_FAILED : gc_coordinator_error(id);
    gc_group *g = !err ? gc_group_find(id.p, (size_t)id.len) : NULL;
    *d = (kp_DescribeGroupsResponse_DescribedGroup){
        .ErrorCode = err, .GroupId = id,
        /* Kafka: only for a group answered without error */
        .AuthorizedOperations = include_ops && !err ? sec_authorized_ops(r, BK_RES_GROUP, id)
                                                     : INT32_MIN,
    };
    if (err)                                        /* Kafka's groupError: all "" */
        return 0;
    if (!g) {
        d->GroupState = kp_str_cstr("Dead");
        return 0;
    }
    bool stable = g->state == GC_STABLE;
    d->GroupState = kp_str_cstr(gc_state_name(g->state));
    d->ProtocolType = kp_str_cstr(g->protocol_type ? g->protocol_type : "");
    d->ProtocolData = kp_str_cstr(stable && g->protocol ? g->protocol : "");
    kp_DescribeGroupsResponse_DescribedGroupMember *dm = bk_req_alloc(r, (size_t)g->nmembers,
                                                                  sizeof *dm);
    if (!dm)
        return -1;
    d->Members = dm;
    for (gc_member *m = g->members.next; m != &g->members; m = m->next, dm++) {
        /* Metadata and assignment only in Stable, as Kafka. */
        const gc_proto *p = NULL;
        if (stable)
            for (int i = 0; i < m->nprotos; i++)
                if (g->protocol && !strcmp(m->protos[i].name, g->protocol))
                    p = &m->protos[i];
        bool has_a = stable && m->assignment;
        *dm = (kp_DescribeGroupsResponse_DescribedGroupMember){
            .MemberId = kp_str_cstr(m->id), .GroupInstanceId = kp_str_cstr(m->instance_id),
            .ClientId = kp_str_cstr(m->client_id), .ClientHost = kp_str_cstr(m->client_host),
            .MemberMetadata = p ? bytes_or_empty(p->meta, p->meta_len) : bytes_or_empty(NULL, 0),
            .MemberAssignment = bytes_or_empty(has_a ? m->assignment : NULL,
                                               has_a ? m->assignment_len : 0),
        };
    }
    d->Members_count = g->nmembers;
    return 0;
}

int gc_handle_describe_groups(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_DescribeGroupsRequest q;
    if (kp_dec_DescribeGroupsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    kp_DescribeGroupsResponse m;
    kp_init_DescribeGroupsResponse(&m);
    kp_DescribeGroupsResponse_DescribedGroup *dg = bk_req_alloc(r, (size_t)q.Groups_count,
                                                            sizeof *dg);
    if (!dg)
        return BK_CLOSE;
    for (int32_t i = 0; i < q.Groups_count; i++)
        if (describe_one(r, &dg[i], q.Groups[i], q.IncludeAuthorizedOperations) != 0)
            return BK_CLOSE;
    m.Groups = dg;
    m.Groups_count = q.Groups_count;
    return bk_req_encoded(r, "DescribeGroups", kp_enc_DescribeGroupsResponse(r->out, v, &m));
}

/* ---- DeleteGroups v0-2 ---------------------------------------------------------------- */

/* One DeleteGroups request while its deletes are stored; a single
 * allocation, r->state points here. */
struct dg_entry {
    struct dg_request *d;
    kp_str id;                        /* into the request's frame */
    int16_t err;
    struct gc_wait *pending;
    char msg[MD_ERRLEN];              /* unused on the wire (no version has one) */
};
struct dg_request {
    bk_req *r;
    int32_t n, left;
    struct dg_entry e[];
};

/* Answers in r->out; BK_RESPOND, or BK_CLOSE (no memory, or not encodable). */
static int dg_respond(bk_req *r, const struct dg_request *d)
{
    kp_buf_reset(r->out);
    kp_DeleteGroupsResponse m;
    kp_init_DeleteGroupsResponse(&m);
    kp_DeleteGroupsResponse_DeletableGroupResult *res = bk_req_alloc(r, (size_t)d->n, sizeof *res);
    if (!res)
        return BK_CLOSE;
    for (int32_t i = 0; i < d->n; i++)
        res[i] = (kp_DeleteGroupsResponse_DeletableGroupResult){
            .GroupId = d->e[i].id, .ErrorCode = d->e[i].err,
        };
    m.Results = res;
    m.Results_count = d->n;
    return bk_req_encoded(r, "DeleteGroups", kp_enc_DeleteGroupsResponse(r->out, r->hdr.RequestApiVersion, &m));
}

static void dg_cancel(bk_req *r)
{
    struct dg_request *d = r->state;
    for (int32_t i = 0; d && i < d->n; i++)
        gc_groups_forget(d->e[i].pending);      /* the deletes go on */
    gc_req_release(r, d);
}

static void dg_done(void *arg, int rc)
{
    struct dg_entry *e = arg;
    struct dg_request *d = e->d;
    e->err = (int16_t)rc;
    e->pending = NULL;
    if (--d->left > 0)
        return;
    bk_req *r = d->r;
    if (dg_respond(r, d) != BK_RESPOND)
        kp_buf_reset(r->out);         /* logged; an empty body fails the client's parse */
    gc_req_finish(r, d);
}

int gc_handle_delete_groups(bk_req *r)
{
    kp_DeleteGroupsRequest q;
    if (kp_dec_DeleteGroupsRequest(&r->body, r->hdr.RequestApiVersion, &q, &r->arena) != 0)
        return BK_CLOSE;
    int32_t n = q.GroupsNames_count;
    struct dg_request *d = calloc(1, sizeof *d + (size_t)n * sizeof d->e[0]);
    if (!d)
        return BK_CLOSE;
    d->r = r;
    d->n = n;
    for (int32_t i = 0; i < n; i++) {
        struct dg_entry *e = &d->e[i];
        kp_str id = e->id = q.GroupsNames[i];
        e->d = d;
        e->err = KP_GROUP_AUTHORIZATION_FAILED;
        if (!sec_authorized(r, BK_RES_GROUP, id, BK_OP_DELETE))
            continue;
        e->err = KP_UNKNOWN_SERVER_ERROR;
        char *name = gc_strndup(id.p, id.len);
        if (!name)
            continue;
        bk_group_deletion del = { .group_id = name, .done = dg_done, .arg = e,
                                  .err = e->msg, .errlen = sizeof e->msg };
        e->err = (int16_t)gc_group_delete(r->b, &del);
        e->pending = del.pending;
        d->left += del.pending != NULL;
        free(name);
    }
    if (d->left == 0) {
        int rc = dg_respond(r, d);
        free(d);
        return rc;
    }
    r->state = d;
    r->cancel = dg_cancel;
    return BK_DEFER;
}
