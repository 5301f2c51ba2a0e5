/* parallel_test.h - helpers the lib/parallel tests share (test_mesh,
 * test_fsdp, test_pipeline): jobs of this test's own binary over the
 * local launcher, each rank joining as a mesh (lib/parallel/mesh.h, shared
 * memory) of a layout named on its command line, and comparisons of
 * gradients that count the elements that differ.
 *
 *   TEST                       the parent: jobs of 2 and 4 ranks (exit 77 without
 *                              POSIX shared memory)
 *   TEST --suite NAME LAYOUT   one rank of a job, LAYOUT as tensor/layout.h
 *                              parses it ("dp_shard=2,pp=2"); one mesh a job:
 *                              a process bootstraps once (a second
 *                              titan_dist_init in it does not meet the others) */
#ifndef TITAN_TESTS_PARALLEL_TEST_H
#define TITAN_TESTS_PARALLEL_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/clock.h"
#include "core/log.h"
#include "job/config.h"
#include "parallel/fsdp.h"
#include "parallel/mesh.h"
#include "tensor/layout.h"

#include "check.h"
#include "model_test.h"
#include "shm_probe.h"

/* Joins the job as a mesh of layout l (degrees as [parallelism] would give
 * them) with shared-memory communicators: 1 on success. */
static inline int mesh_join(const titan_layout *l, titan_mesh *m) {
    titan_job_config cfg;
    titan_config_defaults(&cfg);
    cfg.parallelism_data_parallel_replicate_degree = l->dp_replicate;
    cfg.parallelism_data_parallel_shard_degree = l->dp_shard;
    cfg.parallelism_tensor_parallel_degree = l->tp;
    cfg.parallelism_context_parallel_degree = l->cp;
    cfg.parallelism_pipeline_parallel_degree = l->pp;
    /* several stages a rank: the mesh makes the wrap communicators */
    if (l->pp_v > 1) cfg.parallelism_pp_schedule = TITAN_JOB_PP_INTERLEAVED_1F1B;
    cfg.comm_train_timeout_seconds = 60;
    if (titan_mesh_init(&cfg, m) != TITAN_OK || titan_mesh_connect(m, 0) != TITAN_OK) {
        fprintf(stderr, "mesh of %d x %d x %d x %d x %d: %s\n", l->pp, l->dp_replicate, l->dp_shard, l->cp, l->tp,
                titan_error_message());
        titan_mesh_free(m);
        return 0;
    }
    return 1;
}

/* Elements of a (n values) not bit-for-bit equal to b (+0 and -0 count as
 * equal: a gradient the model overwrites can be -0 where one added into
 * zeros is +0); the largest |a - b| into *maxd. */
static inline size_t count_diff(const float *a, const float *b, size_t n, double *maxd) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!(a[i] == b[i])) {
            bad++;
            double d = fabs((double)a[i] - b[i]);
            if (maxd && !(d <= *maxd)) *maxd = d;
        }
    return bad;
}

/* comm.h's averages of the dp ranks' gradients g[0 .. R x S - 1] (np
 * values each) into avg: added in rank order, then divided; the shard
 * group (dp ranks rr x S .. rr x S + S - 1) first, then the replicate one.
 * noinline: inlined at -O3 with an AMD -march=native, gcc 12 warns that
 * the callers' arrays may be uninitialized (every element is set) */
__attribute__((noinline, unused)) static void layout_average(float *const *g, int R, int S, size_t np, float *avg) {
    for (size_t j = 0; j < np; j++) {
        float tot = 0;
        for (int rr = 0; rr < R; rr++) {
            float acc = g[rr * S][j];
            for (int s = 1; s < S; s++) acc += g[rr * S + s][j];
            acc /= (float)S;
            tot = rr == 0 ? acc : tot + acc;
        }
        avg[j] = tot / (float)R;
    }
}

/* Not vacuous: every tensor of the catalog (ng of them) has a nonzero
 * entry in the reference gradient avg. */
static inline void check_grads_nonzero(const float *avg, const titan_param *gcat, int ng) {
    for (int i = 0; i < ng; i++) {
        int nz = 0;
        for (size_t j = 0; j < gcat[i].numel && !nz; j++) nz = avg[gcat[i].offset + j] != 0.0f;
        CHECK(nz, "reference gradient of %s all zero", gcat[i].name);
    }
}

/* Where piece i of an fsdp shard starts in the whole model's flat vector. */
static inline size_t piece_flat_off(const titan_shard_piece *pc, const titan_param *gcat, int i) {
    return pc[i].full_off - pc[i].param_off + gcat[i].offset;
}

/* The shard's parameters from the whole model's P, as a checkpoint load
 * leaves them, then params_updated. */
static inline void fsdp_load_whole(titan_fsdp *f, const float *P, const titan_param *gcat, int ng) {
    float *sp = titan_fsdp_params(f);
    const titan_shard_piece *pc = titan_fsdp_pieces(f);
    for (int i = 0; i < ng; i++)
        memcpy(sp + pc[i].shard_off, P + piece_flat_off(pc, gcat, i), pc[i].len * sizeof(float));
    CHECK(titan_fsdp_params_updated(f) == TITAN_OK);
}

/* One rank of a layout: 0 on success. */
typedef int (*layout_fn)(const titan_layout *l);

static inline int parallel_rank_main(const char *suite, const char *layout, layout_fn run) {
    titan_backend_cpu_set_threads(1);
    titan_log_set_verbosity(0); /* warnings and errors only */
    titan_layout l;
    if (titan_layout_parse(layout, &l) != TITAN_OK) {
        fprintf(stderr, "%s: layout %s: %s\n", suite, layout, titan_error_message());
        return 1;
    }
    int rc = run(&l);
    fflush(stdout);
    return rc || failures ? 1 : 0;
}

/* The parent: for each job, nproc ranks of this binary on the layout. */
typedef struct {
    int nproc;
    const char *layout;
} parallel_job;

static inline int parallel_main(int argc, char **argv, const char *test, const char *suite, layout_fn run,
                                const parallel_job *jobs, int njobs) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    setvbuf(stderr, NULL, _IOLBF, 0);
    if (argc >= 4 && strcmp(argv[1], "--suite") == 0) {
        if (strcmp(argv[2], suite) != 0) return 1;
        return parallel_rank_main(suite, argv[3], run);
    }
    if (!shm_works()) return 77;
    double t0 = titan_now_s();
    printf("%s:\n", test);
    for (int j = 0; j < njobs; j++) {
        char *args[] = {"/proc/self/exe", "--suite", (char *)suite, (char *)jobs[j].layout, NULL};
        titan_dist_spawn_options o = {.nproc = jobs[j].nproc, .grace_s = 5};
        int first = 0;
        double t1 = titan_now_s();
        titan_status st = titan_dist_spawn_local(args, &o, &first);
        CHECK(st == TITAN_OK, "job of %d ranks, layout %s (exit %d)", jobs[j].nproc, jobs[j].layout, first);
        printf("  job of %d ranks (%s): %s, %.2f s\n", jobs[j].nproc, jobs[j].layout,
               st == TITAN_OK ? "passed" : "FAILED", titan_now_s() - t1);
    }
    if (failures) {
        fprintf(stderr, "%s: %d failure(s)\n", test, failures);
        return 1;
    }
    printf("%s: ok (%.2f s)\n", test, titan_now_s() - t0);
    return 0;
}

#endif
