/* fuzz_safetensors.c - fuzz target: the safetensors header parser.
 *
 * The input is a whole .safetensors file; titan_st_parse validates its
 * header from memory, and a valid one is walked (tensors, ranges, metadata).
 * Built with libFuzzer by `make fuzz`; replayed over
 * tests/fuzz/corpus/safetensors by `make check` (build/tests/test_fuzz_safetensors). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "interchange/safetensors.h"
#include "core/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    titan_st_file *f = NULL;
    titan_status st = titan_st_parse(&f, data, size, "fuzz.safetensors");
    if (st != TITAN_OK) {
        if (f || !titan_error_message()[0]) abort();
        titan_error_clear();
        return 0;
    }
    uint64_t data_size = size - 8 - ((uint64_t)data[0] | (uint64_t)data[1] << 8 | (uint64_t)data[2] << 16 |
                                     (uint64_t)data[3] << 24 | (uint64_t)data[4] << 32 | (uint64_t)data[5] << 40 |
                                     (uint64_t)data[6] << 48 | (uint64_t)data[7] << 56);
    for (int i = 0; i < titan_st_num_tensors(f); i++) {
        const titan_st_tensor *t = titan_st_tensor_at(f, i);
        if (!t || titan_st_find(f, t->name) == NULL) abort();
        /* The validator's promises: in range, a whole number of elements. */
        if (t->begin > t->end || t->end > data_size || t->ndim < 0 || t->ndim > TITAN_MAX_DIMS) abort();
        uint64_t n = titan_dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
        if (n != t->end - t->begin) abort();
    }
    titan_st_metadata(f, "format");
    titan_st_close(f);
    titan_error_clear();
    return 0;
}
