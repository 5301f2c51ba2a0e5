/* rope.c - rotary position embedding (Meta's interleaved complex view): the
 * rotations by the cos/sin tables the model gives (lib/model/rope_freqs.c). */
#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"

/* Pairs (x[2i], x[2i+1]) are complex numbers multiplied by e^{i angle}:
 * out0 = x0 cos - x1 sin, out1 = x0 sin + x1 cos. out may alias inp. */
void titan_cpu_rope_forward(float *out, const float *inp, const float *cos, const float *sin,
                            int B, int T, int NHX, int HD) {
    int h2 = HD / 2;
    long rows = (long)B * T;
#pragma omp parallel for schedule(static) if (rows * NHX * HD > 4 * TITAN_CPU_BLOCK)
    for (long bt = 0; bt < rows; bt++) {
        int t = (int)(bt % T);
        const float *c = cos + (size_t)t * h2, *s = sin + (size_t)t * h2;
        for (int h = 0; h < NHX; h++) {
            const float *x = inp + ((size_t)bt * NHX + h) * HD;
            float *y = out + ((size_t)bt * NHX + h) * HD;
            for (int i = 0; i < h2; i++) {
                float x0 = x[2 * i], x1 = x[2 * i + 1];
                y[2 * i] = x0 * c[i] - x1 * s[i];
                y[2 * i + 1] = x0 * s[i] + x1 * c[i];
            }
        }
    }
}

/* The rotation's transpose (rotation by -angle), into dinp (+= or =). */
void titan_cpu_rope_backward(int acc, float *dinp, const float *dout, const float *cos, const float *sin,
                             int B, int T, int NHX, int HD) {
    int h2 = HD / 2, add = acc & TITAN_ACC_DX;
    long rows = (long)B * T;
#pragma omp parallel for schedule(static) if (rows * NHX * HD > 4 * TITAN_CPU_BLOCK)
    for (long bt = 0; bt < rows; bt++) {
        int t = (int)(bt % T);
        const float *c = cos + (size_t)t * h2, *s = sin + (size_t)t * h2;
        for (int h = 0; h < NHX; h++) {
            const float *g = dout + ((size_t)bt * NHX + h) * HD;
            float *d = dinp + ((size_t)bt * NHX + h) * HD;
            for (int i = 0; i < h2; i++) {
                float g0 = g[2 * i], g1 = g[2 * i + 1];
                float r0 = g0 * c[i] + g1 * s[i], r1 = g1 * c[i] - g0 * s[i];
                d[2 * i] = add ? d[2 * i] + r0 : r0;
                d[2 * i + 1] = add ? d[2 * i + 1] + r1 : r1;
            }
        }
    }
}
