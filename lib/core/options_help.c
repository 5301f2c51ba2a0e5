/* options_help.c - the --help text, generated from a tool's option table
 * (options.h) so that it cannot drift from what the parser takes. */
#include "core/options.h"
#include "core/log.h"
#include "core/version.h"

#include <string.h>

#define COL_MAX 30  /* options wider than this put their help on the next line */
#define CMD_COL_MAX 40

/* Prints a help text at column col (the cursor at `at`), each '\n' of it
 * continuing at the same column; suffix after its first line. */
static void help_at(FILE *f, int at, int col, const char *help, const char *suffix) {
    if (!help && !suffix) {
        fputc('\n', f);
        return;
    }
    if (at > col - 2) {
        fputc('\n', f);
        at = 0;
    }
    fprintf(f, "%*s", col - at, "");
    const char *p = help ? help : "";
    size_t l = strcspn(p, "\n");
    fprintf(f, "%.*s%s\n", (int)l, p, suffix ? suffix : "");
    for (p += l; *p == '\n'; p += l) {
        p++;
        l = strcspn(p, "\n");
        fprintf(f, "%*s%.*s\n", col, "", (int)l, p);
    }
}

static int any_short(const titan_option *opts) {
    for (const titan_option *o = opts; o->kind != TITAN_OPT_END; o++)
        if (o->short_name) return 1;
    return 0;
}

/* "  -o, --output DIR" into out; its width. */
static int left_text(const titan_option *o, int indent_long, char *out, size_t cap) {
    const char *arg = o->arg ? o->arg : "";
    const char *sp = o->arg ? " " : "";
    int n;
    if (o->short_name && o->name) n = snprintf(out, cap, "  -%c, --%s%s%s", o->short_name, o->name, sp, arg);
    else if (o->short_name) n = snprintf(out, cap, "  -%c%s%s", o->short_name, sp, arg);
    else n = snprintf(out, cap, "  %s--%s%s%s", indent_long ? "    " : "", o->name, sp, arg);
    return n < 0 ? 0 : n >= (int)cap ? (int)cap - 1 : n;
}

static int option_column(const titan_opt_spec *s, int indent_long) {
    int col = 0;
    char buf[256];
    for (const titan_option *o = s->opts; o->kind != TITAN_OPT_END; o++) {
        int w = left_text(o, indent_long, buf, sizeof buf);
        if (w <= COL_MAX - 2 && w > col) col = w;
    }
    return col + 2;
}

/* The options, the ones every command takes (global) or the others. */
static void print_options(FILE *f, const titan_opt_spec *s, int global, int col, int indent_long) {
    char left[256], suffix[300];
    for (const titan_option *o = s->opts; o->kind != TITAN_OPT_END; o++) {
        if ((o->cmds == NULL) != global) continue;
        int w = left_text(o, indent_long, left, sizeof left);
        fputs(left, f);
        suffix[0] = '\0';
        if (o->cmds) { /* " (ls, info, diff)" */
            size_t n = 0;
            suffix[n++] = ' ', suffix[n++] = '(';
            for (const char *p = o->cmds; *p && n < sizeof suffix - 4; p++) {
                if (*p == ' ') suffix[n++] = ',';
                suffix[n++] = *p;
            }
            suffix[n++] = ')', suffix[n] = '\0';
        }
        help_at(f, w, col, o->help, suffix[0] ? suffix : NULL);
    }
}

static void print_commands(FILE *f, const titan_opt_spec *s) {
    int col = 0;
    char left[512];
    for (const titan_subcommand *c = s->cmds; c->name; c++) {
        int w = snprintf(left, sizeof left, "  %s%s%s", c->name, c->args ? " " : "", c->args ? c->args : "");
        if (c->help && w <= CMD_COL_MAX - 2 && w > col) col = w;
    }
    col += 2;
    for (const titan_subcommand *c = s->cmds; c->name; c++) {
        int w = snprintf(left, sizeof left, "  %s%s%s", c->name, c->args ? " " : "", c->args ? c->args : "");
        fputs(left, f);
        help_at(f, w, col, c->help, NULL);
    }
}

static void print_prose(FILE *f, const char *text) {
    size_t n = strlen(text);
    fprintf(f, "\n%s%s", text, n && text[n - 1] == '\n' ? "" : "\n");
}

void titan_opt_help(const titan_opt_spec *s, FILE *f) {
    const char *u = s->usage ? s->usage : "[options]";
    for (int first = 1; *u; first = 0) {
        size_t l = strcspn(u, "\n");
        fprintf(f, "%s %s %.*s\n", first ? "usage:" : "      ", s->prog, (int)l, u);
        u += l + (u[l] == '\n');
    }
    if (s->intro) print_prose(f, s->intro);
    if (s->cmds) {
        fputc('\n', f);
        print_commands(f, s);
    }
    int indent_long = any_short(s->opts), col = option_column(s, indent_long);
    fputc('\n', f);
    print_options(f, s, 1, col, indent_long);
    if (s->key_fn) {
        char left[64];
        int w = snprintf(left, sizeof left, "  %s--SECTION.KEY VALUE", indent_long ? "    " : "");
        fputs(left, f);
        help_at(f, w, col, "a job config key, also --SECTION.KEY=VALUE\n(CONFIGURATION in titan-train(1))", NULL);
    }
    int any_cmd_opts = 0;
    for (const titan_option *o = s->opts; o->kind != TITAN_OPT_END; o++) any_cmd_opts |= o->cmds != NULL;
    if (any_cmd_opts) {
        fprintf(f, "\noptions of the commands named in parentheses:\n");
        print_options(f, s, 0, col, indent_long);
    }
    if (s->footer) print_prose(f, s->footer);
}

int titan_opt_answer(const titan_opt_spec *spec, const titan_opt_result *r) {
    if (r->help) titan_opt_help(spec, stdout);
    else if (r->version) printf("%s %s\n", spec->prog, TITAN_VERSION);
    return r->help || r->version;
}

int titan_opt_main(const titan_opt_spec *spec, int argc, char **argv, titan_opt_result *r, const int *verbosity) {
    titan_status st = titan_opt_parse(spec, argc, argv, r);
    if (verbosity) titan_log_set_verbosity(*verbosity);
    if (st != TITAN_OK) return titan_report(st);
    return titan_opt_answer(spec, r) ? 0 : -1;
}
