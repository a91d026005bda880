/*
 * CreateAcls (API 30), DescribeAcls (29) and DeleteAcls (31), v0-3: what
 * kafka-acls, confluent-kafka's and kafka-python's admin clients send.
 *
 *   CreateAcls   [ResourceType, ResourceName, ResourcePatternType (v1+),
 *                 Principal, Host, Operation, PermissionType]
 *                → per creation ErrorCode, ErrorMessage
 *   DescribeAcls one filter → ErrorCode, ErrorMessage, Resources
 *                [ResourceType, ResourceName, PatternType (v1+),
 *                 Acls [Principal, Host, Operation, PermissionType]]
 *   DeleteAcls   [filter] → per filter ErrorCode, ErrorMessage, MatchingAcls
 *
 * As Kafka: with no authorizer configured every answer is
 * SECURITY_DISABLED; creating and deleting need ALTER on the cluster,
 * describing DESCRIBE (else CLUSTER_AUTHORIZATION_FAILED); an invalid
 * creation is INVALID_REQUEST alone, the others in the request are still
 * made.  A v0 request has no pattern type: LITERAL (the JSON default).
 * Every change goes through sec_acl_apply (sec_authz.c Z3), as SQL's do, one
 * call per resource; in cluster mode the answer waits for ZooKeeper
 * (cluster_acls.c K4) and each resource's creations (or matched ACLs) carry
 * that resource's outcome, as Kafka's per-resource updates do.
 */
#include "daemon/security/sec_authz.h"
#include "daemon/request.h"
#include "daemon/api/api_topic_wait.h"
#include "daemon/security/sec_peer.h"
#include "kp_msgs.h"

#include <stdlib.h>
#include <string.h>

static const char no_authorizer[] = "No Authorizer is configured on the broker";

/* The resource type as Kafka knows it: SUBJECT (the schema registry's,
 * sec_authz.h) is not one, and is answered as any unknown type is. */
static int8_t kafka_res(int8_t v)
{
    return v == BK_RES_SUBJECT ? BK_RES_UNKNOWN : v;
}

static char *arena_cstr(bk_req *r, kp_str s)
{
    char *c = kp_arena_alloc(&r->arena, (size_t)(s.len > 0 ? s.len : 0) + 1);
    if (c) {
        if (s.len > 0)
            memcpy(c, s.p, (size_t)s.len);
        c[s.len > 0 ? s.len : 0] = 0;
    }
    return c;
}

/* The precheck every ACL API makes: KP_NONE, SECURITY_DISABLED or
 * CLUSTER_AUTHORIZATION_FAILED. */
static int16_t acl_api_allowed(bk_req *r, int op, kp_str *msg)
{
    *msg = KP_STR_NULL;
    if (!sec_authz_enabled(r->b->authz)) {
        *msg = kp_str_cstr(no_authorizer);
        return KP_SECURITY_DISABLED;
    }
    return BK_AUTHZ_CLUSTER(r, op) ? KP_NONE : KP_CLUSTER_AUTHORIZATION_FAILED;
}

/* A change's answer, waited for per resource (cluster mode: one ZooKeeper
 * write each, cluster_acls.c): entry k of the wait is resource k; each
 * creation (or matched ACL) i belongs to res_of[i] (-1: answered before). */
typedef struct acl_answer {
    bk_req *r;
    int32_t n;                       /* creations, or ACLs to delete */
    int32_t *res_of;
    int16_t **codes;
    kp_str **msgs;
    bool deleting;
    union {
        kp_CreateAclsResponse create;
        kp_DeleteAclsResponse delete;
    } m;
} acl_answer;

static void acl_result(void *ctx, int32_t k, int rc, const char *err)
{
    acl_answer *a = ctx;
    int32_t done = 0;
    for (int32_t i = 0; i < a->n; i++)
        if (a->res_of[i] == k) {
            done++;
            *a->codes[i] = bk_wire_code(rc);
            *a->msgs[i] = rc == KP_NONE ? KP_STR_NULL
                                        : kp_str_cstr(arena_cstr(a->r, kp_str_cstr(err)));
        }
    if (rc == KP_NONE)
        BK_INFO("%d ACL(s) %s by %s", (int)done, a->deleting ? "deleted" : "created",
                net_conn_principal(a->r->conn));
}

static void acl_finish(void *ctx)
{
    acl_answer *a = ctx;
    int16_t v = a->r->hdr.RequestApiVersion;
    if (a->deleting)
        kp_enc_DeleteAclsResponse(a->r->out, v, &a->m.delete);
    else
        kp_enc_CreateAclsResponse(a->r->out, v, &a->m.create);
}

static acl_answer *acl_answer_new(bk_req *r, int32_t n, bool deleting)
{
    acl_answer *a = kp_arena_alloc(&r->arena, sizeof *a);
    size_t k = (size_t)(n > 0 ? n : 1);
    if (!a)
        return NULL;
    *a = (acl_answer){ .r = r, .n = n, .deleting = deleting,
                       .res_of = kp_arena_alloc(&r->arena, sizeof *a->res_of * k),
                       .codes = kp_arena_alloc(&r->arena, sizeof *a->codes * k),
                       .msgs = kp_arena_alloc(&r->arena, sizeof *a->msgs * k) };
    return a->res_of && a->codes && a->msgs ? a : NULL;
}

static bool row_same_resource(const md_acl *a, const md_acl *b)
{
    return !strcmp(a->resource_type, b->resource_type) &&
           !strcmp(a->pattern_type, b->pattern_type) &&
           !strcmp(a->resource_name, b->resource_name);
}

/* rows[i] (i with res_of[i] == -2; set to its resource) grouped by
 * resource, one sec_acl_apply each, waited for together. */
static int acl_apply_grouped(bk_req *r, acl_answer *a, md_acl *rows)
{
    md_acl *part = kp_arena_alloc(&r->arena, sizeof *part * (size_t)(a->n > 0 ? a->n : 1));
    bk_topic_wait *w = part ? api_topic_wait_new(r, 0, acl_result, acl_finish, a) : NULL;
    if (!w)
        return BK_CLOSE;
    int32_t nres = 0;
    for (int32_t i = 0; i < a->n; i++) {
        if (a->res_of[i] != -2)
            continue;                               /* answered, or grouped already */
        int32_t k = nres++, np = 0;
        for (int32_t j = i; j < a->n; j++)
            if (a->res_of[j] == -2 && row_same_resource(&rows[i], &rows[j])) {
                a->res_of[j] = k;
                part[np++] = rows[j];
            }
        char err[256];
        int rc = a->deleting
                     ? sec_acl_apply(r->b, part, (size_t)np, NULL, 0, api_topic_wait_op(w, k),
                                    err, sizeof err)
                     : sec_acl_apply(r->b, NULL, 0, part, (size_t)np, api_topic_wait_op(w, k),
                                    err, sizeof err);
        api_topic_wait_result(w, k, rc, err);
    }
    return api_topic_wait_start(w);
}

int api_handle_create_acls(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_CreateAclsRequest q;
    if (kp_dec_CreateAclsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    int32_t n = q.Creations_count < 0 ? 0 : q.Creations_count;
    acl_answer *a = acl_answer_new(r, n, false);
    if (!a)
        return BK_CLOSE;
    kp_CreateAclsResponse *m = &a->m.create;
    kp_init_CreateAclsResponse(m);
    kp_CreateAclsResponse_AclCreationResult *res =
        kp_arena_alloc(&r->arena, sizeof *res * (size_t)(n ? n : 1));
    md_acl *add = kp_arena_alloc(&r->arena, sizeof *add * (size_t)(n ? n : 1));
    if (!res || !add)
        return BK_CLOSE;
    m->Results = res;
    m->Results_count = n;
    kp_str msg;
    int16_t pre = acl_api_allowed(r, BK_OP_ALTER, &msg);
    char err[256];
    for (int32_t i = 0; i < n; i++) {
        const kp_CreateAclsRequest_AclCreation *c = &q.Creations[i];
        res[i] = (kp_CreateAclsResponse_AclCreationResult){ .ErrorCode = pre, .ErrorMessage = msg };
        a->codes[i] = &res[i].ErrorCode;
        a->msgs[i] = &res[i].ErrorMessage;
        a->res_of[i] = -1;
        if (pre != KP_NONE)
            continue;
        int rc = sec_acl_validate(kafka_res(c->ResourceType), c->ResourceName, c->ResourcePatternType,
                                 c->Principal, c->Host, c->Operation, c->PermissionType,
                                 err, sizeof err);
        if (rc != KP_NONE) {
            res[i].ErrorCode = (int16_t)rc;
            res[i].ErrorMessage = kp_str_cstr(arena_cstr(r, kp_str_cstr(err)));
            continue;
        }
        add[i] = (md_acl){
            .resource_type = (char *)sec_res_name(c->ResourceType),
            .resource_name = arena_cstr(r, c->ResourceName),
            .pattern_type = (char *)sec_pat_name(c->ResourcePatternType),
            .principal = arena_cstr(r, c->Principal), .host = arena_cstr(r, c->Host),
            .operation = (char *)sec_op_name(c->Operation),
            .permission = (char *)sec_perm_name(c->PermissionType),
        };
        if (!add[i].resource_name || !add[i].principal || !add[i].host)
            return BK_CLOSE;
        a->res_of[i] = -2;                          /* to be grouped */
    }
    return acl_apply_grouped(r, a, add);
}

typedef kp_DescribeAclsResponse_DescribeAclsResource describe_res;
typedef kp_DescribeAclsResponse_AclDescription describe_acl;

static bool same_resource(const bk_acl *a, const bk_acl *b)
{
    return a->res == b->res && a->pat == b->pat && !strcmp(a->name, b->name);
}

int api_handle_describe_acls(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_DescribeAclsRequest q;
    if (kp_dec_DescribeAclsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    kp_DescribeAclsResponse m;
    kp_init_DescribeAclsResponse(&m);
    m.ErrorCode = acl_api_allowed(r, BK_OP_DESCRIBE, &m.ErrorMessage);
    const bk_acl **sel = NULL;
    size_t n = 0;
    bk_acl_filter f = { .res = kafka_res(q.ResourceTypeFilter), .pat = q.PatternTypeFilter,
                        .op = q.Operation, .perm = q.PermissionType,
                        .name = q.ResourceNameFilter, .principal = q.PrincipalFilter,
                        .host = q.HostFilter };
    if (m.ErrorCode == KP_NONE && sec_authz_select(r->b->authz, &f, &sel, &n) != 0)
        return BK_CLOSE;
    /* Grouped by resource pattern, as Kafka answers: the ACLs of one
     * resource come together (n² in the ACLs selected; a describe is an
     * operator's call). */
    describe_res *rs = kp_arena_alloc(&r->arena, sizeof *rs * (n ? n : 1));
    describe_acl *as = kp_arena_alloc(&r->arena, sizeof *as * (n ? n : 1));
    bool *done = calloc(n ? n : 1, 1);
    if (!rs || !as || !done) {
        free(sel);
        free(done);
        return BK_CLOSE;
    }
    int32_t nr = 0;
    size_t na = 0;
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        describe_res *d = &rs[nr++];
        *d = (describe_res){ .ResourceType = sel[i]->res, .ResourceName = kp_str_cstr(sel[i]->name),
                             .PatternType = sel[i]->pat, .Acls = &as[na] };
        for (size_t j = i; j < n; j++) {
            if (done[j] || !same_resource(sel[i], sel[j]))
                continue;
            done[j] = true;
            as[na++] = (describe_acl){ .Principal = kp_str_cstr(sel[j]->principal),
                                       .Host = kp_str_cstr(sel[j]->host),
                                       .Operation = sel[j]->op, .PermissionType = sel[j]->perm };
            d->Acls_count++;
        }
    }
    m.Resources = rs;
    m.Resources_count = nr;
    kp_enc_DescribeAclsResponse(r->out, v, &m);
    free(sel);
    free(done);
    return r->out->err ? BK_CLOSE : BK_RESPOND;
}

typedef kp_DeleteAclsResponse_DeleteAclsFilterResult delete_res;
typedef kp_DeleteAclsResponse_DeleteAclsMatchingAcl delete_acl;

int api_handle_delete_acls(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_DeleteAclsRequest q;
    if (kp_dec_DeleteAclsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    int32_t nf = q.Filters_count < 0 ? 0 : q.Filters_count;
    delete_res *fr = kp_arena_alloc(&r->arena, sizeof *fr * (size_t)(nf ? nf : 1));
    if (!fr)
        return BK_CLOSE;
    kp_str msg;
    int16_t pre = acl_api_allowed(r, BK_OP_ALTER, &msg);
    /* Every filter's matches are taken from the set as it was before the
     * request (Kafka's too), then removed one resource at a time; an ACL
     * two filters match is listed by both, each with its resource's answer. */
    const bk_acl ***sels = kp_arena_alloc(&r->arena, sizeof *sels * (size_t)(nf ? nf : 1));
    size_t *ns = kp_arena_alloc(&r->arena, sizeof *ns * (size_t)(nf ? nf : 1));
    if (!sels || !ns)
        return BK_CLOSE;
    size_t total = 0;
    int32_t got = 0;
    bool oom = false;
    for (int32_t i = 0; i < nf; i++, got++) {
        const kp_DeleteAclsRequest_DeleteAclsFilter *qf = &q.Filters[i];
        fr[i] = (delete_res){ .ErrorCode = pre, .ErrorMessage = msg };
        sels[i] = NULL;
        ns[i] = 0;
        if (pre != KP_NONE)
            continue;
        bk_acl_filter f = { .res = kafka_res(qf->ResourceTypeFilter), .pat = qf->PatternTypeFilter,
                            .op = qf->Operation, .perm = qf->PermissionType,
                            .name = qf->ResourceNameFilter, .principal = qf->PrincipalFilter,
                            .host = qf->HostFilter };
        if (sec_authz_select(r->b->authz, &f, &sels[i], &ns[i]) != 0) {
            oom = true;
            break;
        }
        total += ns[i];
    }
    acl_answer *a = oom || total > INT32_MAX ? NULL : acl_answer_new(r, (int32_t)total, true);
    md_acl *del = a ? kp_arena_alloc(&r->arena, sizeof *del * (total ? total : 1)) : NULL;
    bool ok = del != NULL;
    size_t d = 0;
    for (int32_t i = 0; ok && i < got; i++) {
        delete_acl *ma = kp_arena_alloc(&r->arena, sizeof *ma * (ns[i] ? ns[i] : 1));
        for (size_t j = 0; ma && j < ns[i]; j++, d++) {
            /* Copied: the reload after the change frees the old set. */
            bk_acl c = *sels[i][j];
            c.name = arena_cstr(r, kp_str_cstr(c.name));
            c.principal = arena_cstr(r, kp_str_cstr(c.principal));
            c.host = arena_cstr(r, kp_str_cstr(c.host));
            if (!c.name || !c.principal || !c.host) {
                ma = NULL;
                break;
            }
            ma[j] = (delete_acl){
                .ErrorCode = KP_NONE, .ErrorMessage = KP_STR_NULL, .ResourceType = c.res,
                .ResourceName = kp_str_cstr(c.name), .PatternType = c.pat,
                .Principal = kp_str_cstr(c.principal), .Host = kp_str_cstr(c.host),
                .Operation = c.op, .PermissionType = c.perm,
            };
            sec_acl_row(&c, &del[d]);
            a->codes[d] = &ma[j].ErrorCode;
            a->msgs[d] = &ma[j].ErrorMessage;
            a->res_of[d] = -2;
        }
        if (!(ok = ma != NULL))
            break;
        fr[i].MatchingAcls = ma;
        fr[i].MatchingAcls_count = (int32_t)ns[i];
    }
    for (int32_t i = 0; i < got; i++)
        free(sels[i]);
    if (!ok)
        return BK_CLOSE;
    kp_init_DeleteAclsResponse(&a->m.delete);
    a->m.delete.FilterResults = fr;
    a->m.delete.FilterResults_count = nf;
    return acl_apply_grouped(r, a, del);
}
