/* test_model_cp.c - the context-parallel model against the whole model.
 *
 *   test_model_cp                run alone: a job of 2 ranks of itself, then one of 4
 *   test_model_cp --suite cp     one rank of a job (what the launcher starts)
 *
 * Every rank builds the whole model and a context-parallel one over all the
 * job's ranks from the same weights, gives the whole model every sequence
 * and the cp model its two chunks of each (tensor/layout.h's split), runs
 * two accumulated micro-batches through both and checks: the ranks' mean
 * loss against the whole model's, the ranks' averaged gradients against the
 * whole model's (each rank's are d(its mean loss), so their average is
 * d(the mean over every token)), and the logits of a forward without
 * targets against the whole model's rows at the rank's positions. Every
 * activation checkpointing mode must give the bits of none under cp. Also
 * on the cpu-guard backend (the device path: keys and values gathered
 * through host mirrors), in bf16, composed with the tied head, with the
 * ring (rotate method "alltoall": every AC mode too, bit for bit; bf16's
 * logits further from the whole model's, 2.5e-3 against 2e-5, as each
 * block's output is rounded before the merge), and the refusal of a
 * sequence that does not split into 2 x cp chunks; with either rotate
 * method the model holds what the plan says, allocated once. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/rng.h"
#include "comm/bootstrap.h"
#include "comm/comm.h"
#include "comm/spawn.h"
#include "model/llama.h"
#include "tensor/layout.h"

#include "check.h"
#include "model_test.h"
#include "shm_probe.h"

enum { B = 2, T = 16, N = B * T, NMB = 2 /* micro-batches, accumulated */, VOCAB = 41 };

/* Tolerances (model_test.h's TOL_*). fp32: a chunk's attention rows are the whole call's (the
 * kernel's key tiles start at key 0 either way); the rest differs from the
 * whole model only in how sums group: each rank adds its tokens' share of a
 * parameter gradient, then the ranks' shares are added (measured: loss
 * 6e-8, gradients 3e-7, logits 2e-7). bf16: the key and value gradients are
 * rounded to bf16 on each rank before the sum over ranks, and the gradients
 * once per rank before the average, as under tp (test_model_tp.c's bounds). */

static int me, nr;  /* rank, ranks */
static int cp_ring; /* the cpu models with the ring (rotate method "alltoall") */
static titan_comm *world;

static titan_llama *create(const titan_backend *be, const titan_llama_config *c, titan_ac_mode ac, titan_dtype dt,
                           titan_comm *cp) {
    titan_llama *m = NULL;
    titan_llama_options o = {.cp = model_group_of(cp, be), .cp_ring = cp_ring && cp};
    titan_status st = titan_llama_create_ex(&m, c, be, B, T, ac, dt, &o);
    if (st != TITAN_OK) {
        fprintf(stderr, "FAIL rank %d: create (cp %d, ac %d, %s): %s\n", me, cp ? nr : 1, ac, titan_dtype_name(dt),
                titan_error_message());
        exit(1); /* the launcher stops the other ranks */
    }
    return m;
}

/* Zero the gradients, then NMB micro-batches of forward_train + backward at
 * scale 1/NMB; the losses into loss[NMB]. */
static void train_step(titan_llama *m, const uint32_t *tok, const uint32_t *tgt, int n, float *loss) {
    titan_llama_zero_grads(m);
    for (int k = 0; k < NMB; k++) {
        loss[k] = NAN;
        CHECK(titan_llama_forward_train(m, tok + k * n, tgt + k * n, 1.0f / NMB, &loss[k]) == TITAN_OK,
              "forward_train: %s", titan_error_message());
        titan_llama_backward(m, 1.0f / NMB);
        CHECK(titan_llama_take_error(m) == TITAN_OK, "backward: cp failure");
    }
}

/* The rank's two chunks of each of the nseq sequences of whole into local. */
static void chunks_of(const uint32_t *whole, uint32_t *local, int nseq) {
    int chunk[2], len = T / (2 * nr);
    titan_layout_cp_chunks(T, nr, me, chunk);
    for (int b = 0; b < nseq; b++)
        for (int j = 0; j < 2; j++)
            memcpy(local + ((size_t)b * 2 + j) * len, whole + (size_t)b * T + chunk[j], (size_t)len * sizeof *local);
}

static const titan_ac_mode ac_modes[] = {TITAN_AC_NONE, TITAN_AC_FULL, TITAN_AC_OP, 2};
enum { NAC = sizeof ac_modes / sizeof ac_modes[0] };

static void run_case(const titan_backend *be, int tied, titan_dtype dt) {
    titan_llama_config c = tiny_config(3, 4, 2, VOCAB, tied);
    int f32 = dt == TITAN_DTYPE_F32, NL = N / nr;
    size_t np = titan_llama_num_params(&c);
    float *P = xalloc(np * sizeof(float));
    titan_llama_init_weights(&c, P, 777 + (uint64_t)tied);
    titan_llama *whole = create(titan_backend_cpu(), &c, TITAN_AC_NONE, dt, NULL);
    memcpy(titan_llama_params_data(whole), P, np * sizeof(float));
    int nac = be == titan_backend_cpu() ? NAC : 1;
    titan_llama *cpm[NAC];
    for (int a = 0; a < nac; a++) {
        cpm[a] = create(be, &c, ac_modes[a], dt, world);
        be->to_device(titan_llama_params_data(cpm[a]), P, np * sizeof(float));
    }
    CHECK(titan_llama_params_count(cpm[0]) == np, "cp keeps every parameter");

    uint32_t tok[NMB * N], tgt[NMB * N], ltok[NMB * N], ltgt[NMB * N];
    for (int i = 0; i < NMB * N; i++) { /* the same on every rank */
        tok[i] = (uint32_t)(titan_rng_u64(55, 1, (uint64_t)i) % VOCAB);
        tgt[i] = (uint32_t)(titan_rng_u64(55, 2, (uint64_t)i) % VOCAB);
    }
    chunks_of(tok, ltok, NMB * B);
    chunks_of(tgt, ltgt, NMB * B);

    float lw[NMB], lc[NAC][NMB];
    train_step(whole, tok, tgt, N, lw);
    for (int a = 0; a < nac; a++) train_step(cpm[a], ltok, ltgt, NL, lc[a]);
    /* the keys' and values' collectives block: their time is the model's exposed communication */
    CHECK(titan_llama_take_comm_s(whole) == 0.0, "the whole model counts communication");
    CHECK(titan_llama_take_comm_s(cpm[0]) > 0.0, "the cp collectives' time is not counted");
    CHECK(titan_llama_take_comm_s(cpm[0]) == 0.0, "take_comm_s does not reset");

    /* the mean over ranks of their mean losses is the whole mean (equal token counts) */
    double loss_err = 0;
    for (int k = 0; k < NMB; k++) {
        double sum = 0;
        CHECK(titan_comm_sum_double(world, lc[0][k], &sum) == TITAN_OK);
        loss_err = fmax(loss_err, fabs(sum / nr - lw[k]) / fabs(lw[k]));
        for (int a = 1; a < nac; a++)
            CHECK(memcmp(&lc[a][k], &lc[0][k], sizeof(float)) == 0, "AC %d micro-batch %d: loss %.9g vs %.9g",
                  ac_modes[a], k, (double)lc[a][k], (double)lc[0][k]);
    }
    CHECK(loss_err <= (f32 ? TOL_LOSS_F32 : TOL_LOSS_BF16), "mean loss vs whole %.9g: relative %.3g", (double)lw[0],
          loss_err);

    /* gradients: AC bitwise; the average over ranks is the whole model's */
    float *g = xalloc(np * sizeof(float)), *ga = xalloc(np * sizeof(float));
    be->to_host(g, titan_llama_grads_data(cpm[0]), np * sizeof(float));
    for (int a = 1; a < nac; a++) {
        be->to_host(ga, titan_llama_grads_data(cpm[a]), np * sizeof(float));
        CHECK(memcmp(ga, g, np * sizeof(float)) == 0, "AC %d under cp: gradients differ from AC none's",
              ac_modes[a]);
    }
    CHECK(titan_comm_all_reduce(world, g, g, np, TITAN_DTYPE_F32, TITAN_COMM_AVG, NULL) == TITAN_OK);
    int ng;
    const titan_param *cat = titan_llama_catalog(whole, &ng);
    const float *gw = titan_llama_grads_data(whole);
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < ng; i++) {
        double e = norm_max_err(g + cat[i].offset, gw + cat[i].offset, cat[i].numel);
        CHECK(e <= (f32 ? TOL_GRAD_F32 : TOL_GRAD_BF16), "%s: gradient normalised max error %.3g", cat[i].name, e);
        if (e > worst) worst = e, worst_name = cat[i].name;
    }

    /* forward without targets: the whole logits' rows at the rank's positions */
    CHECK(titan_llama_forward(whole, tok, NULL, NULL) == TITAN_OK, "forward without targets");
    CHECK(titan_llama_forward(cpm[0], ltok, NULL, NULL) == TITAN_OK, "cp forward without targets");
    float *lgw = xalloc((size_t)N * VOCAB * sizeof(float)), *lgc = xalloc((size_t)NL * VOCAB * sizeof(float));
    float *rows = xalloc((size_t)NL * VOCAB * sizeof(float));
    CHECK(titan_llama_logits_host(whole, lgw) == TITAN_OK && titan_llama_logits_host(cpm[0], lgc) == TITAN_OK);
    int chunk[2], len = T / (2 * nr);
    titan_layout_cp_chunks(T, nr, me, chunk);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < 2; j++)
            memcpy(rows + ((size_t)b * 2 + j) * len * VOCAB, lgw + ((size_t)b * T + chunk[j]) * VOCAB,
                   (size_t)len * VOCAB * sizeof(float));
    double logit_err = norm_max_err(lgc, rows, (size_t)NL * VOCAB);
    CHECK(logit_err <= (f32 ? TOL_LOGIT_F32 : TOL_LOGIT_BF16), "logits: normalised max error %.3g", logit_err);

    worst = max_over_ranks(world, worst);
    logit_err = max_over_ranks(world, logit_err);
    if (me == 0) {
        printf("  cp %d%s, %s, %s, %s, 2 micro-batches of %d x %d: loss %.7f rel err %.2g; gradients normalised max "
               "err %.2g (rank 0's worst: %s); logits %.2g%s\n",
               nr, cp_ring ? " ring" : "", be->name, tied ? "tied" : "untied", titan_dtype_name(dt), B, T,
               (double)lw[0], loss_err, worst,
               worst_name, logit_err, nac > 1 ? "; AC full, op, every 2nd bitwise equal" : "");
        fflush(stdout);
    }
    free(lgw), free(lgc), free(rows), free(g), free(ga), free(P);
    for (int a = 0; a < nac; a++) titan_llama_free(cpm[a]);
    titan_llama_free(whole);
}

/* A sequence that does not split into 2 x cp chunks: refused on every rank
 * before any collective. */
static void test_refusals(void) {
    titan_llama_config c = tiny_config(2, 4, 2, VOCAB, 0);
    static char sentinel;
    titan_llama *m = (titan_llama *)(void *)&sentinel; /* create must set NULL on refusal */
    titan_llama_options o = {.cp = model_group_of(world, titan_backend_cpu())};
    int bad = 2 * nr + 2; /* not a multiple of 2 x nr */
    CHECK(titan_llama_create_ex(&m, &c, titan_backend_cpu(), B, bad, TITAN_AC_NONE, TITAN_DTYPE_F32, &o) ==
                  TITAN_ERR_USAGE && !m && has("does not split into 2 x"),
          "cp %d with T %d", nr, bad);
    if (me == 0) printf("  cp %d refuses a sequence of %d tokens\n", nr, bad);
}

/* The model under cp allocates its rotate method's buffers only, once:
 * the cpu allocator's peak while it is created is what it holds after,
 * and that is the plan's (titan_llama_plan_memory: parameters, gradients,
 * the compute copy, the arena and the cp buffers; the ring's window is
 * the shm communicator's host memory, not the backend's). */
static void test_memory(titan_dtype dt) {
    const titan_backend *be = titan_backend_cpu();
    titan_llama_config c = tiny_config(3, 4, 2, VOCAB, 0);
    size_t before = 0, after = 0, peak = 0;
    be->memory(&before, NULL, NULL, 1);
    titan_llama *m = create(be, &c, TITAN_AC_NONE, dt, world);
    be->memory(&after, &peak, NULL, 0);
    titan_group places = {.rank = me, .size = nr};
    titan_llama_options o = {.cp = &places, .cp_ring = cp_ring};
    titan_llama_memory mm;
    CHECK(titan_llama_plan_memory(&c, B, T, TITAN_AC_NONE, dt, &o, 1, &mm) == TITAN_OK, "plan: %s",
          titan_error_message());
    size_t plan = 2 * mm.params_bytes + mm.compute_copy_bytes + mm.arena_bytes + mm.cp_bytes;
    CHECK(after - before == plan, "cp%s %s: the model holds %zu bytes, the plan %zu", cp_ring ? " ring" : "",
          titan_dtype_name(dt), after - before, plan);
    CHECK(peak == after, "cp%s %s: %zu bytes at the peak of create, %zu held after", cp_ring ? " ring" : "",
          titan_dtype_name(dt), peak - before, after - before);
    CHECK(mm.cp_reserve_bytes == (cp_ring ? 0 : (size_t)B * T * c.n_kv_heads * (c.dim / c.n_heads) *
                                                    titan_dtype_size(dt)),
          "cp%s: a reserve of %zu bytes planned", cp_ring ? " ring" : "", mm.cp_reserve_bytes);
    titan_llama_free(m);
    if (me == 0)
        printf("  cp %d%s, %s: %zu bytes held, the plan's, none more while created (cp buffers %zu)\n", nr,
               cp_ring ? " ring" : "", titan_dtype_name(dt), after - before, mm.cp_bytes);
}

static int run_rank(titan_comm *w, int rank, int ranks) {
    world = w, me = rank, nr = ranks;
    titan_backend_cpu_set_threads(1);
    double t0 = titan_now_s();
    test_refusals();
    test_memory(TITAN_DTYPE_F32);
    test_memory(TITAN_DTYPE_BF16);
    run_case(titan_backend_cpu(), 0, TITAN_DTYPE_F32);
    run_case(titan_backend_cpu(), 1, TITAN_DTYPE_F32);
    run_case(titan_backend_cpu(), 0, TITAN_DTYPE_BF16);
    run_case(titan_backend_cpu_guard(), 0, TITAN_DTYPE_F32);
    cp_ring = 1; /* the ring: keys and values published before q's projection and the layer's backward */
    test_memory(TITAN_DTYPE_F32);
    test_memory(TITAN_DTYPE_BF16);
    run_case(titan_backend_cpu(), 0, TITAN_DTYPE_F32);
    run_case(titan_backend_cpu(), 1, TITAN_DTYPE_F32);
    run_case(titan_backend_cpu(), 0, TITAN_DTYPE_BF16);
    cp_ring = 0;
    if (failures) fprintf(stderr, "rank %d of %d: %d failure(s)\n", me, nr, failures);
    else if (me == 0) printf("  cp %d: ok (%.2f s)\n", nr, titan_now_s() - t0);
    free_groups();
    return failures != 0;
}

int main(int argc, char **argv) { return rank_jobs_main(argc, argv, "test_model_cp", "cp", run_rank); }
