/* dtype.c - element types and float conversions (round-to-nearest-even). */
#include "dtype.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

size_t titan_dtype_size(titan_dtype t) {
    switch (t) {
    case TITAN_DTYPE_F32: return 4;
    case TITAN_DTYPE_BF16: return 2;
    case TITAN_DTYPE_F16: return 2;
    case TITAN_DTYPE_U32: return 4;
    case TITAN_DTYPE_U8: return 1;
    }
    return 0;
}

const char *titan_dtype_name(titan_dtype t) {
    switch (t) {
    case TITAN_DTYPE_F32: return "f32";
    case TITAN_DTYPE_BF16: return "bf16";
    case TITAN_DTYPE_F16: return "f16";
    case TITAN_DTYPE_U32: return "u32";
    case TITAN_DTYPE_U8: return "u8";
    }
    return "?";
}

int titan_dtype_parse(const char *s, titan_dtype *out) {
    static const struct { const char *name; titan_dtype t; } names[] = {
        {"f32", TITAN_DTYPE_F32},   {"float32", TITAN_DTYPE_F32},  {"bf16", TITAN_DTYPE_BF16},
        {"bfloat16", TITAN_DTYPE_BF16}, {"f16", TITAN_DTYPE_F16},  {"float16", TITAN_DTYPE_F16},
        {"u32", TITAN_DTYPE_U32},   {"uint32", TITAN_DTYPE_U32},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].t;
            return 0;
        }
    return -1;
}

uint16_t titan_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign and top payload, force quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    /* Adding 0x7fff plus the lowest kept bit rounds half to even; carries
     * into the exponent are correct, up to and including overflow to inf. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float titan_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t titan_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t x = u & 0x7fffffffu;
    if (x >= 0x7f800000u) /* inf stays inf; NaN stays a quiet NaN */
        return sign | (x > 0x7f800000u ? (uint16_t)(0x7e00u | ((x >> 13) & 0x3ffu)) : 0x7c00u);
    if (x >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520 rounds to inf */
    if (x < 0x38800000u) {                       /* below 2^-14: subnormal or zero */
        if (x < 0x33000000u) return sign;        /* below 2^-25: rounds to zero */
        uint32_t e = x >> 23, m = (x & 0x7fffffu) | 0x800000u;
        uint32_t s = 126 - e; /* value = m * 2^(e-150) = k * 2^-24 */
        uint32_t k = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
        if (rem > half || (rem == half && (k & 1u))) k++;
        return sign | (uint16_t)k;
    }
    x += 0xfffu + ((x >> 13) & 1u); /* round half to even at bit 13 */
    return sign | (uint16_t)((x - (112u << 23)) >> 13);
}

float titan_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) { /* zero or subnormal: m * 2^-24, exact in f32 */
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

int titan_dtype_is_float(titan_dtype t) {
    return t == TITAN_DTYPE_F32 || t == TITAN_DTYPE_BF16 || t == TITAN_DTYPE_F16;
}

static float load_float(const void *src, titan_dtype t, size_t i) {
    if (t == TITAN_DTYPE_F32) return ((const float *)src)[i];
    uint16_t h = ((const uint16_t *)src)[i];
    return t == TITAN_DTYPE_BF16 ? titan_bf16_to_f32(h) : titan_f16_to_f32(h);
}

int titan_dtype_convert(void *dst, titan_dtype dt, const void *src, titan_dtype st, size_t n) {
    if (dt == st) {
        if (dst != src && n) memmove(dst, src, n * titan_dtype_size(dt));
        return 0;
    }
    if (!titan_dtype_is_float(dt) || !titan_dtype_is_float(st)) return -1;
    /* The common FSDP pairs get plain loops the compiler can vectorise. */
    if (dt == TITAN_DTYPE_BF16 && st == TITAN_DTYPE_F32) {
        uint16_t *d = dst;
        const float *x = src;
        for (size_t i = 0; i < n; i++) d[i] = titan_f32_to_bf16(x[i]);
        return 0;
    }
    if (dt == TITAN_DTYPE_F32 && st == TITAN_DTYPE_BF16) {
        float *d = dst;
        const uint16_t *x = src;
        for (size_t i = 0; i < n; i++) d[i] = titan_bf16_to_f32(x[i]);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        float v = load_float(src, st, i);
        if (dt == TITAN_DTYPE_F32) ((float *)dst)[i] = v;
        else if (dt == TITAN_DTYPE_BF16) ((uint16_t *)dst)[i] = titan_f32_to_bf16(v);
        else ((uint16_t *)dst)[i] = titan_f32_to_f16(v);
    }
    return 0;
}

double titan_f32_user_decimal(float f) {
    char buf[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f) return d;
    }
    return (double)f;
}
