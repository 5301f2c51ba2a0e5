/* svd.c - exact and randomized leading singular vectors (see svd.h).
 *
 * LAPACK is column-major: a row-major rows x cols buffer is the column-major
 * cols x rows transpose, so the SVD of that buffer swaps the roles of the
 * left and right vectors (A^T = V S U^T) rather than copying A around. */
#include "optim/svd.h"

#include <cblas.h>
#include <lapack.h>
#include <math.h>
#include <stdlib.h>
#include <omp.h>
#include <string.h>

#include "core/mem.h"
#include "core/rng.h"

/* LAPACK runs on one thread: its many small BLAS calls each fork and join
 * the thread team, which costs more than it saves (a 256 x 256 SVD took 13x
 * longer on 2 threads than on 1 on a busy 2-core machine), and one thread
 * gives the same bits whatever training.threads is. The products around it
 * (cblas_sgemm) keep the caller's threads. */
static int lapack_threads_begin(void) {
    int saved = openblas_get_num_threads();
    openblas_set_num_threads(1);
    omp_set_num_threads(1);
    return saved;
}

static void lapack_threads_end(int saved) {
    openblas_set_num_threads(saved);
    omp_set_num_threads(saved);
}

/* Thin SVD of the column-major rows x cols matrix a (overwritten): u
 * (rows x p, ld rows), s (p), vt (p x cols, ld p), p = min(rows, cols). */
static titan_status dgesdd_thin(double *a, int rows, int cols, double *s, double *u, double *vt) {
    int p = rows < cols ? rows : cols, info = 0, lwork = -1;
    double query = 0.0;
    int *iwork = malloc(8 * (size_t)p * sizeof *iwork);
    if (!iwork) return titan_error(TITAN_ERR_NOMEM, "svd: %d x %d: out of memory", rows, cols);
    int threads = lapack_threads_begin();
    LAPACK_dgesdd("S", &rows, &cols, a, &rows, s, u, &rows, vt, &p, &query, &lwork, iwork, &info);
    lwork = (int)query;
    double *work = info == 0 ? malloc((size_t)(lwork > 1 ? lwork : 1) * sizeof *work) : NULL;
    if (work) LAPACK_dgesdd("S", &rows, &cols, a, &rows, s, u, &rows, vt, &p, work, &lwork, iwork, &info);
    lapack_threads_end(threads);
    free(work);
    free(iwork);
    if (!work && info == 0) return titan_error(TITAN_ERR_NOMEM, "svd: %d x %d: out of memory", rows, cols);
    if (info != 0) return titan_error(TITAN_ERR_NUMERIC, "svd: LAPACK dgesdd on %d x %d failed (info %d)", rows, cols, info);
    return TITAN_OK;
}

/* Flips pairs (column c of u, row c of vt) so that u's largest entry is positive. */
static void canonical_signs(float *u, float *vt, int64_t rows, int64_t cols, int k) {
    for (int c = 0; c < k; c++) {
        int64_t best = 0;
        for (int64_t i = 1; i < rows; i++)
            if (fabsf(u[i * k + c]) > fabsf(u[best * k + c])) best = i;
        if (u[best * k + c] >= 0.0f) continue;
        for (int64_t i = 0; i < rows; i++) u[i * k + c] = -u[i * k + c];
        if (vt)
            for (int64_t j = 0; j < cols; j++) vt[c * cols + j] = -vt[c * cols + j];
    }
}

static int too_big(int64_t rows, int64_t cols, int k) {
    return rows < 1 || cols < 1 || rows > INT32_MAX / 8 || cols > INT32_MAX / 8 || k < 1 || k > rows || k > cols;
}

titan_status titan_svd_topk(const float *a, int64_t rows, int64_t cols, int k, float *u, float *vt) {
    if (too_big(rows, cols, k)) return titan_error(TITAN_ERR_USAGE, "svd: rank %d of a %lld x %lld matrix", k, (long long)rows, (long long)cols);
    int64_t p = rows < cols ? rows : cols;
    /* the buffer as column-major cols x rows: A^T = U' S V'^T, so A's right
     * vectors are U' (vt = the first k columns of U', contiguous) and its
     * left vectors V' */
    double *at = malloc((size_t)(rows * cols + cols * p + p * rows + p) * sizeof *at);
    float *uf = malloc((size_t)(rows * k) * sizeof *uf);
    if (!at || !uf) {
        free(at);
        free(uf);
        return titan_error(TITAN_ERR_NOMEM, "svd: %lld x %lld: out of memory", (long long)rows, (long long)cols);
    }
    double *up = at + rows * cols, *vtp = up + cols * p, *s = vtp + p * rows;
    for (int64_t i = 0; i < rows * cols; i++) at[i] = a[i];
    titan_status st = dgesdd_thin(at, (int)cols, (int)rows, s, up, vtp);
    if (st == TITAN_OK) {
        for (int64_t i = 0; i < rows; i++)
            for (int c = 0; c < k; c++) uf[i * k + c] = (float)vtp[c + i * p];
        if (vt)
            for (int64_t i = 0; i < (int64_t)k * cols; i++) vt[i] = (float)up[i];
        canonical_signs(uf, vt, rows, cols, k);
        if (u) memcpy(u, uf, (size_t)(rows * k) * sizeof *u);
    }
    free(at);
    free(uf);
    return st;
}

/* Q of the QR of the column-major rows x cols y (rows >= cols), in place. */
static titan_status orthonormalize(float *y, int rows, int cols, float *tau) {
    int info = 0, lwork = -1;
    float query = 0.0f;
    LAPACK_sgeqrf(&rows, &cols, y, &rows, tau, &query, &lwork, &info);
    lwork = (int)query;
    float *work = info == 0 ? malloc((size_t)(lwork > 1 ? lwork : 1) * sizeof *work) : NULL;
    if (!work) return titan_error(TITAN_ERR_NOMEM, "randomized svd: QR workspace: out of memory");
    int threads = lapack_threads_begin();
    LAPACK_sgeqrf(&rows, &cols, y, &rows, tau, work, &lwork, &info);
    if (info == 0) LAPACK_sorgqr(&rows, &cols, &cols, y, &rows, tau, work, &lwork, &info);
    lapack_threads_end(threads);
    free(work);
    return info == 0 ? TITAN_OK : titan_error(TITAN_ERR_NUMERIC, "randomized svd: LAPACK QR of %d x %d failed (info %d)", rows, cols, info);
}

/* Standard normal values (Box-Muller on the counter-based generator). */
static void gaussian(float *x, size_t n, uint64_t seed, uint64_t stream) {
    for (size_t i = 0; i < n; i++) {
        double u1 = titan_rng_uniform(seed, stream, 2 * i), u2 = titan_rng_uniform(seed, stream, 2 * i + 1);
        x[i] = (float)(sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2));
    }
}

/* The sketch: y (column-major rows x l) an orthonormal basis of A's range
 * after the power iterations; z (cols x l) scratch. A is row-major, i.e.
 * the column-major cols x rows A^T with leading dimension cols. */
static titan_status sketch(const float *a, int rows, int cols, int l, int power_iters, uint64_t seed, uint64_t stream,
                           float *y, float *z, float *tau) {
    gaussian(z, (size_t)cols * l, seed, stream);
    cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, rows, l, cols, 1.0f, a, cols, z, cols, 0.0f, y, rows);
    TITAN_TRY(orthonormalize(y, rows, l, tau));
    for (int q = 0; q < power_iters; q++) {
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, cols, l, rows, 1.0f, a, cols, y, rows, 0.0f, z, cols);
        TITAN_TRY(orthonormalize(z, cols, l, tau));
        cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, rows, l, cols, 1.0f, a, cols, z, cols, 0.0f, y, rows);
        TITAN_TRY(orthonormalize(y, rows, l, tau));
    }
    return TITAN_OK;
}

titan_status titan_rsvd_topk(const float *a, int64_t rows, int64_t cols, int k, int oversampling, int power_iters,
                             uint64_t seed, uint64_t stream, float *u, float *vt) {
    if (too_big(rows, cols, k) || oversampling < 0 || power_iters < 0)
        return titan_error(TITAN_ERR_USAGE, "randomized svd: rank %d (oversampling %d, power iterations %d) of a %lld x %lld matrix",
                           k, oversampling, power_iters, (long long)rows, (long long)cols);
    int m = (int)rows, n = (int)cols, p = m < n ? m : n;
    int l = k + oversampling < p ? k + oversampling : p;
    size_t fl = (size_t)m * l + (size_t)n * l + (size_t)l + (size_t)m * k;
    size_t dl = (size_t)n * l * 2 + (size_t)l * l + (size_t)l;
    float *fbuf = malloc(fl * sizeof *fbuf);
    double *dbuf = malloc(dl * sizeof *dbuf);
    if (!fbuf || !dbuf) {
        free(fbuf);
        free(dbuf);
        return titan_error(TITAN_ERR_NOMEM, "randomized svd: %d x %d, sketch %d: out of memory", m, n, l);
    }
    /* a small matrix's products too run best on one thread (same bits) */
    int threads = (int64_t)m * n < (1 << 20) ? lapack_threads_begin() : 0;
    float *y = fbuf, *z = y + (size_t)m * l, *tau = z + (size_t)n * l, *ucol = tau + l;
    double *bt = dbuf, *ub = bt + (size_t)n * l, *vtb = ub + (size_t)n * l, *s = vtb + (size_t)l * l;
    titan_status st = sketch(a, m, n, l, power_iters, seed, stream, y, z, tau);
    if (st == TITAN_OK) {
        /* B^T = A^T Y (cols x l); B^T = U'' S V''^T: A's right vectors are
         * U'' (B = Y^T A), its left vectors Y V''. */
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, l, m, 1.0f, a, n, y, m, 0.0f, z, n);
        for (size_t i = 0; i < (size_t)n * l; i++) bt[i] = z[i];
        st = dgesdd_thin(bt, n, l, s, ub, vtb);
    }
    if (st == TITAN_OK) {
        /* V'' (l x l): V''(i, c) = vtb[c + i l]; in fp32 into z's space */
        float *v2 = z;
        for (int c = 0; c < k; c++)
            for (int i = 0; i < l; i++) v2[i + (size_t)c * l] = (float)vtb[c + (size_t)i * l];
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, k, l, 1.0f, y, m, v2, l, 0.0f, ucol, m);
        /* u row-major in y's space (ucol stays until copied) */
        float *ur = y;
        for (int i = 0; i < m; i++)
            for (int c = 0; c < k; c++) ur[(size_t)i * k + c] = ucol[i + (size_t)c * m];
        if (vt)
            for (size_t i = 0; i < (size_t)k * n; i++) vt[i] = (float)ub[i];
        canonical_signs(ur, vt, m, n, k);
        if (u) memcpy(u, ur, (size_t)m * k * sizeof *u);
    }
    if (threads) lapack_threads_end(threads);
    free(fbuf);
    free(dbuf);
    return st;
}

double titan_subspace_angle(const float *a, const float *b, int64_t rows, int k) {
    /* sin of the largest angle = the spectral norm of B - A (A^T B), which
     * stays accurate for small angles (acos of A^T B's smallest singular
     * value loses them in rounding) */
    double *c = calloc((size_t)k * k + (size_t)rows * k * 2 + (size_t)k * k + (size_t)k, sizeof *c);
    if (!c) return NAN;
    double *res = c + (size_t)k * k, *u = res + (size_t)rows * k, *vt = u + (size_t)rows * k, *s = vt + (size_t)k * k;
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
    if (dgesdd_thin(res, (int)rows, k, s, u, vt) == TITAN_OK) angle = asin(s[0] > 1.0 ? 1.0 : s[0]);
    free(c);
    return angle;
}
