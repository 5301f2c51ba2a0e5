/* pipeline_csv.c - torch.distributed.pipelining's CSV schedules (see
 * pipeline_csv.h). */
#include "parallel/pipeline_csv.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

enum { MAX_FILE = 16 << 20 };

/* The file's text, NUL-terminated (malloc'd). */
static titan_status slurp(const char *path, char **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return titan_error(TITAN_ERR_IO, "parallelism.pipeline_parallel_schedule_csv = \"%s\": %s", path,
                           strerror(errno));
    char *buf = malloc(MAX_FILE + 1);
    size_t n = buf ? fread(buf, 1, MAX_FILE + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (!buf) return titan_error(TITAN_ERR_NOMEM, "pipeline schedule csv: no memory for \"%s\"", path);
    if (bad || n > MAX_FILE) {
        free(buf);
        return titan_error(bad ? TITAN_ERR_IO : TITAN_ERR_FORMAT, "parallelism.pipeline_parallel_schedule_csv = "
                           "\"%s\": %s", path, bad ? "read error" : "larger than 16 MiB");
    }
    buf[n] = '\0';
    *out = buf;
    return TITAN_OK;
}

/* The action types torch writes, longest first where one is a prefix of
 * another; compute: the op, or -1 for those titan skips. */
static const struct {
    const char *name;
    int op;
} types[] = {{"UNSHARD", -1}, {"RESHARD", -1}, {"REDUCE_GRAD", -1}, {"SEND_F", -1}, {"RECV_F", -1},
             {"SEND_B", -1},  {"RECV_B", -1},  {"F", TITAN_PP_F},   {"I", TITAN_PP_I}, {"W", TITAN_PP_W},
             {"B", TITAN_PP_B}};

/* One cell, trimmed, into *a (global stage in a->stage); 1 a compute
 * action, 0 one to skip (or empty), -1 not an action. */
static int parse_cell(const char *cell, titan_pp_action *a) {
    const char *p = cell;
    if (!*p) return 0;
    if (!isdigit((unsigned char)*p)) return -1;
    long stage = strtol(p, (char **)&p, 10);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        size_t len = strlen(types[t].name);
        if (strncmp(p, types[t].name, len) != 0) continue;
        const char *q = p + len;
        if (types[t].op < 0) return 0; /* its micro-batch, if any, does not matter */
        if (!isdigit((unsigned char)*q)) return -1;
        long mb = strtol(q, (char **)&q, 10);
        if (*q || stage > 1 << 20 || mb > 1 << 20) return -1;
        *a = (titan_pp_action){(int)stage, (int)mb, types[t].op};
        return 1;
    }
    return -1;
}

/* Cell text without spaces and quotes, in place. */
static char *trim(char *s) {
    while (*s == ' ' || *s == '\t' || *s == '"') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '"' || s[n - 1] == '\r')) s[--n] = '\0';
    return s;
}

static titan_pp_custom *custom_new(int pp, int v, int micro) {
    titan_pp_custom *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (titan_pp_custom){.pp = pp, .v = v, .micro = micro};
    c->acts = calloc((size_t)pp, sizeof *c->acts);
    c->col = calloc((size_t)pp, sizeof *c->col);
    c->n = calloc((size_t)pp, sizeof *c->n);
    int cap = 3 * v * micro;
    for (int r = 0; c->acts && c->col && r < pp; r++) {
        c->acts[r] = malloc((size_t)cap * sizeof **c->acts);
        c->col[r] = malloc((size_t)cap * sizeof **c->col);
        if (!c->acts[r] || !c->col[r]) break;
    }
    if (!c->n || !c->acts || !c->col || !c->acts[pp - 1] || !c->col[pp - 1]) {
        titan_pp_csv_free(c);
        return NULL;
    }
    return c;
}

void titan_pp_csv_free(titan_pp_custom *c) {
    if (!c) return;
    for (int r = 0; c->acts && r < c->pp; r++) free(c->acts[r]);
    for (int r = 0; c->col && r < c->pp; r++) free(c->col[r]);
    free(c->acts);
    free(c->col);
    free(c->n);
    free(c);
}

/* Row r's cells (line, NUL-terminated, modified) into c. */
static titan_status parse_row(titan_pp_custom *c, const char *path, int r, char *line) {
    int cap = 3 * c->v * c->micro, column = 0;
    for (char *cell = line, *next; cell; cell = next, column++) {
        next = strchr(cell, ',');
        if (next) *next++ = '\0';
        char *text = trim(cell);
        titan_pp_action a;
        int kind = parse_cell(text, &a);
        if (kind < 0) {
            titan_error(TITAN_ERR_FORMAT, "parallelism.pipeline_parallel_schedule_csv = \"%s\": row %d, column %d: "
                        "\"%.40s\" is not an action", path, r + 1, column + 1, text);
            titan_error_hint("a cell is STAGE TYPE MICROBATCH as torch writes it: 2F0, 3I1, 3W1, 1B0 (F, I, W, B; "
                             "SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD are skipped)");
            return TITAN_ERR_FORMAT;
        }
        if (kind == 0) continue;
        if (a.stage >= c->pp * c->v || a.stage % c->pp != r)
            return titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_schedule_csv = \"%s\": row %d, column "
                               "%d: %s: stage %d is not rank %d's (titan places stage s on rank s mod %d, %d stages "
                               "in all)", path, r + 1, column + 1, text, a.stage, r, c->pp, c->pp * c->v);
        if (c->n[r] == cap)
            return titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_schedule_csv = \"%s\": row %d, column "
                               "%d: more than %d actions (an F, an I and a W per stage and micro-batch)", path, r + 1,
                               column + 1, cap);
        a.stage /= c->pp;
        c->split |= a.op == TITAN_PP_I || a.op == TITAN_PP_W;
        c->col[r][c->n[r]] = column;
        c->acts[r][c->n[r]++] = a;
    }
    return TITAN_OK;
}

static titan_status parse(titan_pp_custom *c, const char *path, char *text) {
    int rows = 0;
    size_t len = strlen(text);
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r')) text[--len] = '\0'; /* a last newline */
    for (char *line = text, *next; line; line = next, rows++) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (rows >= c->pp)
            return titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_schedule_csv = \"%s\": row %d: more "
                               "rows than pipeline_parallel_degree %d (a row a rank)", path, rows + 1, c->pp);
        TITAN_TRY(parse_row(c, path, rows, line));
    }
    if (rows < c->pp)
        return titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_schedule_csv = \"%s\": %d rows for "
                           "pipeline_parallel_degree %d (a row a rank)", path, rows, c->pp);
    return TITAN_OK;
}

titan_status titan_pp_csv_load(const char *path, int pp, int v, int micro, titan_pp_custom **out) {
    *out = NULL;
    char *text = NULL;
    TITAN_TRY(slurp(path, &text));
    titan_pp_custom *c = custom_new(pp, v, micro);
    titan_status st = c ? parse(c, path, text) : titan_error(TITAN_ERR_NOMEM, "pipeline schedule csv: no memory");
    free(text);
    if (st == TITAN_OK) {
        st = titan_pp_schedule_verify(pp, v, 0, micro, c->acts, c->n, (const int *const *)c->col);
        if (st != TITAN_OK)
            titan_error_context("parallelism.pipeline_parallel_schedule_csv = \"%s\" (%d ranks x %d stages, %d "
                                "micro-batches)", path, pp, v, micro);
    }
    if (st != TITAN_OK) {
        titan_pp_csv_free(c);
        return st;
    }
    *out = c;
    return TITAN_OK;
}
