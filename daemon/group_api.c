/*
 * The group membership APIs: parsing and encoding for FindCoordinator
 * v0-2, JoinGroup v0-5, SyncGroup v0-3, Heartbeat v0-3, LeaveGroup v0-1,
 * ListGroups v0-2, DescribeGroups v0-4, DeleteGroups v0-1 (all
 * non-flexible).  The decisions live in daemon/group_join.c and daemon/group.c.
 */
#include "daemon/group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gc_client_host(bk_req *r, char *out, size_t cap)
{
    const char *peer = r->conn ? bk_conn_peer(r->conn) : NULL;
    if (!peer || !*peer) {
        snprintf(out, cap, "%s", "");
        return;
    }
    /* "host:port" or "[v6]:port" → Kafka's "/host". */
    const char *colon = strrchr(peer, ':');
    size_t n = colon ? (size_t)(colon - peer) : strlen(peer);
    if (n >= 2 && peer[0] == '[' && peer[n - 1] == ']') {
        peer++;
        n -= 2;
    }
    snprintf(out, cap, "/%.*s", (int)n, peer);
}

/* ---- FindCoordinator v0-2 ------------------------------------------------------ */

int bk_handle_find_coordinator(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_rd *in = &r->body;
    kp_str key = kp_rd_string(in);
    int8_t key_type = v >= 1 ? kp_rd_i8(in) : 0;
    if (!kp_rd_ok(in))
        return BK_CLOSE;
    bk_broker *b = r->b;
    int16_t err = KP_NONE;
    const char *msg = NULL;
    if (key_type == 1) {
        err = KP_COORDINATOR_NOT_AVAILABLE;
        msg = "transactions are not supported by this broker";
    } else if (key_type != 0) {
        err = KP_INVALID_REQUEST;
        msg = "unknown coordinator key type";
    }
    int32_t node = -1;
    if (!err) {
        char name[256];
        kp_str_copy(key, name, sizeof name);
        node = bk_coordinator_of(b, name);
    }
    kp_buf *o = r->out;
    if (v >= 1)
        kp_wr_i32(o, 0);                            /* ThrottleTimeMs */
    kp_wr_i16(o, err);
    if (v >= 1)
        kp_wr_string(o, msg, -1);                   /* ErrorMessage, null if ok */
    kp_wr_i32(o, err ? -1 : node);
    kp_wr_string(o, err ? "" : b->cfg->advertised_host, -1);
    kp_wr_i32(o, err ? -1 : b->cfg->advertised_port);
    return BK_RESPOND;
}

/* ---- JoinGroup v0-5 -------------------------------------------------------------- */

int bk_handle_join_group(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_rd *in = &r->body;
    gc_join_args a;
    memset(&a, 0, sizeof a);
    a.group_id = kp_rd_string(in);
    a.session_timeout_ms = kp_rd_i32(in);
    a.rebalance_timeout_ms = v >= 1 ? kp_rd_i32(in) : -1;
    a.member_id = kp_rd_string(in);
    a.instance_id = v >= 5 ? kp_rd_string(in) : KP_STR_NULL;
    a.protocol_type = kp_rd_string(in);
    int32_t n = kp_rd_array(in, 6);
    if (!kp_rd_ok(in) || n < 0)
        return BK_CLOSE;
    kp_str small[16];
    kp_str *names = small, *metas = small + 8;
    kp_str *heap = NULL;
    if (n > 8) {
        heap = calloc((size_t)n * 2, sizeof *heap);
        if (!heap)
            return BK_CLOSE;
        names = heap;
        metas = heap + n;
    }
    for (int32_t i = 0; i < n; i++) {
        names[i] = kp_rd_string(in);
        metas[i] = kp_rd_bytes(in);
    }
    if (!kp_rd_ok(in)) {
        free(heap);
        return BK_CLOSE;
    }
    for (int32_t i = 0; i < n; i++)
        if (names[i].len < 0) {           /* a null protocol name */
            free(heap);
            return BK_CLOSE;
        }
    if (a.rebalance_timeout_ms < 0)
        a.rebalance_timeout_ms = a.session_timeout_ms;   /* v0: Kafka's rule */
    a.nprotos = n;
    a.proto_names = names;
    a.proto_metas = metas;
    if (a.instance_id.len == 0)
        a.instance_id = KP_STR_NULL;      /* "" is not an identity */
    a.require_known_member_id = v >= 4 && a.instance_id.len < 0;
    int rc = gc_join(r, &a);
    free(heap);
    return rc;
}

/* ---- SyncGroup v0-3 -------------------------------------------------------------- */

int bk_handle_sync_group(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_rd *in = &r->body;
    kp_str group = kp_rd_string(in);
    int32_t gen = kp_rd_i32(in);
    kp_str member = kp_rd_string(in);
    kp_str instance = v >= 3 ? kp_rd_string(in) : KP_STR_NULL;
    int32_t n = kp_rd_array(in, 6);
    if (!kp_rd_ok(in))
        return BK_CLOSE;
    if (n < 0)
        n = 0;
    kp_str *ids = NULL, *bytes = NULL;
    if (n > 0) {
        ids = calloc((size_t)n * 2, sizeof *ids);
        if (!ids)
            return BK_CLOSE;
        bytes = ids + n;
    }
    for (int32_t i = 0; i < n; i++) {
        ids[i] = kp_rd_string(in);
        bytes[i] = kp_rd_bytes(in);
    }
    if (!kp_rd_ok(in)) {
        free(ids);
        return BK_CLOSE;
    }
    if (instance.len == 0)
        instance = KP_STR_NULL;
    int rc = gc_sync(r, group, gen, member, instance, n, ids, bytes);
    free(ids);
    return rc;
}

/* ---- Heartbeat v0-3, LeaveGroup v0-1 -------------------------------------------- */

int bk_handle_heartbeat(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_rd *in = &r->body;
    kp_str group = kp_rd_string(in);
    int32_t gen = kp_rd_i32(in);
    kp_str member = kp_rd_string(in);
    kp_str instance = v >= 3 ? kp_rd_string(in) : KP_STR_NULL;
    if (!kp_rd_ok(in))
        return BK_CLOSE;
    if (instance.len == 0)
        instance = KP_STR_NULL;
    int16_t err = gc_heartbeat(group, gen, member, instance);
    if (v >= 1)
        kp_wr_i32(r->out, 0);
    kp_wr_i16(r->out, err);
    return BK_RESPOND;
}

int bk_handle_leave_group(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_rd *in = &r->body;
    kp_str group = kp_rd_string(in);
    kp_str member = kp_rd_string(in);
    if (!kp_rd_ok(in))
        return BK_CLOSE;
    /* v0-2: the member's own error is the response's error. */
    int16_t err = gc_leave(group, member);
    if (v >= 1)
        kp_wr_i32(r->out, 0);
    kp_wr_i16(r->out, err);
    return BK_RESPOND;
}

/* ---- ListGroups v0-2 ---------------------------------------------------------------- */

int bk_handle_list_groups(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_buf *o = r->out;
    if (v >= 1)
        kp_wr_i32(o, 0);
    kp_wr_i16(o, KP_NONE);
    kp_wr_array(o, (int32_t)gc->ngroups);
    for (size_t i = 0; i < gc->hash_size; i++)
        for (gc_group *g = gc->hash[i]; g; g = g->hnext) {
            kp_wr_string(o, g->id, -1);
            kp_wr_string(o, g->protocol_type ? g->protocol_type : "", -1);
        }
    return BK_RESPOND;
}

/* ---- DescribeGroups v0-4 ------------------------------------------------------------ */

/* READ, DELETE and DESCRIBE on a GROUP resource (AclOperation codes 3, 6,
 * 8): all of them, as long as no authorizer is configured. */
#define GC_GROUP_AUTHORIZED_OPS ((1 << 3) | (1 << 6) | (1 << 8))

static void describe_one(kp_buf *o, int16_t v, kp_str id, bool include_ops)
{
    int16_t err = gc_coordinator_error(id);
    gc_group *g = id.len >= 0 && !err ? gc_group_find(id.p, (size_t)id.len) : NULL;
    kp_wr_i16(o, err);
    kp_wr_str(o, id.len >= 0 ? id : (kp_str){ "", 0 });
    if (err) {                                      /* Kafka's groupError */
        kp_wr_string(o, "", -1);                    /* GroupState */
        kp_wr_string(o, "", -1);
        kp_wr_string(o, "", -1);
        kp_wr_array(o, 0);
    } else if (!g) {
        kp_wr_string(o, "Dead", -1);
        kp_wr_string(o, "", -1);                    /* ProtocolType */
        kp_wr_string(o, "", -1);                    /* ProtocolData */
        kp_wr_array(o, 0);
    } else {
        bool stable = g->state == GC_STABLE;
        kp_wr_string(o, gc_state_name(g->state), -1);
        kp_wr_string(o, g->protocol_type ? g->protocol_type : "", -1);
        kp_wr_string(o, stable && g->protocol ? g->protocol : "", -1);
        kp_wr_array(o, g->nmembers);
        for (gc_member *m = g->members.next; m != &g->members; m = m->next) {
            kp_wr_string(o, m->id, -1);
            if (v >= 4)
                kp_wr_string(o, m->instance_id, -1);
            kp_wr_string(o, m->client_id, -1);
            kp_wr_string(o, m->client_host, -1);
            /* Metadata and assignment only in Stable, as Kafka. */
            const gc_proto *p = NULL;
            if (stable)
                for (int i = 0; i < m->nprotos; i++)
                    if (g->protocol && !strcmp(m->protos[i].name, g->protocol))
                        p = &m->protos[i];
            kp_wr_bytes(o, p ? (const void *)p->meta : "", p ? p->meta_len : 0);
            bool has_a = stable && m->assignment;
            kp_wr_bytes(o, has_a ? (const void *)m->assignment : "",
                        has_a ? m->assignment_len : 0);
        }
    }
    if (v >= 3)
        kp_wr_i32(o, include_ops ? GC_GROUP_AUTHORIZED_OPS : INT32_MIN);
}

int bk_handle_describe_groups(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_rd *in = &r->body;
    int32_t n = kp_rd_array(in, 2);
    if (!kp_rd_ok(in))
        return BK_CLOSE;
    if (n < 0)
        n = 0;
    kp_rd ids = *in;                      /* read the names twice: no copies */
    for (int32_t i = 0; i < n; i++)
        kp_rd_string(in);
    bool include_ops = v >= 3 ? kp_rd_bool(in) : false;
    if (!kp_rd_ok(in))
        return BK_CLOSE;
    kp_buf *o = r->out;
    if (v >= 1)
        kp_wr_i32(o, 0);
    kp_wr_array(o, n);
    for (int32_t i = 0; i < n; i++)
        describe_one(o, v, kp_rd_string(&ids), include_ops);
    return BK_RESPOND;
}

/* ---- DeleteGroups v0-1 ---------------------------------------------------------------- */

/* One DeleteGroups request while its deletes are stored; a single
 * allocation, r->state points here. */
struct dg_entry {
    struct dg_request *d;
    kp_str id;                        /* into the request's frame */
    int16_t err;
    struct gc_wait *pending;
    char msg[MD_ERRLEN];              /* unused on the wire (v0-1 have none) */
};
struct dg_request {
    bk_req *r;
    int32_t n, left;
    struct dg_entry e[];
};

static void dg_respond(bk_req *r, const struct dg_request *d)
{
    kp_buf *o = r->out;
    kp_buf_reset(o);
    kp_wr_i32(o, 0);                                /* ThrottleTimeMs (v0+) */
    kp_wr_array(o, d->n);
    for (int32_t i = 0; i < d->n; i++) {
        kp_wr_str(o, d->e[i].id.len >= 0 ? d->e[i].id : (kp_str){ "", 0 });
        kp_wr_i16(o, d->e[i].err);
    }
}

static void dg_cancel(bk_req *r)
{
    struct dg_request *d = r->state;
    for (int32_t i = 0; d && i < d->n; i++)
        bk_groups_forget(d->e[i].pending);      /* the deletes go on */
    free(d);
    r->state = NULL;
    r->cancel = NULL;
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
    dg_respond(r, d);
    free(d);
    r->state = NULL;
    r->cancel = NULL;
    bk_req_finish(r);
}

int bk_handle_delete_groups(bk_req *r)
{
    kp_rd *in = &r->body;
    int32_t n = kp_rd_array(in, 2);
    if (!kp_rd_ok(in))
        return BK_CLOSE;
    if (n < 0)
        n = 0;
    struct dg_request *d = calloc(1, sizeof *d + (size_t)n * sizeof d->e[0]);
    if (!d)
        return BK_CLOSE;
    d->r = r;
    d->n = n;
    for (int32_t i = 0; i < n; i++)
        d->e[i].id = kp_rd_string(in);
    if (!kp_rd_ok(in)) {
        free(d);
        return BK_CLOSE;
    }
    for (int32_t i = 0; i < n; i++) {
        struct dg_entry *e = &d->e[i];
        kp_str id = e->id;
        e->d = d;
        e->err = KP_UNKNOWN_SERVER_ERROR;
        char *name = gc_strndup(id.p ? id.p : "", id.len < 0 ? 0 : id.len);
        if (!name)
            continue;
        bk_group_deletion del = { .group_id = name, .done = dg_done, .arg = e,
                                  .err = e->msg, .errlen = sizeof e->msg };
        e->err = (int16_t)bk_group_delete(r->b, &del);
        e->pending = del.pending;
        d->left += del.pending != NULL;
        free(name);
    }
    if (d->left == 0) {
        dg_respond(r, d);
        free(d);
        return BK_RESPOND;
    }
    r->state = d;
    r->cancel = dg_cancel;
    return BK_DEFER;
}
