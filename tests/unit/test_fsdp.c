/* test_fsdp.c - DDP, FSDP and HSDP (lib/parallel/fsdp.c) against one process's gradients.
 *
 *   test_fsdp                        run alone: jobs of 2 and 4 ranks of itself
 *   test_fsdp --suite fsdp LAYOUT    one rank of a job (parallel_test.h)
 *
 * Each rank of a mesh (DDP: dp_replicate = n; FSDP: dp_shard = n; HSDP:
 * both) runs what the training loop runs (train.c: zero_grads, ACC
 * accumulated micro-batches of its own data with set_sync on the last,
 * backward, sync_grads, clip) on a tiny model, and compares the gradients
 * sync_grads leaves in its shard - before clipping and the optimizer, so
 * a wrong averaging factor shows at once - with one process's:
 *
 *   bitwise  every dp rank's gradient computed in this process by the whole
 *            model (no hooks), then averaged in the order the layout
 *            reduces them (comm.h: added in rank order, then divided): over
 *            the shard group, then over the replicate group;
 *   1e-6     (of the largest) against one model that accumulates the whole
 *            global batch, dp x ACC micro-batches at scale 1/(dp x ACC): the
 *            same sums in another order.
 *
 * Also: the losses bitwise; the clip norm against the reference's; the
 * shard plan (titan_fsdp_pieces as titan_shard_plan gives it, and the
 * pieces of the shard group tiling every parameter exactly once); unit
 * plans blocks, whole, by size, hand-written and auto, with and without
 * reshard_after_forward, tied embeddings, and TITAN_FSDP_POISON=1 (a unit
 * the plan or the prefetch order failed to gather reads NaN): all the same
 * bits; and a second step after params_updated gives them again (the
 * gradients were given back and refilled from zeros). */
#include "parallel_test.h"

#include "core/rng.h"
#include "parallel/fsdp.h"

enum { B = 2, T = 8, N = B * T, ACC = 2, NL = 3, NB = NL + 2, VOCAB = 61, MAXDP = 4 };

static titan_llama_config tiny(int tied) { return tiny_config(NL, 4, 2, VOCAB, tied); }

static uint32_t token(int which, int d, int a, int i) {
    return (uint32_t)(titan_rng_u64(77, (uint64_t)which, (uint64_t)((d * ACC + a) * N + i)) % VOCAB);
}

static void batch(int d, int a, uint32_t *tok, uint32_t *tgt) {
    for (int i = 0; i < N; i++) tok[i] = token(1, d, a, i), tgt[i] = token(2, d, a, i);
}

/* ---- one process: the reference ----------------------------------------------------- */

typedef struct {
    titan_llama_config c;
    int ng;
    titan_param *gcat;
    size_t np;
    float *P;
    float *avg;          /* dp ranks' gradients averaged in the layout's order */
    float *plain;        /* one model over the whole global batch */
    float loss[MAXDP][ACC];
    double norm;         /* of avg */
} ref;

static titan_llama *whole(const ref *r) {
    titan_llama *w = NULL;
    if (titan_llama_create(&w, &r->c, titan_backend_cpu(), B, T, TITAN_AC_NONE, TITAN_DTYPE_F32) != TITAN_OK) {
        fprintf(stderr, "whole model: %s\n", titan_error_message());
        exit(1);
    }
    memcpy(titan_llama_params_data(w), r->P, r->np * sizeof(float));
    titan_llama_zero_grads(w);
    return w;
}

static void ref_make(ref *r, const titan_layout *l, int tied) {
    memset(r, 0, sizeof *r);
    r->c = tiny(tied);
    r->ng = titan_llama_params(&r->c, NULL);
    r->gcat = xalloc((size_t)r->ng * sizeof *r->gcat);
    titan_llama_params(&r->c, r->gcat);
    r->np = titan_llama_num_params(&r->c);
    r->P = xalloc(r->np * sizeof(float));
    titan_llama_init_weights(&r->c, r->P, 5150);
    int R = l->dp_replicate, S = l->dp_shard, dp = R * S;
    float *g[MAXDP];
    uint32_t tok[N], tgt[N];
    titan_llama *w = whole(r);
    for (int d = 0; d < dp; d++) {
        titan_llama_zero_grads(w);
        for (int a = 0; a < ACC; a++) {
            batch(d, a, tok, tgt);
            CHECK(titan_llama_forward_train(w, tok, tgt, 1.0f / ACC, &r->loss[d][a]) == TITAN_OK);
            titan_llama_backward(w, 1.0f / ACC);
        }
        g[d] = xalloc(r->np * sizeof(float));
        memcpy(g[d], titan_llama_grads_data(w), r->np * sizeof(float));
    }
    r->avg = xalloc(r->np * sizeof(float));
    layout_average(g, R, S, r->np, r->avg);
    double ss = 0;
    for (size_t j = 0; j < r->np; j++) ss += (double)r->avg[j] * r->avg[j];
    r->norm = sqrt(ss);
    check_grads_nonzero(r->avg, r->gcat, r->ng);
    for (int d = 0; d < dp; d++) free(g[d]);
    /* the whole global batch through one model */
    titan_llama_zero_grads(w);
    for (int d = 0; d < dp; d++)
        for (int a = 0; a < ACC; a++) {
            float lo;
            batch(d, a, tok, tgt);
            CHECK(titan_llama_forward_train(w, tok, tgt, 1.0f / (float)(dp * ACC), &lo) == TITAN_OK);
            titan_llama_backward(w, 1.0f / (float)(dp * ACC));
        }
    r->plain = xalloc(r->np * sizeof(float));
    memcpy(r->plain, titan_llama_grads_data(w), r->np * sizeof(float));
    titan_llama_free(w);
}

static void ref_free(ref *r) { free(r->gcat), free(r->P), free(r->avg), free(r->plain); }

/* ---- the shard plan ------------------------------------------------------------------ */

/* The pieces the shard group's ranks hold tile every parameter exactly
 * once, and fsdp's pieces are titan_shard_plan's for this rank. */
static void check_plan(const titan_mesh *m, const ref *r, const titan_fsdp *f) {
    const titan_layout *l = &m->layout;
    titan_shard_piece *pc = xalloc((size_t)r->ng * sizeof *pc);
    unsigned char *hits = xalloc(r->np);
    titan_layout_coord c;
    titan_layout_coord_of(l, m->rank, &c);
    size_t total = 0, mine = 0;
    for (int s = 0; s < l->dp_shard; s++) {
        c.dp_shard = s;
        int rank = titan_layout_rank_of(l, &c);
        size_t n;
        titan_shard_plan(l, &r->c, rank, pc, &n);
        size_t off = 0;
        for (int i = 0; i < r->ng; i++) {
            CHECK(pc[i].param_off == r->gcat[i].offset, "%s: param_off", r->gcat[i].name);
            CHECK(pc[i].shard_off == off, "rank %d, %s: shard_off %zu, want %zu", rank, r->gcat[i].name,
                  pc[i].shard_off, off);
            off += pc[i].len;
            for (size_t j = 0; j < pc[i].len; j++) hits[pc[i].full_off + j]++;
        }
        CHECK(n == off, "rank %d: shard of %zu, pieces %zu", rank, n, off);
        total += n;
        if (rank == m->rank) {
            mine = n;
            const titan_shard_piece *fp = titan_fsdp_pieces(f);
            for (int i = 0; i < r->ng; i++)
                CHECK(fp[i].full_off == pc[i].full_off && fp[i].shard_off == pc[i].shard_off &&
                          fp[i].len == pc[i].len, "%s: fsdp's piece differs from titan_shard_plan's", r->gcat[i].name);
        }
    }
    size_t bad = 0;
    for (size_t j = 0; j < r->np; j++) bad += hits[j] != 1;
    CHECK(bad == 0 && total == r->np, "shard plan: %zu of %zu elements not held exactly once", bad, r->np);
    CHECK(titan_fsdp_numel(f) == mine, "fsdp shard %zu, plan %zu", titan_fsdp_numel(f), mine);
    free(pc);
    free(hits);
}

/* ---- a run under one communication plan ---------------------------------------------- */

typedef struct {
    const char *plan;
    int reshard, poison, tied;
} variant;

typedef struct {
    size_t bad;        /* elements not bitwise equal to ref.avg */
    double maxd;       /* the largest difference among them */
    double plain_err;  /* normalised, against ref.plain */
    int loss_bad;
    double norm_err;   /* relative */
} result;

static titan_llama *model_make(const titan_mesh *m, const ref *r) {
    titan_llama *mdl = NULL;
    titan_llama_options o = {.flags = m->shard_comm ? TITAN_LLAMA_RELEASABLE : 0};
    if (titan_llama_create_ex(&mdl, &r->c, titan_backend_cpu(), B, T, TITAN_AC_NONE, TITAN_DTYPE_F32, &o) !=
        TITAN_OK) {
        fprintf(stderr, "model: %s\n", titan_error_message());
        exit(1);
    }
    return mdl;
}

/* One optimizer step's gradients as train.c makes them; compared. */
static void step(titan_fsdp *f, titan_llama *mdl, const titan_mesh *m, const ref *r, result *res) {
    uint32_t tok[N], tgt[N];
    CHECK(titan_fsdp_zero_grads(f) == TITAN_OK);
    for (int a = 0; a < ACC; a++) {
        float lo = NAN;
        batch(m->dp_rank, a, tok, tgt);
        CHECK(titan_llama_forward_train(mdl, tok, tgt, 1.0f / ACC, &lo) == TITAN_OK, "forward");
        titan_fsdp_set_sync(f, a == ACC - 1);
        titan_llama_backward(mdl, 1.0f / ACC);
        CHECK(titan_llama_take_error(mdl) == TITAN_OK, "backward");
        res->loss_bad += !(lo == r->loss[m->dp_rank][a]);
    }
    CHECK(titan_fsdp_sync_grads(f) == TITAN_OK, "sync_grads");
    const float *sg = titan_fsdp_grads(f);
    const titan_shard_piece *pc = titan_fsdp_pieces(f);
    double dmax = 0, gmax = 0;
    for (int i = 0; i < r->ng; i++) {
        size_t g = piece_flat_off(pc, r->gcat, i);
        res->bad += count_diff(sg + pc[i].shard_off, r->avg + g, pc[i].len, &res->maxd);
        for (size_t j = 0; j < pc[i].len; j++) {
            dmax = fmax(dmax, fabs((double)sg[pc[i].shard_off + j] - r->plain[g + j]));
            gmax = fmax(gmax, fabs((double)r->plain[g + j]));
        }
    }
    res->plain_err = fmax(res->plain_err, dmax / (gmax > 0 ? gmax : 1));
    double norm = 0;
    float coef = 0;
    CHECK(titan_fsdp_clip(f, 1e-3, &norm, &coef) == TITAN_OK, "clip");
    res->norm_err = fmax(res->norm_err, fabs(norm - r->norm) / r->norm);
    CHECK(fabs(coef - 1e-3 / (r->norm + 1e-6)) <= 1e-5 * coef, "clip coefficient %g for norm %g", (double)coef, norm);
}

static int run_variant(const titan_mesh *m, const ref *r, const variant *v, int check_plans) {
    if (v->poison) setenv("TITAN_FSDP_POISON", "1", 1);
    titan_llama *mdl = model_make(m, r);
    int units[NB];
    titan_fsdp_options fo = {.param_dtype = TITAN_DTYPE_F32, .reduce_dtype = TITAN_DTYPE_F32};
    int sharded = m->shard_comm != NULL;
    CHECK(titan_fsdp_parse_plan(v->plan, NB, sharded, units, &fo) == TITAN_OK, "plan %s", v->plan);
    fo.reshard_after_forward = v->reshard;
    titan_fsdp *f = NULL;
    CHECK(titan_fsdp_create(&f, (titan_mesh *)m, mdl, &fo) == TITAN_OK, "fsdp_create");
    if (v->poison) unsetenv("TITAN_FSDP_POISON");
    if (!f) return 1;
    if (check_plans) check_plan(m, r, f);
    fsdp_load_whole(f, r->P, r->gcat, r->ng);
    result res = {0};
    for (int k = 0; k < 2; k++) { /* the second step: gradients given back and refilled */
        step(f, mdl, m, r, &res);
        CHECK(titan_fsdp_params_updated(f) == TITAN_OK);
    }
    CHECK(res.bad == 0, "%s, plan %s, reshard %d, tied %d: %zu gradient elements differ from one process's (max %.3g)",
          m->layout_str, v->plan, v->reshard, v->tied, res.bad, res.maxd);
    CHECK(res.plain_err <= 1e-6, "plan %s: %.3g from the whole global batch in one model", v->plan, res.plain_err);
    CHECK(res.loss_bad == 0, "plan %s: %d losses differ", v->plan, res.loss_bad);
    CHECK(res.norm_err <= 1e-6, "plan %s: clip norm off by %.3g", v->plan, res.norm_err);
    double bad = max_over_ranks(m->world_comm, (double)res.bad);
    double perr = max_over_ranks(m->world_comm, res.plain_err);
    double nerr = max_over_ranks(m->world_comm, res.norm_err);
    if (m->rank == 0)
        printf("  %d ranks, %s; plan %s, reshard_after_forward %d%s%s: gradients (2 steps) %s one process's "
               "averaged in the layout's order; %.1g from the global batch in one model; losses %s; clip norm %.1g\n",
               m->world, m->layout_str, v->plan, v->reshard, v->tied ? ", tied" : "", v->poison ? ", poison" : "",
               bad == 0 ? "bitwise" : "DIFFER FROM", perr, res.loss_bad ? "DIFFER" : "bitwise", nerr);
    titan_fsdp_free(f);
    titan_llama_free(mdl);
    return 0;
}

static int run(const titan_layout *l) {
    titan_mesh m;
    if (!mesh_join(l, &m)) return 1;
    static const variant vs[] = {
        {"blocks", 1, 0, 0}, {"blocks", 0, 0, 0}, {"whole", 1, 0, 0}, {"0,0,1,1,2", 1, 0, 0},
        {"0,1,1,1,1", 0, 0, 0}, {"size:0.02", 1, 0, 0}, {"auto", 1, 1, 0}, {"blocks", 1, 1, 1},
        {"0,0,0,1,1", 0, 0, 1},
    };
    ref r[2];
    ref_make(&r[0], l, 0);
    ref_make(&r[1], l, 1);
    for (size_t i = 0; i < sizeof vs / sizeof *vs; i++) run_variant(&m, &r[vs[i].tied], &vs[i], i == 0 || i == 7);
    ref_free(&r[0]);
    ref_free(&r[1]);
    titan_mesh_free(&m);
    return 0;
}

int main(int argc, char **argv) {
    static const parallel_job jobs[] = {
        {2, "dp_replicate=2"},            /* DDP */
        {2, "dp_shard=2"},                /* FSDP */
        {4, "dp_shard=4"},                /* FSDP */
        {4, "dp_replicate=2,dp_shard=2"}, /* HSDP */
    };
    return parallel_main(argc, argv, "test_fsdp", "fsdp", run, jobs, (int)(sizeof jobs / sizeof *jobs));
}
