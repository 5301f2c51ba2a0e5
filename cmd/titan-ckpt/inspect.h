/* inspect.h - looking at checkpoints: list a root, describe a step, verify
 * every byte, compare two checkpoints tensor by tensor, evaluate the model.
 * These print data (tables or JSON) to `out`; people's messages go through log.h. */
#ifndef TITAN_CMD_CKPT_INSPECT_H
#define TITAN_CMD_CKPT_INSPECT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"

/* The checkpoints of a root (or a run dir): step, bytes, tokens seen, state
 * (complete, incomplete .tmp, corrupt catalog) and which one `latest` names. */
titan_status titan_ckpt_ls(const char *arg, int json, FILE *out);

/* Step, training state, model, meta keys and the tensor catalog of one checkpoint. */
titan_status titan_ckpt_info(const char *arg, int json, FILE *out);

/* Checks the catalog, that each tensor's chunks cover it exactly once, and
 * every checksum. Problems are each reported (titan_warn); the result names
 * how many: TITAN_ERR_FORMAT when a tensor's chunks do not cover it,
 * TITAN_ERR_CORRUPT when only chunk data is damaged (checksum mismatch, zstd
 * frame error). *nbad gets their count. */
titan_status titan_ckpt_verify_all(const char *arg, FILE *out, int *nbad);

typedef struct {
    int params_only; /* skip optimizer state (names with ':') */
    int json;
    int verbose;     /* also list identical tensors (text output) */
    /* numpy allclose: element x of a and y of b are close when |x - y| <=
     * atol + rtol * |y|. tolerance 0: exact (atol = rtol = 0, and a tensor
     * stored in another dtype with the same values differs). */
    int tolerance;
    double atol, rtol;
} titan_ckpt_diff_opts;

/* Compares every tensor of a and b: max abs and max relative difference,
 * elements that differ and elements outside the tolerance, and whether the
 * bytes are identical; tensors found in one only. *differ = 1 when an
 * element is outside the tolerance, a shape or kind does not match, or a
 * tensor is in one only. */
titan_status titan_ckpt_diff(const char *a, const char *b, const titan_ckpt_diff_opts *o, FILE *out,
                             int *differ);

/* Runs the checkpoint's model (CPU backend) on tokens[T] and prints the
 * logits, one row of V values per position (%.9g). */
titan_status titan_ckpt_eval(const char *arg, const uint32_t *tokens, int T, FILE *out);

#endif
