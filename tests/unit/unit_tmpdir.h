/*
 * tests/unit/unit_tmpdir.h — a fresh directory for each test: g_dir, made
 * by unit_tmpdir_make("name") in a fixture's setup (/tmp/name.XXXXXX) and
 * removed with everything in it by unit_tmpdir_remove() in its teardown.
 */
#ifndef SLUICE_UNIT_TMPDIR_H
#define SLUICE_UNIT_TMPDIR_H

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static char g_dir[64];

static int unit_rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st; (void)flag; (void)f;
    return remove(p);
}

static inline void unit_tmpdir_make(const char *name)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/%s.XXXXXX", name);
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
}

static inline void unit_tmpdir_remove(void)
{
    nftw(g_dir, unit_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
