/* test_model_pp.c - pipeline stages of the model against the whole model.
 *
 * One process, no communicators: the pp stage models of a 4-layer model
 * are chained by copying their boundaries (titan_llama_stage_output into
 * the next stage's titan_llama_stage_input after a forward, the
 * titan_llama_stage_grad a backward leaves into the previous stage's
 * before its backward), each copy kept per micro-batch as a pipeline's
 * send would. Over M micro-batches the chain must give the whole model's
 * losses and accumulated parameter gradients bit for bit (the same ops in
 * the same order, fp32 and bf16), under a GPipe schedule (every forward,
 * then every backward, each micro-batch in its own slot) and under 1F1B
 * (stage s keeps min(M, pp - s) slots, micro-batch i in slot i % slots,
 * reused once micro-batch i - slots has gone backward), for pp = 2, 3 and
 * n_layers + 2 (embedding-only and head-only stages), under every
 * activation checkpointing mode. Also: each stage's catalog against
 * tensor/layout.h's stage of each tensor, hooks on the stage's blocks
 * only, per-slot memory, forward without targets (logits) and with
 * (loss), refusals, and one chain on the cpu-guard backend (no host
 * access to backend memory on the way). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/rng.h"
#include "model/llama.h"
#include "tensor/layout.h"

#include "check.h"
#include "model_test.h"

enum { B = 2, T = 10, N = B * T, M = 3 /* micro-batches */, NL = 4 /* layers */, VOCAB = 67 };
enum { MAXPP = NL + 2 };

static const titan_backend *be; /* the stage models' backend (the whole model is always on the CPU) */

static titan_llama_config tiny(int tied) { return tiny_config(NL, 4, 2, VOCAB, tied); }

/* ---- the whole model: the reference ---------------------------------------------------- */

typedef struct {
    titan_llama_config c;
    titan_dtype dt;
    int ng;
    titan_param *gcat; /* the whole model's catalog */
    size_t np;
    float *P;                   /* its parameters */
    uint32_t tok[M * N], tgt[M * N];
    float loss[M];              /* forward_train of each micro-batch */
    float *grad;                /* accumulated over the M micro-batches at scale 1/M */
    float *logits;              /* [N, V] of a forward without targets on micro-batch 0 */
    float loss0;                /* a plain forward with targets on micro-batch 0 */
} ref;

static void ref_make(ref *r, titan_dtype dt) {
    memset(r, 0, sizeof *r);
    r->c = tiny(0);
    r->dt = dt;
    r->ng = titan_llama_params(&r->c, NULL);
    r->gcat = xalloc((size_t)r->ng * sizeof *r->gcat);
    titan_llama_params(&r->c, r->gcat);
    r->np = titan_llama_num_params(&r->c);
    r->P = xalloc(r->np * sizeof(float));
    titan_llama_init_weights(&r->c, r->P, 4242);
    for (int i = 0; i < M * N; i++) {
        r->tok[i] = (uint32_t)(titan_rng_u64(91, 1, (uint64_t)i) % VOCAB);
        r->tgt[i] = (uint32_t)(titan_rng_u64(91, 2, (uint64_t)i) % VOCAB);
    }
    titan_llama *w = NULL;
    if (titan_llama_create(&w, &r->c, titan_backend_cpu(), B, T, TITAN_AC_NONE, dt) != TITAN_OK) {
        fprintf(stderr, "FAIL whole model: %s\n", titan_error_message());
        exit(1);
    }
    memcpy(titan_llama_params_data(w), r->P, r->np * sizeof(float));
    titan_llama_zero_grads(w);
    for (int i = 0; i < M; i++) {
        CHECK(titan_llama_forward_train(w, r->tok + i * N, r->tgt + i * N, 1.0f / M, &r->loss[i]) == TITAN_OK);
        titan_llama_backward(w, 1.0f / M);
    }
    r->grad = xalloc(r->np * sizeof(float));
    memcpy(r->grad, titan_llama_grads_data(w), r->np * sizeof(float));
    /* every tensor's gradient has nonzero entries: the bitwise comparisons are not vacuous */
    for (int i = 0; i < r->ng; i++) {
        int nz = 0;
        for (size_t j = 0; j < r->gcat[i].numel && !nz; j++) nz = r->grad[r->gcat[i].offset + j] != 0.0f;
        CHECK(nz, "whole model (%s): gradient of %s all zero", titan_dtype_name(dt), r->gcat[i].name);
    }
    r->logits = xalloc((size_t)N * VOCAB * sizeof(float));
    CHECK(titan_llama_forward(w, r->tok, NULL, NULL) == TITAN_OK);
    CHECK(titan_llama_logits_host(w, r->logits) == TITAN_OK);
    CHECK(titan_llama_forward(w, r->tok, r->tgt, &r->loss0) == TITAN_OK);
    titan_llama_free(w);
}

static void ref_free(ref *r) { free(r->gcat), free(r->P), free(r->grad), free(r->logits); }

static int find_tensor(const ref *r, const char *name) {
    for (int i = 0; i < r->ng; i++)
        if (strcmp(r->gcat[i].name, name) == 0) return i;
    return -1;
}

/* Stage s of pp with `slots` slots, its tensors copied from the whole model by name. */
static titan_llama *stage_make(const ref *r, int pp, int s, int slots, titan_ac_mode ac) {
    titan_llama *m = NULL;
    titan_llama_options o = {.pp_size = pp, .pp_stage = s, .slots = slots};
    if (titan_llama_create_ex(&m, &r->c, be, B, T, ac, r->dt, &o) != TITAN_OK) {
        fprintf(stderr, "FAIL create stage %d of %d (%d slots, ac %d, %s): %s\n", s, pp, slots, ac,
                titan_dtype_name(r->dt), titan_error_message());
        exit(1);
    }
    int n;
    const titan_param *cat = titan_llama_catalog(m, &n);
    float *dst = titan_llama_params_data(m);
    for (int i = 0; i < n; i++) {
        int g = find_tensor(r, cat[i].name);
        CHECK(g >= 0, "stage %d of %d: unknown tensor %s", s, pp, cat[i].name);
        if (g >= 0 && cat[i].numel)
            be->to_device(dst + cat[i].offset, r->P + r->gcat[g].offset, cat[i].numel * sizeof(float));
    }
    return m;
}

/* ---- a chain of stages under a schedule ------------------------------------------------ */

typedef struct {
    int pp;
    titan_llama *m[MAXPP];
    int slots[MAXPP];
    size_t io_bytes;
    /* what a pipeline sends: stage s's output of micro-batch i (to s + 1),
     * and d/d(input) of stage s for micro-batch i (to s - 1) */
    unsigned char *act[MAXPP][M], *grad[MAXPP][M];
    int fdone[MAXPP][M], bdone[MAXPP][M];
    int occ[MAXPP][M]; /* the micro-batch a slot holds, -1 none */
    float loss[M];
    int targets_everywhere; /* forward_train gets the targets on every stage (else the last one's only) */
} chain;

static void chain_make(chain *ch, const ref *r, int pp, int one_f_one_b, titan_ac_mode ac) {
    memset(ch, 0, sizeof *ch);
    ch->pp = pp;
    size_t io = 0;
    for (int s = 0; s < pp; s++) {
        ch->slots[s] = one_f_one_b ? (M < pp - s ? M : pp - s) : M;
        ch->m[s] = stage_make(r, pp, s, ch->slots[s], ac);
        size_t n = titan_llama_stage_io_count(ch->m[s]);
        CHECK(n == (size_t)N * r->c.dim, "stage %d of %d: io count %zu", s, pp, n);
        io = n * titan_dtype_size(r->dt);
        CHECK(titan_llama_slots(ch->m[s]) == ch->slots[s]);
        titan_llama_zero_grads(ch->m[s]);
        for (int k = 0; k < M; k++) ch->occ[s][k] = -1;
    }
    ch->io_bytes = io;
    for (int s = 0; s < pp; s++)
        for (int i = 0; i < M; i++) ch->act[s][i] = xalloc(io), ch->grad[s][i] = xalloc(io);
}

static void chain_free(chain *ch) {
    for (int s = 0; s < ch->pp; s++) {
        titan_llama_free(ch->m[s]);
        for (int i = 0; i < M; i++) free(ch->act[s][i]), free(ch->grad[s][i]);
    }
}

static void op_forward(chain *ch, const ref *r, int s, int i) {
    titan_llama *m = ch->m[s];
    int k = i % ch->slots[s], last = s == ch->pp - 1;
    CHECK(ch->occ[s][k] < 0, "stage %d: forward of micro-batch %d into slot %d, still holding %d", s, i, k,
          ch->occ[s][k]);
    titan_llama_set_slot(m, k);
    if (s > 0) be->to_device(titan_llama_stage_input(m), ch->act[s - 1][i], ch->io_bytes);
    const uint32_t *tgt = last || ch->targets_everywhere ? r->tgt + i * N : NULL;
    float l = NAN;
    CHECK(titan_llama_forward_train(m, s == 0 ? r->tok + i * N : NULL, tgt, 1.0f / M, &l) == TITAN_OK,
          "stage %d forward", s);
    if (last) {
        ch->loss[i] = l;
    } else {
        CHECK(l == 0.0f, "stage %d (not the last): loss %g", s, (double)l);
        be->to_host(ch->act[s][i], titan_llama_stage_output(m), ch->io_bytes);
    }
    ch->occ[s][k] = i;
    ch->fdone[s][i] = 1;
}

static void op_backward(chain *ch, int s, int i) {
    titan_llama *m = ch->m[s];
    int k = i % ch->slots[s];
    CHECK(ch->occ[s][k] == i, "stage %d: backward of micro-batch %d from slot %d holding %d", s, i, k,
          ch->occ[s][k]);
    titan_llama_set_slot(m, k);
    if (s < ch->pp - 1) be->to_device(titan_llama_stage_grad(m), ch->grad[s + 1][i], ch->io_bytes);
    titan_llama_backward(m, 1.0f / M);
    if (s > 0) be->to_host(ch->grad[s][i], titan_llama_stage_grad(m), ch->io_bytes);
    ch->occ[s][k] = -1;
    ch->bdone[s][i] = 1;
}

enum { SCHED_GPIPE, SCHED_1F1B };
static const char *const sched_name[] = {"GPipe", "1F1B"};

/* Stage s's own order of ops: +i+1 forward of micro-batch i, -(i+1) its backward. */
static void stage_ops(int sched, int pp, int s, int *ops) {
    int n = 0;
    if (sched == SCHED_GPIPE) {
        for (int i = 0; i < M; i++) ops[n++] = i + 1;
        for (int i = 0; i < M; i++) ops[n++] = -(i + 1);
        return;
    }
    /* 1F1B: pp - 1 - s warm-up forwards, then one forward, one backward, ... */
    int warm = pp - 1 - s < M ? pp - 1 - s : M, f = 0, b = 0;
    while (f < warm) ops[n++] = ++f;
    while (f < M) {
        ops[n++] = ++f;
        ops[n++] = -(++b);
    }
    while (b < M) ops[n++] = -(++b);
}

/* Runs each stage's ops in its own order, the stages in turn (one op each
 * per round, as time steps), an op waiting for what it receives. */
static void chain_run(chain *ch, const ref *r, int sched) {
    int ops[MAXPP][2 * M], pos[MAXPP] = {0}, left = 2 * M * ch->pp;
    for (int s = 0; s < ch->pp; s++) stage_ops(sched, ch->pp, s, ops[s]);
    while (left > 0) {
        int progress = 0;
        for (int s = 0; s < ch->pp; s++) {
            if (pos[s] == 2 * M) continue;
            int op = ops[s][pos[s]], i = abs(op) - 1;
            int ready = op > 0 ? s == 0 || ch->fdone[s - 1][i] : s == ch->pp - 1 || ch->bdone[s + 1][i];
            if (!ready) continue;
            if (op > 0) op_forward(ch, r, s, i);
            else op_backward(ch, s, i);
            pos[s]++, left--, progress = 1;
        }
        if (!progress) {
            CHECK(0, "%s schedule over %d stages stuck", sched_name[sched], ch->pp);
            return;
        }
    }
}

/* The chain's losses and every stage's gradients against the whole model's, bit for bit. */
static int chain_matches(chain *ch, const ref *r, const char *what) {
    int ok = 1;
    for (int i = 0; i < M; i++)
        if (memcmp(&ch->loss[i], &r->loss[i], sizeof(float)) != 0) {
            CHECK(0, "%s: micro-batch %d loss %.9g, whole model %.9g", what, i, (double)ch->loss[i],
                  (double)r->loss[i]);
            ok = 0;
        }
    int *covered = xalloc((size_t)r->ng * sizeof *covered);
    memset(covered, 0, (size_t)r->ng * sizeof *covered);
    for (int s = 0; s < ch->pp; s++) {
        int n;
        const titan_param *cat = titan_llama_catalog(ch->m[s], &n);
        size_t np = titan_llama_params_count(ch->m[s]);
        float *g = xalloc(np * sizeof(float));
        be->to_host(g, titan_llama_grads_data(ch->m[s]), np * sizeof(float));
        for (int t = 0; t < n; t++) {
            if (!cat[t].numel) continue;
            int w = find_tensor(r, cat[t].name);
            if (w < 0) continue;
            covered[w]++;
            if (memcmp(g + cat[t].offset, r->grad + r->gcat[w].offset, cat[t].numel * sizeof(float)) != 0) {
                double d = 0;
                for (size_t j = 0; j < cat[t].numel; j++)
                    d = fmax(d, fabs((double)g[cat[t].offset + j] - r->grad[r->gcat[w].offset + j]));
                CHECK(0, "%s: stage %d gradient of %s differs (max abs difference %.3g)", what, s, cat[t].name, d);
                ok = 0;
            }
        }
        free(g);
    }
    for (int w = 0; w < r->ng; w++)
        CHECK(covered[w] == 1, "%s: %s on %d stages", what, r->gcat[w].name, covered[w]);
    free(covered);
    return ok;
}

/* Forward through the chain in slot 0: without targets, the last stage's
 * logits; then with targets (plain forward), its loss. */
static void chain_inference(chain *ch, const ref *r, const char *what) {
    float l = NAN;
    for (int pass = 0; pass < 2; pass++) {
        for (int s = 0; s < ch->pp; s++) {
            titan_llama *m = ch->m[s];
            titan_llama_set_slot(m, 0);
            if (s > 0) be->to_device(titan_llama_stage_input(m), ch->act[s - 1][0], ch->io_bytes);
            l = NAN;
            CHECK(titan_llama_forward(m, s == 0 ? r->tok : NULL, pass ? r->tgt : NULL, &l) == TITAN_OK);
            if (s < ch->pp - 1) {
                CHECK(l == 0.0f, "%s: stage %d forward: loss %g", what, s, (double)l);
                be->to_host(ch->act[s][0], titan_llama_stage_output(m), ch->io_bytes);
            }
        }
        if (pass == 0) {
            float *lg = xalloc((size_t)N * VOCAB * sizeof(float));
            CHECK(titan_llama_logits_host(ch->m[ch->pp - 1], lg) == TITAN_OK);
            CHECK(memcmp(lg, r->logits, (size_t)N * VOCAB * sizeof(float)) == 0,
                  "%s: logits without targets differ from the whole model's", what);
            free(lg);
        }
    }
    CHECK(memcmp(&l, &r->loss0, sizeof l) == 0, "%s: forward loss %.9g, whole model %.9g", what, (double)l,
          (double)r->loss0);
}

/* ---- the checks ------------------------------------------------------------------------ */

static const titan_ac_mode ac_modes[] = {TITAN_AC_NONE, TITAN_AC_FULL, 2, TITAN_AC_OP};
enum { NAC = sizeof ac_modes / sizeof ac_modes[0] };

/* Checks 1-3 and 6: every pp, schedule and AC mode, bitwise. */
static void test_chains(titan_dtype dt) {
    ref r;
    ref_make(&r, dt);
    const int pps[] = {2, 3, NL + 2};
    int runs = 0, good = 0;
    for (int p = 0; p < 3; p++)
        for (int sched = 0; sched < 2; sched++)
            for (int a = 0; a < NAC; a++) {
                chain ch;
                chain_make(&ch, &r, pps[p], sched == SCHED_1F1B, ac_modes[a]);
                /* GPipe hands the targets to every stage (ignored but by the
                 * last); 1F1B only to the last, as the header allows */
                ch.targets_everywhere = sched == SCHED_GPIPE;
                chain_run(&ch, &r, sched);
                char what[96];
                snprintf(what, sizeof what, "pp %d, %s, AC %d, %s", pps[p], sched_name[sched], ac_modes[a],
                         titan_dtype_name(dt));
                good += chain_matches(&ch, &r, what);
                runs++;
                if (a == 0) chain_inference(&ch, &r, what);
                chain_free(&ch);
            }
    printf("  %s: pp 2, 3, %d x {GPipe, 1F1B} x AC {none, full, every 2nd, op}, %d micro-batches: %d of %d "
           "chains give the whole model's losses (%.6f %.6f %.6f) and gradients bit for bit; logits and loss "
           "of a forward bitwise\n",
           titan_dtype_name(dt), NL + 2, M, good, runs, (double)r.loss[0], (double)r.loss[1], (double)r.loss[2]);
    ref_free(&r);
}

/* GPipe with the backwards in reverse micro-batch order: the gradients add
 * up in another order (g2 + g1 + g0 instead of g0 + g1 + g2), which fp32
 * rounds differently, so only near; the losses stay bitwise. */
static void test_reverse_backward(void) {
    ref r;
    ref_make(&r, TITAN_DTYPE_F32);
    chain ch;
    chain_make(&ch, &r, 3, 0, TITAN_AC_NONE);
    for (int i = 0; i < M; i++)
        for (int s = 0; s < 3; s++) op_forward(&ch, &r, s, i);
    for (int i = M - 1; i >= 0; i--)
        for (int s = 2; s >= 0; s--) op_backward(&ch, s, i);
    CHECK(memcmp(ch.loss, r.loss, sizeof ch.loss) == 0, "reverse GPipe: losses");
    double worst = 0, gmax = 0;
    int bitwise = 1;
    for (int s = 0; s < 3; s++) {
        int n;
        const titan_param *cat = titan_llama_catalog(ch.m[s], &n);
        size_t np = titan_llama_params_count(ch.m[s]);
        float *g = xalloc(np * sizeof(float));
        be->to_host(g, titan_llama_grads_data(ch.m[s]), np * sizeof(float));
        for (int t = 0; t < n; t++)
            for (size_t j = 0; j < cat[t].numel; j++) {
                double a = g[cat[t].offset + j], b = r.grad[r.gcat[t].offset + j];
                worst = fmax(worst, fabs(a - b));
                gmax = fmax(gmax, fabs(b));
                bitwise &= a == b;
            }
        free(g);
    }
    CHECK(worst <= 1e-6 * gmax, "reverse GPipe: gradients off by %.3g (max %.3g)", worst, gmax);
    printf("  GPipe, backwards in reverse order (pp 3, f32): losses bitwise, gradients %s (max abs difference "
           "%.2g of max %.2g: fp32 sums in another order)\n",
           bitwise ? "bitwise" : "near", worst, gmax);
    chain_free(&ch);
    ref_free(&r);
}

typedef struct {
    int n, ev[64];
} hook_log;
static void log_ev(void *ctx, int kind, int b) {
    hook_log *h = ctx;
    if (h->n < 64) h->ev[h->n++] = kind * 1000 + b;
}
static titan_status hbf(void *c, int b) { return log_ev(c, 0, b), TITAN_OK; }
static titan_status haf(void *c, int b) { return log_ev(c, 1, b), TITAN_OK; }
static titan_status hbb(void *c, int b) { return log_ev(c, 2, b), TITAN_OK; }
static titan_status hab(void *c, int b) { return log_ev(c, 3, b), TITAN_OK; }

/* Check 4: each stage's catalog against the layout's stage of each tensor;
 * layers, blocks and hooks; per-slot memory. */
static void test_catalog(void) {
    ref r;
    ref_make(&r, TITAN_DTYPE_F32);
    const int pps[] = {1, 2, 3, NL + 2};
    for (int p = 0; p < 4; p++) {
        int pp = pps[p];
        titan_layout lay = {.dp_replicate = 1, .dp_shard = 1, .cp = 1, .tp = 1, .pp = pp};
        int covered_layers = 0;
        for (int s = 0; s < pp; s++) {
            titan_llama *m = stage_make(&r, pp, s, 1, TITAN_AC_NONE);
            titan_llama_pp got = titan_llama_get_pp(m);
            CHECK(got.size == pp && got.stage == s, "get_pp {%d, %d} for stage %d of %d", got.size, got.stage, s, pp);
            int n;
            const titan_param *cat = titan_llama_catalog(m, &n);
            CHECK(n == r.ng, "stage %d of %d: %d tensors, whole model %d", s, pp, n, r.ng);
            size_t off = 0, sum = 0;
            for (int i = 0; i < n && i < r.ng; i++) {
                const titan_param *c = &cat[i], *g = &r.gcat[i];
                int mine = titan_layout_stage(&lay, NL, g->place.block) == s;
                int ok = strcmp(c->name, g->name) == 0 && c->ndim == g->ndim && c->offset == off &&
                         c->numel == (mine ? g->numel : 0) && c->shape[0] == (mine ? g->shape[0] : 0) &&
                         (c->ndim < 2 || c->shape[1] == g->shape[1]);
                CHECK(ok, "stage %d of %d: %s: %lld x %lld at %zu (numel %zu); layout puts it on stage %d", s, pp,
                      c->name, (long long)c->shape[0], (long long)(c->ndim > 1 ? c->shape[1] : 0), c->offset, c->numel,
                      titan_layout_stage(&lay, NL, g->place.block));
                off += c->numel;
                sum += mine ? g->numel : 0;
            }
            CHECK(titan_llama_params_count(m) == sum, "stage %d of %d: %zu parameters, its tensors %zu", s, pp,
                  titan_llama_params_count(m), sum);
            /* layers and blocks: as the layout's; hooks for the stage's blocks only, in order */
            int f0, f1, l0, l1;
            titan_llama_pp_layers(&r.c, got, &f0, &f1);
            titan_layout_stage_layers(&lay, NL, s, &l0, &l1);
            CHECK(f0 == l0 && f1 == l1, "stage %d of %d: layers [%d, %d), layout [%d, %d)", s, pp, f0, f1, l0, l1);
            covered_layers += f1 - f0;
            hook_log h = {0};
            titan_llama_hooks hk = {.ctx = &h, .before_forward = hbf, .after_forward = haf,
                                    .before_backward = hbb, .after_backward = hab};
            titan_llama_set_hooks(m, &hk);
            if (s > 0) {
                void *zero = xalloc(titan_llama_stage_io_count(m) * sizeof(float));
                be->to_device(titan_llama_stage_input(m), zero, titan_llama_stage_io_count(m) * sizeof(float));
                free(zero);
            }
            titan_llama_zero_grads(m);
            CHECK(titan_llama_forward_train(m, s == 0 ? r.tok : NULL, r.tgt, 1.0f, NULL) == TITAN_OK);
            if (s < pp - 1) {
                void *zero = xalloc(titan_llama_stage_io_count(m) * sizeof(float));
                be->to_device(titan_llama_stage_grad(m), zero, titan_llama_stage_io_count(m) * sizeof(float));
                free(zero);
            }
            titan_llama_backward(m, 1.0f);
            hook_log want = {0};
            for (int b = 0; b <= NL + 1; b++) {
                int on = titan_llama_pp_has_block(&r.c, got, b);
                int expect = b == 0 ? s == 0 : b == NL + 1 ? s == pp - 1 : b - 1 >= l0 && b - 1 < l1;
                CHECK(on == expect, "stage %d of %d: block %d %s", s, pp, b, on ? "on" : "off");
                if (on) log_ev(&want, 0, b), log_ev(&want, 1, b);
            }
            for (int b = NL + 1; b >= 0; b--)
                if (titan_llama_pp_has_block(&r.c, got, b)) log_ev(&want, 2, b), log_ev(&want, 3, b);
            CHECK(h.n == want.n && memcmp(h.ev, want.ev, (size_t)h.n * sizeof(int)) == 0,
                  "stage %d of %d: %d hook calls, want %d", s, pp, h.n, want.n);
            titan_llama_free(m);
            /* slots: each adds the same bytes, what a forward keeps */
            if (pp > 1) {
                size_t by[3];
                for (int k = 0; k < 3; k++) {
                    titan_llama *ms = stage_make(&r, pp, s, k + 1, TITAN_AC_NONE);
                    by[k] = titan_llama_activation_bytes(ms);
                    titan_llama_free(ms);
                }
                CHECK(by[1] > by[0] && by[2] - by[1] == by[1] - by[0], "stage %d of %d: 1, 2, 3 slots: %zu %zu %zu",
                      s, pp, by[0], by[1], by[2]);
            }
        }
        CHECK(covered_layers == NL, "pp %d: stages hold %d of %d layers", pp, covered_layers, NL);
    }
    printf("  catalogs of pp 1, 2, 3, %d: tensors on the layout's stage, the others empty; parameter counts, "
           "layers, blocks and hooks per stage; each slot adds the same activation bytes\n", NL + 2);
    ref_free(&r);
}

/* Check 5: what the model cannot split, and stages out of range. */
static void test_refusals(void) {
    titan_llama_config c = tiny(0);
    static char sentinel;
    titan_llama *m;
    CHECK(titan_llama_pp_check(&c, NL + 2) == TITAN_OK && titan_llama_pp_check(&c, 1) == TITAN_OK);
    CHECK(titan_llama_pp_check(&c, NL + 3) == TITAN_ERR_USAGE && has("stages") && has("layers"),
          "pp %d of %d layers", NL + 3, NL);
    CHECK(titan_llama_pp_check(&c, 0) == TITAN_ERR_USAGE, "pp 0");
    titan_llama_options o = {.pp_size = NL + 3, .pp_stage = 0};
    m = (titan_llama *)(void *)&sentinel; /* create must set NULL on refusal */
    CHECK(titan_llama_create_ex(&m, &c, be, B, T, TITAN_AC_NONE, TITAN_DTYPE_F32, &o) == TITAN_ERR_USAGE && !m &&
              has("stages"), "create: pp %d", NL + 3);
    c.tie_embeddings = 1;
    CHECK(titan_llama_pp_check(&c, 2) == TITAN_ERR_USAGE && has("tied"), "tied embeddings, pp 2");
    CHECK(titan_llama_pp_check(&c, 1) == TITAN_OK, "tied embeddings, pp 1");
    o = (titan_llama_options){.pp_size = 2, .pp_stage = 1};
    m = (titan_llama *)(void *)&sentinel;
    CHECK(titan_llama_create_ex(&m, &c, be, B, T, TITAN_AC_NONE, TITAN_DTYPE_F32, &o) == TITAN_ERR_USAGE && !m &&
              has("tied"), "create: tied, pp 2");
    c.tie_embeddings = 0;
    const int bad[] = {2, 3, -1};
    for (int i = 0; i < 3; i++) {
        o = (titan_llama_options){.pp_size = 2, .pp_stage = bad[i]};
        m = (titan_llama *)(void *)&sentinel;
        CHECK(titan_llama_create_ex(&m, &c, be, B, T, TITAN_AC_NONE, TITAN_DTYPE_F32, &o) == TITAN_ERR_USAGE && !m &&
                  has("stage"), "create: stage %d of 2", bad[i]);
    }
    o = (titan_llama_options){.pp_size = 2, .pp_stage = 0, .slots = 5000};
    m = (titan_llama *)(void *)&sentinel;
    CHECK(titan_llama_create_ex(&m, &c, be, B, T, TITAN_AC_NONE, TITAN_DTYPE_F32, &o) == TITAN_ERR_USAGE && !m &&
              has("slots"), "create: 5000 slots");
    printf("  refused: pp %d of %d layers, pp 2 with tied embeddings, stages 2, 3, -1 of 2, 5000 slots\n", NL + 3, NL);
}

/* One 1F1B chain on cpu-guard: the pp paths touch backend memory only
 * through the backend's copies and ops. */
static void test_guard(void) {
    ref r;
    ref_make(&r, TITAN_DTYPE_BF16);
    be = titan_backend_cpu_guard();
    chain ch;
    chain_make(&ch, &r, 3, 1, TITAN_AC_OP);
    chain_run(&ch, &r, SCHED_1F1B);
    int ok = chain_matches(&ch, &r, "cpu-guard, pp 3, 1F1B, AC op, bf16");
    chain_inference(&ch, &r, "cpu-guard, pp 3, bf16");
    chain_free(&ch);
    be = titan_backend_cpu();
    printf("  cpu-guard backend, pp 3, 1F1B, AC op, bf16: %s\n", ok ? "bitwise equal to the whole model" : "differs");
    ref_free(&r);
}

int main(void) {
    titan_backend_cpu_set_threads(1);
    be = titan_backend_cpu();
    double t0 = titan_now_s();
    printf("test_model_pp:\n");
    test_refusals();
    test_catalog();
    test_chains(TITAN_DTYPE_F32);
    test_chains(TITAN_DTYPE_BF16);
    test_reverse_backward();
    test_guard();
    if (failures) {
        fprintf(stderr, "test_model_pp: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_model_pp: ok (%.2f s)\n", titan_now_s() - t0);
    return 0;
}
