/* test_model_split.c - the backward in two parts (titan_llama_backward_input
 * then titan_llama_backward_weight, zero-bubble pipeline schedules' I and
 * W) against the one-part backward, bitwise.
 *
 * A model made with split_backward and 3 slots runs 3 micro-batches the
 * way a zero-bubble schedule interleaves them (F0 F1 I0 F2 I1 W0 I2 W1 W2,
 * two local batches in a row, zero_grads before the first); the reference
 * model runs F, B, F, B, ... over the same micro-batches. Every parameter
 * gradient must agree bit for bit, for each activation checkpointing mode,
 * f32 and bf16, tied and untied embeddings. A weight part dropped fails
 * the comparison (checked here: the check can fail), a second weight part
 * for one input part stops on the model's assertion (checked in a child). */
#include <sys/wait.h>
#include <unistd.h>

#include "model_test.h"

#include "backend/backend.h"
#include "core/rng.h"

enum { B = 2, T = 8, N = B * T, M = 3, ACC = 2, NL = 3, VOCAB = 61 };

static uint32_t tok(int which, int a, int mb, int i) {
    return (uint32_t)(titan_rng_u64(7, (uint64_t)which, (uint64_t)((a * M + mb) * N + i)) % VOCAB);
}

static titan_llama *make(const titan_llama_config *c, const float *P, titan_ac_mode ac, titan_dtype dt, int split) {
    titan_llama_options o = {.slots = split ? M : 1, .split_backward = split};
    titan_llama *m = NULL;
    if (titan_llama_create_ex(&m, c, titan_backend_cpu(), B, T, ac, dt, &o) != TITAN_OK) {
        fprintf(stderr, "model: %s\n", titan_error_message());
        exit(1);
    }
    memcpy(titan_llama_params_data(m), P, titan_llama_params_count(m) * sizeof(float));
    return m;
}

static void forward(titan_llama *m, int a, int mb, float scale) {
    uint32_t x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = tok(1, a, mb, i), y[i] = tok(2, a, mb, i);
    float loss;
    CHECK(titan_llama_forward_train(m, x, y, scale, &loss) == TITAN_OK);
}

/* The zero-bubble order of the three micro-batches' F, I and W (mb, op:
 * 0 F, 1 I, 2 W); skip_w: the weight part of that micro-batch left out. */
static void run_split(titan_llama *m, float scale, int skip_w) {
    static const int order[][2] = {{0, 0}, {1, 0}, {0, 1}, {2, 0}, {1, 1}, {0, 2}, {2, 1}, {1, 2}, {2, 2}};
    titan_llama_zero_grads(m);
    for (int a = 0; a < ACC; a++)
        for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
            int mb = order[i][0], op = order[i][1];
            titan_llama_set_slot(m, mb);
            if (op == 0) forward(m, a, mb, scale);
            else if (op == 1) titan_llama_backward_input(m, scale);
            else if (mb != skip_w || a != ACC - 1) titan_llama_backward_weight(m);
        }
}

static void run_whole(titan_llama *m, float scale) {
    titan_llama_zero_grads(m);
    for (int a = 0; a < ACC; a++)
        for (int mb = 0; mb < M; mb++) {
            forward(m, a, mb, scale);
            titan_llama_backward(m, scale);
        }
}

static int same_grads(titan_llama *x, titan_llama *y) {
    return memcmp(titan_llama_grads_data(x), titan_llama_grads_data(y),
                  titan_llama_params_count(x) * sizeof(float)) == 0;
}

static void one_case(titan_ac_mode ac, titan_dtype dt, int tied) {
    titan_llama_config c = tiny_config(NL, 4, 2, VOCAB, tied);
    size_t np = titan_llama_num_params(&c);
    float *P = xalloc(np * sizeof(float));
    titan_llama_init_weights(&c, P, 2718);
    float scale = 1.0f / (ACC * M);
    titan_llama *whole = make(&c, P, ac, dt, 0), *split = make(&c, P, ac, dt, 1);
    run_whole(whole, scale);
    run_split(split, scale, -1);
    CHECK(same_grads(whole, split), "ac %d, %s, tied %d: I then W differs from the one-part backward", ac,
          titan_dtype_name(dt), tied);
    CHECK(titan_llama_stash_bytes(split) > 0 && titan_llama_stash_bytes(whole) == 0);
    /* a weight part left out must show */
    run_split(split, scale, 1);
    CHECK(!same_grads(whole, split), "ac %d: a dropped weight part went unseen", ac);
    titan_llama_free(whole);
    titan_llama_free(split);
    free(P);
}

/* A stage may mix whole backwards and split ones (a CSV schedule): F0 F1
 * I0 B1 W0 over one local batch of two micro-batches gives the one-part
 * backward's bits (each gradient the sum of two terms: their order does
 * not change it). */
static void mixed_case(void) {
    titan_llama_config c = tiny_config(NL, 4, 2, VOCAB, 0);
    float *P = xalloc(titan_llama_num_params(&c) * sizeof(float));
    titan_llama_init_weights(&c, P, 99);
    titan_llama *whole = make(&c, P, TITAN_AC_NONE, TITAN_DTYPE_F32, 0), *mix = make(&c, P, TITAN_AC_NONE,
                                                                                      TITAN_DTYPE_F32, 1);
    titan_llama_zero_grads(whole);
    for (int mb = 0; mb < 2; mb++) {
        forward(whole, 0, mb, 0.5f);
        titan_llama_backward(whole, 0.5f);
    }
    titan_llama_zero_grads(mix);
    titan_llama_set_slot(mix, 0);
    forward(mix, 0, 0, 0.5f);
    titan_llama_set_slot(mix, 1);
    forward(mix, 0, 1, 0.5f);
    titan_llama_set_slot(mix, 0);
    titan_llama_backward_input(mix, 0.5f);
    titan_llama_set_slot(mix, 1);
    titan_llama_backward(mix, 0.5f);
    titan_llama_set_slot(mix, 0);
    titan_llama_backward_weight(mix);
    CHECK(same_grads(whole, mix), "I0 B1 W0 differs from B0 B1");
    titan_llama_free(whole);
    titan_llama_free(mix);
    free(P);
}

/* A second weight part for one input part: the model stops (assertion).
 * In a fresh process (exec: OpenMP's threads do not survive a fork). */
static int double_weight(void) {
    titan_llama_config c = tiny_config(NL, 4, 2, VOCAB, 0);
    float *P = xalloc(titan_llama_num_params(&c) * sizeof(float));
    titan_llama *m = make(&c, P, TITAN_AC_NONE, TITAN_DTYPE_F32, 1);
    titan_llama_zero_grads(m);
    forward(m, 0, 0, 1.0f);
    titan_llama_backward_input(m, 1.0f);
    titan_llama_backward_weight(m);
    titan_llama_backward_weight(m);
    return 0;
}

static void double_weight_stops(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(2);
        execl("/proc/self/exe", "test_model_split", "--double-weight", (char *)NULL);
        _exit(0); /* no exec: reads as a pass of the second W, so fails */
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0), "a second weight part ran");
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--double-weight") == 0) return double_weight();
    static const titan_ac_mode acs[] = {TITAN_AC_NONE, TITAN_AC_FULL, 2, TITAN_AC_OP};
    for (size_t i = 0; i < sizeof acs / sizeof acs[0]; i++) {
        one_case(acs[i], TITAN_DTYPE_F32, 0);
        one_case(acs[i], TITAN_DTYPE_BF16, 0);
    }
    one_case(TITAN_AC_NONE, TITAN_DTYPE_F32, 1);
    one_case(TITAN_AC_OP, TITAN_DTYPE_BF16, 1);
    mixed_case();
    double_weight_stops();
    if (failures) {
        fprintf(stderr, "test_model_split: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_model_split: ok\n");
    return 0;
}
