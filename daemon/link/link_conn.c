/*
 * daemon/link/link_conn.c — a cluster link's connections to its source and
 * the requests on them (issue 33).  Each connection (lk_peer) has its own
 * state, buffers and one request in flight:
 *
 *   IDLE ─kick─► CONNECTING ─connected─► READY ─next─► WAITING ─answer─► READY
 *                  ▲          (SSL / SASL_SSL: the TLS handshake first;     │
 *                  │           SASL_*: the login, C7, before any request)  │
 *                  └─── BACKOFF ◄── an error, EOF, timeout, refused login ─┘
 *                       (reconnect.backoff.ms, doubled up to .max.ms)
 *
 * The bootstrap connection (lk_link.boot, node -1) goes to the bootstrap
 * servers in turn (the next one after each failure) and sends:
 *   Metadata v8 of the mirrors' source topics, when metadata.max.age.ms
 *     has passed (or a mirror was added, or a leader is wanted: C4): the
 *     partition count (followed when the source adds partitions: link.c
 *     lk_mirror_sourced), each partition's leader and leader epoch, and
 *     the brokers' addresses;
 *   DescribeConfigs v2 of the source topics whose mirror is not created
 *     yet (the source's topic overrides go into the mirror's creation),
 *     and after each Metadata of those created (their changes followed:
 *     link.c lk_mirror_configs).
 * An admin connection (lk_peer.admin) per source broker link_sync.c has a
 * group request for (ListGroups, OffsetFetch: link_sync.c S8), made while
 * it has one, so no Fetch long poll delays them; its failures are the
 * sync's (cluster_links.sync_error), never the link's last_error.
 * One connection per source broker that leads a mirrored partition
 * (lk_link.peers, node id, host and port from Metadata), as
 * repl_fetcher.c groups by leader, sends for the partitions it leads:
 *   OffsetForLeaderEpoch v3 (ReplicaId -1) of those to cut first (C5);
 *   Fetch v11 as a consumer (ReplicaId -1, CurrentLeaderEpoch from
 *     Metadata) of the rest, at the mirror's log end, IsolationLevel 0
 *     (read_uncommitted).
 *
 * Why read_uncommitted: the mirror must hold the source's batches at the
 * source's offsets, and its transactions' outcomes with them.  Both
 * isolation levels return the same batches (read_committed stops at the
 * last stable offset and lists the aborted ranges, it does not leave the
 * aborted batches out), so read_committed would only delay the copy of an
 * open transaction's batches; read_uncommitted copies up to the source's
 * high watermark, the markers (control batches) with the rest, and the
 * mirror's own producer state (replica_pstate_record) computes its last
 * stable offset and aborted ranges from them, so its read_committed
 * consumers see exactly what the source's see.
 *
 * Invariants (link.c K2 is the one this file keeps):
 *   C1. An answer is applied to a partition only if its mirror still
 *       fetches (active or promoting), this broker still leads the
 *       partition (link.c K9), its log end is the offset the request carried, the
 *       request went to the broker that answers (lk_part.asked), and the
 *       partition's source leader epoch is still the one it was asked
 *       under and it is not to be cut first (C5).  A partition is in at
 *       most one request, on one connection.
 *   C2. At most one request in flight per connection; the answer's frame
 *       is read whole before it is handled.  The arena and buffers are the
 *       connection's, reset and reused: nothing is allocated per answer
 *       once they have grown.
 *   C3. A failing connection or login is retried with doubling backoff up
 *       to reconnect.backoff.max.ms (the bootstrap connection doubles once
 *       per round of its servers), and its error is logged and stored
 *       once per distinct message (link.c lk_link_error): no retry storm.
 *       A source broker's connection is made only while it leads a
 *       partition to fetch; a successful Metadata clears the link's error
 *       only while no broker's connection is backing off.
 *   C4. NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH
 *       (and the like) or a source broker's dead connection leave the
 *       partitions without a leader (-1: not fetched) and ask Metadata
 *       again, no sooner than reconnect.backoff.ms after the last one; its
 *       answer routes them to their new leader.
 *   C5. The source's truncations are followed by epoch, as a follower
 *       follows its leader (repl_fetcher.c F6): the mirror's batches carry
 *       the source's partition leader epochs, so its epoch history is the
 *       source's.  When Metadata shows a partition's leader epoch changed
 *       (or first seen), or the source answers OFFSET_OUT_OF_RANGE with
 *       the mirror ahead of its high watermark, the partition is not
 *       fetched until its leader answered OffsetForLeaderEpoch for the
 *       mirror's latest epoch and the mirror was cut where it leaves the
 *       source's log (repl_epoch_cut, repl_truncate: the replica's path).
 *       A fetch with the old epoch is fenced by the source, so no batch of
 *       a new epoch is appended before that check, and an answer asked
 *       under an older epoch is dropped (C1: asked again), as Kafka's
 *       AbstractFetcherThread drops one.  The mirror's epoch history holds
 *       no epoch of the destination's while it mirrors (replica.c,
 *       repl_isr.c), and an empty mirror asks nothing.  Ahead of the
 *       source (OFFSET_OUT_OF_RANGE) with no epoch of the mirror's in its
 *       history (UNDEFINED: the source topic recreated?), nothing is cut:
 *       the mirror's error says so, asked again after
 *       reconnect.backoff.max.ms.
 *   C6. A plaintext connection's answers do not go through libevent's
 *       input buffer: each connection's are recv()d straight into its c->in
 *       by on_sock_read (daemon/replication/repl_frame.h, the replica
 *       fetchers' reader),
 *       the connection's own event (libevent 2.1 reads 4 KiB per wakeup
 *       whatever bufferevent_set_max_single_read says: a 4 MiB answer took
 *       a thousand loop turns, each a readv, an FIONREAD and a timer
 *       re-armed, and the mirror's catch-up ran at a tenth of a
 *       follower's).  While more than REPL_FRAME_LOWAT_MIN of an answer is
 *       missing the socket's SO_RCVLOWAT is that (at most
 *       REPL_FRAME_LOWAT_MAX), 1 otherwise (repl_frame.h RF3).  The bufferevent keeps
 *       connecting and output.  A TLS connection's answers come through
 *       its bufferevent (SSL_read), whole frames taken out of its input
 *       buffer by on_tls_read.
 *   C7. Security is the broker's own client code, with the link's
 *       settings: TLS (SSL, SASL_SSL) through libevent's OpenSSL filter
 *       (daemon/security/sec_tls.c) with the link's own context, made
 *       from ssl.ca.location (or ssl.truststore.location; none: the
 *       system's CAs), ssl.certificate.location / ssl.key.location /
 *       ssl.key.password (a client certificate, for a source that asks
 *       one), checked at INSERT (link.c; the files read by the SQL
 *       worker, link_tls_prepare) and made again after a restart (the
 *       files read on b->calls, tls_job: the connections wait for it with
 *       no socket; never on the loop: no worker fails the connection, C3).
 *       A failed build is a connection error (C3: logged once, tried
 *       again after the doubling backoff, one job at a time per link)
 *       naming the setting, the file and the cause; a certificate file
 *       that is not a regular file (a FIFO, a device) is refused at once
 *       without being read (sec_tls.c T6), so no thread waits on it;
 *       the source's certificate must chain to those CAs, and name the
 *       host connected to unless ssl.endpoint.identification.algorithm is
 *       empty.  A certificate refused is a connection error (C3) whose
 *       message names the certificate's problem.  SASL (SASL_PLAINTEXT,
 *       SASL_SSL) logs in with the replica fetchers' client
 *       (sec_sasl_client.h: PLAIN, SCRAM-SHA-256/512; nothing else goes
 *       out until it succeeded; SCRAM's salted password computed off the
 *       loop, once per salt, for every connection of the link: lk_link.keys),
 *       on every connection, the bootstrap one and each source broker's.
 *       A refused login is a connection error (C3).  With the source's
 *       SessionLifetimeMs (KIP-368), the connection's next request after a
 *       random 85 to 95 % of it is a new SaslHandshake on it, as the
 *       replica fetchers do (repl_fetch_reauth_due): the source never
 *       closes an active link's connection at its session's end.
 *   C8. Each bootstrap connection asks Metadata first and nothing else
 *       until its answer's ClusterId is the link's (link.c K18;
 *       cluster_check, recorded at the first): another cluster's answer
 *       routes no partition (every one left without a leader), and fails
 *       the connection (C3) with last_error naming both ids.  The source
 *       brokers' connections are made only from a checked answer.
 */
#include "daemon/link/link_int.h"
#include "daemon/view/view.h"
#include "daemon/view/view_store.h"
#include "daemon/replica/replica.h"
#include "daemon/replica/replica_producers.h"
#include "daemon/replication/repl_fetcher.h"
#include "daemon/security/sec_tls.h"
#include "daemon/worker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include "kp_msgs.h"

#define LK_FETCH_VERSION 11
#define LK_METADATA_VERSION 8
#define LK_CONFIGS_VERSION 2
#define LK_EPOCH_VERSION 3
/* Beyond fetch.max.wait.ms, how long an answer may take (Kafka's
 * request.timeout.ms default). */
#define LK_REQUEST_TIMEOUT_MS 30000
/* DescribeConfigs' ConfigSource for a topic's own override. */
#define LK_DYNAMIC_TOPIC_CONFIG 1

static void next_request(lk_peer *c);
static void peer_connect(lk_peer *c);

static void arm(lk_peer *c, int64_t ms)
{
    if (!c->timer)
        return;
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
    bk_event_add(c->timer, &tv, "a cluster link's timer");
}

/* Every partition lp (index i) of link l's mirrors m; `continue` goes to
 * the next partition. */
#define EACH_PART(l, m, i, lp)                                                     \
    for (lk_mirror *m = (l)->set->mirrors; m; m = m->next)                         \
        if (m->link == (l))                                                        \
            for (int32_t i = 0; i < m->nparts; i++)                                \
                for (lk_part *lp = &m->parts[i]; lp; lp = NULL)

/* What c had asked is asked again (C1: in no request now). */
static void requests_forgotten(lk_peer *c)
{
    lk_link *l = c->link;
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        if (m->link == l && c->node < 0)
            m->in_request = false;
    if (c->node >= 0 && !c->admin)
        EACH_PART(l, m, i, lp)
            if (lp->in_request && lp->asked == c->node)
                lp->in_request = false;
}

/* A source broker's connection has partitions to fetch (or cut). */
static bool peer_wanted(const lk_peer *c)
{
    if (c->admin)
        return lk_sync_wants(c->link, c->node);  /* link_sync.c: a group request for it */
    if (c->node < 0)
        return true;
    EACH_PART(c->link, m, i, lp)
        if (lp->leader == c->node && lk_mirror_fetching(m) && lk_copies(m, i))
            return true;                 /* link.c K9: a partition led here */
    return false;
}

static void peer_close(lk_peer *c)
{
    bool live = c->bev != NULL;          /* a request may have been out */
    if (c->rev)
        event_free(c->rev);
    c->rev = NULL;
    repl_frame_reset(&c->in);
    sec_sasl_client_reset(&c->sasl);
    c->reauth_us = 0;
    if (c->bev)
        bufferevent_free(c->bev);
    c->bev = NULL;
    if (c->timer)
        event_del(c->timer);
    c->conn = LK_IDLE;
    requests_forgotten(c);
    if (c->node < 0 || (live && c->admin))
        lk_sync_forgotten(c->link, c->node);     /* link_sync.c's requests on it */
}

void lk_conn_close(lk_link *l)
{
    peer_close(&l->boot);
    for (lk_peer *c = l->peers; c; c = c->next)
        peer_close(c);
}

static void peer_free_parts(lk_peer *c)
{
    peer_close(c);
    if (c->timer)
        event_free(c->timer);
    c->timer = NULL;
    kp_buf_free(&c->out);
    kp_arena_free(&c->arena);
    repl_frame_free(&c->in);
}

/* ---- the SASL login (C7; its client: daemon/security/sec_sasl_client.c) ------- */
static void send_request(void *conn, int16_t api, int16_t version, const void *q);
static void conn_fail(lk_peer *c, const char *why);

static void sasl_conn_fail(void *conn, const char *why)
{
    conn_fail(conn, why);
}

/* Logged in: the requests, and (KIP-368) a login again before the
 * source's session ends. */
static void sasl_authenticated(void *conn, int64_t lifetime_ms)
{
    lk_peer *c = conn;
    c->reauth_us = repl_fetch_reauth_due(lifetime_ms);
    c->conn = LK_READY;
    next_request(c);
}

static const bk_sasl_client_ops sasl_ops = { send_request, sasl_conn_fail, sasl_authenticated };

/* The salted password is known (or failed): each connection of the link
 * waiting for it goes on. */
static void on_salted(void *owner, bool ok)
{
    lk_link *l = owner;
    for (lk_peer *c = &l->boot; c; c = c == &l->boot ? l->peers : c->next)
        if (c->sasl.salting) {
            sec_sasl_client_resume(&c->sasl, ok);
            if (c->sasl.salting)
                c->conn = LK_WAITING;    /* another salt: nothing else is sent */
        }
}

static void peer_init(lk_peer *c, lk_link *l, int32_t node)
{
    c->link = l;
    c->node = node;
    kp_buf_init(&c->out);
    kp_arena_init(&c->arena, KP_ARENA_LIMIT_DEFAULT);
    sec_sasl_client_init(&c->sasl, &l->keys, &sasl_ops, c, node);
}

void lk_conn_init(lk_link *l)
{
    snprintf(l->who, sizeof l->who, "cluster link %s", l->name);
    sec_sasl_keys_init(&l->keys, l->b, on_salted, l);
    sec_sasl_keys_login(&l->keys, l->mechanism, l->user, l->pass, l->who);
    peer_init(&l->boot, l, -1);
}

void lk_conn_free(lk_link *l)
{
    peer_free_parts(&l->boot);
    while (l->peers) {
        lk_peer *c = l->peers;
        l->peers = c->next;
        peer_free_parts(c);
        free(c);
    }
    sec_sasl_keys_free(&l->keys);        /* a salting job in flight is disowned */
    if (l->tls_job)
        l->tls_job->link = NULL;         /* disowned: its done() frees it */
    l->tls_job = NULL;
    SSL_CTX_free(l->tls_ctx);
    l->tls_ctx = NULL;
}

int lk_conn_tls(lk_link *l, char *err, size_t errlen)
{
    char e[512];
    if (l->tls_ctx)
        return KP_NONE;
    sec_tls_files f = {
        .chain_key = l->ssl_cert_key ? l->ssl_cert_key : "ssl.certificate.location",
        .chain_file = l->ssl_cert,
        .key_key = "ssl.key.location", .key_file = l->ssl_key,
        .chain_pem = "", .key_pem = "", .key_password = l->ssl_key_pass,
        .ca_key = l->ssl_ca_key ? l->ssl_ca_key : "ssl.ca.location", .ca_file = l->ssl_ca,
        .ca_pem = "",
        .protocols = "TLSv1.2,TLSv1.3" };
    if (l->ssl_key[0] && !l->ssl_cert[0]) {
        snprintf(err, errlen, "cluster_links.config: ssl.key.location needs "
                 "ssl.certificate.location");
        return KP_INVALID_CONFIG;
    }
    if (!(l->tls_ctx = sec_tls_client_ctx_new(&f, e, sizeof e))) {
        snprintf(err, errlen, "cluster_links.config: %s", e);
        return KP_INVALID_CONFIG;
    }
    return KP_NONE;
}

/* C4: Metadata again, no sooner than reconnect.backoff.ms after the last. */
static void metadata_soon(lk_link *l)
{
    int64_t at = l->metadata_sent_us + l->backoff_ms * 1000;
    if (at < l->metadata_due_us)
        l->metadata_due_us = at;
    if (l->boot.conn == LK_READY || l->boot.conn == LK_IDLE)
        arm(&l->boot, 0);                /* next loop turn: not inside an answer */
}

/* C4: the partitions c's broker led wait for the next Metadata. */
static void unroute(lk_peer *c)
{
    EACH_PART(c->link, m, i, lp)
        if (lp->leader == c->node)
            lp->leader = -1;
    metadata_soon(c->link);
}

/* C3 */
static void conn_fail(lk_peer *c, const char *why)
{
    lk_link *l = c->link;
    char msg[1024];
    if (c->node >= 0)
        snprintf(msg, sizeof msg, "source broker %d: %s", (int)c->node, why);
    if (c->admin)                        /* the sync's error, not the mirroring's */
        lk_sync_conn_failed(l, c->node, msg);
    peer_close(c);
    if (!c->admin)
        lk_link_error(l, c->node >= 0 ? msg : why);
    bool round = true;
    if (c->node < 0 && l->nboot > 1) {   /* the next bootstrap server */
        int count;
        char err[256];
        l->boot_at = (l->boot_at + 1) % l->nboot;
        round = l->boot_at == 0;
        lk_bootstrap_nth(l->bootstrap, l->boot_at, c->host, sizeof c->host, &c->port, &count,
                         err, sizeof err);
    }
    if (round || !c->backoff_cur_ms)
        c->backoff_cur_ms = c->backoff_cur_ms ? c->backoff_cur_ms * 2 : l->backoff_ms;
    if (c->backoff_cur_ms > l->backoff_max_ms)
        c->backoff_cur_ms = l->backoff_max_ms;
    c->conn = LK_BACKOFF;
    arm(c, c->backoff_cur_ms);
    if (c->node >= 0 && !c->admin)
        unroute(c);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    lk_peer *c = arg;
    if (c->conn == LK_BACKOFF || c->conn == LK_IDLE) {
        if (peer_wanted(c))
            peer_connect(c);
        else
            c->conn = LK_IDLE;
    } else if (c->conn == LK_READY) {
        next_request(c);
    }
}

static void peer_kick(lk_peer *c)
{
    if (!c->timer && !(c->timer = event_new(c->link->b->base, -1, 0, on_timer, c)))
        return;
    if (c->conn == LK_IDLE && peer_wanted(c))
        peer_connect(c);
    else if (c->conn == LK_READY)
        next_request(c);
}

void lk_conn_kick(lk_link *l)
{
    peer_kick(&l->boot);
    for (lk_peer *c = l->peers; c; c = c->next)
        peer_kick(c);
}

static lk_peer *peer_get(lk_link *l, int32_t node, bool admin, kp_str host, int32_t port)
{
    lk_peer *c = l->peers;
    while (c && (c->node != node || c->admin != admin))
        c = c->next;
    if (!c) {
        if (!(c = calloc(1, sizeof *c)))
            return NULL;
        peer_init(c, l, node);
        c->admin = admin;
        c->next = l->peers;
        l->peers = c;
    }
    if (host.len <= 0 || (size_t)host.len >= sizeof c->host)
        return c;
    if ((size_t)host.len != strlen(c->host) || memcmp(c->host, host.p, (size_t)host.len) ||
        c->port != port) {
        peer_close(c);                   /* moved: connected again at its new address */
        memcpy(c->host, host.p, (size_t)host.len);
        c->host[host.len] = 0;
        c->port = port;
    }
    return c;
}

lk_peer *lk_peer_get(lk_link *l, int32_t node, kp_str host, int32_t port)
{
    return peer_get(l, node, false, host, port);
}

lk_peer *lk_admin_peer_get(lk_link *l, int32_t node, kp_str host, int32_t port)
{
    return peer_get(l, node, true, host, port);
}

/* After a Metadata: the connections of source brokers that lead no
 * partition of the link's mirrors any more are freed, their buffers (grown
 * to their largest answer, C2) with them.  Partitions hold node ids, not
 * connections: a leader again gets a new one (lk_peer_get). */
static void peers_prune(lk_link *l)
{
    for (lk_peer **pp = &l->peers; *pp;) {
        lk_peer *c = *pp;
        bool leads = c->admin && lk_sync_wants(l, c->node);   /* until answered */
        EACH_PART(l, m, i, lp)
            leads |= !c->admin && lp->leader == c->node;
        if (leads) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        peer_free_parts(c);              /* closed: its requests forgotten (C1) */
        free(c);
    }
}

/* Frames and sends a request; WAITING after.  conn: the lk_peer (the
 * SASL client's ops->send too, C7). */
static void send_request(void *conn, int16_t api, int16_t version, const void *q)
{
    lk_peer *c = conn;
    if (++c->corrid < 0)
        c->corrid = 0;
    char client_id[MD_TOPIC_NAME_MAX + 16];
    snprintf(client_id, sizeof client_id, "sluice-link-%s", c->link->name);
    kp_buf_reset(&c->out);
    size_t frame = kp_wr_i32_placeholder(&c->out);
    kp_req_hdr_write(&c->out, api, version, c->corrid, client_id);
    switch (api) {
    case KP_API_FETCH: kp_enc_FetchRequest(&c->out, version, q); break;
    case KP_API_METADATA: kp_enc_MetadataRequest(&c->out, version, q); break;
    case KP_API_DESCRIBE_CONFIGS: kp_enc_DescribeConfigsRequest(&c->out, version, q); break;
    case KP_API_OFFSET_FOR_LEADER_EPOCH:
        kp_enc_OffsetForLeaderEpochRequest(&c->out, version, q);
        break;
    case KP_API_SASL_HANDSHAKE: kp_enc_SaslHandshakeRequest(&c->out, version, q); break;
    case KP_API_LIST_GROUPS: kp_enc_ListGroupsRequest(&c->out, version, q); break;
    case KP_API_OFFSET_FETCH: kp_enc_OffsetFetchRequest(&c->out, version, q); break;
    case KP_API_DESCRIBE_ACLS: kp_enc_DescribeAclsRequest(&c->out, version, q); break;
    case KP_API_FIND_COORDINATOR: kp_enc_FindCoordinatorRequest(&c->out, version, q); break;
    case KP_API_API_VERSIONS: kp_enc_ApiVersionsRequest(&c->out, version, q); break;
    default: kp_enc_SaslAuthenticateRequest(&c->out, version, q); break;
    }
    kp_wr_i32_at(&c->out, frame, (int32_t)(c->out.len - frame - 4));
    if (c->out.err || bufferevent_write(c->bev, c->out.data, c->out.len) != 0) {
        conn_fail(c, "cannot send a request to the source");
        return;
    }
    if (api == KP_API_SASL_AUTHENTICATE)
        memset(c->out.data, 0, c->out.len);          /* the password */
    c->api_out = api;
    c->conn = LK_WAITING;
}

/* link_sync.c's requests: on the bootstrap connection (lk_conn_send) or
 * on a source broker's (lk_peer_send, from next_request through
 * lk_sync_peer_send), each ready when called. */
void lk_conn_send(lk_link *l, int16_t api, int16_t version, const void *q)
{
    send_request(&l->boot, api, version, q);
}

void lk_peer_send(lk_peer *c, int16_t api, int16_t version, const void *q)
{
    send_request(c, api, version, q);
}

void lk_peer_poke(lk_peer *c)
{
    if (!c->timer && !(c->timer = event_new(c->link->b->base, -1, 0, on_timer, c)))
        return;
    if (c->conn == LK_IDLE || c->conn == LK_READY)
        arm(c, 0);                       /* on_timer: connect, or next_request */
}

/* ---- what READY sends next ----------------------------------------------------- */
static bool send_metadata(lk_peer *c, int64_t now)
{
    lk_link *l = c->link;
    int n = 0;
    if (now < l->metadata_due_us)
        return false;
    /* Due again in metadata.max.age.ms, whether or not there is anything
     * to ask (an idle link wakes that often, not every loop turn). */
    l->metadata_due_us = now + l->metadata_max_age_ms * 1000;
    l->metadata_sent_us = now;
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        n += m->link == l && m->state != LK_PROMOTED && m->state != LK_FAILED_OVER &&
             m->state != LK_FAILED;
    if (n == 0 && !l->sync_cfg.auto_topics && l->cluster_checked)
        return false;                    /* C8: else its cluster id is asked anyway */
    /* n may be 0 (C8: the cluster id only): an empty list, not null (all) */
    kp_MetadataRequest_MetadataRequestTopic *ts =
        kp_arena_alloc(&c->arena, (size_t)(n ? n : 1) * sizeof *ts);
    if (!ts) {
        conn_fail(c, "out of memory for a request");
        return true;
    }
    n = 0;
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        if (m->link == l && m->state != LK_PROMOTED && m->state != LK_FAILED_OVER &&
            m->state != LK_FAILED) {
            ts[n++].Name = kp_str_cstr(m->source);
            m->in_request = true;
        }
    kp_MetadataRequest q;
    kp_init_MetadataRequest(&q);
    q.Topics = l->sync_cfg.auto_topics ? NULL : ts;      /* every topic: link_sync.c */
    q.Topics_count = l->sync_cfg.auto_topics ? -1 : n;
    q.AllowAutoTopicCreation = false;
    send_request(c, KP_API_METADATA, LK_METADATA_VERSION, &q);
    return true;
}

/* The mirror's source configs are wanted: to create it, or (each
 * Metadata) to follow their changes. */
static bool configs_wanted(const lk_link *l, const lk_mirror *m)
{
    return m->link == l && (m->created ? m->configs_due : m->source_parts > 0) &&
           (m->state == LK_ACTIVE || m->state == LK_PAUSED || m->state == LK_PROMOTING);
}

static bool send_configs(lk_peer *c)
{
    lk_link *l = c->link;
    int n = 0;
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        n += configs_wanted(l, m);
    if (n == 0)
        return false;
    kp_DescribeConfigsRequest_DescribeConfigsResource *rs =
        kp_arena_alloc(&c->arena, (size_t)n * sizeof *rs);
    if (!rs) {
        conn_fail(c, "out of memory for a request");
        return true;
    }
    n = 0;
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        if (configs_wanted(l, m)) {
            rs[n++] = (kp_DescribeConfigsRequest_DescribeConfigsResource){
                .ResourceType = 2, .ResourceName = kp_str_cstr(m->source),
                .ConfigurationKeys_count = -1 };
            m->in_request = true;
        }
    kp_DescribeConfigsRequest q;
    kp_init_DescribeConfigsRequest(&q);
    q.Resources = rs;
    q.Resources_count = n;
    send_request(c, KP_API_DESCRIBE_CONFIGS, LK_CONFIGS_VERSION, &q);
    return true;
}

/* A partition c may ask for now: led by c's broker, fetching, not in a
 * request, not waiting; else the earliest retry into *next_us. */
static bk_partition *askable(lk_peer *c, lk_mirror *m, int32_t i, int64_t now,
                               int64_t *next_us)
{
    lk_part *lp = &m->parts[i];
    if (lp->leader != c->node || lp->in_request || !lk_mirror_fetching(m))
        return NULL;
    if (lp->retry_us > now) {
        if (lp->retry_us < *next_us)
            *next_us = lp->retry_us;
        return NULL;
    }
    return lk_copies(m, i);     /* NULL: created by the next Metadata; led elsewhere (link.c K9) */
}

/* The walk of send_epochs and send_fetch: the partitions c may ask for now
 * (askable), either those to cut first (C5) or the others, in EACH_PART's
 * order.  ask_start counts the ones c's broker leads (the room a request
 * needs); ask_next gives each askable one in turn, NULL at the end. */
typedef struct {
    lk_peer *c;
    bool cut;                        /* lk_part.truncating of those it gives */
    int64_t now, *next_us;
    lk_mirror *m;                    /* where it is: m's partition i next */
    int32_t i;
} ask_walk;

static int ask_start(ask_walk *w, lk_peer *c, bool cut, int64_t now, int64_t *next_us)
{
    *w = (ask_walk){ .c = c, .cut = cut, .now = now, .next_us = next_us,
                     .m = c->link->set->mirrors };
    int n = 0;
    EACH_PART(c->link, m, i, lp)
        n += lp->truncating == cut && lp->leader == c->node;
    return n;
}

static bk_partition *ask_next(ask_walk *w, lk_mirror **m, int32_t *i)
{
    for (; w->m; w->m = w->m->next, w->i = 0) {
        if (w->m->link != w->c->link)
            continue;
        while (w->i < w->m->nparts) {
            int32_t k = w->i++;
            bk_partition *v = w->m->parts[k].truncating != w->cut ? NULL :
                              askable(w->c, w->m, k, w->now, w->next_us);
            if (v) {
                *m = w->m;
                *i = k;
                return v;
            }
        }
    }
    return NULL;
}

/* C5: one OffsetForLeaderEpoch of the partitions to cut first.  A mirror
 * that holds nothing (or no epoch history) has nothing to ask and nothing
 * to cut. */
static bool send_epochs(lk_peer *c, int64_t now, int64_t *next_us)
{
    ask_walk w;
    int n = ask_start(&w, c, true, now, next_us);
    if (n == 0)
        return false;
    kp_OffsetForLeaderEpochRequest_OffsetForLeaderTopic *ts =
        kp_arena_alloc(&c->arena, (size_t)n * sizeof *ts);
    kp_OffsetForLeaderEpochRequest_OffsetForLeaderPartition *ps =
        kp_arena_alloc(&c->arena, (size_t)n * sizeof *ps);
    if (!ts || !ps) {
        conn_fail(c, "out of memory for a request");
        return true;
    }
    n = 0;
    lk_mirror *m;
    int32_t i;
    for (bk_partition *v; (v = ask_next(&w, &m, &i)) != NULL;) {
        lk_part *lp = &m->parts[i];
        lp->oe_epoch = seg_epoch_latest(v->log);
        if (lp->oe_epoch < 0 || seg_log_end(v->log) == seg_log_start(v->log)) {
            lp->truncating = false;
            continue;
        }
        lp->oe_end = seg_log_end(v->log);
        lp->fetch_epoch = lp->leader_epoch;     /* C1: an answer under another is stale */
        lp->in_request = true;
        lp->asked = c->node;
        ps[n] = (kp_OffsetForLeaderEpochRequest_OffsetForLeaderPartition){
            .Partition = i, .CurrentLeaderEpoch = lp->leader_epoch, .LeaderEpoch = lp->oe_epoch,
        };
        ts[n] = (kp_OffsetForLeaderEpochRequest_OffsetForLeaderTopic){
            .Topic = kp_str_cstr(m->source), .Partitions = &ps[n], .Partitions_count = 1,
        };
        n++;
    }
    if (n == 0)
        return false;
    kp_OffsetForLeaderEpochRequest q;
    kp_init_OffsetForLeaderEpochRequest(&q);
    q.ReplicaId = -1;                    /* a consumer's */
    q.Topics = ts;
    q.Topics_count = n;
    send_request(c, KP_API_OFFSET_FOR_LEADER_EPOCH, LK_EPOCH_VERSION, &q);
    return true;
}

/* One topic entry per partition (the request allows it; no grouping to
 * keep): every partition c's broker leads that is not paused by an error
 * or to be cut first. */
static bool send_fetch(lk_peer *c, int64_t now, int64_t *next_us)
{
    lk_link *l = c->link;
    ask_walk w;
    int n = ask_start(&w, c, false, now, next_us);
    if (n == 0)
        return false;
    kp_FetchRequest_FetchTopic *ts = kp_arena_alloc(&c->arena, (size_t)n * sizeof *ts);
    kp_FetchRequest_FetchPartition *ps = kp_arena_alloc(&c->arena, (size_t)n * sizeof *ps);
    if (!ts || !ps) {
        conn_fail(c, "out of memory for a request");
        return true;
    }
    n = 0;
    lk_mirror *m;
    int32_t i;
    for (bk_partition *v; (v = ask_next(&w, &m, &i)) != NULL;) {
        lk_part *lp = &m->parts[i];
        lp->retry_us = 0;
        lp->fetch_offset = seg_log_end(v->log);
        lp->in_request = true;
        lp->asked = c->node;
        lp->fetch_epoch = lp->leader_epoch;     /* C1 */
        ps[n] = (kp_FetchRequest_FetchPartition){
            .Partition = i, .CurrentLeaderEpoch = lp->leader_epoch,
            .FetchOffset = lp->fetch_offset, .LastFetchedEpoch = -1, .LogStartOffset = -1,
            .PartitionMaxBytes = l->partition_max_bytes,
        };
        ts[n] = (kp_FetchRequest_FetchTopic){
            .Topic = kp_str_cstr(m->source), .Partitions = &ps[n], .Partitions_count = 1,
        };
        n++;
    }
    if (n == 0)
        return false;
    kp_FetchRequest q;
    kp_init_FetchRequest(&q);
    q.ReplicaId = -1;                    /* a consumer: bounded by the high watermark */
    q.MaxWaitMs = l->fetch_max_wait_ms;
    q.MinBytes = l->fetch_min_bytes;
    q.MaxBytes = l->fetch_max_bytes;
    q.IsolationLevel = 0;                /* read_uncommitted: see the note at the top */
    q.SessionId = 0;
    q.SessionEpoch = -1;
    q.Topics = ts;
    q.Topics_count = n;
    q.RackId = (kp_str){ "", 0 };
    send_request(c, KP_API_FETCH, LK_FETCH_VERSION, &q);
    return true;
}

static void next_request(lk_peer *c)
{
    if (c->conn != LK_READY || !c->bev)
        return;
    lk_link *l = c->link;
    int64_t now = bk_mono_us(), next_us = INT64_MAX;
    kp_arena_reset(&c->arena);
    if (c->reauth_us && now >= c->reauth_us) {
        c->reauth_us = 0;
        sec_sasl_client_start(&c->sasl);         /* C7: KIP-368, same connection */
        return;
    }
    if (c->node < 0) {
        if (!l->cluster_checked) {       /* C8: nothing else before the cluster id */
            l->metadata_due_us = 0;
            send_metadata(c, now);
            return;
        }
        if (lk_sync_topics_create(l) || send_metadata(c, now) || send_configs(c) ||
            lk_sync_send(l, now, &next_us))
            return;
        if (l->metadata_due_us < next_us)
            next_us = l->metadata_due_us;
    } else if (c->admin ? lk_sync_peer_send(c)
               : send_epochs(c, now, &next_us) || send_fetch(c, now, &next_us)) {
        return;
    }
    /* Nothing to ask now: wake for the next Metadata or retry (a broker's
     * connection with nothing to retry sleeps until kicked). */
    if (next_us != INT64_MAX)
        arm(c, next_us > now ? (next_us - now) / 1000 + 1 : 1);
}

/* ---- the answers ----------------------------------------------------------------- */
static lk_mirror *mirror_of_source(lk_link *l, kp_str source)
{
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        if (m->link == l && m->in_request && kp_str_eq(source, m->source))
            return m;
    return NULL;
}

/* The partitions' leaders from Metadata (C4, C5): a leader epoch that
 * changed (or first seen) first cuts the mirror where it leaves the
 * source's log; each leader gets its connection, kicked. */
static void route(lk_link *l, lk_mirror *m, const kp_MetadataResponse *mr,
                  const kp_MetadataResponse_MetadataResponseTopic *t)
{
    for (int32_t j = 0; j < t->Partitions_count; j++) {
        const kp_MetadataResponse_MetadataResponsePartition *sp = &t->Partitions[j];
        int32_t k = sp->PartitionIndex;
        if (k < 0 || k >= m->nparts)
            continue;
        lk_part *lp = &m->parts[k];
        int32_t leader = sp->ErrorCode == KP_NONE ? sp->LeaderId : -1;
        const kp_MetadataResponse_MetadataResponseBroker *br = NULL;
        for (int32_t x = 0; leader >= 0 && x < mr->Brokers_count; x++)
            if (mr->Brokers[x].NodeId == leader)
                br = &mr->Brokers[x];
        if (!br || !lk_peer_get(l, leader, br->Host, br->Port))
            leader = -1;                 /* asked again after reconnect.backoff.ms */
        if (leader < 0) {
            lp->leader = -1;
            metadata_soon(l);
            continue;
        }
        if (sp->LeaderEpoch != lp->leader_epoch)
            lp->truncating = true;       /* C5 (and each partition once at start) */
        if (leader != lp->leader || sp->LeaderEpoch != lp->leader_epoch)
            lp->retry_us = 0;            /* moved: asked at once */
        lp->leader = leader;
        lp->leader_epoch = sp->LeaderEpoch;
    }
}

/* C8: the answer's cluster id against the link's (recorded at the first
 * answer that has one, link.c K18): another cluster's answer is not used and the
 * connection fails (C3: logged and stored once, backoff); false then. */
static bool cluster_check(lk_peer *c, const kp_MetadataResponse *mr)
{
    lk_link *l = c->link;
    char id[sizeof l->cluster_id], why[1024], err[MD_ERRLEN];
    bool none = mr->ClusterId.len <= 0 || !mr->ClusterId.p;   /* null (or empty): none */
    snprintf(id, sizeof id, "%.*s", none ? 0 : (int)mr->ClusterId.len,
             none ? "" : mr->ClusterId.p);
    if (l->cluster_id[0] && (none || strcmp(id, l->cluster_id))) {
        snprintf(why, sizeof why, "the source at %s:%d is %s%s, the link was made for cluster "
                 "%s: nothing is fetched from it (bootstrap_servers names another cluster; "
                 "point it back, or make another link)", c->host, c->port,
                 none ? "a cluster that gives no cluster id" : "cluster ", id, l->cluster_id);
        EACH_PART(l, m, i, lp)
            lp->leader = -1;             /* fetch nothing: only its Metadata routes */
        conn_fail(c, why);
        return false;
    }
    if (none && !l->cluster_none_told) {
        l->cluster_none_told = true;
        BK_WARN("cluster link %s: the source at %s:%d gives no cluster id (Kafka before "
                "0.10.1?): the link cannot check that bootstrap_servers still names the "
                "cluster it was made for", l->name, c->host, c->port);
    } else if (!none && !l->cluster_id[0]) {
        snprintf(l->cluster_id, sizeof l->cluster_id, "%s", id);
        if (md_link_source_cluster_set(l->b->db, l->name, id, err, sizeof err) != 0)
            BK_ERROR("cluster link %s: cannot store its source's cluster id: %s", l->name,
                     err);
        else {
            BK_INFO("cluster link %s: bound to source cluster %s (at %s:%d)", l->name, id,
                    c->host, c->port);
            if (l->b->store && l->b->store->link_publish)     /* cluster_links.c L10 */
                l->b->store->link_publish(l->b, false, l->name, BK_PUB_UPDATE);
        }
    }
    l->cluster_checked = true;
    return true;
}

static void handle_metadata(lk_peer *c, kp_rd *r)
{
    lk_link *l = c->link;
    kp_MetadataResponse mr;
    if (kp_dec_MetadataResponse(r, LK_METADATA_VERSION, &mr, &c->arena) != 0) {
        conn_fail(c, "malformed Metadata answer from the source");
        return;
    }
    if (!cluster_check(c, &mr))
        return;
    c->backoff_cur_ms = 0;
    for (int32_t i = 0; i < mr.Topics_count; i++) {
        const kp_MetadataResponse_MetadataResponseTopic *t = &mr.Topics[i];
        lk_mirror *m;
        if (l->sync_cfg.auto_topics && t->ErrorCode == KP_NONE)
            lk_sync_topic_seen(l, t->Name);
        while ((m = mirror_of_source(l, t->Name))) {
            m->in_request = false;
            char why[1024];
            if (t->ErrorCode != KP_NONE || t->Partitions_count <= 0) {
                snprintf(why, sizeof why, "source topic %s: %s", m->source,
                         t->ErrorCode == KP_UNKNOWN_TOPIC_OR_PARTITION
                             ? "does not exist on the source"
                             : kp_error_name(t->ErrorCode ? t->ErrorCode : KP_INVALID_PARTITIONS));
                lk_mirror_error(m, why);
                continue;
            }
            m->source_parts = t->Partitions_count;
            m->configs_due = m->created;
            if (m->created) {
                lk_mirror_sourced(m, t->Partitions_count, NULL, 0, false);
                route(l, m, &mr, t);
            }
        }
    }
    if (l->sync_cfg.auto_topics)
        lk_sync_metadata_done(l);
    lk_sync_brokers(l, mr.Brokers, mr.Brokers_count);
    requests_forgotten(c);
    /* The source answers: healthy, unless a broker that leads a partition
     * (as this answer says) cannot be reached (C3). */
    bool backing_off = false;
    for (lk_peer *p = l->peers; p; p = p->next)
        backing_off |= p->conn == LK_BACKOFF && peer_wanted(p);
    if (!backing_off)
        lk_link_error(l, NULL);
    peers_prune(l);
    for (lk_peer *p = l->peers; p; p = p->next)
        peer_kick(p);
}

static void handle_configs(lk_peer *c, kp_rd *r)
{
    lk_link *l = c->link;
    kp_DescribeConfigsResponse dr;
    if (kp_dec_DescribeConfigsResponse(r, LK_CONFIGS_VERSION, &dr, &c->arena) != 0) {
        conn_fail(c, "malformed DescribeConfigs answer from the source");
        return;
    }
    for (int32_t i = 0; i < dr.Results_count; i++) {
        const kp_DescribeConfigsResponse_DescribeConfigsResult *res = &dr.Results[i];
        lk_mirror *m = mirror_of_source(l, res->ResourceName);
        if (!m)
            continue;
        m->in_request = false;
        if (res->ErrorCode != KP_NONE) {
            char why[1024];
            snprintf(why, sizeof why, "DescribeConfigs of source topic %s: %s", m->source,
                     kp_error_name(res->ErrorCode));
            lk_mirror_error(m, why);
            m->source_parts = 0;         /* asked again after the next Metadata */
            m->configs_due = false;
            continue;
        }
        md_kv *kv = kp_arena_alloc(&c->arena, (size_t)(res->Configs_count + 1) * sizeof *kv);
        size_t n = 0;
        for (int32_t j = 0; kv && j < res->Configs_count; j++) {
            const kp_DescribeConfigsResponse_DescribeConfigsResourceResult *cf = &res->Configs[j];
            if (cf->ConfigSource != LK_DYNAMIC_TOPIC_CONFIG || cf->Value.len < 0)
                continue;
            char *name = kp_arena_alloc(&c->arena, (size_t)cf->Name.len + 1);
            char *value = kp_arena_alloc(&c->arena, (size_t)cf->Value.len + 1);
            if (!name || !value)
                break;
            memcpy(name, cf->Name.p, (size_t)cf->Name.len);
            memcpy(value, cf->Value.p, (size_t)cf->Value.len);
            kv[n++] = (md_kv){ .name = name, .value = value };
        }
        if (!kv) {
            lk_mirror_error(m, "out of memory for the source's configs");
            continue;
        }
        if (m->created) {
            m->configs_due = false;
            lk_mirror_configs(m, kv, n);
        } else {
            lk_mirror_sourced(m, m->source_parts, kv, n, true);
            if (m->created)
                l->metadata_due_us = 0;  /* its partitions' leaders now */
        }
    }
    requests_forgotten(c);
}

/* The largest producer id of whole batches (-1: none): so that this
 * broker never hands one of them out (link.c K7).  One header read per
 * batch. */
static int64_t max_producer_id(const uint8_t *recs, size_t len)
{
    int64_t max = -1;
    for (size_t pos = 0; pos + 51 <= len;) {
        uint64_t pid = 0;
        uint32_t blen = 0;
        for (int k = 0; k < 8; k++)
            pid = pid << 8 | recs[pos + 43 + k];
        for (int k = 0; k < 4; k++)
            blen = blen << 8 | recs[pos + 8 + k];
        if ((int64_t)pid > max)
            max = (int64_t)pid;
        pos += 12 + (size_t)blen;
    }
    return max;
}

/* One partition of a Fetch answer (C1 checked): link.c K2. */
/* C4: the partition's leader moved (or is moving): asked again once
 * Metadata says where. */
static bool leader_error(int16_t err)
{
    return err == KP_NOT_LEADER_OR_FOLLOWER || err == KP_FENCED_LEADER_EPOCH ||
           err == KP_UNKNOWN_LEADER_EPOCH || err == KP_LEADER_NOT_AVAILABLE ||
           err == KP_REPLICA_NOT_AVAILABLE || err == KP_UNKNOWN_TOPIC_OR_PARTITION ||
           err == KP_KAFKA_STORAGE_ERROR;
}

/* A partition error of either answer (Fetch, OffsetForLeaderEpoch): stored
 * once (no numbers in it: the same error each retry writes no SQL, no
 * log), retried after reconnect.backoff.ms, at its new leader if it moved. */
static void part_error(lk_link *l, lk_mirror *m, int32_t i, int16_t err)
{
    char why[1024];
    lk_part *lp = &m->parts[i];
    snprintf(why, sizeof why, "partition %d: the source answered %s", (int)i,
             kp_error_name(err));
    lk_mirror_error(m, why);
    lp->retry_us = bk_mono_us() + l->backoff_ms * 1000;
    if (leader_error(err)) {
        lp->leader = -1;
        metadata_soon(l);
    }
}

static void apply_partition(lk_link *l, lk_mirror *m, int32_t i, bk_partition *p,
                            const kp_FetchResponse_PartitionData *rp)
{
    bk_broker *b = l->b;
    lk_part *lp = &m->parts[i];
    int64_t end = seg_log_end(p->log), backoff_us = l->backoff_ms * 1000;
    char why[1024];
    if (rp->ErrorCode != KP_NONE && rp->HighWatermark >= 0 &&
        rp->HighWatermark != lp->source_end) {
        lp->source_end = rp->HighWatermark;          /* the lag, errors or not */
        m->ends_dirty = true;
    }
    /* No numbers in why: the same error each retry writes no SQL, no log. */
    if (rp->ErrorCode == KP_OFFSET_OUT_OF_RANGE) {
        switch (repl_fetch_out_of_range(end, rp->HighWatermark, rp->LogStartOffset)) {
        case BK_OOR_BELOW_START: {
            /* As a follower would: behind the source's log start (retention,
             * DeleteRecords), the mirror's log restarts there. */
            int rc = replica_partition_restart_at(b, p, rp->LogStartOffset);
            if (rc == 0) {
                BK_INFO("mirror topic %s-%d: log end %lld is below the source's log start "
                        "%lld: the mirror's log restarts there", m->topic, (int)i,
                        (long long)end, (long long)rp->LogStartOffset);
                lp->retry_us = 0;                    /* fetched again at once */
                return;
            }
            snprintf(why, sizeof why, "partition %d: cannot restart the log at the source's "
                     "log start (error %d); retrying", (int)i, rc);
            lk_mirror_error(m, why);
            lp->retry_us = bk_mono_us() + backoff_us;
            return;
        }
        case BK_OOR_TRUNCATE:
            /* C5: ahead of the source's high watermark: its log may have
             * been cut (an unclean election), or its new leader's high
             * watermark is not up yet.  Its OffsetForLeaderEpoch says;
             * after a backoff, so that the second case is no storm. */
            lp->truncating = true;
            lp->ahead = true;
            lp->retry_us = bk_mono_us() + backoff_us;
            return;
        case BK_OOR_RETRY:
            break;
        }
    }
    if (rp->ErrorCode != KP_NONE) {
        part_error(l, m, i, rp->ErrorCode);
        return;
    }
    if (lp->answers_due > 0)
        lp->answers_due--;               /* link.c K3 */
    int64_t records = 0;
    const uint8_t *recs = (const uint8_t *)rp->Records.p;
    size_t whole = rp->Records.len > 0
        ? repl_fetch_whole_batches(recs, (size_t)rp->Records.len, &records) : 0;
    uint64_t first = 0;
    for (size_t k = 0; whole > 0 && k < 8; k++)
        first = first << 8 | recs[k];
    if (whole > 0 && (int64_t)first < end && end == seg_log_start(p->log) &&
        replica_partition_restart_at(b, p, (int64_t)first) == 0)
        end = (int64_t)first;            /* restarted at a log start inside a batch: at its
                                          * base, as Kafka's follower does */
    int16_t floor = whole > 0 ? bk_producer_id_floor(b, max_producer_id(recs, whole)) : KP_NONE;
    if (floor == KP_COORDINATOR_LOAD_IN_PROGRESS) {
        /* link.c K7, cluster mode: the floor is on its way to ZooKeeper;
         * the answer is dropped and asked again shortly, no error. */
        lp->retry_us = bk_mono_us() + LK_FLOOR_WAIT_US;
        return;
    }
    if (floor != KP_NONE) {
        lk_mirror_error(m, "cannot save the producer id floor above the source's ids; "
                        "retrying");
        lp->retry_us = bk_mono_us() + backoff_us;
        return;
    }
    if (whole > 0) {
        /* Cost: one CRC pass per batch and one write(); the bytes are the
         * answer's, as the source sent them. */
        int rc = seg_append_assigned(p->log, recs, whole, bk_now_ms());
        if (rc != 0) {
            snprintf(why, sizeof why, "partition %d: cannot append %zu bytes at %lld (error "
                     "%d: %s)", (int)i, whole, (long long)end, rc,
                     strerror(seg_failed(p->log) ? seg_last_errno(p->log) : EINVAL));
            lk_mirror_error(m, why);
            if (seg_failed(p->log))
                seg_reset_error(p->log);
            lp->retry_us = bk_mono_us() + backoff_us;
            return;
        }
        p->bytes_in += whole;
        if (p->producers && replica_pstate_record(p->producers, recs, whole, bk_now_ms()) != 0)
            BK_WARN("mirror topic %s-%d: out of memory for producer state", m->topic, (int)i);
        replica_partition_appended(b, p, records);
    }
    if (m->last_error[0] && whole > 0)
        lk_mirror_error(m, NULL);
    if (seg_log_end(p->log) >= rp->HighWatermark)
        lp->caught_up_ms = bk_now_ms();
    if (rp->HighWatermark != lp->source_end) {
        lp->source_end = rp->HighWatermark;
        m->ends_dirty = true;
    }
}

/* The mirror partition an answer's (topic, partition) is for, if it was
 * asked of c (then in no request any more) and C1 holds but for the log
 * end, which the caller checks. */
static bk_partition *answered(lk_peer *c, lk_mirror *m, kp_str topic, int32_t k)
{
    if (m->link != c->link || !kp_str_eq(topic, m->source) || k < 0 || k >= m->nparts)
        return NULL;
    lk_part *lp = &m->parts[k];
    if (!lp->in_request || lp->asked != c->node)
        return NULL;
    lp->in_request = false;
    return lk_mirror_fetching(m) ? lk_copies(m, k) : NULL;     /* link.c K9 */
}

static void handle_fetch(lk_peer *c, kp_rd *r)
{
    lk_link *l = c->link;
    kp_FetchResponse fr;
    if (kp_dec_FetchResponse(r, LK_FETCH_VERSION, &fr, &c->arena) != 0) {
        conn_fail(c, "malformed Fetch answer from the source");
        return;
    }
    if (fr.ErrorCode != KP_NONE) {
        char why[1024];
        snprintf(why, sizeof why, "Fetch refused by the source: %s", kp_error_name(fr.ErrorCode));
        conn_fail(c, why);
        return;
    }
    c->backoff_cur_ms = 0;
    for (int32_t i = 0; i < fr.Responses_count; i++) {
        const kp_FetchResponse_FetchableTopicResponse *t = &fr.Responses[i];
        for (lk_mirror *m = l->set->mirrors; m; m = m->next)
            for (int32_t j = 0; j < t->Partitions_count; j++) {
                const kp_FetchResponse_PartitionData *rp = &t->Partitions[j];
                int32_t k = rp->PartitionIndex;
                bk_partition *p = answered(c, m, t->Topic, k);
                if (p && seg_log_end(p->log) == m->parts[k].fetch_offset &&   /* C1 */
                    !m->parts[k].truncating && m->parts[k].fetch_epoch == m->parts[k].leader_epoch)
                    apply_partition(l, m, k, p, rp);
            }
    }
    requests_forgotten(c);
    for (lk_mirror *m = l->set->mirrors, *n; m; m = n) {
        n = m->next;
        if (m->link == l)
            lk_mirror_progress(m);
    }
}

/* C5: one partition's OffsetForLeaderEpoch answer: the mirror cut where it
 * leaves the source's log, as the replica fetcher cuts (repl_epoch_cut,
 * repl_truncate); asked again when its latest epoch went down and the
 * answer said so. */
static void apply_epoch(lk_peer *c, lk_mirror *m, int32_t k, bk_partition *p,
                        const kp_OffsetForLeaderEpochResponse_OffsetForLeaderPartitionResult *rp)
{
    lk_link *l = c->link;
    lk_part *lp = &m->parts[k];
    if (rp->ErrorCode != KP_NONE) {
        part_error(l, m, k, rp->ErrorCode);
        return;
    }
    bool done;
    char why[160], who[MD_TOPIC_NAME_MAX + 64];
    int64_t end = seg_log_end(p->log);
    if (rp->LeaderEpoch < 0 && rp->EndOffset < 0 && lp->ahead) {
        /* C5: behind the mirror with no epoch of the mirror's: nothing to
         * cut by, and fetching again only finds the mirror ahead again.
         * The user decides (the number is the same each retry: one SQL
         * write, one log line); asked again after the longest backoff. */
        char msg[1024];
        snprintf(msg, sizeof msg, "partition %d: the source's log is behind the mirror and has "
                 "no leader epoch <= %d: was the source topic recreated?", (int)k,
                 (int)lp->oe_epoch);
        lk_mirror_error(m, msg);
        lp->retry_us = bk_mono_us() + l->backoff_max_ms * 1000;
        return;
    }
    lp->ahead = false;
    /* A source with no epochs (-1): nothing to go by, nothing cut. */
    int64_t to = repl_epoch_cut(p->log, end, rp->LeaderEpoch, rp->EndOffset, &done, why,
                                sizeof why);
    snprintf(who, sizeof who, "cluster link %s's source broker %d", l->name, (int)c->node);
    int rc = repl_truncate(l->b, p, to, why, who);
    if (rc != 0) {
        char msg[1024];
        snprintf(msg, sizeof msg, "partition %d: cannot cut the mirror where it leaves the "
                 "source's log (error %d); retrying", (int)k, rc);
        lk_mirror_error(m, msg);
        lp->retry_us = bk_mono_us() + l->backoff_ms * 1000;
        return;
    }
    if (seg_log_end(p->log) < end)
        BK_INFO("mirror topic %s-%d: cut from %lld to %lld where it leaves source topic %s's "
                "log (%s)", m->topic, (int)k, (long long)end, (long long)seg_log_end(p->log),
                m->source, why);
    if (done || seg_epoch_latest(p->log) >= lp->oe_epoch)
        lp->truncating = false;
}

static void handle_epochs(lk_peer *c, kp_rd *r)
{
    lk_link *l = c->link;
    kp_OffsetForLeaderEpochResponse er;
    if (kp_dec_OffsetForLeaderEpochResponse(r, LK_EPOCH_VERSION, &er, &c->arena) != 0) {
        conn_fail(c, "malformed OffsetForLeaderEpoch answer from the source");
        return;
    }
    for (int32_t i = 0; i < er.Topics_count; i++) {
        const kp_OffsetForLeaderEpochResponse_OffsetForLeaderTopicResult *t = &er.Topics[i];
        for (lk_mirror *m = l->set->mirrors; m; m = m->next)
            for (int32_t j = 0; j < t->Partitions_count; j++) {
                const kp_OffsetForLeaderEpochResponse_OffsetForLeaderPartitionResult *rp =
                    &t->Partitions[j];
                int32_t k = rp->Partition;
                bk_partition *p = answered(c, m, t->Topic, k);
                if (p && m->parts[k].truncating && seg_log_end(p->log) == m->parts[k].oe_end &&
                    m->parts[k].fetch_epoch == m->parts[k].leader_epoch)   /* C1 */
                    apply_epoch(c, m, k, p, rp);
            }
    }
    requests_forgotten(c);
}

static void handle_answer(lk_peer *c, const uint8_t *frame, size_t len)
{
    kp_rd r;
    kp_rd_init(&r, frame, len);
    int32_t corrid = kp_rd_i32(&r);
    if (c->sasl.salting) {               /* C7: no request is out meanwhile */
        conn_fail(c, "bytes from the source with no request out");
        return;
    }
    if (!kp_rd_ok(&r) || corrid != c->corrid || c->conn != LK_WAITING) {
        conn_fail(c, "an answer from the source with an unexpected correlation id");
        return;
    }
    kp_arena_reset(&c->arena);
    c->conn = LK_READY;
    switch (c->api_out) {
    case KP_API_METADATA: handle_metadata(c, &r); break;
    case KP_API_DESCRIBE_CONFIGS: handle_configs(c, &r); break;
    case KP_API_FETCH: handle_fetch(c, &r); break;
    case KP_API_OFFSET_FOR_LEADER_EPOCH: handle_epochs(c, &r); break;
    case KP_API_LIST_GROUPS:
    case KP_API_OFFSET_FETCH:
    case KP_API_DESCRIBE_ACLS:
    case KP_API_FIND_COORDINATOR:
    case KP_API_API_VERSIONS:
        if (lk_sync_answer(c, c->api_out, &r) != 0) {
            conn_fail(c, "malformed ListGroups / OffsetFetch / FindCoordinator / DescribeAcls "
                      "/ ApiVersions answer from the source");
            return;
        }
        break;
    default:                             /* SaslHandshake, SaslAuthenticate (C7) */
        sec_sasl_client_answer(&c->sasl, c->api_out, &r, &c->arena);
        if (c->sasl.salting)
            c->conn = LK_WAITING;        /* nothing else is sent meanwhile */
        return;
    }
    next_request(c);
}

/* In how many ms c has something to ask (its link's next Metadata; a
 * source broker's earliest partition retry); -1: nothing until kicked. */
static int64_t peer_due_ms(const lk_peer *c)
{
    lk_link *l = c->link;
    int64_t now = bk_mono_us(), next_us = c->node < 0 ? l->metadata_due_us : INT64_MAX;
    if (c->node >= 0 && !c->admin)
        EACH_PART(l, m, i, lp)
            if (lp->leader == c->node && lk_mirror_fetching(m) && lp->retry_us < next_us)
                next_us = lp->retry_us;
    if (next_us == INT64_MAX)
        return -1;
    return next_us > now ? (next_us - now) / 1000 + 1 : 1;
}

/* Idle (nothing out) and closed by the source (its
 * connections.max.idle.ms): not an error; connected again when there is
 * something to ask.  A source broker's partitions are routed again from a
 * checked Metadata answer first (C8: the host behind that address may
 * serve another cluster by the time it is asked again). */
static void closed_idle(lk_peer *c)
{
    int64_t due = peer_due_ms(c);
    peer_close(c);
    if (c->node >= 0 && !c->admin)
        unroute(c);
    if (due >= 0)
        arm(c, due);                     /* else: idle until kicked */
}

/* C2, C6: a plaintext connection's frame is handled once it is whole. */
static void on_sock_read(evutil_socket_t fd, short what, void *arg)
{
    lk_peer *c = arg;
    char why[1024];
    const char *err;
    size_t len;
    if (what & EV_TIMEOUT) {
        if (c->conn == LK_WAITING) {
            snprintf(why, sizeof why, "%s:%d: no answer in time", c->host, c->port);
            conn_fail(c, why);
        }
        return;                          /* idle: still read, to see the source close */
    }
    int rc = repl_frame_recv(&c->in, fd, c->conn == LK_WAITING, LK_FRAME_MAX, &len, &err);
    if (rc == REPL_FRAME_EOF && c->conn == LK_READY && c->in.got == 0) {
        closed_idle(c);
    } else if (rc == REPL_FRAME_EOF || rc == REPL_FRAME_ERROR) {
        snprintf(why, sizeof why, "%s:%d: %s", c->host, c->port,
                 rc == REPL_FRAME_EOF ? "connection closed by the source" : err);
        conn_fail(c, why);
    } else if (rc == REPL_FRAME_DONE) {
        handle_answer(c, c->in.buf + 4, len);
    }
}

/* C2, C6: a TLS connection's frames, whole, out of its input buffer. */
static void on_tls_read(struct bufferevent *bev, void *arg)
{
    lk_peer *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    char why[1024];
    const char *err;
    size_t len;
    while (c->bev == bev) {              /* RF5: read even with nothing out */
        int rc = repl_frame_evbuffer(&c->in, in, c->conn == LK_WAITING, LK_FRAME_MAX, &len,
                                     &err);
        if (rc == REPL_FRAME_ERROR) {
            snprintf(why, sizeof why, "%s:%d: %s", c->host, c->port, err);
            conn_fail(c, why);
        }
        if (rc != REPL_FRAME_DONE)
            return;
        handle_answer(c, c->in.buf + 4, len);
    }
}

/* C6: a plaintext connection's input read by on_sock_read, with the read
 * timeout the bufferevent had.  0, or -1. */
static int take_reading(lk_peer *c)
{
    return repl_frame_watch(&c->in, c->link->b->base, c->bev,
                            (int64_t)c->link->fetch_max_wait_ms + LK_REQUEST_TIMEOUT_MS,
                            on_sock_read, c, &c->rev);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    lk_peer *c = arg;
    lk_link *l = c->link;
    char why[1024];
    if (bev != c->bev)
        return;
    if (what & BEV_EVENT_CONNECTED) {
        if (!l->tls && take_reading(c) != 0) {
            conn_fail(c, "cannot watch the connection to the source");
            return;
        }
        c->conn = LK_READY;
        if (l->sasl)
            sec_sasl_client_start(&c->sasl);     /* C7: the login first */
        else
            next_request(c);
        return;
    }
    if ((what & BEV_EVENT_EOF) && c->conn == LK_READY) {
        closed_idle(c);
        return;
    }
    int dns = bufferevent_socket_get_dns_error(bev);
    if ((what & BEV_EVENT_TIMEOUT) && c->conn == LK_READY) {
        bufferevent_enable(bev, EV_READ);          /* idle, not late */
        return;
    }
    char tls[512];
    const char *what_why = sec_tls_event_why(bev, what, "connection closed by the source", tls,
                                             sizeof tls);
    snprintf(why, sizeof why, "%s:%d: %s", c->host, c->port,
             dns ? evutil_gai_strerror(dns)
             : !strcmp(what_why, "connection error")
                 ? evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR())
                 : what_why);
    conn_fail(c, why);
}

/* C7: the link's TLS context made on b->calls (its files may hang: a
 * FIFO, a dead NFS server); the connections waiting for it go on. */

static void tls_job_run(void *arg)
{
    lk_tls_job *j = arg;
    j->rc = lk_conn_tls(&j->files, j->err, sizeof j->err);
}

static void peer_connect(lk_peer *c);

static void tls_job_done(void *arg)
{
    lk_tls_job *j = arg;
    lk_link *l = j->link;
    if (l) {
        l->tls_job = NULL;
        if (!l->tls_ctx) {
            l->tls_ctx = j->files.tls_ctx;
            j->files.tls_ctx = NULL;
        }
        /* Each waiting one connects or fails (so waits no more), which
         * may change the list (link_sync.c's peers): scanned again, until
         * none waits or a failure started another job (the next bootstrap
         * server at once), whose done() takes the rest. */
        lk_peer *c;
        do {
            for (c = &l->boot; c; c = c == &l->boot ? l->peers : c->next)
                if (c->conn == LK_CONNECTING && !c->bev)
                    break;
            if (c && l->tls_ctx)
                peer_connect(c);
            else if (c)
                conn_fail(c, j->err);
        } while (c && !l->tls_job);
    }
    SSL_CTX_free(j->files.tls_ctx);
    OPENSSL_cleanse(&j->files, sizeof j->files);
    free(j);
}

/* 0: the context is being made (c waits, LK_CONNECTING with no socket);
 * -1: no worker (c fails, C3: tried again after its backoff). */
static int tls_wait(lk_peer *c)
{
    lk_link *l = c->link;
    if (!l->tls_job) {
        lk_tls_job *j = calloc(1, sizeof *j);
        if (!j)
            return -1;
        j->link = l;
        memcpy(j->files.ssl_ca, l->ssl_ca, sizeof l->ssl_ca);
        memcpy(j->files.ssl_cert, l->ssl_cert, sizeof l->ssl_cert);
        memcpy(j->files.ssl_key, l->ssl_key, sizeof l->ssl_key);
        memcpy(j->files.ssl_key_pass, l->ssl_key_pass, sizeof l->ssl_key_pass);
        j->files.ssl_ca_key = l->ssl_ca_key;
        j->files.ssl_cert_key = l->ssl_cert_key;
        if (bk_worker_call(l->b->calls, tls_job_run, tls_job_done, j) != 0) {
            OPENSSL_cleanse(j, sizeof *j);
            free(j);
            return -1;
        }
        l->tls_job = j;
    }
    c->conn = LK_CONNECTING;
    return 0;
}

static void peer_connect(lk_peer *c)
{
    lk_link *l = c->link;
    const char *why = "cannot make a socket";
    peer_close(c);
    if (c->node < 0)
        l->cluster_checked = false;      /* C8: this connection's source asked first */
    if (l->tls && !l->tls_ctx) {         /* C7: never made on the loop */
        if (tls_wait(c) != 0)
            conn_fail(c, "cannot read the TLS certificate files off the loop (no worker, "
                         "or out of memory); retrying");
        return;                          /* else tls_job_done connects */
    }
    if (l->tls)
        c->bev = sec_tls_client_bev_ctx(l->b->base, l->tls_ctx, c->host, l->ssl_check_host,
                                        &why);
    else
        c->bev = bufferevent_socket_new(l->b->base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!c->bev) {
        conn_fail(c, why);
        return;
    }
    bufferevent_setcb(c->bev, l->tls ? on_tls_read : NULL, NULL, on_event, c);   /* C6 */
    int64_t t = (int64_t)l->fetch_max_wait_ms + LK_REQUEST_TIMEOUT_MS;
    struct timeval tv = { (time_t)(t / 1000), (suseconds_t)(t % 1000) * 1000 };
    bufferevent_set_timeouts(c->bev, &tv, &tv);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    c->conn = LK_CONNECTING;
    if (c->node < 0)
        l->metadata_due_us = 0;          /* the sources again on a new connection */
    /* Name resolution through evdns: nothing blocks the loop. */
    if (bufferevent_socket_connect_hostname(c->bev, l->set->dns, AF_UNSPEC, c->host,
                                            c->port) != 0)
        conn_fail(c, "cannot connect");
}
