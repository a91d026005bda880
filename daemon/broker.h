/*
 * daemon/ — sluiced: the broker process.
 *
 * This header is the daemon's internal contract: the broker state, the
 * topic/partition registry, and the request context that every API handler
 * (daemon/api_*.c) receives.  Handlers never touch sockets: they read the
 * request body through r->body (a kp_rd over the frame) and write the
 * response body into r->out (a kp_buf); message bytes that come from
 * segment files are spliced in with bk_req_add_range, which the connection
 * code sends with sendfile.  Only daemon/server.c writes to sockets.
 *
 * One thread runs the event loop and owns everything here.  Work that may
 * block (fsync, deletion) goes to worker threads and comes back as an
 * event on the loop.
 */
#ifndef SLUICE_BROKER_H
#define SLUICE_BROKER_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/config.h"
#include "metadata/md.h"
#include "protocol/kp.h"
#include "segments/seg.h"

struct event_base;
struct event;
typedef struct bk_broker bk_broker;
typedef struct bk_conn bk_conn;
typedef struct bk_topic bk_topic;
typedef struct bk_partition bk_partition;

/* ---- waiting for data (Fetch long-poll) ---------------------------------- */
/* A waiter is linked into a partition's list; bk_partition_notify (called
 * after every append) unlinks each waiter and calls its wake().  wake() runs
 * on the loop thread and may re-register. */
typedef struct bk_waiter {
    struct bk_waiter *next, *prev;
    bk_partition *part;               /* NULL when not linked */
    void (*wake)(struct bk_waiter *w);
    void *arg;
} bk_waiter;

void bk_partition_init_waiters(bk_partition *p);   /* empty list */
void bk_partition_watch(bk_partition *p, bk_waiter *w);
void bk_partition_unwatch(bk_waiter *w);
void bk_partition_notify(bk_partition *p);

/* ---- topics and partitions -------------------------------------------------- */
struct bk_partition {
    bk_topic *topic;
    int32_t id;
    seg_log *log;
    int32_t leader_epoch;
    int64_t high_watermark;          /* standalone: the log end */
    /* flush policy (flush.messages / flush.ms) */
    int64_t unflushed_messages;
    int64_t last_flush_ms;
    bool flush_in_flight;
    /* offsets last saved to SQLite, to save only what changed */
    int64_t saved_log_start, saved_recovery_point, saved_hw;
    bk_waiter waiters;               /* list head (circular, sentinel) */
    int64_t storage_retry_ms;        /* log failed: next seg_reset_error try */
    struct bk_pstate *producers;     /* idempotent producers (producer_state.c) */
    /* counters for /metrics */
    uint64_t bytes_in, messages_in, bytes_out;
    uint64_t flushes;                /* fdatasyncs completed (flusher.c) */
    /* retention and compaction (daemon/retention.c, daemon/cleaner.c) */
    bool clean_in_flight;            /* a compaction job is out */
    uint64_t segments_deleted, bytes_deleted;
    uint64_t cleaner_runs, cleaner_bytes_freed, cleaner_records_removed,
             cleaner_failures;
    int64_t cleaner_last_us;         /* duration of the last compaction */
};

struct bk_topic {
    char name[MD_TOPIC_NAME_MAX + 1];
    uint8_t id[16];
    int32_t npartitions;
    bk_partition **partitions;       /* [npartitions] */
    md_topic_config cfg;             /* effective config */
    bk_topic *hnext;                 /* hash chain */
};

struct bk_broker {
    struct event_base *base;
    bk_config *cfg;
    md_db *db;
    char data_dir[4096];             /* first entry of log.dirs */
    bk_topic **topic_hash;
    size_t topic_hash_size, ntopics;
    struct event *sig_term, *sig_int;
    struct event *maint_timer;       /* saves offsets, time-based work */
    bool stopping;
    int nconns;
    struct bk_flusher *flusher;      /* fsync worker (daemon/flusher.c) */
    struct bk_server *server;
    struct bk_admin *admin;          /* admin HTTP + SQL workers (admin_http.c) */
    struct bk_janitor *janitor;      /* unlinks files (janitor.c) */
    struct bk_cleaner *cleaner;      /* compaction workers (cleaner.c) */
    struct event *retention_timer;   /* log.retention.check.interval.ms */
    int64_t pid_next, pid_end;       /* producer ids reserved in SQLite, unused */
};

/* Loads every topic from SQLite and opens (recovering) its partitions. */
int  bk_topics_load(bk_broker *b);
void bk_topics_close_all(bk_broker *b);
bk_topic *bk_topic_find(bk_broker *b, const char *name, size_t len);
bk_partition *bk_partition_find(bk_broker *b, kp_str topic, int32_t partition);
/* The one path for topic changes from the Kafka APIs (and, later, SQL):
 * validates, writes the facts through metadata/, then updates the
 * in-memory registry and the partition directories.  Returns KP_* with a
 * message in err. */
int bk_topic_create(bk_broker *b, const char *name, int32_t partitions,
                    int16_t replication_factor, const md_kv *configs,
                    size_t nconfigs, bool validate_only, char *err, size_t errlen);
int bk_topic_delete(bk_broker *b, const char *name, char *err, size_t errlen);
int bk_topic_add_partitions(bk_broker *b, const char *name, int32_t count,
                            bool validate_only, char *err, size_t errlen);
/* Re-reads a topic's overrides and recomputes its effective config (after
 * AlterConfigs), applying segment settings to the open logs. */
int bk_topic_reload_config(bk_broker *b, bk_topic *t);
/* Calls fn for every topic, in no particular order. */
void bk_topics_foreach(bk_broker *b, void (*fn)(bk_topic *t, void *arg), void *arg);
/* Segment settings for a partition, from the topic's effective config. */
void bk_seg_config(const md_topic_config *c, seg_config *out);
/* Saves log start / recovery point / high watermark of every partition
 * whose values changed, in one transaction. */
void bk_save_offsets(bk_broker *b);

/* "Who leads this partition / coordinates this group": one place to ask.
 * Standalone: always this broker. */
int32_t bk_leader_of(bk_broker *b, bk_partition *p);
int32_t bk_controller_id(bk_broker *b);

/* Called after an append: flush policy bookkeeping + wakes fetch waiters. */
void bk_partition_appended(bk_broker *b, bk_partition *p, int64_t messages);

/* ---- flush worker (daemon/flusher.c) ---------------------------------------- */
int  bk_flusher_start(bk_broker *b);
/* Queues an fdatasync of the partition on the worker thread (no-op if one
 * is in flight).  On completion the loop thread records the recovery point. */
void bk_flusher_request(bk_broker *b, bk_partition *p);
/* Drops pending work for p (topic deletion) and waits for in-flight work
 * on p to finish. */
void bk_flusher_forget(bk_broker *b, bk_partition *p);
void bk_flusher_stop(bk_broker *b);
/* Maintenance timer: requests flushes due under flush.ms. */
void bk_flush_tick(bk_broker *b);

/* ---- retention, compaction, file removal (retention.c, cleaner.c, janitor.c)
 * The loop decides (a few numbers per partition); worker threads unlink,
 * compact and remove directories.  Start after bk_flusher_start; stop
 * (cancels compactions, installs finished ones) after bk_flusher_stop;
 * shutdown (runs every queued removal now) after bk_topics_close_all. */
int  bk_retention_start(bk_broker *b);
void bk_retention_stop(bk_broker *b);
void bk_retention_shutdown(bk_broker *b);
/* log.retention.check.interval.ms: retention.ms / retention.bytes. */
void bk_retention_tick(bk_broker *b);
/* DeleteRecords: log start to `offset` (-1: high watermark), saved to
 * SQLite at once.  KP_NONE with *low_watermark, or a KP_* error. */
int  bk_delete_records(bk_broker *b, bk_partition *p, int64_t offset,
                       int64_t *low_watermark);
/* Topic deletion: renames the partition directory "...-delete" and hands
 * the log to the janitor; p->log is NULL afterwards. */
void bk_partition_log_delete(bk_broker *b, bk_partition *p);
int  bk_janitor_start(bk_broker *b);
void bk_janitor_stop(bk_broker *b);
/* Unlinks the list's *.deleted files after delay_ms (file.delete.delay.ms). */
void bk_janitor_dead(bk_broker *b, seg_dead *d, int64_t delay_ms);
void bk_janitor_destroy_log(bk_broker *b, seg_log *log);
void bk_janitor_remove_dir(bk_broker *b, const char *dir);
/* log.cleaner.enable=false: no workers, no compaction. */
int  bk_cleaner_start(bk_broker *b);
void bk_cleaner_stop(bk_broker *b);
/* log.cleaner.backoff.ms: plans and queues due compactions. */
void bk_cleaner_tick(bk_broker *b);
/* Cancels and waits for p's compaction, then finishes it (before the
 * partition's log is closed or deleted). */
void bk_cleaner_forget(bk_broker *b, bk_partition *p);

/* ---- requests ----------------------------------------------------------------- */
enum { BK_RESPOND = 0, BK_DEFER = 1, BK_NO_RESPONSE = 2, BK_CLOSE = -1,
       BK_CLOSE_QUIET = -2 };

typedef struct bk_piece {
    size_t at;                       /* position in out where the range goes */
    seg_range range;
} bk_piece;

typedef struct bk_req {
    bk_broker *b;
    bk_conn *conn;
    kp_req_hdr hdr;
    kp_rd body;                      /* cursor over the request body */
    kp_buf *out;                     /* response body, header excluded */
    bk_piece *pieces;                /* file ranges spliced into out */
    int npieces, cap_pieces;
    /* For deferred handlers: called if the connection dies first. */
    void (*cancel)(struct bk_req *r);
    /* For deferred handlers: answer now with what there is (shutdown). */
    void (*expire)(struct bk_req *r);
    void *state;                     /* handler's own, for deferral */
    int64_t received_us;
} bk_req;

/* A handler parses r->body and writes the response body to r->out.
 * Returns BK_RESPOND (send it now), BK_DEFER (it will call bk_req_finish
 * later; the connection reads nothing more meanwhile, so responses stay in
 * order), BK_NO_RESPONSE (acks=0), or BK_CLOSE (malformed: close the
 * connection; BK_CLOSE_QUIET when the handler already logged why, e.g. a
 * failed acks=0 produce). */
typedef int (*bk_handler)(bk_req *r);

/* Splices a file range in at the current end of r->out; takes over the
 * range's reference. */
void bk_req_add_range(bk_req *r, seg_range *range);
/* Completes a deferred request: sends its response, resumes the connection. */
void bk_req_finish(bk_req *r);
/* The client's address, "host:port". */
const char *bk_conn_peer(const bk_conn *c);
/* The connection's number, 1, 2, ... in accept order; never reused, unlike
 * its address. */
uint64_t bk_conn_serial(const bk_conn *c);
/* Total bytes of ranges spliced so far. */
size_t bk_req_range_bytes(const bk_req *r);

/* API table (daemon/dispatch.c). */
typedef struct bk_api {
    int16_t key;
    int16_t min_version, max_version;   /* advertised */
    bk_handler handler;
} bk_api;
const bk_api *bk_api_find(int16_t key);
const bk_api *bk_api_table(size_t *n);

/* Handlers, one file each or grouped by theme. */
int bk_handle_api_versions(bk_req *r);
int bk_handle_metadata(bk_req *r);
int bk_handle_produce(bk_req *r);
int bk_handle_fetch(bk_req *r);
int bk_handle_list_offsets(bk_req *r);
int bk_handle_create_topics(bk_req *r);
int bk_handle_delete_topics(bk_req *r);
int bk_handle_create_partitions(bk_req *r);
int bk_handle_describe_configs(bk_req *r);
int bk_handle_alter_configs(bk_req *r);
int bk_handle_incremental_alter_configs(bk_req *r);
int bk_handle_delete_records(bk_req *r);
int bk_handle_init_producer_id(bk_req *r);

/* ---- misc ------------------------------------------------------------------- */
int64_t bk_now_ms(void);             /* wall clock, ms */
int64_t bk_mono_us(void);            /* monotonic, µs */
/* One log line to stderr: "[2026-11-30 01:02:03] INFO message". */
void bk_log(const char *level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define BK_INFO(...)  bk_log("INFO", __VA_ARGS__)
#define BK_WARN(...)  bk_log("WARN", __VA_ARGS__)
#define BK_ERROR(...) bk_log("ERROR", __VA_ARGS__)
/* The wire form of a handler's result: Kafka codes (-1 and up) pass;
 * internal errors (negative, e.g. MD_E_SQL) never reach the wire and
 * become UNKNOWN_SERVER_ERROR. */
int16_t bk_wire_code(int rc);
/* A NUL-terminated malloc'd copy of a slice (null → NULL).  Embedded NUL
 * bytes become '?', so "retention.ms\0x" can never pass as "retention.ms".
 * *oom is set when allocation fails (and left alone otherwise). */
char *bk_slice_dup(kp_str s, bool *oom);

/* ---- admin HTTP: /sql, /metrics, /healthz (daemon/admin_http.c) --------------- */
/* Binds admin.listeners and starts the SQL workers; after bk_groups_init.
 * Refuses a non-loopback address without admin.token.  0 or -1 with err. */
int  bk_admin_start(bk_broker *b, char *err, size_t errlen);
/* After the loop has stopped, before topics and groups are freed. */
void bk_admin_stop(bk_broker *b);

/* ---- group coordinator (daemon/group*.c) ------------------------------------ */
/* Loads groups from SQLite (they come back Empty; members rejoin), starts
 * the retention timer.  After bk_topics_load.  0 or -1. */
int  bk_groups_init(bk_broker *b);
/* After bk_server_free: saves what changed, frees everything. */
void bk_groups_shutdown(bk_broker *b);
/* "Who coordinates group G": one place to ask.  Standalone: this broker. */
int32_t bk_coordinator_of(bk_broker *b, const char *group);
/* The coordinator's writes answer on the loop once durable: done(arg, rc)
 * runs after the sync that covers them, never from inside the call that
 * queued them.  A caller that goes away first calls bk_groups_forget
 * (done will not run; the write itself may still happen). */
struct gc_wait;
typedef void (*bk_group_done_fn)(void *arg, int rc);
void bk_groups_forget(struct gc_wait *pending);

/* The one path that deletes a group and its committed offsets
 * (DeleteGroups, the SQL surface's DELETE FROM consumer_groups).  Refused
 * at once (NOT_COORDINATOR, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND for a group
 * already being deleted) with the reason in err; else KP_NONE with
 * d->pending set, and done(arg, rc) later: rc KP_NONE,
 * KP_GROUP_ID_NOT_FOUND or KP_UNKNOWN_SERVER_ERROR, the reason written
 * into err first (err must live until then). */
typedef struct bk_group_deletion {
    const char *group_id;
    bk_group_done_fn done;
    void *arg;
    char *err;
    size_t errlen;
    struct gc_wait *pending;          /* out: set while queued */
} bk_group_deletion;
int bk_group_delete(bk_broker *b, bk_group_deletion *d);

/* The one path for committed offsets: OffsetCommit and the SQL surface's
 * UPDATE / INSERT of committed_offsets (design note: group_offsets.c).
 * The caller fills offs[0..n) (group, topic, partition, offset, epoch,
 * metadata, times); bk_offsets_commit validates them as Kafka's
 * doCommitOffsets does, queues the valid ones on the coordinator's
 * persistence pipeline (write half: the sync worker's transaction and
 * fdatasync) and, on the loop after that sync, fills in their results
 * and calls done(arg, rc) (apply half); rc: 0, or MD_E_SQL when the write
 * failed (those entries then carry COORDINATOR_NOT_AVAILABLE).  offs and
 * the strings it points to stay the caller's and must live until done
 * runs or bk_groups_forget: a forgotten commit not yet handed to the
 * sync worker is dropped. */
typedef struct bk_offset_commit {
    kp_str group;
    int32_t generation;               /* a member's; -1: none (simple consumer) */
    kp_str member_id, instance_id;    /* instance: null for none */
    bool by_operator;                 /* the SQL surface: refused while the
                                         group has members, all or nothing */
    md_offset *offs;                  /* result: per entry, out */
    size_t n;
    uint64_t cadence_key;             /* the committer's connection serial, to
                                         learn its pace (group_persist.c C7);
                                         0: none */
    bk_group_done_fn done;
    void *arg;
    struct gc_wait *pending;          /* out: set while queued */
} bk_offset_commit;
/* KP_NONE with c->pending set: queued, done runs later.  KP_NONE with
 * c->pending NULL: nothing to store, every entry's result is final.
 * Another KP_* error: an operator's commit was refused as a whole,
 * nothing queued, the reason in err. */
int bk_offsets_commit(bk_broker *b, bk_offset_commit *c, char *err, size_t errlen);
int bk_handle_find_coordinator(bk_req *r);
int bk_handle_join_group(bk_req *r);
int bk_handle_sync_group(bk_req *r);
int bk_handle_heartbeat(bk_req *r);
int bk_handle_leave_group(bk_req *r);
int bk_handle_offset_commit(bk_req *r);
int bk_handle_offset_fetch(bk_req *r);
int bk_handle_list_groups(bk_req *r);
int bk_handle_describe_groups(bk_req *r);
int bk_handle_delete_groups(bk_req *r);

#endif
