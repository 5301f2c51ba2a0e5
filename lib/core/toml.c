/* toml.c - the TOML document: keys, [headers], dotted keys, arrays, inline
 * tables and the rules on redefining them. Lexing is in toml_lex.c, lookups
 * and text output in toml_format.c. */
#include "toml.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toml_impl.h"

/* How a table came to exist; decides which later definitions are legal. */
enum { ORIGIN_IMPLICIT = 1, ORIGIN_HEADER, ORIGIN_DOTTED, ORIGIN_INLINE };

#define MAX_KEY_PARTS 32
#define MAX_DEPTH 64 /* nested arrays / inline tables */

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
        if (!q) return titan_toml_nomem();
        t->items = q;
        t->cap = cap;
    }
    char *k = strdup(key);
    if (!k) return titan_toml_nomem();
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
    if (!v->u.table) return titan_toml_nomem();
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

static titan_status parse_key(titan_toml_parser *p, keypath *k) {
    k->n = 0;
    for (;;) {
        titan_toml_skip_ws(p);
        if (k->n == MAX_KEY_PARTS) {
            keypath_free(k);
            return titan_toml_perr(p, p->pos, "key has more than %d parts", MAX_KEY_PARTS);
        }
        size_t start = p->pos;
        titan_toml_sbuf b = {0};
        titan_status st = TITAN_OK;
        int c = titan_toml_peek(p, 0);
        if (c == '"' || c == '\'') {
            if (titan_toml_peek(p, 1) == c && titan_toml_peek(p, 2) == c)
                st = titan_toml_perr(p, start, "multi-line strings cannot be keys");
            else
                st = c == '"' ? titan_toml_parse_basic(p, &b, 0) : titan_toml_parse_literal(p, &b, 0);
            if (st == TITAN_OK && !b.p) st = titan_toml_sbuf_put(&b, "", 0);
            if (st == TITAN_OK && strlen(b.p) != b.n) st = titan_toml_perr(p, start, "key contains a NUL character");
        } else if (titan_toml_is_bare(c)) {
            while (titan_toml_is_bare(titan_toml_peek(p, 0))) p->pos++;
            st = titan_toml_sbuf_put(&b, p->s + start, p->pos - start);
        } else {
            char got[32];
            titan_toml_excerpt(p, start, got, sizeof got);
            if (titan_toml_at_eof(p) || c == '\n' || c == '\r')
                st = titan_toml_perr(p, start, "expected a key, got end of line");
            else
                st = titan_toml_perr(p, start, "expected a key, got '%s'", got);
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
        titan_toml_skip_ws(p);
        if (titan_toml_peek(p, 0) != '.') return TITAN_OK;
        p->pos++;
    }
}

/* ---- values ---- */

static titan_status parse_value(titan_toml_parser *p, titan_toml_value *v, int depth);
static titan_status parse_keyval(titan_toml_parser *p, titan_toml_table *t, int depth);

static titan_status parse_array(titan_toml_parser *p, titan_toml_value *v, int depth) {
    size_t open = p->pos;
    p->pos++;
    v->type = TITAN_TOML_ARRAY;
    v->u.arr = calloc(1, sizeof *v->u.arr);
    if (!v->u.arr) return titan_toml_nomem();
    titan_toml_array *a = v->u.arr;
    for (;;) {
        TITAN_TRY(titan_toml_skip_ws_nl(p));
        if (titan_toml_at_eof(p)) return titan_toml_perr(p, open, "unterminated array");
        if (titan_toml_peek(p, 0) == ']') { p->pos++; return TITAN_OK; }
        if (a->n == a->cap) {
            int cap = a->cap ? 2 * a->cap : 8;
            titan_toml_value *q = realloc(a->items, (size_t)cap * sizeof *q);
            if (!q) return titan_toml_nomem();
            a->items = q;
            a->cap = cap;
        }
        titan_toml_value *item = &a->items[a->n];
        memset(item, 0, sizeof *item);
        a->n++; /* counted now so a failure inside frees what it built */
        TITAN_TRY(parse_value(p, item, depth + 1));
        TITAN_TRY(titan_toml_skip_ws_nl(p));
        if (titan_toml_at_eof(p)) return titan_toml_perr(p, open, "unterminated array");
        if (titan_toml_peek(p, 0) == ',') { p->pos++; continue; }
        if (titan_toml_peek(p, 0) == ']') { p->pos++; return TITAN_OK; }
        char got[32];
        titan_toml_excerpt(p, p->pos, got, sizeof got);
        return titan_toml_perr(p, p->pos, "expected ',' or ']' in array, got '%s'", got);
    }
}

static titan_status parse_inline_table(titan_toml_parser *p, titan_toml_value *v, int depth) {
    size_t open = p->pos;
    TITAN_TRY(new_table(v, ORIGIN_INLINE, v->line, v->col));
    p->pos++;
    titan_toml_skip_ws(p);
    if (titan_toml_peek(p, 0) == '}') { p->pos++; return TITAN_OK; }
    for (;;) {
        titan_toml_skip_ws(p);
        if (titan_toml_at_eof(p)) return titan_toml_perr(p, open, "unterminated inline table");
        if (titan_toml_peek(p, 0) == '\n' || titan_toml_peek(p, 0) == '\r')
            return titan_toml_perr(p, p->pos, "newline in inline table (inline tables must fit on one line)");
        TITAN_TRY(parse_keyval(p, v->u.table, depth + 1));
        titan_toml_skip_ws(p);
        int c = titan_toml_peek(p, 0);
        if (c == '}') { p->pos++; return TITAN_OK; }
        if (c == ',') {
            p->pos++;
            titan_toml_skip_ws(p);
            if (titan_toml_peek(p, 0) == '}') return titan_toml_perr(p, p->pos - 1, "trailing comma in inline table");
            continue;
        }
        if (c < 0) return titan_toml_perr(p, open, "unterminated inline table");
        if (c == '\n' || c == '\r')
            return titan_toml_perr(p, p->pos, "newline in inline table (inline tables must fit on one line)");
        char got[32];
        titan_toml_excerpt(p, p->pos, got, sizeof got);
        return titan_toml_perr(p, p->pos, "expected ',' or '}' in inline table, got '%s'", got);
    }
}

static titan_status parse_value(titan_toml_parser *p, titan_toml_value *v, int depth) {
    memset(v, 0, sizeof *v);
    v->line = p->line;
    v->col = (int)(p->pos - p->bol) + 1;
    if (depth > MAX_DEPTH) return titan_toml_perr(p, p->pos, "values nested more than %d deep", MAX_DEPTH);
    int c = titan_toml_peek(p, 0);
    if (c == '"' || c == '\'') {
        titan_toml_sbuf b = {0};
        int multi = titan_toml_peek(p, 1) == c && titan_toml_peek(p, 2) == c;
        titan_status st = c == '"' ? titan_toml_parse_basic(p, &b, multi) : titan_toml_parse_literal(p, &b, multi);
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
    if (p->len - p->pos >= 4 && memcmp(p->s + p->pos, "true", 4) == 0 && !titan_toml_is_token_char(titan_toml_peek(p, 4))) {
        p->pos += 4;
        v->type = TITAN_TOML_BOOL;
        v->u.b = 1;
        return TITAN_OK;
    }
    if (p->len - p->pos >= 5 && memcmp(p->s + p->pos, "false", 5) == 0 && !titan_toml_is_token_char(titan_toml_peek(p, 5))) {
        p->pos += 5;
        v->type = TITAN_TOML_BOOL;
        v->u.b = 0;
        return TITAN_OK;
    }
    v->type = TITAN_TOML_INT; /* nothing owned yet */
    return titan_toml_parse_number(p, v);
}

/* ---- key = value, [headers] ---- */

static const char *origin_word(const titan_toml_table *t) {
    switch (t->origin) {
    case ORIGIN_INLINE: return "an inline table";
    case ORIGIN_DOTTED: return "a table made by dotted keys";
    default: return "a table";
    }
}

static titan_status parse_keyval(titan_toml_parser *p, titan_toml_table *t, int depth) {
    keypath k;
    TITAN_TRY(parse_key(p, &k));
    titan_toml_skip_ws(p);
    if (titan_toml_peek(p, 0) != '=') {
        char name[256], got[32];
        keypath_text(&k, k.n, name, sizeof name);
        titan_toml_excerpt(p, p->pos, got, sizeof got);
        titan_status st = got[0] ? titan_toml_perr(p, p->pos, "expected '=' after key '%s', got '%s'", name, got)
                                 : titan_toml_perr(p, p->pos, "expected '=' after key '%s'", name);
        keypath_free(&k);
        return st;
    }
    p->pos++;
    titan_toml_skip_ws(p);
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
            st = titan_toml_perr(p, k.at[i], "key '%s' is already a %s (line %d), not a table", name,
                         titan_toml_type_name(e->value.type), e->line);
        } else if (e->value.u.table->origin != ORIGIN_DOTTED) {
            st = titan_toml_perr(p, k.at[i], "cannot add keys to '%s' with a dotted key: it is %s defined at line %d",
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
            st = titan_toml_perr(p, k.at[last], "duplicate key '%s' (first defined at line %d)", name, e->line);
        } else {
            st = table_add(t, k.part[last], k.line[last], k.col[last], &v, NULL);
        }
    }
    titan_toml_value_free(&v);
    keypath_free(&k);
    return st;
}

static titan_status parse_header(titan_toml_parser *p, titan_toml_table *root, titan_toml_table **cur) {
    size_t open = p->pos;
    if (titan_toml_peek(p, 1) == '[')
        return titan_toml_perr(p, open, "arrays of tables ([[...]]) are not supported in job configs");
    p->pos++;
    titan_toml_skip_ws(p);
    if (titan_toml_peek(p, 0) == ']') return titan_toml_perr(p, open, "empty table name '[]'");
    keypath k;
    TITAN_TRY(parse_key(p, &k));
    char name[256];
    keypath_text(&k, k.n, name, sizeof name);
    titan_status st = TITAN_OK;
    if (titan_toml_peek(p, 0) != ']') {
        char got[32];
        titan_toml_excerpt(p, p->pos, got, sizeof got);
        st = got[0] ? titan_toml_perr(p, p->pos, "expected ']' after table name '%s', got '%s'", name, got)
                    : titan_toml_perr(p, p->pos, "expected ']' after table name '%s'", name);
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
            st = titan_toml_perr(p, k.at[i], "key '%s' is already a %s (line %d), not a table", sub,
                         titan_toml_type_name(e->value.type), e->line);
            break;
        } else if (e->value.u.table->origin == ORIGIN_INLINE) {
            st = titan_toml_perr(p, k.at[i], "'%s' is an inline table (line %d) and cannot be extended", sub, e->line);
            break;
        } else if (last) {
            titan_toml_table *et = e->value.u.table;
            if (et->origin == ORIGIN_HEADER)
                st = titan_toml_perr(p, open, "table [%s] defined twice (first at line %d)", name, e->line);
            else if (et->origin == ORIGIN_DOTTED)
                st = titan_toml_perr(p, open, "table [%s] was already defined by dotted keys at line %d", name, e->line);
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
static titan_status end_of_line(titan_toml_parser *p, const char *after) {
    titan_toml_skip_ws(p);
    TITAN_TRY(titan_toml_skip_comment(p));
    if (titan_toml_at_eof(p) || titan_toml_eat_newline(p)) return TITAN_OK;
    char got[32];
    titan_toml_excerpt(p, p->pos, got, sizeof got);
    if (titan_toml_peek(p, 0) == '\r') return titan_toml_perr(p, p->pos, "carriage return without a line feed");
    return titan_toml_perr(p, p->pos, "unexpected '%s' after %s (one key = value per line)", got, after);
}

titan_status titan_toml_parse(const char *text, size_t len, const char *name, titan_toml_doc **out) {
    *out = NULL;
    titan_toml_parser p = {.s = text, .len = len, .line = 1, .name = name ? name : "<string>"};
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) p.pos = p.bol = 3; /* BOM */
    TITAN_TRY(titan_toml_check_utf8(&p));
    titan_toml_doc *doc = calloc(1, sizeof *doc);
    if (!doc) return titan_toml_nomem();
    snprintf(doc->name, sizeof doc->name, "%s", p.name);
    doc->root.origin = ORIGIN_HEADER;
    titan_toml_table *cur = &doc->root;
    titan_status st = TITAN_OK;
    while (st == TITAN_OK) {
        titan_toml_skip_ws(&p);
        if (titan_toml_at_eof(&p)) break;
        int c = titan_toml_peek(&p, 0);
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
    titan_toml_sbuf b = {0};
    char chunk[65536];
    size_t n;
    titan_status st = TITAN_OK;
    while (st == TITAN_OK && (n = fread(chunk, 1, sizeof chunk, f)) > 0) st = titan_toml_sbuf_put(&b, chunk, n);
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
    titan_toml_parser p = {.s = text, .len = strlen(text), .line = 1, .name = name ? name : "<value>"};
    TITAN_TRY(titan_toml_check_utf8(&p));
    titan_toml_skip_ws(&p);
    titan_status st = parse_value(&p, out, 0);
    if (st == TITAN_OK) {
        titan_toml_skip_ws(&p);
        if (!titan_toml_at_eof(&p)) {
            char got[32];
            titan_toml_excerpt(&p, p.pos, got, sizeof got);
            st = titan_toml_perr(&p, p.pos, "unexpected '%s' after value", got);
        }
    }
    if (st != TITAN_OK) titan_toml_value_free(out);
    return st;
}
