/* lr_schedule.c - torchtitan's linear warmup / stable / decay learning-rate factor. */
#include <math.h>
#include <string.h>

#include "optim/optim.h"

static const char *const decay_names[] = {"linear", "sqrt", "cosine"};

titan_status titan_lr_decay_parse(const char *name, titan_lr_decay *out) {
    for (int i = 0; i < 3; i++)
        if (strcmp(name, decay_names[i]) == 0) {
            *out = (titan_lr_decay)i;
            return TITAN_OK;
        }
    titan_error(TITAN_ERR_USAGE, "lr_scheduler.decay_type: unknown decay type '%s'", name);
    titan_error_hint("valid decay types: linear, sqrt, cosine");
    return TITAN_ERR_USAGE;
}

const char *titan_lr_decay_name(titan_lr_decay d) {
    return (unsigned)d < 3 ? decay_names[d] : "?";
}

titan_status titan_lr_schedule_init(titan_lr_schedule *s, int64_t training_steps,
                                    int64_t warmup_steps, double decay_ratio, const char *decay_type,
                                    double min_lr_factor) {
    memset(s, 0, sizeof *s);
    if (training_steps < 0)
        return titan_error(TITAN_ERR_USAGE, "training.steps: must be >= 0 (got %lld)",
                           (long long)training_steps);
    if (warmup_steps < 0)
        return titan_error(TITAN_ERR_USAGE, "lr_scheduler.warmup_steps: must be >= 0 (got %lld)",
                           (long long)warmup_steps);
    if (decay_ratio > 1.0)
        return titan_error(TITAN_ERR_USAGE, "lr_scheduler.decay_ratio: must be <= 1 (got %g)",
                           decay_ratio);
    if (!(min_lr_factor >= 0.0 && min_lr_factor <= 1.0))
        return titan_error(TITAN_ERR_USAGE, "lr_scheduler.min_lr_factor: must be in [0, 1] (got %g)",
                           min_lr_factor);
    TITAN_TRY(titan_lr_decay_parse(decay_type, &s->decay));
    /* Warmup longer than training: all warmup (torchtitan would go negative). */
    if (warmup_steps > training_steps) warmup_steps = training_steps;
    int64_t decay;
    if (decay_ratio >= 0.0) {
        /* Python's round(): half to even, which nearbyint does in the default mode. */
        decay = (int64_t)nearbyint((double)training_steps * decay_ratio);
        if (warmup_steps + decay > training_steps) decay = training_steps - warmup_steps;
    } else {
        decay = training_steps - warmup_steps;
    }
    s->warmup_steps = warmup_steps;
    s->decay_steps = decay;
    s->stable_steps = training_steps - warmup_steps - decay;
    s->min_lr_factor = min_lr_factor;
    return TITAN_OK;
}

double titan_lr_factor(const titan_lr_schedule *s, int64_t step) {
    int64_t warmup_stable = s->warmup_steps + s->stable_steps;
    if (step < s->warmup_steps) return (double)(step + 1) / (double)(s->warmup_steps + 1);
    if (step < warmup_stable) return 1.0;
    /* Past training_steps the factor is undefined there; hold the last value's range. */
    double progress = (double)(step + 1 - warmup_stable) / (double)(s->decay_steps + 1);
    if (progress > 1.0) progress = 1.0;
    double adj;
    switch (s->decay) {
    case TITAN_LR_DECAY_SQRT: adj = 1.0 - sqrt(progress); break;
    case TITAN_LR_DECAY_COSINE: adj = 0.5 * (1.0 + cos(M_PI * progress)); break;
    default: adj = 1.0 - progress; break;
    }
    return s->min_lr_factor + (1.0 - s->min_lr_factor) * adj;
}
