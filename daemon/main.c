/*
 * sluiced — the broker.
 *
 *   sluiced -c FILE [--override key=value ...]
 *
 * Startup: read the configuration (unknown or bad keys stop here, named),
 * open the metadata store, open and recover every partition, listen.
 * SIGTERM / SIGINT: stop accepting, let in-flight requests answer, flush
 * every partition, save recovery points, exit 0.
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "daemon/security/sec_authz.h"
#include "daemon/security/sec_pwenc.h"
#include "daemon/view/view_broker_configs.h"
#include "daemon/cluster/cluster.h"
#include "daemon/replica/replica.h"
#include "daemon/group/group.h"
#include "daemon/replica/replica_txn.h"
#include "daemon/txn/txn.h"
#include "admin/admin.h"
#include "daemon/link/link.h"
#include "daemon/registry/registry.h"
#include "daemon/md_sync.h"
#include "daemon/view/view_store.h"
#include "daemon/replica/replica_producers.h"
#include "daemon/net/net_server.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: sluiced -c FILE [--override key=value ...]\n"
        "\n"
        "Runs a Sluice broker: the Kafka protocol on listeners=, data in log.dirs=.\n"
        "FILE is a Java-style properties file with Kafka's broker key names\n"
        "(see examples/standalone.properties).  --override sets one key on top.\n");
}

static void drain(bk_broker *b)
{
    if (b->stopping)
        return;
    b->stopping = true;
    net_server_drain(b);
}

static void drain_after_controlled_shutdown(bk_broker *b)
{
    BK_INFO("finishing in-flight requests");
    drain(b);
}

/* Cluster mode first asks the controller to move this broker's
 * leaderships (controlled.shutdown.enable, daemon/cluster/cluster_leaders.c) and keeps
 * serving meanwhile; a second signal stops at once. */
static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    bk_broker *b = arg;
    if (b->stopping)
        return;
    const char *name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
    if (cl_controlled_shutdown_running(b)) {
        BK_INFO("received %s during the controlled shutdown; finishing in-flight requests",
                name);
    } else if (cl_controlled_shutdown(b, drain_after_controlled_shutdown) == 0) {
        BK_INFO("received %s; controlled shutdown first", name);
        return;
    } else {
        BK_INFO("received %s; finishing in-flight requests", name);
    }
    drain(b);
}

static void on_maintenance(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    bk_broker *b = arg;
    static int64_t last_save_ms;
    replica_flush_tick(b);
    int64_t now = bk_now_ms();
    if (now - last_save_ms >= b->cfg->log_flush_offset_checkpoint_interval_ms ||
        now - last_save_ms >= 5000) {
        replica_save_offsets(b);
        replica_producers_tick(b);        /* producer state snapshots */
        last_save_ms = now;
    }
}

static void flush_replica(bk_partition *p, void *arg)
{
    int *failures = arg;
    if (seg_flush(p->log, NULL) != 0) {
        BK_ERROR("flushing %s-%d failed: %s", p->topic->name, p->id,
                 strerror(seg_last_errno(p->log) ? seg_last_errno(p->log) : EIO));
        (*failures)++;
    }
}

static int mkdirs(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    if (mkdir(tmp, 0755) && errno != EEXIST)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    static bk_config cfg;
    bk_config_init(&cfg);
    const char *conf_path = NULL;
    char err[1024];
    /* First pass: the file; second pass: overrides on top of it. */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "-c") && i + 1 < argc)
            conf_path = argv[++i];
        else if (!strcmp(argv[i], "--override") && i + 1 < argc)
            i++;
        else if (strncmp(argv[i], "--override=", 11)) {
            fprintf(stderr, "sluiced: unknown argument: %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (bk_config_load(&cfg, conf_path, err, sizeof err)) {
        fprintf(stderr, "sluiced: %s\n", err);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *kv = NULL;
        if (!strcmp(argv[i], "-c"))
            i++;
        else if (!strcmp(argv[i], "--override"))
            kv = argv[++i];
        else if (!strncmp(argv[i], "--override=", 11))
            kv = argv[i] + 11;
        if (!kv)
            continue;
        const char *eq = strchr(kv, '=');
        if (!eq) {
            fprintf(stderr, "sluiced: --override expects key=value, got \"%s\"\n", kv);
            return 2;
        }
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
        if (bk_config_set(&cfg, key, eq + 1, err, sizeof err)) {
            fprintf(stderr, "sluiced: --override: %s\n", err);
            return 2;
        }
    }
    if (bk_config_finish(&cfg, err, sizeof err)) {
        fprintf(stderr, "sluiced: %s\n", err);
        return 2;
    }

    /* Freed memory that goes back to the kernel is slow to touch again on
     * these machines: keep large buffers (libevent chains, request frames)
     * in the heap instead of mmap/munmap per request. */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    signal(SIGPIPE, SIG_IGN);
    /* Every connection and every open segment file is a descriptor: take
     * the whole hard limit (distributions start services at 1024 soft). */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    evthread_use_pthreads();
    static bk_broker b;
    b.cfg = &cfg;
    if (mkdirs(cfg.log_dirs) || !realpath(cfg.log_dirs, b.data_dir)) {
        fprintf(stderr, "sluiced: cannot create log.dirs %s: %s\n", cfg.log_dirs, strerror(errno));
        return 1;
    }
    char dbpath[PATH_MAX + 32];
    snprintf(dbpath, sizeof dbpath, "%s/sluice.db", b.data_dir);
    if (md_open(dbpath, &b.db, err, sizeof err) != 0) {
        fprintf(stderr, "sluiced: cannot open metadata store %s: %s\n", dbpath, err);
        return 1;
    }
    /* sec_pwenc.c P1: the key derivation, once, before the loop runs */
    if (sec_pwenc_new(&cfg, b.data_dir, cfg.zookeeper_connect[0] != 0, &b.pwenc, err,
                      sizeof err) != 0) {
        fprintf(stderr, "sluiced: %s\n", err);
        return 1;
    }
    md_broker_upsert(b.db, cfg.broker_id, cfg.advertised_host, cfg.advertised_port,
                     cfg.rack[0] ? cfg.rack : NULL);
    /* Precise timers: by default libevent reads CLOCK_MONOTONIC_COARSE,
     * whose tick is 4 ms on a 250 Hz kernel, so a timer of a few ms (the
     * offset commits' linger, group_persist.c C7; a short fetch max wait) would
     * fire up to 4 ms late.  The price: a timerfd_settime per loop
     * iteration (libevent's epoll backend re-arms it each time). */
    struct event_config *ecfg = event_config_new();
    if (ecfg)
        event_config_set_flag(ecfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    b.base = ecfg ? event_base_new_with_config(ecfg) : NULL;
    if (ecfg)
        event_config_free(ecfg);
    if (!b.base) {
        fprintf(stderr, "sluiced: cannot create the event loop\n");
        return 1;
    }
    if (bk_mdsync_start(&b, dbpath) != 0) {
        fprintf(stderr, "sluiced: cannot start the metadata sync worker\n");
        return 1;
    }
    b.store = bk_cluster_mode(&b) ? &cl_store_zk : &bk_store_sqlite;   /* view_store.h S4 */
    if (bk_cluster_mode(&b))
        repl_isr_install(&b, &cl_repl_ops);                 /* the HW waits for the ISR */
    replica_install(&b);                      /* the view opens the local replicas */
    if (view_topics_load(&b) != 0)
        return 1;
    if (view_broker_configs_init(&b) != 0)    /* dynamic broker configs, live */
        return 1;
    if (gc_groups_init(&b) != 0)
        return 1;
    if (txn_start(&b) != 0)                   /* the transaction coordinator */
        return 1;
    if (sec_authz_new(cfg.authorizer_class_name[0] != 0, cfg.super_users,
                     cfg.allow_everyone_if_no_acl_found, &b.authz) != 0 ||
        sec_authz_reload(&b) != 0)
        return 1;
    if (bk_cluster_mode(&b) && cl_start(&b, err, sizeof err) != 0) {
        fprintf(stderr, "sluiced: %s\n", err);
        return 1;
    }
    if (replica_flusher_start(&b) != 0) {
        fprintf(stderr, "sluiced: cannot start the flush worker\n");
        return 1;
    }
    if (replica_retention_start(&b) != 0) {
        fprintf(stderr, "sluiced: cannot start the retention and cleaner workers\n");
        return 1;
    }
    if (bk_admin_start(&b, err, sizeof err) != 0) {
        fprintf(stderr, "sluiced: %s\n", err);
        return 1;
    }
    if (sr_start(&b, err, sizeof err) != 0) {   /* the schema registry */
        fprintf(stderr, "sluiced: %s\n", err);
        return 1;
    }
    if (link_start(&b, err, sizeof err) != 0) {   /* cluster links */
        fprintf(stderr, "sluiced: %s\n", err);
        return 1;
    }
    if (net_server_start(&b, err, sizeof err) != 0) {
        fprintf(stderr, "sluiced: %s\n", err);
        return 1;
    }
    b.sig_term = evsignal_new(b.base, SIGTERM, on_signal, &b);
    b.sig_int = evsignal_new(b.base, SIGINT, on_signal, &b);
    b.maint_timer = event_new(b.base, -1, EV_PERSIST, on_maintenance, &b);
    int64_t tick = cfg.log_flush_scheduler_interval_ms < 1000 ? cfg.log_flush_scheduler_interval_ms : 1000;
    struct timeval tv = { (time_t)(tick / 1000), (suseconds_t)(tick % 1000) * 1000 };
    /* A broker deaf to SIGTERM or without its maintenance tick (flushes,
     * retention) is not one to start. */
    if (bk_event_add(b.sig_term, NULL, "SIGTERM") != 0 ||
        bk_event_add(b.sig_int, NULL, "SIGINT") != 0 ||
        bk_event_add(b.maint_timer, &tv, "maintenance timer") != 0) {
        fprintf(stderr, "sluiced: cannot arm the broker's events\n");
        return 1;
    }

    BK_INFO("sluiced broker %d (%s) listening on %s:%d, advertised as %s:%d",
            cfg.broker_id, bk_cluster_mode(&b) ? "cluster mode" : "standalone",
            cfg.listen_host[0] ? cfg.listen_host : "*", cfg.listen_port,
            cfg.advertised_host, cfg.advertised_port);
    BK_INFO("data in %s (metadata: %s)", b.data_dir, dbpath);

    event_base_dispatch(b.base);

    /* Shutdown: nothing new comes in; make what was acknowledged durable.
     * The ZooKeeper session closes first, so the cluster sees this broker
     * gone at once rather than after the session timeout. */
    bk_admin_stop(&b);
    link_stop(&b);
    sr_stop(&b);
    net_server_free(&b);
    cl_stop(&b);
    txn_stop();
    replica_txn_stop();
    gc_groups_shutdown(&b);
    replica_flusher_stop(&b);
    replica_retention_stop(&b);
    int failures = 0;
    replica_replicas_foreach(&b, flush_replica, &failures);
    replica_save_offsets(&b);
    view_topics_close_all(&b);
    replica_retention_shutdown(&b);
    event_free(b.maint_timer);
    event_free(b.sig_term);
    event_free(b.sig_int);
    bk_mdsync_stop();
    event_base_free(b.base);
    sec_authz_free(b.authz);
    sec_pwenc_free(b.pwenc);
    md_close(b.db);
    bk_config_free(&cfg);
    BK_INFO("stopped%s", failures ? " (some partitions failed to flush)" : "");
    return failures ? 1 : 0;
}
