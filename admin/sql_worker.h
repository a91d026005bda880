/*
 * The admin side of the daemon: SQL worker threads (admin/sql_worker.c),
 * the HTTP listener (admin/admin_http.c) and metrics (daemon/net/net_metrics.c).
 * Internal to those files; the rest of the daemon sees bk_admin_* in
 * admin/admin.h.
 */
#ifndef SLUICE_SQL_WORKER_H
#define SLUICE_SQL_WORKER_H

#include <pthread.h>
#include <stdatomic.h>

#include "daemon/broker.h"
#include "daemon/worker.h"
#include "admin/sql_surface.h"

enum sq_job_kind { SQ_JOB_SQL, SQ_JOB_METRICS };

/* One request for a worker.  Created and finished on the loop thread; a
 * worker owns it in between.  done() runs on the loop thread. */
typedef struct sq_job {
    bk_work w;                     /* first: a bk_work * is an sq_job * */
    enum sq_job_kind kind;
    char *sql;
    int format;
    bool headers;
    bool read_only;                /* SQL: writes refused (admin_http's principal) */
    sq_topic_set *readable;        /* SQL: messages of these topics only; NULL: all */
    /* SQL: who, for the registry's SUBJECT ACLs (registry.h's sr_sql_from) */
    char *principal;               /* NULL: may do all (the token, the socket, no authorizer) */
    char *host;                    /* the client's address */
    char *authorization;           /* its Authorization header (cleansed when freed); NULL */
    sq_result res;                 /* SQL: the rows; METRICS: text appended */
    atomic_bool cancelled;         /* the client went away */
    void (*done)(struct sq_job *j);
    void *arg;
    int64_t queued_us;
} sq_job;

struct bk_admin {
    bk_broker *b;
    /* worker pool (daemon/worker.c) */
    bk_worker *wk;
    int nthreads;
    pthread_mutex_t mu;            /* writes, the snapshot, stopping */
    bool stopping;
    sq_conn **conns;               /* one per worker, for interrupts */
    /* writes handed to the loop */
    struct sq_wreq *writes;
    struct sq_wreq *applying;      /* taken, answered when durable (loop only) */
    struct event *write_ev;
    /* live snapshot */
    sq_snap *snap;                 /* guarded by mu */
    bool snap_wanted;
    pthread_cond_t snap_cv;
    struct event *snap_ev, *snap_timer;
    /* HTTP */
    struct evhttp *http;           /* admin.listeners; NULL: none */
    struct evhttp *sock_http;      /* the admin socket; NULL: none */
    char sock_path[108];           /* its path (sun_path) */
    unsigned long sock_ino;        /* its inode: unlinked at stop if still ours */
};

int  sq_workers_start(bk_broker *b, char *err, size_t errlen);
void sq_workers_stop(bk_broker *b);   /* joins the workers */
void sq_workers_free(bk_broker *b);   /* then frees jobs and events */
void sq_submit(bk_broker *b, sq_job *j);
void sq_job_free(sq_job *j);

#endif
