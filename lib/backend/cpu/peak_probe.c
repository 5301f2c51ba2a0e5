/* peak_probe.c - measures the CPU's fp32 GEMM rate, the peak MFU is quoted against. */
#include <cblas.h>

#include "backend/backend.h"
#include "core/clock.h"
#include "core/mem.h"

/* Best of ~1 s of 1024^3 SGEMMs with the current thread setting: what BLAS
 * reaches on this machine is the honest ceiling for an fp32 CPU trainer. */
double titan_backend_cpu_peak_flops(void) {
    const int n = 1024;
    float *a = titan_alloc((size_t)n * n * sizeof(float), "peak probe");
    float *b = titan_alloc((size_t)n * n * sizeof(float), "peak probe");
    float *c = titan_alloc((size_t)n * n * sizeof(float), "peak probe");
    if (!a || !b || !c) {
        titan_free(a), titan_free(b), titan_free(c);
        return 0.0;
    }
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = (float)(i % 7) * 0.01f;
        b[i] = (float)(i % 5) * 0.01f;
    }
    double best = 0.0, start = titan_now_s();
    /* About a second of repeats: short probes read low (thread wake-up, clocks). */
    for (int rep = 0; rep < 200 && (rep < 4 || titan_now_s() - start < 1.0); rep++) {
        double t0 = titan_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double dt = titan_now_s() - t0;
        double rate = 2.0 * n * n * (double)n / dt;
        if (rep > 0 && rate > best) best = rate; /* first call warms up threads and caches */
    }
    titan_free(a), titan_free(b), titan_free(c);
    return best;
}
