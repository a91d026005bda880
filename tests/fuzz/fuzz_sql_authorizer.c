/*
 * libFuzzer target: the admin SQL surface (admin/sql_*.c) with arbitrary
 * statements — sq_run through the authorizer, the time and row limits, the
 * virtual tables and every output format.
 *
 * The store holds a topic with a few messages, a group with a committed
 * offset, and a user whose salt / stored_key / server_key are a canary.
 * Findings (abort) besides crashes and leaks:
 *   1. the canary appears in any output, raw or as hex: the authorizer let
 *      a credential out (directly, through sqlite_dbpage, a pragma table
 *      function, a view, …);
 *   2. the metadata file changed: the surface is read-only by contract and
 *      writes go only through the write hook, which here records and
 *      refuses them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "admin/sql_surface.h"
#include "protocol/kp.h"
#include "segments/seg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CANARY "Q7CANARYSECRETZ9"
#define CANARY_HEX "51374341414E"     /* hex("Q7CAN"), as blobs print */

static sq_conn *g_conn;
static char g_db[256];
static struct stat g_st;

static int refuse_write(void *arg, const sq_write *w, char *err, size_t errlen)
{
    (void)arg; (void)w;
    snprintf(err, errlen, "writes refused by the fuzz harness");
    return KP_POLICY_VIOLATION;
}

static void setup(void)
{
    char dir[] = "/tmp/sluice-fuzz-sql-XXXXXX";
    char err[512];
    if (!mkdtemp(dir))
        abort();
    snprintf(g_db, sizeof g_db, "%s/sluice.db", dir);
    md_db *md;
    if (md_open(g_db, &md, err, sizeof err))
        abort();
    md_topic_create(md, "orders", 2, 1, NULL, 0, 1, NULL, false, err, sizeof err);
    sqlite3 *s = md_sqlite(md);
    if (sqlite3_exec(s,
            "INSERT INTO users(name, mechanism, salt, iterations, stored_key, "
            "server_key, created_at) VALUES ('alice', 'SCRAM-SHA-256', CAST('" CANARY "' AS BLOB), "
            "4096, CAST('" CANARY "' AS BLOB), CAST('" CANARY "' AS BLOB), 0)", NULL, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "fuzz_sql_authorizer: %s\n", sqlite3_errmsg(s));
        abort();
    }
    md_close(md);
    /* A partition log with messages for the messages table. */
    char pdir[300];
    snprintf(pdir, sizeof pdir, "%s/orders-0", dir);
    seg_open_opts o = { .dir = pdir };
    seg_config_default(&o.cfg);
    seg_log *log;
    if (seg_open(&o, &log))
        abort();
    kp_buf b;
    kp_buf_init(&b);
    kp_batch_builder bb;
    kp_bb_init(&bb, &b, KP_CODEC_NONE);
    kp_bb_add(&bb, 1700000000000, "k1", 2, "hello", 5, NULL, 0);
    kp_bb_add(&bb, 1700000000001, NULL, 0, "world", 5, NULL, 0);
    kp_bb_finish(&bb);
    kp_bb_free(&bb);
    int64_t base;
    if (seg_append(log, b.data, b.len, 1700000000000, &base))
        abort();
    kp_buf_free(&b);
    seg_close(log);

    sq_env env = { .data_dir = dir, .broker_id = 1, .broker_alive = false,
                   .write = refuse_write, .max_rows = 1000, .timeout_ms = 500 };
    if (sq_open(g_db, &env, &g_conn, err, sizeof err)) {
        fprintf(stderr, "fuzz_sql_authorizer: sq_open: %s\n", err);
        abort();
    }
    /* Values of at most 1 MiB: the authorizer's logic is what is fuzzed,
     * and a 10 MB zeroblob rendered as JSON under ASan took more than
     * libFuzzer's 10 s timeout on a loaded machine (a finding about speed,
     * not safety; /sql keeps SQLite's own limit and admin.sql.timeout.ms). */
    sqlite3_limit(g_conn->db, SQLITE_LIMIT_LENGTH, 1 << 20);
    /* The env's data_dir must outlive the connection: keep it static. */
    static char keep[64];
    snprintf(keep, sizeof keep, "%s", dir);
    g_conn->env.data_dir = keep;
    if (stat(g_db, &g_st))
        abort();
}

static bool contains(const uint8_t *p, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (strncasecmp((const char *)p + i, needle, k) == 0)
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_conn)
        setup();
    if (size < 1 || size > 4096)
        return -1;
    char *sql = malloc(size);
    memcpy(sql, data + 1, size - 1);
    sql[size - 1] = 0;
    sq_result res;
    memset(&res, 0, sizeof res);
    kp_buf_init(&res.out);
    sq_run(g_conn, sql, data[0] % 4, data[0] & 4, &res);
    /* The fuzzer learns the canary from these very comparisons; a
     * statement that spells it out may see it echoed (an error message, a
     * literal), which is no leak. */
    bool named = contains((const uint8_t *)sql, size - 1, CANARY) ||
                 contains((const uint8_t *)sql, size - 1, CANARY_HEX) ||
                 contains((const uint8_t *)sql, size - 1, "Q7CAN") ||
                 contains((const uint8_t *)sql, size - 1, "Z9");
    if (!named && (contains(res.out.data, res.out.len, CANARY) ||
        contains(res.out.data, res.out.len, CANARY_HEX) ||
        contains((const uint8_t *)res.err, strnlen(res.err, sizeof res.err), CANARY))) {
        fprintf(stderr, "fuzz_sql_authorizer: a credential leaked for: %s\n", sql);
        abort();                                            /* (1) */
    }
    sq_result_free(&res);
    free(sql);
    struct stat st;
    if (stat(g_db, &st) || st.st_size != g_st.st_size ||
        st.st_mtim.tv_sec != g_st.st_mtim.tv_sec ||
        st.st_mtim.tv_nsec != g_st.st_mtim.tv_nsec) {
        fprintf(stderr, "fuzz_sql_authorizer: the metadata file changed\n");
        abort();                                            /* (2) */
    }
    return 0;
}
