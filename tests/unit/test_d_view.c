/*
 * test_d_view — the cluster view finds a topic by id as it does by name
 * (daemon/view/view.c, V4): through growths of its tables, after removals, and
 * never for the zero id or an id that only shares a prefix.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/view/view_registry.h"
#include "tests/unit/unit_run.h"

#define NT 1000                       /* tables grow 64 → 4096 on the way */

static void make_id(uint8_t id[16], uint32_t i)
{
    /* Ids alike in their first 8 bytes, so the hash sees only the tail
     * when two differ in i's high half: the chains must compare all 16. */
    memset(id, 0xab, 16);
    id[12] = (uint8_t)(i >> 24);
    id[13] = (uint8_t)(i >> 16);
    id[14] = (uint8_t)(i >> 8);
    id[15] = (uint8_t)i;
    id[0] = (uint8_t)(i * 37);
}

static bk_topic *topic(uint32_t i)
{
    bk_topic *t = calloc(1, sizeof *t);
    ck_assert_ptr_nonnull(t);
    snprintf(t->name, sizeof t->name, "topic-%u", i);
    make_id(t->id, i);
    return t;
}

START_TEST(test_find_by_id_through_growth_and_removal)
{
    bk_broker b;
    memset(&b, 0, sizeof b);
    bk_topic *ts[NT];
    uint8_t id[16];
    for (uint32_t i = 0; i < NT; i++) {
        ts[i] = topic(i);
        view_insert(&b, ts[i]);
        make_id(id, i);
        ck_assert_ptr_eq(view_topic_find_id(&b, id), ts[i]);
    }
    ck_assert_uint_eq(b.ntopics, NT);
    for (uint32_t i = 0; i < NT; i++) {           /* all still there */
        make_id(id, i);
        ck_assert_ptr_eq(view_topic_find_id(&b, id), ts[i]);
    }
    /* An id sharing all but its last byte with a topic's is not it. */
    make_id(id, 7);
    id[15] ^= 0x80;
    ck_assert_ptr_null(view_topic_find_id(&b, id));

    for (uint32_t i = 0; i < NT; i += 2)
        view_remove(&b, ts[i]);
    ck_assert_uint_eq(b.ntopics, NT / 2);
    for (uint32_t i = 0; i < NT; i++) {
        make_id(id, i);
        char name[32];
        snprintf(name, sizeof name, "topic-%u", i);
        bk_topic *want = i % 2 ? ts[i] : NULL;
        ck_assert_ptr_eq(view_topic_find_id(&b, id), want);
        ck_assert_ptr_eq(view_topic_find(&b, name, strlen(name)), want);
    }
    /* Re-created under the same name with a new id: only the new id finds
     * it, as a client holding the old id must learn UNKNOWN_TOPIC_ID. */
    bk_topic *again = topic(NT + 1);
    snprintf(again->name, sizeof again->name, "topic-0");
    view_insert(&b, again);
    make_id(id, 0);
    ck_assert_ptr_null(view_topic_find_id(&b, id));
    make_id(id, NT + 1);
    ck_assert_ptr_eq(view_topic_find_id(&b, id), again);
    ck_assert_ptr_eq(view_topic_find(&b, "topic-0", 7), again);

    view_remove(&b, again);
    free(again);
    for (uint32_t i = 1; i < NT; i += 2)
        view_remove(&b, ts[i]);
    ck_assert_uint_eq(b.ntopics, 0);
    for (uint32_t i = 0; i < NT; i++) {
        make_id(id, i);
        ck_assert_ptr_null(view_topic_find_id(&b, id));
        free(ts[i]);
    }
    view_free(&b);
}
END_TEST

/* A topic without an id (zero) is found by name only; asking for the zero
 * id finds nothing, even with such a topic in the view. */
START_TEST(test_zero_id_is_never_found)
{
    bk_broker b;
    memset(&b, 0, sizeof b);
    static const uint8_t zero[16];
    ck_assert_ptr_null(view_topic_find_id(&b, zero));      /* empty view */
    bk_topic *t = topic(1);
    memset(t->id, 0, sizeof t->id);
    view_insert(&b, t);
    ck_assert_ptr_null(view_topic_find_id(&b, zero));
    ck_assert_ptr_eq(view_topic_find(&b, "topic-1", 7), t);
    view_remove(&b, t);
    ck_assert_ptr_null(view_topic_find(&b, "topic-1", 7));
    free(t);
    view_free(&b);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = { test_find_by_id_through_growth_and_removal,
                                   test_zero_id_is_never_found };
    return unit_run("d_view", "view", tests, sizeof tests / sizeof *tests, NULL, NULL, 0);
}
