/* test_fp8.c - float8 e4m3fn / e5m2 (tensor/fp8.h) and the CPU backend's
 * float8 linears (backend.h fp8_matmul_*).
 *
 *   codes     every one of the 256 codes of each format decodes to torch's
 *             value (the table below, written by torch 2.x:
 *             torch.arange(256, dtype=uint8).view(float8_*).float());
 *   encode    every finite value encodes to its own code; the midpoints
 *             between neighbours round to the even code, one fp32 ulp either
 *             side to the nearer; saturation (+-inf and past max to +-max),
 *             NaN to torch's NaN code, -0 to 0x80;
 *   scales    torchao's amax_to_scale edges (amax 0, the pow2 rounding that
 *             log2f rounds up);
 *   round     quantize then dequantize: within half a float8 step of the
 *             value (relative 2^-4 e4m3, 2^-3 e5m2 in the normal range),
 *             and quantizing the result again gives the same bytes;
 *   gemm      fp8_matmul_forward/backward on the CPU backend, each recipe,
 *             f32 and bf16: equal to a double-precision product of the
 *             dequantized operands within fp32 accumulation error
 *             (K x 2^-24 x sum |a||b|), and the counts of float8 GEMMs;
 *   golden    with a directory argument (tests/python/float8_reference.py
 *             --write DIR, torchao 0.17 emulate=True): every cast's fp8
 *             bytes and scales bitwise, and out / grad_in / grad_w within
 *             the index's tolerance (f32: 1e-5 x max|golden|; bf16: one
 *             bf16 ulp). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "check.h"
#include "core/rng.h"
#include "tensor/dtype.h"
#include "tensor/fp8.h"

static const float torch_e4m3fn[256] = {
    0x0.0p+0, 0x1p-9, 0x1p-8, 0x1.800p-8, 0x1p-7, 0x1.400p-7, 0x1.800p-7, 0x1.c00p-7,
    0x1p-6, 0x1.200p-6, 0x1.400p-6, 0x1.600p-6, 0x1.800p-6, 0x1.a00p-6, 0x1.c00p-6, 0x1.e00p-6,
    0x1p-5, 0x1.200p-5, 0x1.400p-5, 0x1.600p-5, 0x1.800p-5, 0x1.a00p-5, 0x1.c00p-5, 0x1.e00p-5,
    0x1p-4, 0x1.200p-4, 0x1.400p-4, 0x1.600p-4, 0x1.800p-4, 0x1.a00p-4, 0x1.c00p-4, 0x1.e00p-4,
    0x1p-3, 0x1.200p-3, 0x1.400p-3, 0x1.600p-3, 0x1.800p-3, 0x1.a00p-3, 0x1.c00p-3, 0x1.e00p-3,
    0x1p-2, 0x1.200p-2, 0x1.400p-2, 0x1.600p-2, 0x1.800p-2, 0x1.a00p-2, 0x1.c00p-2, 0x1.e00p-2,
    0x1p-1, 0x1.200p-1, 0x1.400p-1, 0x1.600p-1, 0x1.800p-1, 0x1.a00p-1, 0x1.c00p-1, 0x1.e00p-1,
    0x1p+0, 0x1.200p+0, 0x1.400p+0, 0x1.600p+0, 0x1.800p+0, 0x1.a00p+0, 0x1.c00p+0, 0x1.e00p+0,
    0x1p+1, 0x1.200p+1, 0x1.400p+1, 0x1.600p+1, 0x1.800p+1, 0x1.a00p+1, 0x1.c00p+1, 0x1.e00p+1,
    0x1p+2, 0x1.200p+2, 0x1.400p+2, 0x1.600p+2, 0x1.800p+2, 0x1.a00p+2, 0x1.c00p+2, 0x1.e00p+2,
    0x1p+3, 0x1.200p+3, 0x1.400p+3, 0x1.600p+3, 0x1.800p+3, 0x1.a00p+3, 0x1.c00p+3, 0x1.e00p+3,
    0x1p+4, 0x1.200p+4, 0x1.400p+4, 0x1.600p+4, 0x1.800p+4, 0x1.a00p+4, 0x1.c00p+4, 0x1.e00p+4,
    0x1p+5, 0x1.200p+5, 0x1.400p+5, 0x1.600p+5, 0x1.800p+5, 0x1.a00p+5, 0x1.c00p+5, 0x1.e00p+5,
    0x1p+6, 0x1.200p+6, 0x1.400p+6, 0x1.600p+6, 0x1.800p+6, 0x1.a00p+6, 0x1.c00p+6, 0x1.e00p+6,
    0x1p+7, 0x1.200p+7, 0x1.400p+7, 0x1.600p+7, 0x1.800p+7, 0x1.a00p+7, 0x1.c00p+7, 0x1.e00p+7,
    0x1p+8, 0x1.200p+8, 0x1.400p+8, 0x1.600p+8, 0x1.800p+8, 0x1.a00p+8, 0x1.c00p+8, NAN,
    -0x0.0p+0, -0x1p-9, -0x1p-8, -0x1.800p-8, -0x1p-7, -0x1.400p-7, -0x1.800p-7, -0x1.c00p-7,
    -0x1p-6, -0x1.200p-6, -0x1.400p-6, -0x1.600p-6, -0x1.800p-6, -0x1.a00p-6, -0x1.c00p-6, -0x1.e00p-6,
    -0x1p-5, -0x1.200p-5, -0x1.400p-5, -0x1.600p-5, -0x1.800p-5, -0x1.a00p-5, -0x1.c00p-5, -0x1.e00p-5,
    -0x1p-4, -0x1.200p-4, -0x1.400p-4, -0x1.600p-4, -0x1.800p-4, -0x1.a00p-4, -0x1.c00p-4, -0x1.e00p-4,
    -0x1p-3, -0x1.200p-3, -0x1.400p-3, -0x1.600p-3, -0x1.800p-3, -0x1.a00p-3, -0x1.c00p-3, -0x1.e00p-3,
    -0x1p-2, -0x1.200p-2, -0x1.400p-2, -0x1.600p-2, -0x1.800p-2, -0x1.a00p-2, -0x1.c00p-2, -0x1.e00p-2,
    -0x1p-1, -0x1.200p-1, -0x1.400p-1, -0x1.600p-1, -0x1.800p-1, -0x1.a00p-1, -0x1.c00p-1, -0x1.e00p-1,
    -0x1p+0, -0x1.200p+0, -0x1.400p+0, -0x1.600p+0, -0x1.800p+0, -0x1.a00p+0, -0x1.c00p+0, -0x1.e00p+0,
    -0x1p+1, -0x1.200p+1, -0x1.400p+1, -0x1.600p+1, -0x1.800p+1, -0x1.a00p+1, -0x1.c00p+1, -0x1.e00p+1,
    -0x1p+2, -0x1.200p+2, -0x1.400p+2, -0x1.600p+2, -0x1.800p+2, -0x1.a00p+2, -0x1.c00p+2, -0x1.e00p+2,
    -0x1p+3, -0x1.200p+3, -0x1.400p+3, -0x1.600p+3, -0x1.800p+3, -0x1.a00p+3, -0x1.c00p+3, -0x1.e00p+3,
    -0x1p+4, -0x1.200p+4, -0x1.400p+4, -0x1.600p+4, -0x1.800p+4, -0x1.a00p+4, -0x1.c00p+4, -0x1.e00p+4,
    -0x1p+5, -0x1.200p+5, -0x1.400p+5, -0x1.600p+5, -0x1.800p+5, -0x1.a00p+5, -0x1.c00p+5, -0x1.e00p+5,
    -0x1p+6, -0x1.200p+6, -0x1.400p+6, -0x1.600p+6, -0x1.800p+6, -0x1.a00p+6, -0x1.c00p+6, -0x1.e00p+6,
    -0x1p+7, -0x1.200p+7, -0x1.400p+7, -0x1.600p+7, -0x1.800p+7, -0x1.a00p+7, -0x1.c00p+7, -0x1.e00p+7,
    -0x1p+8, -0x1.200p+8, -0x1.400p+8, -0x1.600p+8, -0x1.800p+8, -0x1.a00p+8, -0x1.c00p+8, NAN,
};
static const float torch_e5m2[256] = {
    0x0.0p+0, 0x1p-16, 0x1p-15, 0x1.800p-15, 0x1p-14, 0x1.400p-14, 0x1.800p-14, 0x1.c00p-14,
    0x1p-13, 0x1.400p-13, 0x1.800p-13, 0x1.c00p-13, 0x1p-12, 0x1.400p-12, 0x1.800p-12, 0x1.c00p-12,
    0x1p-11, 0x1.400p-11, 0x1.800p-11, 0x1.c00p-11, 0x1p-10, 0x1.400p-10, 0x1.800p-10, 0x1.c00p-10,
    0x1p-9, 0x1.400p-9, 0x1.800p-9, 0x1.c00p-9, 0x1p-8, 0x1.400p-8, 0x1.800p-8, 0x1.c00p-8,
    0x1p-7, 0x1.400p-7, 0x1.800p-7, 0x1.c00p-7, 0x1p-6, 0x1.400p-6, 0x1.800p-6, 0x1.c00p-6,
    0x1p-5, 0x1.400p-5, 0x1.800p-5, 0x1.c00p-5, 0x1p-4, 0x1.400p-4, 0x1.800p-4, 0x1.c00p-4,
    0x1p-3, 0x1.400p-3, 0x1.800p-3, 0x1.c00p-3, 0x1p-2, 0x1.400p-2, 0x1.800p-2, 0x1.c00p-2,
    0x1p-1, 0x1.400p-1, 0x1.800p-1, 0x1.c00p-1, 0x1p+0, 0x1.400p+0, 0x1.800p+0, 0x1.c00p+0,
    0x1p+1, 0x1.400p+1, 0x1.800p+1, 0x1.c00p+1, 0x1p+2, 0x1.400p+2, 0x1.800p+2, 0x1.c00p+2,
    0x1p+3, 0x1.400p+3, 0x1.800p+3, 0x1.c00p+3, 0x1p+4, 0x1.400p+4, 0x1.800p+4, 0x1.c00p+4,
    0x1p+5, 0x1.400p+5, 0x1.800p+5, 0x1.c00p+5, 0x1p+6, 0x1.400p+6, 0x1.800p+6, 0x1.c00p+6,
    0x1p+7, 0x1.400p+7, 0x1.800p+7, 0x1.c00p+7, 0x1p+8, 0x1.400p+8, 0x1.800p+8, 0x1.c00p+8,
    0x1p+9, 0x1.400p+9, 0x1.800p+9, 0x1.c00p+9, 0x1p+10, 0x1.400p+10, 0x1.800p+10, 0x1.c00p+10,
    0x1p+11, 0x1.400p+11, 0x1.800p+11, 0x1.c00p+11, 0x1p+12, 0x1.400p+12, 0x1.800p+12, 0x1.c00p+12,
    0x1p+13, 0x1.400p+13, 0x1.800p+13, 0x1.c00p+13, 0x1p+14, 0x1.400p+14, 0x1.800p+14, 0x1.c00p+14,
    0x1p+15, 0x1.400p+15, 0x1.800p+15, 0x1.c00p+15, INFINITY, NAN, NAN, NAN,
    -0x0.0p+0, -0x1p-16, -0x1p-15, -0x1.800p-15, -0x1p-14, -0x1.400p-14, -0x1.800p-14, -0x1.c00p-14,
    -0x1p-13, -0x1.400p-13, -0x1.800p-13, -0x1.c00p-13, -0x1p-12, -0x1.400p-12, -0x1.800p-12, -0x1.c00p-12,
    -0x1p-11, -0x1.400p-11, -0x1.800p-11, -0x1.c00p-11, -0x1p-10, -0x1.400p-10, -0x1.800p-10, -0x1.c00p-10,
    -0x1p-9, -0x1.400p-9, -0x1.800p-9, -0x1.c00p-9, -0x1p-8, -0x1.400p-8, -0x1.800p-8, -0x1.c00p-8,
    -0x1p-7, -0x1.400p-7, -0x1.800p-7, -0x1.c00p-7, -0x1p-6, -0x1.400p-6, -0x1.800p-6, -0x1.c00p-6,
    -0x1p-5, -0x1.400p-5, -0x1.800p-5, -0x1.c00p-5, -0x1p-4, -0x1.400p-4, -0x1.800p-4, -0x1.c00p-4,
    -0x1p-3, -0x1.400p-3, -0x1.800p-3, -0x1.c00p-3, -0x1p-2, -0x1.400p-2, -0x1.800p-2, -0x1.c00p-2,
    -0x1p-1, -0x1.400p-1, -0x1.800p-1, -0x1.c00p-1, -0x1p+0, -0x1.400p+0, -0x1.800p+0, -0x1.c00p+0,
    -0x1p+1, -0x1.400p+1, -0x1.800p+1, -0x1.c00p+1, -0x1p+2, -0x1.400p+2, -0x1.800p+2, -0x1.c00p+2,
    -0x1p+3, -0x1.400p+3, -0x1.800p+3, -0x1.c00p+3, -0x1p+4, -0x1.400p+4, -0x1.800p+4, -0x1.c00p+4,
    -0x1p+5, -0x1.400p+5, -0x1.800p+5, -0x1.c00p+5, -0x1p+6, -0x1.400p+6, -0x1.800p+6, -0x1.c00p+6,
    -0x1p+7, -0x1.400p+7, -0x1.800p+7, -0x1.c00p+7, -0x1p+8, -0x1.400p+8, -0x1.800p+8, -0x1.c00p+8,
    -0x1p+9, -0x1.400p+9, -0x1.800p+9, -0x1.c00p+9, -0x1p+10, -0x1.400p+10, -0x1.800p+10, -0x1.c00p+10,
    -0x1p+11, -0x1.400p+11, -0x1.800p+11, -0x1.c00p+11, -0x1p+12, -0x1.400p+12, -0x1.800p+12, -0x1.c00p+12,
    -0x1p+13, -0x1.400p+13, -0x1.800p+13, -0x1.c00p+13, -0x1p+14, -0x1.400p+14, -0x1.800p+14, -0x1.c00p+14,
    -0x1p+15, -0x1.400p+15, -0x1.800p+15, -0x1.c00p+15, -INFINITY, NAN, NAN, NAN,
};

static const titan_fp8_format FORMATS[2] = {TITAN_FP8_E4M3, TITAN_FP8_E5M2};
static const char *const RECIPES[3] = {"tensorwise", "rowwise", "rowwise_with_gw_hp"};

static int same_float(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return memcmp(&a, &b, sizeof a) == 0; /* -0 and 0 apart */
}

static void test_codes(void) {
    for (int fi = 0; fi < 2; fi++) {
        titan_fp8_format f = FORMATS[fi];
        const float *want = f == TITAN_FP8_E4M3 ? torch_e4m3fn : torch_e5m2;
        int bad = 0;
        for (int c = 0; c < 256; c++) {
            float got = titan_fp8_decode((uint8_t)c, f);
            if (!same_float(got, want[c])) {
                if (bad++ < 4) fprintf(stderr, "%s code 0x%02x: %a, torch %a\n", titan_fp8_format_name(f), c, got, want[c]);
            }
        }
        CHECK(bad == 0, "%s: %d of 256 codes decode differently from torch", titan_fp8_format_name(f), bad);
        printf("%-4s %s: all 256 codes decode to torch's values\n", bad ? "FAIL" : "ok", titan_fp8_format_name(f));
    }
    CHECK(titan_fp8_decode(0x7e, TITAN_FP8_E4M3) == 448.0f && titan_fp8_decode(0x01, TITAN_FP8_E4M3) == 0x1p-9f);
    CHECK(titan_fp8_decode(0x7b, TITAN_FP8_E5M2) == 57344.0f && titan_fp8_decode(0x01, TITAN_FP8_E5M2) == 0x1p-16f);
    CHECK(isinf(titan_fp8_decode(0x7c, TITAN_FP8_E5M2)) && isnan(titan_fp8_decode(0x7f, TITAN_FP8_E4M3)));
}

/* the finite non-negative codes in increasing value: 0 .. max_code */
static void test_encode(void) {
    for (int fi = 0; fi < 2; fi++) {
        titan_fp8_format f = FORMATS[fi];
        const char *nm = titan_fp8_format_name(f);
        uint8_t maxc = f == TITAN_FP8_E4M3 ? 0x7e : 0x7b;
        int bad = 0, ties = 0;
        for (int c = 0; c <= 0xff; c++) {
            float v = titan_fp8_decode((uint8_t)c, f);
            if (!isfinite(v)) continue;
            bad += titan_fp8_encode(v, f) != c;
        }
        for (int c = 0; c < maxc; c++) { /* between c and c + 1 (same sign, increasing) */
            float lo = titan_fp8_decode((uint8_t)c, f), hi = titan_fp8_decode((uint8_t)(c + 1), f);
            float mid = (float)(((double)lo + hi) / 2); /* exact in fp32 */
            int even = (c & 1) ? c + 1 : c;
            bad += titan_fp8_encode(mid, f) != even;
            bad += titan_fp8_encode(-mid, f) != (0x80 | even);
            bad += titan_fp8_encode(nextafterf(mid, INFINITY), f) != c + 1;
            bad += titan_fp8_encode(nextafterf(mid, 0.0f), f) != c;
            ties++;
        }
        float mx = titan_fp8_max(f);
        bad += titan_fp8_encode(INFINITY, f) != maxc;
        bad += titan_fp8_encode(-INFINITY, f) != (0x80 | maxc);
        bad += titan_fp8_encode(mx * 1.03f, f) != maxc;
        bad += titan_fp8_encode(3.0e38f, f) != maxc;
        bad += titan_fp8_encode(-mx * 7.0f, f) != (0x80 | maxc);
        bad += titan_fp8_encode(NAN, f) != 0x7f;
        bad += titan_fp8_encode(-NAN, f) != 0xff;
        bad += titan_fp8_encode(-0.0f, f) != 0x80;
        bad += titan_fp8_encode(1e-30f, f) != 0; /* below half the smallest subnormal */
        CHECK(bad == 0, "%s: %d encodings wrong", nm, bad);
        printf("%-4s %s: every finite value, %d ties to even (both signs), +-1 ulp around them, saturation, NaN\n",
               bad ? "FAIL" : "ok", nm, ties);
    }
}

static void test_scales(void) {
    /* amax 0 scales as amax 1e-12 */
    CHECK(titan_fp8_scale(0.0f, TITAN_FP8_E4M3, 0) == (float)(448.0 / 1e-12));
    /* amax nextafter(3.5): scale just below 128, which fp32 log2 rounds to 7 */
    float a = nextafterf(3.5f, INFINITY);
    float s = titan_fp8_scale(a, TITAN_FP8_E4M3, 0);
    CHECK(s < 128.0f && s > 127.99f, "%a", s);
    CHECK(titan_fp8_scale(a, TITAN_FP8_E4M3, 1) == 128.0f, "%a", titan_fp8_scale(a, TITAN_FP8_E4M3, 1));
    CHECK(titan_fp8_scale(5.0f, TITAN_FP8_E4M3, 1) == 64.0f); /* 89.6 -> 64 */
    CHECK(titan_fp8_scale(1.0f, TITAN_FP8_E5M2, 0) == 57344.0f);
    CHECK(isnan(titan_fp8_scale(NAN, TITAN_FP8_E5M2, 1)));
}

static float *rand_tensor(size_t n, uint64_t stream, double sd) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)(sd * (titan_rng_uniform(7, stream, i) * 2.0 - 1.0) * 1.7);
    return x;
}

static void test_round_trip(void) {
    int R = 37, C = 53;
    float *x = rand_tensor((size_t)R * C, 1, 3.0);
    x[5] = 40.0f; /* an outlier */
    uint8_t *q = malloc((size_t)R * C), *q2 = malloc((size_t)R * C);
    float *dq = malloc((size_t)R * C * sizeof(float)), scale[64];
    for (int fi = 0; fi < 2; fi++)
        for (int axis = 0; axis < 3; axis++)
            for (int pow2 = 0; pow2 < 2; pow2++) {
                titan_fp8_format f = FORMATS[fi];
                titan_fp8_quantize(q, scale, x, TITAN_DTYPE_F32, R, C, (titan_fp8_axis)axis, f, pow2);
                titan_fp8_dequantize(dq, q, scale, 0, R, C, (titan_fp8_axis)axis, f);
                double rel = f == TITAN_FP8_E4M3 ? 0x1p-4 : 0x1p-3;
                double sub = ldexp(1.0, f == TITAN_FP8_E4M3 ? -10 : -17); /* half the smallest subnormal */
                int bad = 0;
                for (int r = 0; r < R; r++)
                    for (int c = 0; c < C; c++) {
                        size_t i = (size_t)r * C + c;
                        float sc = axis == TITAN_FP8_ROWS ? scale[r] : axis == TITAN_FP8_COLS ? scale[c] : scale[0];
                        double err = fabs((double)dq[i] - x[i]);
                        if (err > fmax(rel * fabs(x[i]), sub / sc) + 1e-6 * fabs(x[i])) bad++; /* + fp32 roundings */
                    }
                /* dq quantized with the same scales gives the same bytes */
                titan_fp8_cast(q2, dq, TITAN_DTYPE_F32, scale, 0, R, C, (titan_fp8_axis)axis, f);
                int same = memcmp(q, q2, (size_t)R * C) == 0;
                CHECK(bad == 0 && same, "%s axis %d pow2 %d: %d values off, requantized %s",
                      titan_fp8_format_name(f), axis, pow2, bad, same ? "same" : "differs");
            }
    printf("%-4s quantize/dequantize round trips: 2 formats x 3 granularities x pow2 on/off\n", failures ? "FAIL" : "ok");
    free(x), free(q), free(q2), free(dq);
}

/* ---- the CPU backend's float8 linears against double products ---- */

/* The dequantized operand of cast c (serial reference, lib/tensor). */
static float *deq_ref(const titan_fp8_recipe *r, int c, const void *x, titan_dtype dt, int rows, int cols) {
    size_t n = (size_t)rows * cols;
    uint8_t *q = malloc(n);
    float *s = malloc((size_t)(rows > cols ? rows : cols) * sizeof(float)), *d = malloc(n * sizeof(float));
    titan_fp8_axis ax = titan_fp8_recipe_axis(r, c);
    titan_fp8_quantize(q, s, x, dt, rows, cols, ax, (titan_fp8_format)r->format[c], r->pow2);
    titan_fp8_dequantize(d, q, s, 0, rows, cols, ax, (titan_fp8_format)r->format[c]);
    free(q), free(s);
    return d;
}

/* C[M,N] = sum_k A(i,k) B(k,j) in double, and the bound K 2^-24 sum |A||B|
 * per element, A(i,k) = a[i*sai + k*sak], B(k,j) = b[k*sbk + j*sbj]. */
static void ref_gemm(double *c, double *bound, const float *a, int sai, int sak, const float *b, int sbk, int sbj,
                     int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, m = 0;
            for (int k = 0; k < K; k++) {
                double p = (double)a[(size_t)i * sai + (size_t)k * sak] * b[(size_t)k * sbk + (size_t)j * sbj];
                s += p, m += fabs(p);
            }
            c[(size_t)i * N + j] = s;
            bound[(size_t)i * N + j] = K * 0x1p-24 * m;
        }
}

static float get(const void *p, titan_dtype dt, size_t i) {
    return dt == TITAN_DTYPE_BF16 ? titan_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

/* |got - want| <= bound (+ half a bf16 ulp of want when got was rounded to bf16); returns the
 * largest ratio of the error to its bound */
static double within(const void *got, titan_dtype dt, const double *want, const double *bound, size_t n, int *bad) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double tol = bound[i] + (dt == TITAN_DTYPE_BF16 ? fabs(want[i]) * 0x1p-8 : 0) + 1e-30;
        double e = fabs((double)get(got, dt, i) - want[i]) / tol;
        if (!(e <= 1.0)) (*bad)++;
        if (e > worst || e != e) worst = e;
    }
    return worst;
}

static void *to_dt(const float *x, size_t n, titan_dtype dt) {
    void *p = malloc(n * titan_dtype_size(dt));
    titan_dtype_convert(p, dt, x, TITAN_DTYPE_F32, n);
    return p;
}

static void test_gemm(void) {
    const titan_backend *be = titan_backend_cpu();
    int N = 70, IC = 48, OC = 96; /* N not a block multiple */
    float *xf = rand_tensor((size_t)N * IC, 11, 2.0), *wf = rand_tensor((size_t)OC * IC, 12, 0.2);
    float *gf = rand_tensor((size_t)N * OC, 13, 1e-3);
    xf[3] = 30.0f;
    double *want = malloc((size_t)N * (IC > OC ? IC : OC) * (IC > OC ? IC : OC) * sizeof(double));
    double *bound = malloc((size_t)N * (IC > OC ? IC : OC) * (IC > OC ? IC : OC) * sizeof(double));
    for (int dti = 0; dti < 2; dti++) {
        titan_dtype dt = dti ? TITAN_DTYPE_BF16 : TITAN_DTYPE_F32;
        void *x = to_dt(xf, (size_t)N * IC, dt), *w = to_dt(wf, (size_t)OC * IC, dt), *g = to_dt(gf, (size_t)N * OC, dt);
        void *out = malloc((size_t)N * OC * 4), *din = malloc((size_t)N * IC * 4);
        float *dw = malloc((size_t)OC * IC * 4);
        for (int ri = 0; ri < 3; ri++) {
            titan_fp8_recipe r;
            CHECK(titan_fp8_recipe_from_name(RECIPES[ri], &r) == 0);
            int bad = 0;
            double worst = 0;
            /* out = x w^T */
            float *a = deq_ref(&r, TITAN_FP8_X_OUT, x, dt, N, IC), *b = deq_ref(&r, TITAN_FP8_W_OUT, w, dt, OC, IC);
            ref_gemm(want, bound, a, IC, 1, b, 1, IC, N, OC, IC);
            int n_out = be->fp8_matmul_forward(dt, &r, out, x, w, NULL, N, IC, OC);
            worst = fmax(worst, within(out, dt, want, bound, (size_t)N * OC, &bad));
            free(a), free(b);
            /* grad_in = g w */
            a = deq_ref(&r, TITAN_FP8_GO_GI, g, dt, N, OC), b = deq_ref(&r, TITAN_FP8_W_GI, w, dt, OC, IC);
            ref_gemm(want, bound, a, OC, 1, b, IC, 1, N, IC, OC);
            int n_bwd = be->fp8_matmul_backward(dt, &r, 0, din, dw, g, x, w, N, IC, OC);
            worst = fmax(worst, within(din, dt, want, bound, (size_t)N * IC, &bad));
            free(a), free(b);
            /* grad_w = g^T x, fp32 (high precision: the operands as they are) */
            int hp = r.format[TITAN_FP8_GO_GW] == TITAN_FP8_NONE;
            float *gx = malloc((size_t)N * OC * 4), *xx = malloc((size_t)N * IC * 4);
            titan_dtype_convert(gx, TITAN_DTYPE_F32, g, dt, (size_t)N * OC);
            titan_dtype_convert(xx, TITAN_DTYPE_F32, x, dt, (size_t)N * IC);
            a = hp ? gx : deq_ref(&r, TITAN_FP8_GO_GW, g, dt, N, OC);
            b = hp ? xx : deq_ref(&r, TITAN_FP8_X_GW, x, dt, N, IC);
            ref_gemm(want, bound, a, 1, OC, b, IC, 1, OC, IC, N);
            worst = fmax(worst, within(dw, TITAN_DTYPE_F32, want, bound, (size_t)OC * IC, &bad));
            if (!hp) free(a), free(b);
            free(gx), free(xx);
            int want_gemms = ri == 2 ? 1 : 2;
            CHECK(bad == 0 && n_out == 1 && n_bwd == want_gemms, "%s %s: %d elements off, gemms %d + %d",
                  titan_dtype_name(dt), RECIPES[ri], bad, n_out, n_bwd);
            printf("%-4s fp8 linear %-4s %-18s out/grad_in/grad_w vs double on dequantized operands: worst "
                   "%.2f of the fp32 accumulation bound; float8 GEMMs %d fwd + %d bwd\n",
                   bad ? "FAIL" : "ok", titan_dtype_name(dt), RECIPES[ri], worst, n_out, n_bwd);
        }
        free(x), free(w), free(g), free(out), free(din), free(dw);
    }
    free(xf), free(wf), free(gf), free(want), free(bound);
}

/* resid (out = resid + product, as matmul_add_forward) and the acc bits */
static void test_acc(void) {
    const titan_backend *be = titan_backend_cpu();
    int N = 33, IC = 32, OC = 16;
    float *x = rand_tensor((size_t)N * IC, 21, 1.0), *w = rand_tensor((size_t)OC * IC, 22, 0.3);
    float *g = rand_tensor((size_t)N * OC, 23, 0.1), *res = rand_tensor((size_t)N * OC, 24, 1.0);
    float *o1 = malloc((size_t)N * OC * 4), *o2 = malloc((size_t)N * OC * 4);
    float *d1 = rand_tensor((size_t)N * IC, 25, 1.0), *d2 = malloc((size_t)N * IC * 4);
    float *w1 = rand_tensor((size_t)OC * IC, 26, 1.0), *w2 = malloc((size_t)OC * IC * 4);
    titan_fp8_recipe r;
    titan_fp8_recipe_from_name("tensorwise", &r);
    be->fp8_matmul_forward(TITAN_DTYPE_F32, &r, o1, x, w, res, N, IC, OC);
    be->fp8_matmul_forward(TITAN_DTYPE_F32, &r, o2, x, w, NULL, N, IC, OC);
    int bad = 0;
    for (int i = 0; i < N * OC; i++) bad += !same_float(o1[i], res[i] + o2[i]);
    memcpy(d2, d1, (size_t)N * IC * 4);
    memcpy(w2, w1, (size_t)OC * IC * 4);
    be->fp8_matmul_backward(TITAN_DTYPE_F32, &r, TITAN_ACC_DX | TITAN_ACC_DW, d1, w1, g, x, w, N, IC, OC);
    float *df = malloc((size_t)N * IC * 4), *wg = malloc((size_t)OC * IC * 4);
    be->fp8_matmul_backward(TITAN_DTYPE_F32, &r, 0, df, wg, g, x, w, N, IC, OC);
    double e = 0;
    for (int i = 0; i < N * IC; i++) e = fmax(e, fabs(d1[i] - (d2[i] + df[i])) / (fabs(d2[i]) + fabs(df[i]) + 1e-30));
    for (int i = 0; i < OC * IC; i++) e = fmax(e, fabs(w1[i] - (w2[i] + wg[i])) / (fabs(w2[i]) + fabs(wg[i]) + 1e-30));
    CHECK(bad == 0 && e < 1e-5, "resid: %d differ; acc rel err %g", bad, e);
    printf("%-4s fp8 linear resid (bitwise product + resid) and += (rel err %.1e)\n", bad || e >= 1e-5 ? "FAIL" : "ok", e);
    free(x), free(w), free(g), free(res), free(o1), free(o2), free(d1), free(d2), free(w1), free(w2), free(df), free(wg);
}

/* ---- torchao's golden files ---- */

static void *read_file(const char *dir, const char *rel, size_t want_bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "rb");
    void *p = malloc(want_bytes ? want_bytes : 1);
    size_t got = f ? fread(p, 1, want_bytes, f) : 0;
    if (f) fclose(f);
    CHECK(got == want_bytes, "%s: read %zu of %zu bytes", path, got, want_bytes);
    if (got != want_bytes) memset(p, 0, want_bytes);
    return p;
}

static const char *const CAST_NAMES[TITAN_FP8_NCASTS] = {"x_out", "w_out", "go_gi", "w_gi", "go_gw", "x_gw"};

/* |got - golden| over max |golden| (f32), or in bf16 ulps of |golden| */
static double golden_err(const void *got, titan_dtype gdt, const float *gold, size_t n, int ulps) {
    double worst = 0, mx = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(gold[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)get(got, gdt, i) - gold[i]);
        double u = ulps ? ldexp(1.0, ilogb(fmax(fabs(gold[i]), 0x1p-126)) - 7) : mx;
        double e = d / (u > 0 ? u : 1);
        if (e > worst || e != e) worst = e;
    }
    return worst;
}

static void golden_case(const char *dir, const char *name, int M, int K, int N) {
    titan_dtype dt = strcmp(name, "bf16") == 0 ? TITAN_DTYPE_BF16 : TITAN_DTYPE_F32;
    char rel[512];
    size_t nx = (size_t)M * K, nw = (size_t)N * K, ng = (size_t)M * N;
    snprintf(rel, sizeof rel, "%s/x.f32", name);
    float *xf = read_file(dir, rel, nx * 4);
    snprintf(rel, sizeof rel, "%s/w.f32", name);
    float *wf = read_file(dir, rel, nw * 4);
    snprintf(rel, sizeof rel, "%s/grad_out.f32", name);
    float *gf = read_file(dir, rel, ng * 4);
    void *x = to_dt(xf, nx, dt), *w = to_dt(wf, nw, dt), *g = to_dt(gf, ng, dt);
    const void *ops[TITAN_FP8_NCASTS] = {x, w, g, w, g, x};
    const int rows[TITAN_FP8_NCASTS] = {M, N, M, N, M, M}, cols[TITAN_FP8_NCASTS] = {K, K, N, K, N, K};
    const titan_backend *be = titan_backend_cpu();
    for (int ri = 0; ri < 3; ri++) {
        titan_fp8_recipe r;
        titan_fp8_recipe_from_name(RECIPES[ri], &r);
        int cast_bad = 0, casts = 0;
        for (int c = 0; c < TITAN_FP8_NCASTS; c++) {
            if (r.format[c] == TITAN_FP8_NONE) continue;
            titan_fp8_axis ax = titan_fp8_recipe_axis(&r, c);
            size_t n = (size_t)rows[c] * cols[c];
            int ns = titan_fp8_nscales(ax, rows[c], cols[c]);
            uint8_t *q = malloc(n);
            float *s = malloc((size_t)ns * 4);
            titan_fp8_quantize(q, s, ops[c], dt, rows[c], cols[c], ax, (titan_fp8_format)r.format[c], r.pow2);
            snprintf(rel, sizeof rel, "%s/%s/%s.fp8.u8", name, RECIPES[ri], CAST_NAMES[c]);
            uint8_t *gq = read_file(dir, rel, n);
            snprintf(rel, sizeof rel, "%s/%s/%s.scale.f32", name, RECIPES[ri], CAST_NAMES[c]);
            float *gs = read_file(dir, rel, (size_t)ns * 4);
            int ok = memcmp(q, gq, n) == 0 && memcmp(s, gs, (size_t)ns * 4) == 0;
            CHECK(ok, "%s %s %s: fp8 bytes or scales differ from torchao's", name, RECIPES[ri], CAST_NAMES[c]);
            cast_bad += !ok, casts++;
            free(q), free(s), free(gq), free(gs);
        }
        /* the three GEMMs through the backend */
        void *out = malloc(ng * 4), *din = malloc(nx * 4);
        float *dw = malloc(nw * 4);
        int gemms = be->fp8_matmul_forward(dt, &r, out, x, w, NULL, M, K, N);
        gemms += be->fp8_matmul_backward(dt, &r, 0, din, dw, g, x, w, M, K, N);
        double err[3];
        const void *mine[3] = {out, din, dw};
        const char *gname[3] = {"out", "grad_in", "grad_w"};
        const size_t sizes[3] = {ng, nx, nw};
        int bad = 0;
        for (int k = 0; k < 3; k++) {
            snprintf(rel, sizeof rel, "%s/%s/%s.f32", name, RECIPES[ri], gname[k]);
            float *gold = read_file(dir, rel, sizes[k] * 4);
            /* dw is fp32 in titan (torchao rounds it to the input dtype) */
            err[k] = golden_err(mine[k], k == 2 ? TITAN_DTYPE_F32 : dt, gold, sizes[k], dt == TITAN_DTYPE_BF16);
            double tol = dt == TITAN_DTYPE_BF16 ? 1.0 : 1e-5;
            if (!(err[k] <= tol)) bad++;
            free(gold);
        }
        CHECK(bad == 0 && gemms == titan_fp8_recipe_gemms(&r),
              "%s %s: GEMMs off torchao's", name, RECIPES[ri]);
        printf("%-4s torchao golden %-4s %-18s %d/%d casts bitwise; out %.2g grad_in %.2g grad_w %.2g %s; "
               "%d float8 GEMMs\n", bad || cast_bad ? "FAIL" : "ok", name, RECIPES[ri], casts - cast_bad, casts,
               err[0], err[1], err[2], dt == TITAN_DTYPE_BF16 ? "bf16 ulps (tol 1)" : "x max|golden| (tol 1e-5)",
               gemms);
        free(out), free(din), free(dw);
    }
    free(xf), free(wf), free(gf), free(x), free(w), free(g);
}

static void test_golden(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/index.json", dir);
    json_error_t jerr;
    json_t *ix = json_load_file(path, 0, &jerr);
    CHECK(ix != NULL, "%s: %s", path, jerr.text);
    if (!ix) return;
    json_t *cases = json_object_get(ix, "cases");
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *c = json_array_get(cases, i);
        golden_case(dir, json_string_value(json_object_get(c, "name")),
                    (int)json_integer_value(json_object_get(c, "M")), (int)json_integer_value(json_object_get(c, "K")),
                    (int)json_integer_value(json_object_get(c, "N")));
    }
    CHECK(json_array_size(cases) == 2);
    json_decref(ix);
}

int main(int argc, char **argv) {
    titan_backend_cpu_set_threads(2);
    test_codes();
    test_encode();
    test_scales();
    test_round_trip();
    test_gemm();
    test_acc();
    if (argc > 1) test_golden(argv[1]);
    else printf("skip torchao golden files (give the directory tests/python/float8_reference.py --write made)\n");
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures != 0;
}
