/* vmm.cu - releasable device buffers (the table's alloc_releasable, commit,
 * release; backend.h) on CUDA's virtual memory management: a buffer is a
 * reservation of address space, and commit maps physical memory into it a
 * run of granules at a time (cuMemCreate + cuMemMap + cuMemSetAccess), so
 * FSDP holds a unit's full parameters and gradients only while it uses
 * them, at fixed addresses.
 *
 * The driver API is looked up at run time through the runtime
 * (cudaGetDriverEntryPointByVersion), never linked: libtitan-cuda.so must
 * load where libcuda.so.1 is missing (the backend then reports "no GPU" at
 * open). Where the driver or the device lacks VMM, a releasable buffer is an
 * ordinary cuda_alloc buffer, fully committed: commit does nothing and
 * release zeroes.
 *
 * Mappings are the unit of give-back (cuMemUnmap takes a whole mapping), and
 * ranges are not aligned to granules, so commit maps a range's partly
 * covered first and last granules on their own: releasing the range later
 * unmaps everything between them, and the two end granules, shared with the
 * neighbouring ranges, stay mapped and are zeroed over the released part.
 *
 * Ordering: compute kernels and the communicator's inputs are ordered after
 * the legacy default stream, so commit zeroes fresh memory there
 * (asynchronously), and release waits for that stream before it unmaps.
 * Work queued on other streams that touches a range must be waited for
 * before the range is released. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cudaTypedefs.h>

#include "cuda_ops.cuh"

/* The version whose ABI of these functions the typedefs below describe (all
 * date from 10.2 or earlier); the driver under a CUDA 12+ runtime has it. */
#define DRV_API_VERSION 12000

static struct {
    PFN_cuGetErrorName_v6000 GetErrorName;
    PFN_cuDeviceGet_v2000 DeviceGet;
    PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute;
    PFN_cuMemGetAllocationGranularity_v10020 MemGetAllocationGranularity;
    PFN_cuMemAddressReserve_v10020 MemAddressReserve;
    PFN_cuMemAddressFree_v10020 MemAddressFree;
    PFN_cuMemCreate_v10020 MemCreate;
    PFN_cuMemRelease_v10020 MemRelease;
    PFN_cuMemMap_v10020 MemMap;
    PFN_cuMemUnmap_v10020 MemUnmap;
    PFN_cuMemSetAccess_v10020 MemSetAccess;
    int ok;       /* everything resolved and the device supports VMM */
    int device;   /* the backend's GPU */
    size_t gran;  /* recommended granularity of pinned memory on it */
} g_drv;
static pthread_once_t g_drv_once = PTHREAD_ONCE_INIT;

static void *drv_symbol(const char *name) {
    void *fn = NULL;
#if CUDART_VERSION >= 12050
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e =
        cudaGetDriverEntryPointByVersion(name, &fn, DRV_API_VERSION, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) fn = NULL;
#else
    cudaError_t e = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault);
    if (e != cudaSuccess) fn = NULL;
#endif
    if (e != cudaSuccess) cudaGetLastError(); /* not sticky: clear it */
    return fn;
}

#define DRV_RESOLVE(f) (g_drv.f = (decltype(g_drv.f))drv_symbol("cu" #f)) != NULL

/* Pinned memory of the backend's GPU: what commit maps. */
static CUmemAllocationProp device_prop(void) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = g_drv.device;
    return prop;
}

static void drv_init(void) {
    g_drv.device = titan_cuda_device();
    if (!(DRV_RESOLVE(GetErrorName) && DRV_RESOLVE(DeviceGet) && DRV_RESOLVE(DeviceGetAttribute) &&
          DRV_RESOLVE(MemGetAllocationGranularity) && DRV_RESOLVE(MemAddressReserve) &&
          DRV_RESOLVE(MemAddressFree) && DRV_RESOLVE(MemCreate) && DRV_RESOLVE(MemRelease) &&
          DRV_RESOLVE(MemMap) && DRV_RESOLVE(MemUnmap) && DRV_RESOLVE(MemSetAccess)))
        return;
    CUdevice dev;
    int vmm = 0;
    if (g_drv.DeviceGet(&dev, g_drv.device) != CUDA_SUCCESS ||
        g_drv.DeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                 dev) != CUDA_SUCCESS || !vmm)
        return;
    CUmemAllocationProp prop = device_prop();
    size_t g = 0;
    if (g_drv.MemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) !=
            CUDA_SUCCESS || g == 0 || (g & (g - 1)) != 0)
        return;
    g_drv.gran = g;
    g_drv.ok = 1;
}

static void drv_fail(const char *file, int line, const char *stmt, CUresult r) {
    const char *name = NULL;
    if (g_drv.GetErrorName == NULL || g_drv.GetErrorName(r, &name) != CUDA_SUCCESS || !name)
        name = "unknown CUresult";
    char what[96];
    snprintf(what, sizeof what, "%s (%d)", name, (int)r);
    titan_cuda_panic(file, line, stmt, what);
}

#define DRV_CHECK(stmt)                                                         \
    do {                                                                        \
        CUresult drv_check_r_ = (stmt);                                         \
        if (drv_check_r_ != CUDA_SUCCESS) drv_fail(__FILE__, __LINE__, #stmt, drv_check_r_); \
    } while (0)

/* ---------------------------------------------------------------- registry */

typedef struct {
    size_t first, count; /* granules */
    CUmemGenericAllocationHandle handle;
} vmm_map;

typedef struct {
    char *base;
    size_t size;     /* bytes asked for */
    size_t reserved; /* address space: size rounded up to granules (VMM buffers) */
    int fallback;    /* an ordinary cuda_alloc buffer */
    vmm_map *map;    /* sorted by first, disjoint */
    size_t nmap, capmap;
} vmm_buf;

static struct {
    vmm_buf **buf;
    size_t n, cap;
} g_vmm;
static pthread_mutex_t g_vmm_mutex = PTHREAD_MUTEX_INITIALIZER;

/* The buffer holding [p, p + n), or NULL when p is in none; a range that
 * starts inside a buffer and runs past its end aborts. Under the mutex. */
static vmm_buf *buf_find(const void *p, size_t n, const char *op) {
    const char *c = (const char *)p;
    for (size_t i = 0; i < g_vmm.n; i++) {
        vmm_buf *b = g_vmm.buf[i];
        if (c < b->base || (size_t)(c - b->base) > b->size) continue;
        if ((size_t)(c - b->base) == b->size && n > 0) continue;
        if (n > b->size - (size_t)(c - b->base)) {
            pthread_mutex_unlock(&g_vmm_mutex);
            char what[160];
            snprintf(what, sizeof what,
                     "[%p, +%zu) runs past the end of releasable buffer %p (%zu bytes)", p, n,
                     (void *)b->base, b->size);
            titan_cuda_panic(__FILE__, __LINE__, op, what);
        }
        return b;
    }
    return NULL;
}

/* buf_find for commit and release, where p must be in a releasable buffer */
static vmm_buf *buf_get(const void *p, size_t n, const char *op) {
    vmm_buf *b = buf_find(p, n, op);
    if (!b) {
        pthread_mutex_unlock(&g_vmm_mutex);
        char what[96];
        snprintf(what, sizeof what, "%p is not in a releasable buffer of this backend", p);
        titan_cuda_panic(__FILE__, __LINE__, op, what);
    }
    return b;
}

/* index of the first mapping ending after granule i (b->nmap if none) */
static size_t map_after(const vmm_buf *b, size_t i) {
    size_t lo = 0, hi = b->nmap;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->map[mid].first + b->map[mid].count <= i) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Does [off, end) cover granules [first, first + count) (the part within size)? */
static int covers(const vmm_buf *b, size_t off, size_t end, size_t first, size_t count) {
    size_t g = g_drv.gran, lo = first * g, hi = (first + count) * g;
    if (hi > b->size) hi = b->size;
    return lo >= off && hi <= end;
}

static void map_remove(vmm_buf *b, size_t k) {
    const vmm_map *m = &b->map[k];
    size_t g = g_drv.gran;
    DRV_CHECK(g_drv.MemUnmap((CUdeviceptr)(b->base + m->first * g), m->count * g));
    DRV_CHECK(g_drv.MemRelease(m->handle));
    titan_cuda_mem_uncommit(m->count * g);
    memmove(&b->map[k], &b->map[k + 1], (b->nmap - k - 1) * sizeof *b->map);
    b->nmap--;
}

/* ------------------------------------------------------------------ alloc */

void *titan_cuda_vmm_alloc(size_t nbytes, void *(*fallback_alloc)(size_t)) {
    CUDA_CHECK(cudaSetDevice(titan_cuda_device())); /* and its context current, for the driver */
    pthread_once(&g_drv_once, drv_init);
    vmm_buf *b = (vmm_buf *)calloc(1, sizeof *b);
    if (!b) return NULL;
    b->size = nbytes;
    pthread_mutex_lock(&g_vmm_mutex); /* room in the registry first: nothing to undo after */
    if (g_vmm.n == g_vmm.cap) {
        size_t cap = g_vmm.cap ? 2 * g_vmm.cap : 16;
        vmm_buf **nb = (vmm_buf **)realloc(g_vmm.buf, cap * sizeof *nb);
        if (!nb) {
            pthread_mutex_unlock(&g_vmm_mutex);
            free(b);
            return NULL;
        }
        g_vmm.buf = nb, g_vmm.cap = cap;
    }
    if (!g_drv.ok) {
        b->fallback = 1;
        b->base = (char *)fallback_alloc(nbytes);
    } else {
        size_t g = g_drv.gran, n = nbytes ? nbytes : 1;
        CUdeviceptr base = 0;
        if (n <= SIZE_MAX - (g - 1)) {
            b->reserved = (n + g - 1) / g * g;
            if (g_drv.MemAddressReserve(&base, b->reserved, g, 0, 0) != CUDA_SUCCESS) base = 0;
        }
        b->base = (char *)base;
    }
    char *base = b->base;
    if (base) g_vmm.buf[g_vmm.n++] = b;
    else free(b);
    pthread_mutex_unlock(&g_vmm_mutex);
    return base;
}

/* Maps fresh memory at granules [first, first + count) and zeroes it; 0, or
 * -1 when the GPU's memory (or the host's, for the record) ran out. */
static int map_run(vmm_buf *b, size_t first, size_t count) {
    size_t g = g_drv.gran, bytes = count * g;
    CUdeviceptr at = (CUdeviceptr)(b->base + first * g);
    if (b->nmap == b->capmap) {
        size_t cap = b->capmap ? 2 * b->capmap : 8;
        vmm_map *nm = (vmm_map *)realloc(b->map, cap * sizeof *nm);
        if (!nm) return -1;
        b->map = nm, b->capmap = cap;
    }
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle h;
    if (!titan_cuda_mem_share_allows(bytes)) return -1;
    CUresult r = g_drv.MemCreate(&h, bytes, &prop, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return -1;
    DRV_CHECK(r);
    if ((r = g_drv.MemMap(at, bytes, 0, h, 0)) != CUDA_SUCCESS) {
        g_drv.MemRelease(h);
        if (r == CUDA_ERROR_OUT_OF_MEMORY) return -1;
        DRV_CHECK(r);
    }
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = g_drv.device;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if ((r = g_drv.MemSetAccess(at, bytes, &acc, 1)) != CUDA_SUCCESS) {
        g_drv.MemUnmap(at, bytes);
        g_drv.MemRelease(h);
        if (r == CUDA_ERROR_OUT_OF_MEMORY) return -1;
        DRV_CHECK(r);
    }
    /* fresh physical memory holds anything; kernels queued after this see zeros */
    CUDA_CHECK(cudaMemsetAsync((void *)at, 0, bytes, cudaStreamLegacy));
    size_t k = map_after(b, first);
    memmove(&b->map[k + 1], &b->map[k], (b->nmap - k) * sizeof *b->map);
    b->map[k].first = first, b->map[k].count = count, b->map[k].handle = h;
    b->nmap++;
    titan_cuda_mem_commit(bytes);
    return 0;
}

/* Maps every unmapped granule of [s, e), one mapping per run of them. */
static int map_gaps(vmm_buf *b, size_t s, size_t e) {
    size_t i = s;
    while (i < e) {
        size_t k = map_after(b, i);
        if (k < b->nmap && b->map[k].first <= i) { /* i is mapped: skip its mapping */
            i = b->map[k].first + b->map[k].count;
            continue;
        }
        size_t stop = k < b->nmap && b->map[k].first < e ? b->map[k].first : e;
        if (map_run(b, i, stop - i) != 0) return -1;
        i = stop;
    }
    return 0;
}

int titan_cuda_vmm_commit(void *p, size_t nbytes) {
    pthread_mutex_lock(&g_vmm_mutex);
    vmm_buf *b = buf_get(p, nbytes, "commit");
    if (b->fallback || nbytes == 0) {
        pthread_mutex_unlock(&g_vmm_mutex);
        return 0;
    }
    CUDA_CHECK(cudaSetDevice(g_drv.device));
    size_t g = g_drv.gran, off = (size_t)((char *)p - b->base), end = off + nbytes;
    size_t gs = off / g, ge = (end + g - 1) / g;
    /* the partly covered end granules become mappings of their own (see the top) */
    size_t ms = covers(b, off, end, gs, 1) ? gs : gs + 1;
    size_t me = covers(b, off, end, ge - 1, 1) ? ge : ge - 1;
    int st = 0;
    if (ms > gs) st = map_gaps(b, gs, gs + 1);
    if (st == 0 && ms < me) st = map_gaps(b, ms, me);
    if (st == 0 && me < ge && ge - 1 > gs) st = map_gaps(b, ge - 1, ge);
    pthread_mutex_unlock(&g_vmm_mutex);
    if (st != 0)
        titan_cuda_error(TITAN_ERR_NOMEM,
                         "cuda: committing %zu bytes of releasable memory: out of GPU memory",
                         nbytes);
    return st;
}

void titan_cuda_vmm_release(void *p, size_t nbytes) {
    pthread_mutex_lock(&g_vmm_mutex);
    vmm_buf *b = buf_get(p, nbytes, "release");
    if (nbytes == 0) {
        pthread_mutex_unlock(&g_vmm_mutex);
        return;
    }
    if (b->fallback) {
        pthread_mutex_unlock(&g_vmm_mutex);
        CUDA_CHECK(cudaMemsetAsync(p, 0, nbytes, cudaStreamLegacy));
        return;
    }
    CUDA_CHECK(cudaSetDevice(g_drv.device));
    size_t g = g_drv.gran, off = (size_t)((char *)p - b->base), end = off + nbytes;
    size_t gs = off / g, ge = (end + g - 1) / g;
    size_t k0 = map_after(b, gs), k1 = k0; /* mappings [k0, k1) overlap [gs, ge) */
    int unmap = 0;
    while (k1 < b->nmap && b->map[k1].first < ge) {
        unmap |= covers(b, off, end, b->map[k1].first, b->map[k1].count);
        k1++;
    }
    if (unmap) CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy)); /* kernels done with it */
    for (size_t k = k1; k-- > k0;) { /* backwards: removal shifts only later entries */
        const vmm_map *m = &b->map[k];
        if (covers(b, off, end, m->first, m->count)) {
            map_remove(b, k);
            continue;
        }
        size_t lo = m->first * g, hi = (m->first + m->count) * g;
        if (lo < off) lo = off;
        if (hi > end) hi = end;
        CUDA_CHECK(cudaMemsetAsync(b->base + lo, 0, hi - lo, cudaStreamLegacy));
    }
    pthread_mutex_unlock(&g_vmm_mutex);
}

int titan_cuda_vmm_free(void *p) {
    pthread_mutex_lock(&g_vmm_mutex);
    size_t i = 0;
    while (i < g_vmm.n && g_vmm.buf[i]->base != (char *)p) i++;
    if (i == g_vmm.n) {
        pthread_mutex_unlock(&g_vmm_mutex);
        return 0;
    }
    vmm_buf *b = g_vmm.buf[i];
    g_vmm.buf[i] = g_vmm.buf[--g_vmm.n];
    if (b->fallback) { /* an ordinary allocation from here on: the caller frees it */
        pthread_mutex_unlock(&g_vmm_mutex);
        free(b);
        return 0;
    }
    CUDA_CHECK(cudaSetDevice(g_drv.device));
    if (b->nmap) CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    while (b->nmap) map_remove(b, b->nmap - 1);
    DRV_CHECK(g_drv.MemAddressFree((CUdeviceptr)b->base, b->reserved));
    pthread_mutex_unlock(&g_vmm_mutex);
    free(b->map);
    free(b);
    return 1;
}
