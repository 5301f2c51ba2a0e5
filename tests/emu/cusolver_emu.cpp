/* cusolver_emu.cpp - host definitions of the cuSOLVER dense calls
 * kernels/linalg.cu makes, for the CUDA emulator (cuda_emu.h), on LAPACK
 * (the OpenBLAS the tools link): cusolverDnCreate / Destroy / SetStream /
 * SetDeterministicMode,
 * Sgeqrf and Sorgqr (with their bufferSize queries), Dgesvd (with its).
 * <cusolverDn.h> declares every function (C linkage), so the compiler
 * checks each definition against the real API.
 *
 * Modelled as cuSOLVER documents them: column-major matrices; a bufferSize
 * query answers a workspace in elements (here LAPACK's optimal query, for
 * Dgesvd the largest over the jobs, since its query takes none), and a call
 * given less (Lwork below the query) or a workspace, matrix or devInfo not
 * lying in one live device allocation is refused, INVALID_VALUE or an abort
 * (emu::check_device) where the GPU would read past it; an invalid argument
 * (m, n, k, ld, jobs) is INVALID_VALUE with nothing computed; gesvd takes m
 * >= n only, as cuSOLVER's. devInfo (device memory) gets LAPACK's info: 0,
 * or for gesvd the number of superdiagonals that did not converge. The
 * workspace is LAPACK's work array, so a workspace too small for LAPACK
 * cannot go unnoticed. Calls run synchronously on the caller's thread under
 * an emu::DeviceScope, after the handle's stream has drained
 * (cudaStreamSynchronize). Limits: the real library's algorithms differ
 * (cuSOLVER's gesvd is its own QR iteration, geqrf its own blocking), so the
 * results match it to rounding, not bit for bit; rwork is not written. */
#include <cusolverDn.h>

#include <new>

#include "cuda_emu.h"

struct cusolverDnContext {
    uint32_t magic;
    cudaStream_t stream;
};

namespace {
const uint32_t SOLVER_MAGIC = 0x736f6c76;

bool ok(cusolverDnHandle_t h) { return h && h->magic == SOLVER_MAGIC; }

/* LAPACK through its Fortran symbols (hidden string lengths last) */
extern "C" {
void sgeqrf_(const int *m, const int *n, float *a, const int *lda, float *tau, float *work, const int *lwork,
             int *info);
void sorgqr_(const int *m, const int *n, const int *k, float *a, const int *lda, const float *tau, float *work,
             const int *lwork, int *info);
void dgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n, double *a, const int *lda, double *s,
             double *u, const int *ldu, double *vt, const int *ldvt, double *work, const int *lwork, int *info,
             size_t jobu_len, size_t jobvt_len);
}

int geqrf_query(int m, int n) {
    int lwork = -1, info = 0, lda = m > 1 ? m : 1;
    float q = 0.0f;
    sgeqrf_(&m, &n, nullptr, &lda, nullptr, &q, &lwork, &info);
    return info == 0 ? (int)q : -1;
}

int orgqr_query(int m, int n, int k) {
    int lwork = -1, info = 0, lda = m > 1 ? m : 1;
    float q = 0.0f;
    sorgqr_(&m, &n, &k, nullptr, &lda, nullptr, &q, &lwork, &info);
    return info == 0 ? (int)q : -1;
}

int gesvd_query(char ju, char jv, int m, int n) {
    int lwork = -1, info = 0, lda = m > 1 ? m : 1, ldu = lda, ldvt = n > 1 ? n : 1;
    double q = 0.0;
    dgesvd_(&ju, &jv, &m, &n, nullptr, &lda, nullptr, nullptr, &ldu, nullptr, &ldvt, &q, &lwork, &info, 1, 1);
    return info == 0 ? (int)q : -1;
}

/* the handle's stream drained, so that the call runs after what it queued */
void drain(cusolverDnHandle_t h) {
    if (h->stream) cudaStreamSynchronize(h->stream);
}
} /* namespace */

cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t *handle) {
    if (!handle) return CUSOLVER_STATUS_INVALID_VALUE;
    cusolverDnContext *c = new (std::nothrow) cusolverDnContext{SOLVER_MAGIC, 0};
    if (!c) return CUSOLVER_STATUS_ALLOC_FAILED;
    *handle = c;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnDestroy(cusolverDnHandle_t handle) {
    if (!ok(handle)) return CUSOLVER_STATUS_NOT_INITIALIZED;
    handle->magic = 0;
    delete handle;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t handle, cudaStream_t streamId) {
    if (!ok(handle)) return CUSOLVER_STATUS_NOT_INITIALIZED;
    handle->stream = streamId;
    return CUSOLVER_STATUS_SUCCESS;
}

/* LAPACK is deterministic: either mode is taken and changes nothing */
cusolverStatus_t cusolverDnSetDeterministicMode(cusolverDnHandle_t handle, cusolverDeterministicMode_t mode) {
    if (!ok(handle)) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (mode != CUSOLVER_DETERMINISTIC_RESULTS && mode != CUSOLVER_ALLOW_NON_DETERMINISTIC_RESULTS)
        return CUSOLVER_STATUS_INVALID_VALUE;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnSgeqrf_bufferSize(cusolverDnHandle_t handle, int m, int n, float *A, int lda, int *lwork) {
    if (!ok(handle)) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || lda < (m > 1 ? m : 1) || !lwork) return CUSOLVER_STATUS_INVALID_VALUE;
    int q = geqrf_query(m, n);
    if (q < 0) return CUSOLVER_STATUS_INVALID_VALUE;
    *lwork = q;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnSgeqrf(cusolverDnHandle_t handle, int m, int n, float *A, int lda, float *TAU,
                                  float *Workspace, int Lwork, int *devInfo) {
    if (!ok(handle)) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || lda < (m > 1 ? m : 1)) return CUSOLVER_STATUS_INVALID_VALUE;
    int need = geqrf_query(m, n);
    if (need < 0 || Lwork < need) return CUSOLVER_STATUS_INVALID_VALUE;
    drain(handle);
    int p = m < n ? m : n;
    emu::check_device(devInfo, sizeof(int), "cusolverDnSgeqrf devInfo");
    if (m && n) emu::check_device(A, ((size_t)lda * (n - 1) + m) * sizeof(float), "cusolverDnSgeqrf A");
    if (p) emu::check_device(TAU, (size_t)p * sizeof(float), "cusolverDnSgeqrf TAU");
    emu::check_device(Workspace, (size_t)(Lwork > 1 ? Lwork : 1) * sizeof(float), "cusolverDnSgeqrf Workspace");
    emu::DeviceScope scope;
    int info = 0;
    sgeqrf_(&m, &n, A, &lda, TAU, Workspace, &Lwork, &info);
    *devInfo = info;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnSorgqr_bufferSize(cusolverDnHandle_t handle, int m, int n, int k, const float *A, int lda,
                                             const float *tau, int *lwork) {
    if (!ok(handle)) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || n > m || k < 0 || k > n || lda < (m > 1 ? m : 1) || !lwork)
        return CUSOLVER_STATUS_INVALID_VALUE;
    int q = orgqr_query(m, n, k);
    if (q < 0) return CUSOLVER_STATUS_INVALID_VALUE;
    *lwork = q;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnSorgqr(cusolverDnHandle_t handle, int m, int n, int k, float *A, int lda, const float *tau,
                                  float *work, int lwork, int *info) {
    if (!ok(handle)) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || n > m || k < 0 || k > n || lda < (m > 1 ? m : 1)) return CUSOLVER_STATUS_INVALID_VALUE;
    int need = orgqr_query(m, n, k);
    if (need < 0 || lwork < need) return CUSOLVER_STATUS_INVALID_VALUE;
    drain(handle);
    emu::check_device(info, sizeof(int), "cusolverDnSorgqr info");
    if (m && n) emu::check_device(A, ((size_t)lda * (n - 1) + m) * sizeof(float), "cusolverDnSorgqr A");
    if (k) emu::check_device(tau, (size_t)k * sizeof(float), "cusolverDnSorgqr tau");
    emu::check_device(work, (size_t)(lwork > 1 ? lwork : 1) * sizeof(float), "cusolverDnSorgqr work");
    emu::DeviceScope scope;
    int st = 0;
    sorgqr_(&m, &n, &k, A, &lda, tau, work, &lwork, &st);
    *info = st;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnDgesvd_bufferSize(cusolverDnHandle_t handle, int m, int n, int *lwork) {
    if (!ok(handle)) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || m < n || !lwork) return CUSOLVER_STATUS_INVALID_VALUE;
    int best = 0;
    for (const char *j = "ASON"; *j; j++)
        for (const char *jv = "ASON"; *jv; jv++) {
            if (*j == 'O' && *jv == 'O') continue; /* not both overwrite A */
            int q = gesvd_query(*j, *jv, m, n);
            if (q > best) best = q;
        }
    *lwork = best;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnDgesvd(cusolverDnHandle_t handle, signed char jobu, signed char jobvt, int m, int n,
                                  double *A, int lda, double *S, double *U, int ldu, double *VT, int ldvt, double *work,
                                  int lwork, double *rwork, int *info) {
    if (!ok(handle)) return CUSOLVER_STATUS_NOT_INITIALIZED;
    auto job_ok = [](signed char j) { return j == 'A' || j == 'S' || j == 'O' || j == 'N'; };
    int p = m < n ? m : n;
    if (m < 0 || n < 0 || m < n || !job_ok(jobu) || !job_ok(jobvt) || (jobu == 'O' && jobvt == 'O') ||
        lda < (m > 1 ? m : 1))
        return CUSOLVER_STATUS_INVALID_VALUE;
    int ucols = jobu == 'A' ? m : jobu == 'S' ? p : 0, vrows = jobvt == 'A' ? n : jobvt == 'S' ? p : 0;
    if ((ucols && ldu < (m > 1 ? m : 1)) || (vrows && ldvt < (vrows > 1 ? vrows : 1)))
        return CUSOLVER_STATUS_INVALID_VALUE;
    int need = 0;
    cusolverDnDgesvd_bufferSize(handle, m, n, &need);
    if (lwork < need) return CUSOLVER_STATUS_INVALID_VALUE;
    drain(handle);
    emu::check_device(info, sizeof(int), "cusolverDnDgesvd info");
    if (m && n) emu::check_device(A, ((size_t)lda * (n - 1) + m) * sizeof(double), "cusolverDnDgesvd A");
    if (p) emu::check_device(S, (size_t)p * sizeof(double), "cusolverDnDgesvd S");
    if (ucols) emu::check_device(U, ((size_t)ldu * (ucols - 1) + m) * sizeof(double), "cusolverDnDgesvd U");
    if (vrows && n) emu::check_device(VT, ((size_t)ldvt * (n - 1) + vrows) * sizeof(double), "cusolverDnDgesvd VT");
    emu::check_device(work, (size_t)(lwork > 1 ? lwork : 1) * sizeof(double), "cusolverDnDgesvd work");
    (void)rwork;
    emu::DeviceScope scope;
    char ju = (char)jobu, jv = (char)jobvt;
    double dummy = 0.0;
    int one = 1, st = 0;
    dgesvd_(&ju, &jv, &m, &n, A, &lda, S, ucols ? U : &dummy, ucols ? &ldu : &one, vrows ? VT : &dummy,
            vrows ? &ldvt : &one, work, &lwork, &st, 1, 1);
    *info = st;
    return CUSOLVER_STATUS_SUCCESS;
}
