/* loader.c - resumable packing of tokens into samples, with an optional
 * per-epoch shuffle that needs no memory per sample. */
#include "data/loader.h"

#include <inttypes.h>
#include <string.h>

#include "core/mem.h"
#include "core/rng.h"

struct titan_loader {
    const titan_shard_dir *d;
    int seq_len, dp_rank, dp_size;
    uint64_t samples;  /* S, per epoch */
    int shuffle;
    uint64_t seed;
    int half_bits;     /* the permutation works on 2*half_bits-bit numbers */
    titan_loader_state st;
    uint32_t *row;     /* seq_len + 1 tokens */
};

titan_status titan_loader_create(titan_loader **out, const titan_shard_dir *d, int seq_len,
                                 int dp_rank, int dp_size) {
    *out = NULL;
    if (seq_len < 1) return titan_error(TITAN_ERR_USAGE, "loader: seq_len %d must be at least 1", seq_len);
    if (dp_size < 1 || dp_rank < 0 || dp_rank >= dp_size)
        return titan_error(TITAN_ERR_USAGE, "loader: data-parallel rank %d of %d out of range", dp_rank, dp_size);
    uint64_t tokens = titan_shard_dir_tokens(d), per = (uint64_t)seq_len + 1;
    if (tokens < per) {
        titan_status st = titan_error(TITAN_ERR_USAGE, "loader: the data holds %" PRIu64 " tokens, fewer than "
                                      "seq_len + 1 = %" PRIu64, tokens, per);
        titan_error_hint("shard more text, or lower training.seq_len");
        return st;
    }
    titan_loader *l = titan_alloc(sizeof *l, "loader");
    if (!l) return TITAN_ERR_NOMEM;
    l->row = titan_alloc(per * sizeof *l->row, "loader row");
    if (!l->row) {
        titan_free(l);
        return TITAN_ERR_NOMEM;
    }
    l->d = d;
    l->seq_len = seq_len;
    l->dp_rank = dp_rank;
    l->dp_size = dp_size;
    l->samples = tokens / per;
    l->shuffle = 0;
    int bits = 1;
    while (bits < 64 && ((uint64_t)1 << bits) < l->samples) bits++;
    l->half_bits = (bits + 1) / 2;
    l->st.position = 0;
    *out = l;
    return TITAN_OK;
}

void titan_loader_free(titan_loader *l) {
    if (!l) return;
    titan_free(l->row);
    titan_free(l);
}

void titan_loader_set_shuffle(titan_loader *l, uint64_t seed) {
    l->shuffle = 1;
    l->seed = seed;
}

/* A balanced Feistel network is a bijection on [0, 4^half_bits) whatever its
 * round function; walking the cycle until the value falls below S turns it
 * into a bijection on [0, S) (at most 4 steps on average, as 4^h < 4S). */
#define FEISTEL_ROUNDS 6
static uint64_t permute(const titan_loader *l, uint64_t epoch, uint64_t i) {
    int h = l->half_bits;
    uint64_t mask = ((uint64_t)1 << h) - 1;
    uint64_t stream = 0x6c6f61646572ull ^ (epoch * 0x9e3779b97f4a7c15ull); /* "loader", per epoch */
    uint64_t x = i;
    do {
        uint64_t left = x >> h, right = x & mask;
        for (int r = 0; r < FEISTEL_ROUNDS; r++) {
            uint64_t f = titan_rng_u64(l->seed, stream, ((uint64_t)r << 58) ^ right) & mask;
            uint64_t next = left ^ f;
            left = right;
            right = next;
        }
        x = (left << h) | right;
    } while (x >= l->samples);
    return x;
}

uint64_t titan_loader_sample_at(const titan_loader *l, uint64_t p) {
    uint64_t epoch = p / l->samples, i = p % l->samples;
    return l->shuffle ? permute(l, epoch, i) : i;
}

titan_status titan_loader_next(titan_loader *l, uint32_t *inputs, uint32_t *targets, int batch) {
    size_t L = (size_t)l->seq_len;
    for (int b = 0; b < batch; b++) {
        uint64_t p = l->st.position + (uint64_t)b * (uint64_t)l->dp_size + (uint64_t)l->dp_rank;
        uint64_t k = titan_loader_sample_at(l, p);
        TITAN_TRY(titan_shard_dir_read(l->d, k * (L + 1), l->row, L + 1));
        memcpy(inputs + (size_t)b * L, l->row, L * sizeof *l->row);
        memcpy(targets + (size_t)b * L, l->row + 1, L * sizeof *l->row);
    }
    l->st.position += (uint64_t)batch * (uint64_t)l->dp_size;
    return TITAN_OK;
}

void titan_loader_get_state(const titan_loader *l, titan_loader_state *st) { *st = l->st; }

void titan_loader_set_state(titan_loader *l, const titan_loader_state *st) { l->st = *st; }

uint64_t titan_loader_samples_per_epoch(const titan_loader *l) { return l->samples; }
