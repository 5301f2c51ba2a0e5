/* svd.c - exact and randomized leading singular vectors (see svd.h),
 * written once over a backend's ops: its GEMMs (matmul_forward and
 * _backward in fp32), qr_orthonormal, svd_thin and svd_signs (LAPACK on the
 * CPU, cuSOLVER on CUDA). Only the Gaussian test matrix is made on the
 * host, by the counter-based generator, and copied over: the same numbers
 * on every backend for a seed.
 *
 * The backend ops are column-major where LAPACK is: a row-major rows x cols
 * buffer is the column-major cols x rows transpose, so the SVD of that
 * buffer swaps the roles of the left and right vectors (A^T = V S U^T)
 * rather than copying A around. In the GEMMs, a column-major r x c matrix
 * is the row-major c x r one. */
#include "optim/svd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/rng.h"

static int too_big(int64_t rows, int64_t cols, int k) {
    return rows < 1 || cols < 1 || rows > INT32_MAX / 8 || cols > INT32_MAX / 8 || k < 1 || k > rows || k > cols;
}

static int has_ops(const titan_backend *be) {
    return be->qr_orthonormal && be->svd_thin && be->svd_signs;
}

static int sketch_cols(int64_t rows, int64_t cols, int k, int oversampling) {
    int64_t p = rows < cols ? rows : cols;
    return (int)(k + oversampling < p ? k + oversampling : p);
}

/* workspace parts start at 256-byte boundaries (of an aligned workspace) */
static size_t up64(size_t numel) { return (numel + 63) & ~(size_t)63; }

size_t titan_svd_work_numel(int64_t rows, int64_t cols, int k, int oversampling, int randomized) {
    size_t l = randomized ? (size_t)sketch_cols(rows, cols, k, oversampling) : 0;
    return up64((size_t)rows * l) + up64((size_t)cols * l) + up64((size_t)k * l) + up64((size_t)rows * k);
}

/* The caller's workspace, or one of backend memory made here (*owned). */
static float *workspace(const titan_backend *be, float *work, size_t numel, float **owned) {
    *owned = NULL;
    if (work) return work;
    return *owned = be->alloc((numel ? numel : 1) * sizeof(float));
}

titan_status titan_svd_topk_on(const titan_backend *be, const float *a, int64_t rows, int64_t cols, int k, float *u,
                               float *vt, float *work) {
    if (too_big(rows, cols, k)) return titan_error(TITAN_ERR_USAGE, "svd: rank %d of a %lld x %lld matrix", k, (long long)rows, (long long)cols);
    if (!has_ops(be)) return titan_error(TITAN_ERR_USAGE, "svd: backend %s has no SVD", be->name);
    float *owned, *ws = workspace(be, work, titan_svd_work_numel(rows, cols, k, 0, 0), &owned);
    if (!ws) return titan_error(TITAN_ERR_NOMEM, "svd: %lld x %lld: out of memory", (long long)rows, (long long)cols);
    float *uf = u ? u : ws; /* signs need the left vectors even when the caller does not */
    /* the buffer as column-major cols x rows: A^T = U' S V'^T, so A's right
     * vectors are U' (vt: its first k columns, column-major cols x k = k x
     * cols row-major) and its left vectors V' (V'^T's first k rows,
     * column-major k x rows = rows x k row-major) */
    int info = be->svd_thin(a, (int)cols, (int)rows, k, vt, uf);
    if (info == 0) be->svd_signs(uf, vt, (int)rows, (int)cols, k);
    if (owned) be->free(owned);
    if (info != 0) return titan_error(TITAN_ERR_NUMERIC, "svd: %s's thin SVD of %lld x %lld failed (info %d)", be->name,
                                      (long long)cols, (long long)rows, info);
    return TITAN_OK;
}

titan_status titan_svd_topk(const float *a, int64_t rows, int64_t cols, int k, float *u, float *vt) {
    return titan_svd_topk_on(titan_backend_cpu(), a, rows, cols, k, u, vt, NULL);
}

/* Standard normal values (Box-Muller on the counter-based generator):
 * value i depends on i alone, so the host's threads share the work (a
 * large matrix's sketch is millions of values a refresh) without
 * changing a bit. */
static void gaussian(float *x, size_t n, uint64_t seed, uint64_t stream) {
#pragma omp parallel for schedule(static) if (n > (1u << 16))
    for (size_t i = 0; i < n; i++) {
        double u1 = titan_rng_uniform(seed, stream, 2 * i), u2 = titan_rng_uniform(seed, stream, 2 * i + 1);
        x[i] = (float)(sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2));
    }
}

static titan_status qr(const titan_backend *be, float *y, int rows, int cols) {
    int info = be->qr_orthonormal(y, rows, cols);
    return info == 0 ? TITAN_OK : titan_error(TITAN_ERR_NUMERIC, "randomized svd: %s's QR of %d x %d failed (info %d)",
                                              be->name, rows, cols, info);
}

/* The sketch: y (column-major rows x l) an orthonormal basis of A's range
 * after the power iterations; z (cols x l) holds the test matrix on entry.
 * A is row-major, i.e. the column-major cols x rows A^T. */
static titan_status sketch(const titan_backend *be, const float *a, int rows, int cols, int l, int power_iters,
                           float *y, float *z) {
    /* Y = A Z: row-major l x rows = Z^T (l x cols) A^T */
    be->matmul_forward(TITAN_DTYPE_F32, y, z, a, l, cols, rows);
    TITAN_TRY(qr(be, y, rows, l));
    for (int q = 0; q < power_iters; q++) {
        /* Z = A^T Y: row-major l x cols = Y^T (l x rows) A */
        be->matmul_backward(TITAN_DTYPE_F32, 0, z, NULL, y, NULL, a, l, cols, rows);
        TITAN_TRY(qr(be, z, cols, l));
        be->matmul_forward(TITAN_DTYPE_F32, y, z, a, l, cols, rows);
        TITAN_TRY(qr(be, y, rows, l));
    }
    return TITAN_OK;
}

titan_status titan_rsvd_topk_on(const titan_backend *be, const float *a, int64_t rows, int64_t cols, int k,
                                int oversampling, int power_iters, uint64_t seed, uint64_t stream, float *u,
                                float *vt, float *work) {
    if (too_big(rows, cols, k) || oversampling < 0 || power_iters < 0)
        return titan_error(TITAN_ERR_USAGE, "randomized svd: rank %d (oversampling %d, power iterations %d) of a %lld x %lld matrix",
                           k, oversampling, power_iters, (long long)rows, (long long)cols);
    if (!has_ops(be)) return titan_error(TITAN_ERR_USAGE, "randomized svd: backend %s has no SVD", be->name);
    int m = (int)rows, n = (int)cols, l = sketch_cols(rows, cols, k, oversampling);
    float *owned, *ws = workspace(be, work, titan_svd_work_numel(rows, cols, k, oversampling, 1), &owned);
    float *host = malloc((size_t)n * l * sizeof *host);
    if (!ws || !host) {
        free(host);
        if (owned) be->free(owned);
        return titan_error(TITAN_ERR_NOMEM, "randomized svd: %d x %d, sketch %d: out of memory", m, n, l);
    }
    float *y = ws, *z = y + up64((size_t)m * l), *w = z + up64((size_t)n * l), *uf = u ? u : w + up64((size_t)k * l);
    gaussian(host, (size_t)n * l, seed, stream);
    be->to_device(z, host, (size_t)n * l * sizeof *host);
    free(host);
    titan_status st = sketch(be, a, m, n, l, power_iters, y, z);
    if (st == TITAN_OK) {
        /* B^T = A^T Y (column-major cols x l, in z); B^T = U'' S V''^T: A's
         * right vectors are U'' (B = Y^T A), its left vectors Y V''. */
        be->matmul_backward(TITAN_DTYPE_F32, 0, z, NULL, y, NULL, a, l, n, m);
        int info = be->svd_thin(z, n, l, k, vt, w);
        if (info != 0)
            st = titan_error(TITAN_ERR_NUMERIC, "randomized svd: %s's thin SVD of %d x %d failed (info %d)", be->name,
                             n, l, info);
    }
    if (st == TITAN_OK) {
        /* w: V''^T's first k rows, column-major k x l = row-major l x k
         * (V'' itself); u (row-major m x k) = Y V''_k = Yr^T w, Yr the
         * row-major l x m y: matmul_backward's dw = dout^T inp */
        be->matmul_backward(TITAN_DTYPE_F32, 0, NULL, uf, y, w, NULL, l, k, m);
        be->svd_signs(uf, vt, m, n, k);
    }
    if (owned) be->free(owned);
    return st;
}

titan_status titan_rsvd_topk(const float *a, int64_t rows, int64_t cols, int k, int oversampling, int power_iters,
                             uint64_t seed, uint64_t stream, float *u, float *vt) {
    return titan_rsvd_topk_on(titan_backend_cpu(), a, rows, cols, k, oversampling, power_iters, seed, stream, u, vt,
                              NULL);
}
