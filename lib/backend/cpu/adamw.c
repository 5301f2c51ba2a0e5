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

/* The double a user wrote: the shortest decimal that round-trips to f
 * (0.9f -> 0.9), so 1-b1 and b2^t match Python's double arithmetic. */
static double user_decimal(float f) {
    char buf[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f) return d;
    }
    return (double)f;
}

/* Each element sees the same operations in the same order, with no
 * contraction into FMAs that PyTorch's kernels do not use. v >= 0, so sqrtf
 * never sets errno; saying so lets the loop vectorise (vsqrtps rounds
 * exactly as sqrtf does). */
__attribute__((optimize("fp-contract=off", "no-math-errno")))
void titan_cpu_adamw_step(float *p, const float *g, float *m, float *v, size_t n, float lr,
                          float beta1, float beta2, float eps, float weight_decay, int64_t t) {
    double dlr = user_decimal(lr), db1 = user_decimal(beta1), db2 = user_decimal(beta2);
    double dwd = user_decimal(weight_decay), deps = user_decimal(eps);
    float decay = (float)(1.0 - dlr * dwd);
    float w1 = (float)(1.0 - db1);
    float fb2 = (float)db2, w2 = (float)(1.0 - db2);
    double bc1 = 1.0 - pow(db1, (double)t);
    double bc2 = 1.0 - pow(db2, (double)t);
    float neg_step = (float)(-(dlr / bc1));
    float bc2_sqrt = (float)sqrt(bc2);
    float feps = (float)deps;
    int use_lerp_small = w1 < 0.5f;
#pragma omp parallel for schedule(static) if (n > 4 * TITAN_CPU_BLOCK)
    for (size_t i = 0; i < n; i++) {
        float pi = p[i] * decay;
        float gi = g[i], mi = m[i];
        mi = use_lerp_small ? mi + w1 * (gi - mi) : gi - (gi - mi) * (1.0f - w1);
        float vi = v[i] * fb2;
        vi = vi + (w2 * gi) * gi;
        float denom = sqrtf(vi) / bc2_sqrt + feps;
        pi = pi + (neg_step * mi) / denom;
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
    }
}
