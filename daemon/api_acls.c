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
 * Every change goes through bk_acl_apply (authz.c Z3), as SQL's do.
 */
#include "daemon/authz.h"
#include "daemon/request.h"
#include "kp_msgs.h"

#include <stdlib.h>
#include <string.h>

static const char no_authorizer[] = "No Authorizer is configured on the broker";

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
    if (!bk_authz_enabled(r->b->authz)) {
        *msg = kp_str_cstr(no_authorizer);
        return KP_SECURITY_DISABLED;
    }
    return BK_AUTHZ_CLUSTER(r, op) ? KP_NONE : KP_CLUSTER_AUTHORIZATION_FAILED;
}

int bk_handle_create_acls(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_CreateAclsRequest q;
    if (kp_dec_CreateAclsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    int32_t n = q.Creations_count < 0 ? 0 : q.Creations_count;
    kp_CreateAclsResponse m;
    kp_init_CreateAclsResponse(&m);
    kp_CreateAclsResponse_AclCreationResult *res =
        kp_arena_alloc(&r->arena, sizeof *res * (size_t)(n ? n : 1));
    md_acl *add = kp_arena_alloc(&r->arena, sizeof *add * (size_t)(n ? n : 1));
    if (!res || !add)
        return BK_CLOSE;
    kp_str msg;
    int16_t pre = acl_api_allowed(r, BK_OP_ALTER, &msg);
    size_t nadd = 0;
    char err[256];
    for (int32_t i = 0; i < n; i++) {
        const kp_CreateAclsRequest_AclCreation *c = &q.Creations[i];
        res[i] = (kp_CreateAclsResponse_AclCreationResult){ .ErrorCode = pre, .ErrorMessage = msg };
        if (pre != KP_NONE)
            continue;
        int rc = bk_acl_validate(c->ResourceType, c->ResourceName, c->ResourcePatternType,
                                 c->Principal, c->Host, c->Operation, c->PermissionType,
                                 err, sizeof err);
        if (rc != KP_NONE) {
            res[i].ErrorCode = (int16_t)rc;
            res[i].ErrorMessage = kp_str_cstr(arena_cstr(r, kp_str_cstr(err)));
            continue;
        }
        add[nadd++] = (md_acl){
            .resource_type = (char *)bk_res_name(c->ResourceType),
            .resource_name = arena_cstr(r, c->ResourceName),
            .pattern_type = (char *)bk_pat_name(c->ResourcePatternType),
            .principal = arena_cstr(r, c->Principal), .host = arena_cstr(r, c->Host),
            .operation = (char *)bk_op_name(c->Operation),
            .permission = (char *)bk_perm_name(c->PermissionType),
        };
    }
    if (nadd) {
        int rc = bk_acl_apply(r->b, NULL, 0, add, nadd, err, sizeof err);
        for (int32_t i = 0; rc != KP_NONE && i < n; i++)
            if (res[i].ErrorCode == KP_NONE) {
                res[i].ErrorCode = (int16_t)rc;
                res[i].ErrorMessage = kp_str_cstr(arena_cstr(r, kp_str_cstr(err)));
            }
        if (rc == KP_NONE)
            BK_INFO("%zu ACL(s) created by %s", nadd, bk_conn_principal(r->conn));
    }
    m.Results = res;
    m.Results_count = n;
    kp_enc_CreateAclsResponse(r->out, v, &m);
    return r->out->err ? BK_CLOSE : BK_RESPOND;
}

typedef kp_DescribeAclsResponse_DescribeAclsResource describe_res;
typedef kp_DescribeAclsResponse_AclDescription describe_acl;

static bool same_resource(const bk_acl *a, const bk_acl *b)
{
    return a->res == b->res && a->pat == b->pat && !strcmp(a->name, b->name);
}

int bk_handle_describe_acls(bk_req *r)
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
    bk_acl_filter f = { .res = q.ResourceTypeFilter, .pat = q.PatternTypeFilter,
                        .op = q.Operation, .perm = q.PermissionType,
                        .name = q.ResourceNameFilter, .principal = q.PrincipalFilter,
                        .host = q.HostFilter };
    if (m.ErrorCode == KP_NONE && bk_authz_select(r->b->authz, &f, &sel, &n) != 0)
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

int bk_handle_delete_acls(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_DeleteAclsRequest q;
    if (kp_dec_DeleteAclsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    int32_t nf = q.Filters_count < 0 ? 0 : q.Filters_count;
    kp_DeleteAclsResponse m;
    kp_init_DeleteAclsResponse(&m);
    delete_res *fr = kp_arena_alloc(&r->arena, sizeof *fr * (size_t)(nf ? nf : 1));
    if (!fr)
        return BK_CLOSE;
    kp_str msg;
    int16_t pre = acl_api_allowed(r, BK_OP_ALTER, &msg);
    /* Every filter's matches are taken from the set as it was before the
     * request (Kafka's too), then all removed in one change (metadata/acls.c
     * A1); an ACL two filters match is listed by both. */
    md_acl *del = NULL;
    size_t ndel = 0, cap = 0;
    int rc = KP_NONE;
    for (int32_t i = 0; i < nf; i++) {
        const kp_DeleteAclsRequest_DeleteAclsFilter *qf = &q.Filters[i];
        fr[i] = (delete_res){ .ErrorCode = pre, .ErrorMessage = msg };
        if (pre != KP_NONE)
            continue;
        bk_acl_filter f = { .res = qf->ResourceTypeFilter, .pat = qf->PatternTypeFilter,
                            .op = qf->Operation, .perm = qf->PermissionType,
                            .name = qf->ResourceNameFilter, .principal = qf->PrincipalFilter,
                            .host = qf->HostFilter };
        const bk_acl **sel;
        size_t n;
        if (bk_authz_select(r->b->authz, &f, &sel, &n) != 0)
            goto fail;
        delete_acl *ma = kp_arena_alloc(&r->arena, sizeof *ma * (n ? n : 1));
        if (ndel + n > cap) {
            cap = (ndel + n) * 2;
            md_acl *grown = realloc(del, cap * sizeof *grown);
            if (!grown) {
                free(sel);
                goto fail;
            }
            del = grown;
        }
        if (!ma) {
            free(sel);
            goto fail;
        }
        for (size_t j = 0; j < n; j++) {
            /* Copied: the reload after the change frees the old set. */
            bk_acl c = *sel[j], *a = &c;
            c.name = arena_cstr(r, kp_str_cstr(c.name));
            c.principal = arena_cstr(r, kp_str_cstr(c.principal));
            c.host = arena_cstr(r, kp_str_cstr(c.host));
            if (!c.name || !c.principal || !c.host) {
                free(sel);
                goto fail;
            }
            ma[j] = (delete_acl){
                .ErrorCode = KP_NONE, .ErrorMessage = KP_STR_NULL, .ResourceType = a->res,
                .ResourceName = kp_str_cstr(a->name), .PatternType = a->pat,
                .Principal = kp_str_cstr(a->principal), .Host = kp_str_cstr(a->host),
                .Operation = a->op, .PermissionType = a->perm,
            };
            bk_acl_row(a, &del[ndel++]);
        }
        fr[i].MatchingAcls = ma;
        fr[i].MatchingAcls_count = (int32_t)n;
        free(sel);
    }
    m.FilterResults = fr;
    m.FilterResults_count = nf;
    char err[256];
    if (ndel && (rc = bk_acl_apply(r->b, del, ndel, NULL, 0, err, sizeof err)) == KP_NONE)
        BK_INFO("%zu ACL(s) deleted by %s", ndel, bk_conn_principal(r->conn));
    free(del);
    if (rc != KP_NONE)
        for (int32_t i = 0; i < nf; i++)
            if (fr[i].ErrorCode == KP_NONE) {
                fr[i].ErrorCode = (int16_t)rc;
                fr[i].ErrorMessage = kp_str_cstr(arena_cstr(r, kp_str_cstr(err)));
                fr[i].MatchingAcls_count = 0;
            }
    kp_enc_DeleteAclsResponse(r->out, v, &m);
    return r->out->err ? BK_CLOSE : BK_RESPOND;
fail:
    free(del);
    return BK_CLOSE;
}
