/* embedding.c - token embedding lookup and its scatter-add backward. */
#include <string.h>

#include "backend/cpu/cpu_ops.h"

/* out[n,:] = wte[tokens[n],:], zeros for a token >= V (another rank's
 * vocabulary shard). Token ids are validated by the data loader. */
void titan_cpu_embedding_forward(float *out, const uint32_t *tokens, const float *wte, int N,
                                 int C, int V) {
#pragma omp parallel for schedule(static) if ((long)N * C > 4 * TITAN_CPU_BLOCK)
    for (int n = 0; n < N; n++) {
        float *dst = out + (size_t)n * C;
        if (tokens[n] < (uint32_t)V)
            memcpy(dst, wte + (size_t)tokens[n] * C, (size_t)C * sizeof(float));
        else
            memset(dst, 0, (size_t)C * sizeof(float));
    }
}

/* dwte[tokens[n],:] += dout[n,:], tokens >= V skipped. Threads own column
 * blocks, never rows, so a token repeated in the batch is summed by one
 * thread in token order: no races and the same bits for any thread count.
 * Overwriting is the sum into zeros: every row starts at 0, those of tokens
 * absent stay so. */
void titan_cpu_embedding_backward(int acc, float *dwte, const float *dout, const uint32_t *tokens,
                                  int N, int C, int V) {
    enum { CB = 64 };
    int ncb = (C + CB - 1) / CB;
    if (!(acc & TITAN_ACC_DW)) memset(dwte, 0, (size_t)V * C * sizeof(float));
#pragma omp parallel for schedule(static) if ((long)N * C > 4 * TITAN_CPU_BLOCK)
    for (int cb = 0; cb < ncb; cb++) {
        int c0 = cb * CB, c1 = c0 + CB < C ? c0 + CB : C;
        for (int n = 0; n < N; n++) {
            if (tokens[n] >= (uint32_t)V) continue;
            float *dst = dwte + (size_t)tokens[n] * C;
            const float *src = dout + (size_t)n * C;
            for (int c = c0; c < c1; c++) dst[c] += src[c];
        }
    }
}
