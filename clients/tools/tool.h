/*
 * tool.h — option handling shared by the command-line tools.
 *
 * Each tool is one .c file linked against libsluice.a alone (the Makefile
 * turns every .c file there into a program), so what they share lives
 * here as static inline functions.  Define TOOL_NAME ("sluice-produce")
 * before including: it prefixes every message, as the tools always have.
 * A bad option exits with status 2, the tools' usage-error status.
 */
#ifndef SLUICE_TOOL_H
#define SLUICE_TOOL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/sluice.h"

#ifndef TOOL_NAME
#error "define TOOL_NAME before including clients/tools/tool.h"
#endif

/* sl_conf_set, or exit(2) with the reason. */
static inline void tool_set(sl_conf *c, const char *k, const char *v)
{
    char err[512];
    if (sl_conf_set(c, k, v, err, sizeof err) != 0) {
        fprintf(stderr, TOOL_NAME ": %s\n", err);
        exit(2);
    }
}

/* -X KEY=VALUE: 0, or 2 (the exit status) when arg has no '='. */
static inline int tool_set_property(sl_conf *c, char *arg)
{
    char *eq = strchr(arg, '=');
    if (!eq) {
        fprintf(stderr, TOOL_NAME ": -X wants KEY=VALUE\n");
        return 2;
    }
    *eq = 0;
    tool_set(c, arg, eq + 1);
    return 0;
}

/* acks other than all (-1) turn idempotence off: an idempotent producer
 * needs acks=all, and the user asked for less. */
static inline void tool_set_acks(sl_conf *c, const char *acks)
{
    tool_set(c, "acks", acks);
    if (strcmp(acks, "all") != 0 && strcmp(acks, "-1") != 0)
        tool_set(c, "enable.idempotence", "false");
}

#endif
