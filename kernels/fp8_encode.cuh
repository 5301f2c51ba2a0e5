/* fp8_encode.cuh - tensor/fp8.h's encode on the device, two codes at a time
 * through cuda_fp8.h's __nv_cvt_float2_to_fp8x2: on sm_89 and later one
 * cvt.rn.satfinite.{e4m3,e5m2}x2.f32 instruction for two elements, where
 * the codec's own lines (titan_fp8_encode_with) took some twenty integer
 * instructions an element and made the casts bound by the ALUs, not the
 * memory (an H200, 2026-11-28: about half the copy's bandwidth).
 *
 * The same bytes as the codec: round to nearest even, saturate to the
 * largest finite code (infinity too: satfinite). The one difference is a
 * NaN, which the instruction makes 0x7f (e5m2: 0x7e and some mantissa)
 * and the codec makes the sign's 0x7f: the NaN case is taken apart.
 * tests/gpu/fp8_speed_check.cu compares every fp32 pattern on a GPU;
 * tests/emu/test_fp8_emu.cpp checks cuda_fp8.h's host path (its model of
 * the instruction, which the emulator runs) against the codec. */
#ifndef TITAN_KERNELS_FP8_ENCODE_CUH
#define TITAN_KERNELS_FP8_ENCODE_CUH

#include <stdint.h>
#include <string.h>

#include <cuda_fp8.h>

#include "tensor/fp8.h"

/* a NaN's code as the codec writes it: x's sign and 0x7f */
static __host__ __device__ __forceinline__ uint32_t titan_cuda_fp8_nan_code(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return ((u >> 24) & 0x80u) | 0x7fu;
}

/* the codes of a and b (a in the low byte) in format f */
static __host__ __device__ __forceinline__ uint16_t titan_cuda_fp8_encode2(float a, float b, titan_fp8_format f) {
    __nv_fp8x2_storage_t two =
        __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, f == TITAN_FP8_E5M2 ? __NV_E5M2 : __NV_E4M3);
    uint32_t lo = two & 0xffu, hi = two >> 8;
    if (a != a) lo = titan_cuda_fp8_nan_code(a);
    if (b != b) hi = titan_cuda_fp8_nan_code(b);
    return (uint16_t)(lo | hi << 8);
}

/* one code (the pair's low byte) */
static __host__ __device__ __forceinline__ uint8_t titan_cuda_fp8_encode(float x, titan_fp8_format f) {
    return (uint8_t)titan_cuda_fp8_encode2(x, 0.0f, f);
}

#endif
