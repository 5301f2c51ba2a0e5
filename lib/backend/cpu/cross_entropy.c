/* cross_entropy.c - fused softmax + cross-entropy over the vocabulary, the
 * loss and its gradient in one pass over each row of logits. */
#include <math.h>

#include "backend/cpu/cpu_ops.h"

enum { CHUNK = 512 };

/* losses[n] = logsumexp(row) - row[target]; dlogits = (softmax - onehot) * dscale.
 * The exp sum runs in double over fixed chunks, so a row's bits do not depend
 * on the thread count. dlogits may alias logits: each element is read before
 * it is written, and the target logit is saved first. */
void titan_cpu_cross_entropy(float *losses, float *dlogits, const float *logits,
                             const uint32_t *targets, int N, int V, float dscale) {
#pragma omp parallel for schedule(static) if ((long)N * V > 2 * TITAN_CPU_BLOCK)
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * V;
        float e[CHUNK];
        float mx = -INFINITY;
        for (int i = 0; i < V; i++) mx = x[i] > mx ? x[i] : mx;
        double lane[16] = {0};
        for (int c0 = 0; c0 < V; c0 += CHUNK) {
            int len = V - c0 < CHUNK ? V - c0 : CHUNK;
            for (int i = 0; i < len; i++) e[i] = x[c0 + i] - mx;
            titan_cpu_exp(e, e, len);
            for (int i = 0; i < len; i++) lane[i & 15] += (double)e[i];
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
                for (int i = 0; i < len; i++) e[i] = x[c0 + i] - mx;
                titan_cpu_exp(e, e, len);
                for (int i = 0; i < len; i++) {
                    float onehot = c0 + i == (int)tg ? 1.0f : 0.0f;
                    d[c0 + i] = (e[i] * inv - onehot) * dscale;
                }
            }
        }
    }
}
