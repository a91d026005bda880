/*
 * msgs.c — support for the generated message codec: the decode arena, the
 * field helpers the generated code calls, and the descriptor lookup.
 *
 * What is generated (protocol/gen_msgs.py, from the JSON files in protocol/messages/,
 * into $(BUILD)/gen/kp_msgs.{h,c}, part of libkp): one C struct per message
 * and nested struct with the spec's field names, kp_init_<Message>,
 * kp_dec_<Message> and kp_enc_<Message> covering every valid version, and
 * kp_msg_descs[], the version table (valid and first flexible version per
 * message).  The schema rules are listed in the generator (gen_msgs.py G1–G5).
 *
 * Memory model of a decoded message:
 *
 *    frame bytes (owned by the caller) <── kp_str slices (strings, bytes,
 *        ▲                                 records: zero copy)
 *        │
 *    struct kp_<Message> (caller's, usually on the stack)
 *        │ arrays: pointer + _count
 *        ▼
 *    kp_arena chunks (bump allocated, zeroed, freed at once)
 *
 *   M1. A decoded message borrows from two owners: its strings, bytes and
 *       records point into the frame it was decoded from, its arrays into
 *       the arena.  It is valid while both live; kp_arena_reset or freeing
 *       the frame ends it.  Nothing in it is freed field by field.
 *   M2. Decoding allocates only from the arena, and only after an array
 *       count has been bounded by the bytes left (gen_msgs.py G5), so the
 *       arena is asked for at most sizeof(element) / min-wire-size(element)
 *       times the frame size; the arena's limit caps even that.  A decode
 *       does one allocation per chunk (a few per request), not one per
 *       array.
 *   M3. Errors latch on the cursor (decode) or buffer (encode), as in rd.c
 *       and buf.c; generated code checks once at the end.  After a failed
 *       decode the struct holds partial data that is still safe to read
 *       (every array count matches its allocation) but means nothing.
 *   M4. Encoders read the struct only; they never allocate except through
 *       kp_buf's growth.  A tagged field's size is known only once it is
 *       written, so kp_msg_wr_tag_end moves the value up by the size of its
 *       length varint (tagged values are small and rare).
 *   M5. A records field is the one exception to "the bytes are written":
 *       with a records hook on the kp_buf, the encoder writes the length
 *       prefix (s.len) and the hook must account for exactly s.len bytes
 *       that follow it on the wire, appended or spliced in by the caller;
 *       once the buffer has failed the hook is not called.
 *       So message bytes can stay where they are (zero copy) while every
 *       other field still comes from the generated encoder.
 */
#include <stdlib.h>
#include <string.h>

#include "protocol/kp.h"

/* ---- arena ---------------------------------------------------------------- */

struct kp_arena_chunk {
    kp_arena_chunk *next;
    size_t cap;               /* bytes in data[] */
    size_t used;
    _Alignas(16) unsigned char data[];
};

#define ARENA_FIRST 4096
#define ALIGN16(n) (((n) + 15) & ~(size_t)15)

void kp_arena_init(kp_arena *a, size_t limit)
{
    a->head = NULL;
    a->total = 0;
    a->limit = limit ? limit : KP_ARENA_LIMIT_DEFAULT;
}

void *kp_arena_alloc(kp_arena *a, size_t n)
{
    if (n == 0)
        n = 1;
    if (n > a->limit || a->total > a->limit - n)
        return NULL;
    size_t need = ALIGN16(n);
    kp_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < need) {
        /* Chunks double, so a decode of many arrays costs a few mallocs. */
        size_t cap = c ? c->cap * 2 : ARENA_FIRST;
        while (cap < need)
            cap *= 2;
        kp_arena_chunk *nc = malloc(sizeof *nc + cap);
        if (!nc)
            return NULL;
        nc->next = c;
        nc->cap = cap;
        nc->used = 0;
        a->head = c = nc;
    }
    void *p = c->data + c->used;
    c->used += need;
    a->total += n;
    memset(p, 0, n);
    return p;
}

void kp_arena_reset(kp_arena *a)
{
    kp_arena_chunk *c = a->head;
    if (!c)
        return;
    for (kp_arena_chunk *o = c->next; o; ) {
        kp_arena_chunk *next = o->next;
        free(o);
        o = next;
    }
    c->next = NULL;
    c->used = 0;
    a->total = 0;
}

void kp_arena_free(kp_arena *a)
{
    kp_arena_reset(a);
    free(a->head);
    a->head = NULL;
}

int kp_arena_str(kp_arena *a, const char *s, kp_str *out)
{
    size_t n = strlen(s);
    char *p = n <= INT16_MAX ? kp_arena_alloc(a, n) : NULL;
    if (!p)
        return KP_E_NOMEM;
    memcpy(p, s, n);
    *out = (kp_str){ p, (int32_t)n };
    return 0;
}

/* ---- decode helpers --------------------------------------------------------- */

/* Null only where the version allows it (gen_msgs.py G2). */
kp_str kp_msg_rd_str(kp_rd *r, bool compact, bool nullable)
{
    kp_str s = kp_rd_str_v(r, compact);
    if (s.len < 0 && !nullable)
        kp_rd_fail(r, KP_E_MALFORMED);
    return s;
}

kp_str kp_msg_rd_bytes(kp_rd *r, bool compact, bool nullable)
{
    kp_str s = kp_rd_bytes_v(r, compact);
    if (s.len < 0 && !nullable)
        kp_rd_fail(r, KP_E_MALFORMED);
    return s;
}

int32_t kp_msg_rd_count(kp_rd *r, bool compact, bool nullable, size_t min_elem_size)
{
    int32_t n = kp_rd_array_v(r, compact, min_elem_size);
    if (n < 0 && !nullable) {
        kp_rd_fail(r, KP_E_MALFORMED);
        return 0;
    }
    return n;
}

void *kp_msg_alloc(kp_rd *r, kp_arena *a, size_t n, size_t size)
{
    if (!kp_rd_ok(r))
        return NULL;
    if (!a || n > SIZE_MAX / size) {
        kp_rd_fail(r, KP_E_NOMEM);
        return NULL;
    }
    void *p = kp_arena_alloc(a, n * size);
    if (!p)
        kp_rd_fail(r, KP_E_NOMEM);
    return p;
}

/* Each tagged field takes at least 2 bytes (tag, size), which bounds the
 * count before the loop runs. */
uint32_t kp_msg_rd_tag_count(kp_rd *r)
{
    uint32_t n = kp_rd_uvarint(r);
    if (kp_rd_ok(r) && n > kp_rd_left(r) / 2) {
        kp_rd_fail(r, KP_E_MALFORMED);
        return 0;
    }
    return n;
}

/* Reads a tag and its size, and points *value at exactly its bytes, so a
 * known field is decoded from a cursor that cannot read past it and an
 * unknown one is skipped by not looking at *value. */
uint32_t kp_msg_rd_tag(kp_rd *r, kp_rd *value)
{
    uint32_t tag = kp_rd_uvarint(r);
    uint32_t size = kp_rd_uvarint(r);
    const uint8_t *p = kp_rd_raw(r, size);
    kp_rd_init(value, p, p ? size : 0);
    return tag;
}

double kp_msg_rd_f64(kp_rd *r)
{
    uint64_t u = (uint64_t)kp_rd_i64(r);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* ---- encode helpers --------------------------------------------------------- */

static void wr_slice(kp_buf *b, bool compact, bool nullable, kp_str s, bool is_string)
{
    if (s.len < 0 && !nullable) {
        kp_buf_fail(b, KP_E_MALFORMED);
        return;
    }
    /* (NULL, 0) is an empty slice here, not null: kp_wr_* reads NULL as null. */
    const char *p = s.len < 0 ? NULL : (s.p ? s.p : "");
    int32_t len = s.len < 0 ? -1 : s.len;
    if (is_string)
        kp_wr_string_v(b, compact, p, len);
    else
        kp_wr_bytes_v(b, compact, p, len);
}

void kp_msg_wr_str(kp_buf *b, bool compact, bool nullable, kp_str s)
{
    wr_slice(b, compact, nullable, s, true);
}

void kp_msg_wr_bytes(kp_buf *b, bool compact, bool nullable, kp_str s)
{
    wr_slice(b, compact, nullable, s, false);
}

/* Records: copied like bytes, unless the buffer has a records hook
 * (kp.h): then the length prefix is written here and the hook supplies the
 * bytes (M5). */
void kp_msg_wr_records(kp_buf *b, bool compact, bool nullable, kp_str s)
{
    if (!b->records || s.len < 0) {
        wr_slice(b, compact, nullable, s, false);
        return;
    }
    if (compact)
        kp_wr_uvarint(b, (uint32_t)s.len + 1);
    else
        kp_wr_i32(b, s.len);
    if (!b->err)                      /* a failed buffer is discarded whole */
        b->records(b, s, b->records_arg);
}

void kp_msg_wr_count(kp_buf *b, bool compact, bool nullable, int32_t n, bool have)
{
    if ((n < 0 && !nullable) || (n > 0 && !have)) {
        kp_buf_fail(b, KP_E_MALFORMED);
        return;
    }
    kp_wr_array_v(b, compact, n);
}

size_t kp_msg_wr_tag_begin(kp_buf *b, uint32_t tag)
{
    kp_wr_uvarint(b, tag);
    return b->len;
}

void kp_msg_wr_tag_end(kp_buf *b, size_t pos)
{
    if (b->err)
        return;
    size_t size = b->len - pos;
    if (size > UINT32_MAX) {
        kp_buf_fail(b, KP_E_MALFORMED);
        return;
    }
    size_t k = 1;                     /* bytes of the size varint */
    for (size_t v = size; v >= 0x80; v >>= 7)
        k++;
    if (!kp_buf_reserve(b, k))
        return;
    memmove(b->data + pos + k, b->data + pos, size);
    /* The varint goes into the k bytes just opened (capacity is there). */
    b->len = pos;
    kp_wr_uvarint(b, (uint32_t)size);
    b->len += size;
}

void kp_msg_wr_f64(kp_buf *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    kp_wr_i64(b, (int64_t)u);
}

bool kp_msg_uuid_zero(const uint8_t u[16])
{
    static const uint8_t zero[16];
    return memcmp(u, zero, 16) == 0;
}

/* ---- descriptors -------------------------------------------------------------- */

const kp_msg_desc *kp_msg_find(int16_t api_key, enum kp_msg_kind kind)
{
    for (size_t i = 0; i < kp_msg_descs_count; i++)
        if (kp_msg_descs[i].api_key == api_key && kp_msg_descs[i].kind == kind)
            return &kp_msg_descs[i];
    return NULL;
}
