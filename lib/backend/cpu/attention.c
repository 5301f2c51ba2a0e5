/* attention.c - causal grouped-query attention (naive first version). */
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

void titan_cpu_attention_forward(float *out, float *lse, const float *q, const float *k,
                                 const float *v, int B, int T, int NH, int NKV, int HD) {
    int rep = NH / NKV;
    float scale = 1.0f / sqrtf((float)HD);
#pragma omp parallel
    {
        float *s = malloc((size_t)T * sizeof(float));
        TITAN_ASSERT(s != NULL);
#pragma omp for schedule(dynamic, 16) collapse(2)
        for (int bh = 0; bh < B * NH; bh++)
            for (int t = 0; t < T; t++) {
                int b = bh / NH, h = bh % NH, kh = h / rep;
                const float *qr = q + (((size_t)b * T + t) * NH + h) * HD;
                float mx = -INFINITY;
                for (int j = 0; j <= t; j++) {
                    const float *kr = k + (((size_t)b * T + j) * NKV + kh) * HD;
                    float d = 0.0f;
                    for (int c = 0; c < HD; c++) d += qr[c] * kr[c];
                    s[j] = d * scale;
                    mx = s[j] > mx ? s[j] : mx;
                }
                double sum = 0.0;
                for (int j = 0; j <= t; j++) {
                    s[j] = expf(s[j] - mx);
                    sum += s[j];
                }
                float *o = out + (((size_t)b * T + t) * NH + h) * HD;
                for (int c = 0; c < HD; c++) o[c] = 0.0f;
                for (int j = 0; j <= t; j++) {
                    const float *vr = v + (((size_t)b * T + j) * NKV + kh) * HD;
                    float p = (float)(s[j] / sum);
                    for (int c = 0; c < HD; c++) o[c] += p * vr[c];
                }
                lse[((size_t)b * NH + h) * T + t] = mx + (float)log(sum);
            }
        free(s);
    }
}

void titan_cpu_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                  const float *out, const float *lse, const float *q,
                                  const float *k, const float *v, int B, int T, int NH, int NKV,
                                  int HD) {
    int rep = NH / NKV;
    float scale = 1.0f / sqrtf((float)HD);
    /* one thread per (b, kv head): it owns dk/dv rows of that head and dq of its group */
#pragma omp parallel for schedule(dynamic, 1)
    for (int bk = 0; bk < B * NKV; bk++) {
        int b = bk / NKV, kh = bk % NKV;
        for (int h = kh * rep; h < (kh + 1) * rep; h++)
            for (int t = 0; t < T; t++) {
                const float *qr = q + (((size_t)b * T + t) * NH + h) * HD;
                const float *go = dout + (((size_t)b * T + t) * NH + h) * HD;
                const float *o = out + (((size_t)b * T + t) * NH + h) * HD;
                float *gq = dq + (((size_t)b * T + t) * NH + h) * HD;
                float l = lse[((size_t)b * NH + h) * T + t];
                float D = 0.0f;
                for (int c = 0; c < HD; c++) D += go[c] * o[c];
                for (int j = 0; j <= t; j++) {
                    const float *kr = k + (((size_t)b * T + j) * NKV + kh) * HD;
                    const float *vr = v + (((size_t)b * T + j) * NKV + kh) * HD;
                    float *gk = dk + (((size_t)b * T + j) * NKV + kh) * HD;
                    float *gv = dv + (((size_t)b * T + j) * NKV + kh) * HD;
                    float sd = 0.0f, dp = 0.0f;
                    for (int c = 0; c < HD; c++) {
                        sd += qr[c] * kr[c];
                        dp += go[c] * vr[c];
                    }
                    float p = expf(sd * scale - l);
                    float ds = p * (dp - D) * scale;
                    for (int c = 0; c < HD; c++) {
                        gv[c] += p * go[c];
                        gk[c] += ds * qr[c];
                        gq[c] += ds * kr[c];
                    }
                }
            }
    }
}
