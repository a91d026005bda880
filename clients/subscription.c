/*
 * subscription.c — what a group member subscribed to, and the topic list
 * that stands for today.
 *
 * A subscription is literal topic names plus regexes: a name starting
 * with "^" is a POSIX extended regex (librdkafka's and the Java client's
 * convention), matched against every topic of the cluster.  While a
 * subscription holds a regex the handle's metadata requests ask for all
 * topics (cl->md_all), and each all-topics answer (cl->md_all_epoch) is
 * matched again, so topics created or deleted later join or leave the
 * subscription at the next metadata refresh (metadata.max.age.ms).
 * Internal topics are never matched (Java's exclude.internal.topics).
 *
 * Invariants:
 *   S1. topics is sorted and without duplicates: literal names, plus the
 *       names matching a regex in the all-topics answer md_epoch.
 *   S2. With a regex, the list is not ready (sl_sub_ready false) until an
 *       all-topics answer has been matched: a JoinGroup must not announce
 *       a subscription that is merely unknown yet.
 */
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "clients/sl_cons.h"

static void free_strs(char **s, int n)
{
    for (int i = 0; i < n; i++)
        free(s[i]);
    free(s);
}

void sl_sub_clear(sl_client *cl, sl_sub *s)
{
    free_strs(s->names, s->n_names);
    for (int i = 0; i < s->n_rx; i++)
        regfree(&s->rx[i]);
    free(s->rx);
    free_strs(s->topics, s->n_topics);
    memset(s, 0, sizeof *s);
    cl->md_all = false;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts and removes duplicates in place; returns the new count. */
static int sort_unique(char **t, int n)
{
    if (n == 0)
        return 0;
    qsort(t, (size_t)n, sizeof *t, cmp_str);
    int k = 1;
    for (int i = 1; i < n; i++) {
        if (strcmp(t[i], t[k - 1]) == 0)
            free(t[i]);
        else
            t[k++] = t[i];
    }
    return k;
}

/* The literal names and, with the all-topics answer, the matching topics. */
static int build(sl_client *cl, const sl_sub *s, char ***out)
{
    char **t = calloc((size_t)(s->n_names + (s->n_rx ? cl->n_topics : 0)) + 1, sizeof *t);
    if (!t)
        return SL_E_NOMEM;
    int n = 0;
    for (int i = 0; i < s->n_names; i++)
        if (!(t[n++] = strdup(s->names[i])))
            goto oom;
    for (int i = 0; s->n_rx && i < cl->n_topics; i++) {
        const sl_mtopic *mt = cl->topics[i];
        if (mt->seen_epoch != cl->md_all_epoch || mt->internal || mt->npart <= 0)
            continue;
        for (int j = 0; j < s->n_rx; j++)
            if (regexec(&s->rx[j], mt->name, 0, NULL, 0) == 0) {
                if (!(t[n++] = strdup(mt->name)))
                    goto oom;
                break;
            }
    }
    *out = t;
    return sort_unique(t, n);
oom:
    free_strs(t, n);
    return SL_E_NOMEM;
}

int sl_sub_set(sl_client *cl, sl_sub *s, const char *const *topics, int n,
               char *errbuf, size_t size)
{
    sl_sub ns = { 0 };
    ns.names = calloc((size_t)n + 1, sizeof *ns.names);
    ns.rx = calloc((size_t)n + 1, sizeof *ns.rx);
    if (!ns.names || !ns.rx)
        goto oom;
    for (int i = 0; i < n; i++) {
        if (topics[i][0] != '^') {
            if (!(ns.names[ns.n_names] = strdup(topics[i])))
                goto oom;
            ns.n_names++;
            continue;
        }
        int rc = regcomp(&ns.rx[ns.n_rx], topics[i], REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char why[128];
            regerror(rc, &ns.rx[ns.n_rx], why, sizeof why);
            sl_errbuf(errbuf, size, "subscription \"%s\": %s", topics[i], why);
            sl_sub_clear(cl, &ns);
            return SL_E_INVALID_ARG;
        }
        ns.n_rx++;
    }
    if (!ns.n_rx) {
        int k = build(cl, &ns, &ns.topics);
        if (k < 0)
            goto oom;
        ns.n_topics = k;
    }
    sl_sub_clear(cl, s);
    *s = ns;
    for (int i = 0; i < s->n_names; i++)
        sl_md_want(cl, s->names[i]);
    if (s->n_rx) {
        cl->md_all = true;
        sl_md_refresh(cl);
        sl_wakeup(cl);
    }
    return 0;
oom:
    sl_sub_clear(cl, &ns);
    sl_errbuf(errbuf, size, "out of memory");
    return SL_E_NOMEM;
}

bool sl_sub_update(sl_client *cl, sl_sub *s)
{
    if (!s->n_rx || !cl->md_all_epoch || cl->md_all_epoch == s->md_epoch)
        return false;
    char **t;
    int n = build(cl, s, &t);
    if (n < 0)
        return false;                          /* out of memory: next answer */
    bool first = s->md_epoch == 0;
    s->md_epoch = cl->md_all_epoch;
    bool same = n == s->n_topics;
    for (int i = 0; same && i < n; i++)
        same = strcmp(t[i], s->topics[i]) == 0;
    if (same) {
        free_strs(t, n);
        return first;
    }
    free_strs(s->topics, s->n_topics);
    s->topics = t;
    s->n_topics = n;
    for (int i = 0; i < n; i++)
        sl_md_want(cl, t[i]);
    sl_log(cl, 6, "group %s: subscription now matches %d topic(s)", cl->conf.group_id, n);
    return true;
}
