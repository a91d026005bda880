/*
 * export_registry.h — sluice-export's view of a schema registry: values in
 * the registry's wire format (magic 0, a 4-byte big-endian schema id, an
 * Avro binary body) decoded with the schema registered under that id,
 * fetched once per id (GET /schemas/ids/{id}) over plain HTTP.
 *
 * One ex_registry per worker thread (no locks): its cache holds each id's
 * parsed schema and a value to decode into.
 */
#ifndef SLUICE_EXPORT_REGISTRY_H
#define SLUICE_EXPORT_REGISTRY_H

#include <stdint.h>

#include <avro.h>

typedef struct ex_registry ex_registry;

/* url: http://HOST:PORT[/PATH]; user: "USER:PASSWORD" for basic auth, or
 * NULL.  NULL with a message in err when the URL is not one. */
ex_registry *ex_reg_new(const char *url, const char *user, char *err, size_t err_size);
void ex_reg_free(ex_registry *r);

/* What a value is: EX_REG_ENVELOPE (not framed, an id the registry does not
 * know, a body that does not decode with its schema: written in the
 * envelope), EX_REG_ERROR (the registry could not be asked: err says why),
 * or the schema id (>= 0), *schema its writer schema (owned by the cache)
 * and the body (*body, *body_len) checked to decode with it exactly. */
enum { EX_REG_ENVELOPE = -1, EX_REG_ERROR = -2 };
int64_t ex_reg_classify(ex_registry *r, const void *value, int32_t len,
                        avro_schema_t *schema, const char **body, int32_t *body_len,
                        char *err, size_t err_size);

#endif
