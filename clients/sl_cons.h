/*
 * sl_cons.h — consumer internals shared by consumer.c, consumer_api.c,
 * group.c and subscription.c.  All fields are guarded by cl->lock except
 * where noted.
 */
#ifndef SLUICE_SL_CONS_H
#define SLUICE_SL_CONS_H

#include <regex.h>

#include "clients/sl_int.h"

enum { CP_NEED_STORED, CP_NEED_RESET, CP_ACTIVE, CP_STOPPED };

typedef struct sl_cpart {
    char *topic;
    int32_t partition;
    bool assigned;
    int state;                /* CP_* */
    uint32_t version;         /* bumped by seek/assign */
    int64_t fetch_pos;        /* next Fetch offset, or SL_OFFSET_BEGINNING/END
                                 while NEED_RESET */
    int64_t app_pos;          /* after the last message returned */
    int64_t committed;        /* last offset committed by us */
    int64_t hwm;
    int64_t backoff_until;
    bool busy;                /* ListOffsets / OffsetFetch in flight */
    bool fetching;            /* part of an in-flight Fetch */
    bool eof_sent;
} sl_cpart;

typedef struct sl_chunk {
    struct sl_chunk *next;
    sl_cpart *cp;
    uint32_t version;
    sl_frame *f;              /* NULL for an error event */
    const uint8_t *p;         /* whole batches inside f */
    size_t len, used;
    int err;
    int64_t offset;
    /* read_committed: the fetch's aborted transactions (producer id, first
     * offset); an entry is closed by its producer's next control batch. */
    struct sl_aborted { int64_t pid, first; bool open; } *aborted;
    int n_aborted;
} sl_chunk;

typedef struct sl_cons {
    sl_cpart **all;
    int n_all;
    sl_chunk *q_head, *q_tail;
    int64_t q_bytes;
    bool closed;
    int mode;                 /* SL_MODE_* */
    /* max.poll.interval.ms.  The per-message fast path of poll only
     * counts (polls); the slow path stamps last_poll (sl_coarse_ms), and
     * the I/O thread stamps it when it sees polls move, so no clock is
     * read per message and a stall is seen at most one I/O-thread wakeup
     * (heartbeat.interval.ms while idle) late.  Waiting inside poll
     * (in_poll_wait) counts as polling. */
    uint64_t polls;
    int64_t last_poll;
    bool in_poll_wait;
    /* owned by the polling thread */
    sl_chunk *cur;
    kp_rec_iter it;
    bool in_batch;
    sl_header *hdrs;
    char **hkeys;
    int hdr_cap;
} sl_cons;

enum { SL_MODE_NONE, SL_MODE_ASSIGN, SL_MODE_SUBSCRIBE };

struct sl_consumer {
    sl_client *cl;
    sl_cons *c;
};

/* subscription.c: a group member's subscription (design note there). */
typedef struct sl_sub {
    char **names;             /* literal topic names */
    int n_names;
    regex_t *rx;              /* "^…" entries, compiled */
    int n_rx;
    char **topics;            /* what it stands for now: sorted, unique */
    int n_topics;
    uint32_t md_epoch;        /* all-topics answer topics was matched with */
} sl_sub;
/* Replaces s (0), or SL_E_INVALID_ARG naming a bad regex in errbuf. */
int  sl_sub_set(sl_client *cl, sl_sub *s, const char *const *topics, int n,
                char *errbuf, size_t size);
/* Matches the regexes against a newer all-topics answer: true when topics
 * was determined for the first time or changed. */
bool sl_sub_update(sl_client *cl, sl_sub *s);
static inline bool sl_sub_ready(const sl_sub *s) { return !s->n_rx || s->md_epoch; }
static inline bool sl_sub_empty(const sl_sub *s) { return !s->n_names && !s->n_rx; }
void sl_sub_clear(sl_client *cl, sl_sub *s);

sl_cpart *sl_cons_find(sl_cons *c, const char *topic, int32_t partition);
void sl_chunk_free(sl_chunk *ch);       /* lock held */
void sl_cons_start_at(sl_client *cl, sl_cpart *cp, int64_t offset);

#endif
