/* rng.h - deterministic random numbers, identical on every machine.
 *
 * A counter-based generator: value i of stream (seed, stream) is a pure
 * function of the three, so initialisation does not depend on thread count
 * or on the order tensors are visited. */
#ifndef TITAN_CORE_RNG_H
#define TITAN_CORE_RNG_H

#include <stdint.h>

uint64_t titan_rng_u64(uint64_t seed, uint64_t stream, uint64_t i);
/* Uniform in [0, 1) with 53 random bits. */
double titan_rng_uniform(uint64_t seed, uint64_t stream, uint64_t i);
/* Fills x[0..n) with N(mean, std) truncated to [lo, hi] by rejection. */
void titan_rng_trunc_normal(float *x, int64_t n, uint64_t seed, uint64_t stream,
                            double mean, double std, double lo, double hi);
/* Stable 64-bit id of a string (parameter names -> streams). */
uint64_t titan_rng_hash_name(const char *s);

#endif
