/*
 * schema/: Avro schemas parsed, written canonically, checked for
 * compatibility; records of the wire format validated and decoded.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/sch.h"
#include "tests/unit/unit_run.h"

static sch_schema *parse_ok(const char *text)
{
    sch_schema *s = NULL;
    char err[512];
    int rc = sch_avro_parse(text, strlen(text), NULL, 0, &s, err, sizeof err);
    ck_assert_msg(rc == 0, "parse failed: %s (%s)", err, text);
    return s;
}

static void parse_fails(const char *text, size_t len, const char *reason)
{
    sch_schema *s = NULL;
    char err[512] = "";
    ck_assert_int_eq(sch_avro_parse(text, len, NULL, 0, &s, err, sizeof err), -1);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err, reason), "reason '%s' lacks '%s'", err, reason);
}

/* The canonical text of text, as a malloc'd C string. */
static char *canon(const char *text, bool normalize)
{
    sch_schema *s = parse_ok(text);
    kp_buf b;
    kp_buf_init(&b);
    ck_assert_int_eq(sch_avro_canonical(s, normalize, &b), 0);
    char *r = strndup((const char *)b.data, b.len);
    kp_buf_free(&b);
    sch_free(s);
    return r;
}

static void canon_is(const char *text, const char *want)
{
    char *got = canon(text, false);
    ck_assert_str_eq(got, want);
    free(got);
}

/* Java's Schema.toString() of the same schemas (Avro 1.11). */
START_TEST(test_canonical_is_java_tostring)
{
    canon_is(" \"int\" ", "\"int\"");
    canon_is("{\"type\": \"int\"}", "\"int\"");
    canon_is("{\"type\":\"string\", \"logicalType\": \"uuid\"}",
             "{\"type\":\"string\",\"logicalType\":\"uuid\"}");
    canon_is("{\n  \"namespace\": \"io.x\", \"type\": \"record\", \"name\": \"User\",\n"
             "  \"fields\": [\n    {\"type\": \"long\", \"name\": \"id\"},\n"
             "    {\"name\": \"email\", \"type\": [\"null\", \"string\"], \"default\": null},\n"
             "    {\"name\": \"next\", \"type\": [\"null\", \"User\"], \"default\": null},\n"
             "    {\"name\": \"kind\", \"type\": {\"type\": \"enum\", \"name\": \"K\",\n"
             "       \"namespace\": \"other\", \"symbols\": [\"A\", \"B\"], \"default\": \"A\"}},\n"
             "    {\"name\": \"kind2\", \"type\": \"other.K\", \"order\": \"descending\"},\n"
             "    {\"name\": \"d\", \"type\": \"double\", \"default\": 1e10, \"doc\": \"a\\nb\"},\n"
             "    {\"name\": \"h\", \"type\": {\"type\": \"fixed\", \"size\": 16, \"name\": \"MD5\"}}\n"
             "  ], \"doc\": \"who\"}",
             "{\"type\":\"record\",\"name\":\"User\",\"namespace\":\"io.x\",\"doc\":\"who\","
             "\"fields\":[{\"name\":\"id\",\"type\":\"long\"},"
             "{\"name\":\"email\",\"type\":[\"null\",\"string\"],\"default\":null},"
             "{\"name\":\"next\",\"type\":[\"null\",\"User\"],\"default\":null},"
             "{\"name\":\"kind\",\"type\":{\"type\":\"enum\",\"name\":\"K\",\"namespace\":\"other\","
             "\"symbols\":[\"A\",\"B\"],\"default\":\"A\"}},"
             "{\"name\":\"kind2\",\"type\":\"other.K\",\"order\":\"descending\"},"
             "{\"name\":\"d\",\"type\":\"double\",\"doc\":\"a\\nb\",\"default\":1.0E10},"
             "{\"name\":\"h\",\"type\":{\"type\":\"fixed\",\"name\":\"MD5\",\"size\":16}}]}");
    /* A dotted name carries its namespace; a nested type in the null
     * namespace under a named one says so. */
    canon_is("{\"type\":\"record\",\"name\":\"a.b.R\",\"fields\":[{\"name\":\"x\",\"type\":"
             "{\"type\":\"record\",\"name\":\"S\",\"namespace\":\"\",\"fields\":[]}}]}",
             "{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"a.b\",\"fields\":[{\"name\":\"x\","
             "\"type\":{\"type\":\"record\",\"name\":\"S\",\"namespace\":\"\",\"fields\":[]}}]}");
}
END_TEST

START_TEST(test_canonical_ignores_whitespace_and_attribute_order)
{
    char *a = canon("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"}]}",
                    false);
    char *b = canon("{ \"fields\" : [ { \"type\" : \"int\" , \"name\" : \"a\" } ] ,\n\t"
                    "\"name\" : \"R\" , \"type\" : \"record\" }",
                    false);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    /* Normalized: namespace spelled either way, properties in any order. */
    a = canon("{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"n\",\"p\":1,\"q\":2,\"fields\":[]}",
              true);
    b = canon("{\"type\":\"record\",\"name\":\"n.R\",\"q\":2,\"p\":1,\"fields\":[]}", true);
    ck_assert_str_eq(a, b);
    ck_assert_str_eq(a, "{\"type\":\"record\",\"name\":\"n.R\",\"fields\":[],\"p\":1,\"q\":2}");
    free(a);
    free(b);
}
END_TEST

START_TEST(test_parsing_canonical_form_and_fingerprint)
{
    /* The Avro specification's example, and Java's fingerprint of "int". */
    sch_schema *s = parse_ok("{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"n\",\"doc\":\"d\","
                             "\"fields\":[{\"name\":\"a\",\"type\":{\"type\":\"int\"},\"default\":1}]}");
    kp_buf b;
    kp_buf_init(&b);
    ck_assert_int_eq(sch_avro_pcf(s, &b), 0);
    kp_wr_raw(&b, "", 1);
    ck_assert_str_eq((char *)b.data,
                     "{\"name\":\"n.R\",\"type\":\"record\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"}]}");
    kp_buf_free(&b);
    sch_free(s);
    s = parse_ok("\"int\"");
    ck_assert_uint_eq(sch_avro_fingerprint(s), 0x7275d51a3f395c8full);
    sch_free(s);
}
END_TEST

START_TEST(test_invalid_schemas_refused_with_reason)
{
#define FAILS(t, r) parse_fails(t, strlen(t), r)
    FAILS("[", "Invalid JSON");
    FAILS("", "Invalid JSON");
    FAILS("\"Foo\"", "Undefined name: \"Foo\"");
    FAILS("{\"name\":\"x\"}", "No type");
    FAILS("{\"type\":\"record\",\"name\":\"R\"}", "Record has no fields");
    FAILS("{\"type\":\"record\",\"fields\":[]}", "No name");
    FAILS("{\"type\":\"record\",\"name\":\"1R\",\"fields\":[]}", "Illegal initial character");
    FAILS("{\"type\":\"record\",\"name\":\"R-x\",\"fields\":[]}", "Illegal character");
    FAILS("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"},"
          "{\"name\":\"a\",\"type\":\"int\"}]}", "Duplicate field a");
    FAILS("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\","
          "\"default\":\"x\"}]}", "Invalid default for field a");
    FAILS("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":"
          "{\"type\":\"record\",\"name\":\"R\",\"fields\":[]}}]}", "Can't redefine: R");
    FAILS("{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"A\"]}", "Duplicate enum symbol");
    FAILS("{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\"],\"default\":\"B\"}", "Enum Default");
    FAILS("{\"type\":\"fixed\",\"name\":\"F\"}", "Invalid or no size");
    FAILS("{\"type\":\"array\"}", "Array has no items");
    FAILS("{\"type\":\"map\"}", "Map has no values");
    FAILS("[\"int\",\"int\"]", "Duplicate in union");
    FAILS("[\"int\",[\"null\"]]", "Nested union");
    FAILS("{\"type\":\"fixed\",\"name\":\"int\",\"size\":1}", "named after primitives");
    FAILS("42", "Schema not yet supported");
#undef FAILS
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_canonical_is_java_tostring,
        test_canonical_ignores_whitespace_and_attribute_order,
        test_parsing_canonical_form_and_fingerprint,
        test_invalid_schemas_refused_with_reason,
    };
    return unit_run("schema", "avro", tests, sizeof tests / sizeof *tests, NULL, NULL, 0);
}
