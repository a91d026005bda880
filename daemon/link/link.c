/*
 * daemon/link/link.c — cluster links and mirror topics (issue 33): the
 * model, its rows in SQLite, the SQL writes, the mirror topics' states.
 * The connections to the source (the bootstrap servers in turn for
 * Metadata and configs, one per source broker that leads a mirrored
 * partition for Fetch and OffsetForLeaderEpoch) and what travels on them,
 * the source's leader changes and truncations followed: link_conn.c.
 *
 * A link is a name, the source's bootstrap servers and client settings in
 * Kafka's property names (security.protocol PLAINTEXT, SSL, SASL_PLAINTEXT
 * or SASL_SSL; sasl.mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with
 * sasl.jaas.config or sasl.username / sasl.password; ssl.ca.location (or
 * ssl.truststore.location: a PEM file of CAs, as the broker's own; no CA:
 * the system's), ssl.certificate.location and ssl.key.location (or
 * ssl.keystore.location: one PEM with both), ssl.key.password,
 * ssl.truststore.type / ssl.keystore.type PEM only (JKS, PKCS12 refused),
 * ssl.endpoint.identification.algorithm https (the default) or empty
 * (link_conn.c C7: the files are read and checked at INSERT);
 * fetch.max.wait.ms, fetch.min.bytes, fetch.max.bytes,
 * max.partition.fetch.bytes, metadata.max.age.ms, reconnect.backoff.ms,
 * reconnect.backoff.max.ms, client.id).  A mirror topic is a local topic
 * that its link creates with the source topic's partition count and topic
 * config overrides, and fills from it at the source's offsets.
 *
 * States of a mirror topic (mirror_topics.state), and who moves them:
 *
 *   active ◄──link_mirror_state──► paused
 *     │  └──────────────┬──────────────┘
 *     │        'promoted' (link_mirror_state)
 *     │                 ▼
 *     │             promoting ──caught up (lk_mirror_progress)──► promoted
 *     └─'failed_over' (link_mirror_state, from any of the three) ──► failed_over
 *   (creation refused: the name taken meanwhile, configs refused) ──► failed
 *
 * Invariants:
 *   K1. A mirror topic refuses producers (INVALID_REQUEST with an
 *       ErrorMessage) until it is promoted or failed over; from then on it
 *       is a normal topic and nothing is appended to it by the link.
 *   K2. The link appends to a mirror partition only what the source
 *       answered for the offset that is the partition's log end when the
 *       answer arrives (link_conn.c), whole batches, unchanged: offsets,
 *       producer ids, sequences, timestamps and CRCs are the source's.  The
 *       answer may start past that log end where the source's cleaner
 *       removed batches: the offsets between stay a gap, as in the
 *       source (segments/log.c L7), and the lag counts from the new end.
 *   K3. 'promoted' is reached only after an answer of the source, to a
 *       Fetch sent after the promotion was asked (lk_part.answers_due: not
 *       the last answer before a pause), in which every partition's high
 *       watermark equals the mirror's log end (the
 *       mirror had everything the source had then); 'failed_over' at once.
 *   K4. Secret settings (link_setting_secret) are stored apart
 *       (cluster_links.secrets), which the SQL authorizer refuses to
 *       every reader; cluster_links.config shows them masked.  They are
 *       stored sealed (daemon/security/sec_pwenc.c: AES-256-GCM under
 *       password.encoder.secret, the link's name bound in), in SQLite and
 *       in ZooKeeper alike; only the model (lk_link) holds them open.  The
 *       row's sealed text is what travels and is compared (K13 sums the
 *       opened text, so sealing again changes nothing).  A row from before
 *       (plain) or sealed with password.encoder.old.secret is sealed again
 *       at start (reseal_stale, which then scrubs the WAL; cluster mode
 *       publishes it over the znode, never making one: a link deleted on
 *       another broker while this one was down is dropped here,
 *       cluster_links.c L8).  Cluster
 *       mode refuses a link with secrets without password.encoder.secret;
 *       a row that does not open (wrong or missing secret) leaves the link
 *       stopped, with the reason in the log and in cluster_links.last_error.
 *   K5. The source log ends (the lag's other half) reach SQLite on a
 *       one-second timer, only what changed: no SQLite per fetch.
 *   K7. No producer id of a batch copied into a mirror is ever handed out
 *       here: before the append, the producer id floor is saved above the
 *       largest (bk_producer_id_floor), so a producer of the promoted topic
 *       is never taken for the source's.  Cluster mode: the floor is the
 *       cluster's, in ZooKeeper, raised before the append (the answer is
 *       asked again meanwhile), and every broker cuts the blocks it holds
 *       at it and learns it before it applies the state that promotes the
 *       mirror (daemon/cluster/cluster_producer_ids.c PB4-PB7).
 *   K8. 'promoted' also waits until no transaction of the source is open
 *       in the mirror (the source ends it, and its marker comes); at
 *       'failed_over' each one still open gets an ABORT marker here, as a
 *       coordinator's: a read_committed consumer never waits forever.
 *   K6. Cluster mode: links and mirror topics are cluster-wide facts in
 *       ZooKeeper (daemon/cluster/cluster_links.c).  A SQL write runs on
 *       the broker that got the statement, exactly as standalone (checked
 *       against this broker's model, stored in its SQLite), and is then
 *       published (b->store->link_publish, asynchronous: no ZooKeeper
 *       round trip on the loop).  Every other broker's apply half stores
 *       the row and calls link_sync, which makes its model match the rows
 *       (links, mirrors, states) without publishing again.  The state
 *       changes a broker makes by itself are published the same way:
 *       'failed' (only the controller creates mirror topics, adds their
 *       partitions and syncs their configs: one writer) and 'promoted'
 *       (K11).  A link's
 *       last_error and the source log ends are each broker's own (the
 *       connection and the partitions it leads), not facts.
 *   K9. Cluster mode: each broker fetches only the mirror partitions it
 *       leads, not fenced (link_conn.c send_fetch, and link_conn.c C1,
 *       ask the view at each request), so a leadership move (an election,
 *       a SIGKILLed leader) makes the new leader continue from its own log end
 *       (within a second: on_tick wakes an idle link); its followers
 *       replicate the appended batches as any other.
 *   K10. Cluster mode: 'failed_over' is taken by every broker at once;
 *       each aborts the source's open transactions (K8) of the partitions
 *       it leads when it applies it, and again once a second (on_tick) for
 *       those it leads by then (a leaderless moment, a broker started with
 *       the row): a marker is appended at once, so a transaction it ended
 *       is no longer open and none is aborted twice.
 *   K11. Cluster mode's 'promoted': the controller decides, from facts the
 *       leaders write (daemon/cluster/cluster_links.c): the leader of a
 *       promoting mirror partition, once it saw K3 and K8 hold for it,
 *       writes "<topic id>.<partition>.<its leader epoch>" (once per epoch);
 *       the controller lists the facts once a second while a mirror
 *       promotes, and publishes 'promoted' when every partition has one
 *       for the leader epoch its view shows now (a leader that took over
 *       since must tell again, from its own log end).  Every broker stops
 *       fetching when it applies 'promoted'; what a leader appended between
 *       its fact and then is still the source's, at the source's offsets
 *       (K2).  A promoting mirror goes on to 'promoted' or 'failed_over'
 *       only (no way back to active or paused in cluster mode), so a fact
 *       never counts for another promotion.  A leader's fact also needs
 *       the partition's high watermark at the source's end (part_caught_up):
 *       a leader dying after its fact loses nothing its followers lack.
 *   K12. Cluster mode takes 'promoted' (K11) and 'failed_over' (K10) as
 *       standalone does; K7's floor holds across the brokers.  A producer
 *       id handed out before its source id was copied here (the two
 *       clusters allot ids independently) is kept apart by K17.
 *   K14. A mirror's epoch history is the source's (link_conn.c C5), so
 *       when it leaves mirroring the leader of each partition makes its
 *       leader epoch fresh before anything is appended here: above the
 *       log's latest epoch, then assigned at the log end.  Standalone: the
 *       partition's stored leader epoch (partitions.leader_epoch, 0 until
 *       then) becomes latest + 1 at once (view_partition_epochs_set, one
 *       write for all partitions, before
 *       the state change returns; a failed write keeps producers out by
 *       min_epoch and is retried each second); nothing raises it after,
 *       so a restart finds it above 0 and the log's latest, and only
 *       assigns it again (replica.c does at open).  Cluster mode: the
 *       state znode (repl_isr_epoch_raise, as an ISR change is written),
 *       once: "fresh" is above the log's latest epoch as the duty first
 *       found it led here (lk_part.source_epoch), since the leader assigns
 *       its new epoch at the log end as soon as the raise lands (compared
 *       with the latest, the duty raised again every second).  Until then
 *       (p->min_epoch) a producer is answered NOT_LEADER_OR_FOLLOWER
 *       (retriable) and a failover's ABORT markers wait (K10's next
 *       second), so no local batch shares an epoch with the source's or
 *       goes below one (epochs.c E1 would drop the history).  Each broker
 *       does it for the partitions it leads when it takes the state, and
 *       once a second after for those it leads by then (on_tick, and at
 *       once where a view change makes it lead: link_mirror_led); a copy
 *       not led here is guarded meanwhile (min_epoch above its log's latest
 *       epoch), so it takes no local batch at the source's epoch should it
 *       lead before the next second.  The duty is taken again for a mirror
 *       loaded in 'promoted' / 'failed_over' (a restart: the leader may have
 *       applied the state and died before its raise landed); where the
 *       leader epoch is above the log's already, that costs only the
 *       assignment at the log end, else one more raise.
 *   K13. A row applied from another broker is compared whole: a link whose
 *       bootstrap.servers or settings differ from the row (an UPDATE, K16;
 *       deleted and created again while this broker was away) is made
 *       again from it and its mirrors go on under it (link_replace: not
 *       dropped; those whose rows went are dropped by their own rows); a
 *       mirror in promoted, failed_over or failed never takes another
 *       state from a row (cluster_links.c applies none either).
 *   K15. Cluster mode: a terminal state (promoted, failed_over, failed) is
 *       proposed, not taken (mirror_finish; cluster_links.c L9): ZooKeeper
 *       takes it by compare-and-set first, and this broker takes it only
 *       then, as the others do.  When another terminal state got there
 *       first, this broker takes that one, and the statement that asked
 *       (UPDATE ... 'failed_over') answers an error naming it: a broker
 *       never acts on (ABORT markers, epochs) nor reports a terminal state
 *       the cluster does not hold.  Other states are taken first and
 *       published after (K6), the cluster's rules applied then.
 *   K16. UPDATE cluster_links SET bootstrap_servers, config (link_update):
 *       the new settings pass INSERT's checks with its texts (link_build)
 *       and are sealed as INSERT's (K4); a secret written back as SELECT
 *       shows it (k=[hidden]) keeps its stored value, only while the
 *       UPDATE changes neither bootstrap_servers nor a setting that says
 *       where and how a secret goes (kept_guards: sasl.mechanism,
 *       security.protocol, ssl.ca.location, ssl.truststore.location,
 *       ssl.endpoint.identification.algorithm; kept_rule): else refused,
 *       naming the rule, so a kept secret never goes to a host, or in a
 *       form (PLAIN in clear), its giver did not give it for; given again,
 *       it goes where the UPDATE says.  The kept values and the apply are
 *       two loop turns apart (the worker reads the files between): the
 *       apply checks the row is still the one they were taken from
 *       (kept_base: its settings and bootstrap servers summed, as K13's
 *       row_sum), else refuses "changed meanwhile" (another session's
 *       UPDATE, a ZooKeeper row) and writes no old secret back.  The certificate
 *       files are read off the loop as INSERT's are: the SQL worker first
 *       has the loop fill the kept values in (link_config_kept; it holds
 *       them open as it holds an INSERT's text, and cleanses them), then
 *       reads the files with the whole config (a caller without that
 *       worker: read at the first connect, link_conn.c C7).  A refused
 *       UPDATE changes nothing: the link runs on.  The row is changed in
 *       place (name, state, created_at kept; last_error cleared: the new
 *       connection tells its own), one log line names what changed (the
 *       settings' names, never a value), and the link is made again with
 *       its mirrors going on under it (K13's link_replace: states kept,
 *       each partition from its own log end, K2).  Cluster mode: published
 *       as an UPDATE (compare-and-set, cluster_links.c L6; a link deleted
 *       meanwhile stays deleted, cluster_links.c L8); every broker applies
 *       it (K13).
 *   K18. A link is bound to its source's cluster id (as Confluent's): the
 *       ClusterId of the first Metadata answer that has one is recorded
 *       (lk_link.cluster_id; cluster_links.source_cluster_id in SQLite,
 *       sql/migrations/0013), and an answer with another id (or none, once
 *       one is recorded) is not used: no partition routed, nothing cut or
 *       fetched, the bootstrap connection fails with last_error "the source
 *       at X is cluster B, the link was made for cluster A" (link_conn.c
 *       C8, C3: logged once, backoff), until bootstrap_servers names the
 *       cluster again.  The id survives an UPDATE (the row's column is not
 *       among the settings; link_replace hands it to the new link) and a
 *       restart.  A source that gives no id (Kafka before 0.10.1) is
 *       mirrored unchecked, with a warning once.  Cluster mode: the id is
 *       the link's znode's (cluster_links.c L10): the first broker that
 *       binds publishes it, every broker takes it, so all check against
 *       one cluster, and a link made again under the same name while a
 *       broker was down starts unbound there too.
 *   K17. The source's producer state never judges a local batch: a
 *       partition of a mirror that left mirroring has a local start (the
 *       start of K14's fresh epoch in its history: the source's batches
 *       are all below it, the local ones at or above), and every producer
 *       last seen below it without an open transaction is the source's
 *       (replica_producers.c P9): a local producer with its id starts
 *       afresh, as one whose state expired, so a destination producer
 *       given id n before the source's n was copied is neither taken for a
 *       duplicate nor refused as out of order.  Producers of the source with
 *       a transaction open (K8: only between 'failed_over' and its ABORT
 *       markers) are kept until the marker.  Standalone the local start is
 *       found again after a restart (the stored epoch's entry, K14) and
 *       applied after the state's replay (replica_producers_local_start).
 *       Cluster mode: a partition's first local epoch F is a fact of
 *       the cluster (cluster_links.c: /sluice/mirror_local_epochs/<topic
 *       id hex>.<partition>, made once, never rewritten: no election or
 *       ISR write carries it).  The first leader whose K14 raise landed
 *       proposes its leader epoch; every leader after (a takeover, a
 *       restart: the duty is taken again, K14) proposes its own and reads
 *       the one there.  Each derives the local start from its own history:
 *       the start of the first entry at or above F (F's entry, replicated
 *       with the first local batch; before any local batch the leader's
 *       own epoch at its log end: every batch is the source's).  A leader
 *       takes no local batch from its raise until ZooKeeper answered and
 *       the duty set the local start (min_epoch held, NOT_LEADER meanwhile;
 *       the answer is handled on the loop, no round trip blocks it; a
 *       failed one is asked again at the next second), so no local batch
 *       exists before F is in ZooKeeper, and all source epochs are below
 *       F (F is above the log's latest when the raise was asked).
 *
 * Not built yet (issue 33's later parts):
 *   - An upgrade from a binary before K14's standalone epoch: a mirror it
 *     promoted has stored epoch 0 and local batches under it, so the first
 *     start of this one raises the epoch at the log end and K17 takes the
 *     log end for the local start: a local producer's retry of its last
 *     batch across that one restart is appended again (once, at upgrade).
 *     Cluster mode alike: such a mirror gets its first-local-epoch znode
 *     from the next leader's duty, above the local batches it already
 *     has, whose producers then start afresh once.
 *   - Standalone, the fresh epochs are one md_commit (view_partition_epochs_set,
 *     no fsync on the loop) made durable by the sync worker's next
 *     fdatasync, while producers are let in at once: a power cut in that
 *     moment brings the stored epoch back to 0, the upgrade case above.
 *   - Cluster mode: /sluice/mirror_local_epochs znodes of a deleted topic
 *     are swept only while some mirror promotes (the controller lists the
 *     K11 facts then); each answer runs the mirror's whole duty loop
 *     (partitions already done cost a flag test).
 *   - K7: mirrors filled before the cluster floor existed raised no floor
 *     in ZooKeeper.  A floor raised while 'failed_over' is being written
 *     (its zxid after the state's) reaches the other brokers just after
 *     the state, and the leader may append the batch it waited for in
 *     between (K11's window): a broker could hand out one of its ids in
 *     that moment.  K17 makes either harmless in the promoted partitions
 *     (a local producer with a source's id starts afresh there), unless
 *     that id's source transaction is still open there (between
 *     'failed_over' and its ABORT marker, K8).
 */
#include "daemon/link/link_int.h"
#include "daemon/security/sec_pwenc.h"
#include "daemon/view/view.h"
#include "daemon/view/view_store.h"
#include "daemon/replica/replica.h"
#include "daemon/replica/replica_producers.h"
#include "daemon/replica/replica_txn.h"
#include "daemon/replication/repl_isr.h"

#include <event2/dns.h>
#include <event2/event.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LK_MASK LINK_MASK

#define LK_MARKER_TIMEOUT_MS 30000      /* a failover's ABORT markers */

static lk_set *set_of(bk_broker *b) { return b->links; }

/* K6: the row of name (a mirror topic's or a link's) to the other brokers. */
static void publish_row(bk_broker *b, bool mirror, const char *name, int how)
{
    if (b->store && b->store->link_publish)
        b->store->link_publish(b, mirror, name, how);
}

static void publish(bk_broker *b, bool mirror, const char *name)
{
    publish_row(b, mirror, name, BK_PUB_UPDATE);
}

/* K6: cluster mode's single writer of the topics of mirrors. */
static bool topic_writer(bk_broker *b)
{
    return !bk_cluster_mode(b) || view_controller_id(b) == b->cfg->broker_id;
}

/* K9: partition i of m's topic as this broker copies it (it leads it, not
 * fenced or held: as a producer's append would be taken); NULL: not here. */
bk_partition *lk_copies(const lk_mirror *m, int32_t i)
{
    bk_partition *p;
    return view_leader_replica(m->link->b, kp_str_cstr(m->topic), i, &p) == KP_NONE ? p : NULL;
}

static const char *state_name(enum lk_mstate s)
{
    static const char *const names[] = { "active", "paused", "promoting", "promoted",
                                         "failed_over", "failed" };
    return names[s];
}

static int state_parse(const char *s, enum lk_mstate *out)
{
    for (int i = LK_ACTIVE; i <= LK_FAILED; i++)
        if (s && !strcmp(s, state_name(i))) {
            *out = i;
            return 0;
        }
    return -1;
}

bool link_setting_secret(const char *name)
{
    return strstr(name, "password") || strstr(name, "secret") || strstr(name, "jaas") ||
           !strncmp(name, "ssl.key", 7);
}

/* The value of key="value" (or key=value) in s, into out. */
static bool jaas_field(const char *s, const char *key, char *out, size_t len)
{
    size_t kl = strlen(key);
    for (const char *p = strstr(s, key); p; p = strstr(p + 1, key)) {
        if ((p > s && p[-1] != ' ' && p[-1] != '\t' && p[-1] != ';') || p[kl] != '=')
            continue;
        const char *v = p + kl + 1, *e;
        if (*v == '"')
            e = strchr(++v, '"');
        else
            e = v + strcspn(v, " ;\t");
        if (!e || (size_t)(e - v) >= len)
            return false;
        memcpy(out, v, (size_t)(e - v));
        out[e - v] = 0;
        return true;
    }
    return false;
}

bool link_jaas_plain(const char *jaas, char *user, size_t ulen, char *pass, size_t plen)
{
    return jaas_field(jaas, "username", user, ulen) && jaas_field(jaas, "password", pass, plen);
}

/* ---- settings ---------------------------------------------------------------- */
static const char *const known_settings[] = {
    "security.protocol", "sasl.mechanism", "sasl.jaas.config", "sasl.username",
    "sasl.password", "client.id", "fetch.max.wait.ms", "fetch.min.bytes", "fetch.max.bytes",
    "max.partition.fetch.bytes", "metadata.max.age.ms", "reconnect.backoff.ms",
    "reconnect.backoff.max.ms", "ssl.ca.location", "ssl.truststore.location",
    "ssl.certificate.location", "ssl.key.location", "ssl.keystore.location",
    "ssl.key.password", "ssl.endpoint.identification.algorithm", "ssl.truststore.type",
    "ssl.keystore.type", NULL
};

/* A file setting's value into out (a path; its reading is checked at
 * INSERT by lk_conn_tls). */
static bool setting_path(const char *v, char *out, size_t len)
{
    return snprintf(out, len, "%s", v) < (int)len;
}

/* The ssl.* settings (link_conn.c C7): KP_NONE, KP_INVALID_CONFIG with
 * err, or -1 when k is not one of them. */
static int setting_ssl(lk_link *l, const char *k, const char *v, char *err, size_t errlen)
{
    bool ok;
    if (!strcmp(k, "ssl.ca.location") || !strcmp(k, "ssl.truststore.location")) {
        ok = setting_path(v, l->ssl_ca, sizeof l->ssl_ca);
        l->ssl_ca_key = !strcmp(k, "ssl.ca.location") ? "ssl.ca.location"
                                                      : "ssl.truststore.location";
    } else if (!strcmp(k, "ssl.truststore.type") || !strcmp(k, "ssl.keystore.type")) {
        if (strcasecmp(v, "PEM")) {
            snprintf(err, errlen, "cluster_links.config: %s=%s: links read PEM files only "
                     "(convert a JKS or PKCS12 store with keytool / openssl)", k, v);
            return KP_INVALID_CONFIG;
        }
        ok = true;
    } else if (!strcmp(k, "ssl.certificate.location") || !strcmp(k, "ssl.keystore.location")) {
        ok = setting_path(v, l->ssl_cert, sizeof l->ssl_cert);
        l->ssl_cert_key = !strcmp(k, "ssl.keystore.location") ? "ssl.keystore.location"
                                                              : "ssl.certificate.location";
    } else if (!strcmp(k, "ssl.key.location"))
        ok = setting_path(v, l->ssl_key, sizeof l->ssl_key);
    else if (!strcmp(k, "ssl.key.password"))
        ok = setting_path(v, l->ssl_key_pass, sizeof l->ssl_key_pass);
    else if (!strcmp(k, "ssl.endpoint.identification.algorithm")) {
        /* Kafka's "https" or "" (off); librdkafka's "none" too. */
        ok = !strcasecmp(v, "https") || !v[0] || !strcmp(v, "none");
        l->ssl_check_host = !strcasecmp(v, "https");
        if (!ok) {
            snprintf(err, errlen, "cluster_links.config: ssl.endpoint.identification.algorithm="
                     "%s: https (the default: the certificate must name the host) or empty "
                     "(not checked)", v);
            return KP_INVALID_CONFIG;
        }
    } else
        return -1;
    if (!ok) {
        snprintf(err, errlen, "cluster_links.config: %s is too long", k);
        return KP_INVALID_CONFIG;
    }
    return KP_NONE;
}

static bool setting_int(const char *v, int64_t lo, int64_t hi, int64_t *out)
{
    char *e;
    long long x = strtoll(v, &e, 10);
    if (!*v || *e || x < lo || x > hi)
        return false;
    *out = x;
    return true;
}

/* One key=value of a link's settings into l (NULL: only checked).
 * KP_NONE or KP_INVALID_CONFIG with err. */
static int setting_apply(lk_link *l, const char *k, const char *v, char *err, size_t errlen)
{
    lk_link scratch;
    if (!l) {
        memset(&scratch, 0, sizeof scratch);
        l = &scratch;
    }
    int i = lk_sync_setting(l, k, v, err, errlen);       /* link_sync.c's settings */
    if (i >= 0 || (i = setting_ssl(l, k, v, err, errlen)) >= 0)
        return i;
    i = 0;
    while (known_settings[i] && strcmp(known_settings[i], k))
        i++;
    if (!known_settings[i]) {
        snprintf(err, errlen, "cluster_links.config: unknown setting '%s' (known: "
                 "security.protocol, sasl.mechanism, sasl.jaas.config, sasl.username, "
                 "sasl.password, ssl.ca.location, ssl.truststore.location, "
                 "ssl.certificate.location, ssl.key.location, ssl.keystore.location, "
                 "ssl.key.password, ssl.endpoint.identification.algorithm, "
                 "ssl.truststore.type, ssl.keystore.type, client.id, "
                 "fetch.*, max.partition.fetch.bytes, "
                 "metadata.max.age.ms, reconnect.backoff*, consumer.offset.sync.*, "
                 "consumer.offset.group.filters, auto.create.mirror.topics.*)", k);
        return KP_INVALID_CONFIG;
    }
    int64_t x = 0;
    bool ok = true;
    if (!strcmp(k, "security.protocol")) {
        /* Kafka's names; librdkafka takes them in any case. */
        ok = !strcasecmp(v, "PLAINTEXT") || !strcasecmp(v, "SASL_PLAINTEXT") ||
             !strcasecmp(v, "SSL") || !strcasecmp(v, "SASL_SSL");
        l->sasl = !strncasecmp(v, "SASL_", 5);
        l->tls = !strcasecmp(v, "SSL") || !strcasecmp(v, "SASL_SSL");
        if (!ok) {
            snprintf(err, errlen, "cluster_links.config: security.protocol=%s is not supported "
                     "(PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", v);
            return KP_INVALID_CONFIG;
        }
    } else if (!strcmp(k, "sasl.mechanism")) {
        if (strcmp(v, "PLAIN") && kp_scram_mech_parse(v) == SCRAM_UNKNOWN) {
            snprintf(err, errlen, "cluster_links.config: sasl.mechanism=%s is not supported "
                     "(PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", v);
            return KP_INVALID_CONFIG;
        }
        snprintf(l->mechanism, sizeof l->mechanism, "%s", v);
    } else if (!strcmp(k, "sasl.jaas.config")) {
        ok = link_jaas_plain(v, l->user, sizeof l->user, l->pass, sizeof l->pass);
    } else if (!strcmp(k, "sasl.username")) {
        ok = snprintf(l->user, sizeof l->user, "%s", v) < (int)sizeof l->user;
    } else if (!strcmp(k, "sasl.password")) {
        ok = snprintf(l->pass, sizeof l->pass, "%s", v) < (int)sizeof l->pass;
    } else if (!strcmp(k, "client.id")) {
        ok = true;
    } else if (!strcmp(k, "fetch.max.bytes") || !strcmp(k, "max.partition.fetch.bytes")) {
        if (!setting_int(v, 1, LK_FETCH_BYTES_MAX, &x)) {
            snprintf(err, errlen, "cluster_links.config: %s=%s: 1 to %d (an answer must fit "
                     "the link's %d MiB frame limit)", k, v, LK_FETCH_BYTES_MAX,
                     LK_FRAME_MAX >> 20);
            return KP_INVALID_CONFIG;
        }
        if (!strcmp(k, "fetch.max.bytes")) l->fetch_max_bytes = (int32_t)x;
        else l->partition_max_bytes = (int32_t)x;
    } else if (!strncmp(k, "fetch.", 6)) {
        ok = setting_int(v, !strcmp(k, "fetch.max.wait.ms") ? 0 : 1, INT32_MAX, &x);
        if (!strcmp(k, "fetch.max.wait.ms")) l->fetch_max_wait_ms = (int32_t)x;
        else l->fetch_min_bytes = (int32_t)x;
    } else {
        ok = setting_int(v, 1, INT32_MAX, &x);
        if (!strcmp(k, "metadata.max.age.ms")) l->metadata_max_age_ms = x;
        else if (!strcmp(k, "reconnect.backoff.ms")) l->backoff_ms = x;
        else l->backoff_max_ms = x;
    }
    if (!ok) {
        snprintf(err, errlen, "cluster_links.config: invalid value for %s", k);
        return KP_INVALID_CONFIG;
    }
    return KP_NONE;
}

/* Walks "k=v" lines (one per line: a JAAS value has ';' in it), applying
 * each to l (NULL: checked only); splits them into the shown (secrets
 * masked) and the secret lines when shown / secrets are given. */
static int settings_walk(lk_link *l, const char *text, char *shown, size_t slen,
                         char *secrets, size_t seclen, char *err, size_t errlen)
{
    size_t so = 0, sc = 0, cap = sizeof ((md_link_row *)0)->config;
    int rc = KP_NONE;
    char *line = NULL;
    if (shown) shown[0] = 0;
    if (secrets) secrets[0] = 0;
    for (const char *p = text ? text : ""; *p && rc == KP_NONE;) {
        size_t n = strcspn(p, "\n");
        if (n >= cap) {                  /* a line as long as the whole config may be */
            snprintf(err, errlen, "cluster_links.config: a line is longer than %zu bytes "
                     "(the whole config's limit)", cap - 1);
            rc = KP_INVALID_CONFIG;
            break;
        }
        if (!line && !(line = malloc(cap))) {
            snprintf(err, errlen, "out of memory");
            rc = KP_UNKNOWN_SERVER_ERROR;
            break;
        }
        memcpy(line, p, n);
        line[n] = 0;
        p += n + (p[n] == '\n');
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        size_t e = strlen(s);
        while (e && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) s[--e] = 0;
        if (!*s || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "cluster_links.config: '%.64s' is not key=value (one per "
                     "line)", s);
            rc = KP_INVALID_CONFIG;
            break;
        }
        *eq = 0;
        /* A stored config's masked value: the secret line after it sets it. */
        rc = !strcmp(eq + 1, LK_MASK) && !shown ? KP_NONE
                                                 : setting_apply(l, s, eq + 1, err, errlen);
        if (rc != KP_NONE)
            break;
        bool secret = link_setting_secret(s);
        if (shown)
            so += (size_t)snprintf(shown + so, so < slen ? slen - so : 0, "%s=%s\n", s,
                                   secret ? LK_MASK : eq + 1);
        if (secrets && secret)
            sc += (size_t)snprintf(secrets + sc, sc < seclen ? seclen - sc : 0, "%s=%s\n", s,
                                   eq + 1);
        if ((shown && so >= slen) || (secrets && sc >= seclen)) {
            snprintf(err, errlen, "cluster_links.config is too long (at most %zu bytes, its "
                     "secret lines %zu)", slen - 1, seclen - 1);
            rc = KP_INVALID_CONFIG;
        }
    }
    free(line);
    return rc;
}

static void link_defaults(lk_link *l)
{
    l->fetch_max_wait_ms = 500;
    l->fetch_min_bytes = 1;
    l->fetch_max_bytes = 50 << 20;
    l->partition_max_bytes = 1 << 20;
    l->metadata_max_age_ms = 5000;
    l->backoff_ms = 500;
    l->backoff_max_ms = 10000;
    snprintf(l->mechanism, sizeof l->mechanism, "PLAIN");
    l->ssl_check_host = true;            /* Kafka's default: https */
    lk_sync_defaults(l);
}

int lk_bootstrap_nth(const char *s, int i, char *host, size_t hlen, int *port, int *count,
                     char *err, size_t errlen)
{
    int n = 0, rc = KP_NONE;
    for (const char *at = s ? s : ""; rc == KP_NONE; n++) {
        size_t len = strcspn(at, ",");
        const char *colon = len ? memrchr(at, ':', len) : NULL;
        char *e;
        long p = colon ? strtol(colon + 1, &e, 10) : 0;
        if (!colon || colon == at || (size_t)(colon - at) >= hlen || p <= 0 || p > 65535 ||
            e != at + len) {
            snprintf(err, errlen, "cluster_links.bootstrap_servers must be "
                     "host:port[,host:port…] (got '%.100s')", s ? s : "NULL");
            rc = KP_INVALID_CONFIG;
            break;
        }
        if (n == i || i < 0) {
            memcpy(host, at, (size_t)(colon - at));
            host[colon - at] = 0;
            *port = (int)p;
        }
        if (!at[len])
            break;
        at += len + 1;
    }
    *count = n + 1;
    return rc;
}

/* ---- the model ----------------------------------------------------------------- */
static lk_link *link_find(lk_set *s, const char *name)
{
    for (lk_link *l = s ? s->links : NULL; l; l = l->next)
        if (!strcmp(l->name, name))
            return l;
    return NULL;
}

static lk_mirror *mirror_find(lk_set *s, const char *topic)
{
    for (lk_mirror *m = s ? s->mirrors : NULL; m; m = m->next)
        if (!strcmp(m->topic, topic))
            return m;
    return NULL;
}

/* A link from its row: settings applied over the defaults (the stored
 * config, secrets masked, then the secret lines). */
/* K4: the row's secret lines opened into plain (sizeof row->secrets). */
static int row_secrets(bk_broker *b, const md_link_row *row, char *plain, bool *stale,
                       char *err, size_t errlen)
{
    return sec_pwenc_open(b->pwenc, row->name, row->secrets, plain, sizeof row->secrets,
                          stale, err, errlen);
}

/* K13: a link's settings, summed (FNV-1a over config and the opened
 * secrets: K4's sealing again is no change). */
static uint64_t row_sum(bk_broker *b, const md_link_row *row)
{
    uint64_t h = 1469598103934665603ULL;
    char plain[sizeof row->secrets], err[MD_ERRLEN];
    bool stale;
    const char *parts[] = { row->config, "\n--\n",
                            row_secrets(b, row, plain, &stale, err, sizeof err) == 0
                            ? plain : row->secrets };
    for (size_t k = 0; k < sizeof parts / sizeof *parts; k++)
        for (const unsigned char *c = (const unsigned char *)parts[k]; *c; c++)
            h = (h ^ *c) * 1099511628211ULL;
    memset(plain, 0, sizeof plain);
    return h;
}

static lk_link *link_new(lk_set *s, const md_link_row *row, char *err, size_t errlen)
{
    char plain[sizeof row->secrets];
    bool stale;
    if (row_secrets(s->b, row, plain, &stale, err, errlen) != 0)
        return NULL;                     /* K4: the reason names the setting */
    lk_link *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "out of memory");
        memset(plain, 0, sizeof plain);
        return NULL;
    }
    l->b = s->b;
    l->set = s;
    link_defaults(l);
    snprintf(l->name, sizeof l->name, "%s", row->name);
    snprintf(l->last_error, sizeof l->last_error, "%s", row->last_error);
    snprintf(l->bootstrap, sizeof l->bootstrap, "%s", row->bootstrap);
    snprintf(l->cluster_id, sizeof l->cluster_id, "%s", row->source_cluster);   /* K18 */
    l->row_sum = row_sum(s->b, row);
    lk_conn_init(l);
    /* The masked values are overwritten by the secret lines after them. */
    bool bad = lk_bootstrap_nth(row->bootstrap, 0, l->boot.host, sizeof l->boot.host,
                                &l->boot.port, &l->nboot, err, errlen) ||
               settings_walk(l, row->config, NULL, 0, NULL, 0, err, errlen) != KP_NONE ||
               settings_walk(l, plain, NULL, 0, NULL, 0, err, errlen) != KP_NONE;
    memset(plain, 0, sizeof plain);
    if (bad) {
        lk_conn_free(l);
        free(l);
        return NULL;
    }
    l->next = s->links;
    s->links = l;
    return l;
}

static void link_free(lk_link *l)
{
    lk_conn_free(l);
    lk_sync_free(l);
    free(l);
}

static lk_mirror *mirror_new(lk_set *s, lk_link *l, const char *topic, const char *source,
                             enum lk_mstate st)
{
    lk_mirror *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->link = l;
    snprintf(m->topic, sizeof m->topic, "%s", topic);
    snprintf(m->source, sizeof m->source, "%s", source);
    m->state = st;
    m->next = s->mirrors;
    s->mirrors = m;
    s->nmirrors++;
    return m;
}

/* A mirror going away (its row deleted) while K14 / K17 held its
 * producers (min_epoch, until a duty nothing runs once the mirror is
 * gone): let go.  Cluster mode still never appends under an epoch below
 * the log's latest (api_produce.c); standalone the hold is only a failed
 * epoch store's, a double failure the history's loss is left to. */
static void mirror_release(lk_mirror *m)
{
    for (int32_t i = 0; i < m->nparts; i++) {
        const bk_pview *v = view_partition(m->link->b, kp_str_cstr(m->topic), i);
        if (v && v->local)
            v->local->min_epoch = 0;
    }
}

static void mirror_unlink(lk_set *s, lk_mirror *m)
{
    for (lk_mirror **pp = &s->mirrors; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            s->nmirrors--;
            break;
        }
    free(m->parts);
    free(m);
}

bool lk_mirror_fetching(const lk_mirror *m)
{
    return m->created && (m->state == LK_ACTIVE || m->state == LK_PROMOTING);
}

/* K14: whether p's leader epoch is the fresh one already.  Standalone
 * the stored epoch is 0 until K14 raises it, and nothing raises it after,
 * so a raised one is the log's latest from then on (a restart finds it
 * so).  Cluster mode: above the log's latest epoch when the duty first
 * found the partition led here (the leader assigns its own epoch at the
 * log end as soon as the raise lands, repl_isr.c, so the latest is no
 * test after); a takeover or a restart that assigned first costs one more
 * raise (K14's note). */
static bool epoch_fresh(bk_broker *b, const bk_partition *p, const lk_part *lp,
                        int32_t latest)
{
    return bk_cluster_mode(b) ? p->leader_epoch > lp->source_epoch
                              : p->leader_epoch > 0 && p->leader_epoch >= latest;
}

/* K14 standalone: the fresh epoch of every due partition not fresh yet
 * stored in one write (view_partition_epochs_set: one commit and one apply
 * of the topic, however many partitions); a failure holds their producers
 * (min_epoch) until the next second's try. */
static void mirror_epochs_store(lk_mirror *m)
{
    bk_broker *b = m->link->b;
    int32_t *ep = malloc((size_t)(m->nparts > 0 ? m->nparts : 1) * sizeof *ep);
    int32_t n = 0;
    for (int32_t i = 0; ep && i < m->nparts; i++) {
        bk_partition *p = m->parts[i].epoch_due ? lk_copies(m, i) : NULL;
        int32_t latest = p ? seg_epoch_latest(p->log) : -1;
        ep[i] = !p || epoch_fresh(b, p, &m->parts[i], latest) ? -1
              : latest >= 0 ? latest + 1 : 1;                   /* above 0 */
        n += ep[i] >= 0;
    }
    char err[MD_ERRLEN];
    if (ep && n && view_partition_epochs_set(b, m->topic, ep, m->nparts, err, sizeof err) != KP_NONE) {
        for (int32_t i = 0; i < m->nparts; i++) {
            bk_partition *p = ep[i] >= 0 ? lk_copies(m, i) : NULL;
            if (p && p->min_epoch < ep[i])
                p->min_epoch = ep[i];    /* producers wait: retried on_tick */
        }
        BK_ERROR("mirror topic %s: cannot store the leader epochs above the source's of %d "
                 "partition%s: %s", m->topic, (int)n, n == 1 ? "" : "s", err);
    }
    free(ep);
}

static bool mirror_left(enum lk_mstate st)
{
    return st == LK_PROMOTED || st == LK_FAILED_OVER;
}

static void mirror_epochs(lk_mirror *m);

/* K11, K17: a partition's name in ZooKeeper, "<topic id hex>.<partition>"
 * (cap 64). */
static void part_key(const uint8_t id[16], int32_t partition, char *out, size_t cap)
{
    int o = 0;
    for (int k = 0; k < 16; k++)
        o += snprintf(out + o, cap > (size_t)o ? cap - (size_t)o : 0, "%02x", id[k]);
    snprintf(out + o, cap > (size_t)o ? cap - (size_t)o : 0, ".%d", (int)partition);
}

typedef struct local_ask {
    char topic[MD_TOPIC_NAME_MAX + 1];
    uint8_t id[16];
    int32_t partition;
} local_ask;

/* K17: the cluster's answer: the partition's first local epoch (-1: not
 * known, asked again at the next second); the duty goes on with it. */
static void local_epoch_told(bk_broker *b, void *arg, int32_t epoch)
{
    local_ask *x = arg;
    lk_set *s = set_of(b);
    lk_mirror *m = s && s->nmirrors ? mirror_find(s, x->topic) : NULL;
    bk_topic *t = view_topic_find(b, x->topic, strlen(x->topic));
    if (m && x->partition < m->nparts)
        m->parts[x->partition].local_asking = false;  /* whatever the answer is about:
                                                          one question at a time */
    if (m && t && !memcmp(t->id, x->id, sizeof x->id) && x->partition < m->nparts) {
        lk_part *lp = &m->parts[x->partition];
        if (epoch >= 0)
            lp->local_epoch = epoch;
        if (epoch >= 0 && mirror_left(m->state))
            mirror_epochs(m);            /* else on_tick's next second asks again */
    }
    free(x);
}

/* K17: asks the cluster for partition i's first local epoch, proposing
 * epoch (this leader's fresh one) when it has none yet; one question out
 * at a time (out of memory: asked again at the next second). */
static void local_epoch_ask(lk_mirror *m, int32_t i, int32_t epoch)
{
    bk_broker *b = m->link->b;
    lk_part *lp = &m->parts[i];
    bk_topic *t = view_topic_find(b, m->topic, strlen(m->topic));
    if (lp->local_asking)
        return;
    local_ask *x = t ? calloc(1, sizeof *x) : NULL;
    if (!x)
        return;
    snprintf(x->topic, sizeof x->topic, "%s", m->topic);
    memcpy(x->id, t->id, sizeof x->id);
    x->partition = i;
    char key[64];
    part_key(t->id, i, key, sizeof key);
    lp->local_asking = true;
    b->store->mirror_local_epoch(b, key, epoch, local_epoch_told, x);
}

/* K14: the partitions led here of a mirror that left mirroring, each
 * given a fresh leader epoch once; K17: their local start then. */
static void mirror_epochs(lk_mirror *m)
{
    bk_broker *b = m->link->b;
    bool cluster = bk_cluster_mode(b);
    if (!cluster)
        mirror_epochs_store(m);
    for (int32_t i = 0; i < m->nparts; i++) {
        lk_part *lp = &m->parts[i];
        if (!lp->epoch_due)
            continue;
        bk_partition *p = lk_copies(m, i);
        if (!p && cluster) {             /* a copy here, not led: guarded for when it is */
            const bk_pview *v = view_partition(b, kp_str_cstr(m->topic), i);
            if (v && v->local && v->local->min_epoch <= seg_epoch_latest(v->local->log))
                v->local->min_epoch = seg_epoch_latest(v->local->log) + 1;
            continue;
        }
        if (!p)
            continue;                    /* standalone: not created yet */
        int32_t latest = seg_epoch_latest(p->log);
        int32_t fresh = latest >= 0 ? latest + 1 : 1;    /* standalone: above 0 */
        if (lp->source_epoch == -2)
            lp->source_epoch = latest;
        if (!cluster && !epoch_fresh(b, p, lp, latest)) {
            if (p->min_epoch < fresh)
                p->min_epoch = fresh;    /* not stored (mirror_epochs_store): next second */
            continue;
        }
        if (epoch_fresh(b, p, lp, latest)) {
            if (seg_epoch_assign(p->log, p->leader_epoch, seg_log_end(p->log)) > 0)
                replica_partition_epochs_save(b, p);
            /* K17: the first local epoch's entry starts the local batches:
             * standalone the stored epoch, cluster mode the one ZooKeeper
             * holds (asked first: no local batch meanwhile) */
            bool asks = cluster && b->store && b->store->mirror_local_epoch;
            if (asks && lp->local_epoch < 0) {
                p->min_epoch = INT32_MAX;
                local_epoch_ask(m, i, p->leader_epoch);
                continue;
            }
            int64_t from = seg_epoch_start_above(p->log, (asks ? lp->local_epoch
                                                               : p->leader_epoch) - 1);
            lp->epoch_due = false;
            p->min_epoch = p->leader_epoch;          /* K17's hold below ends */
            if (from >= 0)
                replica_producers_local_start(p, from);
            BK_INFO("mirror topic %s-%d: local appends from %lld on under leader epoch %d, "
                    "above the source's", m->topic, (int)i,
                    (long long)(from >= 0 ? from : seg_log_end(p->log)), (int)p->leader_epoch);
            continue;
        }
        /* K17: no local batch before the local start is set, here at the
         * next second once the raise landed (K14's note: NOT_LEADER meanwhile) */
        p->min_epoch = INT32_MAX;
        char why[96];
        snprintf(why, sizeof why, "leader epoch %d -> %d: a mirror that left mirroring at "
                 "the source's %d", (int)p->leader_epoch, (int)latest + 1, (int)latest);
        repl_isr_epoch_raise(b, p, latest + 1, why);     /* once per state version */
    }
}

static void mirror_epochs_due(lk_mirror *m)
{
    for (int32_t i = 0; i < m->nparts; i++) {
        m->parts[i].epoch_due = true;
        m->parts[i].source_epoch = -2;   /* taken again where it is led */
    }
    mirror_epochs(m);
}

/* Stores and logs a mirror topic's new state (one line per change). */
/* st taken here: stored, published (K6), logged. */
static void mirror_store_state(lk_mirror *m, enum lk_mstate st, const char *why)
{
    bk_broker *b = m->link->b;
    char err[MD_ERRLEN];
    enum lk_mstate was = m->state;
    m->state = st;
    if (st == LK_FAILED)
        snprintf(m->last_error, sizeof m->last_error, "%s", why ? why : "");
    if (md_mirror_status(b->db, m->topic, state_name(st), m->last_error[0] ? m->last_error : NULL,
                         err, sizeof err) != 0)
        BK_ERROR("mirror topic %s: cannot store its state %s: %s", m->topic, state_name(st), err);
    else
        publish(b, true, m->topic);      /* K6 */
    BK_INFO("mirror topic %s (link %s, source topic %s): %s -> %s%s%s", m->topic, m->link->name,
            m->source, state_name(was), state_name(st), why ? ": " : "", why ? why : "");
    if (mirror_left(st))
        mirror_epochs_due(m);            /* K14 */
}

static uint32_t mirror_open_txns(lk_mirror *m, bool abort);

/* st taken here as link_mirror_state takes it: 'failed_over' aborts the
 * source's open transactions (K8) once the mirror takes markers. */
static void mirror_take(lk_mirror *m, enum lk_mstate st, const char *why)
{
    if (st == LK_FAILED_OVER) {
        uint32_t open = mirror_open_txns(m, false);
        char w[160];
        snprintf(w, sizeof w, "writable now, no longer mirrored; %u open transaction%s of "
                 "the source aborted here (ABORT markers)", open, open == 1 ? "" : "s");
        mirror_store_state(m, st, w);    /* first: the mirror takes markers from now on */
        mirror_open_txns(m, true);
    } else {
        mirror_store_state(m, st, why);
    }
    lk_conn_kick(m->link);
}

/* K13: the states a mirror never leaves. */
static bool mirror_terminal(enum lk_mstate st)
{
    return st == LK_PROMOTED || st == LK_FAILED_OVER || st == LK_FAILED;
}

typedef struct lk_proposal {
    char topic[MD_TOPIC_NAME_MAX + 1];
    enum lk_mstate st;
    char why[512];
    bk_topic_op *op;
} lk_proposal;

/* K15: the cluster's answer to a proposal. */
static void mirror_proposed(bk_broker *b, void *arg, int rc, const char *now)
{
    lk_proposal *x = arg;
    lk_set *s = set_of(b);
    lk_mirror *m = s ? mirror_find(s, x->topic) : NULL;
    char err[1024] = "";
    if (m)
        m->proposing = false;
    if (rc == 0 && m && m->state != x->st && !mirror_terminal(m->state)) {
        mirror_take(m, x->st, x->why[0] ? x->why : NULL);
    } else if (rc != 0) {
        snprintf(err, sizeof err, "mirror topic '%s': the cluster %s%s%s, so '%s' is not "
                 "taken (another broker's change came first, or ZooKeeper did not answer)",
                 x->topic, now[0] ? "has it " : "did not take it", now[0] ? now : "",
                 now[0] ? " already" : "", state_name(x->st));
        BK_WARN("%s", err);
    }
    if (x->op)
        x->op->done(x->op, rc == 0 ? KP_NONE : KP_INVALID_REQUEST, err);
    free(x);
}

/* K15: st for m, a terminal state: in cluster mode proposed to ZooKeeper
 * (taken here only once it holds it; op, when not NULL, answered then);
 * standalone taken at once.  A proposal on its way is not made twice. */
static int mirror_finish(lk_mirror *m, enum lk_mstate st, const char *why, bk_topic_op *op,
                         char *err, size_t errlen)
{
    bk_broker *b = m->link->b;
    if (!bk_cluster_mode(b) || !b->store || !b->store->mirror_propose) {
        mirror_take(m, st, why);
        return KP_NONE;
    }
    if (m->proposing) {
        snprintf(err, errlen, "mirror topic '%s': a change of its state is on its way to the "
                 "cluster; try again", m->topic);
        return KP_INVALID_REQUEST;
    }
    lk_proposal *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, errlen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    snprintf(x->topic, sizeof x->topic, "%s", m->topic);
    snprintf(x->why, sizeof x->why, "%s", why ? why : "");
    x->st = st;
    x->op = op;
    if (op)
        op->pending = true;
    m->proposing = true;
    BK_INFO("mirror topic %s: %s proposed to the cluster%s%s", m->topic, state_name(st),
            why ? ": " : "", why ? why : "");
    b->store->mirror_propose(b, m->topic, state_name(st), mirror_proposed, x);
    return KP_NONE;
}

/* Every state change this broker makes: a terminal one through K15. */
static void mirror_set_state(lk_mirror *m, enum lk_mstate st, const char *why)
{
    char err[MD_ERRLEN];
    if (!mirror_terminal(st))
        mirror_store_state(m, st, why);
    else
        mirror_finish(m, st, why, NULL, err, sizeof err);   /* refused: asked again later */
}

void lk_link_error(lk_link *l, const char *why)
{
    char err[MD_ERRLEN];
    if (!why && !l->last_error[0])
        return;
    if (why && !strncmp(l->last_error, why, sizeof l->last_error - 1))
        return;                          /* logged and stored once per distinct error */
    if (why)
        BK_WARN("cluster link %s: %s (retrying with backoff up to %lld ms)", l->name, why,
                (long long)l->backoff_max_ms);
    else
        BK_INFO("cluster link %s: connected to %s:%d, mirroring", l->name, l->boot.host,
                l->boot.port);
    snprintf(l->last_error, sizeof l->last_error, "%s", why ? why : "");
    if (md_link_status(l->b->db, l->name, "active", why, err, sizeof err) != 0)
        BK_ERROR("cluster link %s: cannot store its state: %s", l->name, err);
}

void lk_mirror_error(lk_mirror *m, const char *why)
{
    char err[MD_ERRLEN];
    if (!strncmp(m->last_error, why ? why : "", sizeof m->last_error - 1))
        return;
    if (why)
        BK_WARN("mirror topic %s (link %s): %s", m->topic, m->link->name, why);
    snprintf(m->last_error, sizeof m->last_error, "%s", why ? why : "");
    if (md_mirror_status(m->link->b->db, m->topic, state_name(m->state), why, err,
                         sizeof err) != 0)
        BK_ERROR("mirror topic %s: cannot store its error: %s", m->topic, err);
}

static bool parts_grow(lk_mirror *m, int32_t n)
{
    if (n <= m->nparts)
        return true;
    lk_part *np = realloc(m->parts, (size_t)n * sizeof *np);
    if (!np)
        return false;
    for (int32_t i = m->nparts; i < n; i++)
        np[i] = (lk_part){ .source_end = -1, .caught_up_ms = -1, .leader = -1,
                           .leader_epoch = -1, .asked = -1, .told_epoch = -1,
                           .source_epoch = -2, .truncating = true,           /* link_conn.c C5 */
                           .local_epoch = -1,                                /* K17 */
                           .epoch_due = mirror_left(m->state) };         /* K14 */
    m->parts = np;
    m->nparts = n;
    return true;
}

/* The source's overrides that are valid here (malloc'd array of cfg's
 * strings; NULL: out of memory); the rest are the destination's own, as
 * Kafka's cluster linking keeps some (replica placement) too. */
static md_kv *configs_valid(const md_kv *cfg, size_t ncfg, size_t *nk)
{
    char err[MD_ERRLEN + 64];
    md_kv *keep = calloc(ncfg ? ncfg : 1, sizeof *keep);
    *nk = 0;
    for (size_t i = 0; keep && i < ncfg; i++)
        if (md_config_check(cfg[i].name, cfg[i].value, err, sizeof err) == KP_NONE)
            keep[(*nk)++] = cfg[i];
    return keep;
}

static bool kv_has(const md_kv *kv, size_t n, const md_kv *one)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(kv[i].name, one->name) && !strcmp(kv[i].value, one->value))
            return true;
    return false;
}

void lk_mirror_configs(lk_mirror *m, const md_kv *cfg, size_t ncfg)
{
    bk_broker *b = m->link->b;
    char err[MD_ERRLEN + 64];
    md_kv *have = NULL;
    size_t nh = 0, nk;
    if (!topic_writer(b))
        return;                          /* K6: the controller's */
    md_kv *keep = configs_valid(cfg, ncfg, &nk);
    if (!keep || md_topic_configs(b->db, m->topic, &have, &nh) != 0) {
        free(keep);
        return;                          /* the next Metadata's turn */
    }
    bool same = nh == nk;
    for (size_t i = 0; same && i < nk; i++)
        same = kv_has(have, nh, &keep[i]);
    md_kv_free(have, nh);
    if (!same) {
        int rc = view_topic_configs_set(b, m->topic, keep, nk, false, NULL, err, sizeof err);
        if (rc != KP_NONE) {
            char why[1024];
            snprintf(why, sizeof why, "cannot take the source's configs: %s", err);
            lk_mirror_error(m, why);
        } else {
            BK_INFO("mirror topic %s: config overrides synced from source topic %s (%zu)",
                    m->topic, m->source, nk);
        }
    }
    free(keep);
}

void lk_mirror_sourced(lk_mirror *m, int32_t n, const md_kv *cfg, size_t ncfg, bool have_cfg)
{
    bk_broker *b = m->link->b;
    char err[MD_ERRLEN + 64];
    if (m->state == LK_PROMOTED || m->state == LK_FAILED_OVER || m->state == LK_FAILED)
        return;
    bk_topic *t = view_topic_find(b, m->topic, strlen(m->topic));
    bool cluster = bk_cluster_mode(b);
    if (!m->created && cluster && t) {
        /* K6: created by the controller (a name taken meanwhile is
         * refused at the INSERT, against the cluster's topics). */
        m->created = true;
    } else if (!m->created) {
        if (t) {
            mirror_set_state(m, LK_FAILED, "a topic of that name was created meanwhile; "
                             "a mirror topic must be new");
            return;
        }
        if (cluster && have_cfg && !topic_writer(b)) {
            m->source_parts = 0;         /* asked again after the next Metadata */
            return;
        }
        if (!have_cfg)
            return;                      /* DescribeConfigs first (link_conn.c) */
        size_t nk;
        md_kv *keep = configs_valid(cfg, ncfg, &nk);
        int16_t rf = cluster ? b->cfg->default_replication_factor : 1;
        int rc = keep ? view_topic_create(b, m->topic, n, rf, NULL, keep, nk, false, NULL, err,
                                          sizeof err)
                      : KP_UNKNOWN_SERVER_ERROR;
        free(keep);
        if (rc != KP_NONE && cluster) {
            /* A write of ZooKeeper's that failed, or one still on its way:
             * the next Metadata sees the topic or tries again. */
            char why[1024];
            snprintf(why, sizeof why, "cannot create it yet: %s (%s)", err[0] ? err : "refused",
                     kp_error_name(rc));
            lk_mirror_error(m, why);
            m->source_parts = 0;
            return;
        }
        if (rc != KP_NONE) {
            char why[1024];
            snprintf(why, sizeof why, "cannot create it: %s (%s)", err[0] ? err : "refused",
                     kp_error_name(rc));
            mirror_set_state(m, LK_FAILED, why);
            return;
        }
        m->created = !cluster;           /* cluster: once the view shows it */
        BK_INFO("mirror topic %s created from %s on link %s: %d partitions, %zu config "
                "overrides", m->topic, m->source, m->link->name, (int)n, ncfg);
        if (cluster) {
            m->source_parts = 0;         /* the next Metadata finds it in the view */
            return;
        }
    } else if (!t) {
        if (!topic_writer(b))
            return;                      /* K6: the controller says it */
        mirror_set_state(m, LK_FAILED, "its topic was deleted (DELETE it from mirror_topics "
                         "and INSERT it again to mirror anew)");
        return;
    } else if (n > t->npartitions && topic_writer(b)) {
        int32_t had = t->npartitions;
        int rc = view_topic_add_partitions(b, m->topic, n, NULL, false, NULL, err, sizeof err);
        if (rc != KP_NONE) {
            char why[1024];
            snprintf(why, sizeof why, "cannot follow the source's %d partitions: %s", (int)n,
                     err);
            lk_mirror_error(m, why);
            return;
        }
        BK_INFO("mirror topic %s: partitions %d -> %d, as its source %s", m->topic,
                (int)had, (int)n, m->source);
    }
    if (!parts_grow(m, n))
        lk_mirror_error(m, "out of memory");
}

/* K3, K8: partition i (p: this broker's replica) had everything the source
 * had in an answer to a Fetch sent after the promotion was asked, and no
 * source transaction is open in it. */
static bool part_caught_up(const lk_mirror *m, int32_t i, const bk_partition *p)
{
    const lk_part *lp = &m->parts[i];
    return p && lp->source_end >= 0 && lp->answers_due == 0 &&
           seg_log_end(p->log) == lp->source_end &&
           (!bk_cluster_mode(m->link->b) || p->high_watermark == lp->source_end) &&
           !(p->producers && p->producers->open_txns > 0);
}

/* K11: a fact's name, "<topic id hex>.<partition>.<leader epoch>" (cap 64). */
static void caught_up_name(const uint8_t id[16], int32_t partition, int32_t epoch, char *out,
                           size_t cap)
{
    part_key(id, partition, out, cap);
    size_t o = strlen(out);
    snprintf(out + o, cap > o ? cap - o : 0, ".%d", (int)epoch);
}

/* K11: the leader's half: each partition it leads and saw caught up is told
 * once per leader epoch. */
static void mirror_tell_caught_up(lk_mirror *m)
{
    bk_broker *b = m->link->b;
    bk_topic *t = view_topic_find(b, m->topic, strlen(m->topic));
    for (int32_t i = 0; t && i < m->nparts && i < t->npartitions; i++) {
        bk_partition *p = lk_copies(m, i);
        int32_t epoch = t->parts[i].leader_epoch;
        if (!part_caught_up(m, i, p) || m->parts[i].told_epoch == epoch)
            continue;
        m->parts[i].told_epoch = epoch;
        BK_INFO("mirror topic %s-%d: caught up with the source at %lld (leader epoch %d), "
                "told for its promotion", m->topic, (int)i, (long long)seg_log_end(p->log),
                (int)epoch);
        char fact[64];
        caught_up_name(t->id, i, epoch, fact, sizeof fact);
        b->store->mirror_caught_up(b, fact);
    }
}

void lk_mirror_progress(lk_mirror *m)
{
    bk_broker *b = m->link->b;
    if (m->state != LK_PROMOTING || !m->created || m->nparts == 0)
        return;                          /* nothing copied yet: nothing to promote */
    if (b->store && b->store->mirror_caught_up) {
        mirror_tell_caught_up(m);        /* K11: the controller decides */
        return;
    }
    for (int32_t i = 0; i < m->nparts; i++)
        if (!part_caught_up(m, i, lk_copies(m, i)))
            return;
    mirror_set_state(m, LK_PROMOTED, "caught up with the source; writable, no longer "
                     "mirrored");
}

/* K11: the controller's half.  told: the facts "<topic id hex>.<partition>.
 * <leader epoch>" the leaders wrote; a promoting mirror whose every
 * partition has one for its current leader epoch is promoted. */
static void mirrors_told(bk_broker *b, char *const *told, int n)
{
    lk_set *s = set_of(b);
    for (lk_mirror *m = s ? s->mirrors : NULL, *next; m; m = next) {
        next = m->next;
        bk_topic *t = m->state == LK_PROMOTING && m->created
                          ? view_topic_find(b, m->topic, strlen(m->topic)) : NULL;
        int32_t i = 0;
        for (; t && i < t->npartitions; i++) {
            char want[64];
            caught_up_name(t->id, i, t->parts[i].leader_epoch, want, sizeof want);
            int k = 0;
            while (k < n && strcmp(told[k], want))
                k++;
            if (k == n || t->parts[i].leader < 0)
                break;
        }
        if (t && t->npartitions > 0 && i == t->npartitions)
            mirror_set_state(m, LK_PROMOTED, "every partition's leader caught up with the "
                             "source; writable, no longer mirrored");
    }
}


/* ---- SQL writes ---------------------------------------------------------------- */
/* K3: source_end is the last answer's, however old (a pause): each
 * partition waits for an answer to a Fetch sent from now on. */
static void promoting_begin(lk_mirror *m)
{
    for (int32_t i = 0; i < m->nparts; i++) {
        m->parts[i].answers_due = m->parts[i].in_request ? 2 : 1;
        m->parts[i].told_epoch = -1;
    }
}

static int need_set(bk_broker *b, char *err, size_t errlen)
{
    if (set_of(b))
        return KP_NONE;
    snprintf(err, errlen, "cluster links are not started on this broker");
    return KP_INVALID_REQUEST;
}

void link_tls_prepare(const char *config, lk_tls_pre *p)
{
    memset(p, 0, sizeof *p);
    lk_link *l = calloc(1, sizeof *l);
    if (!l)
        return;                          /* link_create refuses it: never read on the loop */
    link_defaults(l);
    if (settings_walk(l, config, NULL, 0, NULL, 0, p->err, sizeof p->err) == KP_NONE && l->tls) {
        p->rc = lk_conn_tls(l, p->err, sizeof p->err);
        p->ctx = l->tls_ctx;
    }
    if (p->rc == KP_NONE)
        p->err[0] = 0;
    OPENSSL_cleanse(l, sizeof *l);       /* K4: the passwords */
    free(l);
}

void link_tls_pre_free(lk_tls_pre *p)
{
    SSL_CTX_free(p->ctx);
    p->ctx = NULL;
}

/* Takes l out of s's list (not freed). */
static void link_unlist(lk_set *s, lk_link *l)
{
    for (lk_link **pp = &s->links; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            break;
        }
}

/* INSERT's and UPDATE's checks of a link's settings, with the same texts:
 * row filled (secrets sealed, K4) and *out made from it, first in s's
 * list (the caller stores the row, or takes *out out again).  tls:
 * link_tls_prepare's for config (read off the loop), or NULL with
 * tls_later (link_conn.c C7 reads them off the loop at the first connect,
 * and a problem shows in last_error); never read here, on the loop. */
static int link_build(bk_broker *b, const char *name, const char *bootstrap, const char *config,
                      lk_tls_pre *tls, bool tls_later, md_link_row *row, lk_link **out,
                      char *err, size_t errlen)
{
    lk_set *s = set_of(b);
    char host[256], plain[sizeof row->secrets];   /* K4: only sealed in the row */
    int port, nboot, rc;
    *out = NULL;
    snprintf(row->name, sizeof row->name, "%s", name);
    snprintf(row->state, sizeof row->state, "active");
    if (bootstrap && strlen(bootstrap) >= sizeof row->bootstrap) {
        snprintf(err, errlen, "cluster_links.bootstrap_servers is longer than %zu bytes",
                 sizeof row->bootstrap - 1);
        rc = KP_INVALID_CONFIG;
    } else if ((rc = lk_bootstrap_nth(bootstrap, -1, host, sizeof host, &port, &nboot, err,
                                      errlen)) == KP_NONE &&
        (rc = settings_walk(NULL, config, row->config, sizeof row->config, plain,
                            SEC_PWENC_PLAIN_MAX(sizeof row->secrets) + 1, err, errlen)) ==
            KP_NONE &&
        (rc = sec_pwenc_seal(b->pwenc, name, plain, row->secrets, sizeof row->secrets, err,
                             errlen) == 0 ? KP_NONE : KP_INVALID_CONFIG) == KP_NONE) {
        snprintf(row->bootstrap, sizeof row->bootstrap, "%s", bootstrap);
        lk_link *l = link_new(s, row, err, errlen);
        if (l && l->tls && tls && tls->ctx && !l->tls_ctx) {
            l->tls_ctx = tls->ctx;       /* read off the loop (link_tls_prepare) */
            tls->ctx = NULL;
        }
        if (!l)
            rc = KP_INVALID_CONFIG;
        else if (l->sasl && (!l->user[0] || !l->pass[0])) {
            snprintf(err, errlen, "cluster_links.config: SASL_PLAINTEXT and SASL_SSL need "
                     "sasl.jaas.config (PlainLoginModule or ScramLoginModule username=\"…\" "
                     "password=\"…\") or sasl.username and sasl.password");
            rc = KP_INVALID_CONFIG;
        } else if (l->tls && tls && tls->rc != KP_NONE) {
            rc = tls->rc;                /* a file unreadable (read off the loop) */
            snprintf(err, errlen, "%s", tls->err);
        } else if (l->tls && !tls_later && !l->tls_ctx) {
            /* link_conn.c C7: the files are never read on the loop */
            snprintf(err, errlen, "cannot read the TLS certificate files off the loop (out "
                     "of memory)");
            rc = KP_UNKNOWN_SERVER_ERROR;
        }
        if (rc != KP_NONE && l) {
            link_unlist(s, l);
            link_free(l);
        } else {
            *out = l;
        }
    }
    memset(plain, 0, sizeof plain);
    return rc;
}

int link_create(bk_broker *b, const char *name, const char *bootstrap, const char *config,
                lk_tls_pre *tls, char *err, size_t errlen)
{
    lk_set *s = set_of(b);
    int rc = need_set(b, err, errlen);
    if (rc != KP_NONE)
        return rc;
    if (!name || md_topic_name_check(name, strlen(name), err, errlen) != KP_NONE) {
        snprintf(err, errlen, "cluster_links.name: 1 to 249 characters of [a-zA-Z0-9._-]");
        return KP_INVALID_REQUEST;
    }
    if (link_find(s, name)) {
        snprintf(err, errlen, "cluster link '%s' already exists", name);
        return KP_INVALID_REQUEST;
    }
    md_link_row *row = calloc(1, sizeof *row);
    if (!row) {
        snprintf(err, errlen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    lk_link *l;
    rc = link_build(b, name, bootstrap, config, tls, false, row, &l, err, errlen);
    if (rc == KP_NONE && md_link_put(b->db, row, bk_now_ms(), err, errlen) != 0) {
        rc = KP_UNKNOWN_SERVER_ERROR;
        link_unlist(s, l);
        link_free(l);
    } else if (rc == KP_NONE) {
        BK_INFO("cluster link %s created through SQL: source %s", name, bootstrap);
        publish_row(b, false, name, BK_PUB_INSERT);   /* K6, K13 */
        lk_conn_kick(l);                 /* a wrong address or login shows at once */
    }
    memset(row, 0, sizeof *row);
    free(row);
    return rc;
}

/* K16: the value of key k (kl bytes) in "k=v" lines, the last one's (its
 * length in *vl); NULL: none. */
static const char *line_find(const char *text, const char *k, size_t kl, size_t *vl)
{
    const char *found = NULL;
    for (const char *p = text ? text : ""; *p;) {
        size_t n = strcspn(p, "\n");
        while (n && (*p == ' ' || *p == '\t')) {
            p++;
            n--;
        }
        if (n > kl && !strncmp(p, k, kl) && p[kl] == '=') {
            found = p + kl + 1;
            *vl = n - kl - 1;
            while (*vl && (found[*vl - 1] == ' ' || found[*vl - 1] == '\t' ||
                           found[*vl - 1] == '\r'))
                --*vl;
        }
        p += n + (p[n] == '\n');
    }
    return found;
}

/* K16: an UPDATE's config with each secret line written back as SELECT
 * shows it (k=[hidden]) given the stored value of k (plain: the row's
 * secret lines, opened) into out; *tls_kept: an ssl.* one was; kept (ucap
 * bytes): the first one kept, "" none. */
static int masked_kept(const char *link, const char *config, const char *plain, char *out,
                       size_t cap, bool *tls_kept, char *kept, size_t kcap, char *err,
                       size_t errlen)
{
    size_t o = 0;
    *tls_kept = false;
    out[0] = 0;
    kept[0] = 0;
    for (const char *p = config ? config : ""; *p;) {
        size_t n = strcspn(p, "\n"), vl = 0, ml = strlen(LK_MASK);
        const char *k = p + strspn(p, " \t"), *eq = memchr(p, '=', n), *e = p + n;
        while (eq && e > eq + 1 && strchr(" \t\r", e[-1]))
            e--;                         /* the value's end, as settings_walk trims */
        size_t kl = eq && eq > k ? (size_t)(eq - k) : 0;
        char key[128];
        bool masked = kl && kl < sizeof key && (size_t)(e - eq - 1) == ml &&
                      !strncmp(eq + 1, LK_MASK, ml);
        if (masked) {
            memcpy(key, k, kl);
            key[kl] = 0;
            masked = link_setting_secret(key);
        }
        int w;
        if (masked) {
            const char *stored = line_find(plain, key, kl, &vl);
            if (!stored) {
                snprintf(err, errlen, "cluster_links.config: %s=" LK_MASK " keeps the stored "
                         "value, but link '%s' stores none for %s; give its value", key, link,
                         key);
                return KP_INVALID_CONFIG;
            }
            *tls_kept |= !strncmp(key, "ssl.", 4);
            if (!kept[0])
                snprintf(kept, kcap, "%s", key);
            w = snprintf(out + o, o < cap ? cap - o : 0, "%s=%.*s\n", key, (int)vl, stored);
        } else {
            w = snprintf(out + o, o < cap ? cap - o : 0, "%.*s\n", (int)n, p);
        }
        o += (size_t)w;
        if (o >= cap) {
            snprintf(err, errlen, "cluster_links.config is too long (at most %zu bytes)",
                     cap - 1);
            return KP_INVALID_CONFIG;
        }
        p += n + (p[n] == '\n');
    }
    return KP_NONE;
}

/* K16: each setting whose value differs between two links' settings (ac,
 * as_: the shown config and the opened secret lines of one; bc, bs the
 * other's), named in out (", " between; never a value: for the log). */
static void settings_diff(const char *ac, const char *as_, const char *bc, const char *bs,
                          char *out, size_t cap)
{
    const char *texts[] = { ac, as_, bc, bs };
    size_t o = 0;
    out[0] = 0;
    for (int t = 0; t < 4; t++)
        for (const char *p = texts[t]; p && *p;) {
            size_t n = strcspn(p, "\n"), al = 0, bl = 0;
            const char *k = p + strspn(p, " \t"), *eq = memchr(p, '=', n);
            size_t kl = eq && eq > k ? (size_t)(eq - k) : 0;
            p += n + (p[n] == '\n');
            if (!kl || *k == '#')
                continue;
            const char *av = line_find(as_, k, kl, &al), *bv = line_find(bs, k, kl, &bl);
            if (!av)
                av = line_find(ac, k, kl, &al);
            if (!bv)
                bv = line_find(bc, k, kl, &bl);
            if ((av && bv && al == bl && !memcmp(av, bv, al)) || (!av && !bv))
                continue;
            char key[128];
            bool listed = kl >= sizeof key;      /* already named, or no name */
            if (!listed) {
                memcpy(key, k, kl);
                key[kl] = 0;
            }
            for (const char *q = out; !listed && (q = strstr(q, key)); q++)
                listed = (q == out || q[-1] == ' ') && (q[kl] == ',' || !q[kl]);
            if (!listed && o + kl + 3 < cap)
                o += (size_t)snprintf(out + o, cap - o, "%s%s", o ? ", " : "", key);
        }
}

/* K13, K16: l's mirror topics go on under nl, the link made from l's new
 * row, and l goes: each mirror keeps its state and source ends, and each
 * partition goes on from its own log end (K2); what l's connections had
 * asked is forgotten, and every source partition's leader is asked again
 * and the mirror's log checked against it (link_conn.c C5) before the
 * next Fetch.  The number of mirrors moved. */
static int link_replace(lk_set *s, lk_link *l, lk_link *nl)
{
    int n = 0;
    if (!nl->cluster_id[0])              /* K18: the same source cluster, bound */
        snprintf(nl->cluster_id, sizeof nl->cluster_id, "%s", l->cluster_id);
    for (lk_mirror *m = s->mirrors; m; m = m->next) {
        if (m->link != l)
            continue;
        n++;
        m->link = nl;
        m->in_request = false;
        for (int32_t i = 0; i < m->nparts; i++) {
            lk_part *lp = &m->parts[i];
            lp->in_request = false;
            lp->leader = -1;
            lp->leader_epoch = -1;
            lp->truncating = true;
            lp->ahead = false;
            lp->retry_us = 0;
        }
    }
    link_unlist(s, l);
    link_free(l);
    nl->metadata_due_us = 0;             /* its partitions' leaders now */
    lk_conn_kick(nl);
    return n;
}

/* K16: the settings that say where and how a secret goes: one kept
 * ([hidden]) only while none of them changes. */
static const char *const kept_guards[] = {
    "sasl.mechanism", "security.protocol", "ssl.ca.location", "ssl.truststore.location",
    "ssl.endpoint.identification.algorithm",
};

/* K16: an UPDATE that keeps the secret kept (masked_kept) of had, to
 * bootstrap and config (as given), refused when bootstrap or a guard
 * changes: the kept secret would go where the new settings say, to a host
 * its owner never gave it for. */
static int kept_rule(const md_link_row *had, const char *bootstrap, const char *config,
                     const char *kept, char *err, size_t errlen)
{
    char host[256];
    int port, nboot;
    if (!kept[0])
        return KP_NONE;
    int rc = lk_bootstrap_nth(bootstrap, -1, host, sizeof host, &port, &nboot, err, errlen);
    if (rc != KP_NONE)
        return rc;                       /* INSERT's text for a bad one first */
    const char *what = strcmp(had->bootstrap, bootstrap) ? "bootstrap_servers" : NULL;
    for (size_t k = 0; !what && k < sizeof kept_guards / sizeof *kept_guards; k++) {
        size_t kl = strlen(kept_guards[k]), al = 0, bl = 0;
        const char *a = line_find(had->config, kept_guards[k], kl, &al),
                   *v = line_find(config, kept_guards[k], kl, &bl);
        if ((a != NULL) != (v != NULL) || (a && (al != bl || memcmp(a, v, al))))
            what = kept_guards[k];
    }
    if (!what)
        return KP_NONE;
    snprintf(err, errlen, "cluster_links: %s must be given again when bootstrap_servers / "
             "sasl.mechanism / security.protocol / ssl.ca.location / ssl.truststore.location / "
             "ssl.endpoint.identification.algorithm change (%s changes here): a kept "
             "secret (" LK_MASK ") goes only where it was given for", kept, what);
    return KP_INVALID_CONFIG;
}

/* K16: what an UPDATE's kept secrets were taken from: had's settings, its
 * bootstrap servers with them, summed (0 is never returned). */
static uint64_t kept_base(bk_broker *b, const md_link_row *had)
{
    uint64_t h = row_sum(b, had);
    for (const unsigned char *c = (const unsigned char *)had->bootstrap; *c; c++)
        h = (h ^ *c) * 1099511628211ULL;
    return h ? h : 1;
}

_Static_assert(LINK_CONFIG_KEPT_MAX >= sizeof ((md_link_row *)0)->config +
               sizeof ((md_link_row *)0)->secrets, "a config with its secrets kept fits");

/* K16: name's row (*had, in *rows, n of them) and its secret lines opened
 * into plain (sizeof secrets; "" when they do not open, K4: every secret
 * given again repairs the link). */
static int kept_row(bk_broker *b, const char *name, md_link_row **rows, size_t *n,
                    md_link_row **had, char *plain, char *err, size_t errlen)
{
    bool stale;
    *had = NULL;
    plain[0] = 0;
    if (md_link_list(b->db, rows, n, err, errlen) != 0)
        return KP_UNKNOWN_SERVER_ERROR;
    for (size_t i = 0; name && i < *n && !*had; i++)
        if (!strcmp((*rows)[i].name, name))
            *had = &(*rows)[i];
    if (!*had) {
        snprintf(err, errlen, "unknown cluster link '%s'", name ? name : "NULL");
        return KP_INVALID_REQUEST;
    }
    if (row_secrets(b, *had, plain, &stale, err, errlen) != 0)
        plain[0] = 0;
    return KP_NONE;
}

int link_config_kept(bk_broker *b, const char *name, const char *bootstrap, const char *config,
                     char *out, size_t cap, uint64_t *base, char *err, size_t errlen)
{
    md_link_row *rows = NULL, *had;
    size_t n = 0;
    char plain[sizeof rows->secrets], kept[128];
    bool tls_kept;
    int rc = need_set(b, err, errlen);
    *base = 0;
    if (rc == KP_NONE)
        rc = kept_row(b, name, &rows, &n, &had, plain, err, errlen);
    if (rc == KP_NONE)
        rc = masked_kept(name, config, plain, out, cap, &tls_kept, kept, sizeof kept, err,
                         errlen);
    if (rc == KP_NONE)
        rc = kept_rule(had, bootstrap, config, kept, err, errlen);
    if (rc == KP_NONE)
        *base = kept_base(b, had);
    OPENSSL_cleanse(plain, sizeof plain);     /* K4 */
    if (rows)
        OPENSSL_cleanse(rows, n * sizeof *rows);
    free(rows);
    return rc;
}

static void link_sync(bk_broker *b);

/* UPDATE cluster_links (K16). */
int link_update(bk_broker *b, const char *name, const char *bootstrap, const char *config,
                uint64_t base, lk_tls_pre *tls, char *err, size_t errlen)
{
    lk_set *s = set_of(b);
    int rc = need_set(b, err, errlen);
    if (rc != KP_NONE)
        return rc;
    md_link_row *rows = NULL, *had = NULL;
    size_t n = 0;
    struct upd {
        md_link_row row;
        char plain[sizeof rows->secrets], now[sizeof rows->secrets];
        char merged[LINK_CONFIG_KEPT_MAX];
        char changed[1024], kept[128];
    } *u = calloc(1, sizeof *u);
    if (!u) {
        snprintf(err, errlen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    lk_link *l = name ? link_find(s, name) : NULL, *nl = NULL;
    bool stale, tls_kept = false;
    rc = kept_row(b, name, &rows, &n, &had, u->plain, err, errlen);
    if (rc == KP_NONE && base && kept_base(b, had) != base) {
        /* K16: another UPDATE (a session, a ZooKeeper row) since the
         * worker was given the kept secrets: they are not the row's now */
        snprintf(err, errlen, "cluster link '%s' changed meanwhile; run the UPDATE again", name);
        rc = KP_INVALID_REQUEST;
    }
    if (rc == KP_NONE)
        rc = masked_kept(name, config, u->plain, u->merged, sizeof u->merged, &tls_kept,
                         u->kept, sizeof u->kept, err, errlen);
    if (rc == KP_NONE)
        rc = kept_rule(had, bootstrap, config, u->kept, err, errlen);
    if (rc == KP_NONE)
        rc = link_build(b, name, bootstrap, u->merged, tls_kept ? NULL : tls, tls_kept,
                        &u->row, &nl, err, errlen);
    if (rc == KP_NONE && row_secrets(b, &u->row, u->now, &stale, err, errlen) != 0)
        rc = KP_INVALID_CONFIG;
    if (rc == KP_NONE) {
        settings_diff(had->config, u->plain, u->row.config, u->now, u->changed,
                      sizeof u->changed);
        bool moved = strcmp(had->bootstrap, u->row.bootstrap) != 0;
        if (!moved && !u->changed[0] && l) {
            link_unlist(s, nl);          /* the same settings: nothing to do */
            link_free(nl);
        } else if (md_link_settings_set(b->db, &u->row, err, errlen) != 0) {
            rc = KP_UNKNOWN_SERVER_ERROR;
            link_unlist(s, nl);
            link_free(nl);
        } else {
            int mirrors = l ? link_replace(s, l, nl) : 0;
            BK_INFO("cluster link %s updated through SQL: %s%s%s%s%s%s%s; reconnecting, its %d "
                    "mirror topic%s going on from their log ends", name,
                    moved ? "bootstrap.servers " : "", moved ? had->bootstrap : "",
                    moved ? " -> " : "", moved ? u->row.bootstrap : "",
                    moved && u->changed[0] ? "; " : "",
                    u->changed[0] ? "settings changed: " : "", u->changed, mirrors,
                    mirrors == 1 ? "" : "s");
            publish(b, false, name);     /* K6: compare-and-set (cluster_links.c L6, L8) */
            if (!l)
                link_sync(b);            /* its mirrors, skipped while it did not start */
            else
                lk_conn_kick(nl);
        }
    }
    OPENSSL_cleanse(u, sizeof *u);       /* K4: the opened secrets */
    free(u);
    if (rows)
        OPENSSL_cleanse(rows, n * sizeof *rows);
    free(rows);
    return rc;
}

int link_delete(bk_broker *b, const char *name, char *err, size_t errlen)
{
    lk_set *s = set_of(b);
    int rc = need_set(b, err, errlen);
    if (rc != KP_NONE)
        return rc;
    lk_link *l = name ? link_find(s, name) : NULL;
    if (!l) {
        snprintf(err, errlen, "unknown cluster link '%s'", name ? name : "NULL");
        return KP_INVALID_REQUEST;
    }
    int n = 0;
    for (lk_mirror *m = s->mirrors; m; m = m->next)
        n += m->link == l;
    if (n > 0) {
        snprintf(err, errlen, "cluster link '%s' has %d mirror topics; DELETE them from "
                 "mirror_topics (or promote them and then DELETE) first", name, n);
        return KP_INVALID_REQUEST;
    }
    if (md_link_delete(b->db, name, err, errlen) != 0)
        return KP_UNKNOWN_SERVER_ERROR;
    link_unlist(s, l);
    link_free(l);
    BK_INFO("cluster link %s deleted through SQL", name);
    publish(b, false, name);             /* K6 */
    return KP_NONE;
}

int link_mirror_create(bk_broker *b, const char *topic, const char *link, const char *source,
                       const char *state, char *err, size_t errlen)
{
    lk_set *s = set_of(b);
    int rc = need_set(b, err, errlen);
    if (rc != KP_NONE)
        return rc;
    if (!topic || (rc = md_topic_name_check(topic, strlen(topic), err, errlen)) != KP_NONE) {
        if (!topic)
            snprintf(err, errlen, "mirror_topics.topic is required");
        return KP_INVALID_TOPIC_EXCEPTION;
    }
    if (!source)
        source = topic;
    if ((rc = md_topic_name_check(source, strlen(source), err, errlen)) != KP_NONE)
        return KP_INVALID_TOPIC_EXCEPTION;
    lk_link *l = link ? link_find(s, link) : NULL;
    if (!l) {
        snprintf(err, errlen, "unknown cluster link '%s' (INSERT INTO cluster_links first)",
                 link ? link : "NULL");
        return KP_INVALID_REQUEST;
    }
    enum lk_mstate st = LK_ACTIVE;
    if (state && (state_parse(state, &st) != 0 || (st != LK_ACTIVE && st != LK_PAUSED))) {
        snprintf(err, errlen, "mirror_topics.state of a new mirror topic: 'active' or 'paused'");
        return KP_INVALID_REQUEST;
    }
    if (mirror_find(s, topic)) {
        snprintf(err, errlen, "'%s' is a mirror topic already", topic);
        return KP_TOPIC_ALREADY_EXISTS;
    }
    if (view_topic_find(b, topic, strlen(topic))) {
        snprintf(err, errlen, "topic '%s' already exists as a normal topic; a mirror topic "
                 "is created by its link and must be new", topic);
        return KP_TOPIC_ALREADY_EXISTS;
    }
    md_mirror_row row = { 0 };
    snprintf(row.topic, sizeof row.topic, "%s", topic);
    snprintf(row.link, sizeof row.link, "%s", l->name);
    snprintf(row.source_topic, sizeof row.source_topic, "%s", source);
    snprintf(row.state, sizeof row.state, "%s", state_name(st));
    if (md_mirror_put(b->db, &row, bk_now_ms(), err, errlen) != 0)
        return KP_UNKNOWN_SERVER_ERROR;
    if (!mirror_new(s, l, topic, source, st)) {
        snprintf(err, errlen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    BK_INFO("mirror topic %s of %s on link %s created through SQL (%s)", topic, source,
            l->name, state_name(st));
    publish_row(b, true, topic, BK_PUB_INSERT);   /* K6, K13 */
    l->metadata_due_us = 0;              /* its partitions and configs now */
    lk_conn_kick(l);
    return KP_NONE;
}

/* DELETE FROM mirror_topics: the mirroring ends; a mirror not promoted
 * goes with its topic (a read-only copy nobody fills), a promoted one
 * stays as the normal topic it is. */
int link_mirror_delete(bk_broker *b, const char *topic, char *err, size_t errlen)
{
    lk_set *s = set_of(b);
    int rc = need_set(b, err, errlen);
    if (rc != KP_NONE)
        return rc;
    lk_mirror *m = topic ? mirror_find(s, topic) : NULL;
    if (!m) {
        snprintf(err, errlen, "'%s' is not a mirror topic", topic ? topic : "NULL");
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    }
    bool drop = m->created && m->state != LK_PROMOTED && m->state != LK_FAILED_OVER;
    if (drop && view_topic_find(b, topic, strlen(topic)) &&
        (rc = view_topic_delete(b, topic, NULL, err, errlen)) != KP_NONE)
        return rc;
    if (md_mirror_delete(b->db, topic, err, errlen) != 0)
        return KP_UNKNOWN_SERVER_ERROR;
    BK_INFO("mirror topic %s deleted through SQL%s", topic, drop ? ", with its topic" : "");
    mirror_release(m);
    mirror_unlink(s, m);
    publish(b, true, topic);             /* K6 */
    return KP_NONE;
}

static void abort_written(void *arg, int16_t error)
{
    if (error != KP_NONE)
        BK_ERROR("the ABORT marker of producer %lld for a failed-over mirror topic was not "
                 "written: %s", (long long)(intptr_t)arg, kp_error_name(error));
}

/* K8: the source's transactions still open in m's partitions, counted, or
 * (abort) ended with an ABORT marker each, as a coordinator's would be
 * written: nobody here could end them, and read_committed consumers would
 * wait for them forever. */
static uint32_t mirror_open_txns(lk_mirror *m, bool abort)
{
    bk_broker *b = m->link->b;
    uint32_t total = 0;
    for (int32_t i = 0; i < m->nparts; i++) {
        bk_partition *p = lk_copies(m, i);             /* K10: where it leads */
        if (abort && p && p->leader_epoch < p->min_epoch)
            p = NULL;                    /* K14: after its fresh epoch (on_tick) */
        bk_pstate *ps = p ? p->producers : NULL;
        uint32_t n = ps ? ps->open_txns : 0;
        total += n;
        if (!abort || n == 0)
            continue;
        bk_producer *open = malloc(n * sizeof *open);      /* a failover: rare */
        if (!open) {
            BK_ERROR("mirror topic %s-%d: out of memory for its open transactions", m->topic,
                     (int)i);
            continue;
        }
        for (uint32_t k = 0; k < n; k++)
            open[k] = *ps->open[k];      /* the markers change the heap */
        for (uint32_t k = 0; k < n; k++)
            replica_txn_write_marker(b, m->topic, i, open[k].pid, open[k].epoch, false,
                                     open[k].coord_epoch > 0 ? open[k].coord_epoch : 0,
                                     LK_MARKER_TIMEOUT_MS, abort_written,
                                     (void *)(intptr_t)open[k].pid);
        free(open);
    }
    return total;
}

int link_mirror_state(bk_broker *b, const char *topic, const char *state, bk_topic_op *op,
                      char *err, size_t errlen)
{
    lk_set *s = set_of(b);
    int rc = need_set(b, err, errlen);
    if (rc != KP_NONE)
        return rc;
    lk_mirror *m = topic ? mirror_find(s, topic) : NULL;
    enum lk_mstate to;
    if (!m) {
        snprintf(err, errlen, "'%s' is not a mirror topic", topic ? topic : "NULL");
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    }
    if (state_parse(state, &to) != 0 || to == LK_PROMOTING || to == LK_FAILED) {
        snprintf(err, errlen, "mirror_topics.state: 'active', 'paused', 'promoted' or "
                 "'failed_over'");
        return KP_INVALID_REQUEST;
    }
    if (m->state == LK_PROMOTED || m->state == LK_FAILED_OVER || m->state == LK_FAILED) {
        if (to == m->state)
            return KP_NONE;
        snprintf(err, errlen, "mirror topic '%s' is %s: it no longer mirrors (DELETE it from "
                 "mirror_topics and INSERT a new one to mirror again)", topic,
                 state_name(m->state));
        return KP_INVALID_REQUEST;
    }
    if (to == m->state || (to == LK_PROMOTED && m->state == LK_PROMOTING))
        return KP_NONE;
    if (m->state == LK_PROMOTING && to != LK_FAILED_OVER && bk_cluster_mode(b)) {
        /* K11 */
        snprintf(err, errlen, "mirror topic '%s' is promoting: in cluster mode it goes on to "
                 "'promoted' or 'failed_over' only", topic);
        return KP_INVALID_REQUEST;
    }
    if (to == LK_FAILED_OVER)
        return mirror_finish(m, to, NULL, op, err, errlen);   /* K15 */
    if (to == LK_PROMOTED) {
        promoting_begin(m);
        mirror_set_state(m, LK_PROMOTING, "writable once it has everything the source has");
    } else {
        mirror_set_state(m, to, NULL);
    }
    lk_conn_kick(m->link);
    return KP_NONE;
}

void link_mirror_led(bk_broker *b, const char *topic)
{
    lk_set *s = set_of(b);
    lk_mirror *m = s && s->nmirrors ? mirror_find(s, topic) : NULL;
    if (m && mirror_left(m->state))
        mirror_epochs(m);                /* K14, K17: where the raise just landed */
}

bool link_mirror_refuses(bk_broker *b, const char *topic, const char **msg)
{
    lk_set *s = set_of(b);
    if (!s || s->nmirrors == 0)
        return false;
    lk_mirror *m = mirror_find(s, topic);
    if (!m || (m->state != LK_ACTIVE && m->state != LK_PAUSED && m->state != LK_PROMOTING))
        return false;                    /* failed: a topic of that name is not its */
    *msg = "This is a mirror topic of a cluster link: it is read-only while it mirrors its "
           "source topic; promote it first (UPDATE mirror_topics SET state = 'promoted')";
    return true;
}

void link_metrics(bk_broker *b, kp_buf *out)
{
    lk_set *s = set_of(b);
    if (!s)
        return;
    kp_buf_printf(out, "# HELP sluice_link_mirror_lag_messages A mirror partition's lag: the "
                  "source's log end (last fetched) minus the mirror's.\n"
                  "# TYPE sluice_link_mirror_lag_messages gauge\n"
                  "# HELP sluice_link_mirror_lag_ms Since when a lagging mirror partition last "
                  "had everything its source had (0: it has; -1: never had).\n"
                  "# TYPE sluice_link_mirror_lag_ms gauge\n");
    for (lk_mirror *m = s->mirrors; m; m = m->next)
        for (int32_t i = 0; i < m->nparts; i++) {
            const bk_pview *v = view_partition(b, kp_str_cstr(m->topic), i);
            if (!v || !v->local || m->parts[i].source_end < 0)
                continue;
            int64_t lag = m->parts[i].source_end - seg_log_end(v->local->log);
            int64_t since = m->parts[i].caught_up_ms;
            kp_buf_printf(out, "sluice_link_mirror_lag_messages{link=\"%s\",topic=\"%s\","
                          "partition=\"%d\",state=\"%s\"} %lld\n", m->link->name, m->topic,
                          (int)i, state_name(m->state), (long long)(lag > 0 ? lag : 0));
            kp_buf_printf(out, "sluice_link_mirror_lag_ms{link=\"%s\",topic=\"%s\","
                          "partition=\"%d\"} %lld\n", m->link->name, m->topic, (int)i,
                          (long long)(lag <= 0 ? 0 : since < 0 ? -1 : bk_now_ms() - since));
        }
    kp_buf_printf(out, "# HELP sluice_link_up 1 when the cluster link has no error.\n"
                  "# TYPE sluice_link_up gauge\n");
    for (lk_link *l = s->links; l; l = l->next)
        kp_buf_printf(out, "sluice_link_up{link=\"%s\"} %d\n", l->name, l->last_error[0] ? 0 : 1);
    lk_sync_metrics(s, out);
}

/* K5: once a second, the source ends that changed go to SQLite (through
 * s->ends, grown with the largest mirror, never shrunk). */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    lk_set *s = arg;
    bk_broker *b = s->b;
    char err[MD_ERRLEN];
    bool promoting = false;
    for (lk_mirror *m = s->mirrors; m; m = m->next) {
        promoting |= m->state == LK_PROMOTING;
        if (mirror_left(m->state))
            mirror_epochs(m);            /* K14: where it leads now */
        if (m->state == LK_FAILED_OVER && bk_cluster_mode(b))
            mirror_open_txns(m, true);   /* K10: where it leads now */
    }
    if (promoting && b->store && b->store->mirrors_told_list && bk_cluster_mode(b) &&
        view_controller_id(b) == b->cfg->broker_id)
        b->store->mirrors_told_list(b, mirrors_told);    /* K11: once a second */
    /* K9: a link with nothing led here sleeps until its next Metadata; a
     * leadership taken meanwhile starts within a second. */
    for (lk_link *l = s->links; l && bk_cluster_mode(b); l = l->next)
        lk_conn_kick(l);                 /* each connection: if idle or ready */
    for (lk_mirror *m = s->mirrors; m; m = m->next) {
        if (!m->ends_dirty)
            continue;
        if (m->nparts > s->ends_cap) {
            int64_t *ne = realloc(s->ends, (size_t)m->nparts * sizeof *ne);
            if (ne)
                s->ends = ne;
            int64_t *nc = realloc(s->caught, (size_t)m->nparts * sizeof *nc);
            if (nc)
                s->caught = nc;
            if (!ne || !nc)
                continue;                /* next second */
            s->ends_cap = m->nparts;
        }
        m->ends_dirty = false;
        for (int32_t i = 0; i < m->nparts; i++) {
            s->ends[i] = m->parts[i].source_end;
            s->caught[i] = m->parts[i].caught_up_ms;
        }
        if (md_mirror_source_ends(s->b->db, m->topic, s->ends, s->caught, m->nparts,
                                  bk_now_ms(), err, sizeof err) != 0)
            BK_WARN("mirror topic %s: cannot save the source's log ends: %s", m->topic, err);
    }
}

/* A state another broker wrote (K6): taken as it is, not published again;
 * a failover aborts the open transactions of the partitions led here. */
static void mirror_applied(lk_mirror *m, enum lk_mstate st)
{
    BK_INFO("mirror topic %s (link %s, source topic %s): %s -> %s (applied from the "
            "cluster)", m->topic, m->link->name, m->source, state_name(m->state),
            state_name(st));
    m->state = st;
    if (st == LK_PROMOTING)
        promoting_begin(m);
    if (mirror_left(st))
        mirror_epochs_due(m);            /* K14, before K10's markers */
    if (st == LK_FAILED_OVER)
        mirror_open_txns(m, true);       /* K10 */
    lk_conn_kick(m->link);
}

/* K13: l's row, as l was made from it (a link deleted and created again
 * elsewhere has the same name, not the same row). */
static bool row_has_link(const md_link_row *r, size_t n, const lk_link *l)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(r[i].name, l->name))
            return !strcmp(r[i].bootstrap, l->bootstrap) && row_sum(l->b, &r[i]) == l->row_sum;
    return false;
}

static bool row_has_mirror(const md_mirror_row *r, size_t n, const char *topic)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(r[i].topic, topic))
            return true;
    return false;
}

/* K4: a row whose settings do not open or are refused: logged, and the
 * reason stored as its last_error (once per distinct reason). */
static void row_refused(bk_broker *b, const md_link_row *row, const char *why)
{
    char err[MD_ERRLEN];
    if (!strncmp(row->last_error, why, sizeof row->last_error - 1))
        return;
    BK_ERROR("cluster link %s: its stored settings are refused (%s); not started", row->name,
             why);
    if (md_link_status(b->db, row->name, row->state, why, err, sizeof err) != 0)
        BK_ERROR("cluster link %s: cannot store its error: %s", row->name, err);
}

/* K4: rows stored plain (before the encoder) or sealed with an old secret
 * are sealed again with the current one, at start; cluster mode publishes
 * them (cluster_links.c writes over the znode only if it is not already
 * sealed with the current key, and never makes one: cluster_links.c L8); the old bytes
 * are scrubbed from the WAL. */
static void reseal_stale(bk_broker *b)
{
    md_link_row *rows = NULL, *sealed = calloc(1, sizeof *sealed);
    size_t n = 0;
    int done = 0;
    char err[MD_ERRLEN], plain[sizeof rows->secrets];
    if (!sealed || md_link_list(b->db, &rows, &n, err, sizeof err) != 0) {
        free(sealed);
        return;                          /* link_sync reports the list's failure */
    }
    for (size_t i = 0; i < n; i++) {
        bool stale;
        if (row_secrets(b, &rows[i], plain, &stale, err, sizeof err) != 0 || !stale)
            continue;
        if (sec_pwenc_seal(b->pwenc, rows[i].name, plain, sealed->secrets,
                           sizeof sealed->secrets, err, sizeof err) != 0 ||
            md_link_secrets_set(b->db, rows[i].name, sealed->secrets, err, sizeof err) != 0) {
            BK_ERROR("cluster link %s: its secret settings stay as stored before: %s",
                     rows[i].name, err);
            continue;
        }
        BK_INFO("cluster link %s: secret settings sealed with password.encoder.secret",
                rows[i].name);
        publish_row(b, false, rows[i].name, BK_PUB_RESEAL);
        done++;
    }
    if (done && md_scrub_wal(b->db, err, sizeof err) != 0)   /* before the loop runs */
        BK_WARN("cluster links: the WAL may still hold secrets stored before: %s", err);
    memset(plain, 0, sizeof plain);
    if (rows)
        memset(rows, 0, n * sizeof *rows);
    free(rows);
    free(sealed);
}

/* The model made to match the rows in SQLite: at start, and in cluster
 * mode after another broker's write was applied (b->links_changed, K6).
 * Links and mirrors the rows lack go, new ones start, changed states are
 * taken; nothing is written or published. */
static void link_sync(bk_broker *b)
{
    lk_set *s = set_of(b);
    md_link_row *links = NULL;
    md_mirror_row *mirrors = NULL;
    size_t nl = 0, nm = 0;
    char err[MD_ERRLEN];
    if (!s || md_link_list(b->db, &links, &nl, err, sizeof err) != 0 ||
        md_mirror_list(b->db, &mirrors, &nm, err, sizeof err) != 0) {
        BK_ERROR("cluster links: cannot read their rows: %s", s ? err : "not started");
        free(links);
        return;
    }
    for (lk_mirror *m = s->mirrors, *n; m; m = n) {
        n = m->next;
        if (!row_has_mirror(mirrors, nm, m->topic)) {
            BK_INFO("mirror topic %s: its row went (deleted on another broker)", m->topic);
            mirror_release(m);
            mirror_unlink(s, m);
        }
    }
    for (lk_link **pp = &s->links; *pp;) {
        lk_link *l = *pp, *made = NULL;
        if (row_has_link(links, nl, l)) {
            for (size_t i = 0; i < nl; i++)  /* K18: the row's binding (cluster mode: ZooKeeper's) */
                if (!strcmp(links[i].name, l->name) &&
                    strcmp(links[i].source_cluster, l->cluster_id))
                    snprintf(l->cluster_id, sizeof l->cluster_id, "%s",
                             links[i].source_cluster);
            pp = &l->next;
            continue;
        }
        for (size_t i = 0; i < nl && !made; i++)
            if (!strcmp(links[i].name, l->name))   /* refused: told below */
                made = link_new(s, &links[i], err, sizeof err);
        if (made) {                      /* K13, K16: changed; its mirrors go on */
            int moved = link_replace(s, l, made);
            BK_INFO("cluster link %s: its settings changed on another broker (source %s); "
                    "reconnecting, its %d mirror topic%s going on from their log ends",
                    made->name, made->bootstrap, moved, moved == 1 ? "" : "s");
            pp = &s->links;              /* made went first in the list */
            continue;
        }
        BK_INFO("cluster link %s: its row went or changed (on another broker)", l->name);
        link_unlist(s, l);
        for (lk_mirror *m = s->mirrors, *n; m; m = n) {
            n = m->next;
            if (m->link == l) {
                mirror_release(m);
                mirror_unlink(s, m);
            }
        }
        link_free(l);
    }
    for (size_t i = 0; i < nl; i++) {
        lk_link *l = link_find(s, links[i].name);
        if (!l && !(l = link_new(s, &links[i], err, sizeof err)))
            row_refused(b, &links[i], err);
        else
            lk_conn_kick(l);
    }
    if (links)                           /* the secrets, before the free */
        memset(links, 0, nl * sizeof *links);
    free(links);
    for (size_t i = 0; i < nm; i++) {
        lk_link *l = link_find(s, mirrors[i].link);
        lk_mirror *m = mirror_find(s, mirrors[i].topic);
        enum lk_mstate st;
        if (!l || state_parse(mirrors[i].state, &st) != 0)
            continue;
        if (m) {
            if (m->state != st && !mirror_terminal(m->state))
                mirror_applied(m, st);
            continue;
        }
        m = mirror_new(s, l, mirrors[i].topic, mirrors[i].source_topic, st);
        bk_topic *t = m ? view_topic_find(b, m->topic, strlen(m->topic)) : NULL;
        if (t && (m->created = parts_grow(m, t->npartitions)) == false)
            BK_ERROR("mirror topic %s: out of memory", m->topic);
        if (m && mirror_left(st))
            mirror_epochs_due(m);       /* K14 at load: the raise may not have landed */
        l->metadata_due_us = 0;          /* its partitions and configs now */
        lk_conn_kick(l);
    }
    free(mirrors);
}

int link_start(bk_broker *b, char *err, size_t errlen)
{
    lk_set *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory for cluster links");
        return -1;
    }
    s->b = b;
    b->links = s;
    s->dns = evdns_base_new(b->base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
    s->tick = event_new(b->base, -1, EV_PERSIST, on_tick, s);
    struct timeval sec = { 1, 0 };
    if (!s->dns || !s->tick || bk_event_add(s->tick, &sec, "cluster links' timer") != 0) {
        snprintf(err, errlen, "cannot start cluster links");
        link_stop(b);
        return -1;
    }
    b->mirror_refuses = link_mirror_refuses;
    b->mirror_led = link_mirror_led;
    b->links_changed = link_sync;        /* K6 (the apply half's call) */
    err[0] = 0;
    reseal_stale(b);                     /* K4 */
    link_sync(b);
    return 0;
}

void link_stop(bk_broker *b)
{
    lk_set *s = set_of(b);
    if (!s)
        return;
    if (s->tick)
        on_tick(-1, 0, s);               /* the last source ends */
    while (s->mirrors)
        mirror_unlink(s, s->mirrors);
    while (s->links) {
        lk_link *l = s->links;
        s->links = l->next;
        link_free(l);
    }
    if (s->tick)
        event_free(s->tick);
    if (s->dns)
        evdns_base_free(s->dns, 0);
    free(s->ends);
    free(s->caught);
    free(s);
    b->links = NULL;
    b->mirror_refuses = NULL;
    b->mirror_led = NULL;
    b->links_changed = NULL;
}
