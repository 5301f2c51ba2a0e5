/* swiglu.c - the SwiGLU gate of Llama's feed-forward: silu(h1) * h3,
 * with silu(x) = x * sigmoid(x) = x / (1 + e^-x). */
#include "backend/cpu/cpu_ops.h"

/* Rows are the unit of work; exp runs vectorised over a chunk of a row. */
enum { CHUNK = 256 };

void titan_cpu_swiglu_forward(float *out, const float *h1, const float *h3, int N, int H) {
#pragma omp parallel for schedule(static) if ((long)N * H > 4 * TITAN_CPU_BLOCK)
    for (int n = 0; n < N; n++) {
        float e[CHUNK];
        for (int c0 = 0; c0 < H; c0 += CHUNK) {
            int len = H - c0 < CHUNK ? H - c0 : CHUNK;
            const float *a = h1 + (size_t)n * H + c0, *b = h3 + (size_t)n * H + c0;
            float *y = out + (size_t)n * H + c0;
            for (int i = 0; i < len; i++) e[i] = -a[i];
            titan_cpu_exp(e, e, len);
            for (int i = 0; i < len; i++) y[i] = (a[i] / (1.0f + e[i])) * b[i];
        }
    }
}

/* sig = 1/(1+e^-h1), silu = h1*sig:  dh3 (+)= dy*silu;
 * dh1 (+)= dy*h3 * sig*(1 + h1*(1-sig)). */
void titan_cpu_swiglu_backward(int acc, float *dh1, float *dh3, const float *dout, const float *h1,
                               const float *h3, int N, int H) {
    int add = acc & TITAN_ACC_DX;
#pragma omp parallel for schedule(static) if ((long)N * H > 4 * TITAN_CPU_BLOCK)
    for (int n = 0; n < N; n++) {
        float e[CHUNK];
        for (int c0 = 0; c0 < H; c0 += CHUNK) {
            int len = H - c0 < CHUNK ? H - c0 : CHUNK;
            size_t o = (size_t)n * H + c0;
            const float *a = h1 + o, *b = h3 + o, *dy = dout + o;
            for (int i = 0; i < len; i++) e[i] = -a[i];
            titan_cpu_exp(e, e, len);
            float g1[CHUNK], g3[CHUNK];
            for (int i = 0; i < len; i++) {
                float sig = 1.0f / (1.0f + e[i]);
                float silu = a[i] * sig;
                g3[i] = dy[i] * silu;
                g1[i] = dy[i] * b[i] * (sig * (1.0f + a[i] * (1.0f - sig)));
            }
            if (dh3) titan_cpu_store_grad(dh3 + o, g3, (size_t)len, add);
            if (dh1) titan_cpu_store_grad(dh1 + o, g1, (size_t)len, add);
        }
    }
}
