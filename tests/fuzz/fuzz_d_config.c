/*
 * libFuzzer target: the broker's properties-file parser — bk_config_load on
 * the input as a file, then the cross-key checks, then one --override
 * built from the input's first line.  Every outcome is either 0 or -1 with
 * a message; a crash, a leak, or an error without a message is a finding.
 * Seeds: the example configs (examples/) and the test configs.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/broker_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0]) {
        /* /dev/shm when there is one: no disk write per execution. */
        snprintf(path, sizeof path, "%s/sluice-fuzz-config-%d.properties",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        abort();
    if (size && write(fd, data, size) != (ssize_t)size)
        abort();
    close(fd);

    bk_config c;
    char err[1024];
    bk_config_init(&c);
    err[0] = 0;
    if (bk_config_load(&c, path, err, sizeof err) == 0) {
        err[0] = 0;
        if (bk_config_finish(&c, err, sizeof err) != 0 && !err[0])
            abort();
    } else if (!err[0]) {
        abort();                       /* an error must say what is wrong */
    }
    /* The same text as a command-line override: key=value up to '\n'. */
    char kv[512];
    size_t n = 0;
    while (n < size && n + 1 < sizeof kv && data[n] != '\n' && data[n] != 0) {
        kv[n] = (char)data[n];
        n++;
    }
    kv[n] = 0;
    char *eq = strchr(kv, '=');
    if (eq) {
        *eq = 0;
        err[0] = 0;
        if (bk_config_set(&c, kv, eq + 1, err, sizeof err) != 0 && !err[0])
            abort();
    }
    bk_config_free(&c);
    return 0;
}
