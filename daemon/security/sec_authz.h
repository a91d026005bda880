/*
 * daemon/security/sec_authz.h — the authorizer: Kafka's ACL model (AclAuthorizer /
 * StandardAuthorizer) over the acls table, checked in memory.
 *
 * Handlers ask sec_authorized(r, resource type, name, operation) — one line
 * each; it answers for the connection's principal and host (sec_peer.h).
 * admin_http or any other caller may ask sec_authz_check with a principal of
 * its own ("may User:ops do ALTER on CLUSTER").
 *
 * The numbers are Kafka's wire enums (AclResourceType, PatternType,
 * AclOperation, AclPermissionType), so CreateAcls' fields go straight in.
 */
#ifndef SLUICE_AUTHZ_H
#define SLUICE_AUTHZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metadata/md.h"
#include "protocol/kp.h"

enum bk_res {                       /* AclResourceType */
    BK_RES_UNKNOWN = 0, BK_RES_ANY = 1, BK_RES_TOPIC = 2, BK_RES_GROUP = 3,
    BK_RES_CLUSTER = 4, BK_RES_TRANSACTIONAL_ID = 5, BK_RES_DELEGATION_TOKEN = 6,
    BK_RES_USER = 7,
    /* The schema registry's subjects (daemon/registry): not a Kafka type.
     * 100 stays clear of Kafka's 0-7 and of any type Kafka may add next to
     * them, and fits the int8 the wire and bk_acl use.  Only SQL's acls
     * table creates and shows these ACLs; Kafka's ACL APIs neither take
     * nor list them (api_acls.c: a client would not know the type). */
    BK_RES_SUBJECT = 100,
};
enum bk_pat {                       /* PatternType */
    BK_PAT_UNKNOWN = 0, BK_PAT_ANY = 1, BK_PAT_MATCH = 2, BK_PAT_LITERAL = 3,
    BK_PAT_PREFIXED = 4,
};
enum bk_op {                        /* AclOperation */
    BK_OP_UNKNOWN = 0, BK_OP_ANY = 1, BK_OP_ALL = 2, BK_OP_READ = 3, BK_OP_WRITE = 4,
    BK_OP_CREATE = 5, BK_OP_DELETE = 6, BK_OP_ALTER = 7, BK_OP_DESCRIBE = 8,
    BK_OP_CLUSTER_ACTION = 9, BK_OP_DESCRIBE_CONFIGS = 10, BK_OP_ALTER_CONFIGS = 11,
    BK_OP_IDEMPOTENT_WRITE = 12, BK_OP_CREATE_TOKENS = 13, BK_OP_DESCRIBE_TOKENS = 14,
};
enum bk_perm {                      /* AclPermissionType */
    BK_PERM_UNKNOWN = 0, BK_PERM_ANY = 1, BK_PERM_DENY = 2, BK_PERM_ALLOW = 3,
};

/* Kafka's name of the one cluster resource. */
#define BK_CLUSTER_NAME "kafka-cluster"

/* One ACL, parsed (strings owned by the authorizer). */
typedef struct bk_acl {
    int8_t res, pat, op, perm;
    char *name, *principal, *host;
} bk_acl;

/* A filter (DescribeAcls, DeleteAcls): ANY / NULL match everything; pat
 * MATCH matches the ACLs that would apply to the named resource. */
typedef struct bk_acl_filter {
    int8_t res, pat, op, perm;
    kp_str name, principal, host;
} bk_acl_filter;

typedef struct bk_authz bk_authz;

/* enabled: authorizer.class.name is set; super: super.users as given
 * ("User:a;User:b"); allow_if_none: allow.everyone.if.no.acl.found. */
int sec_authz_new(bool enabled, const char *super, bool allow_if_none, bk_authz **out);
void sec_authz_free(bk_authz *az);
bool sec_authz_enabled(const bk_authz *az);
/* Replaces the ACL set with rows (acls table) and forgets every cached
 * decision.  Rows with names it does not know are skipped with a warning. */
int sec_authz_load(bk_authz *az, const md_acl *rows, size_t n);
/* May principal, from host, do op on (res, name)?  Always true when the
 * authorizer is off. */
bool sec_authz_check(bk_authz *az, const char *principal, const char *host, int res,
                    kp_str name, int op);

/* May principal do op on some resource of type res (Kafka's
 * authorizeByResourceType): an ALLOW for it on any name, and no DENY on
 * every name ("*", or the empty prefix).  Uncached: for rare requests. */
bool sec_authz_any(const bk_authz *az, const char *principal, const char *host, int res,
                  int op);

/* The ACLs a filter selects, in the authorizer's order; *out malloc'd
 * pointers into the authorizer (valid until the next load). */
int sec_authz_select(const bk_authz *az, const bk_acl_filter *f, const bk_acl ***out,
                    size_t *n);
/* A creation's fields checked as Kafka does: KP_NONE, or
 * KP_INVALID_REQUEST with why in err. */
int sec_acl_validate(int res, kp_str name, int pat, kp_str principal, kp_str host, int op,
                    int perm, char *err, size_t errlen);

/* Kafka's upper-case names, "TOPIC", "PREFIXED", "DESCRIBE_CONFIGS", "ALLOW"
 * (NULL for values outside the enums), and back (UNKNOWN when none). */
const char *sec_res_name(int v);
const char *sec_pat_name(int v);
const char *sec_op_name(int v);
const char *sec_perm_name(int v);
int sec_res_parse(const char *s);
int sec_pat_parse(const char *s);
int sec_op_parse(const char *s);
int sec_perm_parse(const char *s);

/* ---- the broker's authorizer (needs daemon/request.h's bk_req) ---------- */
struct bk_req;
struct bk_broker;
/* Loads the acls table into b->authz (startup, and after every change). */
int sec_authz_reload(struct bk_broker *b);
/* The request's principal and host may do op on (res, name). */
bool sec_authorized(struct bk_req *r, int res, kp_str name, int op);
/* The one way the ACL set changes (CreateAcls, DeleteAcls, SQL): removes
 * del and adds add.  Standalone: in the acls table, then reloaded (sec_authz.c Z3),
 * answered at once.  Cluster mode: in ZooKeeper (cluster_acls.c), op->pending
 * set and op->done answers once this broker read the change back (view.h's
 * bk_topic_op; op NULL: nobody waits).  KP_NONE or an error with err. */
struct bk_topic_op;
int sec_acl_apply(struct bk_broker *b, const md_acl *del, size_t ndel, const md_acl *add,
                 size_t nadd, struct bk_topic_op *op, char *err, size_t errlen);
/* a as a row of acls; its strings borrowed from a and static names. */
void sec_acl_row(const bk_acl *a, md_acl *row);
/* Cluster mode (daemon/cluster/cluster_acls.c): the ACLs shared through ZooKeeper.
 * resync: reads them all (new or resumed session, a change notification);
 * on_watch: true when path was one of the ACL change folders; write: the
 * change as Kafka's znodes, versioned (cluster_acls.c K3), answered through op
 * (cluster_acls.c K4). */
void cl_authz_zk_resync(struct bk_broker *b);
bool cl_authz_zk_on_watch(struct bk_broker *b, int type, const char *path);
int cl_authz_zk_write(struct bk_broker *b, const md_acl *del, size_t ndel, const md_acl *add,
                      size_t nadd, struct bk_topic_op *op, char *err, size_t errlen);
/* Shutdown, before cl_zk_stop: the writes not answered yet are answered
 * REQUEST_TIMED_OUT and freed (cluster_acls.c K6). */
void cl_authz_zk_stop(struct bk_broker *b);
/* Kafka's authorized-operations bit field (Metadata, DescribeGroups): bit
 * 1 << op for each operation the resource type supports (Kafka's
 * AclEntry.supportedOperations) that the request's principal may do on
 * (res, name), implied operations included; all of them when the
 * authorizer is off. */
int32_t sec_authorized_ops(struct bk_req *r, int res, kp_str name);
/* sec_authz_any for the request's principal and host. */
bool sec_authorized_any(struct bk_req *r, int res, int op);
#define BK_AUTHZ_CLUSTER(r, op) sec_authorized((r), BK_RES_CLUSTER, kp_str_cstr(BK_CLUSTER_NAME), (op))

#endif
