/* attention_tc.cu - causal GQA flash attention on tensor cores, bf16 storage.
 *
 * Declared in cuda_ops.cuh (HD 64 and 128 only; bf16 in memory, fp32
 * arithmetic; same shapes and lse as titan_cuda_attention_forward):
 *
 *   int titan_cuda_attention_tc_supported(int HD);      1 for HD 64 and 128
 *   void titan_cuda_attention_tc_forward(__nv_bfloat16 *out, float *lse,
 *       const __nv_bfloat16 *q, const __nv_bfloat16 *k, const __nv_bfloat16 *v,
 *       int B, int Tq, int Tk, int NH, int NKV, int HD);
 *   void titan_cuda_attention_tc_backward(int acc, __nv_bfloat16 *dq, __nv_bfloat16 *dk,
 *       __nv_bfloat16 *dv, const __nv_bfloat16 *dout, const __nv_bfloat16 *out,
 *       const float *lse, const __nv_bfloat16 *q, const __nv_bfloat16 *k,
 *       const __nv_bfloat16 *v, int B, int Tq, int Tk, int NH, int NKV, int HD);
 *
 * q, out, dout, dq are [B, Tq, NH, HD], k, v, dk, dv [B, Tk, NKV, HD], lse
 * [B, NH, Tq], 1 <= Tq <= Tk: the queries are the last Tq of the Tk
 * positions (query row r at position off + r, off = Tk - Tq, seeing keys
 * 0 .. off + r; Tq = Tk is plain causal attention, Tq < Tk a context-parallel
 * chunk). Any offset works: masks and skips below compare key indices with
 * query positions, so "the diagonal" is wherever the positions put it (for
 * an offset a multiple of 64 it is key tile qi + off / 64; otherwise up to
 * two key tiles per query tile straddle it and are masked).
 *
 * q, k, v, dout must be 16-byte aligned (cp.async), out, dq, dk, dv 4-byte
 * aligned; the entry points abort otherwise, as on a bad shape. acc nonzero
 * adds into dq, dk, dv (backend.h's TITAN_ACC_DX), 0 overwrites them.
 *
 * Products run on mma.sync.m16n8k16 (bf16 x bf16 -> fp32, sm_80 and sm_90),
 * with operands staged in shared memory by cp.async and fragments read by
 * ldmatrix.x4 in the PTX ISA's documented layouts: an A fragment, or the B
 * fragments of two 8-column tiles, per instruction; .trans where B is stored
 * k-major (V in P V, dO and Q in dV and dK, K in dQ). Rows are padded by 8
 * bf16: every ldmatrix row is 16-byte aligned and the 8 rows of each 8x8
 * matrix fall on distinct banks (no conflicts).
 * A CTA is 4 warps; each warp owns 16 rows of the CTA's 64-row tile. Tiles of
 * the streamed operand are double-buffered: the next one is in flight while
 * the current one is used.
 *
 * Forward (FlashAttention-2): CTA = (64 query rows, head, batch); walks kv
 * tiles of 64 keys up to the diagonal (the last row's position). S = Q K^T
 * in fp32, then in fp32 the online softmax (running max m, running sum l, in
 * base 2: S * scale * log2e) and the causal mask (key > the query's position
 * -> -inf, on the diagonal tiles only: those with a key past the tile's
 * first row; the keys of the earlier tiles precede every row); P is rounded
 * to bf16 for P V, O accumulates in fp32 and is rescaled by
 * exp(m_old - m_new). On a diagonal tile warp w's rows see the keys up to
 * the position of its row 16w + 15 only (for Tq = Tk: keys 16w + 15 of the
 * tile): the S and P V products of the later 16-key blocks are skipped
 * (their P is 0).
 * At the end out = O / l rounded once to bf16; lse = m + log(l) in fp32,
 * natural log (the CPU backend's definition). Shared memory: Q 64 rows + K, V
 * 2 x 64 rows each: 46,080 B (HD 64), 87,040 B (HD 128).
 *
 * Backward, as the CPU backend: P = exp(S - lse), D = rowsum(dO * O),
 * dV = P^T dO, dS = P * (dO V^T - D), dK = scale dS^T Q, dQ = scale dS K.
 *   delta: one warp per query row, D in fp32 into a stream-ordered scratch
 *          (cudaMallocAsync / cudaFreeAsync on stream 0), [B, NH, Tq] like lse.
 *   dkv:   CTA = (64 keys, kv head, batch); warp w owns keys 16w..16w+15 and
 *          computes S^T, dP^T for them against query tiles of BQ rows (64 for
 *          HD 64, 32 for HD 128: registers), walking every query head of the
 *          GQA group and every query tile at or after the diagonal (from
 *          tile max(0, k0 - off) / BQ: for an offset a multiple of 64, the
 *          key tile's index less off / 64, times 64 / BQ). dK, dV
 *          accumulate in fp32 registers. Only query tiles with a position
 *          before a key of the tile (or running past Tq) are masked; the
 *          products of 16-query blocks before all of a warp's keys are
 *          skipped. Shared memory
 *          56,320 B / 70,144 B.
 *   dq:    CTA = (64 query rows, head, batch) walking kv tiles up to the
 *          diagonal, masked and skipped as the forward; dQ in fp32
 *          registers. Shared memory 55,296 B / 104,448 B.
 * dK, dV, dQ are ADDED into the caller's tensors (acc 1: read bf16, add in
 * fp32, round once) or stored over them without a read (acc 0: the fp32
 * register rounded once, the sum into zeros). No atomics; every output
 * element has one owner thread and every sum runs in an order fixed by the
 * shapes (mma.sync, butterfly shuffles over the 4 lanes of a row, fixed
 * loops), so the bits repeat run to run. (A
 * skipped product adds only zeros: the bits are those of computing it, up
 * to the sign of a zero.)
 *
 * bf16 roundings beyond the inputs (which are bf16 already): P before P V
 * (forward; l sums the unrounded fp32 P); P before dV += P^T dO and dS before
 * dK += dS^T Q and dQ += dS K (backward); each output once. Against the CPU
 * backend's bf16 path (fp32 math on widened inputs) expect a normalised L2
 * error of a few 1e-3, under 1e-2.
 *
 * The suite runs the device code on the CPU too (tests/emu: the PTX wrappers
 * emulated, launched with the launch geometry below); its generator cuts this
 * file at the "PTX wrappers" and "host side" section lines: keep them. */
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

/* ------------------------------------------------------------------ forward */

template <int HD>
__global__ void __launch_bounds__(TC_THREADS)
    attention_tc_forward_kernel(bf16 *out, float *lse, const bf16 *q, const bf16 *k,
                                const bf16 *v, int Tq, int Tk, int NH, int NKV,
                                float scale_log2) {
    constexpr int LD = HD + TC_PAD, NT = TC_BC / 8, KD = HD / 16, DT = HD / 8;
    extern __shared__ __align__(16) unsigned char tc_smem[];
    bf16 *Qs = reinterpret_cast<bf16 *>(tc_smem); /* [TC_BR][LD] */
    bf16 *Ks = Qs + TC_BR * LD;                    /* [2][TC_BC][LD] */
    bf16 *Vs = Ks + 2 * TC_BC * LD;                /* [2][TC_BC][LD] */
    const int nqt = (Tq + TC_BR - 1) / TC_BR;
    const int qi = nqt - 1 - (int)blockIdx.x; /* longest rows first */
    const int h = blockIdx.y, b = blockIdx.z, kh = h / (NH / NKV), q0 = qi * TC_BR;
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, g = lane >> 2, t = lane & 3;
    const int row_lo = q0 + warp * 16 + g, row_hi = row_lo + 8; /* this lane's two rows */
    const int p0 = Tk - Tq + q0;                                /* row q0's position */
    const int pos_lo = p0 + warp * 16 + g, pos_hi = pos_lo + 8;
    const int nkv = (p0 + min(TC_BR, Tq - q0) - 1) / TC_BC + 1; /* through the last row's keys */

    tc_tile_load<HD, TC_BR>(Qs, q, b, q0, Tq, NH, h);
    tc_tile_load<HD, TC_BC>(Ks, k, b, 0, Tk, NKV, kh);
    tc_tile_load<HD, TC_BC>(Vs, v, b, 0, Tk, NKV, kh);
    tc_cp_async_commit();

    float o[DT][4];
    tc_zero(o);
    float m_lo = -INFINITY, m_hi = -INFINITY; /* running max, base-2 units */
    float l_lo = 0.0f, l_hi = 0.0f;           /* this lane's part of the running sum */
    const bf16 *Qw = Qs + warp * 16 * LD;

    for (int kj = 0; kj < nkv; kj++) {
        tc_kv_advance<HD>(Ks, Vs, k, v, b, kj, nkv, Tk, NKV, kh);
        const bf16 *Kt = Ks + (kj & 1) * TC_BC * LD, *Vt = Vs + (kj & 1) * TC_BC * LD;
        const int k0 = kj * TC_BC;
        int live;
        const bool diag = tc_diag_live(k0, p0, warp, live);

        float s[NT][4]; /* S for rows 16 warp.., keys kj*TC_BC + 8 nt.. */
        tc_zero(s);
        tc_gemm_nk<KD>(s, Qw, Kt, LD, lane, 0, (live + 15) / 16);

        /* scale into base 2, mask, online softmax. Key 0 precedes every row,
         * so after tile 0 every row's max is finite; a row that sees no key
         * of a later tile keeps its max, and exp2(-inf) = 0 does the rest. */
        float mx_lo = -INFINITY, mx_hi = -INFINITY;
        if (diag)
            tc_scale_mask<true>(s, scale_log2, k0 + 2 * t, pos_lo, pos_hi, mx_lo, mx_hi);
        else
            tc_scale_mask<false>(s, scale_log2, k0 + 2 * t, pos_lo, pos_hi, mx_lo, mx_hi);
        const float mn_lo = fmaxf(m_lo, tc_quad_max(mx_lo)),
                    mn_hi = fmaxf(m_hi, tc_quad_max(mx_hi));
        const float al_lo = exp2f(m_lo - mn_lo), al_hi = exp2f(m_hi - mn_hi); /* 0 at first */
        m_lo = mn_lo;
        m_hi = mn_hi;
        float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                s[nt][e] = exp2f(s[nt][e] - mn_lo);
                s[nt][2 + e] = exp2f(s[nt][2 + e] - mn_hi);
                sum_lo += s[nt][e];
                sum_hi += s[nt][2 + e];
            }
        l_lo = l_lo * al_lo + sum_lo;
        l_hi = l_hi * al_hi + sum_hi;
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
            o[dt][0] *= al_lo;
            o[dt][1] *= al_lo;
            o[dt][2] *= al_hi;
            o[dt][3] *= al_hi;
        }

        /* O += P V, P rounded to bf16 */
        tc_gemm_ck(o, s, Vt, LD, lane, 0, (live + 15) / 16);
        __syncthreads(); /* this buffer is refilled at kj + 1 */
    }

    l_lo = tc_quad_sum(l_lo);
    l_hi = tc_quad_sum(l_hi);
    const float inv_lo = 1.0f / l_lo, inv_hi = 1.0f / l_hi;
    if (row_lo < Tq) {
        bf16 *po = out + (((size_t)b * Tq + row_lo) * NH + h) * HD + 2 * t;
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
            tc_store_bf16x2(po + dt * 8, o[dt][0] * inv_lo, o[dt][1] * inv_lo);
        if (t == 0) lse[((size_t)b * NH + h) * Tq + row_lo] = m_lo * TC_LN2 + logf(l_lo);
    }
    if (row_hi < Tq) {
        bf16 *po = out + (((size_t)b * Tq + row_hi) * NH + h) * HD + 2 * t;
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
            tc_store_bf16x2(po + dt * 8, o[dt][2] * inv_hi, o[dt][3] * inv_hi);
        if (t == 0) lse[((size_t)b * NH + h) * Tq + row_hi] = m_hi * TC_LN2 + logf(l_hi);
    }
}

/* ------------------------------------------------------ backward: D = dO . O */

/* one warp per row r = (b NH + h) T + t of delta[B, NH, T] (T = Tq) */
template <int HD>
__global__ void attention_tc_delta_kernel(float *delta, const bf16 *dout, const bf16 *out, int T,
                                          int NH, size_t rows) {
    const int lane = threadIdx.x % WARP;
    const size_t nwarps = (size_t)gridDim.x * blockDim.x / WARP;
    for (size_t r = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP; r < rows; r += nwarps) {
        const size_t bh = r / T, b = bh / NH;
        const int tt = (int)(r % T), h = (int)(bh % NH);
        const size_t off = ((b * T + tt) * NH + h) * HD;
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < HD / (2 * WARP); i++) {
            const int d = 2 * lane + 2 * WARP * i;
            __nv_bfloat162 x = *reinterpret_cast<const __nv_bfloat162 *>(dout + off + d);
            __nv_bfloat162 y = *reinterpret_cast<const __nv_bfloat162 *>(out + off + d);
            s += __bfloat162float(x.x) * __bfloat162float(y.x);
            s += __bfloat162float(x.y) * __bfloat162float(y.y);
        }
        s = warp_sum(s);
        if (lane == 0) delta[r] = s;
    }
}

/* -------------------------------------------------------- backward: dK, dV */

/* Queues query tile q0 of head h for the dkv kernel: Q and dO rows
 * (cp.async, the caller commits), lse * log2e and D (plain stores; rows past
 * Tq get 0 and are masked). */
template <int HD, int BQ>
static __device__ __forceinline__ void tc_dkv_stage(bf16 *Qb, bf16 *dOb, float *Lb, float *Db,
                                                 const bf16 *q, const bf16 *dout,
                                                 const float *lse, const float *delta, int b,
                                                 int h, int q0, int Tq, int NH) {
    tc_tile_load<HD, BQ>(Qb, q, b, q0, Tq, NH, h);
    tc_tile_load<HD, BQ>(dOb, dout, b, q0, Tq, NH, h);
    for (int i = threadIdx.x; i < BQ; i += TC_THREADS) {
        const int row = q0 + i;
        const size_t r = ((size_t)b * NH + h) * Tq + row;
        Lb[i] = row < Tq ? lse[r] * TC_LOG2E : 0.0f;
        Db[i] = row < Tq ? delta[r] : 0.0f;
    }
}

/* P^T = exp(S^T scale - lse) into st, dS^T = P^T (dP^T - D) into dpt, for
 * keys j_lo, j_hi and the queries i = q0 + 8 nt + 2t + e of this lane's
 * columns, at positions p0 + 8 nt + 2t + e; with MASK (a query tile with a
 * position before a key of the tile, or running past Tq) zero where the
 * query's position is before the key or the query past Tq */
template <bool MASK, int NT>
static __device__ __forceinline__ void tc_dkv_ds(float (&st)[NT][4], float (&dpt)[NT][4],
                                              const float *Lb, const float *Db,
                                              float scale_log2, int q0, int p0, int Tq,
                                              int j_lo, int j_hi, int t) {
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int col = nt * 8 + 2 * t + e, i = q0 + col, pos = p0 + col;
            const float L = Lb[col], D = Db[col];
            const bool ok_lo = !MASK || (i < Tq && j_lo <= pos);
            const bool ok_hi = !MASK || (i < Tq && j_hi <= pos);
            const float p_lo = ok_lo ? exp2f(st[nt][e] * scale_log2 - L) : 0.0f;
            const float p_hi = ok_hi ? exp2f(st[nt][2 + e] * scale_log2 - L) : 0.0f;
            dpt[nt][e] = ok_lo ? p_lo * (dpt[nt][e] - D) : 0.0f;
            dpt[nt][2 + e] = ok_hi ? p_hi * (dpt[nt][2 + e] - D) : 0.0f;
            st[nt][e] = p_lo;
            st[nt][2 + e] = p_hi;
        }
}

template <int HD, int BQ>
__global__ void __launch_bounds__(TC_THREADS)
    attention_tc_dkv_kernel(bf16 *dk, bf16 *dv, const bf16 *dout, const float *lse,
                            const float *delta, const bf16 *q, const bf16 *k, const bf16 *v,
                            int Tq, int Tk, int NH, int NKV, float scale, float scale_log2,
                            int add) {
    constexpr int LD = HD + TC_PAD, NT = BQ / 8, KD = HD / 16, DT = HD / 8;
    static_assert(TC_BC % BQ == 0, "query tiles start on the key tile's first row");
    extern __shared__ __align__(16) unsigned char tc_smem[];
    bf16 *Ks = reinterpret_cast<bf16 *>(tc_smem);           /* [TC_BC][LD] */
    bf16 *Vs = Ks + TC_BC * LD;                              /* [TC_BC][LD] */
    bf16 *Qs = Vs + TC_BC * LD;                              /* [2][BQ][LD] */
    bf16 *dOs = Qs + 2 * BQ * LD;                            /* [2][BQ][LD] */
    float *Ls = reinterpret_cast<float *>(dOs + 2 * BQ * LD); /* [2][BQ] lse * log2e */
    float *Ds = Ls + 2 * BQ;                                 /* [2][BQ] */
    const int kj = blockIdx.x, kh = blockIdx.y, b = blockIdx.z;
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, g = lane >> 2, t = lane & 3;
    const int k0 = kj * TC_BC, rep = NH / NKV, off = Tk - Tq; /* query r at position off + r */
    const int j_lo = k0 + warp * 16 + g, j_hi = j_lo + 8; /* this lane's two keys */
    /* query tiles qs.. of each head of the group; earlier ones see none of
     * these keys (the first that does is row k0 - off, at position k0;
     * k0 < Tk makes it a row before Tq) */
    const int qs = max(0, k0 - off) / BQ, per_head = (Tq + BQ - 1) / BQ - qs,
              n_iter = rep * per_head;

    tc_tile_load<HD, TC_BC>(Ks, k, b, k0, Tk, NKV, kh);
    tc_tile_load<HD, TC_BC>(Vs, v, b, k0, Tk, NKV, kh);
    tc_dkv_stage<HD, BQ>(Qs, dOs, Ls, Ds, q, dout, lse, delta, b, kh * rep, qs * BQ, Tq, NH);
    tc_cp_async_commit();

    float dka[DT][4], dva[DT][4];
    tc_zero(dka);
    tc_zero(dva);
    const bf16 *Kw = Ks + warp * 16 * LD, *Vw = Vs + warp * 16 * LD;

    for (int it = 0; it < n_iter; it++) {
        if (it + 1 < n_iter) {
            const int nb = (it + 1) & 1, h1 = kh * rep + (it + 1) / per_head;
            const int q1 = (qs + (it + 1) % per_head) * BQ;
            tc_dkv_stage<HD, BQ>(Qs + nb * BQ * LD, dOs + nb * BQ * LD, Ls + nb * BQ, Ds + nb * BQ,
                                 q, dout, lse, delta, b, h1, q1, Tq, NH);
            tc_cp_async_commit();
            tc_cp_async_wait<1>();
        } else {
            tc_cp_async_wait<0>();
        }
        __syncthreads();
        const int buf = it & 1, q0 = (qs + it % per_head) * BQ, p0 = off + q0;
        const bf16 *Qb = Qs + buf * BQ * LD, *dOb = dOs + buf * BQ * LD;
        const float *Lb = Ls + buf * BQ, *Db = Ds + buf * BQ;
        /* Only a query tile whose first position precedes a key of the tile
         * (p0 < k0 + TC_BC: for Tq = Tk, the tiles overlapping the key tile)
         * has queries before a key, and only the last runs past Tq: the
         * others need no mask. The first `dead` queries of the tile are
         * before all of this warp's keys (none when <= 0): the products of
         * those 16-query blocks are skipped (P, dS are 0 there). Warp-uniform
         * branches. */
        const bool edge = p0 < k0 + TC_BC || q0 + BQ > Tq;
        const int dead = k0 + 16 * warp - p0;

        /* S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys x BQ queries */
        float st[NT][4], dpt[NT][4];
        tc_zero(st);
        tc_zero(dpt);
        const int live_lo = dead > 0 ? dead / 16 : 0; /* the first 16-query block not dead */
        tc_gemm_nk<KD>(st, Kw, Qb, LD, lane, live_lo, NT / 2);
        tc_gemm_nk<KD>(dpt, Vw, dOb, LD, lane, live_lo, NT / 2);

        if (edge)
            tc_dkv_ds<true>(st, dpt, Lb, Db, scale_log2, q0, p0, Tq, j_lo, j_hi, t);
        else
            tc_dkv_ds<false>(st, dpt, Lb, Db, scale_log2, q0, p0, Tq, j_lo, j_hi, t);

        /* dV += P^T dO, dK += dS^T Q (P, dS rounded to bf16) */
        tc_gemm_ck(dva, st, dOb, LD, lane, live_lo, NT / 2);
        tc_gemm_ck(dka, dpt, Qb, LD, lane, live_lo, NT / 2);
        __syncthreads(); /* this buffer is refilled at it + 1 */
    }

    if (j_lo < Tk) {
        const size_t o = (((size_t)b * Tk + j_lo) * NKV + kh) * HD + 2 * t;
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
            tc_grad_bf16x2(add, dk + o + dt * 8, dka[dt][0] * scale, dka[dt][1] * scale);
            tc_grad_bf16x2(add, dv + o + dt * 8, dva[dt][0], dva[dt][1]);
        }
    }
    if (j_hi < Tk) {
        const size_t o = (((size_t)b * Tk + j_hi) * NKV + kh) * HD + 2 * t;
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
            tc_grad_bf16x2(add, dk + o + dt * 8, dka[dt][2] * scale, dka[dt][3] * scale);
            tc_grad_bf16x2(add, dv + o + dt * 8, dva[dt][2], dva[dt][3]);
        }
    }
}

/* ------------------------------------------------------------ backward: dQ */

/* dS = P (dP - D) into s, P = exp2(S scale_log2 - L), on this lane's two
 * rows at positions pos_lo, pos_hi; with MASK (a tile on the diagonal) zero
 * where the key (key0 + 8 nt + e) is past the row's position */
template <bool MASK, int NT>
static __device__ __forceinline__ void tc_dq_ds(float (&s)[NT][4], const float (&dp)[NT][4],
                                             float scale_log2, float L_lo, float L_hi,
                                             float D_lo, float D_hi, int key0, int pos_lo,
                                             int pos_hi) {
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int key = key0 + nt * 8 + e;
            const bool ok_lo = !MASK || key <= pos_lo, ok_hi = !MASK || key <= pos_hi;
            const float p_lo = ok_lo ? exp2f(s[nt][e] * scale_log2 - L_lo) : 0.0f;
            const float p_hi = ok_hi ? exp2f(s[nt][2 + e] * scale_log2 - L_hi) : 0.0f;
            s[nt][e] = ok_lo ? p_lo * (dp[nt][e] - D_lo) : 0.0f;
            s[nt][2 + e] = ok_hi ? p_hi * (dp[nt][2 + e] - D_hi) : 0.0f;
        }
}

template <int HD>
__global__ void __launch_bounds__(TC_THREADS)
    attention_tc_dq_kernel(bf16 *dq, const bf16 *dout, const float *lse, const float *delta,
                           const bf16 *q, const bf16 *k, const bf16 *v, int Tq, int Tk, int NH,
                           int NKV, float scale, float scale_log2, int add) {
    constexpr int LD = HD + TC_PAD, NT = TC_BC / 8, KD = HD / 16, DT = HD / 8;
    extern __shared__ __align__(16) unsigned char tc_smem[];
    bf16 *Qs = reinterpret_cast<bf16 *>(tc_smem); /* [TC_BR][LD] */
    bf16 *dOs = Qs + TC_BR * LD;                   /* [TC_BR][LD] */
    bf16 *Ks = dOs + TC_BR * LD;                   /* [2][TC_BC][LD] */
    bf16 *Vs = Ks + 2 * TC_BC * LD;                /* [2][TC_BC][LD] */
    const int nqt = (Tq + TC_BR - 1) / TC_BR;
    const int qi = nqt - 1 - (int)blockIdx.x; /* longest rows first */
    const int h = blockIdx.y, b = blockIdx.z, kh = h / (NH / NKV), q0 = qi * TC_BR;
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, g = lane >> 2, t = lane & 3;
    const int row_lo = q0 + warp * 16 + g, row_hi = row_lo + 8;
    const int p0 = Tk - Tq + q0; /* as in the forward */
    const int pos_lo = p0 + warp * 16 + g, pos_hi = pos_lo + 8;
    const int nkv = (p0 + min(TC_BR, Tq - q0) - 1) / TC_BC + 1;

    tc_tile_load<HD, TC_BR>(Qs, q, b, q0, Tq, NH, h);
    tc_tile_load<HD, TC_BR>(dOs, dout, b, q0, Tq, NH, h);
    tc_tile_load<HD, TC_BC>(Ks, k, b, 0, Tk, NKV, kh);
    tc_tile_load<HD, TC_BC>(Vs, v, b, 0, Tk, NKV, kh);
    tc_cp_async_commit();

    /* rows past Tq: L = D = 0 with Q = dO = 0 rows keep them finite; never stored */
    const size_t lrow = ((size_t)b * NH + h) * Tq;
    const float L_lo = row_lo < Tq ? lse[lrow + row_lo] * TC_LOG2E : 0.0f;
    const float L_hi = row_hi < Tq ? lse[lrow + row_hi] * TC_LOG2E : 0.0f;
    const float D_lo = row_lo < Tq ? delta[lrow + row_lo] : 0.0f;
    const float D_hi = row_hi < Tq ? delta[lrow + row_hi] : 0.0f;

    float dqa[DT][4];
    tc_zero(dqa);
    const bf16 *Qw = Qs + warp * 16 * LD, *dOw = dOs + warp * 16 * LD;

    for (int kj = 0; kj < nkv; kj++) {
        tc_kv_advance<HD>(Ks, Vs, k, v, b, kj, nkv, Tk, NKV, kh);
        const bf16 *Kt = Ks + (kj & 1) * TC_BC * LD, *Vt = Vs + (kj & 1) * TC_BC * LD;
        /* as in the forward: only tiles on the diagonal are masked, and there
         * the products of the keys past `live` are skipped (dS is 0 there) */
        const int k0 = kj * TC_BC;
        int live;
        const bool diag = tc_diag_live(k0, p0, warp, live);

        /* S = Q K^T, dP = dO V^T for this warp's 16 rows x 64 keys */
        float s[NT][4], dp[NT][4];
        tc_zero(s);
        tc_zero(dp);
        tc_gemm_nk<KD>(s, Qw, Kt, LD, lane, 0, (live + 15) / 16);
        tc_gemm_nk<KD>(dp, dOw, Vt, LD, lane, 0, (live + 15) / 16);

        /* dS = P (dP - D) into s; zero above the diagonal */
        if (diag)
            tc_dq_ds<true>(s, dp, scale_log2, L_lo, L_hi, D_lo, D_hi, k0 + 2 * t, pos_lo, pos_hi);
        else
            tc_dq_ds<false>(s, dp, scale_log2, L_lo, L_hi, D_lo, D_hi, k0 + 2 * t, pos_lo, pos_hi);

        /* dQ += dS K (dS rounded to bf16) */
        tc_gemm_ck(dqa, s, Kt, LD, lane, 0, (live + 15) / 16);
        __syncthreads(); /* this buffer is refilled at kj + 1 */
    }

    if (row_lo < Tq) {
        bf16 *p = dq + (((size_t)b * Tq + row_lo) * NH + h) * HD + 2 * t;
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
            tc_grad_bf16x2(add, p + dt * 8, dqa[dt][0] * scale, dqa[dt][1] * scale);
    }
    if (row_hi < Tq) {
        bf16 *p = dq + (((size_t)b * Tq + row_hi) * NH + h) * HD + 2 * t;
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
            tc_grad_bf16x2(add, p + dt * 8, dqa[dt][2] * scale, dqa[dt][3] * scale);
    }
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

/* ---------------------------------------------------------------- host side */

/* Once per kernel instance (thread-safe static init): kernels above 48 KiB of
 * dynamic shared memory must ask for it. Applies to the current device. */
static int tc_allow_smem(const void *kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)bytes));
    return 0;
}

static int tc_misaligned(const void *p, uintptr_t align) {
    return ((uintptr_t)p & (align - 1)) != 0;
}

int titan_cuda_attention_tc_supported(int HD) { return HD == 64 || HD == 128; }

static void tc_check(int B, int Tq, int Tk, int NH, int NKV, int HD) {
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

template <int HD>
static void tc_forward(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v, int B,
                       int Tq, int Tk, int NH, int NKV) {
    const size_t smem = tc_forward_smem(HD);
    static const int once = tc_allow_smem((const void *)attention_tc_forward_kernel<HD>, smem);
    (void)once;
    const float scale_log2 = 1.0f / sqrtf((float)HD) * TC_LOG2E;
    attention_tc_forward_kernel<HD><<<tc_query_grid(B, Tq, NH), TC_THREADS, smem>>>(
        out, lse, q, k, v, Tq, Tk, NH, NKV, scale_log2);
    CUDA_CHECK_LAUNCH();
}

template <int HD>
static void tc_backward(int add, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *out,
                        const float *lse, const bf16 *q, const bf16 *k, const bf16 *v, int B,
                        int Tq, int Tk, int NH, int NKV) {
    constexpr int BQ = tc_dkv_bq(HD);
    const float scale = 1.0f / sqrtf((float)HD), scale_log2 = scale * TC_LOG2E;
    const size_t rows = (size_t)B * NH * Tq;

    float *delta = (float *)titan_cuda_scratch(rows * sizeof(float),
                                               "attention_backward (D = rowsum(dO * O))");
    attention_tc_delta_kernel<HD><<<tc_delta_grid(rows), TC_DELTA_THREADS>>>(delta, dout, out, Tq,
                                                                           NH, rows);
    CUDA_CHECK_LAUNCH();

    const size_t smem_kv = tc_dkv_smem(HD);
    static const int once_kv =
        tc_allow_smem((const void *)attention_tc_dkv_kernel<HD, BQ>, smem_kv);
    (void)once_kv;
    attention_tc_dkv_kernel<HD, BQ><<<tc_key_grid(B, Tk, NKV), TC_THREADS, smem_kv>>>(
        dk, dv, dout, lse, delta, q, k, v, Tq, Tk, NH, NKV, scale, scale_log2, add);
    CUDA_CHECK_LAUNCH();

    const size_t smem_q = tc_dq_smem(HD);
    static const int once_q = tc_allow_smem((const void *)attention_tc_dq_kernel<HD>, smem_q);
    (void)once_q;
    attention_tc_dq_kernel<HD><<<tc_query_grid(B, Tq, NH), TC_THREADS, smem_q>>>(
        dq, dout, lse, delta, q, k, v, Tq, Tk, NH, NKV, scale, scale_log2, add);
    CUDA_CHECK_LAUNCH();

    CUDA_CHECK(cudaFreeAsync(delta, 0));
}

void titan_cuda_attention_tc_forward(bf16 *out, float *lse, const bf16 *q, const bf16 *k,
                                     const bf16 *v, int B, int Tq, int Tk, int NH, int NKV,
                                     int HD) {
    tc_check(B, Tq, Tk, NH, NKV, HD);
    if (tc_misaligned(q, 16) || tc_misaligned(k, 16) || tc_misaligned(v, 16) ||
        tc_misaligned(out, 4))
        titan_cuda_panic(__FILE__, __LINE__, "attention_tc_forward",
                         "q, k, v must be 16-byte aligned, out 4-byte aligned");
    if (B <= 0 || Tq <= 0) return;
    if (HD == 64) tc_forward<64>(out, lse, q, k, v, B, Tq, Tk, NH, NKV);
    else tc_forward<128>(out, lse, q, k, v, B, Tq, Tk, NH, NKV);
}

void titan_cuda_attention_tc_backward(int acc, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout,
                                      const bf16 *out, const float *lse, const bf16 *q,
                                      const bf16 *k, const bf16 *v, int B, int Tq, int Tk, int NH,
                                      int NKV, int HD) {
    tc_check(B, Tq, Tk, NH, NKV, HD);
    if (tc_misaligned(q, 16) || tc_misaligned(k, 16) || tc_misaligned(v, 16) ||
        tc_misaligned(dout, 16) || tc_misaligned(out, 4) || tc_misaligned(dq, 4) ||
        tc_misaligned(dk, 4) || tc_misaligned(dv, 4))
        titan_cuda_panic(__FILE__, __LINE__, "attention_tc_backward",
                         "q, k, v, dout must be 16-byte aligned, out, dq, dk, dv 4-byte aligned");
    if (B <= 0 || Tq <= 0) return;
    const int add = acc != 0;
    if (HD == 64) tc_backward<64>(add, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, NH, NKV);
    else tc_backward<128>(add, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, NH, NKV);
}
