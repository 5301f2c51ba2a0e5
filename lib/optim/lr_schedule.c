/* lr_schedule.c - torchtitan's linear warmup / stable / decay learning-rate factor. */
#include <math.h>
#include <stdio.h>
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

int64_t titan_lr_inputs_length(const titan_lr_inputs *in) {
    return in->total_steps > 0 ? in->total_steps : in->training_steps;
}

titan_status titan_lr_schedule_from(titan_lr_schedule *s, const titan_lr_inputs *in) {
    return titan_lr_schedule_init(s, titan_lr_inputs_length(in), in->warmup_steps, in->decay_ratio,
                                  titan_lr_decay_name(in->decay), in->min_lr_factor);
}

double titan_lr_at(const titan_lr_schedule *s, const titan_lr_inputs *in, int64_t step) {
    return in->lr * titan_lr_factor(s, step);
}

/* Appends "key old -> new" to buf (", " between entries). */
static void add_change(char *buf, size_t cap, size_t *len, const char *key, const char *was, const char *now) {
    if (*len >= cap) return;
    int n = snprintf(buf + *len, cap - *len, "%s%s %s -> %s", *len ? ", " : "", key, was, now);
    if (n > 0) *len += (size_t)n;
}

int titan_lr_inputs_diff(const titan_lr_inputs *was, const titan_lr_inputs *now, char *buf, size_t cap) {
    size_t len = 0;
    char a[32], b[32];
    buf[0] = '\0';
#define CHANGE_I(key, f) \
    if (was->f != now->f) { \
        snprintf(a, sizeof a, "%lld", (long long)was->f); \
        snprintf(b, sizeof b, "%lld", (long long)now->f); \
        add_change(buf, cap, &len, key, a, b); \
    }
#define CHANGE_F(key, f) \
    if (was->f != now->f) { \
        snprintf(a, sizeof a, "%.9g", was->f); \
        snprintf(b, sizeof b, "%.9g", now->f); \
        add_change(buf, cap, &len, key, a, b); \
    }
    /* training.steps shapes the schedule only where total_steps leaves it the length */
    if (was->training_steps != now->training_steps && (was->total_steps == 0 || now->total_steps == 0))
        CHANGE_I("training.steps", training_steps)
    CHANGE_I("lr_scheduler.total_steps", total_steps)
    CHANGE_I("lr_scheduler.warmup_steps", warmup_steps)
    CHANGE_F("lr_scheduler.decay_ratio", decay_ratio)
    if (was->decay != now->decay)
        add_change(buf, cap, &len, "lr_scheduler.decay_type", titan_lr_decay_name(was->decay),
                   titan_lr_decay_name(now->decay));
    CHANGE_F("lr_scheduler.min_lr_factor", min_lr_factor)
    CHANGE_F("optimizer.lr", lr)
#undef CHANGE_I
#undef CHANGE_F
    /* total_steps 0 -> N where N was already the length changes no value */
    if (len == 0) return 0;
    titan_lr_schedule s1, s2;
    if (titan_lr_schedule_from(&s1, was) != TITAN_OK || titan_lr_schedule_from(&s2, now) != TITAN_OK) {
        titan_error_clear();
        return 1;
    }
    int same = titan_lr_inputs_length(was) == titan_lr_inputs_length(now) && s1.warmup_steps == s2.warmup_steps &&
               s1.stable_steps == s2.stable_steps && s1.decay_steps == s2.decay_steps && s1.decay == s2.decay &&
               s1.min_lr_factor == s2.min_lr_factor && was->lr == now->lr;
    return !same;
}
