/*
 * test_d_store — the store of record as a table of operations
 * (daemon/view/view_store.h): the write paths of topics, broker configs, ACLs and
 * SCRAM credentials reach the broker's b->store and nothing else,
 * validate_only never does, a pending write is the store's to answer,
 * and the standalone table stores and applies before it returns.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "daemon/security/sec_authz.h"
#include "daemon/security/sec_sasl.h"
#include "daemon/view/view_store.h"
#include "daemon/view/view_broker_configs.h"
#include "tests/unit/unit_run.h"
#include "tests/unit/unit_tmpdir.h"

static bk_broker B;
static bk_config CFG;

static void setup(void)
{
    unit_tmpdir_make("test_d_store");
    char err[MD_ERRLEN] = "", db[128];
    bk_config_init(&CFG);
    snprintf(CFG.log_dirs, sizeof CFG.log_dirs, "%s", g_dir);
    ck_assert_int_eq(bk_config_finish(&CFG, err, sizeof err), 0);
    memset(&B, 0, sizeof B);
    B.cfg = &CFG;
    snprintf(B.data_dir, sizeof B.data_dir, "%s", g_dir);
    snprintf(db, sizeof db, "%s/sluice.db", g_dir);
    ck_assert_msg(md_open(db, &B.db, err, sizeof err) == 0, "%s", err);
    ck_assert_ptr_nonnull(B.base = event_base_new());
}

static void teardown(void)
{
    view_topics_close_all(&B);
    md_close(B.db);
    event_base_free(B.base);
    unit_tmpdir_remove();
}

/* ---- a store that records what reaches it -------------------------------- */
static struct {
    int calls;
    const char *last;                 /* the operation's name */
    bool own_assignment, pending;     /* pending: leave the answer to op->done */
    size_t n;
} seen;

static int answer(const char *what, size_t n, bk_topic_op *op)
{
    seen.calls++;
    seen.last = what;
    seen.n = n;
    if (seen.pending && op)
        op->pending = true;
    return KP_NONE;
}

static int rec_topic_create(bk_broker *b, const char *name, int32_t partitions, int16_t rf,
                            const int32_t *replicas, bool own_assignment, const md_kv *configs,
                            size_t nconfigs, bk_topic_op *op, char *err, size_t errlen)
{
    (void)b, (void)name, (void)rf, (void)configs, (void)nconfigs, (void)err, (void)errlen;
    ck_assert_ptr_nonnull(replicas);  /* the broker's assignment, made by the caller */
    seen.own_assignment = own_assignment;
    return answer("topic_create", (size_t)partitions, op);
}

static int rec_topic_delete(bk_broker *b, const char *name, bk_topic_op *op, char *err,
                            size_t errlen)
{
    (void)b, (void)name, (void)err, (void)errlen;
    return answer("topic_delete", 0, op);
}

static int rec_topic_add_partitions(bk_broker *b, const char *name, int32_t count,
                                    const int32_t *replicas, int16_t rf, bk_topic_op *op,
                                    char *err, size_t errlen)
{
    (void)b, (void)name, (void)replicas, (void)rf, (void)err, (void)errlen;
    return answer("topic_add_partitions", (size_t)count, op);
}

static int rec_topic_configs_set(bk_broker *b, const char *name, const md_kv *kv, size_t n,
                                 bk_topic_op *op, char *err, size_t errlen)
{
    (void)b, (void)name, (void)kv, (void)err, (void)errlen;
    return answer("topic_configs_set", n, op);
}

static int rec_broker_configs_set(bk_broker *b, const char *resource, const md_kv *kv,
                                  size_t n, bk_topic_op *op, char *err, size_t errlen)
{
    (void)b, (void)resource, (void)kv, (void)err, (void)errlen;
    return answer("broker_configs_set", n, op);
}

static int rec_acl_change(bk_broker *b, const md_acl *del, size_t ndel, const md_acl *add,
                          size_t nadd, bk_topic_op *op, char *err, size_t errlen)
{
    (void)b, (void)del, (void)add, (void)err, (void)errlen;
    return answer("acl_change", ndel + nadd, op);
}

static int rec_scram_set(bk_broker *b, const char *name, const md_scram_cred *c, char *err,
                         size_t errlen)
{
    (void)b, (void)name, (void)c, (void)err, (void)errlen;
    return answer("scram_set", 1, NULL);
}

static int rec_scram_delete(bk_broker *b, const char *name, const char *mechanism,
                            bool *deleted, char *err, size_t errlen)
{
    (void)b, (void)name, (void)mechanism, (void)err, (void)errlen;
    *deleted = false;
    return answer("scram_delete", 1, NULL);
}

static int rec_partitions_reassign(bk_broker *b, const char *topic, const bk_reassign *parts,
                                   int32_t n, bk_topic_op *op, char *err, size_t errlen)
{
    (void)b, (void)topic, (void)parts, (void)err, (void)errlen;
    return answer("partitions_reassign", (size_t)n, op);
}

static const bk_store recorder = {
    .name = "recorder",
    .topic_create = rec_topic_create,
    .topic_delete = rec_topic_delete,
    .topic_add_partitions = rec_topic_add_partitions,
    .topic_configs_set = rec_topic_configs_set,
    .broker_configs_set = rec_broker_configs_set,
    .acl_change = rec_acl_change,
    .scram_set = rec_scram_set,
    .scram_delete = rec_scram_delete,
    .partitions_reassign = rec_partitions_reassign,
};

static void use_recorder(void)
{
    ck_assert_int_eq(view_topics_load(&B), 0);
    B.store = &recorder;
    memset(&seen, 0, sizeof seen);
}

START_TEST(test_topics_load_gives_a_broker_without_a_store_the_standalone_one)
{
    ck_assert_ptr_null(B.store);
    ck_assert_int_eq(view_topics_load(&B), 0);
    ck_assert_ptr_eq(B.store, &bk_store_sqlite);
}
END_TEST

START_TEST(test_topic_writes_reach_the_store_and_validate_only_does_not)
{
    use_recorder();
    char err[256];
    ck_assert_int_eq(view_topic_create(&B, "t", 3, 1, NULL, NULL, 0, true, NULL, err, sizeof err),
                     KP_NONE);
    ck_assert_int_eq(seen.calls, 0);
    ck_assert_int_ne(md_topic_get(B.db, "t", NULL), KP_NONE);   /* checked, not written */
    ck_assert_int_eq(view_topic_create(&B, "t", 3, 1, NULL, NULL, 0, false, NULL, err,
                                     sizeof err), KP_NONE);
    ck_assert_str_eq(seen.last, "topic_create");
    ck_assert_uint_eq(seen.n, 3);
    ck_assert(seen.own_assignment);
    ck_assert_int_ne(md_topic_get(B.db, "t", NULL), KP_NONE);   /* the store's to write */
    md_kv kv = { (char *)"retention.ms", (char *)"1000" };
    ck_assert_int_eq(view_topic_configs_set(&B, "t", &kv, 1, false, NULL, err, sizeof err),
                     KP_NONE);
    ck_assert_str_eq(seen.last, "topic_configs_set");
    ck_assert_int_eq(view_topic_delete(&B, "t", NULL, err, sizeof err), KP_NONE);
    ck_assert_str_eq(seen.last, "topic_delete");
    ck_assert_int_eq(seen.calls, 3);
}
END_TEST

START_TEST(test_broker_config_acl_and_credential_writes_reach_the_store)
{
    use_recorder();
    char err[256];
    md_kv kv = { (char *)"leader.replication.throttled.rate", (char *)"1000" };
    ck_assert_int_eq(view_broker_configs_set(&B, "", &kv, 1, true, NULL, err, sizeof err),
                     KP_NONE);
    ck_assert_int_eq(seen.calls, 0);
    ck_assert_int_eq(view_broker_configs_set(&B, "", &kv, 1, false, NULL, err, sizeof err),
                     KP_NONE);
    ck_assert_str_eq(seen.last, "broker_configs_set");
    md_acl row = { .resource_type = (char *)"TOPIC", .resource_name = (char *)"t",
                   .pattern_type = (char *)"LITERAL", .principal = (char *)"User:a",
                   .host = (char *)"*", .operation = (char *)"READ",
                   .permission = (char *)"ALLOW" };
    ck_assert_int_eq(sec_acl_apply(&B, NULL, 0, &row, 1, NULL, err, sizeof err), KP_NONE);
    ck_assert_str_eq(seen.last, "acl_change");
    ck_assert_uint_eq(seen.n, 1);
    /* The store found none to delete: the caller's answer, as Kafka's. */
    ck_assert_int_eq(sec_sasl_user_delete(&B, "a", "SCRAM-SHA-256", err, sizeof err),
                     KP_RESOURCE_NOT_FOUND);
    ck_assert_str_eq(seen.last, "scram_delete");
    ck_assert_int_eq(seen.calls, 3);
}
END_TEST

/* view_store.h S2: a store that cannot finish now marks the op pending; the
 * write path returns without answering for it. */
START_TEST(test_a_pending_write_is_left_to_the_store_to_answer)
{
    use_recorder();
    seen.pending = true;
    char err[256];
    bk_topic_op op = { 0 };
    md_kv kv = { (char *)"leader.replication.throttled.rate", (char *)"1000" };
    ck_assert_int_eq(view_broker_configs_set(&B, "", &kv, 1, false, &op, err, sizeof err),
                     KP_NONE);
    ck_assert(op.pending);
}
END_TEST

START_TEST(test_the_standalone_store_writes_and_applies_before_it_returns)
{
    ck_assert_int_eq(view_topics_load(&B), 0);
    char err[256];
    bk_topic_op op = { 0 };
    ck_assert_int_eq(view_topic_create(&B, "t", 2, 1, NULL, NULL, 0, false, &op, err,
                                     sizeof err), KP_NONE);
    ck_assert(!op.pending);
    ck_assert_int_eq(md_topic_get(B.db, "t", NULL), KP_NONE);
    bk_topic *t = view_topic_find(&B, "t", 1);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->npartitions, 2);
    ck_assert_int_eq(view_topic_add_partitions(&B, "t", 3, NULL, false, &op, err, sizeof err),
                     KP_NONE);
    ck_assert_int_eq(view_topic_find(&B, "t", 1)->npartitions, 3);
    ck_assert_int_eq(view_topic_delete(&B, "t", &op, err, sizeof err), KP_NONE);
    ck_assert(!op.pending);
    ck_assert_ptr_null(view_topic_find(&B, "t", 1));
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_topics_load_gives_a_broker_without_a_store_the_standalone_one,
        test_topic_writes_reach_the_store_and_validate_only_does_not,
        test_broker_config_acl_and_credential_writes_reach_the_store,
        test_a_pending_write_is_left_to_the_store_to_answer,
        test_the_standalone_store_writes_and_applies_before_it_returns,
    };
    return unit_run("d_store", "store", tests, sizeof tests / sizeof *tests, setup, teardown,
                    0);
}
