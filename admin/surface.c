/*
 * admin/surface.c — the operator SQL surface, compiled into sluice-sql.
 *
 * sluice-sql --data-dir opens a stopped broker's database and must show
 * exactly the tables the daemon's /sql shows, so it uses the same code.
 * Those files (daemon/sql_surface.c, sql_format.c, sql_vtab.c,
 * sql_messages.c) depend only on SQLite, metadata/ and protocol/ — not on
 * libevent or the broker — but live in daemon/ beside the worker that runs
 * them.  The Makefile links sluice-sql from the files in admin/ with libmd and libkp
 * only, so they are compiled here a second time rather than linking the
 * whole daemon library.
 */
#include "daemon/sql_surface.c"
#include "daemon/sql_format.c"
#include "daemon/sql_vtab.c"
#include "daemon/sql_messages.c"
