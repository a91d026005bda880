/*
 * metadata/migrate.c — brings a database file to the schema this build
 * carries (sql/, linked in by sql/embed.sh).
 *
 * Design note.
 *
 * The files, by name:
 *   sql/schema.sql               the whole schema at its version (1); it
 *                                sets PRAGMA user_version itself
 *   sql/migrations/NNNN_*.sql    one change each, NNNN >= 2, unique
 *   other .sql files in sql/     re-run at every open (views), idempotent
 *
 * States of a file, by PRAGMA user_version (v) — and who moves it:
 *
 *     v = 0 (new) ──schema.sql──► v = S ──migration N (N > v)──► v = N ──► …
 *                                                                  │
 *     every open, at the newest version:  re-run scripts ◄─────────┘
 *
 *   * Each arrow is one transaction (BEGIN IMMEDIATE … COMMIT) that also
 *     writes the new user_version, so a crash or a failing script leaves
 *     the file at the previous version, never between two.
 *   * Inside the transaction v is read again: two processes opening the
 *     same new file at once do the work once.
 *   * Migrations run in number order, never twice; ones numbered <= S are
 *     skipped for a new file (the schema already contains them).
 *   * v greater than every version this build knows is refused: the file
 *     was written by a newer Sluice and we would misread it.
 *   * Foreign keys are still off here (md_open turns them on after), so a
 *     migration may rebuild a table; PRAGMA foreign_key_check must come
 *     back empty before the migration commits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/md_internal.h"

struct migration {
    int version;
    const struct md_sql_file *file;
};

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static bool is_migration(const char *path)
{
    return strncmp(path, "migrations/", 11) == 0 || strstr(path, "/migrations/");
}

static bool is_schema(const char *path)
{
    return !is_migration(path) && strcmp(base_name(path), "schema.sql") == 0;
}

static int exec_script(sqlite3 *h, const char *sql, const char *what,
                       char *err, size_t errlen)
{
    char *msg = NULL;
    if (sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK) {
        md_errf(err, errlen, MD_E_SQL, "%s: %s", what,
                msg ? msg : sqlite3_errmsg(h));
        sqlite3_free(msg);
        return MD_E_SQL;
    }
    return 0;
}

static int user_version(sqlite3 *h, int *v, char *err, size_t errlen)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(h, "PRAGMA user_version", -1, &s, NULL) != SQLITE_OK)
        return md_errf(err, errlen, MD_E_SQL, "user_version: %s", sqlite3_errmsg(h));
    int rc = 0;
    if (sqlite3_step(s) == SQLITE_ROW)
        *v = sqlite3_column_int(s, 0);
    else
        rc = md_errf(err, errlen, MD_E_SQL, "user_version: %s", sqlite3_errmsg(h));
    sqlite3_finalize(s);
    return rc;
}

static int foreign_keys_ok(sqlite3 *h, const char *what, char *err, size_t errlen)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(h, "PRAGMA foreign_key_check", -1, &s, NULL) != SQLITE_OK)
        return md_errf(err, errlen, MD_E_SQL, "%s: %s", what, sqlite3_errmsg(h));
    int step = sqlite3_step(s);
    int rc = 0;
    if (step == SQLITE_ROW)
        rc = md_errf(err, errlen, MD_E_SQL,
                     "%s: leaves a row of %s violating its foreign key", what,
                     (const char *)sqlite3_column_text(s, 0));
    else if (step != SQLITE_DONE)
        rc = md_errf(err, errlen, MD_E_SQL, "%s: %s", what, sqlite3_errmsg(h));
    sqlite3_finalize(s);
    return rc;
}

static void rollback(sqlite3 *h)
{
    if (!sqlite3_get_autocommit(h))
        sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
}

static int commit(sqlite3 *h, const char *what, char *err, size_t errlen)
{
    int rc = exec_script(h, "COMMIT", what, err, errlen);
    if (rc)
        rollback(h);
    return rc;
}

/* "0002_add_x.sql" → 2; -1 if the name does not start with a number. */
static int migration_version(const char *path)
{
    const char *b = base_name(path);
    long v = 0;
    const char *p = b;
    while (*p >= '0' && *p <= '9' && v < 1000000)
        v = v * 10 + (*p++ - '0');
    if (p == b || (*p != '_' && *p != '.'))
        return -1;
    return (int)v;
}

static int cmp_migration(const void *a, const void *b)
{
    const struct migration *x = a, *y = b;
    return (x->version > y->version) - (x->version < y->version);
}

static int create_schema(sqlite3 *h, const struct md_sql_file *schema, int *v,
                         char *err, size_t errlen)
{
    if (!schema)
        return md_errf(err, errlen, MD_E_SQL, "new database but no schema.sql linked in");
    int rc = exec_script(h, "BEGIN IMMEDIATE", "begin", err, errlen);
    if (rc)
        return rc;
    rc = user_version(h, v, err, errlen);
    if (!rc && *v == 0) {
        rc = exec_script(h, schema->text, schema->name, err, errlen);
        if (!rc)
            rc = user_version(h, v, err, errlen);
        if (!rc && *v <= 0)
            rc = md_errf(err, errlen, MD_E_SQL,
                         "%s does not set PRAGMA user_version", schema->name);
    }
    if (rc) {
        rollback(h);
        return rc;
    }
    return commit(h, schema->name, err, errlen);
}

static int apply_migration(sqlite3 *h, const struct migration *m, char *err,
                           size_t errlen)
{
    const char *what = m->file->name;
    int v = 0;
    int rc = exec_script(h, "BEGIN IMMEDIATE", "begin", err, errlen);
    if (rc)
        return rc;
    rc = user_version(h, &v, err, errlen);
    if (!rc && v < m->version) {
        char pragma[48];
        snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", m->version);
        rc = exec_script(h, m->file->text, what, err, errlen);
        if (!rc)
            rc = foreign_keys_ok(h, what, err, errlen);
        if (!rc)
            rc = exec_script(h, pragma, what, err, errlen);
    }
    if (rc) {
        rollback(h);
        return rc;
    }
    return commit(h, what, err, errlen);
}

int md_migrate(sqlite3 *h, const struct md_sql_file *files, size_t n,
               char *err, size_t errlen)
{
    const struct md_sql_file *schema = NULL;
    struct migration *mig = calloc(n ? n : 1, sizeof *mig);
    size_t nmig = 0;
    int newest = 1, rc = 0, v = 0;

    if (!mig)
        return md_errf(err, errlen, MD_E_SQL, "out of memory");
    for (size_t i = 0; i < n && !rc; i++) {
        if (is_schema(files[i].name)) {
            schema = &files[i];
        } else if (is_migration(files[i].name)) {
            int mv = migration_version(files[i].name);
            if (mv < 2)
                rc = md_errf(err, errlen, MD_E_SQL,
                             "%s: a migration's name must start with its "
                             "version, 0002 or above (0001 is schema.sql)",
                             files[i].name);
            mig[nmig].version = mv;
            mig[nmig++].file = &files[i];
            if (mv > newest)
                newest = mv;
        }
    }
    if (!rc)
        qsort(mig, nmig, sizeof *mig, cmp_migration);
    for (size_t i = 1; i < nmig && !rc; i++)
        if (mig[i].version == mig[i - 1].version)
            rc = md_errf(err, errlen, MD_E_SQL, "%s and %s have the same version",
                         mig[i - 1].file->name, mig[i].file->name);

    if (!rc)
        rc = user_version(h, &v, err, errlen);
    if (!rc && v == 0)
        rc = create_schema(h, schema, &v, err, errlen);
    if (!rc && v > newest)
        rc = md_errf(err, errlen, MD_E_SQL,
                     "database schema version %d is newer than this build "
                     "knows (%d): opened by a newer Sluice?", v, newest);
    for (size_t i = 0; i < nmig && !rc; i++)
        if (mig[i].version > v)
            rc = apply_migration(h, &mig[i], err, errlen);
    free(mig);

    /* Re-run scripts: one transaction for all, so readers never see a view
     * dropped and not yet re-created. */
    bool any = false;
    for (size_t i = 0; i < n && !rc; i++) {
        if (is_schema(files[i].name) || is_migration(files[i].name))
            continue;
        if (!any && (rc = exec_script(h, "BEGIN IMMEDIATE", "begin", err, errlen)))
            break;
        any = true;
        rc = exec_script(h, files[i].text, files[i].name, err, errlen);
    }
    if (any && rc)
        rollback(h);
    else if (any)
        rc = commit(h, "views", err, errlen);
    return rc;
}
