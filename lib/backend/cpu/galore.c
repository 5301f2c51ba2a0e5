/* galore.c - the CPU backend's GaLore steps (backend.h's galore_adam,
 * galore_update): elementwise, each fp32 operation rounded once, as the
 * CUDA kernels (kernels/galore.cu) spell them with _rn intrinsics, so the
 * two give the same bits. */
#include <math.h>

#include "backend/cpu/cpu_ops.h"

__attribute__((optimize("fp-contract=off")))
void titan_cpu_galore_adam(float *m, float *v, float *low, size_t n, float b1, float w1, float b2, float w2,
                           float eps) {
#pragma omp parallel for schedule(static) if (n > (1u << 16))
    for (size_t i = 0; i < n; i++) {
        float x = low[i];
        float mi = m[i] * b1 + w1 * x;
        float vi = v[i] * b2 + (w2 * x) * x;
        m[i] = mi;
        v[i] = vi;
        low[i] = mi / (sqrtf(vi) + eps);
    }
}

__attribute__((optimize("fp-contract=off")))
void titan_cpu_galore_update(float *p, const float *upd, size_t n, float scale, float step, float decay) {
    float neg_step = -step, neg_decay = -decay;
#pragma omp parallel for schedule(static) if (n > (1u << 16))
    for (size_t i = 0; i < n; i++) {
        float q = p[i] + neg_step * (upd[i] * scale);
        p[i] = decay > 0.0f ? q + neg_decay * q : q;
    }
}
