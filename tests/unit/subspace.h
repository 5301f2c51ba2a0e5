/* subspace.h - the tests' measure of how close two subspaces are: the
 * largest principal angle, in radians, between the column spans of a and b
 * (rows x k each, row-major, orthonormal columns). A check, not a part of
 * the optimizer, so it lives with the tests and may use the CPU backend's
 * double-precision LAPACK wrapper directly. */
#ifndef TITAN_TESTS_SUBSPACE_H
#define TITAN_TESTS_SUBSPACE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend/cpu/cpu_ops.h"

__attribute__((unused)) static double subspace_angle(const float *a, const float *b, int64_t rows, int k) {
    /* sin of the largest angle = the spectral norm of B - A (A^T B), which
     * stays accurate for small angles (acos of A^T B's smallest singular
     * value loses them in rounding) */
    double *c = calloc((size_t)k * k + (size_t)rows * k + (size_t)k, sizeof *c);
    if (!c) return NAN;
    double *res = c + (size_t)k * k, *s = res + (size_t)rows * k;
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++) {
            double sum = 0.0;
            for (int64_t r = 0; r < rows; r++) sum += (double)a[r * k + i] * (double)b[r * k + j];
            c[i + (size_t)j * k] = sum;
        }
    for (int64_t r = 0; r < rows; r++) /* column-major rows x k */
        for (int j = 0; j < k; j++) {
            double x = b[r * k + j];
            for (int i = 0; i < k; i++) x -= (double)a[r * k + i] * c[i + (size_t)j * k];
            res[r + (size_t)j * rows] = x;
        }
    double angle = NAN;
    if (titan_cpu_dgesdd(res, (int)rows, k, s, NULL, NULL) == 0) angle = asin(s[0] > 1.0 ? 1.0 : s[0]);
    free(c);
    return angle;
}

#endif
