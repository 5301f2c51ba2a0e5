/* test_vmm_mock.cpp - kernels/vmm.cu (releasable device memory on CUDA's
 * virtual memory management) linked against a host mock of the CUDA runtime
 * and driver calls it makes, so the suite checks commit, release and free
 * on machines without a GPU.
 *
 * What is mocked: cudaGetDriverEntryPointByVersion hands vmm.cu the mock
 * driver below. cuMemAddressReserve returns host memory; cuMemCreate,
 * cuMemMap, cuMemUnmap, cuMemSetAccess and cuMemRelease keep a state per
 * granule (4 KiB here) and check their arguments: whole mappings only, no
 * map over a mapping, access only to mapped memory, no address space freed
 * while mapped. A fresh mapping holds garbage (0xEE), an unmapped one 0xDD.
 * cudaMemsetAsync writes at once, must hit mapped, accessible memory and
 * leaves its granules "queued" on the legacy stream until
 * cudaStreamSynchronize; the test's device writes queue their granules too.
 * These definitions in the executable take precedence over libcudart's for
 * vmm.o's calls (libcudart is linked only for vmm.o's fat-binary
 * registration). The backend's hooks vmm.cu calls (titan_cuda_device, the
 * memory() accounting, titan_cuda_error, titan_cuda_panic) are defined here.
 *
 * The model check: random commits, releases and device writes over buffers
 * of 0 bytes to 20 granules and a bit, with a model of each byte (usable or
 * not, its value), checked after every step against backend.h's contract:
 *   - commit makes [p, p + n) usable; bytes it made usable read 0; bytes
 *     already usable keep their values; it unmaps nothing and never waits;
 *   - release makes the range read as zeros, unmaps every mapping wholly
 *     inside it (clipped to the buffer's size) and nothing else, leaves the
 *     bytes outside it as they were, and waits for the stream exactly once
 *     when it unmaps something (never otherwise);
 *   - no granule is unmapped while work queued on it was not synchronised;
 *   - the accounting (titan_cuda_mem_commit / _uncommit) equals the mapped
 *     bytes, no physical allocation is left unmapped, and free gives back
 *     everything;
 *   - out of memory in cuMemCreate, cuMemMap or cuMemSetAccess (injected at
 *     random, and from a physical budget) makes commit return -1 with
 *     TITAN_ERR_NOMEM, leaks nothing, and the same commit succeeds once the
 *     memory is back;
 *   - FSDP's pattern (adjacent unaligned units committed and released in
 *     turn) keeps at most one granule per boundary mapped;
 *   - a range running past its buffer, or outside every buffer, aborts
 *     naming the op (one child process per case);
 *   - the fallback (cuMemMap missing; a device without VMM): alloc returns
 *     fallback_alloc's buffer, commit does nothing, release zeroes exactly
 *     the range, free leaves the buffer to the caller.
 * vmm.cu looks the driver up once per process (pthread_once), so the
 * fallback and misuse checks run in child processes forked before the
 * parent makes any vmm call; the parent then runs the VMM checks.
 *
 * What it cannot check: the real driver. The granularity (2 MiB on current
 * GPUs), what cuMemUnmap does with work still running, how the legacy
 * stream orders against other streams, the real entry-point lookup and the
 * cost of mapping are the mock's reading of the CUDA documentation; only a
 * run on a GPU confirms them.
 *
 * About 0.5 s on one core. One line per mode; exit 0 when all pass, 1
 * otherwise (with the mode, step and cause on stderr). */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <set>
#include <vector>

#include "core/error.h"

/* vmm.cu's entry points and the backend hooks it calls, as
 * kernels/cuda_ops.cuh declares them (that header needs nvcc; the linker
 * checks these against vmm.o's C++ names) */
void *titan_cuda_vmm_alloc(size_t nbytes, void *(*fallback_alloc)(size_t));
int titan_cuda_vmm_commit(void *p, size_t nbytes);
void titan_cuda_vmm_release(void *p, size_t nbytes);
int titan_cuda_vmm_free(void *p);
int titan_cuda_device(void);
void titan_cuda_mem_commit(size_t nbytes);
void titan_cuda_mem_uncommit(size_t nbytes);
int titan_cuda_mem_share_allows(size_t nbytes);
void titan_cuda_error(titan_status code, const char *fmt, ...);
[[noreturn]] void titan_cuda_panic(const char *file, int line, const char *stmt, const char *what);

#define G 4096 /* the mock's granularity */

static const char *g_mode = "vmm"; /* the checks running, for messages */
static char g_where[160] = "setup"; /* the step running, for messages */

[[noreturn]] static void fail(const char *what) {
    fprintf(stderr, "test_vmm_mock: %s: %s: %s\n", g_mode, g_where, what);
    exit(1);
}

/* ------------------------------------------------------------ backend hooks */

static size_t g_in_use, g_peak; /* committed bytes, as memory() counts them */
static int g_errs, g_last_err;
static char g_last_msg[256];
static const char *g_expect_panic; /* the op whose panic ends a misuse check */
static void *g_fb_last;            /* fallback_alloc's last buffer */

int titan_cuda_device(void) { return 0; }

void titan_cuda_mem_commit(size_t n) {
    g_in_use += n;
    if (g_in_use > g_peak) g_peak = g_in_use;
}

void titan_cuda_mem_uncommit(size_t n) {
    if (n > g_in_use) fail("uncommit of more than is committed");
    g_in_use -= n;
}

int titan_cuda_mem_share_allows(size_t) { return 1; } /* no GPU shared here */

void titan_cuda_error(titan_status code, const char *fmt, ...) {
    g_errs++;
    g_last_err = code;
    va_list ap; /* kept, not printed: the expected ones would clutter the log */
    va_start(ap, fmt);
    vsnprintf(g_last_msg, sizeof g_last_msg, fmt, ap);
    va_end(ap);
}

void titan_cuda_panic(const char *file, int line, const char *stmt, const char *what) {
    if (g_expect_panic && strcmp(stmt, g_expect_panic) == 0) exit(0);
    fprintf(stderr, "test_vmm_mock: %s: %s: panic at %s:%d: %s: %s\n", g_mode, g_where, file,
            line, stmt, what);
    exit(1);
}

static void *fb_alloc(size_t n) {
    g_fb_last = calloc(1, n ? n : 1);
    return g_fb_last;
}

/* ------------------------------------------------------------- mock driver */

/* A reservation: host memory standing in for address space, and per
 * granule the handle mapped there (0: none) and whether it is accessible. */
struct Resv {
    char *p;
    size_t size;
    std::vector<int> handle;
    std::vector<char> access;
};
struct Handle {
    size_t size;
    int mapped;
};
struct Mapping {
    size_t size;
    int handle;
};

static std::map<uintptr_t, Resv> g_resv;      /* by start address */
static std::map<int, Handle> g_handles;       /* physical allocations */
static std::map<uintptr_t, Mapping> g_maps;   /* by start address */
static std::set<uintptr_t> g_queued;          /* granules with unsynchronised work */
static int g_next_handle = 1;
static long g_budget = -1; /* physical bytes left; -1: unlimited */
static int g_syncs, g_driver_calls;

/* fault injection: the fail_after-th call of fail_fn (from 1) runs out of memory */
enum { FN_NONE, FN_CREATE, FN_MAP, FN_ACCESS };
static int g_fail_fn = FN_NONE, g_fail_after, g_fail_hit;

/* the fallback's cause: none (VMM works), cuMemMap missing, a device without VMM */
enum { VMM_OK, VMM_NO_SYMBOL, VMM_NO_DEVICE_SUPPORT };
static int g_vmm = VMM_OK;

static int inject(int fn) {
    if (g_fail_fn != fn || --g_fail_after > 0) return 0;
    g_fail_fn = FN_NONE;
    g_fail_hit = 1;
    return 1;
}

/* the reservation holding [a, a + n), or NULL */
static Resv *resv_of(uintptr_t a, size_t n) {
    auto it = g_resv.upper_bound(a);
    if (it == g_resv.begin()) return NULL;
    --it;
    if (a < it->first || a + n > it->first + it->second.size) return NULL;
    return &it->second;
}

/* the granule index of a in r, checking a is a granule boundary inside r */
static size_t granule_of(const Resv *r, uintptr_t a, const char *op) {
    if (!r || (a - (uintptr_t)r->p) % G) fail(op);
    return (a - (uintptr_t)r->p) / G;
}

static int device_prop_ok(const CUmemAllocationProp *p) {
    return p->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
           p->location.type == CU_MEM_LOCATION_TYPE_DEVICE && p->location.id == 0;
}

static CUresult GetErrorName(CUresult, const char **s) {
    *s = "MOCK_ERROR";
    return CUDA_SUCCESS;
}

static CUresult DeviceGet(CUdevice *d, int ordinal) {
    if (ordinal != 0) fail("cuDeviceGet: not the backend's device");
    *d = ordinal;
    return CUDA_SUCCESS;
}

static CUresult DeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice) {
    *v = a == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED && g_vmm == VMM_OK;
    return CUDA_SUCCESS;
}

static CUresult GetGranularity(size_t *g, const CUmemAllocationProp *p,
                               CUmemAllocationGranularity_flags f) {
    if (!device_prop_ok(p) || f != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        fail("cuMemGetAllocationGranularity: not pinned device memory, recommended");
    *g = G;
    return CUDA_SUCCESS;
}

static CUresult AddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                               unsigned long long flags) {
    g_driver_calls++;
    if (size == 0 || size % G || align != G || addr || flags)
        fail("cuMemAddressReserve: bad arguments");
    char *p = (char *)aligned_alloc(G, size + G); /* + a gap: reservations never touch */
    if (!p) fail("out of host memory");
    memset(p, 0xCD, size);
    Resv r;
    r.p = p;
    r.size = size;
    r.handle.assign(size / G, 0);
    r.access.assign(size / G, 0);
    g_resv[(uintptr_t)p] = r;
    *ptr = (CUdeviceptr)p;
    return CUDA_SUCCESS;
}

static CUresult AddressFree(CUdeviceptr p, size_t size) {
    g_driver_calls++;
    auto it = g_resv.find((uintptr_t)p);
    if (it == g_resv.end() || it->second.size != size)
        fail("cuMemAddressFree: not a whole reservation");
    for (int h : it->second.handle)
        if (h) fail("cuMemAddressFree: a reservation still mapped");
    free(it->second.p);
    g_resv.erase(it);
    return CUDA_SUCCESS;
}

static CUresult Create(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *p,
                       unsigned long long flags) {
    g_driver_calls++;
    if (size == 0 || size % G || flags || !device_prop_ok(p)) fail("cuMemCreate: bad arguments");
    if (inject(FN_CREATE)) return CUDA_ERROR_OUT_OF_MEMORY;
    if (g_budget >= 0) {
        if ((long)size > g_budget) return CUDA_ERROR_OUT_OF_MEMORY;
        g_budget -= (long)size;
    }
    int id = g_next_handle++;
    g_handles[id] = {size, 0};
    *h = (CUmemGenericAllocationHandle)id;
    return CUDA_SUCCESS;
}

/* The real driver defers the release of a mapped allocation; vmm.cu
 * releases only what it unmapped (or never mapped), and the mock holds it
 * to that. */
static CUresult Release(CUmemGenericAllocationHandle h) {
    g_driver_calls++;
    auto it = g_handles.find((int)h);
    if (it == g_handles.end()) fail("cuMemRelease: unknown handle");
    if (it->second.mapped) fail("cuMemRelease: handle still mapped");
    if (g_budget >= 0) g_budget += (long)it->second.size;
    g_handles.erase(it);
    return CUDA_SUCCESS;
}

static CUresult Map(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                    unsigned long long flags) {
    g_driver_calls++;
    auto it = g_handles.find((int)h);
    if (it == g_handles.end() || it->second.size != size || offset || flags || it->second.mapped)
        fail("cuMemMap: bad arguments");
    Resv *r = resv_of(p, size);
    size_t g0 = granule_of(r, p, "cuMemMap: outside a reservation or unaligned");
    for (size_t i = g0; i < g0 + size / G; i++)
        if (r->handle[i]) fail("cuMemMap: over a mapping");
    if (inject(FN_MAP)) return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = g0; i < g0 + size / G; i++) r->handle[i] = (int)h;
    memset((void *)p, 0xEE, size); /* fresh physical memory holds anything */
    it->second.mapped = 1;
    g_maps[p] = {size, (int)h};
    return CUDA_SUCCESS;
}

static CUresult Unmap(CUdeviceptr p, size_t size) {
    g_driver_calls++;
    auto it = g_maps.find(p);
    if (it == g_maps.end() || it->second.size != size) fail("cuMemUnmap: not a whole mapping");
    Resv *r = resv_of(p, size);
    size_t g0 = granule_of(r, p, "cuMemUnmap: outside a reservation");
    for (size_t i = g0; i < g0 + size / G; i++)
        if (g_queued.count((uintptr_t)r->p + i * G))
            fail("cuMemUnmap: work queued on the granule was not synchronised");
    for (size_t i = g0; i < g0 + size / G; i++) r->handle[i] = 0, r->access[i] = 0;
    memset((void *)p, 0xDD, size);
    g_handles[it->second.handle].mapped = 0;
    g_maps.erase(it);
    return CUDA_SUCCESS;
}

static CUresult SetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *d, size_t n) {
    g_driver_calls++;
    if (n != 1 || d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE ||
        d->location.type != CU_MEM_LOCATION_TYPE_DEVICE || d->location.id != 0)
        fail("cuMemSetAccess: not read-write for the backend's device");
    Resv *r = resv_of(p, size);
    size_t g0 = granule_of(r, p, "cuMemSetAccess: outside a reservation or unaligned");
    for (size_t i = g0; i < g0 + size / G; i++)
        if (!r->handle[i]) fail("cuMemSetAccess: on unmapped memory");
    if (inject(FN_ACCESS)) return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = g0; i < g0 + size / G; i++) r->access[i] = 1;
    return CUDA_SUCCESS;
}

/* work on the legacy stream touching [p, p + n) of a reservation: queued
 * until the next synchronisation */
static void queue_work(const void *p, size_t n, const char *what) {
    Resv *r = resv_of((uintptr_t)p, n);
    if (!r || n == 0) return;
    size_t off = (size_t)((const char *)p - r->p);
    for (size_t i = off / G; i < (off + n + G - 1) / G; i++) {
        if (!r->handle[i] || !r->access[i]) fail(what);
        g_queued.insert((uintptr_t)r->p + i * G);
    }
}

/* ----------------------------------------------------------- mock runtime */

extern "C" {
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags,
                                             cudaDriverEntryPointQueryResult *q) {
    static const struct {
        const char *name;
        void *fn;
    } table[] = {
        {"cuGetErrorName", (void *)GetErrorName},
        {"cuDeviceGet", (void *)DeviceGet},
        {"cuDeviceGetAttribute", (void *)DeviceGetAttribute},
        {"cuMemGetAllocationGranularity", (void *)GetGranularity},
        {"cuMemAddressReserve", (void *)AddressReserve},
        {"cuMemAddressFree", (void *)AddressFree},
        {"cuMemCreate", (void *)Create},
        {"cuMemRelease", (void *)Release},
        {"cuMemMap", (void *)Map},
        {"cuMemUnmap", (void *)Unmap},
        {"cuMemSetAccess", (void *)SetAccess},
    };
    *fn = NULL;
    if (q) *q = cudaDriverEntryPointSymbolNotFound;
    if (g_vmm == VMM_NO_SYMBOL && strcmp(symbol, "cuMemMap") == 0) return cudaSuccess;
    for (const auto &e : table)
        if (strcmp(e.name, symbol) == 0) {
            *fn = e.fn;
            if (q) *q = cudaDriverEntryPointSuccess;
            return cudaSuccess;
        }
    fail("cudaGetDriverEntryPointByVersion: a symbol the mock does not know");
}

cudaError_t cudaSetDevice(int device) {
    if (device != 0) fail("cudaSetDevice: not the backend's device");
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (s != cudaStreamLegacy) fail("cudaStreamSynchronize: not the legacy default stream");
    g_syncs++;
    g_queued.clear();
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s) {
    if (s != cudaStreamLegacy) fail("cudaMemsetAsync: not the legacy default stream");
    queue_work(p, n, "cudaMemsetAsync: on memory not mapped or not accessible");
    memset(p, value, n);
    return cudaSuccess;
}
} /* extern "C" */

/* ------------------------------------------------------------ model check */

static uint64_t g_rng = 88172645463325252ull;

/* uniform-ish in [0, n); 0 when n is 0 */
static size_t rnd(size_t n) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return n ? (size_t)(g_rng % n) : 0;
}

static size_t mapped_bytes(void) {
    size_t s = 0;
    for (const auto &m : g_maps) s += m.second.size;
    return s;
}

/* which bytes of [b, b + size) are mapped */
static std::vector<char> mapped_state(char *b, size_t size) {
    std::vector<char> m(size);
    Resv *r = size ? resv_of((uintptr_t)b, size) : NULL;
    if (size && !r) fail("buffer is not a reservation");
    for (size_t i = 0; i < size; i++) m[i] = r->handle[(size_t)(b - r->p + i) / G] != 0;
    return m;
}

/* A buffer and what the test knows of each byte: usable (committed and
 * not released since) and its value. */
struct Model {
    char *b;
    size_t size;
    std::vector<char> usable;
    std::vector<unsigned char> val;
};

static int g_commits, g_releases, g_injected;

/* commit [o, o + n), sometimes with an out-of-memory injected, and check it */
static void step_commit(Model &m, size_t o, size_t n) {
    std::vector<char> was = mapped_state(m.b, m.size);
    int syncs = g_syncs, errs = g_errs;
    if (rnd(4) == 0) {
        g_fail_fn = 1 + (int)rnd(3);
        g_fail_after = 1 + (int)rnd(3);
    }
    g_fail_hit = 0;
    int st = titan_cuda_vmm_commit(m.b + o, n);
    g_fail_fn = FN_NONE;
    g_commits++;
    if (st != 0 && st != -1) fail("commit returned neither 0 nor -1");
    if (st != 0 && !g_fail_hit) fail("commit failed with memory to spare");
    if (st == 0 && g_fail_hit) fail("commit ignored an out-of-memory");
    if (st != 0 && (g_errs != errs + 1 || g_last_err != TITAN_ERR_NOMEM))
        fail("out of memory in commit is not one TITAN_ERR_NOMEM error");
    if (st == 0 && g_errs != errs) fail("a successful commit recorded an error");
    if (g_syncs != syncs) fail("commit waited for the stream");
    g_injected += st != 0;

    std::vector<char> now = mapped_state(m.b, m.size);
    for (size_t i = 0; i < m.size; i++) {
        if (was[i] && !now[i]) fail("commit unmapped something");
        if (st == 0 && i >= o && i < o + n && !now[i]) fail("commit left a byte unusable");
        if (now[i] && !was[i]) {
            if (m.b[i] != 0) fail("a freshly committed byte is not zero");
            m.usable[i] = 1;
            m.val[i] = 0;
        }
        if (now[i] && was[i] && (unsigned char)m.b[i] != m.val[i]) fail("commit changed data");
    }
}

/* release [o, o + n) and check it */
static void step_release(Model &m, size_t o, size_t n) {
    std::vector<char> was = mapped_state(m.b, m.size);
    size_t before = g_maps.size();
    int syncs = g_syncs;
    titan_cuda_vmm_release(m.b + o, n);
    g_releases++;
    int unmapped = g_maps.size() != before;
    if (unmapped && g_syncs != syncs + 1) fail("release unmapped without waiting once");
    if (!unmapped && g_syncs != syncs) fail("release waited with nothing to unmap");

    std::vector<char> now = mapped_state(m.b, m.size);
    for (size_t i = 0; i < m.size; i++) {
        int in = i >= o && i < o + n;
        if (!was[i] && now[i]) fail("release mapped something");
        if (!in && was[i] != now[i]) fail("release unmapped outside the range");
        if (in && now[i] && m.b[i] != 0) fail("a released byte is not zero");
        if (!in && now[i] && (unsigned char)m.b[i] != m.val[i])
            fail("release changed data outside the range");
        if (!now[i]) m.usable[i] = 0;
        else if (in) m.val[i] = 0;
    }
    /* every mapping wholly inside the range (clipped to size) is gone */
    uintptr_t lo = (uintptr_t)(m.b + o), hi = (uintptr_t)(m.b + o + n);
    uintptr_t end = (uintptr_t)(m.b + m.size);
    for (const auto &mp : g_maps) {
        uintptr_t s = mp.first, e = mp.first + mp.second.size;
        if (s < (uintptr_t)m.b || s >= end) continue;
        if (e > end) e = end;
        if (n && s >= lo && e <= hi) fail("a mapping wholly inside the released range stayed");
    }
}

/* the device writes random values into some usable bytes of [o, o + n) */
static void step_write(Model &m, size_t o, size_t n) {
    for (size_t i = o; i < o + n; i++) {
        if (!m.usable[i] || rnd(3) != 0) continue;
        m.val[i] = (unsigned char)(1 + rnd(255));
        m.b[i] = (char)m.val[i];
        queue_work(m.b + i, 1, "the test wrote to a byte not usable");
    }
}

static void check_invariants(const Model &m) {
    std::vector<char> now = mapped_state(m.b, m.size);
    for (size_t i = 0; i < m.size; i++)
        if (m.usable[i] != now[i]) fail("the model and the mappings disagree");
    if (g_in_use != mapped_bytes()) fail("committed bytes are not the mapped bytes");
    if (g_handles.size() != g_maps.size()) fail("a physical allocation is not mapped (leak)");
}

static void random_test(size_t size, int steps) {
    snprintf(g_where, sizeof g_where, "size %zu: alloc", size);
    Model m;
    m.b = (char *)titan_cuda_vmm_alloc(size, fb_alloc);
    if (!m.b || (uintptr_t)m.b % G) fail("alloc gave no granule-aligned buffer");
    m.size = size;
    m.usable.assign(size, 0);
    m.val.assign(size, 0);
    for (int s = 0; s < steps; s++) {
        size_t o = rnd(size + 1), n = rnd(size - o + 1);
        if (rnd(4) == 0 && size) { /* granule-aligned ranges, clipped to the buffer */
            o = rnd(size / G + 1) * G;
            if (o > size) o = size;
            n = rnd((size - o) / G + 1) * G;
            if (o + n > size) n = size - o;
        }
        int op = (int)rnd(3);
        snprintf(g_where, sizeof g_where, "size %zu: step %d: %s [%zu, +%zu)", size, s,
                 op == 0 ? "commit" : op == 1 ? "release" : "device write", o, n);
        if (op == 0) step_commit(m, o, n);
        else if (op == 1) step_release(m, o, n);
        else step_write(m, o, n);
        check_invariants(m);
    }
    snprintf(g_where, sizeof g_where, "size %zu: free", size);
    if (!titan_cuda_vmm_free(m.b)) fail("free did not recognise a VMM buffer");
    if (g_in_use != 0 || !g_maps.empty() || !g_handles.empty()) fail("free left memory behind");
}

/* FSDP's pattern: adjacent unaligned units committed and released in turn;
 * returns the bytes still mapped at the end (the boundary granules) */
static size_t fsdp_test(size_t units, size_t unit_size) {
    size_t size = units * unit_size + 77;
    char *b = (char *)titan_cuda_vmm_alloc(size, fb_alloc);
    if (!b) fail("alloc");
    for (int step = 0; step < 3; step++)
        for (size_t u = 0; u < units; u++) {
            snprintf(g_where, sizeof g_where, "fsdp: step %d: unit %zu", step, u);
            if (titan_cuda_vmm_commit(b + u * unit_size, unit_size)) fail("commit failed");
            titan_cuda_vmm_release(b + u * unit_size, unit_size);
            if (mapped_bytes() > (units + 1) * G)
                fail("released memory was not given back (more than a granule per boundary)");
        }
    size_t left = mapped_bytes();
    snprintf(g_where, sizeof g_where, "fsdp: release of the whole buffer");
    titan_cuda_vmm_release(b, size);
    if (mapped_bytes() != 0) fail("releasing everything left mappings");
    titan_cuda_vmm_free(b);
    return left;
}

/* out of physical memory from a budget: -1 with TITAN_ERR_NOMEM, what was
 * mapped so far stays and is counted, and the same commit works once the
 * memory is back */
static void budget_test(void) {
    snprintf(g_where, sizeof g_where, "physical budget of 2 granules: commit of 6");
    char *b = (char *)titan_cuda_vmm_alloc(10 * G, fb_alloc);
    if (!b) fail("alloc");
    g_budget = 2 * G;
    if (titan_cuda_vmm_commit(b + G, 6 * G) != -1 || g_last_err != TITAN_ERR_NOMEM)
        fail("out of memory is not -1 with TITAN_ERR_NOMEM");
    if (!strstr(g_last_msg, "out of GPU memory")) fail("the error does not say out of GPU memory");
    if (g_in_use != mapped_bytes()) fail("committed bytes are not the mapped bytes");
    g_budget = -1;
    snprintf(g_where, sizeof g_where, "physical budget: commit once memory is back");
    if (titan_cuda_vmm_commit(b + G, 6 * G) != 0) fail("commit failed after out of memory");
    titan_cuda_vmm_free(b);
    if (g_in_use) fail("free left committed bytes");
}

static void vmm_checks(void) {
    const size_t sizes[] = {0, 1, G - 1, G, G + 1, 3 * G, 7 * G + 5, 20 * G + 1234};
    const int steps = 400;
    for (size_t s : sizes) random_test(s, steps);
    size_t units = 8, unit_size = 5 * G + 123;
    size_t left = fsdp_test(units, unit_size);
    budget_test();
    snprintf(g_where, sizeof g_where, "free of a foreign pointer");
    int x;
    if (titan_cuda_vmm_free(&x) != 0) fail("free claimed a pointer it never gave out");
    printf("vmm: ok: %zu buffer sizes x %d random steps (%d commits, %d out of memory, "
           "%d releases); fsdp %zu units of %zu bytes leave %zu bytes mapped; peak %zu bytes "
           "committed, %d syncs\n",
           sizeof sizes / sizeof *sizes, steps, g_commits, g_injected, g_releases, units,
           unit_size, left, g_peak, g_syncs);
}

/* -------------------------------------------------- fallback, misuse, main */

static void fallback_checks(int) {
    snprintf(g_where, sizeof g_where, "alloc of 1000 bytes");
    char *b = (char *)titan_cuda_vmm_alloc(1000, fb_alloc);
    if (!b || b != g_fb_last) fail("alloc did not return fallback_alloc's buffer");
    snprintf(g_where, sizeof g_where, "commit [10, +100)");
    if (titan_cuda_vmm_commit(b + 10, 100) != 0) fail("commit failed");
    memset(b, 7, 1000);
    snprintf(g_where, sizeof g_where, "release [10, +100)");
    titan_cuda_vmm_release(b + 10, 100);
    for (int i = 0; i < 1000; i++)
        if (b[i] != ((i >= 10 && i < 110) ? 0 : 7)) fail("release did not zero exactly the range");
    if (g_driver_calls != 0 || g_in_use != 0) fail("alloc, commit or release mapped memory");
    snprintf(g_where, sizeof g_where, "free");
    if (titan_cuda_vmm_free(b) != 0) fail("free took a fallback buffer from its caller");
    if (titan_cuda_vmm_free(b) != 0) fail("a fallback buffer was not forgotten at free");
    free(b);
    printf("%s: ok: alloc from fallback_alloc, commit a no-op, release zeroes the range, "
           "free leaves the buffer to its caller\n",
           g_mode);
}

/* each case must end in titan_cuda_panic naming the op (its child exits 0 there) */
static void misuse_case(int which) {
    char *b = (char *)titan_cuda_vmm_alloc(3 * G, fb_alloc);
    int x;
    if (!b) fail("alloc");
    if (titan_cuda_vmm_commit(b, 3 * G) != 0) fail("commit failed");
    g_expect_panic = which == 2 ? "release" : "commit";
    if (which == 0) titan_cuda_vmm_commit(b + 5, 3 * G);
    if (which == 1) titan_cuda_vmm_commit(&x, 1);
    if (which == 2) titan_cuda_vmm_release(b + 3 * G - 1, 2);
    fail("did not abort");
}

static const char *const MISUSE[] = {
    "commit running past the end of its buffer",
    "commit of memory outside every buffer",
    "release running past the end of its buffer",
};

/* runs fn(arg) in a child process; 0 when it exited 0 */
static int run_child(const char *mode, int vmm, void (*fn)(int), int arg) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("test_vmm_mock: fork");
        return 1;
    }
    if (pid == 0) {
        g_mode = mode;
        g_vmm = vmm;
        fn(arg);
        fflush(stdout);
        exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        perror("test_vmm_mock: waitpid");
        return 1;
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status) != 0;
    fprintf(stderr, "test_vmm_mock: %s: killed by signal %d\n", mode,
            WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return 1;
}

int main(void) {
    int failed = 0;
    /* before any vmm call here: each child looks the driver up afresh */
    failed |= run_child("fallback (no cuMemMap)", VMM_NO_SYMBOL, fallback_checks, 0);
    failed |= run_child("fallback (device without VMM)", VMM_NO_DEVICE_SUPPORT, fallback_checks, 0);
    int misuse_failed = 0, cases = (int)(sizeof MISUSE / sizeof *MISUSE);
    for (int i = 0; i < cases; i++) {
        snprintf(g_where, sizeof g_where, "%s", MISUSE[i]);
        misuse_failed |= run_child("misuse", VMM_OK, misuse_case, i);
    }
    if (!misuse_failed) printf("misuse: ok: %d bad ranges abort naming the op\n", cases);
    failed |= misuse_failed;
    snprintf(g_where, sizeof g_where, "setup");
    vmm_checks();
    return failed;
}
