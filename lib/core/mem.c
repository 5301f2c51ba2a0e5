/* mem.c - aligned allocation that reports failure instead of exiting. */
#include "mem.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "error.h"

void *titan_alloc(size_t nbytes, const char *what) {
    void *p = NULL;
    size_t n = (nbytes + 63) & ~(size_t)63;
    if (n == 0) n = 64;
    if (posix_memalign(&p, 64, n) != 0) {
        titan_error(TITAN_ERR_NOMEM, "%s: cannot allocate %zu bytes", what ? what : "buffer", nbytes);
        return NULL;
    }
    memset(p, 0, n);
    return p;
}

void titan_free(void *p) { free(p); }

size_t titan_peak_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}
