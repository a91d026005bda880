/* sluice-export's Avro Object Container File writer (issue 32): records
 * already in Avro's binary encoding, gathered into blocks, each compressed
 * with the file's codec. */
#ifndef SLUICE_EXPORT_OCF_H
#define SLUICE_EXPORT_OCF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ex_ocf ex_ocf;

/* The codec names this writer knows, as the Avro specification names them:
 * null, deflate, snappy, xz, zstandard.  False for any other. */
int ex_ocf_codec_known(const char *codec);

/* Writes the header (magic, avro.schema = schema_json, avro.codec, a
 * random sync marker) to f.  NULL with errno (ENOMEM, or the write's). */
ex_ocf *ex_ocf_open(FILE *f, const char *schema_json, const char *codec);

/* Appends one record's encoding; a full block (ocf.c: EX_OCF_BLOCK bytes)
 * is compressed and written.  0, or -1 with errno and *why filled. */
int ex_ocf_append(ex_ocf *o, const void *rec, size_t len, const char **why);

/* Writes the last block and frees the writer (not f).  0, or -1 with errno
 * and *why filled; the writer is freed either way. */
int ex_ocf_close(ex_ocf *o, const char **why);

/* Frees the writer without writing what is buffered (a file given up). */
void ex_ocf_free(ex_ocf *o);

#endif
