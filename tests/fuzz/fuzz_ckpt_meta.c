/* fuzz_ckpt_meta.c - fuzz target: the checkpoint catalog parser (metadata.json).
 *
 * Parses the input with titan_ckpt_parse (no file is touched), then walks
 * everything a valid catalog offers: tensors, chunks, meta keys, and a small
 * planned read (which must fail with TITAN_ERR_IO: no data files). Built with
 * libFuzzer by `make fuzz`; replayed over tests/fuzz/corpus/ckpt_meta by
 * `make check` (build/tests/test_fuzz_ckpt_meta). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "core/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(titan_ckpt *ck) {
    int64_t i64;
    double f64;
    const char *s;
    titan_ckpt_meta_get_i64(ck, "train.step", &i64);
    titan_ckpt_meta_get_f64(ck, "lr", &f64);
    titan_ckpt_meta_get_str(ck, "tokenizer", &s);
    for (int i = 0; i < titan_ckpt_num_tensors(ck); i++) {
        titan_ckpt_tensor t, u;
        if (titan_ckpt_tensor_info(ck, i, &t) != TITAN_OK) abort(); /* every index in range works */
        if (titan_ckpt_tensor_find(ck, t.name, &u) != TITAN_OK || !titan_ckpt_has_tensor(ck, t.name)) abort();
        uint64_t most = 0;
        for (int j = 0; j < t.nchunks; j++) {
            titan_ckpt_chunk c;
            if (titan_ckpt_chunk_info(ck, t.name, j, &c) != TITAN_OK) abort();
            if (c.box.ndim != t.ndim || (c.compression == TITAN_CKPT_COMPRESS_NONE && c.stored_nbytes != c.nbytes))
                abort();
            for (int d = 0; d < t.ndim; d++)
                if (c.box.offset[d] < 0 || c.box.size[d] < 1 || c.box.offset[d] + c.box.size[d] > t.shape[d]) abort();
            if (c.nbytes > most) most = c.nbytes;
        }
        /* One element at the origin: plans the read, then fails at the data (or
         * the coverage check). Skipped for chunks too large to stage cheaply. */
        if (most <= ((uint64_t)1 << 20)) {
            titan_box one = {.ndim = t.ndim};
            for (int d = 0; d < t.ndim; d++) one.size[d] = 1;
            unsigned char dst[8];
            titan_status st = titan_ckpt_read(ck, t.name, t.dtype, &one, dst);
            if (st == TITAN_OK) abort(); /* there is no data to read */
        }
        titan_error_clear();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    titan_ckpt *ck = NULL;
    titan_status st = titan_ckpt_parse(&ck, (const char *)data, size, "fuzz/metadata.json");
    if (st == TITAN_OK) {
        walk(ck);
        titan_ckpt_close(ck);
    } else if (ck || !titan_error_message()[0]) {
        abort(); /* a failure leaves nothing open and says why */
    }
    titan_error_clear();
    return 0;
}
