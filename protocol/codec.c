/*
 * codec.c — the record codecs a client may put in a batch: gzip (zlib),
 * snappy (libsnappy, raw block or xerial framing), lz4 (frame format) and
 * zstd.  Used where the broker must look inside a batch: produce's record
 * validation (protocol/validate.c), the messages view, compaction; and by
 * the builder.  Fetch never calls it.
 *
 * Promises:
 *   1. Output is appended to `out`; on failure out->len is restored, so a
 *      half-decoded blob never stays visible.
 *   2. Decompression never produces, nor allocates for, more than max_out
 *      bytes: hostile compression ratios end in KP_E_CODEC, not in a huge
 *      allocation.  Output grows in bounded steps (at most 256 KiB beyond
 *      what has been produced) except for snappy, whose declared block
 *      length is checked against max_out before anything is reserved.
 *   3. Truncated or corrupt input is KP_E_CODEC; zlib, lz4 and zstd streams
 *      must reach their end marker.  Concatenated gzip members, lz4 frames
 *      and zstd frames are all decoded (zstd frames may lack a content size,
 *      hence the streaming API).
 *   4. A kp_codec_ctx keeps one decoder context per codec (z_stream,
 *      LZ4F_dctx, ZSTD_DCtx), created on first use and reset (inflateReset,
 *      LZ4F_resetDecompressionContext, ZSTD_DCtx_reset) on every later one,
 *      so a caller that keeps a context and its output buffer decodes
 *      batch after batch without allocating.  kp_decompress is the one-shot
 *      form (a context of its own, freed on return).
 *   5. Compressed output: gzip stream, xerial-framed snappy (what the Java
 *      client writes and every client reads), lz4 frame with independent
 *      64 KiB blocks and no content checksum (the Java client's reader
 *      handles exactly this), zstd level 3.
 */
#include <stdlib.h>
#include <string.h>

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "protocol/kp.h"

#define STEP (256 * 1024)

static const uint8_t xerial_magic[8] = { 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0 };

/* Room for the next decoder step: at most STEP, and one byte past max_out
 * so an overflowing stream is noticed rather than silently cut. */
static uint8_t *out_room(kp_buf *out, size_t base, size_t max_out, size_t *room)
{
    size_t left = max_out - (out->len - base);   /* produced <= max_out here */
    size_t n = left < STEP ? left + 1 : STEP;
    uint8_t *d = kp_buf_reserve(out, n);
    *room = n;
    return d;
}

static int gzip_decompress(kp_codec_ctx *c, const uint8_t *in, size_t in_len,
                           kp_buf *out, size_t base, size_t max_out)
{
    z_stream *zs = c->zs;
    if (!zs) {
        if (!(zs = calloc(1, sizeof *zs)))
            return KP_E_NOMEM;
        if (inflateInit2(zs, 15 + 32) != Z_OK) {  /* gzip or zlib header */
            free(zs);
            return KP_E_NOMEM;
        }
        c->zs = zs;
    } else if (inflateReset(zs) != Z_OK) {
        return KP_E_CODEC;
    }
    size_t pos = 0;
    for (;;) {
        size_t room;
        uint8_t *d = out_room(out, base, max_out, &room);
        if (!d)
            return KP_E_NOMEM;
        size_t in_chunk = in_len - pos > UINT32_MAX ? UINT32_MAX : in_len - pos;
        zs->next_in = (Bytef *)(uintptr_t)(in + pos);
        zs->avail_in = (uInt)in_chunk;
        zs->next_out = d;
        zs->avail_out = (uInt)room;
        int z = inflate(zs, Z_NO_FLUSH);
        pos += in_chunk - zs->avail_in;
        out->len += room - zs->avail_out;
        if (out->len - base > max_out)
            return KP_E_CODEC;
        if (z == Z_STREAM_END) {
            if (pos == in_len)
                return 0;
            if (inflateReset(zs) != Z_OK)       /* another gzip member */
                return KP_E_CODEC;
            continue;
        }
        if (z != Z_OK)
            return KP_E_CODEC;                  /* corrupt, or ran dry (BUF_ERROR) */
        if (pos == in_len && zs->avail_out != 0)
            return KP_E_CODEC;                  /* input ended before the trailer */
    }
}

static int gzip_compress(const uint8_t *in, size_t in_len, kp_buf *out)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (in_len > UINT32_MAX / 2)
        return KP_E_CODEC;
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return KP_E_NOMEM;
    size_t bound = deflateBound(&zs, (uLong)in_len) + 32;
    uint8_t *d = kp_buf_reserve(out, bound);
    int rc = KP_E_NOMEM;
    if (d) {
        zs.next_in = (Bytef *)(uintptr_t)in;
        zs.avail_in = (uInt)in_len;
        zs.next_out = d;
        zs.avail_out = (uInt)bound;
        if (deflate(&zs, Z_FINISH) == Z_STREAM_END) {
            out->len += bound - zs.avail_out;
            rc = 0;
        } else {
            rc = KP_E_CODEC;
        }
    }
    deflateEnd(&zs);
    return rc;
}

/* One raw snappy block; its declared length is checked before reserving. */
static int snappy_block(const uint8_t *in, size_t in_len, kp_buf *out,
                        size_t base, size_t max_out)
{
    size_t n;
    if (snappy_uncompressed_length((const char *)in, in_len, &n) != SNAPPY_OK)
        return KP_E_CODEC;
    if (n > max_out - (out->len - base))
        return KP_E_CODEC;
    uint8_t *d = kp_buf_reserve(out, n ? n : 1);
    if (!d)
        return KP_E_NOMEM;
    size_t got = n;
    if (snappy_uncompress((const char *)in, in_len, (char *)d, &got) != SNAPPY_OK ||
        got != n)
        return KP_E_CODEC;
    out->len += n;
    return 0;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Xerial (snappy-java) framing:
 *
 *   +--------------------------------+---------+--------+
 *   | 82 'S' 'N' 'A' 'P' 'P' 'Y' 00  | version | compat |   INT32 BE each
 *   +--------------------------------+---------+--------+
 *   | INT32 BE length | raw snappy block | ... repeated to the end
 */
static int snappy_decompress(const uint8_t *in, size_t in_len, kp_buf *out,
                             size_t base, size_t max_out)
{
    if (in_len < 16 || memcmp(in, xerial_magic, 8) != 0)
        return snappy_block(in, in_len, out, base, max_out);
    size_t pos = 16;
    while (pos < in_len) {
        if (in_len - pos < 4)
            return KP_E_CODEC;
        uint32_t n = be32(in + pos);
        pos += 4;
        if (n > in_len - pos)
            return KP_E_CODEC;
        int rc = snappy_block(in + pos, n, out, base, max_out);
        if (rc < 0)
            return rc;
        pos += n;
    }
    return 0;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

#define XERIAL_BLOCK (32 * 1024)    /* snappy-java's default block size */

static int snappy_compress_x(const uint8_t *in, size_t in_len, kp_buf *out)
{
    uint8_t hdr[16];
    memcpy(hdr, xerial_magic, 8);
    put32(hdr + 8, 1);              /* version */
    put32(hdr + 12, 1);             /* compatible version */
    kp_wr_raw(out, hdr, sizeof hdr);
    for (size_t pos = 0; pos < in_len; pos += XERIAL_BLOCK) {
        size_t n = in_len - pos < XERIAL_BLOCK ? in_len - pos : XERIAL_BLOCK;
        size_t cap = snappy_max_compressed_length(n);
        uint8_t *d = kp_buf_reserve(out, 4 + cap);
        if (!d)
            return KP_E_NOMEM;
        size_t clen = cap;
        if (snappy_compress((const char *)in + pos, n, (char *)d + 4, &clen) != SNAPPY_OK)
            return KP_E_CODEC;
        put32(d, (uint32_t)clen);
        out->len += 4 + clen;
    }
    return out->err;
}

static int lz4_decompress(kp_codec_ctx *c, const uint8_t *in, size_t in_len,
                          kp_buf *out, size_t base, size_t max_out)
{
    LZ4F_dctx *dctx = c->lz4;
    if (!dctx) {
        if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)))
            return KP_E_NOMEM;
        c->lz4 = dctx;
    } else {
        LZ4F_resetDecompressionContext(dctx);   /* a failed frame left state */
    }
    size_t pos = 0;
    for (;;) {
        size_t room;
        uint8_t *d = out_room(out, base, max_out, &room);
        if (!d)
            return KP_E_NOMEM;
        size_t src = in_len - pos, dst = room;
        /* hint == 0: a frame ended and everything is flushed; the context
         * then starts over, so a following frame is decoded too. */
        size_t hint = LZ4F_decompress(dctx, d, &dst, pos < in_len ? in + pos : NULL,
                                      &src, NULL);
        if (LZ4F_isError(hint))
            return KP_E_CODEC;
        pos += src;
        out->len += dst;
        if (out->len - base > max_out)
            return KP_E_CODEC;
        if (hint == 0 && pos == in_len)
            return 0;
        if (src == 0 && dst == 0)
            return KP_E_CODEC;          /* no progress: the input ended early */
    }
}

static int lz4_compress(const uint8_t *in, size_t in_len, kp_buf *out)
{
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    prefs.frameInfo.blockSizeID = LZ4F_max64KB;
    prefs.frameInfo.blockMode = LZ4F_blockIndependent;
    prefs.frameInfo.contentChecksumFlag = LZ4F_noContentChecksum;
    size_t bound = LZ4F_compressFrameBound(in_len, &prefs);
    uint8_t *d = kp_buf_reserve(out, bound);
    if (!d)
        return KP_E_NOMEM;
    size_t n = LZ4F_compressFrame(d, bound, in, in_len, &prefs);
    if (LZ4F_isError(n))
        return KP_E_CODEC;
    out->len += n;
    return 0;
}

static int zstd_decompress(kp_codec_ctx *c, const uint8_t *in, size_t in_len,
                           kp_buf *out, size_t base, size_t max_out)
{
    ZSTD_DCtx *ds = c->zstd;
    if (!ds) {
        if (!(ds = ZSTD_createDCtx()))
            return KP_E_NOMEM;
        c->zstd = ds;
    } else {
        ZSTD_DCtx_reset(ds, ZSTD_reset_session_only);
    }
    /* One frame that declares its content size (librdkafka's do), within
     * room out already has (or one STEP, promise 2): one call straight
     * into out, no copy through the window.  Otherwise, streaming. */
    unsigned long long n = ZSTD_getFrameContentSize(in, in_len);
    size_t room = out->cap - out->len > STEP ? out->cap - out->len : STEP;
    if (n != ZSTD_CONTENTSIZE_UNKNOWN && n != ZSTD_CONTENTSIZE_ERROR && n <= room &&
        n <= max_out - (out->len - base) && ZSTD_findFrameCompressedSize(in, in_len) == in_len) {
        uint8_t *d = kp_buf_reserve(out, n ? (size_t)n : 1);
        if (!d)
            return KP_E_NOMEM;
        size_t got = ZSTD_decompressDCtx(ds, d, (size_t)n, in, in_len);
        if (ZSTD_isError(got) || got != n)
            return KP_E_CODEC;
        out->len += got;
        return 0;
    }
    ZSTD_inBuffer ib = { in, in_len, 0 };
    for (;;) {
        size_t room;
        uint8_t *d = out_room(out, base, max_out, &room);
        if (!d)
            return KP_E_NOMEM;
        ZSTD_outBuffer ob = { d, room, 0 };
        size_t in_before = ib.pos;
        size_t last = ZSTD_decompressStream(ds, &ob, &ib);
        if (ZSTD_isError(last))
            return KP_E_CODEC;
        out->len += ob.pos;
        if (out->len - base > max_out)
            return KP_E_CODEC;
        if (last == 0 && ib.pos == ib.size)
            return 0;                   /* last frame decoded and flushed */
        if (ib.pos == ib.size && ob.pos < ob.size)
            return KP_E_CODEC;          /* input ended inside a frame */
        if (ob.pos == 0 && ib.pos == in_before)
            return KP_E_CODEC;          /* no progress */
    }
}

static int zstd_compress(const uint8_t *in, size_t in_len, kp_buf *out)
{
    size_t bound = ZSTD_compressBound(in_len);
    uint8_t *d = kp_buf_reserve(out, bound);
    if (!d)
        return KP_E_NOMEM;
    size_t n = ZSTD_compress(d, bound, in, in_len, 3);
    if (ZSTD_isError(n))
        return KP_E_CODEC;
    out->len += n;
    return 0;
}

int kp_decompress_ctx(kp_codec_ctx *c, int codec, const void *in, size_t in_len,
                      kp_buf *out, size_t max_out)
{
    if (out->err)
        return out->err;
    size_t base = out->len;
    int rc;
    switch (codec) {
    case KP_CODEC_NONE:
        if (in_len > max_out)
            return KP_E_CODEC;
        kp_wr_raw(out, in, in_len);
        return out->err;
    case KP_CODEC_GZIP:   rc = gzip_decompress(c, in, in_len, out, base, max_out); break;
    case KP_CODEC_SNAPPY: rc = snappy_decompress(in, in_len, out, base, max_out); break;
    case KP_CODEC_LZ4:    rc = lz4_decompress(c, in, in_len, out, base, max_out); break;
    case KP_CODEC_ZSTD:   rc = zstd_decompress(c, in, in_len, out, base, max_out); break;
    default:              return KP_E_CODEC;
    }
    if (rc == 0 && out->len - base > max_out)
        rc = KP_E_CODEC;
    if (rc < 0) {
        out->len = base;
        if (rc == KP_E_NOMEM)
            out->err = 0;       /* the failed reservation is ours, not the caller's */
    }
    return rc;
}

void kp_codec_ctx_free(kp_codec_ctx *c)
{
    if (c->zs) {
        inflateEnd(c->zs);
        free(c->zs);
    }
    if (c->lz4)
        LZ4F_freeDecompressionContext(c->lz4);
    if (c->zstd)
        ZSTD_freeDCtx(c->zstd);
    *c = (kp_codec_ctx){ NULL, NULL, NULL };
}

int kp_decompress(int codec, const void *in, size_t in_len, kp_buf *out,
                  size_t max_out)
{
    kp_codec_ctx c = { NULL, NULL, NULL };
    int rc = kp_decompress_ctx(&c, codec, in, in_len, out, max_out);
    kp_codec_ctx_free(&c);
    return rc;
}

int kp_compress(int codec, const void *in, size_t in_len, kp_buf *out)
{
    if (out->err)
        return out->err;
    size_t base = out->len;
    int rc;
    switch (codec) {
    case KP_CODEC_NONE:   kp_wr_raw(out, in, in_len); rc = out->err; break;
    case KP_CODEC_GZIP:   rc = gzip_compress(in, in_len, out); break;
    case KP_CODEC_SNAPPY: rc = snappy_compress_x(in, in_len, out); break;
    case KP_CODEC_LZ4:    rc = lz4_compress(in, in_len, out); break;
    case KP_CODEC_ZSTD:   rc = zstd_compress(in, in_len, out); break;
    default:              return KP_E_CODEC;
    }
    if (rc < 0) {
        out->len = base;
        out->err = 0;
    }
    return rc;
}
