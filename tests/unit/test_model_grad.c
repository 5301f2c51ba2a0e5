/* test_model_grad.c - the whole model: finite-difference gradients of every
 * tensor, loss at init, activation checkpointing, gradient accumulation,
 * and a few AdamW steps that must lower the loss. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/rng.h"
#include "model/llama.h"
#include "optim/optim.h"

#include "check.h"
#include "model_test.h"

enum { B = 2, T = 7, N = B * T };

static titan_llama_config tiny(int tied) { return tiny_config(2, 4, 2, 40, tied); }

static titan_llama *make_dt(const titan_llama_config *c, int b, int t, titan_ac_mode ac, titan_dtype dt) {
    titan_llama *m = NULL;
    titan_status st = titan_llama_create(&m, c, titan_backend_cpu(), b, t, ac, dt);
    if (st != TITAN_OK) {
        fprintf(stderr, "FAIL create: %s\n", titan_error_message());
        exit(1);
    }
    return m;
}

static titan_llama *make(const titan_llama_config *c, int b, int t, titan_ac_mode ac) {
    return make_dt(c, b, t, ac, TITAN_DTYPE_F32);
}

static void tokens_for(uint32_t *tok, uint32_t *tgt, int n, int V, uint64_t seed) {
    for (int i = 0; i < n; i++) {
        tok[i] = (uint32_t)(titan_rng_u64(seed, 1, (uint64_t)i) % (uint64_t)V);
        tgt[i] = (uint32_t)(titan_rng_u64(seed, 2, (uint64_t)i) % (uint64_t)V);
    }
}

/* O(1) activations and gradients everywhere, unlike the tiny-std real init,
 * so that every tensor's finite differences are well above rounding. */
static void rough_init(const titan_llama_config *c, float *p) {
    int n;
    titan_param *ps = titan_llama_params_new(c, &n);
    for (int i = 0; i < n; i++) {
        float *x = p + ps[i].offset;
        uint64_t stream = titan_rng_hash_name(ps[i].name);
        if (ps[i].ndim == 1) {
            titan_rng_trunc_normal(x, (int64_t)ps[i].numel, 7, stream, 1.0, 0.2, 0.0, 2.0);
        } else if (strcmp(ps[i].name, "tok_embeddings.weight") == 0) {
            double sd = c->tie_embeddings ? 0.4 : 1.0;
            titan_rng_trunc_normal(x, (int64_t)ps[i].numel, 7, stream, 0.0, sd, -3 * sd, 3 * sd);
        } else {
            double sd = 1.0 / sqrt((double)ps[i].shape[1]);
            titan_rng_trunc_normal(x, (int64_t)ps[i].numel, 7, stream, 0.0, sd, -3 * sd, 3 * sd);
        }
    }
    free(ps);
}

static double loss_of(titan_llama *m, const uint32_t *tok, const uint32_t *tgt) {
    float loss = 0;
    titan_status st = titan_llama_forward(m, tok, tgt, &loss);
    if (st != TITAN_OK) {
        fprintf(stderr, "FAIL forward: %s\n", titan_error_message());
        exit(1);
    }
    return loss;
}

/* Central differences for the largest-gradient entries of a sample of each tensor. */
static void test_fd(int tied) {
    titan_llama_config c = tiny(tied);
    titan_llama *m = make(&c, B, T, TITAN_AC_NONE);
    float *p = titan_llama_params_data(m);
    rough_init(&c, p);
    uint32_t tok[N], tgt[N];
    tokens_for(tok, tgt, N, c.vocab_size, 11);
    titan_llama_zero_grads(m);
    loss_of(m, tok, tgt);
    titan_llama_backward(m, 1.0f);
    size_t np = titan_llama_params_count(m);
    float *g = malloc(np * sizeof(float));
    memcpy(g, titan_llama_grads_data(m), np * sizeof(float));

    int n;
    titan_param *ps = titan_llama_params_new(&c, &n);
    double worst = 0, worst_g = 0;
    const char *worst_name = "";
    int checked = 0;
    for (int i = 0; i < n; i++) {
        /* sample 48 entries, keep the 3 largest |grad| */
        size_t pick[3] = {0, 0, 0};
        double mag[3] = {-1, -1, -1};
        for (int s = 0; s < 48; s++) {
            size_t j = (size_t)(titan_rng_u64(99, (uint64_t)i, (uint64_t)s) % ps[i].numel);
            double a = fabs(g[ps[i].offset + j]);
            if (j == pick[0] || j == pick[1] || j == pick[2]) continue;
            for (int k = 0; k < 3; k++)
                if (a > mag[k]) {
                    for (int q = 2; q > k; q--) mag[q] = mag[q - 1], pick[q] = pick[q - 1];
                    mag[k] = a, pick[k] = j;
                    break;
                }
        }
        for (int k = 0; k < 3; k++) {
            if (mag[k] < 0) continue;
            float *x = p + ps[i].offset + pick[k];
            float orig = *x;
            const float eps = 1e-2f;
            float xp = orig + eps, xm = orig - eps;
            *x = xp;
            double lp = loss_of(m, tok, tgt);
            *x = xm;
            double lm = loss_of(m, tok, tgt);
            *x = orig;
            double num = (lp - lm) / ((double)xp - (double)xm);
            double ana = g[ps[i].offset + pick[k]];
            double err = fabs(num - ana) / fmax(fmax(fabs(num), fabs(ana)), 1e-3);
            checked++;
            if (err > worst) worst = err, worst_g = ana, worst_name = ps[i].name;
            CHECK(err < 2e-2, "%s[%zu]: analytic %.6g numeric %.6g rel %.3g", ps[i].name, pick[k],
                  ana, num, err);
            CHECK(fabs(ana) > 1e-4, "%s: gradient too small to check (%.3g)", ps[i].name, ana);
        }
    }
    printf("  finite differences (%s): %d entries in %d tensors, max rel error %.3g (%s, grad "
           "%.3g)\n",
           tied ? "tied" : "untied", checked, n, worst, worst_name, worst_g);
    free(g);
    free(ps);
    titan_llama_free(m);
}

static void test_init_loss(int tied) {
    titan_llama_config c = tiny(tied);
    titan_llama *m = make(&c, B, T, TITAN_AC_NONE);
    titan_llama_init_weights(&c, titan_llama_params_data(m), 1234);
    uint32_t tok[N], tgt[N];
    tokens_for(tok, tgt, N, c.vocab_size, 5);
    double loss = loss_of(m, tok, tgt);
    double lnv = log((double)c.vocab_size);
    printf("  loss at init (%s): %.4f, ln V = %.4f\n", tied ? "tied" : "untied", loss, lnv);
    CHECK(fabs(loss - lnv) < 0.6, "loss %.4f far from ln V %.4f", loss, lnv);

    /* forward without targets leaves real logits; with targets the same */
    float logits1[N * 40], logits2[N * 40];
    CHECK(titan_llama_forward(m, tok, NULL, NULL) == TITAN_OK, "forward without targets");
    memcpy(logits1, titan_llama_logits(m), sizeof logits1);
    loss_of(m, tok, tgt);
    memcpy(logits2, titan_llama_logits(m), sizeof logits2);
    CHECK(memcmp(logits1, logits2, sizeof logits1) == 0, "logits differ with/without targets");
    double ce = 0; /* the loss is the mean cross-entropy of those logits */
    for (int i = 0; i < N; i++) {
        double mx = -1e30, s = 0;
        for (int v = 0; v < 40; v++) mx = fmax(mx, logits1[i * 40 + v]);
        for (int v = 0; v < 40; v++) s += exp(logits1[i * 40 + v] - mx);
        ce += mx + log(s) - logits1[i * 40 + tgt[i]];
    }
    ce /= N;
    CHECK(fabs(ce - loss) < 1e-5, "loss %.7f vs cross-entropy of logits %.7f", loss, ce);

    uint32_t badtok[N];
    memcpy(badtok, tok, sizeof tok);
    badtok[3] = 40;
    float l;
    CHECK(titan_llama_forward(m, badtok, tgt, &l) == TITAN_ERR_FORMAT, "token id out of range");
    titan_llama_free(m);
}

/* Activation checkpointing, every mode against none on 6 layers (so that
 * every 2nd and every 3rd layer mix kept and recomputed layers), in fp32
 * and bf16: the loss and the gradients bitwise equal, over two backwards
 * (accumulation goes through the same path), and the memory each saves. */
static void test_ac(int tied, titan_dtype dt) {
    titan_llama_config c = tiny(tied);
    c.n_layers = 6;
    static const titan_ac_mode modes[] = {TITAN_AC_FULL, 2, 3, TITAN_AC_OP, 9};
    enum { NM = sizeof modes / sizeof modes[0] };
    titan_llama *a = make_dt(&c, B, T, TITAN_AC_NONE, dt), *f[NM];
    size_t np = titan_llama_params_count(a);
    rough_init(&c, titan_llama_params_data(a));
    for (int i = 0; i < NM; i++) {
        f[i] = make_dt(&c, B, T, modes[i], dt);
        memcpy(titan_llama_params_data(f[i]), titan_llama_params_data(a), np * sizeof(float));
        titan_llama_zero_grads(f[i]);
    }
    uint32_t tok[N], tgt[N];
    tokens_for(tok, tgt, N, c.vocab_size, 21);
    titan_llama_zero_grads(a);
    for (int r = 0; r < 2; r++) {
        double la = loss_of(a, tok, tgt);
        titan_llama_backward(a, 0.5f);
        for (int i = 0; i < NM; i++) {
            double lf = loss_of(f[i], tok, tgt);
            CHECK(la == lf, "AC %d: loss %.9g vs %.9g", modes[i], lf, la);
            titan_llama_backward(f[i], 0.5f);
        }
    }
    size_t bytes[NM];
    for (int i = 0; i < NM; i++) {
        CHECK(memcmp(titan_llama_grads_data(a), titan_llama_grads_data(f[i]), np * sizeof(float)) == 0,
              "AC %d: gradients differ from AC none's", modes[i]);
        bytes[i] = titan_llama_activation_bytes(f[i]);
    }
    size_t none = titan_llama_activation_bytes(a);
    printf("  activation checkpointing (%s, %s): gradients bitwise equal; activations %zu bytes, "
           "full %zu, every 2nd layer %zu, every 3rd %zu, op %zu, every 9th (none of 6) %zu\n",
           tied ? "tied" : "untied", titan_dtype_name(dt), none, bytes[0], bytes[1], bytes[2], bytes[3],
           bytes[4]);
    /* the recomputing layers share one slot: n of them save n - 1 layers' worth */
    CHECK(bytes[0] < bytes[1] && bytes[1] < bytes[2] && bytes[2] < none, "fewer kept layers, less memory");
    CHECK(bytes[0] < bytes[3] && bytes[3] < none, "op keeps less than none, more than full");
    CHECK(bytes[4] == none, "every 9th of 6 layers is none");
    titan_llama *bad = NULL;
    CHECK(titan_llama_create(&bad, &c, titan_backend_cpu(), B, T, -2, dt) == TITAN_ERR_USAGE && !bad,
          "AC mode -2 refused");
    titan_llama_free(a);
    for (int i = 0; i < NM; i++) titan_llama_free(f[i]);
}

/* forward_train writes dlogits in the loss pass: the same loss and the same
 * gradient bits as forward + backward's own softmax pass; a plain forward
 * after it (validation) keeps its logits and leaves backward the usual way. */
static void test_forward_train(void) {
    titan_llama_config c = tiny(1);
    titan_llama *a = make(&c, B, T, TITAN_AC_NONE), *f = make(&c, B, T, TITAN_AC_NONE);
    size_t np = titan_llama_params_count(a);
    rough_init(&c, titan_llama_params_data(a));
    memcpy(titan_llama_params_data(f), titan_llama_params_data(a), np * sizeof(float));
    uint32_t tok[N], tgt[N];
    titan_llama_zero_grads(a);
    titan_llama_zero_grads(f);
    for (int r = 0; r < 2; r++) {
        tokens_for(tok, tgt, N, c.vocab_size, 41 + r);
        float lf = 0;
        double la = loss_of(a, tok, tgt);
        CHECK(titan_llama_forward_train(f, tok, tgt, 0.5f, &lf) == TITAN_OK, "forward_train: %s",
              titan_error_message());
        CHECK(la == lf, "forward_train loss %.9g vs forward %.9g", (double)lf, la);
        titan_llama_backward(a, 0.5f);
        titan_llama_backward(f, 0.5f);
    }
    CHECK(memcmp(titan_llama_grads_data(a), titan_llama_grads_data(f), np * sizeof(float)) == 0,
          "forward_train + backward gradients differ from forward + backward");
    float l1 = 0;
    CHECK(titan_llama_forward_train(f, tok, tgt, 0.5f, &l1) == TITAN_OK, "forward_train");
    double l2 = loss_of(f, tok, tgt); /* a validation forward in between */
    CHECK(l1 == l2, "plain forward after forward_train: loss %.9g vs %.9g", l2, (double)l1);
    float logits[N * 40];
    memcpy(logits, titan_llama_logits(f), sizeof logits);
    loss_of(a, tok, tgt);
    CHECK(memcmp(logits, titan_llama_logits(a), sizeof logits) == 0,
          "plain forward after forward_train: logits overwritten");
    titan_llama_backward(f, 0.25f); /* recomputes dlogits with its own scale */
    titan_llama_backward(a, 0.25f);
    CHECK(memcmp(titan_llama_grads_data(a), titan_llama_grads_data(f), np * sizeof(float)) == 0,
          "backward after a plain forward differs");
    printf("  forward_train: loss and gradients bitwise equal to forward + backward\n");
    titan_llama_free(a);
    titan_llama_free(f);
}

static void test_accumulation(void) {
    titan_llama_config c = tiny(0);
    titan_llama *m2 = make(&c, B, T, TITAN_AC_NONE), *m4 = make(&c, 2 * B, T, TITAN_AC_NONE);
    size_t np = titan_llama_params_count(m2);
    rough_init(&c, titan_llama_params_data(m2));
    memcpy(titan_llama_params_data(m4), titan_llama_params_data(m2), np * sizeof(float));
    uint32_t tok[2 * N], tgt[2 * N];
    tokens_for(tok, tgt, 2 * N, c.vocab_size, 31);
    titan_llama_zero_grads(m2);
    double l1 = loss_of(m2, tok, tgt);
    titan_llama_backward(m2, 0.5f);
    double l2 = loss_of(m2, tok + N, tgt + N);
    titan_llama_backward(m2, 0.5f);
    titan_llama_zero_grads(m4);
    double l = loss_of(m4, tok, tgt);
    titan_llama_backward(m4, 1.0f);
    CHECK(fabs(0.5 * (l1 + l2) - l) < 1e-6 * l, "losses %.8g + %.8g vs %.8g", l1, l2, l);
    const float *g2 = titan_llama_grads_data(m2), *g4 = titan_llama_grads_data(m4);
    double d2 = 0, n2 = 0, maxrel = 0, gmax = 0;
    for (size_t i = 0; i < np; i++) gmax = fmax(gmax, fabs(g4[i]));
    for (size_t i = 0; i < np; i++) {
        double d = (double)g2[i] - g4[i];
        d2 += d * d;
        n2 += (double)g4[i] * g4[i];
        if (fabs(g4[i]) > 1e-3 * gmax) maxrel = fmax(maxrel, fabs(d) / fabs(g4[i]));
    }
    double rel = sqrt(d2 / n2);
    printf("  gradient accumulation: 2 x (B=%d, scale 0.5) vs B=%d: relative L2 difference %.3g, "
           "max elementwise %.3g\n",
           B, 2 * B, rel, maxrel);
    CHECK(rel < 1e-6, "accumulated gradients differ: relative %.3g", rel);
    titan_llama_free(m2);
    titan_llama_free(m4);
}

static void test_adamw_training(int tied) {
    titan_llama_config c = tiny(tied);
    titan_llama *m = make(&c, B, T, TITAN_AC_FULL);
    titan_llama_init_weights(&c, titan_llama_params_data(m), 77);
    titan_adamw *o = NULL;
    titan_adamw_config hp = {0.9f, 0.95f, 1e-8f, 0.1f};
    CHECK(titan_adamw_create(&o, titan_backend_cpu(), titan_llama_params_count(m), &hp) == TITAN_OK,
          "adamw create: %s", titan_error_message());
    uint32_t tok[N], tgt[N];
    tokens_for(tok, tgt, N, c.vocab_size, 41);
    double first = 0, last = 0, norm0 = 0;
    for (int step = 0; step < 20; step++) {
        titan_llama_zero_grads(m);
        double l = loss_of(m, tok, tgt);
        titan_llama_backward(m, 1.0f);
        double norm = titan_clip_grad_norm(titan_backend_cpu(), titan_llama_grads_data(m),
                                           titan_llama_params_count(m), 1.0);
        if (step == 0) first = l, norm0 = norm;
        last = l;
        titan_adamw_step(o, titan_llama_params_data(m), titan_llama_grads_data(m), 1e-2f);
    }
    CHECK(titan_adamw_get_step(o) == 20, "step count %lld", (long long)titan_adamw_get_step(o));
    printf("  AdamW (%s): loss %.4f -> %.4f in 20 steps (first grad norm %.3g)\n",
           tied ? "tied" : "untied", first, last, norm0);
    CHECK(last < first - 1.0, "loss did not fall enough: %.4f -> %.4f", first, last);
    titan_adamw_free(o);
    titan_llama_free(m);
}

static void test_clip_and_adamw_state(void) {
    const titan_backend *be = titan_backend_cpu();
    float *g = be->alloc(4 * sizeof(float));
    float h[4] = {3, 0, -4, 0};
    be->to_device(g, h, sizeof h);
    double n = titan_clip_grad_norm(be, g, 4, 10.0);
    be->to_host(h, g, sizeof h);
    CHECK(n == 5.0 && h[0] == 3.0f && h[2] == -4.0f, "no clip below max_norm (norm %g)", n);
    n = titan_clip_grad_norm(be, g, 4, 1.0);
    be->to_host(h, g, sizeof h);
    float coef = 1.0f / (5.0f + 1e-6f);
    CHECK(n == 5.0 && h[0] == 3.0f * coef && h[2] == -4.0f * coef, "clip to 1: %g %g", h[0], h[2]);
    CHECK(fabs(titan_grad_norm(be, g, 4) - 1.0) < 1e-6, "norm after clip");

    /* first AdamW step (t = 1): bias correction makes it lr * sign(g) (no decay) */
    titan_adamw *o = NULL;
    titan_adamw_config hp = {0.9f, 0.999f, 1e-8f, 0.0f};
    CHECK(titan_adamw_create(&o, be, 4, &hp) == TITAN_OK, "create");
    float *p = be->alloc(4 * sizeof(float));
    float hp0[4] = {1, 1, 1, 1}, gg[4] = {0.5f, -2.0f, 1e-3f, 0};
    be->to_device(p, hp0, sizeof hp0);
    be->to_device(g, gg, sizeof gg);
    titan_adamw_step(o, p, g, 0.1f);
    be->to_host(hp0, p, sizeof hp0);
    CHECK(fabsf(hp0[0] - 0.9f) < 1e-5f && fabsf(hp0[1] - 1.1f) < 1e-5f &&
              fabsf(hp0[2] - 0.9f) < 1e-4f && hp0[3] == 1.0f,
          "first step: %g %g %g %g", hp0[0], hp0[1], hp0[2], hp0[3]);
    CHECK(titan_adamw_get_step(o) == 1 && titan_adamw_numel(o) == 4, "state");
    float mh[4];
    be->to_host(mh, titan_adamw_m(o), sizeof mh);
    CHECK(fabsf(mh[0] - 0.05f) < 1e-7f, "m = (1 - beta1) g: %g", mh[0]);
    titan_adamw_free(o);
    be->free(p);
    be->free(g);
    CHECK(titan_adamw_create(&o, be, 4, &(titan_adamw_config){1.0f, 0.9f, 1e-8f, 0}) ==
              TITAN_ERR_USAGE, "beta1 = 1 refused");
}

/* ||a - b|| / ||b|| over n floats */
static double rel_l2(const float *a, const float *b, size_t n) {
    double d2 = 0, n2 = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        d2 += d * d;
        n2 += (double)b[i] * b[i];
    }
    return sqrt(d2 / (n2 > 0 ? n2 : 1));
}

/* Mixed precision: bf16 activations and compute weights, fp32 parameters and
 * gradients. Against the fp32 model on the same parameters the loss moves by
 * bf16 rounding (tolerance 1e-2 relative) and the gradients by a few
 * percent (tolerance 5e-2, normalised); AC stays bitwise; the compute copy
 * follows every change of the fp32 parameters. */
static void test_bf16(int tied) {
    titan_llama_config c = tiny(tied);
    c.dim = 64, c.vocab_size = 96;
    int b = 2, t = 16, n = b * t;
    titan_llama *f = make(&c, b, t, TITAN_AC_NONE);
    titan_llama *h = make_dt(&c, b, t, TITAN_AC_NONE, TITAN_DTYPE_BF16);
    titan_llama *hf = make_dt(&c, b, t, TITAN_AC_FULL, TITAN_DTYPE_BF16);
    size_t np = titan_llama_params_count(f);
    CHECK(titan_llama_compute_dtype(h) == TITAN_DTYPE_BF16 && titan_llama_compute_copy_bytes(h) == 2 * np &&
              titan_llama_compute_copy_bytes(f) == 0, "bf16 compute copy of 2 bytes per parameter");
    CHECK(titan_llama_activation_bytes(h) < titan_llama_activation_bytes(f), "bf16 activations are smaller");
    float *p = malloc(np * sizeof(float));
    titan_llama_init_weights(&c, p, 77);
    memcpy(titan_llama_params_data(f), p, np * sizeof(float));
    memcpy(titan_llama_params_data(h), p, np * sizeof(float));
    memcpy(titan_llama_params_data(hf), p, np * sizeof(float));
    uint32_t tok[64], tgt[64];
    tokens_for(tok, tgt, n, c.vocab_size, 41);
    titan_llama_zero_grads(f), titan_llama_zero_grads(h), titan_llama_zero_grads(hf);
    double lf = loss_of(f, tok, tgt), lh = loss_of(h, tok, tgt), lhf = loss_of(hf, tok, tgt);
    titan_llama_backward(f, 1.0f);
    titan_llama_backward(h, 1.0f);
    titan_llama_backward(hf, 1.0f);
    double grel = rel_l2(titan_llama_grads_data(h), titan_llama_grads_data(f), np);
    printf("  bf16 vs fp32 (%s): loss %.6f vs %.6f (rel %.2e), gradients rel L2 %.2e\n", tied ? "tied" : "untied",
           lh, lf, fabs(lh - lf) / lf, grel);
    CHECK(fabs(lh - lf) < 1e-2 * lf, "bf16 loss %.6f vs fp32 %.6f", lh, lf);
    CHECK(lh != lf, "bf16 computes in bf16 (the loss moved)");
    CHECK(grel < 5e-2, "bf16 gradients rel L2 %.3e", grel);
    CHECK(lh == lhf && memcmp(titan_llama_grads_data(h), titan_llama_grads_data(hf), np * sizeof(float)) == 0,
          "bf16: AC none and full agree bitwise");
    CHECK(memcmp(titan_llama_params_data(h), p, np * sizeof(float)) == 0, "fp32 parameters untouched by bf16 compute");

    /* logits through the host copy: bf16 values widened */
    float *lg = malloc((size_t)n * c.vocab_size * sizeof(float));
    CHECK(titan_llama_logits_host(h, lg) == TITAN_OK);
    int exact = 1;
    for (size_t i = 0; i < (size_t)n * c.vocab_size; i++)
        exact &= titan_bf16_to_f32(titan_f32_to_bf16(lg[i])) == lg[i];
    CHECK(exact, "bf16 logits are bf16 values");

    /* the compute copy follows the fp32 parameters: scale them, the loss follows fp32's */
    for (size_t i = 0; i < np; i++) p[i] *= 1.5f;
    memcpy(titan_llama_params_data(f), p, np * sizeof(float));
    memcpy(titan_llama_params_data(h), p, np * sizeof(float));
    double lf2 = loss_of(f, tok, tgt), lh2 = loss_of(h, tok, tgt);
    CHECK(fabs(lh2 - lf2) < 1e-2 * lf2 && fabs(lh2 - lh) > 1e-4, "after a parameter change: bf16 %.6f, fp32 %.6f",
          lh2, lf2);
    free(p), free(lg);
    titan_llama_free(f), titan_llama_free(h), titan_llama_free(hf);
}

int main(void) {
    titan_backend_cpu_set_threads(1);
    printf("test_model_grad:\n");
    test_fd(0);
    test_fd(1);
    test_init_loss(0);
    test_init_loss(1);
    test_ac(0, TITAN_DTYPE_F32);
    test_ac(1, TITAN_DTYPE_F32);
    test_ac(1, TITAN_DTYPE_BF16);
    test_forward_train();
    test_accumulation();
    test_adamw_training(0);
    test_adamw_training(1);
    test_clip_and_adamw_state();
    test_bf16(0);
    test_bf16(1);
    if (failures) {
        fprintf(stderr, "test_model_grad: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_model_grad: ok\n");
    return 0;
}
