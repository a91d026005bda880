/*
 * daemon/cluster/cluster_links.c — cluster links and mirror topics as
 * cluster-wide facts in ZooKeeper (issue 33; the model is
 * daemon/link/link.c), in Sluice's own folder:
 *
 *   /sluice/cluster_links/<name>   {"version":1,"config":{"bootstrap.servers":..,
 *                                   "config":..,"secrets":..,"state":..}}
 *   /sluice/mirror_topics/<topic>  {"version":1,"config":{"link":..,
 *                                   "source.topic":..,"state":..}}
 *
 * (Kafka's config JSON, cluster_zk_json.c; names are topic names, which
 * are valid znode names.)  "secrets" is only ever the sealed form
 * (daemon/security/sec_pwenc.c: AES-256-GCM under password.encoder.secret,
 * which every broker of the cluster has the same; link.c K4), as in each
 * broker's cluster_links.secrets.  The znodes carry the open ACL all of
 * Sluice's znodes do: ACLs on them would need ZooKeeper authentication
 * (SASL or digest) that the brokers do not use, so anyone who reaches the
 * ensemble reads them; what they read is ciphertext, useless without the
 * secret, which never leaves the brokers' configuration.
 *
 * Write half (cl_links_publish, cl_store_zk's link_publish): the broker
 * where the SQL statement ran has stored the row in its own SQLite
 * already (link.c), so it serves it at once; it then writes the row from
 * there to its znode (read it, then set at the version read: L6; never
 * created but by an INSERT: L8), or deletes the znode when
 * the row is gone.  An INSERT's row is created only: a znode there
 * already (another broker's INSERT of the same name at the same time)
 * wins, and is applied here (L5), with an error in the log.  Apply half:
 * every broker keeps a children watch
 * on both folders and a data watch on each child, and on a change makes
 * its SQLite row match the znode, then tells the links (b->links_changed,
 * link.c link_sync) to follow the rows.
 *
 * Invariants:
 *   L1. Never a blocking call: every ZooKeeper operation is asynchronous
 *       and its answer is handled on the loop; SQLite work is a row per
 *       znode change (an operator's statement, a state change), never per
 *       fetch.
 *   L2. A znode is the whole truth about its row.  A session (re)start
 *       lists both folders again (cl_links_resync) and drops local rows
 *       ZooKeeper no longer has, since watches may have been missed.
 *   L3. Applying is idempotent: a broker that reads back its own write
 *       finds its row as the znode says and changes nothing.
 *   L4. A mirror row needs its link's row (a foreign key): a mirror znode
 *       read before its link's is skipped, and each link applied lists the
 *       mirrors again.
 *   L5. A row is compared whole: a link whose bootstrap.servers, config or
 *       secrets differ (an UPDATE, link.c K16; deleted and created again
 *       while this broker was away, or created on two brokers at once)
 *       changes the local row in place, its mirrors' rows kept (a mirror
 *       whose znode went is dropped by its own watch, or by L2's resync);
 *       a mirror of another link or source topic replaces the local row.
 *       A mirror promoted, failed_over or failed never takes another state.
 *   L6. A write is a compare-and-set: the znode is read, the rules applied
 *       to what it holds (nothing written when it says the same; a mirror
 *       whose znode is in a terminal state keeps it, and the writer takes
 *       that state instead of its own: link.c K13), and set at the version
 *       read.  ZBADVERSION (another broker wrote between: two SQL sessions,
 *       the controller's 'failed' and an operator's 'paused') reads again
 *       and decides again, up to PUB_TRIES times, from the local row as it
 *       is then (not as it was at the first try: the winner's row applied
 *       here since is not written back over it).  So two changes at once
 *       end in one of them, or in the terminal one, never in a terminal
 *       state left, and a promoting mirror never goes back to active or
 *       paused (link.c K11): the whole state machine (mirror_may).
 *   L7. A link's secrets are compared opened (sec_pwenc_same): the same
 *       settings sealed again (another salt and IV) are no change, and the
 *       local row just takes the znode's sealed text; a plain or old-key
 *       value is a change (it is sealed again and written, link.c K4).
 *   L9. A terminal state (promoted, failed_over, failed) is proposed, not
 *       published (cl_links_mirror_propose, link.c K15): the znode is set
 *       by compare-and-set first, and the proposer takes the state only
 *       once ZooKeeper holds it; when the znode holds a state that may not
 *       go there (another broker's terminal state came first), that state
 *       is taken here instead and the proposer hears it (the SQL statement
 *       answers an error naming it).  So no broker ever holds a terminal
 *       state ZooKeeper does not, and two terminal states racing end in
 *       one everywhere.
 *   L10. A link's source cluster id (link.c K18) is the znode's
 *       "source.cluster.id": the first broker whose connection binds the
 *       link publishes it, and every broker takes the znode's (none: a
 *       new link, or one not bound yet) into its row, and link_sync into
 *       the link.  So a link deleted and made again while a broker was
 *       down never keeps the old link's cluster there, and an UPDATE that
 *       moves bootstrap_servers is checked by every broker against the
 *       cluster the link was bound to, not only by the one that ran it.
 *   L8. A znode is made only by an INSERT's publish: an UPDATE's or a
 *       reseal's (at start, link.c K4) finding none (another broker's
 *       DELETE came between, or while this broker was down) writes
 *       nothing, so a delete is never undone; a reseal's drops the row
 *       here too (L2), and the link stops (link.c K13).
 *
 * A promotion's facts (link.c K11): /sluice/mirror_caught_up/<topic id
 * hex>.<partition>.<leader epoch>, empty znodes a mirror partition's
 * leader creates once it saw the source's end equal to its log end; the
 * controller lists them once a second while a mirror promotes (no watch),
 * and deletes those of topics that no longer exist.  A topic id is new
 * for each topic, so a fact never counts for a later topic of its name.
 *
 * A mirror partition's first local epoch (link.c K17):
 * /sluice/mirror_local_epochs/<topic id hex>.<partition>, its data the
 * epoch in decimal, made once (create: the first leader to finish link.c
 * K14's duty wins, every later one reads it; never set, so no election or
 * ISR write touches it) and read by every leader that finishes the duty
 * after; swept with the link.c K11 facts of topics that no longer exist.
 */
#include "daemon/cluster/cluster.h"
#include "daemon/security/sec_pwenc.h"
#include "daemon/view/view_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINKS "/sluice/cluster_links"
#define MIRRORS "/sluice/mirror_topics"
#define TOLD "/sluice/mirror_caught_up"
#define LOCAL "/sluice/mirror_local_epochs"

static const char *kv_get(const md_kv *kv, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(kv[i].name, name))
            return kv[i].value;
    return NULL;
}

static const char *or_empty(const char *s)
{
    return s ? s : "";
}

/* L5: the states a mirror never leaves (link.c K13). */
static bool terminal(const char *state)
{
    return !strcmp(state, "promoted") || !strcmp(state, "failed_over") ||
           !strcmp(state, "failed");
}

static void changed(bk_broker *b)
{
    if (b->links_changed)
        b->links_changed(b);
}

/* ---- apply half ------------------------------------------------------------------ */
static void on_mirrors(bk_broker *b, const zk_result *r, void *arg);

static void apply_link(bk_broker *b, const char *name, const md_kv *kv, size_t n)
{
    char err[MD_ERRLEN];
    md_link_row *rows = NULL;
    size_t nr = 0;
    if (md_link_list(b->db, &rows, &nr, err, sizeof err) != 0) {
        BK_ERROR("cluster link %s from ZooKeeper: cannot read the local rows: %s", name, err);
        return;
    }
    bool have = false, same = false, resealed = false, bound = false;
    const char *sec = kv ? or_empty(kv_get(kv, n, "secrets")) : "";
    const char *cid = kv ? or_empty(kv_get(kv, n, "source.cluster.id")) : "";
    for (size_t i = 0; i < nr && !have; i++)
        if ((have = !strcmp(rows[i].name, name)) && kv) {      /* L5: the whole row */
            same = !strcmp(rows[i].bootstrap, or_empty(kv_get(kv, n, "bootstrap.servers"))) &&
                   !strcmp(rows[i].config, or_empty(kv_get(kv, n, "config"))) &&
                   sec_pwenc_same(b->pwenc, name, rows[i].secrets, sec);
            resealed = same && strcmp(rows[i].secrets, sec);
            bound = !strcmp(rows[i].source_cluster, cid);
        }
    if (rows)
        memset(rows, 0, nr * sizeof *rows);          /* the secrets */
    free(rows);
    if (resealed && md_link_secrets_set(b->db, name, sec, err, sizeof err) != 0)
        BK_ERROR("cluster link %s from ZooKeeper: cannot store its secrets: %s", name, err);
    if (have && same && !bound) {                    /* L10 */
        if (md_link_source_cluster_set(b->db, name, cid, err, sizeof err) != 0)
            BK_ERROR("cluster link %s from ZooKeeper: cannot store its source cluster id: %s",
                     name, err);
        changed(b);
    }
    if (have && same)
        return;                                      /* L3; sealed again: L7 */
    if (kv && !kv_get(kv, n, "bootstrap.servers")) {
        BK_ERROR("zookeeper: %s/%s: no bootstrap.servers; ignored", LINKS, name);
        return;
    }
    if (!kv) {
        /* Its mirrors went before it (link.c refuses otherwise): rows a
         * missed watch left go first, for the foreign key (L2). */
        md_mirror_row *ms = NULL;
        size_t nm = 0;
        if (have && md_mirror_list(b->db, &ms, &nm, err, sizeof err) == 0)
            for (size_t i = 0; i < nm; i++)
                if (!strcmp(ms[i].link, name) &&
                    md_mirror_delete(b->db, ms[i].topic, err, sizeof err) != 0)
                    BK_ERROR("mirror topic %s: cannot delete its row: %s", ms[i].topic, err);
        free(ms);
        if (have && md_link_delete(b->db, name, err, sizeof err) != 0)
            BK_ERROR("cluster link %s: cannot delete its row: %s", name, err);
        else if (have)
            BK_INFO("cluster link %s deleted from ZooKeeper", name);
        changed(b);
        return;
    }
    md_link_row *row = calloc(1, sizeof *row);
    const char *bs = kv_get(kv, n, "bootstrap.servers"), *st = kv_get(kv, n, "state");
    if (!row || !bs) {
        BK_ERROR("zookeeper: %s/%s: %s", LINKS, name, row ? "no bootstrap.servers; ignored"
                                                          : "out of memory");
        free(row);
        return;
    }
    snprintf(row->name, sizeof row->name, "%s", name);
    snprintf(row->bootstrap, sizeof row->bootstrap, "%s", bs);
    snprintf(row->config, sizeof row->config, "%s", or_empty(kv_get(kv, n, "config")));
    snprintf(row->secrets, sizeof row->secrets, "%s", or_empty(kv_get(kv, n, "secrets")));
    snprintf(row->state, sizeof row->state, "%s", st ? st : "active");
    /* L5: a row here changes in place, its mirrors' rows kept (link.c K13) */
    if ((have ? md_link_settings_set(b->db, row, err, sizeof err)
              : md_link_put(b->db, row, bk_now_ms(), err, sizeof err)) != 0 ||
        md_link_source_cluster_set(b->db, name, cid, err, sizeof err) != 0)   /* L10 */
        BK_ERROR("cluster link %s from ZooKeeper: cannot store it: %s", name, err);
    else
        BK_INFO("cluster link %s %s from ZooKeeper: source %s%s", name,
                have ? "replaced" : "applied", bs,
                have ? " (its settings changed; its mirror topics kept)" : "");
    memset(row, 0, sizeof *row);
    free(row);
    changed(b);
    cl_zk_children(b->zk, MIRRORS, true, on_mirrors, NULL);   /* L4 */
}

static void apply_mirror(bk_broker *b, const char *topic, const md_kv *kv, size_t n)
{
    char err[MD_ERRLEN];
    md_mirror_row *rows = NULL, *have = NULL;
    size_t nr = 0;
    if (md_mirror_list(b->db, &rows, &nr, err, sizeof err) != 0) {
        BK_ERROR("mirror topic %s from ZooKeeper: cannot read the local rows: %s", topic, err);
        return;
    }
    for (size_t i = 0; i < nr && !have; i++)
        if (!strcmp(rows[i].topic, topic))
            have = &rows[i];
    const char *link = kv ? kv_get(kv, n, "link") : NULL;
    const char *src = kv ? kv_get(kv, n, "source.topic") : NULL;
    const char *st = kv ? kv_get(kv, n, "state") : NULL;
    int rc = 0;
    if (!kv) {
        if (have)
            rc = md_mirror_delete(b->db, topic, err, sizeof err);
    } else if (!link || !src || !st) {
        BK_ERROR("zookeeper: %s/%s lacks link, source.topic or state; ignored", MIRRORS, topic);
    } else if (have && (strcmp(have->link, link) || strcmp(have->source_topic, src))) {
        rc = md_mirror_delete(b->db, topic, err, sizeof err);   /* L5: another mirror */
        if (rc == 0)
            have = NULL;
    } else if (have && strcmp(have->state, st) && terminal(have->state)) {
        BK_WARN("mirror topic %s is %s here: the state %s from ZooKeeper is not taken (a "
                "mirror never leaves %s)", topic, have->state, st, have->state);
        st = have->state;                            /* L5 */
    }
    if (rc != 0 || !kv || !link || !src || !st) {
        /* done above */
    } else if (!have) {
        md_mirror_row row = { 0 };
        snprintf(row.topic, sizeof row.topic, "%s", topic);
        snprintf(row.link, sizeof row.link, "%s", link);
        snprintf(row.source_topic, sizeof row.source_topic, "%s", src);
        snprintf(row.state, sizeof row.state, "%s", st);
        rc = md_mirror_put(b->db, &row, bk_now_ms(), err, sizeof err);   /* L4: may wait */
    } else if (strcmp(have->state, st)) {
        rc = md_mirror_status(b->db, topic, st, NULL, err, sizeof err);
    }
    if (rc != 0)
        BK_WARN("mirror topic %s from ZooKeeper: not stored (%s); again when its link is "
                "applied", topic, err);
    free(rows);
    changed(b);
}

typedef struct rd {
    bool mirror;
    char name[MD_TOPIC_NAME_MAX + 1];
} rd;

static void on_one(bk_broker *b, const zk_result *r, void *arg)
{
    rd *x = arg;
    if (r->rc == ZNONODE) {
        (x->mirror ? apply_mirror : apply_link)(b, x->name, NULL, 0);
    } else if (r->rc == ZOK) {
        md_kv *kv = NULL;
        size_t n = 0;
        char err[256];
        if (r->len <= 0 || cl_zj_config_parse(r->data, (size_t)r->len, &kv, &n, err, sizeof err))
            BK_ERROR("zookeeper: %s/%s is not config JSON (%s); ignored",
                     x->mirror ? MIRRORS : LINKS, x->name, r->len <= 0 ? "empty" : err);
        else
            (x->mirror ? apply_mirror : apply_link)(b, x->name, kv, n);
        md_kv_free(kv, n);
    }
    /* Connection loss: the resync after the reconnect reads it again (L2). */
    free(x);
}

static void read_one(bk_broker *b, bool mirror, const char *name)
{
    rd *x = calloc(1, sizeof *x);
    char path[sizeof MIRRORS + MD_TOPIC_NAME_MAX + 2];
    if (!x || strlen(name) > MD_TOPIC_NAME_MAX) {
        free(x);
        return;
    }
    x->mirror = mirror;
    snprintf(x->name, sizeof x->name, "%s", name);
    snprintf(path, sizeof path, "%s/%s", mirror ? MIRRORS : LINKS, name);
    cl_zk_get(b->zk, path, true, on_one, x);
}

static bool listed(const zk_result *r, const char *name)
{
    for (int k = 0; k < r->nchildren; k++)
        if (!strcmp(r->children[k], name))
            return true;
    return false;
}

/* L2: local rows ZooKeeper no longer has go; every child is read. */
static void on_children(bk_broker *b, const zk_result *r, bool mirror)
{
    char err[MD_ERRLEN];
    if (r->rc != ZOK)
        return;                                      /* the next (re)connect resyncs */
    if (mirror) {
        md_mirror_row *rows = NULL;
        size_t n = 0;
        if (md_mirror_list(b->db, &rows, &n, err, sizeof err) == 0)
            for (size_t i = 0; i < n; i++)
                if (!listed(r, rows[i].topic))
                    apply_mirror(b, rows[i].topic, NULL, 0);
        free(rows);
    } else {
        md_link_row *rows = NULL;
        size_t n = 0;
        if (md_link_list(b->db, &rows, &n, err, sizeof err) == 0)
            for (size_t i = 0; i < n; i++)
                if (!listed(r, rows[i].name))
                    apply_link(b, rows[i].name, NULL, 0);
        if (rows)
            memset(rows, 0, n * sizeof *rows);
        free(rows);
    }
    for (int k = 0; k < r->nchildren; k++)
        read_one(b, mirror, r->children[k]);
}

static void on_links(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    on_children(b, r, false);
}

static void on_mirrors(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    on_children(b, r, true);
}

void cl_links_resync(bk_broker *b)
{
    cl_zk_children(b->zk, LINKS, true, on_links, NULL);
    cl_zk_children(b->zk, MIRRORS, true, on_mirrors, NULL);
}

bool cl_links_on_watch(bk_broker *b, int type, const char *path)
{
    bool mirror = !strncmp(path, MIRRORS, strlen(MIRRORS));
    const char *folder = mirror ? MIRRORS : LINKS;
    size_t n = strlen(folder);
    if (strncmp(path, folder, n) || (path[n] && path[n] != '/'))
        return false;
    if (!path[n]) {
        cl_zk_children(b->zk, folder, true, mirror ? on_mirrors : on_links, NULL);
        return true;
    }
    const char *child = path + n + 1;
    if (!*child || strchr(child, '/') || strlen(child) > MD_TOPIC_NAME_MAX)
        return true;
    if (type == ZOO_DELETED_EVENT)
        (mirror ? apply_mirror : apply_link)(b, child, NULL, 0);
    else
        read_one(b, mirror, child);
    return true;
}

/* ---- write half -------------------------------------------------------------------- */
typedef struct pub {
    bk_broker *b;
    char path[sizeof MIRRORS + MD_TOPIC_NAME_MAX + 2];
    kp_buf json;                         /* the local row as read for this try (L6) */
    bool del, mirror;
    int how;                             /* BK_PUB_* (view_store.h) */
    int tries;
    char name[MD_TOPIC_NAME_MAX + 1];
    /* L9: a proposed terminal state (else ""), and who hears how it went */
    char want[16], now[16];
    void (*done)(bk_broker *b, void *arg, int rc, const char *now);
    void *arg;
} pub;

#define PUB_TRIES 8                      /* L6: re-reads after a lost race */

static void pub_read(bk_broker *b, pub *p);

/* The end of a write: a proposal's done hears rc (0: ZooKeeper says the
 * proposed state; -1: it does not, and p->now is what it says, "" when
 * unknown). */
static void pub_end(pub *p, int rc)
{
    if (p->done)
        p->done(p->b, p->arg, rc, rc == 0 ? p->want : p->now);
    if (p->json.data)
        memset(p->json.data, 0, p->json.len);       /* a link's secrets (sealed) */
    kp_buf_free(&p->json);
    free(p);
}

/* L6: another write came between our read and our write: read again, and
 * decide again from what is there now. */
static void pub_again(bk_broker *b, pub *p, int rc)
{
    if (++p->tries < PUB_TRIES) {
        pub_read(b, p);
        return;
    }
    BK_ERROR("zookeeper: %s kept changing under %d writes (%s); this broker's change is not "
             "published", p->path, p->tries, cl_zk_rc_str(rc));
    pub_end(p, -1);
}

static void on_write(bk_broker *b, const zk_result *r, void *arg)
{
    pub *p = arg;
    if (p->how == BK_PUB_INSERT && r->rc == ZNODEEXISTS) {
        BK_ERROR("%s was created on another broker at the same time; its row is taken here "
                 "(L5)", p->path);
        read_one(b, p->mirror, p->name);
        pub_end(p, -1);
        return;
    }
    if (!p->del && (r->rc == ZBADVERSION || r->rc == ZNONODE || r->rc == ZNODEEXISTS)) {
        pub_again(b, p, r->rc);
        return;
    }
    if (r->rc != ZOK && !(p->del && r->rc == ZNONODE))
        BK_ERROR("zookeeper: cannot %s %s: %s; the other brokers do not see this change",
                 p->del ? "delete" : "write", p->path, cl_zk_rc_str(r->rc));
    pub_end(p, r->rc == ZOK ? 0 : -1);
}

/* L6: may a mirror whose znode says from be written to say to?  The whole
 * state machine: a terminal state is never left (link.c K13), a
 * promoting mirror goes on to promoted or failed_over only (link.c K11). */
static bool mirror_may(const char *from, const char *to)
{
    if (!strcmp(from, to))
        return true;
    if (terminal(from))
        return false;
    if (!strcmp(from, "promoting"))
        return !strcmp(to, "promoted") || !strcmp(to, "failed_over");
    return true;
}

/* L6: what to do with the znode as read (kv, n; NULL: none): true to write
 * ours over it.  Nothing when it says what ours says (a link's secrets
 * compared opened, sec_pwenc.c P2, unless it holds them plain or under an
 * old key); a mirror whose znode's state may not become ours (mirror_may)
 * keeps it, and this broker takes it instead of its own change. */
static bool pub_decide(bk_broker *b, pub *p, const md_kv *kv, size_t n)
{
    md_kv *ours = NULL;
    size_t no = 0;
    char err[256];
    if (!kv || cl_zj_config_parse((const char *)p->json.data, p->json.len, &ours, &no, err,
                                  sizeof err) != 0)
        return true;
    bool same = true;
    for (size_t i = 0; i < no && same; i++) {
        const char *theirs = or_empty(kv_get(kv, n, ours[i].name));
        same = !strcmp(ours[i].name, "secrets")
               ? sec_pwenc_same(b->pwenc, p->name, ours[i].value, theirs)
               : !strcmp(ours[i].value, theirs);
    }
    const char *st = kv_get(kv, n, "state"), *mine = kv_get(ours, no, "state");
    bool keep = p->mirror && !same && st && !mirror_may(st, or_empty(mine));
    snprintf(p->now, sizeof p->now, "%s", or_empty(st));
    if (keep) {
        BK_WARN("mirror topic %s: ZooKeeper has it %s already, which does not go to %s; %s "
                "is not written, %s is taken here (link.c K11, link.c K13)", p->name, st,
                or_empty(mine), or_empty(mine), st);
        apply_mirror(b, p->name, kv, n);
    }
    md_kv_free(ours, no);
    return !same && !keep;
}

static int row_json(bk_broker *b, bool mirror, const char *name, const char *state,
                    kp_buf *out, bool *found);

static void on_read(bk_broker *b, const zk_result *r, void *arg)
{
    pub *p = arg;
    md_kv *kv = NULL;
    size_t n = 0;
    char err[256];
    bool found = false;
    if (r->rc == ZOK || r->rc == ZNONODE) {
        /* L6: each try writes the row as it is now (a lost race may have
         * applied the winner's row here since, or this broker changed it
         * again), never what the first try read. */
        if (p->json.data)
            memset(p->json.data, 0, p->json.len);
        kp_buf_reset(&p->json);
        if (row_json(b, p->mirror, p->name, p->want[0] ? p->want : NULL, &p->json,
                     &found) != 0 || !found) {
            pub_end(p, -1);                 /* gone here too: its delete publishes that */
            return;
        }
    }
    if (r->rc == ZNONODE && p->how != BK_PUB_RESEAL) {
        /* L8: another broker deleted it; its watch drops the row here. */
        BK_WARN("%s was deleted on another broker before this change was written; it stays "
                "deleted", p->path);
        pub_end(p, -1);
        return;
    }
    if (r->rc == ZNONODE) {
        /* L8: a reseal at start replaces a znode, never makes one: the link
         * was deleted on another broker while this one was down, and its
         * row goes here as a watch would have dropped it (L2). */
        BK_WARN("%s was deleted on another broker while this one was away; its row (sealed "
                "again at start) is dropped here, not published", p->path);
        apply_link(b, p->name, NULL, 0);
        pub_end(p, -1);
        return;
    }
    if (r->rc != ZOK) {
        BK_ERROR("zookeeper: cannot read %s to write it: %s; the other brokers do not see "
                 "this change", p->path, cl_zk_rc_str(r->rc));
        pub_end(p, -1);
        return;
    }
    bool parsed = r->len > 0 &&
                  cl_zj_config_parse(r->data, (size_t)r->len, &kv, &n, err, sizeof err) == 0;
    if (pub_decide(b, p, parsed ? kv : NULL, n))
        cl_zk_set(b->zk, p->path, (const char *)p->json.data, (int)p->json.len,
                  r->stat.version, on_write, p);     /* L6: only over what was read */
    else                                 /* it says ours already (0), or keeps its own */
        pub_end(p, p->want[0] && !strcmp(p->now, p->want) ? 0 : -1);
    md_kv_free(kv, n);
}

static void pub_read(bk_broker *b, pub *p)
{
    cl_zk_get(b->zk, p->path, false, on_read, p);
}

/* The row of name as its znode's config JSON into out, a mirror's state
 * replaced by state unless NULL (L9); *found false: no such row. */
static int row_json(bk_broker *b, bool mirror, const char *name, const char *state,
                    kp_buf *out, bool *found)
{
    char err[MD_ERRLEN];
    md_mirror_row *ms = NULL;
    md_link_row *ls = NULL;
    size_t n = 0;
    int rc = mirror ? md_mirror_list(b->db, &ms, &n, err, sizeof err)
                    : md_link_list(b->db, &ls, &n, err, sizeof err);
    *found = false;
    for (size_t i = 0; rc == 0 && i < n && !*found; i++) {
        if (!(*found = !strcmp(mirror ? ms[i].topic : ls[i].name, name)))
            continue;
        md_kv kv[5] = { { (char *)"state", mirror ? (state ? (char *)state : ms[i].state)
                                                  : ls[i].state } };
        int nkv = mirror ? 3 : 4;
        if (mirror) {
            kv[1] = (md_kv){ (char *)"link", ms[i].link };
            kv[2] = (md_kv){ (char *)"source.topic", ms[i].source_topic };
        } else {
            kv[1] = (md_kv){ (char *)"bootstrap.servers", ls[i].bootstrap };
            kv[2] = (md_kv){ (char *)"config", ls[i].config };
            kv[3] = (md_kv){ (char *)"secrets", ls[i].secrets };   /* sealed (link.c K4) */
            if (ls[i].source_cluster[0])                           /* L10 */
                kv[nkv++] = (md_kv){ (char *)"source.cluster.id", ls[i].source_cluster };
        }
        cl_zj_config_format(kv, nkv, out);
    }
    if (rc != 0)
        BK_ERROR("%s %s: cannot read its row to publish it: %s",
                 mirror ? "mirror topic" : "cluster link", name, err);
    if (ls)
        memset(ls, 0, n * sizeof *ls);
    free(ls);
    free(ms);
    return rc;
}

static pub *pub_new(bk_broker *b, bool mirror, const char *name, int how)
{
    pub *p = calloc(1, sizeof *p);
    if (!p || strlen(name) > MD_TOPIC_NAME_MAX) {
        free(p);
        return NULL;
    }
    kp_buf_init(&p->json);
    p->b = b;
    snprintf(p->path, sizeof p->path, "%s/%s", mirror ? MIRRORS : LINKS, name);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->mirror = mirror;
    p->how = how;
    return p;
}

void cl_links_publish(bk_broker *b, bool mirror, const char *name, int how)
{
    pub *p = pub_new(b, mirror, name, how);
    bool found;
    if (!p)
        return;
    if (row_json(b, mirror, name, NULL, &p->json, &found) != 0) {
        pub_end(p, -1);
        return;
    }
    p->del = !found;
    if (p->del) {
        zk_txn *t = cl_zk_txn_new();
        if (!t) {
            BK_ERROR("out of memory deleting %s", p->path);
            pub_end(p, -1);
            return;
        }
        cl_zk_txn_delete(t, p->path, -1);
        cl_zk_txn_commit(b->zk, t, on_write, p);
    } else if (how == BK_PUB_INSERT) {
        cl_zk_create(b->zk, p->path, (const char *)p->json.data, (int)p->json.len, 0, on_write,
                     p);
    } else {
        pub_read(b, p);
    }
}

void cl_links_mirror_propose(bk_broker *b, const char *topic, const char *state,
                             void (*done)(bk_broker *b, void *arg, int rc, const char *now),
                             void *arg)
{
    pub *p = pub_new(b, true, topic, BK_PUB_UPDATE);
    if (!p || strlen(state) >= sizeof p->want) {
        free(p);
        done(b, arg, -1, "");
        return;
    }
    snprintf(p->want, sizeof p->want, "%s", state);
    p->done = done;
    p->arg = arg;
    pub_read(b, p);                      /* L9: the row's JSON, with state, at each try */
}

/* ---- a promotion's facts (link.c K11) ------------------------------------------------- */
static void on_told_written(bk_broker *b, const zk_result *r, void *arg)
{
    (void)b;
    (void)arg;
    if (r->rc != ZOK && r->rc != ZNODEEXISTS)
        BK_ERROR("zookeeper: cannot write a mirror partition's caught-up fact: %s; the "
                 "promotion waits for its next answer", cl_zk_rc_str(r->rc));
}

void cl_links_caught_up(bk_broker *b, const char *fact)
{
    char path[sizeof TOLD + 64];
    snprintf(path, sizeof path, TOLD "/%.60s", fact);
    cl_zk_create(b->zk, path, "", 0, 0, on_told_written, NULL);
}

static void on_told_deleted(bk_broker *b, const zk_result *r, void *arg)
{
    (void)b;
    (void)arg;
    (void)r;                                         /* the next listing tries again */
}

/* A fact's topic id, from the hex before the first '.'; false if not one. */
static bool told_id(const char *name, uint8_t id[16])
{
    for (int k = 0; k < 16; k++) {
        unsigned v;
        if (sscanf(name + 2 * k, "%2x", &v) != 1)
            return false;
        id[k] = (uint8_t)v;
    }
    return name[32] == '.';
}

/* Deletes the children of folder (r's listing) named after a topic that no
 * longer exists ("<topic id hex>.<...>"). */
static void sweep_gone(bk_broker *b, const char *folder, const zk_result *r)
{
    for (int k = 0; k < r->nchildren; k++) {
        uint8_t id[16];
        if (told_id(r->children[k], id) && view_topic_find_id(b, id))
            continue;
        char path[sizeof LOCAL + 256];
        snprintf(path, sizeof path, "%s/%.200s", folder, r->children[k]);
        zk_txn *t = cl_zk_txn_new();
        if (t) {
            cl_zk_txn_delete(t, path, -1);           /* its topic went */
            cl_zk_txn_commit(b->zk, t, on_told_deleted, NULL);
        }
    }
}

static void on_told(bk_broker *b, const zk_result *r, void *arg)
{
    void (*told)(bk_broker *, char *const *, int) = *(void (**)(bk_broker *, char *const *,
                                                                  int))arg;
    free(arg);
    if (r->rc != ZOK)
        return;                                      /* the next second's listing */
    sweep_gone(b, TOLD, r);
    told(b, r->children, r->nchildren);
}

static void on_local_listed(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    if (r->rc == ZOK)
        sweep_gone(b, LOCAL, r);
}

void cl_links_told_list(bk_broker *b, void (*told)(bk_broker *b, char *const *names, int n))
{
    void (**arg)(bk_broker *, char *const *, int) = malloc(sizeof *arg);
    if (!arg)
        return;
    *arg = told;
    cl_zk_children(b->zk, TOLD, false, on_told, arg);
    cl_zk_children(b->zk, LOCAL, false, on_local_listed, NULL);
}

/* ---- a mirror partition's first local epoch (link.c K17) ----------------------------- */
typedef struct local_ask {
    char path[sizeof LOCAL + 64];
    int32_t epoch;                       /* proposed */
    int tries;
    void (*done)(bk_broker *b, void *arg, int32_t epoch);
    void *arg;
} local_ask;

static void local_create(bk_broker *b, local_ask *x);

static void local_end(bk_broker *b, local_ask *x, int32_t epoch)
{
    x->done(b, x->arg, epoch);
    free(x);
}

static void on_local_read(bk_broker *b, const zk_result *r, void *arg)
{
    local_ask *x = arg;
    char text[16];
    char *end = NULL;
    long v = -1;
    if (r->rc == ZNONODE && ++x->tries < 3) {
        local_create(b, x);                          /* swept meanwhile: made again */
        return;
    }
    if (r->rc == ZOK && r->len > 0 && r->len < (int)sizeof text) {
        memcpy(text, r->data, (size_t)r->len);
        text[r->len] = 0;
        v = strtol(text, &end, 10);
        if (*end || v < 0 || v > INT32_MAX)
            v = -1;
    }
    if (v < 0)
        BK_ERROR("zookeeper: %s: cannot read a first local epoch (%s); asked again in a "
                 "second", x->path, r->rc == ZOK ? "not a number" : cl_zk_rc_str(r->rc));
    local_end(b, x, (int32_t)v);
}

static void on_local_created(bk_broker *b, const zk_result *r, void *arg)
{
    local_ask *x = arg;
    if (r->rc == ZOK) {
        local_end(b, x, x->epoch);
    } else if (r->rc == ZNODEEXISTS) {
        cl_zk_get(b->zk, x->path, false, on_local_read, x);   /* another leader's first */
    } else {
        BK_ERROR("zookeeper: cannot write %s: %s; asked again in a second", x->path,
                 cl_zk_rc_str(r->rc));
        local_end(b, x, -1);
    }
}

static void local_create(bk_broker *b, local_ask *x)
{
    char text[16];
    int n = snprintf(text, sizeof text, "%d", (int)x->epoch);
    cl_zk_create(b->zk, x->path, text, n, 0, on_local_created, x);
}

void cl_links_local_epoch(bk_broker *b, const char *key, int32_t epoch,
                          void (*done)(bk_broker *b, void *arg, int32_t epoch), void *arg)
{
    local_ask *x = calloc(1, sizeof *x);
    if (!x || strlen(key) > 60) {
        free(x);
        done(b, arg, -1);
        return;
    }
    snprintf(x->path, sizeof x->path, LOCAL "/%s", key);
    x->epoch = epoch;
    x->done = done;
    x->arg = arg;
    local_create(b, x);
}
