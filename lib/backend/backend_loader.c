/* backend_loader.c - opens a backend by name. The CUDA backend is a separate
 * shared library (libtitan-cuda.so, built from kernels/ when nvcc exists) so
 * that titan builds and runs without CUDA; it is dlopen'ed on first use and
 * stays loaded for the life of the process. Lookup order: backend.h. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/log.h"

#define CUDA_LIB "libtitan-cuda.so"

/* The directory of the running executable, from /proc/self/exe; "" if unknown. */
static void exe_dir(char *dir, size_t len) {
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    dir[0] = '\0';
    if (n <= 0) return;
    path[n] = '\0';
    char *slash = strrchr(path, '/');
    if (!slash) return;
    *slash = '\0';
    snprintf(dir, len, "%s", path);
}

/* dlopen()s the first candidate that exists; NULL with the error recorded. */
static void *open_cuda_lib(void) {
    const char *env = getenv("TITAN_CUDA_LIB");
    if (env && *env) {
        void *h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (!h) titan_error(TITAN_ERR_USAGE, "cuda: TITAN_CUDA_LIB=%s: %s", env, dlerror());
        return h;
    }
    char dir[PATH_MAX], cand[2][PATH_MAX + 32];
    exe_dir(dir, sizeof dir);
    int ncand = 0;
    if (dir[0]) {
        snprintf(cand[ncand++], sizeof cand[0], "%s/%s", dir, CUDA_LIB);
        snprintf(cand[ncand++], sizeof cand[0], "%s/../lib/titan/%s", dir, CUDA_LIB);
    }
    for (int i = 0; i < ncand; i++) {
        if (access(cand[i], F_OK) != 0) continue;
        void *h = dlopen(cand[i], RTLD_NOW | RTLD_LOCAL);
        /* it exists but does not load: usually a missing CUDA runtime library */
        if (!h) titan_error(TITAN_ERR_USAGE, "cuda: %s", dlerror());
        return h;
    }
    void *h = dlopen(CUDA_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        titan_error(TITAN_ERR_USAGE,
                    "cuda: this titan has no CUDA backend (%s is not in %s, %s/../lib/titan "
                    "or the library path)",
                    CUDA_LIB, dir[0] ? dir : "the executable's directory", dir);
        titan_error_hint("build where nvcc is installed (make NVCC=/path/to/nvcc), or set "
                         "TITAN_CUDA_LIB to the library");
    }
    return h;
}

static void *cuda_handle; /* kept: tables live in the library */

/* The library, opened once; NULL with the error recorded. */
static void *cuda_lib(void) {
    if (!cuda_handle) cuda_handle = open_cuda_lib();
    return cuda_handle;
}

void *titan_backend_cuda_symbol(const char *name) {
    void *h = cuda_lib();
    if (!h) return NULL;
    dlerror();
    void *sym = dlsym(h, name);
    if (!sym) {
        const char *why = dlerror();
        titan_error(TITAN_ERR_USAGE, "cuda: %s has no %s (%s)", CUDA_LIB, name,
                    why ? why : "not found");
    }
    return sym;
}

titan_status titan_backend_cuda_device_count(int *count) {
    *count = 0;
    int (*fn)(char *, size_t) = (int (*)(char *, size_t))titan_backend_cuda_symbol("titan_cuda_device_count");
    if (!fn) return titan_error_code();
    char why[256] = "";
    int n = fn(why, sizeof why);
    if (n < 1) return titan_error(TITAN_ERR_USAGE, "cuda: %s", why);
    *count = n;
    return TITAN_OK;
}

/* "cuda" -> 0, "cuda:N" -> N; -1 when malformed */
static int cuda_ordinal(const char *device) {
    if (strcmp(device, "cuda") == 0) return 0;
    if (strncmp(device, "cuda:", 5) != 0) return -1;
    char *end;
    long n = strtol(device + 5, &end, 10);
    if (end == device + 5 || *end != '\0' || n < 0 || n > 1024) return -1;
    return (int)n;
}

static titan_status open_cuda(int ordinal, const titan_backend **out, char *desc, size_t len) {
    titan_backend_cuda_create_fn create =
        (titan_backend_cuda_create_fn)titan_backend_cuda_symbol("titan_backend_cuda_create");
    if (!create) return titan_error_code();
    /* The library reports errors (a commit out of GPU memory) through ours:
     * it cannot link against the executable's titan_error. */
    typedef titan_status (*error_fn)(titan_status, const char *, ...);
    void (*set_error)(error_fn) = (void (*)(error_fn))titan_backend_cuda_symbol("titan_cuda_set_error_fn");
    if (set_error) set_error(titan_error);
    else titan_error_clear(); /* an older library: its messages go to stderr */
    const titan_backend *be = create(sizeof(titan_backend), ordinal, desc, len);
    if (!be) return titan_error(TITAN_ERR_USAGE, "cuda: %s", desc);
    *out = be;
    return TITAN_OK;
}

titan_status titan_backend_open_desc(const char *device, const titan_backend **out, char *desc, size_t len) {
    *out = NULL;
    if (len) desc[0] = '\0';
    if (strcmp(device, "cpu") == 0) {
        *out = titan_backend_cpu();
        return TITAN_OK;
    }
    if (strcmp(device, "cpu-guard") == 0) {
        *out = titan_backend_cpu_guard();
        snprintf(desc, len, "the CPU backend with device-memory rules, for tests");
        return TITAN_OK;
    }
    if (strcmp(device, "auto") == 0) {
        if (open_cuda(0, out, desc, len) == TITAN_OK) return TITAN_OK;
        snprintf(desc, len, "auto: %s", titan_error_message());
        titan_error_clear();
        *out = titan_backend_cpu();
        return TITAN_OK;
    }
    int ordinal = cuda_ordinal(device);
    if (ordinal < 0) {
        titan_error(TITAN_ERR_USAGE, "'%s': unknown device", device);
        titan_error_hint("use cpu, cuda, cuda:N or auto");
        return TITAN_ERR_USAGE;
    }
    return open_cuda(ordinal, out, desc, len);
}

titan_status titan_backend_open(const char *device, const titan_backend **out) {
    char desc[512];
    TITAN_TRY(titan_backend_open_desc(device, out, desc, sizeof desc));
    if (strcmp(device, "auto") == 0)
        titan_info("device: %s (%s)", (*out)->name, desc);
    else if ((*out)->caps & TITAN_CAP_GPU)
        titan_debug("device: cuda (%s)", desc);
    return TITAN_OK;
}
