/* adamw.cu - one AdamW step with the CPU backend's (= torch.optim.AdamW,
 * foreach=False) arithmetic, operation by operation:
 *   p *= 1 - lr*wd
 *   m.lerp_(g, 1-b1)            (m + w*(g-m) when w < 0.5, else g - (g-m)*(1-w))
 *   v = v*b2 + ((1-b2)*g)*g
 *   denom = sqrt(v)/sqrt(1-b2^t) + eps
 *   p += (-lr/(1-b1^t) * m) / denom
 * The scalars are formed on the host exactly as lib/backend/cpu/adamw.c does;
 * the kernel spells every fp32 operation with a _rn intrinsic so nvcc cannot
 * contract them into FMAs: the CPU and GPU steps give the same bits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_ops.cuh"

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

__global__ void adamw_kernel(float *p, const float *g, float *m, float *v, size_t n, float decay,
                             float w1, float one_minus_w1, int lerp_small, float fb2, float w2,
                             float neg_step, float bc2_sqrt, float eps) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float pi = __fmul_rn(p[i], decay);
        float gi = g[i], mi = m[i];
        mi = lerp_small ? __fadd_rn(mi, __fmul_rn(w1, __fsub_rn(gi, mi)))
                        : __fsub_rn(gi, __fmul_rn(__fsub_rn(gi, mi), one_minus_w1));
        float vi = __fmul_rn(v[i], fb2);
        vi = __fadd_rn(vi, __fmul_rn(__fmul_rn(w2, gi), gi));
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
        pi = __fadd_rn(pi, __fdiv_rn(__fmul_rn(neg_step, mi), denom));
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
    }
}

void titan_cuda_adamw_step(float *p, const float *g, float *m, float *v, size_t n, float lr,
                           float beta1, float beta2, float eps, float weight_decay, int64_t t) {
    if (n == 0) return;
    double dlr = user_decimal(lr), db1 = user_decimal(beta1), db2 = user_decimal(beta2);
    double dwd = user_decimal(weight_decay), deps = user_decimal(eps);
    float decay = (float)(1.0 - dlr * dwd);
    float w1 = (float)(1.0 - db1);
    float one_minus_w1 = 1.0f - w1; /* fp32, as the CPU loop computes it */
    float fb2 = (float)db2, w2 = (float)(1.0 - db2);
    double bc1 = 1.0 - pow(db1, (double)t);
    double bc2 = 1.0 - pow(db2, (double)t);
    float neg_step = (float)(-(dlr / bc1));
    float bc2_sqrt = (float)sqrt(bc2);
    adamw_kernel<<<titan_cuda_blocks(n, 256), 256>>>(p, g, m, v, n, decay, w1, one_minus_w1,
                                                     w1 < 0.5f, fb2, w2, neg_step, bc2_sqrt,
                                                     (float)deps);
    CUDA_CHECK_LAUNCH();
}
