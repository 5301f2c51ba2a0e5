/* pipeline_schedule.c - pipeline schedules as lists of actions (see
 * pipeline_schedule.h for what each matches in PyTorch). */
#include "parallel/pipeline_schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "tensor/layout.h"

const char *titan_pp_schedule_name(titan_pp_schedule s) {
    switch (s) {
    case TITAN_PP_1F1B: return "1F1B";
    case TITAN_PP_GPIPE: return "GPipe";
    case TITAN_PP_INTERLEAVED_1F1B: return "Interleaved1F1B";
    case TITAN_PP_LOOPED_BFS: return "LoopedBFS";
    case TITAN_PP_INTERLEAVED_ZB: return "InterleavedZeroBubble";
    case TITAN_PP_CSV: return "CSV";
    case TITAN_PP_ZBV: return "ZBVZeroBubble";
    case TITAN_PP_DUALPIPEV: return "DualPipeV";
    }
    return "?";
}

int titan_pp_schedule_multi(titan_pp_schedule s) {
    return s == TITAN_PP_INTERLEAVED_1F1B || s == TITAN_PP_LOOPED_BFS || s == TITAN_PP_INTERLEAVED_ZB ||
           titan_pp_schedule_vshape(s);
}

int titan_pp_schedule_vshape(titan_pp_schedule s) { return s == TITAN_PP_ZBV || s == TITAN_PP_DUALPIPEV; }

int titan_pp_global_stage(int vshape, int pp, int r, int k) {
    titan_layout l = {.pp = pp, .pp_vshape = vshape}; /* all the placement reads */
    return titan_layout_rank_stage(&l, r, k);
}

int titan_pp_stage_rank(int vshape, int pp, int g) {
    titan_layout l = {.pp = pp, .pp_vshape = vshape};
    return titan_layout_stage_rank(&l, g);
}

static const titan_pp_custom *custom_schedule;

void titan_pp_schedule_set_custom(const titan_pp_custom *c) { custom_schedule = c; }

int titan_pp_schedule_split(titan_pp_schedule s) {
    if (s != TITAN_PP_CSV) return s == TITAN_PP_INTERLEAVED_ZB || titan_pp_schedule_vshape(s);
    TITAN_ASSERT(custom_schedule);
    return custom_schedule->split;
}

int titan_pp_schedule_count(titan_pp_schedule s, int v, int micro) {
    /* a CSV's: at most an F, an I and a W per (stage, micro-batch) once verified */
    return (titan_pp_schedule_split(s) || s == TITAN_PP_CSV ? 3 : 2) * v * micro;
}

titan_status titan_pp_schedule_check(titan_pp_schedule s, int pp, int v, int micro) {
    const char *name = titan_pp_schedule_name(s);
    if (s == TITAN_PP_CSV) return TITAN_OK; /* the stages a rank are the name's (titan_pipeline_split) */
    if (!titan_pp_schedule_multi(s) && v != 1)
        return titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_schedule = \"%s\" runs one stage a rank, "
                           "pipeline_parallel_layers_per_stage gives %d", name, v);
    if (titan_pp_schedule_multi(s) && v < 2)
        return titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_schedule = \"%s\" runs at least 2 stages a "
                           "rank, pipeline_parallel_layers_per_stage gives %d", name, v);
    if (titan_pp_schedule_vshape(s) && v != 2)
        return titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_schedule = \"%s\" runs 2 stages a rank "
                           "(a V), pipeline_parallel_layers_per_stage gives %d", name, v);
    if (s == TITAN_PP_DUALPIPEV && micro < 2 * pp)
        return titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_schedule = \"DualPipeV\": %d "
                           "micro-batches (local_batch_size / pipeline_parallel_microbatch_size), fewer than its %d "
                           "stages (torch's ScheduleDualPipeV needs at least one a stage)", micro, 2 * pp);
    int rounds = micro / pp > 1 ? micro / pp : 1;
    if ((s == TITAN_PP_INTERLEAVED_1F1B || s == TITAN_PP_INTERLEAVED_ZB) && micro % rounds != 0)
        return titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_schedule = \"%s\": %d "
                           "micro-batches (local_batch_size / pipeline_parallel_microbatch_size) are not a multiple "
                           "of the %d rounds (max(1, micro-batches / pipeline_parallel_degree %d))", name, micro,
                           rounds, pp);
    return TITAN_OK;
}

/* Interleaved zero bubble (ZB1P): interleaved's order with a warm-up of
 * pp - 1 - r forwards fewer, each backward an I, and the W of the oldest I
 * after each I once the rank has r of them in the steady state (torch's
 * _get_1f1b_rank_ops with enable_zero_bubble, num_1f1b_microbatches r). */
static int zero_bubble(int pp, int r, int v, int M, titan_pp_action *out) {
    int rounds = M / pp > 1 ? M / pp : 1, per = M / rounds;
    int warm = (v - 1) * per + (pp - 1 - r);
    if (warm > M * v) warm = M * v;
    int ops = M * v, n = 0, nb = 0, nw = 0;
    int *fmb = calloc((size_t)v * 3 + (size_t)ops, sizeof *fmb);
    TITAN_ASSERT(fmb);
    int *bmb = fmb + v, *wmb = bmb + v, *bstage = wmb + v; /* bstage: each I's stage, in order */
    for (int op = 0; op < ops + warm; op++) {
        if (op < ops) {
            int k = (op / per) % v;
            out[n++] = (titan_pp_action){k, fmb[k]++, TITAN_PP_F};
        }
        if (op < warm) continue;
        int k = v - 1 - ((op - warm) / per) % v;
        out[n++] = (titan_pp_action){k, bmb[k]++, TITAN_PP_I};
        bstage[nb++] = k;
        if (op - warm >= r) {
            k = bstage[nw++];
            out[n++] = (titan_pp_action){k, wmb[k]++, TITAN_PP_W};
        }
    }
    for (; nw < nb; nw++) {
        int k = bstage[nw];
        out[n++] = (titan_pp_action){k, wmb[k]++, TITAN_PP_W};
    }
    free(fmb);
    return n;
}

/* Interleaved 1F1B: the warm-up forwards, then forward-backward pairs, then
 * the cool-down backwards (torch's _get_1f1b_rank_ops, idle steps left out:
 * they only align a timeline, the receives here block instead). */
static int interleaved(int pp, int r, int v, int M, titan_pp_action *out) {
    int rounds = M / pp > 1 ? M / pp : 1, per = M / rounds;
    int warm = (v - 1) * per + 2 * (pp - 1 - r);
    if (warm > M * v) warm = M * v;
    int ops = M * v, n = 0;
    int *fmb = calloc((size_t)v * 2, sizeof *fmb), *bmb = fmb ? fmb + v : NULL;
    TITAN_ASSERT(fmb);
    for (int op = 0; op < ops + warm; op++) {
        if (op < ops) {
            int k = (op / per) % v;
            out[n++] = (titan_pp_action){k, fmb[k]++, TITAN_PP_F};
        }
        if (op >= warm) {
            int k = v - 1 - ((op - warm) / per) % v;
            out[n++] = (titan_pp_action){k, bmb[k]++, TITAN_PP_B};
        }
    }
    free(fmb);
    return n;
}

/* ZB-V (Qi et al. section 6; torch's ScheduleZBVZeroBubble): local
 * stage 0 is stage r, 1 is stage 2 pp - 1 - r. Warm-up 2 (pp - r) - 1
 * forwards of stage 0, r pairs F1 F0, pp - r triples F1 I1 W1; then F0 I0
 * W0 F1 I1 W1 until every forward is done; cool-down r pairs I0 I1, pp - r
 * pairs I0 W0, and the Ws left (stage 1's, then 0's). torch plans with
 * max(2 pp - 1, M) micro-batches and drops those past M; so does this. */
static int zbv_act(titan_pp_action *out, int n, int M, int k, int mb, int op) {
    if (mb < M) out[n++] = (titan_pp_action){k, mb, op};
    return n;
}

static int zbv(int pp, int r, int M, titan_pp_action *out) {
    int nm = M > 2 * pp - 1 ? M : 2 * pp - 1, n = 0;
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
#define ACT(k, mb, op) n = zbv_act(out, n, M, k, mb, op)
    for (int i = 0; i < 2 * (pp - r) - 1; i++) ACT(0, f0++, TITAN_PP_F);
    for (int i = 0; i < r; i++) {
        ACT(1, f1++, TITAN_PP_F);
        ACT(0, f0++, TITAN_PP_F);
    }
    for (int i = 0; i < pp - r; i++) {
        ACT(1, f1++, TITAN_PP_F);
        ACT(1, b1, TITAN_PP_I);
        ACT(1, b1++, TITAN_PP_W);
    }
    while (f1 < f0 || f0 < nm) {
        if (f0 < nm) ACT(0, f0++, TITAN_PP_F);
        ACT(0, b0, TITAN_PP_I);
        ACT(0, b0++, TITAN_PP_W);
        ACT(1, f1++, TITAN_PP_F);
        ACT(1, b1, TITAN_PP_I);
        ACT(1, b1++, TITAN_PP_W);
    }
    int w0 = b0, w1 = b1;
    for (int i = 0; i < r; i++) {
        ACT(0, b0++, TITAN_PP_I);
        ACT(1, b1++, TITAN_PP_I);
    }
    for (int i = 0; i < pp - r; i++) {
        ACT(0, b0++, TITAN_PP_I);
        ACT(0, w0++, TITAN_PP_W);
    }
    while (w1 < b1) ACT(1, w1++, TITAN_PP_W);
    while (w0 < b0) ACT(0, w0++, TITAN_PP_W);
#undef ACT
    return n;
}

/* DualPipeV's order under construction: per local stage the next
 * micro-batch of F and of backward (B or I), and the Is whose W is
 * pending (oldest first). */
typedef struct {
    titan_pp_action *out, *wq;
    int n, nq, head, f[2], b[2];
} dpv_list;

static void dpv_add(dpv_list *d, int k, int op) {
    if (op == TITAN_PP_F) {
        d->out[d->n++] = (titan_pp_action){k, d->f[k]++, op};
        return;
    }
    titan_pp_action a = {k, d->b[k]++, op};
    d->out[d->n++] = a;
    if (op == TITAN_PP_I) d->wq[d->nq++] = (titan_pp_action){k, a.mb, TITAN_PP_W};
}

static void dpv_weight(dpv_list *d) { /* the oldest pending W, if any */
    if (d->head < d->nq) d->out[d->n++] = d->wq[d->head++];
}

/* DualPipeV (DeepSeek-V3's DualPipe folded into a V; torch's
 * ScheduleDualPipeV): torch's eight steps, each overlapped forward and
 * backward pair (OVERLAP_F_B) run as the forward then the full backward,
 * as torch's runtime runs them. */
static int dualpipev(int pp, int r, int M, titan_pp_action *out) {
    titan_pp_action *wq = malloc((size_t)2 * M * sizeof *wq);
    TITAN_ASSERT(wq);
    dpv_list d = {.out = out, .wq = wq};
    for (int i = 0; i < 2 * (pp - r - 1); i++) dpv_add(&d, 0, TITAN_PP_F); /* 1: F0 */
    for (int i = 0; i < r + 1; i++) {                                     /* 2: F0 F1 */
        dpv_add(&d, 0, TITAN_PP_F);
        dpv_add(&d, 1, TITAN_PP_F);
    }
    for (int i = 0; i < pp - r - 1; i++) { /* 3: I1 W F1 */
        dpv_add(&d, 1, TITAN_PP_I);
        dpv_weight(&d);
        dpv_add(&d, 1, TITAN_PP_F);
    }
    for (int i = 0; i < M - 2 * pp + r + 1; i++) { /* 4: F0 B1, F1 B0 */
        dpv_add(&d, 0, TITAN_PP_F);
        dpv_add(&d, 1, TITAN_PP_B);
        dpv_add(&d, 1, TITAN_PP_F);
        dpv_add(&d, 0, TITAN_PP_B);
    }
    for (int i = 0; i < pp - r - 1; i++) { /* 5: B1, F1 B0 */
        dpv_add(&d, 1, TITAN_PP_B);
        dpv_add(&d, 1, TITAN_PP_F);
        dpv_add(&d, 0, TITAN_PP_B);
    }
    int zb = 0;
    for (int i = 0; i < r + 1; i++) { /* 6: B1 B0, the second half split */
        if (i == (r + 1) / 2 && r % 2 == 1) zb = 1;
        dpv_add(&d, 1, zb ? TITAN_PP_I : TITAN_PP_B);
        if (i == (r + 1) / 2 && r % 2 == 0) zb = 1;
        dpv_add(&d, 0, zb ? TITAN_PP_I : TITAN_PP_B);
    }
    for (int i = 0; i < pp - r - 1; i++) { /* 7: W B0 */
        dpv_weight(&d);
        dpv_add(&d, 0, zb ? TITAN_PP_I : TITAN_PP_B);
    }
    for (int i = 0; i < r + 1; i++) dpv_weight(&d); /* 8: W */
    free(wq);
    return d.n;
}

int titan_pp_schedule_actions(titan_pp_schedule s, int pp, int r, int v, int M, titan_pp_action *out) {
    int n = 0;
    switch (s) {
    case TITAN_PP_ZBV: return zbv(pp, r, M, out);
    case TITAN_PP_DUALPIPEV: return dualpipev(pp, r, M, out);
    case TITAN_PP_INTERLEAVED_1F1B: return interleaved(pp, r, v, M, out);
    case TITAN_PP_INTERLEAVED_ZB: return zero_bubble(pp, r, v, M, out);
    case TITAN_PP_CSV: {
        const titan_pp_custom *c = custom_schedule;
        TITAN_ASSERT(c && c->pp == pp && c->v == v && c->micro == M && r >= 0 && r < pp);
        memcpy(out, c->acts[r], (size_t)c->n[r] * sizeof *out);
        return c->n[r];
    }
    case TITAN_PP_LOOPED_BFS:
        for (int k = 0; k < v; k++)
            for (int mb = 0; mb < M; mb++) out[n++] = (titan_pp_action){k, mb, TITAN_PP_F};
        for (int k = v - 1; k >= 0; k--)
            for (int mb = M - 1; mb >= 0; mb--) out[n++] = (titan_pp_action){k, mb, TITAN_PP_B};
        return n;
    case TITAN_PP_1F1B:
    case TITAN_PP_GPIPE: break;
    }
    int warm = s == TITAN_PP_GPIPE ? M : pp - r - 1, f = 0, b = 0;
    if (warm > M) warm = M;
    for (; f < warm; f++) out[n++] = (titan_pp_action){0, f, TITAN_PP_F};
    for (; f < M; f++, b++) { /* 1F1B's steady state */
        out[n++] = (titan_pp_action){0, f, TITAN_PP_F};
        out[n++] = (titan_pp_action){0, b, TITAN_PP_B};
    }
    for (; b < M; b++) out[n++] = (titan_pp_action){0, b, TITAN_PP_B};
    return n;
}

int titan_pp_schedule_slots(titan_pp_schedule s, int pp, int r, int v, int M, int k) {
    titan_pp_action *a = malloc((size_t)titan_pp_schedule_count(s, v, M) * sizeof *a);
    unsigned char *busy = calloc((size_t)M, 1);
    TITAN_ASSERT(a && busy);
    int n = titan_pp_schedule_actions(s, pp, r, v, M, a), most = 0, now = 0;
    for (int i = 0; i < n; i++) {
        if (a[i].stage != k) continue;
        now += a[i].op == TITAN_PP_F ? 1 : a[i].op == TITAN_PP_I ? 0 : -1; /* a slot is free after B or W */
        if (now > most) most = now;
    }
    /* mb mod most must not meet a micro-batch still in flight: true for
     * backwards in forward order; otherwise one slot each. */
    for (int i = 0; i < n && most < M; i++) {
        if (a[i].stage != k || a[i].op == TITAN_PP_I) continue;
        int slot = a[i].mb % most, fwd = a[i].op == TITAN_PP_F;
        if (fwd && busy[slot]) most = M;
        busy[slot] = (unsigned char)fwd;
    }
    free(a);
    free(busy);
    return most > 0 ? most : 1;
}

int titan_pp_schedule_slots_total(titan_pp_schedule s, int pp, int r, int v, int M) {
    int sum = 0;
    for (int k = 0; k < v; k++) sum += titan_pp_schedule_slots(s, pp, r, v, M, k);
    return sum;
}

/* ---- verification ---------------------------------------------------- */

static const char op_letter[] = "FBIW";

/* "stage 3's I of micro-batch 1" style names, for messages. */
static void act_name(char *buf, size_t len, int g, const titan_pp_action *a) {
    snprintf(buf, len, "%d%c%d", g, op_letter[a->op], a->mb);
}

/* Per (global stage, micro-batch): how many F, B, I, W a rank's list has
 * had so far; bit flags of what has run in the simulation. */
typedef struct {
    int S, M, vshape;
    unsigned char *cnt; /* [S][M][4] */
    const int *const *col; /* a CSV's columns of the actions, NULL: indices */
} tally;

/* Where rank r's action i is: "rank R, action I", or a CSV's "row R,
 * column C" (1-based, as a spreadsheet shows them). */
static const char *where(const tally *t, int r, int i, char *buf, size_t len) {
    if (t->col) snprintf(buf, len, "row %d (rank %d), column %d", r + 1, r, t->col[r][i] + 1);
    else snprintf(buf, len, "rank %d, action %d", r, i);
    return buf;
}

static unsigned char *cnt_at(tally *t, int g, int mb, int op) { return &t->cnt[((size_t)g * t->M + mb) * 4 + op]; }

/* One list's actions in range and in order on their own rank. */
static titan_status check_list(tally *t, int pp, int v, int r, const titan_pp_action *a, int n) {
    char nm[48], at[64];
    for (int i = 0; i < n; i++) {
        if (a[i].stage < 0 || a[i].stage >= v || a[i].mb < 0 || a[i].mb >= t->M || a[i].op < 0 || a[i].op > 3)
            return titan_error(TITAN_ERR_USAGE, "pipeline schedule: %s: local stage %d, micro-batch %d out of "
                               "range (%d stages a rank, %d micro-batches)", where(t, r, i, at, sizeof at), a[i].stage,
                               a[i].mb, v, t->M);
        int g = titan_pp_global_stage(t->vshape, pp, r, a[i].stage), op = a[i].op;
        act_name(nm, sizeof nm, g, &a[i]);
        where(t, r, i, at, sizeof at);
        unsigned char *c = cnt_at(t, g, a[i].mb, 0);
        if (c[op])
            return titan_error(TITAN_ERR_USAGE, "pipeline schedule: %s (%s): micro-batch %d's %c on "
                               "stage %d a second time", at, nm, a[i].mb, op_letter[op], g);
        if (op != TITAN_PP_F && !c[TITAN_PP_F])
            return titan_error(TITAN_ERR_USAGE, "pipeline schedule: %s (%s): before the forward of "
                               "its micro-batch", at, nm);
        if (op == TITAN_PP_W && !c[TITAN_PP_I])
            return titan_error(TITAN_ERR_USAGE, "pipeline schedule: %s (%s): W before its I", at, nm);
        if ((op == TITAN_PP_B && c[TITAN_PP_I]) || (op == TITAN_PP_I && c[TITAN_PP_B]))
            return titan_error(TITAN_ERR_USAGE, "pipeline schedule: %s (%s): micro-batch %d of stage "
                               "%d has both B and I", at, nm, a[i].mb, g);
        c[op] = 1;
    }
    return TITAN_OK;
}

/* Every micro-batch of every stage done: F, and B or I and W. */
static titan_status check_complete(tally *t, int pp) {
    for (int g = 0; g < t->S; g++)
        for (int mb = 0; mb < t->M; mb++) {
            int r = titan_pp_stage_rank(t->vshape, pp, g);
            unsigned char *c = cnt_at(t, g, mb, 0);
            const char *miss = !c[TITAN_PP_F] ? "forward (F)"
                             : !c[TITAN_PP_B] && !c[TITAN_PP_I] ? "backward (B or I)"
                             : c[TITAN_PP_I] && !c[TITAN_PP_W] ? "weight backward (W)" : NULL;
            if (miss && t->col)
                return titan_error(TITAN_ERR_USAGE, "pipeline schedule: row %d (rank %d): micro-batch %d of stage %d "
                                   "left undone: no %s", r + 1, r, mb, g, miss);
            if (miss)
                return titan_error(TITAN_ERR_USAGE, "pipeline schedule: rank %d: micro-batch %d of stage %d left "
                                   "undone: no %s", r, mb, g, miss);
        }
    return TITAN_OK;
}

/* Whether rank r's action a can run now: its input is there (done: bit
 * 1 << op per (stage, mb), kept in cnt's slots as 2). */
static int ready(tally *t, int pp, int r, const titan_pp_action *a) {
    int g = titan_pp_global_stage(t->vshape, pp, r, a->stage);
    if (a->op == TITAN_PP_F) return g == 0 || *cnt_at(t, g - 1, a->mb, TITAN_PP_F) == 2;
    if (a->op == TITAN_PP_W) return 1; /* its I is earlier in the same list */
    if (g == t->S - 1) return 1;
    return *cnt_at(t, g + 1, a->mb, TITAN_PP_B) == 2 || *cnt_at(t, g + 1, a->mb, TITAN_PP_I) == 2;
}

static titan_status deadlock(tally *t, int pp, titan_pp_action *const *acts, const int *n, const int *pos) {
    char why[768], nm[48], at[64];
    size_t k = 0;
    for (int r = 0; r < pp && k + 96 < sizeof why; r++) {
        if (pos[r] >= n[r]) continue;
        const titan_pp_action *a = &acts[r][pos[r]];
        int g = titan_pp_global_stage(t->vshape, pp, r, a->stage);
        act_name(nm, sizeof nm, g, a);
        k += (size_t)snprintf(why + k, sizeof why - k, "%s%s (%s) waits for stage %d's %s", k ? "; " : "",
                              where(t, r, pos[r], at, sizeof at), nm, a->op == TITAN_PP_F ? g - 1 : g + 1,
                              a->op == TITAN_PP_F ? "forward" : "backward");
    }
    return titan_error(TITAN_ERR_USAGE, "pipeline schedule: deadlock: %s", why);
}

titan_status titan_pp_schedule_verify(int pp, int v, int vshape, int micro, titan_pp_action *const *acts,
                                      const int *n, const int *const *col) {
    tally t = {pp * v, micro, vshape, calloc((size_t)pp * v * micro * 4, 1), col};
    int *pos = calloc((size_t)pp, sizeof *pos);
    if (!t.cnt || !pos) {
        free(t.cnt);
        free(pos);
        return titan_error(TITAN_ERR_NOMEM, "pipeline schedule: no memory to check it");
    }
    titan_status st = TITAN_OK;
    for (int r = 0; r < pp && st == TITAN_OK; r++) st = check_list(&t, pp, v, r, acts[r], n[r]);
    if (st == TITAN_OK) st = check_complete(&t, pp);
    /* the simulation: cnt's 1s become 2 as the actions run */
    for (int moved = 1; st == TITAN_OK && moved;) {
        moved = 0;
        for (int r = 0; r < pp; r++)
            while (pos[r] < n[r] && ready(&t, pp, r, &acts[r][pos[r]])) {
                const titan_pp_action *a = &acts[r][pos[r]++];
                *cnt_at(&t, titan_pp_global_stage(vshape, pp, r, a->stage), a->mb, a->op) = 2;
                moved = 1;
            }
    }
    for (int r = 0; r < pp && st == TITAN_OK; r++)
        if (pos[r] < n[r]) st = deadlock(&t, pp, acts, n, pos);
    free(t.cnt);
    free(pos);
    return st;
}

/* ---- replay on a logical clock ------------------------------------- */

double titan_pp_schedule_replay(int pp, int v, int vshape, int micro, titan_pp_action *const *acts, const int *n,
                                const double *const *cost, double *busy) {
    int S = pp * v;
    double *end = malloc((size_t)S * micro * 4 * sizeof *end), *clock = calloc((size_t)pp, sizeof *clock);
    int *pos = calloc((size_t)pp, sizeof *pos);
    TITAN_ASSERT(end && clock && pos);
    for (size_t i = 0; i < (size_t)S * micro * 4; i++) end[i] = -1.0;
#define END(g, mb, op) end[((size_t)(g) * micro + (mb)) * 4 + (op)]
    double makespan = 0.0;
    for (int r = 0; r < pp; r++) busy[r] = 0.0;
    for (int moved = 1; moved;) {
        moved = 0;
        for (int r = 0; r < pp; r++)
            while (pos[r] < n[r]) {
                const titan_pp_action *a = &acts[r][pos[r]];
                int g = titan_pp_global_stage(vshape, pp, r, a->stage);
                double ready = 0.0;
                if (a->op == TITAN_PP_F && g > 0) ready = END(g - 1, a->mb, TITAN_PP_F);
                if ((a->op == TITAN_PP_B || a->op == TITAN_PP_I) && g < S - 1) {
                    double b = END(g + 1, a->mb, TITAN_PP_B), in = END(g + 1, a->mb, TITAN_PP_I);
                    ready = b > in ? b : in;
                }
                if (ready < 0.0) break; /* its input comes later */
                double c = cost ? cost[r][pos[r]] : a->op == TITAN_PP_B ? 2.0 : 1.0;
                double t0 = clock[r] > ready ? clock[r] : ready;
                clock[r] = END(g, a->mb, a->op) = t0 + c;
                busy[r] += c;
                if (clock[r] > makespan) makespan = clock[r];
                pos[r]++;
                moved = 1;
            }
    }
#undef END
    free(end);
    free(clock);
    free(pos);
    return makespan;
}

double titan_pp_schedule_bubble(titan_pp_schedule s, int pp, int r, int v, int micro) {
    int cap = titan_pp_schedule_count(s, v, micro);
    titan_pp_action *all = malloc((size_t)pp * cap * sizeof *all), **lists = malloc((size_t)pp * sizeof *lists);
    int *n = malloc((size_t)pp * sizeof *n);
    double *busy = malloc((size_t)pp * sizeof *busy);
    TITAN_ASSERT(all && lists && n && busy);
    for (int q = 0; q < pp; q++) {
        lists[q] = all + (size_t)q * cap;
        n[q] = titan_pp_schedule_actions(s, pp, q, v, micro, lists[q]);
    }
    double makespan = titan_pp_schedule_replay(pp, v, titan_pp_schedule_vshape(s), micro, lists, n, NULL, busy);
    double bubble = makespan > 0.0 ? 1.0 - busy[r] / makespan : 0.0;
    free(all);
    free(lists);
    free(n);
    free(busy);
    return bubble;
}
