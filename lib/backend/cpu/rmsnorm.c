/* rmsnorm.c - RMSNorm as Meta's Llama: y = (x * rsqrt(mean(x^2) + eps)) * w,
 * normalised in fp32 first, then scaled by the weight. The mean of squares
 * is summed in double (fixed lane order) and rounded once to fp32. */
#include <math.h>

#include "backend/cpu/cpu_ops.h"

void titan_cpu_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight,
                               int N, int C, float eps) {
#pragma omp parallel for schedule(static) if ((long)N * C > 4 * TITAN_CPU_BLOCK)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *y = out + (size_t)n * C;
        float ms = (float)(titan_cpu_row_sumsq(x, (size_t)C) / C);
        float r = 1.0f / sqrtf(ms + eps);
        for (int c = 0; c < C; c++) y[c] = (x[c] * r) * weight[c];
        rstd[n] = r;
    }
}

/* With xh = x*r:  dw (+)= sum_n dy*xh;
 * dx (+)= r*(dy*w) - x * r^3/C * sum_c(dy*w*x). */
void titan_cpu_rmsnorm_backward(int acc, float *dinp, float *dweight, const float *dout, const float *inp,
                                const float *weight, const float *rstd, int N, int C) {
    int big = (long)N * C > 4 * TITAN_CPU_BLOCK;
    if (dinp) {
#pragma omp parallel for schedule(static) if (big)
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
            float *dx = dinp + (size_t)n * C;
            double lane[16] = {0};
            int c = 0;
            for (; c + 16 <= C; c += 16)
                for (int l = 0; l < 16; l++)
                    lane[l] += (double)(dy[c + l] * weight[c + l]) * (double)x[c + l];
            for (; c < C; c++) lane[c & 15] += (double)(dy[c] * weight[c]) * (double)x[c];
            double dot = 0.0;
            for (int l = 0; l < 16; l++) dot += lane[l];
            float r = rstd[n];
            float k = (float)((double)r * r * r * dot / C);
            if (acc & TITAN_ACC_DX)
                for (c = 0; c < C; c++) dx[c] += r * (dy[c] * weight[c]) - x[c] * k;
            else
                for (c = 0; c < C; c++) dx[c] = r * (dy[c] * weight[c]) - x[c] * k;
        }
    }
    if (dweight) {
        int add_w = acc & TITAN_ACC_DW;
        /* threads own column blocks; each column sums its rows in order, in double */
        enum { CB = 64 };
        int ncb = (C + CB - 1) / CB;
#pragma omp parallel for schedule(static) if (big)
        for (int cb = 0; cb < ncb; cb++) {
            int c0 = cb * CB, c1 = c0 + CB < C ? c0 + CB : C;
            double sum[CB] = {0};
            for (int n = 0; n < N; n++) {
                const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
                float r = rstd[n];
                for (int c = c0; c < c1; c++) sum[c - c0] += (double)dy[c] * (double)(x[c] * r);
            }
            for (int c = c0; c < c1; c++)
                dweight[c] = add_w ? dweight[c] + (float)sum[c - c0] : (float)sum[c - c0];
        }
    }
}
