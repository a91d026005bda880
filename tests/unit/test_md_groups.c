/* metadata/groups.c: group rows, members, committed offsets, retention. */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metadata/md.h"
#include "tests/unit/unit_md.h"
#include "tests/unit/unit_run.h"

static char dir[64];
static char path[128];
static md_db *db;

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_md_groups.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/meta.db", dir);
    char err[MD_ERRLEN] = "";
    ck_assert_msg(md_open(path, &db, err, sizeof err) == 0, "md_open: %s", err);
    ck_assert_int_eq(md_topic_create(db, "orders", 4, 1, NULL, 0, 1, NULL, false, err, sizeof err), 0);
    ck_assert_int_eq(md_topic_create(db, "audit", 1, 1, NULL, 0, 1, NULL, false, err, sizeof err), 0);
}

static void teardown(void)
{
    md_close(db);
    db = NULL;
    char p[160];
    static const char *const sfx[] = { "", "-wal", "-shm", "-journal" };
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        unlink(p);
    }
    rmdir(dir);
}

static int64_t query_int(const char *sql)
{
    return unit_query_int(db, sql);
}

static void reopen(void)
{
    md_close(db);
    char err[MD_ERRLEN] = "";
    ck_assert_msg(md_open(path, &db, err, sizeof err) == 0, "md_open: %s", err);
}

static md_offset off(const char *group, const char *topic, int32_t p, int64_t o)
{
    md_offset x = {
        .group_id = group, .group_len = (int32_t)strlen(group),
        .topic = topic, .topic_len = (int32_t)strlen(topic),
        .partition = p, .offset = o, .leader_epoch = -1,
        .metadata = NULL, .metadata_len = -1,
        .commit_time_ms = 1000, .expire_time_ms = -1, .result = -99,
    };
    return x;
}

static void save_group(const char *id, const char *state, const char *ptype,
                       int32_t gen, int64_t since, const md_group_member *m, size_t n)
{
    md_group g = {
        .group_id = id, .state = state, .protocol_type = ptype,
        .protocol = ptype ? "range" : NULL, .generation = gen,
        .leader = n ? m[0].member_id : NULL, .state_changed_at = since,
        .members = m, .nmembers = n,
    };
    char err[MD_ERRLEN] = "";
    ck_assert_msg(md_group_save(db, &g, err, sizeof err) == 0, "save: %s", err);
}

struct seen {
    int groups;
    char ids[8][32];
    char states[8][32];
    int32_t gens[8];
    size_t nmembers[8];
    char first_member[8][64];
    char first_instance[8][64];
    int32_t assign_len[8];
    char assign[8][16];
};

static int collect(const md_group *g, void *arg)
{
    struct seen *s = arg;
    int i = s->groups++;
    snprintf(s->ids[i], sizeof s->ids[i], "%s", g->group_id);
    snprintf(s->states[i], sizeof s->states[i], "%s", g->state);
    s->gens[i] = g->generation;
    s->nmembers[i] = g->nmembers;
    if (g->nmembers) {
        snprintf(s->first_member[i], sizeof s->first_member[i], "%s", g->members[0].member_id);
        snprintf(s->first_instance[i], sizeof s->first_instance[i], "%s",
                 g->members[0].instance_id ? g->members[0].instance_id : "(null)");
        s->assign_len[i] = g->members[0].assignment_len;
        if (g->members[0].assignment_len > 0)
            memcpy(s->assign[i], g->members[0].assignment,
                   (size_t)g->members[0].assignment_len < 16 ? (size_t)g->members[0].assignment_len : 16);
    }
    return 0;
}

START_TEST(test_group_save_writes_row_and_replaces_members)
{
    md_group_member m[2] = {
        { .member_id = "c1-aaa", .instance_id = NULL, .client_id = "c1", .client_host = "/127.0.0.1",
          .session_timeout_ms = 6000, .rebalance_timeout_ms = 30000,
          .subscription = "\x00\x01", .subscription_len = 2,
          .assignment = "\x00\x01\x02", .assignment_len = 3 },
        { .member_id = "c2-bbb", .instance_id = "static-2", .client_id = "c2", .client_host = "/127.0.0.1",
          .session_timeout_ms = 6000, .rebalance_timeout_ms = 30000,
          .subscription = NULL, .subscription_len = -1, .assignment = NULL, .assignment_len = -1 },
    };
    save_group("g1", "Stable", "consumer", 3, 5, m, 2);
    ck_assert_int_eq(query_int("SELECT count(*) FROM group_members WHERE group_id='g1'"), 2);
    ck_assert_int_eq(query_int("SELECT generation FROM consumer_groups WHERE group_id='g1'"), 3);
    /* Next generation with one member: the other row goes. */
    save_group("g1", "Stable", "consumer", 4, 6, &m[1], 1);
    ck_assert_int_eq(query_int("SELECT count(*) FROM group_members WHERE group_id='g1'"), 1);
    ck_assert_int_eq(query_int("SELECT generation FROM consumer_groups WHERE group_id='g1'"), 4);
    ck_assert_int_eq(query_int("SELECT state_changed_at FROM consumer_groups WHERE group_id='g1'"), 6);
}
END_TEST

START_TEST(test_group_foreach_returns_groups_and_members_after_reopen)
{
    md_group_member m = { .member_id = "c1-aaa", .instance_id = "inst-1", .client_id = "c1",
                          .client_host = "/10.0.0.1", .session_timeout_ms = 10000,
                          .rebalance_timeout_ms = 300000, .subscription = "sub",
                          .subscription_len = 3, .assignment = "asg\0x", .assignment_len = 5 };
    save_group("b-group", "Stable", "consumer", 7, 1, &m, 1);
    save_group("a-group", "Empty", NULL, 0, 1, NULL, 0);
    reopen();
    struct seen s;
    memset(&s, 0, sizeof s);
    ck_assert_int_eq(md_group_foreach(db, collect, &s), 0);
    ck_assert_int_eq(s.groups, 2);
    ck_assert_str_eq(s.ids[0], "a-group");
    ck_assert_str_eq(s.states[0], "Empty");
    ck_assert_int_eq(s.nmembers[0], 0);
    ck_assert_str_eq(s.ids[1], "b-group");
    ck_assert_int_eq(s.gens[1], 7);
    ck_assert_int_eq(s.nmembers[1], 1);
    ck_assert_str_eq(s.first_member[1], "c1-aaa");
    ck_assert_str_eq(s.first_instance[1], "inst-1");
    ck_assert_int_eq(s.assign_len[1], 5);
    ck_assert_int_eq(memcmp(s.assign[1], "asg\0x", 5), 0);
}
END_TEST

START_TEST(test_offset_tombstone_deletes_only_its_row)
{
    md_offset o[2] = { off("g", "orders", 0, 10), off("g", "orders", 1, 20) };
    char err[MD_ERRLEN] = "";
    ck_assert_int_eq(md_offset_commit(db, o, 2, err, sizeof err), 0);
    /* one tombstone for a stored row, one for a row never stored: both NONE */
    md_offset t[2] = { off("g", "orders", 0, 0), off("g", "orders", 3, 0) };
    t[0].tombstone = t[1].tombstone = true;
    ck_assert_int_eq(md_offset_commit(db, t, 2, err, sizeof err), 0);
    ck_assert_int_eq(t[0].result, KP_NONE);
    ck_assert_int_eq(t[1].result, KP_NONE);
    md_committed *c;
    size_t n;
    ck_assert_int_eq(md_offset_list(db, "g", 1, &c, &n), 0);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(c[0].partition, 1);
    ck_assert_int_eq(c[0].offset, 20);
    md_committed_free(c, n);
}
END_TEST

START_TEST(test_broker_configs_replace_whole_sets_per_resource)
{
    char err[MD_ERRLEN] = "";
    md_kv two[2] = { { "log.retention.ms", "1000" }, { "message.max.bytes", "2000" } };
    md_kv one[1] = { { "log.segment.bytes", "4096" } };
    ck_assert_int_eq(md_broker_configs_replace(db, "1", two, 2, err, sizeof err), 0);
    ck_assert_int_eq(md_broker_configs_replace(db, "", one, 1, err, sizeof err), 0);
    ck_assert_int_eq(md_broker_configs_replace(db, "1", two + 1, 1, err, sizeof err), 0);
    md_kv *kv;
    size_t n;
    ck_assert_int_eq(md_broker_configs(db, "1", &kv, &n), 0);
    ck_assert_int_eq(n, 1);                      /* the whole set replaced */
    ck_assert_str_eq(kv[0].name, "message.max.bytes");
    ck_assert_str_eq(kv[0].value, "2000");
    md_kv_free(kv, n);
    ck_assert_int_eq(md_broker_configs(db, "", &kv, &n), 0);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(kv[0].value, "4096");
    md_kv_free(kv, n);
    reopen();                                    /* kept */
    ck_assert_int_eq(md_broker_configs(db, "2", &kv, &n), 0);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(md_broker_configs(db, "1", &kv, &n), 0);
    ck_assert_int_eq(n, 1);
    md_kv_free(kv, n);
}
END_TEST

START_TEST(test_offset_commit_upserts_in_one_batch)
{
    md_offset o[3] = { off("g", "orders", 0, 10), off("g", "orders", 1, 20), off("g", "audit", 0, 5) };
    o[1].metadata = "hello";
    o[1].metadata_len = 5;
    o[2].leader_epoch = 3;
    char err[MD_ERRLEN] = "";
    ck_assert_int_eq(md_offset_commit(db, o, 3, err, sizeof err), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(o[i].result, KP_NONE);
    o[0].offset = 11;
    ck_assert_int_eq(md_offset_commit(db, o, 1, err, sizeof err), 0);
    md_committed *c;
    size_t n;
    ck_assert_int_eq(md_offset_list(db, "g", 1, &c, &n), 0);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(c[0].topic, "audit");
    ck_assert_int_eq(c[0].offset, 5);
    ck_assert_int_eq(c[0].leader_epoch, 3);
    ck_assert_str_eq(c[1].topic, "orders");
    ck_assert_int_eq(c[1].partition, 0);
    ck_assert_int_eq(c[1].offset, 11);
    ck_assert_str_eq(c[1].metadata, "");        /* null is stored as "" */
    ck_assert_int_eq(c[2].offset, 20);
    ck_assert_str_eq(c[2].metadata, "hello");
    md_committed_free(c, n);
    ck_assert_int_eq(md_group_offset_count(db, "g"), 3);
    ck_assert_int_eq(md_group_offset_count(db, "other"), 0);
}
END_TEST

START_TEST(test_offset_commit_unknown_topic_fails_only_that_row)
{
    md_offset o[3] = { off("g", "orders", 0, 1), off("g", "nope", 0, 2), off("g", "orders", 1, 3) };
    char err[MD_ERRLEN] = "";
    ck_assert_int_eq(md_offset_commit(db, o, 3, err, sizeof err), 0);
    ck_assert_int_eq(o[0].result, KP_NONE);
    ck_assert_int_eq(o[1].result, KP_UNKNOWN_TOPIC_OR_PARTITION);
    ck_assert_int_eq(o[2].result, KP_NONE);
    ck_assert_int_eq(md_group_offset_count(db, "g"), 2);
}
END_TEST

START_TEST(test_offsets_survive_reopen_and_go_with_topic)
{
    md_offset o[2] = { off("g", "orders", 2, 42), off("g", "audit", 0, 7) };
    char err[MD_ERRLEN] = "";
    ck_assert_int_eq(md_offset_commit(db, o, 2, err, sizeof err), 0);
    reopen();
    ck_assert_int_eq(md_group_offset_count(db, "g"), 2);
    ck_assert_int_eq(md_topic_delete(db, "audit", err, sizeof err), 0);
    ck_assert_int_eq(md_group_offset_count(db, "g"), 1);
}
END_TEST

START_TEST(test_commit_batch_inside_caller_transaction)
{
    ck_assert_int_eq(md_begin(db), 0);
    md_offset a = off("g1", "orders", 0, 1), b = off("g2", "orders", 0, 2);
    char err[MD_ERRLEN] = "";
    ck_assert_int_eq(md_offset_commit(db, &a, 1, err, sizeof err), 0);
    ck_assert_int_eq(md_offset_commit(db, &b, 1, err, sizeof err), 0);
    save_group("g1", "Empty", NULL, 0, 1, NULL, 0);
    ck_assert_int_eq(md_rollback(db), 0);
    ck_assert_int_eq(md_group_offset_count(db, "g1") + md_group_offset_count(db, "g2"), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM consumer_groups"), 0);
}
END_TEST

START_TEST(test_group_delete_removes_members_and_offsets)
{
    md_group_member m = { .member_id = "m1", .client_id = "c", .client_host = "h",
                          .session_timeout_ms = 6000, .rebalance_timeout_ms = 6000,
                          .subscription_len = -1, .assignment_len = -1 };
    save_group("g", "Stable", "consumer", 1, 1, &m, 1);
    md_offset o = off("g", "orders", 0, 5);
    char err[MD_ERRLEN] = "";
    ck_assert_int_eq(md_offset_commit(db, &o, 1, err, sizeof err), 0);
    ck_assert_int_eq(md_group_delete(db, "g", err, sizeof err), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM group_members"), 0);
    ck_assert_int_eq(md_group_offset_count(db, "g"), 0);
    ck_assert_int_eq(md_group_delete(db, "g", err, sizeof err), KP_GROUP_ID_NOT_FOUND);
}
END_TEST

static bool starts_with_a(const char *group_id, void *arg)
{
    (void)arg;
    return group_id[0] == 'a';
}

START_TEST(test_groups_delete_matching_takes_rows_and_offsets_of_matched_ids_only)
{
    md_group_member m = { .member_id = "m1", .client_id = "c", .client_host = "h",
                          .session_timeout_ms = 6000, .rebalance_timeout_ms = 6000,
                          .subscription_len = -1, .assignment_len = -1 };
    save_group("a1", "Stable", "consumer", 1, 1, &m, 1);
    save_group("b1", "Empty", "consumer", 1, 1, NULL, 0);
    md_offset o[] = { off("a1", "orders", 0, 5), off("a2", "orders", 1, 6),   /* no row */
                      off("b1", "orders", 0, 7) };
    char err[MD_ERRLEN] = "";
    ck_assert_int_eq(md_offset_commit(db, o, 3, err, sizeof err), 0);
    int64_t n = -1;
    ck_assert_int_eq(md_groups_delete_matching(db, starts_with_a, NULL, &n, err, sizeof err), 0);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(query_int("SELECT count(*) FROM consumer_groups WHERE group_id = 'a1'"), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM group_members"), 0);
    ck_assert_int_eq(md_group_offset_count(db, "a1") + md_group_offset_count(db, "a2"), 0);
    ck_assert_int_eq(md_group_offset_count(db, "b1"), 1);
    ck_assert_int_eq(query_int("SELECT count(*) FROM consumer_groups WHERE group_id = 'b1'"), 1);
    ck_assert_int_eq(md_groups_delete_matching(db, starts_with_a, NULL, &n, err, sizeof err), 0);
    ck_assert_int_eq(n, 0);
}
END_TEST

static void note_expired(const char *group, const char *topic, int32_t partition, void *arg)
{
    char *seen = arg;
    size_t n = strlen(seen);
    snprintf(seen + n, 256 - n, "|%s/%s/%d|", group, topic, partition);
}

START_TEST(test_expire_follows_kafka_retention_rules)
{
    const int64_t day = 86400000, ret = 7 * day, now = 100 * day;
    char err[MD_ERRLEN] = "";
    /* Consumer group Empty for 8 days: all its offsets go, even a fresh one. */
    save_group("empty-long", "Empty", "consumer", 5, now - 8 * day, NULL, 0);
    /* Consumer group Empty for 1 day: kept, even an old commit. */
    save_group("empty-short", "Empty", "consumer", 5, now - 1 * day, NULL, 0);
    /* Stable group: never expires here. */
    md_group_member m = { .member_id = "m1", .client_id = "c", .client_host = "h",
                          .session_timeout_ms = 6000, .rebalance_timeout_ms = 6000,
                          .subscription_len = -1, .assignment_len = -1 };
    save_group("stable", "Stable", "consumer", 2, now - 30 * day, &m, 1);
    md_offset o[7] = {
        off("empty-long", "orders", 0, 1), off("empty-short", "orders", 0, 1),
        off("stable", "orders", 0, 1),
        off("simple", "orders", 0, 1), off("simple", "orders", 1, 1),   /* no row: offsets only */
        off("explicit", "orders", 0, 1), off("explicit", "orders", 1, 1),
    };
    o[0].commit_time_ms = now - 1000;
    o[1].commit_time_ms = now - 30 * day;
    o[2].commit_time_ms = now - 30 * day;
    o[3].commit_time_ms = now - 8 * day;       /* expired */
    o[4].commit_time_ms = now - 6 * day;       /* kept */
    o[5].commit_time_ms = now - 1000;
    o[5].expire_time_ms = now - 1;             /* v2-4 explicit retention: expired */
    o[6].commit_time_ms = now - 30 * day;
    o[6].expire_time_ms = now + day;           /* explicit: not yet */
    ck_assert_int_eq(md_offset_commit(db, o, 7, err, sizeof err), 0);
    int64_t expired = -1;
    char seen[256] = "";
    ck_assert_msg(md_offsets_expire(db, now, ret, note_expired, seen, &expired, err,
                                    sizeof err) == 0, "%s", err);
    ck_assert_int_eq(expired, 3);
    /* each expired row named once, for its tombstone (cluster mode) */
    ck_assert_msg(strstr(seen, "|empty-long/orders/0|") && strstr(seen, "|simple/orders/0|") &&
                  strstr(seen, "|explicit/orders/0|") && strlen(seen) == strlen(
                  "|empty-long/orders/0||simple/orders/0||explicit/orders/0|"), "%s", seen);
    ck_assert_int_eq(md_group_offset_count(db, "empty-long"), 0);
    ck_assert_int_eq(md_group_offset_count(db, "empty-short"), 1);
    ck_assert_int_eq(md_group_offset_count(db, "stable"), 1);
    ck_assert_int_eq(md_group_offset_count(db, "simple"), 1);
    ck_assert_int_eq(md_group_offset_count(db, "explicit"), 1);
}
END_TEST

START_TEST(test_instance_id_is_unique_per_group)
{
    md_group_member m[2] = {
        { .member_id = "a", .instance_id = "same", .client_id = "c", .client_host = "h",
          .session_timeout_ms = 1, .rebalance_timeout_ms = 1, .subscription_len = -1, .assignment_len = -1 },
        { .member_id = "b", .instance_id = "same", .client_id = "c", .client_host = "h",
          .session_timeout_ms = 1, .rebalance_timeout_ms = 1, .subscription_len = -1, .assignment_len = -1 },
    };
    md_group g = { .group_id = "g", .state = "Stable", .protocol_type = "consumer",
                   .protocol = "range", .generation = 1, .leader = "a",
                   .members = m, .nmembers = 2 };
    char err[MD_ERRLEN] = "";
    ck_assert_int_eq(md_group_save(db, &g, err, sizeof err), MD_E_SQL);
    /* All or nothing: no group row either. */
    ck_assert_int_eq(query_int("SELECT count(*) FROM consumer_groups"), 0);
}
END_TEST

static md_offset txn_off(const char *group, const char *topic, int32_t p, int64_t o, int64_t pid)
{
    md_offset x = off(group, topic, p, o);
    x.txn = true;
    x.producer_id = pid;
    x.producer_epoch = 3;
    return x;
}

static bool group_is_g1(const char *group_id, void *arg)
{
    (void)arg;
    return strcmp(group_id, "g1") == 0;
}

START_TEST(test_txn_offsets_pending_until_completed_then_committed_or_dropped)
{
    char err[MD_ERRLEN] = "";
    md_offset c = off("g1", "orders", 0, 5);
    md_offset o[4] = {
        txn_off("g1", "orders", 0, 10, 7), txn_off("g1", "orders", 1, 11, 7),
        txn_off("g2", "orders", 0, 20, 7), txn_off("g1", "gone", 0, 1, 7),
    };
    ck_assert_int_eq(md_offset_commit(db, &c, 1, err, sizeof err), 0);
    ck_assert_msg(md_offset_commit(db, o, 4, err, sizeof err) == 0, "commit: %s", err);
    ck_assert_int_eq(o[0].result, KP_NONE);
    ck_assert_int_eq(o[3].result, KP_UNKNOWN_TOPIC_OR_PARTITION);
    /* Pending rows are not committed ones, and survive a reopen. */
    reopen();
    ck_assert_int_eq(query_int("SELECT offset FROM committed_offsets WHERE group_id = 'g1' "
                               "AND partition = 0"), 5);
    ck_assert_int_eq(query_int("SELECT count(*) FROM committed_offsets"), 1);
    md_committed *rows;
    size_t n;
    ck_assert_int_eq(md_txn_offsets_pending(db, "g1", 2, &rows, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(rows[1].topic, "orders");
    ck_assert_int_eq(rows[1].partition, 1);
    ck_assert_int_eq(rows[1].offset, 11);
    md_committed_free(rows, n);
    /* A commit reaching g1's partition moves g1's rows only; again: nothing. */
    int64_t moved = -1;
    ck_assert_int_eq(md_txn_offsets_complete(db, 7, true, group_is_g1, NULL, &moved,
                                             err, sizeof err), 0);
    ck_assert_int_eq(moved, 2);
    ck_assert_int_eq(md_txn_offsets_complete(db, 7, true, group_is_g1, NULL, &moved,
                                             err, sizeof err), 0);
    ck_assert_int_eq(moved, 0);
    ck_assert_int_eq(query_int("SELECT offset FROM committed_offsets WHERE group_id = 'g1' "
                               "AND partition = 0"), 10);
    ck_assert_int_eq(query_int("SELECT offset FROM committed_offsets WHERE group_id = 'g1' "
                               "AND partition = 1"), 11);
    ck_assert_int_eq(md_txn_offsets_pending(db, "g1", 2, &rows, &n), 0);
    ck_assert_uint_eq(n, 0);
    /* An abort drops g2's without committing them. */
    ck_assert_int_eq(md_txn_offsets_complete(db, 7, false, NULL, NULL, &moved,
                                             err, sizeof err), 0);
    ck_assert_int_eq(moved, 1);
    ck_assert_int_eq(query_int("SELECT count(*) FROM committed_offsets WHERE group_id = 'g2'"), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM pending_txn_offsets"), 0);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_group_save_writes_row_and_replaces_members,
        test_group_foreach_returns_groups_and_members_after_reopen,
        test_offset_commit_upserts_in_one_batch,
        test_offset_tombstone_deletes_only_its_row,
        test_broker_configs_replace_whole_sets_per_resource,
        test_offset_commit_unknown_topic_fails_only_that_row,
        test_offsets_survive_reopen_and_go_with_topic,
        test_commit_batch_inside_caller_transaction,
        test_group_delete_removes_members_and_offsets,
        test_groups_delete_matching_takes_rows_and_offsets_of_matched_ids_only,
        test_expire_follows_kafka_retention_rules, test_instance_id_is_unique_per_group,
        test_txn_offsets_pending_until_completed_then_committed_or_dropped,
    };
    return unit_run("md_groups", "groups", tests, sizeof tests / sizeof *tests, setup, teardown, 0);
}
