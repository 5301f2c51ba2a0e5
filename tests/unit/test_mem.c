/* test_mem.c - page-backed buffers (core/mem.h): residency follows use, and
 * titan_mem_release_zero gives whole pages back and zeroes the range,
 * leaving the bytes around it alone. FSDP's memory saving rests on this. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/mem.h"

/* Resident bytes of this process now (/proc/self/statm, field 2). */
static size_t resident(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &res) != 2) res = 0;
        fclose(f);
    }
    return (size_t)res * titan_page_size();
}

static void test_residency(void) {
    const size_t n = (size_t)64 << 20;
    size_t r0 = resident();
    unsigned char *p = titan_alloc_pages(n, "test buffer");
    CHECK(p != NULL);
    if (!p) return;
    CHECK(((uintptr_t)p % titan_page_size()) == 0, "page-aligned");
    CHECK(resident() < r0 + ((size_t)4 << 20), "untouched pages cost nothing");
    size_t zeros = 0;
    for (size_t i = 0; i < n; i += 4096) zeros += p[i] == 0;
    CHECK(zeros == n / 4096, "zero-filled");
    memset(p, 0xab, n);
    size_t r1 = resident();
    CHECK(r1 >= r0 + n - ((size_t)4 << 20), "touched pages are resident (%zu -> %zu)", r0, r1);

    /* An unaligned range: the edges are zeroed in place, the middle given back. */
    size_t a = 1000, len = n - 3000;
    titan_mem_release_zero(p + a, len);
    size_t r2 = resident();
    CHECK(r2 + n - ((size_t)4 << 20) <= r1 + ((size_t)1 << 20), "released pages leave (%zu -> %zu)", r1, r2);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += p[i] != (i >= a && i < a + len ? 0 : 0xab);
    CHECK(bad == 0, "%zu bytes wrong: the range reads zero, its neighbours are intact", bad);
    p[n / 2] = 7; /* a released page comes back on write */
    CHECK(p[n / 2] == 7 && p[n / 2 + 1] == 0);

    titan_mem_release_zero(p + 10, 20); /* inside one page: just zeroed */
    CHECK(p[9] == 0xab && p[10] == 0 && p[29] == 0 && p[30] == 0xab);
    titan_mem_release_zero(p, 0);
    titan_free_pages(p);
    titan_free_pages(NULL);
}

int main(void) {
    test_residency();
    if (failures) {
        fprintf(stderr, "test_mem: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_mem: ok\n");
    return 0;
}
