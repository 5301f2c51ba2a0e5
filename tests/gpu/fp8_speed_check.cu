/* fp8_speed_check.cu - where a float8 linear's time goes on this GPU: each
 * cast (kernels/fp8.cu: amax, scale, the cast; plain and transposed,
 * tensorwise and rowwise) in GB/s beside a device-to-device copy, the
 * float8 product alone (matmul.cu's gemm_fp8) in TFLOP/s beside the bf16
 * product of the same shape, and the whole float8 linear (fp8_matmul.cu,
 * forward and backward) beside the bf16 linear, all in the same run. The
 * 1B's shapes by default: 8192 tokens, dim 2048, FFN 8192. Prints one line
 * per measurement, then "all ok".
 *   nvcc -std=c++17 -O3 -arch=native -Ilib -Ikernels tests/gpu/fp8_speed_check.cu kernels/fp8.cu \
 *        kernels/fp8_matmul.cu kernels/matmul.cu kernels/elementwise.cu -lcublasLt -o build/fp8_speed_check
 *   build/fp8_speed_check [N IC OC] */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ops.cuh"
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

/* the mean time of REPS runs of the statement, after one warm-up */
#define TIME(stmt)                                                   \
    ({                                                               \
        stmt;                                                        \
        CUDA_CHECK(cudaEventRecord(ev_a));                           \
        for (int r_ = 0; r_ < REPS; r_++) { stmt; }                  \
        CUDA_CHECK(cudaEventRecord(ev_b));                           \
        ms_of();                                                     \
    })

static void cast_line(const char *what, const bf16 *x, int rows, int cols, titan_fp8_axis axis, int transpose,
                      double copy_gbs) {
    titan_cuda_fp8_operand o;
    float ms = TIME(titan_cuda_fp8_cast(&o, TITAN_DTYPE_BF16, x, rows, cols, axis, TITAN_FP8_E4M3,
                                        axis != TITAN_FP8_TENSOR, transpose, NULL);
                    titan_cuda_fp8_release(&o));
    /* amax reads x, the cast reads it again and writes a byte an element */
    double bytes = (double)rows * cols * (2 * sizeof(bf16) + 1);
    double gbs = bytes / (ms * 1e-3) / 1e9;
    printf("cast %-28s %5d x %-5d %8.3f ms  %6.0f GB/s  %3.0f%% of the copy's\n", what, rows, cols, ms, gbs,
           100.0 * gbs / copy_gbs);
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
        printf("float8 %s linear: forward %.3f ms (%.2fx bf16's), backward %.3f ms (%.2fx)\n", RECIPES[i], f,
               bf / f, b, bb / b);
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    printf("all ok\n");
    return 0;
}
