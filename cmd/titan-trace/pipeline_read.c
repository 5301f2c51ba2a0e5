/* pipeline_read.c - pipeline traces read back (see pipeline_read.h). */
#include "pipeline_read.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"
#include "parallel/pipeline_schedule.h"

enum { MAX_RANKS = 4096 };

typedef struct {
    int world, pp_rank, steps, n;
    double measured, theory;
    titan_pp_action *acts;
    double *cost; /* each action's time less its blocked time, seconds */
    double *cpu;  /* its process CPU time outside the blocked time (-1: not recorded) */
    double *mean; /* its op's mean time over the pipeline's actions (equal stages) */
} rank_trace;

typedef struct {
    char schedule[64];
    int pp, v, vshape, micro;
} shape;

static int op_of(const char *s) {
    const char *p = s ? strchr("FBIW", s[0]) : NULL;
    return p && s[0] ? (int)(p - "FBIW") : -1;
}

/* One rank's file into *t (TITAN_ERR_FORMAT naming it when it is not one). */
static titan_status read_rank(const char *path, int world, rank_trace *t, shape *sh) {
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) return titan_error(TITAN_ERR_FORMAT, "%s: line %d: %s", path, jerr.line, jerr.text);
    json_t *pl = json_object_get(json_object_get(root, "otherData"), "pipeline");
    json_t *evs = json_object_get(root, "traceEvents");
    titan_status st = TITAN_OK;
    if (!json_is_object(pl) || !json_is_array(evs)) {
        json_decref(root);
        return titan_error(TITAN_ERR_FORMAT, "%s: not a pipeline trace (no otherData.pipeline)", path);
    }
    snprintf(sh->schedule, sizeof sh->schedule, "%s", json_string_value(json_object_get(pl, "schedule")) ?: "?");
    sh->pp = (int)json_integer_value(json_object_get(pl, "pp"));
    sh->v = (int)json_integer_value(json_object_get(pl, "stages_per_rank"));
    sh->micro = (int)json_integer_value(json_object_get(pl, "micro_batches"));
    const char *place = json_string_value(json_object_get(pl, "placement")); /* absent before the V */
    sh->vshape = place && !strcmp(place, "v");
    *t = (rank_trace){.world = world, .pp_rank = (int)json_integer_value(json_object_get(pl, "pp_rank")),
                      .steps = (int)json_integer_value(json_object_get(pl, "steps")),
                      .measured = json_number_value(json_object_get(pl, "bubble_measured")),
                      .theory = json_number_value(json_object_get(pl, "bubble_theory"))};
    size_t cap = json_array_size(evs), i;
    t->acts = calloc(cap ? cap : 1, sizeof *t->acts);
    t->cost = calloc(cap ? cap : 1, sizeof *t->cost);
    t->cpu = calloc(cap ? cap : 1, sizeof *t->cpu);
    t->mean = calloc(cap ? cap : 1, sizeof *t->mean);
    if (!t->acts || !t->cost || !t->cpu || !t->mean) st = titan_error(TITAN_ERR_NOMEM, "%s: out of memory", path);
    json_t *ev;
    json_array_foreach(evs, i, ev) {
        json_t *args = json_object_get(ev, "args");
        int op = op_of(json_string_value(json_object_get(args, "op")));
        if (st != TITAN_OK || op < 0) continue;
        int g = (int)json_integer_value(json_object_get(args, "stage"));
        int k = sh->vshape ? g != t->pp_rank : sh->pp > 0 ? g / sh->pp : 0; /* the local stage */
        t->acts[t->n] = (titan_pp_action){k,
                                          (int)json_integer_value(json_object_get(args, "micro_batch")), op};
        double c = json_number_value(json_object_get(ev, "dur")) * 1e-6 -
                   json_number_value(json_object_get(args, "blocked_ms")) * 1e-3;
        json_t *cpu = json_object_get(args, "cpu_ms"); /* absent in older traces */
        t->cpu[t->n] = json_is_number(cpu) ? fmax(json_number_value(cpu) * 1e-3, 0.0) : -1.0;
        t->cost[t->n++] = c > 0.0 ? c : 0.0;
    }
    json_decref(root);
    return st;
}

enum { WALL, CPU, EQUAL };

/* The replay's bubble per pp rank (out[pp]) with each action's wall time,
 * CPU time, or (EQUAL) its op's mean; 0 when some stage has no trace, or
 * (CPU) an action no CPU time. */
static int replay(rank_trace *t, int nt, const shape *sh, int which, double *out) {
    titan_pp_action **lists = calloc((size_t)sh->pp, sizeof *lists);
    const double **cost = calloc((size_t)sh->pp, sizeof *cost);
    int *n = calloc((size_t)sh->pp, sizeof *n), ok = lists && cost && n;
    double *busy = calloc((size_t)sh->pp, sizeof *busy);
    for (int i = nt - 1; ok && i >= 0; i--) /* the lowest world rank of each pp rank */
        if (t[i].pp_rank >= 0 && t[i].pp_rank < sh->pp) {
            lists[t[i].pp_rank] = t[i].acts;
            cost[t[i].pp_rank] = which == CPU ? t[i].cpu : which == EQUAL ? t[i].mean : t[i].cost;
            n[t[i].pp_rank] = t[i].n;
            for (int a = 0; which == CPU && a < t[i].n; a++) ok = ok && t[i].cpu[a] >= 0.0;
        }
    for (int r = 0; ok && r < sh->pp; r++) ok = lists[r] != NULL;
    ok = ok && busy && titan_pp_schedule_verify(sh->pp, sh->v, sh->vshape, sh->micro, lists, n, NULL) == TITAN_OK;
    if (ok) {
        double makespan = titan_pp_schedule_replay(sh->pp, sh->v, sh->vshape, sh->micro, lists, n, cost, busy);
        for (int r = 0; r < sh->pp; r++) out[r] = makespan > 0 ? 1.0 - busy[r] / makespan : 0.0;
    }
    titan_error_clear();
    free(lists);
    free(cost);
    free(n);
    free(busy);
    return ok;
}

/* Every action's mean (the mean of its op's CPU times over the pipeline's
 * ranks, wall times where one has none) into t[].mean: the replay of equal
 * stages with the measured ratios of F, I, W and B. */
static void op_means(rank_trace *t, int nt) {
    double sum[4] = {0}, n[4] = {0};
    int cpu = 1;
    for (int i = 0; i < nt; i++)
        for (int a = 0; a < t[i].n; a++) cpu = cpu && t[i].cpu[a] >= 0.0;
    for (int i = 0; i < nt; i++)
        for (int a = 0; a < t[i].n; a++) sum[t[i].acts[a].op] += cpu ? t[i].cpu[a] : t[i].cost[a], n[t[i].acts[a].op]++;
    for (int i = 0; i < nt; i++)
        for (int a = 0; a < t[i].n; a++) t[i].mean[a] = sum[t[i].acts[a].op] / n[t[i].acts[a].op];
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of the costs of rank trace t's actions of local stage k and
 * op (wall, or cpu: its CPU times); -1 when none. */
static double median(const rank_trace *t, int k, int op, int cpu, double *tmp) {
    int m = 0;
    for (int i = 0; i < t->n; i++)
        if (t->acts[i].stage == k && t->acts[i].op == op) tmp[m++] = cpu ? t->cpu[i] : t->cost[i];
    if (m == 0 || (cpu && tmp[0] < 0.0)) return -1.0;
    qsort(tmp, (size_t)m, sizeof *tmp, by_value);
    return m % 2 ? tmp[m / 2] : 0.5 * (tmp[m / 2 - 1] + tmp[m / 2]);
}

/* Each stage's action times of the last step (the medians over its
 * micro-batches, ms: wall less blocked, then CPU) and each pp rank's sums:
 * what makes one rank's bubble differ from another's. */
static void stage_table(const rank_trace *t, int nt, const shape *sh, FILE *out) {
    int n = 0;
    for (int i = 0; i < nt; i++) n = t[i].n > n ? t[i].n : n;
    double *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
    if (!tmp) return;
    fprintf(out, "  stage  pp rank       F ms (CPU)       I ms (CPU)       W ms (CPU)       B ms (CPU)  (medians over "
                 "the last step's micro-batches; wall less blocked)\n");
    for (int g = 0; g < sh->pp * sh->v; g++)
        for (int i = 0; i < nt; i++) {
            int k = 0, r = t[i].pp_rank;
            while (k < sh->v && titan_pp_global_stage(sh->vshape, sh->pp, r, k) != g) k++;
            if (k == sh->v || (i > 0 && t[i - 1].pp_rank == r)) continue; /* the lowest world rank of each */
            fprintf(out, "  %5d  %7d", g, r);
            for (int op = 0; op < 4; op++) {
                static const int order[4] = {TITAN_PP_F, TITAN_PP_I, TITAN_PP_W, TITAN_PP_B};
                double w = median(&t[i], k, order[op], 0, tmp), c = median(&t[i], k, order[op], 1, tmp);
                char cell[40] = "-";
                if (w >= 0.0 && c >= 0.0) snprintf(cell, sizeof cell, "%.1f (%.1f)", 1e3 * w, 1e3 * c);
                else if (w >= 0.0) snprintf(cell, sizeof cell, "%.1f", 1e3 * w);
                fprintf(out, "  %15s", cell);
            }
            fputc('\n', out);
        }
    for (int i = 0; i < nt; i++) {
        if (i > 0 && t[i - 1].pp_rank == t[i].pp_rank) continue;
        double w = 0.0, c = 0.0;
        for (int a = 0; a < t[i].n; a++) w += t[i].cost[a], c += t[i].cpu[a];
        fprintf(out, "  pp rank %d: %.1f ms computing in the last step", t[i].pp_rank, 1e3 * w);
        if (t[i].n && t[i].cpu[0] >= 0.0) fprintf(out, " (%.1f ms CPU)", 1e3 * c);
        fputc('\n', out);
    }
    free(tmp);
}

titan_status titan_pipeline_summary(const char *run_dir, FILE *out, int *found) {
    *found = 0;
    rank_trace *t = calloc(MAX_RANKS, sizeof *t);
    if (!t) return titan_error(TITAN_ERR_NOMEM, "pipeline traces: out of memory");
    shape sh = {"", 0, 0, 0, 0};
    titan_status st = TITAN_OK;
    int nt = 0;
    for (int w = 0; w < MAX_RANKS && st == TITAN_OK; w++) {
        char path[4300];
        snprintf(path, sizeof path, "%s/pipeline_traces/rank%d_trace.json", run_dir, w);
        if (!titan_fs_exists(path)) break;
        st = read_rank(path, w, &t[nt], &sh);
        if (st == TITAN_OK) nt++;
    }
    double *rep = st == TITAN_OK && nt && sh.pp > 0 ? calloc((size_t)2 * sh.pp, sizeof *rep) : NULL;
    int have_replay = rep && replay(t, nt, &sh, WALL, rep), have_cpu = rep && replay(t, nt, &sh, CPU, rep + sh.pp);
    if (st == TITAN_OK && nt) {
        fprintf(out, "pipeline: %s, pp %d x %d stage%s a rank, %d micro-batches (%s/pipeline_traces)\n", sh.schedule,
                sh.pp, sh.v, sh.v == 1 ? "" : "s", sh.micro, run_dir);
        fprintf(out, "  rank  pp rank  bubble: measured (steps)  replay of the last step: wall times  CPU times  "
                     "theory (F=I=W=1, B=2)\n");
        for (int i = 0; i < nt; i++) {
            char replayed[32] = "-", on_cpu[32] = "-";
            if (have_replay) snprintf(replayed, sizeof replayed, "%.1f%%", 100.0 * rep[t[i].pp_rank]);
            if (have_cpu) snprintf(on_cpu, sizeof on_cpu, "%.1f%%", 100.0 * rep[sh.pp + t[i].pp_rank]);
            fprintf(out, "  %4d  %7d  %13.1f%% (%5d)  %35s  %9s  %21.1f%%\n", t[i].world, t[i].pp_rank,
                    100.0 * t[i].measured, t[i].steps, replayed, on_cpu, 100.0 * t[i].theory);
        }
        if (sh.pp > 0 && sh.v > 0) stage_table(t, nt, &sh, out);
        double *eq = have_replay ? calloc((size_t)sh.pp, sizeof *eq) : NULL;
        op_means(t, nt);
        if (eq && replay(t, nt, &sh, EQUAL, eq)) {
            fprintf(out, "  replay with each op's mean %s time on every stage (equal stages), by pp rank:",
                     have_cpu ? "CPU" : "wall");
            for (int r = 0; r < sh.pp; r++) fprintf(out, " %.1f%%", 100.0 * eq[r]);
            fputc('\n', out);
        }
        free(eq);
        *found = nt;
    }
    for (int i = 0; i < nt; i++) free(t[i].acts), free(t[i].cost), free(t[i].cpu), free(t[i].mean);
    free(t);
    free(rep);
    return st;
}
