/* cross_entropy.c - fused softmax + cross-entropy over the vocabulary, the
 * loss and its gradient in one pass over each row of logits; and the rows'
 * log-sum-exp alone, which ranks holding shards of the vocabulary combine
 * before their cross-entropy. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"

enum { CHUNK = 512 }; /* a multiple of 16: lane = index & 15 within the row */

typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

/* max over a row in 16 lanes (gcc does not vectorise the scalar select) */
static float row_max(const float *x, int V) {
    v16f m = (v16f){0} - INFINITY;
    int i = 0;
    for (; i + 16 <= V; i += 16) {
        v16f a;
        memcpy(&a, x + i, sizeof a);
        v16i gt = a > m;
        m = (v16f)((gt & (v16i)a) | (~gt & (v16i)m));
    }
    float r = m[0];
    for (int l = 1; l < 16; l++) r = m[l] > r ? m[l] : r;
    for (; i < V; i++) r = x[i] > r ? x[i] : r;
    return r;
}

/* The row's max (*mx) and its sum of exp(x - max). The sum runs in double
 * over 16 lanes folded in a fixed order, so a row's bits do not depend on
 * the thread count. e: CHUNK floats of scratch. */
static double row_exp_sum(const float *x, int V, float *mx, float *e) {
    float m = row_max(x, V);
    double lane[16] = {0};
    for (int c0 = 0; c0 < V; c0 += CHUNK) {
        int len = V - c0 < CHUNK ? V - c0 : CHUNK, i = 0;
        for (int j = 0; j < len; j++) e[j] = x[c0 + j] - m;
        titan_cpu_exp(e, e, len);
        for (; i + 16 <= len; i += 16)
            for (int l = 0; l < 16; l++) lane[l] += (double)e[i + l];
        for (; i < len; i++) lane[i & 15] += (double)e[i];
    }
    double sum = 0.0;
    for (int l = 0; l < 16; l++) sum += lane[l];
    *mx = m;
    return sum;
}

/* d[j] = (exp(x[j] - shift) * inv - [j == tg]) * dscale over a row of V.
 * Element by element, each read before it is written: d may alias x. */
static void row_grad(float *d, const float *x, int V, float shift, float inv, uint32_t tg,
                     float dscale, float *e) {
    for (int c0 = 0; c0 < V; c0 += CHUNK) {
        int len = V - c0 < CHUNK ? V - c0 : CHUNK;
        for (int j = 0; j < len; j++) e[j] = x[c0 + j] - shift;
        titan_cpu_exp(e, e, len);
        for (int j = 0; j < len; j++) {
            float onehot = (uint32_t)(c0 + j) == tg ? 1.0f : 0.0f;
            d[c0 + j] = (e[j] * inv - onehot) * dscale;
        }
    }
}

/* Without lse: losses[n] = logsumexp(row) - row[target] and dlogits =
 * (softmax - onehot) * dscale, the softmax as exp(x - max) * (float)(1/sum).
 * With lse (the whole row's, the row here one shard): exp(x - lse) in one
 * pass, and a loss only where the target is in this shard. dlogits may
 * alias logits: the target logit is read before the row is written. */
void titan_cpu_cross_entropy(float *losses, float *dlogits, const float *logits,
                             const uint32_t *targets, int N, int V, float dscale,
                             const float *lse) {
#pragma omp parallel for schedule(static) if ((long)N * V > 2 * TITAN_CPU_BLOCK)
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * V;
        float e[CHUNK], shift, inv, loss;
        uint32_t tg = targets[n];
        if (lse) {
            shift = lse[n], inv = 1.0f; /* exact: e * 1 == e */
            loss = tg < (uint32_t)V ? (float)((double)lse[n] - (double)x[tg]) : 0.0f;
        } else {
            double sum = row_exp_sum(x, V, &shift, e);
            inv = (float)(1.0 / sum);
            loss = (float)((double)shift + log(sum) - (double)x[tg]);
        }
        if (losses) losses[n] = loss;
        if (dlogits) row_grad(dlogits + (size_t)n * V, x, V, shift, inv, tg, dscale, e);
    }
}

/* lse[n] = max + log(sum exp(x - max)), the same arithmetic as above. */
void titan_cpu_logsumexp(float *lse, const float *logits, int N, int V) {
#pragma omp parallel for schedule(static) if ((long)N * V > 2 * TITAN_CPU_BLOCK)
    for (int n = 0; n < N; n++) {
        float e[CHUNK], mx;
        double sum = row_exp_sum(logits + (size_t)n * V, V, &mx, e);
        lse[n] = (float)((double)mx + log(sum));
    }
}
