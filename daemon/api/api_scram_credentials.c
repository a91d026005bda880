/*
 * DescribeUserScramCredentials (API 50) and AlterUserScramCredentials
 * (API 51), v0: the Kafka admin path to the users table (daemon/security/sec_sasl.c
 * derives and stores; metadata/users.c reads).  As Kafka: one result per
 * user named in the request; a user named twice in one Alter or Describe
 * gets DUPLICATE_RESOURCE (one result); Describe of a user without
 * credentials RESOURCE_NOT_FOUND, of no user (null or empty) every user; mechanisms by Kafka's ScramMechanism numbers
 * (1 SCRAM-SHA-256, 2 SCRAM-SHA-512).  The keys never leave the broker.
 */
#include <stdio.h>
#include <string.h>

#include "daemon/security/sec_authz.h"
#include "daemon/request.h"
#include "daemon/security/sec_sasl.h"
#include "protocol/kp_scram.h"
#include "kp_msgs.h"

typedef kp_DescribeUserScramCredentialsResponse_DescribeUserScramCredentialsResult desc_result;
typedef kp_DescribeUserScramCredentialsResponse_CredentialInfo desc_info;

/* Collects md_user_list rows into arena-backed results. */
typedef struct desc_acc {
    bk_req *r;
    desc_result *res;
    int32_t n, cap;
    bool oom;
} desc_acc;

static desc_result *acc_user(desc_acc *a, const char *name)
{
    if (a->n && a->res[a->n - 1].User.len == (int32_t)strlen(name) &&
        !memcmp(a->res[a->n - 1].User.p, name, strlen(name)))
        return &a->res[a->n - 1];
    if (a->n == a->cap) {
        int32_t cap = a->cap ? a->cap * 2 : 8;
        desc_result *v = kp_arena_alloc(&a->r->arena, sizeof *v * (size_t)cap);
        if (!v) {
            a->oom = true;
            return NULL;
        }
        if (a->n)
            memcpy(v, a->res, sizeof *v * (size_t)a->n);
        a->res = v;
        a->cap = cap;
    }
    size_t len = strlen(name);
    char *copy = kp_arena_alloc(&a->r->arena, len + 1);
    if (!copy) {
        a->oom = true;
        return NULL;
    }
    memcpy(copy, name, len + 1);
    desc_result *d = &a->res[a->n++];
    memset(d, 0, sizeof *d);
    d->User = (kp_str){ copy, (int32_t)len };
    d->ErrorMessage = kp_str_cstr("");      /* Kafka's default for a success */
    return d;
}

static void acc_row(void *arg, const char *name, const char *mechanism, int32_t iterations)
{
    desc_acc *a = arg;
    desc_result *d = acc_user(a, name);
    if (!d)
        return;
    desc_info *v = kp_arena_alloc(&a->r->arena, sizeof *v * (size_t)(d->CredentialInfos_count + 1));
    if (!v) {
        a->oom = true;
        return;
    }
    if (d->CredentialInfos_count)
        memcpy(v, d->CredentialInfos, sizeof *v * (size_t)d->CredentialInfos_count);
    v[d->CredentialInfos_count++] = (desc_info){
        .Mechanism = (int8_t)kp_scram_mech_parse(mechanism), .Iterations = iterations };
    d->CredentialInfos = v;
}

static bool same_name(kp_str a, kp_str b)
{
    return a.len == b.len && (a.len <= 0 || !memcmp(a.p, b.p, (size_t)a.len));
}

/* A user's result that is an error: Kafka's message, then the user's name. */
static void describe_error(bk_req *r, desc_result *d, int16_t code, const char *why,
                           const char *name)
{
    size_t len = strlen(why) + strlen(name);
    char *msg = kp_arena_alloc(&r->arena, len + 1);
    d->ErrorCode = code;
    if (msg) {
        snprintf(msg, len + 1, "%s%s", why, name);
        d->ErrorMessage = (kp_str){ msg, (int32_t)len };
    }
}

int api_handle_describe_user_scram_credentials(bk_req *r)
{
    kp_DescribeUserScramCredentialsRequest q;
    if (kp_dec_DescribeUserScramCredentialsRequest(&r->body, 0, &q, &r->arena) != 0)
        return BK_CLOSE;
    kp_DescribeUserScramCredentialsResponse m;
    kp_init_DescribeUserScramCredentialsResponse(&m);
    desc_acc a = { .r = r };
    int rc = 0;
    if (!BK_AUTHZ_CLUSTER(r, BK_OP_DESCRIBE)) {    /* Kafka: DESCRIBE on the cluster */
        m.ErrorCode = KP_CLUSTER_AUTHORIZATION_FAILED;
        kp_enc_DescribeUserScramCredentialsResponse(r->out, 0, &m);
        return BK_RESPOND;
    }
    if (q.Users_count <= 0) {                    /* null or empty: every user */
        rc = md_user_list(r->b->db, NULL, acc_row, &a);
    } else {
        for (int32_t i = 0; !rc && !a.oom && i < q.Users_count; i++) {
            char name[SCRAM_MAX_NAME];
            kp_str_copy(q.Users[i].Name, name, sizeof name);
            int earlier = 0, all = 0;
            for (int32_t j = 0; j < q.Users_count; j++) {
                bool same = same_name(q.Users[j].Name, q.Users[i].Name);
                all += same;
                earlier += same && j < i;
            }
            if (earlier)
                continue;                          /* one result per user named */
            desc_result *d;
            if (all > 1) {                         /* Kafka: named twice, no credentials */
                if ((d = acc_user(&a, name)))
                    describe_error(r, d, KP_DUPLICATE_RESOURCE, "Cannot describe SCRAM "
                                   "credentials for the same user twice in a single request: ",
                                   name);
                continue;
            }
            int32_t before = a.n;
            rc = md_user_list(r->b->db, name, acc_row, &a);
            if (!rc && a.n == before && (d = acc_user(&a, name)))
                describe_error(r, d, KP_RESOURCE_NOT_FOUND, "Attempt to describe a user "
                               "credential that does not exist: ", name);
        }
    }
    if (rc || a.oom) {
        m.ErrorCode = KP_UNKNOWN_SERVER_ERROR;
        m.ErrorMessage = kp_str_cstr("cannot read the users table");
    } else {
        m.Results = a.res;
        m.Results_count = a.n;
    }
    kp_enc_DescribeUserScramCredentialsResponse(r->out, 0, &m);
    return BK_RESPOND;
}

typedef kp_AlterUserScramCredentialsResponse_AlterUserScramCredentialsResult alter_result;

/* Is name among the first n deletions and the first k upsertions? */
static int name_count(const kp_AlterUserScramCredentialsRequest *q, kp_str name)
{
    int c = 0;
    for (int32_t i = 0; i < q->Deletions_count; i++)
        c += same_name(q->Deletions[i].Name, name);
    for (int32_t i = 0; i < q->Upsertions_count; i++)
        c += same_name(q->Upsertions[i].Name, name);
    return c;
}

static alter_result *result_for(alter_result *res, int32_t *n, kp_str name, bool *fresh)
{
    for (int32_t i = 0; i < *n; i++)
        if (same_name(res[i].User, name)) {
            *fresh = false;
            return &res[i];
        }
    *fresh = true;
    alter_result *a = &res[(*n)++];
    *a = (alter_result){ .User = name, .ErrorCode = KP_NONE, .ErrorMessage = KP_STR_NULL };
    return a;
}

static void set_error(bk_req *r, alter_result *a, int rc, const char *err)
{
    if (a->ErrorCode != KP_NONE)
        return;                      /* the first error of a user stands */
    a->ErrorCode = bk_wire_code(rc);
    size_t len = strlen(err);
    char *copy = kp_arena_alloc(&r->arena, len + 1);
    if (copy) {
        memcpy(copy, err, len + 1);
        a->ErrorMessage = (kp_str){ copy, (int32_t)len };
    }
}

int api_handle_alter_user_scram_credentials(bk_req *r)
{
    kp_AlterUserScramCredentialsRequest q;
    if (kp_dec_AlterUserScramCredentialsRequest(&r->body, 0, &q, &r->arena) != 0)
        return BK_CLOSE;
    int32_t nd = q.Deletions_count < 0 ? 0 : q.Deletions_count;
    int32_t nu = q.Upsertions_count < 0 ? 0 : q.Upsertions_count;
    q.Deletions_count = nd;
    q.Upsertions_count = nu;
    alter_result *res = kp_arena_alloc(&r->arena, sizeof *res * (size_t)(nd + nu + 1));
    if (!res)
        return BK_CLOSE;
    int32_t n = 0;
    char err[256];
    bool allowed = BK_AUTHZ_CLUSTER(r, BK_OP_ALTER);
    for (int32_t i = 0; i < nd + nu; i++) {
        bool del = i < nd;
        kp_str name = del ? q.Deletions[i].Name : q.Upsertions[i - nd].Name;
        int8_t mech = del ? q.Deletions[i].Mechanism : q.Upsertions[i - nd].Mechanism;
        bool fresh;
        alter_result *a = result_for(res, &n, name, &fresh);
        char cname[SCRAM_MAX_NAME];
        kp_str_copy(name, cname, sizeof cname);
        const char *mname = kp_scram_mech_name((scram_mech)mech);
        int rc;
        if (!allowed) {                            /* Kafka: ALTER on the cluster */
            set_error(r, a, KP_CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.");
            continue;
        }
        if (name_count(&q, name) > 1) {
            if (fresh)
                set_error(r, a, KP_DUPLICATE_RESOURCE, "A user credential cannot be altered "
                          "twice in the same request");
            continue;
        }
        if (!mname) {
            set_error(r, a, KP_UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism");
            continue;
        }
        if (del) {
            rc = sec_sasl_user_delete(r->b, cname, mname, err, sizeof err);
        } else {
            const kp_AlterUserScramCredentialsRequest_ScramCredentialUpsertion *u =
                &q.Upsertions[i - nd];
            rc = sec_sasl_user_put_salted(r->b, cname, mname, (const uint8_t *)u->Salt.p,
                                         u->Salt.len < 0 ? 0 : (size_t)u->Salt.len,
                                         u->Iterations, (const uint8_t *)u->SaltedPassword.p,
                                         u->SaltedPassword.len < 0
                                             ? 0 : (size_t)u->SaltedPassword.len,
                                         err, sizeof err);
        }
        if (rc != KP_NONE)
            set_error(r, a, rc, err);
    }
    kp_AlterUserScramCredentialsResponse m;
    kp_init_AlterUserScramCredentialsResponse(&m);
    m.Results = res;
    m.Results_count = n;
    kp_enc_AlterUserScramCredentialsResponse(r->out, 0, &m);
    return BK_RESPOND;
}
