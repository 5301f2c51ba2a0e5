/* attention_tc.cuh - what the tensor-core flash attention's forward
 * (attention_tc.cu) and backward (attention_tc_bwd.cu) share: the tile
 * constants, the PTX wrappers (sm_80+), the fragment helpers, the launch
 * geometry and the shape checks. The design is described at the top of
 * attention_tc.cu. The emulator's generator (tests/emu/gen_kernels.awk)
 * blanks the "PTX wrappers" section of this file as of the .cu files: keep
 * its section lines. */
#ifndef TITAN_KERNELS_ATTENTION_TC_CUH
#define TITAN_KERNELS_ATTENTION_TC_CUH

#include <math.h>
#include <stdint.h>

#include "cuda_ops.cuh"

#define TC_BR 64      /* query rows per CTA: forward, dq */
#define TC_BC 64      /* keys per kv tile: forward, dq; keys per CTA: dkv */
#define TC_WARPS 4    /* one per 16 rows of the CTA's tile */
#define TC_THREADS (TC_WARPS * WARP)
#define TC_PAD 8      /* bf16 of padding per shared row: ldmatrix rows on distinct banks */

static_assert(TC_BR == TC_BC, "the forward and dq walk tiles 0..qi: one kv tile per query tile");
static_assert(TC_BR == 16 * TC_WARPS && TC_BC == 16 * TC_WARPS, "a warp owns 16 rows");

static constexpr float TC_LOG2E = 1.4426950408889634f;
static constexpr float TC_LN2 = 0.6931471805599453f;

/* query rows per tile in the dkv kernel: its dK and dV accumulators take
 * HD/2 + HD/2 registers, the scores 2 * BQ/2 */
static constexpr int tc_dkv_bq(int HD) { return HD <= 64 ? 64 : 32; }

/* ---------------------------------------------------- PTX wrappers (sm_80+) */

/* c += a b for one 16x8x16 tile: a 16x16 bf16 (row), b 16x8 bf16 (col), c fp32 */
static __device__ __forceinline__ void tc_mma_16816(float c[4], const uint32_t a[4],
                                                 const uint32_t b[2]) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* 16 bytes global -> shared, asynchronous (both addresses 16-byte aligned) */
static __device__ __forceinline__ void tc_cp_async16(void *smem, const void *gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}

static __device__ __forceinline__ void tc_cp_async_commit(void) {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* waits until at most N committed groups of this thread are still in flight */
template <int N>
static __device__ __forceinline__ void tc_cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16, a warp collective:
 * lanes 8i..8i+7 give the row addresses of 8x8 matrix i (rows of 16 bytes,
 * 16-byte aligned, in shared memory); register i of lane l = 4 g + t gets
 * matrix i's row g, columns 2t, 2t+1, or with .trans rows 2t, 2t+1 of
 * column g (the matrix read column-major); the lower-indexed element in the
 * low 16 bits. (x2 and x1 are not needed: every tile count here is even.)
 * Volatile with a memory clobber: they read what cp.async and other threads
 * wrote before a barrier, so they must stay between the barriers. */
static __device__ __forceinline__ void tc_ldsm_x4(uint32_t r[4], const bf16 *row) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s)
                 : "memory");
}

static __device__ __forceinline__ void tc_ldsm_x4_trans(uint32_t r[4], const bf16 *row) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s)
                 : "memory");
}

/* ---------------------------------------------------- fragments and helpers */

/* Fragment layouts of mma.m16n8k16 (PTX ISA), lane = 4 g + t:
 *   A (16x16): a0 = A[g][2t, 2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..],
 *              a3 = A[g+8][2t+8..]
 *   B (16x8):  b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g]
 *   C (16x8):  c0, c1 = C[g][2t, 2t+1], c2, c3 = C[g+8][2t, 2t+1]
 * The lower-indexed element of a pair sits in the low 16 bits. Each A and
 * B register is one 8x8 quarter of its operand in ldmatrix's layout (above),
 * so one ldmatrix.x4 loads an A fragment or the B fragments of two n-tiles.
 * Every row address below is a multiple of 8 bf16 from a 16-byte aligned
 * tile whose rows are (HD + TC_PAD) * 2 bytes apart: 16-byte aligned, and
 * the 8 rows of a matrix fall on 8 distinct groups of 4 banks. */

static __device__ __forceinline__ uint32_t tc_pack_raw(bf16 lo, bf16 hi) {
    return (uint32_t)__bfloat16_as_ushort(lo) | ((uint32_t)__bfloat16_as_ushort(hi) << 16);
}

/* the one rounding of P or dS before its product */
static __device__ __forceinline__ uint32_t tc_pack_f32(float lo, float hi) {
    return tc_pack_raw(__float2bfloat16_rn(lo), __float2bfloat16_rn(hi));
}

/* A from row-major M (leading dim ld), M pointing at the tile's (0, 0).
 * Lanes 0-7, 8-15, 16-23, 24-31 give rows 0-7 and 8-15 of columns 0-7, then
 * of columns 8-15: matrices a0, a1, a2, a3. */
static __device__ __forceinline__ void tc_frag_a(uint32_t a[4], const bf16 *M, int ld, int lane) {
    tc_ldsm_x4(a, M + (lane & 15) * ld + (lane >> 4) * 8);
}

/* B[kk][n] = M[n][kk] for two n-tiles: M row-major with the 16 n as rows
 * (K for Q K^T); b[0..1] for rows 0-7, b[2..3] for rows 8-15. Matrices: rows
 * 0-7 k 0-7, rows 0-7 k 8-15, rows 8-15 k 0-7, rows 8-15 k 8-15. */
static __device__ __forceinline__ void tc_frag_b_nk2(uint32_t b[4], const bf16 *M, int ld,
                                                  int lane) {
    tc_ldsm_x4(b, M + ((lane & 7) + (lane >> 4) * 8) * ld + ((lane >> 3) & 1) * 8);
}

/* B[kk][n] = M[kk][n] for two n-tiles: M row-major with the 16 kk as rows
 * (V for P V), columns 0-7 into b[0..1], 8-15 into b[2..3]; .trans turns
 * each stored 8x8 block into its B layout (lane 4 g + t: rows 2t, 2t+1 of
 * column g) */
static __device__ __forceinline__ void tc_frag_b_kn2(uint32_t b[4], const bf16 *M, int ld,
                                                  int lane) {
    tc_ldsm_x4_trans(b, M + (lane & 15) * ld + (lane >> 4) * 8);
}

/* c0 += a B0 and c1 += a B1: the two 8-column tiles of one x4 B load
 * (b[0..1] and b[2..3], as tc_frag_b_nk2 and tc_frag_b_kn2 give them) */
static __device__ __forceinline__ void tc_mma_pair(float c0[4], float c1[4], const uint32_t a[4],
                                                const uint32_t b[4]) {
    tc_mma_16816(c0, a, b);
    tc_mma_16816(c1, a, b + 2);
}

/* A (16 rows x 16 k) from the fp32 C fragments of two adjacent 8-column
 * tiles (k 0..7 and 8..15), rounded to bf16 */
static __device__ __forceinline__ void tc_frag_a_from_c(uint32_t a[4], const float c0[4],
                                                     const float c1[4]) {
    a[0] = tc_pack_f32(c0[0], c0[1]);
    a[1] = tc_pack_f32(c0[2], c0[3]);
    a[2] = tc_pack_f32(c1[0], c1[1]);
    a[3] = tc_pack_f32(c1[2], c1[3]);
}

/* over the 4 lanes that hold one row (same g): fixed butterfly, every lane
 * ends with the same bits */
static __device__ __forceinline__ float tc_quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(FULL_MASK, x, 1));
    return fmaxf(x, __shfl_xor_sync(FULL_MASK, x, 2));
}
static __device__ __forceinline__ float tc_quad_sum(float x) {
    x += __shfl_xor_sync(FULL_MASK, x, 1);
    return x + __shfl_xor_sync(FULL_MASK, x, 2);
}

static __device__ __forceinline__ void tc_store_bf16x2(bf16 *p, float x, float y) {
    *reinterpret_cast<__nv_bfloat162 *>(p) = __floats2bfloat162_rn(x, y);
}

/* p[0..1] += (x, y): read bf16, add in fp32, round once */
static __device__ __forceinline__ void tc_add_bf16x2(bf16 *p, float x, float y) {
    __nv_bfloat162 old = *reinterpret_cast<const __nv_bfloat162 *>(p);
    tc_store_bf16x2(p, __bfloat162float(old.x) + x, __bfloat162float(old.y) + y);
}

/* a gradient pair under the acc mask: added (add != 0) or stored unread */
static __device__ __forceinline__ void tc_grad_bf16x2(int add, bf16 *p, float x, float y) {
    if (add) tc_add_bf16x2(p, x, y);
    else tc_store_bf16x2(p, x, y);
}

template <int N>
static __device__ __forceinline__ void tc_zero(float (&c)[N][4]) {
#pragma unroll
    for (int i = 0; i < N; i++) c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.0f;
}

/* c += A B^T for this warp's 16 rows, over KD k-steps of 16: A is the warp's
 * 16-row tile (row-major, leading dim ld), B is n-major (row n of B gives
 * column n of the product, ld), 8 NT columns. Only n-tile pairs np_lo <=
 * np < np_hi are computed (warp-uniform; the others keep c: skipped blocks
 * whose products are known to be masked or zero). */
template <int KD, int NT>
static __device__ __forceinline__ void tc_gemm_nk(float (&c)[NT][4], const bf16 *A, const bf16 *B,
                                                  int ld, int lane, int np_lo, int np_hi) {
#pragma unroll
    for (int kd = 0; kd < KD; kd++) {
        uint32_t a[4];
        tc_frag_a(a, A + kd * 16, ld, lane);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) { /* n-tiles 2 np, 2 np + 1 */
            if (np >= np_lo && np < np_hi) {
                uint32_t bb[4];
                tc_frag_b_nk2(bb, B + np * 16 * ld + kd * 16, ld, lane);
                tc_mma_pair(c[2 * np], c[2 * np + 1], a, bb);
            }
        }
    }
}

/* c += P B for this warp's 16 rows: P is the 16 x 8 NT product in C
 * fragments (scores), rounded to bf16 A fragments 16 columns at a time; B
 * is k-major (row kk, leading dim ld), 8 DT columns. Only 16-row blocks
 * kc_lo <= kc < kc_hi of B are used (warp-uniform; P is zero elsewhere). */
template <int DT, int NT>
static __device__ __forceinline__ void tc_gemm_ck(float (&c)[DT][4], const float (&p)[NT][4],
                                                  const bf16 *B, int ld, int lane, int kc_lo,
                                                  int kc_hi) {
#pragma unroll
    for (int kc = 0; kc < NT / 2; kc++) {
        if (kc >= kc_lo && kc < kc_hi) {
            uint32_t a[4];
            tc_frag_a_from_c(a, p[2 * kc], p[2 * kc + 1]);
#pragma unroll
            for (int dj = 0; dj < DT / 2; dj++) {
                uint32_t bb[4];
                tc_frag_b_kn2(bb, B + kc * 16 * ld + dj * 16, ld, lane);
                tc_mma_pair(c[2 * dj], c[2 * dj + 1], a, bb);
            }
        }
    }
}

/* Queues rows row0 .. row0+ROWS-1 of one head of x[B, T, heads, HD] into
 * dst[ROWS][HD + TC_PAD] with cp.async (the caller commits); rows past T are
 * zeroed. All threads of the CTA take part. */
template <int HD, int ROWS>
static __device__ __forceinline__ void tc_tile_load(bf16 *dst, const bf16 *x, int b, int row0,
                                                    int T, int heads, int head) {
    constexpr int LD = HD + TC_PAD, CPR = HD / 8; /* 16-byte chunks per row */
    static_assert((ROWS * CPR) % TC_THREADS == 0, "whole rounds of chunks");
#pragma unroll
    for (int i = 0; i < ROWS * CPR / TC_THREADS; i++) {
        const int idx = i * TC_THREADS + threadIdx.x;
        const int r = idx / CPR, c = idx % CPR, row = row0 + r;
        bf16 *d = dst + r * LD + c * 8;
        if (row < T)
            tc_cp_async16(d, x + (((size_t)b * T + row) * heads + head) * HD + c * 8);
        else
            *reinterpret_cast<uint4 *>(d) = make_uint4(0u, 0u, 0u, 0u);
    }
}

/* s = S * scale_log2 (base 2) on this lane's two rows, at positions pos_lo
 * and pos_hi; with MASK (a tile on the diagonal) -inf where the key is past
 * the row's position. Key of column 8 nt + e: key0 + 8 nt + e. mx_lo, mx_hi
 * take the rows' maxima over these columns. */
template <bool MASK, int NT>
static __device__ __forceinline__ void tc_scale_mask(float (&s)[NT][4], float scale_log2, int key0,
                                                  int pos_lo, int pos_hi, float &mx_lo,
                                                  float &mx_hi) {
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int key = key0 + nt * 8 + e;
            s[nt][e] = !MASK || key <= pos_lo ? s[nt][e] * scale_log2 : -INFINITY;
            s[nt][2 + e] = !MASK || key <= pos_hi ? s[nt][2 + e] * scale_log2 : -INFINITY;
            mx_lo = fmaxf(mx_lo, s[nt][e]);
            mx_hi = fmaxf(mx_hi, s[nt][2 + e]);
        }
}

/* The forward's and dq's walk over kv tiles, double-buffered: queues tile
 * kj + 1 into the other buffer (freed at the end of tile kj - 1) when there
 * is one, then waits until tile kj has landed, for this thread's copies and
 * (the barrier) everyone's. */
template <int HD>
static __device__ __forceinline__ void tc_kv_advance(bf16 *Ks, bf16 *Vs, const bf16 *k,
                                                  const bf16 *v, int b, int kj, int nkv, int Tk,
                                                  int NKV, int kh) {
    constexpr int LD = HD + TC_PAD;
    if (kj + 1 < nkv) {
        const int nb = (kj + 1) & 1;
        tc_tile_load<HD, TC_BC>(Ks + nb * TC_BC * LD, k, b, (kj + 1) * TC_BC, Tk, NKV, kh);
        tc_tile_load<HD, TC_BC>(Vs + nb * TC_BC * LD, v, b, (kj + 1) * TC_BC, Tk, NKV, kh);
        tc_cp_async_commit();
        tc_cp_async_wait<1>();
    } else {
        tc_cp_async_wait<0>();
    }
    __syncthreads();
}

/* The forward's and dq's mask on kv tile k0 of a query tile whose first row
 * sits at position p0: only a tile with a key past p0 (for Tq = Tk the
 * diagonal tile alone; for another offset up to two) needs it, and there
 * warp w's rows (positions up to p0 + 16 w + 15) see its first `live` keys
 * only: the S and P V products of the later 16-key blocks are skipped (P
 * is 0 there; none at all when the warp sees no key of the tile). Returns
 * whether the tile is masked; warp-uniform. */
static __device__ __forceinline__ bool tc_diag_live(int k0, int p0, int warp, int &live) {
    const bool diag = k0 + TC_BC - 1 > p0;
    live = diag ? min(TC_BC, max(0, p0 + 16 * warp + 16 - k0)) : TC_BC;
    return diag;
}

/* ---------------------------------------------------------- launch geometry */

/* Grids, block sizes and dynamic shared memory of the kernels above: the
 * host side below launches with these, and so does the host emulator
 * (tests/emu), which runs the device code above on the CPU. */

#define TC_DELTA_THREADS 256 /* delta kernel: 8 rows (warps) per block */

static constexpr size_t tc_tiles_bytes(int rows, int HD) {
    return (size_t)rows * (HD + TC_PAD) * sizeof(bf16);
}

/* the shared memory layouts at the top of each kernel */
static constexpr size_t tc_forward_smem(int HD) { return tc_tiles_bytes(TC_BR + 4 * TC_BC, HD); }
static constexpr size_t tc_dkv_smem(int HD) {
    return tc_tiles_bytes(2 * TC_BC + 4 * tc_dkv_bq(HD), HD) + 4 * tc_dkv_bq(HD) * sizeof(float);
}
static constexpr size_t tc_dq_smem(int HD) { return tc_tiles_bytes(2 * TC_BR + 4 * TC_BC, HD); }

/* forward, dq: a CTA per (query tile, head, batch); dkv: per (key tile, kv
 * head, batch); delta: a warp per row of [B, NH, Tq] */
static inline dim3 tc_query_grid(int B, int Tq, int NH) {
    return dim3((Tq + TC_BR - 1) / TC_BR, NH, B);
}
static inline dim3 tc_key_grid(int B, int Tk, int NKV) {
    return dim3((Tk + TC_BC - 1) / TC_BC, NKV, B);
}
static inline dim3 tc_delta_grid(size_t rows) {
    return dim3(titan_cuda_blocks(rows * WARP, TC_DELTA_THREADS));
}

/* ------------------------------------------------------------ host checks */

/* Once per kernel instance (thread-safe static init): kernels above 48 KiB of
 * dynamic shared memory must ask for it. Applies to the current device. */
static inline int tc_allow_smem(const void *kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)bytes));
    return 0;
}

static inline int tc_misaligned(const void *p, uintptr_t align) {
    return ((uintptr_t)p & (align - 1)) != 0;
}


static inline void tc_check(int B, int Tq, int Tk, int NH, int NKV, int HD) {
    if (!titan_cuda_attention_tc_supported(HD))
        titan_cuda_panic(__FILE__, __LINE__, "attention_tc shape", "HD must be 64 or 128");
    if (NKV <= 0 || NH <= 0 || NH % NKV != 0)
        titan_cuda_panic(__FILE__, __LINE__, "attention_tc shape", "needs NH % NKV == 0");
    if (NH > 65535 || B > 65535)
        titan_cuda_panic(__FILE__, __LINE__, "attention_tc shape", "NH and B must be <= 65535");
    if (Tq > Tk)
        titan_cuda_panic(__FILE__, __LINE__, "attention_tc shape",
                         "needs Tq <= Tk (the queries are the last Tq positions)");
}

/* the _at entry points: query 0 at any key position off >= 0 */
static inline void tc_check_off(int off) {
    if (off < 0) titan_cuda_panic(__FILE__, __LINE__, "attention_tc shape", "needs off >= 0");
}

#endif
