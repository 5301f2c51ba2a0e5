/* emu.h - what kernels/attention_tc.cu's device code needs to run alone on
 * the host emulator (tests/emu/emu_core.h), for test_attention_tc_emu: the
 * few cuda_ops.cuh helpers it uses, without the rest of the CUDA backend
 * (tests/emu/cuda_emu.h runs that, host side and all).
 *
 * The device code comes from gen_kernels.awk (build/emu/kern.inc): the file
 * up to its "host side" section, without its PTX wrappers (emu_core.h
 * defines them) and with its `extern __shared__` array pointed at emu_smem.
 * Limits: emu_core.h's header. */
#ifndef TITAN_TESTS_EMU_EMU_H
#define TITAN_TESTS_EMU_EMU_H

#include "emu_core.h"

/* ------------------------- what attention_tc.cu takes from cuda_ops.cuh */
/* (copies kept in step by hand: cuda_ops.cuh also declares the backend's
 * host entry points, which this test does not link) */

typedef __nv_bfloat16 bf16;
#define WARP 32
#define FULL_MASK 0xffffffffu

static inline unsigned titan_cuda_blocks(size_t n, int threads) {
    size_t b = (n + (size_t)threads - 1) / (size_t)threads;
    return (unsigned)(b < 65536 ? b : 65536);
}

static inline float warp_sum(float v) {
    for (int o = WARP / 2; o > 0; o /= 2) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

#endif
