/* adamw.c - one AdamW step with torch.optim.AdamW's (foreach=False)
 * arithmetic, operation by operation, so a run can be compared with a
 * PyTorch reference bit for bit:
 *   p *= 1 - lr*wd
 *   m.lerp_(g, 1-b1)            (m + w*(g-m) since w < 0.5)
 *   v = v*b2 + (1-b2)*g*g       (addcmul: v + ((1-b2)*g)*g)
 *   denom = sqrt(v)/sqrt(1-b2^t) + eps
 *   p += (-lr/(1-b1^t) * m) / denom   (addcdiv: p + (value*m)/denom)
 * PyTorch forms the scalars in double from the user's decimal hyper-
 * parameters and rounds each to fp32 where it meets a tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/cpu/cpu_ops.h"
#include "tensor/dtype.h"

typedef struct {
    float decay, w1, b2, w2, neg_step, bc2_sqrt, eps;
} adamw_scalars;

/* g * gscale rounded once into gs (the clipped gradient): the step then
 * reads it as it would read gradients scaled in a pass of their own. */
__attribute__((optimize("fp-contract=off"))) static void scale_block(float *restrict gs,
                                                                     const float *restrict g,
                                                                     size_t n, float gscale) {
    for (size_t i = 0; i < n; i++) gs[i] = g[i] * gscale;
}

/* Each element sees the same operations in the same order, with no
 * contraction into FMAs that PyTorch's kernels do not use. lerp's two forms
 * are two loops (the m update vectorises; the sqrtf loop stays scalar while
 * sqrtf may set errno: ~4 ns/element, about 1% of a debug-model step). */
__attribute__((optimize("fp-contract=off"))) static void
adamw_block(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
            size_t n, const adamw_scalars *s) {
    float decay = s->decay, w1 = s->w1, b2 = s->b2, w2 = s->w2, neg_step = s->neg_step;
    float bc2_sqrt = s->bc2_sqrt, eps = s->eps;
    if (w1 < 0.5f) {
        for (size_t i = 0; i < n; i++) m[i] = m[i] + w1 * (g[i] - m[i]);
    } else {
        for (size_t i = 0; i < n; i++) m[i] = g[i] - (g[i] - m[i]) * (1.0f - w1);
    }
    for (size_t i = 0; i < n; i++) {
        float vi = v[i] * b2;
        vi = vi + (w2 * g[i]) * g[i];
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        p[i] = p[i] * decay + (neg_step * m[i]) / denom;
        v[i] = vi;
    }
}

/* the scalars as Python forms them: double, one rounding per operation */
__attribute__((optimize("fp-contract=off")))
void titan_cpu_adamw_step(float *p, void *p_bf16, const float *g, float gscale, float *m,
                          float *v, size_t n, float lr, float beta1, float beta2, float eps,
                          float weight_decay, int64_t t) {
    double dlr = titan_f32_user_decimal(lr), db1 = titan_f32_user_decimal(beta1), db2 = titan_f32_user_decimal(beta2);
    double dwd = titan_f32_user_decimal(weight_decay), deps = titan_f32_user_decimal(eps);
    adamw_scalars s;
    s.decay = (float)(1.0 - dlr * dwd);
    s.w1 = (float)(1.0 - db1);
    s.b2 = (float)db2, s.w2 = (float)(1.0 - db2);
    s.neg_step = (float)(-(dlr / (1.0 - pow(db1, (double)t))));
    s.bc2_sqrt = (float)sqrt(1.0 - pow(db2, (double)t));
    s.eps = (float)deps;
    long nb = (long)((n + TITAN_CPU_BLOCK - 1) / TITAN_CPU_BLOCK);
#pragma omp parallel for schedule(static) if (nb > 4)
    for (long b = 0; b < nb; b++) {
        size_t lo = (size_t)b * TITAN_CPU_BLOCK;
        size_t len = n - lo < TITAN_CPU_BLOCK ? n - lo : TITAN_CPU_BLOCK;
        float gs[TITAN_CPU_BLOCK];
        const float *gb = g + lo;
        if (gscale != 1.0f) {
            scale_block(gs, gb, len, gscale);
            gb = gs;
        }
        adamw_block(p + lo, gb, m + lo, v + lo, len, &s);
        if (p_bf16) /* while the block is in cache; serial, as this piece is */
            titan_dtype_convert((uint16_t *)p_bf16 + lo, TITAN_DTYPE_BF16, p + lo, TITAN_DTYPE_F32,
                                len);
    }
}
