/* plugin.h - finding and opening titan's optional shared libraries
 * (libtitan-cuda.so, libtitan-mpi.so): built only where their toolchains
 * exist, so that the tools build and run without them, and dlopen'ed on
 * first use. Lookup order: the file an environment variable names; beside
 * the executable; ../lib/titan from it (an installed tree); the dynamic
 * linker's path. */
#ifndef TITAN_CORE_PLUGIN_H
#define TITAN_CORE_PLUGIN_H

typedef struct {
    const char *file;    /* "libtitan-cuda.so" */
    const char *env;     /* "TITAN_CUDA_LIB": overrides the search */
    const char *what;    /* message prefix: "cuda", "comm world: mpi" */
    const char *missing; /* "CUDA backend": "this titan has no <missing>" */
    const char *hint;    /* how to get one, for the not-found error */
    int flags;           /* dlopen flags (RTLD_NOW | RTLD_LOCAL, ...) */
} titan_plugin;

/* The library's handle, or NULL with a TITAN_ERR_USAGE error naming the
 * candidates (or the reason one that exists does not load). */
void *titan_plugin_open(const titan_plugin *p);

#endif
