/* model_test.h - helpers the model and distributed tests share: an
 * allocator that exits on failure, a look into the last error message,
 * joining a job as one of its ranks, the tiny Llama configuration the
 * model tests build on, and the groups a tp or cp model runs on. */
#ifndef TITAN_TESTS_MODEL_TEST_H
#define TITAN_TESTS_MODEL_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>
#include <stdint.h>

#include "core/error.h"
#include "comm/bootstrap.h"
#include "comm/comm.h"
#include "comm/spawn.h"
#include "model/llama.h"
#include "parallel/group.h"

#include "check.h"
#include "shm_probe.h"

/* 1 when the last error message contains frag. */
static inline int has(const char *frag) { return strstr(titan_error_message(), frag) != NULL; }

/* Zeroed memory, or exit: a test has nothing to check without it. */
static inline void *xalloc(size_t n) {
    void *p = calloc(n ? n : 1, 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* Bootstraps this process as a rank of its job (singleton, local launcher
 * or PMIx): 1 with *d, *me and *nr set; 0 after printing why. */
static inline int join_job(titan_dist **d, int *me, int *nr) {
    if (titan_dist_init(d) != TITAN_OK) {
        fprintf(stderr, "bootstrap: %s\n", titan_error_message());
        return 0;
    }
    *me = titan_dist_rank(*d);
    *nr = titan_dist_world_size(*d);
    return 1;
}

/* How far a model split over ranks (tensor or context parallel) may lie from
 * the whole model, normalised: fp32 only regroups sums; bf16 rounds partial
 * results before summing them over the ranks (the reasoning and what was
 * measured: test_model_tp.c, test_model_cp.c). */
#define TOL_LOSS_F32 1e-6
#define TOL_GRAD_F32 1e-5
#define TOL_LOGIT_F32 1e-5
#define TOL_LOSS_BF16 1e-3
#define TOL_GRAD_BF16 5e-2
#define TOL_LOGIT_BF16 1e-2

/* A test that runs as jobs of itself over shared memory (test_model_tp,
 * test_model_cp): `TEST` alone launches a job of 2 ranks, then one of 4
 * (exit 77 without POSIX shared memory); `TEST --suite NAME` is one rank,
 * which joins the job, makes *world over all of its ranks and runs
 * run_rank(world, me, nr), a nonzero return failing the job. */
typedef int (*rank_fn)(titan_comm *world, int me, int nr);
static inline int rank_jobs_main(int argc, char **argv, const char *test, const char *suite, rank_fn run_rank) {
    setvbuf(stderr, NULL, _IOLBF, 0);
    if (argc >= 3 && strcmp(argv[1], "--suite") == 0) {
        titan_dist *d;
        titan_comm *world = NULL;
        int me, nr;
        if (!join_job(&d, &me, &nr)) return 1;
        titan_comm_options co = {.timeout_s = 60, .name = suite};
        if (strcmp(argv[2], suite) != 0 || nr < 2 || nr > 64 || titan_comm_init(d, &co, &world) != TITAN_OK) {
            fprintf(stderr, "rank %d: suite %s on %d ranks: %s\n", me, argv[2], nr, titan_error_message());
            titan_dist_free(d);
            return 1;
        }
        int rc = run_rank(world, me, nr);
        fflush(stdout);
        titan_comm_free(world);
        titan_dist_free(d);
        return rc;
    }
    /* the ranks talk through POSIX shared memory (absent in some sandboxes) */
    if (!shm_works()) return 77;
    printf("%s:\n", test);
    fflush(stdout);
    for (int n = 2; n <= 4; n += 2) {
        char *args[] = {"/proc/self/exe", "--suite", (char *)suite, NULL};
        titan_dist_spawn_options o = {.nproc = n, .grace_s = 5};
        int first = 0;
        CHECK(titan_dist_spawn_local(args, &o, &first) == TITAN_OK, "job of %d ranks (exit %d)", n, first);
    }
    if (failures) {
        fprintf(stderr, "%s: %d failure(s)\n", test, failures);
        return 1;
    }
    printf("%s: ok\n", test);
    return 0;
}

/* FNV-1a over n bytes, from h (0xcbf29ce484222325 to start). */
static inline uint64_t fnv(const void *p, size_t n, uint64_t h) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* 1 when every rank of c (at most 64) passes the same 64 bits. */
static inline int same_on_all(titan_comm *c, uint64_t x) {
    uint64_t all[64];
    if (titan_comm_all_gather(c, &x, all, 2, TITAN_DTYPE_U32, NULL) != TITAN_OK) {
        CHECK(0, "all_gather");
        return 0;
    }
    for (int r = 0; r < titan_comm_size(c); r++)
        if (all[r] != x) return 0;
    return 1;
}

/* The largest x over the ranks of c (for reports). */
static inline double max_over_ranks(titan_comm *c, double x) {
    double all[64];
    if (titan_comm_all_gather(c, &x, all, 2, TITAN_DTYPE_U32, NULL) != TITAN_OK) {
        CHECK(0, "all_gather");
        return x;
    }
    for (int r = 0; r < titan_comm_size(c); r++) x = fmax(x, all[r]);
    return x;
}

/* max |a - b| / max |b| over n values (b the reference; 1 as the scale if b is all zero). */
static inline double norm_max_err(const float *a, const float *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / (m > 0 ? m : 1);
}

/* dim 32, hidden 112 (multiple_of 16, ffn multiplier 1.3), Llama 3.1's rope
 * scaling; the tests pick the depth, heads, vocabulary and tying. */
static inline titan_llama_config tiny_config(int n_layers, int n_heads, int n_kv_heads, int vocab, int tied) {
    titan_llama_config c;
    memset(&c, 0, sizeof c);
    c.dim = 32;
    c.n_layers = n_layers;
    c.n_heads = n_heads;
    c.n_kv_heads = n_kv_heads;
    c.vocab_size = vocab;
    c.multiple_of = 16;
    c.ffn_dim_multiplier = 1.3f;
    c.norm_eps = 1e-5f;
    c.rope_theta = 10000.0f;
    c.rope_scaling_factor = 8.0f;
    c.rope_low_freq_factor = 1.0f;
    c.rope_high_freq_factor = 4.0f;
    c.rope_original_context = 8192;
    c.tie_embeddings = tied;
    return c;
}

/* The model's collectives over c on be's buffers (model/group.h): NULL
 * for NULL or one rank; kept until free_groups (models hold them). */
static titan_group *test_groups[64];
static int test_ngroups;
static inline const titan_group *model_group_of(titan_comm *c, const titan_backend *be) {
    titan_group *g = NULL;
    if (test_ngroups == 64 || titan_parallel_group_create(&g, c, be) != TITAN_OK) {
        fprintf(stderr, "FAIL: group: %s\n", titan_error_message());
        exit(1);
    }
    if (g) test_groups[test_ngroups++] = g;
    return g;
}
static inline void free_groups(void) {
    while (test_ngroups > 0) titan_parallel_group_free(test_groups[--test_ngroups]);
}

#endif
