/*
 * The topic registry: the in-memory view of topics and their open
 * partition logs, and the one path by which topics change.
 *
 * Facts live in SQLite (metadata/); this registry mirrors them for the
 * data path.  Every change goes: validate + write facts (md_*) → update the
 * registry → create/remove partition directories.  In cluster mode the
 * first step will go through ZooKeeper and the rest will follow its watch;
 * handlers and the SQL surface call only bk_topic_*.
 *
 * Invariants:
 *   1. A topic is in the hash iff its row exists in SQLite and every
 *      partition log is open.
 *   2. Nobody keeps a bk_partition pointer across a return to the event
 *      loop without a way to be told of deletion: deletion wakes the
 *      partition's waiters after unlinking the topic, and woken code looks
 *      partitions up again by name.
 *   3. Partition directories are <log.dirs>/<topic>-<partition>, as Kafka's.
 */
#include "daemon/broker.h"
#include "daemon/md_sync.h"
#include "daemon/producer_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t name_hash(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ULL;          /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static void hash_insert(bk_broker *b, bk_topic *t)
{
    if (b->ntopics + 1 > b->topic_hash_size / 2) {
        size_t nsize = b->topic_hash_size ? b->topic_hash_size * 2 : 64;
        bk_topic **nh = calloc(nsize, sizeof *nh);
        if (!nh)
            abort();                              /* registry must stay whole */
        for (size_t i = 0; i < b->topic_hash_size; i++)
            for (bk_topic *x = b->topic_hash[i], *next; x; x = next) {
                next = x->hnext;
                size_t slot = name_hash(x->name, strlen(x->name)) & (nsize - 1);
                x->hnext = nh[slot];
                nh[slot] = x;
            }
        free(b->topic_hash);
        b->topic_hash = nh;
        b->topic_hash_size = nsize;
    }
    size_t slot = name_hash(t->name, strlen(t->name)) & (b->topic_hash_size - 1);
    t->hnext = b->topic_hash[slot];
    b->topic_hash[slot] = t;
    b->ntopics++;
}

static void hash_remove(bk_broker *b, bk_topic *t)
{
    size_t slot = name_hash(t->name, strlen(t->name)) & (b->topic_hash_size - 1);
    for (bk_topic **pp = &b->topic_hash[slot]; *pp; pp = &(*pp)->hnext)
        if (*pp == t) {
            *pp = t->hnext;
            b->ntopics--;
            return;
        }
}

bk_topic *bk_topic_find(bk_broker *b, const char *name, size_t len)
{
    if (!b->topic_hash_size)
        return NULL;
    size_t slot = name_hash(name, len) & (b->topic_hash_size - 1);
    for (bk_topic *t = b->topic_hash[slot]; t; t = t->hnext)
        if (strlen(t->name) == len && !memcmp(t->name, name, len))
            return t;
    return NULL;
}

bk_partition *bk_partition_find(bk_broker *b, kp_str topic, int32_t partition)
{
    if (topic.len <= 0)
        return NULL;
    bk_topic *t = bk_topic_find(b, topic.p, (size_t)topic.len);
    if (!t || partition < 0 || partition >= t->npartitions)
        return NULL;
    return t->partitions[partition];
}

void bk_topics_foreach(bk_broker *b, void (*fn)(bk_topic *t, void *arg), void *arg)
{
    for (size_t i = 0; i < b->topic_hash_size; i++)
        for (bk_topic *t = b->topic_hash[i], *next; t; t = next) {
            next = t->hnext;
            fn(t, arg);
        }
}

int32_t bk_controller_id(bk_broker *b)
{
    return b->cfg->broker_id;
}

void bk_seg_config(const md_topic_config *c, seg_config *out)
{
    seg_config_default(out);
    out->segment_bytes = (uint64_t)c->segment_bytes;
    out->segment_ms = c->segment_ms;
    out->index_interval_bytes = (uint32_t)c->index_interval_bytes;
    out->segment_index_bytes = (uint32_t)c->segment_index_bytes;
}

static int resolve_config(bk_broker *b, const char *topic, md_topic_config *cfg,
                          char *err, size_t errlen)
{
    md_kv *kv = NULL;
    size_t n = 0;
    int rc = md_topic_configs(b->db, topic, &kv, &n);
    if (rc != KP_NONE) {
        snprintf(err, errlen, "cannot read configs of topic %s", topic);
        return rc;
    }
    rc = md_topic_config_resolve(b->cfg->topic_defaults, b->cfg->ntopic_defaults,
                                 kv, n, cfg, err, errlen);
    md_kv_free(kv, n);
    return rc;
}

static int open_partition(bk_broker *b, bk_topic *t, int32_t idx,
                          const md_partition *mp, char *err, size_t errlen)
{
    bk_partition *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    p->topic = t;
    p->id = idx;
    bk_partition_init_waiters(p);
    char dir[8192];
    snprintf(dir, sizeof dir, "%s/%s-%d", b->data_dir, t->name, idx);
    seg_open_opts o = { .dir = dir };
    bk_seg_config(&t->cfg, &o.cfg);
    if (mp) {
        o.log_start_offset = mp->log_start_offset;
        o.recovery_point = mp->recovery_point;
        p->leader_epoch = mp->leader_epoch;
        p->saved_log_start = mp->log_start_offset;
        p->saved_recovery_point = mp->recovery_point;
        p->saved_hw = mp->high_watermark;
    }
    int rc = seg_open(&o, &p->log);
    if (rc != 0) {
        snprintf(err, errlen, "cannot open partition log %s: %s", dir, strerror(errno));
        free(p);
        return KP_KAFKA_STORAGE_ERROR;
    }
    p->high_watermark = seg_log_end(p->log);
    p->last_flush_ms = bk_now_ms();
    /* Removed segments wait file.delete.delay.ms on the janitor thread. */
    seg_set_deferred_delete(p->log, true);
    bk_producers_open(b, p);         /* failures logged; starts empty */
    t->partitions[idx] = p;
    return KP_NONE;
}

static void close_partition(bk_broker *b, bk_partition *p, bool destroy)
{
    bk_flusher_forget(b, p);
    bk_cleaner_forget(b, p);
    bk_partition_notify(p);          /* waiters look it up again and fail */
    bk_producers_close(b, p, destroy);
    if (destroy)
        bk_partition_log_delete(b, p);   /* unlinking on the janitor thread */
    else
        seg_close(p->log);
    free(p);
}

static void free_topic(bk_topic *t)
{
    free(t->partitions);
    free(t);
}

/* Builds the registry entry for a topic whose facts are in SQLite. */
static int load_topic(bk_broker *b, const md_topic *mt, char *err, size_t errlen)
{
    bk_topic *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    snprintf(t->name, sizeof t->name, "%s", mt->name);
    memcpy(t->id, mt->id, sizeof t->id);
    int rc = resolve_config(b, t->name, &t->cfg, err, errlen);
    if (rc != KP_NONE) {
        free(t);
        return rc;
    }
    md_partition *parts = NULL;
    size_t nparts = 0;
    rc = md_partition_list(b->db, t->name, &parts, &nparts);
    if (rc != KP_NONE) {
        snprintf(err, errlen, "cannot read partitions of topic %s", t->name);
        free(t);
        return rc;
    }
    t->npartitions = (int32_t)nparts;
    t->partitions = calloc(nparts ? nparts : 1, sizeof *t->partitions);
    for (size_t i = 0; i < nparts && rc == KP_NONE; i++)
        rc = open_partition(b, t, (int32_t)i, &parts[i], err, errlen);
    free(parts);
    if (rc != KP_NONE) {
        for (int32_t i = 0; i < t->npartitions; i++)
            if (t->partitions[i])
                close_partition(b, t->partitions[i], false);
        free_topic(t);
        return rc;
    }
    hash_insert(b, t);
    return KP_NONE;
}

int bk_topics_load(bk_broker *b)
{
    md_topic *topics = NULL;
    size_t n = 0;
    if (md_topic_list(b->db, &topics, &n) != KP_NONE) {
        BK_ERROR("cannot list topics from the metadata store");
        return -1;
    }
    int64_t t0 = bk_mono_us();
    size_t nparts = 0;
    for (size_t i = 0; i < n; i++) {
        char err[MD_ERRLEN];
        if (load_topic(b, &topics[i], err, sizeof err) != KP_NONE) {
            BK_ERROR("topic %s: %s", topics[i].name, err);
            free(topics);
            return -1;
        }
        nparts += (size_t)topics[i].partitions;
    }
    free(topics);
    BK_INFO("loaded %zu topics, %zu partitions in %.1f ms", n, nparts,
            (double)(bk_mono_us() - t0) / 1000.0);
    return 0;
}

static void close_topic_cb(bk_topic *t, void *arg)
{
    bk_broker *b = arg;
    for (int32_t i = 0; i < t->npartitions; i++)
        close_partition(b, t->partitions[i], false);
    free_topic(t);
}

void bk_topics_close_all(bk_broker *b)
{
    bk_topics_foreach(b, close_topic_cb, b);
    free(b->topic_hash);
    b->topic_hash = NULL;
    b->topic_hash_size = b->ntopics = 0;
}

/* Each partition is a directory and three open files, created at once:
 * a request for millions of them (one CreateTopics or CreatePartitions
 * frame) would stall the loop for minutes and exhaust descriptors.  Kafka
 * has no such cap; its practical limits are far lower than this one.
 * Found by tests/fuzz/fuzz_d_request.c. */
#define BK_MAX_PARTITIONS_PER_TOPIC 10000

static int partitions_cap(int32_t n, char *err, size_t errlen)
{
    if (n <= BK_MAX_PARTITIONS_PER_TOPIC)
        return KP_NONE;
    snprintf(err, errlen, "Number of partitions %d is more than this broker "
             "allows per topic (%d).", (int)n, BK_MAX_PARTITIONS_PER_TOPIC);
    return KP_INVALID_PARTITIONS;
}

int bk_topic_create(bk_broker *b, const char *name, int32_t partitions,
                    int16_t replication_factor, const md_kv *configs,
                    size_t nconfigs, bool validate_only, char *err, size_t errlen)
{
    err[0] = 0;
    if (partitions_cap(partitions, err, errlen) != KP_NONE)
        return KP_INVALID_PARTITIONS;
    int rc = md_topic_create(b->db, name, partitions, replication_factor, configs,
                             nconfigs, bk_controller_id(b), validate_only, err, errlen);
    if (rc != KP_NONE || validate_only)
        return rc;
    md_topic mt;
    rc = md_topic_get(b->db, name, &mt);
    if (rc == KP_NONE)
        rc = load_topic(b, &mt, err, errlen);
    if (rc != KP_NONE) {
        /* Keep facts and registry in step: undo the row we just wrote. */
        char e2[MD_ERRLEN];
        md_topic_delete(b->db, name, e2, sizeof e2);
        return rc;
    }
    BK_INFO("created topic %s with %d partitions", name, partitions);
    return KP_NONE;
}

int bk_topic_delete(bk_broker *b, const char *name, char *err, size_t errlen)
{
    err[0] = 0;
    bk_topic *t = bk_topic_find(b, name, strlen(name));
    int rc = md_topic_delete(b->db, name, err, errlen);
    if (rc != KP_NONE)
        return rc;
    if (t) {
        hash_remove(b, t);
        for (int32_t i = 0; i < t->npartitions; i++)
            close_partition(b, t->partitions[i], true);
        free_topic(t);
    }
    BK_INFO("deleted topic %s", name);
    return KP_NONE;
}

int bk_topic_add_partitions(bk_broker *b, const char *name, int32_t count,
                            bool validate_only, char *err, size_t errlen)
{
    err[0] = 0;
    if (partitions_cap(count, err, errlen) != KP_NONE)
        return KP_INVALID_PARTITIONS;
    bk_topic *t = bk_topic_find(b, name, strlen(name));
    int rc = md_topic_add_partitions(b->db, name, count, bk_controller_id(b),
                                     validate_only, err, errlen);
    if (rc != KP_NONE || validate_only || !t)
        return rc;
    bk_partition **np = realloc(t->partitions, (size_t)count * sizeof *np);
    if (!np) {
        snprintf(err, errlen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    t->partitions = np;
    for (int32_t i = t->npartitions; i < count; i++) {
        t->partitions[i] = NULL;
        rc = open_partition(b, t, i, NULL, err, errlen);
        if (rc != KP_NONE)
            return rc;
        t->npartitions = i + 1;
    }
    BK_INFO("topic %s now has %d partitions", name, count);
    return KP_NONE;
}

int bk_topic_reload_config(bk_broker *b, bk_topic *t)
{
    char err[MD_ERRLEN];
    md_topic_config cfg;
    int rc = resolve_config(b, t->name, &cfg, err, sizeof err);
    if (rc != KP_NONE) {
        BK_ERROR("topic %s: %s", t->name, err);
        return rc;
    }
    t->cfg = cfg;
    seg_config sc;
    bk_seg_config(&cfg, &sc);
    for (int32_t i = 0; i < t->npartitions; i++)
        seg_set_config(t->partitions[i]->log, &sc);
    return KP_NONE;
}

struct save_ctx { bk_broker *b; int saved; };

static void save_topic(bk_topic *t, void *arg)
{
    struct save_ctx *s = arg;
    for (int32_t i = 0; i < t->npartitions; i++) {
        bk_partition *p = t->partitions[i];
        int64_t ls = seg_log_start(p->log), rp = seg_recovery_point(p->log);
        if (ls == p->saved_log_start && rp == p->saved_recovery_point &&
            p->high_watermark == p->saved_hw)
            continue;
        if (md_partition_save_offsets(s->b->db, t->name, p->id, ls, rp,
                                      p->high_watermark) == KP_NONE) {
            p->saved_log_start = ls;
            p->saved_recovery_point = rp;
            p->saved_hw = p->high_watermark;
            s->saved++;
        }
    }
}

/* One transaction for every partition; its WAL sync runs on the metadata
 * sync worker (nobody waits: a recovery point saved late only means more
 * recovery work after a power cut). */
void bk_save_offsets(bk_broker *b)
{
    struct save_ctx s = { b, 0 };
    bool txn = md_begin(b->db) == 0;
    bk_topics_foreach(b, save_topic, &s);
    if (txn && md_commit(b->db) == 0)
        bk_mdsync_request();
}
