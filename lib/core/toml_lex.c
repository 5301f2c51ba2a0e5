/* toml_lex.c - the lexical pieces of TOML: blanks, comments, newlines,
 * strings with escapes, numbers; and error messages with line and column. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toml_impl.h"

/* ---- errors ---- */

titan_status titan_toml_perr(const titan_toml_parser *p, size_t at, const char *fmt, ...) {
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

titan_status titan_toml_nomem(void) { return titan_error(TITAN_ERR_NOMEM, "out of memory while reading TOML"); }

/* Printable excerpt of the source at `at`, for "got 'xyz'" messages. */
void titan_toml_excerpt(const titan_toml_parser *p, size_t at, char *out, size_t n) {
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

int titan_toml_peek(const titan_toml_parser *p, size_t off) { return p->pos + off < p->len ? (unsigned char)p->s[p->pos + off] : -1; }
int titan_toml_at_eof(const titan_toml_parser *p) { return p->pos >= p->len; }
int titan_toml_is_bare(int c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; }
int titan_toml_is_digit(int c) { return c >= '0' && c <= '9'; }

void titan_toml_skip_ws(titan_toml_parser *p) {
    while (!titan_toml_at_eof(p) && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t')) p->pos++;
}

static void newline(titan_toml_parser *p) {
    p->line++;
    p->bol = p->pos;
}

/* Consumes "\n" or "\r\n"; returns 0 when not at a newline. */
int titan_toml_eat_newline(titan_toml_parser *p) {
    if (titan_toml_peek(p, 0) == '\n') {
        p->pos++;
    } else if (titan_toml_peek(p, 0) == '\r' && titan_toml_peek(p, 1) == '\n') {
        p->pos += 2;
    } else {
        return 0;
    }
    newline(p);
    return 1;
}

titan_status titan_toml_skip_comment(titan_toml_parser *p) {
    if (titan_toml_peek(p, 0) != '#') return TITAN_OK;
    for (; !titan_toml_at_eof(p); p->pos++) {
        int c = (unsigned char)p->s[p->pos];
        if (c == '\n' || (c == '\r' && titan_toml_peek(p, 1) == '\n')) break;
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return titan_toml_perr(p, p->pos, "control character U+%04X in comment", c);
    }
    return TITAN_OK;
}

/* Whitespace, newlines and comments (inside arrays). */
titan_status titan_toml_skip_ws_nl(titan_toml_parser *p) {
    for (;;) {
        titan_toml_skip_ws(p);
        TITAN_TRY(titan_toml_skip_comment(p));
        if (!titan_toml_eat_newline(p)) return TITAN_OK;
    }
}

titan_status titan_toml_sbuf_put(titan_toml_sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return titan_toml_nomem();
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return TITAN_OK;
}

static titan_status sbuf_utf8(titan_toml_sbuf *b, uint32_t cp) {
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
    return titan_toml_sbuf_put(b, u, n);
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

/* ---- strings ---- */

static titan_status hex_escape(titan_toml_parser *p, int digits, titan_toml_sbuf *b) {
    size_t at = p->pos - 2;
    uint32_t cp = 0;
    for (int i = 0; i < digits; i++) {
        int c = titan_toml_peek(p, 0);
        int d = titan_toml_is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0) return titan_toml_perr(p, at, "escape \\%c needs %d hex digits", digits == 4 ? 'u' : 'U', digits);
        cp = cp * 16 + (uint32_t)d;
        p->pos++;
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return titan_toml_perr(p, at, "escape is not a Unicode scalar value (U+%X)", cp);
    return sbuf_utf8(b, cp);
}

/* Handles the character at p->pos inside a string body: control characters
 * are refused, newlines are counted. */
static titan_status string_char(titan_toml_parser *p, titan_toml_sbuf *b, int multi) {
    int c = titan_toml_peek(p, 0);
    if (c == '\n' || (c == '\r' && titan_toml_peek(p, 1) == '\n')) {
        if (!multi)
            return titan_toml_perr(p, p->pos, "unterminated string (strings end on the same line; use \"\"\" for multi-line)");
        titan_toml_eat_newline(p);
        return titan_toml_sbuf_put(b, "\n", 1);
    }
    if ((c < 0x20 && c != '\t') || c == 0x7f)
        return titan_toml_perr(p, p->pos, "control character U+%04X in string (write it as an escape)", c);
    p->pos++;
    return titan_toml_sbuf_put(b, p->s + p->pos - 1, 1);
}

/* At the opening quote(s). multi: """...""". */
titan_status titan_toml_parse_basic(titan_toml_parser *p, titan_toml_sbuf *b, int multi) {
    size_t open = p->pos;
    p->pos += multi ? 3 : 1;
    if (multi) titan_toml_eat_newline(p); /* a newline right after """ is trimmed */
    for (;;) {
        if (titan_toml_at_eof(p)) return titan_toml_perr(p, open, "unterminated string");
        int c = titan_toml_peek(p, 0);
        if (c == '"') {
            if (!multi) { p->pos++; break; }
            if (titan_toml_peek(p, 1) == '"' && titan_toml_peek(p, 2) == '"') {
                int extra = 0; /* up to two quotes may sit just before the closing """ */
                while (extra < 2 && titan_toml_peek(p, 3 + extra) == '"') extra++;
                TITAN_TRY(titan_toml_sbuf_put(b, "\"\"", (size_t)extra));
                p->pos += 3 + (size_t)extra;
                break;
            }
            p->pos++;
            TITAN_TRY(titan_toml_sbuf_put(b, "\"", 1));
            continue;
        }
        if (c == '\\') {
            size_t esc = p->pos;
            int e = titan_toml_peek(p, 1);
            p->pos += 2;
            switch (e) {
            case 'b': TITAN_TRY(titan_toml_sbuf_put(b, "\b", 1)); break;
            case 't': TITAN_TRY(titan_toml_sbuf_put(b, "\t", 1)); break;
            case 'n': TITAN_TRY(titan_toml_sbuf_put(b, "\n", 1)); break;
            case 'f': TITAN_TRY(titan_toml_sbuf_put(b, "\f", 1)); break;
            case 'r': TITAN_TRY(titan_toml_sbuf_put(b, "\r", 1)); break;
            case '"': TITAN_TRY(titan_toml_sbuf_put(b, "\"", 1)); break;
            case '\\': TITAN_TRY(titan_toml_sbuf_put(b, "\\", 1)); break;
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
                        titan_toml_skip_ws(p);
                        if (!titan_toml_eat_newline(p)) break;
                    }
                    break;
                }
                if (e < 0) return titan_toml_perr(p, open, "unterminated string");
                if (e >= 0x20 && e < 0x7f)
                    return titan_toml_perr(p, esc, "invalid escape '\\%c' in string (for a backslash write \\\\ or use '...')", e);
                return titan_toml_perr(p, esc, "invalid escape in string");
            }
            }
            continue;
        }
        TITAN_TRY(string_char(p, b, multi));
    }
    if (!b->p) TITAN_TRY(titan_toml_sbuf_put(b, "", 0));
    return TITAN_OK;
}

titan_status titan_toml_parse_literal(titan_toml_parser *p, titan_toml_sbuf *b, int multi) {
    size_t open = p->pos;
    p->pos += multi ? 3 : 1;
    if (multi) titan_toml_eat_newline(p);
    for (;;) {
        if (titan_toml_at_eof(p)) return titan_toml_perr(p, open, "unterminated string");
        int c = titan_toml_peek(p, 0);
        if (c == '\'') {
            if (!multi) { p->pos++; break; }
            if (titan_toml_peek(p, 1) == '\'' && titan_toml_peek(p, 2) == '\'') {
                int extra = 0;
                while (extra < 2 && titan_toml_peek(p, 3 + extra) == '\'') extra++;
                TITAN_TRY(titan_toml_sbuf_put(b, "''", (size_t)extra));
                p->pos += 3 + (size_t)extra;
                break;
            }
            p->pos++;
            TITAN_TRY(titan_toml_sbuf_put(b, "'", 1));
            continue;
        }
        TITAN_TRY(string_char(p, b, multi));
    }
    if (!b->p) TITAN_TRY(titan_toml_sbuf_put(b, "", 0));
    return TITAN_OK;
}

/* ---- numbers, booleans ---- */

int titan_toml_is_token_char(int c) {
    return titan_toml_is_bare(c) || c == '+' || c == '.' || c == ':';
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
        int ok = base == 16 ? (titan_toml_is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))
                            : (c >= '0' && c < '0' + base);
        if (!ok) return 0;
        out[k++] = (char)c;
    }
    out[k] = '\0';
    return k > 0;
}

titan_status titan_toml_parse_number(titan_toml_parser *p, titan_toml_value *v) {
    size_t start = p->pos;
    while (titan_toml_is_token_char(titan_toml_peek(p, 0))) p->pos++;
    size_t n = p->pos - start;
    const char *t = p->s + start;
    char tok[128], clean[128];
    if (n == 0) {
        char got[32];
        titan_toml_excerpt(p, start, got, sizeof got);
        if (titan_toml_at_eof(p) || got[0] == '\0') return titan_toml_perr(p, start, "expected a value after '='");
        return titan_toml_perr(p, start, "expected a value, got '%s'", got);
    }
    if (n >= sizeof tok) return titan_toml_perr(p, start, "number too long");
    memcpy(tok, t, n);
    tok[n] = '\0';
    if ((n >= 10 && titan_toml_is_digit(t[0]) && titan_toml_is_digit(t[3]) && t[4] == '-' && titan_toml_is_digit(t[5])) ||
        (n >= 5 && titan_toml_is_digit(t[0]) && titan_toml_is_digit(t[1]) && t[2] == ':'))
        return titan_toml_perr(p, start, "dates and times are not supported ('%s'); quote it as a string", tok);

    const char *d = tok;
    int neg = 0, sign = 0;
    if (*d == '+' || *d == '-') neg = *d == '-', sign = 1, d++;
    if (strcmp(d, "inf") == 0 || strcmp(d, "nan") == 0) {
        v->type = TITAN_TOML_FLOAT;
        v->u.f = d[0] == 'i' ? (neg ? -INFINITY : INFINITY) : (neg ? -NAN : NAN);
        return TITAN_OK;
    }
    if (!titan_toml_is_digit(*d)) {
        if (!sign && ((*d >= 'a' && *d <= 'z') || (*d >= 'A' && *d <= 'Z'))) {
            titan_status st = titan_toml_perr(p, start, "expected a value, got '%s'", tok);
            titan_error_hint("strings need quotes: \"%s\"", tok);
            return st;
        }
        return titan_toml_perr(p, start, "invalid number '%s'", tok);
    }
    if (d[0] == '0' && (d[1] == 'x' || d[1] == 'o' || d[1] == 'b')) {
        int base = d[1] == 'x' ? 16 : d[1] == 'o' ? 8 : 2;
        if (sign) return titan_toml_perr(p, start, "invalid number '%s': a sign is not allowed with 0%c", tok, d[1]);
        if (!clean_digits(d + 2, strlen(d + 2), base, clean))
            return titan_toml_perr(p, start, "invalid base-%d integer '%s'", base, tok);
        errno = 0;
        unsigned long long u = strtoull(clean, NULL, base);
        if (errno == ERANGE || u > (unsigned long long)INT64_MAX)
            return titan_toml_perr(p, start, "integer '%s' does not fit in 64 bits", tok);
        v->type = TITAN_TOML_INT;
        v->u.i = (int64_t)u;
        return TITAN_OK;
    }
    /* decimal: int part, optional .frac, optional exponent */
    size_t ilen = strcspn(d, ".eE");
    if (ilen > 1 && d[0] == '0')
        return titan_toml_perr(p, start, "invalid number '%s': leading zeros are not allowed", tok);
    size_t k = 0;
    if (neg) clean[k++] = '-';
    if (!clean_digits(d, ilen, 10, clean + k)) return titan_toml_perr(p, start, "invalid number '%s'", tok);
    k = strlen(clean);
    const char *r = d + ilen;
    int is_float = 0;
    if (*r == '.') {
        is_float = 1;
        size_t flen = strcspn(r + 1, "eE");
        clean[k++] = '.';
        if (!clean_digits(r + 1, flen, 10, clean + k))
            return titan_toml_perr(p, start, "invalid number '%s': a digit must follow the '.'", tok);
        k = strlen(clean);
        r += 1 + flen;
    }
    if (*r == 'e' || *r == 'E') {
        is_float = 1;
        clean[k++] = 'e';
        r++;
        if (*r == '+' || *r == '-') clean[k++] = *r++;
        if (!clean_digits(r, strlen(r), 10, clean + k))
            return titan_toml_perr(p, start, "invalid number '%s': bad exponent", tok);
        k = strlen(clean);
        r += strlen(r);
    }
    if (*r) return titan_toml_perr(p, start, "invalid number '%s'", tok);
    errno = 0;
    if (is_float) {
        double x = strtod(clean, NULL);
        if (errno == ERANGE && isinf(x)) return titan_toml_perr(p, start, "float '%s' is out of range", tok);
        v->type = TITAN_TOML_FLOAT;
        v->u.f = x;
    } else {
        long long x = strtoll(clean, NULL, 10);
        if (errno == ERANGE) return titan_toml_perr(p, start, "integer '%s' does not fit in 64 bits", tok);
        v->type = TITAN_TOML_INT;
        v->u.i = x;
    }
    return TITAN_OK;
}

titan_status titan_toml_check_utf8(const titan_toml_parser *p) {
    const unsigned char *s = (const unsigned char *)p->s;
    for (size_t i = 0; i < p->len;) {
        if (s[i] == 0) return titan_toml_perr(p, i, "NUL byte in file (not a text file?)");
        size_t n = utf8_len(s + i, p->len - i);
        if (!n) return titan_toml_perr(p, i, "invalid UTF-8");
        i += n;
    }
    return TITAN_OK;
}
