/* pipeline_schedule.c - pipeline schedules as lists of actions (see
 * pipeline_schedule.h for what each matches in PyTorch). */
#include "parallel/pipeline_schedule.h"

#include <stdlib.h>

#include "core/mem.h"

const char *titan_pp_schedule_name(titan_pp_schedule s) {
    switch (s) {
    case TITAN_PP_1F1B: return "1F1B";
    case TITAN_PP_GPIPE: return "GPipe";
    case TITAN_PP_INTERLEAVED_1F1B: return "Interleaved1F1B";
    case TITAN_PP_LOOPED_BFS: return "LoopedBFS";
    }
    return "?";
}

int titan_pp_schedule_multi(titan_pp_schedule s) {
    return s == TITAN_PP_INTERLEAVED_1F1B || s == TITAN_PP_LOOPED_BFS;
}

titan_status titan_pp_schedule_check(titan_pp_schedule s, int pp, int v, int micro) {
    const char *name = titan_pp_schedule_name(s);
    if (!titan_pp_schedule_multi(s) && v != 1)
        return titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_schedule = \"%s\" runs one stage a rank, "
                           "pipeline_parallel_layers_per_stage gives %d", name, v);
    if (titan_pp_schedule_multi(s) && v < 2)
        return titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_schedule = \"%s\" runs at least 2 stages a "
                           "rank, pipeline_parallel_layers_per_stage gives %d", name, v);
    int rounds = micro / pp > 1 ? micro / pp : 1;
    if (s == TITAN_PP_INTERLEAVED_1F1B && micro % rounds != 0)
        return titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_schedule = \"Interleaved1F1B\": %d "
                           "micro-batches (local_batch_size / pipeline_parallel_microbatch_size) are not a multiple "
                           "of the %d rounds (max(1, micro-batches / pipeline_parallel_degree %d))", micro, rounds, pp);
    return TITAN_OK;
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
            out[n++] = (titan_pp_action){k, fmb[k]++, 0};
        }
        if (op >= warm) {
            int k = v - 1 - ((op - warm) / per) % v;
            out[n++] = (titan_pp_action){k, bmb[k]++, 1};
        }
    }
    free(fmb);
    return n;
}

int titan_pp_schedule_actions(titan_pp_schedule s, int pp, int r, int v, int M, titan_pp_action *out) {
    int n = 0;
    switch (s) {
    case TITAN_PP_INTERLEAVED_1F1B: return interleaved(pp, r, v, M, out);
    case TITAN_PP_LOOPED_BFS:
        for (int k = 0; k < v; k++)
            for (int mb = 0; mb < M; mb++) out[n++] = (titan_pp_action){k, mb, 0};
        for (int k = v - 1; k >= 0; k--)
            for (int mb = M - 1; mb >= 0; mb--) out[n++] = (titan_pp_action){k, mb, 1};
        return n;
    case TITAN_PP_1F1B:
    case TITAN_PP_GPIPE: break;
    }
    int warm = s == TITAN_PP_GPIPE ? M : pp - r - 1, f = 0, b = 0;
    if (warm > M) warm = M;
    for (; f < warm; f++) out[n++] = (titan_pp_action){0, f, 0};
    for (; f < M; f++, b++) { /* 1F1B's steady state */
        out[n++] = (titan_pp_action){0, f, 0};
        out[n++] = (titan_pp_action){0, b, 1};
    }
    for (; b < M; b++) out[n++] = (titan_pp_action){0, b, 1};
    return n;
}

int titan_pp_schedule_slots(titan_pp_schedule s, int pp, int r, int v, int M, int k) {
    titan_pp_action *a = malloc((size_t)2 * v * M * sizeof *a);
    unsigned char *busy = calloc((size_t)M, 1);
    TITAN_ASSERT(a && busy);
    int n = titan_pp_schedule_actions(s, pp, r, v, M, a), most = 0, now = 0;
    for (int i = 0; i < n; i++) {
        if (a[i].stage != k) continue;
        now += a[i].backward ? -1 : 1;
        if (now > most) most = now;
    }
    /* mb mod most must not meet a micro-batch still in flight: true for
     * backwards in forward order; otherwise one slot each. */
    for (int i = 0; i < n && most < M; i++) {
        if (a[i].stage != k) continue;
        int slot = a[i].mb % most;
        if (!a[i].backward && busy[slot]) most = M;
        busy[slot] = !a[i].backward;
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
