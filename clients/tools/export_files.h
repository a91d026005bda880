/* sluice-export's file system steps (issue 32). */
#ifndef SLUICE_EXPORT_FILES_H
#define SLUICE_EXPORT_FILES_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* fsync of a directory.  0 or -1 (errno). */
int ex_fsync_path(const char *path);

/* mkdir -p (path is restored); each directory created has its parent
 * fsynced.  0 or -1 (errno). */
int ex_mkdirs(char *path);

/* rename that never replaces an existing file.  0 or -1 (errno, EEXIST). */
int ex_rename_new(const char *from, const char *to);

#define EX_LOCK_HELD (-2)
/* Takes an flock() on path (created), waiting up to wait_ms or until *stop,
 * and writes this pid into it.  The fd (closing it lets go), EX_LOCK_HELD
 * (holder: the holder's pid as written, maybe ""), or -1 (errno). */
int ex_lock_file(const char *path, int64_t wait_ms, volatile sig_atomic_t *stop,
                 char *holder, size_t holder_size);

#endif
