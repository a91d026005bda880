/*
 * libFuzzer target: the Avro schema parser (schema/parse.c) and the texts
 * written from what it accepts (schema/canon.c), on hostile text.
 *
 * Input: schema text; "\n--\n" splits off references before it (each
 * part a reference, the last part the schema), as the registry passes
 * resolved references.  Asserts, for every schema accepted:
 *   - its canonical text (sch.h S4) parses again, with the same references,
 *     to the same canonical text; the same for the normalized text;
 *   - a schema is compatible with itself (it reads its own data);
 *   - the Parsing Canonical Form is written and fingerprinted;
 *   - the input's bytes, as bodies of that schema, get the same verdict
 *     from sch_avro_validate and sch_avro_to_json.
 * A refusal must come with a reason.  Anything else aborts.
 * Built and run by `make fuzz`; seeds in tests/fuzz/corpus/fuzz_sch_parse/.
 */
#include <stdlib.h>
#include <string.h>

#include "schema/sch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_REFS 4

static void reparse_same(const kp_buf *text, bool normalize, const sch_ref *refs, size_t nrefs)
{
    sch_schema *again = NULL;
    char err[256];
    if (sch_avro_parse((const char *)text->data, text->len, refs, nrefs, &again, err, sizeof err) != 0)
        abort(); /* what we write, we must read */
    kp_buf b;
    kp_buf_init(&b);
    if (sch_avro_canonical(again, normalize, &b) != 0 || b.len != text->len ||
        memcmp(b.data, text->data, b.len) != 0)
        abort();
    kp_buf_free(&b);
    sch_free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sch_ref refs[MAX_REFS];
    size_t nrefs = 0;
    const char *p = (const char *)data, *end = p + size;
    for (;;) {
        const char *sep = memmem(p, (size_t)(end - p), "\n--\n", 4);
        if (!sep || nrefs == MAX_REFS)
            break;
        refs[nrefs++] = (sch_ref){"ref", p, (size_t)(sep - p)};
        p = sep + 4;
    }
    sch_schema *s = NULL;
    char err[256] = "";
    if (sch_avro_parse(p, (size_t)(end - p), refs, nrefs, &s, err, sizeof err) != 0) {
        if (!err[0] || s)
            abort();
        return 0;
    }
    kp_buf b;
    kp_buf_init(&b);
    for (int norm = 0; norm < 2; norm++) {
        kp_buf_reset(&b);
        if (sch_avro_canonical(s, norm, &b) != 0)
            abort();
        reparse_same(&b, norm, refs, nrefs);
    }
    if (sch_avro_compatible(s, s, err, sizeof err) != 1)
        abort();
    kp_buf_reset(&b);
    if (sch_avro_pcf(s, &b) != 0)
        abort();
    (void)sch_avro_fingerprint(s);
    /* The fuzzer's schemas (recursive, zero-size, odd) meet the decoder:
     * the input's own bytes and its tail as bodies; both calls agree. */
    for (size_t off = 0; off < size; off += size / 2 + 1) {
        kp_buf_reset(&b);
        int v = sch_avro_validate(s, data + off, size - off, err, sizeof err);
        if (sch_avro_to_json(s, data + off, size - off, &b) != v || (v != 0 && b.len != 0))
            abort();
    }
    kp_buf_free(&b);
    sch_free(s);
    return 0;
}
