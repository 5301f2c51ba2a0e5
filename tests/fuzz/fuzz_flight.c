/* fuzz_flight.c - fuzz target: a flight recorder dump (titan_flight_parse)
 * and the hang analysis over it (titan_hang_report), which indexes ranks,
 * peers and communicators by what the dump says. Built with libFuzzer by
 * `make fuzz`; replayed over tests/fuzz/corpus/flight by `make check`
 * (build/tests/test_fuzz_flight). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "trace/flight_read.h"
#include "trace/hang.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fl_dump d;
    if (titan_flight_parse((const char *)data, size, "fuzz", &d) == TITAN_OK) {
        if (d.rank < 0 || d.rank >= d.world_size) abort(); /* the parser promises these */
        for (size_t i = 0; i < d.nentries; i++)
            if (d.entries[i].comm < 0 || d.entries[i].comm >= d.ncomms) abort();
        FILE *out = fopen("/dev/null", "w");
        if (out) {
            titan_hang_result res;
            titan_hang_report(&d, 1, out, &res);
            fclose(out);
        }
        titan_flight_dump_free(&d);
    }
    titan_error_clear();
    return 0;
}
