/* emu_core.h - a host emulator of the CUDA execution model: the CTA as
 * fibers, barriers, warp collectives (shuffles, mma.sync, ldmatrix) and
 * cp.async, so that device code runs on the CPU, in the test suite, on
 * machines without a GPU. tests/emu/cuda_emu.h puts a host CUDA runtime,
 * cuBLASLt, CUB and NCCL under it: the whole CUDA backend as
 * build/emu/libtitan-cuda-emu.so (test_cuda_ops, titan-train --device cuda
 * through TITAN_CUDA_LIB), and test_attention_tc_emu.
 *
 * Why: kernel logic (indexing, ragged tails, barriers that guard shared
 * memory, warp collectives, "adds into" outputs, bf16 roundings) is easy to
 * get subtly wrong and is otherwise tested only on a GPU.
 *
 * How: a CTA runs as blockDim threads' fibers (ucontext) on one OS thread,
 * blocks one after another. A fiber runs until it waits at a barrier
 * (__syncthreads, __syncwarp, or a warp collective: shuffles, mma.sync,
 * ldmatrix); the next fiber is drawn at random among the runnable ones, so a
 * run is one legal interleaving of the threads, a different one per seed,
 * and lanes of a warp are never in lock step (stricter than the hardware;
 * code that needs lock step is wrong on Volta and later anyway). A barrier
 * counts every thread of the block (or lane of the warp): a thread that
 * returned before a barrier the others reach is reported as a deadlock
 * (undefined behaviour in CUDA). A warp collective exchanges its lanes'
 * registers through per-warp slots at one warp barrier; lanes of a warp in
 * different collectives abort. mma.sync.m16n8k16 (bf16 in, fp32 accumulate)
 * assembles A and B from the lanes' fragments by the PTX ISA's tables and
 * multiplies in fp32. ldmatrix.x4 (plain and .trans) takes the row addresses
 * the lanes post and hands each lane its registers by this file's reading of
 * the ISA (emu_ldsm_warp), reading shared memory when the last lane arrives.
 * cp.async copies read the source at issue and land in shared memory at
 * random times between issue and the cp.async.wait_group that covers them.
 * Dynamic shared memory (emu_smem) starts filled with 0xff (bf16 and fp32
 * NaN) at every block, so a tile read before it was filled poisons the
 * result; cp.async outside the launch's dynamic size, a write past it, a
 * misaligned cp.async, an ldmatrix row misaligned or outside the dynamic
 * size, a barrier that not every thread reaches (deadlock) and copies still
 * in flight at exit abort. Static __shared__ arrays become function-static
 * variables (`#define __shared__ static` in cuda_emu.h): shared by the
 * block's fibers, and blocks run one after another, which is their CUDA
 * meaning; gen_kernels.awk has each block's first thread to reach one fill
 * it with 0xff too (emu_poison_static).
 *
 * Limits: it checks the kernels' logic against THIS FILE's reading of the
 * PTX layouts (mma's fragments and ldmatrix's, below). Were that reading
 * wrong, kernels and emulator could agree and both be wrong: only a GPU
 * confirms the layouts (tests/gpu/attention_tc_check.cu,
 * scripts/gpu-check.sh). Not modelled: memory ordering beyond barriers,
 * blocks running concurrently, the hardware's order and precision of the
 * mma's inner sum, device math functions (host libm here) and fma
 * contraction, register limits, bank conflicts, speed.
 *
 * Header only (C++17 inline variables): any number of translation units of
 * one program or library share one emulator. One launch at a time: callers
 * on several threads serialise (cuda_emu.cpp's lock). */
#ifndef TITAN_TESTS_EMU_EMU_CORE_H
#define TITAN_TESTS_EMU_EMU_CORE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <deque>
#include <functional>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <cuda_bf16.h>
#include <vector_functions.h>
#include <vector_types.h>

/* Under a host compiler the CUDA headers define __device__, __global__ and
 * __shared__ as nothing and __forceinline__ as always_inline; this one is
 * left to us. */
#define __launch_bounds__(...)

/* sm_90's opt-in limit of dynamic shared memory per block (227 KiB) */
#define EMU_SMEM_MAX (227 * 1024)
/* the kernels' dynamic shared memory (their `extern __shared__` arrays are
 * rewritten to point here); a page past the launch's size stays 0xff and is
 * checked at the end of each block */
alignas(16) inline unsigned char emu_smem[EMU_SMEM_MAX + 4096];
inline uint3 blockIdx;
inline dim3 gridDim, blockDim;

namespace emu {
enum { WARP_SIZE = 32, MAX_THREADS = 1024, MAX_WARPS = MAX_THREADS / WARP_SIZE };
enum { STACK_BYTES = 128 * 1024 };
constexpr unsigned FULL = 0xffffffffu;

/* A fiber switch. glibc's swapcontext saves and restores the signal mask
 * with a system call at every switch, which made it most of the emulator's
 * time; on x86-64 a switch is instead the System V ABI's callee-saved
 * registers, the SSE and x87 control words and the stack pointer (all a
 * function call must preserve), elsewhere ucontext. */
#if defined(__x86_64__)
#define EMU_FAST_SWITCH 1
/* saves the caller's registers on its stack, *from = its stack pointer, and
 * resumes the fiber whose stack pointer is to */
extern "C" void emu_ctx_switch(void **from, void *to);
asm(".pushsection .text\n"
    ".globl emu_ctx_switch\n"
    ".hidden emu_ctx_switch\n"
    ".weak emu_ctx_switch\n" /* one copy across translation units */
    ".type emu_ctx_switch, @function\n"
    "emu_ctx_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size emu_ctx_switch, .-emu_ctx_switch\n"
    ".popsection\n");
struct Context {
    void *sp;
};
#else
#define EMU_FAST_SWITCH 0
struct Context {
    ucontext_t uc;
};
#endif

struct Fiber {
    Context ctx;
    char *stack;
    bool done;
};

/* one collective's registers, per lane: in[0..3] a, in[4..5] b (mma) or
 * in[0..1] the value (shuffles, up to 8 bytes); out the mma's c; addr and
 * frag ldmatrix's row address and registers; op which collective the lane is
 * in (all lanes must be in the same one). Two sets per warp, by the parity of
 * the warp barrier's generation: a lane can start the next collective while
 * others still read this one's set, never the one after (it waits for them
 * at the next barrier). */
enum Op { OP_SHFL = 1, OP_MMA, OP_LDSM, OP_SYNC };
struct Slots {
    uint32_t in[WARP_SIZE][6];
    float out[WARP_SIZE][4];
    const unsigned char *addr[WARP_SIZE];
    uint32_t frag[WARP_SIZE][4];
    int op[WARP_SIZE]; /* Op, plus 16 * matrices + 8 * trans for ldmatrix */
};

struct Copy { /* one cp.async, its source read at issue */
    void *dst;
    unsigned char data[16];
};

inline Fiber fib[MAX_THREADS];
inline Context sched_ctx;
inline int cur, nthreads, nfinished;
inline std::vector<int> ready; /* runnable fibers, drawn at random */
inline unsigned warp_arrived[MAX_WARPS], warp_gen[MAX_WARPS], block_arrived;
inline Slots slots[MAX_WARPS][2];
inline std::function<void()> body;
inline size_t smem_bytes;
inline std::vector<Copy> open_copies[MAX_THREADS];        /* issued, not committed */
inline std::deque<std::vector<Copy>> groups[MAX_THREADS]; /* committed, oldest first */
/* the scheduler's draws (xorshift64: the draws were a sixth of the time
 * under std::mt19937) */
struct Rng {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    void seed(uint64_t x) { s = (x + 1) * 0x9E3779B97F4A7C15ull; }
    uint32_t operator()() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return (uint32_t)(s >> 32);
    }
};
inline Rng rng;
inline long n_pending; /* cp.async copies issued and not yet landed */
inline unsigned long block_serial = 1; /* of the block running; bumped per block */
inline std::unordered_map<const void *, unsigned long> poisoned; /* static __shared__: block */
inline bool in_kernel;                 /* a launch is running (for fault messages) */
inline long n_mma, n_switch; /* warp-level mma.sync, fiber switches */

[[noreturn]] inline void fail(const char *what) {
    fprintf(stderr, "emu: block (%u, %u, %u) thread %d: %s\n", blockIdx.x, blockIdx.y, blockIdx.z,
            cur, what);
    abort();
}

/* lanes in warp w: 32, fewer in the last warp of a block of 32k + r threads */
inline int warp_lanes(int w) {
    const int n = nthreads - w * WARP_SIZE;
    return n < WARP_SIZE ? n : WARP_SIZE;
}

inline void switch_to(Context &from, Context &to) {
#if EMU_FAST_SWITCH
    emu_ctx_switch(&from.sp, to.sp);
#else
    swapcontext(&from.uc, &to.uc);
#endif
}

inline void fiber_main() {
    body();
    fib[cur].done = true;
    nfinished++;
    switch_to(fib[cur].ctx, sched_ctx);
    abort(); /* a finished fiber is never resumed */
}

/* fiber i, set to start fiber_main on its own stack */
inline void fiber_init(int i) {
    if (!fib[i].stack && !(fib[i].stack = (char *)malloc(STACK_BYTES))) fail("out of memory");
#if EMU_FAST_SWITCH
    /* the frame emu_ctx_switch pops: control words, six registers, and
     * fiber_main as the return address, which it enters with the stack
     * aligned as after a call */
    uintptr_t top = ((uintptr_t)fib[i].stack + STACK_BYTES) & ~(uintptr_t)15;
    uint64_t *f = (uint64_t *)(top - 16);
    f[1] = 0; /* where fiber_main's caller would be: the end of a backtrace */
    f[0] = (uint64_t)(uintptr_t)fiber_main;
    for (int r = 1; r <= 6; r++) f[-r] = 0;
    uint32_t csr[2];
    asm volatile("stmxcsr %0\n fnstcw %1" : "=m"(csr[0]), "=m"(csr[1]));
    memcpy(&f[-7], csr, 8);
    fib[i].ctx.sp = &f[-7];
#else
    getcontext(&fib[i].ctx.uc);
    fib[i].ctx.uc.uc_stack.ss_sp = fib[i].stack;
    fib[i].ctx.uc.uc_stack.ss_size = STACK_BYTES;
    fib[i].ctx.uc.uc_link = nullptr;
    makecontext(&fib[i].ctx.uc, fiber_main, 0);
#endif
}

inline void wait_here() {
    n_switch++;
    switch_to(fib[cur].ctx, sched_ctx);
}

/* All lanes of the caller's warp meet here. The last to arrive runs
 * `last(w)` (with every lane's inputs in place), makes the others runnable
 * and goes on without a switch. */
inline void warp_barrier(void (*last)(int w) = nullptr) {
    const int w = cur / WARP_SIZE;
    if (++warp_arrived[w] < (unsigned)warp_lanes(w)) {
        wait_here();
        return;
    }
    if (last) last(w);
    warp_arrived[w] = 0;
    warp_gen[w]++;
    for (int i = w * WARP_SIZE; i < w * WARP_SIZE + warp_lanes(w); i++)
        if (i != cur) ready.push_back(i);
}

/* in a warp collective's last(w): every lane of warp w posted the same op */
inline void same_op(int w) {
    const Slots &s = slots[w][warp_gen[w] & 1];
    for (int l = 1; l < warp_lanes(w); l++)
        if (s.op[l] != s.op[0]) fail("lanes of a warp in different warp collectives");
}

/* all threads of the block meet here */
inline void block_barrier() {
    if (++block_arrived < (unsigned)nthreads) {
        wait_here();
        return;
    }
    block_arrived = 0;
    for (int i = 0; i < nthreads; i++)
        if (i != cur) ready.push_back(i);
}

/* lands the oldest pending copy of thread j, if any */
inline void land_one(int j) {
    std::vector<Copy> *q = !groups[j].empty() ? &groups[j].front() : &open_copies[j];
    if (!q->empty()) {
        memcpy(q->front().dst, q->front().data, 16);
        q->erase(q->begin());
        n_pending--;
    }
    if (!groups[j].empty() && groups[j].front().empty()) groups[j].pop_front();
}

/* runs one block of nt threads with smem bytes of dynamic shared memory */
inline void run_block(int nt, size_t smem, const std::function<void()> &fn) {
    if (nt <= 0 || nt > MAX_THREADS) fail("block size not 1 to 1024 threads");
    if (smem > EMU_SMEM_MAX) fail("dynamic shared memory over the per-block limit");
    nthreads = nt;
    smem_bytes = smem;
    block_serial++; /* static __shared__ arrays: NaN again at first use */
    /* the dynamic size and a page past it: poisoned, and the tail checked */
    const size_t watched = smem + 4096;
    memset(emu_smem, 0xff, watched);
    body = fn;
    for (int w = 0; w < MAX_WARPS; w++) warp_arrived[w] = warp_gen[w] = 0;
    block_arrived = 0;
    nfinished = 0;
    ready.clear();
    for (int i = 0; i < nt; i++) {
        fiber_init(i);
        fib[i].done = false;
        ready.push_back(i);
    }
    while (nfinished < nt) {
        if (ready.empty()) fail("deadlock: a barrier or warp collective not every thread reaches");
        /* copies land at random times between issue and wait_group */
        if (n_pending) {
            land_one((int)(rng() % (unsigned)nt));
            land_one((int)(rng() % (unsigned)nt));
        }
        const size_t k = (size_t)(((uint64_t)rng() * ready.size()) >> 32); /* no division */
        cur = ready[k];
        ready[k] = ready.back();
        ready.pop_back();
        switch_to(sched_ctx, fib[cur].ctx);
    }
    if (n_pending)
        for (int i = 0; i < nt; i++)
            if (!open_copies[i].empty() || !groups[i].empty()) {
                cur = i;
                fail("exited with cp.async in flight");
            }
    for (size_t i = smem; i < watched; i++)
        if (emu_smem[i] != 0xff) fail("wrote past the dynamic shared memory");
}
} /* namespace emu */

/* the fiber's thread index within the block (x fastest, as CUDA's) */
inline uint3 emu_thread_idx() {
    const unsigned t = (unsigned)emu::cur;
    return make_uint3(t % blockDim.x, t / blockDim.x % blockDim.y, t / (blockDim.x * blockDim.y));
}
#define threadIdx emu_thread_idx()

/* the launch: every block of grid in turn, the kernel call in fn */
inline void emu_launch(dim3 grid, dim3 block, size_t smem, const std::function<void()> &fn) {
    gridDim = grid;
    blockDim = block;
    const int nt = (int)(block.x * block.y * block.z);
    emu::in_kernel = true;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx = make_uint3(x, y, z);
                emu::run_block(nt, smem, fn);
            }
    emu::in_kernel = false;
}

/* a static __shared__ array (gen_kernels.awk adds the call after each
 * declaration): the first thread of a block to reach it fills it with 0xff
 * (NaN), so a read before a write shows, as for dynamic shared memory.
 * Fibers switch only at barriers, so no thread has written it before. */
inline void emu_poison_static(void *p, size_t n) {
    unsigned long &at = emu::poisoned[p];
    if (at != emu::block_serial) {
        memset(p, 0xff, n);
        at = emu::block_serial;
    }
}

/* ----------------------------------------------------- device intrinsics */

inline void __syncthreads() { emu::block_barrier(); }

/* bit casts */
inline unsigned __float_as_uint(float x) { unsigned u; memcpy(&u, &x, 4); return u; }
inline float __uint_as_float(unsigned u) { float x; memcpy(&x, &u, 4); return x; }
inline float __int_as_float(int i) { float x; memcpy(&x, &i, 4); return x; }
inline void __syncwarp(unsigned mask = emu::FULL) {
    if (mask != emu::FULL) emu::fail("__syncwarp with a partial mask");
    const int w = emu::cur / emu::WARP_SIZE, l = emu::cur % emu::WARP_SIZE;
    emu::slots[w][emu::warp_gen[w] & 1].op[l] = emu::OP_SYNC;
    emu::warp_barrier(emu::same_op); /* every lane at a __syncwarp, none in a shuffle */
}

/* a shuffle: every lane posts v; lane l gets the value of lane src(l) */
template <typename T, typename Src>
inline T emu_shfl(unsigned mask, T v, Src src) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "a 4- or 8-byte value");
    if (mask != emu::FULL) emu::fail("shuffle with a partial mask");
    const int w = emu::cur / emu::WARP_SIZE, l = emu::cur % emu::WARP_SIZE;
    emu::Slots &s = emu::slots[w][emu::warp_gen[w] & 1];
    memcpy(&s.in[l][0], &v, sizeof v);
    s.op[l] = emu::OP_SHFL + 16 * (int)sizeof(T);
    emu::warp_barrier(emu::same_op);
    const int from = src(l);
    if (from < 0 || from >= emu::warp_lanes(w)) emu::fail("shuffle from a lane outside the warp");
    T r;
    memcpy(&r, &s.in[from][0], sizeof r);
    return r;
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    if (width != 32) emu::fail("__shfl_xor_sync with a width other than 32");
    return emu_shfl(mask, v, [=](int l) { return l ^ lane_mask; });
}
template <typename T>
inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
    if (width != 32) emu::fail("__shfl_sync with a width other than 32");
    return emu_shfl(mask, v, [=](int) { return src_lane & 31; });
}

/* ------------------------------------ the PTX wrappers of attention_tc.cu */

inline float emu_bf16_lo(uint32_t u) {
    const uint32_t x = (u & 0xffffu) << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
inline float emu_bf16_hi(uint32_t u) {
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
inline void emu_mma_warp(int w) {
    emu::same_op(w);
    if (emu::warp_lanes(w) != emu::WARP_SIZE) emu::fail("mma.sync in a partial warp");
    emu::Slots &s = emu::slots[w][emu::warp_gen[w] & 1];
    float A[16][16], B[16][8];
    for (int L = 0; L < emu::WARP_SIZE; L++) {
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
    for (int L = 0; L < emu::WARP_SIZE; L++) {
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

inline void tc_mma_16816(float c[4], const uint32_t a[4], const uint32_t b[2]) {
    const int w = emu::cur / emu::WARP_SIZE, l = emu::cur % emu::WARP_SIZE;
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
inline void emu_ldsm_warp(int w) {
    emu::same_op(w);
    if (emu::warp_lanes(w) != emu::WARP_SIZE) emu::fail("ldmatrix in a partial warp");
    emu::Slots &s = emu::slots[w][emu::warp_gen[w] & 1];
    for (int L = 0; L < emu::WARP_SIZE; L++) {
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
inline void emu_ldsm(uint32_t *r, const void *row) {
    const int w = emu::cur / emu::WARP_SIZE, l = emu::cur % emu::WARP_SIZE;
    emu::Slots &s = emu::slots[w][emu::warp_gen[w] & 1];
    const unsigned char *p = (const unsigned char *)row;
    if (l < 8 * N) { /* a lane whose address is used */
        if ((uintptr_t)p & 15) emu::fail("ldmatrix row address not 16-byte aligned");
        if (p < emu_smem || p + 16 > emu_smem + emu::smem_bytes)
            emu::fail("ldmatrix row outside the dynamic shared memory");
    }
    s.addr[l] = l < 8 * N ? p : nullptr;
    s.op[l] = emu::OP_LDSM + 16 * N + 8 * TRANS;
    emu::warp_barrier(emu_ldsm_warp<N, TRANS>);
    memcpy(r, s.frag[l], 4 * N);
}

inline void tc_ldsm_x4(uint32_t r[4], const __nv_bfloat16 *row) { emu_ldsm<4, false>(r, row); }
inline void tc_ldsm_x4_trans(uint32_t r[4], const __nv_bfloat16 *row) {
    emu_ldsm<4, true>(r, row);
}

/* cp.async.cg.shared.global, 16 bytes */
inline void tc_cp_async16(void *smem, const void *gmem) {
    if (((uintptr_t)smem & 15) || ((uintptr_t)gmem & 15)) emu::fail("cp.async misaligned");
    const unsigned char *d = (const unsigned char *)smem;
    if (d < emu_smem || d + 16 > emu_smem + emu::smem_bytes)
        emu::fail("cp.async outside the dynamic shared memory");
    emu::Copy c;
    c.dst = smem;
    memcpy(c.data, gmem, 16);
    emu::open_copies[emu::cur].push_back(c);
    emu::n_pending++;
}

/* cp.async.commit_group */
inline void tc_cp_async_commit(void) {
    emu::groups[emu::cur].push_back(std::move(emu::open_copies[emu::cur]));
    emu::open_copies[emu::cur].clear();
}

/* cp.async.wait_group N: lands all but the newest N committed groups */
template <int N>
inline void tc_cp_async_wait(void) {
    auto &q = emu::groups[emu::cur];
    while (q.size() > (size_t)N) {
        for (auto &c : q.front()) memcpy(c.dst, c.data, 16);
        emu::n_pending -= (long)q.front().size();
        q.pop_front();
    }
}

#endif
