/* test_lr_schedule.c - torchtitan's warmup/stable/decay factors against hand-computed values. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "optim/optim.h"

static int failures;
static double max_err;

static void expect(const titan_lr_schedule *s, int64_t step, double want, const char *what) {
    double got = titan_lr_factor(s, step);
    double err = fabs(got - want);
    if (err > max_err) max_err = err;
    if (err > 1e-12) {
        failures++;
        fprintf(stderr, "FAIL %s: factor(%lld) = %.15g, want %.15g\n", what, (long long)step, got,
                want);
    }
}

static titan_lr_schedule make(int64_t steps, int64_t warmup, double ratio, const char *type,
                              double min_lr) {
    titan_lr_schedule s;
    titan_status st = titan_lr_schedule_init(&s, steps, warmup, ratio, type, min_lr);
    if (st != TITAN_OK) {
        failures++;
        fprintf(stderr, "FAIL init(%lld, %lld, %g, %s, %g): %s\n", (long long)steps,
                (long long)warmup, ratio, type, min_lr, titan_error_message());
    }
    return s;
}

int main(void) {
    const double pi = 3.14159265358979323846;

    /* 10 steps, warmup 2, decay over the rest (ratio unset), linear to 0. */
    titan_lr_schedule s = make(10, 2, -1.0, "linear", 0.0);
    if (s.warmup_steps != 2 || s.stable_steps != 0 || s.decay_steps != 8) {
        failures++;
        fprintf(stderr, "FAIL split 2/0/8: got %lld/%lld/%lld\n", (long long)s.warmup_steps,
                (long long)s.stable_steps, (long long)s.decay_steps);
    }
    expect(&s, 0, 1.0 / 3.0, "warmup 2"); /* LambdaLR's lr_lambda(0): the first step */
    expect(&s, 1, 2.0 / 3.0, "warmup 2");
    expect(&s, 2, 1.0 - 1.0 / 9.0, "linear decay");
    expect(&s, 5, 1.0 - 4.0 / 9.0, "linear decay");
    expect(&s, 9, 1.0 / 9.0, "linear decay, last step");

    /* warmup 0: the first step already runs at the full rate. decay_ratio 0.2
     * of 10 steps = 2 decay steps, 8 stable; min_lr_factor 0.1. */
    s = make(10, 0, 0.2, "linear", 0.1);
    if (s.warmup_steps != 0 || s.stable_steps != 8 || s.decay_steps != 2) {
        failures++;
        fprintf(stderr, "FAIL split 0/8/2\n");
    }
    expect(&s, 0, 1.0, "warmup 0");
    expect(&s, 7, 1.0, "stable");
    expect(&s, 8, 0.1 + 0.9 * (2.0 / 3.0), "linear, min 0.1");
    expect(&s, 9, 0.1 + 0.9 * (1.0 / 3.0), "linear, min 0.1");

    s = make(10, 0, 0.2, "sqrt", 0.1);
    expect(&s, 7, 1.0, "sqrt stable");
    expect(&s, 8, 0.48038475772933686, "sqrt"); /* 0.1 + 0.9 (1 - sqrt(1/3)) */
    expect(&s, 9, 0.26515307716504655, "sqrt"); /* 0.1 + 0.9 (1 - sqrt(2/3)) */

    s = make(10, 0, 0.2, "cosine", 0.1);
    expect(&s, 8, 0.1 + 0.9 * 0.75, "cosine"); /* cos(pi/3) = 1/2 */
    expect(&s, 9, 0.1 + 0.9 * 0.25, "cosine"); /* cos(2pi/3) = -1/2 */

    /* warmup, stable and decay together: 100 steps, warmup 10, ratio 0.2. */
    s = make(100, 10, 0.2, "cosine", 0.0);
    expect(&s, 0, 1.0 / 11.0, "warmup 10");
    expect(&s, 9, 10.0 / 11.0, "warmup 10");
    expect(&s, 10, 1.0, "stable");
    expect(&s, 79, 1.0, "stable end");
    expect(&s, 80, 0.5 * (1.0 + cos(pi / 21.0)), "cosine start");
    expect(&s, 99, 0.5 * (1.0 + cos(pi * 20.0 / 21.0)), "cosine end");

    /* Python round(): half to even. 10 * 0.25 = 2.5 -> 2; 10 * 0.35 = 3.5 -> 4. */
    s = make(10, 0, 0.25, "linear", 0.0);
    if (s.decay_steps != 2) {
        failures++;
        fprintf(stderr, "FAIL round(2.5) = %lld, want 2\n", (long long)s.decay_steps);
    }
    s = make(10, 0, 0.35, "linear", 0.0);
    if (s.decay_steps != 4) {
        failures++;
        fprintf(stderr, "FAIL round(3.5) = %lld, want 4\n", (long long)s.decay_steps);
    }

    /* warmup + decay beyond the run: decay is cut to what is left. */
    s = make(10, 5, 0.8, "linear", 0.0);
    if (s.warmup_steps != 5 || s.stable_steps != 0 || s.decay_steps != 5) {
        failures++;
        fprintf(stderr, "FAIL cut split 5/0/5: %lld/%lld/%lld\n", (long long)s.warmup_steps,
                (long long)s.stable_steps, (long long)s.decay_steps);
    }
    expect(&s, 4, 5.0 / 6.0, "warmup 5");
    expect(&s, 5, 1.0 - 1.0 / 6.0, "cut decay");

    /* decay_ratio 0: constant after warmup. */
    s = make(10, 3, 0.0, "cosine", 0.0);
    expect(&s, 3, 1.0, "no decay");
    expect(&s, 9, 1.0, "no decay");

    /* Bad input is a usage error naming the key. */
    titan_lr_schedule bad;
    if (titan_lr_schedule_init(&bad, 10, 0, -1, "exp", 0.0) != TITAN_ERR_USAGE ||
        !strstr(titan_error_message(), "decay_type")) {
        failures++;
        fprintf(stderr, "FAIL unknown decay type accepted or unnamed: %s\n", titan_error_message());
    }
    if (titan_lr_schedule_init(&bad, 10, 0, -1, "linear", 1.5) != TITAN_ERR_USAGE) {
        failures++;
        fprintf(stderr, "FAIL min_lr_factor 1.5 accepted\n");
    }
    if (titan_lr_schedule_init(&bad, 10, -1, -1, "linear", 0.0) != TITAN_ERR_USAGE) {
        failures++;
        fprintf(stderr, "FAIL negative warmup accepted\n");
    }

    /* total_steps is the length whatever training.steps; 0 leaves it to training.steps */
    titan_lr_inputs in100 = {.set = 1, .lr = 1e-3, .training_steps = 100, .total_steps = 200, .warmup_steps = 10,
                             .decay_ratio = -1, .min_lr_factor = 0.1};
    titan_lr_inputs in200 = in100;
    in200.training_steps = 200;
    titan_lr_schedule a, b;
    if (titan_lr_schedule_from(&a, &in100) != TITAN_OK || titan_lr_schedule_from(&b, &in200) != TITAN_OK ||
        a.decay_steps != 190 || memcmp(&a, &b, sizeof a) != 0) {
        failures++;
        fprintf(stderr, "FAIL total_steps 200: decay %lld, want 190 for training.steps 100 and 200\n",
                (long long)a.decay_steps);
    }
    expect(&a, 199, 0.1 + 0.9 * (1.0 / 191.0), "total_steps: last step");
    char diff[256];
    if (titan_lr_inputs_diff(&in100, &in200, diff, sizeof diff)) {
        failures++;
        fprintf(stderr, "FAIL training.steps under total_steps counted as a change: %s\n", diff);
    }
    in100.total_steps = in200.total_steps = 0;
    if (!titan_lr_inputs_diff(&in100, &in200, diff, sizeof diff) || strcmp(diff, "training.steps 100 -> 200")) {
        failures++;
        fprintf(stderr, "FAIL training.steps 100 -> 200 without total_steps: '%s'\n", diff);
    }
    in200 = in100;
    in200.total_steps = 100; /* the same length spelled out: the same schedule */
    if (titan_lr_inputs_diff(&in100, &in200, diff, sizeof diff)) {
        failures++;
        fprintf(stderr, "FAIL total_steps = training.steps counted as a change: %s\n", diff);
    }
    in200.total_steps = 0;
    in200.decay = TITAN_LR_DECAY_COSINE;
    in200.lr = 2e-3;
    if (!titan_lr_inputs_diff(&in100, &in200, diff, sizeof diff) ||
        strcmp(diff, "lr_scheduler.decay_type linear -> cosine, optimizer.lr 0.001 -> 0.002")) {
        failures++;
        fprintf(stderr, "FAIL decay_type and lr change: '%s'\n", diff);
    }

    if (failures) {
        fprintf(stderr, "test_lr_schedule: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_lr_schedule: ok (max |error| %.3g)\n", max_err);
    return 0;
}
