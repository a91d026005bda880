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
 *      what has been produced, or room out already has) except for
 *      snappy, whose declared block length is checked against max_out
 *      before anything is reserved.
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
 *   6. kp_dstream pulls the output piece by piece into the caller's
 *      buffer: gzip, lz4 and zstd decode straight into it, holding nothing
 *      but their own bounded state (zstd's window), so a consumer of the
 *      stream (produce's validation) needs a fixed buffer whatever the
 *      ratio.  Snappy has no streaming form: one block at a time is
 *      decoded into the context's buffer (xerial blocks are 32 KiB; a raw
 *      block expands at most ~22x its compressed size, a copy op taking 3
 *      bytes for 64) and handed out from there.  kp_decompress_ctx is the
 *      stream read to its end, so both forms accept the same inputs.
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
    /* A snappy element expands 21x at most (a 3-byte copy of 64 bytes): a
     * longer declared length is a lie, refused before it is reserved. */
    if (n / 22 > in_len)
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

/* ---- streaming decoders: one step each, into (dst, cap) -------------- */

static int gzip_read(kp_dstream *s, uint8_t *dst, size_t cap, size_t *got)
{
    z_stream *zs = s->c->zs;
    for (;;) {
        size_t in_chunk = s->in_len - s->pos > UINT32_MAX ? UINT32_MAX : s->in_len - s->pos;
        zs->next_in = (Bytef *)(uintptr_t)(s->in + s->pos);
        zs->avail_in = (uInt)in_chunk;
        zs->next_out = dst;
        zs->avail_out = (uInt)cap;
        int z = inflate(zs, Z_NO_FLUSH);
        s->pos += in_chunk - zs->avail_in;
        *got = cap - zs->avail_out;
        if (z == Z_STREAM_END) {
            if (s->pos == s->in_len) {
                s->done = true;
                return 0;
            }
            if (inflateReset(zs) != Z_OK)       /* another gzip member */
                return KP_E_CODEC;
        } else if (z != Z_OK) {
            return KP_E_CODEC;                  /* corrupt, or ran dry (BUF_ERROR) */
        } else if (s->pos == s->in_len && zs->avail_out != 0) {
            return KP_E_CODEC;                  /* input ended before the trailer */
        }
        if (*got)
            return 0;
    }
}

/* Decodes the next snappy block (the whole input if it is not xerial
 * framed) into c->snappy.  Xerial (snappy-java) framing:
 *
 *   +--------------------------------+---------+--------+
 *   | 82 'S' 'N' 'A' 'P' 'P' 'Y' 00  | version | compat |   INT32 BE each
 *   +--------------------------------+---------+--------+
 *   | INT32 BE length | raw snappy block | ... repeated to the end
 */
static int snappy_next(kp_dstream *s)
{
    kp_buf *blk = &s->c->snappy;
    kp_buf_reset(blk);
    s->snappy_off = 0;
    size_t limit = s->max_out - s->produced;
    if (!s->started) {
        s->started = true;
        if (s->in_len < 16 || memcmp(s->in, xerial_magic, 8) != 0) {
            s->pos = s->in_len;
            return snappy_block(s->in, s->in_len, blk, 0, limit);
        }
        s->pos = 16;
        return 0;
    }
    if (s->in_len - s->pos < 4)
        return KP_E_CODEC;
    uint32_t n = be32(s->in + s->pos);
    s->pos += 4;
    if (n > s->in_len - s->pos)
        return KP_E_CODEC;
    s->pos += n;
    return snappy_block(s->in + s->pos - n, n, blk, 0, limit);
}

static int snappy_read(kp_dstream *s, uint8_t *dst, size_t cap, size_t *got)
{
    kp_buf *blk = &s->c->snappy;
    for (;;) {
        if (s->snappy_off < blk->len) {
            size_t n = blk->len - s->snappy_off < cap ? blk->len - s->snappy_off : cap;
            memcpy(dst, blk->data + s->snappy_off, n);
            s->snappy_off += n;
            *got = n;
            s->done = s->snappy_off == blk->len && s->pos == s->in_len;
            return 0;
        }
        if (s->started && s->pos == s->in_len) {
            s->done = true;
            return 0;
        }
        int rc = snappy_next(s);
        if (rc < 0)
            return rc;
    }
}

static int lz4_read(kp_dstream *s, uint8_t *dst, size_t cap, size_t *got)
{
    for (;;) {
        size_t src = s->in_len - s->pos, dn = cap;
        /* hint == 0: a frame ended and everything is flushed; the context
         * then starts over, so a following frame is decoded too. */
        size_t hint = LZ4F_decompress(s->c->lz4, dst, &dn,
                                      s->pos < s->in_len ? s->in + s->pos : NULL, &src, NULL);
        if (LZ4F_isError(hint))
            return KP_E_CODEC;
        s->pos += src;
        *got = dn;
        if (hint == 0 && s->pos == s->in_len) {
            s->done = true;
            return 0;
        }
        if (src == 0 && dn == 0)
            return KP_E_CODEC;          /* no progress: the input ended early */
        if (dn)
            return 0;
    }
}

static int zstd_read(kp_dstream *s, uint8_t *dst, size_t cap, size_t *got)
{
    ZSTD_DCtx *ds = s->c->zstd;
    if (!s->started) {
        s->started = true;
        /* One frame that declares a content size that fits (librdkafka's
         * do): one call straight into dst, no copy through zstd's own
         * window.  Otherwise, streaming. */
        unsigned long long n = ZSTD_getFrameContentSize(s->in, s->in_len);
        if (n != ZSTD_CONTENTSIZE_UNKNOWN && n != ZSTD_CONTENTSIZE_ERROR && n <= cap &&
            n <= s->max_out && ZSTD_findFrameCompressedSize(s->in, s->in_len) == s->in_len) {
            size_t r = ZSTD_decompressDCtx(ds, dst, (size_t)n, s->in, s->in_len);
            if (ZSTD_isError(r) || r != n)
                return KP_E_CODEC;
            s->pos = s->in_len;
            *got = r;
            s->done = true;
            return 0;
        }
    }
    for (;;) {
        ZSTD_outBuffer ob = { dst, cap, 0 };
        ZSTD_inBuffer ib = { s->in, s->in_len, s->pos };
        size_t in_before = s->pos;
        size_t last = ZSTD_decompressStream(ds, &ob, &ib);
        if (ZSTD_isError(last))
            return KP_E_CODEC;
        s->pos = ib.pos;
        *got = ob.pos;
        if (last == 0 && ib.pos == ib.size) {
            s->done = true;             /* last frame decoded and flushed */
            return 0;
        }
        if (ib.pos == ib.size && ob.pos < ob.size)
            return KP_E_CODEC;          /* input ended inside a frame */
        if (ob.pos == 0 && ib.pos == in_before)
            return KP_E_CODEC;          /* no progress */
        if (ob.pos)
            return 0;
    }
}

/* The codec's context, created on first use and reset on every later one
 * (a failed stream left state). */
static int ctx_ready(kp_codec_ctx *c, int codec)
{
    switch (codec) {
    case KP_CODEC_GZIP:
        if (c->zs)
            return inflateReset(c->zs) == Z_OK ? 0 : KP_E_CODEC;
        z_stream *zs = calloc(1, sizeof *zs);
        if (!zs)
            return KP_E_NOMEM;
        if (inflateInit2(zs, 15 + 32) != Z_OK) {  /* gzip or zlib header */
            free(zs);
            return KP_E_NOMEM;
        }
        c->zs = zs;
        return 0;
    case KP_CODEC_SNAPPY:
        kp_buf_reset(&c->snappy);       /* nothing left of an earlier stream */
        return 0;
    case KP_CODEC_LZ4:
        if (c->lz4) {
            LZ4F_resetDecompressionContext(c->lz4);
            return 0;
        }
        LZ4F_dctx *dctx;
        if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)))
            return KP_E_NOMEM;
        c->lz4 = dctx;
        return 0;
    case KP_CODEC_ZSTD:
        if (c->zstd) {
            ZSTD_DCtx_reset(c->zstd, ZSTD_reset_session_only);
            return 0;
        }
        return (c->zstd = ZSTD_createDCtx()) ? 0 : KP_E_NOMEM;
    default:
        return KP_E_CODEC;
    }
}

int kp_dstream_start(kp_dstream *s, kp_codec_ctx *c, int codec,
                     const void *in, size_t in_len, size_t max_out)
{
    *s = (kp_dstream){ .c = c, .codec = codec, .in = in, .in_len = in_len,
                       .max_out = max_out };
    return s->err = ctx_ready(c, codec);
}

int kp_dstream_read(kp_dstream *s, uint8_t *dst, size_t cap, size_t *got)
{
    *got = 0;
    if (s->err || s->done)
        return s->err;
    if (cap > UINT32_MAX)
        cap = UINT32_MAX;               /* zlib's counters */
    int rc;
    switch (s->codec) {
    case KP_CODEC_GZIP:   rc = gzip_read(s, dst, cap, got); break;
    case KP_CODEC_SNAPPY: rc = snappy_read(s, dst, cap, got); break;
    case KP_CODEC_LZ4:    rc = lz4_read(s, dst, cap, got); break;
    case KP_CODEC_ZSTD:   rc = zstd_read(s, dst, cap, got); break;
    default:              rc = KP_E_CODEC; break;
    }
    if (rc == 0 && *got > s->max_out - s->produced)
        rc = KP_E_CODEC;                /* promise 2: over the bound */
    if (rc < 0) {
        *got = 0;
        return s->err = rc;
    }
    s->produced += *got;
    return 0;
}

/* Room for the next step of a whole decode: what out already has spare,
 * or one STEP (promise 2), and at most one byte past max_out so an
 * overflowing stream is noticed rather than silently cut. */
static uint8_t *out_room(kp_buf *out, size_t base, size_t max_out, size_t *room)
{
    size_t left = max_out - (out->len - base);   /* produced <= max_out here */
    size_t n = out->cap - out->len > STEP ? out->cap - out->len : STEP;
    if (n > left)
        n = left + 1;
    *room = n;
    return kp_buf_reserve(out, n);
}

int kp_decompress_ctx(kp_codec_ctx *c, int codec, const void *in, size_t in_len,
                      kp_buf *out, size_t max_out)
{
    if (out->err)
        return out->err;
    size_t base = out->len;
    if (codec == KP_CODEC_NONE) {
        if (in_len > max_out)
            return KP_E_CODEC;
        kp_wr_raw(out, in, in_len);
        return out->err;
    }
    kp_dstream s;
    int rc = kp_dstream_start(&s, c, codec, in, in_len, max_out);
    while (rc == 0 && !s.done) {
        size_t room, got;
        uint8_t *d = out_room(out, base, max_out, &room);
        if (!d) {
            rc = KP_E_NOMEM;
            break;
        }
        rc = kp_dstream_read(&s, d, room, &got);
        out->len += got;
    }
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
    kp_buf_free(&c->snappy);
    *c = (kp_codec_ctx)KP_CODEC_CTX_INIT;
}

int kp_decompress(int codec, const void *in, size_t in_len, kp_buf *out,
                  size_t max_out)
{
    kp_codec_ctx c = KP_CODEC_CTX_INIT;
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
