/*
 * daemon/group/group_commit_cadence.c — see group_commit_cadence.h for the design note and
 * group_commit_cadence.h's invariants K1–K4.  Both calls scan the 256 entries (6 KiB, a few
 * hundred ns), once per commit and once per loop turn that holds commits.
 */
#include "daemon/group/group_commit_cadence.h"

#include <stddef.h>

void gc_cadence_note(cc_table *t, uint64_t conn, int64_t now_us)
{
    cc_entry *e = NULL, *victim = &t->e[0];
    for (int i = 0; i < CC_SLOTS; i++) {
        cc_entry *x = &t->e[i];
        if (x->conn == conn) {
            e = x;
            break;
        }
        if (victim->conn && (!x->conn || x->last_us < victim->last_us))
            victim = x;
    }
    if (!e) {                                   /* group_commit_cadence.h K1 */
        *victim = (cc_entry){ .conn = conn, .last_us = now_us };
        return;
    }
    int64_t gap = now_us - e->last_us;
    e->last_us = now_us;
    if (gap <= 0 || gap > CC_MAX_GAP_US)        /* group_commit_cadence.h K2 */
        e->gap_us = 0;
    else
        e->gap_us = e->gap_us ? e->gap_us + (gap - e->gap_us) / 4 : gap;
}

int64_t gc_cadence_submit_at(const cc_table *t, int64_t now_us, int64_t first_us, int64_t linger_us)
{
    int64_t deadline = first_us + linger_us, until = 0;
    for (int i = 0; i < CC_SLOTS; i++) {        /* group_commit_cadence.h K4 */
        const cc_entry *e = &t->e[i];
        if (e->conn && e->gap_us && e->last_us >= first_us &&
            e->last_us + e->gap_us * 3 / 4 < deadline)
            deadline = e->last_us + e->gap_us * 3 / 4;
    }
    if (now_us >= deadline)
        return 0;
    for (int i = 0; i < CC_SLOTS; i++) {
        const cc_entry *e = &t->e[i];
        if (!e->conn || !e->gap_us || e->last_us >= first_us)
            continue;                           /* no cadence, or in the batch */
        int64_t due = e->last_us + e->gap_us, late = due + e->gap_us / 4;
        if (due > deadline || late <= now_us)
            continue;                           /* after the deadline, or not coming */
        if (late > until)
            until = late;
    }
    if (until > deadline)                       /* group_commit_cadence.h K3 */
        until = deadline;
    return until > now_us ? until : 0;
}
