/*
 * daemon/registry/sr_validate.c — Produce's schema checks (issue 31): a
 * topic with confluent.value.schema.validation (or .key.) takes a record
 * only if its value (key) is in the wire format — magic byte 0, a 4-byte
 * schema id — with the id of a schema registered under the record's
 * subject, and with sluice.*.schema.validation.level=decode only if its
 * Avro body decodes with that schema.  Installed as bk_broker.schema_check
 * by sr_start; daemon/api/api_produce.c calls it for every record from
 * protocol/validate.c's walk (kp_val_rules.on_record), so the records are
 * read once.
 *
 *   Produce ──► check(c, bytes) ──► sch_wire_split ──► id == c->last_ok? ─yes─► (decode) ─► 0
 *                                                           │ no
 *                                  index (rebuilt when r->gen moved) ──► entry(id)
 *                                  subject by strategy ∈ entry's subjects? ─► c->last_ok = id
 *
 * Promises:
 *   SV1. No allocation and no SQLite per record: ids are found in an
 *        open-addressed hash built from the registry's memory after a
 *        write was applied (the first check after it), each id listing
 *        the subjects that have it; a record costs a hash probe and a
 *        few string compares, and a run of records with one id in a
 *        batch one integer compare (c->last_ok).
 *   SV2. What the registry answered is what Produce sees: the index is
 *        rebuilt from memory whenever r->gen moved, on the loop thread
 *        that applies writes, so a schema is accepted by the first
 *        produce after its registration was answered.
 *   SV3. A version soft-deleted still counts (its id is still served by
 *        GET /schemas/ids/{id}, and the deserializers of records written
 *        with it still read them); a permanently deleted one does not.
 *   SV5. A broker still catching up with _schemas from its leader
 *        (sr_follow_behind: its GETs answer 50003, retriable) does not
 *        refuse an id or subject it does not know yet: -2, which Produce
 *        answers with a retriable error; a record it can judge (wire
 *        format, a known id under its subject, decode) is judged.
 *   SV4. Parsed schemas (decode, RecordNameStrategy's name) are parsed
 *        once per id and kept across rebuilds (an id's schema never
 *        changes).  A body is decoded only for Avro schemas; JSON Schema
 *        and Protobuf ids get the id check.
 */
#include "daemon/registry/sr_int.h"
#include "schema/sch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sv_entry {
    int32_t id;                       /* 0 with s NULL: a free slot */
    sr_schema *s;
    const char **subjects;            /* into sr_subject names: valid until gen moves */
    uint32_t nsub;
    int8_t parsed_state;              /* 0 not tried, 1 parsed, -1 failed */
    sch_schema *parsed;
    char *parse_err;                  /* when it failed */
} sv_entry;

struct sr_vindex {
    uint64_t gen;
    sv_entry *slots;
    size_t mask;                      /* slots: mask + 1, a power of two */
    const char **subjects;            /* every entry's subjects, end to end */
};

static size_t hash_id(int32_t id)
{
    return (size_t)((uint32_t)id * 2654435761u);
}

static sv_entry *find(struct sr_vindex *x, int32_t id)
{
    for (size_t i = hash_id(id) & x->mask;; i = (i + 1) & x->mask) {
        if (!x->slots[i].s)
            return NULL;
        if (x->slots[i].id == id)
            return &x->slots[i];
    }
}

static void vindex_free(struct sr_vindex *x)
{
    if (!x)
        return;
    for (size_t i = 0; i <= x->mask; i++) {
        sch_free(x->slots[i].parsed);
        free(x->slots[i].parse_err);
    }
    free(x->slots);
    free(x->subjects);
    free(x);
}

void sr_validate_free(sr_registry *r)
{
    vindex_free(r->vindex);
    r->vindex = NULL;
}

/* The index of r's memory now; the old one's parsed schemas move over
 * (SV4).  0, or -1 out of memory (the old one is kept). */
static int vindex_build(sr_registry *r)
{
    struct sr_vindex *x = calloc(1, sizeof *x), *old = r->vindex;
    size_t cap = 16, total = 0;
    while (cap < r->nschemas * 2)
        cap <<= 1;
    for (size_t i = 0; i < r->nsubjects; i++)
        total += r->subjects[i]->nv;
    if (x) {
        x->slots = calloc(cap, sizeof *x->slots);
        x->subjects = calloc(total ? total : 1, sizeof *x->subjects);
    }
    if (!x || !x->slots || !x->subjects) {
        if (x) {
            free(x->slots);
            free(x->subjects);
        }
        free(x);
        return -1;
    }
    x->mask = cap - 1;
    x->gen = r->gen;
    for (size_t i = 0; i < r->nschemas; i++) {
        sr_schema *s = r->schemas[i];
        size_t k = hash_id(s->id) & x->mask;
        while (x->slots[k].s)
            k = (k + 1) & x->mask;
        x->slots[k] = (sv_entry){ .id = s->id, .s = s };
        sv_entry *o = old ? find(old, s->id) : NULL;
        if (o) {                                  /* SV4 */
            x->slots[k].parsed_state = o->parsed_state;
            x->slots[k].parsed = o->parsed;
            x->slots[k].parse_err = o->parse_err;
            o->parsed = NULL;
            o->parse_err = NULL;
        }
    }
    /* Each entry's subjects: counted, given their run, then filled. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < r->nsubjects; i++) {
            sr_subject *sub = r->subjects[i];
            for (size_t v = 0; v < sub->nv; v++) {
                sv_entry *e = find(x, sub->v[v].id);
                if (!e)
                    continue;
                if (pass == 0)
                    e->nsub++;                    /* a bound: repeats are skipped below */
                else if (e->nsub == 0 || e->subjects[e->nsub - 1] != sub->name)
                    e->subjects[e->nsub++] = sub->name;
            }
        }
        if (pass == 0) {
            size_t at = 0;
            for (size_t k = 0; k <= x->mask; k++) {
                x->slots[k].subjects = x->subjects + at;
                at += x->slots[k].nsub;
                x->slots[k].nsub = 0;
            }
        }
    }
    vindex_free(old);
    r->vindex = x;
    return 0;
}

/* The index of r's memory now: built again when a record was applied since
 * (gen).  0, or -1 out of memory. */
static int vindex_current(sr_registry *r)
{
    return r->vindex && r->vindex->gen == r->gen ? 0 : vindex_build(r);
}

ssize_t sr_validate_subjects(sr_registry *r, int32_t id, const char *const **out)
{
    if (vindex_current(r) != 0)
        return -1;
    sv_entry *e = find(r->vindex, id);
    *out = e ? e->subjects : NULL;
    return e ? (ssize_t)e->nsub : 0;
}

/* e's schema parsed (SV4): the schema, or NULL with the reason in e. */
static const sch_schema *parsed(sr_registry *r, sv_entry *e)
{
    if (e->parsed_state == 0) {
        char err[256];
        e->parsed_state = sr_schema_parse(r, e->s, &e->parsed, err, sizeof err) == 0 ? 1 : -1;
        if (e->parsed_state < 0) {
            e->parsed = NULL;
            e->parse_err = strdup(err);
        }
    }
    return e->parsed;
}

static bool has_subject(const sv_entry *e, const char *subject)
{
    for (uint32_t i = 0; i < e->nsub; i++)
        if (!strcmp(e->subjects[i], subject))
            return true;
    return false;
}

/* Whether e is registered under the record's subject by c's strategy. */
static int check_subject(sr_registry *r, bk_schema_ctx *c, sv_entry *e, const char *what,
                         char *why, size_t whylen)
{
    const char *suffix = c->key ? "key" : "value";
    if (c->rule->strategy == MD_SUBJECT_TOPIC) {
        if (!c->subject[0])
            snprintf(c->subject, sizeof c->subject, "%s-%s", c->topic, suffix);
        if (has_subject(e, c->subject))
            return 0;
        snprintf(why, whylen, "%s's schema id %d is not registered under subject %s", what,
                 e->id, c->subject);
        return -1;
    }
    const sch_schema *s = strcmp(e->s->type, "AVRO") ? NULL : parsed(r, e);
    const char *name = s ? sch_avro_name(s) : NULL;
    if (!name) {
        snprintf(why, whylen, "%s's schema id %d has no record name (%s needs a named Avro "
                 "schema)", what, e->id, c->rule->strategy == MD_SUBJECT_RECORD
                 ? "RecordNameStrategy" : "TopicRecordNameStrategy");
        return -1;
    }
    char subject[SCH_MAX_NAME + 320];
    if (c->rule->strategy == MD_SUBJECT_RECORD)
        snprintf(subject, sizeof subject, "%s", name);
    else
        snprintf(subject, sizeof subject, "%s-%s", c->topic, name);
    if (has_subject(e, subject))
        return 0;
    snprintf(why, whylen, "%s's schema id %d is not registered under subject %s", what, e->id,
             subject);
    return -1;
}

int sr_validate_check(bk_broker *b, bk_schema_ctx *c, const uint8_t *p, size_t len,
                      bool whole, char *why, size_t whylen)
{
    sr_registry *r = b->registry;
    const char *what = c->key ? "key" : "value";
    int32_t id;
    size_t off;
    if (sch_wire_split(p, len, &id, &off) != 0) {
        r->validation_refusals++;
        snprintf(why, whylen, "%s is not in the schema registry's format (magic byte 0, "
                 "4-byte schema id)", what);
        return -1;
    }
    sv_entry *e = (sv_entry *)c->last_entry;
    if (id != c->last_ok || !e) {
        if (vindex_current(r) != 0) {
            snprintf(why, whylen, "no memory to check %s's schema id %d", what, id);
            return -1;
        }
        e = find(r->vindex, id);
        if (!e && sr_follow_behind(r)) {          /* SV5 */
            snprintf(why, whylen, "%s's schema id %d is not known yet: this broker is still "
                     "reading %s from its leader (at offset %lld); retry", what, id, SR_TOPIC,
                     (long long)r->applied);
            return -2;
        }
        if (!e) {
            r->validation_refusals++;
            snprintf(why, whylen, "%s's schema id %d is unknown to the schema registry", what,
                     id);
            return -1;
        }
        if (check_subject(r, c, e, what, why, whylen) != 0) {
            if (sr_follow_behind(r)) {            /* SV5: the subject may come */
                snprintf(why + strlen(why), whylen - strlen(why), " yet: this broker is "
                         "still reading %s from its leader; retry", SR_TOPIC);
                return -2;
            }
            r->validation_refusals++;
            return -1;
        }
        c->last_ok = id;
        c->last_entry = e;
    }
    if (!c->rule->decode || !whole || strcmp(e->s->type, "AVRO"))
        return 0;
    const sch_schema *s = parsed(r, e);
    char reason[128];
    if (!s) {
        snprintf(reason, sizeof reason, "%s", e->parse_err ? e->parse_err : "out of memory");
    } else if (sch_avro_validate(s, p + off, len - off, reason, sizeof reason) == 0) {
        return 0;
    }
    r->validation_refusals++;
    snprintf(why, whylen, "%s does not decode with schema id %d: %s", what, id, reason);
    return -1;
}
