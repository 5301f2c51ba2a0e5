/* fuzz_tensorboard.c - fuzz target: a TensorBoard event file read back
 * (titan_tb_parse: TFRecord framing, checksums, Event/Summary/SessionLog
 * protobuf fields, every length bounded by the bytes left). Checksums would
 * stop the fuzzer at the first record, so half the inputs are framed here
 * with correct checksums around the fuzzer's bytes, reaching the protobuf
 * decoder. Built with libFuzzer by `make fuzz`; replayed over
 * tests/fuzz/corpus/tensorboard by `make check`. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "trace/tensorboard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static titan_status count(void *ctx, int64_t step, double wall, const char *tag, double value) {
    (void)step, (void)wall, (void)value;
    if (tag && strlen(tag) > 255) abort(); /* the reader promises at most 255 bytes */
    ++*(size_t *)ctx;
    return TITAN_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t seen = 0;
    if (size && data[0] == 'F') { /* frame the rest as one record */
        size_t n = size - 1;
        uint8_t *rec = malloc(n + 16);
        if (!rec) return 0;
        for (int i = 0; i < 8; i++) rec[i] = (uint8_t)((uint64_t)n >> (8 * i));
        uint32_t c = titan_tb_masked_crc(rec, 8);
        for (int i = 0; i < 4; i++) rec[8 + i] = (uint8_t)(c >> (8 * i));
        memcpy(rec + 12, data + 1, n);
        uint32_t d = titan_tb_masked_crc(data + 1, n);
        for (int i = 0; i < 4; i++) rec[12 + n + i] = (uint8_t)(d >> (8 * i));
        titan_tb_parse(rec, n + 16, "fuzz", count, &seen);
        free(rec);
    } else {
        titan_tb_parse(data, size, "fuzz", count, &seen);
    }
    titan_error_clear();
    return 0;
}
