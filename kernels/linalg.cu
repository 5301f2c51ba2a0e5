/* linalg.cu - GaLore's refresh linear algebra (backend.h's qr_orthonormal,
 * svd_thin, svd_signs) through cuSOLVER's dense API: Sgeqrf + Sorgqr for the
 * range finder's QR, Dgesvd (double, as the CPU's dgesdd) for the thin SVD.
 * One handle on the default stream, deterministic mode, made at the first call. Each call asks
 * the library for its workspace size, takes it from the stream-ordered pool
 * and reads devInfo back (a synchronisation: a refresh is rare). */
#include <cusolverDn.h>

#include "cuda_ops.cuh"

static const char *solver_status(cusolverStatus_t s) {
    switch (s) {
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
    default: return "cuSOLVER error";
    }
}

#define CUSOLVER_CHECK(stmt) TITAN_STATUS_CHECK_(cusolverStatus_t, CUSOLVER_STATUS_SUCCESS, solver_status, stmt, #stmt)

static cusolverDnHandle_t g_solver;

static cusolverDnHandle_t solver(void) {
    if (!g_solver) {
        CUSOLVER_CHECK(cusolverDnCreate(&g_solver));
        CUSOLVER_CHECK(cusolverDnSetStream(g_solver, 0));
        /* the same bits every run (a resume repeats the refresh), whatever the library's default */
        CUSOLVER_CHECK(cusolverDnSetDeterministicMode(g_solver, CUSOLVER_DETERMINISTIC_RESULTS));
    }
    return g_solver;
}

/* the two devInfo words back (waits for the default stream) */
static int read_info(const int *d_info, int count) {
    int info[2] = {0, 0};
    CUDA_CHECK(cudaMemcpy(info, d_info, (size_t)count * sizeof(int), cudaMemcpyDeviceToHost));
    return info[0] != 0 ? info[0] : info[count - 1];
}

int titan_cuda_qr_orthonormal(float *a, int rows, int cols) {
    cusolverDnHandle_t h = solver();
    int lw_qr = 0, lw_q = 0;
    /* workspace: two devInfo words (16 bytes), tau (cols), then the larger of the two queries */
    size_t head = 16 + ((size_t)cols * sizeof(float) + 15) / 16 * 16;
    CUSOLVER_CHECK(cusolverDnSgeqrf_bufferSize(h, rows, cols, a, rows, &lw_qr));
    char *ws = (char *)titan_cuda_scratch(head, "qr_orthonormal");
    int *info = (int *)ws;
    float *tau = (float *)(ws + 16);
    CUSOLVER_CHECK(cusolverDnSorgqr_bufferSize(h, rows, cols, cols, a, rows, tau, &lw_q));
    int lwork = lw_qr > lw_q ? lw_qr : lw_q;
    float *work = (float *)titan_cuda_scratch((size_t)(lwork > 1 ? lwork : 1) * sizeof(float), "qr_orthonormal");
    CUSOLVER_CHECK(cusolverDnSgeqrf(h, rows, cols, a, rows, tau, work, lwork, info));
    CUSOLVER_CHECK(cusolverDnSorgqr(h, rows, cols, cols, a, rows, tau, work, lwork, info + 1));
    int st = read_info(info, 2);
    CUDA_CHECK(cudaFreeAsync(work, 0));
    CUDA_CHECK(cudaFreeAsync(ws, 0));
    return st;
}

/* ad (column-major m x n, m >= n) = a, or a's transpose when tr */
__global__ void svd_in_kernel(double *ad, const float *a, int rows, int cols, int tr) {
    size_t n = (size_t)rows * cols, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        size_t r = i % (size_t)rows, c = i / (size_t)rows; /* a(r, c) */
        ad[tr ? c + r * (size_t)cols : i] = (double)a[i];
    }
}

/* u (rows x k): a's U = the factor's U, or its V (V^T transposed) when tr */
__global__ void svd_u_kernel(float *u, const double *ud, const double *vtd, int rows, int k, int m, int n, int tr) {
    size_t total = (size_t)rows * k, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        size_t r = i % (size_t)rows, c = i / (size_t)rows;
        u[i] = (float)(tr ? vtd[c + r * (size_t)n] : ud[r + c * (size_t)m]);
    }
}

/* vt (k x cols, ld k): a's V^T = the factor's V^T, or its U transposed when tr */
__global__ void svd_vt_kernel(float *vt, const double *ud, const double *vtd, int cols, int k, int m, int n, int tr) {
    size_t total = (size_t)k * cols, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        size_t c = i % (size_t)k, j = i / (size_t)k;
        vt[i] = (float)(tr ? ud[j + c * (size_t)m] : vtd[c + j * (size_t)n]);
    }
}

int titan_cuda_svd_thin(const float *a, int rows, int cols, int k, float *u, float *vt) {
    cusolverDnHandle_t h = solver();
    /* Dgesvd takes m >= n only: a wide matrix's SVD is its transpose's */
    int tr = rows < cols, m = tr ? cols : rows, n = tr ? rows : cols;
    size_t mn = (size_t)m * n, nn = (size_t)n * n;
    int lwork = 0;
    CUSOLVER_CHECK(cusolverDnDgesvd_bufferSize(h, m, n, &lwork));
    size_t doubles = 2 + mn + (size_t)n + mn + nn + (size_t)(lwork > 1 ? lwork : 1);
    double *ws = (double *)titan_cuda_scratch(doubles * sizeof(double), "svd_thin");
    int *info = (int *)ws;
    double *ad = ws + 2, *s = ad + mn, *ud = s + n, *vtd = ud + mn, *work = vtd + nn;
    svd_in_kernel<<<titan_cuda_blocks((size_t)rows * cols, 256), 256>>>(ad, a, rows, cols, tr);
    CUDA_CHECK_LAUNCH();
    CUSOLVER_CHECK(cusolverDnDgesvd(h, 'S', 'S', m, n, ad, m, s, ud, m, vtd, n, work, lwork, NULL, info));
    int st = read_info(info, 1);
    if (st == 0 && u) {
        svd_u_kernel<<<titan_cuda_blocks((size_t)rows * k, 256), 256>>>(u, ud, vtd, rows, k, m, n, tr);
        CUDA_CHECK_LAUNCH();
    }
    if (st == 0 && vt) {
        svd_vt_kernel<<<titan_cuda_blocks((size_t)k * cols, 256), 256>>>(vt, ud, vtd, cols, k, m, n, tr);
        CUDA_CHECK_LAUNCH();
    }
    CUDA_CHECK(cudaFreeAsync(ws, 0));
    return st;
}

/* One block a column c of u (row-major rows x k): the first entry of the
 * largest magnitude, found by a fixed tree (ties to the lower row), and if
 * it is negative the column and vt's row c negated. */
__global__ void svd_signs_kernel(float *u, float *vt, int rows, int cols, int k) {
    __shared__ float best_v[256];
    __shared__ int best_i[256];
    int c = blockIdx.x, t = threadIdx.x;
    float bv = -1.0f;
    int bi = rows;
    for (int i = t; i < rows; i += blockDim.x) {
        float x = fabsf(u[(size_t)i * k + c]);
        if (x > bv) bv = x, bi = i; /* rising i: a tie keeps the first */
    }
    best_v[t] = bv;
    best_i[t] = bi;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) {
            float ov = best_v[t + half];
            int oi = best_i[t + half];
            if (ov > best_v[t] || (ov == best_v[t] && oi < best_i[t])) best_v[t] = ov, best_i[t] = oi;
        }
        __syncthreads();
    }
    int at = best_i[0] < rows ? best_i[0] : 0;
    if (!(u[(size_t)at * k + c] < 0.0f)) return;
    __syncthreads(); /* every thread read u before any writes */
    for (int i = t; i < rows; i += blockDim.x) u[(size_t)i * k + c] = -u[(size_t)i * k + c];
    if (vt)
        for (int j = t; j < cols; j += blockDim.x) vt[(size_t)c * cols + j] = -vt[(size_t)c * cols + j];
}

void titan_cuda_svd_signs(float *u, float *vt, int rows, int cols, int k) {
    if (k <= 0 || rows <= 0) return;
    svd_signs_kernel<<<k, 256>>>(u, vt, rows, cols, k);
    CUDA_CHECK_LAUNCH();
}
