/* cuda_backend.cu - the CUDA backend's op table: device memory (with the
 * byte accounting of memory()), and the kernels of the other kernels/ files
 * (matmuls in matmul.cu). Built into libtitan-cuda.so, which titan loads at
 * run time (lib/backend/backend_loader.c), so a CPU-only build never needs
 * CUDA. It exports titan_backend_cuda_create (see backend.h) and
 * titan_cuda_set_error_fn (cuda_ops.cuh). The backend holds one device, the default stream, one
 * cuBLASLt handle and a 32 MiB workspace. Releasable buffers live in vmm.cu;
 * their committed bytes count in memory() like allocations. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "comm/comm_nccl_api.h"
#include "cuda_ops.cuh"

void titan_cuda_panic(const char *file, int line, const char *stmt, const char *what) {
    fprintf(stderr, "titan: cuda: %s:%d: %s: %s\n", file, line, stmt, what);
    fflush(stderr);
    abort();
}

void titan_cuda_bad_dtype(const char *file, int line, const char *op, titan_dtype dt) {
    char what[96];
    snprintf(what, sizeof what, "dtype %d is not f32 (%d) or bf16 (%d)", (int)dt,
             (int)TITAN_DTYPE_F32, (int)TITAN_DTYPE_BF16);
    titan_cuda_panic(file, line, op, what);
}

void *titan_cuda_scratch(size_t nbytes, const char *op) {
    void *p = NULL;
    cudaError_t e = cudaMallocAsync(&p, nbytes ? nbytes : 1, 0);
    if (e == cudaSuccess) return p;
    cudaGetLastError(); /* not sticky */
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    fprintf(stderr,
            "titan: error: cuda: out of GPU memory: %s needs %zu bytes of scratch, %.1f MiB "
            "free of %.1f MiB (%s)\n"
            "hint: lower training.local_batch_size or training.seq_len, or shard with more ranks\n",
            op, nbytes, (double)free_b / 1048576.0, (double)total_b / 1048576.0,
            cudaGetErrorString(e));
    fflush(NULL);
    _exit(TITAN_ERR_NOMEM); /* the op cannot return an error; exit status 6 says what happened */
}

static struct {
    int ready, ordinal;
} g_cuda;

int titan_cuda_device(void) { return g_cuda.ordinal; }

typedef titan_status (*titan_cuda_error_fn)(titan_status code, const char *fmt, ...);
static titan_cuda_error_fn g_error_fn;

/* The loader passes titan_error (see cuda_ops.cuh) */
extern "C" __attribute__((visibility("default"))) void
titan_cuda_set_error_fn(titan_cuda_error_fn fn) {
    __atomic_store_n(&g_error_fn, fn, __ATOMIC_RELEASE);
}

void titan_cuda_error(titan_status code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    titan_cuda_error_fn fn = __atomic_load_n(&g_error_fn, __ATOMIC_ACQUIRE);
    if (fn) {
        fn(code, "%s", msg);
    } else {
        fprintf(stderr, "titan: %s\n", msg);
        fflush(stderr);
    }
}

/* ------------------------------------------------------------------ memory */

/* Every live allocation's size, by pointer: an open-addressing table (linear
 * probing, tombstones, power-of-two capacity, at most half full counting
 * tombstones), so memory() can report the bytes held and free() can tell a
 * pointer this backend never handed out. Guarded by a mutex: a checkpoint
 * thread may allocate beside the training thread. */
#define MEM_TOMB ((void *)1) /* cudaMalloc never returns 1 */

static struct {
    void **key;
    size_t *size;
    size_t cap, live, filled; /* filled = live + tombstones */
    size_t in_use, peak;
} g_mem;
static pthread_mutex_t g_mem_mutex = PTHREAD_MUTEX_INITIALIZER;

static size_t mem_home(const void *p, size_t cap) {
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull; /* Fibonacci hashing */
    return (size_t)(h >> 32) & (cap - 1);
}

/* the slot holding p, or cap when absent */
static size_t mem_find(const void *p) {
    if (g_mem.cap == 0) return 0;
    size_t mask = g_mem.cap - 1;
    for (size_t i = mem_home(p, g_mem.cap), n = 0; n < g_mem.cap; i = (i + 1) & mask, n++) {
        if (g_mem.key[i] == NULL) break;
        if (g_mem.key[i] == p) return i;
    }
    return g_mem.cap;
}

/* Rebuilds the table at capacity cap without tombstones; -1 when out of host memory. */
static int mem_rehash(size_t cap) {
    void **key = (void **)calloc(cap, sizeof *key);
    size_t *size = (size_t *)calloc(cap, sizeof *size);
    if (!key || !size) {
        free(key), free(size);
        return -1;
    }
    for (size_t j = 0; j < g_mem.cap; j++) {
        void *p = g_mem.key[j];
        if (p == NULL || p == MEM_TOMB) continue;
        size_t i = mem_home(p, cap);
        while (key[i]) i = (i + 1) & (cap - 1);
        key[i] = p, size[i] = g_mem.size[j];
    }
    free(g_mem.key), free(g_mem.size);
    g_mem.key = key, g_mem.size = size, g_mem.cap = cap, g_mem.filled = g_mem.live;
    return 0;
}

/* Records a new allocation; -1 when out of host memory. */
static int mem_insert(void *p, size_t nbytes) {
    if (2 * (g_mem.filled + 1) > g_mem.cap) {
        size_t cap = g_mem.cap ? g_mem.cap : 256;
        while (2 * (g_mem.live + 1) > cap / 2) cap *= 2; /* room to grow after the rebuild */
        if (mem_rehash(cap) != 0) return -1;
    }
    size_t i = mem_home(p, g_mem.cap);
    while (g_mem.key[i] != NULL && g_mem.key[i] != MEM_TOMB) i = (i + 1) & (g_mem.cap - 1);
    if (g_mem.key[i] == NULL) g_mem.filled++;
    g_mem.key[i] = p, g_mem.size[i] = nbytes;
    g_mem.live++;
    g_mem.in_use += nbytes;
    if (g_mem.in_use > g_mem.peak) g_mem.peak = g_mem.in_use;
    return 0;
}

/* committed releasable memory (vmm.cu), held like an allocation */
void titan_cuda_mem_commit(size_t nbytes) {
    pthread_mutex_lock(&g_mem_mutex);
    g_mem.in_use += nbytes;
    if (g_mem.in_use > g_mem.peak) g_mem.peak = g_mem.in_use;
    pthread_mutex_unlock(&g_mem_mutex);
}

void titan_cuda_mem_uncommit(size_t nbytes) {
    pthread_mutex_lock(&g_mem_mutex);
    g_mem.in_use -= nbytes;
    pthread_mutex_unlock(&g_mem_mutex);
}

/* Several ranks on one GPU (TITAN_OPT_DEVICE_SHARE): each holds at most its
 * share of the GPU's memory, so a job too big for k copies on one device is
 * refused by the rank that would overstep, with the reason, before the
 * driver fails some other rank's allocation at random. 1/16 of the share is
 * left for each process's context, library workspaces and the scratch pool. */
static struct {
    int ranks;    /* processes on this GPU; 0 or 1: no cap */
    size_t limit; /* bytes this process may hold through alloc and commits */
    int told;
} g_share;

static void share_set(int ranks) {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    g_share.ranks = ranks;
    g_share.limit = ranks > 1 ? total_b / (size_t)ranks / 16 * 15 : 0;
}

int titan_cuda_mem_share_allows(size_t nbytes) {
    pthread_mutex_lock(&g_mem_mutex);
    int ok = g_share.ranks <= 1 || g_mem.in_use + nbytes <= g_share.limit;
    size_t in_use = g_mem.in_use;
    int tell = !ok && !g_share.told;
    if (tell) g_share.told = 1;
    pthread_mutex_unlock(&g_mem_mutex);
    if (tell) {
        fprintf(stderr,
                "titan: cuda: GPU %d is shared by %d ranks: %.1f MiB more would take this rank to "
                "%.2f MiB, past its share of %.2f MiB\n"
                "hint: fewer ranks per GPU (--nproc), a smaller model or batch, or a GPU per rank\n",
                g_cuda.ordinal, g_share.ranks, (double)nbytes / 1048576.0,
                (double)(in_use + nbytes) / 1048576.0, (double)g_share.limit / 1048576.0);
        fflush(stderr);
    }
    return ok;
}

/* zero-filled; cudaMalloc aligns to 256 bytes. NULL on failure. */
static void *cuda_alloc(size_t nbytes) {
    void *p = NULL;
    if (!titan_cuda_mem_share_allows(nbytes)) return NULL;
    if (cudaMalloc(&p, nbytes ? nbytes : 1) != cudaSuccess) {
        cudaGetLastError(); /* clear it: an out-of-memory is the caller's to report */
        return NULL;
    }
    if (cudaMemset(p, 0, nbytes) != cudaSuccess) {
        cudaGetLastError();
        cudaFree(p);
        return NULL;
    }
    pthread_mutex_lock(&g_mem_mutex);
    int st = mem_insert(p, nbytes);
    pthread_mutex_unlock(&g_mem_mutex);
    if (st != 0) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

/* Freeing a pointer this backend did not hand out (or twice) is a broken
 * invariant: it aborts with the pointer rather than corrupt the accounting. */
static void cuda_free(void *p) {
    if (!p) return;
    if (titan_cuda_vmm_free(p)) return; /* a releasable buffer's reservation */
    pthread_mutex_lock(&g_mem_mutex);
    size_t i = mem_find(p);
    if (i == g_mem.cap) {
        pthread_mutex_unlock(&g_mem_mutex);
        char what[96];
        snprintf(what, sizeof what, "%p is not a live allocation of this backend", p);
        titan_cuda_panic(__FILE__, __LINE__, "free", what);
    }
    g_mem.in_use -= g_mem.size[i];
    g_mem.key[i] = MEM_TOMB;
    g_mem.live--;
    pthread_mutex_unlock(&g_mem_mutex);
    CUDA_CHECK(cudaFree(p));
}

static void cuda_memory(size_t *in_use, size_t *peak, size_t *device_used, int reset) {
    pthread_mutex_lock(&g_mem_mutex);
    if (in_use) *in_use = g_mem.in_use;
    if (peak) *peak = g_mem.peak;
    if (reset) g_mem.peak = g_mem.in_use;
    pthread_mutex_unlock(&g_mem_mutex);
    if (device_used) {
        size_t free_b = 0, total_b = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        *device_used = total_b - free_b;
    }
}

static void *cuda_alloc_releasable(size_t nbytes) {
    return titan_cuda_vmm_alloc(nbytes, cuda_alloc);
}

static void cuda_zero(void *p, size_t nbytes) {
    if (nbytes) CUDA_CHECK(cudaMemset(p, 0, nbytes));
}

static void cuda_to_device(void *dst, const void *host_src, size_t nbytes) {
    if (nbytes) CUDA_CHECK(cudaMemcpy(dst, host_src, nbytes, cudaMemcpyHostToDevice));
}

static void cuda_to_host(void *host_dst, const void *src, size_t nbytes) {
    if (nbytes) CUDA_CHECK(cudaMemcpy(host_dst, src, nbytes, cudaMemcpyDeviceToHost));
}

/* Page-locked host memory (checkpoint.async_mode = "async_with_pinned_mem"):
 * NULL when the driver has none to give (the caller falls back to pageable). */
static void *cuda_host_alloc(size_t nbytes) {
    void *p = NULL;
    if (cudaHostAlloc(&p, nbytes ? nbytes : 1, cudaHostAllocDefault) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: clear it */
        return NULL;
    }
    return p;
}

static void cuda_host_free(void *p) {
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

/* ------------------------------------------------------------------- table */

/* the default stream, which every op but a side-stream adamw_step uses,
 * the pool's frees on it, and the optimizer's side stream */
static void cuda_sync(void) { CUDA_CHECK(cudaDeviceSynchronize()); }

/* The optimizer's side stream (backend.h). Non-blocking: the legacy
 * default stream, which every other op uses, does not wait for it by
 * itself, only at event_wait (and cudaDeviceSynchronize). Made on first use. */
static cudaStream_t g_side;
static int g_side_on;
static cudaEvent_t g_main_mark; /* the main stream's point the side stream starts after */

cudaStream_t titan_cuda_optimizer_stream(void) { return g_side_on ? g_side : (cudaStream_t)0; }

static void *cuda_event_create(void) {
    cudaEvent_t e = NULL;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return (void *)e;
}

static void cuda_event_free(void *ev) {
    if (ev) CUDA_CHECK(cudaEventDestroy((cudaEvent_t)ev));
}

static void cuda_side_stream(int on) {
    if (on && !g_side) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&g_main_mark, cudaEventDisableTiming));
    }
    if (on) { /* after everything the main stream has queued (the gradients, the norm) */
        CUDA_CHECK(cudaEventRecord(g_main_mark, 0));
        CUDA_CHECK(cudaStreamWaitEvent(g_side, g_main_mark, 0));
    }
    g_side_on = on;
}

static void cuda_event_record(void *ev) {
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)ev, titan_cuda_optimizer_stream()));
}

static void cuda_event_wait(void *ev) { CUDA_CHECK(cudaStreamWaitEvent(0, (cudaEvent_t)ev, 0)); }

/* backend.h's TITAN_OPT_* keys this backend takes */
static int cuda_set_option(const char *key, int value) {
    if (strcmp(key, TITAN_OPT_ATTENTION_CUDNN) == 0) {
        titan_cuda_set_attention_cudnn(value);
        return 0;
    }
    if (strcmp(key, TITAN_OPT_DEVICE_SHARE) == 0) {
        share_set(value);
        return 0;
    }
    return -1;
}

/* comm_nccl.cu's export, linked in only where nccl.h was found (Makefile):
 * a weak reference, NULL without it (default visibility, as the definition,
 * which stays exported) */
extern "C" __attribute__((weak, visibility("default"))) const titan_nccl_api *titan_cuda_nccl_api(void);

/* caps: TITAN_CAP_NCCL added by titan_backend_cuda_create where the library has it */
static titan_backend cuda_backend = {
    .name = "cuda",
    .host = 0,
    .caps = TITAN_CAP_GPU | TITAN_CAP_ATTENTION_CUDNN,
    .set_option = cuda_set_option,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .zero = cuda_zero,
    .to_device = cuda_to_device,
    .to_host = cuda_to_host,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .memory = cuda_memory,
    .sync = cuda_sync,
    .alloc_releasable = cuda_alloc_releasable,
    .commit = titan_cuda_vmm_commit,
    .release = titan_cuda_vmm_release,
    .convert = titan_cuda_convert,
    .matmul_forward = titan_cuda_matmul_forward,
    .matmul_backward = titan_cuda_matmul_backward,
    .matmul_add_forward = titan_cuda_matmul_add_forward,
    /* float8 linears: cuBLASLt float8 GEMMs (fp8_matmul.cu), casts in fp8.cu */
    .fp8_matmul_forward = titan_cuda_fp8_matmul_forward,
    .fp8_matmul_backward = titan_cuda_fp8_matmul_backward,
    .fp8_quantize = titan_cuda_fp8_quantize,
    .fp8_dequantize = titan_cuda_fp8_dequantize_to,
    .fp8_amax = titan_cuda_fp8_amax,
    .add = titan_cuda_add,
    .embedding_forward = titan_cuda_embedding_forward,
    .embedding_backward = titan_cuda_embedding_backward,
    .rmsnorm_forward = titan_cuda_rmsnorm_forward,
    .rmsnorm_backward = titan_cuda_rmsnorm_backward,
    .rope_forward = titan_cuda_rope_forward,
    .rope_backward = titan_cuda_rope_backward,
    .attention_forward = titan_cuda_attention_forward,
    .attention_backward = titan_cuda_attention_backward,
    .swiglu_forward = titan_cuda_swiglu_forward,
    .swiglu_backward = titan_cuda_swiglu_backward,
    .cross_entropy = titan_cuda_cross_entropy,
    .logsumexp = titan_cuda_logsumexp,
    .adamw_step = titan_cuda_adamw_step,
    .sumsq = titan_cuda_sumsq,
    .scale = titan_cuda_scale,
    /* block attention and its merge: context parallelism's ring */
    .attention_forward_at = titan_cuda_attention_forward_at,
    .attention_backward_at = titan_cuda_attention_backward_at,
    .sumsq_into = titan_cuda_sumsq_into,
    .event_create = cuda_event_create,
    .event_free = cuda_event_free,
    .side_stream = cuda_side_stream,
    .event_record = cuda_event_record,
    .event_wait = cuda_event_wait,
    /* shared windows over device memory (ipc.cu) */
    .ipc_export = titan_cuda_ipc_export,
    .ipc_open = titan_cuda_ipc_open,
    .ipc_close = titan_cuda_ipc_close,
    .copy = titan_cuda_copy,
    .sum_ranks = titan_cuda_sum_ranks,
    .host_call = titan_cuda_host_call,
    /* GaLore: its steps in galore.cu, the refresh's QR and SVD through cuSOLVER (linalg.cu) */
    .galore_adam = titan_cuda_galore_adam,
    .galore_update = titan_cuda_galore_update,
    .qr_orthonormal = titan_cuda_qr_orthonormal,
    .svd_thin = titan_cuda_svd_thin,
    .svd_signs = titan_cuda_svd_signs,
    .attention_merge = titan_cuda_attention_merge,
};

/* "name: cause" of a failed CUDA call, into msg */
static const titan_backend *fail(char *msg, size_t len, const char *what, cudaError_t e) {
    snprintf(msg, len, "no GPU (%s: %s: %s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    cudaGetLastError();
    return NULL;
}

/* The GPUs this process sees (CUDA_VISIBLE_DEVICES applied), before one is
 * opened: titan-train spreads its ranks over them. -1 with the reason in msg. */
extern "C" __attribute__((visibility("default"))) int titan_cuda_device_count(char *msg, size_t msg_len) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        fail(msg, msg_len, "cudaGetDeviceCount", e);
        return -1;
    }
    if (count == 0) snprintf(msg, msg_len, "no GPU (cudaGetDeviceCount: 0 devices)");
    return count > 0 ? count : -1;
}

extern "C" __attribute__((visibility("default"))) const titan_backend *
titan_backend_cuda_create(size_t table_size, int ordinal, char *msg, size_t msg_len) {
    if (table_size != sizeof(titan_backend)) {
        snprintf(msg, msg_len,
                 "libtitan-cuda.so was built from another backend.h (op table of %zu bytes, "
                 "this program's has %zu): rebuild both",
                 sizeof(titan_backend), table_size);
        return NULL;
    }
    if (g_cuda.ready) {
        if (ordinal != g_cuda.ordinal) {
            snprintf(msg, msg_len, "already opened on GPU %d, cannot also open GPU %d",
                     g_cuda.ordinal, ordinal);
            return NULL;
        }
    } else {
        int count = titan_cuda_device_count(msg, msg_len);
        if (count < 0) return NULL;
        cudaError_t e;
        if (ordinal < 0 || ordinal >= count) {
            snprintf(msg, msg_len, "GPU %d requested, %d visible (0..%d)", ordinal, count,
                     count - 1);
            return NULL;
        }
        if ((e = cudaSetDevice(ordinal)) != cudaSuccess) return fail(msg, msg_len, "cudaSetDevice", e);
        /* kernels for this GPU? (the .so holds sm_80, sm_90 code and compute_90 PTX) */
        if ((e = titan_cuda_probe()) != cudaSuccess) return fail(msg, msg_len, "probe kernel", e);
        if (titan_cuda_matmul_open(msg, msg_len) != 0) return NULL;
        titan_cuda_fp8_check_env();
        /* Ops take their scratch from the stream-ordered pool (cudaMallocAsync)
         * every step; by default the pool hands memory back to the driver at
         * each synchronisation (one per step: the loss copy), so the next step
         * would map it again. Keep it: the scratch is a few MiB. */
        cudaMemPool_t pool;
        if ((e = cudaDeviceGetDefaultMemPool(&pool, ordinal)) != cudaSuccess)
            return fail(msg, msg_len, "cudaDeviceGetDefaultMemPool", e);
        uint64_t keep = UINT64_MAX;
        if ((e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep)) != cudaSuccess)
            return fail(msg, msg_len, "cudaMemPoolSetAttribute", e);
        g_cuda.ordinal = ordinal;
        g_cuda.ready = 1;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, g_cuda.ordinal));
    double mib = (double)prop.totalGlobalMem / (1024.0 * 1024.0); /* MiB below 1 GiB (caps in tests) */
    snprintf(msg, msg_len, "GPU %d: %s, sm_%d%d, %.1f %s", g_cuda.ordinal, prop.name, prop.major,
             prop.minor, mib >= 1024.0 ? mib / 1024.0 : mib, mib >= 1024.0 ? "GiB" : "MiB");
    if (titan_cuda_nccl_api) cuda_backend.caps |= TITAN_CAP_NCCL;
    if (prop.major * 10 + prop.minor >= 89) cuda_backend.caps |= TITAN_CAP_FP8_GEMM; /* Ada, Hopper and later */
    return &cuda_backend;
}
