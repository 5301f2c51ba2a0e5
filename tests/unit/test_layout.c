/* test_layout.c - parallel layouts and sharded checkpoints: parsing, torch.chunk
 * splits, the tp plan, pipeline stages, exact coverage; a model's state saved
 * under layout A by simulating every rank and loaded under layout B by every
 * simulated rank, bit for bit; titan_ckpt_reshard there and back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "ckpt/reshard.h"
#include "core/clock.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "model/llama_config.h"
#include "tensor/layout.h"

#include "check.h"
#define OK(expr) CHECK((expr) == TITAN_OK)

static titan_layout L(const char *s) {
    titan_layout l = titan_layout_single();
    titan_status st = titan_layout_parse(s, &l);
    CHECK(st == TITAN_OK, "parse %s", s);
    return l;
}

/* The model catalog's place of a tensor, by name (as titan-reshard finds it). */
static titan_layout_place P(const char *name, int n_layers) {
    titan_layout_place p;
    titan_llama_param_place(name, n_layers, &p);
    return p;
}

static void test_parse(void) {
    titan_layout l = L("dp_shard=4,tp=2,pp=1");
    CHECK(l.dp_replicate == 1 && l.dp_shard == 4 && l.cp == 1 && l.tp == 2 && l.pp == 1);
    CHECK(titan_layout_world(&l) == 8);
    char s[TITAN_LAYOUT_STR_MAX];
    titan_layout_format(&l, s, sizeof s);
    CHECK(!strcmp(s, "dp_replicate=1,dp_shard=4,cp=1,tp=2,pp=1"), "%s", s);
    titan_layout back = L(s);
    CHECK(!memcmp(&back, &l, sizeof l));
    l = L(" pp = 2 , dp_replicate=3,cp=2 ");
    CHECK(l.pp == 2 && l.dp_replicate == 3 && l.cp == 2 && l.dp_shard == 1 && titan_layout_world(&l) == 12);
    l = L("single");
    CHECK(titan_layout_world(&l) == 1);
    l = L("tp=1");
    titan_layout_format(&l, s, sizeof s);
    CHECK(!strcmp(s, "single"), "%s", s);

    static const char *const bad[] = {"", "dp=2", "tp=2,tp=2", "tp=0", "tp=-1", "tp=2x", "tp", "tp=2,",
                                      "dp_shard=1048576,tp=2", "tp=99999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        titan_status st = titan_layout_parse(bad[i], &l);
        CHECK(st == TITAN_ERR_USAGE, "'%s' accepted", bad[i]);
    }
    titan_layout_parse("tp=2,fsdp=2", &l);
    CHECK(strstr(titan_error_message(), "fsdp") && strstr(titan_error_message(), "unknown key"));
    titan_error_clear();
}

static void test_chunk(void) {
    /* torch.chunk(5, 4): 2, 2, 1, then an empty rank; (6, 4): 2, 2, 2, empty. */
    static const int64_t n5[4][2] = {{0, 2}, {2, 2}, {4, 1}, {5, 0}};
    static const int64_t n6[4][2] = {{0, 2}, {2, 2}, {4, 2}, {6, 0}};
    for (int i = 0; i < 4; i++) {
        int64_t o, n;
        titan_layout_chunk(5, 4, i, &o, &n);
        CHECK(o == n5[i][0] && n == n5[i][1], "5/4 piece %d: %lld+%lld", i, (long long)o, (long long)n);
        titan_layout_chunk(6, 4, i, &o, &n);
        CHECK(o == n6[i][0] && n == n6[i][1], "6/4 piece %d", i);
    }
    int64_t o, n;
    titan_layout_chunk(259, 3, 2, &o, &n);
    CHECK(o == 174 && n == 85);
}

static void test_plan(void) {
    CHECK(P("tok_embeddings.weight", 100).tp_dim == 0);
    CHECK(P("output.weight:exp_avg", 100).tp_dim == 0);
    CHECK(P("norm.weight", 100).tp_dim == -1);
    CHECK(P("layers.12.attention.wq.weight", 100).tp_dim == 0);
    CHECK(P("layers.0.attention.wk.weight:exp_avg_sq", 100).tp_dim == 0);
    CHECK(P("layers.0.attention.wv.weight", 100).tp_dim == 0);
    CHECK(P("layers.0.attention.wo.weight", 100).tp_dim == 1);
    CHECK(P("layers.3.feed_forward.w1.weight", 100).tp_dim == 0);
    CHECK(P("layers.3.feed_forward.w2.weight", 100).tp_dim == 1);
    CHECK(P("layers.3.feed_forward.w3.weight", 100).tp_dim == 0);
    CHECK(P("layers.3.attention_norm.weight", 100).tp_dim == -1);
    CHECK(P("layers.3.ffn_norm.weight", 100).tp_dim == -1);
    CHECK(P("layersX.attention.wq.weight", 100).tp_dim == -1);
    CHECK(P("layers.3.attention.wq.weight", 100).block == 4 && P("norm.weight", 100).block == 101);
    CHECK(P("output.weight", 100).block == 101 && P("tok_embeddings.weight:exp_avg", 100).block == 0);
    /* The catalog's own fields, filled where it is built, agree. */
    titan_llama_config mc;
    OK(titan_llama_flavor("debugmodel", &mc));
    mc.vocab_size = 64;
    int np;
    titan_param *cat = titan_llama_params_local_new(&mc, (titan_llama_tp){1, 0}, (titan_llama_pp){.size = 3, .stage = 0}, &np);
    for (int i = 0; cat && i < np; i++) {
        titan_layout_place q = P(cat[i].name, mc.n_layers);
        CHECK(q.tp_dim == cat[i].place.tp_dim && q.block == cat[i].place.block, "%s", cat[i].name);
    }
    free(cat);

    /* torchtitan's default split: embedding and output weigh one layer each. */
    struct { int layers, pp, first[5], end[5]; } cases[] = {
        {8, 2, {0, 4}, {4, 8}},       /* 10 effective: 5 + 5 */
        {2, 2, {0, 1}, {1, 2}},
        {3, 2, {0, 2}, {2, 3}},       /* 5: 3 + 2, the extra one first */
        {2, 4, {0, 0, 1, 2}, {0, 1, 2, 2}},
        {6, 4, {0, 1, 3, 5}, {1, 3, 5, 6}}, /* 8: 2 each */
        {16, 3, {0, 5, 11}, {5, 11, 16}},   /* 18: 6 each */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        titan_layout l = titan_layout_single();
        l.pp = cases[i].pp;
        OK(titan_layout_check(&l, cases[i].layers));
        for (int s = 0; s < l.pp; s++) {
            int a, b;
            titan_layout_stage_layers(&l, cases[i].layers, s, &a, &b);
            CHECK(a == cases[i].first[s] && b == cases[i].end[s], "case %zu stage %d: [%d,%d)", i, s, a, b);
        }
    }
    titan_layout l = L("pp=3");
    CHECK(titan_layout_stage(&l, 3, P("tok_embeddings.weight", 3).block) == 0);
    CHECK(titan_layout_stage(&l, 3, P("norm.weight", 3).block) == 2 && titan_layout_stage(&l, 3, P("output.weight:exp_avg", 3).block) == 2);
    CHECK(titan_layout_stage(&l, 3, P("layers.0.attention.wq.weight", 3).block) == 0);  /* 5: 2+2+1 */
    CHECK(titan_layout_stage(&l, 3, P("layers.1.attention.wq.weight", 3).block) == 1);
    CHECK(titan_layout_stage(&l, 3, P("layers.2.ffn_norm.weight", 3).block) == 1);
    l = L("pp=5");
    CHECK(titan_layout_check(&l, 2) == TITAN_ERR_USAGE);
    titan_error_clear();

    /* The V placement (ZBVZeroBubble, DualPipeV): rank r holds stages r and
     * 2 pp - 1 - r; 6 layers + 2 over 8 stages, one each: the embedding
     * (stage 0) and the head (stage 7) both rank 0's, layer 2 (stage 3)
     * rank 3's, layer 3 (stage 4) rank 3's, layer 5 (stage 6) rank 1's. */
    l = L("pp=4,pp_v=2,pp_vshape=1");
    char fmt[TITAN_LAYOUT_STR_MAX];
    titan_layout_format(&l, fmt, sizeof fmt);
    CHECK(!strcmp(fmt, "dp_replicate=1,dp_shard=1,cp=1,tp=1,pp=4,pp_v=2,pp_first_less=1,pp_last_less=1,pp_vshape=1"),
          "%s", fmt);
    OK(titan_layout_check(&l, 6));
    CHECK(titan_layout_stage(&l, 6, 0) == 0 && titan_layout_stage(&l, 6, 7) == 0, "embedding and head on rank 0");
    CHECK(titan_layout_stage(&l, 6, 3) == 3 && titan_layout_stage(&l, 6, 4) == 3 && titan_layout_stage(&l, 6, 6) == 1);
    for (int r = 0; r < 4; r++)
        for (int k = 0; k < 2; k++)
            CHECK(titan_layout_stage_rank(&l, titan_layout_rank_stage(&l, r, k)) == r, "rank %d stage %d", r, k);
    CHECK(titan_layout_rank_stage(&l, 1, 1) == 6 && titan_layout_rank_stage(&l, 3, 1) == 4);
    l = L("pp=4,pp_v=2");
    CHECK(titan_layout_stage(&l, 6, 7) == 3 && titan_layout_rank_stage(&l, 1, 1) == 5, "looped placement");
    titan_layout bad;
    CHECK(titan_layout_parse("pp=2,pp_vshape=1", &bad) == TITAN_ERR_USAGE, "pp_vshape without pp_v=2");
    CHECK(titan_layout_parse("pp=2,pp_v=3,pp_vshape=1", &bad) == TITAN_ERR_USAGE, "pp_vshape with pp_v=3");
    CHECK(titan_layout_parse("pp=2,pp_v=2,pp_vshape=2", &bad) == TITAN_ERR_USAGE, "pp_vshape=2");
    titan_error_clear();

    /* An explicit split (module_fqns_per_model_part): 6 layers as 1, 2, 1
     * and 2 in a V; the layout string reads back the same; the counts must
     * add up to the layers and leave no middle stage empty. */
    l = L("pp=2,pp_v=2,pp_vshape=1,pp_layers=1:2:1:2");
    titan_layout_format(&l, fmt, sizeof fmt);
    CHECK(!strcmp(fmt, "dp_replicate=1,dp_shard=1,cp=1,tp=1,pp=2,pp_v=2,pp_first_less=1,pp_last_less=1,pp_vshape=1,"
                       "pp_layers=1:2:1:2"), "%s", fmt);
    titan_layout back = L(fmt);
    CHECK(back.pp_layers.n == 4 && back.pp_layers.count[3] == 2 && back.pp_v == 2 && back.pp_vshape == 1);
    OK(titan_layout_check(&l, 6));
    int first, end;
    titan_layout_stage_layers(&l, 6, 2, &first, &end);
    CHECK(first == 3 && end == 4, "stage 2: layers [%d, %d)", first, end);
    CHECK(titan_layout_stage(&l, 6, 1) == 0 && titan_layout_stage(&l, 6, 2) == 1 && titan_layout_stage(&l, 6, 4) == 1,
          "layer 0 on rank 0 (stage 0), layers 1, 3 on rank 1 (stages 1, 2)");
    CHECK(titan_layout_stage(&l, 6, 5) == 0 && titan_layout_stage(&l, 6, 7) == 0, "stage 3 (layers 4, 5, head): rank 0");
    l = L("pp=2,pp_layers=0:6"); /* pp_v from the counts */
    CHECK(l.pp_v == 1);
    OK(titan_layout_check(&l, 6));
    CHECK(titan_layout_check(&l, 7) == TITAN_ERR_USAGE, "6 layers split, the model has 7");
    l = L("pp=3,pp_layers=3:0:3");
    CHECK(titan_layout_check(&l, 6) == TITAN_ERR_USAGE, "a middle stage without layers");
    CHECK(titan_layout_parse("pp=2,pp_layers=1:2:3", &bad) == TITAN_ERR_USAGE, "3 counts for pp 2");
    CHECK(titan_layout_parse("pp=2,pp_layers=1:", &bad) == TITAN_ERR_USAGE, "a trailing ':'");
    CHECK(titan_layout_parse("pp=2,pp_layers=1:-2", &bad) == TITAN_ERR_USAGE, "a negative count");
    titan_error_clear();

    /* Rank order: tp fastest, then cp, dp_shard, dp_replicate, pp. */
    l = L("pp=2,dp_replicate=2,dp_shard=3,cp=2,tp=2");
    titan_layout_coord c;
    titan_layout_coord_of(&l, 1 + 2 * (1 + 2 * (2 + 3 * (1 + 2 * 1))), &c);
    CHECK(c.tp == 1 && c.cp == 1 && c.dp_shard == 2 && c.dp_replicate == 1 && c.pp == 1);
    for (int r = 0; r < titan_layout_world(&l); r++) {
        titan_layout_coord_of(&l, r, &c);
        CHECK(titan_layout_rank_of(&l, &c) == r);
    }

    /* wo under tp=2 x dp_shard=2: columns by tp, then rows by FSDP. */
    l = L("dp_shard=2,tp=2");
    int64_t shape[2] = {48, 96};
    titan_box b;
    int w;
    CHECK(titan_layout_box(&l, 3, P("layers.1.attention.wo.weight", 3), 2, shape, 3, &b, &w) && w);
    CHECK(b.offset[0] == 24 && b.size[0] == 24 && b.offset[1] == 48 && b.size[1] == 48);
    /* wq: rows by tp, then the tp-local rows by FSDP. */
    CHECK(titan_layout_box(&l, 3, P("layers.1.attention.wq.weight", 3), 2, shape, 1, &b, &w) && w);
    CHECK(b.offset[0] == 24 && b.size[0] == 12 && b.offset[1] == 0 && b.size[1] == 96);
    CHECK(titan_layout_box(&l, 3, P("layers.1.attention.wq.weight", 3), 2, shape, 2, &b, &w) && w);
    CHECK(b.offset[0] == 12 && b.size[0] == 12);
    /* A norm is replicated over tp: tp rank 1 holds it but does not save it. */
    int64_t nshape[1] = {48};
    CHECK(titan_layout_box(&l, 3, P("norm.weight", 3), 1, nshape, 1, &b, &w) && !w && b.size[0] == 24);
}

/* ---- a model's state ---- */

typedef struct {
    char name[96];
    int ndim;
    int64_t shape[2];
    float *data;
    size_t numel;
} tensor;

static titan_llama_config small_model(void) {
    titan_llama_config c;
    memset(&c, 0, sizeof c);
    c.dim = 48, c.n_layers = 3, c.n_heads = 6, c.n_kv_heads = 2, c.vocab_size = 259, c.multiple_of = 16;
    c.norm_eps = 1e-5f, c.rope_theta = 500000.0f, c.rope_low_freq_factor = 1, c.rope_high_freq_factor = 4;
    c.rope_original_context = 8192;
    return c;
}

/* Parameters, then NAME:exp_avg, then NAME:exp_avg_sq, filled with distinct values. */
static tensor *make_state(const titan_llama_config *mc, int *n) {
    int np;
    titan_param *ps = titan_llama_params_new(mc, &np);
    tensor *t = calloc((size_t)(3 * np), sizeof *t);
    static const char *const suf[3] = {"", ":exp_avg", ":exp_avg_sq"};
    uint64_t x = 88172645463325252ull;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < np; i++) {
            tensor *u = &t[k * np + i];
            snprintf(u->name, sizeof u->name, "%s%s", ps[i].name, suf[k]);
            u->ndim = ps[i].ndim;
            u->shape[0] = ps[i].shape[0];
            u->shape[1] = ps[i].shape[1];
            u->numel = ps[i].numel;
            u->data = malloc(u->numel * sizeof(float));
            for (size_t e = 0; e < u->numel; e++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                u->data[e] = (float)(int32_t)(uint32_t)x * 1e-9f;
            }
        }
    *n = 3 * np;
    free(ps);
    return t;
}

static titan_box whole(const tensor *t) {
    titan_box b = {.ndim = t->ndim};
    for (int d = 0; d < t->ndim; d++) b.size[d] = t->shape[d];
    return b;
}

/* Over all ranks: the saved boxes (writes = 1) cover each tensor exactly
 * once, and every held box is some saved box (a replica). */
static void check_coverage(const titan_layout *l, int n_layers, const tensor *ts, int nt, const char *what) {
    int world = titan_layout_world(l);
    titan_box *saved = malloc((size_t)world * sizeof *saved);
    for (int i = 0; i < nt; i++) {
        const tensor *t = &ts[i];
        int ns = 0;
        int64_t covered = 0;
        for (int r = 0; r < world; r++) {
            titan_box b;
            int w;
            if (titan_layout_box(l, n_layers, P(t->name, n_layers), t->ndim, t->shape, r, &b, &w) && w) {
                saved[ns++] = b;
                covered += titan_box_numel(&b);
            }
        }
        CHECK(covered == (int64_t)t->numel, "%s: %s covered %lld of %zu", what, t->name, (long long)covered, t->numel);
        for (int a = 0; a < ns; a++)
            for (int c = a + 1; c < ns; c++) {
                titan_box r;
                CHECK(!titan_box_intersect(&saved[a], &saved[c], &r), "%s: %s boxes %d and %d overlap", what, t->name, a, c);
            }
        for (int r = 0; r < world; r++) {
            titan_box b;
            int w, found = 0;
            if (!titan_layout_box(l, n_layers, P(t->name, n_layers), t->ndim, t->shape, r, &b, &w)) continue;
            for (int a = 0; a < ns && !found; a++) found = !memcmp(&b, &saved[a], sizeof b);
            CHECK(found, "%s: %s rank %d holds a box nobody saves", what, t->name, r);
        }
    }
    free(saved);
}

/* Saves ts under layout l into root/step-N, rank by rank, each adding only the
 * boxes it saves (as a rank of that job would). */
static void save_sharded(const char *root, int64_t step, const titan_layout *l, int n_layers, const tensor *ts,
                         int nt) {
    titan_ckpt_writer *w;
    OK(titan_ckpt_begin(&w, root, step));
    char s[TITAN_LAYOUT_STR_MAX];
    titan_layout_format(l, s, sizeof s);
    OK(titan_ckpt_meta_str(w, "layout", s));
    OK(titan_ckpt_meta_i64(w, "model.n_layers", n_layers));
    float *buf = malloc(1 << 22);
    for (int r = 0; r < titan_layout_world(l); r++)
        for (int i = 0; i < nt; i++) {
            const tensor *t = &ts[i];
            titan_box b, all = whole(t);
            int wr;
            if (!titan_layout_box(l, n_layers, P(t->name, n_layers), t->ndim, t->shape, r, &b, &wr) || !wr) continue;
            titan_box_copy(buf, &b, t->data, &all, &b, sizeof(float));
            OK(titan_ckpt_add_rank(w, r, t->name, TITAN_DTYPE_F32, t->ndim, t->shape, &b, buf));
        }
    free(buf);
    OK(titan_ckpt_commit(w, 0));
}

/* Every chunk sits in the file of a rank that saves a box containing it. */
static void check_files(titan_ckpt *ck, const titan_layout *l, int n_layers, const tensor *ts, int nt) {
    for (int i = 0; i < nt; i++) {
        titan_ckpt_tensor info;
        OK(titan_ckpt_tensor_find(ck, ts[i].name, &info));
        for (int j = 0; j < info.nchunks; j++) {
            titan_ckpt_chunk c;
            OK(titan_ckpt_chunk_info(ck, ts[i].name, j, &c));
            int r = -1;
            CHECK(sscanf(c.file, "rank-%d.bin", &r) == 1);
            titan_box b, x;
            int w;
            CHECK(titan_layout_box(l, n_layers, P(ts[i].name, n_layers), ts[i].ndim, ts[i].shape, r, &b, &w) && w &&
                      titan_box_intersect(&b, &c.box, &x) && titan_box_numel(&x) == titan_box_numel(&c.box),
                  "%s chunk %d in %s", ts[i].name, j, c.file);
        }
    }
}

/* Every rank of layout l reads the boxes it holds; each must equal the
 * original, and the saved ones assembled must give back every tensor. */
static void load_sharded(const char *path, const titan_layout *l, int n_layers, const tensor *ts, int nt,
                         const char *what) {
    titan_ckpt *ck;
    OK(titan_ckpt_open(&ck, path));
    if (!ck) return;
    float *buf = malloc(1 << 22), *want = malloc(1 << 22);
    for (int i = 0; i < nt; i++) {
        const tensor *t = &ts[i];
        float *re = calloc(t->numel, sizeof(float));
        titan_box all = whole(t);
        for (int r = 0; r < titan_layout_world(l); r++) {
            titan_box b;
            int w;
            if (!titan_layout_box(l, n_layers, P(t->name, n_layers), t->ndim, t->shape, r, &b, &w)) continue;
            titan_status st = titan_ckpt_read(ck, t->name, TITAN_DTYPE_F32, &b, buf);
            CHECK(st == TITAN_OK, "%s: rank %d reads %s", what, r, t->name);
            titan_box_copy(want, &b, t->data, &all, &b, sizeof(float));
            size_t n = (size_t)titan_box_numel(&b);
            CHECK(!memcmp(buf, want, n * sizeof(float)), "%s: rank %d %s differs", what, r, t->name);
            if (w) titan_box_copy(re, &all, buf, &b, &b, sizeof(float));
        }
        CHECK(!memcmp(re, t->data, t->numel * sizeof(float)), "%s: %s assembled differs", what, t->name);
        free(re);
    }
    free(buf);
    free(want);
    titan_ckpt_close(ck);
}

static void test_save_load(const char *tmp) {
    titan_llama_config mc = small_model();
    OK(titan_llama_config_check(&mc));
    int nt;
    tensor *ts = make_state(&mc, &nt);
    static const char *const layouts[] = {"single", "dp_shard=4", "dp_shard=2,tp=2", "pp=2", "dp_shard=3",
                                          "dp_replicate=2,dp_shard=2", "tp=2,pp=2", "cp=2,dp_shard=2,tp=3",
                                          "pp=5,dp_shard=5", "dp_shard=7,tp=4"};
    int nl = (int)(sizeof layouts / sizeof layouts[0]);
    for (int i = 0; i < nl; i++) {
        titan_layout l = L(layouts[i]);
        check_coverage(&l, mc.n_layers, ts, nt, layouts[i]);
    }
    /* The pairs of the brief, and more: A saved, B loaded. */
    static const char *const pairs[][2] = {
        {"single", "dp_shard=4"},
        {"dp_shard=4", "tp=2,dp_shard=2"},
        {"pp=2", "dp_shard=3"},
        {"dp_replicate=2,dp_shard=2", "tp=2,pp=2"},
        {"cp=2,dp_shard=2,tp=3", "single"},
        {"dp_shard=7,tp=4", "pp=5,dp_shard=5"},
    };
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        char root[512], what[128];
        snprintf(root, sizeof root, "%s/pair%zu", tmp, p);
        snprintf(what, sizeof what, "%s -> %s", pairs[p][0], pairs[p][1]);
        titan_layout a = L(pairs[p][0]), b = L(pairs[p][1]);
        save_sharded(root, 10, &a, mc.n_layers, ts, nt);
        titan_ckpt *ck;
        OK(titan_ckpt_open(&ck, root));
        if (ck) {
            OK(titan_ckpt_verify(ck));
            const char *s;
            OK(titan_ckpt_meta_get_str(ck, "layout", &s));
            titan_layout back = titan_layout_single();
            OK(titan_layout_parse(s, &back));
            CHECK(!memcmp(&back, &a, sizeof a), "%s: layout meta %s", what, s);
            check_files(ck, &a, mc.n_layers, ts, nt);
            titan_ckpt_close(ck);
        }
        load_sharded(root, &b, mc.n_layers, ts, nt, what);
    }
    /* Replicas write nothing: dp_replicate=2,dp_shard=2 saves from ranks 0 and 1 only. */
    char f[600];
    snprintf(f, sizeof f, "%s/pair3/step-00000010/rank-00001.bin", tmp);
    CHECK(titan_fs_exists(f));
    snprintf(f, sizeof f, "%s/pair3/step-00000010/rank-00002.bin", tmp);
    CHECK(!titan_fs_exists(f));
    for (int i = 0; i < nt; i++) free(ts[i].data);
    free(ts);
}

/* More ranks than the writer keeps files open for, adding tensor by tensor
 * (a switch of rank file for every chunk). */
static void test_many_ranks(const char *tmp) {
    titan_layout l = L("dp_shard=150,tp=2");
    tensor t = {.name = "layers.0.feed_forward.w2.weight", .ndim = 2, .shape = {300, 8}, .numel = 2400};
    tensor u = {.name = "layers.0.ffn_norm.weight", .ndim = 1, .shape = {300}, .numel = 300};
    t.data = malloc(t.numel * sizeof(float));
    u.data = malloc(u.numel * sizeof(float));
    for (size_t i = 0; i < t.numel; i++) t.data[i] = (float)i;
    for (size_t i = 0; i < u.numel; i++) u.data[i] = -(float)i;
    tensor ts[2] = {t, u};
    char root[512];
    snprintf(root, sizeof root, "%s/many", tmp);
    titan_ckpt_writer *w;
    OK(titan_ckpt_begin(&w, root, 1));
    float buf[2400];
    for (int i = 0; i < 2; i++)
        for (int r = 0; r < titan_layout_world(&l); r++) {
            titan_box b, all = whole(&ts[i]);
            int wr;
            if (!titan_layout_box(&l, 1, P(ts[i].name, 1), ts[i].ndim, ts[i].shape, r, &b, &wr) || !wr) continue;
            titan_box_copy(buf, &b, ts[i].data, &all, &b, sizeof(float));
            OK(titan_ckpt_add_rank(w, r, ts[i].name, TITAN_DTYPE_F32, ts[i].ndim, ts[i].shape, &b, buf));
        }
    CHECK(titan_ckpt_add_rank(w, -1, "x", TITAN_DTYPE_F32, 1, u.shape, NULL, buf) == TITAN_ERR_USAGE);
    OK(titan_ckpt_commit(w, 0));
    titan_ckpt *ck;
    OK(titan_ckpt_open(&ck, root));
    if (ck) {
        OK(titan_ckpt_verify(ck));
        titan_ckpt_close(ck);
    }
    load_sharded(root, &l, 1, ts, 2, "many ranks");
    load_sharded(root, &(titan_layout){1, 1, 1, 1, 1, 0, 0, 0, 0, {0}}, 1, ts, 2, "many ranks -> single");
    free(t.data);
    free(u.data);
}

static int same_file(const char *a, const char *b) {
    char *x, *y;
    size_t nx, ny;
    if (titan_fs_read_file(a, &x, &nx, 1 << 30) != TITAN_OK) return 0;
    if (titan_fs_read_file(b, &y, &ny, 1 << 30) != TITAN_OK) {
        free(x);
        return 0;
    }
    int same = nx == ny && !memcmp(x, y, nx);
    free(x);
    free(y);
    return same;
}

static void test_reshard(const char *tmp) {
    titan_llama_config mc = small_model();
    int nt;
    tensor *ts = make_state(&mc, &nt);
    char a[512], b[512], c[512], p[700], q[700];
    snprintf(a, sizeof a, "%s/rs-a", tmp);
    snprintf(b, sizeof b, "%s/rs-b", tmp);
    snprintf(c, sizeof c, "%s/rs-c", tmp);
    /* The original, saved as one process saves (titan_ckpt_add, layout "single"). */
    titan_ckpt_writer *w;
    OK(titan_ckpt_begin(&w, a, 7));
    OK(titan_ckpt_meta_str(w, "layout", "single"));
    OK(titan_ckpt_meta_i64(w, "model.n_layers", mc.n_layers));
    OK(titan_ckpt_meta_f64(w, "train.lr", 2.5e-4));
    OK(titan_ckpt_meta_f64(w, "train.loss", 3.0));
    OK(titan_ckpt_meta_str(w, "tokenizer", "byte"));
    for (int i = 0; i < nt; i++) OK(titan_ckpt_add(w, ts[i].name, TITAN_DTYPE_F32, ts[i].ndim, ts[i].shape, NULL, ts[i].data));
    OK(titan_ckpt_commit(w, 0));

    titan_reshard_opts o = {.layout = L("dp_shard=3,tp=2,pp=2"), .dtype = -1, .place = titan_llama_param_place};
    titan_reshard_stats s;
    OK(titan_ckpt_reshard(a, b, &o, &s));
    CHECK(s.step == 7 && s.ntensors == nt && s.nfiles == 12 && !strcmp(s.from_layout, "single"));
    CHECK(s.buf_bytes > 0 && s.buf_bytes <= 2 * TITAN_CKPT_CHUNK_MAX);
    titan_layout lb = o.layout;
    titan_ckpt *ck;
    OK(titan_ckpt_open(&ck, b));
    if (ck) {
        OK(titan_ckpt_verify(ck));
        check_files(ck, &lb, mc.n_layers, ts, nt);
        double lr;
        const char *str;
        OK(titan_ckpt_meta_get_f64(ck, "train.lr", &lr));
        CHECK(lr == 2.5e-4);
        int64_t iv;
        CHECK(titan_ckpt_meta_get_i64(ck, "train.loss", &iv) != TITAN_OK, "a real stays a real");
        OK(titan_ckpt_meta_get_str(ck, "tokenizer", &str));
        CHECK(!strcmp(str, "byte"));
        OK(titan_ckpt_meta_get_str(ck, "layout", &str));
        CHECK(!strcmp(str, "dp_replicate=1,dp_shard=3,cp=1,tp=2,pp=2"), "%s", str);
        titan_ckpt_close(ck);
    }
    titan_error_clear();
    load_sharded(b, &lb, mc.n_layers, ts, nt, "reshard to dp_shard=3,tp=2,pp=2");

    /* And back: the same bytes as the original, data file and catalog. */
    snprintf(p, sizeof p, "%s/step-00000007", c);
    o.layout = titan_layout_single();
    OK(titan_ckpt_reshard(b, p, &o, &s));
    CHECK(s.nfiles == 1);
    snprintf(p, sizeof p, "%s/step-00000007/rank-00000.bin", a);
    snprintf(q, sizeof q, "%s/step-00000007/rank-00000.bin", c);
    CHECK(same_file(p, q), "round trip changed rank-00000.bin");
    snprintf(p, sizeof p, "%s/step-00000007/metadata.json", a);
    snprintf(q, sizeof q, "%s/step-00000007/metadata.json", c);
    CHECK(same_file(p, q), "round trip changed metadata.json");

    /* bf16 output: half the bytes, each value rounded to bf16. */
    o.dtype = TITAN_DTYPE_BF16;
    o.layout = L("dp_shard=2");
    snprintf(p, sizeof p, "%s/rs-bf16", tmp);
    OK(titan_ckpt_reshard(a, p, &o, &s));
    uint64_t bf16_bytes = s.bytes;
    OK(titan_ckpt_open(&ck, p));
    if (ck) {
        titan_ckpt_tensor info;
        OK(titan_ckpt_tensor_find(ck, ts[1].name, &info));
        CHECK(info.dtype == TITAN_DTYPE_BF16);
        float *x = malloc(ts[1].numel * sizeof(float));
        OK(titan_ckpt_read(ck, ts[1].name, TITAN_DTYPE_F32, NULL, x));
        int same = 1;
        for (size_t e = 0; e < ts[1].numel; e++)
            same &= x[e] == titan_bf16_to_f32(titan_f32_to_bf16(ts[1].data[e]));
        CHECK(same, "bf16 values");
        free(x);
        titan_ckpt_close(ck);
    }
    o.dtype = -1;
    o.layout = titan_layout_single();

    /* Refusals: an existing step without force; a step dir of another step;
     * more stages than the model has layers + 2. */
    CHECK(titan_ckpt_reshard(a, c, &o, &s) == TITAN_ERR_USAGE && strstr(titan_error_message(), "exists"));
    o.force = 1;
    OK(titan_ckpt_reshard(a, c, &o, &s));
    CHECK(s.bytes == 2 * bf16_bytes && s.bytes > 0);
    snprintf(p, sizeof p, "%s/step-00000008", c);
    CHECK(titan_ckpt_reshard(a, p, &o, &s) == TITAN_ERR_USAGE && strstr(titan_error_message(), "step 8"));
    o.layout = L("pp=6");
    CHECK(titan_ckpt_reshard(a, b, &o, &s) == TITAN_ERR_USAGE && strstr(titan_error_message(), "pp=6"));
    snprintf(p, sizeof p, "%s/missing", tmp);
    CHECK(titan_ckpt_reshard(p, b, &o, &s) == TITAN_ERR_IO);
    titan_error_clear();
    for (int i = 0; i < nt; i++) free(ts[i].data);
    free(ts);
}

int main(void) {
    titan_log_set_verbosity(0);
    char tmp[] = "/tmp/titan-test-layout-XXXXXX";
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    double t0 = titan_now_s();
    test_parse();
    test_chunk();
    test_plan();
    test_save_load(tmp);
    printf("save/load %.2f s\n", titan_now_s() - t0);
    test_many_ranks(tmp);
    test_reshard(tmp);
    if (titan_fs_remove_tree(tmp) != TITAN_OK) fprintf(stderr, "cleanup: %s\n", titan_error_message());
    printf("test_layout: %s (%d failures, %.2f s)\n", failures ? "FAIL" : "ok", failures, titan_now_s() - t0);
    return failures ? 1 : 0;
}
