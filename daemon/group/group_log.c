/*
 * daemon/group/group_log.c — cluster mode: a group's committed offsets live in
 * the replicated internal topic __consumer_offsets, as in Kafka, so the
 * death of its coordinator loses none of them.
 *
 * Design note.
 *
 * The coordinator of group G is the leader of partition
 * abs(javaStringHashCode(G)) % partitions of __consumer_offsets (Kafka's
 * GroupMetadataManager.partitionFor): every broker computes it from its
 * mirror, and it moves when that partition's leadership moves.  The topic
 * (offsets.topic.num.partitions, offsets.topic.replication.factor,
 * cleanup.policy=compact) is created through the ordinary topic path by
 * the first broker asked about a group once enough brokers live; until it
 * is led, FindCoordinator answers COORDINATOR_NOT_AVAILABLE.
 *
 * A commit (group_offset_commit.c, gc_offsets_commit) is appended on the loop,
 * when it is accepted, as one batch of Kafka's OffsetCommit records
 *
 *     key   (OffsetCommitKey v1)          value (OffsetCommitValue v3)
 *     +---------+-------+-------+------+  +---------+--------+-------------+
 *     | int16 1 | group | topic | part |  | int16 3 | offset | leaderEpoch |
 *     +---------+-------+-------+------+  +---------+--------+-------------+
 *       strings: int16 length + bytes      | metadata | commitTimestamp  |
 *                                          +----------+------------------+
 *     (v1 value, when the commit carries an expiry: offset, metadata,
 *      commitTimestamp, expireTimestamp)
 *
 * (the keys and values, GroupMetadata's too, are encoded and decoded by
 * the codec generated from Kafka's JSON in protocol/records/, kp_records.h)
 *
 * to the group's partition, and stored in this broker's SQLite by the
 * usual pipeline (group_persist.c) in parallel.  Its answer leaves only
 * when both are done: finish_synced hands the wait here (gc_log_commit_hold),
 * and it is held until the partition's high watermark covers the record,
 * as an acks=all Produce is (the same bk_deferred, replica_deferred.h, woken
 * when the high watermark moves; never blocking the loop), or
 * offsets.commit.timeout.ms passes (REQUEST_TIMED_OUT), or leadership
 * moves (NOT_COORDINATOR).  Cost per commit: one batch appended to the
 * page cache; no ZooKeeper write, no fsync beyond the SQLite pipeline's
 * shared one.
 *
 * Each broker materialises into its SQLite every partition it holds a
 * replica of, so OffsetFetch and SQL's committed_offsets and lag read
 * what they always read, and SQL on any broker shows what the
 * coordinator shows.  The leader loads its partitions (groups into
 * memory, rows into SQLite); a follower tails its own replica (rows
 * only), with the same record decoding, up to the high watermark it
 * knows, so its rows never show a record that a new leader could cut
 * off; a broker without a replica has no rows of it.  Per partition of
 * __consumer_offsets (gl_tick → part_sync):
 *
 *              no replica here: part_clear (G7)
 *     IDLE ◄──────────────────────────────────────────────── any state
 *       │ a replica here, not led (follow_sync, follow_start: the clear,
 *       ▼ then rows from the log start)
 *     FOLLOWING ── part_step: [read so far, high watermark) → jobs, again
 *       │  ▲       whenever the high watermark moves (checked every tick);
 *       │  │       a new leader epoch or a log cut below or started above
 *       │  │       what was read: follow_start again
 *       │  └───────── leadership gone: follow_start ◄────────────┐
 *       │ leads it (gl_tick, gc_log_coordinator_error)                │
 *       ▼    load_start: cursor over [log start, log end)         │
 *     LOADING ── load_step, in bounded steps, rows → jobs ──► LOADED
 *       ▲                                  last job durable       │
 *       └────────────── a new leader epoch, still led ◄───────────┘
 *
 * Group state is Kafka's GroupMetadata record (gc_log_group_store), written
 * where Kafka's GroupCoordinator writes it: when the leader's SyncGroup
 * completes a rebalance (generation, protocol, leader, the members with
 * their subscriptions and assignments; the SyncGroup answers are held, as
 * a commit's, until the record is replicated: group_join.c) and when a
 * rebalance leaves the group Empty (not waited for).  A load brings the
 * group back as Kafka's loadGroup does: Stable with those members, whose
 * heartbeats in that generation are accepted (their session timeouts
 * count from the load), or Empty.  A null value is a tombstone, for an
 * offset (OffsetDelete, offsets.retention.minutes) or for a group
 * (DeleteGroups, a group retention removes): a load deletes what it has
 * loaded of it, so no later leader, and no compaction, brings it back.
 *
 * Invariants:
 *   G1. This broker answers a group's requests only while its partition is
 *       LOADED for the leader epoch the view shows and it still leads it;
 *       LOADING answers COORDINATOR_LOAD_IN_PROGRESS, IDLE and FOLLOWING
 *       NOT_COORDINATOR.
 *   G2. A load's rows reach SQLite through the coordinator's jobs, in log
 *       order, before any commit this broker accepts for those groups
 *       (none is accepted until LOADED), so a later commit overwrites them.
 *   G3. A held wait is on gl.holds and on no list of group_persist.c; it
 *       is freed by hold_finish or gc_log_forget, exactly once.
 *   G4. When a partition's leadership goes, or a load of it starts, its
 *       groups leave memory (Kafka's removeGroupsForPartition: their
 *       waiting requests answered NOT_COORDINATOR; groups being deleted
 *       finish), so a group this broker coordinates is the one its log
 *       says plus what happened here since.
 *   G5. A load is authoritative, as Kafka rebuilds its cache from the log:
 *       its first job (gc_job_clear_partition) deletes, on the sync
 *       worker and before any row of the load, every stored group and
 *       committed offset whose group hashes to the partition, so a row
 *       the log no longer has (a commit this broker appended but that was
 *       truncated away while it followed, a record and its tombstone
 *       compacted away meanwhile) does not survive the load.  A log of
 *       up to GL_JOB_ROWS rows without a group tombstone is replaced in
 *       one transaction; a longer one in several, in log order, all
 *       before the partition is LOADED (G1).  Only the coordinator holds
 *       a group in memory: in cluster mode none is loaded from SQLite at
 *       startup (group_coordinator.c), they come from the log.
 *   G6. A follower's rows of its partition's groups are what its log says
 *       up to the high watermark it knew when it last read (read again
 *       each tick the high watermark has moved): follow_start's first
 *       job clears them as G5's does, then the records go through the
 *       same decoding as a load's (load_record) into jobs, in log order,
 *       and never into memory (G4): a GroupMetadata record becomes the
 *       rows the coordinator's load would store (Stable with its members,
 *       or Empty), a tombstone a delete.  On any doubt it starts over from
 *       the log start: a new leader epoch (the log may be truncated to
 *       the new leader's), a log that ends before what was read, one that
 *       starts after it.  Leading, the load replaces these rows (G5);
 *       leadership gone, following starts over, so the commits this
 *       broker stored but the log lost go too.  The work is on the loop,
 *       a tick and bounded steps (load_step's budget) for the internal
 *       topic only; nothing on the replication path of user data.  Group
 *       rows show the state the log stores (Kafka writes it at a
 *       rebalance's end and when the group empties), not the
 *       coordinator's in-between ones (PreparingRebalance,
 *       CompletingRebalance).  A follower's rows wait in its job and
 *       all following partitions' jobs are submitted together every
 *       GL_FOLLOW_FLUSH_MS (or at GL_JOB_ROWS): SQL lags the log by up
 *       to a second, and the sync worker sees one batch of follower jobs
 *       a second.  Submitted each time a partition had read up to its
 *       high watermark (every tick under commits), they were a stream
 *       of small jobs, each a sync cycle that the coordinator's own
 *       commit jobs waited behind (group_persist.c C6): offset-commit
 *       throughput halved.  Within a job (a follower's or a load's) a
 *       key's later record replaces its row (row_slot), so a job holds
 *       one row per committed partition, however often it committed.
 *   G7. A broker that holds no replica of a partition holds no rows of its
 *       groups: part_clear submits G5's clear once on entering IDLE (at
 *       startup for every such partition, when a reassignment moves its
 *       replica away).
 *   G8. A transactional OffsetCommit record (TxnOffsetCommit's batch,
 *       gc_log_commit_append) is pending for its producer until that
 *       producer's marker follows in the log: COMMIT makes it a row as
 *       any commit, ABORT drops it (group_log_txn.c).  One still open at
 *       the end of a load becomes a pending row, which the marker's
 *       gc_txn_complete completes; a follower keeps it in memory.
 *
 * A static member replacing itself without a rebalance is stored too
 * (Kafka's updateStaticMemberAndRebalance → storeGroup): its JoinGroup is
 * answered once the record with the new member id is replicated
 * (group_join.c); several replacements at once are several records, each
 * of the whole group, each with its own hold.
 *
 * Not (yet) here: waiting for the tombstones of DeleteGroups and retention
 * to be replicated (appended, not waited for; DeleteGroups answers after
 * its SQLite sync).  A commit accepted just before leadership went but
 * submitted (group_persist.c C7's linger) after follow_start's clear
 * writes its row after the follower's: if the log lost it, the row stays
 * until the next start over or a later commit of that partition.
 */
#include "daemon/group/group_int.h"
#include "daemon/md_sync.h"
#include "daemon/replica/replica.h"
#include "daemon/replica/replica_deferred.h"
#include "kp_records.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#define GL_TICK_MS 100                /* leadership checks */
#define GL_STEP_RECORDS 2000          /* records read per loop turn */
#define GL_JOB_ROWS 20000             /* rows per load job */
#define GL_FOLLOW_FLUSH_MS 1000       /* followers' rows reach SQLite at most
                                         this much later (G6) */

enum gl_state { GL_IDLE, GL_FOLLOWING, GL_LOADING, GL_LOADED };

typedef struct gl_part {
    enum gl_state state;
    bool cleared;                     /* IDLE: its rows' clear is submitted (G7) */
    int32_t epoch;                    /* leader epoch loaded or followed for */
    seg_cursor *cur;                  /* LOADING: NULL once read to the end;
                                         FOLLOWING: over [pos, to), NULL between */
    int64_t pos, to;                  /* FOLLOWING: read up to pos */
    gc_job *job;                      /* rows gathered, not submitted */
    uint64_t seq;                     /* the last load job's sync */
    size_t job_rows;                  /* rows in job */
    uint32_t *slots;                  /* job's offset rows by key: index + 1,
                                         0 empty (open addressing) */
    uint32_t nslots, nkeys;
    int64_t records, started_us;
    gc_ltxn txn;                      /* G8: transactional offsets, pending */
} gl_part;

typedef struct gl_hold {
    struct gl_hold *next, *prev;
    gc_wait *w;
    bk_waiter bw;                     /* on wait while held */
    bk_deferred wait;                 /* offsets.commit.timeout.ms */
} gl_hold;

static struct {
    bk_broker *b;
    gl_part *parts;
    int32_t nparts;
    struct event *tick, *step_ev;
    int64_t create_after_ms;
    int64_t follow_flush_us;          /* the followers' jobs' next submission */
    kp_buf batch, key, val;
    kp_arena rd_arena;                /* a GroupMetadataValue's members, read */
    kp_arena wr_arena;                /* and written (a store may run while a
                                         load holds rd_arena's) */
    gl_hold holds;                    /* sentinel (G3) */
} gl;

static const kp_str gl_topic = { GL_TOPIC, (int32_t)sizeof GL_TOPIC - 1 };

/* ---- which partition, who leads it ------------------------------------------ */

/* Java's String.hashCode over the UTF-16 code units of the UTF-8 group id
 * (a malformed byte counts as U+FFFD, as Java's decoder makes it). */
static int32_t java_hash(const char *s, size_t len)
{
    uint32_t h = 0;
    const uint8_t *p = (const uint8_t *)s, *end = p + len;
    while (p < end) {
        uint32_t c = *p++;
        int more = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
        if (c >= 0x80 && (c < 0xC0 || c >= 0xF8)) {
            c = 0xFFFD;
            more = 0;
        } else if (more) {
            c &= 0x3Fu >> more;
            for (int i = 0; i < more; i++) {
                if (p >= end || (*p & 0xC0) != 0x80) {
                    c = 0xFFFD;
                    break;
                }
                c = (c << 6) | (*p++ & 0x3F);
            }
        }
        if (c >= 0x10000) {
            c -= 0x10000;
            h = 31 * h + (0xD800 + (c >> 10));
            h = 31 * h + (0xDC00 + (c & 0x3FF));
        } else {
            h = 31 * h + c;
        }
    }
    return (int32_t)h;
}

int32_t gc_log_partition_in(int32_t npartitions, const char *id, size_t len)
{
    int32_t h = java_hash(id, len);
    int32_t a = h == INT32_MIN ? 0 : h < 0 ? -h : h;      /* Kafka's Utils.abs */
    return a % npartitions;
}

static int32_t partition_for(const bk_topic *t, const char *id, size_t len)
{
    return gc_log_partition_in(t->npartitions, id, len);
}

/* The topic is created once, by whichever broker is asked first, when
 * enough brokers live (Kafka refuses a smaller replication factor for
 * it); a refusal or a lost race is retried a little later. */
static void maybe_create(bk_broker *b)
{
    int64_t now = bk_now_ms();
    if (now < gl.create_after_ms)
        return;
    gl.create_after_ms = now + 2000;
    char err[256];
    int16_t rf = b->cfg->offsets_topic_replication_factor;
    if (view_check_replication(b, rf, err, sizeof err) != KP_NONE)
        return;                       /* not enough brokers yet */
    md_kv kv[] = { { (char *)"cleanup.policy", (char *)"compact" } };
    int rc = view_topic_create(b, GL_TOPIC, b->cfg->offsets_topic_num_partitions, rf, NULL,
                             kv, 1, false, NULL, err, sizeof err);
    if (rc != KP_NONE && rc != KP_TOPIC_ALREADY_EXISTS)
        BK_WARN("creating %s failed (%d): %s; retrying", GL_TOPIC, rc, err);
    else if (rc == KP_NONE)
        BK_INFO("creating %s: %d partitions, replication factor %d", GL_TOPIC,
                b->cfg->offsets_topic_num_partitions, rf);
}

int32_t gc_log_coordinator_of(bk_broker *b, const char *id, size_t len)
{
    bk_topic *t = view_topic_find(b, GL_TOPIC, gl_topic.len);
    if (!t || t->npartitions <= 0) {
        maybe_create(b);
        return -1;
    }
    return view_leader_of(b, t, partition_for(t, id, len));
}

/* ---- loading a partition into SQLite ------------------------------------------- */

static void part_reset(gl_part *gp)
{
    seg_cursor_close(gp->cur);
    gc_ltxn_clear(&gp->txn);
    if (gp->job)
        gc_job_put(gp->job);
    free(gp->slots);
    *gp = (gl_part){ .state = GL_IDLE };
}

/* Resizes the table to the topic's partition count (a re-created topic
 * starts over). */
static int parts_fit(int32_t n)
{
    if (n == gl.nparts)
        return 0;
    for (int32_t i = 0; i < gl.nparts; i++)
        part_reset(&gl.parts[i]);
    free(gl.parts);
    gl.parts = NULL;
    gl.nparts = 0;
    if (n == 0)
        return 0;
    gl.parts = calloc((size_t)n, sizeof *gl.parts);
    if (!gl.parts)
        return -1;
    gl.nparts = n;
    return 0;
}

/* Kafka's removeGroupsForPartition: the groups of partition i leave
 * memory, their waiting requests answered NOT_COORDINATOR (the members
 * look for the coordinator again); a load brings them back as the log
 * has them.  Groups being deleted finish that. */
static void unload_groups(int32_t i)
{
    gc_group **out = gc ? calloc(gc->ngroups + 1, sizeof *out) : NULL;
    if (!out)
        return;
    size_t n = 0;
    for (size_t h = 0; h < gc->hash_size; h++)
        for (gc_group *g = gc->hash[h]; g; g = g->hnext)
            if (g->state != GC_DEAD && gc_log_partition_in(gl.nparts, g->id, strlen(g->id)) == i)
                out[n++] = g;
    for (size_t k = 0; k < n; k++)
        gc_group_unload(out[k]);
    free(out);
}

static void part_dir(char *dir, size_t len, int32_t i);

static void load_start(int32_t i, const bk_pview *v)
{
    gl_part *gp = &gl.parts[i];
    part_reset(gp);
    unload_groups(i);                 /* G4 */
    char dir[4200];
    part_dir(dir, sizeof dir, i);
    seg_cursor_opts o = { .dir = dir, .from = seg_log_start(v->local->log),
                          .to = seg_log_end(v->local->log), .min_ts = INT64_MIN,
                          .control = true };
    /* G5: the first job clears what SQLite has of the partition's groups. */
    if (!(gp->job = gc_job_take())) {
        BK_ERROR("%s-%d: loading offsets: out of memory; retrying", GL_TOPIC, i);
        return;                       /* IDLE: the next tick starts over */
    }
    gc_job_clear_partition(gp->job, i, gl.nparts);
    gp->state = GL_LOADING;
    gp->epoch = v->leader_epoch;
    gp->started_us = bk_mono_us();
    if (o.from < o.to && seg_cursor_open(&o, &gp->cur) != 0)
        gp->cur = NULL;               /* no files: nothing to load */
    BK_INFO("%s-%d led here (epoch %d): loading offsets [%lld, %lld) before "
            "coordinating its groups", GL_TOPIC, i, gp->epoch, (long long)o.from,
            (long long)o.to);
    event_active(gl.step_ev, EV_TIMEOUT, 0);
}

static void job_submit(gl_part *gp)
{
    gp->seq = gc_job_submit(gp->job);  /* G2: ordered with the commits */
    gp->job = NULL;
    gp->job_rows = 0;
    if (gp->nslots > 64 && gp->nslots > 8 * gp->nkeys) {
        free(gp->slots);              /* a small job after a large one: no */
        gp->slots = NULL;             /* clearing of a large table per job */
        gp->nslots = 0;
    } else if (gp->nkeys) {
        memset(gp->slots, 0, gp->nslots * sizeof *gp->slots);
    }
    gp->nkeys = 0;
}

/* A group's tombstone (a GroupMetadataKey with a null value: DeleteGroups)
 * removes the group and the offsets loaded so far: the rows before it go
 * in a job of their own, as a job runs its deletes first. */
static int load_group_tombstone(gl_part *gp, kp_str group)
{
    if (group.len <= 0)
        return 0;
    if (gp->job)
        job_submit(gp);
    size_t index;
    char *id = gc_strndup(group.p, group.len);
    if (!id || !(gp->job = gc_job_take()) || gc_job_delete(gp->job, id, &index) != 0) {
        free(id);
        return -1;
    }
    gc_group *g = gp->state == GL_FOLLOWING ? NULL            /* G4 */
                  : gc_group_find(group.p, (size_t)group.len);
    if (g && g->state != GC_DEAD)
        gc_group_unload(g);           /* loaded earlier in this log */
    free(id);
    job_submit(gp);
    return 0;
}

/* A GroupMetadataValue (v0-3) as decoded (kp_records.h), before anything
 * is built of it.  Its slices point into the record, members into
 * gl.rd_arena: both live until the next record is read. */
typedef struct gl_group_rec {
    int16_t version;
    kp_str protocol_type, protocol, leader;
    int32_t generation, nmembers;
    int64_t state_ts;
    const kp_GroupMetadataValue_MemberMetadata *members;
} gl_group_rec;

typedef struct gl_member_rec {
    kp_str id, instance_id, client_id, client_host, subscription, assignment;
    int32_t rebalance_timeout_ms, session_timeout_ms;
} gl_member_rec;

/* The value v (its INT16 version, then the struct).  false: a version
 * this broker does not read (v4, flexible, is not written by it), or
 * malformed (the generated decoder bounds the member count by the bytes
 * left, so a hostile count is no huge allocation). */
static bool read_group_rec(kp_rd *v, const kp_record *rec, gl_group_rec *h)
{
    kp_GroupMetadataValue m;
    h->version = kp_rd_i16(v);
    if (!kp_rd_ok(v) || h->version < 0 || h->version > 3)
        return false;
    kp_arena_reset(&gl.rd_arena);
    if (kp_dec_GroupMetadataValue(v, h->version, &m, &gl.rd_arena) != 0)
        return false;
    h->protocol_type = m.protocolType;
    h->generation = m.generation;
    h->protocol = m.protocol;
    h->leader = m.leader;
    h->state_ts = h->version >= 2 ? m.currentStateTimestamp : rec->Timestamp;
    h->nmembers = m.members_count;
    h->members = m.members;
    return h->nmembers >= 0;
}

/* Member k of h, with what its version lacks filled in as Kafka's
 * loadGroup does (no rebalance timeout before v1: the session timeout).
 * false: malformed (no member id). */
static bool read_member_rec(const gl_group_rec *h, int32_t k, gl_member_rec *m)
{
    const kp_GroupMetadataValue_MemberMetadata *x = &h->members[k];
    m->id = x->memberId;
    m->instance_id = x->groupInstanceId;          /* null before v3 */
    m->client_id = x->clientId;
    m->client_host = x->clientHost;
    m->rebalance_timeout_ms = h->version >= 1 ? x->rebalanceTimeout : -1;
    m->session_timeout_ms = x->sessionTimeout;
    m->subscription = x->subscription;
    m->assignment = x->assignment;
    if (m->rebalance_timeout_ms < 0)
        m->rebalance_timeout_ms = m->session_timeout_ms;
    return m->id.len > 0;
}

/* Member k of a GroupMetadataValue, alive from now on: its session
 * timer starts over, as Kafka's loadGroup schedules every loaded
 * member's heartbeat expiry.  NULL: a malformed entry or no memory. */
static gc_member *load_member(const gl_group_rec *h, int32_t k, gc_group *g)
{
    gl_member_rec r;
    if (!read_member_rec(h, k, &r))
        return NULL;
    gc_member *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    kp_str cid = r.client_id, host = r.client_host;
    m->next = m->prev = m;
    m->id = gc_strndup(r.id.p, r.id.len);
    m->instance_id = gc_strndup(r.instance_id.p, r.instance_id.len);
    m->client_id = gc_strndup(cid.p ? cid.p : "", cid.len < 0 ? 0 : cid.len);
    m->client_host = gc_strndup(host.p ? host.p : "", host.len < 0 ? 0 : host.len);
    m->protocol_type = gc_strndup(g->protocol_type ? g->protocol_type : "",
                                  g->protocol_type ? (int32_t)strlen(g->protocol_type) : 0);
    m->session_timeout_ms = r.session_timeout_ms;
    m->rebalance_timeout_ms = r.rebalance_timeout_ms;
    int32_t sl = r.subscription.len > 0 ? r.subscription.len : 0;
    int32_t al = r.assignment.len > 0 ? r.assignment.len : 0;
    m->protos = calloc(1, sizeof *m->protos);
    if (m->protos && g->protocol) {   /* the one protocol it was chosen by */
        m->nprotos = 1;
        m->protos[0].name = strdup(g->protocol);
        m->protos[0].meta = malloc((size_t)sl + 1);
        m->protos[0].meta_len = sl;
        if (m->protos[0].meta && sl)
            memcpy(m->protos[0].meta, r.subscription.p, (size_t)sl);
    }
    m->assignment = malloc((size_t)al + 1);
    m->assignment_len = al;
    if (m->assignment && al)
        memcpy(m->assignment, r.assignment.p, (size_t)al);
    m->session_timer = evtimer_new(gl.b->base, gc_session_cb, m);
    if (!m->id || (r.instance_id.len >= 0 && !m->instance_id) || !m->client_id ||
        !m->client_host || !m->protocol_type || !m->protos || !m->assignment ||
        !m->session_timer || (m->nprotos && (!m->protos[0].name || !m->protos[0].meta))) {
        gc_member_free(m);
        return NULL;
    }
    return m;
}

/* A GroupMetadataValue on the coordinator: the group as its last
 * coordinator stored it (Kafka's loadGroup): Stable with its generation,
 * protocol, leader and members (their assignments; their heartbeats are
 * accepted, each member's session timeout counts from now), or Empty
 * without members.  A group loaded earlier in this log is replaced.
 * Memory and its SQLite row (in the part's job, in log order) say the
 * same. */
static int load_group_value(gl_part *gp, kp_str group, const gl_group_rec *h)
{
    gc_group *g = gc_group_find(group.p, (size_t)group.len);
    if (g && g->state == GC_DEAD)
        return 0;                     /* being deleted here */
    if (g)
        gc_group_unload(g);
    if (!(g = gc_group_create(group.p, (size_t)group.len)))
        return -1;
    kp_str ptype = h->protocol_type, proto = h->protocol, leader = h->leader;
    g->protocol_type = ptype.len > 0 ? gc_strndup(ptype.p, ptype.len) : NULL;
    g->protocol = proto.len > 0 ? gc_strndup(proto.p, proto.len) : NULL;
    g->generation = h->generation;
    g->state_changed_at = h->state_ts > 0 ? h->state_ts : bk_now_ms();
    if ((ptype.len > 0 && !g->protocol_type) || (proto.len > 0 && !g->protocol)) {
        gc_group_free(g);
        return -1;
    }
    for (int32_t k = 0; k < h->nmembers; k++) {
        gc_member *m = load_member(h, k, g);
        if (!m) {
            BK_WARN("group %s: its GroupMetadata record in %s has a member that cannot be "
                    "loaded; the group comes back Empty (members rejoin)", g->id, GL_TOPIC);
            while (g->members.next != &g->members)
                gc_remove_member_and_update(g, g->members.next, "not loaded");
            break;
        }
        gc_group_add(g, m);
        gc_touch(m);
        gc_arm_session(m);
    }
    char *lid = leader.len > 0 ? gc_strndup(leader.p, leader.len) : NULL;
    if (lid && gc_member_find(g, lid, strlen(lid)))
        gc_set_leader(g, lid);        /* group_coordinator.c C4: else the first member leads */
    free(lid);
    g->state = g->nmembers > 0 ? GC_STABLE : GC_EMPTY;
    if (!gp->job && !(gp->job = gc_job_take()))
        return -1;
    gp->job_rows++;
    return gc_group_to_job(gp->job, g);
}

static const char *job_str(gc_job *j, kp_str s)
{
    return s.len > 0 ? gc_job_strndup(j, s.p, (size_t)s.len) : NULL;
}

/* One member's row, as gc_group_to_job writes a loaded member.  false:
 * malformed, or no memory. */
static bool follow_member(gc_job *j, const gl_group_rec *h, int32_t k, md_group_member *x)
{
    gl_member_rec r;
    if (!read_member_rec(h, k, &r))
        return false;
    kp_str none = { "", 0 };
    x->member_id = job_str(j, r.id);
    x->instance_id = r.instance_id.len >= 0 ? gc_job_strndup(j, r.instance_id.p,
                                                              (size_t)r.instance_id.len) : NULL;
    x->client_id = gc_job_strndup(j, "", 0);
    x->client_host = x->client_id;
    if (r.client_id.len > 0)
        x->client_id = job_str(j, r.client_id);
    if (r.client_host.len > 0)
        x->client_host = job_str(j, r.client_host);
    x->session_timeout_ms = r.session_timeout_ms;
    x->rebalance_timeout_ms = r.rebalance_timeout_ms;
    kp_str sub = r.subscription.len > 0 ? r.subscription : none;
    kp_str asg = r.assignment.len > 0 ? r.assignment : none;
    x->subscription_len = h->protocol.len > 0 ? sub.len : -1;
    x->subscription = gc_job_blob(j, sub.p, x->subscription_len);
    x->assignment_len = asg.len;
    x->assignment = gc_job_blob(j, asg.p, asg.len);
    return x->member_id && x->client_id && x->client_host &&
           (x->instance_id || r.instance_id.len < 0) &&
           (x->subscription || x->subscription_len < 0) && x->assignment;
}

/* A GroupMetadataValue on a follower (G6): the rows the coordinator's
 * load would store, Stable with the members or Empty, into the part's
 * job only; no group in memory (G4). */
static int follow_group_value(gl_part *gp, kp_str group, const gl_group_rec *h)
{
    if (!gp->job && !(gp->job = gc_job_take()))
        return -1;
    gc_job *j = gp->job;
    md_group *rec = gc_job_group(j, (size_t)h->nmembers);
    if (!rec)
        return -1;
    md_group_member *mm = (md_group_member *)rec->members;
    const char *first = NULL, *leader = NULL;
    for (int32_t k = 0; k < h->nmembers; k++) {
        if (!follow_member(j, h, k, &mm[k])) {
            rec->nmembers = 0;        /* as the load: Empty, the members rejoin */
            first = leader = NULL;
            break;
        }
        if (!first)
            first = mm[k].member_id;
        if (h->leader.len > 0 && (size_t)h->leader.len == strlen(mm[k].member_id) &&
            !memcmp(h->leader.p, mm[k].member_id, (size_t)h->leader.len))
            leader = mm[k].member_id;
    }
    rec->group_id = gc_job_strndup(j, group.p, (size_t)group.len);
    rec->state = gc_state_name(rec->nmembers > 0 ? GC_STABLE : GC_EMPTY);
    rec->protocol_type = job_str(j, h->protocol_type);
    rec->protocol = job_str(j, h->protocol);
    rec->generation = h->generation;
    rec->leader = leader ? leader : first;      /* group_coordinator.c C4: else the first member leads */
    rec->state_changed_at = h->state_ts > 0 ? h->state_ts : bk_now_ms();
    gp->job_rows++;
    return rec->group_id && (rec->protocol_type || h->protocol_type.len <= 0) &&
           (rec->protocol || h->protocol.len <= 0) ? 0 : -1;
}

/* A GroupMetadataValue (v0-3) into memory (coordinator) or only into
 * SQLite (follower).  Records it cannot read are skipped. */
static int group_value(gl_part *gp, kp_str group, const kp_record *rec)
{
    kp_rd v;
    gl_group_rec h;
    kp_rd_init(&v, rec->Value.p, (size_t)rec->Value.len);
    if (!read_group_rec(&v, rec, &h) || group.len <= 0)
        return 0;
    return gp->state == GL_FOLLOWING ? follow_group_value(gp, group, &h)
                                     : load_group_value(gp, group, &h);
}

static uint32_t key_hash(kp_str group, kp_str topic, int32_t partition)
{
    uint32_t h = 2166136261u;         /* FNV-1a */
    for (int32_t k = 0; k < group.len; k++)
        h = (h ^ (uint8_t)group.p[k]) * 16777619u;
    h = (h ^ 0xff) * 16777619u;
    for (int32_t k = 0; k < topic.len; k++)
        h = (h ^ (uint8_t)topic.p[k]) * 16777619u;
    return (h ^ (uint32_t)partition) * 16777619u;
}

static bool row_is(const md_offset *r, kp_str group, kp_str topic, int32_t partition)
{
    return r->partition == partition && r->group_len == group.len &&
           r->topic_len == topic.len && !memcmp(r->group_id, group.p, (size_t)group.len) &&
           !memcmp(r->topic, topic.p, (size_t)topic.len);
}

/* The slot of the job's row for this key: holding its index + 1, or 0
 * where a new row's goes.  NULL: no memory for a larger table. */
static uint32_t *row_slot(gl_part *gp, kp_str group, kp_str topic, int32_t partition)
{
    if (2 * (gp->nkeys + 1) > gp->nslots) {
        uint32_t n = gp->nslots ? 2 * gp->nslots : 64;
        uint32_t *t = calloc(n, sizeof *t);
        if (!t)
            return NULL;
        for (uint32_t k = 0; k < gp->nslots; k++) {
            if (!gp->slots[k])
                continue;
            const md_offset *r = gc_job_row(gp->job, gp->slots[k] - 1);
            kp_str rg = { r->group_id, r->group_len }, rt = { r->topic, r->topic_len };
            uint32_t s = key_hash(rg, rt, r->partition) & (n - 1);
            while (t[s])
                s = (s + 1) & (n - 1);
            t[s] = gp->slots[k];
        }
        free(gp->slots);
        gp->slots = t;
        gp->nslots = n;
    }
    uint32_t s = key_hash(group, topic, partition) & (gp->nslots - 1);
    while (gp->slots[s] && !row_is(gc_job_row(gp->job, gp->slots[s] - 1), group, topic, partition))
        s = (s + 1) & (gp->nslots - 1);
    return &gp->slots[s];
}

/* One offset row into the part's job: o's value, or (o NULL) a
 * tombstone that deletes the row loaded or stored before.  A key already
 * in the job has its row replaced: the job stores the last of the log's
 * records for it, one row however often it was committed.  0, or -1: no
 * memory. */
static int load_offset_row(gl_part *gp, kp_str group, kp_str topic, int32_t partition,
                           const md_offset *o)
{
    if (group.len <= 0 || topic.len <= 0)
        return 0;
    if (!gp->job && !(gp->job = gc_job_take()))
        return -1;
    uint32_t *slot = row_slot(gp, group, topic, partition);
    if (!slot)
        return -1;
    md_offset *row;
    if (*slot) {
        row = gc_job_row(gp->job, *slot - 1);
        md_offset keep = *row;
        *row = o ? *o : (md_offset){ .leader_epoch = -1, .expire_time_ms = -1, .tombstone = true };
        row->group_id = keep.group_id;
        row->topic = keep.topic;
        gp->job_rows++;               /* records, not keys: its metadata copies
                                         bound the job's memory as before */
    } else {
        size_t first;
        if (!(row = gc_job_rows(gp->job, 1, &first)))
            return -1;
        *row = o ? *o : (md_offset){ .leader_epoch = -1, .expire_time_ms = -1, .tombstone = true };
        row->group_id = gc_job_strndup(gp->job, group.p, (size_t)group.len);
        row->topic = gc_job_strndup(gp->job, topic.p, (size_t)topic.len);
        if (!row->group_id || !row->topic)
            return -1;                /* part_step drops the job */
        *slot = (uint32_t)first + 1;
        gp->nkeys++;
        gp->job_rows++;
    }
    row->group_len = group.len;
    row->topic_len = topic.len;
    row->partition = partition;
    if (o && o->metadata)
        row->metadata = gc_job_strndup(gp->job, o->metadata, (size_t)o->metadata_len);
    if (o && o->metadata && !row->metadata)
        return -1;
    gp->records++;
    return 0;
}

/* A committed transaction's offset (G8) into the part's job. */
static int emit_row(void *arg, const md_offset *o)
{
    kp_str group = { o->group_id, o->group_len }, topic = { o->topic, o->topic_len };
    return load_offset_row(arg, group, topic, o->partition, o);
}

/* One OffsetCommit or GroupMetadata record of batch h into the part's
 * job, or a tombstone of either; a transaction's pending or its marker
 * (G8).  0, or -1: no memory.  Other records (unknown versions) are
 * skipped. */
static int load_record(gl_part *gp, const kp_record *rec, const kp_batch *h)
{
    if (h->Attributes & KP_ATTR_CONTROL)
        return gc_ltxn_marker(&gp->txn, h, rec, emit_row, gp);
    if (rec->Key.len < 2)
        return 0;
    kp_rd k;
    kp_rd_init(&k, rec->Key.p, (size_t)rec->Key.len);
    int16_t kv = kp_rd_i16(&k);
    if (kv == KP_RECORD_TYPE_GroupMetadataKey) {
        kp_GroupMetadataKey gk;
        if (kp_dec_GroupMetadataKey(&k, 0, &gk, NULL) != 0)
            return 0;
        return rec->Value.len < 0 ? load_group_tombstone(gp, gk.group)
                                  : group_value(gp, gk.group, rec);
    }
    /* Key version 0 is the older form of the same OffsetCommitKey. */
    if (kv != 0 && kv != KP_RECORD_TYPE_OffsetCommitKey)
        return 0;
    kp_OffsetCommitKey ok;
    if (kp_dec_OffsetCommitKey(&k, 0, &ok, NULL) != 0)
        return 0;
    if (rec->Value.len < 0)           /* OffsetDelete, retention: the row goes */
        return load_offset_row(gp, ok.group, ok.topic, ok.partition, NULL);
    kp_rd v;
    kp_rd_init(&v, rec->Value.p, (size_t)rec->Value.len);
    int16_t vv = kp_rd_i16(&v);
    kp_OffsetCommitValue ov;
    if (!kp_rd_ok(&v) || kp_dec_OffsetCommitValue(&v, vv, &ov, NULL) != 0)
        return 0;                     /* a version not known (KP_E_VERSION), or malformed */
    md_offset o = { .offset = ov.offset, .leader_epoch = ov.leaderEpoch,
                    .commit_time_ms = ov.commitTimestamp,
                    .expire_time_ms = ov.expireTimestamp };   /* -1 but in v1 */
    kp_str meta = ov.metadata;
    if (meta.len > 0) {
        o.metadata = meta.p;          /* copied into the job */
        o.metadata_len = meta.len;
    }
    if ((h->Attributes & KP_ATTR_TRANSACTIONAL) && h->ProducerId >= 0)
        return gc_ltxn_add(&gp->txn, h->ProducerId, h->ProducerEpoch, ok.group, ok.topic,
                           ok.partition, &o);
    return load_offset_row(gp, ok.group, ok.topic, ok.partition, &o);
}

static void load_check_done(int32_t i);

static void part_dir(char *dir, size_t len, int32_t i)
{
    snprintf(dir, len, "%s/%s-%d", gl.b->data_dir, GL_TOPIC, i);
}

/* FOLLOWING (G6): a cursor over what is replicated here and not read yet,
 * [pos, the high watermark this follower knows), so no row shows a
 * record that a new leader could cut off.  0 (gp->cur NULL: nothing new),
 * or an error of seg_cursor_open. */
static int follow_open(int32_t i, gl_part *gp)
{
    const bk_pview *v = view_partition(gl.b, gl_topic, i);
    if (gp->cur || !v || !v->local || !v->local->log)
        return 0;                     /* no replica: the next tick decides */
    int64_t end = seg_log_end(v->local->log), to = v->local->high_watermark;
    if (to > end)
        to = end;
    if (to <= gp->pos)
        return 0;
    char dir[4200];
    part_dir(dir, sizeof dir, i);
    seg_cursor_opts o = { .dir = dir, .from = gp->pos, .to = to, .min_ts = INT64_MIN,
                          .control = true };
    /* From where the log says, not the .index file: the active segment's
     * file lags by up to SEG_IDX_TAIL bytes of entries, so a cursor opened
     * each tick walked up to ~2 MiB of batch headers with a pread each
     * (36 µs a record under commits, growing until the next spill). */
    if (seg_locate(v->local->log, gp->pos, &o.hint_base, &o.hint_pos, &o.hint_ino) != 0)
        o.hint_pos = 0;
    int rc = seg_cursor_open(&o, &gp->cur);
    if (rc != 0) {
        gp->cur = NULL;
        return rc;
    }
    gp->to = to;
    return 0;
}

/* Up to *budget records of partition i, loading or following, into its
 * job; true while its cursor has more. */
static bool part_step(int32_t i, int *budget)
{
    gl_part *gp = &gl.parts[i];
    bool follows = gp->state == GL_FOLLOWING;
    int rc = follows ? follow_open(i, gp) : 0;
    kp_record rec;
    if (rc == 0)
        rc = 1;
    while (rc == 1 && gp->cur && *budget > 0 && (rc = seg_cursor_next(gp->cur, &rec)) == 1) {
        --*budget;
        if (load_record(gp, &rec, seg_cursor_batch(gp->cur)) != 0)
            rc = SEG_E_NOMEM;
    }
    bool load_end = !follows && rc >= 0 && (rc == 0 || !gp->cur);
    if (load_end && gc_ltxn_to_job(&gp->txn, &gp->job) != 0)
        rc = SEG_E_NOMEM;             /* G8: what is still open stays pending */
    if (rc < 0) {
        BK_ERROR("%s-%d: %s offsets failed (%d); starting over", GL_TOPIC, i,
                 follows ? "following" : "loading", rc);
        part_reset(gp);               /* IDLE: the next tick starts over */
        return false;
    }
    /* A load submits what it read as it goes; a follower at most every
     * GL_FOLLOW_FLUSH_MS (gl_tick), as a larger job (G6). */
    if (load_end)
        gc_ltxn_clear(&gp->txn);      /* the coordinator's pending rows have them */
    if (gp->job && (gp->job_rows >= GL_JOB_ROWS || load_end))
        job_submit(gp);
    if (rc == 0 && gp->cur) {
        seg_cursor_close(gp->cur);
        gp->cur = NULL;
        gp->pos = gp->to;
    }
    if (gp->cur)
        return true;
    load_check_done(i);
    return false;
}

/* Reads up to GL_STEP_RECORDS records of the loading and following
 * partitions per loop turn, so a large log never holds the loop; re-arms
 * itself while any remains. */
static void load_step(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what; (void)arg;
    int budget = GL_STEP_RECORDS;
    bool more = false;
    for (int32_t i = 0; i < gl.nparts; i++) {
        gl_part *gp = &gl.parts[i];
        if (gp->state == GL_LOADING || gp->state == GL_FOLLOWING)
            more |= part_step(i, &budget);
    }
    if (more)
        event_active(gl.step_ev, EV_TIMEOUT, 0);
}

/* LOADING → LOADED once read whole and its last job is durable. */
static void load_check_done(int32_t i)
{
    gl_part *gp = &gl.parts[i];
    if (gp->state != GL_LOADING || gp->cur || gp->job || gp->seq > bk_mdsync_durable())
        return;
    gp->state = GL_LOADED;
    BK_INFO("%s-%d loaded: %lld offset commits in %.1f ms; coordinating its groups",
            GL_TOPIC, i, (long long)gp->records, (bk_mono_us() - gp->started_us) / 1000.0);
}

/* G7: no replica of partition i here; its rows go, once. */
static void part_clear(int32_t i)
{
    gl_part *gp = &gl.parts[i];
    if (gp->state == GL_IDLE && gp->cleared)
        return;
    if (gp->state == GL_FOLLOWING)
        BK_INFO("%s-%d no longer replicated here: its groups' rows go", GL_TOPIC, i);
    part_reset(gp);
    gc_job *j = gc_job_take();
    if (!j)
        return;                       /* the next tick tries again */
    gc_job_clear_partition(j, i, gl.nparts);
    gc_job_submit(j);
    gp->cleared = true;
}

/* G6: a replica here follows its log from the start, after the clear. */
static void follow_start(int32_t i, const bk_pview *v)
{
    gl_part *gp = &gl.parts[i];
    part_reset(gp);
    if (!(gp->job = gc_job_take()))
        return;                       /* IDLE: the next tick starts over */
    gc_job_clear_partition(gp->job, i, gl.nparts);
    gp->state = GL_FOLLOWING;
    gp->epoch = v->leader_epoch;
    gp->pos = seg_log_start(v->local->log);
    BK_INFO("%s-%d followed here (epoch %d): its groups' rows follow the log from %lld",
            GL_TOPIC, i, gp->epoch, (long long)gp->pos);
    event_active(gl.step_ev, EV_TIMEOUT, 0);
}

/* Partition i is not led here: its rows follow its log while a replica is
 * here (G6), else they go (G7).  Any doubt starts over from the log start:
 * a new leader epoch, a log that now ends before what was read (cut off)
 * or starts after it. */
static void follow_sync(int32_t i, const bk_pview *v)
{
    gl_part *gp = &gl.parts[i];
    seg_log *log = v && v->local ? v->local->log : NULL;
    if (!log) {
        part_clear(i);
        return;
    }
    if (gp->state != GL_FOLLOWING || gp->epoch != v->leader_epoch ||
        seg_log_end(log) < (gp->cur ? gp->to : gp->pos) || seg_log_start(log) > gp->pos)
        follow_start(i, v);
    else if (!gp->cur && v->local->high_watermark > gp->pos)
        event_active(gl.step_ev, EV_TIMEOUT, 0);
}

/* Brings partition i's state in line with the view: starts a load when
 * this broker leads it, drops it when not (G1) and follows it instead.
 * The view partition, or NULL when not led here. */
static const bk_pview *part_sync(bk_broker *b, int32_t i)
{
    bk_partition *p;
    const bk_pview *v = view_partition(b, gl_topic, i);
    bool leads = view_leader_replica(b, gl_topic, i, &p) == KP_NONE && v && p->log;
    gl_part *gp = &gl.parts[i];
    bool coordinates = gp->state == GL_LOADING || gp->state == GL_LOADED;
    if (!leads) {
        if (coordinates) {
            BK_INFO("%s-%d no longer led here: its groups are coordinated elsewhere",
                    GL_TOPIC, i);
            part_reset(gp);
            unload_groups(i);         /* G4 */
        }
        follow_sync(i, v);
        return NULL;
    }
    if (!coordinates || gp->epoch != v->leader_epoch)
        load_start(i, v);
    load_check_done(i);
    return v;
}

static void gl_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what; (void)arg;
    bk_broker *b = gl.b;
    bk_topic *t = view_topic_find(b, GL_TOPIC, gl_topic.len);
    if (parts_fit(t ? t->npartitions : 0) != 0)
        return;
    for (int32_t i = 0; i < gl.nparts; i++)
        part_sync(b, i);
    int64_t now = bk_mono_us();
    if (now < gl.follow_flush_us)
        return;
    gl.follow_flush_us = now + GL_FOLLOW_FLUSH_MS * 1000;
    for (int32_t i = 0; i < gl.nparts; i++)
        if (gl.parts[i].state == GL_FOLLOWING && gl.parts[i].job)
            job_submit(&gl.parts[i]);
}

int16_t gc_log_coordinator_error(bk_broker *b, const char *id, size_t len)
{
    bk_topic *t = view_topic_find(b, GL_TOPIC, gl_topic.len);
    if (!t || t->npartitions <= 0) {
        maybe_create(b);
        return KP_COORDINATOR_NOT_AVAILABLE;
    }
    int32_t i = partition_for(t, id, len);
    if (view_leader_of(b, t, i) != b->cfg->broker_id)
        return KP_NOT_COORDINATOR;
    if (parts_fit(t->npartitions) != 0)
        return KP_COORDINATOR_NOT_AVAILABLE;
    if (!part_sync(b, i))
        return KP_NOT_COORDINATOR;
    return gl.parts[i].state == GL_LOADED ? KP_NONE : KP_COORDINATOR_LOAD_IN_PROGRESS;
}

/* ---- commits: append, then hold until replicated --------------------------------- */

/* Finishes bb (n records, built from gl.key / gl.val into gl.batch) and
 * appends it to p, led here, in its leader epoch.  0, SEG_E_TOOBIG, or
 * another error (logged by the caller). */
static int append_batch(bk_broker *b, bk_partition *p, kp_batch_builder *bb, int64_t n,
                        int64_t now)
{
    int64_t base;
    if (gl.key.err || gl.val.err || kp_bb_finish(bb) < 0 || gl.batch.err)
        return SEG_E_NOMEM;
    kp_batch_set_leader_epoch(gl.batch.data, p->leader_epoch);
    int rc = seg_append(p->log, gl.batch.data, gl.batch.len, now, &base);
    if (rc != 0)
        return rc;
    /* replica_producers.c P1: a TxnOffsetCommit's batch opens (or
     * continues) its producer's transaction here; others carry no
     * producer and are skipped. */
    if (p->producers && replica_pstate_record(p->producers, gl.batch.data, gl.batch.len, now))
        BK_WARN("%s-%d: producer state not recorded for an offset commit (out of memory)",
                GL_TOPIC, p->id);
    p->bytes_in += gl.batch.len;
    replica_partition_appended(b, p, n);
    return 0;
}

/* A string that is never null on the wire: NULL is empty. */
static kp_str nn_str(const char *s)
{
    return kp_str_cstr(s ? s : "");
}

/* OffsetCommitKey, under Kafka's key version 1.  An encoding error
 * latches on k (append_batch checks it). */
static void wr_key(kp_buf *k, const md_offset *o)
{
    kp_OffsetCommitKey key = {
        .group = { o->group_id, o->group_len },
        .topic = { o->topic, o->topic_len },
        .partition = o->partition,
    };
    kp_buf_reset(k);
    kp_wr_i16(k, KP_RECORD_TYPE_OffsetCommitKey);
    kp_enc_OffsetCommitKey(k, 0, &key);
}

/* OffsetCommitValue v3, or v1 when the commit carries an expiry (the
 * only version with one). */
static void wr_value(kp_buf *v, const md_offset *o)
{
    int16_t version = o->expire_time_ms >= 0 ? 1 : 3;
    kp_OffsetCommitValue val = {
        .offset = o->offset,
        .leaderEpoch = o->leader_epoch,
        .metadata = { o->metadata ? o->metadata : "",
                      o->metadata && o->metadata_len > 0 ? o->metadata_len : 0 },
        .commitTimestamp = o->commit_time_ms,
        .expireTimestamp = o->expire_time_ms,
    };
    kp_buf_reset(v);
    kp_wr_i16(v, version);
    kp_enc_OffsetCommitValue(v, version, &val);
}

/* The group's partition, led here and writable: KP_NONE with *i and *p
 * set, or the error Kafka's appendForGroup maps the refusal to. */
static int16_t append_target(bk_broker *b, const char *id, size_t len, int32_t *i,
                             bk_partition **p)
{
    bk_topic *t = view_topic_find(b, GL_TOPIC, gl_topic.len);
    if (!b->cl)
        return KP_NOT_COORDINATOR;               /* shutting down */
    if (!t || t->npartitions <= 0)
        return KP_COORDINATOR_NOT_AVAILABLE;
    *i = partition_for(t, id, len);
    if (view_leader_replica(b, gl_topic, *i, p) != KP_NONE)
        return KP_NOT_COORDINATOR;
    if (repl_isr_size(*p) < (*p)->topic->cfg.min_insync_replicas)
        return KP_COORDINATOR_NOT_AVAILABLE;     /* Kafka's NOT_ENOUGH_REPLICAS */
    if (seg_failed((*p)->log))
        return KP_NOT_COORDINATOR;               /* Kafka's KAFKA_STORAGE_ERROR */
    return KP_NONE;
}

/* What a wait for the record just appended to p waits for. */
static void note_end(gc_wait *w, int32_t i, const bk_partition *p)
{
    w->log_partition = i;
    w->log_epoch = p->leader_epoch;
    w->log_end = seg_log_end(p->log);
}

int16_t gc_log_commit_append(bk_broker *b, gc_wait *w)
{
    if (w->noffs == 0)
        return KP_NONE;
    int32_t i;
    bk_partition *p;
    int16_t terr = append_target(b, w->offs[0].group_id, (size_t)w->offs[0].group_len, &i, &p);
    if (terr)
        return terr;
    const md_offset *f = &w->offs[0];             /* each entry says the same */
    const bk_producer *e = f->txn && p->producers ? replica_pstate_find(p->producers,
                                                                        f->producer_id) : NULL;
    if (e && f->producer_epoch < e->epoch)
        return KP_INVALID_PRODUCER_EPOCH;     /* fenced: a newer epoch wrote here */
    int64_t now = bk_now_ms();
    kp_batch_builder bb;
    kp_buf_reset(&gl.batch);
    kp_bb_init(&bb, &gl.batch, KP_CODEC_NONE);
    if (f->txn) {                     /* Kafka's storeOffsets: BaseSequence 0 */
        kp_bb_set_producer(&bb, f->producer_id, f->producer_epoch, 0);
        bb.extra_attrs |= KP_ATTR_TRANSACTIONAL;
    }
    int64_t n = 0;
    for (size_t k = 0; k < w->noffs; k++) {
        const md_offset *o = &w->offs[k];
        if (o->result != KP_NONE)
            continue;
        wr_key(&gl.key, o);
        if (o->tombstone) {           /* OffsetDelete: Kafka's null value */
            kp_bb_add(&bb, now, gl.key.data, (int32_t)gl.key.len, NULL, 0, NULL, 0);
        } else {
            wr_value(&gl.val, o);
            kp_bb_add(&bb, now, gl.key.data, (int32_t)gl.key.len, gl.val.data,
                      (int32_t)gl.val.len, NULL, 0);
        }
        n++;
    }
    if (n == 0) {
        kp_bb_free(&bb);
        return KP_NONE;
    }
    int rc = append_batch(b, p, &bb, n, now);
    if (rc == SEG_E_TOOBIG)
        return KP_INVALID_COMMIT_OFFSET_SIZE;    /* Kafka's mapping */
    if (rc == SEG_E_NOMEM)
        return KP_COORDINATOR_NOT_AVAILABLE;
    if (rc != 0) {
        BK_ERROR("%s-%d: appending an offset commit failed (%d)", GL_TOPIC, i, rc);
        return KP_NOT_COORDINATOR;
    }
    note_end(w, i, p);
    return KP_NONE;
}


/* A group's state as Kafka's GroupMetadataValue v3 (GroupMetadataManager
 * storeGroup): written where Kafka writes it, when the leader's SyncGroup
 * completes a rebalance (the answers wait for it, group_join.c) and when
 * a rebalance leaves the group Empty (group_coordinator.c, not waited for).
 *
 *     key: int16 2 | group
 *     value: int16 3 | protocolType | generation | protocol? | leader? |
 *            currentStateTimestamp | members: int32 n, each memberId |
 *            groupInstanceId? | clientId | clientHost | rebalanceTimeout |
 *            sessionTimeout | subscription (bytes) | assignment (bytes)   */
int16_t gc_log_group_store(bk_broker *b, const gc_group *g, gc_wait *w)
{
    size_t len = strlen(g->id);
    int32_t i;
    bk_partition *p;
    int16_t err = append_target(b, g->id, len, &i, &p);
    if (err)
        return err;
    kp_buf *k = &gl.key, *v = &gl.val;
    kp_GroupMetadataKey key = { .group = { g->id, (int32_t)len } };
    kp_buf_reset(k);
    kp_wr_i16(k, KP_RECORD_TYPE_GroupMetadataKey);
    kp_enc_GroupMetadataKey(k, 0, &key);
    kp_GroupMetadataValue val = {
        .protocolType = nn_str(g->protocol_type),
        .generation = g->generation,
        .protocol = kp_str_cstr(g->protocol),
        .leader = kp_str_cstr(g->leader),
        .currentStateTimestamp = g->state_changed_at,
    };
    kp_arena_reset(&gl.wr_arena);
    val.members = kp_arena_alloc(&gl.wr_arena, (size_t)g->nmembers * sizeof *val.members + 1);
    if (!val.members)
        return KP_COORDINATOR_NOT_AVAILABLE;
    for (const gc_member *x = g->members.next; x != &g->members && val.members_count <
         g->nmembers; x = x->next) {
        const gc_proto *sub = gc_member_proto(x, g->protocol);
        val.members[val.members_count++] = (kp_GroupMetadataValue_MemberMetadata){
            .memberId = nn_str(x->id),
            .groupInstanceId = kp_str_cstr(x->instance_id),
            .clientId = nn_str(x->client_id),
            .clientHost = nn_str(x->client_host),
            .rebalanceTimeout = x->rebalance_timeout_ms,
            .sessionTimeout = x->session_timeout_ms,
            /* bytes, not nullable: none is empty */
            .subscription = sub && sub->meta ? (kp_str){ (const char *)sub->meta,
                                                         sub->meta_len } : nn_str(NULL),
            .assignment = x->assignment ? (kp_str){ (const char *)x->assignment,
                                                    x->assignment_len } : nn_str(NULL),
        };
    }
    kp_buf_reset(v);
    kp_wr_i16(v, 3);
    kp_enc_GroupMetadataValue(v, 3, &val);
    int64_t now = bk_now_ms();
    kp_batch_builder bb;
    kp_buf_reset(&gl.batch);
    kp_bb_init(&bb, &gl.batch, KP_CODEC_NONE);
    kp_bb_add(&bb, now, k->data, (int32_t)k->len, v->data, (int32_t)v->len, NULL, 0);
    int rc = append_batch(b, p, &bb, 1, now);
    if (rc != 0) {
        BK_ERROR("group %s: its GroupMetadata record was not appended to %s-%d (%d)",
                 g->id, GL_TOPIC, i, rc);
        /* Kafka's storeGroup: a record too large is UNKNOWN_SERVER_ERROR */
        return rc == SEG_E_TOOBIG ? KP_UNKNOWN_SERVER_ERROR
               : rc == SEG_E_NOMEM ? KP_COORDINATOR_NOT_AVAILABLE : KP_NOT_COORDINATOR;
    }
    if (w)
        note_end(w, i, p);
    return KP_NONE;
}

/* Tombstones for expired offsets (retention, group_offset_commit.c): a null
 * value for each OffsetCommitKey, in one batch per group, so that a later
 * leader of the partition (and compaction) does not bring them back.  Not
 * waited for, as in Kafka (cleanupGroupMetadata). */
void gc_log_offsets_tombstone(bk_broker *b, const md_offset *offs, size_t n)
{
    for (size_t k = 0, end; k < n; k = end) {
        for (end = k + 1; end < n && offs[end].group_len == offs[k].group_len &&
             !memcmp(offs[end].group_id, offs[k].group_id, (size_t)offs[k].group_len); end++)
            ;
        int32_t i;
        bk_partition *p;
        if (append_target(b, offs[k].group_id, (size_t)offs[k].group_len, &i, &p))
            continue;                 /* not led here: its leader expires them */
        int64_t now = bk_now_ms();
        kp_batch_builder bb;
        kp_buf_reset(&gl.batch);
        kp_bb_init(&bb, &gl.batch, KP_CODEC_NONE);
        for (size_t x = k; x < end; x++) {
            wr_key(&gl.key, &offs[x]);
            kp_bb_add(&bb, now, gl.key.data, (int32_t)gl.key.len, NULL, 0, NULL, 0);
        }
        kp_buf_reset(&gl.val);
        if (append_batch(b, p, &bb, (int64_t)(end - k), now) != 0)
            BK_ERROR("group %.*s: tombstones of expired offsets were not appended to %s-%d",
                     (int)offs[k].group_len, offs[k].group_id, GL_TOPIC, i);
    }
}

/* DeleteGroups in cluster mode: Kafka's tombstones (a null value for each
 * of the group's offsets, then for its GroupMetadataKey, version 2), so a
 * later leader of the partition does not load the group back.  Appended,
 * not waited for: the delete answers after its SQLite sync, as before. */
void gc_log_group_tombstone(bk_broker *b, const char *id)
{
    bk_topic *t = view_topic_find(b, GL_TOPIC, gl_topic.len);
    size_t len = strlen(id);
    if (!b->cl || !t || t->npartitions <= 0)
        return;
    int32_t i = partition_for(t, id, len);
    bk_partition *p;
    if (view_leader_replica(b, gl_topic, i, &p) != KP_NONE || seg_failed(p->log))
        return;
    md_committed *rows = NULL;
    size_t n = 0;
    if (md_offset_list(b->db, id, len, &rows, &n) != 0)
        n = 0;
    int64_t now = bk_now_ms();
    kp_batch_builder bb;
    kp_buf_reset(&gl.batch);
    kp_bb_init(&bb, &gl.batch, KP_CODEC_NONE);
    for (size_t k = 0; k < n; k++) {
        md_offset o = { .group_id = id, .group_len = (int32_t)len, .topic = rows[k].topic,
                        .topic_len = (int32_t)strlen(rows[k].topic),
                        .partition = rows[k].partition };
        wr_key(&gl.key, &o);
        kp_bb_add(&bb, now, gl.key.data, (int32_t)gl.key.len, NULL, 0, NULL, 0);
    }
    md_committed_free(rows, n);
    kp_buf_reset(&gl.key);
    kp_wr_i16(&gl.key, 2);            /* GroupMetadataKey */
    kp_wr_string(&gl.key, id, (int32_t)len);
    kp_bb_add(&bb, now, gl.key.data, (int32_t)gl.key.len, NULL, 0, NULL, 0);
    kp_buf_reset(&gl.val);
    if (append_batch(b, p, &bb, (int64_t)n + 1, now) != 0)
        BK_ERROR("group %s: its tombstones were not appended to %s-%d", id, GL_TOPIC, i);
}

static void hold_free(gl_hold *h)
{
    replica_deferred_free(&h->wait);
    h->prev->next = h->next;
    h->next->prev = h->prev;
    h->w->hold = NULL;
    free(h);
}

static void fail_entries(gc_wait *w, int16_t err)
{
    for (size_t k = 0; k < w->noffs; k++)
        if (w->offs[k].result == KP_NONE)
            w->offs[k].result = err;
}

/* 0: replicated; 1: still to wait (watching the partition if watch);
 * else the error for its entries. */
static int16_t hold_check(gl_hold *h, bool watch)
{
    gc_wait *w = h->w;
    bk_partition *p;
    /* Led here since the append: else the record may have been cut off
     * when this broker followed in between. */
    if (view_leader_replica(gl.b, gl_topic, w->log_partition, &p) != KP_NONE ||
        p->leader_epoch != w->log_epoch)
        return KP_NOT_COORDINATOR;
    if (p->high_watermark >= w->log_end)
        return 0;
    if (watch)
        replica_deferred_watch(&h->wait, p, &h->bw, false);
    return 1;
}

/* Answers a held commit (G3), as finish_synced would have. */
static void hold_finish(gl_hold *h, int16_t err)
{
    gc_wait *w = h->w;
    hold_free(h);
    if (err)
        fail_entries(w, err);
    bk_group_done_fn done = w->done;
    void *arg = w->done_arg;
    bool group = w->noffs == 0;       /* a group's record (gc_log_group_hold) */
    free(w);
    if (done)
        done(arg, group ? err : 0);
}

/* The loop turn after the partition moved (its waiter unlinked). */
static void hold_recheck(void *arg)
{
    gl_hold *h = arg;
    int16_t e = hold_check(h, true);
    if (e != 1)
        hold_finish(h, e);
}

static void hold_timeout(void *arg)
{
    gl_hold *h = arg;
    int16_t e = hold_check(h, false);
    hold_finish(h, e == 1 ? KP_REQUEST_TIMED_OUT : e);
}

/* Holds w until the high watermark covers w->log_end (G3): 1 while held,
 * else 0 (replicated already) or the error of the replication. */
static int16_t hold_start(gc_wait *w)
{
    gl_hold *h = calloc(1, sizeof *h);
    if (!h)
        return KP_COORDINATOR_NOT_AVAILABLE;
    h->w = w;
    replica_deferred_init(&h->wait, hold_recheck, hold_timeout, h);
    h->next = gl.holds.next;
    h->prev = &gl.holds;
    gl.holds.next->prev = h;
    gl.holds.next = h;
    w->hold = h;
    int16_t e = hold_check(h, true);
    if (e != 1) {                     /* replicated already: the usual case */
        hold_free(h);
        return e;
    }
    if (replica_deferred_arm(&h->wait, gl.b->base, gl.b->cfg->offsets_commit_timeout_ms) != 0) {
        hold_free(h);
        return KP_COORDINATOR_NOT_AVAILABLE;
    }
    return 1;
}

bool gc_log_commit_hold(gc_wait *w)
{
    if (w->log_end <= 0 || !w->done)
        return false;
    bool any = false;
    for (size_t k = 0; k < w->noffs && !any; k++)
        any = w->offs[k].result == KP_NONE;
    if (!any)
        return false;
    int16_t e = hold_start(w);
    if (e != 0 && e != 1)
        fail_entries(w, e);
    return e == 1;
}

int16_t gc_log_group_hold(gc_wait *w)
{
    return hold_start(w);
}

bool gc_log_loading(int32_t i)
{
    return i >= 0 && i < gl.nparts && gl.parts[i].state == GL_LOADING;
}

void gc_log_forget(gc_wait *w)
{
    if (w && w->hold)
        hold_free(w->hold);
}

/* ---- start, stop ------------------------------------------------------------------ */

int gc_log_start(bk_broker *b)
{
    gl.b = b;
    gl.holds.next = gl.holds.prev = &gl.holds;
    kp_buf_init(&gl.batch);
    kp_buf_init(&gl.key);
    kp_buf_init(&gl.val);
    kp_arena_init(&gl.rd_arena, 0);
    kp_arena_init(&gl.wr_arena, 0);
    gl.tick = event_new(b->base, -1, EV_PERSIST, gl_tick, NULL);
    gl.step_ev = event_new(b->base, -1, 0, load_step, NULL);
    struct timeval tv;
    gc_tv_ms(&tv, GL_TICK_MS);
    if (!gl.tick || !gl.step_ev || event_add(gl.tick, &tv) != 0) {
        BK_ERROR("group coordinator: out of memory");
        return -1;
    }
    return 0;
}

void gc_log_stop(void)
{
    if (!gl.b)
        return;
    while (gl.holds.next != &gl.holds) {   /* their callers have gone (shutdown) */
        gc_wait *w = gl.holds.next->w;
        hold_free(gl.holds.next);
        free(w);
    }
    parts_fit(0);
    if (gl.tick)
        event_free(gl.tick);
    if (gl.step_ev)
        event_free(gl.step_ev);
    kp_buf_free(&gl.batch);
    kp_buf_free(&gl.key);
    kp_buf_free(&gl.val);
    kp_arena_free(&gl.rd_arena);
    kp_arena_free(&gl.wr_arena);
    memset(&gl, 0, sizeof gl);
}
