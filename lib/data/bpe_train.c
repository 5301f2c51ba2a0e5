/* bpe_train.c - byte-level BPE training (see bpe_train.h).
 *
 * Two phases. Counting: each pre-token goes into a hash table of distinct
 * byte strings with their counts. Learning: every distinct pre-token becomes
 * a word, an array of token ids (its bytes at first) with a weight (its
 * count). A pair table maps each adjacent pair of ids to its weighted count
 * and the list of words it occurs in; a max-heap orders the pairs by count.
 * A merge visits only the words in the chosen pair's list and updates the
 * counts of the pairs around each change, so a merge costs what it touches,
 * not a pass over the corpus.
 *
 * The heap is lazy: an entry may overstate its pair's count (counts only
 * fall without a push) but never understates it without a newer exact entry
 * (every rise pushes one). A popped entry whose count is stale is pushed
 * again with the true count, so the first exact entry popped is the true
 * maximum, and among equal counts the smallest (left, right) pair. */
#define _GNU_SOURCE /* qsort_r */
#include "data/bpe_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/fsutil.h"
#include "data/bpe_impl.h"

/* One distinct pre-token while counting; count 0 marks an empty slot. */
typedef struct {
    uint64_t hash, count, off;
    uint32_t len;
} slot;

/* One distinct pre-token while learning: bytes at arena + boff, its current
 * ids at ids + ioff (n of them). */
typedef struct {
    uint64_t boff, ioff, count;
    uint32_t len, n;
} word;

typedef struct {
    uint64_t key;          /* left << 32 | right */
    int64_t count;         /* weighted occurrences now */
    int64_t before;        /* count when first touched in the current merge */
    uint32_t step;         /* the merge that last touched it */
    uint32_t occ_n, occ_cap;
    uint32_t *occ;         /* words it occurs (or occurred) in; may repeat */
} pair;

typedef struct {
    uint64_t count, key;
} heap_entry;

struct titan_bpe_trainer {
    titan_bpe vocab; /* the pattern (vocab.re) and the learned tokens */
    titan_bpe_train_stats st;
    size_t words_max;
    /* counting */
    slot *slots;
    size_t slots_mask, n_slots_used;
    uint8_t *arena;
    size_t arena_len, arena_cap;
    /* learning */
    int state; /* 0 counting, 1 learned, -1 learning failed */
    word *words;
    size_t n_words;
    uint32_t *ids;
    pair *pairs;
    size_t n_pairs, pairs_cap;
    uint32_t *pmap; /* pair index + 1; 0 empty */
    size_t pmap_mask;
    heap_entry *heap;
    size_t heap_n, heap_cap;
    uint32_t *stamp; /* per word: the last merge that visited it */
    uint32_t *touched;
    size_t touched_n, touched_cap;
};

static titan_status nomem(const char *what) {
    return titan_error(TITAN_ERR_NOMEM, "tokenizer training: out of memory for %s", what);
}

/* Grows the array *p (elements of size sz, capacity *cap) to hold need. */
static titan_status grow(void **p, size_t *cap, size_t need, size_t sz, const char *what) {
    if (need <= *cap) return TITAN_OK;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * sz);
    if (!q) return nomem(what);
    *p = q;
    *cap = c;
    return TITAN_OK;
}

/* grow() for a typed array: returns the status on failure. */
#define GROW(ptr, cap, need, what)                                              \
    do {                                                                        \
        void *g_ = (ptr);                                                       \
        titan_status s_ = grow(&g_, &(cap), (need), sizeof *(ptr), (what));     \
        (ptr) = g_;                                                             \
        if (s_ != TITAN_OK) return s_;                                          \
    } while (0)

titan_status titan_bpe_trainer_create(titan_bpe_trainer **out, int vocab_size) {
    *out = NULL;
    if (vocab_size < 256 || vocab_size > TITAN_BPE_TRAIN_VOCAB_MAX) {
        titan_status st = titan_error(TITAN_ERR_USAGE, "tokenizer training: vocabulary size %d out of range (256..%d)",
                                      vocab_size, TITAN_BPE_TRAIN_VOCAB_MAX);
        titan_error_hint("the size counts the 256 byte tokens and the merges, not the 256 special tokens");
        return st;
    }
    titan_bpe_trainer *t = calloc(1, sizeof *t);
    if (!t) return nomem("the trainer");
    titan_status st = titan_bpe_init(&t->vocab, (uint32_t)vocab_size, "tokenizer training");
    if (st == TITAN_OK) st = titan_bpe_compile_pattern(&t->vocab);
    for (int c = 0; c < 256 && st == TITAN_OK; c++) {
        uint8_t byte = (uint8_t)c;
        uint32_t dup;
        st = titan_bpe_set(&t->vocab, (uint32_t)c, &byte, 1, 1, &dup);
        t->vocab.byte_id[c] = (uint32_t)c;
    }
    t->slots_mask = (1u << 16) - 1;
    if (st == TITAN_OK && !(t->slots = calloc(t->slots_mask + 1, sizeof *t->slots))) st = nomem("the pre-token table");
    if (st != TITAN_OK) {
        titan_bpe_trainer_free(t);
        return st;
    }
    t->st.vocab_size = (uint32_t)vocab_size;
    t->words_max = TITAN_BPE_TRAIN_WORDS_MAX;
    *out = t;
    return TITAN_OK;
}

static void free_learning(titan_bpe_trainer *t) {
    for (size_t i = 0; i < t->n_pairs; i++) free(t->pairs[i].occ);
    free(t->pairs), free(t->pmap), free(t->heap), free(t->stamp), free(t->touched);
    t->pairs = NULL, t->pmap = NULL, t->heap = NULL, t->stamp = NULL, t->touched = NULL;
    t->n_pairs = t->pairs_cap = t->heap_n = t->heap_cap = t->touched_n = t->touched_cap = 0;
}

void titan_bpe_trainer_free(titan_bpe_trainer *t) {
    if (!t) return;
    free_learning(t);
    free(t->words);
    free(t->ids);
    free(t->slots);
    free(t->arena);
    titan_bpe_fini(&t->vocab);
    free(t);
}

void titan_bpe_trainer_set_words_max(titan_bpe_trainer *t, size_t max) { t->words_max = max < 16 ? 16 : max; }

/* ---- counting ------------------------------------------------------------ */

static void slot_put(slot *slots, size_t mask, slot s) {
    size_t i = s.hash & mask;
    while (slots[i].count) i = (i + 1) & mask;
    slots[i] = s;
}

static titan_status slots_resize(titan_bpe_trainer *t, size_t cap) {
    slot *s = calloc(cap, sizeof *s);
    if (!s) return nomem("the pre-token table");
    for (size_t i = 0; i <= t->slots_mask; i++)
        if (t->slots[i].count) slot_put(s, cap - 1, t->slots[i]);
    free(t->slots);
    t->slots = s;
    t->slots_mask = cap - 1;
    return TITAN_OK;
}

/* At the cap: drops the pre-tokens seen at most c times, c = 1, 2, ...,
 * until at most half the cap remain, and compacts their bytes. */
static titan_status prune(titan_bpe_trainer *t) {
    uint64_t c = 0;
    size_t keep;
    do {
        c++;
        keep = 0;
        for (size_t i = 0; i <= t->slots_mask; i++) keep += t->slots[i].count > c;
    } while (keep > t->words_max / 2);
    size_t bytes = 0;
    for (size_t i = 0; i <= t->slots_mask; i++)
        if (t->slots[i].count > c) bytes += t->slots[i].len;
    uint8_t *arena = malloc(bytes ? bytes : 1);
    slot *s = calloc(t->slots_mask + 1, sizeof *s);
    if (!arena || !s) {
        free(arena), free(s);
        return nomem("the pre-token table");
    }
    size_t len = 0;
    for (size_t i = 0; i <= t->slots_mask; i++) {
        slot e = t->slots[i];
        if (e.count <= c) continue;
        memcpy(arena + len, t->arena + e.off, e.len);
        e.off = len;
        len += e.len;
        slot_put(s, t->slots_mask, e);
    }
    t->st.dropped += t->n_slots_used - keep;
    t->n_slots_used = keep;
    free(t->slots), free(t->arena);
    t->slots = s, t->arena = arena, t->arena_len = len, t->arena_cap = bytes ? bytes : 1;
    return TITAN_OK;
}

/* Counts one pre-token of at most TITAN_BPE_TRAIN_WORD_BYTES, hash h. */
static titan_status count_hashed(titan_bpe_trainer *t, const uint8_t *s, size_t n, uint64_t h) {
    size_t i = h & t->slots_mask;
    for (; t->slots[i].count; i = (i + 1) & t->slots_mask) {
        slot *e = &t->slots[i];
        if (e->hash == h && e->len == n && memcmp(t->arena + e->off, s, n) == 0) {
            e->count++;
            return TITAN_OK;
        }
    }
    if (t->n_slots_used + 1 > t->words_max) {
        TITAN_TRY(prune(t));
        return count_hashed(t, s, n, h); /* the slots moved */
    }
    GROW(t->arena, t->arena_cap, t->arena_len + n, "pre-token bytes");
    memcpy(t->arena + t->arena_len, s, n);
    t->slots[i] = (slot){h, 1, t->arena_len, (uint32_t)n};
    t->arena_len += n;
    t->n_slots_used++;
    if (2 * t->n_slots_used > t->slots_mask + 1) return slots_resize(t, 2 * (t->slots_mask + 1));
    return TITAN_OK;
}

static titan_status count_word(void *ctx, const uint8_t *s, size_t n) {
    titan_bpe_trainer *t = ctx;
    if (n > TITAN_BPE_TRAIN_WORD_BYTES) {
        t->st.too_long++;
        return TITAN_OK;
    }
    t->st.pretokens++;
    return count_hashed(t, s, n, XXH3_64bits(s, n));
}

titan_status titan_bpe_trainer_add_text(titan_bpe_trainer *t, const char *text, size_t n) {
    if (t->state != 0)
        return titan_error(TITAN_ERR_USAGE, "tokenizer training: text added after the merges were learned");
    t->st.documents++;
    t->st.bytes += n;
    return titan_bpe_split(&t->vocab, (const uint8_t *)text, n, count_word, t);
}

/* Pre-tokens of a run of documents, split and hashed by one thread. */
typedef struct {
    const uint8_t *s;
    uint64_t hash;
    size_t len;
} span;

typedef struct {
    span *v;
    size_t n, cap;
    uint64_t too_long;
    int failed; /* out of memory (the message stays in the worker's thread) */
} span_list;

static titan_status collect(void *ctx, const uint8_t *s, size_t n) {
    span_list *l = ctx;
    if (n > TITAN_BPE_TRAIN_WORD_BYTES) {
        l->too_long++;
        return TITAN_OK;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 4096;
        span *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->failed = 1;
            return TITAN_ERR_NOMEM;
        }
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = (span){s, XXH3_64bits(s, n), n};
    return TITAN_OK;
}

titan_status titan_bpe_trainer_add_texts(titan_bpe_trainer *t, const char *const *texts, const size_t *lens, size_t n,
                                         int threads) {
    if (threads <= 1 || n < 2) {
        for (size_t i = 0; i < n; i++) TITAN_TRY(titan_bpe_trainer_add_text(t, texts[i], lens[i]));
        return TITAN_OK;
    }
    if (t->state != 0)
        return titan_error(TITAN_ERR_USAGE, "tokenizer training: text added after the merges were learned");
    /* Chunks of about equal bytes, split in parallel, counted in order: the
     * table sees the pre-tokens in the same order as one thread would. */
    size_t n_chunks = (size_t)threads * 4 < n ? (size_t)threads * 4 : n, total = 0;
    for (size_t i = 0; i < n; i++) total += lens[i];
    size_t *first = malloc((n_chunks + 1) * sizeof *first);
    span_list *lists = calloc(n_chunks, sizeof *lists);
    if (!first || !lists) {
        free(first), free(lists);
        return nomem("splitting a batch");
    }
    size_t c = 0, acc = 0;
    first[0] = 0;
    for (size_t i = 0; i < n && c + 1 < n_chunks; i++) {
        acc += lens[i];
        if (acc >= total / n_chunks * (c + 1)) first[++c] = i + 1;
    }
    while (c + 1 <= n_chunks) first[++c] = n; /* the rest (and empty chunks) */
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (size_t k = 0; k < n_chunks; k++)
        for (size_t i = first[k]; i < first[k + 1] && !lists[k].failed; i++)
            if (titan_bpe_split(&t->vocab, (const uint8_t *)texts[i], lens[i], collect, &lists[k]) != TITAN_OK)
                lists[k].failed = 1;
    titan_status st = TITAN_OK;
    for (size_t k = 0; k < n_chunks && st == TITAN_OK; k++) {
        if (lists[k].failed) {
            st = nomem("splitting a batch");
            break;
        }
        t->st.too_long += lists[k].too_long;
        t->st.pretokens += lists[k].n;
        for (size_t j = 0; j < lists[k].n && st == TITAN_OK; j++)
            st = count_hashed(t, lists[k].v[j].s, lists[k].v[j].len, lists[k].v[j].hash);
    }
    for (size_t k = 0; k < n_chunks; k++) free(lists[k].v);
    free(lists), free(first);
    if (st == TITAN_OK) t->st.documents += n, t->st.bytes += total;
    return st;
}

/* ---- the pair table and the heap ------------------------------------------- */

static size_t pmap_slot(uint64_t key, size_t mask) { return (size_t)((key * 0x9E3779B97F4A7C15u) >> 24) & mask; }

static uint32_t pair_find(const titan_bpe_trainer *t, uint64_t key) {
    for (size_t i = pmap_slot(key, t->pmap_mask);; i = (i + 1) & t->pmap_mask) {
        uint32_t v = t->pmap[i];
        if (v == 0) return UINT32_MAX;
        if (t->pairs[v - 1].key == key) return v - 1;
    }
}

static titan_status pmap_resize(titan_bpe_trainer *t, size_t cap) {
    uint32_t *m = calloc(cap, sizeof *m);
    if (!m) return nomem("the pair table");
    for (size_t p = 0; p < t->n_pairs; p++) {
        size_t i = pmap_slot(t->pairs[p].key, cap - 1);
        while (m[i]) i = (i + 1) & (cap - 1);
        m[i] = (uint32_t)p + 1;
    }
    free(t->pmap);
    t->pmap = m;
    t->pmap_mask = cap - 1;
    return TITAN_OK;
}

/* The index of pair key, made (count 0) when new. */
static titan_status pair_get(titan_bpe_trainer *t, uint64_t key, uint32_t *out) {
    size_t i = pmap_slot(key, t->pmap_mask);
    for (; t->pmap[i]; i = (i + 1) & t->pmap_mask)
        if (t->pairs[t->pmap[i] - 1].key == key) {
            *out = t->pmap[i] - 1;
            return TITAN_OK;
        }
    if (t->n_pairs >= UINT32_MAX - 1) return nomem("the pair table (2^32 pairs)");
    GROW(t->pairs, t->pairs_cap, t->n_pairs + 1, "the pair table");
    *out = (uint32_t)t->n_pairs;
    t->pairs[t->n_pairs++] = (pair){.key = key};
    t->pmap[i] = *out + 1;
    if (2 * t->n_pairs > t->pmap_mask + 1) return pmap_resize(t, 2 * (t->pmap_mask + 1));
    return TITAN_OK;
}

/* Records word w in p's list (once when w is appended twice in a row). */
static titan_status occ_add(pair *p, uint32_t w) {
    if (p->occ_n && p->occ[p->occ_n - 1] == w) return TITAN_OK;
    size_t cap = p->occ_cap;
    GROW(p->occ, cap, (size_t)p->occ_n + 1, "a pair's word list");
    p->occ_cap = (uint32_t)cap;
    p->occ[p->occ_n++] = w;
    return TITAN_OK;
}

/* a comes out of the heap before b. */
static int heap_before(heap_entry a, heap_entry b) { return a.count > b.count || (a.count == b.count && a.key < b.key); }

static titan_status heap_push(titan_bpe_trainer *t, uint64_t count, uint64_t key) {
    GROW(t->heap, t->heap_cap, t->heap_n + 1, "the pair heap");
    heap_entry v = {count, key};
    size_t i = t->heap_n++;
    while (i > 0 && heap_before(v, t->heap[(i - 1) / 2])) {
        t->heap[i] = t->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->heap[i] = v;
    return TITAN_OK;
}

static heap_entry heap_pop(titan_bpe_trainer *t) {
    heap_entry *h = t->heap, top = h[0], v = h[--t->heap_n];
    size_t i = 0, n = t->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_before(h[c + 1], h[c])) c++;
        if (!heap_before(h[c], v)) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = v;
    return top;
}

/* ---- learning -------------------------------------------------------------- */

static const uint8_t *word_bytes(const titan_bpe_trainer *t, const word *w) { return t->arena + w->boff; }

static int word_cmp(const void *a, const void *b, void *ctx) {
    const titan_bpe_trainer *t = ctx;
    const word *x = a, *y = b;
    int c = memcmp(word_bytes(t, x), word_bytes(t, y), x->len < y->len ? x->len : y->len);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Words from the counting table, in byte order; ids = their bytes. */
static titan_status make_words(titan_bpe_trainer *t) {
    t->n_words = t->n_slots_used;
    t->words = malloc((t->n_words ? t->n_words : 1) * sizeof *t->words);
    t->ids = malloc((t->arena_len ? t->arena_len : 1) * sizeof *t->ids);
    t->stamp = calloc(t->n_words ? t->n_words : 1, sizeof *t->stamp);
    if (!t->words || !t->ids || !t->stamp) return nomem("the words");
    size_t k = 0;
    for (size_t i = 0; i <= t->slots_mask; i++)
        if (t->slots[i].count) {
            slot e = t->slots[i];
            t->words[k++] = (word){.boff = e.off, .count = e.count, .len = e.len, .n = e.len};
        }
    qsort_r(t->words, t->n_words, sizeof *t->words, word_cmp, t);
    uint64_t off = 0;
    for (size_t i = 0; i < t->n_words; i++) {
        word *w = &t->words[i];
        w->ioff = off;
        const uint8_t *b = word_bytes(t, w);
        for (uint32_t j = 0; j < w->len; j++) t->ids[off + j] = b[j];
        off += w->len;
    }
    free(t->slots);
    t->slots = NULL;
    t->st.distinct = t->n_words;
    return TITAN_OK;
}

static uint64_t pair_key(uint32_t l, uint32_t r) { return (uint64_t)l << 32 | r; }

/* Every adjacent pair of every word, counted and listed; then the heap. */
static titan_status count_pairs(titan_bpe_trainer *t) {
    TITAN_TRY(pmap_resize(t, 1u << 16));
    for (size_t w = 0; w < t->n_words; w++) {
        const word *x = &t->words[w];
        const uint32_t *ids = t->ids + x->ioff;
        for (uint32_t j = 0; j + 1 < x->n; j++) {
            uint32_t p;
            TITAN_TRY(pair_get(t, pair_key(ids[j], ids[j + 1]), &p));
            t->pairs[p].count += (int64_t)x->count;
            TITAN_TRY(occ_add(&t->pairs[p], (uint32_t)w));
        }
    }
    for (size_t p = 0; p < t->n_pairs; p++) TITAN_TRY(heap_push(t, (uint64_t)t->pairs[p].count, t->pairs[p].key));
    return TITAN_OK;
}

/* Adds delta to pair p, remembering its count before this merge. */
static titan_status pair_add(titan_bpe_trainer *t, uint32_t step, uint32_t p, int64_t delta) {
    pair *q = &t->pairs[p];
    if (q->step != step) {
        q->step = step;
        q->before = q->count;
        GROW(t->touched, t->touched_cap, t->touched_n + 1, "the merge");
        t->touched[t->touched_n++] = p;
    }
    q->count += delta;
    return TITAN_OK;
}

/* Adds delta to pair (l, r); a new pair (delta > 0) lists word w. */
static titan_status pair_change(titan_bpe_trainer *t, uint32_t step, uint32_t l, uint32_t r, int64_t delta,
                                uint32_t w) {
    uint32_t p;
    TITAN_TRY(pair_get(t, pair_key(l, r), &p));
    TITAN_TRY(pair_add(t, step, p, delta));
    return delta > 0 ? occ_add(&t->pairs[p], w) : TITAN_OK;
}

/* Replaces every (a, b) (pair best) in word w by id, left to right, moving
 * the counts of the pairs around each replacement: (x, a) becomes (x, id)
 * and (b, y) becomes (id, y). x is the token already written, so in
 * "a b a b" the second replacement turns the first one's (id, a) into
 * (id, id). */
static titan_status merge_word(titan_bpe_trainer *t, uint32_t step, uint32_t w, uint32_t best, uint32_t a,
                               uint32_t b, uint32_t id) {
    word *x = &t->words[w];
    uint32_t *ids = t->ids + x->ioff, n = x->n, m = 0;
    int64_t c = (int64_t)x->count;
    for (uint32_t i = 0; i < n;) {
        if (i + 1 < n && ids[i] == a && ids[i + 1] == b) {
            TITAN_TRY(pair_add(t, step, best, -c));
            if (m > 0) {
                TITAN_TRY(pair_change(t, step, ids[m - 1], a, -c, w));
                TITAN_TRY(pair_change(t, step, ids[m - 1], id, c, w));
            }
            if (i + 2 < n) {
                TITAN_TRY(pair_change(t, step, b, ids[i + 2], -c, w));
                TITAN_TRY(pair_change(t, step, id, ids[i + 2], c, w));
            }
            ids[m++] = id;
            i += 2;
        } else {
            ids[m++] = ids[i++];
        }
    }
    x->n = m; /* unchanged for a stale entry of the list */
    return TITAN_OK;
}

/* The pair to merge next: the highest count, then the smallest key. */
static titan_status next_pair(titan_bpe_trainer *t, uint32_t *best) {
    *best = UINT32_MAX;
    while (t->heap_n) {
        heap_entry e = heap_pop(t);
        uint32_t p = pair_find(t, e.key);
        TITAN_ASSERT(p != UINT32_MAX);
        int64_t now = t->pairs[p].count;
        if ((uint64_t)now == e.count) {
            *best = p;
            return TITAN_OK;
        }
        if ((uint64_t)now < e.count && now > 0) TITAN_TRY(heap_push(t, (uint64_t)now, e.key));
    }
    return TITAN_OK;
}

/* Makes token id = bytes(a) + bytes(b). Other ways to split it into two
 * tokens would also merge into it when the tiktoken file is loaded; none may
 * occur in a word, or encoding would stray from the training (this cannot
 * happen: an occurrence would have merged when the token was first made). */
static titan_status add_token(titan_bpe_trainer *t, uint32_t id, uint32_t a, uint32_t b) {
    size_t na, nb;
    const char *sa = titan_bpe_bytes(&t->vocab, a, &na), *sb = titan_bpe_bytes(&t->vocab, b, &nb);
    char small[256], *s = na + nb <= sizeof small ? small : malloc(na + nb);
    if (!s) return nomem("a token");
    memcpy(s, sa, na);
    memcpy(s + na, sb, nb);
    uint32_t dup;
    titan_status st = titan_bpe_set(&t->vocab, id, s, na + nb, 1, &dup);
    if (st == TITAN_OK && dup != TITAN_BPE_NONE)
        st = titan_error(TITAN_ERR_FAIL, "tokenizer training: internal: merge %u repeats the bytes of token %u",
                         id - 256, dup);
    for (size_t k = 1; k < na + nb && st == TITAN_OK; k++) {
        uint32_t l = titan_bpe_lookup(&t->vocab, s, k), r, p;
        if (k == na || l == TITAN_BPE_NONE || (r = titan_bpe_lookup(&t->vocab, s + k, na + nb - k)) == TITAN_BPE_NONE)
            continue;
        if ((p = pair_find(t, pair_key(l, r))) != UINT32_MAX && t->pairs[p].count > 0)
            st = titan_error(TITAN_ERR_FAIL, "tokenizer training: internal: token %u also splits as %u + %u", id, l,
                             r);
    }
    if (s != small) free(s);
    return st;
}

static titan_status merge_once(titan_bpe_trainer *t, uint32_t best, uint32_t id) {
    uint32_t step = id - 255; /* 1, 2, ...: stamps start at 0 */
    pair *bp = &t->pairs[best];
    uint32_t a = (uint32_t)(bp->key >> 32), b = (uint32_t)bp->key;
    TITAN_TRY(add_token(t, id, a, b));
    t->touched_n = 0;
    /* The best pair's list does not grow during its merge: every new pair holds id. */
    uint32_t *occ = bp->occ, n_occ = bp->occ_n;
    for (uint32_t k = 0; k < n_occ; k++) {
        uint32_t w = occ[k];
        if (t->stamp[w] == step) continue;
        t->stamp[w] = step;
        TITAN_TRY(merge_word(t, step, w, best, a, b, id));
    }
    bp = &t->pairs[best];
    TITAN_ASSERT(bp->count == 0);
    for (size_t k = 0; k < t->touched_n; k++) {
        pair *q = &t->pairs[t->touched[k]];
        if (q->count > q->before) TITAN_TRY(heap_push(t, (uint64_t)q->count, q->key));
        if (q->count == 0) { /* gone for good: no new adjacency of old tokens appears */
            free(q->occ);
            q->occ = NULL, q->occ_n = q->occ_cap = 0;
        }
    }
    return TITAN_OK;
}

static titan_status learn(titan_bpe_trainer *t) {
    TITAN_TRY(make_words(t));
    TITAN_TRY(count_pairs(t));
    for (uint32_t id = 256; id < t->st.vocab_size; id++) {
        uint32_t best;
        TITAN_TRY(next_pair(t, &best));
        if (best == UINT32_MAX || t->pairs[best].count < 2) break; /* nothing repeats: more merges teach nothing */
        t->st.last_count = (uint64_t)t->pairs[best].count;
        TITAN_TRY(merge_once(t, best, id));
        t->st.merges++;
    }
    return TITAN_OK;
}

titan_status titan_bpe_trainer_learn(titan_bpe_trainer *t) {
    if (t->state == 1) return TITAN_OK;
    if (t->state < 0) return titan_error(TITAN_ERR_FAIL, "tokenizer training: learning failed before");
    titan_status st = learn(t);
    free_learning(t); /* the words and their ids stay, for inspection */
    t->state = st == TITAN_OK ? 1 : -1;
    return st;
}

/* ---- the file ----------------------------------------------------------------- */

static size_t b64_encode(const uint8_t *s, size_t n, char *out) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        out[o++] = i + 1 < n ? a[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? a[v & 63] : '=';
    }
    return o;
}

titan_status titan_bpe_trainer_write(titan_bpe_trainer *t, const char *path) {
    TITAN_TRY(titan_bpe_trainer_learn(t));
    uint32_t n_tokens = 256 + t->st.merges;
    size_t cap = 0;
    for (uint32_t id = 0; id < n_tokens; id++) {
        size_t n;
        titan_bpe_bytes(&t->vocab, id, &n);
        cap += 4 * (n + 2) / 3 + 4 + 12; /* base64, space, rank, newline */
    }
    char *buf = malloc(cap);
    if (!buf) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory for the tokenizer file", path);
    size_t len = 0;
    for (uint32_t id = 0; id < n_tokens; id++) {
        size_t n;
        const char *s = titan_bpe_bytes(&t->vocab, id, &n);
        len += b64_encode((const uint8_t *)s, n, buf + len);
        len += (size_t)snprintf(buf + len, cap - len, " %u\n", id);
    }
    titan_status st = titan_fs_write_atomic(path, buf, len);
    free(buf);
    return st;
}

void titan_bpe_trainer_stats(const titan_bpe_trainer *t, titan_bpe_train_stats *s) {
    *s = t->st;
    if (t->state == 0) s->distinct = t->n_slots_used;
}

size_t titan_bpe_trainer_words(const titan_bpe_trainer *t) { return t->state == 1 ? t->n_words : 0; }

const uint8_t *titan_bpe_trainer_word(const titan_bpe_trainer *t, size_t i, size_t *n, uint64_t *count,
                                      const uint32_t **ids, size_t *n_ids) {
    if (i >= titan_bpe_trainer_words(t)) return NULL;
    const word *w = &t->words[i];
    *n = w->len;
    *count = w->count;
    *ids = t->ids + w->ioff;
    *n_ids = w->n;
    return word_bytes(t, w);
}

const uint8_t *titan_bpe_trainer_token(const titan_bpe_trainer *t, uint32_t id, size_t *n) {
    *n = 0;
    if (id >= 256 + t->st.merges) return NULL;
    return (const uint8_t *)titan_bpe_bytes(&t->vocab, id, n);
}
