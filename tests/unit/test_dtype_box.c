/* test_dtype_box.c - bf16/f16 conversions against a brute-force reference; box
 * intersection and region copies against an element-by-element reference. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tensor/box.h"
#include "tensor/dtype.h"

static int failures;
#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            if (++failures > 40) exit(1);                                  \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* ---- dtype ---- */

static void test_names(void) {
    static const struct { titan_dtype t; size_t size; const char *name; } want[] = {
        {TITAN_DTYPE_F32, 4, "f32"}, {TITAN_DTYPE_BF16, 2, "bf16"}, {TITAN_DTYPE_F16, 2, "f16"},
        {TITAN_DTYPE_U32, 4, "u32"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        CHECK(titan_dtype_size(want[i].t) == want[i].size, "%s size", want[i].name);
        CHECK(strcmp(titan_dtype_name(want[i].t), want[i].name) == 0, "%s name", want[i].name);
        titan_dtype t;
        CHECK(titan_dtype_parse(want[i].name, &t) == 0 && t == want[i].t, "parse %s", want[i].name);
    }
    titan_dtype t;
    CHECK(titan_dtype_parse("bfloat16", &t) == 0 && t == TITAN_DTYPE_BF16, "bfloat16");
    CHECK(titan_dtype_parse("float32", &t) == 0 && t == TITAN_DTYPE_F32, "float32");
    CHECK(titan_dtype_parse("fp8", &t) == -1, "unknown dtype");
}

/* Value of a half-width encoding, with the infinity encoding standing for the
 * next power of two (what IEEE rounding compares against at overflow). */
typedef float (*to_f32_fn)(uint16_t);
static double ref_value(uint16_t h, to_f32_fn f, uint16_t inf_bits, double inf_as) {
    return (h & 0x7fff) == inf_bits ? inf_as : (double)f(h & 0x7fff);
}

/* Nearest encoding of |x| by bisection over the monotonic positive encodings, ties to even. */
static uint16_t ref_round(double ax, to_f32_fn f, uint16_t inf_bits, double inf_as) {
    uint16_t lo = 0, hi = inf_bits; /* value(lo) <= ax < value(hi) unless ax >= inf_as */
    if (ax >= inf_as) return inf_bits;
    while (hi - lo > 1) {
        uint16_t mid = (uint16_t)((lo + hi) / 2);
        if (ref_value(mid, f, inf_bits, inf_as) <= ax) lo = mid;
        else hi = mid;
    }
    double dl = ax - ref_value(lo, f, inf_bits, inf_as), dh = ref_value(hi, f, inf_bits, inf_as) - ax;
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

typedef uint16_t (*from_f32_fn)(float);
static void check_convert(float x, from_f32_fn conv, to_f32_fn back, uint16_t inf_bits, double inf_as,
                          const char *what) {
    uint16_t got = conv(x);
    if (isnan(x)) {
        CHECK(isnan(back(got)) && (got >> 15) == (to_bits(x) >> 31), "%s: NaN 0x%08x -> 0x%04x", what, to_bits(x), got);
        return;
    }
    uint16_t want = ref_round(fabs((double)x), back, inf_bits, inf_as) | (signbit(x) ? 0x8000 : 0);
    CHECK(got == want, "%s(%.9g = 0x%08x) = 0x%04x, want 0x%04x", what, x, to_bits(x), got, want);
}

static void test_bf16(void) {
    /* every bf16 survives a round trip through f32 */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = titan_bf16_to_f32((uint16_t)h);
        CHECK(to_bits(f) == h << 16, "bf16 0x%04x widens exactly", h);
        uint16_t back = titan_f32_to_bf16(f);
        if (isnan(f)) CHECK(isnan(titan_bf16_to_f32(back)), "NaN 0x%04x stays NaN", h);
        else CHECK(back == h, "bf16 0x%04x -> %g -> 0x%04x", h, f, back);
    }
    /* every midpoint between neighbours ties to even; one f32 ulp either side goes to the nearer */
    for (uint32_t h = 0; h < 0x7f80; h++) {
        uint32_t mid = (h << 16) | 0x8000;
        check_convert(from_bits(mid), titan_f32_to_bf16, titan_bf16_to_f32, 0x7f80, 0x1p128, "bf16 tie");
        check_convert(from_bits(mid - 1), titan_f32_to_bf16, titan_bf16_to_f32, 0x7f80, 0x1p128, "bf16 below tie");
        check_convert(from_bits(mid + 1), titan_f32_to_bf16, titan_bf16_to_f32, 0x7f80, 0x1p128, "bf16 above tie");
        check_convert(-from_bits(mid), titan_f32_to_bf16, titan_bf16_to_f32, 0x7f80, 0x1p128, "bf16 -tie");
    }
    for (int i = 0; i < 200000; i++)
        check_convert(from_bits((uint32_t)next_u64()), titan_f32_to_bf16, titan_bf16_to_f32, 0x7f80, 0x1p128,
                      "bf16 random");
    CHECK(titan_f32_to_bf16(INFINITY) == 0x7f80 && titan_f32_to_bf16(-INFINITY) == 0xff80, "inf");
    CHECK(titan_f32_to_bf16(3.4028235e38f) == 0x7f80, "FLT_MAX rounds to inf");
    CHECK(titan_f32_to_bf16(-0.0f) == 0x8000, "-0");
    uint16_t n = titan_f32_to_bf16(from_bits(0x7f800001)); /* payload only in the dropped bits */
    CHECK((n & 0x7f80) == 0x7f80 && (n & 0x7f) != 0, "low-payload NaN must not become inf: 0x%04x", n);
    CHECK(titan_f32_to_bf16(1.0f) == 0x3f80 && titan_bf16_to_f32(0x3f80) == 1.0f, "one");
}

static void test_f16(void) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = titan_f16_to_f32((uint16_t)h);
        uint16_t back = titan_f32_to_f16(f);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            CHECK(isnan(f) && isnan(titan_f16_to_f32(back)), "f16 NaN 0x%04x", h);
        } else {
            CHECK(back == h, "f16 0x%04x -> %g -> 0x%04x", h, f, back);
        }
    }
    /* reference values of the f16 -> f32 widening */
    CHECK(titan_f16_to_f32(0x3c00) == 1.0f && titan_f16_to_f32(0xc000) == -2.0f, "1, -2");
    CHECK(titan_f16_to_f32(0x7bff) == 65504.0f, "max");
    CHECK(titan_f16_to_f32(0x0001) == 0x1p-24f && titan_f16_to_f32(0x0400) == 0x1p-14f, "subnormal, min normal");
    CHECK(isinf(titan_f16_to_f32(0x7c00)) && titan_f16_to_f32(0xfc00) < 0, "inf");
    /* ties and neighbours of every pair of adjacent f16 values */
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double lo = titan_f16_to_f32((uint16_t)h);
        double hi = h + 1 == 0x7c00 ? 65536.0 : titan_f16_to_f32((uint16_t)(h + 1));
        float mid = (float)((lo + hi) / 2); /* exact: 12 significant bits */
        check_convert(mid, titan_f32_to_f16, titan_f16_to_f32, 0x7c00, 65536.0, "f16 tie");
        check_convert(nextafterf(mid, 0), titan_f32_to_f16, titan_f16_to_f32, 0x7c00, 65536.0, "f16 below tie");
        check_convert(nextafterf(mid, INFINITY), titan_f32_to_f16, titan_f16_to_f32, 0x7c00, 65536.0, "f16 above tie");
        check_convert(-mid, titan_f32_to_f16, titan_f16_to_f32, 0x7c00, 65536.0, "f16 -tie");
    }
    for (int i = 0; i < 200000; i++) {
        uint32_t u = (uint32_t)next_u64();
        if (i & 1) u = (u & 0x807fffffu) | ((uint32_t)(98 + next_u64() % 50) << 23); /* near the f16 range */
        check_convert(from_bits(u), titan_f32_to_f16, titan_f16_to_f32, 0x7c00, 65536.0, "f16 random");
    }
    CHECK(titan_f32_to_f16(65519.0f) == 0x7bff && titan_f32_to_f16(65520.0f) == 0x7c00, "overflow threshold");
    CHECK(titan_f32_to_f16(0x1p-25f) == 0x0000 && titan_f32_to_f16(0x1.8p-25f) == 0x0001 &&
              titan_f32_to_f16(0x1.8p-24f) == 0x0002,
          "subnormal rounding");
    CHECK(titan_f32_to_f16(1e-30f) == 0 && titan_f32_to_f16(-1e-30f) == 0x8000, "underflow keeps the sign");
    CHECK(titan_f32_to_f16(-INFINITY) == 0xfc00, "-inf");
    uint16_t n = titan_f32_to_f16(from_bits(0xffc00001));
    CHECK((n & 0x7c00) == 0x7c00 && (n & 0x3ff) && (n & 0x8000), "negative NaN 0x%04x", n);
    n = titan_f32_to_f16(from_bits(0x7f800001));
    CHECK((n & 0x7c00) == 0x7c00 && (n & 0x3ff), "low-payload NaN must not become inf: 0x%04x", n);
}

/* ---- box ---- */

static titan_box mkbox(int nd, const int64_t *off, const int64_t *size) {
    titan_box b;
    memset(&b, 0, sizeof b);
    b.ndim = nd;
    for (int d = 0; d < nd; d++) b.offset[d] = off[d], b.size[d] = size[d];
    return b;
}

static void test_intersect(void) {
    titan_box a = mkbox(2, (int64_t[]){0, 0}, (int64_t[]){4, 8});
    titan_box b = mkbox(2, (int64_t[]){2, 6}, (int64_t[]){4, 4});
    titan_box r;
    CHECK(titan_box_intersect(&a, &b, &r) == 1, "overlap");
    CHECK(r.ndim == 2 && r.offset[0] == 2 && r.offset[1] == 6 && r.size[0] == 2 && r.size[1] == 2, "region");
    CHECK(titan_box_numel(&r) == 4 && titan_box_numel(&a) == 32, "numel");
    titan_box c = mkbox(2, (int64_t[]){4, 0}, (int64_t[]){2, 8});
    CHECK(titan_box_intersect(&a, &c, &r) == 0 && titan_box_numel(&r) == 0, "touching boxes do not intersect");
    titan_box d = mkbox(2, (int64_t[]){10, 10}, (int64_t[]){1, 1});
    CHECK(titan_box_intersect(&a, &d, &r) == 0, "disjoint");
    CHECK(titan_box_intersect(&b, &a, &r) == 1 && r.offset[0] == 2 && r.size[1] == 2, "symmetric");
    titan_box s0 = mkbox(0, NULL, NULL);
    CHECK(titan_box_intersect(&s0, &s0, &r) == 1 && titan_box_numel(&r) == 1, "scalars");
    titan_box z = mkbox(1, (int64_t[]){3}, (int64_t[]){0});
    titan_box w = mkbox(1, (int64_t[]){0}, (int64_t[]){10});
    CHECK(titan_box_intersect(&z, &w, &r) == 0, "empty box");
}

/* Element-by-element reference: global index of chunk element i. */
static int64_t global_index(const titan_box *chunk, const int64_t *gshape, int64_t i) {
    int64_t g = 0, rem = i, idx[TITAN_MAX_DIMS];
    for (int d = chunk->ndim - 1; d >= 0; d--) {
        idx[d] = rem % chunk->size[d];
        rem /= chunk->size[d];
    }
    for (int d = 0; d < chunk->ndim; d++) g = g * gshape[d] + chunk->offset[d] + idx[d];
    return g;
}

static int in_box(const titan_box *b, const titan_box *chunk, int64_t i) {
    int64_t rem = i;
    for (int d = chunk->ndim - 1; d >= 0; d--) {
        int64_t x = chunk->offset[d] + rem % chunk->size[d];
        rem /= chunk->size[d];
        if (x < b->offset[d] || x >= b->offset[d] + b->size[d]) return 0;
    }
    return 1;
}

static titan_box random_box(int nd, const int64_t *gshape, int full_inner) {
    titan_box b;
    memset(&b, 0, sizeof b);
    b.ndim = nd;
    for (int d = 0; d < nd; d++) {
        int whole = (d == nd - 1 && full_inner) || next_u64() % 3 == 0;
        int64_t lo = whole ? 0 : (int64_t)(next_u64() % (uint64_t)gshape[d]);
        int64_t hi = whole ? gshape[d] : lo + 1 + (int64_t)(next_u64() % (uint64_t)(gshape[d] - lo));
        b.offset[d] = lo;
        b.size[d] = hi - lo;
    }
    return b;
}

static void fill_element(unsigned char *p, size_t elem, int64_t g) {
    for (size_t k = 0; k < elem && k < 8; k++) p[k] = (unsigned char)((g * 131 + (int64_t)k * 7 + 1) & 0xff);
}

static void test_copy(void) {
    static const size_t elems[] = {1, 2, 4, 8};
    int copies = 0;
    for (int iter = 0; iter < 4000; iter++) {
        int nd = 1 + (int)(next_u64() % TITAN_MAX_DIMS);
        size_t elem = elems[next_u64() % 4];
        int64_t gshape[TITAN_MAX_DIMS];
        for (int d = 0; d < nd; d++) gshape[d] = 1 + (int64_t)(next_u64() % 7);
        int full = next_u64() % 2;
        titan_box sbox = random_box(nd, gshape, full), dbox = random_box(nd, gshape, full), region;
        if (iter % 10 == 0) dbox = sbox;
        if (!titan_box_intersect(&sbox, &dbox, &region)) continue;
        if (iter % 7 == 0) { /* a strict sub-region of the intersection */
            int d = (int)(next_u64() % (uint64_t)nd);
            if (region.size[d] > 1) region.size[d]--, region.offset[d] += (int64_t)(next_u64() % 2);
        }
        int64_t sn = titan_box_numel(&sbox), dn = titan_box_numel(&dbox);
        unsigned char *src = malloc((size_t)sn * elem), *dst = malloc((size_t)dn * elem);
        for (int64_t i = 0; i < sn; i++) fill_element(src + i * (int64_t)elem, elem, global_index(&sbox, gshape, i));
        memset(dst, 0xEE, (size_t)dn * elem);
        titan_box_copy(dst, &dbox, src, &sbox, &region, elem);
        copies++;
        for (int64_t i = 0; i < dn; i++) {
            unsigned char want[8];
            if (in_box(&region, &dbox, i)) fill_element(want, elem, global_index(&dbox, gshape, i));
            else memset(want, 0xEE, elem);
            if (memcmp(dst + i * (int64_t)elem, want, elem) != 0) {
                CHECK(0, "iter %d nd %d elem %zu: dst element %lld wrong", iter, nd, elem, (long long)i);
                break;
            }
        }
        free(src);
        free(dst);
    }
    CHECK(copies > 1000, "only %d copies exercised", copies);

    /* a row slice out of a matrix and back: the contiguous fast path */
    float m[6 * 5], rows[2 * 5] = {0}, back[6 * 5] = {0};
    for (int i = 0; i < 30; i++) m[i] = (float)i;
    titan_box mb = mkbox(2, (int64_t[]){0, 0}, (int64_t[]){6, 5});
    titan_box rb = mkbox(2, (int64_t[]){2, 0}, (int64_t[]){2, 5});
    titan_box_copy(rows, &rb, m, &mb, &rb, sizeof(float));
    CHECK(rows[0] == 10 && rows[9] == 19, "row slice %g %g", rows[0], rows[9]);
    titan_box_copy(back, &mb, rows, &rb, &rb, sizeof(float));
    CHECK(back[9] == 0 && back[10] == 10 && back[19] == 19 && back[20] == 0, "row slice back");
    /* a column slice */
    float col[6];
    titan_box cb = mkbox(2, (int64_t[]){0, 3}, (int64_t[]){6, 1});
    titan_box_copy(col, &cb, m, &mb, &cb, sizeof(float));
    CHECK(col[0] == 3 && col[5] == 28, "column slice %g %g", col[0], col[5]);
    /* a scalar */
    double sx = 2.5, dx = 0;
    titan_box s0 = mkbox(0, NULL, NULL);
    titan_box_copy(&dx, &s0, &sx, &s0, &s0, sizeof(double));
    CHECK(dx == 2.5, "scalar copy");
}

/* Array conversion agrees with the scalar functions, both ways and between
 * the 16-bit types; u32 does not convert to a float. */
static void test_convert(void) {
    float x[6] = {1.0f, -2.5f, 3.14159265f, 1e-30f, 65504.0f, -0.0f}, y[6];
    uint16_t h[6], g[6];
    CHECK(titan_dtype_convert(h, TITAN_DTYPE_BF16, x, TITAN_DTYPE_F32, 6) == 0, "f32 to bf16");
    for (int i = 0; i < 6; i++) CHECK(h[i] == titan_f32_to_bf16(x[i]), "bf16 %d", i);
    CHECK(titan_dtype_convert(y, TITAN_DTYPE_F32, h, TITAN_DTYPE_BF16, 6) == 0, "bf16 to f32");
    for (int i = 0; i < 6; i++) CHECK(y[i] == titan_bf16_to_f32(h[i]), "f32 from bf16 %d", i);
    CHECK(titan_dtype_convert(g, TITAN_DTYPE_F16, h, TITAN_DTYPE_BF16, 6) == 0, "bf16 to f16");
    for (int i = 0; i < 6; i++) CHECK(g[i] == titan_f32_to_f16(titan_bf16_to_f32(h[i])), "f16 from bf16 %d", i);
    CHECK(titan_dtype_convert(y, TITAN_DTYPE_F32, x, TITAN_DTYPE_F32, 6) == 0 && memcmp(x, y, sizeof x) == 0, "copy");
    uint32_t u[2] = {1, 2};
    CHECK(titan_dtype_convert(y, TITAN_DTYPE_F32, u, TITAN_DTYPE_U32, 2) == -1, "u32 refused");
    CHECK(titan_dtype_is_float(TITAN_DTYPE_BF16) && !titan_dtype_is_float(TITAN_DTYPE_U32), "is_float");
}

int main(void) {
    test_convert();
    test_names();
    test_bf16();
    test_f16();
    test_intersect();
    test_copy();
    if (failures) {
        fprintf(stderr, "test_dtype_box: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_dtype_box: ok\n");
    return 0;
}
