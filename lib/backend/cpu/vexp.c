/* vexp.c - a vectorised expf for softmax-style loops (attention, cross-entropy,
 * swiglu). libm's expf does not vectorise without -ffast-math, and the
 * attention kernel spends as much time in exp as in its dot products.
 *
 * Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, and the Cephes
 * degree-6 polynomial for e^r: about 1 ulp over the softmax range. Written
 * with GCC vector extensions so it compiles to AVX-512, AVX2 or SSE alike;
 * the tail runs through the same vector code (padded), so an element's bits
 * never depend on where it sits in the array. */
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"

typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

static inline v16f splat(float a) { return (v16f){a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a}; }
static inline v16i splati(int32_t a) { return (v16i){a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a}; }

static inline v16f vexp16(v16f x) {
    const v16f lo = splat(-87.33654f), hi = splat(88.0f);
    v16i under = x < lo;
    v16i over = x > hi;
    x = (v16f)((under & (v16i)lo) | (~under & (v16i)x));
    x = (v16f)((over & (v16i)hi) | (~over & (v16i)x));
    /* n = round(x / ln2) by the 1.5*2^23 trick; its low bits are n itself */
    const v16f magic = splat(12582912.0f);
    v16f t = x * splat(1.44269504088896341f) + magic;
    v16f n = t - magic;
    v16i ni = (v16i)t - (v16i)magic;
    v16f r = x - n * splat(0.693359375f);
    r = r - n * splat(-2.12194440e-4f);
    v16f p = splat(1.9875691500e-4f);
    p = p * r + splat(1.3981999507e-3f);
    p = p * r + splat(8.3334519073e-3f);
    p = p * r + splat(4.1665795894e-2f);
    p = p * r + splat(1.6666665459e-1f);
    p = p * r + splat(5.0000001201e-1f);
    p = p * (r * r) + r + splat(1.0f);
    v16f scale = (v16f)((ni + splati(127)) << 23);
    v16f y = p * scale;
    return (v16f)(~under & (v16i)y); /* below the normal range: exactly 0 */
}

void titan_cpu_exp(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        v16f a;
        memcpy(&a, x + i, sizeof a);
        a = vexp16(a);
        memcpy(y + i, &a, sizeof a);
    }
    if (i < n) {
        float buf[16] = {0};
        memcpy(buf, x + i, (size_t)(n - i) * sizeof(float));
        v16f a;
        memcpy(&a, buf, sizeof a);
        a = vexp16(a);
        memcpy(buf, &a, sizeof a);
        memcpy(y + i, buf, (size_t)(n - i) * sizeof(float));
    }
}
