/*
 * schema/ — Avro schemas for the schema registry (issue 31): parse, canonical
 * text, compatibility, and the Confluent wire format's records checked and
 * decoded.  Like protocol/ and segments/ it builds and tests alone: no
 * libevent, SQLite or ZooKeeper; it uses jansson for the JSON and kp_buf
 * (protocol/) for output.
 *
 * What it promises:
 *   S1  A parsed sch_schema is immutable: any thread may read it at once
 *       (validate, to_json, canonical, compatible) without a lock.
 *   S2  Hostile schema text is refused with a reason, never a crash or an
 *       unbounded recursion or loop: text size, JSON depth, schema nesting,
 *       name length and type count are all limited (SCH_MAX_*).  Recursive
 *       types (a record reaching itself through a union, array or map) are
 *       legal Avro and handled everywhere (the type graph may have cycles).
 *   S3  sch_avro_validate and sch_avro_to_json never allocate per call
 *       (to_json grows the caller's kp_buf only), and bound their recursion
 *       and their work by the body's length.
 *   S4  Two texts of the same schema (whitespace, attribute order) give the
 *       same sch_avro_canonical text, which is what Java's Schema.toString()
 *       prints (Confluent stores and compares that).
 *
 * JSON Schema and Protobuf are not parsed here: the registry stores them
 * byte-exact; sch_type tells the three apart.
 */
#ifndef SLUICE_SCH_H
#define SLUICE_SCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/kp.h"

/* Limits (S2).  A schema over them is refused with a reason saying which. */
#define SCH_MAX_TEXT   (4u << 20)   /* bytes of schema text (all refs together too) */
#define SCH_MAX_DEPTH  128          /* nesting of schema definitions */
#define SCH_MAX_NAME   1024         /* bytes of a full name, a field name, a symbol */
#define SCH_MAX_TYPES  100000       /* type definitions in one schema with its refs */
/* Nesting of values while decoding a body (recursive types can nest
 * without limit in the schema; the data may not). */
#define SCH_MAX_VALUE_DEPTH 256

/* ---- schema types the registry knows --------------------------------------- */
typedef enum { SCH_TYPE_AVRO = 0, SCH_TYPE_JSON = 1, SCH_TYPE_PROTOBUF = 2 } sch_type;
/* "AVRO" | "JSON" | "PROTOBUF" (Confluent's schemaType; case-sensitive as
 * Confluent is); NULL or "" is AVRO.  0, or -1 for another name. */
int sch_type_parse(const char *s, sch_type *out);
const char *sch_type_name(sch_type t);

/* ---- compatibility levels (Confluent's /config) ------------------------------ */
typedef enum {
    SCH_LEVEL_NONE = 0,
    SCH_LEVEL_BACKWARD,
    SCH_LEVEL_BACKWARD_TRANSITIVE,
    SCH_LEVEL_FORWARD,
    SCH_LEVEL_FORWARD_TRANSITIVE,
    SCH_LEVEL_FULL,
    SCH_LEVEL_FULL_TRANSITIVE,
} sch_level;
/* The names above without SCH_LEVEL_ ("BACKWARD", ...).  0 or -1. */
int sch_level_parse(const char *s, sch_level *out);
const char *sch_level_name(sch_level l);

/* ---- parse ------------------------------------------------------------------ */
typedef struct sch_schema sch_schema;

/* A schema reference (Confluent's {name, subject, version}) as the registry
 * resolved it: the referenced schema's text.  Named types it defines may be
 * used by name in the schema and in later references.  Order: a reference's
 * own references come before it (Confluent's resolution order). */
typedef struct sch_ref {
    const char *name;         /* the reference's name (for messages only); may be NULL */
    const char *text;
    size_t len;
} sch_ref;

/* ---- references, resolved through the caller's store (refs.c) ----------------- */
#define SCH_MAX_REFS 256
#define SCH_MAX_REF_DEPTH 32
/* A referenced version as the store has it: texts valid until the set is
 * parsed and freed (the store owns them). */
typedef struct sch_ref_found {
    int32_t id;
    const char *text;
    const char *refs;         /* its own references, JSON ("[]" or NULL: none) */
} sch_ref_found;
typedef int (*sch_ref_lookup)(void *arg, const char *subject, int32_t version,
                              sch_ref_found *out);      /* 0, or -1 not found */
typedef struct sch_ref_set {
    sch_ref refs[SCH_MAX_REFS];
    int32_t ids[SCH_MAX_REFS];
    char *names[SCH_MAX_REFS];
    size_t n;
} sch_ref_set;
/* Adds the schemas refs (JSON text; NULL or "[]": none) names to set, each
 * once, its own references before it.  0, or -1 with err (a reference not
 * found, malformed, too many or too deep). */
int sch_refs_collect(const char *refs, sch_ref_lookup lookup, void *arg, sch_ref_set *set,
                     char *err, size_t errlen);
void sch_refs_free(sch_ref_set *set);

/* Parses Avro schema text (with its references).  0 and *out, or -1 with a
 * reason in err (Confluent answers 42201 "Invalid schema" with it); err may
 * be NULL.  Defaults are checked against their field's type (Avro 1.11:
 * a union's default may match any branch). */
int sch_avro_parse(const char *text, size_t len, const sch_ref *refs, size_t nrefs,
                   sch_schema **out, char *err, size_t errlen);
void sch_free(sch_schema *s);

/* The top type's kind and, for a named type, its full name (RecordNameStrategy
 * names the subject after it); NULL for an unnamed type. */
const char *sch_avro_name(const sch_schema *s);

/* ---- canonical text ------------------------------------------------------- */
/* Appends the text the registry stores and compares: Java's Schema.toString()
 * (compact JSON; attributes in Avro's order; extra properties kept in their
 * order; types from references written by name as Confluent does).  With
 * normalize, Confluent's normalized form (normalize=true on register and
 * lookup: AvroSchemaUtils.toNormalizedString — full names, keys in Parsing
 * Canonical Form's order, doc/aliases/defaults/properties kept, properties
 * and aliases sorted; canon.c).  0, or -1 if out ran out of memory. */
int sch_avro_canonical(const sch_schema *s, bool normalize, kp_buf *out);

/* Avro's Parsing Canonical Form and its CRC-64-AVRO fingerprint (the
 * identity of the schema as data: doc, aliases, defaults and properties
 * do not count). */
int sch_avro_pcf(const sch_schema *s, kp_buf *out);
uint64_t sch_avro_fingerprint(const sch_schema *s);
uint64_t sch_crc64_avro(const void *p, size_t len);

/* ---- compatibility -------------------------------------------------------- */
/* 1 when data written with writer can be read with reader (Avro's Schema
 * Resolution, decided as Java's SchemaCompatibility does), else 0 with
 * every incompatibility in why, one a line ('\n' between), as Confluent
 * words them (its "messages" of verbose answers):
 *   {errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f' at path
 *   '/fields/1' in the reader schema has no default value and is missing in the writer
 *   schema', additionalInfo:'f'}
 * Lines that do not fit in whylen are left out; why may be NULL. */
int sch_avro_compatible(const sch_schema *reader, const sch_schema *writer, char *why,
                        size_t whylen);
/* The registry's check of a new schema against the subject's previous ones
 * (prev[0] oldest .. prev[nprev-1] latest): BACKWARD (new reads latest),
 * FORWARD (latest reads new), FULL (both); *_TRANSITIVE against every
 * previous one, newest first; NONE always passes.  1 compatible, 0 with why
 * (the lines of the first previous schema failing, worded with "new" and
 * "old" schema as Confluent's are). */
int sch_avro_check_level(sch_level level, const sch_schema *new_schema,
                         const sch_schema *const *prev, size_t nprev, char *why, size_t whylen);

/* ---- records in Confluent's wire format ----------------------------------- */
/*   byte 0      magic 0
 *   bytes 1..4  schema id, big-endian int32
 *   bytes 5..   the Avro binary body (Protobuf: message indexes first;
 *               JSON Schema: JSON text)
 * 0 with *id and *body_off (5), or -1 (shorter than 5 bytes, magic not 0). */
int sch_wire_split(const uint8_t *p, size_t len, int32_t *id, size_t *body_off);

/* 0 when body decodes completely against s: every byte used, lengths in
 * range, union and enum indexes valid (UTF-8 of strings is not checked).
 * -1 with the reason in why (may be NULL).  No allocation (S3). */
int sch_avro_validate(const sch_schema *s, const uint8_t *body, size_t len, char *why,
                      size_t whylen);

/* Appends body decoded as JSON, for SQL's value_json (json_extract works):
 * records as objects, maps as objects, arrays as arrays, a union as its
 * branch's plain value (NOT Avro's JSON encoding {"type": value}), enums as
 * their symbol, bytes and fixed as strings (each byte as the code point of
 * the same number, escaped as JSON needs: Avro's JSON encoding of bytes),
 * float/double as numbers that read back exactly (a float as its shortest
 * decimal as a float: 0.1, not 0.100000001; NaN and infinities as null),
 * longs as integers (json_extract keeps all 64 bits), a decimal (logical
 * type on bytes or fixed, up to 16 bytes) as its exact decimal number
 * (12.34: json_extract('$.amount') is a number), strings as they are
 * (invalid UTF-8 bytes replaced by U+FFFD so the output is valid JSON).
 * 0, or -1 when the body does not decode (out is then left at its
 * length on entry). */
int sch_avro_to_json(const sch_schema *s, const uint8_t *body, size_t len, kp_buf *out);

#endif
