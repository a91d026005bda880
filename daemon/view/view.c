/*
 * daemon/view/view.c — the cluster view: every topic and partition of the
 * cluster, and the questions asked of it.
 *
 * The view holds what the store holds (SQLite in standalone mode; in
 * cluster mode the ZooKeeper mirror written into the same SQLite): per
 * topic its id, partition count and effective config; per partition its
 * leader, leader epoch, replicas in preference order and ISR.  It is
 * changed only by the apply half of the one path per fact (view_topics.c,
 * view_topic_apply), never by a handler.  The logs this broker hosts are the
 * other registry (replica.c); a partition of the view points at its local
 * replica when there is one.
 *
 * Questions and their one answer each:
 *   does (topic, partition) exist        view_partition
 *   may this broker serve it as leader   view_leader_replica
 *   who leads it                         view_leader_of
 *   who is the controller                view_controller_id
 *   is broker N alive, which are         view_broker_alive, view_live_brokers
 *   where do new partitions go           view_assign
 * (who coordinates a group: gc_coordinator_of, daemon/group*.c, asks the
 * same brokers.)  Standalone: this broker is the only one, alive,
 * controller, and leader of everything it hosts.
 *
 * Invariants:
 *   V1. A topic is in the view iff its row is in the store (after the
 *       apply half of the change that wrote it has run), with exactly the
 *       store's partition count.
 *   V2. parts[i].local != NULL iff this broker hosts a replica of
 *       partition i, i.e. it is among parts[i].replicas (replica.c, R1).
 *   V3. Nobody keeps a bk_topic or bk_partition pointer across a return to
 *       the event loop without a way to be told of deletion: deletion
 *       wakes the partition's waiters after unlinking the topic, and woken
 *       code looks partitions up again by name (daemon/replica/replica_partition.c).
 *   V4. The name hash and the id hash hold the same topics (those with a
 *       non-zero id in the id hash), both changed only by view_insert
 *       and view_remove: a lookup by either is one hash probe.
 */
#include "daemon/view/view_registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static uint64_t name_hash(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ULL;          /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* Topic ids are random (UUID v4, or Kafka's): their first bytes are a
 * hash already; the multiply only spreads a non-random test id. */
static uint64_t id_hash(const uint8_t id[16])
{
    uint64_t h;
    memcpy(&h, id, sizeof h);
    return (h ^ (h >> 29)) * 0x9e3779b97f4a7c15ULL >> 7;
}

static const uint8_t zero_id[16];

static void id_link(bk_topic **table, size_t size, bk_topic *t)
{
    if (!memcmp(t->id, zero_id, 16))
        return;
    size_t slot = id_hash(t->id) & (size - 1);
    t->idnext = table[slot];
    table[slot] = t;
}

void view_insert(bk_broker *b, bk_topic *t)
{
    if (b->ntopics + 1 > b->topic_hash_size / 2) {
        size_t nsize = b->topic_hash_size ? b->topic_hash_size * 2 : 64;
        bk_topic **nh = calloc(nsize, sizeof *nh), **nid = calloc(nsize, sizeof *nid);
        if (!nh || !nid)
            abort();                              /* the view must stay whole */
        for (size_t i = 0; i < b->topic_hash_size; i++)
            for (bk_topic *x = b->topic_hash[i], *next; x; x = next) {
                next = x->hnext;
                size_t slot = name_hash(x->name, strlen(x->name)) & (nsize - 1);
                x->hnext = nh[slot];
                nh[slot] = x;
                id_link(nid, nsize, x);            /* V4 */
            }
        free(b->topic_hash);
        free(b->topic_id_hash);
        b->topic_hash = nh;
        b->topic_id_hash = nid;
        b->topic_hash_size = nsize;
    }
    size_t slot = name_hash(t->name, strlen(t->name)) & (b->topic_hash_size - 1);
    t->hnext = b->topic_hash[slot];
    b->topic_hash[slot] = t;
    id_link(b->topic_id_hash, b->topic_hash_size, t);
    b->ntopics++;
}

void view_remove(bk_broker *b, bk_topic *t)
{
    size_t slot = name_hash(t->name, strlen(t->name)) & (b->topic_hash_size - 1);
    bool found = false;
    for (bk_topic **pp = &b->topic_hash[slot]; *pp; pp = &(*pp)->hnext)
        if (*pp == t) {
            *pp = t->hnext;
            b->ntopics--;
            found = true;
            break;
        }
    if (!found || !memcmp(t->id, zero_id, 16))
        return;
    slot = id_hash(t->id) & (b->topic_hash_size - 1);
    for (bk_topic **pp = &b->topic_id_hash[slot]; *pp; pp = &(*pp)->idnext)
        if (*pp == t) {
            *pp = t->idnext;
            return;
        }
}

void view_free(bk_broker *b)
{
    free(b->topic_hash);
    free(b->topic_id_hash);
    b->topic_hash = b->topic_id_hash = NULL;
    b->topic_hash_size = b->ntopics = 0;
}

bk_topic *view_topic_find(bk_broker *b, const char *name, size_t len)
{
    if (!b->topic_hash_size)
        return NULL;
    size_t slot = name_hash(name, len) & (b->topic_hash_size - 1);
    for (bk_topic *t = b->topic_hash[slot]; t; t = t->hnext)
        if (strlen(t->name) == len && !memcmp(t->name, name, len))
            return t;
    return NULL;
}

/* Fetch v13+ names every topic by id: one probe of the id hash (V4). */
bk_topic *view_topic_find_id(bk_broker *b, const uint8_t id[16])
{
    if (!b->topic_hash_size || !memcmp(id, zero_id, 16))
        return NULL;
    size_t slot = id_hash(id) & (b->topic_hash_size - 1);
    for (bk_topic *t = b->topic_id_hash[slot]; t; t = t->idnext)
        if (!memcmp(t->id, id, 16))
            return t;
    return NULL;
}

void view_topics_foreach(bk_broker *b, void (*fn)(bk_topic *t, void *arg), void *arg)
{
    for (size_t i = 0; i < b->topic_hash_size; i++)
        for (bk_topic *t = b->topic_hash[i], *next; t; t = next) {
            next = t->hnext;
            fn(t, arg);
        }
}

const bk_pview *view_partition(bk_broker *b, kp_str topic, int32_t partition)
{
    if (topic.len <= 0)
        return NULL;
    bk_topic *t = view_topic_find(b, topic.p, (size_t)topic.len);
    if (!t || partition < 0 || partition >= t->npartitions)
        return NULL;
    return &t->parts[partition];
}

/* Hot path (every produced and fetched partition): one hash lookup. */
int view_leader_replica(bk_broker *b, kp_str topic, int32_t partition, bk_partition **out)
{
    *out = NULL;
    const bk_pview *v = view_partition(b, topic, partition);
    if (!v)
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    if (v->leader != b->cfg->broker_id || !v->local || b->replica_hooks->held(v->local) ||
        b->fenced)
        return KP_NOT_LEADER_OR_FOLLOWER;
    if (b->logdir_failed && b->on_logdir_failed)
        return KP_KAFKA_STORAGE_ERROR;          /* its log dir failed (replica_logdir_offline) */
    *out = v->local;
    return KP_NONE;
}

int32_t view_leader_of(bk_broker *b, const bk_topic *t, int32_t partition)
{
    (void)b;
    if (partition < 0 || partition >= t->npartitions)
        return -1;
    return t->parts[partition].leader;
}

int32_t view_controller_id(bk_broker *b)
{
    if (b->view_clustered)
        return b->controller_id;
    return b->cfg->broker_id;                   /* standalone: this broker */
}

bool view_broker_alive(bk_broker *b, int32_t id)
{
    if (!b->view_clustered)
        return id == b->cfg->broker_id;
    int lo = 0, hi = b->nlive - 1;              /* ascending ids */
    while (lo <= hi) {
        int mid = (lo + hi) / 2, x = b->live[mid].id;
        if (x == id)
            return true;
        if (x < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return false;
}

int view_live_brokers(bk_broker *b, int32_t *ids, int max)
{
    if (!b->view_clustered) {
        if (max > 0)
            ids[0] = b->cfg->broker_id;
        return 1;
    }
    for (int i = 0; i < b->nlive && i < max; i++)
        ids[i] = b->live[i].id;
    return b->nlive;
}

static const struct bk_view_endpoint *broker_endpoint(const bk_view_broker *z,
                                                      const char *name)
{
    for (int i = 0; i < z->neps; i++)
        if (!strcasecmp(z->eps[i].name, name))
            return &z->eps[i];
    return NULL;
}

int view_brokers_info(bk_broker *b, const char *listener, bk_broker_info *out, int max)
{
    const bk_listener *own = listener ? bk_config_listener(b->cfg, listener) : NULL;
    if (!own)
        own = &b->cfg->listeners[0];
    if (!b->view_clustered) {
        if (max > 0)
            out[0] = (bk_broker_info){ b->cfg->broker_id, own->adv_host, own->adv_port,
                                       b->cfg->rack[0] ? b->cfg->rack : NULL };
        return 1;
    }
    int n = 0;
    for (int i = 0; i < b->nlive && n < max; i++) {
        const bk_view_broker *z = &b->live[i];
        /* A broker without this listener is left out, as Kafka does; a
         * registration without endpoints (an old form) has host/port. */
        const struct bk_view_endpoint *ep = broker_endpoint(z, own->name);
        if (!ep && z->neps > 0)
            continue;
        out[n++] = (bk_broker_info){ z->id, ep ? ep->host : z->host, ep ? ep->port : z->port,
                                     z->rack[0] ? z->rack : NULL };
    }
    return n;
}

bool view_cluster_fenced(bk_broker *b)
{
    return b->fenced;
}

void view_cluster_start(bk_broker *b)
{
    b->view_clustered = true;
    b->controller_id = -1;
    b->fenced = true;                           /* not registered yet (cluster_session.c S1) */
}

void view_cluster_stop(bk_broker *b)
{
    view_set_brokers(b, NULL, 0);
    b->view_clustered = false;
    b->controller_id = -1;
    b->fenced = false;
}

void view_set_brokers(bk_broker *b, bk_view_broker *list, int n)
{
    free(b->live);
    b->live = list;
    b->nlive = n;
}

void view_set_controller(bk_broker *b, int32_t id)
{
    b->controller_id = id;
}

void view_set_fenced(bk_broker *b, bool fenced)
{
    b->fenced = fenced;
}

const char *view_cluster_id(bk_broker *b)
{
    return b->cluster_id;
}

#define BK_VIEW_MAX_BROKERS 1024

/* rf replicas need rf live brokers (Kafka's text when there are fewer). */
static int check_rf(int16_t rf, int nlive, char *err, size_t errlen)
{
    if (rf <= nlive)
        return KP_NONE;
    snprintf(err, errlen, "Replication factor: %d larger than available "
             "brokers: %d.", (int)rf, nlive);
    return KP_INVALID_REPLICATION_FACTOR;
}

int view_check_replication(bk_broker *b, int16_t rf, char *err, size_t errlen)
{
    int32_t live[BK_VIEW_MAX_BROKERS];
    return check_rf(rf, view_live_brokers(b, live, BK_VIEW_MAX_BROKERS), err, errlen);
}

/* The rack of live broker id ("" when none or standalone). */
static const char *rack_of(bk_broker *b, int32_t id)
{
    if (!b->view_clustered)
        return b->cfg->rack;
    for (int i = 0; i < b->nlive; i++)
        if (b->live[i].id == id)
            return b->live[i].rack;
    return "";
}

/* Kafka's getRackAlternatedBrokerList: racks in name order, brokers of
 * each in id order, taken one rack after the other (r1b1, r2b1, r3b1,
 * r1b2, ...; a rack out of brokers is passed over), so consecutive
 * positions sit on different racks.  order[i]: the index into ids of the
 * broker at position i; rk[i]: the rank of its rack.  Returns the number
 * of racks, or 0 when a broker has none (Kafka: all or none; order is
 * then ids' own). */
static int rack_alternate(const int32_t *ids, const char *const *racks, int n, int *order,
                          int *rk)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 0; i < n; i++)
        if (!racks || !racks[i] || !racks[i][0])
            return 0;
    int by[BK_VIEW_MAX_BROKERS];                  /* indices by (rack, id) */
    for (int i = 0; i < n; i++) {
        int j = i;
        for (; j > 0; j--) {
            int c = strcmp(racks[by[j - 1]], racks[i]);
            if (c < 0 || (c == 0 && ids[by[j - 1]] < ids[i]))
                break;
            by[j] = by[j - 1];
        }
        by[j] = i;
    }
    int gstart[BK_VIEW_MAX_BROKERS], glen[BK_VIEW_MAX_BROKERS], nr = 0;
    for (int i = 0; i < n; i++) {
        if (i == 0 || strcmp(racks[by[i]], racks[by[i - 1]])) {
            gstart[nr] = i;
            glen[nr++] = 0;
        }
        glen[nr - 1]++;
    }
    int taken[BK_VIEW_MAX_BROKERS];
    memset(taken, 0, (size_t)nr * sizeof *taken);
    for (int m = 0, g = 0; m < n; g = (g + 1) % nr)
        if (taken[g] < glen[g]) {
            order[m] = by[gstart[g] + taken[g]++];
            rk[m++] = g;
        }
    return nr;
}

/* Kafka's replicaIndex: the j-th follower's position, 1 + (shift + j) mod
 * (n - 1) places after the leader's, so it is never the leader's. */
static int replica_index(int first, int64_t shift, int64_t j, int n)
{
    return (int)((first + 1 + (shift + j) % (n - 1)) % n);
}

/* Kafka's AdminUtils.assignReplicasToBrokers, both branches, with its
 * random start fixed (start, the same for nextReplicaShift, as Kafka's
 * fixedStartIndex), so an assignment can be predicted and tested.
 * Partition p leads on position (p + start) mod n of the broker list
 * (rack-alternated when racks are set); the shift grows by one each time
 * p passes a multiple of n, so followers spread too.  Rack-aware
 * (assignReplicasToBrokersRackAware): a follower candidate walks the
 * positions with the shift times the number of racks, and is skipped
 * while its rack already holds a replica of the partition and some rack
 * holds none, or while it holds one itself. */
int view_assign_replicas(const int32_t *ids, const char *const *racks, int n, int32_t start,
                       int32_t first, int32_t count, int16_t rf, int32_t *replicas)
{
    if (n <= 0 || n > BK_VIEW_MAX_BROKERS || rf <= 0 || rf > n || first < 0 || count < 0 ||
        start < 0)
        return -1;
    int order[BK_VIEW_MAX_BROKERS], rk[BK_VIEW_MAX_BROKERS];
    int nr = rack_alternate(ids, racks, n, order, rk);
    bool has_b[BK_VIEW_MAX_BROKERS], has_r[BK_VIEW_MAX_BROKERS];
    memset(has_b, 0, (size_t)n * sizeof *has_b);
    memset(has_r, 0, (size_t)(nr > 0 ? nr : 1) * sizeof *has_r);
    int at[BK_VIEW_MAX_BROKERS];                  /* this partition's positions */
    int64_t shift = start;
    for (int32_t i = 0; i < count; i++) {
        int64_t p = (int64_t)first + i;
        if (p > 0 && p % n == 0)
            shift++;
        int lead = (int)((p + start) % n);
        int32_t *r = replicas + (size_t)i * (size_t)rf;
        r[0] = ids[order[lead]];
        if (!nr) {
            for (int j = 0; j + 1 < rf; j++)
                r[j + 1] = ids[order[replica_index(lead, shift, j, n)]];
            continue;
        }
        at[0] = lead;
        has_b[lead] = has_r[rk[lead]] = true;
        int nracks_with = 1;
        int64_t k = 0;
        for (int j = 1; j < rf; j++) {
            int x;
            for (;; k++) {
                /* Every rack has a replica or one has none, whose brokers
                 * are free: n - 1 steps see every follower position. */
                if (k >= (int64_t)rf * n)
                    return -1;
                x = replica_index(lead, shift * nr, k, n);
                if ((!has_r[rk[x]] || nracks_with == nr) && (!has_b[x] || j == n))
                    break;
            }
            k++;
            nracks_with += !has_r[rk[x]];
            has_b[x] = has_r[rk[x]] = true;
            at[j] = x;
            r[j] = ids[order[x]];
        }
        for (int j = 0; j < rf; j++)
            has_b[at[j]] = has_r[rk[at[j]]] = false;
    }
    return 0;
}

int view_assign(bk_broker *b, int32_t first, int32_t count, int16_t rf, int32_t lead0,
                   int32_t *replicas, char *err, size_t errlen)
{
    int32_t live[BK_VIEW_MAX_BROKERS];
    int n = view_live_brokers(b, live, BK_VIEW_MAX_BROKERS);
    return view_assign_among(b, live, n, first, count, rf, lead0, replicas, err, errlen);
}

int view_assign_among(bk_broker *b, const int32_t *brokers, int nbrokers, int32_t first,
                         int32_t count, int16_t rf, int32_t lead0, int32_t *replicas,
                         char *err, size_t errlen)
{
    int n = nbrokers < BK_VIEW_MAX_BROKERS ? nbrokers : BK_VIEW_MAX_BROKERS;
    int rc = check_rf(rf, n, err, errlen);
    if (rc != KP_NONE)
        return rc;
    const char *racks[BK_VIEW_MAX_BROKERS];
    int32_t start = 0;
    for (int i = 0; i < n; i++) {
        racks[i] = rack_of(b, brokers[i]);
        /* Kafka's addPartitions: the index of the first broker at or
         * above partition 0's leader (ids ascending). */
        if (lead0 >= 0 && brokers[i] < lead0)
            start = i + 1 < n ? i + 1 : 0;
    }
    if (view_assign_replicas(brokers, racks, n, start, first, count, rf, replicas)) {
        snprintf(err, errlen, "cannot assign %d partitions of replication factor %d to "
                 "%d brokers", (int)count, (int)rf, n);
        return KP_INVALID_REPLICATION_FACTOR;
    }
    return KP_NONE;
}
