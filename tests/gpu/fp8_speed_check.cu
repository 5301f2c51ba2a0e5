/* fp8_speed_check.cu - where a float8 linear's time goes on this GPU: each
 * cast (kernels/fp8.cu: amax, scale, the cast; plain and transposed,
 * tensorwise and rowwise) in GB/s beside a device-to-device copy, the
 * float8 product alone (matmul.cu's gemm_fp8) in TFLOP/s beside the bf16
 * product of the same shape, and the whole float8 linear (fp8_matmul.cu,
 * forward and backward) beside the bf16 linear, all in the same run. The
 * transposed casts and dy's two-layout cast run twice: with the 64 x 64
 * tiles (16-byte loads and stores; both of dy's layouts from one read) and
 * with the element-wise 32 x 32 tiles, one cast a layout
 * (TITAN_CUDA_FP8_CAST=simple), which must give the same bytes (checked
 * here on the GPU). First, fp8_encode.cuh's conversion instruction against
 * the codec's own lines (tensor/fp8.h) for every fp32 bit pattern, both
 * formats, each element of a pair. The 1B's shapes by default: 8192 tokens, dim 2048, FFN
 * 8192. Prints one line per measurement, then "all ok".
 *   nvcc -std=c++17 -O3 -arch=native -Ilib -Ikernels tests/gpu/fp8_speed_check.cu kernels/fp8.cu \
 *        kernels/fp8_matmul.cu kernels/matmul.cu kernels/elementwise.cu -lcublasLt -o build/fp8_speed_check
 *   build/fp8_speed_check [N IC OC] */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ops.cuh"
#include "fp8_encode.cuh"
#include "../tests/gpu/cuda_standins.h"

enum { REPS = 20 };

/* cuda_backend.cu's, which this program does not link */
void titan_cuda_bad_dtype(const char *file, int line, const char *op, titan_dtype dt) {
    fprintf(stderr, "titan: cuda: %s:%d: %s: dtype %d\n", file, line, op, (int)dt);
    abort();
}

static cudaEvent_t ev_a, ev_b;

static float ms_of(void) {
    float ms = 0;
    CUDA_CHECK(cudaEventSynchronize(ev_b));
    CUDA_CHECK(cudaEventElapsedTime(&ms, ev_a, ev_b));
    return ms / REPS;
}

__global__ void fill(bf16 *x, size_t n, float scale, uint32_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
        x[i] = __float2bfloat16_rn(scale * ((float)(h & 0xffff) / 65536.0f - 0.5f));
    }
}

static bf16 *random_bf16(size_t n, float scale, uint32_t seed) {
    bf16 *p;
    CUDA_CHECK(cudaMalloc(&p, n * sizeof(bf16)));
    fill<<<4096, 256>>>(p, n, scale, seed);
    CUDA_CHECK_LAUNCH();
    return p;
}

/* every fp32 pattern b as a pair's first element (its partner ~b, the
 * second): the instruction's codes against the codec's; wrong counts the
 * codes that differ, first the lowest pattern where one does */
__global__ void encode_every_kernel(unsigned long long *wrong, unsigned *first, int f) {
    titan_fp8_info fi = titan_fp8_info_of((titan_fp8_format)f);
    unsigned long long bad = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32);
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint32_t b = (uint32_t)i, nb = ~b;
        float x, y;
        memcpy(&x, &b, 4);
        memcpy(&y, &nb, 4);
        uint16_t two = titan_cuda_fp8_encode2(x, y, (titan_fp8_format)f);
        int lo = (two & 0xff) != titan_fp8_encode_with(x, fi), hi = (two >> 8) != titan_fp8_encode_with(y, fi);
        if (lo || hi) {
            bad += lo + hi;
            atomicMin(first, lo ? b : nb); /* the pattern whose code differs */
        }
    }
    if (bad) atomicAdd(wrong, bad);
}

/* 1 when every pattern's code is the codec's in both formats */
static int encode_every(void) {
    unsigned long long *wrong;
    unsigned *first;
    CUDA_CHECK(cudaMalloc(&wrong, sizeof *wrong));
    CUDA_CHECK(cudaMalloc(&first, sizeof *first));
    int ok = 1;
    for (int f = TITAN_FP8_E4M3; f <= TITAN_FP8_E5M2; f++) {
        unsigned long long w = 0;
        unsigned fb = 0xffffffffu;
        CUDA_CHECK(cudaMemcpy(wrong, &w, sizeof w, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(first, &fb, sizeof fb, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaEventRecord(ev_a));
        encode_every_kernel<<<4096, 256>>>(wrong, first, f);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaEventRecord(ev_b));
        CUDA_CHECK(cudaEventSynchronize(ev_b));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, ev_a, ev_b));
        CUDA_CHECK(cudaMemcpy(&w, wrong, sizeof w, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(&fb, first, sizeof fb, cudaMemcpyDeviceToHost));
        printf("encode %-6s every fp32 pattern, conversion instruction = codec: %s (%.1f ms)\n",
               f == TITAN_FP8_E5M2 ? "e5m2" : "e4m3fn", w ? "NO" : "yes", ms);
        if (w) {
            float x;
            memcpy(&x, &fb, 4);
            printf("  %llu codes differ; the first at pattern 0x%08x (%g)\n", w, fb, x);
            ok = 0;
        }
    }
    CUDA_CHECK(cudaFree(wrong));
    CUDA_CHECK(cudaFree(first));
    return ok;
}

/* the mean time of REPS runs of the statement, after one warm-up */
#define TIME(stmt)                                                   \
    ({                                                               \
        stmt;                                                        \
        CUDA_CHECK(cudaEventRecord(ev_a));                           \
        for (int r_ = 0; r_ < REPS; r_++) { stmt; }                  \
        CUDA_CHECK(cudaEventRecord(ev_b));                           \
        ms_of();                                                     \
    })

static void gbs_line(const char *what, const char *how, int rows, int cols, float ms, double bytes_per_elem,
                     double copy_gbs) {
    double gbs = (double)rows * cols * bytes_per_elem / (ms * 1e-3) / 1e9;
    printf("cast %-28s %5d x %-5d %8.3f ms  %6.0f GB/s  %3.0f%% of the copy's%s\n", what, rows, cols, ms, gbs,
           100.0 * gbs / copy_gbs, how);
}

static void cast_line(const char *what, const bf16 *x, int rows, int cols, titan_fp8_axis axis, int transpose,
                      double copy_gbs) {
    for (int simple = 0; simple <= transpose; simple++) {
        titan_cuda_fp8_set_simple(simple);
        titan_cuda_fp8_operand o;
        float ms = TIME(titan_cuda_fp8_cast(&o, TITAN_DTYPE_BF16, x, rows, cols, axis, TITAN_FP8_E4M3,
                                            axis != TITAN_FP8_TENSOR, transpose, NULL);
                        titan_cuda_fp8_release(&o));
        /* amax reads x, the cast reads it again and writes a byte an element */
        gbs_line(what, !transpose ? "" : simple ? " (32 x 32, element-wise)" : " (64 x 64 tiles)", rows, cols, ms,
                 2 * sizeof(bf16) + 1, copy_gbs);
    }
    titan_cuda_fp8_set_simple(0);
}

/* x's codes (its transpose's when transpose) under the tiled or the simple casts */
static uint8_t *codes(const bf16 *x, int rows, int cols, titan_fp8_axis axis, int transpose, int simple) {
    titan_cuda_fp8_set_simple(simple);
    titan_cuda_fp8_operand o;
    titan_cuda_fp8_cast(&o, TITAN_DTYPE_BF16, x, rows, cols, axis, TITAN_FP8_E4M3, axis != TITAN_FP8_TENSOR,
                        transpose, NULL);
    size_t n = (size_t)rows * cols;
    uint8_t *h = (uint8_t *)malloc(n);
    CUDA_CHECK(cudaMemcpy(h, o.q, n, cudaMemcpyDeviceToHost));
    titan_cuda_fp8_release(&o);
    titan_cuda_fp8_set_simple(0);
    return h;
}

/* the tiled transposed cast's bytes are the element-wise one's; 0 if not */
static int same_bytes(const char *what, const bf16 *x, int rows, int cols, titan_fp8_axis axis) {
    uint8_t *a = codes(x, rows, cols, axis, 1, 0), *b = codes(x, rows, cols, axis, 1, 1);
    size_t n = (size_t)rows * cols, bad = 0;
    for (size_t i = 0; i < n; i++) bad += a[i] != b[i];
    free(a);
    free(b);
    printf("cast %-28s %5d x %-5d tiles = element-wise: %s\n", what, rows, cols, bad ? "NO" : "yes, every byte");
    return bad == 0;
}

/* dy's two tensorwise layouts (grad_in's straight, grad_w's transposed) */
static void both_line(const bf16 *dy, int rows, int cols, double copy_gbs) {
    for (int simple = 0; simple <= 1; simple++) {
        titan_cuda_fp8_set_simple(simple);
        titan_cuda_fp8_operand o, ot;
        float ms = TIME(titan_cuda_fp8_cast_both(&o, &ot, TITAN_DTYPE_BF16, dy, rows, cols, TITAN_FP8_E5M2, 0, NULL);
                        titan_cuda_fp8_release(&o); titan_cuda_fp8_release(&ot));
        /* one pass: amax, one read, two bytes out; a cast each: amax, two reads */
        gbs_line("dy both layouts (backward)", simple ? " (a cast each)" : " (one pass, 64 x 64 tiles)", rows, cols,
                 ms, simple ? 3 * sizeof(bf16) + 2 : 2 * sizeof(bf16) + 2, copy_gbs);
    }
    titan_cuda_fp8_set_simple(0);
}

int main(int argc, char **argv) {
    int N = argc > 3 ? atoi(argv[1]) : 8192, IC = argc > 3 ? atoi(argv[2]) : 2048,
        OC = argc > 3 ? atoi(argv[3]) : 8192;
    char msg[256];
    if (titan_cuda_matmul_open(msg, sizeof msg) != 0) {
        fprintf(stderr, "%s\n", msg);
        return 1;
    }
    CUDA_CHECK(cudaEventCreate(&ev_a));
    CUDA_CHECK(cudaEventCreate(&ev_b));
    int encodes = encode_every();
    bf16 *x = random_bf16((size_t)N * IC, 2.0f, 1), *w = random_bf16((size_t)OC * IC, 0.1f, 2),
         *dy = random_bf16((size_t)N * OC, 1e-3f, 3), *y, *dx;
    float *dw;
    CUDA_CHECK(cudaMalloc(&y, (size_t)N * OC * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&dx, (size_t)N * IC * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&dw, (size_t)OC * IC * sizeof(float)));

    size_t cbytes = (size_t)N * OC * sizeof(bf16);
    float cms = TIME(CUDA_CHECK(cudaMemcpy(y, dy, cbytes, cudaMemcpyDeviceToDevice)));
    double copy_gbs = 2.0 * cbytes / (cms * 1e-3) / 1e9;
    printf("cudaMemcpy device to device, %zu bytes: %.0f GB/s (read + write)\n", cbytes, copy_gbs);

    cast_line("x tensorwise", x, N, IC, TITAN_FP8_TENSOR, 0, copy_gbs);
    cast_line("x rowwise", x, N, IC, TITAN_FP8_ROWS, 0, copy_gbs);
    cast_line("x^T tensorwise (grad_w)", x, N, IC, TITAN_FP8_TENSOR, 1, copy_gbs);
    cast_line("x^T rowwise (grad_w)", x, N, IC, TITAN_FP8_COLS, 1, copy_gbs);
    cast_line("w tensorwise", w, OC, IC, TITAN_FP8_TENSOR, 0, copy_gbs);
    cast_line("w^T tensorwise (grad_in)", w, OC, IC, TITAN_FP8_TENSOR, 1, copy_gbs);
    both_line(dy, N, OC, copy_gbs);
    int same = same_bytes("x^T tensorwise", x, N, IC, TITAN_FP8_TENSOR) &
               same_bytes("x^T rowwise", x, N, IC, TITAN_FP8_COLS) &
               same_bytes("w^T tensorwise", w, OC, IC, TITAN_FP8_TENSOR);

    /* the products alone, operands cast once */
    double flop = 2.0 * N * IC * OC;
    for (int rowwise = 0; rowwise <= 1; rowwise++) {
        titan_cuda_fp8_operand P, Q;
        titan_fp8_axis ax = rowwise ? TITAN_FP8_ROWS : TITAN_FP8_TENSOR;
        titan_cuda_fp8_cast(&P, TITAN_DTYPE_BF16, x, N, IC, ax, TITAN_FP8_E4M3, rowwise, 0, NULL);
        titan_cuda_fp8_cast(&Q, TITAN_DTYPE_BF16, w, OC, IC, ax, TITAN_FP8_E4M3, rowwise, 0, NULL);
        for (int fast = 1; fast >= 0; fast--) {
            int ran = 0;
            float ms = TIME(ran = titan_cuda_gemm_fp8(TITAN_DTYPE_BF16, y, NULL, 0.0f, &P, &Q, fast));
            printf("gemm_fp8 %s%s N=%d IC=%d OC=%d: %8.3f ms  %5.0f TFLOP/s%s\n", rowwise ? "rowwise" : "tensorwise",
                   fast ? ", fast accumulation" : "", N, IC, OC, ms, flop / (ms * 1e-3) / 1e12,
                   ran ? "" : "  (NO float8 algorithm: nothing ran)");
        }
        titan_cuda_fp8_release(&P);
        titan_cuda_fp8_release(&Q);
    }
    float bms = TIME(titan_cuda_matmul_forward(TITAN_DTYPE_BF16, y, x, w, N, IC, OC));
    printf("bf16 matmul_forward N=%d IC=%d OC=%d: %8.3f ms  %5.0f TFLOP/s\n", N, IC, OC, bms,
           flop / (bms * 1e-3) / 1e12);

    /* whole linears, as the model calls them */
    static const char *const RECIPES[] = {"tensorwise", "rowwise"};
    float bf = TIME(titan_cuda_matmul_forward(TITAN_DTYPE_BF16, y, x, w, N, IC, OC));
    float bb = TIME(titan_cuda_matmul_backward(TITAN_DTYPE_BF16, 0, dx, dw, dy, x, w, N, IC, OC));
    printf("bf16 linear: forward %.3f ms, backward %.3f ms\n", bf, bb);
    for (int i = 0; i < 2; i++) {
        titan_fp8_recipe r;
        memset(&r, 0, sizeof r);
        /* tensor/fp8.c's titan_fp8_recipe_from_name lives in libtitan, not here */
        for (int c = 0; c < TITAN_FP8_NCASTS; c++) {
            r.format[c] = i == 0 && (c == TITAN_FP8_GO_GI || c == TITAN_FP8_GO_GW) ? TITAN_FP8_E5M2 : TITAN_FP8_E4M3;
            r.rowwise[c] = (unsigned char)i;
        }
        r.pow2 = (unsigned char)i;
        float f = TIME(titan_cuda_fp8_matmul_forward(TITAN_DTYPE_BF16, &r, y, x, w, NULL, N, IC, OC));
        float b = TIME(titan_cuda_fp8_matmul_backward(TITAN_DTYPE_BF16, &r, 0, dx, dw, dy, x, w, N, IC, OC));
        titan_cuda_fp8_set_simple(1);
        float bs = TIME(titan_cuda_fp8_matmul_backward(TITAN_DTYPE_BF16, &r, 0, dx, dw, dy, x, w, N, IC, OC));
        titan_cuda_fp8_set_simple(0);
        printf("float8 %s linear: forward %.3f ms (%.2fx bf16's), backward %.3f ms (%.2fx; %.3f ms with "
               "TITAN_CUDA_FP8_CAST=simple)\n", RECIPES[i], f, bf / f, b, bb / b, bs);
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    if (!same) {
        printf("the tiled and element-wise casts differ\n");
        return 1;
    }
    if (!encodes) {
        printf("the conversion instruction's codes are not the codec's\n");
        return 1;
    }
    printf("all ok\n");
    return 0;
}
