/* test_pipeline.c - the pipeline schedules (lib/parallel/pipeline.c) against one process.
 *
 *   test_pipeline                        run alone: jobs of 2 and 4 ranks of itself
 *   test_pipeline --suite pipeline LAYOUT   one rank of a job (parallel_test.h)
 *
 * Each rank is one stage of a 4-layer model (pp 2 or 4; with pp 2 also
 * times dp_shard 2, FSDP, and dp_replicate 2, DDP) and runs what train.c
 * runs: zero_grads, ACC local batches of M micro-batches through
 * titan_pipeline_step (1F1B and GPipe, the real schedule code, stage to
 * stage over the mesh's pp communicators) at scale 1/ACC/M, sync on the
 * last, then fsdp's sync_grads. Compared with one process, which runs the
 * whole model (no stages, no hooks) over the same micro-batches in order:
 *
 *   gradients  of every stage's parameters (this rank's shard of them)
 *              bitwise: the stages chained give the whole model's gradients
 *              bit for bit (test_model_pp.c), the schedules run backwards in
 *              micro-batch order, and the dp ranks' gradients are averaged
 *              in the layout's order (as test_fsdp.c does); every element of
 *              the model is compared, on some rank, dp_replicate times;
 *   loss       the last stage's, bitwise (the mean of the micro-batches'
 *              losses, added in double), 0 on the other stages; also
 *              titan_pipeline_eval's.
 *
 * A micro-batch's backward dropped (or run twice) on any stage changes
 * that stage's gradients and fails here, whatever the losses do. Also:
 * schedule names and slot counts, and two steps in a row (params_updated
 * between) giving the same bits. */
#include "parallel_test.h"

#include "core/rng.h"
#include "parallel/fsdp.h"
#include "parallel/pipeline.h"

enum { B = 1, T = 8, N = B * T, M = 4 /* micro-batches */, ACC = 2, NL = 6, NB = NL + 2, VOCAB = 53, MAXDP = 2 };

static uint32_t token(int which, int d, int a, int i) {
    return (uint32_t)(titan_rng_u64(61, (uint64_t)which, (uint64_t)((d * ACC + a) * M * N + i)) % VOCAB);
}

/* dp rank d's local batch a: M micro-batches of B x T */
static void batch(int d, int a, uint32_t *tok, uint32_t *tgt) {
    for (int i = 0; i < M * N; i++) tok[i] = token(1, d, a, i), tgt[i] = token(2, d, a, i);
}

typedef struct {
    titan_llama_config c;
    int ng;
    titan_param *gcat;
    size_t np;
    float *P, *avg;
    float *avg_rev; /* the micro-batches' backwards in reverse order (LoopedBFS's) */
    double loss[MAXDP][ACC]; /* as the pipeline reports it: mean over the micro-batches */
    double eval[MAXDP];      /* forward only, batch 0 */
} ref;

static void ref_make(ref *r, const titan_layout *l) {
    memset(r, 0, sizeof *r);
    r->c = tiny_config(NL, 4, 2, VOCAB, 0);
    r->ng = titan_llama_params(&r->c, NULL);
    r->gcat = xalloc((size_t)r->ng * sizeof *r->gcat);
    titan_llama_params(&r->c, r->gcat);
    r->np = titan_llama_num_params(&r->c);
    r->P = xalloc(r->np * sizeof(float));
    titan_llama_init_weights(&r->c, r->P, 3141);
    titan_llama *w = NULL;
    if (titan_llama_create(&w, &r->c, titan_backend_cpu(), B, T, TITAN_AC_NONE, TITAN_DTYPE_F32) != TITAN_OK) {
        fprintf(stderr, "whole model: %s\n", titan_error_message());
        exit(1);
    }
    memcpy(titan_llama_params_data(w), r->P, r->np * sizeof(float));
    int R = l->dp_replicate, S = l->dp_shard, dp = R * S;
    float *g[MAXDP], *grev[MAXDP];
    uint32_t tok[M * N], tgt[M * N];
    float scale = (1.0f / ACC) / (float)M; /* train.c's */
    for (int d = 0; d < dp; d++) {
        titan_llama_zero_grads(w);
        for (int a = 0; a < ACC; a++) {
            batch(d, a, tok, tgt);
            double sum = 0;
            for (int i = 0; i < M; i++) {
                float lo;
                CHECK(titan_llama_forward_train(w, tok + i * N, tgt + i * N, scale, &lo) == TITAN_OK);
                titan_llama_backward(w, scale);
                sum += lo;
            }
            r->loss[d][a] = sum / M;
        }
        g[d] = xalloc(r->np * sizeof(float));
        memcpy(g[d], titan_llama_grads_data(w), r->np * sizeof(float));
        titan_llama_zero_grads(w);
        for (int a = 0; a < ACC; a++) {
            batch(d, a, tok, tgt);
            for (int i = M - 1; i >= 0; i--) {
                float lo;
                CHECK(titan_llama_forward_train(w, tok + i * N, tgt + i * N, scale, &lo) == TITAN_OK);
                titan_llama_backward(w, scale);
            }
        }
        grev[d] = xalloc(r->np * sizeof(float));
        memcpy(grev[d], titan_llama_grads_data(w), r->np * sizeof(float));
        batch(d, 0, tok, tgt);
        double sum = 0;
        for (int i = 0; i < M; i++) {
            float lo;
            CHECK(titan_llama_forward(w, tok + i * N, tgt + i * N, &lo) == TITAN_OK);
            sum += lo;
        }
        r->eval[d] = sum / M;
    }
    r->avg = xalloc(r->np * sizeof(float));
    layout_average(g, R, S, r->np, r->avg);
    r->avg_rev = xalloc(r->np * sizeof(float));
    layout_average(grev, R, S, r->np, r->avg_rev);
    check_grads_nonzero(r->avg, r->gcat, r->ng);
    for (int d = 0; d < dp; d++) free(g[d]), free(grev[d]);
    titan_llama_free(w);
}

static void ref_free(ref *r) { free(r->gcat), free(r->P), free(r->avg), free(r->avg_rev); }

typedef struct {
    titan_pp_schedule sched;
    int reshard;
} variant;

/* Stage models, fsdp and pipeline as train.c makes them; two steps compared. */
static void run_variant(titan_mesh *m, const ref *r, const variant *v) {
    titan_layout *l = &m->layout;
    /* the split as titan_pipeline_split makes it: 2 stages a rank for the
     * multi-stage schedules */
    l->pp_v = titan_pp_schedule_multi(v->sched) ? 2 : 1;
    l->pp_first_less = l->pp_last_less = 1;
    l->pp_vshape = titan_pp_schedule_vshape(v->sched); /* the V's last stage is rank 0's */
    titan_layout_format(l, m->layout_str, sizeof m->layout_str);
    int sharded = m->shard_comm != NULL, stage = m->pp_rank;
    int last = stage == titan_layout_stage_rank(l, titan_layout_stages(l) - 1);
    const float *want = v->sched == TITAN_PP_LOOPED_BFS ? r->avg_rev : r->avg;
    titan_llama_options mo = {.flags = sharded ? TITAN_LLAMA_RELEASABLE : 0, .pp_size = l->pp, .pp_stage = stage,
                              .pp_v = l->pp_v, .pp_first_less = 1, .pp_last_less = 1, .pp_vshape = l->pp_vshape,
                              .slots = titan_pipeline_slots(v->sched, l->pp, stage, l->pp_v, M),
                              .split_backward = titan_pp_schedule_split(v->sched)};
    titan_llama *mdl = NULL;
    if (titan_llama_create_ex(&mdl, &r->c, titan_backend_cpu(), B, T, TITAN_AC_NONE, TITAN_DTYPE_F32, &mo) != TITAN_OK) {
        CHECK(0, "stage %d of %d", stage, l->pp);
        return;
    }
    int units[NB];
    titan_fsdp_options fo = {0};
    CHECK(titan_fsdp_parse_plan("auto", NB, sharded, units, &fo) == TITAN_OK);
    fo.reshard_after_forward = v->reshard;
    titan_fsdp *f = NULL;
    titan_pipeline *p = NULL;
    CHECK(titan_fsdp_create(&f, m, mdl, &fo) == TITAN_OK, "fsdp_create");
    CHECK(titan_pipeline_create(&p, m, mdl, v->sched, M, B, T) == TITAN_OK, "pipeline_create");
    if (!f || !p) exit(1);
    fsdp_load_whole(f, r->P, r->gcat, r->ng);
    const titan_shard_piece *pc = titan_fsdp_pieces(f);
    uint32_t tok[M * N], tgt[M * N];
    size_t bad = 0, compared = 0;
    double maxd = 0;
    int loss_bad = 0;
    for (int k = 0; k < 2; k++) {
        CHECK(titan_fsdp_zero_grads(f) == TITAN_OK);
        for (int a = 0; a < ACC; a++) {
            double lo = NAN;
            batch(m->dp_rank, a, tok, tgt);
            CHECK(titan_pipeline_step(p, tok, tgt, (1.0f / ACC) / (float)M, a == ACC - 1, f, &lo) == TITAN_OK,
                  "pipeline_step");
            loss_bad += !(lo == (last ? r->loss[m->dp_rank][a] : 0.0));
        }
        CHECK(titan_fsdp_sync_grads(f) == TITAN_OK, "sync_grads");
        const float *sg = titan_fsdp_grads(f);
        compared = 0;
        for (int i = 0; i < r->ng; i++) {
            size_t g = piece_flat_off(pc, r->gcat, i);
            bad += count_diff(sg + pc[i].shard_off, want + g, pc[i].len, &maxd);
            compared += pc[i].len;
        }
        CHECK(titan_fsdp_params_updated(f) == TITAN_OK);
    }
    double ev = NAN;
    batch(m->dp_rank, 0, tok, tgt);
    CHECK(titan_pipeline_eval(p, tok, tgt, &ev) == TITAN_OK, "eval");
    CHECK(ev == (last ? r->eval[m->dp_rank] : 0.0), "stage %d: eval loss %.9g, one process %.9g", stage, ev,
          r->eval[m->dp_rank]);
    CHECK(titan_pipeline_take_wait_s(p) >= 0 && titan_pipeline_take_wait_s(p) == 0);
    const char *sn = titan_pp_schedule_name(v->sched);
    CHECK(bad == 0, "%s, %s, stage %d, dp rank %d: %zu gradient elements differ from one process's (max %.3g)",
          m->layout_str, sn, stage, m->dp_rank, bad, maxd);
    CHECK(loss_bad == 0, "%s, %s, stage %d: %d losses differ", m->layout_str, sn, stage, loss_bad);
    double all_compared = 0, all_bad = 0;
    CHECK(titan_comm_sum_double(m->world_comm, (double)compared, &all_compared) == TITAN_OK);
    CHECK(titan_comm_sum_double(m->world_comm, (double)bad + loss_bad, &all_bad) == TITAN_OK);
    CHECK(all_compared == (double)r->np * l->dp_replicate, "%.0f elements compared over the ranks, want %zu x %d",
          all_compared, r->np, l->dp_replicate);
    if (m->rank == 0)
        printf("  %d ranks, %s, %s, M %d, %d accumulated%s: gradients of every stage (%.0f elements, 2 steps) and "
               "losses (train and eval) %s one process's%s\n",
               m->world, m->layout_str, sn, M, ACC, sharded ? (v->reshard ? ", reshard 1" : ", reshard 0") : "",
               all_compared, all_bad == 0 ? "bitwise equal to" : "DIFFER FROM",
               v->sched == TITAN_PP_LOOPED_BFS ? " (backwards in reverse micro-batch order)" : "");
    titan_pipeline_free(p);
    titan_fsdp_free(f);
    titan_llama_free(mdl);
}

/* The action lists against torch's, written out by hand from
 * schedules.py's formulas (global stage s = rank + k x pp, or the V's, "sFm"
 * a forward of micro-batch m, "sBm" a backward). */
static void check_order(titan_pp_schedule sc, int pp, int r, int v, int micro, const char *want) {
    titan_pp_action a[96];
    int n = titan_pp_schedule_actions(sc, pp, r, v, micro, a);
    char got[1024] = "";
    size_t k = 0;
    for (int i = 0; i < n && k < sizeof got; i++)
        k += (size_t)snprintf(got + k, sizeof got - k, "%s%d%c%d", i ? " " : "",
                              titan_pp_global_stage(titan_pp_schedule_vshape(sc), pp, r, a[i].stage),
                              "FBIW"[a[i].op], a[i].mb);
    int full = n == titan_pp_schedule_count(sc, v, micro) || sc == TITAN_PP_DUALPIPEV; /* its Bs count one */
    CHECK(full && !strcmp(got, want), "%s pp %d rank %d v %d M %d:\n  got  %s\n  want %s",
          titan_pp_schedule_name(sc), pp, r, v, micro, got, want);
}

/* titan_pp_schedule_verify: every built-in schedule passes on pp 2..6, v
 * 2..3 (1 for the single-stage ones), M 1..12; hand-broken lists fail
 * with the row and the cause. */
static void check_verify(void) {
    static const titan_pp_schedule all[] = {TITAN_PP_1F1B, TITAN_PP_GPIPE, TITAN_PP_INTERLEAVED_1F1B,
                                            TITAN_PP_LOOPED_BFS, TITAN_PP_INTERLEAVED_ZB, TITAN_PP_ZBV,
                                            TITAN_PP_DUALPIPEV};
    enum { PPMAX = 6, CAP = 3 * 3 * 12 };
    static titan_pp_action buf[PPMAX][CAP];
    titan_pp_action *acts[PPMAX];
    int cnt[PPMAX], checked = 0;
    for (int r = 0; r < PPMAX; r++) acts[r] = buf[r];
    for (size_t s = 0; s < sizeof all / sizeof all[0]; s++)
        for (int pp = 2; pp <= PPMAX; pp++)
            for (int v = 1; v <= 3; v++)
                for (int micro = 1; micro <= 12; micro++) {
                    if (titan_pp_schedule_check(all[s], pp, v, micro) != TITAN_OK) continue;
                    for (int r = 0; r < pp; r++) cnt[r] = titan_pp_schedule_actions(all[s], pp, r, v, micro, acts[r]);
                    titan_status st = titan_pp_schedule_verify(pp, v, titan_pp_schedule_vshape(all[s]), micro, acts,
                                                               cnt, NULL);
                    CHECK(st == TITAN_OK, "%s pp %d v %d M %d", titan_pp_schedule_name(all[s]), pp, v, micro);
                    checked++;
                }
    titan_error_clear();
    CHECK(checked > 200, "%d schedules verified", checked);
    /* pp 2, M 2: rank 0 "0F0 0B0 0F1 0B1", rank 1 "1F1 1B1 1F0 1B0": rank
     * 0's B0 waits for rank 1's, which comes after 1F1, which waits for 0F1,
     * which comes after 0B0 */
    titan_pp_action r0[] = {{0, 0, TITAN_PP_F}, {0, 0, TITAN_PP_B}, {0, 1, TITAN_PP_F}, {0, 1, TITAN_PP_B}};
    titan_pp_action r1[] = {{0, 1, TITAN_PP_F}, {0, 1, TITAN_PP_B}, {0, 0, TITAN_PP_F}, {0, 0, TITAN_PP_B}};
    titan_pp_action *two[] = {r0, r1};
    int n2[] = {4, 4};
    CHECK(titan_pp_schedule_verify(2, 1, 0, 2, two, n2, NULL) == TITAN_ERR_USAGE && has("deadlock") &&
              has("rank 0, action 1 (0B0) waits for stage 1's backward") && has("rank 1, action 0 (1F1)"),
          "deadlock named");
    n2[1] = 3; /* rank 1 leaves micro-batch 1's backward out */
    r1[0] = (titan_pp_action){0, 0, TITAN_PP_F};
    r1[1] = (titan_pp_action){0, 0, TITAN_PP_B};
    r1[2] = (titan_pp_action){0, 1, TITAN_PP_F};
    CHECK(titan_pp_schedule_verify(2, 1, 0, 2, two, n2, NULL) == TITAN_ERR_USAGE && has("micro-batch 1 of stage 1 left undone"),
          "missing backward named");
    n2[1] = 4;
    r1[3] = (titan_pp_action){0, 1, TITAN_PP_F}; /* micro-batch 1's forward again */
    CHECK(titan_pp_schedule_verify(2, 1, 0, 2, two, n2, NULL) == TITAN_ERR_USAGE && has("rank 1, action 3") &&
              has("a second time"), "twice named");
    titan_pp_action w0[] = {{0, 0, TITAN_PP_F}, {0, 0, TITAN_PP_W}};
    titan_pp_action *one[] = {w0, w0};
    int n1[] = {2, 2};
    CHECK(titan_pp_schedule_verify(2, 1, 0, 1, one, n1, NULL) == TITAN_ERR_USAGE && has("rank 0, action 1 (0W0): W before its I"),
          "W before I named");
    titan_error_clear();
}

/* The logical-clock replay: 1F1B's bubble is (P - 1) / (M + P - 1) on
 * every rank (F 1, B 2); GPipe's the same; the interleaved and zero-bubble
 * schedules below it, InterleavedZeroBubble's at most half of 1F1B's on
 * pp 4 with 8 micro-batches (the bar). */
static void check_bubbles(void) {
    for (int r = 0; r < 4; r++) {
        double one = titan_pp_schedule_bubble(TITAN_PP_1F1B, 4, r, 1, 8);
        CHECK(fabs(one - 3.0 / 11.0) < 1e-12, "1F1B pp 4 M 8 rank %d: bubble %.4f, want 3/11", r, one);
        CHECK(fabs(titan_pp_schedule_bubble(TITAN_PP_GPIPE, 4, r, 1, 8) - 3.0 / 11.0) < 1e-12);
        double il = titan_pp_schedule_bubble(TITAN_PP_INTERLEAVED_1F1B, 4, r, 2, 8);
        double zb = titan_pp_schedule_bubble(TITAN_PP_INTERLEAVED_ZB, 4, r, 2, 8);
        CHECK(il < one && zb <= one / 2, "pp 4 M 8 rank %d: 1F1B %.4f, Interleaved1F1B %.4f, ZB1P %.4f", r, one, il,
              zb);
        double zbv = titan_pp_schedule_bubble(TITAN_PP_ZBV, 4, r, 2, 8);
        double dpv = titan_pp_schedule_bubble(TITAN_PP_DUALPIPEV, 4, r, 2, 8);
        CHECK(zbv <= one / 2 && dpv < one, "pp 4 M 8 rank %d: 1F1B %.4f, ZBV %.4f, DualPipeV %.4f", r, one, zbv, dpv);
    }
}

static void check_schedules(void) {
    for (int st = 0; st < 4; st++) {
        CHECK(titan_pipeline_slots(TITAN_PP_1F1B, 4, st, 1, 8) == 4 - st, "1F1B slots, stage %d of 4", st);
        CHECK(titan_pipeline_slots(TITAN_PP_1F1B, 4, st, 1, 2) == (4 - st < 2 ? 4 - st : 2));
        CHECK(titan_pipeline_slots(TITAN_PP_GPIPE, 4, st, 1, 8) == 8, "GPipe slots");
        CHECK(titan_pipeline_slots(TITAN_PP_LOOPED_BFS, 4, st, 2, 8) == 16, "LoopedBFS slots");
    }
    check_order(TITAN_PP_1F1B, 2, 0, 1, 3, "0F0 0F1 0B0 0F2 0B1 0B2");
    check_order(TITAN_PP_INTERLEAVED_1F1B, 2, 0, 2, 4,
                "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3");
    check_order(TITAN_PP_INTERLEAVED_1F1B, 2, 1, 2, 4,
                "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3");
    check_order(TITAN_PP_LOOPED_BFS, 2, 1, 2, 2, "1F0 1F1 3F0 3F1 3B1 3B0 1B1 1B0");
    /* ZB1P: what PyTorch 2.11's ScheduleInterleavedZeroBubble.
     * _calculate_single_rank_operations gives (its None steps left out) */
    check_order(TITAN_PP_INTERLEAVED_ZB, 2, 0, 2, 4,
                "0F0 0F1 2F0 2F1 2I0 2W0 0F2 2I1 2W1 0F3 0I0 0W0 2F2 0I1 0W1 2F3 2I2 2W2 2I3 2W3 0I2 0W2 0I3 0W3");
    check_order(TITAN_PP_INTERLEAVED_ZB, 2, 1, 2, 4,
                "1F0 1F1 3F0 3I0 3F1 3I1 3W0 1F2 1I0 3W1 1F3 1I1 1W0 3F2 3I2 1W1 3F3 3I3 3W2 1I2 3W3 1I3 1W2 1W3");
    check_order(TITAN_PP_INTERLEAVED_ZB, 4, 1, 2, 8,
                "1F0 1F1 1F2 1F3 5F0 5F1 5F2 5I0 5F3 5I1 5W0 1F4 5I2 5W1 1F5 5I3 5W2 1F6 1I0 5W3 1F7 1I1 1W0 5F4 "
                "1I2 1W1 5F5 1I3 1W2 5F6 5I4 1W3 5F7 5I5 5W4 5I6 5W5 5I7 5W6 1I4 5W7 1I5 1W4 1I6 1W5 1I7 1W6 1W7");
    /* ZB-V and DualPipeV (V placement: rank r holds stages r and 2 pp - 1 -
     * r): what PyTorch 2.11's ScheduleZBVZeroBubble and ScheduleDualPipeV
     * ._calculate_single_rank_operations give (None steps left out,
     * DualPipeV's OVERLAP_F_B as its forward then its backward) */
    check_order(TITAN_PP_ZBV, 2, 0, 2, 4,
                "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 3W3 0I2 0W2 0I3 0W3");
    check_order(TITAN_PP_ZBV, 2, 1, 2, 4,
                "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 1I2 2I3 1I3 1W2 2W3 1W3");
    check_order(TITAN_PP_ZBV, 4, 1, 2, 8,
                "1F0 1F1 1F2 1F3 1F4 6F0 1F5 6F1 6I0 6W0 6F2 6I1 6W1 6F3 6I2 6W2 1F6 1I0 1W0 6F4 6I3 6W3 1F7 1I1 1W1 "
                "6F5 6I4 6W4 1I2 1W2 6F6 6I5 6W5 1I3 1W3 6F7 6I6 6W6 1I4 6I7 1I5 1W4 1I6 1W5 1I7 1W6 6W7 1W7");
    check_order(TITAN_PP_ZBV, 4, 3, 2, 3, "3F0 4F0 3F1 4F1 3F2 4F2 4I0 4W0 3I0 3W0 4I1 4W1 3I1 3W1 4I2 4W2 3I2 3W2");
    check_order(TITAN_PP_DUALPIPEV, 2, 0, 2, 4,
                "0F0 0F1 0F2 3F0 3I0 3W0 3F1 0F3 3B1 3F2 0B0 3B2 3F3 0B1 3B3 0I2 0W2 0I3 0W3");
    check_order(TITAN_PP_DUALPIPEV, 2, 1, 2, 4, "1F0 2F0 1F1 2F1 1F2 2B0 2F2 1B0 1F3 2B1 2F3 1B1 2B2 1B2 2I3 1I3 2W3 1W3");
    check_order(TITAN_PP_DUALPIPEV, 4, 2, 2, 8,
                "2F0 2F1 2F2 5F0 2F3 5F1 2F4 5F2 5I0 5W0 5F3 2F5 5B1 5F4 2B0 2F6 5B2 5F5 2B1 2F7 5B3 5F6 2B2 5B4 5F7 "
                "2B3 5B5 2B4 5B6 2I5 5I7 2I6 2W5 2I7 5W7 2W6 2W7");
    check_order(TITAN_PP_DUALPIPEV, 4, 1, 2, 9,
                "1F0 1F1 1F2 1F3 1F4 6F0 1F5 6F1 6I0 6W0 6F2 6I1 6W1 6F3 1F6 6B2 6F4 1B0 1F7 6B3 6F5 1B1 1F8 6B4 6F6 "
                "1B2 6B5 6F7 1B3 6B6 6F8 1B4 6B7 1B5 6I8 1I6 6W8 1I7 1W6 1I8 1W7 1W8");
    CHECK(titan_pp_schedule_check(TITAN_PP_DUALPIPEV, 4, 2, 7) == TITAN_ERR_USAGE, "DualPipeV: M < 2 pp refused");
    CHECK(titan_pp_schedule_check(TITAN_PP_ZBV, 2, 3, 4) == TITAN_ERR_USAGE, "ZBV: 3 stages a rank refused");
    titan_error_clear();
    /* ZB1P's stage 0 slots: a micro-batch holds its slot until its W */
    CHECK(titan_pp_schedule_slots(TITAN_PP_INTERLEAVED_ZB, 2, 0, 2, 4, 0) == 4);
    check_verify();
    check_bubbles();
    /* interleaved, pp 2 rank 0: at most 4 of stage 0's micro-batches in flight */
    CHECK(titan_pp_schedule_slots(TITAN_PP_INTERLEAVED_1F1B, 2, 0, 2, 4, 0) == 4);
    /* 9 micro-batches over pp 4: 2 rounds, 9 not a multiple (torch refuses it too) */
    CHECK(titan_pp_schedule_check(TITAN_PP_INTERLEAVED_1F1B, 4, 2, 9) == TITAN_ERR_USAGE);
    titan_error_clear();
}

static int run(const titan_layout *l) {
    titan_mesh m;
    if (!mesh_join(l, &m)) return 1;
    if (m.rank == 0) check_schedules();
    ref r;
    ref_make(&r, l);
    static const variant vs[] = {{TITAN_PP_1F1B, 0},       {TITAN_PP_GPIPE, 0},          {TITAN_PP_INTERLEAVED_1F1B, 0},
                                 {TITAN_PP_LOOPED_BFS, 0}, {TITAN_PP_INTERLEAVED_ZB, 0},
                                 {TITAN_PP_ZBV, 0},        {TITAN_PP_DUALPIPEV, 0},
                                 {TITAN_PP_INTERLEAVED_1F1B, 1}, {TITAN_PP_1F1B, 1}, {TITAN_PP_INTERLEAVED_ZB, 1},
                                 {TITAN_PP_ZBV, 1}};
    int nv = m.shard_comm ? 11 : 7;
    for (int i = 0; i < nv; i++)
        if (titan_pp_schedule_check(vs[i].sched, l->pp, 2, M) == TITAN_OK || !titan_pp_schedule_multi(vs[i].sched))
            run_variant(&m, &r, &vs[i]);
    titan_error_clear();
    ref_free(&r);
    titan_mesh_free(&m);
    return 0;
}

int main(int argc, char **argv) {
    static const parallel_job jobs[] = {
        {2, "pp=2,pp_v=2"},
        {4, "pp=4,pp_v=2"},
        {4, "pp=2,pp_v=2,dp_shard=2"},
        {4, "pp=2,pp_v=2,dp_replicate=2"},
    };
    return parallel_main(argc, argv, "test_pipeline", "pipeline", run, jobs, (int)(sizeof jobs / sizeof *jobs));
}
