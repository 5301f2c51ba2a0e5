/* sample.h - text generation from a trained model (greedy or with temperature). */
#ifndef TITAN_TRAIN_SAMPLE_H
#define TITAN_TRAIN_SAMPLE_H

#include <stdint.h>
#include <stdio.h>

#include "data/tokenizer.h"
#include "model/llama.h"

/* Writes prompt + n generated tokens, decoded, to out. temperature 0 = greedy.
 * Uses its own batch-1 copy of the whole model on the CPU with a context of
 * at most 256 tokens. Under tensor parallelism every rank of the model's tp
 * group calls it (each gives its pieces) and its tp rank 0 alone makes the
 * copy and samples. */
titan_status titan_sample(titan_llama *model, const titan_tokenizer *tok, const char *prompt, int n,
                          double temperature, uint64_t seed, FILE *out);

#endif
