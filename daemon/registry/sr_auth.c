/*
 * daemon/registry/sr_auth.c — who may use the schema registry, with an
 * authorizer (authorizer.class.name); without one it is open, as on its
 * loopback default.
 *
 * Who: exactly as the admin endpoint (net_http_authenticate): Basic of a
 * SASL user, the TLS client certificate on an https listener, Bearer
 * admin.token (a super-user), else User:ANONYMOUS.  Wrong credentials:
 * 401 with Confluent's {"error_code": 40101, ...}.
 *
 * What: Kafka-style ACLs on the SUBJECT resource (sec_authz.h), matched as
 * for topics (LITERAL, PREFIXED, "*", DENY over ALLOW, super.users,
 * allow.everyone.if.no.acl.found).  sr_api.c names the right each
 * endpoint needs: READ to read a subject and look a schema up, WRITE to
 * register, DELETE, DESCRIBE_CONFIGS / ALTER_CONFIGS for /config/{s} and
 * /mode/{s}, CLUSTER's for /config and /mode; GET /schemas/ids/{id} is
 * READ on any subject holding the id (Confluent's SCHEMA_READ).  Refused:
 * 403 {"error_code": 40301, ...}, or 401 (40101) for User:ANONYMOUS, who
 * may still log in.
 *
 * A write through SQL (sr_sql.c Q3) is checked as the SQL statement's
 * principal, which its SR_SQL_HEADER names with this process's secret
 * (and the ACLs' host is the SQL client's); a header without the secret
 * is a forgery: 401.
 *
 * A write a follower forwards (sr_forward.c) is checked here first, then
 * sent with the client's Authorization header: the leader authenticates
 * and checks the same principal again.
 */
#include "daemon/registry/sr_int.h"
#include "daemon/net/net_http.h"
#include "daemon/security/sec_authz.h"
#include "daemon/security/sec_peer.h"

#include <stdio.h>
#include <string.h>

#include <event2/http.h>

bool sr_auth_may(sr_registry *r, struct evhttp_request *req, const char *principal, int res,
                 const char *name, int op)
{
    if (!principal)
        return true;
    char host[SR_HOST_MAX];
    const char *who;                                /* a SQL write: its client's host */
    if (sr_sql_who(r, req, &who, host, sizeof host) != 1)
        snprintf(host, sizeof host, "%s", net_http_peer_host(req));
    return sec_authz_check(r->b->authz, principal, host, res, kp_str_cstr(name), op);
}

static void reply_401(sr_registry *r, struct evhttp_request *req, const char *why)
{
    r->auth_failures++;
    evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                      "Basic realm=\"sluice\"");
    sr_reply_error(req, 401, 40101, "Unauthorized: %s", why);
}

void sr_auth_refuse(sr_registry *r, struct evhttp_request *req, const char *principal,
                    const char *what)
{
    if (!strcmp(principal, BK_PRINCIPAL_ANONYMOUS)) {
        reply_401(r, req, "this request needs credentials: \"Authorization: Basic "
                  "base64(user:password)\" of a SASL user, a TLS client certificate or "
                  "\"Authorization: Bearer <admin.token>\"");
        return;
    }
    r->auth_refusals++;
    sr_reply_error(req, 403, 40301, "%s is not authorized to %s", principal, what);
}

bool sr_auth_need(sr_registry *r, struct evhttp_request *req, const char *principal, int res,
                  const char *name, int op)
{
    if (sr_auth_may(r, req, principal, res, name, op))
        return true;
    char what[600];
    if (res == BK_RES_CLUSTER)
        snprintf(what, sizeof what, "use the registry's own settings (it needs %s on "
                 "CLUSTER " BK_CLUSTER_NAME ")", sec_op_name(op));
    else
        snprintf(what, sizeof what, "%s subject '%.400s'", sec_op_name(op), name);
    sr_auth_refuse(r, req, principal, what);
    return false;
}

/* net_http_authenticate's answer: served as the principal (NULL: the
 * super-user token), or 401. */
static void authenticated(bk_broker *b, void *arg, struct evhttp_request *req,
                          enum net_http_who who, const char *what)
{
    (void)b;
    sr_registry *r = arg;
    if (who == NET_HTTP_REFUSED)
        reply_401(r, req, what);
    else
        sr_api_serve(r, req, who == NET_HTTP_SUPER ? NULL : what);
}

void sr_auth_serve(sr_registry *r, struct evhttp_request *req)
{
    const char *principal;
    char host[SR_HOST_MAX];
    int sql = sr_sql_who(r, req, &principal, host, sizeof host);
    if (sql < 0)                                    /* sr_sql.c Q3: not from this process */
        reply_401(r, req, SR_SQL_HEADER " is this broker's own, for SQL's writes: a "
                  "client logs in with \"Authorization\"");
    else if (!sec_authz_enabled(r->b->authz))
        sr_api_serve(r, req, NULL);
    else if (sql)                                   /* the SQL statement's principal */
        sr_api_serve(r, req, principal);
    else
        net_http_authenticate(r->b, req, "schema registry", authenticated, r);
}
