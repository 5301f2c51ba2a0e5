/* config.c - the job configuration: one table of keys drives defaults,
 * loading, overrides, checks, messages and --print-config. */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/options.h"
#include "core/toml.h"
#include "keys.h"

#define KEYS titan_job_keys
#define NKEYS titan_job_nkeys
#define SECTIONS titan_job_sections
#define NSECTIONS titan_job_nsections
#define IGNORED titan_job_ignored
#define NIGNORED titan_job_nignored

/* ---- lookups ---- */

/* A section's current name (an old name's new one, else itself). */
static const char *canon_section(const char *s) {
    for (int i = 0; i < titan_job_nsection_aliases; i++)
        if (strcmp(titan_job_section_aliases[i].section, s) == 0) return titan_job_section_aliases[i].target;
    return s;
}

const key_def *titan_job_find_key(const char *section, const char *key) {
    section = canon_section(section);
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(KEYS[i].section, section) == 0 && strcmp(KEYS[i].key, key) == 0) return &KEYS[i];
    return NULL;
}

const key_def *titan_job_find_alias(const char *section, const char *key) {
    section = canon_section(section);
    for (int i = 0; i < titan_job_naliases; i++)
        if (strcmp(titan_job_aliases[i].section, section) == 0 && strcmp(titan_job_aliases[i].key, key) == 0)
            return titan_job_find_key(titan_job_aliases[i].target_section, titan_job_aliases[i].target);
    return NULL;
}

int titan_job_find_ignored(const char *section, const char *key) {
    for (int i = 0; i < NIGNORED; i++)
        if (strcmp(IGNORED[i].section, section) == 0 &&
            (strcmp(IGNORED[i].key, key) == 0 || strcmp(IGNORED[i].key, "*") == 0))
            return i;
    return -1;
}

static int section_supported(const char *s) {
    for (int i = 0; i < NSECTIONS; i++)
        if (strcmp(SECTIONS[i], s) == 0) return 1;
    return 0;
}

/* s is name, or a table above it: "quantize" and "quantize.linear" for
 * [quantize.linear.float8]. */
static int names_section(const char *name, const char *s) {
    size_t len = strlen(s);
    return strncmp(name, s, len) == 0 && (name[len] == '\0' || name[len] == '.');
}

static int section_known(const char *s) {
    if (section_supported(canon_section(s))) return 1;
    for (int i = 0; i < NIGNORED; i++)
        if (names_section(IGNORED[i].section, s)) return 1;
    for (int i = 0; i < titan_job_naliases; i++)
        if (strcmp(titan_job_aliases[i].section, s) == 0) return 1;
    return 0;
}

/* A table whose sub-tables hold sections ("quantize" of [quantize.linear.float8]). */
static int section_parent(const char *s) {
    size_t n = strlen(s);
    for (int i = 0; i < NSECTIONS; i++)
        if (strncmp(SECTIONS[i], s, n) == 0 && SECTIONS[i][n] == '.') return 1;
    for (int i = 0; i < NIGNORED; i++)
        if (strncmp(IGNORED[i].section, s, n) == 0 && IGNORED[i].section[n] == '.') return 1;
    return 0;
}

/* The sections that have a key of this name, "[a]", "[a] or [b]" style
 * joined by fmt: returns how many. */
static int key_homes(const char *key, const char *homes[], int max) {
    int n = 0;
    for (int j = 0; j < NKEYS && n < max; j++)
        if (strcmp(KEYS[j].key, key) == 0) homes[n++] = KEYS[j].section;
    return n;
}

/* ---- suggestions ---- */

typedef struct {
    const char *word, *best;
    int dist;
} suggest;

static void suggest_try(suggest *s, const char *cand) {
    int d = titan_opt_edit_distance(s->word, cand);
    int limit = ((int)strlen(s->word) + 2) / 3;
    if (limit < 1) limit = 1;
    if (d <= limit && (!s->best || d < s->dist)) s->best = cand, s->dist = d;
}

/* Appends "a, b, c" of the supported keys of section (or its known ignored
 * keys when the whole section is unsupported). */
static void list_keys(const char *section, char *out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    int any = section_supported(section);
    for (int i = 0; i < (any ? NKEYS : NIGNORED); i++) {
        const char *sec = any ? KEYS[i].section : IGNORED[i].section;
        const char *key = any ? KEYS[i].key : IGNORED[i].key;
        if (strcmp(sec, section) != 0 || strcmp(key, "*") == 0) continue;
        int w = snprintf(out + used, cap - used, "%s%s", used ? ", " : "", key);
        if (w < 0 || (size_t)w >= cap - used) return;
        used += (size_t)w;
    }
}

static void list_sections(char *out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < NSECTIONS; i++) {
        int w = snprintf(out + used, cap - used, "%s[%s]", i ? ", " : "", SECTIONS[i]);
        if (w < 0 || (size_t)w >= cap - used) return;
        used += (size_t)w;
    }
}

static titan_status unknown_key(const char *place, const char *section, const char *key) {
    suggest s = {key, NULL, 0};
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(KEYS[i].section, section) == 0) suggest_try(&s, KEYS[i].key);
    for (int i = 0; i < NIGNORED; i++)
        if (strcmp(IGNORED[i].section, section) == 0 && strcmp(IGNORED[i].key, "*") != 0)
            suggest_try(&s, IGNORED[i].key);
    char keys[2048];
    list_keys(section, keys, sizeof keys);
    titan_error(TITAN_ERR_USAGE, "%s: unknown key '%s.%s' in [%s]", place, section, key, section);
    if (s.best)
        titan_error_hint("did you mean '%s'? keys of [%s]: %s", s.best, section, keys);
    else
        titan_error_hint("keys of [%s]: %s", section, keys);
    return TITAN_ERR_USAGE;
}

static titan_status unknown_section(const char *place, const char *section) {
    suggest s = {section, NULL, 0};
    for (int i = 0; i < NSECTIONS; i++) suggest_try(&s, SECTIONS[i]);
    for (int i = 0; i < NIGNORED; i++) suggest_try(&s, IGNORED[i].section);
    char secs[1024];
    list_sections(secs, sizeof secs);
    titan_error(TITAN_ERR_USAGE, "%s: unknown section [%s]", place, section);
    if (s.best)
        titan_error_hint("did you mean [%s]? sections: %s", s.best, secs);
    else
        titan_error_hint("sections: %s", secs);
    return TITAN_ERR_USAGE;
}

/* ---- setting one key ---- */

static void value_text(const titan_toml_value *v, char *out, size_t cap) {
    int n = titan_toml_format_value(out, cap, v);
    if (n >= (int)cap && cap > 4) strcpy(out + cap - 4, "...");
}

/* "a positive integer", "a number in [0, 1)", ... for messages. */
static void describe(const key_def *k, char *out, size_t cap) {
    const char *pre = (k->flags & F_MINUS1) ? "-1 or " : "";
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, "%g", k->lo);
    snprintf(hi, sizeof hi, "%g", k->hi);
    const char *noun = k->type == T_DOUBLE ? "number" : "integer";
    int has_lo = k->flags & F_LO, has_hi = k->flags & F_HI;
    switch (k->type) {
    case T_STR: snprintf(out, cap, "%s", (k->flags & F_NONEMPTY) ? "a non-empty string" : "a string"); return;
    case T_BOOL: snprintf(out, cap, "true or false"); return;
    case T_TRI: snprintf(out, cap, "true, false or -1"); return;
    case T_LIST: snprintf(out, cap, "a list of strings"); return;
    case T_LISTS: snprintf(out, cap, "a list of lists of strings"); return;
    case T_INT64: snprintf(out, cap, "an integer"); return;
    default: break;
    }
    if (has_lo && has_hi)
        snprintf(out, cap, "%sa %s in %s%s, %s%s", pre, noun, (k->flags & F_LO_OPEN) ? "(" : "[", lo, hi,
                 (k->flags & F_HI_OPEN) ? ")" : "]");
    else if (has_lo && k->lo == 0 && (k->flags & F_LO_OPEN))
        snprintf(out, cap, "%sa positive %s", pre, noun);
    else if (has_lo && k->lo == 1 && k->type == T_INT)
        snprintf(out, cap, "%sa positive integer", pre);
    else if (has_lo && k->lo == 0)
        snprintf(out, cap, "%sa non-negative %s", pre, noun);
    else if (has_lo)
        snprintf(out, cap, "%san %s %s %s", pre, noun, (k->flags & F_LO_OPEN) ? ">" : ">=", lo);
    else
        snprintf(out, cap, "%s%s", pre, k->type == T_DOUBLE ? "a finite number" : "an integer");
}

static titan_status bad_value(const key_def *k, const char *place, const titan_toml_value *v) {
    char want[128], got[96];
    describe(k, want, sizeof want);
    value_text(v, got, sizeof got);
    return titan_error(TITAN_ERR_USAGE, "%s: %s.%s: expected %s, got %s", place, k->section, k->key, want, got);
}

static int in_range(const key_def *k, double x) {
    if ((k->flags & F_MINUS1) && x == -1) return 1;
    if (k->flags & F_LO) {
        if ((k->flags & F_LO_OPEN) ? !(x > k->lo) : !(x >= k->lo)) return 0;
    }
    if (k->flags & F_HI) {
        if ((k->flags & F_HI_OPEN) ? !(x < k->hi) : !(x <= k->hi)) return 0;
    }
    return 1;
}

/* The position of s among choices ("a,b,c"), or -1. "name:N" stands for
 * name:0, name:1, ...; "N" alone for 1, 2, ... 999999999. */
static int choice_index(const char *choices, const char *s) {
    int i = 0;
    for (const char *c = choices; *c; i++) {
        size_t cl = strcspn(c, ","), sl = strlen(s);
        if (cl == 1 && c[0] == 'N') {
            if (sl > 0 && sl <= 9 && s[0] != '0' && strspn(s, "0123456789") == sl) return i;
        } else if (cl > 2 && c[cl - 2] == ':' && c[cl - 1] == 'N') {
            if (sl >= cl && strncmp(s, c, cl - 1) == 0 && strspn(s + cl - 1, "0123456789") == sl - (cl - 1)) return i;
        } else if (sl == cl && strncmp(c, s, cl) == 0) {
            return i;
        }
        c += cl;
        if (*c == ',') c++;
    }
    return -1;
}

/* A key with an enum field: set it from the string's choice. */
static void set_enum(titan_job_config *cfg, const key_def *k, const char *s) {
    if (k->flags & F_ENUM) *(int *)((char *)cfg + k->eoff) = choice_index(k->choices, s);
}

static titan_status check_choice(const key_def *k, const char *place, const char *s) {
    for (int i = 0; i < titan_job_nnot_yet; i++) {
        const key_not_yet *ny = &titan_job_not_yet[i];
        if (strcmp(ny->section, k->section) == 0 && strcmp(ny->key, k->key) == 0 && strcmp(ny->value, s) == 0) {
            titan_error(TITAN_ERR_USAGE, "%s: %s.%s: '%s': %s", place, k->section, k->key, s, ny->why);
            titan_error_hint("%s", ny->hint);
            return TITAN_ERR_USAGE;
        }
    }
    if (!k->choices || choice_index(k->choices, s) >= 0) return TITAN_OK;
    char list[256], *save = NULL;
    snprintf(list, sizeof list, "%s", k->choices);
    suggest sg = {s, NULL, 0};
    int any_n = 0;
    for (char *c = strtok_r(list, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        if (strcmp(c, "N") == 0) any_n = 1;
        else suggest_try(&sg, c);
    }
    char pretty[256], best[64] = "";
    size_t used = 0;
    for (const char *c = k->choices; *c && used + 3 < sizeof pretty; c++) {
        if (*c == ',') pretty[used++] = ',', pretty[used++] = ' ';
        else pretty[used++] = *c;
    }
    pretty[used] = '\0';
    if (sg.best) snprintf(best, sizeof best, "%.*s", (int)strcspn(sg.best, ","), sg.best);
    titan_error(TITAN_ERR_USAGE, "%s: %s.%s: '%s' is not one of %s", place, k->section, k->key, s, pretty);
    if (best[0]) titan_error_hint("did you mean '%s'?", best);
    else if (any_n) titan_error_hint("N stands for a whole number from 1 to 999999999, such as \"2\"");
    return TITAN_ERR_USAGE;
}

/* One element of a list key: a non-empty string without commas (the list
 * is kept comma-joined), one of the choices when the key has them, not in
 * the comma-joined list so far. */
static titan_status list_item(const key_def *k, const titan_toml_value *e, const char *so_far, const char *place) {
    if (e->type != TITAN_TOML_STRING || e->u.str.len == 0 || strlen(e->u.str.ptr) != e->u.str.len ||
        strchr(e->u.str.ptr, ',')) {
        char got[96];
        value_text(e, got, sizeof got);
        return titan_error(TITAN_ERR_USAGE, "%s: %s.%s: expected a list of non-empty strings without commas, "
                           "got element %s", place, k->section, k->key, got);
    }
    for (const char *c = so_far; *c;) {
        size_t cl = strcspn(c, ",");
        if (cl == e->u.str.len && !strncmp(c, e->u.str.ptr, cl))
            return titan_error(TITAN_ERR_USAGE, "%s: %s.%s: '%s' is listed twice", place, k->section, k->key,
                               e->u.str.ptr);
        c += cl + (c[cl] == ',');
    }
    return check_choice(k, place, e->u.str.ptr);
}

/* A list key from a TOML array of strings, or a string "a,b" (the command
 * line's spelling, torchtitan's too). */
static titan_status set_list(const key_def *k, char *field, const titan_toml_value *v, const char *place) {
    char buf[TITAN_STR];
    size_t used = 0;
    buf[0] = '\0';
    if (v->type == TITAN_TOML_STRING) {
        if (v->u.str.len >= TITAN_STR || strlen(v->u.str.ptr) != v->u.str.len) return bad_value(k, place, v);
        char tmp[TITAN_STR], *save = NULL;
        memcpy(tmp, v->u.str.ptr, v->u.str.len + 1);
        for (char *e = strtok_r(tmp, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
            titan_toml_value ev = {.type = TITAN_TOML_STRING};
            ev.u.str.ptr = e, ev.u.str.len = strlen(e);
            TITAN_TRY(list_item(k, &ev, buf, place));
            used += (size_t)snprintf(buf + used, TITAN_STR - used, "%s%s", used ? "," : "", e);
        }
    } else if (v->type == TITAN_TOML_ARRAY) {
        for (int i = 0; i < v->u.arr->n; i++) {
            const titan_toml_value *e = &v->u.arr->items[i];
            TITAN_TRY(list_item(k, e, buf, place));
            if (used + e->u.str.len + 2 > TITAN_STR)
                return titan_error(TITAN_ERR_USAGE, "%s: %s.%s: list longer than the %d bytes allowed", place,
                                   k->section, k->key, TITAN_STR - 1);
            used += (size_t)snprintf(buf + used, TITAN_STR - used, "%s%s", i ? "," : "", e->u.str.ptr);
        }
    } else {
        return bad_value(k, place, v);
    }
    memset(field, 0, TITAN_STR);
    memcpy(field, buf, used);
    return TITAN_OK;
}

/* A T_LISTS key from a TOML array of arrays of strings: each inner list
 * non-empty, its strings non-empty, without ',' or ';' (the separators). */
static titan_status set_lists(const key_def *k, char *field, const titan_toml_value *v, const char *place) {
    if (v->type != TITAN_TOML_ARRAY) return bad_value(k, place, v);
    char *buf = calloc(1, TITAN_LONG_STR);
    if (!buf) return titan_error(TITAN_ERR_NOMEM, "out of memory");
    size_t used = 0;
    titan_status st = TITAN_OK;
    for (int i = 0; i < v->u.arr->n && st == TITAN_OK; i++) {
        const titan_toml_value *part = &v->u.arr->items[i];
        if (part->type != TITAN_TOML_ARRAY || part->u.arr->n == 0) {
            char got[96];
            value_text(part, got, sizeof got);
            st = titan_error(TITAN_ERR_USAGE, "%s: %s.%s: part %d: expected a non-empty list of strings, got %s", place,
                             k->section, k->key, i, got);
            break;
        }
        for (int j = 0; j < part->u.arr->n && st == TITAN_OK; j++) {
            const titan_toml_value *e = &part->u.arr->items[j];
            if (e->type != TITAN_TOML_STRING || e->u.str.len == 0 || strlen(e->u.str.ptr) != e->u.str.len ||
                strpbrk(e->u.str.ptr, ",;")) {
                char got[96];
                value_text(e, got, sizeof got);
                st = titan_error(TITAN_ERR_USAGE, "%s: %s.%s: part %d: expected module names (non-empty, without "
                                 "',' or ';'), got %s", place, k->section, k->key, i, got);
            } else if (used + e->u.str.len + 2 > TITAN_LONG_STR) {
                st = titan_error(TITAN_ERR_USAGE, "%s: %s.%s: longer than the %d bytes allowed", place, k->section,
                                 k->key, TITAN_LONG_STR - 1);
            } else {
                used += (size_t)snprintf(buf + used, TITAN_LONG_STR - used, "%s%s", j ? "," : i ? ";" : "",
                                         e->u.str.ptr);
            }
        }
    }
    if (st == TITAN_OK) memcpy(field, buf, TITAN_LONG_STR); /* whole buffer, so configs compare with memcmp */
    free(buf);
    return st;
}

titan_status titan_job_set_value(titan_job_config *cfg, const key_def *k, const titan_toml_value *v,
                                 const char *place) {
    void *field = (char *)cfg + k->off;
    switch (k->type) {
    case T_STR: {
        if (v->type != TITAN_TOML_STRING) return bad_value(k, place, v);
        if (v->u.str.len >= TITAN_STR)
            return titan_error(TITAN_ERR_USAGE, "%s: %s.%s: string is %zu bytes, longer than the %d allowed", place,
                               k->section, k->key, v->u.str.len, TITAN_STR - 1);
        if (strlen(v->u.str.ptr) != v->u.str.len)
            return titan_error(TITAN_ERR_USAGE, "%s: %s.%s: string contains a NUL character", place, k->section,
                               k->key);
        if ((k->flags & F_NONEMPTY) && v->u.str.len == 0) return bad_value(k, place, v);
        TITAN_TRY(check_choice(k, place, v->u.str.ptr));
        memset(field, 0, TITAN_STR); /* whole buffer, so configs compare with memcmp */
        memcpy(field, v->u.str.ptr, v->u.str.len);
        set_enum(cfg, k, field);
        return TITAN_OK;
    }
    case T_INT:
        if (v->type != TITAN_TOML_INT || v->u.i < INT_MIN || v->u.i > INT_MAX || !in_range(k, (double)v->u.i))
            return bad_value(k, place, v);
        *(int *)field = (int)v->u.i;
        return TITAN_OK;
    case T_INT64:
        if (v->type != TITAN_TOML_INT) return bad_value(k, place, v);
        *(int64_t *)field = v->u.i;
        return TITAN_OK;
    case T_DOUBLE: {
        double x;
        if (v->type == TITAN_TOML_INT) x = (double)v->u.i;
        else if (v->type == TITAN_TOML_FLOAT) x = v->u.f;
        else return bad_value(k, place, v);
        if (!isfinite(x) || !in_range(k, x)) return bad_value(k, place, v);
        *(double *)field = x;
        return TITAN_OK;
    }
    case T_BOOL:
        if (v->type != TITAN_TOML_BOOL) return bad_value(k, place, v);
        *(int *)field = v->u.b;
        return TITAN_OK;
    case T_LIST: return set_list(k, field, v, place);
    case T_LISTS: return set_lists(k, field, v, place);
    case T_TRI:
        if (v->type == TITAN_TOML_BOOL) *(int *)field = v->u.b;
        else if (v->type == TITAN_TOML_INT && v->u.i == -1) *(int *)field = -1;
        else return bad_value(k, place, v);
        return TITAN_OK;
    }
    return TITAN_OK;
}

/* Whether v is a harmless value of ignored key idx; accepted gets the
 * values that are ("false", "1 or 2", "" for none). */
int titan_job_harmless(int idx, const titan_toml_value *v, char *accepted, size_t cap) {
    const char *harmless = IGNORED[idx].harmless;
    accepted[0] = '\0';
    if (!harmless) return 1;
    char list[256], *save = NULL;
    snprintf(list, sizeof list, "%s", harmless);
    int ok = 0;
    for (char *alt = strtok_r(list, "|", &save); alt; alt = strtok_r(NULL, "|", &save)) {
        titan_toml_value hv;
        if (titan_toml_parse_value(alt, "harmless", &hv) != TITAN_OK) continue;
        ok |= v && titan_toml_value_equal(&hv, v);
        titan_toml_value_free(&hv);
        size_t used = strlen(accepted);
        snprintf(accepted + used, cap - used, "%s%s", used ? " or " : "", alt);
    }
    titan_error_clear();
    return ok;
}

/* The reason the last warning gave: keys that share one ([compile]'s,
 * [training.dataloader]'s) say it once. Reset by each load and override. */
static const char *warned_why;

/* A torchtitan key titan ignores: warn, or refuse a value that would matter. */
static titan_status ignored_key(int idx, const char *place, const char *section, const char *key,
                                const titan_toml_value *v) {
    const key_schema *sk = titan_job_find_schema(section, key);
    const char *why = sk && sk->why ? sk->why : "not supported yet";
    char accepted[256];
    if (!titan_job_harmless(idx, v, accepted, sizeof accepted)) {
        char got[96];
        value_text(v, got, sizeof got);
        titan_error(TITAN_ERR_USAGE, "%s: %s.%s = %s: not supported: %s", place, section, key, got, why);
        if (accepted[0]) titan_error_hint("remove the key or set it to %s", accepted);
        else titan_error_hint("remove the key");
        return TITAN_ERR_USAGE;
    }
    if (why == warned_why)
        titan_warn("%s: %s.%s: ignored, meaningless here (as above)", place, section, key);
    else
        titan_warn("%s: %s.%s: ignored, meaningless here: %s", place, section, key, why);
    warned_why = why;
    return TITAN_OK;
}

/* line_of[i]: where key i was set in this file (0 = not yet); NULL for
 * overrides, where a key may repeat and the last one wins. */
static titan_status apply(titan_job_config *cfg, int *line_of, const char *section, const char *key, const titan_toml_value *v,
                          const char *place, int line) {
    const key_def *k = titan_job_find_key(section, key);
    if (!k) k = titan_job_find_alias(section, key);
    if (k) {
        int idx = (int)(k - KEYS);
        if (line_of && line_of[idx])
            return titan_error(TITAN_ERR_USAGE, "%s: %s.%s: same key as %s.%s, already set at line %d", place,
                               section, key, k->section, k->key, line_of[idx]);
        TITAN_TRY(titan_job_set_value(cfg, k, v, place));
        if (line_of) line_of[idx] = line;
        return TITAN_OK;
    }
    int ig = titan_job_find_ignored(section, key);
    if (ig >= 0) return ignored_key(ig, place, section, key, v);
    return unknown_key(place, canon_section(section), key);
}

static titan_status apply_table(titan_job_config *cfg, int *line_of, const char *name, const char *section, const titan_toml_table *t) {
    for (int i = 0; i < t->n; i++) {
        const titan_toml_entry *e = &t->items[i];
        char place[512];
        snprintf(place, sizeof place, "%s:%d", name, e->line);
        if (e->value.type == TITAN_TOML_TABLE) {
            char sub[300], path[600];
            titan_toml_format_key(sub, sizeof sub, e->key);
            snprintf(path, sizeof path, "%s.%s", section, e->key);
            if (section_known(path) || section_parent(path)) { /* [quantize.linear.float8] */
                TITAN_TRY(apply_table(cfg, line_of, name, path, e->value.u.table));
                continue;
            }
            if (section_supported(canon_section(section))) return unknown_key(place, section, sub);
            return unknown_section(place, path); /* no config key is a table */
        }
        TITAN_TRY(apply(cfg, line_of, section, e->key, &e->value, place, e->line));
    }
    return TITAN_OK;
}

static titan_status apply_doc(titan_job_config *cfg, const titan_toml_doc *doc) {
    warned_why = NULL;
    int *line_of = calloc((size_t)NKEYS, sizeof *line_of); /* where each key was set: duplicates */
    titan_status st = line_of ? TITAN_OK : titan_error(TITAN_ERR_NOMEM, "%s: out of memory", doc->name);
    for (int i = 0; st == TITAN_OK && i < doc->root.n; i++) {
        const titan_toml_entry *e = &doc->root.items[i];
        char place[512];
        snprintf(place, sizeof place, "%s:%d", doc->name, e->line);
        if (e->value.type != TITAN_TOML_TABLE) {
            char secs[1024];
            list_sections(secs, sizeof secs);
            st = titan_error(TITAN_ERR_USAGE, "%s: key '%s' is outside any section", place, e->key);
            const char *homes[2];
            int nh = key_homes(e->key, homes, 2);
            if (nh == 1)
                titan_error_hint("put it under [%s]", homes[0]);
            else if (nh == 2) /* e.g. steps: [training] and [validation] */
                titan_error_hint("put it under [%s] (or [%s])", homes[0], homes[1]);
            else
                titan_error_hint("keys live in sections: %s", secs);
        } else if (!section_known(e->key) && !section_parent(e->key)) {
            st = unknown_section(place, e->key);
        } else {
            st = apply_table(cfg, line_of, doc->name, e->key, e->value.u.table);
        }
    }
    free(line_of);
    return st;
}

/* ---- public ---- */

void titan_config_defaults(titan_job_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < NKEYS; i++) {
        const key_def *k = &KEYS[i];
        void *field = (char *)cfg + k->off;
        switch (k->type) {
        case T_STR: snprintf(field, TITAN_STR, "%s", k->sdef), set_enum(cfg, k, k->sdef); break;
        case T_LIST: snprintf(field, TITAN_STR, "%s", k->sdef); break;
        case T_LISTS: snprintf(field, TITAN_LONG_STR, "%s", k->sdef); break;
        case T_INT: case T_BOOL: case T_TRI: *(int *)field = (int)k->ndef; break;
        case T_INT64: *(int64_t *)field = (int64_t)k->ndef; break;
        case T_DOUBLE: *(double *)field = k->ndef; break;
        }
    }
}

/* TOML syntax errors in a job file are config errors (exit 2), not corrupt data. */
static titan_status as_usage(titan_status st) {
    if (st != TITAN_ERR_FORMAT) return st;
    char msg[2048], hint[2048];
    snprintf(msg, sizeof msg, "%s", titan_error_message());
    snprintf(hint, sizeof hint, "%s", titan_error_hint_text());
    titan_error(TITAN_ERR_USAGE, "%s", msg);
    if (hint[0]) titan_error_hint("%s", hint);
    return TITAN_ERR_USAGE;
}

static titan_status load_doc(titan_job_config *cfg, titan_toml_doc *doc) {
    titan_job_config *tmp = malloc(sizeof *tmp);
    if (!tmp) {
        titan_toml_free(doc);
        return titan_error(TITAN_ERR_NOMEM, "out of memory");
    }
    memcpy(tmp, cfg, sizeof *tmp);
    titan_status st = apply_doc(tmp, doc);
    if (st == TITAN_OK) memcpy(cfg, tmp, sizeof *tmp); /* all or nothing */
    free(tmp);
    titan_toml_free(doc);
    return st;
}

titan_status titan_config_load_file(titan_job_config *cfg, const char *path) {
    titan_toml_doc *doc;
    TITAN_TRY(as_usage(titan_toml_parse_file(path, &doc)));
    return load_doc(cfg, doc);
}

titan_status titan_config_load_string(titan_job_config *cfg, const char *text, const char *name) {
    titan_toml_doc *doc;
    TITAN_TRY(as_usage(titan_toml_parse(text, strlen(text), name ? name : "<string>", &doc)));
    return load_doc(cfg, doc);
}

/* The key of a command-line "--section.key[=value]": section and key (in
 * name), its definition (NULL for a torchtitan key titan ignores), or the
 * override's error for a key that is not there. */
static titan_status arg_key(const char *arg, const char *place, char *name, size_t cap, const char **section,
                            const char **key, const key_def **k) {
    const char *a = arg;
    while (*a == '-') a++;
    size_t nlen = strcspn(a, "=");
    const char *dot = NULL; /* the last one: sections may have dots ([quantize.linear.float8]) */
    for (const char *c = a; c < a + nlen; c++)
        if (*c == '.') dot = c;
    if (nlen >= cap) return titan_error(TITAN_ERR_USAGE, "%s: key name too long", place);
    memcpy(name, a, nlen);
    name[nlen] = '\0';
    if (!dot || dot == a) {
        titan_error(TITAN_ERR_USAGE, "%s: expected --section.key=value", place);
        const char *homes[2];
        int nh = key_homes(name, homes, 2);
        if (nh == 1) titan_error_hint("did you mean --%s.%s%s?", homes[0], name, a + nlen);
        if (nh == 2)
            titan_error_hint("did you mean --%s.%s%s? (or --%s.%s%s)", homes[0], name, a + nlen, homes[1], name,
                             a + nlen);
        return TITAN_ERR_USAGE;
    }
    dot = strrchr(name, '.'); /* the key follows the last dot: --training.dataloader.num_workers */
    *key = dot + 1;
    name[dot - name] = '\0';
    *section = name;
    if (!section_known(*section)) return unknown_section(place, *section);
    *k = titan_job_find_key(*section, *key);
    if (!*k) *k = titan_job_find_alias(*section, *key);
    if (!*k && titan_job_find_ignored(*section, *key) < 0) return unknown_key(place, *section, *key);
    return TITAN_OK;
}

titan_status titan_config_key_check(const char *arg, int *is_bool) {
    char place[600], name[256];
    snprintf(place, sizeof place, "command line: %s", arg);
    const char *section, *key;
    const key_def *k = NULL;
    TITAN_TRY(arg_key(arg, place, name, sizeof name, &section, &key, &k));
    *is_bool = k && k->type == T_BOOL;
    return TITAN_OK;
}

titan_status titan_config_override(titan_job_config *cfg, const char *arg) {
    char place[600], name[256];
    snprintf(place, sizeof place, "command line: %s", arg);
    const char *section, *key;
    const key_def *k = NULL;
    TITAN_TRY(arg_key(arg, place, name, sizeof name, &section, &key, &k));
    const char *a = arg;
    while (*a == '-') a++;
    size_t nlen = strcspn(a, "=");

    titan_toml_value v;
    memset(&v, 0, sizeof v);
    if (a[nlen] != '=') {
        if (!k || k->type != T_BOOL) {
            titan_error(TITAN_ERR_USAGE, "%s: missing '=value'", place);
            titan_error_hint("write --%s.%s=VALUE", section, key);
            return TITAN_ERR_USAGE;
        }
        v.type = TITAN_TOML_BOOL; /* a bare --section.flag means true */
        v.u.b = 1;
    } else {
        const char *text = a + nlen + 1;
        int quoted = text[0] == '"' || text[0] == '\'';
        titan_status st = TITAN_ERR_FAIL;
        if (!(k && (k->type == T_STR || (k->type == T_LIST && text[0] != '['))) || quoted) {
            st = titan_toml_parse_value(text, "value", &v);
            if (st != TITAN_OK && quoted) {
                st = as_usage(st);
                titan_error_context("%s", place);
                return st;
            }
        }
        if (st != TITAN_OK) { /* not a TOML value: a bare string */
            titan_error_clear();
            v.type = TITAN_TOML_STRING;
            v.u.str.len = strlen(text);
            v.u.str.ptr = strdup(text);
            if (!v.u.str.ptr) return titan_error(TITAN_ERR_NOMEM, "out of memory");
        }
    }
    titan_job_config *tmp = malloc(sizeof *tmp);
    if (!tmp) {
        titan_toml_value_free(&v);
        return titan_error(TITAN_ERR_NOMEM, "out of memory");
    }
    memcpy(tmp, cfg, sizeof *tmp);
    warned_why = NULL;
    titan_status st = apply(tmp, NULL, section, key, &v, place, 0);
    if (st == TITAN_OK) memcpy(cfg, tmp, sizeof *tmp);
    free(tmp);
    titan_toml_value_free(&v);
    return st;
}

/* 1 when the comma-joined list holds item. */
static int list_has(const char *list, const char *item) {
    size_t n = strlen(item);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, item, n) == 0) return 1;
        p += len;
        if (*p == ',') p++;
    }
    return 0;
}

int titan_config_float8(const titan_job_config *c) {
    return list_has(c->model_converters, "quantize.linear.float8") || list_has(c->model_converters, "float8");
}

/* torchtitan's Float8LinearConverter checks (components/quantization/float8.py). */
static titan_status validate_float8(const titan_job_config *c) {
    const char *r = c->float8_recipe_name;
    if (r[0] && strcmp(r, "tensorwise") && strcmp(r, "rowwise") && strcmp(r, "rowwise_with_gw_hp")) {
        titan_error(TITAN_ERR_USAGE, "quantize.linear.float8.recipe_name = \"%s\": not a torchao recipe", r);
        titan_error_hint("use \"tensorwise\", \"rowwise\" or \"rowwise_with_gw_hp\" (or leave it out: tensorwise)");
        return TITAN_ERR_USAGE;
    }
    if (!titan_config_float8(c)) return TITAN_OK;
    if (list_has(c->model_converters, "quantize.linear.float8") && list_has(c->model_converters, "float8")) {
        titan_error(TITAN_ERR_USAGE, "model.converters = \"%s\": float8 twice (\"float8\" is an alias of "
                    "\"quantize.linear.float8\")", c->model_converters);
        titan_error_hint("keep one of them");
        return TITAN_ERR_USAGE;
    }
    if (r[0] && c->float8_enable_fsdp_float8_all_gather) {
        titan_error(TITAN_ERR_USAGE, "quantize.linear.float8.recipe_name = \"%s\" with "
                    "enable_fsdp_float8_all_gather = true: not supported (torchtitan refuses it too)", r);
        titan_error_hint("the float8 all-gather is tensorwise only: leave recipe_name out, or set "
                         "enable_fsdp_float8_all_gather = false");
        return TITAN_ERR_USAGE;
    }
    if (strcmp(r, "rowwise_with_gw_hp") == 0 && list_has(c->float8_filter_fqns, "auto_filter_small_kn")) {
        titan_error(TITAN_ERR_USAGE, "quantize.linear.float8.filter_fqns has \"auto_filter_small_kn\": torchao has no "
                    "automatic filter for recipe rowwise_with_gw_hp");
        titan_error_hint("name the linears to skip in filter_fqns instead");
        return TITAN_ERR_USAGE;
    }
    return TITAN_OK;
}

/* The checkpoint keys of torchtitan's last schema that combine. */
static titan_status validate_checkpoint(const titan_job_config *c) {
    if (c->checkpoint_create_seed_checkpoint) {
        titan_error(TITAN_ERR_USAGE, "checkpoint.create_seed_checkpoint = true: titan-train does not write seed "
                    "checkpoints");
        titan_error_hint("titan-init CONFIG RUN writes RUN/%s/step-00000000, the seed every run starts from; "
                         "remove the key", c->checkpoint_folder);
        return TITAN_ERR_USAGE;
    }
    if (c->checkpoint_last_save_in_hf && !c->checkpoint_last_save_model_only) {
        titan_error(TITAN_ERR_USAGE, "checkpoint.last_save_in_hf = true needs checkpoint.last_save_model_only = true "
                    "(safetensors hold no training state; torchtitan's rule)");
        titan_error_hint("set checkpoint.last_save_model_only = true, or export any step later with "
                         "titan-ckpt convert --to hf");
        return TITAN_ERR_USAGE;
    }
    if (c->checkpoint_export_dtype_kind != 0 && !c->checkpoint_last_save_model_only)
        titan_warn("checkpoint.export_dtype = \"%s\": used only with checkpoint.last_save_model_only = true "
                   "(a full checkpoint stays float32)", c->checkpoint_export_dtype);
    return TITAN_OK;
}

titan_status titan_config_validate(const titan_job_config *c) {
    TITAN_TRY(validate_float8(c));
    TITAN_TRY(validate_checkpoint(c));
    if (!c->checkpoint_initial_load_model_only) {
        titan_error(TITAN_ERR_USAGE, "checkpoint.initial_load_model_only = false: starting from another run's "
                    "whole training state (AdamW moments, step, data position) is not supported");
        titan_error_hint("copy that step directory into the run's checkpoint folder (or titan-reshard it there) "
                         "to go on with its state");
        return TITAN_ERR_USAGE;
    }
    if (c->checkpoint_initial_load_in_hf && !c->checkpoint_initial_load_path[0] && !c->model_hf_assets_path[0]) {
        titan_error(TITAN_ERR_USAGE, "checkpoint.initial_load_in_hf = true: checkpoint.initial_load_path and "
                    "model.hf_assets_path are empty");
        titan_error_hint("set model.hf_assets_path (or checkpoint.initial_load_path) to the Hugging Face model's "
                         "directory");
        return TITAN_ERR_USAGE;
    }
    /* Context parallelism cuts each sequence into 2 x cp equal chunks. */
    int cp = c->parallelism_context_parallel_degree;
    if (cp > 1 && c->training_seq_len % (2 * cp) != 0) {
        titan_error(TITAN_ERR_USAGE, "parallelism.context_parallel_degree = %d: training.seq_len = %d does not split "
                    "into 2 x %d equal chunks", cp, c->training_seq_len, cp);
        titan_error_hint("make training.seq_len a multiple of %d", 2 * cp);
        return TITAN_ERR_USAGE;
    }
    int mbs = c->parallelism_pipeline_parallel_microbatch_size;
    if (c->parallelism_pipeline_parallel_degree > 1 && c->training_local_batch_size % mbs != 0) {
        titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_microbatch_size = %d does not divide "
                    "training.local_batch_size = %d", mbs, c->training_local_batch_size);
        titan_error_hint("make local_batch_size a multiple of the micro-batch size (torchtitan's rule)");
        return TITAN_ERR_USAGE;
    }
    /* torch's base classes run a CSV's order only */
    titan_job_pp_schedule pps = c->parallelism_pp_schedule;
    if (c->parallelism_pipeline_parallel_degree > 1 && !c->parallelism_pipeline_parallel_schedule_csv[0] &&
        (pps == TITAN_JOB_PP_SINGLE || pps == TITAN_JOB_PP_MULTI || pps == TITAN_JOB_PP_RUNTIME)) {
        titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_schedule = \"%s\" takes its order from "
                    "parallelism.pipeline_parallel_schedule_csv, which is not set",
                    c->parallelism_pipeline_parallel_schedule);
        titan_error_hint("name a CSV schedule file, or a schedule such as 1F1B or Interleaved1F1B");
        return TITAN_ERR_USAGE;
    }
    /* With dp_shard = -1 the degree depends on the job's size: checked at start. */
    int dp = c->parallelism_data_parallel_replicate_degree;
    if (c->parallelism_data_parallel_shard_degree > 0) dp *= c->parallelism_data_parallel_shard_degree;
    int per_step = c->training_local_batch_size * dp;
    if (c->training_global_batch_size != -1 &&
        (c->training_global_batch_size <= 0 || per_step <= 0 || c->training_global_batch_size % per_step != 0)) {
        titan_error(TITAN_ERR_USAGE,
                    "training.global_batch_size = %d: not a multiple of training.local_batch_size (%d) "
                    "x data-parallel degree (%d)",
                    c->training_global_batch_size, c->training_local_batch_size, dp);
        titan_error_hint("use a multiple of %d (gradient accumulation), or -1 for no accumulation", per_step);
        return TITAN_ERR_USAGE;
    }
    if (c->validation_enable) {
        /* Validation runs through the training model's buffers. */
        if (c->validation_local_batch_size != -1 && c->validation_local_batch_size != c->training_local_batch_size) {
            titan_error(TITAN_ERR_USAGE, "validation.local_batch_size = %d: must equal training.local_batch_size (%d)",
                        c->validation_local_batch_size, c->training_local_batch_size);
            titan_error_hint("leave validation.local_batch_size at -1");
            return TITAN_ERR_USAGE;
        }
        if (c->validation_seq_len != -1 && c->validation_seq_len != c->training_seq_len) {
            titan_error(TITAN_ERR_USAGE, "validation.seq_len = %d: must equal training.seq_len (%d)",
                        c->validation_seq_len, c->training_seq_len);
            titan_error_hint("leave validation.seq_len at -1");
            return TITAN_ERR_USAGE;
        }
        if (!c->validation_dataset_path[0] && !c->validation_dataset[0]) {
            titan_error(TITAN_ERR_USAGE, "validation.enable = true: validation.dataset_path is not set");
            titan_error_hint("make a held-out shard directory with titan-shard --split and set validation.dataset_path");
            return TITAN_ERR_USAGE;
        }
    }
    return TITAN_OK;
}

/* A comma-joined list as a TOML array of strings. */
static void format_list(const char *list, char *buf, size_t cap) {
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (const char *p = list; *p && used < cap;) {
        size_t len = strcspn(p, ",");
        if (used > 1) used += (size_t)snprintf(buf + used, cap - used, ", ");
        if (used < cap) used += (size_t)titan_toml_format_string(buf + used, cap - used, p, len);
        p += len;
        if (*p == ',') p++;
    }
    if (used < cap) snprintf(buf + used, cap - used, "]");
}

/* Lists joined by ';' as a TOML array of arrays of strings. */
static void format_lists(const char *lists, char *buf, size_t cap) {
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (const char *p = lists; *p && used < cap;) {
        size_t len = strcspn(p, ";");
        char part[TITAN_LONG_STR];
        snprintf(part, sizeof part, "%.*s", (int)len, p);
        if (used > 1) used += (size_t)snprintf(buf + used, cap - used, ", ");
        if (used < cap) {
            format_list(part, buf + used, cap - used);
            used += strlen(buf + used);
        }
        p += len;
        if (*p == ';') p++;
    }
    if (used < cap) snprintf(buf + used, cap - used, "]");
}

/* One key's value as TOML writes it. */
void titan_job_format_value(const key_def *k, const titan_job_config *cfg, char *buf, size_t cap) {
    const void *field = (const char *)cfg + k->off;
    switch (k->type) {
    case T_STR: titan_toml_format_string(buf, cap, field, strnlen(field, TITAN_STR)); break;
    case T_LIST: format_list(field, buf, cap); break;
    case T_LISTS: format_lists(field, buf, cap); break;
    case T_INT: snprintf(buf, cap, "%d", *(const int *)field); break;
    case T_INT64: snprintf(buf, cap, "%lld", (long long)*(const int64_t *)field); break;
    case T_DOUBLE: titan_toml_format_double(buf, cap, *(const double *)field); break;
    case T_BOOL: snprintf(buf, cap, "%s", *(const int *)field ? "true" : "false"); break;
    case T_TRI: {
        int t = *(const int *)field;
        snprintf(buf, cap, "%s", t < 0 ? "-1" : t ? "true" : "false");
        break;
    }
    }
}

int titan_config_write(const titan_job_config *cfg, FILE *f) {
    const char *section = NULL;
    for (int i = 0; i < NKEYS; i++) {
        const key_def *k = &KEYS[i];
        if (!section || strcmp(section, k->section) != 0) {
            fprintf(f, "%s[%s]\n", section ? "\n" : "", k->section);
            section = k->section;
        }
        fprintf(f, "# %s", k->doc);
        if (k->choices) {
            fputs(" (", f);
            for (const char *c = k->choices; *c; c++) {
                if (*c == ',') fputc(',', f), fputc(' ', f);
                else fputc(*c, f);
            }
            fputc(')', f);
        }
        char buf[TITAN_VALUE_TEXT];
        titan_job_format_value(k, cfg, buf, sizeof buf);
        fprintf(f, "\n%s = %s\n", k->key, buf);
    }
    return ferror(f) ? -1 : 0;
}

int titan_config_diff(const titan_job_config *a, const titan_job_config *b, char *out, size_t cap) {
    int count = 0;
    size_t used = 0;
    if (cap) out[0] = '\0';
    for (int i = 0; i < NKEYS; i++) {
        const key_def *k = &KEYS[i];
        char va[TITAN_VALUE_TEXT], vb[TITAN_VALUE_TEXT];
        titan_job_format_value(k, a, va, sizeof va);
        titan_job_format_value(k, b, vb, sizeof vb);
        if (!strcmp(va, vb)) continue;
        if (used < cap) {
            int w = snprintf(out + used, cap - used, "%s%s.%s %s -> %s", count ? ", " : "", k->section, k->key, va, vb);
            used = w < 0 ? cap : used + (size_t)w;
        }
        count++;
    }
    if (used >= cap && cap > 4) memcpy(out + cap - 4, "...", 4);
    return count;
}
