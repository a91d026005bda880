/*
 * schema/: Avro schemas parsed, written canonically, checked for
 * compatibility; records of the wire format validated and decoded.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "schema/sch.h"
#include "tests/unit/sch_avro_fixtures.h"
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
    /* Comments, as Java's parser (Jackson's ALLOW_COMMENTS) takes them;
     * not inside strings. */
    canon_is("/* a */ {\"type\": // the type\n \"fixed\", \"name\": \"F\", \"size\": 2,"
             " \"doc\": \"/* kept */ // too\"} // end",
             "{\"type\":\"fixed\",\"name\":\"F\",\"doc\":\"/* kept */ // too\",\"size\":2}");
    /* Names in other scripts, as Java's Character.isLetter allows. */
    canon_is("{\"type\":\"record\",\"name\":\"Gr\u00f6\u00dfe\",\"fields\":[{\"name\":\"\u00e9t\u00e9\","
             "\"type\":\"int\"}]}",
             "{\"type\":\"record\",\"name\":\"Gr\xc3\xb6\xc3\x9f" "e\",\"fields\":[{\"name\":"
             "\"\xc3\xa9t\xc3\xa9\",\"type\":\"int\"}]}");
    /* Java reads a float or double's textual default as a number. */
    canon_is("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"double\","
             "\"default\":\"2.5\"},{\"name\":\"b\",\"type\":\"float\",\"default\":\"NaN\"}]}",
             "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"double\","
             "\"default\":2.5},{\"name\":\"b\",\"type\":\"float\",\"default\":\"NaN\"}]}");
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
    /* Normalized (Confluent's form): namespace spelled either way,
     * properties in any order. */
    a = canon("{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"n\",\"p\":1,\"q\":2,\"fields\":[]}",
              true);
    b = canon("{\"type\":\"record\",\"name\":\"n.R\",\"q\":2,\"p\":1,\"fields\":[]}", true);
    ck_assert_str_eq(a, b);
    ck_assert_str_eq(a, "{\"name\":\"n.R\",\"type\":\"record\",\"fields\":[],\"p\":1,\"q\":2}");
    free(a);
    free(b);
    /* Confluent's layout: every field's order, sorted aliases, a double's
     * default as a double, the logical type first, a reference by name. */
    a = canon("{\"type\":\"record\",\"name\":\"R\",\"aliases\":[\"z.B\",\"a.C\"],\"doc\":\"d\","
              "\"fields\":[{\"name\":\"x\",\"type\":\"double\",\"default\":1,\"order\":\"IGNORE\"},"
              "{\"name\":\"m\",\"type\":{\"type\":\"bytes\",\"y\":{\"b\":1,\"a\":2},\"scale\":2,"
              "\"precision\":9,\"logicalType\":\"decimal\"}},{\"name\":\"r\",\"type\":[\"null\",\"R\"]}]}",
              true);
    ck_assert_str_eq(a, "{\"name\":\"R\",\"type\":\"record\",\"fields\":["
                        "{\"name\":\"x\",\"type\":\"double\",\"order\":\"IGNORE\",\"default\":1.0},"
                        "{\"name\":\"m\",\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\","
                        "\"precision\":9,\"scale\":2,\"y\":{\"a\":2,\"b\":1}},\"order\":\"ASCENDING\"},"
                        "{\"name\":\"r\",\"type\":[\"null\",\"R\"],\"order\":\"ASCENDING\"}],"
                        "\"doc\":\"d\",\"aliases\":[\"a.C\",\"z.B\"]}");
    /* ... which parses back to itself. */
    b = canon(a, true);
    ck_assert_str_eq(a, b);
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
    FAILS("\"int\" /* unterminated", "Invalid JSON");
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
    FAILS("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"double\","
          "\"default\":\"abc\"}]}", "Invalid default for field a");
    FAILS("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\","
          "\"default\":1.5}]}", "Invalid default for field a");
    FAILS("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\","
          "\"default\":4294967296}]}", "Invalid default for field a");
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


/* ---- compatibility ------------------------------------------------------- */
#define REC(fields) "{\"type\":\"record\",\"name\":\"R\",\"fields\":[" fields "]}"
#define F(n, t) "{\"name\":\"" n "\",\"type\":" t "}"
#define NREC(name, fields) "{\"type\":\"record\",\"name\":\"" name "\",\"fields\":[" fields "]}"
#define FD(n, t, d) "{\"name\":\"" n "\",\"type\":" t ",\"default\":" d "}"

/* compatible(reader, writer): 1 or 0; on 0 the reason names want. */
static void compat_is(const char *reader, const char *writer, int want, const char *reason)
{
    sch_schema *r = parse_ok(reader), *w = parse_ok(writer);
    char why[2048] = "";
    int got = sch_avro_compatible(r, w, why, sizeof why);
    ck_assert_msg(got == want, "reader %s writer %s: got %d (%s)", reader, writer, got, why);
    if (!want)
        ck_assert_msg(strstr(why, reason), "reason '%s' lacks '%s'", why, reason);
    sch_free(r);
    sch_free(w);
}

START_TEST(test_compat_fields_added_removed_renamed_promoted)
{
    const char *v1 = REC(F("a", "\"int\""));
    const char *added_default = REC(F("a", "\"int\"") "," FD("b", "\"string\"", "\"x\""));
    const char *added_no_default = REC(F("a", "\"int\"") "," F("b", "\"string\""));
    const char *removed = REC("");
    const char *renamed = REC("{\"name\":\"a2\",\"type\":\"int\",\"aliases\":[\"a\"]}");
    const char *promoted = REC(F("a", "\"long\""));
    /* Added with a default: both directions. */
    compat_is(added_default, v1, 1, NULL);
    compat_is(v1, added_default, 1, NULL);
    /* Added without: the new reader cannot fill it from old data. */
    compat_is(added_no_default, v1, 0, "READER_FIELD_MISSING_DEFAULT_VALUE");
    compat_is(added_no_default, v1, 0, "The field 'b' at path '/fields/1'");
    compat_is(v1, added_no_default, 1, NULL);
    /* Every incompatibility, one a line, as Java goes on past the first. */
    {
        sch_schema *r = parse_ok(REC(F("a", "\"int\"") "," F("b", "\"int\"") "," F("c", "\"int\""))),
                   *w = parse_ok(REC(F("a", "\"string\"")));
        char why[4096];
        ck_assert_int_eq(sch_avro_compatible(r, w, why, sizeof why), 0);
        ck_assert_str_eq(why,
                         "{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type') of a "
                         "field in the reader schema does not match with the writer schema', "
                         "additionalInfo:'reader type: INT not compatible with writer type: STRING'}\n"
                         "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'b' at "
                         "path '/fields/1' in the reader schema has no default value and is missing in "
                         "the writer schema', additionalInfo:'b'}\n"
                         "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'c' at "
                         "path '/fields/2' in the reader schema has no default value and is missing in "
                         "the writer schema', additionalInfo:'c'}");
        /* Only whole lines: a buffer for one holds the first. */
        char small[300];
        ck_assert_int_eq(sch_avro_compatible(r, w, small, sizeof small), 0);
        ck_assert_ptr_null(strchr(small, '\n'));
        ck_assert_msg(strstr(small, "TYPE_MISMATCH") && small[strlen(small) - 1] == '}', "%s", small);
        sch_free(r);
        sch_free(w);
    }
    /* Removed: old readers need a default for it. */
    compat_is(removed, v1, 1, NULL);
    compat_is(v1, removed, 0, "READER_FIELD_MISSING_DEFAULT_VALUE");
    compat_is(REC(FD("a", "\"int\"", "0")), removed, 1, NULL);
    /* Renamed with an alias: the reader finds the writer's old name. */
    compat_is(renamed, v1, 1, NULL);
    compat_is(v1, renamed, 0, "additionalInfo:'a'");
    compat_is(REC(F("a2", "\"int\"")), v1, 0, "READER_FIELD_MISSING_DEFAULT_VALUE");
    /* Promoted: int to long reads, long to int does not. */
    compat_is(promoted, v1, 1, NULL);
    compat_is(v1, promoted, 0, "reader type: INT not compatible with writer type: LONG");
    compat_is(REC(F("a", "\"float\"")), promoted, 1, NULL);
    compat_is(REC(F("a", "\"double\"")), REC(F("a", "\"float\"")), 1, NULL);
    compat_is(REC(F("a", "\"float\"")), REC(F("a", "\"double\"")), 0, "TYPE_MISMATCH");
    compat_is("\"string\"", "\"bytes\"", 1, NULL);
    compat_is("\"bytes\"", "\"string\"", 1, NULL);
    compat_is("\"int\"", "\"string\"", 0, "TYPE_MISMATCH");
    /* A nested record's field: the path says where. */
    compat_is(REC(F("n", NREC("N", F("a", "\"int\"") "," F("b", "\"int\"")))),
              REC(F("n", NREC("N", F("a", "\"int\"")))), 0, "path '/fields/0/type/fields/1'");
}
END_TEST

START_TEST(test_compat_enums_unions_fixed_names)
{
#define ENUM(syms, extra) "{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[" syms "]" extra "}"
    compat_is(ENUM("\"A\",\"B\",\"C\"", ""), ENUM("\"A\",\"B\"", ""), 1, NULL);
    compat_is(ENUM("\"A\",\"B\"", ""), ENUM("\"A\",\"B\",\"C\"", ""), 0,
              "MISSING_ENUM_SYMBOLS");
    compat_is(ENUM("\"A\",\"B\"", ""), ENUM("\"A\",\"B\",\"C\"", ""), 0, "[C]");
    compat_is(ENUM("\"A\",\"B\"", ",\"default\":\"A\""), ENUM("\"A\",\"B\",\"C\"", ""), 1,
              NULL);
    /* Unions: a reader union needs a branch for every writer type. */
    compat_is("[\"null\",\"string\"]", "\"string\"", 1, NULL);
    compat_is("[\"null\",\"long\"]", "\"int\"", 1, NULL);
    compat_is("[\"null\",\"string\"]", "\"int\"", 0, "MISSING_UNION_BRANCH");
    compat_is("\"string\"", "[\"null\",\"string\"]", 0, "TYPE_MISMATCH");
    compat_is("[\"null\",\"string\",\"int\"]", "[\"string\",\"null\"]", 1, NULL);
    compat_is("[\"null\",\"string\"]", "[\"null\",\"string\",\"int\"]", 0,
              "reader union lacking writer type: INT");
    /* Fixed: name and size. */
    compat_is("{\"type\":\"fixed\",\"name\":\"F\",\"size\":4}",
              "{\"type\":\"fixed\",\"name\":\"F\",\"size\":8}", 0, "FIXED_SIZE_MISMATCH");
    compat_is("{\"type\":\"fixed\",\"name\":\"F\",\"size\":4}",
              "{\"type\":\"fixed\",\"name\":\"G\",\"size\":4}", 0, "NAME_MISMATCH");
    /* A record renamed, with the old name as an alias; namespaces aside
     * (Java compares short names). */
    compat_is("{\"type\":\"record\",\"name\":\"New\",\"aliases\":[\"Old\"],\"fields\":[]}",
              "{\"type\":\"record\",\"name\":\"Old\",\"fields\":[]}", 1, NULL);
    compat_is("{\"type\":\"record\",\"name\":\"New\",\"fields\":[]}",
              "{\"type\":\"record\",\"name\":\"Old\",\"fields\":[]}", 0, "expected: Old");
    compat_is("{\"type\":\"record\",\"name\":\"a.R\",\"fields\":[]}",
              "{\"type\":\"record\",\"name\":\"b.R\",\"fields\":[]}", 1, NULL);
    /* Arrays and maps compare their items and values. */
    compat_is("{\"type\":\"array\",\"items\":\"long\"}", "{\"type\":\"array\",\"items\":\"int\"}",
              1, NULL);
    compat_is("{\"type\":\"map\",\"values\":\"int\"}", "{\"type\":\"map\",\"values\":\"long\"}",
              0, "/values");
    compat_is("{\"type\":\"map\",\"values\":\"int\"}", "{\"type\":\"array\",\"items\":\"int\"}",
              0, "TYPE_MISMATCH");
#undef ENUM
}
END_TEST

/* A linked list, evolved: the check terminates and decides by the fields. */
#define LIST(extra) "{\"type\":\"record\",\"name\":\"Node\",\"fields\":[" \
    "{\"name\":\"v\",\"type\":\"int\"},{\"name\":\"next\",\"type\":[\"null\",\"Node\"]}" extra "]}"

START_TEST(test_compat_recursive_types_terminate)
{
    compat_is(LIST(""), LIST(""), 1, NULL);
    compat_is(LIST(",{\"name\":\"w\",\"type\":\"long\",\"default\":0}"), LIST(""), 1, NULL);
    compat_is(LIST(",{\"name\":\"w\",\"type\":\"long\"}"), LIST(""), 0,
              "READER_FIELD_MISSING_DEFAULT_VALUE");
    /* Mutual recursion through a map and an array. */
    const char *ab = "{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"b\",\"type\":"
                     "{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":\"B\",\"fields\":"
                     "[{\"name\":\"a\",\"type\":{\"type\":\"map\",\"values\":\"A\"}}]}}}]}";
    compat_is(ab, ab, 1, NULL);
}
END_TEST

/* Forty levels of records, each with ten fields of the next: 10^40 paths
 * to the one incompatible leaf, decided at once (each pair checked once). */
static void levels(kp_buf *b, int lvl, const char *leaf)
{
    if (lvl == 40) {
        kp_buf_printf(b, "{\"type\":\"record\",\"name\":\"L40\",\"fields\":[{\"name\":\"x\","
                         "\"type\":\"%s\"}]}", leaf);
        return;
    }
    kp_buf_printf(b, "{\"type\":\"record\",\"name\":\"L%d\",\"fields\":[{\"name\":\"f0\",\"type\":",
                  lvl);
    levels(b, lvl + 1, leaf);
    kp_buf_printf(b, "}");
    for (int f = 1; f < 10; f++)
        kp_buf_printf(b, ",{\"name\":\"f%d\",\"type\":\"L%d\"}", f, lvl + 1);
    kp_buf_printf(b, "]}");
}

START_TEST(test_compat_shared_types_checked_once)
{
    kp_buf r, w;
    kp_buf_init(&r);
    kp_buf_init(&w);
    levels(&r, 0, "int");
    levels(&w, 0, "string");
    kp_wr_raw(&r, "", 1);
    kp_wr_raw(&w, "", 1);
    compat_is((char *)r.data, (char *)r.data, 1, NULL);
    compat_is((char *)r.data, (char *)w.data, 0, "TYPE_MISMATCH");
    /* In a reader union too (quiet first, then reported). */
    kp_buf u;
    kp_buf_init(&u);
    kp_buf_printf(&u, "[\"null\",%s]", (char *)r.data);
    kp_wr_raw(&u, "", 1);
    compat_is((char *)u.data, (char *)w.data, 0, "MISSING_UNION_BRANCH");
    kp_buf_free(&u);
    kp_buf_free(&r);
    kp_buf_free(&w);
}
END_TEST

/* 300 random evolutions, decided as python3-avro's port of Java's checker
 * decided them (tests/unit/sch_fixtures.py). */
START_TEST(test_compat_agrees_with_python_avro)
{
    int both = 0;
    for (size_t i = 0; i < sizeof sch_fx_compat / sizeof *sch_fx_compat; i++) {
        sch_schema *r = parse_ok(sch_fx_compat[i].reader), *w = parse_ok(sch_fx_compat[i].writer);
        char why[2048] = "";
        int got = sch_avro_compatible(r, w, why, sizeof why);
        ck_assert_msg(got == sch_fx_compat[i].compatible, "#%zu reader %s writer %s: %d (%s)", i,
                      sch_fx_compat[i].reader, sch_fx_compat[i].writer, got, why);
        ck_assert_int_eq(!got, why[0] != 0);
        both += got;
        sch_free(r);
        sch_free(w);
    }
    /* Both verdicts are well represented. */
    ck_assert_int_gt(both, 60);
    ck_assert_int_lt(both, 240);
}
END_TEST

START_TEST(test_check_level_directions_and_transitive)
{
    sch_schema *v1 = parse_ok(REC(F("a", "\"int\"")));
    sch_schema *v2 = parse_ok(REC(F("a", "\"int\"") "," FD("b", "\"int\"", "1")));
    sch_schema *v3 = parse_ok(REC(FD("b", "\"int\"", "1")));   /* a removed */
    const sch_schema *prev[] = {v1, v2};
    char why[2048];
    /* v3 reads v1 and v2 (a ignored, b from its default or the data). */
    ck_assert_int_eq(sch_avro_check_level(SCH_LEVEL_BACKWARD, v3, prev, 2, why, sizeof why), 1);
    ck_assert_int_eq(sch_avro_check_level(SCH_LEVEL_BACKWARD_TRANSITIVE, v3, prev, 2, why, sizeof why), 1);
    /* Old readers need a: v1 and v2 cannot read v3. */
    ck_assert_int_eq(sch_avro_check_level(SCH_LEVEL_FORWARD, v3, prev, 2, why, sizeof why), 0);
    ck_assert_msg(strstr(why, "in the old schema has no default value"), "%s", why);
    ck_assert_int_eq(sch_avro_check_level(SCH_LEVEL_FULL, v3, prev, 2, why, sizeof why), 0);
    ck_assert_int_eq(sch_avro_check_level(SCH_LEVEL_NONE, v3, prev, 2, why, sizeof why), 1);
    /* Transitive sees what the latest alone does not: v4 drops b's default
     * (reads v2, not v1). */
    sch_schema *v4 = parse_ok(REC(F("a", "\"int\"") "," F("b", "\"int\"")));
    ck_assert_int_eq(sch_avro_check_level(SCH_LEVEL_BACKWARD, v4, prev, 2, why, sizeof why), 1);
    ck_assert_int_eq(sch_avro_check_level(SCH_LEVEL_BACKWARD_TRANSITIVE, v4, prev, 2, why, sizeof why),
                     0);
    ck_assert_msg(strstr(why, "The field 'b' at path '/fields/1' in the new schema"), "%s", why);
    sch_level l;
    ck_assert_int_eq(sch_level_parse("FULL_TRANSITIVE", &l), 0);
    ck_assert_int_eq(l, SCH_LEVEL_FULL_TRANSITIVE);
    ck_assert_str_eq(sch_level_name(l), "FULL_TRANSITIVE");
    ck_assert_int_eq(sch_level_parse("full", &l), -1);
    sch_type t;
    ck_assert_int_eq(sch_type_parse("PROTOBUF", &t), 0);
    ck_assert_int_eq(t, SCH_TYPE_PROTOBUF);
    ck_assert_int_eq(sch_type_parse(NULL, &t), 0);
    ck_assert_int_eq(t, SCH_TYPE_AVRO);
    ck_assert_int_eq(sch_type_parse("XML", &t), -1);
    sch_free(v1);
    sch_free(v2);
    sch_free(v3);
    sch_free(v4);
}
END_TEST

/* ---- records: validate and decode bytes python3-avro encoded ---------------- */
/* JSON values equal, numbers by value (1.0 and 1 are one number). */
static bool json_same(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    if (json_typeof(a) != json_typeof(b))
        return false;
    if (json_is_array(a)) {
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!json_same(json_array_get(a, i), json_array_get(b, i)))
                return false;
        return true;
    }
    if (json_is_object(a)) {
        const char *k;
        json_t *v;
        if (json_object_size(a) != json_object_size(b))
            return false;
        json_object_foreach((json_t *)a, k, v) {
            json_t *o = json_object_get(b, k);
            if (!o || !json_same(v, o))
                return false;
        }
        return true;
    }
    return json_equal((json_t *)a, (json_t *)b);
}

START_TEST(test_python_avro_bodies_validate_and_decode)
{
    sch_schema *s = parse_ok(sch_fx_schema);
    kp_buf b;
    kp_buf_init(&b);
    for (size_t i = 0; i < sizeof sch_fx / sizeof *sch_fx; i++) {
        const uint8_t *body = (const uint8_t *)sch_fx[i].body;
        size_t len = sch_fx[i].len;
        char why[256] = "";
        ck_assert_msg(sch_avro_validate(s, body, len, why, sizeof why) == 0, "#%zu: %s", i, why);
        kp_buf_reset(&b);
        kp_wr_raw(&b, "prefix", 6);
        ck_assert_int_eq(sch_avro_to_json(s, body, len, &b), 0);
        json_error_t je;
        json_t *got = json_loadb((const char *)b.data + 6, b.len - 6, JSON_ALLOW_NUL, &je);
        ck_assert_msg(got, "#%zu: not JSON (%s): %.*s", i, je.text, (int)b.len - 6, b.data + 6);
        json_t *want = json_loads(sch_fx[i].json, JSON_ALLOW_NUL, &je);
        ck_assert_ptr_nonnull(want);
        ck_assert_msg(json_same(got, want), "#%zu:\n got %.*s\nwant %s", i, (int)b.len - 6,
                      b.data + 6, sch_fx[i].json);
        json_decref(got);
        json_decref(want);
        /* Every shorter body fails, and so does one byte more. */
        for (size_t cut = 0; cut < len; cut++) {
            ck_assert_msg(sch_avro_validate(s, body, cut, NULL, 0) == -1, "#%zu cut %zu", i, cut);
            size_t before = b.len;
            ck_assert_int_eq(sch_avro_to_json(s, body, cut, &b), -1);
            ck_assert_uint_eq(b.len, before);
        }
        uint8_t *more = malloc(len + 1);
        memcpy(more, body, len);
        more[len] = 0;
        ck_assert_int_eq(sch_avro_validate(s, more, len + 1, why, sizeof why), -1);
        ck_assert_msg(strstr(why, "1 bytes left after the value"), "%s", why);
        free(more);
    }
    kp_buf_free(&b);
    sch_free(s);
}
END_TEST

/* 150 random schemas of every kind with random data (tests/unit/sch_fixtures.py). */
START_TEST(test_random_bodies_decode_as_python_avro_reads_them)
{
    kp_buf b;
    kp_buf_init(&b);
    for (size_t i = 0; i < sizeof sch_fx_random / sizeof *sch_fx_random; i++) {
        sch_schema *s = parse_ok(sch_fx_random[i].schema);
        const uint8_t *body = (const uint8_t *)sch_fx_random[i].body;
        char why[256] = "";
        ck_assert_msg(sch_avro_validate(s, body, sch_fx_random[i].len, why, sizeof why) == 0,
                      "#%zu %s: %s", i, sch_fx_random[i].schema, why);
        kp_buf_reset(&b);
        ck_assert_int_eq(sch_avro_to_json(s, body, sch_fx_random[i].len, &b), 0);
        json_error_t je;
        json_t *got = json_loadb((const char *)b.data, b.len, JSON_ALLOW_NUL | JSON_DECODE_ANY, &je);
        json_t *want = json_loads(sch_fx_random[i].json, JSON_ALLOW_NUL | JSON_DECODE_ANY, &je);
        ck_assert_ptr_nonnull(want);
        /* jansson holds no NUL in a key; those few are compared as text */
        if (!got)
            ck_assert_msg(strstr(je.text, "NUL byte in object key"), "#%zu: %s", i, je.text);
        else
            ck_assert_msg(json_same(got, want), "#%zu %s:\n got %.*s\nwant %s", i,
                          sch_fx_random[i].schema, (int)b.len, b.data, sch_fx_random[i].json);
        json_decref(got);
        json_decref(want);
        if (sch_fx_random[i].len)
            ck_assert_int_eq(sch_avro_validate(s, body, sch_fx_random[i].len - 1, NULL, 0), -1);
        sch_free(s);
    }
    kp_buf_free(&b);
}
END_TEST

static int validate(const char *schema, const void *body, size_t len, char *why, size_t n)
{
    sch_schema *s = parse_ok(schema);
    int rc = sch_avro_validate(s, body, len, why, n);
    sch_free(s);
    return rc;
}

static void refused(const char *schema, const void *body, size_t len, const char *reason)
{
    char why[256] = "";
    ck_assert_int_eq(validate(schema, body, len, why, sizeof why), -1);
    ck_assert_msg(strstr(why, reason), "reason '%s' lacks '%s'", why, reason);
}

START_TEST(test_validate_refuses_bad_bodies)
{
    refused("[\"null\",\"int\"]", "\x04", 1, "union index 2 out of range");
    refused("[\"null\",\"int\"]", "\x01", 1, "union index -1 out of range");
    refused("{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"B\"]}", "\x04", 1,
            "enum E index 2 out of range");
    refused("\"string\"", "\x01", 1, "length -1 out of range");
    refused("\"string\"", "\x0a" "abc", 4, "length 5 out of range");
    refused("\"boolean\"", "\x02", 1, "boolean byte 2");
    refused("\"int\"", "\x80\x80\x80\x80\x80\x01", 6, "varint longer than 5 bytes");
    refused("\"int\"", "\xfe\xff\xff\xff\x1f", 5, "int out of range");
    refused("\"long\"", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11, "varint longer");
    refused("\"double\"", "1234567", 7, "truncated double");
    refused("{\"type\":\"fixed\",\"name\":\"F\",\"size\":4}", "abc", 3, "truncated fixed F");
    refused("\"null\"", "x", 1, "1 bytes left");
    /* 2^62 nulls in one block, in 10 bytes: refused at once, not looped over. */
    refused("{\"type\":\"array\",\"items\":\"null\"}", "\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 10,
            "more than the body can hold");
    /* A record that holds itself without end: the data cannot nest forever. */
    refused("{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"a\",\"type\":\"A\"}]}", "", 0,
            "nested deeper");
    /* Negative block counts carry a byte size (Avro's skippable blocks). */
    char why[256];
    ck_assert_int_eq(validate("{\"type\":\"array\",\"items\":\"int\"}", "\x03\x04\x02\x04\x00", 5, why,
                              sizeof why), 0);
    ck_assert_int_eq(validate("{\"type\":\"map\",\"values\":\"int\"}", "\x02\x02k\x02\x00", 5, why,
                              sizeof why), 0);
    refused("{\"type\":\"array\",\"items\":\"int\"}", "\x03\x40\x02\x04\x00", 5, "block size 32 out of range");
    /* The wire format's prefix. */
    int32_t id;
    size_t off;
    ck_assert_int_eq(sch_wire_split((const uint8_t *)"\0\0\0\1\x2c" "x", 6, &id, &off), 0);
    ck_assert_int_eq(id, 300);
    ck_assert_uint_eq(off, 5);
    ck_assert_int_eq(sch_wire_split((const uint8_t *)"\0\0\0\1", 4, &id, &off), -1);
    ck_assert_int_eq(sch_wire_split((const uint8_t *)"\1\0\0\0\1", 5, &id, &off), -1);
}
END_TEST

START_TEST(test_to_json_escapes_and_replaces)
{
    sch_schema *s = parse_ok("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"s\",\"type\":"
                             "\"string\"},{\"name\":\"d\",\"type\":\"double\"},{\"name\":\"u\",\"type\":"
                             "[\"null\",{\"type\":\"map\",\"values\":\"boolean\"}]}]}");
    /* s = "a\xfe\xad\xbe\"" (invalid UTF-8: a finding of fuzz_sch_decode),
     * d = NaN, u = branch 1: {"k\n": true} */
    const uint8_t body[] = {0x0a, 'a', 0xfe, 0xad, 0xbe, '"', 0, 0, 0, 0, 0, 0, 0xf8, 0x7f,
                            0x02, 0x02, 0x04, 'k', '\n', 0x01, 0x00};
    kp_buf b;
    kp_buf_init(&b);
    ck_assert_int_eq(sch_avro_to_json(s, body, sizeof body, &b), 0);
    kp_wr_raw(&b, "", 1);
    ck_assert_str_eq((char *)b.data, "{\"s\":\"a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\\\"\",\"d\":null,\"u\":{\"k\\n\":true}}");
    kp_buf_free(&b);
    sch_free(s);
}
END_TEST

/* Every double and float written by to_json reads back as itself (the
 * short decimal path and the %.17g one), over decimals and random bits. */
START_TEST(test_to_json_numbers_read_back_exactly)
{
    sch_schema *d = parse_ok("{\"type\":\"array\",\"items\":\"double\"}");
    sch_schema *f = parse_ok("{\"type\":\"array\",\"items\":\"float\"}");
    sch_schema *l = parse_ok("{\"type\":\"array\",\"items\":\"long\"}");
    kp_buf body, out;
    kp_buf_init(&body);
    kp_buf_init(&out);
    srand(7);
    for (int round = 0; round < 200; round++) {
        double xs[64];
        float fs[64];
        for (int i = 0; i < 64; i++) {
            uint64_t bits = ((uint64_t)rand() << 42) ^ ((uint64_t)rand() << 21) ^ (uint64_t)rand();
            switch (i % 4) {
            case 0: memcpy(&xs[i], &bits, 8); break;                      /* any bits */
            case 1: xs[i] = (double)(rand() % 2000000 - 1000000) / 100; break; /* cents */
            case 2: xs[i] = (rand() % 1000) * 1e-7 - 3e-5; break;           /* small */
            default: xs[i] = 9.99 + (i + round) * 1.25; break;
            }
            if (isnan(xs[i]) || isinf(xs[i]))
                xs[i] = -0.0;
            fs[i] = (float)xs[i];
            if (isinf(fs[i]))
                fs[i] = 1.5f;
        }
        for (int which = 0; which < 2; which++) {
            kp_buf_reset(&body);
            kp_wr_raw(&body, "\x80\x01", 2); /* 64 items */
            for (int i = 0; i < 64; i++)
                kp_wr_raw(&body, which ? (void *)&fs[i] : (void *)&xs[i], which ? 4 : 8);
            kp_wr_raw(&body, "", 1);
            kp_buf_reset(&out);
            ck_assert_int_eq(sch_avro_to_json(which ? f : d, body.data, body.len, &out), 0);
            kp_wr_raw(&out, "", 1);
            char *p = (char *)out.data + 1;
            for (int i = 0; i < 64; i++) {
                char *e;
                double got = strtod(p, &e);
                ck_assert_ptr_ne(e, p);
                if (which)
                    ck_assert_msg((float)got == fs[i], "float %.9g written %.*s", fs[i], (int)(e - p), p);
                else
                    ck_assert_msg(got == xs[i] && signbit(got) == signbit(xs[i]),
                                  "double %.17g written %.*s", xs[i], (int)(e - p), p);
                p = e + 1;
            }
        }
    }
    /* Longs at the edges. */
    kp_buf_reset(&body);
    kp_wr_raw(&body, "\x06\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00\x00",
              23);
    kp_buf_reset(&out);
    ck_assert_int_eq(sch_avro_to_json(l, body.data, body.len, &out), 0);
    kp_wr_raw(&out, "", 1);
    ck_assert_str_eq((char *)out.data, "[9223372036854775807,-9223372036854775808,0]");
    kp_buf_free(&body);
    kp_buf_free(&out);
    sch_free(d);
    sch_free(f);
    sch_free(l);
}
END_TEST

/* Decimals as exact numbers; the bytes are python3-avro's encoding of
 * Decimal("12345.67"), ("-0.0005"), ("-123456789012345678"), ("0.000"). */
START_TEST(test_to_json_decimals_as_numbers)
{
    sch_schema *s = parse_ok(
        "{\"type\":\"record\",\"name\":\"P\",\"fields\":["
        "{\"name\":\"amount\",\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":12,"
        "\"scale\":2}},"
        "{\"name\":\"neg\",\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":12,"
        "\"scale\":4}},"
        "{\"name\":\"fx\",\"type\":{\"type\":\"fixed\",\"name\":\"D\",\"size\":8,\"logicalType\":"
        "\"decimal\",\"precision\":18,\"scale\":0}},"
        "{\"name\":\"zero\",\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":5,"
        "\"scale\":3}}]}");
    const uint8_t body[] = {0x06, 0x12, 0xd6, 0x87, 0x02, 0xfb, 0xfe, 0x49, 0x64, 0xb4,
                            0x59, 0xcf, 0x0c, 0xb2, 0x02, 0x00};
    kp_buf b;
    kp_buf_init(&b);
    ck_assert_int_eq(sch_avro_to_json(s, body, sizeof body, &b), 0);
    kp_wr_raw(&b, "", 1);
    ck_assert_str_eq((char *)b.data, "{\"amount\":12345.67,\"neg\":-0.0005,"
                                     "\"fx\":-123456789012345678,\"zero\":0.000}");
    kp_buf_free(&b);
    sch_free(s);
    /* A decimal logical type Java would not accept (no precision) is plain bytes. */
    s = parse_ok("{\"type\":\"bytes\",\"logicalType\":\"decimal\"}");
    kp_buf_init(&b);
    ck_assert_int_eq(sch_avro_to_json(s, (const uint8_t *)"\x02" "A", 2, &b), 0);
    kp_wr_raw(&b, "", 1);
    ck_assert_str_eq((char *)b.data, "\"A\"");
    kp_buf_free(&b);
    sch_free(s);
}
END_TEST

/* ---- references and hostile schemas ------------------------------------------- */
START_TEST(test_references_define_names)
{
    const char *addr = "{\"type\":\"record\",\"name\":\"Address\",\"namespace\":\"com.x\",\"fields\":"
                       "[{\"name\":\"city\",\"type\":\"string\"}]}";
    const char *cust = "{\"type\":\"record\",\"name\":\"Customer\",\"namespace\":\"com.x\",\"fields\":"
                       "[{\"name\":\"home\",\"type\":\"Address\"},{\"name\":\"work\",\"type\":"
                       "\"com.x.Address\"}]}";
    sch_ref refs[] = {{"com.x.Address", addr, strlen(addr)}};
    sch_schema *s = NULL;
    char err[256] = "";
    ck_assert_int_eq(sch_avro_parse(cust, strlen(cust), refs, 1, &s, err, sizeof err), 0);
    kp_buf b;
    kp_buf_init(&b);
    ck_assert_int_eq(sch_avro_canonical(s, false, &b), 0);
    kp_wr_raw(&b, "", 1);
    /* The referenced type is written by name, as Confluent stores it. */
    ck_assert_str_eq((char *)b.data,
                     "{\"type\":\"record\",\"name\":\"Customer\",\"namespace\":\"com.x\",\"fields\":"
                     "[{\"name\":\"home\",\"type\":\"Address\"},{\"name\":\"work\",\"type\":\"Address\"}]}");
    ck_assert_str_eq(sch_avro_name(s), "com.x.Customer");
    ck_assert_int_eq(sch_avro_validate(s, (const uint8_t *)"\x02" "a\x02" "b", 4, NULL, 0), 0);
    kp_buf_free(&b);
    sch_free(s);
    /* Without the reference the name is unknown; a broken reference says so. */
    ck_assert_int_eq(sch_avro_parse(cust, strlen(cust), NULL, 0, &s, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "Undefined name: \"Address\""), "%s", err);
    sch_ref bad[] = {{"broken", "{\"type\":", 8}};
    ck_assert_int_eq(sch_avro_parse(cust, strlen(cust), bad, 1, &s, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "in reference broken: Invalid JSON"), "%s", err);
    /* A reference cannot redefine a name of the schema. */
    sch_ref twice[] = {{"a", addr, strlen(addr)}, {"b", addr, strlen(addr)}};
    ck_assert_int_eq(sch_avro_parse(cust, strlen(cust), twice, 2, &s, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "Can't redefine: com.x.Address"), "%s", err);
}
END_TEST

static char *repeat(const char *a, size_t n, const char *mid, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), lm = strlen(mid);
    char *t = malloc(n * (la + lb) + lm + 1), *p = t;
    for (size_t i = 0; i < n; i++, p += la)
        memcpy(p, a, la);
    memcpy(p, mid, lm);
    p += lm;
    for (size_t i = 0; i < n; i++, p += lb)
        memcpy(p, b, lb);
    *p = 0;
    return t;
}

/* Level k: a union of ten records, each with a field x of level k + 1's
 * union (the first defines level k + 1's records, the others name them). */
static void union_levels(kp_buf *b, int k, int depth)
{
    kp_buf_printf(b, "[");
    for (int j = 0; j < 10; j++) {
        kp_buf_printf(b, "%s{\"type\":\"record\",\"name\":\"R%d_%d\",\"fields\":[{\"name\":\"x\","
                         "\"type\":", j ? "," : "", k, j);
        if (k + 1 == depth) {
            kp_buf_printf(b, "\"int\"");
        } else if (j == 0) {
            union_levels(b, k + 1, depth);
        } else {
            kp_buf_printf(b, "[");
            for (int i = 0; i < 10; i++)
                kp_buf_printf(b, "%s\"R%d_%d\"", i ? "," : "", k + 1, i);
            kp_buf_printf(b, "]");
        }
        kp_buf_printf(b, "}]}");
    }
    kp_buf_printf(b, "]");
}

/* An enum of 200,000 symbols and a record of 50,000 fields: duplicates
 * found and schemas compared without n^2 work (10^10 comparisons). */
START_TEST(test_hostile_wide_schemas_linear)
{
    kp_buf b;
    kp_buf_init(&b);
    kp_buf_printf(&b, "{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[");
    for (int i = 0; i < 200000; i++)
        kp_buf_printf(&b, "%s\"s%d\"", i ? "," : "", i);
    kp_buf_printf(&b, "]}");
    kp_wr_raw(&b, "", 1);
    sch_schema *e = parse_ok((char *)b.data);
    ck_assert_int_eq(sch_avro_compatible(e, e, NULL, 0), 1);
    sch_free(e);
    b.len -= 3; /* a duplicate at the end */
    kp_buf_printf(&b, ",\"s7\"]}");
    parse_fails((char *)b.data, b.len, "Duplicate enum symbol: s7");
    kp_buf_reset(&b);
    kp_buf_printf(&b, "{\"type\":\"record\",\"name\":\"R\",\"fields\":[");
    for (int i = 0; i < 50000; i++)
        kp_buf_printf(&b, "%s{\"name\":\"f%d\",\"type\":\"int\"}", i ? "," : "", i);
    kp_buf_printf(&b, "]}");
    kp_wr_raw(&b, "", 1);
    char *fwd = strdup((char *)b.data);
    kp_buf_reset(&b);
    kp_buf_printf(&b, "{\"type\":\"record\",\"name\":\"R\",\"fields\":[");
    for (int i = 50000; i-- > 0;) /* reversed: no field at its own position */
        kp_buf_printf(&b, "{\"name\":\"f%d\",\"type\":\"long\"}%s", i, i ? "," : "");
    kp_buf_printf(&b, "]}");
    kp_wr_raw(&b, "", 1);
    /* 1.25 * 10^9 name comparisons: the work budget answers instead. */
    sch_schema *r = parse_ok((char *)b.data), *w = parse_ok(fwd);
    char why[1024];
    ck_assert_int_eq(sch_avro_compatible(r, w, why, sizeof why), 0);
    ck_assert_msg(strstr(why, "take too long to compare"), "%s", why);
    ck_assert_int_eq(sch_avro_compatible(w, w, why, sizeof why), 1);
    sch_free(r);
    sch_free(w);
    free(fwd);
    kp_buf_free(&b);
}
END_TEST

START_TEST(test_hostile_defaults_bounded)
{
    /* A default every branch half-matches: 10^12 ways to try, refused once
     * the budget is spent. */
    kp_buf b;
    kp_buf_init(&b);
    kp_buf_printf(&b, "{\"type\":\"record\",\"name\":\"Top\",\"fields\":[{\"name\":\"f\",\"type\":");
    union_levels(&b, 0, 12);
    kp_buf_printf(&b, ",\"default\":");
    for (int i = 0; i < 12; i++)
        kp_buf_printf(&b, "{\"x\":");
    kp_buf_printf(&b, "\"not an int\"");
    for (int i = 0; i < 12; i++)
        kp_buf_printf(&b, "}");
    kp_buf_printf(&b, "}]}");
    parse_fails((char *)b.data, b.len, "defaults take more than");
    kp_buf_free(&b);
}
END_TEST

START_TEST(test_hostile_schemas_refused_cleanly)
{
    /* 10,000 nested arrays and 1 MiB of brackets: jansson's depth limit. */
    char *t = repeat("{\"type\":\"array\",\"items\":", 10000, "\"int\"", "}");
    parse_fails(t, strlen(t), "Invalid JSON");
    free(t);
    t = repeat("[", 1 << 20, "", "");
    parse_fails(t, strlen(t), "Invalid JSON");
    free(t);
    /* Within JSON's limit, deeper than a schema may nest. */
    t = repeat("{\"type\":\"array\",\"items\":", 300, "\"int\"", "}");
    parse_fails(t, strlen(t), "nested deeper than 128");
    free(t);
    /* ... and a legal depth parses. */
    t = repeat("{\"type\":\"array\",\"items\":", 100, "\"int\"", "}");
    sch_schema *s = parse_ok(t);
    sch_free(s);
    free(t);
    /* A 100,000-byte name. */
    char *name = repeat("n", 100000, "", "");
    size_t n = strlen(name) + 100;
    t = malloc(n);
    snprintf(t, n, "{\"type\":\"fixed\",\"name\":\"%s\",\"size\":1}", name);
    parse_fails(t, strlen(t), "name longer than 1024 bytes");
    snprintf(t, n, "\"%s\"", name);
    parse_fails(t, strlen(t), "name longer than 1024 bytes");
    free(t);
    free(name);
    /* Text over the limit, and bytes that are not JSON at all. */
    t = repeat(" ", SCH_MAX_TEXT + 1, "", "");
    parse_fails(t, strlen(t), "larger than");
    free(t);
    parse_fails("\xff\xfe\x00\x01", 4, "Invalid JSON");
    parse_fails("\"int\" \"int\"", 11, "Invalid JSON");
    parse_fails("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"R\"},", 44,
                "Invalid JSON");
    /* Recursive types are legal: through a union, an array, a map. */
    s = parse_ok("{\"type\":\"record\",\"name\":\"T\",\"fields\":[{\"name\":\"kids\",\"type\":{\"type\":"
                 "\"array\",\"items\":\"T\"}},{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":"
                 "[\"null\",\"T\"]}}]}");
    kp_buf b;
    kp_buf_init(&b);
    ck_assert_int_eq(sch_avro_canonical(s, false, &b), 0);
    ck_assert_int_eq(sch_avro_pcf(s, &b), 0);
    /* kids: [{kids: [], m: {}}], m: {"x": null} */
    ck_assert_int_eq(sch_avro_validate(s, (const uint8_t *)"\x02\x00\x00\x00\x02\x02x\x00\x00", 9,
                                       NULL, 0), 0);
    kp_buf_free(&b);
    sch_free(s);
}
END_TEST
int main(void)
{
    const TTest *const tests[] = {
        test_canonical_is_java_tostring,
        test_canonical_ignores_whitespace_and_attribute_order,
        test_parsing_canonical_form_and_fingerprint,
        test_invalid_schemas_refused_with_reason,
        test_compat_fields_added_removed_renamed_promoted,
        test_compat_enums_unions_fixed_names,
        test_compat_recursive_types_terminate,
        test_compat_shared_types_checked_once,
        test_check_level_directions_and_transitive,
        test_compat_agrees_with_python_avro,
        test_python_avro_bodies_validate_and_decode,
        test_random_bodies_decode_as_python_avro_reads_them,
        test_validate_refuses_bad_bodies,
        test_to_json_escapes_and_replaces,
        test_to_json_numbers_read_back_exactly,
        test_to_json_decimals_as_numbers,
        test_references_define_names,
        test_hostile_schemas_refused_cleanly,
        test_hostile_defaults_bounded,
        test_hostile_wide_schemas_linear,
    };
    return unit_run("schema", "avro", tests, sizeof tests / sizeof *tests, NULL, NULL, 60);
}
