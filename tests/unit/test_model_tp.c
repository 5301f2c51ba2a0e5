/* test_model_tp.c - the tensor-parallel model against the whole model, tensor by tensor.
 *
 *   test_model_tp                run alone: a job of 2 ranks of itself, then one of 4
 *   test_model_tp --suite tp     one rank of a job (what the launcher starts)
 *
 * Every rank builds the whole model and a tensor-parallel one over all the
 * job's ranks from the same full weights (the tp model gets its rank's piece
 * of each tensor, cut by tensor/layout.h's rule), runs two accumulated
 * micro-batches through both, and checks the tp model's loss, every local
 * gradient against the matching slice of the whole model's gradient, and
 * the logits of a forward without targets. Activation checkpointing under
 * tp must give bitwise the gradients of no checkpointing under tp; the loss
 * and the replicated tensors' gradients must be the same bits on every rank. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

enum { B = 2, T = 12, N = B * T, NMB = 2 /* micro-batches, accumulated */ };

/* Tolerances (model_test.h's TOL_*). fp32: the tp model adds the same products in another order
 * (partial sums over each rank's heads, hidden units or vocabulary, then
 * over the ranks), so only rounding separates it from the whole model
 * (measured: gradients 5e-7, loss 1e-7, logits 3e-7).
 * bf16: every tp_sum adds partial results that were each rounded to bf16
 * (8 significant bits, relative 2^-9) where the whole model rounds the full
 * sum once, and the layers carry those roundings into the gradients: the tp
 * model lies about as far from the whole bf16 model (measured 1.3e-2) as
 * the whole bf16 model lies from the whole fp32 one (1.5e-2), and the logits
 * about one bf16 ulp of the largest (2^-8, measured 3.8e-3). So: the
 * gradients within 5e-2 (test_model_grad's bound for bf16 against fp32),
 * and against fp32 the tp bf16 gradients at most twice as far off as the
 * whole bf16 model's (measured ratio 1.3). */

static int me, nr; /* rank, ranks */
static titan_comm *world;

/* GQA: 2 query heads and 1 kv head per rank; hidden 112: 56 or 28 per rank. */
static titan_llama_config tiny(int tied, int vocab) { return tiny_config(3, 2 * nr, nr, vocab, tied); }

/* ---- the rank's piece of a tensor ------------------------------------------------------- */

/* Copies this rank's piece of global tensor g (in src, the whole model's
 * flat layout) into dst (dense, local shape l): rows [off, off + len) for
 * tp dim 0, columns for dim 1, all of it for replicated tensors. Checks
 * the local shape against the split. */
static void take_piece(const titan_param *g, const titan_param *l, const float *src, float *dst) {
    int d = g->place.tp_dim;
    const float *s = src + g->offset;
    if (d < 0) {
        CHECK(l->numel == g->numel && l->shape[0] == g->shape[0], "%s: replicated, local shape %lld", g->name,
              (long long)l->shape[0]);
        memcpy(dst, s, g->numel * sizeof(float));
        return;
    }
    int64_t off, len, rows = g->shape[0], cols = g->shape[1];
    titan_layout_chunk(g->shape[d], nr, me, &off, &len);
    if (d == 0) {
        CHECK(l->shape[0] == len && l->shape[1] == cols, "%s: local %lld x %lld, split %lld x %lld", g->name,
              (long long)l->shape[0], (long long)l->shape[1], (long long)len, (long long)cols);
        memcpy(dst, s + off * cols, (size_t)(len * cols) * sizeof(float));
    } else {
        CHECK(l->shape[0] == rows && l->shape[1] == len, "%s: local %lld x %lld, split %lld x %lld", g->name,
              (long long)l->shape[0], (long long)l->shape[1], (long long)rows, (long long)len);
        for (int64_t r = 0; r < rows; r++)
            memcpy(dst + r * len, s + r * cols + off, (size_t)len * sizeof(float));
    }
}

/* The catalog of the tp model against the layout's tp box of every tensor. */
static void check_catalog(titan_llama *m, const titan_llama_config *c, const titan_param *gcat, int ng) {
    titan_llama_tp tp = titan_llama_get_tp(m);
    CHECK(tp.size == nr && tp.rank == me, "get_tp {%d, %d}", tp.size, tp.rank);
    int n = 0;
    const titan_param *cat = titan_llama_catalog(m, &n);
    CHECK(n == ng, "catalog of %d tensors, whole model %d", n, ng);
    titan_layout lay = {.dp_replicate = 1, .dp_shard = 1, .cp = 1, .tp = nr, .pp = 1};
    size_t off = 0;
    int bad = 0;
    for (int i = 0; i < n && i < ng; i++) {
        const titan_param *p = &cat[i];
        titan_box box;
        int writes = -1;
        int got = titan_layout_box(&lay, c->n_layers, gcat[i].place, gcat[i].ndim, gcat[i].shape, me, &box, &writes);
        int ok = got && strcmp(p->name, gcat[i].name) == 0 && p->ndim == gcat[i].ndim && p->offset == off &&
                 box.ndim == p->ndim;
        size_t numel = 1;
        for (int k = 0; ok && k < p->ndim; k++) {
            ok = box.size[k] == p->shape[k];
            numel *= (size_t)p->shape[k];
        }
        ok = ok && numel == p->numel && writes == (p->place.tp_dim >= 0 || me == 0);
        if (!ok && bad++ < 3)
            CHECK(0, "catalog %s: local %lld x %lld at %zu, layout box %lld x %lld (got %d)", p->name,
                  (long long)p->shape[0], (long long)p->shape[1], p->offset, (long long)box.size[0],
                  (long long)box.size[1], got);
        off += p->numel;
    }
    CHECK(off == titan_llama_params_count(m), "catalog covers %zu of %zu parameters", off,
          titan_llama_params_count(m));
    int64_t v0, nv;
    titan_llama_tp_vocab(c, tp, &v0, &nv);
    int64_t eo, el;
    titan_layout_chunk(c->vocab_size, nr, me, &eo, &el);
    CHECK(cat[0].shape[0] == nv && v0 == eo && nv == el, "vocabulary rows [%lld, +%lld)", (long long)v0,
          (long long)nv);
}

/* ---- one case ---------------------------------------------------------------------------- */

/* 1: the tp models use sequence parallelism (llama.h) */
static int use_sp;

static titan_llama *create(const titan_llama_config *c, titan_ac_mode ac, titan_dtype dt, titan_comm *tp) {
    titan_llama *m = NULL;
    titan_llama_options o = {.tp = model_group_of(tp, titan_backend_cpu()), .sequence_parallel = tp ? use_sp : 0};
    titan_status st = titan_llama_create_ex(&m, c, titan_backend_cpu(), B, T, ac, dt, &o);
    if (st != TITAN_OK) {
        fprintf(stderr, "FAIL rank %d: create (tp %d, ac %d, %s): %s\n", me, tp ? nr : 1, ac,
                titan_dtype_name(dt), titan_error_message());
        exit(1); /* the launcher stops the other ranks */
    }
    return m;
}

/* Zero the gradients, then NMB micro-batches of forward_train + backward at
 * scale 1/NMB; the losses into loss[NMB]. */
static void train_step(titan_llama *m, const uint32_t *tok, const uint32_t *tgt, float *loss) {
    titan_llama_zero_grads(m);
    for (int k = 0; k < NMB; k++) {
        loss[k] = NAN;
        CHECK(titan_llama_forward_train(m, tok + k * N, tgt + k * N, 1.0f / NMB, &loss[k]) == TITAN_OK,
              "forward_train");
        titan_llama_backward(m, 1.0f / NMB);
        CHECK(titan_llama_take_error(m) == TITAN_OK, "backward: tp failure");
    }
}

static const titan_ac_mode ac_modes[] = {TITAN_AC_NONE, TITAN_AC_FULL, TITAN_AC_OP, 2};
enum { NAC = sizeof ac_modes / sizeof ac_modes[0] };

static void run_case(int tied, int vocab, titan_dtype dt) {
    titan_llama_config c = tiny(tied, vocab);
    int f32 = dt == TITAN_DTYPE_F32;
    int ng = titan_llama_params(&c, NULL);
    titan_param *gcat = xalloc((size_t)ng * sizeof *gcat);
    titan_llama_params(&c, gcat);
    size_t np = titan_llama_num_params(&c);
    float *P = xalloc(np * sizeof(float));
    titan_llama_init_weights(&c, P, 1234 + (uint64_t)vocab + (uint64_t)tied);

    /* the whole model in dt, and in fp32 for scale when dt is bf16 */
    titan_llama *whole = create(&c, TITAN_AC_NONE, dt, NULL), *ref32 = NULL;
    memcpy(titan_llama_params_data(whole), P, np * sizeof(float));
    if (!f32) {
        ref32 = create(&c, TITAN_AC_NONE, TITAN_DTYPE_F32, NULL);
        memcpy(titan_llama_params_data(ref32), P, np * sizeof(float));
    }
    titan_llama *tpm[NAC];
    for (int a = 0; a < NAC; a++) {
        tpm[a] = create(&c, ac_modes[a], dt, world);
        int n;
        const titan_param *cat = titan_llama_catalog(tpm[a], &n);
        float *dst = titan_llama_params_data(tpm[a]);
        for (int i = 0; i < n && i < ng; i++) take_piece(&gcat[i], &cat[i], P, dst + cat[i].offset);
    }
    check_catalog(tpm[0], &c, gcat, ng);
    /* The pieces put back together are P bit for bit on every rank (dim-0
     * rows, dim-1 columns, the uneven vocabulary); a rank passing NULL
     * takes part and keeps nothing. */
    float *back = xalloc(np * sizeof(float));
    CHECK(titan_llama_gather_whole(tpm[0], back) == TITAN_OK, "gather_whole: %s", titan_error_message());
    CHECK(memcmp(back, P, np * sizeof(float)) == 0, "gather_whole: not the whole model's parameters");
    memset(back, 0, np * sizeof(float));
    CHECK(titan_llama_gather_whole(tpm[0], me == 0 ? back : NULL) == TITAN_OK);
    CHECK(me != 0 || memcmp(back, P, np * sizeof(float)) == 0, "gather_whole with NULL on the other ranks");
    free(back);

    uint32_t tok[NMB * N], tgt[NMB * N];
    for (int i = 0; i < NMB * N; i++) { /* the same on every rank */
        tok[i] = (uint32_t)(titan_rng_u64(77 + (uint64_t)vocab, 1, (uint64_t)i) % (uint64_t)vocab);
        tgt[i] = (uint32_t)(titan_rng_u64(77 + (uint64_t)vocab, 2, (uint64_t)i) % (uint64_t)vocab);
    }
    tok[0] = (uint32_t)vocab - 1, tgt[1] = (uint32_t)vocab - 1; /* the last rank's last row */

    float lw[NMB], l32[NMB], lt[NAC][NMB];
    train_step(whole, tok, tgt, lw);
    if (ref32) train_step(ref32, tok, tgt, l32);
    for (int a = 0; a < NAC; a++) train_step(tpm[a], tok, tgt, lt[a]);

    /* losses: near the whole model's, the same bits on every rank, AC bitwise */
    double loss_err = 0, loss_err32 = 0;
    uint64_t h = 0xcbf29ce484222325ull;
    for (int k = 0; k < NMB; k++) {
        loss_err = fmax(loss_err, fabs((double)lt[0][k] - lw[k]) / fabs(lw[k]));
        if (ref32) loss_err32 = fmax(loss_err32, fabs((double)lw[k] - l32[k]) / fabs(l32[k]));
        h = fnv(&lt[0][k], sizeof(float), h);
        for (int a = 1; a < NAC; a++)
            CHECK(memcmp(&lt[a][k], &lt[0][k], sizeof(float)) == 0, "AC %d micro-batch %d: loss %.9g vs %.9g",
                  ac_modes[a], k, (double)lt[a][k], (double)lt[0][k]);
    }
    double tol_loss = f32 ? TOL_LOSS_F32 : TOL_LOSS_BF16;
    CHECK(loss_err <= tol_loss, "loss %.9g vs whole %.9g: relative %.3g", (double)lt[0][0], (double)lw[0], loss_err);
    CHECK(same_on_all(world, h), "the ranks' losses differ in their bits");

    /* gradients: each tensor's local gradient against its slice of the whole model's */
    int n;
    const titan_param *cat = titan_llama_catalog(tpm[0], &n);
    const float *gw = titan_llama_grads_data(whole), *gt = titan_llama_grads_data(tpm[0]);
    float *piece = xalloc(np * sizeof(float)), *piece32 = xalloc(np * sizeof(float));
    double tol_grad = f32 ? TOL_GRAD_F32 : TOL_GRAD_BF16, worst = 0, worst32 = 0, worst_tp32 = 0;
    const char *worst_name = "";
    uint64_t hr = 0xcbf29ce484222325ull;
    for (int i = 0; i < n && i < ng; i++) {
        take_piece(&gcat[i], &cat[i], gw, piece);
        double e = norm_max_err(gt + cat[i].offset, piece, cat[i].numel);
        CHECK(e <= tol_grad, "%s: gradient normalised max error %.3g (rank %d)", cat[i].name, e, me);
        if (e > worst) worst = e, worst_name = cat[i].name;
        if (ref32) { /* the whole model's own bf16 error, for scale */
            take_piece(&gcat[i], &cat[i], titan_llama_grads_data(ref32), piece32);
            worst32 = fmax(worst32, norm_max_err(piece, piece32, cat[i].numel));
            worst_tp32 = fmax(worst_tp32, norm_max_err(gt + cat[i].offset, piece32, cat[i].numel));
        }
        if (cat[i].place.tp_dim < 0) hr = fnv(gt + cat[i].offset, cat[i].numel * sizeof(float), hr);
    }
    CHECK(same_on_all(world, hr), "replicated tensors' gradients (norms) differ between ranks");
    size_t nl = titan_llama_params_count(tpm[0]);
    for (int a = 1; a < NAC; a++)
        CHECK(memcmp(titan_llama_grads_data(tpm[a]), gt, nl * sizeof(float)) == 0,
              "AC %d under tp: gradients differ from AC none's under tp", ac_modes[a]);

    /* forward without targets: the rank's vocabulary columns of the whole logits */
    CHECK(titan_llama_forward(whole, tok, NULL, NULL) == TITAN_OK, "forward without targets");
    CHECK(titan_llama_forward(tpm[0], tok, NULL, NULL) == TITAN_OK, "tp forward without targets");
    int64_t v0, nv;
    titan_llama_tp_vocab(&c, titan_llama_get_tp(tpm[0]), &v0, &nv);
    float *lgw = xalloc((size_t)N * vocab * sizeof(float)), *lgt = xalloc((size_t)N * nv * sizeof(float));
    float *cols = xalloc((size_t)N * nv * sizeof(float));
    CHECK(titan_llama_logits_host(whole, lgw) == TITAN_OK && titan_llama_logits_host(tpm[0], lgt) == TITAN_OK);
    for (int i = 0; i < N; i++) memcpy(cols + (size_t)i * nv, lgw + (size_t)i * vocab + v0, (size_t)nv * sizeof(float));
    double logit_err = norm_max_err(lgt, cols, (size_t)N * nv), tol_logit = f32 ? TOL_LOGIT_F32 : TOL_LOGIT_BF16;
    CHECK(logit_err <= tol_logit, "logits columns [%lld, +%lld): normalised max error %.3g", (long long)v0,
          (long long)nv, logit_err);

    loss_err = max_over_ranks(world, loss_err);
    worst = max_over_ranks(world, worst);
    logit_err = max_over_ranks(world, logit_err);
    worst32 = max_over_ranks(world, worst32);
    worst_tp32 = max_over_ranks(world, worst_tp32);
    CHECK(!ref32 || worst_tp32 <= 2 * worst32, "against fp32: tp bf16 gradients %.3g off, whole bf16 %.3g",
          worst_tp32, worst32);
    if (me == 0) {
        printf("  tp %d, %s, vocab %d (pieces of %lld), %s, 2 micro-batches: loss %.7f rel err %.2g; gradients "
               "normalised max err %.2g (rank 0's worst: %s); logits %.2g; AC full, op, every 2nd bitwise equal",
               nr, tied ? "tied" : "untied", vocab, (long long)((vocab + nr - 1) / nr), titan_dtype_name(dt),
               (double)lt[0][0], loss_err, worst, worst_name, logit_err);
        if (ref32)
            printf("; against whole fp32: gradients of whole bf16 %.2g, of tp bf16 %.2g (loss %.2g)", worst32,
                   worst_tp32, loss_err32);
        printf("\n");
        fflush(stdout);
    }
    free(lgw), free(lgt), free(cols), free(piece), free(piece32), free(P), free(gcat);
    for (int a = 0; a < NAC; a++) titan_llama_free(tpm[a]);
    titan_llama_free(whole);
    titan_llama_free(ref32);
}

/* Degrees the model cannot split: refused before any collective, on every rank. */
static void test_refusals(void) {
    titan_llama_config c = tiny(0, 40);
    static char sentinel;
    titan_llama *m = (titan_llama *)(void *)&sentinel; /* create must set NULL on refusal */
    titan_llama_options o = {.tp = model_group_of(world, titan_backend_cpu())};
    c.n_kv_heads = nr / 2, c.n_heads = nr; /* 1 kv head for tp 2, 2 for tp 4 */
    CHECK(titan_llama_tp_check(&c, nr) == TITAN_ERR_USAGE && has("n_kv_heads"));
    CHECK(titan_llama_create_ex(&m, &c, titan_backend_cpu(), B, T, TITAN_AC_NONE, TITAN_DTYPE_F32, &o) ==
                  TITAN_ERR_USAGE && !m && has("n_kv_heads"),
          "tp %d with %d kv heads", nr, c.n_kv_heads);
    c = tiny(0, 40);
    c.multiple_of = 1, c.ffn_dim_multiplier = 0; /* hidden 85 */
    CHECK(titan_llama_hidden_dim(&c) == 85);
    m = (titan_llama *)(void *)&sentinel;
    CHECK(titan_llama_create_ex(&m, &c, titan_backend_cpu(), B, T, TITAN_AC_NONE, TITAN_DTYPE_F32, &o) ==
                  TITAN_ERR_USAGE && !m && has("FFN hidden size"),
          "tp %d with hidden 85", nr);
    c = tiny(0, nr == 2 ? 1 : 5); /* pieces of 1 (of 2): the last rank gets no rows */
    m = (titan_llama *)(void *)&sentinel;
    CHECK(titan_llama_create_ex(&m, &c, titan_backend_cpu(), B, T, TITAN_AC_NONE, TITAN_DTYPE_F32, &o) ==
                  TITAN_ERR_USAGE && !m && has("vocabulary"),
          "tp %d with vocab %d", nr, c.vocab_size);
    c = tiny(0, 40);
    CHECK(titan_llama_tp_check(&c, nr) == TITAN_OK && titan_llama_tp_check(&c, 3) == TITAN_ERR_USAGE);
    if (me == 0)
        printf("  tp %d refuses: %d kv heads, FFN hidden 85, vocab %d; degree 3 of %d kv heads\n", nr, nr / 2,
               nr == 2 ? 1 : 5, nr);
}

static int run_rank(titan_comm *w, int rank, int ranks) {
    world = w, me = rank, nr = ranks;
    titan_backend_cpu_set_threads(1);
    double t0 = titan_now_s();
    test_refusals();
    run_case(0, 40, TITAN_DTYPE_F32);
    run_case(0, 37, TITAN_DTYPE_F32);
    run_case(1, 37, TITAN_DTYPE_F32);
    run_case(0, 37, TITAN_DTYPE_BF16);
    run_case(1, 37, TITAN_DTYPE_BF16);
    /* Sequence parallelism: the same checks (B x T = 24 rows split over 2 or 4 ranks). */
    use_sp = 1;
    if (me == 0) printf("  sequence parallel:\n");
    run_case(0, 37, TITAN_DTYPE_F32);
    run_case(1, 37, TITAN_DTYPE_F32);
    run_case(1, 37, TITAN_DTYPE_BF16);
    if (failures) fprintf(stderr, "rank %d of %d: %d failure(s)\n", me, nr, failures);
    else if (me == 0) printf("  tp %d: ok (%.2f s)\n", nr, titan_now_s() - t0);
    free_groups();
    return failures != 0;
}

int main(int argc, char **argv) { return rank_jobs_main(argc, argv, "test_model_tp", "tp", run_rank); }
