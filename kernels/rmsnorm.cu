/* rmsnorm.cu - RMSNorm as Meta's Llama: y = (x * rsqrt(mean(x^2) + eps)) * w.
 * Statistics as the CPU backend: the mean of squares is summed in double and
 * rounded once to fp32; r = 1/sqrtf(ms + eps) (IEEE, not rsqrtf). Activations
 * and the weight are of storage type S; rstd and dweight are fp32. */
#include "cuda_ops.cuh"

#define RMS_THREADS 256

/* one block per row */
template <typename S>
__global__ void rmsnorm_forward_kernel(S *out, float *rstd, const S *inp, const S *weight, int C,
                                       float eps) {
    __shared__ double tmp[32];
    const S *x = inp + (size_t)blockIdx.x * C;
    S *y = out + (size_t)blockIdx.x * C;
    double acc = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        double xc = (double)load_f32(x + c);
        acc += xc * xc;
    }
    double ss = block_sum_double(acc, tmp);
    float ms = (float)(ss / C);
    float r = 1.0f / sqrtf(ms + eps);
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        store_f32(y + c, (load_f32(x + c) * r) * load_f32(weight + c));
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

/* one block per row: dx (+)= r*(dy*w) - x * r^3/C * sum_c(dy*w*x) */
template <typename S>
__global__ void rmsnorm_backward_dinp_kernel(S *dinp, const S *dout, const S *inp, const S *weight,
                                             const float *rstd, int C, bool add) {
    __shared__ double tmp[32];
    size_t off = (size_t)blockIdx.x * C;
    const S *x = inp + off, *dy = dout + off;
    S *dx = dinp + off;
    double acc = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        acc += (double)(load_f32(dy + c) * load_f32(weight + c)) * (double)load_f32(x + c);
    double dot = block_sum_double(acc, tmp);
    float r = rstd[blockIdx.x];
    float k = (float)((double)r * r * r * dot / C);
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float g = r * (load_f32(dy + c) * load_f32(weight + c)) - load_f32(x + c) * k;
        store_grad(add, dx + c, g);
    }
}

/* dweight (+)= sum_n dy*(x*r), in double, deterministic without atomics, in
 * two passes whose split depends on N and C only:
 *   1. block (column group, chunk): DW_COLS columns x DW_STRIPES row stripes;
 *      thread (x, y) sums rows y, y+DW_STRIPES, .. of the chunk for column x
 *      (each warp reads a row's DW_COLS neighbouring columns), then stripe 0
 *      folds the stripes in order into partial[chunk][c];
 *   2. a thread per column folds the chunks in order and adds once (or
 *      stores, overwriting: the partials are never in dweight itself).
 * Every product is exact in double (fp32 x fp32), so the sum differs from the
 * CPU's single sequential one only in double roundings, far below fp32's. */
#define DW_COLS 32
#define DW_STRIPES 8
#define DW_CHUNK_MIN 256 /* rows per chunk, doubled until the chunks fit gridDim.y */

template <typename S>
__global__ void rmsnorm_dweight_partial_kernel(double *partial, const S *dout, const S *inp,
                                               const float *rstd, int N, int C, int chunk) {
    __shared__ double tmp[DW_STRIPES][DW_COLS + 1];
    const int c = blockIdx.x * DW_COLS + threadIdx.x, k = blockIdx.y;
    const int n0 = k * chunk, n1 = min(N, n0 + chunk);
    double acc = 0.0;
    if (c < C)
        for (int n = n0 + threadIdx.y; n < n1; n += DW_STRIPES) {
            size_t i = (size_t)n * C + c;
            acc += (double)load_f32(dout + i) * (double)(load_f32(inp + i) * rstd[n]);
        }
    tmp[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        double s = tmp[0][threadIdx.x];
        for (int y = 1; y < DW_STRIPES; y++) s += tmp[y][threadIdx.x];
        partial[(size_t)k * C + c] = s;
    }
}

__global__ void rmsnorm_dweight_fold_kernel(float *dweight, const double *partial, int chunks,
                                            int C, bool add) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double s = 0.0;
    for (int k = 0; k < chunks; k++) s += partial[(size_t)k * C + c];
    store_grad(add, dweight + c, (float)s);
}

template <typename S>
static void dweight_launch(bool acc, float *dweight, const S *dout, const S *inp,
                           const float *rstd, int N, int C) {
    int chunk = DW_CHUNK_MIN;
    while ((N + (long)chunk - 1) / chunk > 65535) chunk *= 2;
    const int chunks = (int)((N + (long)chunk - 1) / chunk);
    double *partial = (double *)titan_cuda_scratch((size_t)chunks * C * sizeof(double),
                                                    "rmsnorm_backward (dweight partial sums)");
    dim3 grid((unsigned)((C + DW_COLS - 1) / DW_COLS), (unsigned)chunks);
    rmsnorm_dweight_partial_kernel<S><<<grid, dim3(DW_COLS, DW_STRIPES)>>>(partial, dout, inp,
                                                                          rstd, N, C, chunk);
    CUDA_CHECK_LAUNCH();
    rmsnorm_dweight_fold_kernel<<<(C + 127) / 128, 128>>>(dweight, partial, chunks, C, acc);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaFreeAsync(partial, 0));
}

template <typename S>
static void forward_launch(S *out, float *rstd, const S *inp, const S *weight, int N, int C,
                           float eps) {
    rmsnorm_forward_kernel<S><<<N, RMS_THREADS>>>(out, rstd, inp, weight, C, eps);
    CUDA_CHECK_LAUNCH();
}

template <typename S>
static void backward_launch(int acc, S *dinp, float *dweight, const S *dout, const S *inp,
                            const S *weight, const float *rstd, int N, int C) {
    if (dinp) {
        rmsnorm_backward_dinp_kernel<S><<<N, RMS_THREADS>>>(dinp, dout, inp, weight, rstd, C,
                                                            (acc & TITAN_ACC_DX) != 0);
        CUDA_CHECK_LAUNCH();
    }
    if (dweight) {
        dweight_launch<S>((acc & TITAN_ACC_DW) != 0, dweight, dout, inp, rstd, N, C);
    }
}

void titan_cuda_rmsnorm_forward(titan_dtype dt, void *out, float *rstd, const void *inp,
                                const void *weight, int N, int C, float eps) {
    if (N <= 0 || C <= 0) return;
    TITAN_CUDA_DISPATCH(dt, "rmsnorm_forward",
                        forward_launch<S>((S *)out, rstd, (const S *)inp, (const S *)weight, N,
                                          C, eps));
}

void titan_cuda_rmsnorm_backward(titan_dtype dt, int acc, void *dinp, float *dweight,
                                 const void *dout, const void *inp, const void *weight,
                                 const float *rstd, int N, int C) {
    if (C <= 0) return;
    if (N <= 0) { /* no rows: an overwritten dweight is the empty sum */
        if (dweight && !(acc & TITAN_ACC_DW))
            CUDA_CHECK(cudaMemsetAsync(dweight, 0, (size_t)C * sizeof(float), 0));
        return;
    }
    TITAN_CUDA_DISPATCH(dt, "rmsnorm_backward",
                        backward_launch<S>(acc, (S *)dinp, dweight, (const S *)dout,
                                           (const S *)inp, (const S *)weight, rstd, N, C));
}
