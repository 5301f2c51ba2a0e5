/* emu.h - a host emulator of the CUDA features kernels/attention_tc.cu uses,
 * so that its device code runs on the CPU, in the test suite, on machines
 * without a GPU (tests/emu/test_attention_tc_emu.cpp; the Makefile builds it
 * with $(CXX) wherever it builds libtitan-cuda.so).
 *
 * Why: the tensor-core kernels' logic (tile indexing, the causal mask on
 * ragged tiles, GQA head walks, the online softmax, cp.async double
 * buffering and the barriers that guard it, the bf16 roundings, "adds into"
 * gradients) is easy to get subtly wrong and is otherwise tested only on a
 * GPU. Here every commit runs it.
 *
 * How: a CTA runs as blockDim.x fibers (ucontext) on one OS thread, blocks
 * one after another. A fiber runs until it waits at a barrier (__syncthreads,
 * __syncwarp, or a warp collective: __shfl_xor_sync, mma.sync, ldmatrix);
 * the next fiber is drawn at random among the runnable ones, so a run is one
 * legal interleaving of the threads, a different one per seed, and lanes of
 * a warp are never in lock step (stricter than the hardware; code that needs
 * lock step is wrong on Volta and later anyway). A warp collective exchanges
 * its lanes' registers through per-warp slots at one warp barrier; lanes of
 * a warp in different collectives abort. mma.sync.m16n8k16 (bf16 in, fp32
 * accumulate) assembles A and B from the lanes' fragments by the PTX ISA's
 * tables and multiplies in fp32. ldmatrix.x4 (plain and .trans) takes the
 * row addresses the lanes post and hands each lane its registers by this
 * file's reading of the ISA (emu_ldsm_warp), reading shared memory when the
 * last lane arrives. cp.async copies read the source at issue and land in
 * shared memory at random times between issue and the cp.async.wait_group
 * that covers them. Dynamic shared memory starts filled with 0xff (bf16 NaN)
 * at every block, so a tile read before it was filled poisons the result;
 * cp.async outside the launch's dynamic size, a write past it, a misaligned
 * cp.async, an ldmatrix row misaligned or outside the dynamic size, a
 * barrier that not every thread reaches (deadlock) and copies still in
 * flight at exit abort.
 *
 * Limits: it checks the kernels' logic against THIS FILE's reading of the
 * PTX layouts (mma's fragments and ldmatrix's, below). Were that reading
 * wrong, kernels and emulator could agree and both be wrong: only a GPU
 * confirms the layouts (tests/gpu/attention_tc_check.cu,
 * scripts/gpu-check.sh). Not modelled: the PTX wrappers themselves (the
 * generator drops them), memory ordering beyond barriers, blocks running
 * concurrently, the hardware's order and precision of the mma's inner sum,
 * device exp2f/logf (host libm here), register and shared memory limits
 * other than SMEM_MAX, bank conflicts, speed.
 *
 * One translation unit only: it defines the globals the device code names
 * (tc_smem, blockIdx, gridDim, blockDim). */
#ifndef TITAN_TESTS_EMU_EMU_H
#define TITAN_TESTS_EMU_EMU_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <deque>
#include <functional>
#include <random>
#include <vector>

#include <cuda_bf16.h>
#include <vector_functions.h>
#include <vector_types.h>

/* Under a host compiler the CUDA headers define __device__, __global__ and
 * __shared__ as nothing and __forceinline__ as always_inline; this one is
 * left to us. */
#define __launch_bounds__(x)

/* ------------------------- what attention_tc.cu takes from cuda_ops.cuh */
/* (copies kept in step by hand: the emulator does not include the backend's
 * header, whose other device helpers it does not emulate) */

typedef __nv_bfloat16 bf16;
#define WARP 32
#define FULL_MASK 0xffffffffu

static inline unsigned titan_cuda_blocks(size_t n, int threads) {
    size_t b = (n + (size_t)threads - 1) / (size_t)threads;
    return (unsigned)(b < 65536 ? b : 65536);
}

/* ------------------------------------------------------------- the CTA */

/* sm_80's opt-in limit of dynamic shared memory per block (sm_90: 227 KiB) */
#define SMEM_MAX (163 * 1024)
/* the kernels' `extern __shared__ unsigned char tc_smem[]`; the tail past the
 * launch's size stays 0xff and is checked at the end of each block */
alignas(16) unsigned char tc_smem[SMEM_MAX + 4096];
static uint3 blockIdx;
static dim3 gridDim, blockDim;

namespace emu {
enum { MAX_THREADS = 256, MAX_WARPS = MAX_THREADS / WARP, STACK_BYTES = 128 * 1024 };

struct Fiber {
    ucontext_t ctx;
    char *stack;
    bool done;
};

/* one collective's registers, per lane: in[0..3] a, in[4..5] b (mma) or
 * in[0] the value (shfl); out the mma's c; addr and frag ldmatrix's row
 * address and registers; op which collective the lane is in (all lanes must
 * be in the same one). Two sets per warp, by the parity of the warp
 * barrier's generation: a lane can start the next collective while others
 * still read this one's set, never the one after (it waits for them at the
 * next barrier). */
enum Op { OP_SHFL = 1, OP_MMA, OP_LDSM };
struct Slots {
    uint32_t in[WARP][6];
    float out[WARP][4];
    const unsigned char *addr[WARP];
    uint32_t frag[WARP][4];
    int op[WARP]; /* Op, plus 16 * matrices + 8 * trans for ldmatrix */
};

struct Copy { /* one cp.async, its source read at issue */
    void *dst;
    unsigned char data[16];
};

static Fiber fib[MAX_THREADS];
static ucontext_t sched_ctx;
static int cur, nthreads, nfinished;
static std::vector<int> ready; /* runnable fibers, drawn at random */
static unsigned warp_arrived[MAX_WARPS], warp_gen[MAX_WARPS], block_arrived;
static Slots slots[MAX_WARPS][2];
static std::function<void()> body;
static size_t smem_bytes;
static std::vector<Copy> open_copies[MAX_THREADS];        /* issued, not committed */
static std::deque<std::vector<Copy>> groups[MAX_THREADS]; /* committed, oldest first */
static std::mt19937 rng(1);
static long n_mma, n_switch; /* warp-level mma.sync, fiber switches */

[[noreturn]] static void fail(const char *what) {
    fprintf(stderr, "emu: block (%u, %u, %u) thread %d: %s\n", blockIdx.x, blockIdx.y, blockIdx.z,
            cur, what);
    abort();
}

static void fiber_main() {
    body();
    fib[cur].done = true;
    nfinished++;
    swapcontext(&fib[cur].ctx, &sched_ctx);
}

static void wait_here() {
    n_switch++;
    swapcontext(&fib[cur].ctx, &sched_ctx);
}

/* All 32 lanes of the caller's warp meet here. The last to arrive runs
 * `last(w)` (with every lane's inputs in place), makes the others runnable
 * and goes on without a switch. */
static void warp_barrier(void (*last)(int w) = nullptr) {
    const int w = cur / WARP;
    if (++warp_arrived[w] < WARP) {
        wait_here();
        return;
    }
    if (last) last(w);
    warp_arrived[w] = 0;
    warp_gen[w]++;
    for (int i = w * WARP; i < (w + 1) * WARP; i++)
        if (i != cur) ready.push_back(i);
}

/* in a warp collective's last(w): every lane of warp w posted the same op */
static void same_op(int w) {
    const Slots &s = slots[w][warp_gen[w] & 1];
    for (int l = 1; l < WARP; l++)
        if (s.op[l] != s.op[0]) fail("lanes of a warp in different warp collectives");
}

/* all threads of the block meet here */
static void block_barrier() {
    if (++block_arrived < (unsigned)nthreads) {
        wait_here();
        return;
    }
    block_arrived = 0;
    for (int i = 0; i < nthreads; i++)
        if (i != cur) ready.push_back(i);
}

/* lands the oldest pending copy of thread j, if any */
static void land_one(int j) {
    std::vector<Copy> *q = !groups[j].empty() ? &groups[j].front() : &open_copies[j];
    if (!q->empty()) {
        memcpy(q->front().dst, q->front().data, 16);
        q->erase(q->begin());
    }
    if (!groups[j].empty() && groups[j].front().empty()) groups[j].pop_front();
}

/* runs one block of nt threads with smem bytes of dynamic shared memory */
static void run_block(int nt, size_t smem, const std::function<void()> &fn) {
    if (nt <= 0 || nt > MAX_THREADS || nt % WARP) fail("block size not a multiple of 32 up to 256");
    if (smem > SMEM_MAX) fail("dynamic shared memory over the per-block limit");
    nthreads = nt;
    smem_bytes = smem;
    memset(tc_smem, 0xff, sizeof tc_smem);
    body = fn;
    for (int w = 0; w < MAX_WARPS; w++) warp_arrived[w] = warp_gen[w] = 0;
    block_arrived = 0;
    nfinished = 0;
    ready.clear();
    for (int i = 0; i < nt; i++) {
        if (!fib[i].stack && !(fib[i].stack = (char *)malloc(STACK_BYTES))) fail("out of memory");
        getcontext(&fib[i].ctx);
        fib[i].ctx.uc_stack.ss_sp = fib[i].stack;
        fib[i].ctx.uc_stack.ss_size = STACK_BYTES;
        fib[i].ctx.uc_link = nullptr;
        makecontext(&fib[i].ctx, fiber_main, 0);
        fib[i].done = false;
        open_copies[i].clear();
        groups[i].clear();
        ready.push_back(i);
    }
    while (nfinished < nt) {
        if (ready.empty()) fail("deadlock: a barrier or warp collective not every thread reaches");
        /* copies land at random times between issue and wait_group */
        land_one((int)(rng() % (unsigned)nt));
        land_one((int)(rng() % (unsigned)nt));
        const size_t k = rng() % ready.size();
        cur = ready[k];
        ready[k] = ready.back();
        ready.pop_back();
        swapcontext(&sched_ctx, &fib[cur].ctx);
    }
    for (int i = 0; i < nt; i++)
        if (!open_copies[i].empty() || !groups[i].empty()) {
            cur = i;
            fail("exited with cp.async in flight");
        }
    for (size_t i = smem; i < sizeof tc_smem; i++)
        if (tc_smem[i] != 0xff) fail("wrote past the dynamic shared memory");
}
} /* namespace emu */

static inline uint3 emu_thread_idx() { return make_uint3((unsigned)emu::cur, 0u, 0u); }
#define threadIdx emu_thread_idx()

/* the launch: every block of grid in turn, the kernel call in fn */
static void emu_launch(dim3 grid, unsigned threads, size_t smem, const std::function<void()> &fn) {
    gridDim = grid;
    blockDim = dim3(threads);
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx = make_uint3(x, y, z);
                emu::run_block((int)threads, smem, fn);
            }
}

/* ----------------------------------------------------- device intrinsics */

static inline void __syncthreads() { emu::block_barrier(); }
static inline void __syncwarp() { emu::warp_barrier(); }

static inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
    if (mask != FULL_MASK) emu::fail("__shfl_xor_sync with a partial mask");
    const int w = emu::cur / WARP, l = emu::cur % WARP;
    emu::Slots &s = emu::slots[w][emu::warp_gen[w] & 1];
    memcpy(&s.in[l][0], &v, 4);
    s.op[l] = emu::OP_SHFL;
    emu::warp_barrier(emu::same_op);
    float r;
    memcpy(&r, &s.in[l ^ lane_mask][0], 4);
    return r;
}

/* cuda_ops.cuh's, on the emulated shuffle */
static inline float warp_sum(float v) {
    for (int o = WARP / 2; o > 0; o /= 2) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

/* ------------------------------------ the PTX wrappers of attention_tc.cu */

static inline float emu_bf16_lo(uint32_t u) {
    const uint32_t x = (u & 0xffffu) << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
static inline float emu_bf16_hi(uint32_t u) {
    const uint32_t x = u & 0xffff0000u;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 for warp w, run by the
 * last lane to arrive. Fragments per the PTX ISA ("Matrix Fragments for
 * mma.m16n8k16 with floating point type"), lane = 4 g + t, the lower-indexed
 * element of each pair in the low 16 bits:
 *   A 16x16: a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1],
 *            a2 = A[g][2t+8, 2t+9], a3 = A[g+8][2t+8, 2t+9]
 *   B 16x8:  b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g]
 *   C 16x8:  c0, c1 = C[g][2t, 2t+1], c2, c3 = C[g+8][2t, 2t+1]
 * (Products of bf16 are exact in fp32; the sum runs k = 0..15 in fp32.) */
static void emu_mma_warp(int w) {
    emu::same_op(w);
    emu::Slots &s = emu::slots[w][emu::warp_gen[w] & 1];
    float A[16][16], B[16][8];
    for (int L = 0; L < WARP; L++) {
        const int g = L >> 2, t = L & 3;
        const uint32_t *r = s.in[L];
        A[g][2 * t] = emu_bf16_lo(r[0]);
        A[g][2 * t + 1] = emu_bf16_hi(r[0]);
        A[g + 8][2 * t] = emu_bf16_lo(r[1]);
        A[g + 8][2 * t + 1] = emu_bf16_hi(r[1]);
        A[g][2 * t + 8] = emu_bf16_lo(r[2]);
        A[g][2 * t + 9] = emu_bf16_hi(r[2]);
        A[g + 8][2 * t + 8] = emu_bf16_lo(r[3]);
        A[g + 8][2 * t + 9] = emu_bf16_hi(r[3]);
        B[2 * t][g] = emu_bf16_lo(r[4]);
        B[2 * t + 1][g] = emu_bf16_hi(r[4]);
        B[2 * t + 8][g] = emu_bf16_lo(r[5]);
        B[2 * t + 9][g] = emu_bf16_hi(r[5]);
    }
    for (int L = 0; L < WARP; L++) {
        const int g = L >> 2, t = L & 3;
        const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
        for (int i = 0; i < 4; i++) {
            float sum = 0.0f;
            for (int k = 0; k < 16; k++) sum += A[rows[i]][k] * B[k][cols[i]];
            s.out[L][i] += sum;
        }
    }
    emu::n_mma++;
}

static inline void tc_mma_16816(float c[4], const uint32_t a[4], const uint32_t b[2]) {
    const int w = emu::cur / WARP, l = emu::cur % WARP;
    emu::Slots &s = emu::slots[w][emu::warp_gen[w] & 1];
    memcpy(s.in[l], a, 16);
    s.in[l][4] = b[0];
    s.in[l][5] = b[1];
    memcpy(s.out[l], c, 16);
    s.op[l] = emu::OP_MMA;
    emu::warp_barrier(emu_mma_warp);
    memcpy(c, s.out[l], 16);
}

/* ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16 for warp w (N = 1, 2,
 * 4; the kernels use x4), run by the last lane to arrive; reads shared
 * memory as it is at that moment. The PTX ISA's text ("Warp-level matrix
 * load instruction: ldmatrix"), read as: lanes 8i..8i+7 give the start
 * addresses of rows 0..7 of matrix i (lanes from 8N on are unused, their
 * addresses ignored here); each row is 16 bytes (8 b16), naturally aligned;
 * four consecutive lanes receive one row, lane 0 the first pair, matrix i
 * into register i. So register i of lane l = 4 g + t holds matrix i's row g,
 * elements 2t, 2t+1. .trans loads the matrix column-major: the 8 addresses
 * are its columns, and lane l gets element g of the rows given by lanes
 * 8i + 2t and 8i + 2t + 1. Lower-indexed element in the low 16 bits, as in
 * mma's fragments. (The ISA draws the per-lane layout in a figure, an image:
 * this reading is from the text, and is the one under which an x4 fills
 * mma's A fragment from its four 8x8 quarters; test_attention_tc_emu checks
 * the kernels' loads against mma's tables.) */
template <int N, bool TRANS>
static void emu_ldsm_warp(int w) {
    emu::same_op(w);
    emu::Slots &s = emu::slots[w][emu::warp_gen[w] & 1];
    for (int L = 0; L < WARP; L++) {
        const int g = L >> 2, t = L & 3;
        for (int i = 0; i < N; i++) {
            uint16_t lo, hi;
            if (!TRANS) {
                memcpy(&lo, s.addr[8 * i + g] + 4 * t, 2);
                memcpy(&hi, s.addr[8 * i + g] + 4 * t + 2, 2);
            } else {
                memcpy(&lo, s.addr[8 * i + 2 * t] + 2 * g, 2);
                memcpy(&hi, s.addr[8 * i + 2 * t + 1] + 2 * g, 2);
            }
            s.frag[L][i] = (uint32_t)lo | (uint32_t)hi << 16;
        }
    }
}

template <int N, bool TRANS>
static inline void emu_ldsm(uint32_t *r, const bf16 *row) {
    const int w = emu::cur / WARP, l = emu::cur % WARP;
    emu::Slots &s = emu::slots[w][emu::warp_gen[w] & 1];
    const unsigned char *p = (const unsigned char *)row;
    if (l < 8 * N) { /* a lane whose address is used */
        if ((uintptr_t)p & 15) emu::fail("ldmatrix row address not 16-byte aligned");
        if (p < tc_smem || p + 16 > tc_smem + emu::smem_bytes)
            emu::fail("ldmatrix row outside the dynamic shared memory");
    }
    s.addr[l] = l < 8 * N ? p : nullptr;
    s.op[l] = emu::OP_LDSM + 16 * N + 8 * TRANS;
    emu::warp_barrier(emu_ldsm_warp<N, TRANS>);
    memcpy(r, s.frag[l], 4 * N);
}

static inline void tc_ldsm_x4(uint32_t r[4], const bf16 *row) { emu_ldsm<4, false>(r, row); }
static inline void tc_ldsm_x4_trans(uint32_t r[4], const bf16 *row) { emu_ldsm<4, true>(r, row); }

/* cp.async.cg.shared.global, 16 bytes */
static inline void tc_cp_async16(void *smem, const void *gmem) {
    if (((uintptr_t)smem & 15) || ((uintptr_t)gmem & 15)) emu::fail("cp.async misaligned");
    const unsigned char *d = (const unsigned char *)smem;
    if (d < tc_smem || d + 16 > tc_smem + emu::smem_bytes)
        emu::fail("cp.async outside the dynamic shared memory");
    emu::Copy c;
    c.dst = smem;
    memcpy(c.data, gmem, 16);
    emu::open_copies[emu::cur].push_back(c);
}

/* cp.async.commit_group */
static inline void tc_cp_async_commit(void) {
    emu::groups[emu::cur].push_back(std::move(emu::open_copies[emu::cur]));
    emu::open_copies[emu::cur].clear();
}

/* cp.async.wait_group N: lands all but the newest N committed groups */
template <int N>
static inline void tc_cp_async_wait(void) {
    auto &q = emu::groups[emu::cur];
    while (q.size() > (size_t)N) {
        for (auto &c : q.front()) memcpy(c.dst, c.data, 16);
        q.pop_front();
    }
}

#endif
