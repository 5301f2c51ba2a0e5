/* rng.c - counter-based deterministic random numbers (splitmix64 mixing). */
#include "rng.h"

#include <math.h>

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t titan_rng_u64(uint64_t seed, uint64_t stream, uint64_t i) {
    uint64_t z = mix64(seed + 0x9e3779b97f4a7c15ULL);
    z = mix64(z ^ (stream * 0xd1b54a32d192ed03ULL));
    return mix64(z + i * 0x9e3779b97f4a7c15ULL);
}

double titan_rng_uniform(uint64_t seed, uint64_t stream, uint64_t i) {
    return (double)(titan_rng_u64(seed, stream, i) >> 11) * (1.0 / 9007199254740992.0);
}

/* Element j draws from its own sub-sequence, so the result depends only on
 * (seed, stream, j): rejection retries walk j's own counter. That also lets
 * the threads split a tensor with the same bytes: an 8B seed checkpoint's
 * draws took minutes of one core. */
void titan_rng_trunc_normal(float *x, int64_t n, uint64_t seed, uint64_t stream, double mean,
                            double std, double lo, double hi) {
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (int64_t j = 0; j < n; j++) {
        uint64_t base = (uint64_t)j << 8;
        double v = mean;
        for (uint64_t k = 0; k < 128; k++) {
            double u1 = titan_rng_uniform(seed, stream, base + 2 * k);
            double u2 = titan_rng_uniform(seed, stream, base + 2 * k + 1);
            if (u1 < 1e-300) u1 = 1e-300;
            double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
            v = mean + std * z;
            if (v >= lo && v <= hi) break;
            v = v < lo ? lo : hi; /* only reached if 128 tries all fail */
        }
        x[j] = (float)v;
    }
}

uint64_t titan_rng_hash_name(const char *s) {
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return mix64(h);
}
