/* dtype.h - element types and conversions. */
#ifndef TITAN_TENSOR_DTYPE_H
#define TITAN_TENSOR_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum {
    TITAN_DTYPE_F32 = 0,
    TITAN_DTYPE_BF16 = 1,
    TITAN_DTYPE_F16 = 2,
    TITAN_DTYPE_U32 = 3,
    TITAN_DTYPE_U8 = 4, /* bytes: float8 codes moved as they are */
} titan_dtype;

size_t titan_dtype_size(titan_dtype t);
const char *titan_dtype_name(titan_dtype t);       /* "f32", "bf16", "f16", "u32", "u8" */
/* 0 ok, -1 unknown; u8 is not parsed: communicators move it, no file or
 * option holds it */
int titan_dtype_parse(const char *s, titan_dtype *out);

/* Round-to-nearest-even; NaN stays NaN. */
uint16_t titan_f32_to_bf16(float f);
float titan_bf16_to_f32(uint16_t h);
uint16_t titan_f32_to_f16(float f);
float titan_f16_to_f32(uint16_t h);
/* The double a user wrote for f: the shortest decimal that round-trips to
 * f (0.9f -> 0.9), as Python passes hyperparameters (AdamW, GaLore). */
double titan_f32_user_decimal(float f);

/* 1 for the floating-point types (f32, bf16, f16). */
int titan_dtype_is_float(titan_dtype t);
/* dst[i] = src[i] converted from type st to type dt (rounding as above), for
 * n elements; between two float types or a type and itself (a copy). dst
 * and src must not overlap unless they are the same pointer of the same
 * type. Returns 0, or -1 for a pair it cannot convert (u32 to a float). */
int titan_dtype_convert(void *dst, titan_dtype dt, const void *src, titan_dtype st, size_t n);

#endif
