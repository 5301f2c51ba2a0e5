/* attention.cu - causal grouped-query attention, flash style, fp32 math.
 *
 * Shapes (backend.h): q, out, dout, dq [B, Tq, NH, HD], k, v, dk, dv
 * [B, Tk, NKV, HD], lse [B, NH, Tq], 1 <= Tq <= Tk. The queries are the last
 * Tq of the Tk positions: query row t sits at position off + t, off =
 * Tk - Tq, and sees keys 0 .. off + t (Tq = Tk: plain causal attention;
 * Tq < Tk: a context-parallel chunk of queries against every key up to it).
 * The kernels below take any offset off >= 0 (the _at entry points, the
 * ring's blocks): row t then sees keys 0 .. min(off + t, Tk - 1), so off >=
 * Tk - 1 is unmasked; so do the tensor-core ones.
 *
 * A straightforward correct version (speed comes later: a tensor-core flash
 * attention on bf16 tiles is the follow-up). Tensors are of storage type S
 * (float or bf16); every kernel widens them to fp32 as it loads (K/V tiles
 * are staged in shared memory as fp32), computes exactly as the fp32 version
 * and rounds each output once; lse is fp32.
 *
 * Forward: a block of ATT_WARPS warps takes ATT_WARPS consecutive query rows
 * of one (b, h), a warp per row. Key/value tiles of ATT_BK = 32 rows are
 * staged in shared memory (rows padded by one float, so lane j reading row j
 * hits bank (j + d) % 32: no conflicts). Lane j scores key j of the tile,
 * the warp takes max and sum by shuffles, and the output row (lane owns dims
 * lane + 32 i) is updated with an online softmax (running max m, running sum
 * l): no Tq x Tk matrix. Tiles after the block's last row's position are
 * never loaded.
 * It saves lse = m + log(l) per row.
 *
 * Backward, as the CPU backend, in two kernels so no float atomics are needed:
 *   P = exp(S - lse), D = rowsum(dO * O), dS = P * (dO V^T - D),
 *   dV = P^T dO,  dK = scale dS^T Q,  dQ = scale dS K.
 * dkv: one warp per tile of 32 keys of one (b, kv head); lane j owns key j and
 *   accumulates its dK and dV rows in shared memory while the warp walks
 *   every query head of the group and every query row whose position is at
 *   or after the tile's first key.
 * dq:  like the forward, a warp per query row walking the key tiles.
 * Each sum runs in a fixed order, so results are deterministic. dQ, dK, dV
 * are added into the caller's tensors, or stored without reading them when
 * the acc mask lacks TITAN_ACC_DX (a warp-uniform branch at the store).
 *
 * Scores are formed as (q * scale) . k, as the CPU backend does. HD must be
 * even and at most 256 (lane owns up to 8 dims; kernels are instantiated for
 * 1, 2, 4, 8 dims per lane). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_ops.cuh"

#define ATT_BK 32   /* keys per tile = lanes of a warp */
#define ATT_WARPS 8 /* query rows per block (forward, dq) */

/* Stages keys k0 .. k0+ATT_BK-1 of kv head kh into Ks/Vs [ATT_BK][HD+1] as
 * fp32; rows past Tk are zero. All threads of the block take part. */
template <typename S>
static __device__ void load_kv_tile(float *Ks, float *Vs, const S *k, const S *v, int b, int kh,
                                    int k0, int Tk, int NKV, int HD) {
    int ld = HD + 1;
    for (int idx = threadIdx.x; idx < ATT_BK * HD; idx += blockDim.x) {
        int j = idx / HD, d = idx % HD;
        float kx = 0.0f, vx = 0.0f;
        if (k0 + j < Tk) {
            size_t off = (((size_t)b * Tk + k0 + j) * NKV + kh) * HD + d;
            kx = load_f32(k + off);
            vx = load_f32(v + off);
        }
        Ks[j * ld + d] = kx;
        Vs[j * ld + d] = vx;
    }
}

static __device__ __forceinline__ float dot_row(const float *a, const float *b, int HD) {
    float s = 0.0f;
    for (int d = 0; d < HD; d++) s += a[d] * b[d];
    return s;
}

/* ------------------------------------------------------------------ forward */

template <typename S, int DPL>
__global__ void attention_forward_kernel(S *out, float *lse, const S *q, const S *k, const S *v,
                                         int Tq, int Tk, int off, int NH, int NKV, int HD, float scale) {
    extern __shared__ float smem[];
    int ld = HD + 1;
    float *Ks = smem, *Vs = Ks + ATT_BK * ld, *Qs = Vs + ATT_BK * ld; /* Qs [ATT_WARPS][HD] */
    int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * ATT_WARPS;
    int t = q0 + warp, kh = h / (NH / NKV), pos = min(off + t, Tk - 1); /* row t's last key */
    bool active = t < Tq;
    float *qs = Qs + warp * HD;
    size_t qoff = (((size_t)b * Tq + t) * NH + h) * HD;
    if (active)
        for (int d = lane; d < HD; d += WARP) qs[d] = load_f32(q + qoff + d) * scale;

    float acc[DPL];
#pragma unroll
    for (int i = 0; i < DPL; i++) acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    int last = min(off + min(q0 + ATT_WARPS, Tq) - 1, Tk - 1); /* the block's last row's last key */
    for (int k0 = 0; k0 <= last; k0 += ATT_BK) {
        __syncthreads(); /* the previous tile is consumed (and qs written) */
        load_kv_tile(Ks, Vs, k, v, b, kh, k0, Tk, NKV, HD);
        __syncthreads();
        if (!active || k0 > pos) continue;
        int nk = min(ATT_BK, pos - k0 + 1); /* keys of this tile row t may see */
        float s = lane < nk ? dot_row(qs, Ks + lane * ld, HD) : -INFINITY;
        float mnew = fmaxf(m, warp_max(s));
        float p = expf(s - mnew);     /* masked lanes: exp(-inf) = 0 */
        float alpha = expf(m - mnew); /* first tile: exp(-inf) = 0 */
        l = l * alpha + warp_sum(p);
        m = mnew;
#pragma unroll
        for (int i = 0; i < DPL; i++) acc[i] *= alpha;
        for (int j = 0; j < nk; j++) {
            float pj = __shfl_sync(FULL_MASK, p, j);
#pragma unroll
            for (int i = 0; i < DPL; i++) {
                int d = lane + WARP * i;
                if (d < HD) acc[i] += pj * Vs[j * ld + d];
            }
        }
    }
    if (!active) return;
    float inv = 1.0f / l;
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        int d = lane + WARP * i;
        if (d < HD) store_f32(out + qoff + d, acc[i] * inv);
    }
    if (lane == 0) lse[((size_t)b * NH + h) * Tq + t] = m + logf(l);
}

/* -------------------------------------------------------- backward: dK, dV */

template <typename S, int DPL>
__global__ void attention_backward_dkv_kernel(S *dk, S *dv, const S *dout, const S *out,
                                              const float *lse, const S *q, const S *k,
                                              const S *v, int Tq, int Tk, int off, int NH,
                                              int NKV, int HD, float scale, int add) {
    extern __shared__ float smem[];
    int ld = HD + 1;
    float *Ks = smem, *Vs = Ks + ATT_BK * ld, *dKs = Vs + ATT_BK * ld, *dVs = dKs + ATT_BK * ld;
    float *qs = dVs + ATT_BK * ld, *dos = qs + HD;
    int lane = threadIdx.x;
    int b = blockIdx.z, kh = blockIdx.y, k0 = blockIdx.x * ATT_BK, rep = NH / NKV;
    int j = lane, key = k0 + j, shift = off; /* query t at position shift + t */
    load_kv_tile(Ks, Vs, k, v, b, kh, k0, Tk, NKV, HD);
    for (int d = 0; d < HD; d++) dKs[j * ld + d] = 0.0f, dVs[j * ld + d] = 0.0f;
    __syncwarp();
    const float *kj = Ks + j * ld, *vj = Vs + j * ld;
    float *dkj = dKs + j * ld, *dvj = dVs + j * ld;
    for (int h = kh * rep; h < (kh + 1) * rep; h++)
        for (int t = max(0, k0 - shift); t < Tq; t++) { /* the rows that see key k0 */
            size_t off = (((size_t)b * Tq + t) * NH + h) * HD;
            float dsum = 0.0f; /* D = dO . O */
#pragma unroll
            for (int i = 0; i < DPL; i++) {
                int d = lane + WARP * i;
                if (d < HD) {
                    float g = load_f32(dout + off + d);
                    qs[d] = load_f32(q + off + d) * scale;
                    dos[d] = g;
                    dsum += g * load_f32(out + off + d);
                }
            }
            float D = warp_sum(dsum), L = lse[((size_t)b * NH + h) * Tq + t];
            __syncwarp(); /* qs, dos written */
            if (key <= shift + t && key < Tk) {
                float p = expf(dot_row(qs, kj, HD) - L);
                float ds = p * (dot_row(dos, vj, HD) - D);
                for (int d = 0; d < HD; d++) {
                    dvj[d] += p * dos[d];
                    dkj[d] += ds * qs[d];
                }
            }
            __syncwarp(); /* qs, dos read before the next row overwrites them */
        }
    __syncwarp(); /* every lane's dK/dV row is complete */
    /* write back coalesced: lanes walk the dims of one key row at a time */
    int nk = min(ATT_BK, Tk - k0);
    for (int r = 0; r < nk; r++) {
        size_t off = (((size_t)b * Tk + k0 + r) * NKV + kh) * HD;
        for (int d = lane; d < HD; d += WARP) {
            store_grad(add, dk + off + d, dKs[r * ld + d]);
            store_grad(add, dv + off + d, dVs[r * ld + d]);
        }
    }
}

/* ------------------------------------------------------------ backward: dQ */

template <typename S, int DPL>
__global__ void attention_backward_dq_kernel(S *dq, const S *dout, const S *out, const float *lse,
                                             const S *q, const S *k, const S *v, int Tq, int Tk,
                                             int off, int NH, int NKV, int HD, float scale, int add) {
    extern __shared__ float smem[];
    int ld = HD + 1;
    float *Ks = smem, *Vs = Ks + ATT_BK * ld, *Qs = Vs + ATT_BK * ld, *DOs = Qs + ATT_WARPS * HD;
    int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * ATT_WARPS;
    int t = q0 + warp, kh = h / (NH / NKV), pos = min(off + t, Tk - 1); /* row t's last key */
    bool active = t < Tq;
    float *qs = Qs + warp * HD, *dos = DOs + warp * HD;
    size_t qoff = (((size_t)b * Tq + t) * NH + h) * HD;
    float D = 0.0f, L = 0.0f;
    if (active) {
        float dsum = 0.0f;
        for (int d = lane; d < HD; d += WARP) {
            float g = load_f32(dout + qoff + d);
            qs[d] = load_f32(q + qoff + d) * scale;
            dos[d] = g;
            dsum += g * load_f32(out + qoff + d);
        }
        D = warp_sum(dsum);
        L = lse[((size_t)b * NH + h) * Tq + t];
    }
    float acc[DPL];
#pragma unroll
    for (int i = 0; i < DPL; i++) acc[i] = 0.0f;
    int last = min(off + min(q0 + ATT_WARPS, Tq) - 1, Tk - 1);
    for (int k0 = 0; k0 <= last; k0 += ATT_BK) {
        __syncthreads();
        load_kv_tile(Ks, Vs, k, v, b, kh, k0, Tk, NKV, HD);
        __syncthreads();
        if (!active || k0 > pos) continue;
        int nk = min(ATT_BK, pos - k0 + 1);
        float ds = 0.0f;
        if (lane < nk) {
            float p = expf(dot_row(qs, Ks + lane * ld, HD) - L);
            ds = p * (dot_row(dos, Vs + lane * ld, HD) - D);
        }
        for (int j = 0; j < nk; j++) {
            float dsj = __shfl_sync(FULL_MASK, ds, j);
#pragma unroll
            for (int i = 0; i < DPL; i++) {
                int d = lane + WARP * i;
                if (d < HD) acc[i] += dsj * Ks[j * ld + d];
            }
        }
    }
    if (!active) return;
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        int d = lane + WARP * i;
        if (d < HD) store_grad(add, dq + qoff + d, scale * acc[i]);
    }
}

/* ------------------------------------------------------------- entry points */

/* Kernels above 48 KiB of dynamic shared memory must ask for it first. */
template <typename K>
static void allow_smem(K kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)bytes));
}

/* NH and B are grid dimensions y and z (here and in attention_tc.cu) */
static void check_shape(int B, int Tq, int Tk, int NH, int NKV, int HD) {
    if (NKV <= 0 || NH % NKV != 0 || HD <= 0 || HD % 2 != 0 || HD > 8 * WARP)
        titan_cuda_panic(__FILE__, __LINE__, "attention shape",
                         "needs NH % NKV == 0 and HD even, 2..256");
    if (B > 65535 || NH > 65535)
        titan_cuda_panic(__FILE__, __LINE__, "attention shape", "needs B and NH at most 65535");
    if (Tq > Tk)
        titan_cuda_panic(__FILE__, __LINE__, "attention shape",
                         "needs Tq <= Tk (the queries are the last Tq of the Tk positions)");
}

/* the _at ops: any Tq, off >= 0, at least one key */
static void check_shape_at(int B, int Tk, int off, int NH, int NKV, int HD) {
    check_shape(B, 1, 1, NH, NKV, HD);
    if (off < 0 || Tk < 1)
        titan_cuda_panic(__FILE__, __LINE__, "attention shape", "needs off >= 0 and Tk >= 1 (the _at ops)");
}

template <typename S, int DPL>
static void forward(S *out, float *lse, const S *q, const S *k, const S *v, int B, int Tq, int Tk,
                    int off, int NH, int NKV, int HD) {
    size_t smem = (size_t)(2 * ATT_BK * (HD + 1) + ATT_WARPS * HD) * sizeof(float);
    allow_smem(attention_forward_kernel<S, DPL>, smem);
    dim3 grid((Tq + ATT_WARPS - 1) / ATT_WARPS, NH, B);
    attention_forward_kernel<S, DPL><<<grid, ATT_WARPS * WARP, smem>>>(
        out, lse, q, k, v, Tq, Tk, off, NH, NKV, HD, 1.0f / sqrtf((float)HD));
    CUDA_CHECK_LAUNCH();
}

template <typename S, int DPL>
static void backward(int add, S *dq, S *dk, S *dv, const S *dout, const S *out, const float *lse,
                     const S *q, const S *k, const S *v, int B, int Tq, int Tk, int off, int NH,
                     int NKV, int HD) {
    float scale = 1.0f / sqrtf((float)HD);
    size_t smem_kv = (size_t)(4 * ATT_BK * (HD + 1) + 2 * HD) * sizeof(float);
    allow_smem(attention_backward_dkv_kernel<S, DPL>, smem_kv);
    dim3 grid_kv((Tk + ATT_BK - 1) / ATT_BK, NKV, B);
    attention_backward_dkv_kernel<S, DPL><<<grid_kv, WARP, smem_kv>>>(
        dk, dv, dout, out, lse, q, k, v, Tq, Tk, off, NH, NKV, HD, scale, add);
    CUDA_CHECK_LAUNCH();

    size_t smem_q = (size_t)(2 * ATT_BK * (HD + 1) + 2 * ATT_WARPS * HD) * sizeof(float);
    allow_smem(attention_backward_dq_kernel<S, DPL>, smem_q);
    dim3 grid_q((Tq + ATT_WARPS - 1) / ATT_WARPS, NH, B);
    attention_backward_dq_kernel<S, DPL><<<grid_q, ATT_WARPS * WARP, smem_q>>>(
        dq, dout, out, lse, q, k, v, Tq, Tk, off, NH, NKV, HD, scale, add);
    CUDA_CHECK_LAUNCH();
}

/* picks the kernels' dims per lane (1, 2, 4, 8) from HD */
template <typename S>
static void forward_hd(S *out, float *lse, const S *q, const S *k, const S *v, int B, int Tq,
                       int Tk, int off, int NH, int NKV, int HD) {
    if (HD <= 32) forward<S, 1>(out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD);
    else if (HD <= 64) forward<S, 2>(out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD);
    else if (HD <= 128) forward<S, 4>(out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD);
    else forward<S, 8>(out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD);
}

/* add: 1 adds into dq, dk, dv, 0 overwrites them */
template <typename S>
static void backward_hd(int add, S *dq, S *dk, S *dv, const S *dout, const S *out,
                        const float *lse, const S *q, const S *k, const S *v, int B, int Tq,
                        int Tk, int off, int NH, int NKV, int HD) {
    if (HD <= 32)
        backward<S, 1>(add, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD);
    else if (HD <= 64)
        backward<S, 2>(add, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD);
    else if (HD <= 128)
        backward<S, 4>(add, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD);
    else backward<S, 8>(add, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD);
}

/* Which kernels run an attention call. bf16 goes to cuDNN (attention_cudnn.cu)
 * when it is preferred and the call applies; else to the tensor-core
 * kernels (attention_tc.cu) where they apply: HD 64 or 128, q, k, v, dout
 * 16-byte aligned and out, dq, dk, dv 4-byte aligned (the model's buffers
 * are 64-byte aligned; odd test slices are not); any Tq <= Tk. Everything
 * else runs the CUDA-core kernels above.
 *
 * cuDNN is preferred when the tool says so (titan_cuda_set_attention_cudnn,
 * the table's set_option(TITAN_OPT_ATTENTION_CUDNN): titan-train does
 * unless training.deterministic, since cuDNN's backward is not bitwise
 * repeatable), and a missing cuDNN then only costs a note.
 * TITAN_CUDA_ATTENTION, read once, overrides: "cudnn" requires cuDNN (a
 * missing library ends the process), "titan" keeps to titan's kernels,
 * "simple" to the CUDA-core ones (the check of one path against the
 * other); unset or empty leaves the tool's choice. */
enum { ATTN_DEFAULT, ATTN_TITAN, ATTN_SIMPLE, ATTN_CUDNN };
static int attention_env(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("TITAN_CUDA_ATTENTION");
        if (!e || !*e) v = ATTN_DEFAULT;
        else if (strcmp(e, "titan") == 0) v = ATTN_TITAN;
        else if (strcmp(e, "simple") == 0) v = ATTN_SIMPLE;
        else if (strcmp(e, "cudnn") == 0) v = ATTN_CUDNN;
        else {
            fprintf(stderr, "titan: error: cuda: TITAN_CUDA_ATTENTION=%s: expected cudnn, titan or "
                            "simple (or unset)\n", e);
            fflush(NULL);
            _exit(TITAN_ERR_USAGE);
        }
    }
    return v;
}

static int g_prefer_cudnn; /* titan_cuda_set_attention_cudnn */

/* Also reads TITAN_CUDA_ATTENTION, so a bad value ends the run at start
 * rather than at its first attention call. */
void titan_cuda_set_attention_cudnn(int prefer) {
    attention_env();
    __atomic_store_n(&g_prefer_cudnn, prefer != 0, __ATOMIC_RELEASE);
}

static int simple_only(void) { return attention_env() == ATTN_SIMPLE; }
static int cudnn_required(void) { return attention_env() == ATTN_CUDNN; }
static int cudnn_wanted(void) {
    int env = attention_env();
    return env == ATTN_CUDNN || (env == ATTN_DEFAULT && __atomic_load_n(&g_prefer_cudnn, __ATOMIC_ACQUIRE));
}

static int aligned(const void *p, uintptr_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

static int use_tc(titan_dtype dt, int HD, const void *a16, const void *b16, const void *c16,
                  const void *d16, const void *e4, const void *f4, const void *g4) {
    return dt == TITAN_DTYPE_BF16 && !simple_only() && titan_cuda_attention_tc_supported(HD) &&
           aligned(a16, 16) && aligned(b16, 16) && aligned(c16, 16) && aligned(d16, 16) &&
           aligned(e4, 4) && aligned(f4, 4) && aligned(g4, 4);
}

/* off: query 0's position (the plain ops' Tk - Tq); cuDNN's graphs carry
 * that one only (its bottom-right causal mask), so another goes to titan's
 * kernels, which take any. Clamped to Tk - 1 (every key) against overflow. */
static void forward_at(titan_dtype dt, void *out, float *lse, const void *q, const void *k, const void *v, int B,
                       int Tq, int Tk, int off, int NH, int NKV, int HD) {
    if (B <= 0 || Tq <= 0) return;
    off = min(off, Tk - 1);
    if (dt == TITAN_DTYPE_BF16 && off == Tk - Tq && cudnn_wanted() &&
        titan_cuda_attention_cudnn_forward(cudnn_required(), (bf16 *)out, lse, (const bf16 *)q,
                                           (const bf16 *)k, (const bf16 *)v, B, Tq, Tk, NH, NKV,
                                           HD))
        return;
    if (Tq <= Tk && use_tc(dt, HD, q, k, v, q, out, out, out)) {
        titan_cuda_attention_tc_forward_at((bf16 *)out, lse, (const bf16 *)q, (const bf16 *)k,
                                           (const bf16 *)v, B, Tq, Tk, off, NH, NKV, HD);
        return;
    }
    TITAN_CUDA_DISPATCH(dt, "attention_forward",
                        forward_hd<S>((S *)out, lse, (const S *)q, (const S *)k, (const S *)v, B,
                                      Tq, Tk, off, NH, NKV, HD));
}

static void backward_at(titan_dtype dt, int acc, void *dq, void *dk, void *dv, const void *dout,
                        const void *out, const float *lse, const void *q, const void *k, const void *v,
                        int B, int Tq, int Tk, int off, int NH, int NKV, int HD) {
    const int add = (acc & TITAN_ACC_DX) != 0;
    if (B > 0 && Tq <= 0 && Tk > 0 && !add) { /* no queries: the keys' gradients are zeros, as on the cpu */
        size_t bytes = (size_t)B * Tk * NKV * HD * (dt == TITAN_DTYPE_F32 ? sizeof(float) : sizeof(bf16));
        CUDA_CHECK(cudaMemsetAsync(dk, 0, bytes, 0));
        CUDA_CHECK(cudaMemsetAsync(dv, 0, bytes, 0));
    }
    if (B <= 0 || Tq <= 0) return;
    off = min(off, Tk - 1);
    if (dt == TITAN_DTYPE_BF16 && off == Tk - Tq && cudnn_wanted() &&
        titan_cuda_attention_cudnn_backward(cudnn_required(), add, (bf16 *)dq, (bf16 *)dk,
                                            (bf16 *)dv, (const bf16 *)dout, (const bf16 *)out,
                                            lse, (const bf16 *)q, (const bf16 *)k,
                                            (const bf16 *)v, B, Tq, Tk, NH, NKV, HD))
        return;
    if (Tq <= Tk && use_tc(dt, HD, q, k, v, dout, dq, dk, dv)) {
        titan_cuda_attention_tc_backward_at(add, (bf16 *)dq, (bf16 *)dk, (bf16 *)dv,
                                            (const bf16 *)dout, (const bf16 *)out, lse,
                                            (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, B, Tq,
                                            Tk, off, NH, NKV, HD);
        return;
    }
    TITAN_CUDA_DISPATCH(dt, "attention_backward",
                        backward_hd<S>(add, (S *)dq, (S *)dk, (S *)dv, (const S *)dout,
                                       (const S *)out, lse, (const S *)q, (const S *)k,
                                       (const S *)v, B, Tq, Tk, off, NH, NKV, HD));
}

void titan_cuda_attention_forward(titan_dtype dt, void *out, float *lse, const void *q,
                                  const void *k, const void *v, int B, int Tq, int Tk, int NH,
                                  int NKV, int HD) {
    check_shape(B, Tq, Tk, NH, NKV, HD);
    forward_at(dt, out, lse, q, k, v, B, Tq, Tk, Tk - Tq, NH, NKV, HD);
}

void titan_cuda_attention_backward(titan_dtype dt, int acc, void *dq, void *dk, void *dv,
                                   const void *dout, const void *out, const float *lse,
                                   const void *q, const void *k, const void *v, int B, int Tq,
                                   int Tk, int NH, int NKV, int HD) {
    check_shape(B, Tq, Tk, NH, NKV, HD);
    backward_at(dt, acc, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, Tk - Tq, NH, NKV, HD);
}

/* Query 0 at key position off >= 0 (backend.h's _at ops): Tq may exceed Tk
 * where off puts every row's last key inside them. */
void titan_cuda_attention_forward_at(titan_dtype dt, void *out, float *lse, const void *q, const void *k,
                                     const void *v, int B, int Tq, int Tk, int off, int NH, int NKV, int HD) {
    check_shape_at(B, Tk, off, NH, NKV, HD);
    forward_at(dt, out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD);
}

void titan_cuda_attention_backward_at(titan_dtype dt, int acc, void *dq, void *dk, void *dv, const void *dout,
                                      const void *out, const float *lse, const void *q, const void *k,
                                      const void *v, int B, int Tq, int Tk, int off, int NH, int NKV, int HD) {
    check_shape_at(B, Tk, off, NH, NKV, HD);
    backward_at(dt, acc, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD);
}
