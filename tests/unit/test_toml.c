/* test_toml.c - the TOML reader: every value kind, tables, and malformed input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/toml.h"

#include "check.h"

static titan_toml_doc *parse(const char *text) {
    titan_toml_doc *doc = NULL;
    titan_status st = titan_toml_parse(text, strlen(text), "t.toml", &doc);
    CHECK(st == TITAN_OK, "parse failed: %s\n--- input ---\n%s", titan_error_message(), text);
    return doc;
}

static const titan_toml_value *get(const titan_toml_doc *doc, const char *path, titan_toml_type type) {
    const titan_toml_value *v = doc ? titan_toml_get(doc, path) : NULL;
    CHECK(v != NULL, "%s missing", path);
    if (v) CHECK(v->type == type, "%s: type %s, want %s", path, titan_toml_type_name(v->type), titan_toml_type_name(type));
    return v && v->type == type ? v : NULL;
}

static void want_str(const titan_toml_doc *doc, const char *path, const char *s, size_t len) {
    const titan_toml_value *v = get(doc, path, TITAN_TOML_STRING);
    if (v) CHECK(v->u.str.len == len && memcmp(v->u.str.ptr, s, len) == 0, "%s = \"%s\"", path, v->u.str.ptr);
}
#define WANT_STR(doc, path, lit) want_str(doc, path, lit, sizeof(lit) - 1)

static void want_int(const titan_toml_doc *doc, const char *path, int64_t x) {
    const titan_toml_value *v = get(doc, path, TITAN_TOML_INT);
    if (v) CHECK(v->u.i == x, "%s = %lld, want %lld", path, (long long)v->u.i, (long long)x);
}

static void want_float(const titan_toml_doc *doc, const char *path, double x) {
    const titan_toml_value *v = get(doc, path, TITAN_TOML_FLOAT);
    if (v) CHECK(v->u.f == x || (isnan(x) && isnan(v->u.f)), "%s = %.17g, want %.17g", path, v->u.f, x);
}

static void want_bool(const titan_toml_doc *doc, const char *path, int b) {
    const titan_toml_value *v = get(doc, path, TITAN_TOML_BOOL);
    if (v) CHECK(v->u.b == b, "%s = %d", path, v->u.b);
}

static void test_values(void) {
    const char *text =
        "# a job file\n"
        "title = \"basic \\\"q\\\" \\\\ \\t \\u00e9 \\U0001F600\"   # trailing comment\n"
        "lit = 'C:\\path\\no\\escapes'\n"
        "ml = \"\"\"\nline one\n  line two\\\n     joined\"\"\"\n"
        "mlq = \"\"\"a \"quoted\" word\"\"\"\"\n"
        "mll = '''\nraw \\n ''text'' '''\n"
        "empty = \"\"\n"
        "i1 = 42\ni2 = -17\ni3 = +5\ni4 = 1_000_000\ni5 = 0xDEAD_beef\ni6 = 0o755\ni7 = 0b1101\n"
        "i8 = 9223372036854775807\ni9 = -9223372036854775808\ni0 = 0\n"
        "f1 = 3.5\nf2 = -0.01\nf3 = 5e+22\nf4 = 1e-3\nf5 = 6.626E-34\nf6 = 1_000.5\n"
        "f7 = inf\nf8 = -inf\nf9 = nan\nf10 = +inf\nf11 = 8e-4\n"
        "b1 = true\nb2 = false\n"
        "\"quoted key\" = 1\n'lit key' = 2\n\"\" = 3\n"
        "a.b.c = 4\n"
        "a . d = 5\n"
        "site.\"google.com\" = true\n"
        "arr = [1, 2, 3]\n"
        "arr2 = [\n  \"x\",  # comment in array\n  'y',\n\n]\n"
        "nested = [[1, 2], [\"a\"], []]\n"
        "mixed = [1, 2.0, \"three\", {k = 1}]\n"
        "inl = { x = 1, y.z = \"deep\", w = [1, 2] }\n"
        "einl = {}\n"
        "[table]\n"
        "key = \"v\"\n"
        "[table.sub]  # sub-table\n"
        "k2 = 2\n"
        "[ spaced . \"dotted.name\" ]\n"
        "k3 = 3\n"
        "[x.y.z]\n"
        "deep = 1\n"
        "[x]  # super-table after its child is fine\n"
        "top = 2\n"
        "[fruit]\napple.color = \"red\"\n[fruit.apple.texture]\nsmooth = true\n";
    titan_toml_doc *doc = parse(text);
    if (!doc) return;
    WANT_STR(doc, "title", "basic \"q\" \\ \t \xc3\xa9 \xf0\x9f\x98\x80");
    WANT_STR(doc, "lit", "C:\\path\\no\\escapes");
    WANT_STR(doc, "ml", "line one\n  line two" "joined");
    WANT_STR(doc, "mlq", "a \"quoted\" word\"");
    WANT_STR(doc, "mll", "raw \\n ''text'' ");
    WANT_STR(doc, "empty", "");
    want_int(doc, "i1", 42);
    want_int(doc, "i2", -17);
    want_int(doc, "i3", 5);
    want_int(doc, "i4", 1000000);
    want_int(doc, "i5", 0xDEADBEEF);
    want_int(doc, "i6", 0755);
    want_int(doc, "i7", 13);
    want_int(doc, "i8", INT64_MAX);
    want_int(doc, "i9", INT64_MIN);
    want_int(doc, "i0", 0);
    want_float(doc, "f1", 3.5);
    want_float(doc, "f2", -0.01);
    want_float(doc, "f3", 5e22);
    want_float(doc, "f4", 1e-3);
    want_float(doc, "f5", 6.626e-34);
    want_float(doc, "f6", 1000.5);
    want_float(doc, "f7", INFINITY);
    want_float(doc, "f8", -INFINITY);
    want_float(doc, "f9", NAN);
    want_float(doc, "f10", INFINITY);
    want_float(doc, "f11", 8e-4);
    want_bool(doc, "b1", 1);
    want_bool(doc, "b2", 0);
    const titan_toml_entry *e = titan_toml_table_find(&doc->root, "quoted key");
    CHECK(e && e->value.u.i == 1, "quoted key");
    e = titan_toml_table_find(&doc->root, "lit key");
    CHECK(e && e->value.u.i == 2, "literal key");
    e = titan_toml_table_find(&doc->root, "");
    CHECK(e && e->value.u.i == 3, "empty key");
    want_int(doc, "a.b.c", 4);
    want_int(doc, "a.d", 5);
    const titan_toml_value *site = get(doc, "site", TITAN_TOML_TABLE);
    if (site) CHECK(titan_toml_table_find(site->u.table, "google.com") != NULL, "quoted dotted component");
    const titan_toml_value *arr = get(doc, "arr", TITAN_TOML_ARRAY);
    if (arr) CHECK(arr->u.arr->n == 3 && arr->u.arr->items[2].u.i == 3, "arr");
    const titan_toml_value *arr2 = get(doc, "arr2", TITAN_TOML_ARRAY);
    if (arr2)
        CHECK(arr2->u.arr->n == 2 && strcmp(arr2->u.arr->items[1].u.str.ptr, "y") == 0 &&
                  arr2->u.arr->items[1].line == 44,
              "multi-line array with comment and trailing comma (line %d)", arr2->u.arr->items[1].line);
    const titan_toml_value *nested = get(doc, "nested", TITAN_TOML_ARRAY);
    if (nested) CHECK(nested->u.arr->n == 3 && nested->u.arr->items[2].u.arr->n == 0, "nested arrays");
    const titan_toml_value *mixed = get(doc, "mixed", TITAN_TOML_ARRAY);
    if (mixed) CHECK(mixed->u.arr->n == 4 && mixed->u.arr->items[3].type == TITAN_TOML_TABLE, "mixed array");
    want_int(doc, "inl.x", 1);
    WANT_STR(doc, "inl.y.z", "deep");
    get(doc, "inl.w", TITAN_TOML_ARRAY);
    get(doc, "einl", TITAN_TOML_TABLE);
    WANT_STR(doc, "table.key", "v");
    want_int(doc, "table.sub.k2", 2);
    const titan_toml_value *sp = get(doc, "spaced", TITAN_TOML_TABLE);
    if (sp) {
        const titan_toml_entry *d = titan_toml_table_find(sp->u.table, "dotted.name");
        CHECK(d && titan_toml_table_find(d->value.u.table, "k3"), "[ spaced . \"dotted.name\" ]");
    }
    want_int(doc, "x.y.z.deep", 1);
    want_int(doc, "x.top", 2);
    want_bool(doc, "fruit.apple.texture.smooth", 1);
    /* lines and columns */
    e = titan_toml_table_find(&doc->root, "i2");
    CHECK(e && e->line == 13 && e->col == 1, "i2 line %d col %d", e ? e->line : -1, e ? e->col : -1);
    const titan_toml_value *t2 = titan_toml_get(doc, "table");
    e = t2 ? titan_toml_table_find(t2->u.table, "key") : NULL;
    CHECK(e && e->line == 52, "table.key line %d", e ? e->line : -1);
    e = titan_toml_table_find(&doc->root, "title");
    CHECK(e && e->value.col == 9, "value column %d", e ? e->value.col : -1);
    titan_toml_free(doc);
}

typedef struct {
    int n;
    char seen[2048];
} walk_ctx;

static titan_status visit(void *ctx, const char *table, const char *key, const titan_toml_value *v, int line) {
    walk_ctx *w = ctx;
    size_t used = strlen(w->seen);
    snprintf(w->seen + used, sizeof w->seen - used, "%s|%s@%d;", table, key, line);
    w->n++;
    return v->type == TITAN_TOML_INT && v->u.i == 99 ? titan_error(TITAN_ERR_USAGE, "stop") : TITAN_OK;
}

static void test_walk(void) {
    titan_toml_doc *doc = parse("top = 1\n[training]\nsteps = 10\nlr.x = [1]\n[\"odd key\".b]\nc = 2\n");
    if (!doc) return;
    walk_ctx w = {0, ""};
    CHECK(titan_toml_walk(doc, visit, &w) == TITAN_OK, "walk");
    CHECK(strcmp(w.seen, "|top@1;training|steps@3;training.lr|x@4;\"odd key\".b|c@6;") == 0, "walk order: %s", w.seen);
    titan_toml_free(doc);
    doc = parse("a = 1\nb = 99\nc = 3\n");
    if (!doc) return;
    memset(&w, 0, sizeof w);
    CHECK(titan_toml_walk(doc, visit, &w) == TITAN_ERR_USAGE && w.n == 2, "walk stops on error (%d)", w.n);
    titan_toml_free(doc);
}

static void test_crlf_and_bom(void) {
    titan_toml_doc *doc = parse("\xEF\xBB\xBF# bom\r\n[a]\r\nx = 1 # c\r\ny = \"\"\"p\r\nq\"\"\"\r\n");
    if (!doc) return;
    want_int(doc, "a.x", 1);
    WANT_STR(doc, "a.y", "p\nq");
    const titan_toml_value *a = titan_toml_get(doc, "a");
    const titan_toml_entry *e = a ? titan_toml_table_find(a->u.table, "y") : NULL;
    CHECK(e && e->line == 4, "CRLF line counting (%d)", e ? e->line : -1);
    titan_toml_free(doc);
}

static void test_parse_value(void) {
    titan_toml_value v;
    CHECK(titan_toml_parse_value("20", "v", &v) == TITAN_OK && v.type == TITAN_TOML_INT && v.u.i == 20, "int");
    titan_toml_value_free(&v);
    CHECK(titan_toml_parse_value(" 1e-3 ", "v", &v) == TITAN_OK && v.type == TITAN_TOML_FLOAT && v.u.f == 1e-3, "float");
    titan_toml_value_free(&v);
    CHECK(titan_toml_parse_value("[\"a\", 'b']", "v", &v) == TITAN_OK && v.type == TITAN_TOML_ARRAY && v.u.arr->n == 2,
          "array");
    titan_toml_value_free(&v);
    CHECK(titan_toml_parse_value("8B", "v", &v) == TITAN_ERR_FORMAT, "8B is not a value");
    CHECK(titan_toml_parse_value("/data/x", "v", &v) == TITAN_ERR_FORMAT, "a path is not a value");
    CHECK(titan_toml_parse_value("1 2", "v", &v) == TITAN_ERR_FORMAT, "trailing text");
    CHECK(strstr(titan_error_message(), "unexpected '2' after value") != NULL, "%s", titan_error_message());
}

static void test_format(void) {
    static const double xs[] = {8e-4, 0.9, 0.95, 1e-8, 0.1, 1.0, 100.0, 500000.0, 1e15, 3.14159265358979,
                                1.0 / 3.0, -2.5, 0.0, -0.0, 1e300, 5e-324, 123456789.0};
    char buf[64];
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        titan_toml_format_double(buf, sizeof buf, xs[i]);
        titan_toml_value v;
        titan_status st = titan_toml_parse_value(buf, "v", &v);
        CHECK(st == TITAN_OK && v.type == TITAN_TOML_FLOAT && v.u.f == xs[i] && signbit(v.u.f) == signbit(xs[i]),
              "%.17g -> %s does not read back as a float", xs[i], buf);
        titan_toml_value_free(&v);
    }
    titan_toml_format_double(buf, sizeof buf, 8e-4);
    CHECK(strcmp(buf, "0.0008") == 0, "8e-4 -> %s", buf);
    titan_toml_format_double(buf, sizeof buf, 100.0);
    CHECK(strcmp(buf, "100.0") == 0, "100 -> %s", buf);
    titan_toml_format_double(buf, sizeof buf, 1e-8);
    CHECK(strcmp(buf, "1e-8") == 0, "1e-8 -> %s", buf);
    titan_toml_format_double(buf, sizeof buf, 1e15);
    CHECK(strcmp(buf, "1e15") == 0, "1e15 -> %s", buf);
    titan_toml_format_double(buf, sizeof buf, INFINITY);
    CHECK(strcmp(buf, "inf") == 0, "inf -> %s", buf);

    const char *s = "q\"b\\s\n\x01 \xc3\xa9";
    titan_toml_format_string(buf, sizeof buf, s, strlen(s));
    CHECK(strcmp(buf, "\"q\\\"b\\\\s\\n\\u0001 \xc3\xa9\"") == 0, "string -> %s", buf);
    titan_toml_value v;
    CHECK(titan_toml_parse_value(buf, "v", &v) == TITAN_OK && strcmp(v.u.str.ptr, s) == 0, "string round trip");
    titan_toml_value_free(&v);
    titan_toml_format_key(buf, sizeof buf, "bare_key-1");
    CHECK(strcmp(buf, "bare_key-1") == 0, "%s", buf);
    titan_toml_format_key(buf, sizeof buf, "a.b");
    CHECK(strcmp(buf, "\"a.b\"") == 0, "%s", buf);
    CHECK(titan_toml_parse_value("{ a = [1, 2.5, \"x\"], b = true }", "v", &v) == TITAN_OK, "inline");
    titan_toml_format_value(buf, sizeof buf, &v);
    CHECK(strcmp(buf, "{ a = [1, 2.5, \"x\"], b = true }") == 0, "format -> %s", buf);
    int need = titan_toml_format_value(buf, 8, &v);
    CHECK(need == (int)strlen("{ a = [1, 2.5, \"x\"], b = true }") && strlen(buf) == 7, "truncation: need %d, got '%s'", need, buf);
    titan_toml_value w;
    CHECK(titan_toml_parse_value("{b = true, a = [1, 2.5, 'x']}", "v", &w) == TITAN_OK, "inline 2");
    CHECK(titan_toml_value_equal(&v, &w), "equal tables regardless of key order");
    titan_toml_value_free(&w);
    CHECK(titan_toml_parse_value("{b = true, a = [1, 2.5]}", "v", &w) == TITAN_OK, "inline 3");
    CHECK(!titan_toml_value_equal(&v, &w), "different tables");
    titan_toml_value_free(&w);
    titan_toml_value_free(&v);
}

/* Each malformed input: the fragment its message must contain, and the line. */
static const struct { const char *text, *fragment; int line; } BAD[] = {
    {"a = 1\na = 2\n", "duplicate key 'a' (first defined at line 1)", 2},
    {"[t]\nx = 1\n[t]\n", "table [t] defined twice (first at line 1)", 3},
    {"[t]\nx = 1\nx = 2\n", "duplicate key 'x'", 3},
    {"a.b = 1\na.b = 2\n", "duplicate key 'a.b'", 2},
    {"a = 1\na.b = 2\n", "key 'a' is already a integer (line 1), not a table", 2},
    {"a = 1\n[a]\n", "key 'a' is already a integer", 2},
    {"[a.b]\nx=1\n[a]\nb.y = 2\n", "cannot add keys to 'b' with a dotted key: it is a table defined at line 1", 4},
    {"a.b = 1\n[a]\n", "table [a] was already defined by dotted keys at line 1", 2},
    {"a = {x = 1}\n[a]\n", "'a' is an inline table", 2},
    {"a = {x = 1}\na.y = 2\n", "cannot add keys to 'a'", 2},
    {"x = \"abc\n", "unterminated string", 1},
    {"\n\nx = \"\"\"abc\n", "unterminated string", 3},
    {"x = 'abc\ny = 1\n", "unterminated string", 1},
    {"x = \"a\\qb\"\n", "invalid escape '\\q'", 1},
    {"x = \"\\u12\"\n", "needs 4 hex digits", 1},
    {"x = \"\\uD800\"\n", "not a Unicode scalar value", 1},
    {"x = \"a\x01\"\n", "control character U+0001", 1},
    {"x = abc\n", "expected a value, got 'abc'", 1},
    {"x =\n", "expected a value after '='", 1},
    {"x = 1\ny = 2 3\n", "unexpected '3' after value", 2},
    {"x 1\n", "expected '=' after key 'x'", 1},
    {"= 1\n", "expected a key, got '= 1'", 1},
    {"x = 0123\n", "leading zeros are not allowed", 1},
    {"x = 1__0\n", "invalid number '1__0'", 1},
    {"x = _1\n", "invalid number", 1},
    {"x = 1_\n", "invalid number '1_'", 1},
    {"x = 1.\n", "a digit must follow the '.'", 1},
    {"x = .5\n", "invalid number '.5'", 1},
    {"x = 1e\n", "bad exponent", 1},
    {"x = 9223372036854775808\n", "does not fit in 64 bits", 1},
    {"x = 0x1_0000_0000_0000_0000\n", "does not fit in 64 bits", 1},
    {"x = -0x10\n", "a sign is not allowed with 0x", 1},
    {"x = 0xZZ\n", "invalid base-16 integer", 1},
    {"x = 1e999\n", "out of range", 1},
    {"x = 1979-05-27\n", "dates and times are not supported", 1},
    {"x = 07:32:00\n", "dates and times are not supported", 1},
    {"x = TRUE\n", "expected a value, got 'TRUE'", 1},
    {"x = [1, 2\n", "unterminated array", 1},
    {"x = [1 2]\n", "expected ',' or ']' in array, got '2'", 1},
    {"x = [1,,2]\n", "expected a value", 1},
    {"x = {a = 1,}\n", "trailing comma in inline table", 1},
    {"x = {a = 1\n}\n", "newline in inline table", 1},
    {"x = {a = 1 b = 2}\n", "expected ',' or '}' in inline table, got 'b = 2'", 1},
    {"x = {a = 1, a = 2}\n", "duplicate key 'a'", 1},
    {"[a\nx = 1\n", "expected ']' after table name 'a'", 1},
    {"[]\n", "empty table name", 1},
    {"[[a]]\nx = 1\n", "arrays of tables ([[...]]) are not supported", 1},
    {"[a] x = 1\n", "unexpected 'x = 1' after table header", 1},
    {"x = 1\r\ny = 2\r", "carriage return without a line feed", 2},
    {"x = \"\xff\"\n", "invalid UTF-8", 1},
    {"# ok\nx = 1\n# bad \x01 comment\n", "control character U+0001 in comment", 3},
    {"\"\"\"k\"\"\" = 1\n", "multi-line strings cannot be keys", 1},
    {"x = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n",
     "nested more than 64 deep", 1},
};

static void test_errors(void) {
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        titan_toml_doc *doc = NULL;
        titan_error_clear();
        titan_status st = titan_toml_parse(BAD[i].text, strlen(BAD[i].text), "bad.toml", &doc);
        const char *msg = titan_error_message();
        char where[32];
        snprintf(where, sizeof where, "bad.toml:%d:", BAD[i].line);
        CHECK(st == TITAN_ERR_FORMAT && doc == NULL, "case %zu accepted: %s", i, BAD[i].text);
        CHECK(strstr(msg, BAD[i].fragment) != NULL, "case %zu: message '%s' lacks '%s'", i, msg, BAD[i].fragment);
        CHECK(strncmp(msg, where, strlen(where)) == 0, "case %zu: message '%s' does not start with '%s'", i, msg,
              where);
        titan_toml_free(doc);
    }
    /* column points at the problem */
    titan_toml_doc *doc = NULL;
    titan_toml_parse("x = 1\nyy = abc\n", 15, "c.toml", &doc);
    CHECK(strncmp(titan_error_message(), "c.toml:2:6:", 11) == 0, "column: %s", titan_error_message());
    titan_toml_parse("x = abc\n", 8, "c.toml", &doc);
    CHECK(strcmp(titan_error_hint_text(), "strings need quotes: \"abc\"") == 0, "hint: %s", titan_error_hint_text());
    CHECK(titan_toml_parse_file("/nonexistent/job.toml", &doc) == TITAN_ERR_IO, "missing file is IO");
    CHECK(strstr(titan_error_message(), "/nonexistent/job.toml: cannot open") != NULL, "%s", titan_error_message());
}

/* Truncating a valid document anywhere must fail cleanly or parse, never crash. */
static void test_truncations(void) {
    const char *text = "[a]\nx = \"s\\u00e9\" # c\ny = [1, {z = 'q'}, 2.5e3]\n[b.c]\nm = \"\"\"l1\nl2\"\"\"\n";
    size_t n = strlen(text);
    for (size_t k = 0; k <= n; k++) {
        titan_toml_doc *doc = NULL;
        titan_status st = titan_toml_parse(text, k, "cut.toml", &doc);
        CHECK(st == TITAN_OK || st == TITAN_ERR_FORMAT, "cut at %zu: status %d", k, st);
        titan_toml_free(doc);
    }
}

int main(void) {
    test_values();
    test_walk();
    test_crlf_and_bom();
    test_parse_value();
    test_format();
    test_errors();
    test_truncations();
    if (failures) {
        fprintf(stderr, "test_toml: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_toml: ok (%zu malformed inputs)\n", sizeof BAD / sizeof BAD[0]);
    return 0;
}
