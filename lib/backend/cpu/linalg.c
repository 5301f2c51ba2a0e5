/* linalg.c - the CPU backend's linear algebra for GaLore's refresh
 * (backend.h's qr_orthonormal, svd_thin, svd_signs) through LAPACK: the
 * OpenMP OpenBLAS titan links for BLAS carries it, declared by Debian's
 * lapack.h. Column-major, as LAPACK is. */
#include <cblas.h> /* openblas_set_num_threads */
#include <lapack.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "backend/cpu/cpu_ops.h"

/* LAPACK runs on one thread: its many small BLAS calls each fork and join
 * the thread team, which costs more than it saves (a 256 x 256 SVD took 13x
 * longer on 2 threads than on 1 on a busy 2-core machine), and one thread
 * gives the same bits whatever training.threads is. */
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

int titan_cpu_dgesdd(double *a, int rows, int cols, double *s, double *u, double *vt) {
    int p = rows < cols ? rows : cols, info = 0, lwork = -1;
    double query = 0.0;
    const char *job = u || vt ? "S" : "N";
    int *iwork = malloc(8 * (size_t)p * sizeof *iwork);
    if (!iwork) return -1000;
    double one = 0.0;
    double *uu = u ? u : &one, *vv = vt ? vt : &one;
    int ldu = u ? rows : 1, ldvt = vt ? p : 1;
    int threads = lapack_threads_begin();
    LAPACK_dgesdd(job, &rows, &cols, a, &rows, s, uu, &ldu, vv, &ldvt, &query, &lwork, iwork, &info);
    lwork = (int)query;
    double *work = info == 0 ? malloc((size_t)(lwork > 1 ? lwork : 1) * sizeof *work) : NULL;
    if (work) LAPACK_dgesdd(job, &rows, &cols, a, &rows, s, uu, &ldu, vv, &ldvt, work, &lwork, iwork, &info);
    lapack_threads_end(threads);
    if (!work && info == 0) info = -1000;
    free(work);
    free(iwork);
    return info;
}

int titan_cpu_qr_orthonormal(float *a, int rows, int cols) {
    int info = 0, lwork = -1;
    float query = 0.0f;
    float *tau = malloc((size_t)cols * sizeof *tau);
    if (!tau) return -1000;
    LAPACK_sgeqrf(&rows, &cols, a, &rows, tau, &query, &lwork, &info);
    lwork = (int)query;
    float *work = info == 0 ? malloc((size_t)(lwork > 1 ? lwork : 1) * sizeof *work) : NULL;
    if (work) {
        int threads = lapack_threads_begin();
        LAPACK_sgeqrf(&rows, &cols, a, &rows, tau, work, &lwork, &info);
        if (info == 0) LAPACK_sorgqr(&rows, &cols, &cols, a, &rows, tau, work, &lwork, &info);
        lapack_threads_end(threads);
    } else if (info == 0) {
        info = -1000;
    }
    free(work);
    free(tau);
    return info;
}

int titan_cpu_svd_thin(const float *a, int rows, int cols, int k, float *u, float *vt) {
    size_t p = (size_t)(rows < cols ? rows : cols), r = (size_t)rows, c = (size_t)cols;
    double *ad = malloc((r * c + r * p + p * c + p) * sizeof *ad);
    if (!ad) return -1000;
    double *ud = ad + r * c, *vd = ud + r * p, *s = vd + p * c;
    for (size_t i = 0; i < r * c; i++) ad[i] = a[i];
    int info = titan_cpu_dgesdd(ad, rows, cols, s, ud, vd);
    if (info == 0 && u)
        for (size_t i = 0; i < r * (size_t)k; i++) u[i] = (float)ud[i];
    if (info == 0 && vt) /* V^T is p x cols (ld p): its first k rows, ld k */
        for (size_t j = 0; j < c; j++)
            for (int q = 0; q < k; q++) vt[(size_t)q + j * (size_t)k] = (float)vd[(size_t)q + j * p];
    free(ad);
    return info;
}

void titan_cpu_svd_signs(float *u, float *vt, int rows, int cols, int k) {
    for (int c = 0; c < k; c++) {
        int64_t best = 0;
        for (int64_t i = 1; i < rows; i++)
            if (fabsf(u[i * k + c]) > fabsf(u[best * k + c])) best = i;
        if (u[best * k + c] >= 0.0f) continue;
        for (int64_t i = 0; i < rows; i++) u[i * k + c] = -u[i * k + c];
        if (vt)
            for (int64_t j = 0; j < cols; j++) vt[(int64_t)c * cols + j] = -vt[(int64_t)c * cols + j];
    }
}
