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
 * Files: this one (the forward kernel and both entry points' checks),
 * attention_tc_bwd.cu (the backward kernels), attention_tc.cuh (what they
 * share: constants, PTX wrappers, fragment helpers, launch geometry). The
 * suite runs the device code on the CPU too (tests/emu: the PTX wrappers
 * emulated, launched with the same geometry). */
#include "attention_tc.cuh"

/* ------------------------------------------------------------------ forward */

template <int HD>
__global__ void __launch_bounds__(TC_THREADS)
    attention_tc_forward_kernel(bf16 *out, float *lse, const bf16 *q, const bf16 *k,
                                const bf16 *v, int Tq, int Tk, int off, int NH, int NKV,
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
    /* row q0's position, and this lane's rows' last keys: past Tk - 1 a
     * row sees every key (off >= Tk - 1: no mask at all) */
    const int p0 = min(off + q0, Tk - 1);
    const int pos_lo = min(off + q0 + warp * 16 + g, Tk - 1), pos_hi = min(pos_lo + 8, Tk - 1);
    const int nkv = min(off + q0 + min(TC_BR, Tq - q0) - 1, Tk - 1) / TC_BC + 1; /* through the last row's keys */

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


/* ---------------------------------------------------------------- host side */

int titan_cuda_attention_tc_supported(int HD) { return HD == 64 || HD == 128; }

template <int HD>
static void tc_forward(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v, int B,
                       int Tq, int Tk, int off, int NH, int NKV) {
    const size_t smem = tc_forward_smem(HD);
    static const int once = tc_allow_smem((const void *)attention_tc_forward_kernel<HD>, smem);
    (void)once;
    const float scale_log2 = 1.0f / sqrtf((float)HD) * TC_LOG2E;
    attention_tc_forward_kernel<HD><<<tc_query_grid(B, Tq, NH), TC_THREADS, smem>>>(
        out, lse, q, k, v, Tq, Tk, off, NH, NKV, scale_log2);
    CUDA_CHECK_LAUNCH();
}

void titan_cuda_attention_tc_forward(bf16 *out, float *lse, const bf16 *q, const bf16 *k,
                                     const bf16 *v, int B, int Tq, int Tk, int NH, int NKV,
                                     int HD) {
    titan_cuda_attention_tc_forward_at(out, lse, q, k, v, B, Tq, Tk, Tk - Tq, NH, NKV, HD);
}

void titan_cuda_attention_tc_forward_at(bf16 *out, float *lse, const bf16 *q, const bf16 *k,
                                        const bf16 *v, int B, int Tq, int Tk, int off, int NH,
                                        int NKV, int HD) {
    tc_check(B, Tq, Tk, NH, NKV, HD);
    tc_check_off(off);
    if (tc_misaligned(q, 16) || tc_misaligned(k, 16) || tc_misaligned(v, 16) ||
        tc_misaligned(out, 4))
        titan_cuda_panic(__FILE__, __LINE__, "attention_tc_forward",
                         "q, k, v must be 16-byte aligned, out 4-byte aligned");
    if (B <= 0 || Tq <= 0) return;
    off = min(off, Tk - 1); /* every key: no overflow below */
    if (HD == 64) tc_forward<64>(out, lse, q, k, v, B, Tq, Tk, off, NH, NKV);
    else tc_forward<128>(out, lse, q, k, v, B, Tq, Tk, off, NH, NKV);
}
