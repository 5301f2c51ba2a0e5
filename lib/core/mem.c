/* mem.c - aligned allocation that reports failure instead of exiting. */
#include "mem.h"

#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "error.h"

void *titan_alloc(size_t nbytes, const char *what) {
    void *p = NULL;
    size_t n = (nbytes + 63) & ~(size_t)63;
    if (n == 0) n = 64;
    /* nbytes within 63 of SIZE_MAX rounds to 0 above: refused, not 64 bytes */
    if (nbytes > SIZE_MAX - 63 || posix_memalign(&p, 64, n) != 0) {
        titan_error(TITAN_ERR_NOMEM, "%s: cannot allocate %zu bytes", what ? what : "buffer", nbytes);
        return NULL;
    }
    memset(p, 0, n);
    return p;
}

void titan_free(void *p) { free(p); }

size_t titan_page_size(void) {
    static size_t page;
    if (!page) {
        long n = sysconf(_SC_PAGESIZE);
        page = n > 0 ? (size_t)n : 4096;
    }
    return page;
}

/* One header page in front of the data holds the mapping's length, so the
 * data starts page-aligned and titan_free_pages needs no size. */
void *titan_alloc_pages(size_t nbytes, const char *what) {
    size_t page = titan_page_size();
    if (nbytes > SIZE_MAX - 2 * page) {
        titan_error(TITAN_ERR_NOMEM, "%s: cannot allocate %zu bytes", what ? what : "buffer", nbytes);
        return NULL;
    }
    size_t len = page + ((nbytes + page - 1) / page) * page;
    void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        titan_error(TITAN_ERR_NOMEM, "%s: cannot map %zu bytes", what ? what : "buffer", nbytes);
        return NULL;
    }
    *(size_t *)base = len;
    return (char *)base + page;
}

void titan_free_pages(void *p) {
    if (!p) return;
    char *base = (char *)p - titan_page_size();
    munmap(base, *(size_t *)base);
}

void titan_mem_release_zero(void *p, size_t nbytes) {
    if (!nbytes) return;
    size_t page = titan_page_size();
    uintptr_t a = (uintptr_t)p, e = a + nbytes;
    uintptr_t pa = (a + page - 1) / page * page, pe = e / page * page;
    if (pa >= pe) { /* no whole page inside */
        memset(p, 0, nbytes);
        return;
    }
    memset(p, 0, pa - a);
    memset((void *)pe, 0, e - pe);
    if (madvise((void *)pa, pe - pa, MADV_DONTNEED) != 0) memset((void *)pa, 0, pe - pa);
}

size_t titan_peak_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}
