/* bpe_vocab.c - the BPE vocabulary: id -> bytes, bytes -> id, the merge
 * table, and the merge loop itself (see bpe_impl.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/mem.h"
#include "data/bpe_impl.h"

#define TOK_NONE UINT64_MAX
#define PAIR_EMPTY UINT64_MAX
/* Words up to this many bytes merge by rescanning an array (fast, and every
 * English word); longer ones through a priority queue, O(n log n). */
#define QUAD_MAX 128

titan_status titan_bpe_init(titan_bpe *b, uint32_t n_ids, const char *what) {
    memset(b, 0, sizeof *b);
    b->n_ids = n_ids;
    b->tok = malloc((size_t)n_ids * sizeof *b->tok);
    if (!b->tok) return titan_error(TITAN_ERR_NOMEM, "%s: cannot allocate %u token entries", what, n_ids);
    for (uint32_t i = 0; i < n_ids; i++) b->tok[i] = TOK_NONE;
    for (int c = 0; c < 256; c++) b->byte_id[c] = TITAN_BPE_NONE;
    return TITAN_OK;
}

void titan_bpe_fini(titan_bpe *b) {
    pcre2_code_free(b->re);
    free(b->tok);
    free(b->arena);
    free(b->words);
    free(b->pairs);
    b->re = NULL, b->tok = NULL, b->arena = NULL, b->words = NULL, b->pairs = NULL;
}

const char *titan_bpe_bytes(const titan_bpe *b, uint32_t id, size_t *n) {
    if (id >= b->n_ids || b->tok[id] == TOK_NONE) {
        *n = 0;
        return NULL;
    }
    *n = (size_t)(b->tok[id] & 0xffffff);
    return b->arena + (b->tok[id] >> 24);
}

static uint64_t word_hash(const void *s, size_t n) { return XXH3_64bits(s, n); }

uint32_t titan_bpe_lookup(const titan_bpe *b, const void *s, size_t n) {
    if (!b->words) return TITAN_BPE_NONE;
    uint64_t h = word_hash(s, n), tag = h >> 32 << 32;
    for (size_t i = h & b->words_mask;; i = (i + 1) & b->words_mask) {
        uint64_t e = b->words[i];
        if (e == 0) return TITAN_BPE_NONE;
        if ((e & 0xffffffff00000000u) != tag) continue;
        uint32_t id = (uint32_t)e - 1;
        size_t k;
        const char *t = titan_bpe_bytes(b, id, &k);
        if (k == n && memcmp(t, s, n) == 0) return id;
    }
}

/* Inserts (hash tag, id) without looking for duplicates. */
static void words_put(uint64_t *slots, size_t mask, uint64_t h, uint32_t id) {
    size_t i = h & mask;
    while (slots[i] != 0) i = (i + 1) & mask;
    slots[i] = (h >> 32 << 32) | ((uint64_t)id + 1);
}

static titan_status words_grow(titan_bpe *b) {
    size_t cap = b->words ? 2 * (b->words_mask + 1) : 1024;
    uint64_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return titan_error(TITAN_ERR_NOMEM, "tokenizer: cannot grow the vocabulary table");
    if (b->words)
        for (size_t i = 0; i <= b->words_mask; i++) {
            uint64_t e = b->words[i];
            if (e == 0) continue;
            size_t k;
            const char *t = titan_bpe_bytes(b, (uint32_t)e - 1, &k);
            words_put(slots, cap - 1, word_hash(t, k), (uint32_t)e - 1);
        }
    free(b->words);
    b->words = slots;
    b->words_mask = cap - 1;
    return TITAN_OK;
}

titan_status titan_bpe_set(titan_bpe *b, uint32_t id, const void *s, size_t n, int regular, uint32_t *dup) {
    *dup = TITAN_BPE_NONE;
    TITAN_ASSERT(id < b->n_ids && n < (1u << 24));
    if (regular) {
        uint32_t old = titan_bpe_lookup(b, s, n);
        if (old != TITAN_BPE_NONE) {
            *dup = old;
            return TITAN_OK;
        }
    }
    if (b->arena_len + n > b->arena_cap) {
        size_t cap = b->arena_cap ? 2 * b->arena_cap : 1 << 16;
        while (cap < b->arena_len + n) cap *= 2;
        char *a = realloc(b->arena, cap);
        if (!a) return titan_error(TITAN_ERR_NOMEM, "tokenizer: cannot grow the token text");
        b->arena = a;
        b->arena_cap = cap;
    }
    if (n) memcpy(b->arena + b->arena_len, s, n);
    b->tok[id] = (uint64_t)b->arena_len << 24 | n;
    b->arena_len += n;
    if (!regular) return TITAN_OK;
    if (!b->words || 2 * (b->words_n + 1) > b->words_mask + 1) TITAN_TRY(words_grow(b));
    words_put(b->words, b->words_mask, word_hash(s, n), id);
    b->words_n++;
    return TITAN_OK;
}

static size_t pair_slot(uint64_t key, size_t mask) {
    return (size_t)((key * 0x9E3779B97F4A7C15u) >> 20) & mask;
}

static titan_status pairs_grow(titan_bpe *b) {
    size_t cap = b->pairs ? 2 * (b->pairs_mask + 1) : 4096;
    titan_bpe_pair *p = malloc(cap * sizeof *p);
    if (!p) return titan_error(TITAN_ERR_NOMEM, "tokenizer: cannot grow the merge table");
    for (size_t i = 0; i < cap; i++) p[i].key = PAIR_EMPTY;
    if (b->pairs)
        for (size_t i = 0; i <= b->pairs_mask; i++) {
            if (b->pairs[i].key == PAIR_EMPTY) continue;
            size_t j = pair_slot(b->pairs[i].key, cap - 1);
            while (p[j].key != PAIR_EMPTY) j = (j + 1) & (cap - 1);
            p[j] = b->pairs[i];
        }
    free(b->pairs);
    b->pairs = p;
    b->pairs_mask = cap - 1;
    return TITAN_OK;
}

titan_status titan_bpe_add_pair(titan_bpe *b, uint32_t left, uint32_t right, uint32_t rank, uint32_t result) {
    if (!b->pairs || 2 * (b->pairs_n + 1) > b->pairs_mask + 1) TITAN_TRY(pairs_grow(b));
    uint64_t key = (uint64_t)left << 32 | right;
    size_t i = pair_slot(key, b->pairs_mask);
    for (; b->pairs[i].key != PAIR_EMPTY; i = (i + 1) & b->pairs_mask)
        if (b->pairs[i].key == key) return TITAN_OK; /* the first (lowest-ranked) merge wins */
    b->pairs[i] = (titan_bpe_pair){key, rank, result};
    b->pairs_n++;
    return TITAN_OK;
}

uint32_t titan_bpe_pair_rank(const titan_bpe *b, uint32_t left, uint32_t right, uint32_t *result) {
    if (!b->pairs) return TITAN_BPE_NONE;
    uint64_t key = (uint64_t)left << 32 | right;
    for (size_t i = pair_slot(key, b->pairs_mask);; i = (i + 1) & b->pairs_mask) {
        const titan_bpe_pair *p = &b->pairs[i];
        if (p->key == key) {
            *result = p->result;
            return p->rank;
        }
        if (p->key == PAIR_EMPTY) return TITAN_BPE_NONE;
    }
}

/* Repeatedly merges the lowest-ranked adjacent pair, the leftmost of equal
 * ones (tiktoken's and Hugging Face's rule), rescanning an array of the
 * current pairs' ranks. */
static size_t merge_quadratic(const titan_bpe *b, const uint8_t *s, size_t n, uint32_t *id, uint32_t *rank,
                              uint32_t *res) {
    size_t m = n;
    for (size_t i = 0; i < n; i++) id[i] = b->byte_id[s[i]];
    for (size_t i = 0; i + 1 < m; i++) rank[i] = titan_bpe_pair_rank(b, id[i], id[i + 1], &res[i]);
    while (m > 1) {
        uint32_t best = TITAN_BPE_NONE;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < m; i++)
            if (rank[i] < best) best = rank[i], bi = i;
        if (best == TITAN_BPE_NONE) break;
        id[bi] = res[bi];
        /* Drop element bi+1; pair bi+1 and later move down one place. */
        memmove(id + bi + 1, id + bi + 2, (m - bi - 2) * sizeof *id);
        if (bi + 3 < m) {
            memmove(rank + bi + 1, rank + bi + 2, (m - bi - 3) * sizeof *rank);
            memmove(res + bi + 1, res + bi + 2, (m - bi - 3) * sizeof *res);
        }
        m--;
        if (bi + 1 < m) rank[bi] = titan_bpe_pair_rank(b, id[bi], id[bi + 1], &res[bi]);
        if (bi > 0) rank[bi - 1] = titan_bpe_pair_rank(b, id[bi - 1], id[bi], &res[bi - 1]);
    }
    return m;
}

/* The same rule with a min-heap of (rank, start byte) over a linked list of
 * parts. An entry is stale when the pair now starting there has another rank. */
static void heap_push(uint64_t *h, size_t *len, uint64_t v) {
    size_t i = (*len)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *len) {
    uint64_t top = h[0], v = h[--*len];
    size_t i = 0, n = *len;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = v;
    return top;
}

static size_t merge_heap(const titan_bpe *b, const uint8_t *s, size_t n, uint32_t *out, uint32_t *id,
                         uint32_t *next, uint32_t *prev, uint64_t *heap) {
    const uint32_t END = UINT32_MAX;
    size_t hn = 0;
    uint32_t res;
    for (size_t i = 0; i < n; i++) {
        id[i] = b->byte_id[s[i]];
        next[i] = i + 1 < n ? (uint32_t)(i + 1) : END;
        prev[i] = i > 0 ? (uint32_t)(i - 1) : END;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t r = titan_bpe_pair_rank(b, id[i], id[i + 1], &res);
        if (r != TITAN_BPE_NONE) heap_push(heap, &hn, (uint64_t)r << 32 | i);
    }
    while (hn > 0) {
        uint64_t e = heap_pop(heap, &hn);
        uint32_t r = (uint32_t)(e >> 32), p = (uint32_t)e, q;
        if (id[p] == TITAN_BPE_NONE || (q = next[p]) == END) continue;
        if (titan_bpe_pair_rank(b, id[p], id[q], &res) != r) continue;
        id[p] = res;
        id[q] = TITAN_BPE_NONE;
        next[p] = next[q];
        if (next[q] != END) prev[next[q]] = p;
        uint32_t rr, unused;
        if (prev[p] != END && (rr = titan_bpe_pair_rank(b, id[prev[p]], id[p], &unused)) != TITAN_BPE_NONE)
            heap_push(heap, &hn, (uint64_t)rr << 32 | prev[p]);
        if (next[p] != END && (rr = titan_bpe_pair_rank(b, id[p], id[next[p]], &unused)) != TITAN_BPE_NONE)
            heap_push(heap, &hn, (uint64_t)rr << 32 | p);
    }
    size_t m = 0;
    for (uint32_t p = 0; p != END; p = next[p]) out[m++] = id[p];
    return m;
}

size_t titan_bpe_merge(const titan_bpe *b, const uint8_t *s, size_t n, uint32_t *out, int heap) {
    if (heap < 0) heap = n > QUAD_MAX;
    if (!heap && n <= QUAD_MAX) {
        uint32_t rank[QUAD_MAX], res[QUAD_MAX];
        return merge_quadratic(b, s, n, out, rank, res);
    }
    /* Long words: one block, the heap (at most 3n entries) then the arrays. */
    TITAN_ASSERT(n < UINT32_MAX);
    size_t bytes = heap ? 3 * n * (sizeof(uint64_t) + sizeof(uint32_t)) : 2 * n * sizeof(uint32_t);
    void *blk = malloc(bytes);
    if (!blk) titan_panic(__FILE__, __LINE__, "out of memory merging a long word");
    size_t m;
    if (heap) {
        uint64_t *h = blk;
        uint32_t *a = (uint32_t *)(h + 3 * n);
        m = merge_heap(b, s, n, out, a, a + n, a + 2 * n, h);
    } else {
        uint32_t *a = blk;
        m = merge_quadratic(b, s, n, out, a, a + n);
    }
    free(blk);
    return m;
}
