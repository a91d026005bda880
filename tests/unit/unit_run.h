/*
 * tests/unit/unit_run.h — the main() of a unit test: one suite of one
 * test case, its tests, an optional fixture around each and a timeout
 * per test (0: Check's default), run in Check's forking mode; returns
 * the exit status, failure if any test failed.
 */
#ifndef SLUICE_UNIT_RUN_H
#define SLUICE_UNIT_RUN_H

#include <check.h>
#include <stddef.h>
#include <stdlib.h>

static inline int unit_run(const char *suite, const char *tcase, const TTest *const *tests,
                           size_t n, void (*setup)(void), void (*teardown)(void), double timeout)
{
    Suite *s = suite_create(suite);
    TCase *tc = tcase_create(tcase);
    if (setup || teardown)
        tcase_add_checked_fixture(tc, setup, teardown);
    if (timeout > 0)
        tcase_set_timeout(tc, timeout);
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
