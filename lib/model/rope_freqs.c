/* rope_freqs.c - Llama 3 / 3.1 rotary frequencies and cos/sin tables
 * (rope_freqs.h). */
#include "model/rope_freqs.h"

#include <math.h>
#include <stddef.h>

/* freqs as the reference: 1 / theta^(arange(0, HD, 2)/HD) in fp32 (torch
 * evaluates theta ** e in fp32 for a float exponent tensor), optionally with
 * Llama 3.1's wavelength-dependent scaling. */
/* no FMA contraction: the reference rounds every fp32 operation */
__attribute__((optimize("fp-contract=off")))
void titan_rope_freqs(float *freqs, int HD, float theta, float scale_factor, float low_freq_factor,
                      float high_freq_factor, int original_context) {
    int h2 = HD / 2;
    for (int i = 0; i < h2; i++) {
        float e = (float)(2 * i) / (float)HD;
        float f = 1.0f / powf(theta, e);
        if (scale_factor > 0.0f) {
            float low_wl = (float)original_context / low_freq_factor;
            float high_wl = (float)original_context / high_freq_factor;
            float wl = 2.0f * (float)M_PI / f;
            if (wl < high_wl) {
                /* high frequency: unchanged */
            } else if (wl > low_wl) {
                f = f / scale_factor;
            } else {
                float smooth = ((float)original_context / wl - low_freq_factor) /
                               (high_freq_factor - low_freq_factor);
                f = (1.0f - smooth) * f / scale_factor + smooth * f;
            }
        }
        freqs[i] = f;
    }
}

/* angle = t * freq in fp32, cos/sin in double then rounded */
__attribute__((optimize("fp-contract=off")))
void titan_rope_tables(float *cos_t, float *sin_t, int T, int HD, float theta, float scale_factor,
                       float low_freq_factor, float high_freq_factor, int original_context) {
    int h2 = HD / 2;
    if (T <= 0) return;
    /* The frequencies wait in cos row 0, which is filled last (each entry
     * read before it is overwritten): no buffer sized by the head dim. */
    float *freqs = cos_t;
    titan_rope_freqs(freqs, HD, theta, scale_factor, low_freq_factor, high_freq_factor,
                     original_context);
    for (int t = T - 1; t >= 0; t--)
        for (int i = 0; i < h2; i++) {
            float a = (float)t * freqs[i];
            cos_t[(size_t)t * h2 + i] = (float)cos((double)a);
            sin_t[(size_t)t * h2 + i] = (float)sin((double)a);
        }
}
