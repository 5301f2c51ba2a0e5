/* adamw.cu - one AdamW step with the CPU backend's (= torch.optim.AdamW,
 * foreach=False) arithmetic, operation by operation:
 *   p *= 1 - lr*wd
 *   m.lerp_(g, 1-b1)            (m + w*(g-m) when w < 0.5, else g - (g-m)*(1-w))
 *   v = v*b2 + ((1-b2)*g)*g
 *   denom = sqrt(v)/sqrt(1-b2^t) + eps
 *   p += (-lr/(1-b1^t) * m) / denom
 * The scalars are formed on the host exactly as lib/backend/cpu/adamw.c does;
 * the kernel spells every fp32 operation with a _rn intrinsic so nvcc cannot
 * contract them into FMAs: the CPU and GPU steps give the same bits. With
 * p_bf16 the step also writes the bf16 compute copy of the new p (rounded
 * as convert() rounds), saving the cast's separate read of p. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ops.cuh"

typedef struct {
    float gscale; /* gradient clipping's factor, 1 for none */
    float decay, w1, one_minus_w1, fb2, w2, neg_step, bc2_sqrt, eps;
    int lerp_small;
} adamw_scalars;

/* The double a user wrote: the shortest decimal that round-trips to f
 * (0.9f -> 0.9), so 1-b1 and b2^t match Python's double arithmetic. A copy
 * of lib/tensor's titan_f32_user_decimal: this library links no libtitan.a. */
static double user_decimal(float f) {
    char buf[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f) return d;
    }
    return (double)f;
}

/* One element's update; the same operations in the same order everywhere. */
static __device__ __forceinline__ void adamw_one(float &p, float g, float &m, float &v,
                                                 const adamw_scalars &s) {
    g = __fmul_rn(g, s.gscale); /* exact for 1: the clipped gradient, rounded once */
    float pi = __fmul_rn(p, s.decay);
    float mi = s.lerp_small ? __fadd_rn(m, __fmul_rn(s.w1, __fsub_rn(g, m)))
                            : __fsub_rn(g, __fmul_rn(__fsub_rn(g, m), s.one_minus_w1));
    float vi = __fmul_rn(v, s.fb2);
    vi = __fadd_rn(vi, __fmul_rn(__fmul_rn(s.w2, g), g));
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bc2_sqrt), s.eps);
    p = __fadd_rn(pi, __fdiv_rn(__fmul_rn(s.neg_step, mi), denom));
    m = mi;
    v = vi;
}

/* Four elements a thread through 16-byte loads and stores: the step is pure
 * bandwidth (28 bytes per parameter, 30 with the bf16 copy). n4 = n / 4
 * when every pointer is 16-byte aligned (cudaMalloc's are), else 0; the
 * tail kernel takes the rest one by one. */
__global__ void adamw_kernel4(float4 *p, const float4 *g, float4 *m, float4 *v, uint2 *copy,
                              size_t n4, adamw_scalars s) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 pi = p[i], gi = g[i], mi = m[i], vi = v[i];
        adamw_one(pi.x, gi.x, mi.x, vi.x, s);
        adamw_one(pi.y, gi.y, mi.y, vi.y, s);
        adamw_one(pi.z, gi.z, mi.z, vi.z, s);
        adamw_one(pi.w, gi.w, mi.w, vi.w, s);
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
        if (copy) {
            __nv_bfloat162 lo = __floats2bfloat162_rn(pi.x, pi.y);
            __nv_bfloat162 hi = __floats2bfloat162_rn(pi.z, pi.w);
            uint2 c;
            memcpy(&c.x, &lo, 4);
            memcpy(&c.y, &hi, 4);
            copy[i] = c;
        }
    }
}

__global__ void adamw_kernel(float *p, const float *g, float *m, float *v, bf16 *copy, size_t lo,
                             size_t n, adamw_scalars s) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = lo + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float pi = p[i], mi = m[i], vi = v[i];
        adamw_one(pi, g[i], mi, vi, s);
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
        if (copy) copy[i] = __float2bfloat16_rn(pi);
    }
}

void titan_cuda_adamw_step(float *p, void *p_bf16, const float *g, float gscale, float *m,
                           float *v, size_t n, float lr, float beta1, float beta2, float eps,
                           float weight_decay, int64_t t) {
    if (n == 0) return;
    double dlr = user_decimal(lr), db1 = user_decimal(beta1), db2 = user_decimal(beta2);
    double dwd = user_decimal(weight_decay), deps = user_decimal(eps);
    adamw_scalars s;
    s.gscale = gscale;
    s.decay = (float)(1.0 - dlr * dwd);
    s.w1 = (float)(1.0 - db1);
    s.one_minus_w1 = 1.0f - s.w1; /* fp32, as the CPU loop computes it */
    s.lerp_small = s.w1 < 0.5f;
    s.fb2 = (float)db2, s.w2 = (float)(1.0 - db2);
    double bc1 = 1.0 - pow(db1, (double)t);
    double bc2 = 1.0 - pow(db2, (double)t);
    s.neg_step = (float)(-(dlr / bc1));
    s.bc2_sqrt = (float)sqrt(bc2);
    s.eps = (float)deps;
    bf16 *copy = (bf16 *)p_bf16;
    /* 16-byte vectors need 16-byte aligned starts (8 for the copy) */
    int aligned = (((uintptr_t)p | (uintptr_t)g | (uintptr_t)m | (uintptr_t)v) & 15) == 0 &&
                  ((uintptr_t)copy & 7) == 0;
    size_t n4 = aligned ? n / 4 : 0;
    cudaStream_t stream = titan_cuda_optimizer_stream(); /* the side stream while it is on */
    if (n4) {
        adamw_kernel4<<<titan_cuda_blocks(n4, 256), 256, 0, stream>>>((float4 *)p, (const float4 *)g,
                                                          (float4 *)m, (float4 *)v, (uint2 *)copy,
                                                          n4, s);
        CUDA_CHECK_LAUNCH();
    }
    if (4 * n4 < n) {
        adamw_kernel<<<titan_cuda_blocks(n - 4 * n4, 256), 256, 0, stream>>>(p, g, m, v, copy, 4 * n4, n, s);
        CUDA_CHECK_LAUNCH();
    }
}
