/*
 * protocol/ — the Kafka wire codec shared by the daemon and the clients.
 *
 * What it offers:
 *   - kp_rd: a bounds-checked read cursor.  The first short or hostile read
 *     latches r->err and every later read returns 0 / an empty slice, so a
 *     parser reads all its fields and checks kp_rd_ok() once at the end.
 *   - kp_buf: a growable write buffer (big-endian integers, varints, normal
 *     and compact strings/bytes/arrays, tagged fields).  It is reused: reset
 *     keeps the memory, so a connection's response buffer is allocated once.
 *   - request/response headers, the table of first flexible versions.
 *   - the message codec generated from the JSON in protocol/messages/ by
 *     protocol/gen_msgs.py ($(BUILD)/gen/kp_msgs.h: kp_enc_/kp_dec_<Message>
 *     for every version), with its decode arena (kp_arena, msgs.c).
 *   - RecordBatch v2: header parse, validation (length, magic, CRC-32C,
 *     counts, codec), in-place rewrites (baseOffset, leader epoch,
 *     LogAppendTime), record iteration with decompression, and a builder.
 *   - CRC-32C (hardware where present), murmur2 (Java partitioner).
 *
 * It knows nothing of sockets, libevent, SQLite or ZooKeeper.
 * Field names follow Kafka's JSON message schemas (protocol/README.md).
 */
#ifndef SLUICE_KP_H
#define SLUICE_KP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/kp_errors.h"

/* ---- internal (never on the wire) errors: all below -1000 ---------------- */
enum {
    KP_E_TRUNCATED = -1001,   /* input ended inside a field */
    KP_E_MALFORMED = -1002,   /* a length, count or varint is impossible */
    KP_E_NOMEM     = -1003,
    KP_E_CODEC     = -1004,   /* unknown codec or decompression failed */
    KP_E_CRC       = -1005,
    KP_E_MAGIC     = -1006,
    KP_E_VERSION   = -1007,   /* version outside the message's valid range,
                                 or a field it cannot carry (gen_msgs.py G1) */
};

/* ---- API keys --------------------------------------------------------- */
enum kp_api {
    KP_API_PRODUCE = 0, KP_API_FETCH = 1, KP_API_LIST_OFFSETS = 2,
    KP_API_METADATA = 3, KP_API_OFFSET_COMMIT = 8, KP_API_OFFSET_FETCH = 9,
    KP_API_FIND_COORDINATOR = 10, KP_API_JOIN_GROUP = 11,
    KP_API_HEARTBEAT = 12, KP_API_LEAVE_GROUP = 13, KP_API_SYNC_GROUP = 14,
    KP_API_DESCRIBE_GROUPS = 15, KP_API_LIST_GROUPS = 16,
    KP_API_SASL_HANDSHAKE = 17, KP_API_API_VERSIONS = 18,
    KP_API_CREATE_TOPICS = 19, KP_API_DELETE_TOPICS = 20,
    KP_API_DELETE_RECORDS = 21, KP_API_INIT_PRODUCER_ID = 22,
    KP_API_OFFSET_FOR_LEADER_EPOCH = 23, KP_API_DESCRIBE_CONFIGS = 32,
    KP_API_ALTER_CONFIGS = 33, KP_API_SASL_AUTHENTICATE = 36,
    KP_API_CREATE_PARTITIONS = 37, KP_API_DELETE_GROUPS = 42,
    KP_API_DESCRIBE_ACLS = 29, KP_API_CREATE_ACLS = 30, KP_API_DELETE_ACLS = 31,
    KP_API_ELECT_LEADERS = 43,
    KP_API_INCREMENTAL_ALTER_CONFIGS = 44, KP_API_DESCRIBE_CLUSTER = 60,
    KP_API_ALTER_PARTITION_REASSIGNMENTS = 45, KP_API_LIST_PARTITION_REASSIGNMENTS = 46,
    KP_API_OFFSET_DELETE = 47,
    KP_API_DESCRIBE_USER_SCRAM_CREDENTIALS = 50, KP_API_ALTER_USER_SCRAM_CREDENTIALS = 51,
    /* transactions (KIP-98, KIP-664) */
    KP_API_ADD_PARTITIONS_TO_TXN = 24, KP_API_ADD_OFFSETS_TO_TXN = 25,
    KP_API_END_TXN = 26, KP_API_WRITE_TXN_MARKERS = 27, KP_API_TXN_OFFSET_COMMIT = 28,
    KP_API_DESCRIBE_PRODUCERS = 61, KP_API_DESCRIBE_TRANSACTIONS = 65,
    KP_API_LIST_TRANSACTIONS = 66,
};

/* First flexible version of an API (Kafka's, whether or not we advertise
 * it), needed to pick the request header version.  Unknown key: INT16_MAX. */
int kp_api_first_flexible(int16_t api_key);
const char *kp_api_name(int16_t api_key);     /* "Produce", or "Unknown" */

/* ---- slices ------------------------------------------------------------- */
/* A string or byte slice pointing into the buffer it was read from.
 * len < 0 means null. */
typedef struct kp_str {
    const char *p;
    int32_t len;
} kp_str;

#define KP_STR_NULL ((kp_str){ NULL, -1 })
bool kp_str_eq(kp_str s, const char *cstr);
/* A C string as a slice (for the generated encoders); NULL → null. */
kp_str kp_str_cstr(const char *cstr);
/* Copies into dst (always NUL-terminated, truncated to cap-1); returns len. */
size_t kp_str_copy(kp_str s, char *dst, size_t cap);
/* memcmp order, the shorter first on a tie; null sorts as "". */
int kp_str_cmp(kp_str a, kp_str b);

/* ---- read cursor ---------------------------------------------------------- */
typedef struct kp_rd {
    const uint8_t *p;
    const uint8_t *end;
    int err;                  /* 0, or the first KP_E_* met */
} kp_rd;

void kp_rd_init(kp_rd *r, const void *buf, size_t len);
static inline bool kp_rd_ok(const kp_rd *r) { return r->err == 0; }
static inline size_t kp_rd_left(const kp_rd *r) { return (size_t)(r->end - r->p); }

int8_t   kp_rd_i8(kp_rd *r);
int16_t  kp_rd_i16(kp_rd *r);
int32_t  kp_rd_i32(kp_rd *r);
int64_t  kp_rd_i64(kp_rd *r);
uint32_t kp_rd_u32(kp_rd *r);
bool     kp_rd_bool(kp_rd *r);
uint32_t kp_rd_uvarint(kp_rd *r);    /* at most 5 bytes */
int32_t  kp_rd_varint(kp_rd *r);     /* zig-zag */
int64_t  kp_rd_varlong(kp_rd *r);    /* zig-zag, at most 10 bytes */
void     kp_rd_uuid(kp_rd *r, uint8_t out[16]);
void     kp_rd_skip(kp_rd *r, size_t n);
/* Raw bytes: returns a pointer into the buffer, or NULL (and latches). */
const uint8_t *kp_rd_raw(kp_rd *r, size_t n);

kp_str kp_rd_string(kp_rd *r);          /* INT16 length; -1 → null      */
kp_str kp_rd_compact_string(kp_rd *r);  /* UVARINT length+1; 0 → null   */
kp_str kp_rd_bytes(kp_rd *r);           /* INT32 length; -1 → null      */
kp_str kp_rd_compact_bytes(kp_rd *r);   /* UVARINT length+1; 0 → null   */
/* Array element counts; -1 means a null array.  A count that cannot fit in
 * the bytes left (each element takes at least min_elem_size bytes) latches
 * KP_E_MALFORMED, so a hostile count never drives a huge allocation. */
int32_t kp_rd_array(kp_rd *r, size_t min_elem_size);
int32_t kp_rd_compact_array(kp_rd *r, size_t min_elem_size);
/* Non-nullable forms, as in Kafka's generated readers: a null (-1) array
 * count or string latches KP_E_MALFORMED.  The array count then reads as 0;
 * the string comes back null (len -1). */
int32_t kp_rd_array_nn(kp_rd *r, size_t min_elem_size);
kp_str  kp_rd_string_nn(kp_rd *r);
/* Latches err on the cursor (first error wins), for parsers built on top. */
static inline void kp_rd_fail(kp_rd *r, int err) { if (r->err == 0) r->err = err; }
/* Skips a TAGGED_FIELDS section (every tag is unknown to us). */
void kp_rd_tags(kp_rd *r);

/* Flexible-aware helpers: pick compact or classic encoding. */
kp_str  kp_rd_str_v(kp_rd *r, bool flexible);
kp_str  kp_rd_bytes_v(kp_rd *r, bool flexible);
int32_t kp_rd_array_v(kp_rd *r, bool flexible, size_t min_elem_size);
static inline void kp_rd_tags_v(kp_rd *r, bool flexible) { if (flexible) kp_rd_tags(r); }

/* ---- write buffer --------------------------------------------------------- */
typedef struct kp_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    int err;                  /* KP_E_NOMEM latched on allocation failure */
    /* A "records" field written by a generated encoder (kp_enc_*): when
     * set, the encoder writes only its length prefix and calls this for
     * the s.len bytes, so the caller may reference or splice them instead
     * of copying (libsluice's large batches, the broker's file ranges);
     * s.p is the caller's, passed through.  NULL: the bytes are copied. */
    void (*records)(struct kp_buf *b, kp_str s, void *arg);
    void *records_arg;
} kp_buf;

void kp_buf_init(kp_buf *b);
void kp_buf_free(kp_buf *b);
static inline void kp_buf_reset(kp_buf *b) { b->len = 0; b->err = 0; }
/* Makes room for n more bytes; returns a pointer to them (len unchanged) or NULL. */
uint8_t *kp_buf_reserve(kp_buf *b, size_t n);
/* Formatted text appended (the /metrics text, admin answers). */
void kp_buf_printf(kp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void kp_wr_raw(kp_buf *b, const void *p, size_t n);
void kp_wr_i8(kp_buf *b, int8_t v);
void kp_wr_i16(kp_buf *b, int16_t v);
void kp_wr_i32(kp_buf *b, int32_t v);
void kp_wr_i64(kp_buf *b, int64_t v);
void kp_wr_u32(kp_buf *b, uint32_t v);
void kp_wr_bool(kp_buf *b, bool v);
void kp_wr_uvarint(kp_buf *b, uint32_t v);
void kp_wr_varint(kp_buf *b, int32_t v);
void kp_wr_varlong(kp_buf *b, int64_t v);
void kp_wr_uuid(kp_buf *b, const uint8_t v[16]);
/* s == NULL writes null (len ignored); len < 0 means strlen(s). */
void kp_wr_string(kp_buf *b, const char *s, int32_t len);
void kp_wr_compact_string(kp_buf *b, const char *s, int32_t len);
void kp_wr_bytes(kp_buf *b, const void *p, int32_t len);          /* p NULL → null */
void kp_wr_compact_bytes(kp_buf *b, const void *p, int32_t len);
void kp_wr_str(kp_buf *b, kp_str s);                    /* classic, null kept */
void kp_wr_array(kp_buf *b, int32_t n);                 /* -1 → null */
void kp_wr_compact_array(kp_buf *b, int32_t n);
void kp_wr_tags_empty(kp_buf *b);                       /* 0x00 */
/* Flexible-aware helpers. */
void kp_wr_string_v(kp_buf *b, bool flexible, const char *s, int32_t len);
void kp_wr_bytes_v(kp_buf *b, bool flexible, const void *p, int32_t len);
void kp_wr_array_v(kp_buf *b, bool flexible, int32_t n);
static inline void kp_wr_tags_v(kp_buf *b, bool flexible) { if (flexible) kp_wr_tags_empty(b); }
/* Latches err on the buffer (first error wins), for encoders built on top. */
static inline void kp_buf_fail(kp_buf *b, int err) { if (b->err == 0) b->err = err; }
/* Placeholders patched once a length or count is known. */
size_t kp_wr_i32_placeholder(kp_buf *b);
void   kp_wr_i32_at(kp_buf *b, size_t pos, int32_t v);

/* ---- headers -------------------------------------------------------------- */
typedef struct kp_req_hdr {
    int16_t RequestApiKey;
    int16_t RequestApiVersion;
    int32_t CorrelationId;
    kp_str  ClientId;         /* may be null */
    bool    flexible;         /* header v2 (body uses compact forms) */
} kp_req_hdr;

/* Parses the request header at the cursor (v1 or v2, chosen from the API's
 * first flexible version; ControlledShutdown v0's header v0 is not served).
 * Leaves the cursor at the body.  Returns 0 or KP_E_*.  The key/version/
 * correlation id are filled in even when the rest fails, so an error
 * response can still be addressed. */
int kp_req_hdr_read(kp_rd *r, kp_req_hdr *h);
/* Writes a request header (for clients). */
void kp_req_hdr_write(kp_buf *b, int16_t api_key, int16_t api_version,
                      int32_t correlation_id, const char *client_id);
/* Response header: correlation id, then an empty tag section when
 * `flexible` (never for ApiVersions, whose response header is always v0). */
void kp_resp_hdr_write(kp_buf *b, int32_t correlation_id, bool flexible);
/* Whether the answer to request req has response header v1 (a tag
 * section): a flexible request's, except ApiVersions (always v0). */
bool kp_resp_hdr_flexible(const kp_req_hdr *req);
#define KP_RESP_HDR_MAX        5      /* CorrelationId + empty TAGGED_FIELDS */
#define KP_RESP_FRAME_HEAD_MAX 9      /* Size + the largest header */
/* A response frame's head into out: Size (INT32: the header's bytes plus
 * body_len, which the caller sends after it), then the response header
 * for req.  Returns the bytes written (8 or 9).  No allocation: the
 * broker's per-answer path. */
size_t kp_resp_frame_head(uint8_t out[KP_RESP_FRAME_HEAD_MAX], const kp_req_hdr *req,
                          size_t body_len);

/* ---- generated message codec (protocol/msgs.c, $(BUILD)/gen/kp_msgs.h) ---- */
/* A bump allocator for decoded messages: every array of one decode comes
 * from it and is freed at once.  limit caps the bytes it hands out (0 →
 * KP_ARENA_LIMIT_DEFAULT), so hostile input cannot drive it further. */
typedef struct kp_arena_chunk kp_arena_chunk;
typedef struct kp_arena {
    kp_arena_chunk *head;     /* newest chunk, allocations come from it */
    size_t total;             /* bytes handed out since the last reset */
    size_t limit;
} kp_arena;
#define KP_ARENA_LIMIT_DEFAULT ((size_t)64 << 20)

void  kp_arena_init(kp_arena *a, size_t limit);
/* n zeroed bytes, 16-byte aligned; NULL over the limit or out of memory. */
void *kp_arena_alloc(kp_arena *a, size_t n);
/* Frees every allocation but keeps the newest chunk for reuse. */
void  kp_arena_reset(kp_arena *a);
void  kp_arena_free(kp_arena *a);
/* *out = a copy of the C string s in the arena (a response field built
 * from formatted text lives as long as the decoded request).  0, or
 * KP_E_NOMEM (also when s is too long for a Kafka string). */
int   kp_arena_str(kp_arena *a, const char *s, kp_str *out);

enum kp_msg_kind { KP_MSG_REQUEST, KP_MSG_RESPONSE, KP_MSG_HEADER };

/* One generated message, type-erased (the version table for ApiVersions,
 * and for code that walks every message, such as the fuzz target). */
typedef struct kp_msg_desc {
    const char *name;                 /* "MetadataRequest" */
    int16_t api_key;                  /* -1 for the headers */
    enum kp_msg_kind kind;
    int16_t min_version, max_version; /* validVersions */
    int16_t first_flexible;           /* INT16_MAX: none */
    size_t size;                      /* sizeof the struct */
    void (*init)(void *m);
    int  (*dec)(kp_rd *in, int16_t version, void *m, kp_arena *a);
    int  (*enc)(kp_buf *out, int16_t version, const void *m);
} kp_msg_desc;

extern const kp_msg_desc kp_msg_descs[];
extern const size_t kp_msg_descs_count;
/* The request or response descriptor of an API; NULL if not generated. */
const kp_msg_desc *kp_msg_find(int16_t api_key, enum kp_msg_kind kind);

/* Helpers the generated code calls (see protocol/msgs.c). */
kp_str   kp_msg_rd_str(kp_rd *r, bool compact, bool nullable);
kp_str   kp_msg_rd_bytes(kp_rd *r, bool compact, bool nullable);
int32_t  kp_msg_rd_count(kp_rd *r, bool compact, bool nullable, size_t min_elem_size);
void    *kp_msg_alloc(kp_rd *r, kp_arena *a, size_t n, size_t size);
uint32_t kp_msg_rd_tag_count(kp_rd *r);
uint32_t kp_msg_rd_tag(kp_rd *r, kp_rd *value);
double   kp_msg_rd_f64(kp_rd *r);
void     kp_msg_wr_str(kp_buf *b, bool compact, bool nullable, kp_str s);
void     kp_msg_wr_bytes(kp_buf *b, bool compact, bool nullable, kp_str s);
void     kp_msg_wr_records(kp_buf *b, bool compact, bool nullable, kp_str s);
void     kp_msg_wr_count(kp_buf *b, bool compact, bool nullable, int32_t n, bool have);
size_t   kp_msg_wr_tag_begin(kp_buf *b, uint32_t tag);
void     kp_msg_wr_tag_end(kp_buf *b, size_t pos);
void     kp_msg_wr_f64(kp_buf *b, double v);
bool     kp_msg_uuid_zero(const uint8_t u[16]);

/* ---- CRC-32C, murmur2 ---------------------------------------------------- */
/* CRC-32C (Castagnoli).  crc is the running value: start with 0. */
uint32_t kp_crc32c(uint32_t crc, const void *buf, size_t len);
/* Same, forced to the table implementation (for tests). */
uint32_t kp_crc32c_sw(uint32_t crc, const void *buf, size_t len);
/* Java's Utils.murmur2: seed 0x9747b28c.  The partition of a key is
 * (kp_murmur2(k, n) & 0x7fffffff) % partitions. */
int32_t kp_murmur2(const void *key, size_t len);

/* ---- RecordBatch v2 ------------------------------------------------------- */
/*
 *   0  BaseOffset            INT64   ← rewritten by the broker (outside CRC)
 *   8  BatchLength           INT32   bytes after this field
 *  12  PartitionLeaderEpoch  INT32   ← rewritten by the broker (outside CRC)
 *  16  Magic                 INT8    must be 2
 *  17  CRC                   UINT32  CRC-32C of bytes 21..end
 *  21  Attributes            INT16   codec bits 0-2, timestamp type bit 3,
 *                                    transactional bit 4, control bit 5
 *  23  LastOffsetDelta       INT32
 *  27  BaseTimestamp         INT64
 *  35  MaxTimestamp          INT64
 *  43  ProducerId            INT64
 *  51  ProducerEpoch         INT16
 *  53  BaseSequence          INT32
 *  57  RecordsCount          INT32
 *  61  records…
 */
/* The fields' offsets in the header, named as in the spec, for code that
 * reads or patches one field in place (the builders, segments/). */
enum {
    KP_BATCH_OFF_BaseOffset = 0, KP_BATCH_OFF_BatchLength = 8,
    KP_BATCH_OFF_PartitionLeaderEpoch = 12, KP_BATCH_OFF_Magic = 16,
    KP_BATCH_OFF_Crc = 17, KP_BATCH_OFF_Attributes = 21,
    KP_BATCH_OFF_LastOffsetDelta = 23, KP_BATCH_OFF_BaseTimestamp = 27,
    KP_BATCH_OFF_MaxTimestamp = 35, KP_BATCH_OFF_ProducerId = 43,
    KP_BATCH_OFF_ProducerEpoch = 51, KP_BATCH_OFF_BaseSequence = 53,
    KP_BATCH_OFF_RecordsCount = 57,
};
#define KP_BATCH_MAGIC         2       /* RecordBatch v2, the only one stored */
#define KP_BATCH_HEADER_SIZE   61
#define KP_BATCH_LOG_OVERHEAD  12      /* BaseOffset + BatchLength */
#define KP_BATCH_CRC_START     21

#define KP_ATTR_CODEC_MASK      0x07
#define KP_ATTR_LOG_APPEND_TIME 0x08
#define KP_ATTR_TRANSACTIONAL   0x10
#define KP_ATTR_CONTROL         0x20
/* KIP-534: set by compaction on a batch it kept tombstones in; then
 * BaseTimestamp holds the delete horizon (ms) and record timestamp deltas
 * are taken from it, so record timestamps read the same. */
#define KP_ATTR_DELETE_HORIZON  0x40

enum kp_codec { KP_CODEC_NONE = 0, KP_CODEC_GZIP = 1, KP_CODEC_SNAPPY = 2,
                KP_CODEC_LZ4 = 3, KP_CODEC_ZSTD = 4 };

typedef struct kp_batch {
    int64_t  BaseOffset;
    int32_t  BatchLength;
    int32_t  PartitionLeaderEpoch;
    int8_t   Magic;
    uint32_t Crc;
    int16_t  Attributes;
    int32_t  LastOffsetDelta;
    int64_t  BaseTimestamp;
    int64_t  MaxTimestamp;
    int64_t  ProducerId;
    int16_t  ProducerEpoch;
    int32_t  BaseSequence;
    int32_t  RecordsCount;
} kp_batch;

/* Total size of the batch at p (12 + BatchLength), reading only the first
 * 12 bytes; KP_E_TRUNCATED if len < 12, KP_E_MALFORMED if BatchLength is
 * below the v2 header size.  Does not require the whole batch. */
int64_t kp_batch_size(const uint8_t *p, size_t len);
/* Decodes the 61-byte header (no CRC check).  0 or KP_E_*. */
int kp_batch_header(const uint8_t *p, size_t len, kp_batch *b);
/* Full validation of one batch as a producer sends it: the whole batch is
 * within len, Magic == 2 (else KP_E_MAGIC), CRC-32C correct (KP_E_CRC),
 * RecordsCount >= 1 and LastOffsetDelta == RecordsCount - 1, codec <= 4
 * (KP_E_CODEC).  Fills *b.  Returns the batch size or KP_E_*.  Cost: one
 * CRC pass over the batch, no allocation. */
int64_t kp_batch_validate(const uint8_t *p, size_t len, kp_batch *b);
/* Recovery check: like validate but without the producer-only count rule
 * (compacted batches have gaps).  Returns the size or KP_E_*. */
int64_t kp_batch_check_stored(const uint8_t *p, size_t len, kp_batch *b);

void kp_batch_set_base_offset(uint8_t *p, int64_t base_offset);
void kp_batch_set_leader_epoch(uint8_t *p, int32_t epoch);
/* Marks the batch LogAppendTime with MaxTimestamp = now_ms and recomputes
 * the CRC. */
void kp_batch_set_log_append_time(uint8_t *p, int64_t now_ms);
/* Sets the timestamp type (LogAppendTime or CreateTime) and MaxTimestamp,
 * and recomputes the CRC. */
void kp_batch_set_max_timestamp(uint8_t *p, bool log_append_time, int64_t ts);

/* ---- compression --------------------------------------------------------- */
/* Appends the decompressed form of in to out.  Snappy accepts both the raw
 * block (librdkafka) and the xerial framing (Java, kafka-python).  LZ4 is
 * the frame format.  0 or KP_E_CODEC / KP_E_NOMEM.  max_out bounds the
 * output (hostile ratios): exceeding it is KP_E_CODEC. */
int kp_decompress(int codec, const void *in, size_t in_len, kp_buf *out,
                  size_t max_out);
/* Decoder contexts kept between calls (codec.c promise 4): zero it with
 * KP_CODEC_CTX_INIT, decode any number of times, free once. */
typedef struct kp_codec_ctx {
    void *zs;                 /* z_stream, inflateReset per use */
    void *lz4;                /* LZ4F_dctx */
    void *zstd;               /* ZSTD_DCtx */
    kp_buf snappy;            /* one decoded snappy block (the codec has
                                 no streaming form; a block expands at
                                 most ~22x its compressed size) */
} kp_codec_ctx;
#define KP_CODEC_CTX_INIT { .zs = NULL }
/* kp_decompress with the caller's contexts: no allocation once they exist
 * and out has room. */
int kp_decompress_ctx(kp_codec_ctx *c, int codec, const void *in, size_t in_len,
                      kp_buf *out, size_t max_out);
void kp_codec_ctx_free(kp_codec_ctx *c);

/* Streaming decompression (codec.c promise 6): the output is pulled piece
 * by piece into the caller's buffer, so memory stays bounded whatever the
 * compression ratio.  kp_decompress_ctx is this stream read to the end,
 * so both accept exactly the same inputs. */
typedef struct kp_dstream {
    kp_codec_ctx *c;
    int codec;                /* gzip, snappy, lz4 or zstd */
    const uint8_t *in;
    size_t in_len, pos;       /* pos: input consumed */
    size_t produced, max_out; /* more than max_out output is KP_E_CODEC */
    size_t snappy_off;        /* bytes of c->snappy already handed out */
    bool started, done;       /* done: every frame ended, output flushed */
    int err;                  /* latched */
} kp_dstream;
/* Resets c's decoder for codec (creating it on first use).  0 or KP_E_*. */
int kp_dstream_start(kp_dstream *s, kp_codec_ctx *c, int codec,
                     const void *in, size_t in_len, size_t max_out);
/* Up to cap (>= 1) bytes into dst, *got of them.  0 with *got > 0, or with
 * s->done set; or KP_E_CODEC / KP_E_NOMEM (latched).  Never 0 with
 * *got == 0 and the stream unfinished. */
int kp_dstream_read(kp_dstream *s, uint8_t *dst, size_t cap, size_t *got);
/* Appends the compressed form (snappy: xerial framing, lz4: frame). */
int kp_compress(int codec, const void *in, size_t in_len, kp_buf *out);

/* ---- records -------------------------------------------------------------- */
/* Bound on a decompressed records area (hostile compression ratios), and
 * the fewest bytes a record takes (length, attributes, three varints and
 * two null lengths... at least 7): shared by the iterator and validate.c. */
#define KP_REC_PLAIN_MAX ((size_t)256 << 20)
#define KP_REC_MIN_SIZE 7
typedef struct kp_record {
    int8_t  Attributes;
    int64_t Timestamp;        /* absolute: BaseTimestamp + delta (or
                                 MaxTimestamp under LogAppendTime) */
    int64_t Offset;           /* absolute: BaseOffset + OffsetDelta */
    kp_str  Key;              /* len -1: null */
    kp_str  Value;            /* len -1: null (tombstone) */
    int32_t HeadersCount;
    kp_rd   headers;          /* cursor over the headers, see kp_header_next */
} kp_record;

typedef struct kp_header {
    kp_str Key;
    kp_str Value;             /* len -1: null */
} kp_header;

/* Iterates the records of one batch, decompressing into its own buffer
 * when the codec bits are set.  Slices in a kp_record stay valid until the
 * next kp_rec_iter_init or kp_rec_iter_free on the same iterator. */
typedef struct kp_rec_iter {
    kp_batch batch;
    kp_rd rd;
    int32_t left;             /* records not yet returned */
    kp_buf plain;             /* decompressed records (reused) */
    int err;
} kp_rec_iter;

void kp_rec_iter_init0(kp_rec_iter *it);      /* zero state, no batch */
/* Starts iterating the batch at p (whole batch, validated or not: every
 * read is bounds-checked).  0 or KP_E_*. */
int  kp_rec_iter_start(kp_rec_iter *it, const uint8_t *p, size_t len);
/* 1 = a record in *rec, 0 = end, < 0 = KP_E_* (malformed record). */
int  kp_rec_iter_next(kp_rec_iter *it, kp_record *rec);
void kp_rec_iter_free(kp_rec_iter *it);
/* One uncompressed record (VARINT length, then its body) from rd, whose
 * Timestamp and Offset are made absolute with batch b's header: what
 * kp_rec_iter_next does per record, for a reader that streams the records
 * area of an uncompressed batch instead of holding it whole (the SQL
 * messages table).  1, or KP_E_* (rd latches a short read as truncated). */
int  kp_rec_read(kp_rd *rd, const kp_batch *b, kp_record *rec);
/* 1 = a header, 0 = no more, < 0 = malformed. */
int  kp_header_next(kp_record *rec, kp_header *h);

/* ---- record validation (protocol/validate.c; Kafka's LogValidator) ------- */
/* The topic's rules for one produce. */
struct kp_val_fault;
typedef struct kp_val_rules {
    bool    key_required;     /* cleanup.policy has compact */
    bool    check_timestamps; /* CreateTime and the batch carries timestamps */
    int64_t now_ms;
    int64_t before_max_ms;    /* a timestamp may lag now by this much */
    int64_t after_max_ms;     /* ... and lead it by this much; INT64_MAX:
                                 no bound on that side */
    /* Optional, after the rules above pass on record i: 0, or
     * KP_E_MALFORMED with *f filled (kp_val_record_fault).  whole: Key and
     * Value are the record's; false for a record longer than the window
     * (read as it streams by), where each holds only its first
     * KP_VAL_HEAD bytes (len: those, -1 null).  Runs on every record:
     * no allocation there. */
    int   (*on_record)(void *arg, int32_t i, const kp_record *rec, bool whole,
                       struct kp_val_fault *f);
    void   *arg;
} kp_val_rules;
#define KP_VAL_HEAD 16

/* A record timestamp within the rules (always, when check_timestamps is
 * off or ts is -1: NO_TIMESTAMP). */
bool kp_val_timestamp_ok(const kp_val_rules *r, int64_t ts);

/* What kp_batch_validate_records refused, for the produce response. */
typedef struct kp_val_fault {
    int16_t error;            /* KP_CORRUPT_MESSAGE, KP_INVALID_RECORD or
                                 KP_INVALID_TIMESTAMP */
    int32_t record;           /* index of the record in its batch, -1 for
                                 the batch as a whole (codec, count) */
    char    message[160];     /* "Record 3 in batch: ..." */
} kp_val_fault;
/* Fills *f for record i (error, "Record i in batch: " + the message) and
 * returns KP_E_MALFORMED: for on_record callbacks. */
int kp_val_record_fault(kp_val_fault *f, int16_t error, int32_t i, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* One per thread that validates: decoder contexts and a fixed window the
 * decompressed records stream through, kept between batches (no
 * allocation on the steady path, memory bounded whatever the ratio). */
#define KP_VAL_WINDOW ((size_t)256 << 10)
typedef struct kp_validator {
    kp_codec_ctx codec;
    kp_dstream ds;
    uint8_t *win;             /* win_cap bytes, allocated on first use */
    size_t win_cap;
    size_t head, tail;        /* unread decompressed bytes: win[head..tail) */
    int64_t max_timestamp;    /* of the last batch accepted: its records'
                                 largest (as CreateTime), -1 if none has one */
    uint8_t key_head[KP_VAL_HEAD], value_head[KP_VAL_HEAD]; /* a long record's (on_record) */
} kp_validator;

void kp_validator_init(kp_validator *v);
/* Window size other than KP_VAL_WINDOW (tests: a tiny one sends every
 * record down the large-record path); at least 16 bytes. */
void kp_validator_set_window(kp_validator *v, size_t cap);
void kp_validator_free(kp_validator *v);
/* Every record of the batch at p (size bytes, already through
 * kp_batch_validate, header in *b): decompressed, framed exactly
 * (RecordsCount records filling the records area), OffsetDelta 0..n-1 in
 * order, keys and timestamps against the rules.  0, or KP_E_MALFORMED /
 * KP_E_CODEC / KP_E_NOMEM with *f filled.  Whatever it accepts,
 * kp_rec_iter reads to the end without an error. */
int kp_batch_validate_records(kp_validator *v, const uint8_t *p, size_t size,
                              const kp_batch *b, const kp_val_rules *rules,
                              kp_val_fault *f);

/* Builds one batch (producer side: clients, tests, benchmarks, compaction). */
typedef struct kp_batch_builder {
    kp_buf *out;              /* the batch is appended here */
    size_t start;             /* where it starts in out */
    kp_buf recs;              /* records before compression (owned) */
    int codec;
    int32_t count;
    int64_t base_ts, max_ts;
    bool base_ts_set;         /* kp_bb_set_base_timestamp was called */
    int64_t base_offset;
    int64_t ProducerId;
    int16_t ProducerEpoch;
    int32_t BaseSequence;
    int16_t extra_attrs;      /* e.g. KP_ATTR_LOG_APPEND_TIME */
} kp_batch_builder;

void kp_bb_init(kp_batch_builder *bb, kp_buf *out, int codec);
/* Optional: idempotent producer fields (defaults -1). */
void kp_bb_set_producer(kp_batch_builder *bb, int64_t pid, int16_t epoch,
                        int32_t base_sequence);
/* Optional, before the first record: BaseTimestamp is ts (record deltas
 * are taken from it) instead of the first record's timestamp.  Compaction
 * stores a delete horizon there (KP_ATTR_DELETE_HORIZON). */
void kp_bb_set_base_timestamp(kp_batch_builder *bb, int64_t ts);
/* Adds a record with OffsetDelta = records so far.  key/value NULL → null. */
void kp_bb_add(kp_batch_builder *bb, int64_t timestamp,
               const void *key, int32_t key_len,
               const void *value, int32_t value_len,
               const kp_header *headers, int headers_count);
/* Adds a record with an explicit offset delta (compaction keeps gaps). */
void kp_bb_add_at(kp_batch_builder *bb, int32_t offset_delta, int64_t timestamp,
                  const void *key, int32_t key_len,
                  const void *value, int32_t value_len,
                  const kp_header *headers, int headers_count);
/* Compresses, writes the header and CRC.  Returns the batch size or KP_E_*.
 * The builder may be reused after kp_bb_init. */
int64_t kp_bb_finish(kp_batch_builder *bb);
void kp_bb_free(kp_batch_builder *bb);

/* ---- old message formats (legacy.c) ----------------------------------------
 * Magic 0 and 1 message sets, as Produce v0-2 and Fetch v0-3 carry them. */
/* Up-converts a whole message set to one batch v2 appended to out (offset
 * deltas 0..n-1, no producer id, the first wrapper's codec).  *count gets
 * the messages read.  Returns the batch size or KP_E_* (KP_E_CRC,
 * KP_E_MAGIC, KP_E_MALFORMED, KP_E_CODEC, KP_E_NOMEM); max_out bounds each
 * wrapper's decompressed size and the records of the whole batch
 * (KP_E_CODEC beyond it). */
int64_t kp_legacy_to_batch(const uint8_t *set, size_t len, kp_buf *out, size_t max_out,
                           int32_t *count);
/* Appends the records of the batch at p with offsets >= from as
 * uncompressed messages of magic 0 or 1 to out (headers dropped, control
 * batches skipped), decompressing with it.  0 or KP_E_*. */
int kp_batch_to_legacy(const uint8_t *p, size_t len, int magic, int64_t from,
                       kp_rec_iter *it, kp_buf *out);
/* Rewrites the header checksum of the lz4 frame at p to the right one
 * (pre-0.10 Kafka clients compute it wrongly for magic 0); not a frame or
 * too short: left alone. */
void kp_lz4_fix_header_checksum(uint8_t *p, size_t len);

#endif
