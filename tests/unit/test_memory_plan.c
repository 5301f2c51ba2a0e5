/* test_memory_plan.c - the model's memory plan without allocating
 * (titan_llama_plan_memory, the dry run's) against what
 * titan_llama_create_ex allocates for the same arguments: the parameter
 * count, the compute copy, the activation arena, and the bytes the
 * backend's allocator counts after create, for every activation
 * checkpointing mode, fp32 and bf16, whole models and pipeline stages
 * with several micro-batches in flight, on cpu and cpu-guard. */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "model/llama.h"

#include "check.h"
#include "model_test.h"

static void one(const titan_backend *be, int ac, titan_dtype dt, int pp, int stage, int slots, int tied) {
    titan_llama_config c = tiny_config(4, 4, 2, 300, tied);
    titan_llama_options opt = {.pp_size = pp, .pp_stage = stage, .slots = slots};
    char what[128];
    snprintf(what, sizeof what, "%s ac %d %s pp %d stage %d slots %d tied %d", be->name, ac, titan_dtype_name(dt), pp,
             stage, slots, tied);
    titan_llama_memory plan;
    CHECK(titan_llama_plan_memory(&c, 3, 16, ac, dt, &opt, be->host, &plan) == TITAN_OK, "%s: plan", what);
    size_t before = 0, after = 0;
    be->memory(&before, NULL, NULL, 0);
    titan_llama *m = NULL;
    CHECK(titan_llama_create_ex(&m, &c, be, 3, 16, ac, dt, &opt) == TITAN_OK, "%s: create", what);
    if (!m) return;
    be->memory(&after, NULL, NULL, 0);
    CHECK(plan.nparams == titan_llama_params_count(m), "%s: %zu parameters planned, %zu made", what, plan.nparams,
          titan_llama_params_count(m));
    CHECK(plan.compute_copy_bytes == titan_llama_compute_copy_bytes(m), "%s: compute copy", what);
    CHECK(plan.arena_bytes == titan_llama_activation_bytes(m), "%s: arena %zu planned, %zu made", what,
          plan.arena_bytes, titan_llama_activation_bytes(m));
    CHECK(plan.slots == titan_llama_slots(m), "%s: slots", what);
    CHECK(plan.stage_io_bytes == titan_llama_stage_io_count(m) * titan_dtype_size(dt), "%s: stage message", what);
    size_t want = 2 * plan.params_bytes + plan.compute_copy_bytes + plan.arena_bytes;
    CHECK(after - before == want, "%s: the allocator counts %zu bytes, the plan %zu", what, after - before, want);
    titan_llama_free(m);
}

int main(void) {
    const titan_backend *bes[2] = {titan_backend_cpu(), titan_backend_cpu_guard()};
    const int acs[4] = {TITAN_AC_NONE, TITAN_AC_FULL, 2, TITAN_AC_OP};
    for (int b = 0; b < 2; b++)
        for (int a = 0; a < 4; a++)
            for (int d = 0; d < 2; d++) {
                titan_dtype dt = d ? TITAN_DTYPE_BF16 : TITAN_DTYPE_F32;
                one(bes[b], acs[a], dt, 1, 0, 1, a & 1);
                one(bes[b], acs[a], dt, 2, 0, 2, 0); /* first stage, two micro-batches in flight */
                one(bes[b], acs[a], dt, 2, 1, 1, 0); /* last stage: the head's activations */
            }
    /* A refused request is refused by the plan too. */
    titan_llama_config c = tiny_config(4, 4, 2, 300, 0);
    titan_llama_memory plan;
    CHECK(titan_llama_plan_memory(&c, 0, 16, TITAN_AC_NONE, TITAN_DTYPE_F32, NULL, 1, &plan) == TITAN_ERR_USAGE,
          "a micro-batch of 0 sequences");
    titan_error_clear();
    if (failures) fprintf(stderr, "test_memory_plan: %d failure(s)\n", failures);
    else printf("test_memory_plan: ok\n");
    return failures != 0;
}
