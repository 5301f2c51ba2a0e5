/* rmsnorm.cu - RMSNorm as Meta's Llama: y = (x * rsqrt(mean(x^2) + eps)) * w.
 * Statistics as the CPU backend: the mean of squares is summed in double and
 * rounded once to fp32; r = 1/sqrtf(ms + eps) (IEEE, not rsqrtf). Activations
 * and the weight are of storage type S; rstd and dweight are fp32. The row
 * kernels move 16-byte packs where the shape and pointers allow (row_cols):
 * norms are memory-bound, and one narrow load per thread in flight leaves
 * most of the bandwidth unused. */
#include "cuda_ops.cuh"

#define RMS_THREADS 256

/* A thread's columns of a row: with VEC (C a multiple of the 16-byte pack
 * and every row 16-byte aligned, checked on the host) whole packs, thread t
 * taking packs t, t + blockDim.x, ..: a 2048-wide bf16 row is one 16-byte
 * load per thread of 256, all in flight at once; else single elements, t,
 * t + blockDim.x, .. (N: the pack size or 1, so "for (c ...) for (e < N)"
 * visits the thread's elements c + e in a fixed order). */
template <typename S, bool VEC>
struct row_cols {
    static constexpr int N = VEC ? TITAN_PACK(S) : 1;
    static __device__ __forceinline__ int first() { return threadIdx.x * N; }
    static __device__ __forceinline__ int step() { return blockDim.x * N; }
    static __device__ __forceinline__ void load(const S *p, float (&v)[N]) {
        if constexpr (VEC) load_f32_vec<N>(p, v);
        else v[0] = load_f32(p);
    }
    static __device__ __forceinline__ void store(S *p, const float (&v)[N]) {
        if constexpr (VEC) store_f32_vec<N>(p, v);
        else store_f32(p, v[0]);
    }
};

/* one block per row */
template <typename S, bool VEC>
__global__ void rmsnorm_forward_kernel(S *out, float *rstd, const S *inp, const S *weight, int C,
                                       float eps) {
    typedef row_cols<S, VEC> R;
    __shared__ double tmp[32];
    const S *x = inp + (size_t)blockIdx.x * C;
    S *y = out + (size_t)blockIdx.x * C;
    double acc = 0.0;
    for (int c = R::first(); c < C; c += R::step()) {
        float v[R::N];
        R::load(x + c, v);
#pragma unroll
        for (int e = 0; e < R::N; e++) acc += (double)v[e] * (double)v[e];
    }
    double ss = block_sum_double(acc, tmp);
    float ms = (float)(ss / C);
    float r = 1.0f / sqrtf(ms + eps);
    for (int c = R::first(); c < C; c += R::step()) {
        float v[R::N], w[R::N];
        R::load(x + c, v);
        R::load(weight + c, w);
#pragma unroll
        for (int e = 0; e < R::N; e++) v[e] = (v[e] * r) * w[e];
        R::store(y + c, v);
    }
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

/* one block per row: dx (+)= r*(dy*w) - x * r^3/C * sum_c(dy*w*x) */
template <typename S, bool VEC>
__global__ void rmsnorm_backward_dinp_kernel(S *dinp, const S *dout, const S *inp, const S *weight,
                                             const float *rstd, int C, bool add) {
    typedef row_cols<S, VEC> R;
    __shared__ double tmp[32];
    size_t off = (size_t)blockIdx.x * C;
    const S *x = inp + off, *dy = dout + off;
    S *dx = dinp + off;
    double acc = 0.0;
    for (int c = R::first(); c < C; c += R::step()) {
        float g[R::N], w[R::N], v[R::N];
        R::load(dy + c, g);
        R::load(weight + c, w);
        R::load(x + c, v);
#pragma unroll
        for (int e = 0; e < R::N; e++) acc += (double)(g[e] * w[e]) * (double)v[e];
    }
    double dot = block_sum_double(acc, tmp);
    float r = rstd[blockIdx.x];
    float k = (float)((double)r * r * r * dot / C);
    for (int c = R::first(); c < C; c += R::step()) {
        float g[R::N], w[R::N], v[R::N], old[R::N];
        R::load(dy + c, g);
        R::load(weight + c, w);
        R::load(x + c, v);
        if (add) R::load(dx + c, old); /* "+=": read, add in fp32, round once */
#pragma unroll
        for (int e = 0; e < R::N; e++) {
            float d = r * (g[e] * w[e]) - v[e] * k;
            v[e] = add ? old[e] + d : d;
        }
        R::store(dx + c, v);
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

/* whole 16-byte packs in every row: C a multiple of the pack, the rows' starts aligned */
template <typename S, typename... P>
static bool packed_rows(int C, const P *...p) {
    return C % TITAN_PACK(S) == 0 && titan_cuda_aligned16(p...);
}

template <typename S>
static void forward_launch(S *out, float *rstd, const S *inp, const S *weight, int N, int C,
                           float eps) {
    if (packed_rows<S>(C, out, inp, weight))
        rmsnorm_forward_kernel<S, true><<<N, RMS_THREADS>>>(out, rstd, inp, weight, C, eps);
    else
        rmsnorm_forward_kernel<S, false><<<N, RMS_THREADS>>>(out, rstd, inp, weight, C, eps);
    CUDA_CHECK_LAUNCH();
}

template <typename S>
static void backward_launch(int acc, S *dinp, float *dweight, const S *dout, const S *inp,
                            const S *weight, const float *rstd, int N, int C) {
    if (dinp) {
        const bool add = (acc & TITAN_ACC_DX) != 0;
        if (packed_rows<S>(C, dinp, dout, inp, weight))
            rmsnorm_backward_dinp_kernel<S, true><<<N, RMS_THREADS>>>(dinp, dout, inp, weight, rstd,
                                                                      C, add);
        else
            rmsnorm_backward_dinp_kernel<S, false><<<N, RMS_THREADS>>>(dinp, dout, inp, weight,
                                                                       rstd, C, add);
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
