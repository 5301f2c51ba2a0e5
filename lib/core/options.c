/* options.c - the option parser of every tool (see options.h). Parsing
 * only: the help text is options_help.c's. */
#include "core/options.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int titan_opt_edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63) return 99;
    int row[64];
    for (size_t j = 0; j <= m; j++) row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j];
            int best = diag + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[m];
}

/* Is word one of the space-separated words of list? */
static int in_list(const char *list, const char *word) {
    size_t l = strlen(word);
    for (const char *p = list; (p = strstr(p, word)); p += l)
        if ((p == list || p[-1] == ' ') && (p[l] == ' ' || !p[l])) return 1;
    return 0;
}

static int accepts(const titan_option *o, const char *cmd) {
    return !o->cmds || (cmd && in_list(o->cmds, cmd));
}

static int takes_value(const titan_option *o) {
    switch (o->kind) {
    case TITAN_OPT_INT: case TITAN_OPT_DOUBLE: case TITAN_OPT_STRING: case TITAN_OPT_PATH: case TITAN_OPT_CHOICE:
        return 1;
    case TITAN_OPT_CALLBACK: return o->arg != NULL;
    default: return 0;
    }
}

static const titan_option *find_long(const titan_option *opts, const char *name, size_t len) {
    for (const titan_option *o = opts; o->kind != TITAN_OPT_END; o++)
        if (o->name && strlen(o->name) == len && !strncmp(o->name, name, len)) return o;
    return NULL;
}

static const titan_option *find_short(const titan_option *opts, char c) {
    for (const titan_option *o = opts; o->kind != TITAN_OPT_END; o++)
        if (o->short_name == c) return o;
    return NULL;
}

/* "an integer >= 1", "an integer 10..1000": what an INT option takes. */
static void int_expected(const titan_option *o, char *out, size_t cap) {
    if (o->expected) snprintf(out, cap, "%s", o->expected);
    else if (!o->min && !o->max) snprintf(out, cap, "an integer");
    else if (o->max == LLONG_MAX) snprintf(out, cap, "an integer >= %lld", o->min);
    else snprintf(out, cap, "an integer %lld..%lld", o->min, o->max);
}

static void double_expected(const titan_option *o, char *out, size_t cap) {
    if (o->expected) snprintf(out, cap, "%s", o->expected);
    else if (!o->dmin && !o->dmax) snprintf(out, cap, "a finite number");
    else if (isinf(o->dmax)) snprintf(out, cap, "a finite number >= %g", o->dmin);
    else snprintf(out, cap, "a number %g..%g", o->dmin, o->dmax);
}

/* "a, b or c" of a list "a,b,c" (sep ','), "a and b" of "a b" (sep ' '). */
static void and_list(const char *list, char sep, char *out, size_t cap) {
    size_t used = 0, n = 1;
    char seps[2] = {sep, '\0'};
    for (const char *p = list; *p; p++) n += *p == sep;
    out[0] = '\0';
    const char *p = list;
    for (size_t i = 0; i < n && used < cap; i++) {
        size_t l = strcspn(p, seps);
        const char *joint = i == 0 ? "" : i + 1 < n ? ", " : sep == ',' ? " or " : " and ";
        int w = snprintf(out + used, cap - used, "%s%.*s", joint, (int)l, p);
        if (w < 0) return;
        used += (size_t)w;
        p += l + (p[l] == sep);
    }
}

static titan_status set_choice(const titan_option *o, const char *as, const char *v) {
    size_t vl = strlen(v);
    for (const char *p = o->choices; *p;) {
        size_t l = strcspn(p, ",");
        if (l == vl && !strncmp(p, v, l)) {
            *(const char **)o->target = v;
            return TITAN_OK;
        }
        p += l + (p[l] == ',');
    }
    char list[512];
    and_list(o->choices, ',', list, sizeof list);
    return titan_error(TITAN_ERR_USAGE, "%s: '%s' is not %s", as, v, list);
}

/* Stores one option's value (v: NULL for those without one). */
static titan_status apply(const titan_option *o, const char *as, const char *v, titan_opt_result *r) {
    char want[160];
    switch (o->kind) {
    case TITAN_OPT_FLAG: *(int *)o->target = 1; return TITAN_OK;
    case TITAN_OPT_SET_INT: *(int *)o->target = o->value; return TITAN_OK;
    case TITAN_OPT_HELP: r->help = 1; return TITAN_OK;
    case TITAN_OPT_VERSION: r->version = 1; return TITAN_OK;
    case TITAN_OPT_STRING: *(const char **)o->target = v; return TITAN_OK;
    case TITAN_OPT_PATH:
        if (!*v) return titan_error(TITAN_ERR_USAGE, "%s: the path is empty", as);
        *(const char **)o->target = v;
        return TITAN_OK;
    case TITAN_OPT_CHOICE: return set_choice(o, as, v);
    case TITAN_OPT_CALLBACK: return o->fn(o, as, v);
    case TITAN_OPT_INT: {
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        int ranged = o->min || o->max;
        if (errno || end == v || *end || isspace((unsigned char)v[0]) || (ranged && (x < o->min || x > o->max))) {
            int_expected(o, want, sizeof want);
            return titan_error(TITAN_ERR_USAGE, "%s: '%s' is not %s", as, v, want);
        }
        *(long long *)o->target = x;
        return TITAN_OK;
    }
    case TITAN_OPT_DOUBLE: {
        char *end;
        double x = strtod(v, &end);
        int ranged = o->dmin != 0 || o->dmax != 0;
        if (end == v || *end || isspace((unsigned char)v[0]) || !isfinite(x) ||
            (ranged && (x < o->dmin || x > o->dmax))) {
            double_expected(o, want, sizeof want);
            return titan_error(TITAN_ERR_USAGE, "%s: '%s' is not %s", as, v, want);
        }
        *(double *)o->target = x;
        return TITAN_OK;
    }
    case TITAN_OPT_END: break;
    }
    return titan_error(TITAN_ERR_FAIL, "%s: option of no kind", as);
}

/* The closest long name this command takes: a prefix of one, or within
 * about a third of the typed name's length. */
static const char *suggest(const titan_opt_spec *s, const char *cmd, const char *name, size_t len) {
    char typed[64];
    if (len >= sizeof typed) return NULL;
    memcpy(typed, name, len);
    typed[len] = '\0';
    const char *best = NULL, *prefix_of = NULL;
    int best_d = ((int)len + 2) / 3, prefixes = 0;
    if (best_d < 1) best_d = 1;
    best_d++;
    for (const titan_option *o = s->opts; o->kind != TITAN_OPT_END; o++) {
        if (!o->name || !accepts(o, cmd)) continue;
        if (len >= 2 && !strncmp(o->name, typed, len)) prefixes++, prefix_of = o->name;
        int d = titan_opt_edit_distance(typed, o->name);
        if (d < best_d) best_d = d, best = o->name;
    }
    return prefixes == 1 ? prefix_of : best;
}

/* Unknown (or not this command's) option: the message, and the hint that
 * helps most. name/len: the long name typed, or NULL for a short one. */
static titan_status unknown(const titan_opt_spec *s, const char *cmd, const char *as, const char *name, size_t len) {
    if (cmd) titan_error(TITAN_ERR_USAGE, "%s: unknown option '%s'", cmd, as);
    else titan_error(TITAN_ERR_USAGE, "unknown option '%s'", as);
    const titan_option *other = name ? find_long(s->opts, name, len) : find_short(s->opts, as[1]);
    const char *close = name ? suggest(s, cmd, name, len) : NULL;
    if (other && other->cmds) {
        char cmds[256];
        and_list(other->cmds, ' ', cmds, sizeof cmds);
        titan_error_hint("%s is an option of %s %s", as, s->prog, cmds);
    } else if (close) {
        titan_error_hint("did you mean --%s?", close);
    } else if (s->cmds) {
        titan_error_hint("%s --help lists the options of each command", s->prog);
    } else {
        titan_error_hint("%s --help lists the options%s", s->prog,
                         s->key_fn ? "; config keys are --section.key=value" : "");
    }
    return TITAN_ERR_USAGE;
}

static titan_status command(const titan_opt_spec *s, const char *word, titan_opt_result *r) {
    const char *close = NULL;
    int close_d = 3;
    for (const titan_subcommand *c = s->cmds; c->name; c++) {
        if (!strcmp(c->name, word)) {
            r->cmd = c->name;
            return TITAN_OK;
        }
        int d = titan_opt_edit_distance(word, c->name);
        if (d < close_d && d <= (int)strlen(c->name) / 2) close_d = d, close = c->name;
    }
    titan_error(TITAN_ERR_USAGE, "unknown command '%s'", word);
    char list[512] = "";
    size_t used = 0;
    for (const titan_subcommand *c = s->cmds; c->name && used < sizeof list; c++)
        if (c == s->cmds || strcmp(c[-1].name, c->name)) /* a name repeats for its forms */
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", c->name);
    if (close) titan_error_hint("did you mean '%s'? commands: %s (%s --help)", close, list, s->prog);
    else titan_error_hint("commands: %s (%s --help)", list, s->prog);
    return TITAN_ERR_USAGE;
}

static titan_status positional(const titan_opt_spec *s, char *a, titan_opt_result *r) {
    if (s->cmds && !r->cmd) return command(s, a, r);
    r->pos[r->npos++] = a;
    return TITAN_OK;
}

/* --name, --name=value, --name value (taking argv[*i + 1]); a dotted name
 * goes to the spec's key_fn. */
static titan_status parse_long(const titan_opt_spec *s, int argc, char **argv, int *i, titan_opt_result *r) {
    const char *a = argv[*i], *name = a + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const char *next = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (s->key_fn && memchr(name, '.', len)) {
        int took = 0;
        TITAN_TRY(s->key_fn(s->key_ctx, a, eq ? NULL : next, &took));
        *i += took;
        return TITAN_OK;
    }
    char as[96];
    snprintf(as, sizeof as, "--%.*s", (int)(len < 80 ? len : 80), name);
    const titan_option *o = find_long(s->opts, name, len);
    if (!o || !accepts(o, r->cmd)) return unknown(s, r->cmd, as, name, len);
    if (!takes_value(o)) {
        if (eq) return titan_error(TITAN_ERR_USAGE, "%s takes no value", as);
        return apply(o, as, NULL, r);
    }
    if (eq) return apply(o, as, eq + 1, r);
    if (!next) return titan_error(TITAN_ERR_USAGE, "option '%s' needs a value", as);
    ++*i;
    return apply(o, as, next, r);
}

/* -x, -xVALUE, -x VALUE, and flags combined (-qv, -fj4). */
static titan_status parse_short(const titan_opt_spec *s, int argc, char **argv, int *i, titan_opt_result *r) {
    for (const char *p = argv[*i] + 1; *p; p++) {
        char as[3] = {'-', *p, '\0'};
        const titan_option *o = find_short(s->opts, *p);
        if (!o || !accepts(o, r->cmd)) return unknown(s, r->cmd, as, NULL, 0);
        if (!takes_value(o)) {
            TITAN_TRY(apply(o, as, NULL, r));
            if (r->help || r->version) return TITAN_OK;
            continue;
        }
        if (p[1]) return apply(o, as, p + 1, r);
        if (*i + 1 >= argc) return titan_error(TITAN_ERR_USAGE, "option '%s' needs a value", as);
        return apply(o, as, argv[++*i], r);
    }
    return TITAN_OK;
}

titan_status titan_opt_parse(const titan_opt_spec *s, int argc, char **argv, titan_opt_result *r) {
    memset(r, 0, sizeof *r);
    r->pos = calloc((size_t)(argc > 0 ? argc : 1), sizeof *r->pos);
    if (!r->pos) return titan_error(TITAN_ERR_NOMEM, "options: out of memory");
    int only_pos = 0;
    for (int i = 1; i < argc && !r->help && !r->version; i++) {
        char *a = argv[i];
        if (only_pos || a[0] != '-' || !a[1]) TITAN_TRY(positional(s, a, r));
        else if (!strcmp(a, "--")) only_pos = 1;
        else if (a[1] == '-') TITAN_TRY(parse_long(s, argc, argv, &i, r));
        else TITAN_TRY(parse_short(s, argc, argv, &i, r));
    }
    return TITAN_OK;
}

void titan_opt_result_free(titan_opt_result *r) {
    free(r->pos);
    r->pos = NULL;
    r->npos = 0;
}
