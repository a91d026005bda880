/*
 * daemon/registry/sr_int.h — the schema registry's internals (private to
 * daemon/registry): the model in memory (sr_state.c), the _schemas log
 * (sr_log.c), the HTTP surface (sr_http.c) and its endpoints (sr_api.c).
 *
 * The model is what the _schemas records say, applied in log order
 * (sr_state_apply): a record changes memory only once it is durable, on
 * load and after a write alike, so memory never holds what the log may
 * lose (sr_log.c R2).
 */
#ifndef SLUICE_SR_INT_H
#define SLUICE_SR_INT_H

#include "daemon/registry/registry.h"

#include <jansson.h>

#define SR_TOPIC "_schemas"
#define SR_MAX_BODY (16 << 20)          /* a request body's bound */
#define SR_COMPAT_LEN 24
#define SR_MODE_LEN 16
/* SQL's writes name their principal in this header, with a secret of this
 * process (sr_sql.c Q3): 32 random bytes in hex. */
#define SR_SQL_HEADER "X-Sluice-SQL-Principal"
#define SR_SQL_SECRET_HEX 64
#define SR_HOST_MAX 128                 /* a peer's address, as text */

struct evhttp;
struct evhttp_request;
struct evhttp_connection;
struct event;

/* One distinct schema (type, text, references) and the id it has. */
typedef struct sr_schema {
    int32_t id;
    int32_t uses;                 /* versions naming it, soft-deleted ones too */
    char *type;                   /* "AVRO", "JSON", "PROTOBUF" */
    char *text;
    char *refs;                   /* references, compact JSON; "[]" when none */
    char *answer;                 /* GET /schemas/ids/{id}'s body, made on first use */
} sr_schema;

typedef struct sr_version {
    int32_t version, id;
    bool deleted;                 /* soft-deleted */
} sr_version;

typedef struct sr_subject {
    char *name;
    sr_version *v;                /* ascending by version */
    size_t nv, cap;
    char compat[SR_COMPAT_LEN];   /* "" when the subject has no level of its own */
    char mode[SR_MODE_LEN];       /* "" likewise */
} sr_subject;

/* One _schemas record: key and value as JSON text (value NULL: tombstone). */
typedef struct sr_rec {
    char *key, *val;
} sr_rec;

typedef struct sr_pending sr_pending;
typedef struct sr_wr sr_wr;
typedef struct sr_mjob sr_mjob;
typedef struct sr_held sr_held;
typedef struct sr_fwd sr_fwd;
typedef struct sr_fcall sr_fcall;

typedef struct sr_registry {
    bk_broker *b;
    sr_schema **schemas;          /* ascending by id */
    size_t nschemas, cap_schemas;
    sr_subject **subjects;        /* ascending by name (bytes) */
    size_t nsubjects, cap_subjects;
    char compat[SR_COMPAT_LEN];   /* global; "BACKWARD" unless set */
    char mode[SR_MODE_LEN];       /* global; "READWRITE" unless set */
    int32_t max_id;               /* the highest id ever seen or handed out */
    int64_t applied;              /* the next offset of _schemas-0 to apply (sr_log.c R2) */
    struct event *tail_ev;        /* sr_log_tail every SR_TAIL_MS */
    struct evhttp *http;
    sr_pending *queue, *queue_tail; /* writes waiting for the one in flight */
    sr_wr *writing;               /* the write in flight (sr_log.c R1) */
    bool from_queue;              /* serving the queue's head (sr_http.c) */
    struct event *next_ev;        /* serves the queue's head on the next turn */
    int64_t registrations, lookups, deletions, requests, errors, records_loaded;
    uint64_t gen;                 /* bumped by each applied record (sr_validate.c's index) */
    struct sr_vindex *vindex;     /* ids → subjects for Produce (sr_validate.c) */
    int64_t validation_refusals;
    int64_t auth_failures;        /* 401s: no or wrong credentials (sr_auth.c) */
    int64_t auth_refusals;        /* 403s: a principal without the right */
    /* cluster mode: where writes are forwarded (sr_forward.c) */
    int32_t fwd_leader;           /* whose registry fwd_host:fwd_port is; -1: none */
    char fwd_host[256];
    int fwd_port;
    bool fwd_https;
    struct evhttp_connection *fwd_conn;
    /* its own listener, which SQL's writes call (sr_sql.c) */
    char self_host[256];
    int self_port;
    bool self_https;
    struct evhttp_connection *self_conn;
    sr_sql_call *sql_calls;       /* in flight (sr_sql.c Q1) */
    char sql_secret[SR_SQL_SECRET_HEX + 1]; /* sr_sql.c Q3: never logged, never forwarded */
    sr_fwd *fwds;                 /* sent, not yet answered (sr_forward.c F1) */
    /* following _schemas-0 without a replica (sr_follow.c) */
    sr_fcall *follow_call;        /* the Fetch in flight */
    bool follow_ready;
    int64_t follow_target;        /* the leader's high watermark first seen; -1 unknown */
    /* the SQL mirror (sr_mirror.c) */
    bool mirror_on, mirror_lost;
    int mirror_fails;             /* failed jobs in a row (sr_mirror.c X4) */
    struct event *mirror_retry;   /* the whole rewrite, after a backoff (sr_mirror.c X4) */
    sr_mjob *mjob;                /* the job being noted */
    uint64_t mirror_seq;          /* jobs submitted */
    uint64_t mirror_done;         /* jobs run (sr_mirror.c X1: in order) */
    struct bk_worker *mwk;        /* the mirror's thread, and its connection */
    md_db *mdb;
    sr_held *held, **held_tail;   /* answers waiting for their mirror (sr_mirror.c X2) */
} sr_registry;

/* ---- the model (sr_state.c) ---------------------------------------------------- */
sr_schema  *sr_schema_by_id(sr_registry *r, int32_t id);
/* The schema with this type, text and references, or NULL. */
sr_schema  *sr_schema_find(sr_registry *r, const char *type, const char *text,
                           const char *refs);
sr_subject *sr_subject_find(sr_registry *r, const char *name);
sr_version *sr_version_find(sr_subject *s, int32_t version);
/* The highest version not soft-deleted (or any, with deleted), or NULL. */
sr_version *sr_version_latest(sr_subject *s, bool deleted);
/* Versions not soft-deleted. */
size_t      sr_subject_live(const sr_subject *s);
/* The level that applies to s (its own, else the global). */
const char *sr_compat_of(sr_registry *r, const sr_subject *s);
const char *sr_mode_of(sr_registry *r, const sr_subject *s);
/* Applies one durable record; a record it does not know is skipped.
 * 0, or -1 out of memory. */
int  sr_state_apply(sr_registry *r, const char *key, size_t klen, const char *val,
                    ssize_t vlen);
void sr_state_free(sr_registry *r);

/* The records' JSON, Confluent's field order (one key per fact, byte for
 * byte the same each time: compaction keys on them).  NULL: no memory. */
char *sr_key_schema(const char *subject, int32_t version);
char *sr_key_config(const char *subject);       /* subject NULL: global */
char *sr_key_mode(const char *subject);
char *sr_key_delete_subject(const char *subject);
char *sr_val_delete_subject(const char *subject, int32_t version);
/* {"compatibilityLevel": v} (config) or {"mode": v}. */
char *sr_val_setting(bool config, const char *v);
char *sr_val_schema(const char *subject, int32_t version, int32_t id, const char *type,
                    const char *text, const char *refs, bool deleted);

/* ---- schemas checked (sr_schema.c: the Avro library through schema/sch.h) ------- */
/* A schema as a request gives it, in the form stored and compared. */
typedef struct sr_given {
    const char *type;                 /* "AVRO", "JSON", "PROTOBUF" */
    char *text;                       /* canonical (Avro) or as given; malloc'd */
    char *refs;                       /* references, compact JSON ("[]"); malloc'd */
} sr_given;
/* The text stored for (type, text, refs): Avro parsed (with its
 * references' schemas) and written canonical (normalize: Confluent's
 * normalized form); JSON Schema and Protobuf byte-exact.  0 with *out
 * (malloc'd), or -1 with the reason in err (Confluent's 42201). */
int sr_schema_canon(sr_registry *r, const char *type, const char *text, const char *refs,
                    bool normalize, char **out, char *err, size_t errlen);
/* Whether g may follow s's live versions at level (only: against that one
 * version instead).  1 yes, 0 no with the reason in why. */
int sr_schema_compatible(sr_registry *r, sr_subject *s, const sr_version *only,
                         const sr_given *g, const char *level, char *why, size_t whylen);

/* s (Avro) parsed with its references.  0 with *out, or -1 with err. */
struct sch_schema;
int sr_schema_parse(sr_registry *r, const sr_schema *s, struct sch_schema **out, char *err,
                    size_t errlen);

/* ---- Produce's checks (sr_validate.c) ------------------------------------------------ */
/* bk_broker.schema_check. */
int  sr_validate_check(bk_broker *b, bk_schema_ctx *c, const uint8_t *p, size_t len,
                       bool whole, char *why, size_t whylen);
void sr_validate_free(sr_registry *r);
/* The subjects with a version (soft-deleted too) of schema id: their
 * number with *out (valid until the next applied record), or -1 out of
 * memory.  From Produce's index of ids: no scan of the subjects. */
ssize_t sr_validate_subjects(sr_registry *r, int32_t id, const char *const **out);

/* ---- the SQL mirror (sr_mirror.c) ---------------------------------------------------- */
typedef void (*sr_write_done)(sr_registry *r, void *arg, int http_status,
                              int error_code, const char *msg);
/* Changes sr_state.c makes, noted as rows to write (nothing before
 * sr_mirror_start: unit tests and benches apply records without it).
 * Loop thread. */
void sr_mirror_version(sr_registry *r, const char *subject, int32_t version,
                       const sr_version *v);            /* v NULL: gone */
void sr_mirror_soft_delete(sr_registry *r, const char *subject, int32_t upto);
void sr_mirror_schema(sr_registry *r, const sr_schema *x, bool gone);
void sr_mirror_settings(sr_registry *r, const sr_subject *s);   /* NULL: the registry's */
/* The changes noted so far handed to the mirror's worker as one job; its
 * number. */
uint64_t sr_mirror_flush(sr_registry *r);
/* Calls done now, or (a success) once the changes flushed so far are in
 * SQL (sr_mirror.c X2). */
void sr_mirror_answer(sr_registry *r, sr_write_done done, void *arg, int status, int code,
                      const char *msg);
void sr_mirror_start(sr_registry *r);
/* After the load, before the loop serves: the load's job run here, then
 * the worker started. */
void sr_mirror_serve(sr_registry *r);
/* After the loop: waits for the jobs, answers what was held. */
void sr_mirror_stop(sr_registry *r);

/* ---- the log (sr_log.c) -------------------------------------------------------------- */
/* Applies one record of _schemas-0 (sr_log.c R2: skipped below
 * r->applied).  1 applied, 0 skipped, -1 out of memory. */
int  sr_log_apply(sr_registry *r, const kp_record *rec);
/* Applies the local replica of _schemas-0 from r->applied to its high
 * watermark (sr_log.c R2), its changes flushed to the SQL mirror.  0 or -1. */
int  sr_log_tail(sr_registry *r);
/* Appends recs (taking their strings) to _schemas-0 and calls done once
 * they are durable and applied (status 200), or not (status 500, Confluent's
 * 50001 / 50002, nothing applied).  done runs on a later loop turn, never
 * inside this call.  One write at a time (sr_log.c R1): the caller queues. */
void sr_log_write(sr_registry *r, sr_rec *recs, size_t n, sr_write_done done, void *arg);
void sr_log_stop(sr_registry *r);

/* ---- following _schemas-0 without a replica (sr_follow.c) -------------------------- */
/* Cluster mode, no local replica: fetches what the leader holds past
 * r->applied (one Fetch in flight) and applies it.  0. */
int  sr_follow(sr_registry *r);
/* Whether reads must wait: this broker follows _schemas-0 from its leader
 * and has not yet reached the high watermark it first saw. */
bool sr_follow_behind(sr_registry *r);
void sr_follow_stop(sr_registry *r);

/* ---- the HTTP surface (sr_http.c) --------------------------------------------------- */
/* Answers with a JSON body (taken: freed here). */
void sr_reply_json(struct evhttp_request *req, int status, json_t *body);
/* Confluent's error body {"error_code": code, "message": msg}. */
void sr_reply_error(struct evhttp_request *req, int status, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Answers with the text as it is (GET .../schema). */
void sr_reply_raw(struct evhttp_request *req, const char *text);
/* Answers with JSON text already made. */
void sr_reply_text(struct evhttp_request *req, int status, const char *json);
/* Holds req until the write in flight ends, then serves it again (as
 * principal: sr_api_serve's). */
void sr_queue(sr_registry *r, struct evhttp_request *req, const char *principal);
/* A write ended: the queue's head is served on the next loop turn. */
void sr_kick(sr_registry *r);

/* ---- forwarding writes to the leader (sr_forward.c) -------------------------------- */
/* Cluster mode, this broker not the leader of _schemas-0: req is sent to
 * the leader's registry and its answer relayed (true: req is taken).
 * false: serve it here (standalone, the leader, no leader, forwarded). */
bool sr_forward(sr_registry *r, struct evhttp_request *req);
void sr_forward_stop(sr_registry *r);

/* ---- SQL's writes (sr_sql.c; the calls are in registry.h) --------------------------- */
/* Draws r->sql_secret (getrandom); -1 with err. */
int  sr_sql_start(sr_registry *r, char *err, size_t errlen);
void sr_sql_stop(sr_registry *r);
/* The request came from SQL through this broker (SR_SQL_HEADER present):
 * 1 with *principal (NULL: may do all) and the SQL client's host copied
 * to host; 0 not from SQL; -1 the header is not ours (a forgery: 401). */
int  sr_sql_who(const sr_registry *r, struct evhttp_request *req, const char **principal,
                char *host, size_t hostlen);

/* ---- who may (sr_auth.c) ------------------------------------------------------------ */
/* Serves req (sr_api_serve) once its principal is known, or answers 401. */
void sr_auth_serve(sr_registry *r, struct evhttp_request *req);
/* principal may do op on (res, name); NULL (no authorizer, the token) may
 * do all. */
bool sr_auth_may(sr_registry *r, struct evhttp_request *req, const char *principal, int res,
                 const char *name, int op);
/* As sr_auth_may, and when not, req is answered 403 (401 for ANONYMOUS). */
bool sr_auth_need(sr_registry *r, struct evhttp_request *req, const char *principal, int res,
                  const char *name, int op);
/* Answers the refusal: principal "is not authorized to <what>". */
void sr_auth_refuse(sr_registry *r, struct evhttp_request *req, const char *principal,
                    const char *what);

/* ---- the endpoints (sr_api.c) ------------------------------------------------------- */
/* Serves one request as principal (NULL: may do all), whose rights it
 * checks (sr_auth.c): path split into segs (URI-decoded), query parsed. */
void sr_api_serve(sr_registry *r, struct evhttp_request *req, const char *principal);

#endif
