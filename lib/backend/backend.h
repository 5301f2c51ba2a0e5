/* backend.h - the op table every compute backend fills.
 *
 * Layout conventions (row-major, llm.c style names):
 *   N  = rows (tokens in the micro-batch, B*T)
 *   C  = model dim, H = FFN hidden dim, V = vocab size
 *   B, T = batch and sequence length, NH = query heads, NKV = kv heads, HD = head dim
 *   weights of a linear layer are [out, in] as in PyTorch (y = x W^T).
 *
 * Rules every backend keeps:
 *   - forward ops overwrite their outputs;
 *   - backward ops write each gradient buffer they are given either with =
 *     or with +=, as their acc mask says (TITAN_ACC_* below): += serves
 *     gradient accumulation and residual branches without extra copies, =
 *     spares the first writer a zero fill and a read of the zeros;
 *   - results are deterministic: the same inputs give the same bits, whatever
 *     the thread count (no atomics on floats, fixed reduction orders); the
 *     one exception is cuda's bf16 attention through cuDNN, which a tool
 *     turns on (TITAN_OPT_ATTENTION_CUDNN: titan-train unless
 *     training.deterministic; kernels/README.md);
 *   - pointers are device pointers of this backend; the CPU backend's are host memory;
 *   - mixed precision (dt = bf16) changes storage, never the arithmetic: every
 *     op computes in fp32 and rounds its outputs once, so the CPU backend's
 *     bf16 ops (fp32 ops on widened copies) are the reference for any other's.
 * The CPU backend is the reference every other backend is tested against. */
#ifndef TITAN_BACKEND_H
#define TITAN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "tensor/dtype.h"
#include "tensor/fp8.h"

/* The acc mask of a backward op: which of its gradient outputs it adds into
 * (+=); the others it overwrites (=) without reading them, so they may hold
 * anything, NaN included, on entry. An overwritten output is the same as
 * the sum into zeros, bit for bit but for the sign of a zero. */
enum {
    TITAN_ACC_DX = 1, /* activation gradients: dinp, dq/dk/dv, dh1/dh3 */
    TITAN_ACC_DW = 2, /* parameter gradients (fp32): dw, dweight, dwte */
};

/* What a backend can do beyond the ops every backend has: the bits of
 * titan_backend.caps. Callers ask these (and host), never the name, which
 * is for messages only. */
enum {
    /* computes on this machine's CPU cores (cpu, cpu-guard): its peak is
     * titan_backend_cpu_peak_flops() */
    TITAN_CAP_CPU = 1,
    /* an NVIDIA GPU (cuda): titan_backend_open_desc's desc names it as
     * cudaGetDeviceProperties does, a MIG slice with "MIG" in it, so a
     * datasheet's peak may be looked up by that name */
    TITAN_CAP_GPU = 2,
    /* its library carries the NCCL communicator (lib/comm/comm_nccl_api.h):
     * several ranks' collectives on its device buffers go over NCCL rather
     * than shared memory through host copies */
    TITAN_CAP_NCCL = 4,
    /* set_option(TITAN_OPT_ATTENTION_CUDNN, ...) is taken (cuda; where
     * cuDNN is missing, from the build or at run time, its own kernels run:
     * kernels/README.md) */
    TITAN_CAP_ATTENTION_CUDNN = 8,
    /* float8 GEMMs in hardware (cuda on compute capability 8.9 and up):
     * fp8_matmul_* with a recipe whose emulate is 0 run on float8 tensor
     * cores; without it they always emulate (dequantized operands) */
    TITAN_CAP_FP8_GEMM = 16,
};

/* set_option's keys; value meanings as listed. */
/* 1: bf16 attention may go through cuDNN's fused attention where it opens
 * (faster on Hopper; its backward adds with atomics, so not bitwise
 * repeatable: the one exception to the determinism rule above); 0 (the
 * default): the backend's own kernels only. TITAN_CUDA_ATTENTION, when
 * set, overrides it; setting it reads that variable and ends the process
 * on a bad value (kernels/README.md). */
#define TITAN_OPT_ATTENTION_CUDNN "attention.cudnn"
/* k >= 2: k processes share this GPU (several ranks on one device, a test
 * and development mode): this one may hold at most 15/16 of 1/k of the
 * GPU's memory, and an allocation past it fails as out of memory with the
 * reason on stderr; 0 or 1: no cap (the default). cuda only. */
#define TITAN_OPT_DEVICE_SHARE "device.share"

typedef struct titan_backend {
    const char *name; /* "cpu", "cuda", "cpu-guard": for messages; ask caps */
    /* 1 when the backend's pointers are plain host memory that callers may
     * read and write in place (cpu); 0 for a device, and for cpu-guard,
     * which stands in for one. Wrappers (the op profiler) copy it. */
    int host;
    /* TITAN_CAP_* bits. Wrappers (the op profiler) copy them. */
    unsigned caps;
    /* Sets a backend-specific switch, key one of the TITAN_OPT_* above
     * (process-wide; before the ops it affects are called). Returns 0 when
     * the backend took it, -1 when it has no such option (nothing changes,
     * no error is set). Wrappers pass it to the backend they wrap. */
    int (*set_option)(const char *key, int value);

    /* memory */
    void *(*alloc)(size_t nbytes);          /* zero-filled, 64-byte aligned; NULL on failure */
    void (*free)(void *p);
    void (*zero)(void *p, size_t nbytes);
    void (*to_device)(void *dst, const void *host_src, size_t nbytes);
    void (*to_host)(void *host_dst, const void *src, size_t nbytes);
    /* Page-locked host memory for to_host's and to_device's host side
     * (faster, asynchronous-capable copies on a GPU); NULL on backends
     * where host memory needs nothing special, and when none is left. May
     * be NULL. host_free frees it. */
    void *(*host_alloc)(size_t nbytes);
    void (*host_free)(void *p);
    /* Bytes held through alloc now (*in_use) and the most held at once since
     * the last reset (*peak); reset != 0 then starts a new peak window at
     * the current bytes. *device_used: the device's whole used memory
     * (total - free, with the runtime's context, library workspaces and
     * other processes), 0 for host backends. Any pointer may be NULL. */
    void (*memory)(size_t *in_use, size_t *peak, size_t *device_used, int reset);
    /* Returns once every op queued so far has finished (ops may run
     * asynchronously on a device; a no-op on host backends). */
    void (*sync)(void);

    /* Buffers whose memory comes and goes (FSDP's full parameters and
     * gradients: a unit's memory is held only while it is gathered or
     * accumulating). alloc_releasable reserves nbytes of address space with
     * nothing usable yet; commit(p, n) makes [p, p + n) usable, zero-filled
     * where it was not usable (0; -1 with a TITAN_ERR_NOMEM error when memory
     * ran out); release(p, n) makes [p, p + n) read as zeros afterwards and
     * gives back the memory wholly inside it (host: pages; a GPU: its
     * mapping granules, the partial ones at the ends are zeroed). A device
     * may fault on touching memory not committed (cpu-guard does; host
     * memory faults back in, zeroed, by itself, so commit is a no-op there).
     * Only for buffers from alloc_releasable; free frees them; memory()
     * counts what is committed. */
    void *(*alloc_releasable)(size_t nbytes);
    int (*commit)(void *p, size_t nbytes);
    void (*release)(void *p, size_t nbytes);

    /* dst[i] = src[i] converted between TITAN_DTYPE_F32 and TITAN_DTYPE_BF16
     * (round to nearest even; the same type is a copy). dst and src do not
     * overlap. */
    void (*convert)(void *dst, titan_dtype dst_type, const void *src, titan_dtype src_type, size_t n);

    /* The compute ops. dt is the type of the activations, their gradients
     * and the weights the op reads: TITAN_DTYPE_F32, or TITAN_DTYPE_BF16
     * (bf16 in memory, fp32 arithmetic inside the op, each output element
     * rounded once; "+=" outputs read the bf16 value, add in fp32, round).
     * Always fp32, whatever dt: parameter gradients (dw, dweight, dwte), rstd,
     * lse, losses and the rope tables. Pointers typed void * are dt. */

    /* out[N,OC] = inp[N,IC] @ w[OC,IC]^T, accumulated in fp32 */
    void (*matmul_forward)(titan_dtype dt, void *out, const void *inp, const void *w, int N, int IC,
                           int OC);
    /* dinp[N,IC] (+)= dout @ w;  dw[OC,IC] (+)= dout^T @ inp (fp32).
     * dinp or dw may be NULL (skip). */
    void (*matmul_backward)(titan_dtype dt, int acc, void *dinp, float *dw, const void *dout,
                            const void *inp, const void *w, int N, int IC, int OC);
    /* out[N,OC] = resid[N,OC] + inp[N,IC] @ w[OC,IC]^T: a residual branch's
     * output projection with the residual add in the product's epilogue,
     * accumulated in fp32 and rounded once (in fp32 the bits of
     * matmul_forward then add; in bf16 one rounding fewer). One pass over
     * out instead of the product's write plus add's three. out may alias
     * resid (cuda, bf16: then cuBLASLt may round differently, so in place is
     * not bitwise out of place; the model never adds in place). The
     * backward is matmul_backward's (resid's gradient is dout). */
    void (*matmul_add_forward)(titan_dtype dt, void *out, const void *inp, const void *w,
                               const void *resid, int N, int IC, int OC);

    /* Float8 linears, torchao's Float8Linear with recipe r (tensor/fp8.h):
     * the operands of each GEMM the recipe casts are cast to float8 with
     * dynamic scales (amax of the operand as it is now), the GEMM runs on
     * them with fp32 accumulation and its result is rounded once to dt (dw:
     * fp32); a GEMM whose casts are NONE runs as matmul_* does. The same
     * shapes, acc rules and aliasing as matmul_forward / matmul_add_forward
     * (resid not NULL: out = resid + the product, rounded once) and
     * matmul_backward. Each returns how many GEMMs it ran from float8
     * operands, so a caller can tell a silent fallback. NULL on a backend
     * without float8 (the caller refuses float8 training there). */
    int (*fp8_matmul_forward)(titan_dtype dt, const titan_fp8_recipe *r, void *out, const void *inp,
                              const void *w, const void *resid, int N, int IC, int OC);
    int (*fp8_matmul_backward)(titan_dtype dt, const titan_fp8_recipe *r, int acc, void *dinp, float *dw,
                               const void *dout, const void *inp, const void *w, int N, int IC, int OC);
    /* torchao's dynamic cast of x [rows, cols] (dt): scale (nscales of
     * axis, tensor/fp8.h) from the amax (x's own, or amax[nscales] given
     * on the device), q[rows, cols] = encode(x * scale); q and scale on
     * the device. The bytes and scales are the CPU's (titan_fp8_quantize)
     * bit for bit. NULL where fp8_matmul_* are. */
    void (*fp8_quantize)(titan_dtype dt, uint8_t *q, float *scale, const void *x, int rows, int cols,
                         titan_fp8_axis axis, titan_fp8_format f, int pow2, const float *amax);
    /* out[n] (dt) = decode(q[i]) / scale[0], rounded once to dt: a
     * tensorwise float8 tensor back in high precision (FSDP's float8
     * all-gather). NULL where fp8_matmul_* are. */
    void (*fp8_dequantize)(titan_dtype dt, void *out, const uint8_t *q, const float *scale, size_t n,
                           titan_fp8_format f);
    /* amax[nscales] = max |x| of x [rows, cols] (dt) along axis, as the
     * casts above compute it (a NaN propagates); amax on the device. A
     * caller reduces it over a group and gives it back through the
     * recipe's amax (tensor parallelism). NULL where fp8_matmul_* are. */
    void (*fp8_amax)(titan_dtype dt, float *amax, const void *x, int rows, int cols, titan_fp8_axis axis);

    /* out[i] = a[i] + b[i]; out may alias a or b */
    void (*add)(titan_dtype dt, void *out, const void *a, const void *b, size_t n);

    /* out[N,C] = wte[tokens[n], :] (wte[V,C]); a token >= V gets a row of
     * zeros: with the vocabulary sharded (tensor parallelism) wte is one
     * rank's rows and the caller maps ids of other ranks' rows to >= V. */
    void (*embedding_forward)(titan_dtype dt, void *out, const uint32_t *tokens, const void *wte,
                              int N, int C, int V);
    /* dwte[tokens[n], :] += dout[n, :]  (dwte[V,C] fp32); tokens >= V add
     * nothing. Without TITAN_ACC_DW all of dwte is written: rows of tokens
     * not in the batch become 0. */
    void (*embedding_backward)(titan_dtype dt, int acc, float *dwte, const void *dout,
                               const uint32_t *tokens, int N, int C, int V);

    /* out = inp * rsqrt(mean(inp^2) + eps) * weight, statistics in fp32;
     * rstd[N] saved for backward. */
    void (*rmsnorm_forward)(titan_dtype dt, void *out, float *rstd, const void *inp,
                            const void *weight, int N, int C, float eps);
    void (*rmsnorm_backward)(titan_dtype dt, int acc, void *dinp, float *dweight,
                             const void *dout, const void *inp, const void *weight,
                             const float *rstd, int N, int C);

    /* Rotary embedding on x[B,T,NHX,HD] with interleaved pairs (x[2i], x[2i+1]) as
     * Meta's reference (complex view). cos/sin are [T, HD/2] tables the
     * caller computed (the model's titan_rope_tables(), lib/model/rope_freqs.h:
     * backends only rotate). out may alias inp. backward rotates by -angle
     * into dinp (which must not alias dout). */
    void (*rope_forward)(titan_dtype dt, void *out, const void *inp, const float *cos,
                         const float *sin, int B, int T, int NHX, int HD);
    void (*rope_backward)(titan_dtype dt, int acc, void *dinp, const void *dout,
                          const float *cos, const float *sin, int B, int T, int NHX, int HD);

    /* Causal grouped-query attention, scale 1/sqrt(HD), without an S x S matrix:
     *   q[B,Tq,NH,HD], k,v[B,Tk,NKV,HD] -> out[B,Tq,NH,HD], 1 <= Tq <= Tk;
     *   lse[B,NH,Tq] = log-sum-exp of each softmax row (fp32), saved for backward.
     * The queries are the last Tq of the Tk positions: query i sits at
     * position Tk - Tq + i and sees keys 0 .. Tk - Tq + i. Tq = Tk is plain
     * causal attention; Tq < Tk a chunk of a longer sequence's queries
     * against every key up to it (context parallelism). Query head h reads
     * kv head h / (NH/NKV). Backward writes (or with TITAN_ACC_DX adds
     * into) dq[B,Tq,NH,HD] and all Tk rows of dk, dv[B,Tk,NKV,HD]. */
    void (*attention_forward)(titan_dtype dt, void *out, float *lse, const void *q, const void *k,
                              const void *v, int B, int Tq, int Tk, int NH, int NKV, int HD);
    void (*attention_backward)(titan_dtype dt, int acc, void *dq, void *dk, void *dv,
                               const void *dout, const void *out, const float *lse,
                               const void *q, const void *k, const void *v, int B, int Tq, int Tk,
                               int NH, int NKV, int HD);

    /* out[N,H] = silu(h1) * h3 */
    void (*swiglu_forward)(titan_dtype dt, void *out, const void *h1, const void *h3, int N, int H);
    void (*swiglu_backward)(titan_dtype dt, int acc, void *dh1, void *dh3, const void *dout,
                            const void *h1, const void *h3, int N, int H);

    /* Fused softmax cross-entropy over logits[N,V] with targets[N], in fp32.
     * lse NULL (targets < V):
     *   losses[n] = logsumexp(logits[n]) - logits[n][targets[n]];
     *   dlogits[n] = (softmax(logits[n]) - onehot(targets[n])) * dscale.
     * lse not NULL: logits[N,V] are one shard of a row's vocabulary (tensor
     * parallelism) and lse[n] (fp32) the log-sum-exp of the whole row, from
     * logsumexp and a sum over the shards; a target >= V is in another shard:
     *   losses[n] = lse[n] - logits[n][targets[n]] if targets[n] < V, else 0;
     *   dlogits[n][j] = (exp(logits[n][j] - lse[n]) - [j == targets[n]]) * dscale.
     * dlogits may alias logits (written after the row is read); NULL skips it. */
    void (*cross_entropy)(titan_dtype dt, float *losses, void *dlogits, const void *logits,
                          const uint32_t *targets, int N, int V, float dscale, const float *lse);
    /* lse[n] = log(sum_j exp(logits[n][j])) over logits[N,V], in fp32 as
     * cross_entropy's (shifted by the row max, the exps summed in a fixed
     * order). With the vocabulary sharded, the shards' lse combine into the
     * whole row's (log of the sum of their exps) for cross_entropy. */
    void (*logsumexp)(titan_dtype dt, float *lse, const void *logits, int N, int V);

    /* Optimizer and reductions: fp32 master weights, gradients and state. */
    /* One AdamW step (PyTorch semantics, decoupled weight decay):
     * p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
     * p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).  t >= 1.
     * p_bf16: NULL, or the bf16 compute copy, written in the same pass as
     * convert() would from the new p (saves the cast's read of p).
     * gscale: the step uses g[i] * gscale (one fp32 rounding, as scale()
     * would leave it): gradient clipping without its pass over g; 1 = g. */
    void (*adamw_step)(float *p, void *p_bf16, const float *g, float gscale, float *m, float *v,
                       size_t n, float lr, float beta1, float beta2, float eps,
                       float weight_decay, int64_t t);
    /* sum of x[i]^2 in double, in a fixed order */
    double (*sumsq)(const float *x, size_t n);
    /* x[i] *= s */
    void (*scale)(float *x, size_t n, float s);

    /* attention_forward and _backward with query 0 at key position off
     * (theirs is Tk - Tq): query i sees keys 0 .. off + i; off >= Tk - 1
     * sees every key, unmasked (a block of keys wholly before the queries:
     * context parallelism's ring). NULL where a backend has none (the ring
     * is then refused). */
    void (*attention_forward_at)(titan_dtype dt, void *out, float *lse, const void *q, const void *k, const void *v,
                                 int B, int Tq, int Tk, int off, int NH, int NKV, int HD);
    void (*attention_backward_at)(titan_dtype dt, int acc, void *dq, void *dk, void *dv, const void *dout,
                                  const void *out, const float *lse, const void *q, const void *k, const void *v,
                                  int B, int Tq, int Tk, int off, int NH, int NKV, int HD);
    /* *out = sumsq(x, n), the same bits, into out (one double of backend
     * memory) without waiting for it: partial sums taken as gradients
     * finish, read back together with one to_host. */
    void (*sumsq_into)(double *out, const float *x, size_t n);

    /* The optimizer's side stream: NULL on backends whose ops run in order
     * on the host (cpu, cpu-guard), set together on a device (cuda).
     * side_stream(1): the side stream first waits for every op queued so
     * far on the main stream, then adamw_step calls (only they) queue on it
     * and run beside the main stream's later ops; side_stream(0): adamw_step
     * is back on the main stream. event_record(ev) marks the point the
     * stream adamw_step uses has reached; event_wait(ev) makes the main
     * stream's later ops, and to_host, wait for that point. sync waits for
     * both streams. An event is recorded again each step (event_create
     * once; event_free). */
    void *(*event_create)(void);
    void (*event_free)(void *ev);
    void (*side_stream)(int on);
    void (*event_record)(void *ev);
    void (*event_wait)(void *ev);

    /* Device memory that the other processes of this host address
     * directly: comm.h's shared windows over device memory (async tensor
     * parallelism with ranks on one host). NULL, all of them together, on
     * backends without it (cpu, cpu-guard: host windows need none of it).
     * ipc_export(p, handle) fills handle (TITAN_IPC_HANDLE_BYTES, to be
     * sent to the peers through host memory) for p, a pointer from alloc
     * (its start); ipc_open(handle) maps a peer's exported buffer and
     * returns its address here (not in the exporting process: a process
     * uses its own pointer); ipc_close unmaps it (before the exporter frees
     * it). Both return -1 / NULL with the error set (titan_error). */
    int (*ipc_export)(void *p, void *handle);
    void *(*ipc_open)(const void *handle);
    void (*ipc_close)(void *p);
    /* dst = src, nbytes, device to device, queued like the ops; either may
     * be memory from ipc_open. Must not overlap. */
    void (*copy)(void *dst, const void *src, size_t nbytes);
    /* out[i] = src[0][i] + ... + src[n-1][i] over m elements of dt (f32 or
     * bf16), added in that order in f32 and rounded once: comm.h's
     * titan_comm_sum_ranks, bit for bit, on device memory (sources may be
     * from ipc_open; out may be one of them). 1 <= n <= TITAN_SUM_RANKS_MAX. */
    void (*sum_ranks)(titan_dtype dt, void *out, const void *const *src, int n, size_t m);
    /* fn(arg) runs on a host thread once the main stream's work queued so
     * far has finished (the side stream's adamw_step is not ordered with
     * it), without the caller waiting: a shared window's flag is posted
     * when the device work that wrote the block is done. fn makes no CUDA
     * call (no backend op), never blocks, and takes no lock the host
     * thread may hold: it runs on the driver's thread, in the stream's
     * order, and a stalled fn stalls the stream. */
    void (*host_call)(void (*fn)(void *arg), void *arg);
    /* GaLore's ops (lib/optim/galore.c, svd.c): fp32 backend memory, on the
     * main stream. NULL where a backend has none (GaLore is refused there). */
    /* The low-rank Adam moments and the normalised update, elementwise:
     * m = m b1 + w1 x; v = v b2 + (w2 x) x; x = m / (sqrt(v) + eps), x =
     * low on entry (the projected gradient) and on exit; w1 = 1 - b1 and
     * w2 = 1 - b2 formed by the caller. Each operation rounded once (no
     * contraction): every backend gives the CPU's bits. */
    void (*galore_adam)(float *m, float *v, float *low, size_t n, float b1, float w1, float b2, float w2,
                        float eps);
    /* p = q + (-decay) q (decay > 0; else p = q) with q = p + (-step) (upd
     * scale): the back-projected update and decoupled weight decay, each
     * operation rounded once. */
    void (*galore_update)(float *p, const float *upd, size_t n, float scale, float step, float decay);
    /* Q of the QR factorisation of the column-major rows x cols a (rows >=
     * cols >= 1), in place: LAPACK's sgeqrf + sorgqr (cpu), cuSOLVER's
     * (cuda). Returns 0, or the library's nonzero info. */
    int (*qr_orthonormal)(float *a, int rows, int cols);
    /* The thin SVD a = U S V^T of the column-major rows x cols a (fp32, not
     * changed; 1 <= k <= min(rows, cols)), computed in double: u (NULL:
     * none) gets U's first k columns, column-major rows x k; vt (NULL:
     * none) V^T's first k rows, column-major k x cols (ld k). LAPACK's
     * dgesdd (cpu), cuSOLVER's dgesvd (cuda): the same vectors to double
     * rounding where the singular values are apart (signs aside). Returns
     * 0, or the library's nonzero info (no convergence). */
    int (*svd_thin)(const float *a, int rows, int cols, int k, float *u, float *vt);
    /* Canonical signs: for each column c < k of u (row-major rows x k) whose
     * first entry of the largest magnitude is negative, column c of u and
     * row c of vt (row-major k x cols; NULL: none) are negated. */
    void (*svd_signs)(float *u, float *vt, int rows, int cols, int k);
    /* Context parallelism's ring: one block's attention (out [B,T,NH,HD]
     * of dt and lse [B,NH,T], from attention_forward_at) merged into the
     * running result of the blocks before it, acc [B,T,NH,HD] and acc_lse
     * [B,NH,T] (fp32, backend memory), by their log-sum-exps (online
     * softmax). Per row, l1 = acc_lse, l2 = lse: m = max(l1, l2); w1 =
     * exp(l1 - m), 0 where l1 = -inf; w2 = exp(l2 - m); s = w1 + w2; acc =
     * fma(w1, acc, w2 out) / s; acc_lse = m + log(s); each operation
     * rounded once in fp32 (no other contraction). first != 0: the first
     * block, acc and acc_lse taken as 0 and -inf without being read. A row
     * whose block lse is -inf (it saw no key) adds nothing: acc and acc_lse
     * stay (0 and -inf for the first block). dt is f32 or bf16. Every
     * backend gives the CPU's bits but for its exp's and log's last bits.
     * NULL where a backend has none (the ring is then refused). */
    void (*attention_merge)(titan_dtype dt, float *acc, float *acc_lse, const void *out, const float *lse, int B,
                            int T, int NH, int HD, int first);
} titan_backend;

/* The bytes of ipc_export's handle (cudaIpcMemHandle_t's size). */
#define TITAN_IPC_HANDLE_BYTES 64
/* sum_ranks' most sources (the shm communicator's most ranks). */
#define TITAN_SUM_RANKS_MAX 64

/* The CPU reference backend (OpenBLAS + OpenMP). */
const titan_backend *titan_backend_cpu(void);

/* "cpu-guard", for tests: the CPU backend's ops on buffers that host code
 * cannot touch (PROT_NONE outside the backend's own ops and copies), and
 * every op checks its pointers are its buffers. Code that trains correctly
 * on it crosses between host and backend memory only through to_device and
 * to_host, as a GPU needs. Slow; serialises its ops. */
const titan_backend *titan_backend_cpu_guard(void);

/* Sets the number of threads the CPU backend (and its BLAS) uses; 0 = all cores. */
void titan_backend_cpu_set_threads(int n);
int titan_backend_cpu_threads(void);

/* fp32 GEMM FLOP/s measured now with the current threads (the CPU peak for MFU). */
double titan_backend_cpu_peak_flops(void);

/* Opens a backend by name: "cpu"; "cuda" or "cuda:N" (GPU N, default 0),
 * loaded at run time from libtitan-cuda.so; "auto": cuda when it opens, else
 * cpu, with one info line saying which. A failure is TITAN_ERR_USAGE with
 * the message "cuda: <cause>"; callers add their context with
 * titan_error_context("training.device"). The CUDA library is looked up in
 * this order, the first that exists wins:
 *   $TITAN_CUDA_LIB                                   (when set, the only place)
 *   <executable's dir>/libtitan-cuda.so               (bin/: `make` copies it there)
 *   <executable's dir>/../lib/titan/libtitan-cuda.so  (PREFIX/lib/titan, build/lib/titan)
 *   "libtitan-cuda.so" on the dynamic linker's search path. */
titan_status titan_backend_open(const char *device, const titan_backend **out);
/* The same without the info line, also accepting "cpu-guard"; desc (len
 * bytes) gets what was opened: the GPU ("GPU 0: NVIDIA H100 80GB HBM3,
 * sm_90, 79.1 GiB"), "" for cpu, or for "auto" without a GPU the reason
 * ("auto: cuda: no GPU (...)"). */
titan_status titan_backend_open_desc(const char *device, const titan_backend **out, char *desc, size_t len);

/* The one symbol libtitan-cuda.so exports, "titan_backend_cuda_create":
 * table_size is sizeof(titan_backend) of the caller (a mismatch is refused);
 * ordinal the GPU. Returns the table, and a description of the GPU in msg;
 * or NULL with the reason in msg. Idempotent for the same ordinal. */
typedef const titan_backend *(*titan_backend_cuda_create_fn)(size_t table_size, int ordinal,
                                                            char *msg, size_t msg_len);

/* Another symbol of libtitan-cuda.so (opened as above, once per process),
 * e.g. the NCCL communicator's table (lib/comm/comm_nccl_api.h); NULL with
 * a TITAN_ERR_USAGE "cuda: ..." error when the library or the symbol is
 * missing. */
void *titan_backend_cuda_symbol(const char *name);

/* The GPUs libtitan-cuda.so sees (CUDA_VISIBLE_DEVICES applied), without
 * opening one; TITAN_ERR_USAGE "cuda: ..." when the library does not open
 * or no GPU is visible. */
titan_status titan_backend_cuda_device_count(int *count);

#endif
