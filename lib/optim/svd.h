/* svd.h - the leading singular vectors of a matrix, exactly (LAPACK's
 * dgesdd, the check) or by randomized SVD (Halko, Martinsson, Tropp 2011:
 * a Gaussian sketch, power iterations, QR, and an exact SVD of the small
 * projected matrix), on any backend with the linear-algebra ops
 * (backend.h: LAPACK on the CPU, cuSOLVER on CUDA).
 *
 * Matrices are row-major fp32. u: rows x k, row-major; vt: k x cols,
 * row-major; either may be NULL. Signs are canonical so that every
 * implementation agrees: each left vector's entry of largest magnitude
 * (the first such) is positive, the right vector flipped with it. */
#ifndef TITAN_OPTIM_SVD_H
#define TITAN_OPTIM_SVD_H

#include <stdint.h>

#include "backend/backend.h"
#include "core/error.h"

/* k <= min(rows, cols). Host memory, on the CPU backend. */
titan_status titan_svd_topk(const float *a, int64_t rows, int64_t cols, int k, float *u, float *vt);
/* The same on backend be, a, u, vt and work its memory: work holds
 * titan_svd_work_numel(rows, cols, k, 0, 0) floats (NULL: allocated and
 * freed here). */
titan_status titan_svd_topk_on(const titan_backend *be, const float *a, int64_t rows, int64_t cols, int k, float *u,
                               float *vt, float *work);

/* The same by randomized SVD: k + oversampling columns of sketch (capped at
 * min(rows, cols)), power_iters rounds of A A^T with re-orthonormalisation,
 * the Gaussian test matrix value i of rng stream (seed, stream). */
titan_status titan_rsvd_topk(const float *a, int64_t rows, int64_t cols, int k, int oversampling, int power_iters,
                             uint64_t seed, uint64_t stream, float *u, float *vt);
/* work: titan_svd_work_numel(rows, cols, k, oversampling, 1) floats, or NULL. */
titan_status titan_rsvd_topk_on(const titan_backend *be, const float *a, int64_t rows, int64_t cols, int k,
                                int oversampling, int power_iters, uint64_t seed, uint64_t stream, float *u,
                                float *vt, float *work);
/* Floats of the _on functions' workspace (randomized 0: the exact SVD). */
size_t titan_svd_work_numel(int64_t rows, int64_t cols, int k, int oversampling, int randomized);

#endif
