/* resume_shape.c - what a resume keeps of the steps its checkpoint was
 * trained with (trainer.h): the global batch across a layout change
 * (gradient accumulation makes up the difference), the number of held-out
 * sequences a validation reads, and the line that says what was saved and
 * what is resumed. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "train/trainer.h"

/* The shape of this job's steps (what its saves record). */
static titan_batch_shape current_shape(const trainer *t) {
    const titan_job_config *cfg = t->cfg;
    titan_batch_shape b = {.set = 1,
                           .local_batch_size = cfg->training_local_batch_size,
                           .seq_len = cfg->training_seq_len,
                           .accum_steps = t->accum,
                           .val_sequences = t->val_loader ? t->val_sequences : 0,
                           .val_steps = cfg->validation_steps};
    b.global_batch_size = b.local_batch_size * t->mesh.dp_size * b.accum_steps;
    if (t->mesh.layout.pp > 1)
        snprintf(b.pp_schedule, sizeof b.pp_schedule, "%.*s", (int)sizeof b.pp_schedule - 1,
                 cfg->parallelism_pipeline_parallel_schedule);
    return b;
}

/* Whether item (len characters) is one of the five degrees at 1. */
static int unit_degree(const char *item, size_t len) {
    static const char *const degrees[] = {"dp_replicate=", "dp_shard=", "cp=", "tp=", "pp="};
    for (size_t d = 0; d < sizeof degrees / sizeof *degrees; d++) {
        size_t kl = strlen(degrees[d]);
        if (len == kl + 1 && strncmp(item, degrees[d], kl) == 0 && item[kl] == '1') return 1;
    }
    return 0;
}

/* "dp_shard=4,tp=2" from "dp_replicate=1,dp_shard=4,cp=1,tp=2,pp=1": the
 * five degrees that are not 1 (and a pipeline's stage split), "single" when
 * none is; a pipeline's schedule after it. */
static void short_layout(const char *full, const char *pp_schedule, char *out, size_t cap) {
    size_t k = 0;
    out[0] = '\0';
    for (const char *p = full; *p && k + 1 < cap;) {
        size_t len = strcspn(p, ",");
        int single = len == 6 && strncmp(p, "single", 6) == 0;
        if (len && !single && !unit_degree(p, len))
            k += (size_t)snprintf(out + k, cap - k, "%s%.*s", k ? "," : "", (int)len, p);
        p += len + (p[len] == ',');
    }
    if (k >= cap) k = cap - 1;
    if (!k) k = (size_t)snprintf(out, cap, "single");
    if (pp_schedule[0] && k < cap) snprintf(out + k, cap - k, " (%s)", pp_schedule);
}

/* "global batch 64 x 2048 (4 x 8 dp x 2 accum)" */
static void batch_text(const titan_batch_shape *b, char *out, size_t cap) {
    if (!b->set) {
        snprintf(out, cap, "global batch unknown");
        return;
    }
    int64_t dp = b->global_batch_size / (b->local_batch_size * b->accum_steps);
    snprintf(out, cap, "global batch %" PRId64 " x %" PRId64 " (%" PRId64 " x %" PRId64 " dp x %" PRId64 " accum)",
             b->global_batch_size, b->seq_len, b->local_batch_size, dp, b->accum_steps);
}

/* The largest local batch, at most B, that with dp ranks divides the global
 * batch g; 0 when none does (dp does not divide g). */
static int64_t local_batch_for(int64_t g, int dp, int B) {
    if (g % dp) return 0;
    for (int64_t b = B; b >= 1; b--)
        if ((g / dp) % b == 0) return b;
    return 0;
}

/* training.global_batch_size unset (-1): the saved global batch again, by
 * gradient accumulation; set: its value, with a line when it changed. */
static titan_status keep_global_batch(trainer *t, const titan_batch_shape *saved, const char *ckpt) {
    const titan_job_config *cfg = t->cfg;
    int B = cfg->training_local_batch_size, dp = t->mesh.dp_size;
    int64_t per = (int64_t)B * dp, now = per * t->accum, g = saved->global_batch_size;
    if (!saved->set || g == now) return TITAN_OK;
    if (cfg->training_global_batch_size > 0) {
        if (t->mesh.rank == 0)
            titan_info("global batch changed: %" PRId64 " sequences a step when step %" PRId64 " was saved, %" PRId64
                       " from here on (training.global_batch_size)", g, t->pr.step, now);
        return TITAN_OK;
    }
    if (g % per == 0) {
        t->accum = (int)(g / per);
        return TITAN_OK;
    }
    titan_error(TITAN_ERR_USAGE, "%s: step %" PRId64 " was trained with a global batch of %" PRId64
                " sequences; this layout takes %d x %d dp = %" PRId64 " a micro-batch step, which does not divide it",
                ckpt, t->pr.step, g, B, dp, per);
    int64_t keep = local_batch_for(g, dp, B), change = (g + per - 1) / per * per;
    if (keep)
        titan_error_hint("keep it with --training.local_batch_size=%" PRId64 ", or change it with "
                         "--training.global_batch_size=%" PRId64, keep, change);
    else
        titan_error_hint("keep it on a data-parallel degree that divides %" PRId64 ", or change it with "
                         "--training.global_batch_size=%" PRId64, g, change);
    return TITAN_ERR_USAGE;
}

/* validation.sequences unset and validation.steps as saved: the saved
 * number of held-out sequences again (steps count batches of every
 * data-parallel rank, so another layout would read another number). A line
 * says how many, and when they differ from the checkpoint's, why. */
static void keep_validation(trainer *t, const titan_batch_shape *saved) {
    const titan_job_config *cfg = t->cfg;
    if (!t->val_loader) return;
    int64_t was = saved->set ? saved->val_sequences : 0, now = t->val_sequences;
    const char *why = cfg->validation_sequences > 0 ? "validation.sequences"
                      : cfg->validation_steps > 0   ? "validation.steps"
                                                    : "the whole held-out set";
    char note[256] = "";
    if (was > 0 && was != now && cfg->validation_sequences < 0 && cfg->validation_steps > 0 &&
        saved->val_steps == cfg->validation_steps) {
        t->val_sequences = was;
        snprintf(note, sizeof note, "; kept from step %" PRId64 " (validation.steps = %d makes %" PRId64
                 " under this layout; validation.sequences sets another number)", t->pr.step, cfg->validation_steps, now);
        why = "as saved";
    } else if (was > 0 && was != now) {
        snprintf(note, sizeof note, "; %" PRId64 " when step %" PRId64 " was saved: val_loss before and after it "
                 "is not comparable", was, t->pr.step);
    }
    uint64_t held = titan_loader_samples_per_epoch(t->val_loader);
    if (t->mesh.rank != 0) return;
    titan_info("validation: %" PRId64 " held-out sequences of %d tokens every %d steps (%s)%s", t->val_sequences,
               cfg->training_seq_len, cfg->validation_freq, why, note);
    if ((uint64_t)t->val_sequences > held)
        titan_warn("validation: %" PRId64 " sequences, but the held-out set has %" PRIu64 "; later ones repeat "
                   "earlier ones", t->val_sequences, held);
}

titan_status titan_trainer_resume_shape(trainer *t, const char *ckpt) {
    const titan_batch_shape saved = t->pr.batch;
    if (t->pr.step > 0) TITAN_TRY(keep_global_batch(t, &saved, ckpt));
    titan_batch_shape now = current_shape(t);
    if (t->mesh.rank == 0 && t->pr.step > 0) {
        char was_lay[TITAN_LAYOUT_STR_MAX + 48], now_lay[TITAN_LAYOUT_STR_MAX + 48], was_b[160], now_b[160];
        char lay[TITAN_LAYOUT_STR_MAX + 40];
        short_layout(t->pr.layout, saved.pp_schedule, lay, sizeof lay);
        if (t->pr.layout[0]) snprintf(was_lay, sizeof was_lay, "as %s", lay);
        else snprintf(was_lay, sizeof was_lay, "layout unknown");
        short_layout(t->mesh.layout_str, now.pp_schedule, now_lay, sizeof now_lay);
        batch_text(&saved, was_b, sizeof was_b);
        batch_text(&now, now_b, sizeof now_b);
        titan_info("resume: saved %s / %s at step %" PRId64 "%s; resuming as %s / %s", was_lay, was_b, t->pr.step,
                   saved.set ? "" : t->pr.model_only ? " (a model-only checkpoint)" : " (a checkpoint older than these records)", now_lay, now_b);
    }
    keep_validation(t, t->pr.step > 0 ? &saved : &(titan_batch_shape){0});
    t->pr.batch = current_shape(t); /* what the next saves record */
    return TITAN_OK;
}
