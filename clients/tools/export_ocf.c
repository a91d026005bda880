/*
 * clients/tools/export_ocf.c — Avro Object Container Files, as the Avro
 * specification's "Object Container Files" section lays them out:
 *
 *   header  "Obj" 1, a map of metadata (avro.schema, avro.codec), 16-byte sync
 *   block   record count (long), byte size (long), the records' encodings
 *           compressed with the codec, the sync marker again
 *
 * Codecs (the specification's names, and what each block holds):
 *   null       the encodings as they are
 *   deflate    RFC 1951 raw deflate (no zlib header)
 *   snappy     Snappy's raw format, then the CRC-32 of the uncompressed
 *              data, 4 bytes big-endian
 *   xz         an .xz stream (LZMA2, CRC-64 check), as Java's XZCodec
 *   zstandard  a Zstandard frame
 *
 * Written here rather than through Avro C's file writer, which has no xz
 * (its "lzma" codec writes raw LZMA2 under a name Java, Python and Spark do
 * not know) and keeps a 4 MiB block per open file.  A block is written when
 * its records pass EX_OCF_BLOCK bytes; the buffers are the writer's, grown
 * once and reused for every block.
 */
#include "clients/tools/export_ocf.h"
#include "protocol/kp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <lzma.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

/* Records gathered before a block is written (uncompressed); Java's
 * DataFileWriter uses 64 KB, larger blocks compress better. */
#define EX_OCF_BLOCK (1 << 20)

enum ocf_codec { OCF_NULL, OCF_DEFLATE, OCF_SNAPPY, OCF_XZ, OCF_ZSTD };

static const char *const codec_names[] = { "null", "deflate", "snappy", "xz", "zstandard" };

struct ex_ocf {
    FILE *f;
    enum ocf_codec codec;
    uint8_t sync[16];
    kp_buf raw;                  /* the block's encodings */
    kp_buf head;                 /* the file's header, a block's count and size */
    uint8_t *out;                /* the block compressed */
    size_t out_cap;
    int64_t count;               /* records in the block */
    z_stream z;
    int z_ready;
};

static int codec_of(const char *name)
{
    for (size_t i = 0; i < sizeof codec_names / sizeof *codec_names; i++)
        if (!strcmp(name, codec_names[i]))
            return (int)i;
    return -1;
}

int ex_ocf_codec_known(const char *codec)
{
    return codec_of(codec) >= 0;
}

/* An Avro string or bytes value: its length (a long: Avro's long is the
 * protocol's zig-zag varlong), then its bytes. */
static void put_bytes(kp_buf *b, const void *p, size_t len)
{
    kp_wr_varlong(b, (int64_t)len);
    kp_wr_raw(b, p, len);
}

/* Writes h to f (and resets it).  0 or -1 (errno). */
static int put_out(FILE *f, kp_buf *h)
{
    if (h->err) {
        errno = ENOMEM;
        return -1;
    }
    errno = 0;
    size_t n = h->len;
    kp_buf_reset(h);
    if (fwrite(h->data, 1, n, f) == n)
        return 0;
    if (!errno)
        errno = EIO;
    return -1;
}

static int grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 4096;
    while (c < need)
        c *= 2;
    uint8_t *n = realloc(*buf, c);
    if (!n)
        return -1;
    *buf = n;
    *cap = c;
    return 0;
}

ex_ocf *ex_ocf_open(FILE *f, const char *schema_json, const char *codec)
{
    int c = codec_of(codec);
    if (c < 0) {
        errno = EINVAL;
        return NULL;
    }
    ex_ocf *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->f = f;
    o->codec = (enum ocf_codec)c;
    kp_buf_init(&o->raw);
    kp_buf_init(&o->head);
    if (getrandom(o->sync, sizeof o->sync, 0) != (ssize_t)sizeof o->sync) {
        ex_ocf_free(o);
        return NULL;
    }
    kp_wr_raw(&o->head, "Obj\x01", 4);
    kp_wr_varlong(&o->head, 2);                  /* a map block of two entries */
    put_bytes(&o->head, "avro.schema", 11);
    put_bytes(&o->head, schema_json, strlen(schema_json));
    put_bytes(&o->head, "avro.codec", 10);
    put_bytes(&o->head, codec, strlen(codec));
    kp_wr_varlong(&o->head, 0);                  /* the map's end */
    kp_wr_raw(&o->head, o->sync, sizeof o->sync);
    if (put_out(f, &o->head) != 0) {
        int e = errno;
        ex_ocf_free(o);
        errno = e;
        return NULL;
    }
    return o;
}

/* The block's encodings compressed into o->out; its length, or -1. */
static int64_t compress_block(ex_ocf *o, const char **why)
{
    size_t n = o->raw.len, len;
    switch (o->codec) {
    case OCF_NULL:
        return (int64_t)n;
    case OCF_DEFLATE:
        if (!o->z_ready) {
            if (deflateInit2(&o->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8,
                             Z_DEFAULT_STRATEGY) != Z_OK)
                goto nomem;
            o->z_ready = 1;
        } else {
            deflateReset(&o->z);
        }
        len = deflateBound(&o->z, n);
        if (grow(&o->out, &o->out_cap, len))
            goto nomem;
        o->z.next_in = o->raw.data;
        o->z.avail_in = (uInt)n;
        o->z.next_out = o->out;
        o->z.avail_out = (uInt)o->out_cap;
        if (deflate(&o->z, Z_FINISH) != Z_STREAM_END) {
            *why = "deflate failed";
            errno = EIO;
            return -1;
        }
        return (int64_t)(o->out_cap - o->z.avail_out);
    case OCF_SNAPPY: {
        len = snappy_max_compressed_length(n);
        if (grow(&o->out, &o->out_cap, len + 4))
            goto nomem;
        if (snappy_compress((const char *)o->raw.data, n, (char *)o->out, &len) != SNAPPY_OK)
            goto nomem;
        uint32_t crc = (uint32_t)crc32(0L, o->raw.data, (uInt)n);
        uint8_t be[4] = { (uint8_t)(crc >> 24), (uint8_t)(crc >> 16), (uint8_t)(crc >> 8),
                          (uint8_t)crc };
        memcpy(o->out + len, be, 4);
        return (int64_t)(len + 4);
    }
    case OCF_XZ: {
        /* preset 6 (Java's default level), its dictionary cut to the block:
         * a larger one finds nothing more and costs memory */
        lzma_options_lzma opt;
        if (lzma_lzma_preset(&opt, 6))
            goto nomem;
        opt.dict_size = n < LZMA_DICT_SIZE_MIN ? LZMA_DICT_SIZE_MIN : (uint32_t)n;
        lzma_filter filters[] = { { LZMA_FILTER_LZMA2, &opt }, { LZMA_VLI_UNKNOWN, NULL } };
        len = lzma_stream_buffer_bound(n);
        if (grow(&o->out, &o->out_cap, len))
            goto nomem;
        size_t pos = 0;
        if (lzma_stream_buffer_encode(filters, LZMA_CHECK_CRC64, NULL, o->raw.data, n, o->out, &pos,
                                      o->out_cap) != LZMA_OK)
            goto nomem;
        return (int64_t)pos;
    }
    case OCF_ZSTD:
        len = ZSTD_compressBound(n);
        if (grow(&o->out, &o->out_cap, len))
            goto nomem;
        len = ZSTD_compress(o->out, o->out_cap, o->raw.data, n, 3);
        if (ZSTD_isError(len))
            goto nomem;
        return (int64_t)len;
    }
nomem:
    *why = "compressing a block: out of memory";
    errno = ENOMEM;
    return -1;
}

static int write_block(ex_ocf *o, const char **why)
{
    if (o->count == 0)
        return 0;
    int64_t len = compress_block(o, why);
    if (len < 0)
        return -1;
    const uint8_t *data = o->codec == OCF_NULL ? o->raw.data : o->out;
    kp_wr_varlong(&o->head, o->count);
    kp_wr_varlong(&o->head, len);
    int rc = put_out(o->f, &o->head);
    if (rc == 0 && fwrite(data, 1, (size_t)len, o->f) != (size_t)len)
        rc = -1;
    kp_wr_raw(&o->head, o->sync, sizeof o->sync);
    if (rc == 0)
        rc = put_out(o->f, &o->head);
    kp_buf_reset(&o->head);
    if (rc != 0) {
        if (!errno)
            errno = EIO;
        *why = "writing a block";
        return -1;
    }
    o->count = 0;
    kp_buf_reset(&o->raw);
    return 0;
}

int ex_ocf_append(ex_ocf *o, const void *rec, size_t len, const char **why)
{
    kp_wr_raw(&o->raw, rec, len);
    if (o->raw.err) {
        *why = "out of memory";
        errno = ENOMEM;
        return -1;
    }
    o->count++;
    return o->raw.len >= EX_OCF_BLOCK ? write_block(o, why) : 0;
}

int ex_ocf_close(ex_ocf *o, const char **why)
{
    int rc = write_block(o, why);
    int e = errno;
    ex_ocf_free(o);
    errno = e;
    return rc;
}

void ex_ocf_free(ex_ocf *o)
{
    if (!o)
        return;
    if (o->z_ready)
        deflateEnd(&o->z);
    kp_buf_free(&o->raw);
    kp_buf_free(&o->head);
    free(o->out);
    free(o);
}
