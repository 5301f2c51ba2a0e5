/* loader.c - fixed-order, resumable packing of tokens into samples. */
#include "data/loader.h"

#include <inttypes.h>
#include <string.h>

#include "core/mem.h"

struct titan_loader {
    const titan_shard_dir *d;
    int seq_len, dp_rank, dp_size;
    uint64_t samples;  /* per epoch, a multiple of dp_size */
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
    uint64_t samples = tokens / per / (uint64_t)dp_size * (uint64_t)dp_size;
    if (samples == 0) {
        titan_status st = titan_error(TITAN_ERR_USAGE, "loader: the data holds %" PRIu64 " samples of %" PRIu64
                                      " tokens, fewer than the %d data-parallel ranks", tokens / per, per, dp_size);
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
    l->samples = samples;
    l->st.next_sample = (uint64_t)dp_rank;
    l->st.epoch = 0;
    *out = l;
    return TITAN_OK;
}

void titan_loader_free(titan_loader *l) {
    if (!l) return;
    titan_free(l->row);
    titan_free(l);
}

titan_status titan_loader_next(titan_loader *l, uint32_t *inputs, uint32_t *targets, int batch) {
    size_t L = (size_t)l->seq_len;
    for (int b = 0; b < batch; b++) {
        uint64_t k = l->st.next_sample;
        TITAN_TRY(titan_shard_dir_read(l->d, k * (L + 1), l->row, L + 1));
        memcpy(inputs + (size_t)b * L, l->row, L * sizeof *l->row);
        memcpy(targets + (size_t)b * L, l->row + 1, L * sizeof *l->row);
        k += (uint64_t)l->dp_size;
        if (k >= l->samples) {
            k = (uint64_t)l->dp_rank;
            l->st.epoch++;
        }
        l->st.next_sample = k;
    }
    return TITAN_OK;
}

void titan_loader_get_state(const titan_loader *l, titan_loader_state *st) { *st = l->st; }

titan_status titan_loader_set_state(titan_loader *l, const titan_loader_state *st) {
    if (st->next_sample >= l->samples || st->next_sample % (uint64_t)l->dp_size != (uint64_t)l->dp_rank)
        return titan_error(TITAN_ERR_FORMAT, "loader state: sample %" PRIu64 " does not fit rank %d of %d over "
                           "%" PRIu64 " samples per epoch", st->next_sample, l->dp_rank, l->dp_size, l->samples);
    l->st = *st;
    return TITAN_OK;
}

uint64_t titan_loader_samples_per_epoch(const titan_loader *l) { return l->samples; }
