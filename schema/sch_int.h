/*
 * schema/sch_int.h — the parsed Avro type graph, shared by the files of
 * schema/ only (tests may read it).
 *
 * A schema is a graph of sch_node, all owned by the sch_schema (nodes[],
 * freed together): a named type is defined once and every use by name
 * points at that one node, so a recursive type is a cycle in the graph.
 * Every walk over the graph therefore either keeps a set of the named types
 * already visited (canonical text, compatibility) or is bounded by the data
 * it decodes (validate, to_json; sch.h S3).
 *
 * Strings point into the jansson documents kept alive in the schema (docs[])
 * or into the node's own allocations (full names); none is freed alone.
 */
#ifndef SLUICE_SCH_INT_H
#define SLUICE_SCH_INT_H

#include <jansson.h>

#include "schema/sch.h"

typedef enum {
    SCH_K_NULL, SCH_K_BOOLEAN, SCH_K_INT, SCH_K_LONG, SCH_K_FLOAT, SCH_K_DOUBLE,
    SCH_K_BYTES, SCH_K_STRING,
    SCH_K_RECORD, SCH_K_ENUM, SCH_K_FIXED,      /* named */
    SCH_K_ARRAY, SCH_K_MAP, SCH_K_UNION,
} sch_kind;

static inline bool sch_kind_named(sch_kind k) { return k >= SCH_K_RECORD && k <= SCH_K_FIXED; }
const char *sch_kind_name(sch_kind k);   /* "int", "record", "union", ... */

typedef struct sch_node sch_node;

typedef enum { SCH_ORDER_ASCENDING, SCH_ORDER_DESCENDING, SCH_ORDER_IGNORE } sch_order;

typedef struct sch_field {
    const char *name;
    sch_node *type;
    const char *doc;           /* NULL: none */
    json_t *dflt;              /* NULL: no default (JSON null is a json_t) */
    sch_order order;
    json_t *aliases;           /* array of strings, or NULL */
    json_t *props;             /* object of extra attributes in text order, or NULL */
} sch_field;

struct sch_node {
    sch_kind kind;
    uint32_t id;               /* index in sch_schema.nodes (walks keep sets by it) */
    json_t *props;             /* extra attributes (logicalType, ...) or NULL */
    /* named types */
    char *full;                /* "ns.Name" (owned) */
    const char *name;          /* points into full: the last component */
    char *space;               /* namespace (owned) or NULL for none */
    const char *doc;
    char **aliases;            /* full names (owned), naliases of them */
    size_t naliases;
    bool external;             /* defined by a reference: written by name */
    bool is_error;             /* "error" rather than "record" */
    /* record */
    sch_field *fields;
    size_t nfields;
    /* enum */
    const char **symbols;
    size_t nsymbols;
    const char *enum_default;  /* NULL: none */
    /* fixed */
    int64_t size;
    /* bytes, fixed with a valid decimal logical type: its scale; else -1 */
    int dec_scale;
    /* array items / map values */
    sch_node *items;
    /* union */
    sch_node **branches;
    size_t nbranches;
};

struct sch_schema {
    sch_node *root;
    sch_node **nodes;          /* every node, for sch_free */
    size_t nnodes, cap;
    json_t **docs;             /* the jansson documents strings point into */
    size_t ndocs;
};

/* Whether v is a valid default for t (Avro 1.11's rules; a union accepts a
 * value matching any branch).  depth bounds the recursion and *budget the
 * work, shared by all the defaults of one parse (unions of records in
 * unions of records try every branch: without it, hostile nesting is
 * exponential); out of budget is "not valid" and *budget < 0. */
#define SCH_DEFAULT_WORK 4000000L
bool sch_default_ok(const sch_node *t, const json_t *v, int depth, long *budget);

/* The logical type Java would recognise on n (LogicalTypes.fromSchemaIgnoreInvalid),
 * or NULL: an unknown or misplaced one stays a plain property. */
const char *sch_logical(const sch_node *n);

/* A set of strings (not owned) for duplicate checks, sized for n at most:
 * records of 100,000 fields, enums of 500,000 symbols fit in the text
 * limit, and comparing each with all the others would be 10^11 steps.
 * sch_set_add: 1 added, 0 already there, -1 out of memory. */
typedef struct {
    const char **slot;
    size_t cap;
} sch_set;
int sch_set_init(sch_set *s, size_t n);
int sch_set_add(sch_set *s, const char *k);
bool sch_set_has(const sch_set *s, const char *k);
void sch_set_free(sch_set *s);

/* Appends v as compact JSON the way Jackson writes it (Java's toString). */
void sch_json_write(kp_buf *b, const json_t *v);
void sch_json_string(kp_buf *b, const char *s, size_t len);

#endif
