/*
 * assignor.c — what the group leader runs between JoinGroup and
 * SyncGroup: Kafka's range and roundrobin assignors over the members'
 * subscriptions, with the partition counts of the handle's metadata.
 *
 * Both are deterministic given the members (sorted by id here) and the
 * partition counts, like the Java ones, so a mixed group led by any
 * client assigns alike.  A member's out[] entries point at topic names
 * owned by the members' subscription lists (valid until members_free).
 */
#include <stdlib.h>
#include <string.h>

#include "clients/sl_grp.h"

static int cmp_member(const void *a, const void *b)
{
    return strcmp(((const g_member *)a)->id, ((const g_member *)b)->id);
}

static bool subscribed(const g_member *m, const char *topic)
{
    for (int i = 0; i < m->n_topics; i++)
        if (strcmp(m->topics[i], topic) == 0)
            return true;
    return false;
}

static void give(g_member *m, const char *topic, int32_t p)
{
    if (m->n_out == m->cap_out) {
        int cap = m->cap_out ? m->cap_out * 2 : 8;
        sl_tp *n = realloc(m->out, sizeof *n * (size_t)cap);
        if (!n)
            return;
        m->out = n;
        m->cap_out = cap;
    }
    m->out[m->n_out++] = (sl_tp){ (char *)topic, p, 0 };
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* All distinct topics of all members, sorted. */
int sl_grp_all_topics(sl_grp *g, char ***out)
{
    int n = 0, cap = 0;
    char **t = NULL;
    for (int i = 0; i < g->n_members; i++)
        for (int j = 0; j < g->members[i].n_topics; j++) {
            bool seen = false;
            for (int k = 0; k < n && !seen; k++)
                seen = strcmp(t[k], g->members[i].topics[j]) == 0;
            if (seen)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                char **nt = realloc(t, sizeof *nt * (size_t)cap);
                if (!nt)
                    break;
                t = nt;
            }
            t[n++] = g->members[i].topics[j];
        }
    if (n)
        qsort(t, (size_t)n, sizeof *t, cmp_str);
    *out = t;
    return n;
}

/* Kafka's RangeAssignor: per topic, members (sorted by id) subscribed to
 * it get contiguous ranges; the first (n % members) get one extra. */
static void assign_range(sl_client *cl, sl_grp *g, char **topics, int nt)
{
    for (int t = 0; t < nt; t++) {
        sl_mtopic *mt = sl_md_topic(cl, topics[t], false);
        int32_t np = mt ? mt->npart : 0;
        int nm = 0;
        for (int i = 0; i < g->n_members; i++)
            nm += subscribed(&g->members[i], topics[t]);
        if (!nm || np <= 0)
            continue;
        int32_t per = np / nm, extra = np % nm, k = 0;
        for (int i = 0; i < g->n_members; i++) {
            if (!subscribed(&g->members[i], topics[t]))
                continue;
            int32_t start = k * per + (k < extra ? k : extra);
            int32_t len = per + (k < extra ? 1 : 0);
            for (int32_t p = start; p < start + len; p++)
                give(&g->members[i], topics[t], p);
            k++;
        }
    }
}

/* Kafka's RoundRobinAssignor: all partitions sorted by (topic, partition),
 * dealt to members in id order, skipping members not subscribed. */
static void assign_roundrobin(sl_client *cl, sl_grp *g, char **topics, int nt)
{
    int next = 0;
    for (int t = 0; t < nt; t++) {
        sl_mtopic *mt = sl_md_topic(cl, topics[t], false);
        int32_t np = mt ? mt->npart : 0;
        for (int32_t p = 0; p < np; p++) {
            for (int tries = 0; tries < g->n_members; tries++) {
                g_member *m = &g->members[next];
                next = (next + 1) % g->n_members;
                if (subscribed(m, topics[t])) {
                    give(m, topics[t], p);
                    break;
                }
            }
        }
    }
}

void sl_grp_assign(sl_client *cl, sl_grp *g, char **topics, int nt)
{
    qsort(g->members, (size_t)g->n_members, sizeof *g->members, cmp_member);
    if (g->protocol && strcmp(g->protocol, "roundrobin") == 0)
        assign_roundrobin(cl, g, topics, nt);
    else
        assign_range(cl, g, topics, nt);
}
