/* shard_split.c - the deterministic choice of validation documents (see
 * shard_split.h). */
#include "data/shard_split.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

titan_status titan_shard_split_parse(const char *s, double *fraction, uint64_t *count) {
    *fraction = 0;
    *count = 0;
    if (!s || ((s[0] < '0' || s[0] > '9') && s[0] != '.')) goto bad;
    char *end;
    errno = 0;
    if (strpbrk(s, ".%eE")) {
        double f = strtod(s, &end);
        if (*end == '%') f /= 100, end++;
        if (errno || *end || !(f > 0 && f < 1)) goto bad;
        *fraction = f;
        return TITAN_OK;
    }
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v == 0) goto bad;
    *count = v;
    return TITAN_OK;
bad:;
    titan_status st = titan_error(TITAN_ERR_USAGE, "--split '%s': not a fraction between 0 and 1 (0.01, 1%%) "
                                  "nor a positive number of documents", s ? s : "");
    titan_error_hint("--split 0.01 holds out 1%% of the documents, --split 1000 holds out 1000");
    return st;
}

uint64_t titan_shard_split_key(uint64_t seed, uint64_t index) {
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(index >> (8 * i));
    return XXH64(le, sizeof le, seed);
}

void titan_shard_split_init_fraction(titan_shard_split *s, double fraction, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->seed = seed;
    /* f * 2^64, rounded down; f < 1 keeps it below 2^64. */
    double t = ldexp(fraction, 64);
    s->threshold = t >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)t;
}

/* A max-heap of (key, index) on the largest key: the count smallest so far. */
typedef struct {
    uint64_t key, index;
} entry;

static int greater(entry a, entry b) { return a.key > b.key || (a.key == b.key && a.index > b.index); }

static void sift_down(entry *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && greater(h[l], h[m])) m = l;
        if (r < n && greater(h[r], h[m])) m = r;
        if (m == i) return;
        entry t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

titan_status titan_shard_split_init_count(titan_shard_split *s, uint64_t count, uint64_t total, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->seed = seed;
    s->by_count = 1;
    if (count == 0 || count >= total) {
        titan_status st = titan_error(TITAN_ERR_USAGE, "--split %llu: the input has %llu documents; "
                                      "at least one must stay for training", (unsigned long long)count,
                                      (unsigned long long)total);
        titan_error_hint("hold out fewer documents, or a fraction (--split 0.01)");
        return st;
    }
    if (count > SIZE_MAX / sizeof(entry)) return titan_error(TITAN_ERR_NOMEM, "--split %llu: too many documents",
                                                            (unsigned long long)count);
    entry *h = malloc((size_t)count * sizeof *h);
    s->picked = malloc((size_t)count * sizeof *s->picked);
    if (!h || !s->picked) {
        free(h);
        titan_shard_split_fini(s);
        return titan_error(TITAN_ERR_NOMEM, "--split %llu: cannot hold the chosen indices", (unsigned long long)count);
    }
    size_t n = (size_t)count;
    for (size_t i = 0; i < n; i++) h[i] = (entry){titan_shard_split_key(seed, i), i};
    for (size_t i = n / 2; i-- > 0;) sift_down(h, n, i);
    for (uint64_t i = n; i < total; i++) {
        entry e = {titan_shard_split_key(seed, i), i};
        if (greater(h[0], e)) {
            h[0] = e;
            sift_down(h, n, 0);
        }
    }
    for (size_t i = 0; i < n; i++) s->picked[i] = h[i].index;
    free(h);
    qsort(s->picked, n, sizeof *s->picked, cmp_u64);
    s->n_picked = n;
    return TITAN_OK;
}

void titan_shard_split_fini(titan_shard_split *s) {
    free(s->picked);
    memset(s, 0, sizeof *s);
}

int titan_shard_split_held_out(titan_shard_split *s, uint64_t index) {
    if (!s->by_count) return titan_shard_split_key(s->seed, index) < s->threshold;
    while (s->next < s->n_picked && s->picked[s->next] < index) s->next++;
    return s->next < s->n_picked && s->picked[s->next] == index;
}
