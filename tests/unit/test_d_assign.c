/*
 * test_d_assign — replica assignment (daemon/view/view.c, view_assign_replicas)
 * is Kafka's AdminUtils.assignReplicasToBrokers: the worked example of
 * its documentation, and over brokers (1..9) × racks (1..4, balanced and
 * not) × partitions (1..60) × replication factors (1..min(brokers, 4)),
 * created at once and grown later, what Kafka's AdminRackAwareTest
 * checks: every replica a registered broker, none twice in a partition,
 * each partition on min(rf, racks) racks, leaders spread evenly.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/view/view_registry.h"
#include "tests/unit/unit_run.h"

/* Check reports every ck_assert to its parent through a pipe (a write
 * each, in forking mode): the matrix's millions of checks only fail. */
#define EXPECT(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

#define MAXB 9
#define MAXP 60
#define MAXRF 4

/* AdminUtils' documentation: 0 → rack1, 1 → rack3, 2 → rack3, 3 → rack2,
 * 4 → rack2, 5 → rack1, six partitions of three replicas and a seventh. */
START_TEST(test_kafka_worked_example)
{
    const int32_t ids[] = { 0, 1, 2, 3, 4, 5 };
    const char *racks[] = { "rack1", "rack3", "rack3", "rack2", "rack2", "rack1" };
    const int32_t want[7][3] = { { 0, 3, 1 }, { 3, 1, 5 }, { 1, 5, 4 }, { 5, 4, 2 },
                                 { 4, 2, 0 }, { 2, 0, 3 }, { 0, 4, 2 } };
    int32_t got[7][3];
    ck_assert_int_eq(view_assign_replicas(ids, racks, 6, 0, 0, 7, 3, &got[0][0]), 0);
    for (int p = 0; p < 7; p++)
        for (int j = 0; j < 3; j++)
            ck_assert_msg(got[p][j] == want[p][j], "partition %d replica %d: %d, want %d", p,
                          j, got[p][j], want[p][j]);
}
END_TEST

/* The case that left a slot unset: three brokers on three racks, four
 * partitions of three replicas (the fourth's shift is 1). */
START_TEST(test_three_racks_rf3_fills_every_slot)
{
    const int32_t ids[] = { 1, 2, 3 };
    const char *racks[] = { "a", "b", "c" };
    int32_t got[50][3];
    memset(got, 0xa5, sizeof got);
    ck_assert_int_eq(view_assign_replicas(ids, racks, 3, 0, 0, 50, 3, &got[0][0]), 0);
    for (int p = 0; p < 50; p++) {
        int seen = 0;
        for (int j = 0; j < 3; j++) {
            ck_assert_int_ge(got[p][j], 1);
            ck_assert_int_le(got[p][j], 3);
            seen |= 1 << got[p][j];
        }
        ck_assert_int_eq(seen, 0xe);
    }
}
END_TEST

/* Broker i's rack in a layout: balanced (i mod nr) or not (broker 0
 * alone in the last rack, the others round robin over the rest).  Names
 * run against id order, so the sort by name matters. */
static int rack_index(int layout, int i, int nr)
{
    if (layout == 0 || nr == 1)
        return i % nr;
    return i == 0 ? nr - 1 : (i - 1) % (nr - 1);
}

/* Checks partitions [first, first + np) of asg, returns nothing: fails. */
static void check(const int32_t *ids, const int *rk, int nb, int nr, int np, int rf,
                  const int32_t *asg, bool balanced, const char *what)
{
    int leaders[MAXB] = { 0 };
    for (int p = 0; p < np; p++) {
        const int32_t *r = asg + (size_t)p * (size_t)rf;
        int racks_seen = 0, nracks = 0, pos[MAXRF];
        for (int j = 0; j < rf; j++) {
            pos[j] = -1;
            for (int i = 0; i < nb; i++)
                if (ids[i] == r[j])
                    pos[j] = i;
            EXPECT(pos[j] >= 0, "%s p%d: replica %d is no broker", what, p, r[j]);
            for (int k = 0; k < j; k++)
                EXPECT(r[k] != r[j], "%s p%d: broker %d twice", what, p, r[j]);
            if (!(racks_seen & (1 << rk[pos[j]])))
                nracks++;
            racks_seen |= 1 << rk[pos[j]];
        }
        int want = rf < nr ? rf : nr;
        EXPECT(nracks == want, "%s p%d: on %d racks, want %d", what, p, nracks, want);
        leaders[pos[0]]++;
    }
    int lo = np, hi = 0;
    for (int i = 0; i < nb; i++) {
        lo = leaders[i] < lo ? leaders[i] : lo;
        hi = leaders[i] > hi ? leaders[i] : hi;
    }
    EXPECT(hi - lo <= 1, "%s: leaders per broker %d..%d", what, lo, hi);
    if (!balanced || np % nb)
        return;
    /* Balanced racks and whole rounds: every broker holds as many. */
    int held[MAXB] = { 0 };
    for (int p = 0; p < np * rf; p++)
        for (int i = 0; i < nb; i++)
            held[i] += ids[i] == asg[p];
    for (int i = 1; i < nb; i++)
        EXPECT(held[i] == held[0] || rf > nr, "%s: replicas per broker %d vs %d",
                      what, held[i], held[0]);
}

START_TEST(test_matrix)
{
    static int32_t asg[MAXP * MAXRF], grown[MAXP * MAXRF];
    int32_t ids[MAXB];
    char names[4][8];
    for (int nb = 1; nb <= MAXB; nb++) {
        for (int i = 0; i < nb; i++)
            ids[i] = 7 * i + 3;                   /* registered, not 0..n-1 */
        for (int nr = 0; nr <= 4 && nr <= nb; nr++)
            for (int layout = 0; layout < 2; layout++) {
                const char *racks[MAXB];
                int rk[MAXB];
                for (int r = 0; r < 4; r++)
                    snprintf(names[r], sizeof names[r], "r%c", 'z' - r);
                for (int i = 0; i < nb; i++) {
                    rk[i] = nr ? rack_index(layout, i, nr) : 0;
                    racks[i] = nr ? names[rk[i]] : "";
                }
                bool balanced = nr == 0 || nb % nr == 0;
                if (layout == 1 && nr > 1)
                    balanced = false;
                int nrk = nr ? nr : 1;
                for (int rf = 1; rf <= nb && rf <= MAXRF; rf++)
                    for (int np = 1; np <= MAXP; np++) {
                        char what[96];
                        snprintf(what, sizeof what, "brokers %d racks %d layout %d rf %d "
                                 "partitions %d", nb, nr, layout, rf, np);
                        memset(asg, 0xa5, sizeof asg);
                        EXPECT(!view_assign_replicas(ids, racks, nb, 0, 0, np, (int16_t)rf, asg),
                               "%s: refused", what);
                        check(ids, rk, nb, nrk, np, rf, asg, balanced, what);
                        /* Grown later: the first np / 2 made, the rest
                         * added from partition 0's leader (index 0).  Not
                         * the same as made at once (Kafka's shift counts
                         * from the first partition added), but as spread. */
                        int half = np / 2;
                        memcpy(grown, asg, (size_t)half * (size_t)rf * sizeof *asg);
                        memset(grown + half * rf, 0xa5,
                               (size_t)(np - half) * (size_t)rf * sizeof *asg);
                        EXPECT(!view_assign_replicas(ids, racks, nb, 0, half, np - half,
                                                   (int16_t)rf, grown + half * rf),
                               "%s: growth refused", what);
                        check(ids, rk, nb, nrk, np, rf, grown, false, what);
                        /* From another start (a leader elsewhere). */
                        EXPECT(!view_assign_replicas(ids, racks, nb, nb - 1, half, np - half,
                                                   (int16_t)rf, grown),
                               "%s: growth from the end refused", what);
                        check(ids, rk, nb, nrk, np - half, rf, grown, false, what);
                    }
            }
    }
}
END_TEST

START_TEST(test_refuses_what_cannot_be_held)
{
    const int32_t ids[] = { 1, 2 };
    const char *racks[] = { "a", "b" };
    int32_t out[8];
    ck_assert_int_eq(view_assign_replicas(ids, racks, 2, 0, 0, 2, 3, out), -1);
    ck_assert_int_eq(view_assign_replicas(ids, racks, 2, 0, 0, 2, 0, out), -1);
    ck_assert_int_eq(view_assign_replicas(ids, racks, 0, 0, 0, 2, 1, out), -1);
    /* One broker without a rack: rack-unaware (Kafka: all or none). */
    const char *mixed[] = { "a", "" };
    ck_assert_int_eq(view_assign_replicas(ids, mixed, 2, 0, 0, 2, 2, out), 0);
    ck_assert_int_eq(out[0], 1);
    ck_assert_int_eq(out[1], 2);
    ck_assert_int_eq(out[2], 2);
    ck_assert_int_eq(out[3], 1);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = { test_kafka_worked_example, test_three_racks_rf3_fills_every_slot,
                                   test_matrix, test_refuses_what_cannot_be_held };
    return unit_run("d_assign", "assign", tests, sizeof tests / sizeof *tests, NULL, NULL, 60);
}
