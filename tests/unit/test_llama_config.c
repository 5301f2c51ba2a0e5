/* test_llama_config.c - flavors, FFN sizes, parameter counts, catalog, init statistics. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/llama_config.h"
#include "model/rope_freqs.h"

#include "check.h"

static void test_hidden_dims(void) {
    static const struct { const char *name; int hidden; } want[] = {
        {"debugmodel", 768}, {"1B", 8192}, {"3B", 8192}, {"8B", 14336}, {"70B", 28672},
        {"405B", 53248}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        titan_llama_config c;
        CHECK(titan_llama_flavor(want[i].name, &c) == TITAN_OK, "%s", want[i].name);
        int h = titan_llama_hidden_dim(&c);
        CHECK(h == want[i].hidden, "%s: hidden %d, want %d", want[i].name, h, want[i].hidden);
        c.vocab_size = 128256;
        CHECK(titan_llama_config_check(&c) == TITAN_OK, "%s: %s", want[i].name,
              titan_error_message());
        CHECK(c.norm_eps == 1e-5f && c.rope_theta == 500000.0f && c.rope_low_freq_factor == 1.0f &&
                  c.rope_high_freq_factor == 4.0f && c.rope_original_context == 8192,
              "%s: shared constants", want[i].name);
    }
}

static void test_param_counts(void) {
    titan_llama_config c;
    titan_llama_flavor("8B", &c);
    c.vocab_size = 128256;
    size_t n = titan_llama_num_params(&c);
    CHECK(n == 8030261248ULL, "8B: %zu params", n);
    CHECK(!c.tie_embeddings, "8B untied");
    CHECK(titan_llama_num_params_nonembed(&c) == n - 128256ULL * 4096, "8B nonembed");

    titan_llama_flavor("1B", &c);
    c.vocab_size = 128256;
    n = titan_llama_num_params(&c);
    CHECK(n == 1235814400ULL, "1B: %zu params", n);
    CHECK(c.tie_embeddings && c.rope_scaling_factor == 32.0f, "1B tied, factor 32");
    /* tied: the nonembed count holds no vocab-sized matrix */
    CHECK(titan_llama_num_params_nonembed(&c) == n - 128256ULL * 2048, "1B nonembed");

    double f = titan_llama_flops_per_token(&c, 2048);
    /* the tied head is still a matmul: every parameter counts once */
    double want = 6.0 * (double)n + 12.0 * 16 * 2048 * 2048.0;
    CHECK(f == want, "flops/token %.6g want %.6g", f, want);
}

static void test_catalog(void) {
    const char *flv[] = {"debugmodel", "1B", "8B"};
    for (int t = 0; t < 3; t++) {
        titan_llama_config c;
        titan_llama_flavor(flv[t], &c);
        c.vocab_size = 1000;
        int n = titan_llama_params(&c, NULL);
        CHECK(n == 1 + 9 * c.n_layers + 1 + (c.tie_embeddings ? 0 : 1), "%s: %d tensors", flv[t], n);
        titan_param *p = calloc((size_t)n, sizeof *p);
        CHECK(titan_llama_params(&c, p) == n, "count again");
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            CHECK(p[i].offset == off, "%s: %s offset", flv[t], p[i].name);
            size_t numel = (size_t)p[i].shape[0] * (size_t)(p[i].ndim == 2 ? p[i].shape[1] : 1);
            CHECK(p[i].numel == numel, "%s numel", p[i].name);
            off += p[i].numel;
        }
        CHECK(off == titan_llama_num_params(&c), "%s: sum of numel %zu", flv[t], off);
        int hd = c.dim / c.n_heads, h = titan_llama_hidden_dim(&c);
        CHECK(strcmp(p[0].name, "tok_embeddings.weight") == 0 && p[0].shape[0] == 1000 &&
                  p[0].shape[1] == c.dim, "embeddings first");
        CHECK(strcmp(p[1].name, "layers.0.attention_norm.weight") == 0 && p[1].ndim == 1, "%s",
              p[1].name);
        CHECK(strcmp(p[2].name, "layers.0.attention.wq.weight") == 0 &&
                  p[2].shape[0] == c.n_heads * hd && p[2].shape[1] == c.dim, "%s", p[2].name);
        CHECK(strcmp(p[3].name, "layers.0.attention.wk.weight") == 0 &&
                  p[3].shape[0] == c.n_kv_heads * hd, "%s", p[3].name);
        CHECK(strcmp(p[4].name, "layers.0.attention.wv.weight") == 0, "%s", p[4].name);
        CHECK(strcmp(p[5].name, "layers.0.attention.wo.weight") == 0 && p[5].shape[0] == c.dim &&
                  p[5].shape[1] == c.n_heads * hd, "%s", p[5].name);
        CHECK(strcmp(p[6].name, "layers.0.ffn_norm.weight") == 0, "%s", p[6].name);
        CHECK(strcmp(p[7].name, "layers.0.feed_forward.w1.weight") == 0 && p[7].shape[0] == h,
              "%s", p[7].name);
        CHECK(strcmp(p[8].name, "layers.0.feed_forward.w2.weight") == 0 && p[8].shape[1] == h,
              "%s", p[8].name);
        CHECK(strcmp(p[9].name, "layers.0.feed_forward.w3.weight") == 0, "%s", p[9].name);
        CHECK(strcmp(p[10].name, "layers.1.attention_norm.weight") == 0, "%s", p[10].name);
        int last = n - 1;
        if (c.tie_embeddings) {
            CHECK(strcmp(p[last].name, "norm.weight") == 0, "%s", p[last].name);
        } else {
            CHECK(strcmp(p[last - 1].name, "norm.weight") == 0, "%s", p[last - 1].name);
            CHECK(strcmp(p[last].name, "output.weight") == 0 && p[last].shape[0] == 1000,
                  "%s", p[last].name);
        }
        free(p);
    }
}

static void test_errors(void) {
    titan_llama_config c;
    titan_error_clear();
    CHECK(titan_llama_flavor("7B", &c) == TITAN_ERR_USAGE, "unknown flavor");
    CHECK(strstr(titan_error_message(), "7B") != NULL, "message names it: %s",
          titan_error_message());
    CHECK(strstr(titan_error_hint_text(), "405B") != NULL, "hint lists flavors: %s",
          titan_error_hint_text());

    titan_llama_flavor("debugmodel", &c);
    CHECK(titan_llama_config_check(&c) == TITAN_ERR_USAGE, "vocab 0 rejected");
    c.vocab_size = 256;
    CHECK(titan_llama_config_check(&c) == TITAN_OK, "debugmodel ok: %s", titan_error_message());
    titan_llama_config b = c;
    b.n_heads = 12;
    CHECK(titan_llama_config_check(&b) == TITAN_ERR_USAGE, "heads not dividing dim");
    b = c;
    b.n_kv_heads = 5;
    CHECK(titan_llama_config_check(&b) == TITAN_ERR_USAGE, "kv heads not dividing heads");
    b = c;
    b.dim = 48;
    b.n_heads = 16; /* head dim 3: odd */
    b.n_kv_heads = 16;
    CHECK(titan_llama_config_check(&b) == TITAN_ERR_USAGE, "odd head dim");
    b = c;
    b.norm_eps = 0;
    CHECK(titan_llama_config_check(&b) == TITAN_ERR_USAGE, "eps 0");

    /* Sizes from input files: a layer count or a width past what titan can
     * count is refused by name, before any catalog is built. */
    b = c;
    b.n_layers = 2000000000;
    titan_error_clear();
    CHECK(titan_llama_config_check(&b) == TITAN_ERR_USAGE && strstr(titan_error_message(), "n_layers"),
          "2e9 layers refused, naming n_layers: %s", titan_error_message());
    b.n_layers = TITAN_LLAMA_MAX_LAYERS;
    CHECK(titan_llama_config_check(&b) == TITAN_OK, "2^20 layers: %s", titan_error_message());
    b = c;
    b.dim = 1 << 24, b.n_heads = 1 << 12, b.n_kv_heads = 1 << 12, b.multiple_of = 1;
    CHECK(titan_llama_config_check(&b) == TITAN_ERR_USAGE && strstr(titan_error_message(), "parameters"),
          "dim 2^24: too many parameters: %s", titan_error_message());
    /* A deep narrow model: its catalog is far larger than a stack. */
    b = c;
    b.dim = 16, b.n_heads = 2, b.n_kv_heads = 2, b.multiple_of = 16, b.n_layers = 20000;
    CHECK(titan_llama_config_check(&b) == TITAN_OK, "20000 layers of dim 16: %s", titan_error_message());
    int n = 0;
    titan_param *ps = titan_llama_params_new(&b, &n);
    CHECK(ps && n == 9 * 20000 + 3 && !strcmp(ps[n - 2].name, "norm.weight"), "catalog of 20000 layers: %d", n);
    int found = 1;
    for (int i = 0; ps && i < n; i++) found &= titan_llama_param_index(&b, ps[i].name) == i;
    CHECK(found, "titan_llama_param_index finds every catalog name at its index");
    static const char *const foreign[] = {"layers.20000.ffn_norm.weight", "layers.01.ffn_norm.weight",
                                          "layers.+1.ffn_norm.weight", "layers.1.ffn_norm.weightx",
                                          "layers.1.ffn_norm", "norm.weight:exp_avg", "layers.-1.ffn_norm.weight"};
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++)
        CHECK(titan_llama_param_index(&b, foreign[i]) == -1, "%s is not in the catalog", foreign[i]);
    b.tie_embeddings = 1;
    CHECK(titan_llama_param_index(&b, "output.weight") == -1, "a tied model has no output.weight");
    free(ps);
}

/* Mean and standard deviation of x[0..n). */
static void stats(const float *x, size_t n, double *mean, double *sd, double *maxabs) {
    double s = 0, s2 = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        s += x[i];
        s2 += (double)x[i] * x[i];
        if (fabs(x[i]) > mx) mx = fabs(x[i]);
    }
    *mean = s / n;
    *sd = sqrt(s2 / n - *mean * *mean);
    *maxabs = mx;
}

static void test_init(void) {
    titan_llama_config c;
    titan_llama_flavor("debugmodel", &c);
    c.vocab_size = 512;
    c.n_layers = 3;
    int n = titan_llama_params(&c, NULL);
    titan_param *p = calloc((size_t)n, sizeof *p);
    titan_llama_params(&c, p);
    size_t np = titan_llama_num_params(&c);
    float *a = calloc(np, sizeof(float)), *b = calloc(np, sizeof(float));
    titan_llama_init_weights(&c, a, 42);
    titan_llama_init_weights(&c, b, 42);
    CHECK(memcmp(a, b, np * sizeof(float)) == 0, "init is deterministic");
    titan_llama_init_weights(&c, b, 43);
    CHECK(memcmp(a, b, np * sizeof(float)) != 0, "seed changes init");

    for (int i = 0; i < n; i++) {
        double mean, sd, mx;
        stats(a + p[i].offset, p[i].numel, &mean, &sd, &mx);
        const char *s = p[i].name;
        double want_sd, cut;
        int layer = -1;
        if (strncmp(s, "layers.", 7) == 0) layer = atoi(s + 7);
        if (strstr(s, "norm.weight")) {
            CHECK(mean == 1.0 && sd < 1e-12, "%s: ones", s);
            continue;
        } else if (strcmp(s, "tok_embeddings.weight") == 0) {
            want_sd = 1.0, cut = 1e30;
        } else if (strcmp(s, "output.weight") == 0) {
            want_sd = 1.0 / 16.0, cut = 3.0 / 16.0;
            want_sd *= 0.9733; /* std of N(0,1) truncated at +-3 */
        } else if (strstr(s, ".wo.") || strstr(s, ".w2.") || strstr(s, ".w3.")) {
            want_sd = 0.02 / sqrt(2.0 * (layer + 1)), cut = 2.0;
        } else {
            want_sd = 0.02, cut = 2.0;
        }
        double tol = 4.0 * want_sd / sqrt((double)p[i].numel) + 0.01 * want_sd;
        CHECK(fabs(mean) < tol, "%s: mean %g", s, mean);
        CHECK(fabs(sd - want_sd) < 0.02 * want_sd, "%s: sd %g want %g", s, sd, want_sd);
        CHECK(mx <= cut, "%s: max %g beyond cut %g", s, mx, cut);
    }

    /* tied: the shared matrix gets std 1/dim, cut at 3 std */
    c.tie_embeddings = 1;
    titan_llama_init_weights(&c, a, 42);
    double mean, sd, mx;
    stats(a, (size_t)c.vocab_size * c.dim, &mean, &sd, &mx);
    CHECK(fabs(sd - 0.9733 / 256.0) < 0.02 / 256.0 && mx <= 3.0 / 256.0, "tied embeddings sd %g",
          sd);
    free(a);
    free(b);
    free(p);
}

/* RoPE's frequencies (rope_freqs.h): Llama 3.1's scaling keeps the high
 * ones, divides the low ones by the factor, blends between; the tables are
 * cos/sin of t * freq. Bitwise agreement with PyTorch is test_ops'. */
static void test_rope_freqs(void) {
    enum { HD = 128, H2 = HD / 2, T = 3 };
    float plain[H2], scaled[H2], cs[T * H2], sn[T * H2];
    titan_rope_freqs(plain, HD, 500000.0f, 0.0f, 0.0f, 0.0f, 0);
    titan_rope_freqs(scaled, HD, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
    CHECK(plain[0] == 1.0f && scaled[0] == 1.0f, "the highest frequency is 1, unscaled");
    CHECK(scaled[H2 - 1] == plain[H2 - 1] / 8.0f, "the lowest divided by the factor");
    int blended = 0;
    for (int i = 0; i < H2; i++) blended += scaled[i] < plain[i] && scaled[i] > plain[i] / 8.0f;
    CHECK(blended > 0, "some blended between");
    titan_rope_tables(cs, sn, T, HD, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
    CHECK(cs[0] == 1.0f && sn[0] == 0.0f && cs[H2] == (float)cos((double)scaled[0]) &&
              sn[2 * H2 + H2 - 1] == (float)sin((double)(2.0f * scaled[H2 - 1])),
          "tables: cos/sin of t * freq");
    int same = 1;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < H2; i++)
            same &= cs[t * H2 + i] == (float)cos((double)((float)t * scaled[i])) &&
                    sn[t * H2 + i] == (float)sin((double)((float)t * scaled[i]));
    CHECK(same, "tables: every entry");
}

int main(void) {
    test_rope_freqs();
    test_hidden_dims();
    test_param_counts();
    test_catalog();
    test_errors();
    test_init();
    if (failures) {
        fprintf(stderr, "test_llama_config: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_llama_config: ok (hidden dims 1B/3B/8B/70B/405B = 8192/8192/14336/28672/53248, "
           "8B = 8030261248 params, 1B tied = 1235814400)\n");
    return 0;
}
