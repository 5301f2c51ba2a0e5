/* fp8.c - float8 e4m3fn / e5m2 codecs and torchao's dynamic scaling (fp8.h). */
#include "tensor/fp8.h"

#include <math.h>
#include <string.h>

const char *titan_fp8_format_name(titan_fp8_format f) {
    return f == TITAN_FP8_E4M3 ? "e4m3fn" : f == TITAN_FP8_E5M2 ? "e5m2" : "none";
}

float titan_fp8_max(titan_fp8_format f) { return titan_fp8_info_of(f).max; }

float titan_fp8_decode(uint8_t code, titan_fp8_format f) { return titan_fp8_decode_with(code, f); }

uint8_t titan_fp8_encode(float x, titan_fp8_format f) { return titan_fp8_encode_with(x, titan_fp8_info_of(f)); }

float titan_fp8_scale(float amax, titan_fp8_format f, int pow2) {
    if (isnan(amax)) return NAN;
    double a = (double)amax > TITAN_FP8_SCALE_EPS ? (double)amax : TITAN_FP8_SCALE_EPS;
    float s = (float)((double)titan_fp8_max(f) / a);
    if (pow2) s = exp2f(floorf(log2f(s)));
    return s;
}

int titan_fp8_nscales(titan_fp8_axis axis, int rows, int cols) {
    return axis == TITAN_FP8_ROWS ? rows : axis == TITAN_FP8_COLS ? cols : 1;
}

static float load(const void *x, titan_dtype dt, size_t i) {
    if (dt == TITAN_DTYPE_BF16) return titan_bf16_to_f32(((const uint16_t *)x)[i]);
    return ((const float *)x)[i];
}

void titan_fp8_amax(float *amax, const void *x, titan_dtype dt, int r0, int r1, int cols,
                    titan_fp8_axis axis) {
    for (int r = r0; r < r1; r++) {
        float rm = axis == TITAN_FP8_ROWS ? amax[r] : axis == TITAN_FP8_TENSOR ? amax[0] : 0.0f;
        for (int c = 0; c < cols; c++) {
            float v = fabsf(load(x, dt, (size_t)r * cols + c));
            if (axis == TITAN_FP8_COLS) amax[c] = titan_fp8_amax_max(amax[c], v);
            else rm = titan_fp8_amax_max(rm, v);
        }
        if (axis == TITAN_FP8_ROWS) amax[r] = rm;
        else if (axis == TITAN_FP8_TENSOR) amax[0] = rm;
    }
}

static float scale_at(const float *scale, titan_fp8_axis axis, int r, int c) {
    return axis == TITAN_FP8_ROWS ? scale[r] : axis == TITAN_FP8_COLS ? scale[c] : scale[0];
}

void titan_fp8_cast(uint8_t *q, const void *x, titan_dtype dt, const float *scale, int r0, int r1,
                    int cols, titan_fp8_axis axis, titan_fp8_format f) {
    for (int r = r0; r < r1; r++)
        for (int c = 0; c < cols; c++) {
            size_t i = (size_t)r * cols + c;
            float v = load(x, dt, i) * scale_at(scale, axis, r, c); /* rounded to fp32 */
            q[i] = titan_fp8_encode(v, f);
        }
}

void titan_fp8_dequantize(float *out, const uint8_t *q, const float *scale, int r0, int r1, int cols,
                          titan_fp8_axis axis, titan_fp8_format f) {
    float table[256];
    for (int k = 0; k < 256; k++) table[k] = titan_fp8_decode((uint8_t)k, f);
    for (int r = r0; r < r1; r++)
        for (int c = 0; c < cols; c++) {
            size_t i = (size_t)r * cols + c;
            out[i] = table[q[i]] / scale_at(scale, axis, r, c);
        }
}

void titan_fp8_quantize(uint8_t *q, float *scale, const void *x, titan_dtype dt, int rows, int cols,
                        titan_fp8_axis axis, titan_fp8_format f, int pow2) {
    int ns = titan_fp8_nscales(axis, rows, cols);
    for (int i = 0; i < ns; i++) scale[i] = 0.0f;
    titan_fp8_amax(scale, x, dt, 0, rows, cols, axis);
    for (int i = 0; i < ns; i++) scale[i] = titan_fp8_scale(scale[i], f, pow2);
    titan_fp8_cast(q, x, dt, scale, 0, rows, cols, axis, f);
}

/* ---- recipes ---- */

int titan_fp8_recipe_from_name(const char *name, titan_fp8_recipe *out) {
    memset(out, 0, sizeof *out);
    const unsigned char E4 = TITAN_FP8_E4M3, E5 = TITAN_FP8_E5M2;
    if (strcmp(name, "tensorwise") == 0) {
        /* Float8LinearConfig(): every cast tensorwise, grad_output e5m2 */
        const unsigned char fmt[TITAN_FP8_NCASTS] = {E4, E4, E5, E4, E5, E4};
        memcpy(out->format, fmt, sizeof fmt);
        return 0;
    }
    if (strcmp(name, "rowwise") == 0) {
        /* every cast axiswise along the inner dimension, all e4m3, pow2 scales */
        memset(out->format, E4, sizeof out->format);
        memset(out->rowwise, 1, sizeof out->rowwise);
        out->pow2 = 1;
        return 0;
    }
    if (strcmp(name, "rowwise_with_gw_hp") == 0) {
        /* rowwise for out; grad_in's weight tensorwise; grad_w disabled
         * (high precision) */
        const unsigned char fmt[TITAN_FP8_NCASTS] = {E4, E4, E4, E4, 0, 0};
        const unsigned char row[TITAN_FP8_NCASTS] = {1, 1, 1, 0, 0, 0};
        memcpy(out->format, fmt, sizeof fmt);
        memcpy(out->rowwise, row, sizeof row);
        out->pow2 = 1;
        return 0;
    }
    return -1;
}

int titan_fp8_recipe_gemms(const titan_fp8_recipe *r) {
    return 2 + (r->format[TITAN_FP8_GO_GW] != TITAN_FP8_NONE && r->format[TITAN_FP8_X_GW] != TITAN_FP8_NONE);
}
