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
#include "core/plugin.h"

#define CUDA_LIB "libtitan-cuda.so"

/* NULL with the error recorded. */
static void *open_cuda_lib(void) {
    static const titan_plugin cuda = {
        .file = CUDA_LIB, .env = "TITAN_CUDA_LIB", .what = "cuda", .missing = "CUDA backend",
        .hint = "build where nvcc is installed (make NVCC=/path/to/nvcc), or set TITAN_CUDA_LIB to "
                "the library",
        .flags = RTLD_NOW | RTLD_LOCAL};
    return titan_plugin_open(&cuda);
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
