/* elementwise.cu - add, scale and convert (grid-stride), and the probe
 * kernel the backend launches once when it is opened.
 *
 * add and convert move 16 bytes per thread access (cuda_ops.cuh's packs):
 * the first nvec packs of P elements go whole, the rest (the tail, or
 * everything when a pointer is not 16-byte aligned: nvec = 0) one element
 * at a time. Each element gets the same fp32 arithmetic and one rounding
 * either way, so both paths give the same bits. */
#include "cuda_ops.cuh"

/* out may alias a or b: each thread reads its elements before writing them */
template <typename S>
__global__ void add_kernel(S *out, const S *a, const S *b, size_t n, size_t nvec) {
    constexpr int P = TITAN_PACK(S);
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t v = first; v < nvec; v += stride) {
        float x[P], y[P];
        load_f32_vec(a + v * P, x);
        load_f32_vec(b + v * P, y);
#pragma unroll
        for (int k = 0; k < P; k++) x[k] = x[k] + y[k];
        store_f32_vec(out + v * P, x);
    }
    for (size_t i = nvec * P + first; i < n; i += stride)
        store_f32(out + i, load_f32(a + i) + load_f32(b + i));
}

__global__ void scale_kernel(float *x, size_t n, float s) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) x[i] *= s;
}

/* D <- S: widen exactly or round once to nearest even; packs of
 * CONVERT_PACK elements (16 bytes of bf16, 32 of fp32) */
#define CONVERT_PACK 8

template <typename D, typename S>
__global__ void convert_kernel(D *dst, const S *src, size_t n, size_t nvec) {
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t v = first; v < nvec; v += stride) {
        float x[CONVERT_PACK];
        load_f32_vec(src + v * CONVERT_PACK, x);
        store_f32_vec(dst + v * CONVERT_PACK, x);
    }
    for (size_t i = nvec * CONVERT_PACK + first; i < n; i += stride)
        store_f32(dst + i, load_f32(src + i));
}

__global__ void probe_kernel(void) {}

template <typename S>
static void add_launch(S *out, const S *a, const S *b, size_t n) {
    size_t nvec = titan_cuda_aligned16(out, a, b) ? n / TITAN_PACK(S) : 0;
    add_kernel<S><<<titan_cuda_blocks(nvec ? nvec : n, 256), 256>>>(out, a, b, n, nvec);
    CUDA_CHECK_LAUNCH();
}

/* out[i] = a[i] + b[i] */
void titan_cuda_add(titan_dtype dt, void *out, const void *a, const void *b, size_t n) {
    if (n == 0) return;
    TITAN_CUDA_DISPATCH(dt, "add", add_launch<S>((S *)out, (const S *)a, (const S *)b, n));
}

/* x[i] *= s */
void titan_cuda_scale(float *x, size_t n, float s) {
    if (n == 0) return;
    scale_kernel<<<titan_cuda_blocks(n, 256), 256>>>(x, n, s);
    CUDA_CHECK_LAUNCH();
}

void titan_cuda_convert(void *dst, titan_dtype dst_type, const void *src, titan_dtype src_type,
                        size_t n) {
    int dst_ok = dst_type == TITAN_DTYPE_F32 || dst_type == TITAN_DTYPE_BF16;
    int src_ok = src_type == TITAN_DTYPE_F32 || src_type == TITAN_DTYPE_BF16;
    if (!dst_ok) titan_cuda_bad_dtype(__FILE__, __LINE__, "convert (destination)", dst_type);
    if (!src_ok) titan_cuda_bad_dtype(__FILE__, __LINE__, "convert (source)", src_type);
    if (n == 0) return;
    if (dst_type == src_type) {
        size_t bytes = n * (dst_type == TITAN_DTYPE_F32 ? sizeof(float) : sizeof(bf16));
        if (dst != src) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
        return;
    }
    size_t nvec = titan_cuda_aligned16(dst, src) ? n / CONVERT_PACK : 0;
    unsigned blocks = titan_cuda_blocks(nvec ? nvec : n, 256);
    if (dst_type == TITAN_DTYPE_BF16)
        convert_kernel<bf16, float><<<blocks, 256>>>((bf16 *)dst, (const float *)src, n, nvec);
    else
        convert_kernel<float, bf16><<<blocks, 256>>>((float *)dst, (const bf16 *)src, n, nvec);
    CUDA_CHECK_LAUNCH();
}

cudaError_t titan_cuda_probe(void) {
    probe_kernel<<<1, 1>>>();
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    return cudaDeviceSynchronize();
}
