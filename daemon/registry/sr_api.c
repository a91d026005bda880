/*
 * daemon/registry/sr_api.c — Confluent Schema Registry's REST API, endpoint
 * by endpoint, answered from memory (sr_state.c); the writes go through
 * sr_log.c and are answered once durable.
 *
 *   GET    /schemas/types
 *   GET    /schemas/ids/{id}[/schema|/versions|/subjects]   ?subject= ?deleted=
 *   GET    /subjects                                         ?deleted= ?subjectPrefix=
 *   POST   /subjects/{s}                 look a schema up    ?deleted= ?normalize=
 *   DELETE /subjects/{s}                 soft, ?permanent=true after soft
 *   GET    /subjects/{s}/versions                            ?deleted=
 *   POST   /subjects/{s}/versions        register -> {"id"}  ?normalize=
 *   GET    /subjects/{s}/versions/{v|latest}[/schema|/referencedby]
 *   DELETE /subjects/{s}/versions/{v|latest}                 ?permanent=
 *   POST   /compatibility/subjects/{s}/versions[/{v|latest}] ?verbose=
 *   GET|PUT|DELETE /config[/{s}]         ?defaultToGlobal=
 *   GET|PUT|DELETE /mode[/{s}]           ?defaultToGlobal= ?force=
 *
 * Errors are Confluent's (io.confluent.kafka.schemaregistry.rest.exceptions
 * .Errors): status, error_code and message text.
 */
#include "daemon/registry/sr_int.h"
#include "daemon/net/net_http.h"
#include "daemon/security/sec_authz.h"
#include "daemon/security/sec_peer.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>

#define SR_MAX_SEGS 8
#define SR_VERSION_ERR "The specified version '%s' is not a valid version id. Allowed " \
    "values are between [1, 2^31-1] and the string \"latest\""

static const char *const levels[] = { "NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD",
                                      "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE" };
static const char *const modes[] = { "READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT" };

/* One request as the handlers see it. */
typedef struct sr_call {
    sr_registry *r;
    struct evhttp_request *req;
    const char *principal;            /* whose rights apply (sr_auth.c); NULL: all */
    enum evhttp_cmd_type method;
    char *seg[SR_MAX_SEGS];           /* the path's segments, URI-decoded */
    int nseg;
    struct evkeyvalq query;
} sr_call;

static const char *q_get(sr_call *c, const char *name)
{
    return evhttp_find_header(&c->query, name);
}

static bool q_true(sr_call *c, const char *name)
{
    const char *v = q_get(c, name);
    return v && !strcasecmp(v, "true");
}

/* ---- checks shared by the endpoints --------------------------------------------------- */

/* Confluent's rule: not empty, no control characters, valid UTF-8, and not
 * one of the names it keeps for itself. */
static bool subject_valid(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > 4096 || !bk_utf8_valid(s, n) || !strcmp(s, "__GLOBAL") ||
        !strcmp(s, "__EMPTY"))
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

/* "latest" / -1 → 0 (the caller takes the latest); else 1..2^31-1; -1 bad. */
static int64_t version_parse(const char *v)
{
    if (!strcmp(v, "latest") || !strcmp(v, "-1"))
        return 0;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < 1 || x > INT32_MAX)
        return -1;
    return x;
}

/* The subject of c->seg[i]: found (with live versions unless deleted), or
 * answered 40401 / 42208 and NULL. */
static sr_subject *subject_or_404(sr_call *c, int i, bool deleted)
{
    const char *name = c->seg[i];
    sr_subject *s = sr_subject_find(c->r, name);
    if (s && s->nv && (deleted || sr_subject_live(s)))
        return s;
    sr_reply_error(c->req, 404, 40401, "Subject '%s' not found.", name);
    return NULL;
}

/* Version c->seg[i] of s, or answered 42202 / 40402 and NULL. */
static sr_version *version_or_404(sr_call *c, sr_subject *s, int i, bool deleted)
{
    int64_t v = version_parse(c->seg[i]);
    if (v < 0) {
        sr_reply_error(c->req, 422, 42202, SR_VERSION_ERR, c->seg[i]);
        return NULL;
    }
    sr_version *x = v == 0 ? sr_version_latest(s, deleted) : sr_version_find(s, (int32_t)v);
    if (x && (deleted || !x->deleted))
        return x;
    sr_reply_error(c->req, 404, 40402, "Version %s not found.", c->seg[i]);
    return NULL;
}

static json_t *refs_json(const sr_schema *x)
{
    return json_loads(x->refs, 0, NULL);
}

/* {"subject", "version", "id", ["schemaType",] ["references",] "schema"} */
static json_t *version_json(sr_registry *r, const char *subject, const sr_version *v)
{
    sr_schema *x = sr_schema_by_id(r, v->id);
    json_t *o = json_pack("{s:s, s:i, s:i}", "subject", subject, "version", v->version, "id",
                          v->id);
    if (!o || !x)
        return o;
    if (strcmp(x->type, "AVRO"))
        json_object_set_new(o, "schemaType", json_string(x->type));
    if (strcmp(x->refs, "[]"))
        json_object_set_new(o, "references", refs_json(x));
    json_object_set_new(o, "schema", json_string(x->text));
    return o;
}

/* The request's body as a JSON object, or answered 400/415 and NULL. */
static json_t *body_json(sr_call *c)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(c->req);
    size_t len = evbuffer_get_length(in);
    const char *p = (const char *)evbuffer_pullup(in, -1);
    json_error_t e;
    json_t *j = len ? json_loadb(p, len, 0, &e) : NULL;
    if (!len)
        snprintf(e.text, sizeof e.text, "the request has no body");
    if (!j || !json_is_object(j)) {
        sr_reply_error(c->req, 400, 400, "Unrecognized JSON in the request body: %s",
                       j ? "expected an object" : e.text);
        json_decref(j);
        return NULL;
    }
    return j;
}

/* A write goes to the leader of _schemas-0 (sr_forward.c), or waits while
 * another is in flight (sr_log.c R1).  true: taken (forwarded or queued). */
static bool must_wait(sr_call *c)
{
    if (sr_forward(c->r, c->req))
        return true;                  /* cluster mode: the leader writes */
    sr_log_tail(c->r);                /* sr_log.c R3: decide on all the log holds */
    if (!c->r->writing && (!c->r->queue || c->r->from_queue))
        return false;                 /* a newcomer waits behind the queue */
    sr_queue(c->r, c->req, c->principal);
    return true;
}

/* READONLY (the subject's or the global mode) refuses writes. */
static bool readonly(sr_call *c, const sr_subject *s, const char *name)
{
    const char *m = sr_mode_of(c->r, s);
    if (strncmp(m, "READONLY", 8))
        return false;
    sr_reply_error(c->req, 422, 42205, "Subject %s is in read-only mode", name);
    return true;
}

/* ---- writes: records out, answered once durable -------------------------------------- */

typedef struct sr_wctx {
    sr_registry *r;
    struct evhttp_request *req;       /* NULL: the client went away */
    json_t *answer;
} sr_wctx;

static void wctx_gone(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    ((sr_wctx *)arg)->req = NULL;
}

static void write_done(sr_registry *r, void *arg, int status, int code, const char *msg)
{
    sr_wctx *w = arg;
    if (w->req) {
        evhttp_connection_set_closecb(evhttp_request_get_connection(w->req), NULL, NULL);
        if (status == 200) {
            sr_reply_json(w->req, 200, w->answer);
            w->answer = NULL;
        } else {
            r->errors++;
            sr_reply_error(w->req, status, code, "%s", msg);
        }
    }
    json_decref(w->answer);
    free(w);
    sr_kick(r);
}

/* Writes recs (taken) and answers answer (taken) once they are durable. */
static void write_then_answer(sr_call *c, sr_rec *recs, size_t n, json_t *answer)
{
    sr_wctx *w = recs ? calloc(1, sizeof *w) : NULL;
    if (!w || !answer) {
        for (size_t i = 0; recs && i < n; i++) {
            free(recs[i].key);
            free(recs[i].val);
        }
        free(recs);
        free(w);
        json_decref(answer);
        sr_reply_error(c->req, 500, 50001, "Error in the backend data store: out of memory");
        return;
    }
    w->r = c->r;
    w->req = c->req;
    w->answer = answer;
    evhttp_connection_set_closecb(evhttp_request_get_connection(c->req), wctx_gone, w);
    sr_log_write(c->r, recs, n, write_done, w);
}

static sr_rec *recs_new(size_t n)
{
    return calloc(n ? n : 1, sizeof(sr_rec));
}

/* {["schemaType",] ["references",] "schema"}, malloc'd; NULL: no memory. */
static char *schema_answer(const sr_schema *x)
{
    json_t *o = json_object();
    if (o && strcmp(x->type, "AVRO"))
        json_object_set_new(o, "schemaType", json_string(x->type));
    if (o && strcmp(x->refs, "[]"))
        json_object_set_new(o, "references", refs_json(x));
    if (o)
        json_object_set_new(o, "schema", json_string(x->text));
    char *a = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return a;
}

/* ---- /schemas ------------------------------------------------------------------------- */

/* c's principal may do op on subject name. */
static bool may(sr_call *c, const char *name, int op)
{
    return sr_auth_may(c->r, c->req, c->principal, BK_RES_SUBJECT, name, op);
}

/* Confluent's SCHEMA_READ: READ on some subject with a version of x
 * (from the index of ids when there is memory for it, else a scan). */
static bool id_readable(sr_call *c, const sr_schema *x)
{
    const char *const *names;
    ssize_t n = sr_validate_subjects(c->r, x->id, &names);
    for (ssize_t i = 0; i < n; i++)
        if (may(c, names[i], BK_OP_READ))
            return true;
    for (size_t i = 0; n < 0 && i < c->r->nsubjects; i++) {
        sr_subject *s = c->r->subjects[i];
        for (size_t k = 0; k < s->nv; k++)
            if (s->v[k].id == x->id) {
                if (may(c, s->name, BK_OP_READ))
                    return true;
                break;
            }
    }
    return false;
}

static void get_schema_by_id(sr_call *c)
{
    sr_registry *r = c->r;
    char *end;
    errno = 0;
    long long id = strtoll(c->seg[2], &end, 10);
    sr_schema *x = *c->seg[2] && !*end && !errno && id > 0 && id <= INT32_MAX
                   ? sr_schema_by_id(r, (int32_t)id) : NULL;
    const char *subject = q_get(c, "subject");
    bool deleted = q_true(c, "deleted");
    r->lookups++;
    if (x && c->principal && !id_readable(c, x)) {
        char what[64];
        snprintf(what, sizeof what, "READ schema %d (READ on a subject holding it)",
                 (int)x->id);
        sr_auth_refuse(r, c->req, c->principal, what);
        return;
    }
    /* What deserializers ask (no ?subject): the answer kept ready, so the
     * hot lookup costs no JSON work (bench/registry_bench.c). */
    if (x && c->nseg == 3 && !subject && (x->answer || (x->answer = schema_answer(x)))) {
        sr_reply_text(c->req, 200, x->answer);
        return;
    }
    /* Which (subject, version) pairs name it: ?subject narrows, /versions
     * and /subjects list them. */
    json_t *pairs = json_array(), *names = json_array();
    for (size_t i = 0; x && i < r->nsubjects; i++) {
        sr_subject *s = r->subjects[i];
        bool named = false;
        for (size_t k = 0; k < s->nv; k++)
            if (s->v[k].id == x->id && (deleted || !s->v[k].deleted) &&
                may(c, s->name, BK_OP_READ)) {
                json_array_append_new(pairs, json_pack("{s:s, s:i}", "subject", s->name,
                                                       "version", s->v[k].version));
                named = true;
            }
        if (named)
            json_array_append_new(names, json_string(s->name));
    }
    bool in_subject = !subject || !x;
    for (size_t k = 0; subject && k < json_array_size(pairs); k++)
        in_subject |= !strcmp(json_string_value(json_object_get(json_array_get(pairs, k),
                                                                "subject")), subject);
    if (!x || !in_subject) {
        json_decref(pairs);
        json_decref(names);
        sr_reply_error(c->req, 404, 40403, "Schema %s not found", c->seg[2]);
        return;
    }
    if (c->nseg == 4 && !strcmp(c->seg[3], "schema")) {
        sr_reply_raw(c->req, x->text);
    } else if (c->nseg == 4 && !strcmp(c->seg[3], "versions")) {
        sr_reply_json(c->req, 200, json_incref(pairs));
    } else if (c->nseg == 4 && !strcmp(c->seg[3], "subjects")) {
        sr_reply_json(c->req, 200, json_incref(names));
    } else {
        char *a = schema_answer(x);             /* ?subject=: checked above */
        if (a)
            sr_reply_text(c->req, 200, a);
        else
            sr_reply_error(c->req, 500, 50001, "out of memory");
        free(a);
    }
    json_decref(pairs);
    json_decref(names);
}

/* ---- /subjects -------------------------------------------------------------------------- */

static void get_subjects(sr_call *c)
{
    const char *prefix = q_get(c, "subjectPrefix");
    bool deleted = q_true(c, "deleted");
    json_t *a = json_array();
    for (size_t i = 0; i < c->r->nsubjects; i++) {
        sr_subject *s = c->r->subjects[i];
        if (s->nv && (deleted || sr_subject_live(s)) &&
            (!prefix || !strncmp(s->name, prefix, strlen(prefix))) &&
            may(c, s->name, BK_OP_DESCRIBE))              /* READ and the rest imply it */
            json_array_append_new(a, json_string(s->name));
    }
    sr_reply_json(c->req, 200, a);
}

static void get_versions(sr_call *c)
{
    bool deleted = q_true(c, "deleted");
    sr_subject *s = subject_or_404(c, 1, deleted);
    if (!s)
        return;
    json_t *a = json_array();
    for (size_t i = 0; i < s->nv; i++)
        if (deleted || !s->v[i].deleted)
            json_array_append_new(a, json_integer(s->v[i].version));
    sr_reply_json(c->req, 200, a);
}

/* A schema as a request gives it: {"schema", "schemaType", "references"},
 * checked and in the form stored (sr_schema_canon).  0, or answered. */
static void given_free(sr_given *g)
{
    free(g->text);
    free(g->refs);
}

static int given_read(sr_call *c, json_t *body, sr_given *g)
{
    memset(g, 0, sizeof *g);
    json_t *js = json_object_get(body, "schema");
    json_t *jt = json_object_get(body, "schemaType");
    json_t *jr = json_object_get(body, "references");
    const char *text = json_string_value(js);
    g->type = jt && !json_is_null(jt) ? json_string_value(jt) : "AVRO";
    if (!g->type || (strcmp(g->type, "AVRO") && strcmp(g->type, "JSON") &&
                     strcmp(g->type, "PROTOBUF"))) {
        sr_reply_error(c->req, 422, 42201, "Invalid schema type %s",
                       json_is_string(jt) ? json_string_value(jt) : "(not a string)");
        return -1;
    }
    if (!text || !*text) {
        sr_reply_error(c->req, 422, 42201, "Empty schema");
        return -1;
    }
    if (jr && !json_is_null(jr) && !json_is_array(jr)) {
        sr_reply_error(c->req, 422, 42201, "Invalid schema: references must be an array");
        return -1;
    }
    char err[512];
    for (size_t i = 0; jr && i < json_array_size(jr); i++) {
        json_t *ref = json_array_get(jr, i);
        const char *rs = json_string_value(json_object_get(ref, "subject"));
        const char *rn = json_string_value(json_object_get(ref, "name"));
        json_int_t rv = json_integer_value(json_object_get(ref, "version"));
        if (rv != -1 && (rv < 1 || rv > INT32_MAX)) {
            sr_reply_error(c->req, 422, 42201, "Invalid schema: reference %s has version "
                           "%lld, not -1 (latest) or 1..2147483647", rn ? rn : "(no name)",
                           (long long)rv);
            return -1;
        }
        /* A reference the principal may not READ is not found: its schema
         * would show through compatibility answers, and a different error
         * would tell that the subject exists. */
        sr_subject *s = rs && (!c->principal || may(c, rs, BK_OP_READ))
                        ? sr_subject_find(c->r, rs) : NULL;
        sr_version *v = s ? (rv == -1 ? sr_version_latest(s, false)
                             : sr_version_find(s, (int32_t)rv)) : NULL;
        if (!rn || !v || v->deleted) {
            sr_reply_error(c->req, 422, 42201, "Invalid schema: reference %s (subject %s, "
                           "version %lld) not found", rn ? rn : "(no name)", rs ? rs : "(none)",
                           (long long)rv);
            return -1;
        }
        if (rv == -1)                          /* stored as the version it resolved to */
            json_object_set_new(ref, "version", json_integer(v->version));
    }
    g->refs = jr && json_array_size(jr) ? json_dumps(jr, JSON_COMPACT | JSON_PRESERVE_ORDER)
                                        : strdup("[]");
    if (!g->refs || sr_schema_canon(c->r, g->type, text, g->refs, q_true(c, "normalize"),
                                    &g->text, err, sizeof err) != 0) {
        sr_reply_error(c->req, 422, 42201, "Invalid schema %s, details: %s", text,
                       g->refs ? err : "out of memory");
        given_free(g);
        return -1;
    }
    return 0;
}

/* The body and the schema it gives, or NULL (answered). */
static json_t *given_body(sr_call *c, sr_given *g)
{
    json_t *body = body_json(c);
    if (body && given_read(c, body, g) != 0) {
        json_decref(body);
        return NULL;
    }
    return body;
}

/* The live (or any, with deleted) version of s whose schema is g's. */
static sr_version *version_with(sr_registry *r, sr_subject *s, const sr_given *g,
                                bool deleted)
{
    sr_schema *x = s ? sr_schema_find(r, g->type, g->text, g->refs) : NULL;
    for (size_t i = s && x ? s->nv : 0; i-- > 0;)
        if (s->v[i].id == x->id && (deleted || !s->v[i].deleted))
            return &s->v[i];
    return NULL;
}

/* POST /subjects/{s}: is this schema registered under s? */
static void post_lookup(sr_call *c)
{
    sr_registry *r = c->r;
    bool deleted = q_true(c, "deleted");
    sr_subject *s = subject_or_404(c, 1, deleted);
    sr_given g;
    json_t *body = s ? given_body(c, &g) : NULL;
    if (!body)
        return;
    r->lookups++;
    sr_version *v = version_with(r, s, &g, deleted);
    if (v)
        sr_reply_json(c->req, 200, version_json(r, s->name, v));
    else
        sr_reply_error(c->req, 404, 40403, "Schema not found");
    given_free(&g);
    json_decref(body);
}

/* sr_schema_compatible's reasons, one a line, as one text (409's
 * details): the lines joined by ", " into out, as Confluent lists them. */
static const char *lines_joined(const char *why, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = why; *p && n + 3 < cap; p++) {
        if (*p == '\n') {
            out[n++] = ',';
            out[n++] = ' ';
        } else {
            out[n++] = *p;
        }
    }
    out[n] = 0;
    return out;
}

/* ... and as Confluent's verbose "messages" array. */
static json_t *lines_json(const char *why)
{
    json_t *a = json_array();
    for (const char *p = why; a && *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        json_array_append_new(a, json_stringn(p, n));
        p += n + (e != NULL);
    }
    return a;
}

/* POST /subjects/{s}/versions: registers; the same schema keeps its id in
 * every subject, and a subject that has it already answers its id. */
static void post_register(sr_call *c)
{
    sr_registry *r = c->r;
    const char *name = c->seg[1];
    if (must_wait(c))
        return;
    sr_subject *s = sr_subject_find(r, name);
    if (readonly(c, s, name))
        return;
    sr_given g;
    json_t *body = given_body(c, &g);
    if (!body)
        return;
    bool import = !strcmp(sr_mode_of(r, s), "IMPORT");
    json_int_t want_id = json_integer_value(json_object_get(body, "id"));
    json_int_t want_ver = json_integer_value(json_object_get(body, "version"));
    sr_version *have = version_with(r, s, &g, false);
    sr_schema *same = sr_schema_find(r, g.type, g.text, g.refs);
    char why[2048], joined[2304];
    if (have && (!want_id || want_id == have->id)) {
        sr_reply_json(c->req, 200, json_pack("{s:i}", "id", have->id));
        goto out;
    }
    if ((want_id || want_ver) && !import) {
        sr_reply_error(c->req, 422, 42205, "Subject %s is not in import mode", name);
        goto out;
    }
    if (want_id && (want_id < 0 || want_id > INT32_MAX ||
                    (sr_schema_by_id(r, (int32_t)want_id) &&
                     sr_schema_by_id(r, (int32_t)want_id) != same))) {
        sr_reply_error(c->req, 422, 42205, "Overwrite new schema with id %lld is not "
                       "permitted.", (long long)want_id);
        goto out;
    }
    const char *level = sr_compat_of(r, s);
    if (!import && s && sr_subject_live(s) &&
        sr_schema_compatible(r, s, NULL, &g, level, why, sizeof why) == 0) {
        r->errors++;
        sr_reply_error(c->req, 409, 409, "Schema being registered is incompatible with an "
                       "earlier schema for subject \"%s\", details: [%s]", name,
                       lines_joined(why, joined, sizeof joined));
        goto out;
    }
    sr_version *last = s ? sr_version_latest(s, true) : NULL;
    if (!(want_ver > 0 && want_ver <= INT32_MAX) && last && last->version == INT32_MAX) {
        sr_reply_error(c->req, 422, 42202, "Subject %s has version 2147483647: no version "
                       "can follow it", name);
        goto out;
    }
    int32_t version = want_ver > 0 && want_ver <= INT32_MAX ? (int32_t)want_ver
                      : last ? last->version + 1 : 1;
    /* A new id is the next after every id the log holds: the one write in
     * flight (sr_log.c R1) starts only once the log is applied whole (sr_log.c R3),
     * so no other record can take it; a write that fails takes none. */
    int32_t id = want_id ? (int32_t)want_id : same ? same->id : r->max_id + 1;
    sr_rec *rec = recs_new(1);
    if (rec) {
        rec[0].key = sr_key_schema(name, version);
        rec[0].val = sr_val_schema(name, version, id, g.type, g.text, g.refs, false);
    }
    r->registrations++;
    BK_INFO("schema registry: registering %s version %d (id %d, %s)", name, version, id,
            g.type);
    write_then_answer(c, rec, 1, json_pack("{s:i}", "id", id));
out:
    given_free(&g);
    json_decref(body);
}

/* The versions of s that name (subject, version) as a reference. */
static json_t *referenced_by(sr_registry *r, const char *subject, int32_t version)
{
    json_t *ids = json_array();
    for (size_t i = 0; i < r->nschemas; i++) {
        sr_schema *x = r->schemas[i];
        json_t *refs = strcmp(x->refs, "[]") ? refs_json(x) : NULL;
        for (size_t k = 0; k < json_array_size(refs); k++) {
            json_t *ref = json_array_get(refs, k);
            const char *rs = json_string_value(json_object_get(ref, "subject"));
            if (rs && !strcmp(rs, subject) &&
                json_integer_value(json_object_get(ref, "version")) == version) {
                json_array_append_new(ids, json_integer(x->id));
                break;
            }
        }
        json_decref(refs);
    }
    return ids;
}

static void get_version(sr_call *c)
{
    bool deleted = q_true(c, "deleted");
    sr_subject *s = subject_or_404(c, 1, deleted);
    sr_version *v = s ? version_or_404(c, s, 3, deleted) : NULL;
    if (!v)
        return;
    c->r->lookups++;
    if (c->nseg == 5 && !strcmp(c->seg[4], "schema")) {
        sr_schema *x = sr_schema_by_id(c->r, v->id);
        sr_reply_raw(c->req, x ? x->text : "");
    } else if (c->nseg == 5 && !strcmp(c->seg[4], "referencedby")) {
        sr_reply_json(c->req, 200, referenced_by(c->r, s->name, v->version));
    } else {
        sr_reply_json(c->req, 200, version_json(c->r, s->name, v));
    }
}

/* A delete's start: queued behind a write in flight (NULL), or the
 * subject (soft-deleted ones too) once it exists and may be written. */
static sr_subject *delete_start(sr_call *c, bool *permanent)
{
    if (must_wait(c))
        return NULL;
    *permanent = q_true(c, "permanent");
    sr_subject *s = subject_or_404(c, 1, true);
    return s && !readonly(c, s, s->name) ? s : NULL;
}

/* A version another schema references may not go: answered 42206. */
static bool in_use(sr_call *c, const char *subject, int32_t version)
{
    json_t *users = referenced_by(c->r, subject, version);
    size_t n = json_array_size(users);
    json_decref(users);
    if (n)
        sr_reply_error(c->req, 422, 42206, "One or more references exist to the schema "
                       "{magic=1,keytype=SCHEMA,subject=%s,version=%d}.", subject, version);
    return n > 0;
}

/* DELETE /subjects/{s}/versions/{v}: soft, then ?permanent=true. */
static void delete_version(sr_call *c)
{
    bool permanent;
    sr_subject *s = delete_start(c, &permanent);
    sr_version *v = s ? version_or_404(c, s, 3, true) : NULL;
    if (!v)
        return;
    if (!permanent && v->deleted) {
        sr_reply_error(c->req, 404, 40406, "Subject '%s' Version %d was soft deleted.Set "
                       "permanent=true to delete permanently", s->name, v->version);
        return;
    }
    if (permanent && !v->deleted) {
        sr_reply_error(c->req, 404, 40407, "Subject '%s' Version %d was not deleted first "
                       "before being permanently deleted", s->name, v->version);
        return;
    }
    if (in_use(c, s->name, v->version))
        return;
    sr_schema *x = sr_schema_by_id(c->r, v->id);
    sr_rec *rec = recs_new(1);
    if (rec) {
        rec[0].key = sr_key_schema(s->name, v->version);
        if (!permanent && x)
            rec[0].val = sr_val_schema(s->name, v->version, v->id, x->type, x->text, x->refs,
                                       true);
    }
    c->r->deletions++;
    BK_INFO("schema registry: %s deleting %s version %d", permanent ? "permanently" : "soft",
            s->name, v->version);
    write_then_answer(c, rec, 1, json_integer(v->version));
}

/* DELETE /subjects/{s}: soft (every version), then ?permanent=true. */
static void delete_subject(sr_call *c)
{
    bool permanent;
    sr_subject *s = delete_start(c, &permanent);
    if (!s)
        return;
    size_t live = sr_subject_live(s);
    if (!permanent && !live) {
        sr_reply_error(c->req, 404, 40404, "Subject '%s' was soft deleted.Set permanent=true "
                       "to delete permanently", s->name);
        return;
    }
    if (permanent && live) {
        sr_reply_error(c->req, 404, 40405, "Subject '%s' was not deleted first before being "
                       "permanently deleted", s->name);
        return;
    }
    json_t *versions = json_array();
    for (size_t i = 0; i < s->nv; i++) {
        if (in_use(c, s->name, s->v[i].version)) {
            json_decref(versions);
            return;
        }
        json_array_append_new(versions, json_integer(s->v[i].version));
    }
    size_t n = permanent ? s->nv : (size_t)(1 + (s->compat[0] != 0) + (s->mode[0] != 0)), k = 0;
    sr_rec *rec = recs_new(n);
    if (rec && permanent) {
        for (; k < s->nv; k++)
            rec[k].key = sr_key_schema(s->name, s->v[k].version);
    } else if (rec) {
        rec[k].key = sr_key_delete_subject(s->name);
        rec[k++].val = sr_val_delete_subject(s->name, sr_version_latest(s, true)->version);
        if (s->compat[0])
            rec[k++].key = sr_key_config(s->name);      /* Confluent drops them too */
        if (s->mode[0])
            rec[k++].key = sr_key_mode(s->name);
    }
    c->r->deletions++;
    BK_INFO("schema registry: %s deleting subject %s", permanent ? "permanently" : "soft",
            s->name);
    write_then_answer(c, rec, n, versions);
}

/* ---- /compatibility ---------------------------------------------------------------------- */

static void post_compatibility(sr_call *c)
{
    sr_registry *r = c->r;
    sr_subject *s = sr_subject_find(r, c->seg[2]);
    bool latest = c->nseg == 4 || version_parse(c->seg[4]) == 0;
    sr_version *v = NULL;
    if (c->nseg == 5 && version_parse(c->seg[4]) < 0) {
        sr_reply_error(c->req, 422, 42202, SR_VERSION_ERR, c->seg[4]);
        return;
    }
    if (!s || !sr_subject_live(s)) {
        if (!latest) {
            sr_reply_error(c->req, 404, 40401, "Subject '%s' not found.", c->seg[2]);
            return;
        }
        s = NULL;                     /* nothing to be compatible with */
    } else if (c->nseg == 5 && !(v = version_or_404(c, s, 4, false))) {
        return;
    }
    sr_given g;
    json_t *body = given_body(c, &g);
    if (!body)
        return;
    char why[2048] = "";
    int ok = !s ? 1 : sr_schema_compatible(r, s, c->nseg == 5 ? v : NULL, &g,
                                           sr_compat_of(r, s), why, sizeof why);
    json_t *o = json_pack("{s:b}", "is_compatible", ok != 0);
    if (q_true(c, "verbose"))
        json_object_set_new(o, "messages", ok ? json_array() : lines_json(why));
    sr_reply_json(c->req, 200, o);
    given_free(&g);
    json_decref(body);
}

/* ---- /config and /mode --------------------------------------------------------------------- */

static const char *setting_find(const char *v, const char *const *names, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        if (!strcasecmp(v, names[i]))
            return names[i];
    return NULL;
}

/* GET|PUT|DELETE /config[/{s}] (config) and /mode[/{s}]. */
static void serve_setting(sr_call *c, bool config)
{
    sr_registry *r = c->r;
    const char *name = c->nseg == 2 ? c->seg[1] : NULL;
    sr_subject *s = name ? sr_subject_find(r, name) : NULL;
    const char *out_key = config ? "compatibilityLevel" : "mode";
    const char *own = !name ? (config ? r->compat : r->mode)
                      : s ? (config ? s->compat : s->mode) : "";
    if (name && !subject_valid(name)) {
        sr_reply_error(c->req, 422, 42208, "Invalid subject %s", name);
        return;
    }
    if (c->method == EVHTTP_REQ_GET || c->method == EVHTTP_REQ_HEAD) {   /* reads only */
        if (!own[0] && !q_true(c, "defaultToGlobal")) {
            sr_reply_error(c->req, 404, config ? 40408 : 40409, "Subject '%s' does not have "
                           "subject-level %s configured", name, config ? "compatibility"
                           : "mode");
            return;
        }
        sr_reply_json(c->req, 200, json_pack("{s:s}", out_key, own[0] ? own
                                             : config ? r->compat : r->mode));
        return;
    }
    if (must_wait(c))
        return;
    sr_rec *rec = recs_new(1);
    json_t *answer;
    if (c->method == EVHTTP_REQ_DELETE) {
        if (name && !own[0] && !(s && s->nv)) {
            sr_reply_error(c->req, 404, 40401, "Subject '%s' not found.", name);
            free(rec);
            return;
        }
        answer = json_pack("{s:s}", out_key, own[0] ? own : config ? r->compat : r->mode);
    } else {
        json_t *body = body_json(c);
        if (!body) {
            free(rec);
            return;
        }
        const char *want = json_string_value(json_object_get(body, config ? "compatibility"
                                                                         : "mode"));
        const char *v = config ? setting_find(want, levels, sizeof levels / sizeof *levels)
                               : setting_find(want, modes, sizeof modes / sizeof *modes);
        if (!v) {
            json_decref(body);
            free(rec);
            if (config)
                sr_reply_error(c->req, 422, 42203, "Invalid compatibility level. Valid values "
                               "are none, backward, forward, full, backward_transitive, "
                               "forward_transitive, and full_transitive");
            else
                sr_reply_error(c->req, 422, 42204, "Invalid mode. Valid values are READWRITE, "
                               "READONLY, READONLY_OVERRIDE and IMPORT");
            return;
        }
        json_decref(body);
        if (!config && !strcmp(v, "IMPORT") && !q_true(c, "force") &&
            (name ? s && s->nv : r->nsubjects > 0)) {
            free(rec);
            sr_reply_error(c->req, 422, 42205, "Cannot import since found existing subjects");
            return;
        }
        answer = json_pack("{s:s}", config ? "compatibility" : "mode", v);
        if (rec)
            rec[0].val = sr_val_setting(config, v);
    }
    if (rec)
        rec[0].key = config ? sr_key_config(name) : sr_key_mode(name);
    BK_INFO("schema registry: %s %s of %s", c->method == EVHTTP_REQ_DELETE ? "clearing"
            : "setting", config ? "compatibility" : "mode", name ? name : "the registry");
    write_then_answer(c, rec, 1, answer);
}

/* ---- routing ----------------------------------------------------------------------------------- */

static void not_found(sr_call *c)
{
    sr_reply_error(c->req, 404, 404, "HTTP 404 Not Found");
}

static void not_allowed(sr_call *c)
{
    sr_reply_error(c->req, 405, 405, "HTTP 405 Method Not Allowed");
}

/* The right c's endpoint needs (sr_auth.c), before it runs; false:
 * refused and answered.  /schemas/ids/{id} is checked by its handler (the
 * subjects holding the id decide) and GET /subjects lists only what the
 * principal may see; those and the endpoints naming no resource (/,
 * /schemas/types) take any login, and ANONYMOUS only with a right on some
 * subject (or allow.everyone.if.no.acl.found). */
static bool authorized(sr_call *c)
{
    const char *a = c->nseg > 0 ? c->seg[0] : "";
    enum evhttp_cmd_type m = c->method;
    bool get = m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD;
    if (!c->principal)
        return true;
    /* A name that is no subject is answered 422 by route(), whoever asks. */
    const char *named = !strcmp(a, "subjects") || !strcmp(a, "config") || !strcmp(a, "mode")
                        ? (c->nseg >= 2 ? c->seg[1] : NULL)
                        : !strcmp(a, "compatibility") && c->nseg >= 3 ? c->seg[2] : NULL;
    if (named && !subject_valid(named))
        return true;
    if (!strcmp(a, "subjects") && c->nseg >= 2) {
        int op = m == EVHTTP_REQ_DELETE ? BK_OP_DELETE
                 : c->nseg == 3 && m == EVHTTP_REQ_POST ? BK_OP_WRITE : BK_OP_READ;
        return sr_auth_need(c->r, c->req, c->principal, BK_RES_SUBJECT, c->seg[1], op);
    }
    if (!strcmp(a, "compatibility") && c->nseg >= 3)
        return sr_auth_need(c->r, c->req, c->principal, BK_RES_SUBJECT, c->seg[2], BK_OP_READ);
    if (!strcmp(a, "config") || !strcmp(a, "mode")) {
        int op = get ? BK_OP_DESCRIBE_CONFIGS : BK_OP_ALTER_CONFIGS;
        return c->nseg >= 2
               ? sr_auth_need(c->r, c->req, c->principal, BK_RES_SUBJECT, c->seg[1], op)
               : sr_auth_need(c->r, c->req, c->principal, BK_RES_CLUSTER, BK_CLUSTER_NAME, op);
    }
    if (strcmp(c->principal, BK_PRINCIPAL_ANONYMOUS) ||
        c->r->b->cfg->allow_everyone_if_no_acl_found ||
        sec_authz_any(c->r->b->authz, c->principal, net_http_peer_host(c->req),
                      BK_RES_SUBJECT, BK_OP_DESCRIBE))
        return true;
    sr_auth_refuse(c->r, c->req, c->principal, "use the schema registry");
    return false;
}

/* The endpoint of c's path and method; false: no such path. */
static bool route(sr_call *c)
{
    const char *a = c->nseg > 0 ? c->seg[0] : "";
    enum evhttp_cmd_type m = c->method;
    bool get = m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD;
    int n = c->nseg;
    if (n == 0) {
        get ? sr_reply_json(c->req, 200, json_object()) : not_allowed(c);
    } else if (!strcmp(a, "schemas")) {
        if (n == 2 && !strcmp(c->seg[1], "types"))
            get ? sr_reply_json(c->req, 200, json_pack("[s,s,s]", "JSON", "PROTOBUF", "AVRO"))
                : not_allowed(c);
        else if ((n == 3 || (n == 4 && (!strcmp(c->seg[3], "schema") ||
                                        !strcmp(c->seg[3], "versions") ||
                                        !strcmp(c->seg[3], "subjects")))) &&
                 !strcmp(c->seg[1], "ids"))
            get ? get_schema_by_id(c) : not_allowed(c);
        else
            return false;
    } else if (!strcmp(a, "subjects")) {
        if (n > 1 && !subject_valid(c->seg[1])) {
            sr_reply_error(c->req, 422, 42208, "Invalid subject %s", c->seg[1]);
        } else if (n == 1) {
            get ? get_subjects(c) : not_allowed(c);
        } else if (n == 2) {
            m == EVHTTP_REQ_POST ? post_lookup(c) : m == EVHTTP_REQ_DELETE ? delete_subject(c)
                                                  : not_allowed(c);
        } else if (strcmp(c->seg[2], "versions")) {
            return false;
        } else if (n == 3) {
            get ? get_versions(c) : m == EVHTTP_REQ_POST ? post_register(c) : not_allowed(c);
        } else if (n == 4) {
            get ? get_version(c) : m == EVHTTP_REQ_DELETE ? delete_version(c) : not_allowed(c);
        } else if (n == 5 && (!strcmp(c->seg[4], "schema") ||
                              !strcmp(c->seg[4], "referencedby"))) {
            get ? get_version(c) : not_allowed(c);
        } else {
            return false;
        }
    } else if (!strcmp(a, "compatibility")) {
        if ((n != 4 && n != 5) || strcmp(c->seg[1], "subjects") || strcmp(c->seg[3], "versions"))
            return false;
        if (!subject_valid(c->seg[2]))
            sr_reply_error(c->req, 422, 42208, "Invalid subject %s", c->seg[2]);
        else
            m == EVHTTP_REQ_POST ? post_compatibility(c) : not_allowed(c);
    } else if (!strcmp(a, "config") || !strcmp(a, "mode")) {
        if (n > 2)
            return false;
        if (get || m == EVHTTP_REQ_PUT || m == EVHTTP_REQ_DELETE)
            serve_setting(c, a[0] == 'c');
        else
            not_allowed(c);
    } else {
        return false;
    }
    return true;
}

void sr_api_serve(sr_registry *r, struct evhttp_request *req, const char *principal)
{
    sr_call c = { .r = r, .req = req, .principal = principal,
                  .method = evhttp_request_get_command(req) };
    TAILQ_INIT(&c.query);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    bool ok = path && (!query || evhttp_parse_query_str(query, &c.query) == 0);
    for (const char *p = path; ok && *p;) {
        if (*p == '/')
            p++;
        if (!*p)
            break;                    /* a trailing '/' */
        if (*p == '/') {              /* an empty segment ("//") names nothing */
            ok = false;
            break;
        }
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (c.nseg == SR_MAX_SEGS) {
            ok = false;
            break;
        }
        char *raw = strndup(p, len);
        c.seg[c.nseg] = raw ? evhttp_uridecode(raw, 0, NULL) : NULL;
        free(raw);
        if (!c.seg[c.nseg]) {
            ok = false;
            break;
        }
        c.nseg++;
        p += len;
    }
    if (ok && !authorized(&c)) {
        r->errors++;
    } else if (!ok || !route(&c)) {
        r->errors++;
        not_found(&c);
    }
    for (int i = 0; i < c.nseg; i++)
        free(c.seg[i]);
    evhttp_clear_headers(&c.query);
}
