/* sluice-export's file system steps (issue 32): directories made durable,
 * a rename that never replaces, a partition's lock. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clients/tools/export_files.h"

int ex_fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* mkdir -p; a directory it creates has its parent fsynced (a crash must
 * not lose the directory of a file renamed and committed into it). */
int ex_mkdirs(char *path)
{
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p)
            continue;
        char c = *p;
        *p = 0;
        int rc = mkdir(path, 0777);
        int e = errno;
        if (rc == 0) {
            char *slash = strrchr(path, '/');
            if (slash && slash != path) {
                *slash = 0;
                rc = ex_fsync_path(path);
                e = errno;
                *slash = '/';
            } else {
                rc = ex_fsync_path(slash ? "/" : ".");
                e = errno;
            }
        }
        *p = c;
        if (rc != 0 && e != EEXIST) {
            errno = e;
            return -1;
        }
        if (!c)
            return 0;
    }
}

/* Renames without replacing an existing file (renameat2 RENAME_NOREPLACE;
 * link + unlink where the file system lacks it).  0 or -1 (errno). */
int ex_rename_new(const char *from, const char *to)
{
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    if (link(from, to) != 0)
        return -1;
    return unlink(from);
}

static int64_t ex_files_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ex_lock_file(const char *path, int64_t wait_ms, volatile sig_atomic_t *stop,
                 char *holder, size_t holder_size)
{
    holder[0] = 0;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return -1;
    int64_t until = ex_files_now_ms() + wait_ms;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        if (ex_files_now_ms() >= until || *stop) {
            ssize_t r = pread(fd, holder, holder_size - 1, 0);
            holder[r > 0 ? r : 0] = 0;
            holder[strcspn(holder, "\n")] = 0;
            close(fd);
            return EX_LOCK_HELD;
        }
        usleep(100000);
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    /* The pid is a hint for a message of the next process only. */
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len)
        holder[0] = 0;
    return fd;
}
