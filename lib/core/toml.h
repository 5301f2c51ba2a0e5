/* toml.h - a TOML reader for job configuration files.
 *
 * Covers what job configs use: comments, [table] and [a.b] headers, bare,
 * quoted and dotted keys, basic/literal/multi-line strings, integers (decimal
 * with _, 0x, 0o, 0b), floats (exponent, inf, nan), booleans, arrays
 * (multi-line, trailing commas) and inline tables. Dates and arrays of tables
 * ([[x]]) are refused with a clear message. Every key and value remembers its
 * line and column; errors read "FILE:LINE:COL: cause". */
#ifndef TITAN_CORE_TOML_H
#define TITAN_CORE_TOML_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef enum {
    TITAN_TOML_STRING = 0,
    TITAN_TOML_INT,
    TITAN_TOML_FLOAT,
    TITAN_TOML_BOOL,
    TITAN_TOML_ARRAY,
    TITAN_TOML_TABLE,
} titan_toml_type;

typedef struct titan_toml_value titan_toml_value;
typedef struct titan_toml_entry titan_toml_entry;

typedef struct {
    titan_toml_value *items;
    int n, cap;
} titan_toml_array;

typedef struct {
    titan_toml_entry *items; /* in document order */
    int n, cap;
    int origin;              /* internal: how the table was created */
} titan_toml_table;

struct titan_toml_value {
    titan_toml_type type;
    int line, col;           /* where the value starts (1-based) */
    union {
        struct { char *ptr; size_t len; } str; /* NUL-terminated; len excludes it */
        int64_t i;
        double f;
        int b;
        titan_toml_array *arr;
        titan_toml_table *table;
    } u;
};

struct titan_toml_entry {
    char *key;               /* one key component (unquoted) */
    int line, col;           /* where the key was written */
    titan_toml_value value;
};

typedef struct {
    titan_toml_table root;
    char name[256];          /* file name used in messages */
} titan_toml_doc;

/* Parses text[0..len) (need not be NUL-terminated). name appears in errors.
 * TITAN_ERR_FORMAT "name:line:col: cause" on bad syntax, NOMEM on allocation. */
titan_status titan_toml_parse(const char *text, size_t len, const char *name, titan_toml_doc **out);
/* Reads and parses a file (TITAN_ERR_IO when it cannot be read). */
titan_status titan_toml_parse_file(const char *path, titan_toml_doc **out);
void titan_toml_free(titan_toml_doc *doc);

/* Parses one standalone value ("20", "1e-3", "\"x\"", "[1, 2]"); only
 * whitespace may follow it. Free with titan_toml_value_free. */
titan_status titan_toml_parse_value(const char *text, const char *name, titan_toml_value *out);
void titan_toml_value_free(titan_toml_value *v);

/* Lookup of one key component in a table; NULL if absent. */
const titan_toml_entry *titan_toml_table_find(const titan_toml_table *t, const char *key);
/* Lookup of a dotted path of bare keys ("training.steps"); NULL if absent. */
const titan_toml_value *titan_toml_get(const titan_toml_doc *doc, const char *path);

/* Calls fn for every non-table value (arrays are leaves), depth first in
 * document order. table is the dotted path of the enclosing table ("" at the
 * root; components that are not bare keys are quoted). A non-OK return stops
 * the walk and is returned. */
typedef titan_status (*titan_toml_visit)(void *ctx, const char *table, const char *key,
                                         const titan_toml_value *v, int line);
titan_status titan_toml_walk(const titan_toml_doc *doc, titan_toml_visit fn, void *ctx);

/* Deep equality (int 1 and float 1.0 differ; nan equals nan). */
int titan_toml_value_equal(const titan_toml_value *a, const titan_toml_value *b);
const char *titan_toml_type_name(titan_toml_type t); /* "string", "integer", ... */

/* Formatting as TOML source text. Each writes a NUL-terminated string (cut
 * to fit) and returns the length it needed, like snprintf. */
int titan_toml_format_string(char *buf, size_t n, const char *s, size_t len);
int titan_toml_format_key(char *buf, size_t n, const char *key);
/* Shortest text that reads back as the same double, always with a float form. */
int titan_toml_format_double(char *buf, size_t n, double x);
int titan_toml_format_value(char *buf, size_t n, const titan_toml_value *v);

#endif
