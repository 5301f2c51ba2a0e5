/* attention_tc_bwd.cu - the backward of the tensor-core flash attention
 * (attention_tc.cu describes the design, attention_tc.cuh holds what both
 * share): D = rowsum(dO * O), then dK and dV per key tile, then dQ per query
 * tile, no atomics, the bits repeating run to run. */
#include "attention_tc.cuh"

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
                            int Tq, int Tk, int off, int NH, int NKV, float scale,
                            float scale_log2, int add) {
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
    const int k0 = kj * TC_BC, rep = NH / NKV; /* query r at position off + r */
    const int j_lo = k0 + warp * 16 + g, j_hi = j_lo + 8; /* this lane's two keys */
    /* query tiles qs.. of each head of the group; earlier ones see none of
     * these keys (the first that does is row k0 - off, at position k0).
     * With off below Tk - Tq that row can be past Tq: no query sees these
     * keys, per_head is 0, and the gradients stored are zeros */
    const int qs = max(0, k0 - off) / BQ, per_head = max(0, (Tq + BQ - 1) / BQ - qs),
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
    if (n_iter == 0) tc_cp_async_wait<0>(); /* the loads in flight land before the block exits */

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
                           const bf16 *q, const bf16 *k, const bf16 *v, int Tq, int Tk, int off,
                           int NH, int NKV, float scale, float scale_log2, int add) {
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
    /* as in the forward: positions past Tk - 1 see every key */
    const int p0 = min(off + q0, Tk - 1);
    const int pos_lo = min(off + q0 + warp * 16 + g, Tk - 1), pos_hi = min(pos_lo + 8, Tk - 1);
    const int nkv = min(off + q0 + min(TC_BR, Tq - q0) - 1, Tk - 1) / TC_BC + 1;

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

/* ---------------------------------------------------------------- host side */

template <int HD>
static void tc_backward(int add, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *out,
                        const float *lse, const bf16 *q, const bf16 *k, const bf16 *v, int B,
                        int Tq, int Tk, int off, int NH, int NKV) {
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
        dk, dv, dout, lse, delta, q, k, v, Tq, Tk, off, NH, NKV, scale, scale_log2, add);
    CUDA_CHECK_LAUNCH();

    const size_t smem_q = tc_dq_smem(HD);
    static const int once_q = tc_allow_smem((const void *)attention_tc_dq_kernel<HD>, smem_q);
    (void)once_q;
    attention_tc_dq_kernel<HD><<<tc_query_grid(B, Tq, NH), TC_THREADS, smem_q>>>(
        dq, dout, lse, delta, q, k, v, Tq, Tk, off, NH, NKV, scale, scale_log2, add);
    CUDA_CHECK_LAUNCH();

    CUDA_CHECK(cudaFreeAsync(delta, 0));
}

void titan_cuda_attention_tc_backward(int acc, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout,
                                      const bf16 *out, const float *lse, const bf16 *q,
                                      const bf16 *k, const bf16 *v, int B, int Tq, int Tk, int NH,
                                      int NKV, int HD) {
    titan_cuda_attention_tc_backward_at(acc, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, Tk - Tq, NH,
                                        NKV, HD);
}

void titan_cuda_attention_tc_backward_at(int acc, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout,
                                         const bf16 *out, const float *lse, const bf16 *q,
                                         const bf16 *k, const bf16 *v, int B, int Tq, int Tk, int off,
                                         int NH, int NKV, int HD) {
    tc_check(B, Tq, Tk, NH, NKV, HD);
    tc_check_off(off);
    if (tc_misaligned(q, 16) || tc_misaligned(k, 16) || tc_misaligned(v, 16) ||
        tc_misaligned(dout, 16) || tc_misaligned(out, 4) || tc_misaligned(dq, 4) ||
        tc_misaligned(dk, 4) || tc_misaligned(dv, 4))
        titan_cuda_panic(__FILE__, __LINE__, "attention_tc_backward",
                         "q, k, v, dout must be 16-byte aligned, out, dq, dk, dv 4-byte aligned");
    if (B <= 0 || Tq <= 0) return;
    const int add = acc != 0;
    off = min(off, Tk - 1); /* every key: no overflow below */
    if (HD == 64) tc_backward<64>(add, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, off, NH, NKV);
    else tc_backward<128>(add, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, off, NH, NKV);
}
