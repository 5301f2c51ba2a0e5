/* fp8.cu - torchao's dynamic float8 casts on the GPU: amax, scale and the
 * saturating cast of an operand (tensor/fp8.h says the rules), each step
 * the CPU's arithmetic so the bytes and scales are the CPU backend's:
 *   amax   max |x| over the tensor, a row or a column, as the bits of |x|
 *          compared as unsigned integers (exact, in any order, and a NaN's
 *          bits sort above infinity's, so a NaN propagates as torch's amax);
 *          no atomics: blocks write partial maxima, a second pass folds them;
 *   scale  fp32(fmax / max(amax, 1e-12)) in double, rounded down to a power
 *          of two for the rowwise recipes, and its reciprocal (the dequant
 *          scale cuBLASLt multiplies by, as torch's _scaled_mm takes it);
 *   cast   encode(fp32(x * scale)), round to nearest even, saturating (two
 *          codes an instruction: fp8_encode.cuh);
 *          optionally transposed, so that each GEMM operand is stored with
 *          its contraction dimension contiguous (the "TN" layout that float8
 *          cuBLASLt needs): the tile goes through shared memory so both the
 *          read and the write are coalesced; 64 x 64 tiles with 16-byte
 *          loads and stores where the shape allows (cast_tile_kernel),
 *          which can write the straight codes too, from the same read
 *          (titan_cuda_fp8_cast_both: dy's two tensorwise casts);
 *          TITAN_CUDA_FP8_CAST=simple keeps the 32 x 32 element-wise tiles
 *          and a cast a layout (the same bytes; to time one against the
 *          other).
 * dequantize (the emulated path): fp32(decode(q) / scale), a division as
 * torchao's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <type_traits>

#include "cuda_ops.cuh"
#include "fp8_encode.cuh"

/* COL_CHUNK: rows a thread of amax_cols_kernel walks; short, so that many
 * chunks keep loads in flight (256 rows one after another was a guess at
 * the slow rowwise casts of the first H100 run) */
enum { AMAX_THREADS = 256, TILE = 32, TILE_ROWS = 8, COL_CHUNK = 64, MAX_PARTS = 1024, CAST_THREADS = 256 };
/* cast_tile_kernel: W x W tiles, TILE_THREADS threads; a transposed row's
 * W bytes leave in 16-byte stores; the shared tile's rows are W + 4 bytes
 * (17 words: a warp's byte writes down a column meet at most 2-way bank
 * conflicts) */
enum { W = 64, W_PAD = W + 4, TILE_THREADS = 256 };

/* TITAN_CUDA_FP8_CAST=simple: the element-wise transposed tiles and one
 * cast per layout; "tiled", empty or unset: the tiles; -1 until read */
static int g_simple_casts = -1;

void titan_cuda_fp8_set_simple(int on) { g_simple_casts = on != 0; }

static int simple_casts(void) {
    if (g_simple_casts < 0) {
        const char *e = getenv("TITAN_CUDA_FP8_CAST");
        if (!e || !*e || strcmp(e, "tiled") == 0) {
            g_simple_casts = 0;
        } else if (strcmp(e, "simple") == 0) {
            g_simple_casts = 1;
        } else {
            fprintf(stderr, "titan: error: cuda: TITAN_CUDA_FP8_CAST=%s: expected tiled or simple (or unset)\n", e);
            fflush(NULL);
            _exit(TITAN_ERR_USAGE);
        }
    }
    return g_simple_casts;
}

/* reads TITAN_CUDA_FP8_CAST at the backend's start: a bad value ends the
 * run there, not at its first float8 cast */
void titan_cuda_fp8_check_env(void) { (void)simple_casts(); }

/* inv starts this many floats after scale: cuBLASLt refuses a scale pointer
 * that is not 16-byte aligned ("not supported", an H100, cuBLAS 13.0); 64
 * keeps it 256-byte aligned as the pool's own blocks are */
static size_t inv_offset(int ns) { return ((size_t)ns + 63) / 64 * 64; }

/* ------------------------------------------------------------- codec */

/* the codec: fp8_encode.cuh's titan_cuda_fp8_encode2 (the conversion
 * instruction, tensor/fp8.h's titan_fp8_encode_with bytes) and tensor/fp8.h's
 * titan_fp8_decode_with, the CPU's own lines compiled for the device */

/* |x| as bits that order as unsigned integers (NaN above infinity) */
static __device__ __forceinline__ unsigned abs_bits(float x) { return __float_as_uint(x) & 0x7fffffffu; }

static __device__ __forceinline__ unsigned warp_umax(unsigned v) {
    for (int o = WARP / 2; o > 0; o /= 2) {
        unsigned w = __shfl_xor_sync(FULL_MASK, v, o);
        v = w > v ? w : v;
    }
    return v;
}

/* max over the block (blockDim.x a multiple of 32); every thread gets it */
static __device__ __forceinline__ unsigned block_umax(unsigned v, unsigned *tmp) {
    int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
    v = warp_umax(v);
    __syncthreads();
    if (lane == 0) tmp[warp] = v;
    __syncthreads();
    if (warp == 0) {
        unsigned w = lane < nw ? tmp[lane] : 0u;
        w = warp_umax(w);
        if (lane == 0) tmp[0] = w;
    }
    __syncthreads();
    return tmp[0];
}

/* ------------------------------------------------------------- amax */

/* max of m and |x| over n elements from p, 16-byte packs first when
 * vec (p 16-byte aligned), the rest one by one; thread t of T takes
 * elements t, t + T, ... */
template <typename S>
static __device__ __forceinline__ unsigned amax_span(unsigned m, const S *p, size_t n, bool vec, size_t t, size_t T) {
    constexpr int P = TITAN_PACK(S);
    size_t nvec = vec ? n / P : 0;
    for (size_t v = t; v < nvec; v += T) {
        float e[P];
        load_f32_vec(p + v * P, e);
#pragma unroll
        for (int k = 0; k < P; k++) {
            unsigned b = abs_bits(e[k]);
            m = b > m ? b : m;
        }
    }
    for (size_t i = nvec * P + t; i < n; i += T) {
        unsigned b = abs_bits(load_f32(p + i));
        m = b > m ? b : m;
    }
    return m;
}

/* part[b] = max |x| over block b's grid-stride share of all n elements */
template <typename S>
__global__ void amax_tensor_kernel(unsigned *part, const S *x, size_t n, bool vec) {
    __shared__ unsigned tmp[WARP];
    unsigned m = amax_span(0u, x, n, vec, (size_t)blockIdx.x * blockDim.x + threadIdx.x,
                           (size_t)gridDim.x * blockDim.x);
    m = block_umax(m, tmp);
    if (threadIdx.x == 0) part[blockIdx.x] = m;
}

/* part[r] = max |x[r, :]|, a block per row (grid-stride over rows) */
template <typename S>
__global__ void amax_rows_kernel(unsigned *part, const S *x, int rows, int cols, bool vec) {
    __shared__ unsigned tmp[WARP];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        unsigned m = amax_span(0u, x + (size_t)r * cols, (size_t)cols, vec, threadIdx.x, blockDim.x);
        m = block_umax(m, tmp);
        if (threadIdx.x == 0) part[r] = m;
    }
}

/* part[chunk][c] = max |x[r, c]| over the chunk's COL_CHUNK rows: a thread
 * per column (consecutive threads, consecutive columns: coalesced) */
template <typename S>
__global__ void amax_cols_kernel(unsigned *part, const S *x, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, chunk = blockIdx.y;
    if (c >= cols) return;
    int r0 = chunk * COL_CHUNK, r1 = r0 + COL_CHUNK < rows ? r0 + COL_CHUNK : rows;
    unsigned m = 0;
#pragma unroll 8
    for (int r = r0; r < r1; r++) {
        unsigned b = abs_bits(load_f32(x + (size_t)r * cols + c));
        m = b > m ? b : m;
    }
    part[(size_t)chunk * cols + c] = m;
}

/* scale[i] and inv[i] from amax's bits m (titan_fp8_scale) */
static __device__ __forceinline__ void store_scale(float *scale, float *inv, int i, unsigned m, int f, int pow2) {
    float amax = __uint_as_float(m), s;
    if (isnan(amax)) {
        s = __int_as_float(0x7fc00000); /* the CPU's NAN, whatever the input's payload */
    } else {
        double a = (double)amax > TITAN_FP8_SCALE_EPS ? (double)amax : TITAN_FP8_SCALE_EPS;
        s = (float)((double)titan_fp8_info_of((titan_fp8_format)f).max / a);
        if (pow2) s = exp2f(floorf(log2f(s)));
    }
    scale[i] = s;
    inv[i] = 1.0f / s;
}

/* scale[i], inv[i] for i < ns from one partial maximum each: a thread a scale */
__global__ void scale_kernel(float *scale, float *inv, const unsigned *part, int ns, int f, int pow2) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < ns; i += gridDim.x * blockDim.x)
        store_scale(scale, inv, i, part[i], f, pow2);
}

/* Scale i's maximum over parts partial maxima (part[p * ns + i]), the
 * block's threads across the parts (one thread walking a thousand partials
 * one load after another took most of a tensorwise cast); thread 0's
 * result is the block's. */
static __device__ __forceinline__ unsigned fold_parts(const unsigned *part, int parts, int ns, int i, unsigned *tmp) {
    unsigned m = 0;
    for (int p = threadIdx.x; p < parts; p += blockDim.x) {
        unsigned b = part[(size_t)p * ns + i];
        m = b > m ? b : m;
    }
    return block_umax(m, tmp);
}

/* the same from parts partial maxima each: a block a scale */
__global__ void scale_fold_kernel(float *scale, float *inv, const unsigned *part, int parts, int ns, int f, int pow2) {
    __shared__ unsigned tmp[WARP];
    for (int i = blockIdx.x; i < ns; i += gridDim.x) {
        unsigned m = fold_parts(part, parts, ns, i, tmp);
        if (threadIdx.x == 0) store_scale(scale, inv, i, m, f, pow2);
    }
}

/* scale[i], inv[i] from a given amax (tensor parallelism's, reduced over
 * the group): its bits are the order amax's partials fold in */
__global__ void scale_given_kernel(float *scale, float *inv, const float *amax, int ns, int f, int pow2) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < ns; i += gridDim.x * blockDim.x)
        store_scale(scale, inv, i, __float_as_uint(amax[i]), f, pow2);
}

/* amax[i] from parts partial maxima each (backend.h's fp8_amax) */
__global__ void amax_fold_kernel(float *amax, const unsigned *part, int parts, int ns) {
    __shared__ unsigned tmp[WARP];
    for (int i = blockIdx.x; i < ns; i += gridDim.x) {
        unsigned m = fold_parts(part, parts, ns, i, tmp);
        if (threadIdx.x == 0) amax[i] = __uint_as_float(m);
    }
}

/* ------------------------------------------------------------- cast */

static __device__ __forceinline__ float scale_at(const float *s, int axis, int r, int c) {
    return s[axis == TITAN_FP8_ROWS ? r : axis == TITAN_FP8_COLS ? c : 0];
}

/* q[r][c] = encode(x[r][c] * scale): rows along blockIdx.y, columns
 * along the threads (no division per element) */
template <typename S>
__global__ void cast_kernel(uint8_t *q, const S *x, const float *scale, int rows, int cols, int axis, int f) {
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const S *xr = x + (size_t)r * cols;
        uint8_t *qr = q + (size_t)r * cols;
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x)
            qr[c] = titan_cuda_fp8_encode(load_f32(xr + c) * scale_at(scale, axis, r, c), (titan_fp8_format)f);
    }
}

/* The same in packs: P = 16 / sizeof(S) elements a thread, one 16-byte
 * load, one P-byte store (x 16-byte aligned, cols a multiple of P, q's
 * rows P-byte aligned: the host checks). The same bytes. */
template <typename S>
__global__ void cast_vec_kernel(uint8_t *q, const S *x, const float *scale, int rows, int cols, int axis, int f) {
    constexpr int P = TITAN_PACK(S);
    typedef typename std::conditional<P == 8, uint2, uint32_t>::type packed;
    int nv = cols / P;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const S *xr = x + (size_t)r * cols;
        uint8_t *qr = q + (size_t)r * cols;
        for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += gridDim.x * blockDim.x) {
            float e[P];
            load_f32_vec(xr + (size_t)v * P, e);
            union {
                packed u;
                uint16_t two[P / 2];
            } o;
#pragma unroll
            for (int k = 0; k < P; k += 2)
                o.two[k / 2] = titan_cuda_fp8_encode2(e[k] * scale_at(scale, axis, r, v * P + k),
                                                      e[k + 1] * scale_at(scale, axis, r, v * P + k + 1),
                                                      (titan_fp8_format)f);
            *reinterpret_cast<packed *>(qr + (size_t)v * P) = o.u;
        }
    }
}

/* qt[c][r] = encode(x[r][c] * scale): TILE x TILE tiles, TILE x TILE_ROWS threads */
template <typename S>
__global__ void cast_transposed_kernel(uint8_t *qt, const S *x, const float *scale, int rows, int cols, int axis,
                                       int f) {
    __shared__ uint8_t tile[TILE][TILE + 4];
    int c0 = blockIdx.x * TILE, r0 = blockIdx.y * TILE;
    for (int dy = threadIdx.y; dy < TILE; dy += TILE_ROWS) {
        int r = r0 + dy, c = c0 + threadIdx.x;
        uint8_t v = 0;
        if (r < rows && c < cols)
            v = titan_cuda_fp8_encode(load_f32(x + (size_t)r * cols + c) * scale_at(scale, axis, r, c),
                                      (titan_fp8_format)f);
        tile[dy][threadIdx.x] = v;
    }
    __syncthreads();
    for (int dy = threadIdx.y; dy < TILE; dy += TILE_ROWS) {
        int c = c0 + dy, r = r0 + threadIdx.x;
        if (c < cols && r < rows) qt[(size_t)c * rows + r] = tile[threadIdx.x][dy];
    }
}

/* qt[c][r] = encode(x[r][c] * scale), and q[r][c] the same when q is
 * given: a W x W tile a block. Each thread reads 16-byte packs of a row
 * (P elements), writes their codes straight to q as one P-byte store and
 * down a column of the shared tile; then each thread sends 16 bytes of a
 * transposed row. Needs x 16-byte aligned, cols a multiple of P, rows a
 * multiple of 16, qt 16-byte and q P-byte aligned (the host checks): a
 * pack or a 16-byte store is then wholly in the matrix or wholly out.
 * The same bytes as cast_transposed_kernel and cast_vec_kernel. */
template <typename S>
__global__ void cast_tile_kernel(uint8_t *qt, uint8_t *q, const S *x, const float *scale, int rows, int cols,
                                 int axis, int f) {
    constexpr int P = TITAN_PACK(S), PACKS = W / P;
    typedef typename std::conditional<P == 8, uint2, uint32_t>::type packed;
    __shared__ uint32_t tile[W * W_PAD / 4]; /* tile byte [c][r] at c * W_PAD + r */
    uint8_t *tb = reinterpret_cast<uint8_t *>(tile);
    int c0 = blockIdx.x * W, r0 = blockIdx.y * W;
    for (int i = threadIdx.x; i < W * PACKS; i += blockDim.x) {
        int dr = i / PACKS, dc = i % PACKS * P, r = r0 + dr, c = c0 + dc;
        union {
            packed u;
            uint16_t two[P / 2];
            uint8_t b[P];
        } o;
        if (r < rows && c < cols) {
            float e[P];
            load_f32_vec(x + (size_t)r * cols + c, e);
#pragma unroll
            for (int k = 0; k < P; k += 2)
                o.two[k / 2] = titan_cuda_fp8_encode2(e[k] * scale_at(scale, axis, r, c + k),
                                                      e[k + 1] * scale_at(scale, axis, r, c + k + 1),
                                                      (titan_fp8_format)f);
            if (q) *reinterpret_cast<packed *>(q + (size_t)r * cols + c) = o.u;
        } else {
#pragma unroll
            for (int k = 0; k < P; k++) o.b[k] = 0;
        }
#pragma unroll
        for (int k = 0; k < P; k++) tb[(dc + k) * W_PAD + dr] = o.b[k];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < W * (W / 16); i += blockDim.x) {
        int dc = i / (W / 16), seg = i % (W / 16), c = c0 + dc, r = r0 + seg * 16;
        if (c >= cols || r >= rows) continue;
        const uint32_t *t = tile + (dc * W_PAD + seg * 16) / 4;
        *reinterpret_cast<uint4 *>(qt + (size_t)c * rows + r) = make_uint4(t[0], t[1], t[2], t[3]);
    }
}

/* out[i][k] = decode(q[i][k]) / scale[rowwise ? i : 0] */
__global__ void dequantize_kernel(float *out, const uint8_t *q, const float *scale, int rows, int cols, int rowwise,
                                  int f) {
    size_t n = (size_t)rows * cols;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = titan_fp8_decode_with(q[i], (titan_fp8_format)f) / scale[rowwise ? (int)(i / (size_t)cols) : 0];
}

/* ------------------------------------------------------------- host */

/* The partial maxima of x [rows, cols] under axis (ns > 0 of them a
 * part): *parts parts, in scratch the caller frees. */
template <typename S>
static unsigned *amax_partials(int *parts_out, const S *x, int rows, int cols, titan_fp8_axis axis) {
    int ns = titan_cuda_fp8_nscales(axis, rows, cols), parts;
    size_t n = (size_t)rows * cols;
    if (axis == TITAN_FP8_TENSOR) {
        size_t b = (n + AMAX_THREADS * 8 - 1) / (AMAX_THREADS * 8);
        parts = (int)(b < (size_t)MAX_PARTS ? (b ? b : 1) : (size_t)MAX_PARTS);
    } else {
        parts = axis == TITAN_FP8_COLS ? (rows + COL_CHUNK - 1) / COL_CHUNK : 1;
        if (parts < 1) parts = 1;
    }
    unsigned *part = (unsigned *)titan_cuda_scratch((size_t)parts * ns * sizeof(unsigned), "float8 amax");
    if (n == 0) {
        CUDA_CHECK(cudaMemsetAsync(part, 0, (size_t)parts * ns * sizeof(unsigned), 0));
    } else if (axis == TITAN_FP8_TENSOR) {
        amax_tensor_kernel<S><<<parts, AMAX_THREADS>>>(part, x, n, titan_cuda_aligned16(x));
    } else if (axis == TITAN_FP8_ROWS) {
        bool vec = titan_cuda_aligned16(x) && (size_t)cols * sizeof(S) % 16 == 0;
        amax_rows_kernel<S><<<titan_cuda_blocks((size_t)rows, 1), AMAX_THREADS>>>(part, x, rows, cols, vec);
    } else {
        dim3 grid((unsigned)((cols + AMAX_THREADS - 1) / AMAX_THREADS), (unsigned)parts);
        amax_cols_kernel<S><<<grid, AMAX_THREADS>>>(part, x, rows, cols);
    }
    CUDA_CHECK_LAUNCH();
    *parts_out = parts;
    return part;
}

/* scale[ns] and inv[ns] of x [rows, cols] under axis: amax partials, then
 * the scales from them; or from a given amax (the caller's, ns values) */
template <typename S>
static void scales_launch(float *scale, float *inv, const S *x, int rows, int cols, titan_fp8_axis axis,
                          titan_fp8_format f, int pow2, const float *amax) {
    int ns = titan_cuda_fp8_nscales(axis, rows, cols), parts;
    if (ns == 0) return; /* an empty axis: no scales, nothing to launch */
    if (amax) {
        scale_given_kernel<<<titan_cuda_blocks((size_t)ns, 256), 256>>>(scale, inv, amax, ns, (int)f, pow2);
        CUDA_CHECK_LAUNCH();
        return;
    }
    unsigned *part = amax_partials<S>(&parts, x, rows, cols, axis);
    if (parts == 1) {
        unsigned blocks = titan_cuda_blocks((size_t)ns, 256);
        scale_kernel<<<blocks, 256>>>(scale, inv, part, ns, (int)f, pow2);
    } else {
        unsigned blocks = (unsigned)(ns < 65535 ? ns : 65535);
        scale_fold_kernel<<<blocks, 256>>>(scale, inv, part, parts, ns, (int)f, pow2);
    }
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaFreeAsync(part, 0));
}

/* cast_tile_kernel's conditions on the shape and the pointers */
template <typename S>
static bool tiles_fit(const uint8_t *qt, const uint8_t *q, const S *x, int rows, int cols) {
    constexpr int P = TITAN_PACK(S);
    return !simple_casts() && titan_cuda_aligned16(x) && cols % P == 0 && rows % 16 == 0 &&
           (uintptr_t)qt % 16 == 0 && (!q || (uintptr_t)q % P == 0);
}

/* qt = x's codes transposed and q = them straight, in one pass over x */
template <typename S>
static void cast_tile_launch(uint8_t *qt, uint8_t *q, const S *x, const float *scale, int rows, int cols,
                             titan_fp8_axis axis, titan_fp8_format f) {
    unsigned gy = (unsigned)((rows + W - 1) / W);
    if (gy > 65535) titan_cuda_panic(__FILE__, __LINE__, "cast_tile_kernel", "rows above 65535 * 64");
    dim3 grid((unsigned)((cols + W - 1) / W), gy);
    cast_tile_kernel<S><<<grid, TILE_THREADS>>>(qt, q, x, scale, rows, cols, (int)axis, (int)f);
    CUDA_CHECK_LAUNCH();
}

template <typename S>
static void cast_launch(uint8_t *q, const S *x, const float *scale, int rows, int cols, titan_fp8_axis axis,
                        titan_fp8_format f, int transpose) {
    if (!rows || !cols) return;
    if (transpose && tiles_fit<S>(q, NULL, x, rows, cols)) {
        cast_tile_launch<S>(q, NULL, x, scale, rows, cols, axis, f);
    } else if (transpose) {
        unsigned gy = (unsigned)((rows + TILE - 1) / TILE);
        if (gy > 65535) titan_cuda_panic(__FILE__, __LINE__, "cast_transposed_kernel", "rows above 65535 * 32");
        dim3 grid((unsigned)((cols + TILE - 1) / TILE), gy), block(TILE, TILE_ROWS);
        cast_transposed_kernel<S><<<grid, block>>>(q, x, scale, rows, cols, (int)axis, (int)f);
    } else {
        constexpr int P = TITAN_PACK(S);
        bool vec = titan_cuda_aligned16(x) && cols % P == 0 && (uintptr_t)q % P == 0;
        int per_row = vec ? cols / P : cols;
        unsigned gx = (unsigned)((per_row + CAST_THREADS - 1) / CAST_THREADS);
        dim3 grid(gx < 64 ? gx : 64, (unsigned)(rows < 65535 ? rows : 65535));
        if (vec)
            cast_vec_kernel<S><<<grid, CAST_THREADS>>>(q, x, scale, rows, cols, (int)axis, (int)f);
        else
            cast_kernel<S><<<grid, CAST_THREADS>>>(q, x, scale, rows, cols, (int)axis, (int)f);
    }
    CUDA_CHECK_LAUNCH();
}

/* q, scale[ns] and inv[ns] of x [rows, cols] (q transposed: [cols, rows]) */
static void cast_into(uint8_t *q, float *scale, float *inv, titan_dtype dt, const void *x, int rows, int cols,
                      titan_fp8_axis axis, titan_fp8_format f, int pow2, int transpose, const float *amax) {
    TITAN_CUDA_DISPATCH(dt, "float8 cast", scales_launch<S>(scale, inv, (const S *)x, rows, cols, axis, f, pow2, amax);
                        cast_launch<S>(q, (const S *)x, scale, rows, cols, axis, f, transpose));
}

/* o's shape, format and scratch for x [rows, cols] (transposed: [cols, rows]) with ns scales */
static void operand_alloc(titan_cuda_fp8_operand *o, int rows, int cols, int ns, int rowwise, titan_fp8_format f,
                          int transpose) {
    o->rows = transpose ? cols : rows;
    o->cols = transpose ? rows : cols;
    o->rowwise = rowwise;
    o->format = f;
    o->q = (uint8_t *)titan_cuda_scratch((size_t)rows * cols, "float8 cast");
    o->scale = (float *)titan_cuda_scratch((inv_offset(ns) + ns) * sizeof(float), "float8 scales");
    o->inv = o->scale + inv_offset(ns);
}

void titan_cuda_fp8_cast(titan_cuda_fp8_operand *o, titan_dtype dt, const void *x, int rows, int cols,
                         titan_fp8_axis axis, titan_fp8_format f, int pow2, int transpose, const float *amax) {
    operand_alloc(o, rows, cols, titan_cuda_fp8_nscales(axis, rows, cols), axis != TITAN_FP8_TENSOR, f, transpose);
    cast_into(o->q, o->scale, o->inv, dt, x, rows, cols, axis, f, pow2, transpose, amax);
}

/* both layouts from one pass where cast_tile_kernel fits, else a cast each */
template <typename S>
static void cast_both_launch(uint8_t *q, uint8_t *qt, const S *x, const float *scale, int rows, int cols,
                             titan_fp8_axis axis, titan_fp8_format f) {
    if (!rows || !cols) return;
    if (tiles_fit<S>(qt, q, x, rows, cols)) {
        cast_tile_launch<S>(qt, q, x, scale, rows, cols, axis, f);
        return;
    }
    cast_launch<S>(q, x, scale, rows, cols, axis, f, 0);
    cast_launch<S>(qt, x, scale, rows, cols, axis, f, 1);
}

void titan_cuda_fp8_cast_both(titan_cuda_fp8_operand *o, titan_cuda_fp8_operand *ot, titan_dtype dt, const void *x,
                              int rows, int cols, titan_fp8_format f, int pow2, const float *amax) {
    operand_alloc(o, rows, cols, 1, 0, f, 0);
    operand_alloc(ot, rows, cols, 1, 0, f, 1);
    /* each operand owns its scales (released apart): ot's are a copy */
    size_t sbytes = (inv_offset(1) + 1) * sizeof(float);
    TITAN_CUDA_DISPATCH(dt, "float8 cast",
                        scales_launch<S>(o->scale, o->inv, (const S *)x, rows, cols, TITAN_FP8_TENSOR, f, pow2, amax);
                        cast_both_launch<S>(o->q, ot->q, (const S *)x, o->scale, rows, cols, TITAN_FP8_TENSOR, f));
    CUDA_CHECK(cudaMemcpyAsync(ot->scale, o->scale, sbytes, cudaMemcpyDeviceToDevice, 0));
}

void titan_cuda_fp8_release(titan_cuda_fp8_operand *o) {
    CUDA_CHECK(cudaFreeAsync(o->q, 0));
    CUDA_CHECK(cudaFreeAsync(o->scale, 0));
    o->q = NULL, o->scale = o->inv = NULL;
}

void titan_cuda_fp8_dequantize(float *out, const titan_cuda_fp8_operand *o) {
    if (!o->rows || !o->cols) return;
    unsigned blocks = titan_cuda_blocks((size_t)o->rows * o->cols, 256);
    dequantize_kernel<<<blocks, 256>>>(out, o->q, o->scale, o->rows, o->cols, o->rowwise, (int)o->format);
    CUDA_CHECK_LAUNCH();
}

__global__ void broadcast_kernel(float *scale, float *inv, const float *s0, const float *inv0, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        scale[i] = s0[0], inv[i] = inv0[0];
}

void titan_cuda_fp8_rowwise(titan_cuda_fp8_operand *o) {
    if (o->rowwise || o->rows <= 0) return;
    float *s = (float *)titan_cuda_scratch((inv_offset(o->rows) + o->rows) * sizeof(float), "float8 scales");
    unsigned blocks = titan_cuda_blocks((size_t)o->rows, 256);
    broadcast_kernel<<<blocks, 256>>>(s, s + inv_offset(o->rows), o->scale, o->inv, o->rows);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaFreeAsync(o->scale, 0));
    o->scale = s, o->inv = s + inv_offset(o->rows), o->rowwise = 1;
}

/* backend.h's fp8_quantize: q [rows, cols] and scale[ns] on the device */
void titan_cuda_fp8_quantize(titan_dtype dt, uint8_t *q, float *scale, const void *x, int rows, int cols,
                             titan_fp8_axis axis, titan_fp8_format f, int pow2, const float *amax) {
    int ns = titan_cuda_fp8_nscales(axis, rows, cols);
    float *inv = (float *)titan_cuda_scratch((size_t)ns * sizeof(float), "float8 quantize");
    cast_into(q, scale, inv, dt, x, rows, cols, axis, f, pow2, 0, amax);
    CUDA_CHECK(cudaFreeAsync(inv, 0));
}

template <typename S>
static void amax_launch(float *amax, const S *x, int rows, int cols, titan_fp8_axis axis) {
    int ns = titan_cuda_fp8_nscales(axis, rows, cols), parts;
    if (ns == 0) return;
    unsigned *part = amax_partials<S>(&parts, x, rows, cols, axis);
    amax_fold_kernel<<<(unsigned)(ns < 65535 ? ns : 65535), 256>>>(amax, part, parts, ns);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaFreeAsync(part, 0));
}

/* backend.h's fp8_amax: amax[ns] on the device, the bits the casts scale from */
void titan_cuda_fp8_amax(titan_dtype dt, float *amax, const void *x, int rows, int cols, titan_fp8_axis axis) {
    TITAN_CUDA_DISPATCH(dt, "float8 amax", amax_launch<S>(amax, (const S *)x, rows, cols, axis));
}

/* out[i] = decode(q[i]) / scale[0], rounded once to S */
template <typename S>
__global__ void dequantize_to_kernel(S *out, const uint8_t *q, const float *scale, size_t n, int f) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        store_f32(out + i, titan_fp8_decode_with(q[i], (titan_fp8_format)f) / scale[0]);
}

template <typename S>
static void dequantize_to_launch(S *out, const uint8_t *q, const float *scale, size_t n, titan_fp8_format f) {
    if (!n) return;
    dequantize_to_kernel<S><<<titan_cuda_blocks(n, 256), 256>>>(out, q, scale, n, (int)f);
    CUDA_CHECK_LAUNCH();
}

/* backend.h's fp8_dequantize */
void titan_cuda_fp8_dequantize_to(titan_dtype dt, void *out, const uint8_t *q, const float *scale, size_t n,
                                  titan_fp8_format f) {
    TITAN_CUDA_DISPATCH(dt, "float8 dequantize", dequantize_to_launch<S>((S *)out, q, scale, n, f));
}
