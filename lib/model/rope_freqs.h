/* rope_freqs.h - Llama 3 rotary position embedding: the per-dimension
 * frequencies (with Llama 3.1's scaling) and the cos/sin tables the
 * backends' rope ops rotate by (backend.h: rope_forward, rope_backward).
 * The model's math, computed on the host once; backends only apply the
 * rotations they are given. */
#ifndef TITAN_MODEL_ROPE_FREQS_H
#define TITAN_MODEL_ROPE_FREQS_H

/* freqs[HD/2]: freq_i = 1 / theta^(2i/HD) in fp32 as the reference; when
 * scale_factor > 0 Llama 3.1's wavelength-dependent scaling is applied
 * (factor, low/high freq factors, original context length): wavelengths
 * shorter than original_context / high_freq_factor keep their frequency,
 * those longer than original_context / low_freq_factor are divided by
 * scale_factor, and the ones between blend the two smoothly. Every fp32
 * operation rounded (no FMA contraction), as PyTorch's. */
void titan_rope_freqs(float *freqs, int HD, float theta, float scale_factor, float low_freq_factor,
                      float high_freq_factor, int original_context);

/* Llama 3 rotary tables: cos/sin[T, HD/2] for positions 0..T-1, from
 * titan_rope_freqs() (same arguments). Angles are formed in fp32 like the
 * reference (angle = t * freq_i), cos/sin are evaluated in double then
 * rounded. */
void titan_rope_tables(float *cos, float *sin, int T, int HD, float theta, float scale_factor,
                       float low_freq_factor, float high_freq_factor, int original_context);

#endif
