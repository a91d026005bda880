/*
 * libFuzzer target: Avro bodies in Confluent's wire format checked and
 * decoded (schema/decode.c), as the produce path and SQL's value_json meet
 * them.
 *
 * Input: a selector byte choosing one of the schemas below (every kind of
 * type, unions, a recursive tree, zero-size items, decimals), then the body.
 * Asserts:
 *   - sch_avro_validate and sch_avro_to_json agree (0 for both or -1);
 *   - on success, the JSON parses (jansson; a NUL in a map key aside,
 *     which jansson cannot hold) and on failure the output
 *     buffer is back at its length on entry;
 *   - wire-format split of the same bytes never reads past them.
 * Built and run by `make fuzz`; seeds in tests/fuzz/corpus/fuzz_sch_decode/.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "schema/sch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const schemas[] = {
    /* The unit test's fixture (tests/unit/sch_fixtures.py): every type. */
    "{\"type\":\"record\",\"name\":\"Order\",\"namespace\":\"shop\",\"fields\":["
    "{\"name\":\"id\",\"type\":\"long\"},{\"name\":\"amount\",\"type\":\"double\"},"
    "{\"name\":\"qty\",\"type\":\"int\"},{\"name\":\"ratio\",\"type\":\"float\"},"
    "{\"name\":\"paid\",\"type\":\"boolean\"},{\"name\":\"nothing\",\"type\":\"null\"},"
    "{\"name\":\"note\",\"type\":\"string\"},{\"name\":\"blob\",\"type\":\"bytes\"},"
    "{\"name\":\"status\",\"type\":{\"type\":\"enum\",\"name\":\"Status\",\"symbols\":"
    "[\"NEW\",\"PAID\",\"SHIPPED\"]}},{\"name\":\"hash\",\"type\":{\"type\":\"fixed\","
    "\"name\":\"H4\",\"size\":4}},{\"name\":\"tags\",\"type\":{\"type\":\"array\",\"items\":"
    "\"string\"}},{\"name\":\"attrs\",\"type\":{\"type\":\"map\",\"values\":\"long\"}},"
    "{\"name\":\"coupon\",\"type\":[\"null\",\"string\"],\"default\":null},"
    "{\"name\":\"next\",\"type\":[\"null\",\"Order\"],\"default\":null}]}",
    /* A tree through arrays and maps of unions. */
    ("{\"type\":\"record\",\"name\":\"T\",\"fields\":[{\"name\":\"kids\",\"type\":{\"type\":"
     "\"array\",\"items\":\"T\"}},{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":"
     "[\"null\",\"T\",\"bytes\"]}}]}"),
    /* Items that take no bytes. */
    ("{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":[\"null\",{\"type\":\"record\","
     "\"name\":\"E\",\"fields\":[]}]}}"),
    "[\"null\",\"boolean\",\"int\",\"long\",\"float\",\"double\",\"bytes\",\"string\"]",
    /* Decimals, written as numbers. */
    ("{\"type\":\"array\",\"items\":[{\"type\":\"bytes\",\"logicalType\":\"decimal\","
     "\"precision\":40,\"scale\":3},{\"type\":\"fixed\",\"name\":\"D\",\"size\":16,"
     "\"logicalType\":\"decimal\",\"precision\":38,\"scale\":30}]}"),
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sch_schema *parsed[sizeof schemas / sizeof *schemas];
    if (size < 1)
        return 0;
    size_t which = data[0] % (sizeof schemas / sizeof *schemas);
    if (!parsed[which]) {
        char err[256];
        if (sch_avro_parse(schemas[which], strlen(schemas[which]), NULL, 0, &parsed[which], err,
                           sizeof err) != 0)
            abort();
    }
    const sch_schema *s = parsed[which];
    const uint8_t *body = data + 1;
    size_t len = size - 1;
    int32_t id;
    size_t off;
    if (sch_wire_split(body, len, &id, &off) == 0 && off > len)
        abort();
    char why[256];
    int v = sch_avro_validate(s, body, len, why, sizeof why);
    kp_buf b;
    kp_buf_init(&b);
    kp_wr_raw(&b, "x", 1);
    int j = sch_avro_to_json(s, body, len, &b);
    if (v != j)
        abort();
    if (j != 0 && b.len != 1)
        abort();
    if (j == 0) {
        json_error_t je;
        json_t *t = json_loadb((const char *)b.data + 1, b.len - 1, JSON_ALLOW_NUL | JSON_DECODE_ANY, &je);
        /* jansson cannot hold a NUL in an object key; the JSON is valid
         * (SQLite takes "\u0000" in a key) */
        if (!t && !strstr(je.text, "NUL byte in object key"))
            abort();
        json_decref(t);
    }
    kp_buf_free(&b);
    return 0;
}
