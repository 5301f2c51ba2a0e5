/* fp8.h - the float8 formats of float8 training (OCP FP8, as torch's
 * float8_e4m3fn and float8_e5m2) and torchao's dynamic scaling.
 *
 * e4m3fn: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinity,
 *         S.1111.111 is NaN, max 448, smallest subnormal 2^-9.
 * e5m2:   1 sign, 5 exponent bits (bias 15), 2 mantissa bits; IEEE-like:
 *         S.11111.00 is infinity, S.11111.xx (xx != 0) NaN, max 57344,
 *         smallest subnormal 2^-16.
 *
 * Casts saturate as torchao's to_fp8_saturated does (clamp to +-max, then
 * round to nearest, ties to even; subnormals kept): infinities become +-max,
 * NaN stays NaN (torch's codes: 0x7f, 0xff with the sign).
 *
 * Scaling (torchao.float8.float8_utils): amax = max |x| over the tensor, or
 * over one axis of a 2-D tensor (rowwise); scale = fp32(fmax / max(amax,
 * 1e-12)) computed in double; the rowwise recipes round it down to a power
 * of two, 2^floor(log2f(scale)) (log2 rounded to fp32 first, as torch's
 * fp32 log2 does). The float8 value is cast(fp32(x * scale)); it stands for
 * fp32(decode(q) / scale). */
#ifndef TITAN_TENSOR_FP8_H
#define TITAN_TENSOR_FP8_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tensor/dtype.h"

typedef enum {
    TITAN_FP8_NONE = 0, /* no cast: high precision */
    TITAN_FP8_E4M3 = 1, /* float8_e4m3fn */
    TITAN_FP8_E5M2 = 2, /* float8_e5m2 */
} titan_fp8_format;

#define TITAN_FP8_E4M3_MAX 448.0f
#define TITAN_FP8_E5M2_MAX 57344.0f
#define TITAN_FP8_SCALE_EPS 1e-12 /* torchao's EPS: amax below it scales as it */

/* The codec's steps, inline so that the GPU's casts (kernels/fp8.cu) run
 * these very lines (__host__ __device__ under nvcc): one definition of the
 * bytes for both backends. titan_fp8_encode / titan_fp8_decode below are
 * them by format. */
#ifdef __CUDACC__
#define TITAN_FP8_INLINE static __host__ __device__ __forceinline__
#else
#define TITAN_FP8_INLINE static inline
#endif

typedef struct {
    int mbits, bias;
    unsigned max_code; /* the largest finite magnitude's code */
    float max;
} titan_fp8_info;

TITAN_FP8_INLINE titan_fp8_info titan_fp8_info_of(titan_fp8_format f) {
    titan_fp8_info e4m3 = {3, 7, 0x7e, TITAN_FP8_E4M3_MAX}, e5m2 = {2, 15, 0x7b, TITAN_FP8_E5M2_MAX};
    return f == TITAN_FP8_E5M2 ? e5m2 : e4m3;
}

/* titan_fp8_encode with the format's info at hand (a cast's inner loop) */
TITAN_FP8_INLINE uint8_t titan_fp8_encode_with(float x, titan_fp8_info fi) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    uint8_t sign = (uint8_t)((bits >> 31) << 7);
    if (isnan(x)) return sign | 0x7f;
    float a = fabsf(x);
    if (a >= fi.max) return sign | (uint8_t)fi.max_code; /* saturate (infinity too) */
    if (a < ldexpf(1.0f, 1 - fi.bias)) {
        /* subnormal range: multiples of 2^(1-bias-mbits); the scaling by a
         * power of two is exact and rintf rounds ties to even. A result of
         * 2^mbits is the smallest normal, whose code is that same number. */
        return sign | (uint8_t)rintf(ldexpf(a, fi.bias - 1 + fi.mbits));
    }
    /* normal: drop 23 - mbits mantissa bits of the fp32 pattern, ties to
     * even; a carry moves into the exponent, as it should */
    uint32_t ab = bits & 0x7fffffffu;
    int shift = 23 - fi.mbits;
    uint32_t r = (ab + ((1u << (shift - 1)) - 1) + ((ab >> shift) & 1)) >> shift;
    int e = (int)(r >> fi.mbits) - 127 + fi.bias;
    return sign | (uint8_t)((e << fi.mbits) | (r & ((1u << fi.mbits) - 1)));
}

TITAN_FP8_INLINE float titan_fp8_decode_with(uint8_t code, titan_fp8_format f) {
    titan_fp8_info fi = titan_fp8_info_of(f);
    int sign = code >> 7, mask = (1 << fi.mbits) - 1;
    int e = (code & 0x7f) >> fi.mbits, m = code & mask;
    int emax = 0x7f >> fi.mbits; /* all exponent bits set */
    float v;
    if (f == TITAN_FP8_E4M3 && e == emax && m == mask) v = NAN;
    else if (f == TITAN_FP8_E5M2 && e == emax) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexpf((float)m, 1 - fi.bias - fi.mbits); /* subnormal */
    else v = ldexpf((float)(m | (1 << fi.mbits)), e - fi.bias - fi.mbits);
    return sign ? -v : v;
}

/* max of two amaxes that keeps a NaN (torch's amax propagates it): how
 * partial maxima fold, over row blocks or over the ranks of a group */
static inline float titan_fp8_amax_max(float a, float b) { return isnan(a) || a >= b ? a : b; }
/* all[0..n) = the max over ranks of all[ranks x n] (rank by rank, as a
 * group's all-gather leaves them): a shard's amax made the whole tensor's */
static inline void titan_fp8_amax_fold_ranks(float *all, int ranks, size_t n) {
    for (int r = 1; r < ranks; r++)
        for (size_t i = 0; i < n; i++) all[i] = titan_fp8_amax_max(all[i], all[(size_t)r * n + i]);
}
/* "e4m3fn", "e5m2", "none" */
const char *titan_fp8_format_name(titan_fp8_format f);
float titan_fp8_max(titan_fp8_format f);

/* The value of a code (NaN codes give NaN, e5m2's infinity codes +-inf). */
float titan_fp8_decode(uint8_t code, titan_fp8_format f);
/* The saturating, round-to-nearest-even cast of x (see above). */
uint8_t titan_fp8_encode(float x, titan_fp8_format f);

/* torchao's amax_to_scale (pow2: rounded down to a power of two). A NaN
 * amax gives a NaN scale. */
float titan_fp8_scale(float amax, titan_fp8_format f, int pow2);

/* Scaling granularity of a cast of a 2-D tensor [rows, cols]:
 * TITAN_FP8_TENSOR one scale; TITAN_FP8_ROWS one per row (amax over the
 * columns, scale[rows]); TITAN_FP8_COLS one per column (amax over the rows,
 * scale[cols]). */
typedef enum { TITAN_FP8_TENSOR = 0, TITAN_FP8_ROWS = 1, TITAN_FP8_COLS = 2 } titan_fp8_axis;

/* Number of scales a cast has: 1, rows or cols. */
int titan_fp8_nscales(titan_fp8_axis axis, int rows, int cols);

/* amax[nscales] = max |x| as the axis says, over rows [r0, r1) of x (of
 * type dt, f32 or bf16), folded into amax with max (the caller starts it at
 * 0): row blocks can be reduced in any order, max is exact. NaN propagates. */
void titan_fp8_amax(float *amax, const void *x, titan_dtype dt, int r0, int r1, int cols,
                    titan_fp8_axis axis);

/* q[r][c] = encode(fp32(x[r][c] * scale)) for rows [r0, r1), with scale the
 * cast's (scale[0], scale[r] or scale[c]). */
void titan_fp8_cast(uint8_t *q, const void *x, titan_dtype dt, const float *scale, int r0, int r1,
                    int cols, titan_fp8_axis axis, titan_fp8_format f);

/* out[r][c] = fp32(decode(q[r][c]) / scale) for rows [r0, r1): torchao's
 * dequantization (a division, not a product with the reciprocal). */
void titan_fp8_dequantize(float *out, const uint8_t *q, const float *scale, int r0, int r1, int cols,
                          titan_fp8_axis axis, titan_fp8_format f);

/* The whole cast of a tensor, serially: amax, scale (pow2 as the recipe
 * says), q. scale gets titan_fp8_nscales values. */
void titan_fp8_quantize(uint8_t *q, float *scale, const void *x, titan_dtype dt, int rows, int cols,
                        titan_fp8_axis axis, titan_fp8_format f, int pow2);

/* ---- torchao's float8 linear recipes ----
 *
 * A linear y = x w^T, x [N, IC], w [OC, IC], dy [N, OC], has three GEMMs:
 *   out     = x w^T       operands x_out, w_out
 *   grad_in = dy w        operands go_gi, w_gi
 *   grad_w  = dy^T x      operands go_gw, x_gw
 * Each operand has its own cast: a format (NONE: the GEMM runs in high
 * precision) and, rowwise, a scale per row along the GEMM's inner
 * (contraction) dimension (torchao's axiswise_dim). */
enum { TITAN_FP8_X_OUT, TITAN_FP8_W_OUT, TITAN_FP8_GO_GI, TITAN_FP8_W_GI, TITAN_FP8_GO_GW, TITAN_FP8_X_GW,
       TITAN_FP8_NCASTS };

typedef struct {
    unsigned char format[TITAN_FP8_NCASTS];  /* titan_fp8_format */
    unsigned char rowwise[TITAN_FP8_NCASTS]; /* 1: along the inner dimension; 0: one scale */
    unsigned char pow2;                      /* round_scales_to_power_of_2 */
    unsigned char emulate;                   /* torchao's emulate: dequantized operands, fp32 products
                                                (a backend without float8 GEMMs always emulates) */
    /* Per cast, the amax to scale from, given by the caller (backend
     * memory, the cast's nscales values), or NULL: the operand's own.
     * Tensor parallelism gives a shard the whole tensor's amax, reduced
     * over the group, as torchao's float8 does for a DTensor. Per call:
     * the recipes above leave them NULL. */
    const float *amax[TITAN_FP8_NCASTS];
    /* Per cast, whether its operand's cast serves neighbouring calls too
     * (titan_fp8_share): x's casts only (X_OUT, X_GW), where consecutive
     * linears read one x (the model's wk, wv and wq; w1 and w3). Per
     * call: the recipes above leave them 0. */
    unsigned char share[TITAN_FP8_NCASTS];
} titan_fp8_recipe;

/* A shared cast: SHARE_KEEP casts the operand and the backend holds the
 * cast after the call; SHARE_USE takes the held cast instead of casting
 * (the caller vouches that the operand is the same tensor, unchanged, and
 * the cast the same: the bytes are those a cast would make) and holds it
 * on; SHARE_LAST takes it and lets it go. A backend holds one cast per
 * kind (X_OUT, X_GW); KEEP while one is held, or USE and LAST with none,
 * are the caller's bug (the backend stops). */
typedef enum { TITAN_FP8_SHARE_NONE = 0, TITAN_FP8_SHARE_KEEP, TITAN_FP8_SHARE_USE, TITAN_FP8_SHARE_LAST } titan_fp8_share;

/* torchao's Float8LinearConfig.from_recipe_name: "tensorwise", "rowwise",
 * "rowwise_with_gw_hp". Returns 0, or -1 for another name. */
int titan_fp8_recipe_from_name(const char *name, titan_fp8_recipe *out);
/* The granularity of cast c of a recipe, in the orientation of its operand
 * (x [N, IC], w [OC, IC], dy [N, OC]). Inline: the CUDA library, which
 * links no libtitan, uses it too. */
static inline titan_fp8_axis titan_fp8_recipe_axis(const titan_fp8_recipe *r, int c) {
    if (!r->rowwise[c]) return TITAN_FP8_TENSOR;
    /* the inner dimension: IC for out's operands, OC for grad_in's dy and
     * N for grad_w's; w's OC (its rows) for grad_in */
    return c == TITAN_FP8_X_OUT || c == TITAN_FP8_W_OUT || c == TITAN_FP8_GO_GI ? TITAN_FP8_ROWS : TITAN_FP8_COLS;
}
/* How many of the three GEMMs run in float8 with a recipe: out always,
 * grad_in always, grad_w unless its casts are NONE. */
int titan_fp8_recipe_gemms(const titan_fp8_recipe *r);

#endif
