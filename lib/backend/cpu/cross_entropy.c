/* cross_entropy.c - fused softmax + cross-entropy over the vocabulary, the
 * loss and its gradient in one pass over each row of logits. */
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

/* losses[n] = logsumexp(row) - row[target]; dlogits = (softmax - onehot) * dscale.
 * The exp sum runs in double over 16 lanes folded in a fixed order, so a
 * row's bits do not depend on the thread count. dlogits may alias logits:
 * each element is read before it is written, the target logit first. */
void titan_cpu_cross_entropy(float *losses, float *dlogits, const float *logits,
                             const uint32_t *targets, int N, int V, float dscale) {
#pragma omp parallel for schedule(static) if ((long)N * V > 2 * TITAN_CPU_BLOCK)
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * V;
        float e[CHUNK];
        float mx = row_max(x, V);
        double lane[16] = {0};
        for (int c0 = 0; c0 < V; c0 += CHUNK) {
            int len = V - c0 < CHUNK ? V - c0 : CHUNK, i = 0;
            for (int j = 0; j < len; j++) e[j] = x[c0 + j] - mx;
            titan_cpu_exp(e, e, len);
            for (; i + 16 <= len; i += 16)
                for (int l = 0; l < 16; l++) lane[l] += (double)e[i + l];
            for (; i < len; i++) lane[i & 15] += (double)e[i];
        }
        double sum = 0.0;
        for (int l = 0; l < 16; l++) sum += lane[l];
        uint32_t tg = targets[n];
        float xt = x[tg];
        double lse = (double)mx + log(sum);
        if (losses) losses[n] = (float)(lse - (double)xt);
        if (dlogits) {
            float *d = dlogits + (size_t)n * V;
            float inv = (float)(1.0 / sum);
            for (int c0 = 0; c0 < V; c0 += CHUNK) {
                int len = V - c0 < CHUNK ? V - c0 : CHUNK;
                for (int j = 0; j < len; j++) e[j] = x[c0 + j] - mx;
                titan_cpu_exp(e, e, len);
                for (int j = 0; j < len; j++) {
                    float onehot = c0 + j == (int)tg ? 1.0f : 0.0f;
                    d[c0 + j] = (e[j] * inv - onehot) * dscale;
                }
            }
        }
    }
}
