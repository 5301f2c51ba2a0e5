/* toml.c - a TOML reader for job configuration files (see toml.h). */
#include "toml.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How a table came to exist; decides which later definitions are legal. */
enum { ORIGIN_IMPLICIT = 1, ORIGIN_HEADER, ORIGIN_DOTTED, ORIGIN_INLINE };

#define MAX_KEY_PARTS 32
#define MAX_DEPTH 64 /* nested arrays / inline tables */

typedef struct {
    const char *s;
    size_t len, pos;
    int line;
    size_t bol; /* offset of the current line's first byte */
    const char *name;
} parser;

typedef struct {
    char *p;
    size_t n, cap;
} sbuf;

/* ---- errors ---- */

static titan_status perr_at(const parser *p, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static titan_status perr_at(const parser *p, size_t at, const char *fmt, ...) {
    int line = 1;
    size_t bol = 0;
    if (at > p->len) at = p->len;
    for (size_t i = 0; i < at; i++)
        if (p->s[i] == '\n') line++, bol = i + 1;
    char cause[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cause, sizeof cause, fmt, ap);
    va_end(ap);
    return titan_error(TITAN_ERR_FORMAT, "%s:%d:%d: %s", p->name, line, (int)(at - bol) + 1, cause);
}

static titan_status nomem(void) { return titan_error(TITAN_ERR_NOMEM, "out of memory while reading TOML"); }

/* Printable excerpt of the source at `at`, for "got 'xyz'" messages. */
static void excerpt(const parser *p, size_t at, char *out, size_t n) {
    size_t k = 0;
    while (at + k < p->len && k + 1 < n && k < 24) {
        char c = p->s[at + k];
        if (c == '\n' || c == '\r' || c == '#' || c == ',' || c == ']' || c == '}') break;
        out[k] = (c >= 0x20 && c != 0x7f) ? c : '?';
        k++;
    }
    out[k] = '\0';
}

/* ---- small helpers ---- */

static int peek(const parser *p, size_t off) { return p->pos + off < p->len ? (unsigned char)p->s[p->pos + off] : -1; }
static int at_eof(const parser *p) { return p->pos >= p->len; }
static int is_bare(int c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; }
static int is_digit(int c) { return c >= '0' && c <= '9'; }

static void skip_ws(parser *p) {
    while (!at_eof(p) && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t')) p->pos++;
}

static void newline(parser *p) {
    p->line++;
    p->bol = p->pos;
}

/* Consumes "\n" or "\r\n"; returns 0 when not at a newline. */
static int eat_newline(parser *p) {
    if (peek(p, 0) == '\n') {
        p->pos++;
    } else if (peek(p, 0) == '\r' && peek(p, 1) == '\n') {
        p->pos += 2;
    } else {
        return 0;
    }
    newline(p);
    return 1;
}

static titan_status skip_comment(parser *p) {
    if (peek(p, 0) != '#') return TITAN_OK;
    for (; !at_eof(p); p->pos++) {
        int c = (unsigned char)p->s[p->pos];
        if (c == '\n' || (c == '\r' && peek(p, 1) == '\n')) break;
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return perr_at(p, p->pos, "control character U+%04X in comment", c);
    }
    return TITAN_OK;
}

/* Whitespace, newlines and comments (inside arrays). */
static titan_status skip_ws_nl(parser *p) {
    for (;;) {
        skip_ws(p);
        TITAN_TRY(skip_comment(p));
        if (!eat_newline(p)) return TITAN_OK;
    }
}

static titan_status sbuf_put(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return nomem();
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return TITAN_OK;
}

static titan_status sbuf_utf8(sbuf *b, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) { u[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
    }
    return sbuf_put(b, u, n);
}

/* Length of the valid UTF-8 sequence at s[0..n), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* ---- tables ---- */

static void table_free(titan_toml_table *t);

void titan_toml_value_free(titan_toml_value *v) {
    if (!v) return;
    if (v->type == TITAN_TOML_STRING) {
        free(v->u.str.ptr);
    } else if (v->type == TITAN_TOML_ARRAY && v->u.arr) {
        for (int i = 0; i < v->u.arr->n; i++) titan_toml_value_free(&v->u.arr->items[i]);
        free(v->u.arr->items);
        free(v->u.arr);
    } else if (v->type == TITAN_TOML_TABLE && v->u.table) {
        table_free(v->u.table);
        free(v->u.table);
    }
    memset(v, 0, sizeof *v);
}

static void table_free(titan_toml_table *t) {
    for (int i = 0; i < t->n; i++) {
        free(t->items[i].key);
        titan_toml_value_free(&t->items[i].value);
    }
    free(t->items);
    t->items = NULL;
    t->n = t->cap = 0;
}

const titan_toml_entry *titan_toml_table_find(const titan_toml_table *t, const char *key) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->items[i].key, key) == 0) return &t->items[i];
    return NULL;
}

/* Appends key (taking ownership of v on success). */
static titan_status table_add(titan_toml_table *t, const char *key, int line, int col,
                              titan_toml_value *v, titan_toml_entry **out) {
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 8;
        titan_toml_entry *q = realloc(t->items, (size_t)cap * sizeof *q);
        if (!q) return nomem();
        t->items = q;
        t->cap = cap;
    }
    char *k = strdup(key);
    if (!k) return nomem();
    titan_toml_entry *e = &t->items[t->n++];
    e->key = k;
    e->line = line;
    e->col = col;
    e->value = *v;
    memset(v, 0, sizeof *v);
    if (out) *out = e;
    return TITAN_OK;
}

static titan_status new_table(titan_toml_value *v, int origin, int line, int col) {
    memset(v, 0, sizeof *v);
    v->type = TITAN_TOML_TABLE;
    v->line = line;
    v->col = col;
    v->u.table = calloc(1, sizeof *v->u.table);
    if (!v->u.table) return nomem();
    v->u.table->origin = origin;
    return TITAN_OK;
}

/* ---- keys ---- */

typedef struct {
    int n;
    char *part[MAX_KEY_PARTS];
    size_t at[MAX_KEY_PARTS];
    int line[MAX_KEY_PARTS], col[MAX_KEY_PARTS];
} keypath;

static void keypath_free(keypath *k) {
    for (int i = 0; i < k->n; i++) free(k->part[i]);
    k->n = 0;
}

static titan_status parse_basic(parser *p, sbuf *b, int multi);
static titan_status parse_literal(parser *p, sbuf *b, int multi);

/* Joined "a.b.c" of parts[0..n) for messages. */
static void keypath_text(const keypath *k, int n, char *out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        char part[256];
        titan_toml_format_key(part, sizeof part, k->part[i]);
        int w = snprintf(out + used, cap - used, "%s%s", i ? "." : "", part);
        if (w < 0 || (size_t)w >= cap - used) return;
        used += (size_t)w;
    }
}

static titan_status parse_key(parser *p, keypath *k) {
    k->n = 0;
    for (;;) {
        skip_ws(p);
        if (k->n == MAX_KEY_PARTS) {
            keypath_free(k);
            return perr_at(p, p->pos, "key has more than %d parts", MAX_KEY_PARTS);
        }
        size_t start = p->pos;
        sbuf b = {0};
        titan_status st = TITAN_OK;
        int c = peek(p, 0);
        if (c == '"' || c == '\'') {
            if (peek(p, 1) == c && peek(p, 2) == c)
                st = perr_at(p, start, "multi-line strings cannot be keys");
            else
                st = c == '"' ? parse_basic(p, &b, 0) : parse_literal(p, &b, 0);
            if (st == TITAN_OK && !b.p) st = sbuf_put(&b, "", 0);
            if (st == TITAN_OK && strlen(b.p) != b.n) st = perr_at(p, start, "key contains a NUL character");
        } else if (is_bare(c)) {
            while (is_bare(peek(p, 0))) p->pos++;
            st = sbuf_put(&b, p->s + start, p->pos - start);
        } else {
            char got[32];
            excerpt(p, start, got, sizeof got);
            if (at_eof(p) || c == '\n' || c == '\r')
                st = perr_at(p, start, "expected a key, got end of line");
            else
                st = perr_at(p, start, "expected a key, got '%s'", got);
        }
        if (st != TITAN_OK) {
            free(b.p);
            keypath_free(k);
            return st;
        }
        k->part[k->n] = b.p;
        k->at[k->n] = start;
        k->line[k->n] = p->line;
        k->col[k->n] = (int)(start - p->bol) + 1;
        k->n++;
        skip_ws(p);
        if (peek(p, 0) != '.') return TITAN_OK;
        p->pos++;
    }
}

/* ---- strings ---- */

static titan_status hex_escape(parser *p, int digits, sbuf *b) {
    size_t at = p->pos - 2;
    uint32_t cp = 0;
    for (int i = 0; i < digits; i++) {
        int c = peek(p, 0);
        int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0) return perr_at(p, at, "escape \\%c needs %d hex digits", digits == 4 ? 'u' : 'U', digits);
        cp = cp * 16 + (uint32_t)d;
        p->pos++;
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return perr_at(p, at, "escape is not a Unicode scalar value (U+%X)", cp);
    return sbuf_utf8(b, cp);
}

/* Handles the character at p->pos inside a string body: control characters
 * are refused, newlines are counted. */
static titan_status string_char(parser *p, sbuf *b, int multi) {
    int c = peek(p, 0);
    if (c == '\n' || (c == '\r' && peek(p, 1) == '\n')) {
        if (!multi)
            return perr_at(p, p->pos, "unterminated string (strings end on the same line; use \"\"\" for multi-line)");
        eat_newline(p);
        return sbuf_put(b, "\n", 1);
    }
    if ((c < 0x20 && c != '\t') || c == 0x7f)
        return perr_at(p, p->pos, "control character U+%04X in string (write it as an escape)", c);
    p->pos++;
    return sbuf_put(b, p->s + p->pos - 1, 1);
}

/* At the opening quote(s). multi: """...""". */
static titan_status parse_basic(parser *p, sbuf *b, int multi) {
    size_t open = p->pos;
    p->pos += multi ? 3 : 1;
    if (multi) eat_newline(p); /* a newline right after """ is trimmed */
    for (;;) {
        if (at_eof(p)) return perr_at(p, open, "unterminated string");
        int c = peek(p, 0);
        if (c == '"') {
            if (!multi) { p->pos++; break; }
            if (peek(p, 1) == '"' && peek(p, 2) == '"') {
                int extra = 0; /* up to two quotes may sit just before the closing """ */
                while (extra < 2 && peek(p, 3 + extra) == '"') extra++;
                TITAN_TRY(sbuf_put(b, "\"\"", (size_t)extra));
                p->pos += 3 + (size_t)extra;
                break;
            }
            p->pos++;
            TITAN_TRY(sbuf_put(b, "\"", 1));
            continue;
        }
        if (c == '\\') {
            size_t esc = p->pos;
            int e = peek(p, 1);
            p->pos += 2;
            switch (e) {
            case 'b': TITAN_TRY(sbuf_put(b, "\b", 1)); break;
            case 't': TITAN_TRY(sbuf_put(b, "\t", 1)); break;
            case 'n': TITAN_TRY(sbuf_put(b, "\n", 1)); break;
            case 'f': TITAN_TRY(sbuf_put(b, "\f", 1)); break;
            case 'r': TITAN_TRY(sbuf_put(b, "\r", 1)); break;
            case '"': TITAN_TRY(sbuf_put(b, "\"", 1)); break;
            case '\\': TITAN_TRY(sbuf_put(b, "\\", 1)); break;
            case 'u': TITAN_TRY(hex_escape(p, 4, b)); break;
            case 'U': TITAN_TRY(hex_escape(p, 8, b)); break;
            default: {
                /* line-ending backslash: drop the newline and following whitespace */
                size_t q = esc + 1;
                while (q < p->len && (p->s[q] == ' ' || p->s[q] == '\t')) q++;
                int nl = q < p->len && (p->s[q] == '\n' || (p->s[q] == '\r' && q + 1 < p->len && p->s[q + 1] == '\n'));
                if (multi && nl) {
                    p->pos = q;
                    for (;;) {
                        skip_ws(p);
                        if (!eat_newline(p)) break;
                    }
                    break;
                }
                if (e < 0) return perr_at(p, open, "unterminated string");
                if (e >= 0x20 && e < 0x7f)
                    return perr_at(p, esc, "invalid escape '\\%c' in string (for a backslash write \\\\ or use '...')", e);
                return perr_at(p, esc, "invalid escape in string");
            }
            }
            continue;
        }
        TITAN_TRY(string_char(p, b, multi));
    }
    if (!b->p) TITAN_TRY(sbuf_put(b, "", 0));
    return TITAN_OK;
}

static titan_status parse_literal(parser *p, sbuf *b, int multi) {
    size_t open = p->pos;
    p->pos += multi ? 3 : 1;
    if (multi) eat_newline(p);
    for (;;) {
        if (at_eof(p)) return perr_at(p, open, "unterminated string");
        int c = peek(p, 0);
        if (c == '\'') {
            if (!multi) { p->pos++; break; }
            if (peek(p, 1) == '\'' && peek(p, 2) == '\'') {
                int extra = 0;
                while (extra < 2 && peek(p, 3 + extra) == '\'') extra++;
                TITAN_TRY(sbuf_put(b, "''", (size_t)extra));
                p->pos += 3 + (size_t)extra;
                break;
            }
            p->pos++;
            TITAN_TRY(sbuf_put(b, "'", 1));
            continue;
        }
        TITAN_TRY(string_char(p, b, multi));
    }
    if (!b->p) TITAN_TRY(sbuf_put(b, "", 0));
    return TITAN_OK;
}

/* ---- numbers, booleans ---- */

static int is_token_char(int c) {
    return is_bare(c) || c == '+' || c == '.' || c == ':';
}

/* Copies digits of s[0..n) into out without '_', checking every '_' sits
 * between two digits of the given base. Returns 0 on a misplaced '_' or a
 * character outside the base. */
static int clean_digits(const char *s, size_t n, int base, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '_') {
            if (i == 0 || i + 1 == n || s[i - 1] == '_' || s[i + 1] == '_') return 0;
            continue;
        }
        int ok = base == 16 ? (is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))
                            : (c >= '0' && c < '0' + base);
        if (!ok) return 0;
        out[k++] = (char)c;
    }
    out[k] = '\0';
    return k > 0;
}

static titan_status parse_number(parser *p, titan_toml_value *v) {
    size_t start = p->pos;
    while (is_token_char(peek(p, 0))) p->pos++;
    size_t n = p->pos - start;
    const char *t = p->s + start;
    char tok[128], clean[128];
    if (n == 0) {
        char got[32];
        excerpt(p, start, got, sizeof got);
        if (at_eof(p) || got[0] == '\0') return perr_at(p, start, "expected a value after '='");
        return perr_at(p, start, "expected a value, got '%s'", got);
    }
    if (n >= sizeof tok) return perr_at(p, start, "number too long");
    memcpy(tok, t, n);
    tok[n] = '\0';
    if ((n >= 10 && is_digit(t[0]) && is_digit(t[3]) && t[4] == '-' && is_digit(t[5])) ||
        (n >= 5 && is_digit(t[0]) && is_digit(t[1]) && t[2] == ':'))
        return perr_at(p, start, "dates and times are not supported ('%s'); quote it as a string", tok);

    const char *d = tok;
    int neg = 0, sign = 0;
    if (*d == '+' || *d == '-') neg = *d == '-', sign = 1, d++;
    if (strcmp(d, "inf") == 0 || strcmp(d, "nan") == 0) {
        v->type = TITAN_TOML_FLOAT;
        v->u.f = d[0] == 'i' ? (neg ? -INFINITY : INFINITY) : (neg ? -NAN : NAN);
        return TITAN_OK;
    }
    if (!is_digit(*d)) {
        if (!sign && ((*d >= 'a' && *d <= 'z') || (*d >= 'A' && *d <= 'Z'))) {
            titan_status st = perr_at(p, start, "expected a value, got '%s'", tok);
            titan_error_hint("strings need quotes: \"%s\"", tok);
            return st;
        }
        return perr_at(p, start, "invalid number '%s'", tok);
    }
    if (d[0] == '0' && (d[1] == 'x' || d[1] == 'o' || d[1] == 'b')) {
        int base = d[1] == 'x' ? 16 : d[1] == 'o' ? 8 : 2;
        if (sign) return perr_at(p, start, "invalid number '%s': a sign is not allowed with 0%c", tok, d[1]);
        if (!clean_digits(d + 2, strlen(d + 2), base, clean))
            return perr_at(p, start, "invalid base-%d integer '%s'", base, tok);
        errno = 0;
        unsigned long long u = strtoull(clean, NULL, base);
        if (errno == ERANGE || u > (unsigned long long)INT64_MAX)
            return perr_at(p, start, "integer '%s' does not fit in 64 bits", tok);
        v->type = TITAN_TOML_INT;
        v->u.i = (int64_t)u;
        return TITAN_OK;
    }
    /* decimal: int part, optional .frac, optional exponent */
    size_t ilen = strcspn(d, ".eE");
    if (ilen > 1 && d[0] == '0')
        return perr_at(p, start, "invalid number '%s': leading zeros are not allowed", tok);
    size_t k = 0;
    if (neg) clean[k++] = '-';
    if (!clean_digits(d, ilen, 10, clean + k)) return perr_at(p, start, "invalid number '%s'", tok);
    k = strlen(clean);
    const char *r = d + ilen;
    int is_float = 0;
    if (*r == '.') {
        is_float = 1;
        size_t flen = strcspn(r + 1, "eE");
        clean[k++] = '.';
        if (!clean_digits(r + 1, flen, 10, clean + k))
            return perr_at(p, start, "invalid number '%s': a digit must follow the '.'", tok);
        k = strlen(clean);
        r += 1 + flen;
    }
    if (*r == 'e' || *r == 'E') {
        is_float = 1;
        clean[k++] = 'e';
        r++;
        if (*r == '+' || *r == '-') clean[k++] = *r++;
        if (!clean_digits(r, strlen(r), 10, clean + k))
            return perr_at(p, start, "invalid number '%s': bad exponent", tok);
        k = strlen(clean);
        r += strlen(r);
    }
    if (*r) return perr_at(p, start, "invalid number '%s'", tok);
    errno = 0;
    if (is_float) {
        double x = strtod(clean, NULL);
        if (errno == ERANGE && isinf(x)) return perr_at(p, start, "float '%s' is out of range", tok);
        v->type = TITAN_TOML_FLOAT;
        v->u.f = x;
    } else {
        long long x = strtoll(clean, NULL, 10);
        if (errno == ERANGE) return perr_at(p, start, "integer '%s' does not fit in 64 bits", tok);
        v->type = TITAN_TOML_INT;
        v->u.i = x;
    }
    return TITAN_OK;
}

/* ---- values ---- */

static titan_status parse_value(parser *p, titan_toml_value *v, int depth);
static titan_status parse_keyval(parser *p, titan_toml_table *t, int depth);

static titan_status parse_array(parser *p, titan_toml_value *v, int depth) {
    size_t open = p->pos;
    p->pos++;
    v->type = TITAN_TOML_ARRAY;
    v->u.arr = calloc(1, sizeof *v->u.arr);
    if (!v->u.arr) return nomem();
    titan_toml_array *a = v->u.arr;
    for (;;) {
        TITAN_TRY(skip_ws_nl(p));
        if (at_eof(p)) return perr_at(p, open, "unterminated array");
        if (peek(p, 0) == ']') { p->pos++; return TITAN_OK; }
        if (a->n == a->cap) {
            int cap = a->cap ? 2 * a->cap : 8;
            titan_toml_value *q = realloc(a->items, (size_t)cap * sizeof *q);
            if (!q) return nomem();
            a->items = q;
            a->cap = cap;
        }
        titan_toml_value *item = &a->items[a->n];
        memset(item, 0, sizeof *item);
        a->n++; /* counted now so a failure inside frees what it built */
        TITAN_TRY(parse_value(p, item, depth + 1));
        TITAN_TRY(skip_ws_nl(p));
        if (at_eof(p)) return perr_at(p, open, "unterminated array");
        if (peek(p, 0) == ',') { p->pos++; continue; }
        if (peek(p, 0) == ']') { p->pos++; return TITAN_OK; }
        char got[32];
        excerpt(p, p->pos, got, sizeof got);
        return perr_at(p, p->pos, "expected ',' or ']' in array, got '%s'", got);
    }
}

static titan_status parse_inline_table(parser *p, titan_toml_value *v, int depth) {
    size_t open = p->pos;
    TITAN_TRY(new_table(v, ORIGIN_INLINE, v->line, v->col));
    p->pos++;
    skip_ws(p);
    if (peek(p, 0) == '}') { p->pos++; return TITAN_OK; }
    for (;;) {
        skip_ws(p);
        if (at_eof(p)) return perr_at(p, open, "unterminated inline table");
        if (peek(p, 0) == '\n' || peek(p, 0) == '\r')
            return perr_at(p, p->pos, "newline in inline table (inline tables must fit on one line)");
        TITAN_TRY(parse_keyval(p, v->u.table, depth + 1));
        skip_ws(p);
        int c = peek(p, 0);
        if (c == '}') { p->pos++; return TITAN_OK; }
        if (c == ',') {
            p->pos++;
            skip_ws(p);
            if (peek(p, 0) == '}') return perr_at(p, p->pos - 1, "trailing comma in inline table");
            continue;
        }
        if (c < 0) return perr_at(p, open, "unterminated inline table");
        if (c == '\n' || c == '\r')
            return perr_at(p, p->pos, "newline in inline table (inline tables must fit on one line)");
        char got[32];
        excerpt(p, p->pos, got, sizeof got);
        return perr_at(p, p->pos, "expected ',' or '}' in inline table, got '%s'", got);
    }
}

static titan_status parse_value(parser *p, titan_toml_value *v, int depth) {
    memset(v, 0, sizeof *v);
    v->line = p->line;
    v->col = (int)(p->pos - p->bol) + 1;
    if (depth > MAX_DEPTH) return perr_at(p, p->pos, "values nested more than %d deep", MAX_DEPTH);
    int c = peek(p, 0);
    if (c == '"' || c == '\'') {
        sbuf b = {0};
        int multi = peek(p, 1) == c && peek(p, 2) == c;
        titan_status st = c == '"' ? parse_basic(p, &b, multi) : parse_literal(p, &b, multi);
        if (st != TITAN_OK) {
            free(b.p);
            return st;
        }
        v->type = TITAN_TOML_STRING;
        v->u.str.ptr = b.p;
        v->u.str.len = b.n;
        return TITAN_OK;
    }
    if (c == '[') return parse_array(p, v, depth);
    if (c == '{') return parse_inline_table(p, v, depth);
    if (p->len - p->pos >= 4 && memcmp(p->s + p->pos, "true", 4) == 0 && !is_token_char(peek(p, 4))) {
        p->pos += 4;
        v->type = TITAN_TOML_BOOL;
        v->u.b = 1;
        return TITAN_OK;
    }
    if (p->len - p->pos >= 5 && memcmp(p->s + p->pos, "false", 5) == 0 && !is_token_char(peek(p, 5))) {
        p->pos += 5;
        v->type = TITAN_TOML_BOOL;
        v->u.b = 0;
        return TITAN_OK;
    }
    v->type = TITAN_TOML_INT; /* nothing owned yet */
    return parse_number(p, v);
}

/* ---- key = value, [headers] ---- */

static const char *origin_word(const titan_toml_table *t) {
    switch (t->origin) {
    case ORIGIN_INLINE: return "an inline table";
    case ORIGIN_DOTTED: return "a table made by dotted keys";
    default: return "a table";
    }
}

static titan_status parse_keyval(parser *p, titan_toml_table *t, int depth) {
    keypath k;
    TITAN_TRY(parse_key(p, &k));
    skip_ws(p);
    if (peek(p, 0) != '=') {
        char name[256], got[32];
        keypath_text(&k, k.n, name, sizeof name);
        excerpt(p, p->pos, got, sizeof got);
        titan_status st = got[0] ? perr_at(p, p->pos, "expected '=' after key '%s', got '%s'", name, got)
                                 : perr_at(p, p->pos, "expected '=' after key '%s'", name);
        keypath_free(&k);
        return st;
    }
    p->pos++;
    skip_ws(p);
    titan_toml_value v;
    titan_status st = parse_value(p, &v, depth);
    char name[256];
    /* walk / create the dotted prefix */
    for (int i = 0; st == TITAN_OK && i < k.n - 1; i++) {
        const titan_toml_entry *e = titan_toml_table_find(t, k.part[i]);
        keypath_text(&k, i + 1, name, sizeof name);
        if (!e) {
            titan_toml_value tv;
            titan_toml_entry *ne;
            st = new_table(&tv, ORIGIN_DOTTED, k.line[i], k.col[i]);
            if (st == TITAN_OK) st = table_add(t, k.part[i], k.line[i], k.col[i], &tv, &ne);
            if (st != TITAN_OK) { titan_toml_value_free(&tv); break; }
            t = ne->value.u.table;
        } else if (e->value.type != TITAN_TOML_TABLE) {
            st = perr_at(p, k.at[i], "key '%s' is already a %s (line %d), not a table", name,
                         titan_toml_type_name(e->value.type), e->line);
        } else if (e->value.u.table->origin != ORIGIN_DOTTED) {
            st = perr_at(p, k.at[i], "cannot add keys to '%s' with a dotted key: it is %s defined at line %d",
                         name, origin_word(e->value.u.table), e->line);
        } else {
            t = e->value.u.table;
        }
    }
    if (st == TITAN_OK) {
        int last = k.n - 1;
        const titan_toml_entry *e = titan_toml_table_find(t, k.part[last]);
        if (e) {
            keypath_text(&k, k.n, name, sizeof name);
            st = perr_at(p, k.at[last], "duplicate key '%s' (first defined at line %d)", name, e->line);
        } else {
            st = table_add(t, k.part[last], k.line[last], k.col[last], &v, NULL);
        }
    }
    titan_toml_value_free(&v);
    keypath_free(&k);
    return st;
}

static titan_status parse_header(parser *p, titan_toml_table *root, titan_toml_table **cur) {
    size_t open = p->pos;
    if (peek(p, 1) == '[')
        return perr_at(p, open, "arrays of tables ([[...]]) are not supported in job configs");
    p->pos++;
    skip_ws(p);
    if (peek(p, 0) == ']') return perr_at(p, open, "empty table name '[]'");
    keypath k;
    TITAN_TRY(parse_key(p, &k));
    char name[256];
    keypath_text(&k, k.n, name, sizeof name);
    titan_status st = TITAN_OK;
    if (peek(p, 0) != ']') {
        char got[32];
        excerpt(p, p->pos, got, sizeof got);
        st = got[0] ? perr_at(p, p->pos, "expected ']' after table name '%s', got '%s'", name, got)
                    : perr_at(p, p->pos, "expected ']' after table name '%s'", name);
    }
    p->pos++;
    titan_toml_table *t = root;
    for (int i = 0; st == TITAN_OK && i < k.n; i++) {
        titan_toml_entry *e = (titan_toml_entry *)titan_toml_table_find(t, k.part[i]);
        int last = i == k.n - 1;
        char sub[256];
        keypath_text(&k, i + 1, sub, sizeof sub);
        if (!e) {
            titan_toml_value tv;
            st = new_table(&tv, last ? ORIGIN_HEADER : ORIGIN_IMPLICIT, k.line[0], k.col[0]);
            if (st == TITAN_OK) st = table_add(t, k.part[i], k.line[0], k.col[0], &tv, &e);
            if (st != TITAN_OK) { titan_toml_value_free(&tv); break; }
        } else if (e->value.type != TITAN_TOML_TABLE) {
            st = perr_at(p, k.at[i], "key '%s' is already a %s (line %d), not a table", sub,
                         titan_toml_type_name(e->value.type), e->line);
            break;
        } else if (e->value.u.table->origin == ORIGIN_INLINE) {
            st = perr_at(p, k.at[i], "'%s' is an inline table (line %d) and cannot be extended", sub, e->line);
            break;
        } else if (last) {
            titan_toml_table *et = e->value.u.table;
            if (et->origin == ORIGIN_HEADER)
                st = perr_at(p, open, "table [%s] defined twice (first at line %d)", name, e->line);
            else if (et->origin == ORIGIN_DOTTED)
                st = perr_at(p, open, "table [%s] was already defined by dotted keys at line %d", name, e->line);
            else {
                et->origin = ORIGIN_HEADER;
                e->line = k.line[0];
                e->col = k.col[0];
            }
            if (st != TITAN_OK) break;
        }
        t = e->value.u.table;
    }
    keypath_free(&k);
    if (st == TITAN_OK) *cur = t;
    return st;
}

/* Whatever follows a value or header on its line: whitespace, a comment. */
static titan_status end_of_line(parser *p, const char *after) {
    skip_ws(p);
    TITAN_TRY(skip_comment(p));
    if (at_eof(p) || eat_newline(p)) return TITAN_OK;
    char got[32];
    excerpt(p, p->pos, got, sizeof got);
    if (peek(p, 0) == '\r') return perr_at(p, p->pos, "carriage return without a line feed");
    return perr_at(p, p->pos, "unexpected '%s' after %s (one key = value per line)", got, after);
}

static titan_status check_utf8(const parser *p) {
    const unsigned char *s = (const unsigned char *)p->s;
    for (size_t i = 0; i < p->len;) {
        if (s[i] == 0) return perr_at(p, i, "NUL byte in file (not a text file?)");
        size_t n = utf8_len(s + i, p->len - i);
        if (!n) return perr_at(p, i, "invalid UTF-8");
        i += n;
    }
    return TITAN_OK;
}

titan_status titan_toml_parse(const char *text, size_t len, const char *name, titan_toml_doc **out) {
    *out = NULL;
    parser p = {.s = text, .len = len, .line = 1, .name = name ? name : "<string>"};
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) p.pos = p.bol = 3; /* BOM */
    TITAN_TRY(check_utf8(&p));
    titan_toml_doc *doc = calloc(1, sizeof *doc);
    if (!doc) return nomem();
    snprintf(doc->name, sizeof doc->name, "%s", p.name);
    doc->root.origin = ORIGIN_HEADER;
    titan_toml_table *cur = &doc->root;
    titan_status st = TITAN_OK;
    while (st == TITAN_OK) {
        skip_ws(&p);
        if (at_eof(&p)) break;
        int c = peek(&p, 0);
        if (c == '#' || c == '\n' || c == '\r') {
            st = end_of_line(&p, "comment");
        } else if (c == '[') {
            st = parse_header(&p, &doc->root, &cur);
            if (st == TITAN_OK) st = end_of_line(&p, "table header");
        } else {
            st = parse_keyval(&p, cur, 0);
            if (st == TITAN_OK) st = end_of_line(&p, "value");
        }
    }
    if (st != TITAN_OK) {
        titan_toml_free(doc);
        return st;
    }
    *out = doc;
    return TITAN_OK;
}

titan_status titan_toml_parse_file(const char *path, titan_toml_doc **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return titan_error(TITAN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    sbuf b = {0};
    char chunk[65536];
    size_t n;
    titan_status st = TITAN_OK;
    while (st == TITAN_OK && (n = fread(chunk, 1, sizeof chunk, f)) > 0) st = sbuf_put(&b, chunk, n);
    if (st == TITAN_OK && ferror(f)) st = titan_error(TITAN_ERR_IO, "%s: read failed: %s", path, strerror(errno));
    fclose(f);
    if (st == TITAN_OK) st = titan_toml_parse(b.p ? b.p : "", b.n, path, out);
    free(b.p);
    return st;
}

void titan_toml_free(titan_toml_doc *doc) {
    if (!doc) return;
    table_free(&doc->root);
    free(doc);
}

titan_status titan_toml_parse_value(const char *text, const char *name, titan_toml_value *out) {
    memset(out, 0, sizeof *out);
    parser p = {.s = text, .len = strlen(text), .line = 1, .name = name ? name : "<value>"};
    TITAN_TRY(check_utf8(&p));
    skip_ws(&p);
    titan_status st = parse_value(&p, out, 0);
    if (st == TITAN_OK) {
        skip_ws(&p);
        if (!at_eof(&p)) {
            char got[32];
            excerpt(&p, p.pos, got, sizeof got);
            st = perr_at(&p, p.pos, "unexpected '%s' after value", got);
        }
    }
    if (st != TITAN_OK) titan_toml_value_free(out);
    return st;
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
