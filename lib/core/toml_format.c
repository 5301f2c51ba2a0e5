/* toml_format.c - lookups and walks over a parsed TOML document, value
 * comparison, and TOML text output (strings, keys, shortest floats). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toml.h"

static int is_bare(int c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* ---- queries ---- */

const titan_toml_value *titan_toml_get(const titan_toml_doc *doc, const char *path) {
    const titan_toml_table *t = &doc->root;
    const titan_toml_value *v = NULL;
    char part[256];
    while (*path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof part || !t) return NULL;
        memcpy(part, path, n);
        part[n] = '\0';
        const titan_toml_entry *e = titan_toml_table_find(t, part);
        if (!e) return NULL;
        v = &e->value;
        t = v->type == TITAN_TOML_TABLE ? v->u.table : NULL;
        path += n;
        if (*path == '.') path++;
    }
    return v;
}

static titan_status walk(const titan_toml_table *t, char *path, size_t cap, titan_toml_visit fn, void *ctx) {
    size_t base = strlen(path);
    for (int i = 0; i < t->n; i++) {
        const titan_toml_entry *e = &t->items[i];
        if (e->value.type == TITAN_TOML_TABLE) {
            if (base + 2 < cap) {
                if (base) path[base] = '.';
                titan_toml_format_key(path + base + (base > 0), cap - base - (base > 0), e->key);
            }
            titan_status st = walk(e->value.u.table, path, cap, fn, ctx);
            path[base] = '\0';
            TITAN_TRY(st);
        } else {
            TITAN_TRY(fn(ctx, path, e->key, &e->value, e->line));
        }
    }
    return TITAN_OK;
}

titan_status titan_toml_walk(const titan_toml_doc *doc, titan_toml_visit fn, void *ctx) {
    char path[1024] = "";
    return walk(&doc->root, path, sizeof path, fn, ctx);
}

int titan_toml_value_equal(const titan_toml_value *a, const titan_toml_value *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case TITAN_TOML_STRING:
        return a->u.str.len == b->u.str.len && memcmp(a->u.str.ptr, b->u.str.ptr, a->u.str.len) == 0;
    case TITAN_TOML_INT: return a->u.i == b->u.i;
    case TITAN_TOML_FLOAT: return (isnan(a->u.f) && isnan(b->u.f)) || a->u.f == b->u.f;
    case TITAN_TOML_BOOL: return a->u.b == b->u.b;
    case TITAN_TOML_ARRAY:
        if (a->u.arr->n != b->u.arr->n) return 0;
        for (int i = 0; i < a->u.arr->n; i++)
            if (!titan_toml_value_equal(&a->u.arr->items[i], &b->u.arr->items[i])) return 0;
        return 1;
    case TITAN_TOML_TABLE:
        if (a->u.table->n != b->u.table->n) return 0;
        for (int i = 0; i < a->u.table->n; i++) {
            const titan_toml_entry *e = &a->u.table->items[i];
            const titan_toml_entry *f = titan_toml_table_find(b->u.table, e->key);
            if (!f || !titan_toml_value_equal(&e->value, &f->value)) return 0;
        }
        return 1;
    }
    return 0;
}

const char *titan_toml_type_name(titan_toml_type t) {
    switch (t) {
    case TITAN_TOML_STRING: return "string";
    case TITAN_TOML_INT: return "integer";
    case TITAN_TOML_FLOAT: return "float";
    case TITAN_TOML_BOOL: return "boolean";
    case TITAN_TOML_ARRAY: return "array";
    case TITAN_TOML_TABLE: return "table";
    }
    return "?";
}

/* ---- formatting ---- */

typedef struct {
    char *buf;
    size_t cap, used; /* used may exceed cap: the length that was needed */
} out_t;

static void out_put(out_t *o, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++, o->used++)
        if (o->used + 1 < o->cap) o->buf[o->used] = s[i];
    if (o->cap) o->buf[o->used < o->cap ? o->used : o->cap - 1] = '\0';
}

static void out_str(out_t *o, const char *s) { out_put(o, s, strlen(s)); }

static void out_quoted(out_t *o, const char *s, size_t len) {
    out_put(o, "\"", 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        switch (c) {
        case '"': out_str(o, "\\\""); break;
        case '\\': out_str(o, "\\\\"); break;
        case '\n': out_str(o, "\\n"); break;
        case '\t': out_str(o, "\\t"); break;
        case '\r': out_str(o, "\\r"); break;
        case '\b': out_str(o, "\\b"); break;
        case '\f': out_str(o, "\\f"); break;
        default:
            if (c < 0x20 || c == 0x7f) {
                snprintf(esc, sizeof esc, "\\u%04X", c);
                out_str(o, esc);
            } else {
                out_put(o, (const char *)&s[i], 1);
            }
        }
    }
    out_put(o, "\"", 1);
}

int titan_toml_format_string(char *buf, size_t n, const char *s, size_t len) {
    out_t o = {buf, n, 0};
    if (n) buf[0] = '\0';
    out_quoted(&o, s, len);
    return (int)o.used;
}

int titan_toml_format_key(char *buf, size_t n, const char *key) {
    int bare = key[0] != '\0';
    for (const char *c = key; *c; c++)
        if (!is_bare((unsigned char)*c)) bare = 0;
    if (!bare) return titan_toml_format_string(buf, n, key, strlen(key));
    return snprintf(buf, n, "%s", key);
}

int titan_toml_format_double(char *buf, size_t n, double x) {
    char tmp[64];
    if (isnan(x)) snprintf(tmp, sizeof tmp, "%snan", signbit(x) ? "-" : "");
    else if (isinf(x)) snprintf(tmp, sizeof tmp, "%sinf", x < 0 ? "-" : "");
    else {
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(tmp, sizeof tmp, "%.*g", prec, x);
            if (strtod(tmp, NULL) == x) break;
        }
        double ax = fabs(x);
        if (strchr(tmp, 'e') && ax >= 1 && ax < 1e6) { /* 100.0, not 1e+02 */
            int digits = (int)floor(log10(ax)) + 1, prec = 1;
            while (prec < 17 && (snprintf(tmp, sizeof tmp, "%.*g", prec, x), strtod(tmp, NULL) != x)) prec++;
            snprintf(tmp, sizeof tmp, "%.*g", prec > digits ? prec : digits, x);
        }
        char *e = strchr(tmp, 'e');
        if (e) { /* 1e-08 -> 1e-8, 1e+15 -> 1e15 */
            char *d = e + 1, *q = e + 1;
            if (*d == '+') d++;
            else if (*d == '-') q++, d++;
            while (d[0] == '0' && d[1]) d++;
            memmove(q, d, strlen(d) + 1);
        }
        if (!strpbrk(tmp, ".e")) strcat(tmp, ".0"); /* keep it a float in TOML */
    }
    return snprintf(buf, n, "%s", tmp);
}

static void format_value(out_t *o, const titan_toml_value *v) {
    char tmp[64];
    switch (v->type) {
    case TITAN_TOML_STRING: out_quoted(o, v->u.str.ptr, v->u.str.len); break;
    case TITAN_TOML_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v->u.i); out_str(o, tmp); break;
    case TITAN_TOML_FLOAT: titan_toml_format_double(tmp, sizeof tmp, v->u.f); out_str(o, tmp); break;
    case TITAN_TOML_BOOL: out_str(o, v->u.b ? "true" : "false"); break;
    case TITAN_TOML_ARRAY:
        out_str(o, "[");
        for (int i = 0; i < v->u.arr->n; i++) {
            if (i) out_str(o, ", ");
            format_value(o, &v->u.arr->items[i]);
        }
        out_str(o, "]");
        break;
    case TITAN_TOML_TABLE:
        out_str(o, "{");
        for (int i = 0; i < v->u.table->n; i++) {
            char key[256];
            titan_toml_format_key(key, sizeof key, v->u.table->items[i].key);
            out_str(o, i ? ", " : " ");
            out_str(o, key);
            out_str(o, " = ");
            format_value(o, &v->u.table->items[i].value);
        }
        out_str(o, v->u.table->n ? " }" : "}");
        break;
    }
}

int titan_toml_format_value(char *buf, size_t n, const titan_toml_value *v) {
    out_t o = {buf, n, 0};
    if (n) buf[0] = '\0';
    format_value(&o, v);
    return (int)o.used;
}
