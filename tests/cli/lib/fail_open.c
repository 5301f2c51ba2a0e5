/* fail_open.c - an LD_PRELOAD shim for CLI tests (not part of titan): a
 * create-open (O_CREAT) of a path ending in $FAIL_OPEN_SUFFIX fails with
 * ENOSPC, every other open goes through. It makes one rank's checkpoint
 * data file unwritable, deterministically and even as root (permissions do
 * not stop root). Built by the test that uses it:
 *   cc -shared -fPIC -o fail_open.so fail_open.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int refused(const char *path, int flags) {
    const char *suffix = getenv("FAIL_OPEN_SUFFIX");
    if (!suffix || !*suffix || !path || !(flags & O_CREAT)) return 0;
    size_t n = strlen(path), m = strlen(suffix);
    return n >= m && strcmp(path + n - m, suffix) == 0;
}

static int call(const char *sym, const char *path, int flags, mode_t mode) {
    int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, sym);
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    return real(path, flags, mode);
}

/* open and open64 alike: the mode argument exists only with O_CREAT. */
#define FAIL_OPEN_WRAPPER(name)                                  \
    int name(const char *path, int flags, ...) {                 \
        mode_t mode = 0;                                         \
        if (flags & O_CREAT) {                                   \
            va_list ap;                                          \
            va_start(ap, flags);                                 \
            mode = (mode_t)va_arg(ap, int);                      \
            va_end(ap);                                          \
        }                                                        \
        if (refused(path, flags)) {                              \
            errno = ENOSPC;                                      \
            return -1;                                           \
        }                                                        \
        return call(#name, path, flags, mode);                   \
    }

FAIL_OPEN_WRAPPER(open)
FAIL_OPEN_WRAPPER(open64)
