/* bf16_check.h - what the attention_tc checks share: bf16 vectors to and
 * from fp32, and the normalised error of a result against a double
 * reference. Included by tests/gpu/attention_tc_check.cu (nvcc, CUDA's bf16)
 * and tests/emu/test_attention_tc_emu.cpp (g++, the emulator's): whichever
 * defines bf16, __float2bfloat16_rn and __bfloat162float first. */
#ifndef TITAN_TESTS_BF16_CHECK_H
#define TITAN_TESTS_BF16_CHECK_H

#include <math.h>

#include <vector>

static inline std::vector<bf16> to_bf16(const std::vector<float> &x) {
    std::vector<bf16> r(x.size());
    for (size_t i = 0; i < x.size(); i++) r[i] = __float2bfloat16_rn(x[i]);
    return r;
}

static inline std::vector<float> to_f32(const std::vector<bf16> &x) {
    std::vector<float> r(x.size());
    for (size_t i = 0; i < x.size(); i++) r[i] = __bfloat162float(x[i]);
    return r;
}

/* ||x - ref|| / ||ref|| (inf when x holds a NaN or inf) */
static inline double nerr(const std::vector<float> &x, const std::vector<double> &ref) {
    double n = 0, d = 0;
    for (size_t i = 0; i < x.size(); i++) {
        if (!std::isfinite(x[i])) return INFINITY;
        n += (x[i] - ref[i]) * (x[i] - ref[i]);
        d += ref[i] * ref[i];
    }
    return sqrt(n / (d > 0 ? d : 1));
}

#endif
