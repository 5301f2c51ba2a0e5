/* cuda_emu.cpp - the CUDA runtime calls of the CUDA backend, on the host, for
 * libtitan-cuda-emu.so (tests/emu/cuda_emu.h says what is emulated and how).
 * Definitions of the real header's declarations: the compiler checks each
 * one against the API the backend is built with.
 *
 * Device memory: one reserved arena (PROT_NONE, never reused, so a freed
 * pointer stays invalid). An allocation takes whole pages and ends at the
 * last one, 256-byte aligned like cudaMalloc, with 16 inaccessible pages
 * after it (and before the first). Its pages are readable and writable only
 * inside a DeviceScope (a kernel, memcpy, memset, cuBLASLt, CUB): host code
 * that reads a device pointer, a kernel that runs up to 64 KiB past an
 * allocation's pages, or anything that touches freed memory stops with
 * SIGSEGV and a line naming the address. The rest of its pages (up to 255
 * bytes after it, the page's start before it) stay 0xff: cudaFree checks
 * them. Limits: the protection is the process's, so while one thread is in
 * a DeviceScope another thread's host read of device memory goes unseen;
 * a fault on a thread that blocks SIGSEGV (titan's communicator thread)
 * dies without the line. Errors and the current device are per thread. */
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "cuda_emu.h"

namespace {
constexpr size_t ARENA_BYTES = (size_t)1 << 40; /* reserved, not committed */
/* the emulated GPU's memory: 80 GiB, or TITAN_EMU_MEMORY_MIB (to try out of memory) */
size_t total_bytes() {
    static size_t total;
    if (!total) {
        const char *e = getenv("TITAN_EMU_MEMORY_MIB");
        const double mib = e && *e ? strtod(e, nullptr) : 0.0; /* fractions: bytes count */
        total = mib > 0 ? (size_t)(mib * 1048576.0) : (size_t)80 << 30;
    }
    return total;
}
constexpr size_t DEFAULT_SMEM = 48 * 1024, OPTIN_SMEM = EMU_SMEM_MAX;

struct Alloc {
    size_t bytes;         /* as asked */
    unsigned char *pages; /* the first of its pages */
    size_t page_bytes;    /* whole pages, without the guard pages */
    int device;           /* the GPU current at cudaMalloc */
    int ipc_fd = -1;      /* exported (cudaIpcGetMemHandle): its pages are this memfd's */
    bool opened = false;  /* another process's export mapped here (cudaIpcOpenMemHandle) */
    int refs = 0;         /* opened: the opens not yet closed */
    uint64_t ipc_dev = 0, ipc_ino = 0; /* exported or opened: the memfd's identity (fd numbers are reused) */
    int owner_pid = 0;                 /* opened: the exporter's pid */
};
constexpr size_t GUARD_PAGES = 16; /* inaccessible after each allocation */

std::recursive_mutex g_lock;
unsigned char *g_arena;
size_t g_arena_used, g_page, g_live_bytes;
std::map<uintptr_t, Alloc> g_live; /* by the pointer handed out */
int g_scope_depth;
/* per host thread, as the runtime's */
thread_local cudaError_t g_last_error = cudaSuccess;
thread_local int g_device; /* cudaSetDevice's; a new thread starts on 0 */
std::map<const void *, int> g_max_dyn_smem; /* cudaFuncSetAttribute, by kernel */
struct sigaction g_old_segv;

cudaError_t record(cudaError_t e) {
    if (e != cudaSuccess) g_last_error = e;
    return e;
}

void protect_all(int prot) {
    for (auto &kv : g_live)
        if (mprotect(kv.second.pages, kv.second.page_bytes, prot) != 0) {
            perror("emu: mprotect");
            abort();
        }
}

/* a fault in the arena: name it and stop; elsewhere: not ours */
void on_segv(int sig, siginfo_t *si, void *ctx) {
    const unsigned char *a = (const unsigned char *)si->si_addr;
    if (g_arena && a >= g_arena && a < g_arena + ARENA_BYTES) {
        fprintf(stderr,
                "emu: %s touched device memory at %p: %s\n",
                g_scope_depth ? "device code" : "host code", si->si_addr,
                g_scope_depth ? "past an allocation's end, or freed memory"
                              : "device pointers are not host memory (copy with to_host)");
        if (emu::in_kernel)
            fprintf(stderr, "emu: (the kernel's block (%u, %u, %u), thread %d)\n", blockIdx.x,
                    blockIdx.y, blockIdx.z, emu::cur);
        signal(SIGABRT, SIG_DFL);
        abort();
    }
    sigaction(SIGSEGV, &g_old_segv, nullptr); /* the fault repeats under the old handler */
}

bool arena_init() {
    if (g_arena) return true;
    void *p = mmap(nullptr, ARENA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) return false;
    g_arena = (unsigned char *)p;
    g_page = (size_t)sysconf(_SC_PAGESIZE);
    g_arena_used = GUARD_PAGES * g_page; /* below the first allocation too */
    /* another legal interleaving of the threads per seed */
    const char *seed = getenv("TITAN_EMU_SEED");
    if (seed && *seed) emu::rng.seed(strtoull(seed, nullptr, 10));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_old_segv);
    return true;
}

const Alloc *find(const void *p) {
    auto it = g_live.upper_bound((uintptr_t)p);
    if (it == g_live.begin()) return nullptr;
    --it;
    const uintptr_t a = (uintptr_t)p;
    return a < (uintptr_t)(it->second.pages + it->second.page_bytes) ? &it->second : nullptr;
}

/* [at, at + len) of the arena reserved again, nothing mapped (as never used) */
void unmap_to_arena(unsigned char *at, size_t len) {
    if (mmap(at, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED) {
        perror("emu: mmap");
        abort();
    }
}

cudaError_t dev_alloc(void **out, size_t bytes) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    if (!out) return record(cudaErrorInvalidValue);
    *out = nullptr;
    if (!arena_init()) return record(cudaErrorMemoryAllocation);
    const size_t guard = GUARD_PAGES * g_page;
    if (bytes > total_bytes() - g_live_bytes || bytes > ARENA_BYTES - g_arena_used)
        return record(cudaErrorMemoryAllocation); /* also no size arithmetic overflow below */
    const size_t rounded = (bytes + 255) / 256 * 256;
    const size_t pages = (rounded + g_page - 1) / g_page * g_page;
    if (g_arena_used + pages + guard > ARENA_BYTES) return record(cudaErrorMemoryAllocation);
    Alloc a{bytes, g_arena + g_arena_used, pages, g_device};
    g_arena_used += pages + guard;
    unsigned char *user = a.pages + pages - rounded;
    if (mprotect(a.pages, pages, PROT_READ | PROT_WRITE) != 0)
        return record(cudaErrorMemoryAllocation);
    memset(a.pages, 0xff, pages); /* NaN: a read before the first write shows */
    if (g_scope_depth == 0) mprotect(a.pages, pages, PROT_NONE);
    g_live[(uintptr_t)user] = a;
    g_live_bytes += bytes;
    *out = user;
    return cudaSuccess;
}

cudaError_t dev_free(void *p) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    if (!p) return cudaSuccess;
    auto it = g_live.find((uintptr_t)p);
    if (it == g_live.end() || it->second.opened) return record(cudaErrorInvalidValue); /* opened: cudaIpcCloseMemHandle */
    /* the bytes of its pages around it (up to 255 after, the page's start
     * before) are still 0xff, or something wrote outside the allocation */
    const Alloc &a = it->second;
    const unsigned char *user = (const unsigned char *)p, *end = a.pages + a.page_bytes;
    if (mprotect(a.pages, a.page_bytes, PROT_READ) != 0) abort();
    for (const unsigned char *q = a.pages; q < end; q++)
        if ((q < user || q >= user + a.bytes) && *q != 0xff) {
            fprintf(stderr,
                    "emu: cudaFree(%p): the allocation of %zu bytes was written %s its end "
                    "(byte %td)\n",
                    p, a.bytes, q < user ? "before" : "past", q - user);
            abort();
        }
    if (a.ipc_fd >= 0) { /* exported: the pages go back to the arena */
        unmap_to_arena(a.pages, a.page_bytes);
        /* a peer's late access faults (SIGBUS) where CUDA leaves it undefined */
        if (ftruncate(a.ipc_fd, 0) != 0) perror("emu: cudaFree: ftruncate");
        close(a.ipc_fd);
    }
    mprotect(it->second.pages, it->second.page_bytes, PROT_NONE);
    madvise(it->second.pages, it->second.page_bytes, MADV_DONTNEED);
    g_live_bytes -= it->second.bytes;
    g_live.erase(it);
    return cudaSuccess;
}
} /* namespace */

/* ------------------------------------------------------ cuda_emu.h's side */

bool emu::is_device(const void *p, size_t n) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    auto it = g_live.upper_bound((uintptr_t)p);
    if (it == g_live.begin()) return false;
    --it;
    const uintptr_t a = (uintptr_t)p, end = it->first + it->second.bytes;
    return a >= it->first && a <= end && n <= end - a;
}

void emu::check_device(const void *p, size_t n, const char *what) {
    if (is_device(p, n)) return;
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    const Alloc *a = find(p);
    if (a)
        fprintf(stderr, "emu: %s: %zu bytes at %p run past the end of a device allocation\n",
                what, n, p);
    else
        fprintf(stderr, "emu: %s: %p is not device memory (a host pointer, or freed)\n", what, p);
    abort();
}

cudaError_t emu::check_launch(const void *kernel, dim3 g, dim3 b, size_t smem) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    const unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (!b.x || !b.y || !b.z || b.x > 1024 || b.y > 1024 || b.z > 64 || threads > 1024 || !g.x ||
        !g.y || !g.z || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
        return record(cudaErrorInvalidConfiguration);
    auto it = g_max_dyn_smem.find(kernel);
    const size_t limit = it != g_max_dyn_smem.end() ? (size_t)it->second : DEFAULT_SMEM;
    if (smem > limit) return record(cudaErrorInvalidValue);
    return cudaSuccess;
}

emu::DeviceScope::DeviceScope() {
    g_lock.lock();
    if (g_scope_depth++ == 0) protect_all(PROT_READ | PROT_WRITE);
}

emu::DeviceScope::~DeviceScope() {
    if (--g_scope_depth == 0) protect_all(PROT_NONE);
    g_lock.unlock();
}

/* ------------------------------------------------------- the runtime API */

const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorDeviceUninitialized: return "cudaErrorDeviceUninitialized";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorOperatingSystem: return "cudaErrorOperatingSystem";
    default: return "cudaErrorUnknown";
    }
}

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorDeviceUninitialized: return "invalid device context";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorOperatingSystem: return "OS call failed or operation not supported on this OS";
    default: return "unknown error";
    }
}

cudaError_t cudaGetLastError(void) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    cudaError_t e = g_last_error;
    g_last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return g_last_error; }

/* TITAN_EMU_DEVICES=N (default 1): N alike GPUs, so that the ranks of a
 * --nproc run each take their own. Each process emulates its own: memory
 * is not shared between them. */
static int device_count() {
    static const int n = [] {
        const char *e = getenv("TITAN_EMU_DEVICES");
        const int k = e && *e ? atoi(e) : 1;
        return k >= 1 && k <= 64 ? k : 1;
    }();
    return n;
}
static bool valid_device(int d) { return d >= 0 && d < device_count(); }

cudaError_t cudaGetDeviceCount(int *count) {
    *count = device_count();
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    if (!valid_device(device)) return record(cudaErrorInvalidDevice);
    g_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
    *device = g_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
    if (!valid_device(device)) return record(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "titan CPU emulator");
    prop->major = 9;
    prop->minor = 0;
    prop->totalGlobalMem = total_bytes();
    prop->multiProcessorCount = 132;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->sharedMemPerBlock = DEFAULT_SMEM;
    prop->sharedMemPerBlockOptin = OPTIN_SMEM;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
    if (!valid_device(device)) return record(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevAttrMemoryPoolsSupported: *value = 1; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = 132; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)OPTIN_SMEM; return cudaSuccess;
    default: return record(cudaErrorNotSupported); /* not needed so far: say so */
    }
}


cudaError_t cudaMalloc(void **p, size_t bytes) { return dev_alloc(p, bytes); }
cudaError_t cudaFree(void *p) { return dev_free(p); }
/* TITAN_EMU_FAIL_POOL=1: the stream-ordered pool is out of memory (the ops'
 * scratch: their out-of-memory path) */
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t) {
    static const bool fail_pool = [] {
        const char *e = getenv("TITAN_EMU_FAIL_POOL");
        return e && strcmp(e, "1") == 0;
    }();
    if (fail_pool) {
        *p = nullptr;
        return record(cudaErrorMemoryAllocation);
    }
    return dev_alloc(p, bytes);
}
cudaError_t cudaFreeAsync(void *p, cudaStream_t) { return dev_free(p); }

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    *total_b = total_bytes();
    *free_b = total_bytes() - g_live_bytes;
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t n) {
    if (n == 0) return cudaSuccess;
    if (!emu::is_device(p, n)) return record(cudaErrorInvalidValue);
    emu::DeviceScope scope;
    memset(p, value, n);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t) {
    return cudaMemset(p, value, n);
}

cudaError_t cudaMemset2D(void *p, size_t pitch, int value, size_t width, size_t height) {
    if (width == 0 || height == 0) return cudaSuccess;
    if (width > pitch || !emu::is_device(p, pitch * (height - 1) + width))
        return record(cudaErrorInvalidValue);
    emu::DeviceScope scope;
    for (size_t r = 0; r < height; r++) memset((unsigned char *)p + r * pitch, value, width);
    return cudaSuccess;
}

/* Page-locked host memory: plain host memory here (it is not device
 * memory, so copies check their direction against it as against any). */
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int) {
    *p = calloc(1, bytes ? bytes : 1);
    return *p ? cudaSuccess : record(cudaErrorMemoryAllocation);
}
cudaError_t cudaFreeHost(void *p) {
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
    if (n == 0) return cudaSuccess;
    const bool ddev = emu::is_device(dst, n), sdev = emu::is_device(src, n);
    bool ok;
    switch (kind) {
    case cudaMemcpyHostToDevice: ok = ddev && !sdev; break;
    case cudaMemcpyDeviceToHost: ok = !ddev && sdev; break;
    case cudaMemcpyDeviceToDevice: ok = ddev && sdev; break;
    case cudaMemcpyHostToHost: ok = !ddev && !sdev; break;
    case cudaMemcpyDefault: ok = true; break;
    default: ok = false;
    }
    if (!ok) return record(cudaErrorInvalidValue);
    emu::DeviceScope scope;
    memmove(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t) {
    return cudaMemcpy(dst, src, n, kind);
}

/* device to device only (the backend's one use); rows of width bytes */
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height, cudaMemcpyKind kind) {
    if (width == 0 || height == 0) return cudaSuccess;
    if (kind != cudaMemcpyDeviceToDevice || width > dpitch || width > spitch ||
        !emu::is_device(dst, dpitch * (height - 1) + width) ||
        !emu::is_device(src, spitch * (height - 1) + width))
        return record(cudaErrorInvalidValue);
    emu::DeviceScope scope;
    for (size_t r = 0; r < height; r++)
        memmove((unsigned char *)dst + r * dpitch, (const unsigned char *)src + r * spitch, width);
    return cudaSuccess;
}

/* a __device__ variable is a host global here */
cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t n, size_t offset,
                                 cudaMemcpyKind kind) {
    if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDefault)
        return record(cudaErrorInvalidValue);
    memcpy(dst, (const unsigned char *)symbol + offset, n);
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *attr, const void *p) {
    memset(attr, 0, sizeof *attr);
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    const Alloc *a = emu::is_device(p, 0) ? find(p) : nullptr;
    if (a) {
        attr->type = cudaMemoryTypeDevice;
        attr->devicePointer = (void *)p;
        attr->device = a->device;
    } else {
        attr->type = cudaMemoryTypeUnregistered;
        attr->hostPointer = (void *)p;
        attr->device = -1;
    }
    return cudaSuccess;
}

/* Streams. The default (legacy) stream runs in the calling thread, at
 * once. A created stream is a queue with a worker thread of its own:
 * kernels launched on it, event records and event waits queue there and
 * run in order, beside the caller, each kernel after a random pause drawn
 * from TITAN_EMU_SEED's generator (so each seed is another interleaving of
 * the streams' kernels); kernels still run one at a time (the emulator's
 * lock). As cudaStreamNonBlocking streams on a GPU, nothing orders them
 * against the default stream but events and synchronisation; copies and
 * memsets given a created stream run at once, in the caller. */
namespace {
struct EmuEvent {
    std::mutex mu;
    std::condition_variable cv;
    uint64_t recorded = 0, done = 0; /* records issued, and reached */
    double at = 0;                   /* host seconds when the last record was reached (cudaEventElapsedTime) */
};
struct EmuStream {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> queue;
    bool busy = false, stop = false;
    std::thread worker;
};
std::mutex g_streams_lock;
std::set<EmuStream *> g_streams;

void event_reach(EmuEvent *e, uint64_t gen) {
    std::lock_guard<std::mutex> hold(e->mu);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->at = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    if (gen > e->done) e->done = gen;
    e->cv.notify_all();
}
void event_block(EmuEvent *e, uint64_t gen) {
    std::unique_lock<std::mutex> hold(e->mu);
    e->cv.wait(hold, [&] { return e->done >= gen; });
}
void stream_run(EmuStream *s, int device) {
    g_device = device;
    std::unique_lock<std::mutex> hold(s->mu);
    for (;;) {
        s->cv.wait(hold, [&] { return s->stop || !s->queue.empty(); });
        if (s->queue.empty()) return; /* stopped and drained */
        std::function<void()> item = std::move(s->queue.front());
        s->queue.pop_front();
        s->busy = true;
        hold.unlock();
        item();
        hold.lock();
        s->busy = false;
        s->cv.notify_all();
    }
}
void stream_drain(EmuStream *s) {
    std::unique_lock<std::mutex> hold(s->mu);
    s->cv.wait(hold, [&] { return s->queue.empty() && !s->busy; });
}
EmuStream *created(cudaStream_t st) {
    std::lock_guard<std::mutex> hold(g_streams_lock);
    auto it = g_streams.find((EmuStream *)st);
    return it == g_streams.end() ? nullptr : *it;
}
/* the pause before a kernel on a created stream: 0 to 2 ms, per seed */
unsigned pause_us() {
    static std::mutex mu;
    static std::mt19937 gen;
    static bool seeded;
    std::lock_guard<std::mutex> hold(mu);
    if (!seeded) {
        const char *seed = getenv("TITAN_EMU_SEED");
        gen.seed(seed && *seed ? (unsigned)strtoull(seed, nullptr, 10) : 1u);
        seeded = true;
    }
    return (unsigned)(gen() % 2000u);
}
} /* namespace */

bool emu::enqueue_kernel(cudaStream_t st, std::function<void()> run) {
    EmuStream *s = created(st);
    if (!s) return false;
    std::lock_guard<std::mutex> hold(s->mu);
    s->queue.push_back([run = std::move(run)] {
        usleep(pause_us());
        run();
    });
    s->cv.notify_all();
    return true;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned) {
    EmuStream *s = new EmuStream;
    s->worker = std::thread(stream_run, s, g_device);
    std::lock_guard<std::mutex> hold(g_streams_lock);
    g_streams.insert(s);
    *st = (cudaStream_t)s;
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t st) {
    EmuStream *s = created(st);
    if (!s) return record(cudaErrorInvalidResourceHandle);
    {
        std::lock_guard<std::mutex> hold(g_streams_lock);
        g_streams.erase(s);
    }
    {
        std::lock_guard<std::mutex> hold(s->mu);
        s->stop = true;
        s->cv.notify_all();
    }
    s->worker.join();
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t st) {
    if (EmuStream *s = created(st)) stream_drain(s);
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
    std::vector<EmuStream *> all;
    {
        std::lock_guard<std::mutex> hold(g_streams_lock);
        all.assign(g_streams.begin(), g_streams.end());
    }
    for (EmuStream *s : all) stream_drain(s);
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) {
    *e = (cudaEvent_t) new EmuEvent;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
/* host time between the two events' last records reached: what the CPU took */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    EmuEvent *ea = (EmuEvent *)a, *eb = (EmuEvent *)b;
    if (!ms || !ea || !eb) return cudaErrorInvalidValue;
    std::lock_guard<std::mutex> ha(ea->mu);
    if (ea->done < ea->recorded) return cudaErrorNotReady;
    double t0 = ea->at;
    std::lock_guard<std::mutex> hb(eb->mu); /* a and b are distinct events */
    if (eb->done < eb->recorded) return cudaErrorNotReady;
    *ms = (float)((eb->at - t0) * 1e3);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete (EmuEvent *)e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st) {
    EmuEvent *e = (EmuEvent *)ev;
    uint64_t gen;
    {
        std::lock_guard<std::mutex> hold(e->mu);
        gen = ++e->recorded;
    }
    EmuStream *s = created(st);
    if (!s) {
        event_reach(e, gen); /* the default stream has run everything queued */
        return cudaSuccess;
    }
    std::lock_guard<std::mutex> hold(s->mu);
    s->queue.push_back([e, gen] { event_reach(e, gen); });
    s->cv.notify_all();
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t ev) {
    EmuEvent *e = (EmuEvent *)ev;
    std::lock_guard<std::mutex> hold(e->mu);
    return e->done >= e->recorded ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventSynchronize(cudaEvent_t ev) {
    EmuEvent *e = (EmuEvent *)ev;
    uint64_t gen;
    {
        std::lock_guard<std::mutex> hold(e->mu);
        gen = e->recorded;
    }
    event_block(e, gen);
    return cudaSuccess;
}
/* waits for the event's last record as issued now */
cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t ev, unsigned) {
    EmuEvent *e = (EmuEvent *)ev;
    uint64_t gen;
    {
        std::lock_guard<std::mutex> hold(e->mu);
        gen = e->recorded;
    }
    EmuStream *s = created(st);
    if (!s) { /* the default stream: its next op runs when this returns */
        event_block(e, gen);
        return cudaSuccess;
    }
    std::lock_guard<std::mutex> hold(s->mu);
    s->queue.push_back([e, gen] { event_block(e, gen); });
    s->cv.notify_all();
    return cudaSuccess;
}

/* Host functions: run in their turn on a created stream, at once on the
 * default one (which has run everything queued before). */
cudaError_t cudaLaunchHostFunc(cudaStream_t st, cudaHostFn_t fn, void *arg) {
    if (!fn) return record(cudaErrorInvalidValue);
    EmuStream *s = created(st);
    if (!s) {
        fn(arg);
        return cudaSuccess;
    }
    std::lock_guard<std::mutex> hold(s->mu);
    s->queue.push_back([fn, arg] { fn(arg); });
    s->cv.notify_all();
    return cudaSuccess;
}

/* Interprocess memory, between the processes of this host as CUDA IPC
 * maps it. cudaIpcGetMemHandle waits for the streams' queued work, then
 * turns the allocation's pages into a memfd in place (its bytes copied
 * into the memfd, which is then mapped shared over the same addresses, so
 * the exporter's pointer stays valid) and the handle carries the
 * exporter's pid, the memfd's number and its identity (st_dev, st_ino: a
 * number is reused once freed, so a stale handle names another buffer);
 * another process's cudaIpcOpenMemHandle opens /proc/PID/fd/FD, checks
 * that it is the same memfd, and maps it into its own arena
 * (guard pages after it, protected like its own device memory), where
 * kernels, copies and memsets take it as device memory; cudaIpcCloseMemHandle
 * unmaps it. As CUDA: opening a handle in the process that exported it is
 * an error (cudaErrorDeviceUninitialized, what the runtime returns there),
 * a second open of the same handle returns the same pointer (counted), the
 * flags must be cudaIpcMemLazyEnablePeerAccess, cudaFree does not take an
 * opened pointer. Stricter than CUDA: only an allocation's start pointer is
 * exported (CUDA takes any pointer into it and maps the whole allocation). */
namespace {
constexpr uint32_t IPC_MAGIC = 0x54495043u; /* "TIPC" */
struct IpcHandle {
    uint32_t magic;
    int32_t pid, fd, device;
    uint64_t bytes, page_bytes, offset; /* the pointer's offset in its pages */
    uint64_t dev, ino;                  /* the memfd's st_dev, st_ino */
};
static_assert(sizeof(IpcHandle) <= sizeof(cudaIpcMemHandle_t), "a handle fits CUDA's");

/* fd's first len bytes mapped shared over [at, at + len), protected as device memory is now */
bool map_shared(unsigned char *at, size_t len, int fd) {
    const int prot = g_scope_depth ? PROT_READ | PROT_WRITE : PROT_NONE;
    return mmap(at, len, prot, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED;
}

/* Allocation a's pages as a memfd mapped in place; the memfd, or -1. */
int export_pages(Alloc &a) {
    int fd = memfd_create("titan-emu-ipc", MFD_CLOEXEC);
    if (fd < 0) return -1;
    bool ok = ftruncate(fd, (off_t)a.page_bytes) == 0 && mprotect(a.pages, a.page_bytes, PROT_READ) == 0;
    for (size_t done = 0; ok && done < a.page_bytes;) {
        ssize_t w = pwrite(fd, a.pages + done, a.page_bytes - done, (off_t)done);
        ok = w > 0;
        done += ok ? (size_t)w : 0;
    }
    if (!ok) {
        mprotect(a.pages, a.page_bytes, g_scope_depth ? PROT_READ | PROT_WRITE : PROT_NONE);
        close(fd);
        return -1;
    }
    if (!map_shared(a.pages, a.page_bytes, fd)) { /* the old pages may be gone: nothing sane to go on with */
        perror("emu: cudaIpcGetMemHandle: mmap");
        abort();
    }
    return fd;
}
} /* namespace */

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *p) {
    /* the pages are copied as they are: the streams' kernels first (not
     * under the lock, which their device scopes take) */
    cudaDeviceSynchronize();
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    auto it = g_live.find((uintptr_t)p);
    if (!handle || it == g_live.end() || it->second.opened) return record(cudaErrorInvalidValue);
    Alloc &a = it->second;
    if (a.ipc_fd < 0) {
        struct stat st;
        if ((a.ipc_fd = export_pages(a)) < 0) return record(cudaErrorOperatingSystem);
        if (fstat(a.ipc_fd, &st) != 0) abort(); /* a memfd we hold */
        a.ipc_dev = (uint64_t)st.st_dev, a.ipc_ino = (uint64_t)st.st_ino;
    }
    IpcHandle h = {IPC_MAGIC, (int32_t)getpid(), a.ipc_fd, a.device, a.bytes, a.page_bytes,
                   (uint64_t)((unsigned char *)p - a.pages), a.ipc_dev, a.ipc_ino};
    memset(handle, 0, sizeof *handle);
    memcpy(handle, &h, sizeof h);
    return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void **out, cudaIpcMemHandle_t handle, unsigned int flags) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    if (!out || flags != cudaIpcMemLazyEnablePeerAccess) return record(cudaErrorInvalidValue);
    *out = nullptr;
    IpcHandle h;
    memcpy(&h, &handle, sizeof h);
    if (h.magic != IPC_MAGIC || h.offset >= h.page_bytes) return record(cudaErrorInvalidResourceHandle);
    if (h.pid == (int32_t)getpid()) return record(cudaErrorDeviceUninitialized);
    /* TITAN_EMU_NO_PEER=1 (read at each call): GPUs without peer access
     * (PCIe without P2P), so another GPU's export does not map */
    const char *no_peer = getenv("TITAN_EMU_NO_PEER");
    if (no_peer && strcmp(no_peer, "1") == 0 && h.device != g_device) return record(cudaErrorPeerAccessUnsupported);
    for (auto &kv : g_live) /* opened before: the same pointer */
        if (kv.second.opened && kv.second.owner_pid == h.pid && kv.second.ipc_dev == h.dev &&
            kv.second.ipc_ino == h.ino) {
            kv.second.refs++;
            *out = (void *)kv.first;
            return cudaSuccess;
        }
    if (!arena_init()) return record(cudaErrorMemoryAllocation);
    const size_t guard = GUARD_PAGES * g_page;
    if (h.page_bytes % g_page || g_arena_used + h.page_bytes + guard > ARENA_BYTES)
        return record(cudaErrorMemoryAllocation);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return record(cudaErrorInvalidResourceHandle); /* the exporter is gone, or freed it */
    struct stat st;
    unsigned char *at = g_arena + g_arena_used;
    /* the same memfd (not another one that took the freed one's number), not truncated by a free */
    bool ok = fstat(fd, &st) == 0 && (uint64_t)st.st_dev == h.dev && (uint64_t)st.st_ino == h.ino &&
              (uint64_t)st.st_size >= h.page_bytes && map_shared(at, h.page_bytes, fd);
    close(fd); /* the mapping keeps the memory */
    if (!ok) return record(cudaErrorInvalidResourceHandle);
    g_arena_used += h.page_bytes + guard;
    Alloc a{h.bytes, at, h.page_bytes, h.device};
    a.opened = true, a.refs = 1, a.owner_pid = h.pid, a.ipc_dev = h.dev, a.ipc_ino = h.ino;
    g_live[(uintptr_t)(at + h.offset)] = a; /* not this process's memory: not in g_live_bytes */
    *out = at + h.offset;
    return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void *p) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    auto it = g_live.find((uintptr_t)p);
    if (it == g_live.end() || !it->second.opened) return record(cudaErrorInvalidValue);
    if (--it->second.refs > 0) return cudaSuccess;
    unmap_to_arena(it->second.pages, it->second.page_bytes);
    g_live.erase(it);
    return cudaSuccess;
}

/* the pool keeps nothing here: memory goes back at cudaFreeAsync */
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device) {
    if (!valid_device(device)) return record(cudaErrorInvalidDevice);
    static char the_pool;
    *pool = (cudaMemPool_t)&the_pool;
    return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void *) { return cudaSuccess; }

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return record(cudaErrorNotSupported);
    if (value < 0 || (size_t)value > OPTIN_SMEM) return record(cudaErrorInvalidValue);
    g_max_dyn_smem[func] = value;
    return cudaSuccess;
}

/* no driver: vmm.cu finds no entry points and falls back to plain buffers */
cudaError_t cudaGetDriverEntryPointByVersion(const char *, void **fn, unsigned int,
                                             unsigned long long,
                                             cudaDriverEntryPointQueryResult *status) {
    *fn = nullptr;
    if (status) *status = cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}
