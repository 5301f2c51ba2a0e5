/* test_galore.c - GaLore's pieces against references:
 *   - projection and back-projection against a double-precision product;
 *   - the exact SVD (LAPACK) recovers the singular vectors of matrices
 *     built with a known spectrum; the randomized SVD's subspace lies
 *     within a stated angle of the exact one on such matrices;
 *   - the optimizer's steps replay galore-torch's (goldens written by
 *     tests/python/galore_reference.py, path in TITAN_GALORE_GOLDEN; that
 *     part is skipped without it) to 1e-5 for 40 steps;
 *   - AdamW through the interface equals titan_adamw bit for bit; Adam
 *     with weight decay adds the L2 penalty to the gradient;
 *   - GaLore's flat moments are packed (the parameters left on AdamW
 *     only), its state bytes are what it allocated and what the plan
 *     says, and packing changes no bit of a step. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "core/clock.h"
#include "core/rng.h"
#include "optim/galore.h"
#include "optim/svd.h"
#include "subspace.h"

static void gauss(float *x, size_t n, uint64_t stream) {
    titan_rng_trunc_normal(x, (int64_t)n, 42, stream, 0.0, 1.0, -6.0, 6.0);
}

/* q (rows x k, row-major) with orthonormal columns: Gram-Schmidt in double. */
static void orthonormal(float *q, int64_t rows, int k, uint64_t stream) {
    double *d = malloc((size_t)(rows * k) * sizeof *d);
    float *g = malloc((size_t)(rows * k) * sizeof *g);
    gauss(g, (size_t)(rows * k), stream);
    for (int64_t i = 0; i < rows * k; i++) d[i] = g[i];
    for (int c = 0; c < k; c++) {
        for (int pass = 0; pass < 2; pass++)
            for (int b = 0; b < c; b++) {
                double dot = 0;
                for (int64_t i = 0; i < rows; i++) dot += d[i * k + c] * d[i * k + b];
                for (int64_t i = 0; i < rows; i++) d[i * k + c] -= dot * d[i * k + b];
            }
        double nrm = 0;
        for (int64_t i = 0; i < rows; i++) nrm += d[i * k + c] * d[i * k + c];
        for (int64_t i = 0; i < rows; i++) d[i * k + c] /= sqrt(nrm);
    }
    for (int64_t i = 0; i < rows * k; i++) q[i] = (float)d[i];
    free(d);
    free(g);
}

/* a = U diag(s) V^T with U (m x p), V (n x p) orthonormal, p = min(m, n). */
static void known_spectrum(float *a, float *u, float *v, const double *s, int64_t m, int64_t n, uint64_t stream) {
    int p = (int)(m < n ? m : n);
    orthonormal(u, m, p, stream);
    orthonormal(v, n, p, stream + 1);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double sum = 0;
            for (int c = 0; c < p; c++) sum += (double)u[i * p + c] * s[c] * (double)v[j * p + c];
            a[i * n + j] = (float)sum;
        }
}

/* The first k columns of x (rows x p) as rows x k. */
static float *first_cols(const float *x, int64_t rows, int p, int k) {
    float *y = malloc((size_t)(rows * k) * sizeof *y);
    for (int64_t i = 0; i < rows; i++) memcpy(y + i * k, x + i * p, (size_t)k * sizeof *y);
    return y;
}

static float *transpose(const float *x, int64_t rows, int64_t cols) {
    float *y = malloc((size_t)(rows * cols) * sizeof *y);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) y[j * rows + i] = x[i * cols + j];
    return y;
}

static void test_projection(void) {
    const int64_t shapes[2][2] = {{40, 24}, {24, 40}};
    for (int s = 0; s < 2; s++)
        for (int right = 0; right < 2; right++) {
            int64_t m = shapes[s][0], n = shapes[s][1];
            int r = 6;
            float *g = malloc((size_t)(m * n) * sizeof *g), *full = malloc((size_t)(m * n) * sizeof *full);
            float *proj = malloc((size_t)(right ? r * n : m * r) * sizeof *proj);
            float *low = malloc((size_t)(right ? m * r : r * n) * sizeof *low);
            gauss(g, (size_t)(m * n), 10 + s);
            gauss(proj, (size_t)(right ? r * n : m * r), 20 + s);
            titan_galore_project(g, m, n, proj, r, right, low);
            double err = 0, worst = 0;
            int64_t lr = right ? m : r, lc = right ? r : n;
            for (int64_t i = 0; i < lr; i++)
                for (int64_t j = 0; j < lc; j++) {
                    double want = 0;
                    if (right) for (int64_t k = 0; k < n; k++) want += (double)g[i * n + k] * proj[j * n + k];
                    else for (int64_t k = 0; k < m; k++) want += (double)proj[k * r + i] * g[k * n + j];
                    double e = fabs(want - low[i * lc + j]) / (1.0 + fabs(want));
                    if (e > err) err = e;
                }
            titan_galore_project_back(low, m, n, proj, r, right, 0.5f, full);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double want = 0;
                    if (right) for (int k = 0; k < r; k++) want += (double)low[i * r + k] * proj[k * n + j];
                    else for (int k = 0; k < r; k++) want += (double)proj[i * r + k] * low[k * n + j];
                    want *= 0.5;
                    double e = fabs(want - full[i * n + j]) / (1.0 + fabs(want));
                    if (e > worst) worst = e;
                }
            CHECK(err < 1e-5 && worst < 1e-5, "%lldx%lld %s: project %.2e, back %.2e (relative, vs double)",
                  (long long)m, (long long)n, right ? "right" : "left", err, worst);
            free(g), free(full), free(proj), free(low);
        }
}

/* Exact SVD recovers known vectors; randomized within max_deg of them. */
static void test_svd(int64_t m, int64_t n, int k, double decay, int over, int iters, double max_deg) {
    int p = (int)(m < n ? m : n);
    double *s = malloc((size_t)p * sizeof *s);
    for (int c = 0; c < p; c++) s[c] = pow(decay, c);
    float *a = malloc((size_t)(m * n) * sizeof *a), *u0 = malloc((size_t)(m * p) * sizeof *u0);
    float *v0 = malloc((size_t)(n * p) * sizeof *v0);
    known_spectrum(a, u0, v0, s, m, n, 100 + (uint64_t)m);
    float *uk = first_cols(u0, m, p, k), *vk = first_cols(v0, n, p, k);
    float *ue = malloc((size_t)(m * k) * sizeof *ue), *vte = malloc((size_t)(k * n) * sizeof *vte);
    float *ur = malloc((size_t)(m * k) * sizeof *ur), *vtr = malloc((size_t)(k * n) * sizeof *vtr);
    CHECK(titan_svd_topk(a, m, n, k, ue, vte) == TITAN_OK);
    CHECK(titan_rsvd_topk(a, m, n, k, over, iters, 7, 3, ur, vtr) == TITAN_OK);
    float *ve = transpose(vte, k, n), *vr = transpose(vtr, k, n);
    double deg = 180.0 / M_PI;
    double ex_u = subspace_angle(ue, uk, m, k) * deg, ex_v = subspace_angle(ve, vk, n, k) * deg;
    double r_u = subspace_angle(ur, ue, m, k) * deg, r_v = subspace_angle(vr, ve, n, k) * deg;
    CHECK(ex_u < 1e-3 && ex_v < 1e-3, "%lldx%lld rank %d decay %g: exact SVD %.4f / %.4f degrees from the known vectors",
          (long long)m, (long long)n, k, decay, ex_u, ex_v);
    CHECK(r_u < max_deg && r_v < max_deg, "%lldx%lld rank %d decay %g (p %d, q %d): randomized %.4f / %.4f degrees "
          "from exact, bound %g", (long long)m, (long long)n, k, decay, over, iters, r_u, r_v, max_deg);
    printf("svd %lldx%lld rank %d spectrum %g^i: exact %.2e deg, randomized (p %d, q %d) %.3f deg (left) %.3f deg (right)\n",
           (long long)m, (long long)n, k, decay, ex_u > ex_v ? ex_u : ex_v, over, iters, r_u, r_v);
    /* the same canonical signs: the leading vectors agree entry by entry */
    double diff = 0;
    for (int64_t i = 0; i < m; i++) diff = fmax(diff, fabs(ue[i * k] - ur[i * k]));
    CHECK(diff < 1e-3, "leading left vector: exact vs randomized differ by %g", diff);
    free(s), free(a), free(u0), free(v0), free(uk), free(vk), free(ue), free(vte), free(ur), free(vtr), free(ve), free(vr);
}

static int read_all(FILE *f, void *p, size_t bytes) { return fread(p, 1, bytes, f) == bytes; }

static void replay_case(FILE *f, int c) {
    int32_t h[6];
    float hf[6];
    if (!read_all(f, h, sizeof h) || !read_all(f, hf, sizeof hf)) {
        CHECK(0, "golden case %d: short file", c);
        return;
    }
    int64_t m = h[0], n = h[1], mn = m * n;
    float *p = malloc((size_t)mn * sizeof *p), *g = malloc((size_t)mn * sizeof *g), *want = malloc((size_t)mn * sizeof *want);
    CHECK(read_all(f, p, (size_t)mn * sizeof *p));
    titan_optim_config cfg = {.kind = TITAN_OPTIM_GALORE,
                              .adam = {.beta1 = hf[2], .beta2 = hf[3], .eps = hf[4], .weight_decay = hf[5]},
                              .galore = {.rank = h[2], .update_proj_gap = h[3], .scale = hf[0],
                                         .proj_type = (titan_galore_proj)h[4]}};
    titan_optim_param par = {.name = "w", .off = 0, .rows = m, .cols = n, .project = 1};
    titan_optim *o = NULL;
    CHECK(titan_optim_create(&o, titan_backend_cpu(), (size_t)mn, &par, 1, &cfg) == TITAN_OK);
    double worst = 0;
    for (int s = 0; s < h[5] && o; s++) {
        CHECK(read_all(f, g, (size_t)mn * sizeof *g) && read_all(f, want, (size_t)mn * sizeof *want));
        CHECK(titan_optim_step(o, p, NULL, g, 1.0f, hf[1]) == TITAN_OK);
        for (int64_t i = 0; i < mn; i++) worst = fmax(worst, fabs((double)p[i] - want[i]));
    }
    CHECK(worst <= 1e-5, "golden case %d (%lldx%lld, rank %d, gap %d, %s): max |p - galore-torch| %.3g after %d steps",
          c, (long long)m, (long long)n, h[2], h[3], titan_galore_proj_name((titan_galore_proj)h[4]), worst, h[5]);
    printf("galore-torch case %d: %lldx%lld %s rank %d gap %d: max |diff| %.2e over %d steps\n", c, (long long)m,
           (long long)n, titan_galore_proj_name((titan_galore_proj)h[4]), h[2], h[3], worst, h[5]);
    titan_optim_free(o);
    free(p), free(g), free(want);
}

static void test_golden(void) {
    const char *path = getenv("TITAN_GALORE_GOLDEN");
    if (!path || !*path) {
        printf("galore-torch goldens: skipped (TITAN_GALORE_GOLDEN unset; tests/cli/galore.sh sets it)\n");
        return;
    }
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    int32_t cases = 0;
    CHECK(read_all(f, &cases, sizeof cases) && cases > 0);
    for (int c = 0; c < cases; c++) replay_case(f, c);
    fclose(f);
}

/* AdamW through the interface is titan_adamw; Adam's L2 penalty is the
 * gradient g + wd p fed to AdamW without decay. */
static void test_adam_kinds(void) {
    enum { N = 5000 };
    static float p1[N], p2[N], g[N], p3[N], g3[N];
    gauss(p1, N, 1);
    gauss(g, N, 2);
    memcpy(p2, p1, sizeof p1);
    memcpy(p3, p1, sizeof p1);
    titan_optim_config cfg = {.kind = TITAN_OPTIM_ADAMW, .adam = {0.9f, 0.95f, 1e-8f, 0.1f}};
    titan_optim *o = NULL, *adam = NULL;
    titan_adamw *ref = NULL, *ref3 = NULL;
    CHECK(titan_optim_create(&o, titan_backend_cpu(), N, NULL, 0, &cfg) == TITAN_OK);
    CHECK(titan_adamw_create(&ref, titan_backend_cpu(), N, &cfg.adam) == TITAN_OK);
    cfg.kind = TITAN_OPTIM_ADAM;
    CHECK(titan_optim_create(&adam, titan_backend_cpu(), N, NULL, 0, &cfg) == TITAN_OK);
    titan_adamw_config nodecay = cfg.adam;
    nodecay.weight_decay = 0.0f;
    CHECK(titan_adamw_create(&ref3, titan_backend_cpu(), N, &nodecay) == TITAN_OK);
    float *pa = malloc(sizeof p1);
    memcpy(pa, p1, sizeof p1);
    for (int s = 0; s < 3; s++) {
        CHECK(titan_optim_step(o, p1, NULL, g, 0.5f, 1e-3f) == TITAN_OK);
        titan_adamw_step_cast(ref, p2, NULL, g, 0.5f, 1e-3f);
        CHECK(titan_optim_step(adam, pa, NULL, g, 0.5f, 1e-3f) == TITAN_OK);
        for (int i = 0; i < N; i++) g3[i] = g[i] * 0.5f + 0.1f * p3[i];
        titan_adamw_step(ref3, p3, g3, 1e-3f);
    }
    CHECK(!memcmp(p1, p2, sizeof p1), "AdamW through titan_optim differs from titan_adamw");
    CHECK(!memcmp(pa, p3, sizeof p1), "Adam (L2) differs from AdamW on g + wd p");
    double st = titan_optim_state_bytes(o, NULL);
    CHECK(st == 8.0 * N, "AdamW state %g bytes, want %d", st, 8 * N);
    free(pa);
    titan_optim_free(o);
    titan_optim_free(adam);
    titan_adamw_free(ref);
    titan_adamw_free(ref3);
}

/* GaLore over a norm, two projected matrices and an embedding-like one left
 * on AdamW: the flat moments hold the 1-D and unprojected parameters only,
 * end to end; the parameters on AdamW step as titan_adamw over them alone,
 * each projected matrix as a GaLore optimizer over it alone (bit for bit). */
static void test_packed_moments(void) {
    enum { NORM = 5, A_R = 16, A_C = 12, E_R = 10, E_C = 12, B_R = 12, B_C = 16 };
    enum { OA = NORM, OE = OA + A_R * A_C, OB = OE + E_R * E_C, N = OB + B_R * B_C, FLAT = NORM + E_R * E_C };
    static float p[N], g[N], pf[FLAT], gf[FLAT], pa[A_R * A_C], pb[B_R * B_C];
    titan_optim_param ps[4] = {
        {.name = "norm", .off = 0, .rows = 1, .cols = NORM},
        {.name = "a", .off = OA, .rows = A_R, .cols = A_C, .project = 1},
        {.name = "emb", .off = OE, .rows = E_R, .cols = E_C},
        {.name = "b", .off = OB, .rows = B_R, .cols = B_C, .project = 1},
    };
    titan_optim_config cfg = {.kind = TITAN_OPTIM_GALORE, .adam = {0.9f, 0.95f, 1e-8f, 0.1f},
                              .galore = {.rank = 4, .update_proj_gap = 2, .scale = 0.25f,
                                         .proj_type = TITAN_GALORE_STD}};
    const titan_backend *be = titan_backend_cpu();
    titan_optim *o = NULL, *oa = NULL, *ob = NULL;
    titan_adamw *ref = NULL;
    CHECK(titan_optim_create(&o, be, N, ps, 4, &cfg) == TITAN_OK);
    titan_optim_param one_a = ps[1], one_b = ps[3];
    one_a.off = one_b.off = 0;
    CHECK(titan_optim_create(&oa, be, A_R * A_C, &one_a, 1, &cfg) == TITAN_OK);
    CHECK(titan_optim_create(&ob, be, B_R * B_C, &one_b, 1, &cfg) == TITAN_OK);
    CHECK(titan_adamw_create(&ref, be, FLAT, &cfg.adam) == TITAN_OK);
    if (!o || !oa || !ob || !ref) return;
    CHECK(titan_adamw_numel(titan_optim_adamw(o)) == FLAT, "flat moments of %zu floats, want %d (packed)",
          titan_adamw_numel(titan_optim_adamw(o)), FLAT);
    const size_t *mo = titan_optim_moment_offsets(o);
    CHECK(mo && mo[0] == 0 && mo[2] == NORM, "moment offsets %zu, %zu; want 0, %d", mo ? mo[0] : 99, mo ? mo[2] : 99,
          NORM);
    titan_optim_bytes have, plan;
    titan_optim_get_bytes(o, &have);
    CHECK(titan_optim_plan_bytes(N, ps, 4, &cfg, &plan) == TITAN_OK);
    /* std: a (16 x 12) on the right: proj 4 x 12, moments 16 x 4; b (12 x 16) on the left: proj 12 x 4, moments 4 x 16 */
    double low = 4.0 * (4 * A_C + 2 * A_R * 4 + B_R * 4 + 2 * 4 * B_C);
    CHECK(have.flat == 8.0 * FLAT && have.projected == low && have.state == have.flat + have.projected,
          "state %g = flat %g + low-rank %g; want %g + %g", have.state, have.flat, have.projected, 8.0 * FLAT, low);
    CHECK(plan.state == have.state && plan.projected == have.projected && plan.work == have.work && have.work > 0,
          "the plan's bytes (%g, work %g) differ from the optimizer's (%g, work %g)", plan.state, plan.work,
          have.state, have.work);
    CHECK(titan_optim_state_bytes(o, NULL) == have.state);
    gauss(p, N, 11);
    memcpy(pf, p, NORM * sizeof *p);
    memcpy(pf + NORM, p + OE, E_R * E_C * sizeof *p);
    memcpy(pa, p + OA, sizeof pa);
    memcpy(pb, p + OB, sizeof pb);
    for (int s = 0; s < 5; s++) {
        gauss(g, N, 20 + (uint64_t)s);
        memcpy(gf, g, NORM * sizeof *g);
        memcpy(gf + NORM, g + OE, E_R * E_C * sizeof *g);
        CHECK(titan_optim_step(o, p, NULL, g, 0.5f, 1e-2f) == TITAN_OK);
        titan_adamw_step_cast(ref, pf, NULL, gf, 0.5f, 1e-2f);
        CHECK(titan_optim_step(oa, pa, NULL, g + OA, 0.5f, 1e-2f) == TITAN_OK);
        CHECK(titan_optim_step(ob, pb, NULL, g + OB, 0.5f, 1e-2f) == TITAN_OK);
    }
    CHECK(!memcmp(p, pf, NORM * sizeof *p) && !memcmp(p + OE, pf + NORM, E_R * E_C * sizeof *p),
          "parameters on AdamW differ from titan_adamw over them alone");
    CHECK(!memcmp(p + OA, pa, sizeof pa) && !memcmp(p + OB, pb, sizeof pb),
          "projected matrices differ from GaLore over each alone");
    CHECK(!memcmp(titan_adamw_m(titan_optim_adamw(o)), titan_adamw_m(ref), FLAT * sizeof(float)),
          "packed exp_avg differs from titan_adamw's");
    titan_optim_free(o);
    titan_optim_free(oa);
    titan_optim_free(ob);
    titan_adamw_free(ref);
}

/* --bench-svd N R [P Q]: seconds of the exact and the randomized top-R SVD
 * of an N x N matrix (scripts/galore_bench.sh), best of 3, and their
 * subspaces' angle; not a test. */
static int bench_svd(int argc, char **argv) {
    int64_t n = argc > 2 ? atoll(argv[2]) : 2048;
    int r = argc > 3 ? atoi(argv[3]) : (int)(n / 4), p = argc > 4 ? atoi(argv[4]) : 8, q = argc > 5 ? atoi(argv[5]) : 1;
    float *a = malloc((size_t)(n * n) * sizeof *a), *ue = malloc((size_t)(n * r) * sizeof *ue);
    float *ur = malloc((size_t)(n * r) * sizeof *ur);
    /* a gradient-like matrix: low rank plus noise */
    float *x = malloc((size_t)(n * 16) * sizeof *x), *y = malloc((size_t)(n * 16) * sizeof *y);
    gauss(a, (size_t)(n * n), 5);
    gauss(x, (size_t)(n * 16), 6);
    gauss(y, (size_t)(n * 16), 7);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double sum = 0;
            for (int k = 0; k < 16; k++) sum += (double)x[i * 16 + k] * y[j * 16 + k];
            a[i * n + j] = (float)(sum + 0.1 * a[i * n + j]);
        }
    /* wall seconds and process CPU seconds (all threads: fair on a shared machine) */
    double best_e = 1e30, best_r = 1e30, cpu_e = 1e30, cpu_r = 1e30;
    for (int rep = 0; rep < (n >= 1024 ? 1 : 3); rep++) {
        double t0 = titan_now_s(), c0 = (double)clock() / CLOCKS_PER_SEC;
        if (titan_svd_topk(a, n, n, r, ue, NULL) != TITAN_OK) return 1;
        double t1 = titan_now_s(), c1 = (double)clock() / CLOCKS_PER_SEC;
        if (titan_rsvd_topk(a, n, n, r, p, q, 1, 2, ur, NULL) != TITAN_OK) return 1;
        double t2 = titan_now_s(), c2 = (double)clock() / CLOCKS_PER_SEC;
        best_e = fmin(best_e, t1 - t0);
        best_r = fmin(best_r, t2 - t1);
        cpu_e = fmin(cpu_e, c1 - c0);
        cpu_r = fmin(cpu_r, c2 - c1);
    }
    printf("svd %lldx%lld rank %d: CPU seconds exact %.2f, randomized %.2f: %.1fx\n", (long long)n, (long long)n, r,
           cpu_e, cpu_r, cpu_e / cpu_r);
    /* the angle of the leading 16 (the signal; the rest is noise) */
    float *ue16 = first_cols(ue, n, r, 16), *ur16 = first_cols(ur, n, r, 16);
    printf("svd %lldx%lld rank %d: exact %.3f s, randomized (oversampling %d, power iterations %d) %.3f s: %.1fx; "
           "leading-16 subspace angle %.3f deg\n", (long long)n, (long long)n, r, best_e, p, q, best_r, best_e / best_r,
           subspace_angle(ue16, ur16, n, 16) * 180.0 / M_PI);
    free(a), free(ue), free(ur), free(x), free(y), free(ue16), free(ur16);
    return 0;
}

/* GaLore on a device-like backend (cpu-guard: the CPU's ops on memory the
 * host cannot touch) takes the CPU's steps bit for bit, refreshes included;
 * its state goes to a host twin and back (checkpoints of device jobs); a
 * backend without the ops is refused by name. */
static void test_device_backend(void) {
    enum { M = 48, NC = 32, NV = 40, N = M * NC + NV };
    const titan_backend *cpu = titan_backend_cpu(), *dev = titan_backend_cpu_guard();
    titan_optim_config cfg = {.kind = TITAN_OPTIM_GALORE,
                              .adam = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f},
                              .galore = {.rank = 4, .update_proj_gap = 2, .scale = 0.25f, .randomized = 1,
                                         .oversampling = 4, .power_iters = 1, .seed = 3}};
    titan_optim_param ps[2] = {{.name = "w", .off = 0, .rows = M, .cols = NC, .project = 1},
                               {.name = "b", .off = M * NC, .rows = 1, .cols = NV}};
    static float p[N], g[N], got[N];
    for (int i = 0; i < N; i++) p[i] = (float)(titan_rng_uniform(9, 1, (uint64_t)i) - 0.5);
    titan_optim *oc = NULL, *od = NULL, *od2 = NULL, *twin = NULL;
    CHECK(titan_optim_create(&oc, cpu, N, ps, 2, &cfg) == TITAN_OK);
    CHECK(titan_optim_create(&od, dev, N, ps, 2, &cfg) == TITAN_OK);
    float *dp = dev->alloc(sizeof p), *dg = dev->alloc(sizeof g);
    if (!oc || !od || !dp || !dg) return;
    dev->to_device(dp, p, sizeof p);
    for (int t = 0; t < 5; t++) { /* refreshes at steps 1, 3, 5; step 2 clipped */
        for (int i = 0; i < N; i++) g[i] = (float)(titan_rng_uniform(9, 2 + (uint64_t)t, (uint64_t)i) - 0.5);
        dev->to_device(dg, g, sizeof g);
        float clip = t == 1 ? 0.5f : 1.0f;
        CHECK(titan_optim_step(oc, p, NULL, g, clip, 1e-2f) == TITAN_OK);
        CHECK(titan_optim_step(od, dp, NULL, dg, clip, 1e-2f) == TITAN_OK);
        if (t == 2) { /* a "checkpoint" of the device state, restored into a new optimizer */
            CHECK(titan_optim_host_twin(od, &twin) == TITAN_OK && titan_optim_copy_state(twin, od) == TITAN_OK);
            CHECK(twin && !memcmp(titan_optim_aux(twin), titan_optim_aux(oc), titan_optim_aux_numel(oc) * 4),
                  "the host twin holds the CPU's GaLore state bit for bit");
            CHECK(titan_optim_create(&od2, dev, N, ps, 2, &cfg) == TITAN_OK && titan_optim_copy_state(od2, twin) == TITAN_OK);
            titan_optim_free(od);
            od = od2;
        }
    }
    dev->to_host(got, dp, sizeof got);
    CHECK(!memcmp(got, p, sizeof p), "GaLore on cpu-guard (5 steps, 3 refreshes, a state round trip): the CPU's bits");
    titan_backend no_svd = *cpu;
    no_svd.name = "no-svd";
    no_svd.svd_thin = NULL;
    titan_optim *bad = NULL;
    CHECK(titan_optim_create(&bad, &no_svd, N, ps, 2, &cfg) == TITAN_ERR_USAGE && !bad &&
          strstr(titan_error_message(), "no-svd"), "a backend without the ops is refused by name");
    titan_optim_free(twin);
    titan_optim_free(od);
    titan_optim_free(oc);
    dev->free(dp), dev->free(dg);
    printf("GaLore on cpu-guard: the CPU's bits over 5 steps, state round trip through a host twin\n");
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--bench-svd")) return bench_svd(argc, argv);
    test_projection();
    test_svd(96, 64, 8, 0.7, 8, 1, 0.1);   /* fast decay: one power iteration */
    test_svd(64, 128, 8, 0.9, 8, 2, 1.0); /* slow decay: two */
    test_golden();
    test_adam_kinds();
    test_packed_moments();
    test_device_backend();
    return failures != 0;
}
