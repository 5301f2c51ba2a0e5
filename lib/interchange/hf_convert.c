/* hf_convert.c - titan checkpoint <-> Hugging Face Llama export and import. */
#include "interchange/hf_convert.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interchange/ckpt_tokenizer.h"
#include "interchange/safetensors.h"
#include "model/llama_ckpt.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/mem.h"


titan_status titan_ckpt_model_config(const titan_ckpt *ck, titan_llama_config *mc) {
    memset(mc, 0, sizeof *mc);
    int64_t iv;
    double fv;
#define GET_I(f) \
    TITAN_TRY(titan_ckpt_meta_get_i64(ck, "model." #f, &iv)); \
    if (iv < INT_MIN || iv > INT_MAX) \
        return titan_error(TITAN_ERR_FORMAT, "%s/metadata.json: meta key \"model." #f "\": %" PRId64 " out of range", \
                           titan_ckpt_path(ck), iv); \
    mc->f = (int)iv;
#define GET_F(f) TITAN_TRY(titan_ckpt_meta_get_f64(ck, "model." #f, &fv)); mc->f = (float)fv;
    TITAN_LLAMA_INT_FIELDS(GET_I)
    TITAN_LLAMA_FLT_FIELDS(GET_F)
    titan_status st = titan_llama_config_check(mc);
    if (st != TITAN_OK) {
        titan_error_context("%s: model", titan_ckpt_path(ck));
        return TITAN_ERR_FORMAT;
    }
    return titan_llama_ckpt_check(ck, mc); /* before anything is sized by it */
}

titan_status titan_ckpt_load_params(titan_ckpt *ck, const titan_llama_config *mc, float *params) {
    int np;
    titan_param *ps = titan_llama_params_new(mc, &np);
    if (!ps) return TITAN_ERR_NOMEM;
    titan_status st = TITAN_OK;
    for (int i = 0; i < np && st == TITAN_OK; i++) {
        titan_ckpt_tensor t;
        st = titan_ckpt_tensor_find(ck, ps[i].name, &t);
        if (st == TITAN_OK && (t.ndim != ps[i].ndim || t.shape[0] != ps[i].shape[0] ||
                               (t.ndim == 2 && t.shape[1] != ps[i].shape[1])))
            st = titan_error(TITAN_ERR_FORMAT, "%s: tensor %s: shape does not match the model",
                             titan_ckpt_path(ck), ps[i].name);
        if (st == TITAN_OK) st = titan_ckpt_read(ck, ps[i].name, TITAN_DTYPE_F32, NULL, params + ps[i].offset);
    }
    free(ps);
    return st;
}

/* ---- names and the RoPE permutation ---- */

static const char *const layer_map[][2] = {
    {"attention.wq", "self_attn.q_proj"},   {"attention.wk", "self_attn.k_proj"},
    {"attention.wv", "self_attn.v_proj"},   {"attention.wo", "self_attn.o_proj"},
    {"feed_forward.w1", "mlp.gate_proj"},   {"feed_forward.w2", "mlp.down_proj"},
    {"feed_forward.w3", "mlp.up_proj"},     {"attention_norm", "input_layernorm"},
    {"ffn_norm", "post_attention_layernorm"},
};

int titan_hf_name(const char *tn, char *out, size_t cap) {
    int n = -1;
    if (!strcmp(tn, "tok_embeddings.weight")) n = snprintf(out, cap, "model.embed_tokens.weight");
    else if (!strcmp(tn, "norm.weight")) n = snprintf(out, cap, "model.norm.weight");
    else if (!strcmp(tn, "output.weight")) n = snprintf(out, cap, "lm_head.weight");
    else {
        int layer, used = 0;
        if (sscanf(tn, "layers.%d.%n", &layer, &used) != 1 || used == 0) return -1;
        const char *rest = tn + used;
        for (size_t k = 0; k < sizeof layer_map / sizeof layer_map[0]; k++) {
            size_t l = strlen(layer_map[k][0]);
            if (!strncmp(rest, layer_map[k][0], l) && !strcmp(rest + l, ".weight"))
                n = snprintf(out, cap, "model.layers.%d.%s.weight", layer, layer_map[k][1]);
        }
    }
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

void titan_hf_permute_rows(float *dst, const float *src, int n_heads, int hd, int64_t cols, int to_hf) {
    int h2 = hd / 2;
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < h2; i++)
            for (int j = 0; j < 2; j++) {
                size_t meta = (size_t)h * hd + 2 * (size_t)i + j, hf = (size_t)h * hd + (size_t)j * h2 + i;
                size_t d = to_hf ? hf : meta, s = to_hf ? meta : hf;
                memcpy(dst + d * cols, src + s * cols, (size_t)cols * sizeof *dst);
            }
}

/* The head count a parameter's rows are permuted by (q: n_heads, k: n_kv_heads), 0 for none. */
static int permute_heads(const titan_param *p, const titan_llama_config *mc) {
    if (p->role == TITAN_PARAM_WQ) return mc->n_heads;
    if (p->role == TITAN_PARAM_WK) return mc->n_kv_heads;
    return 0;
}

/* The shortest decimal that reads back as f, so config.json shows 1e-05, not 9.99999975e-06. */
static json_t *json_float(float f) {
    char b[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(b, sizeof b, "%.*g", p, (double)f);
        if ((float)strtod(b, NULL) == f) break;
    }
    return json_real(strtod(b, NULL));
}

static titan_status write_json(const char *dir, const char *name, json_t *j) {
    char path[PATH_MAX];
    TITAN_TRY(titan_fs_join(path, sizeof path, dir, name));
    char *txt = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    if (!txt) return titan_error(TITAN_ERR_NOMEM, "%s: cannot format JSON", path);
    size_t n = strlen(txt);
    txt[n] = '\n'; /* json_dumps leaves room only for the NUL: append by rewriting it */
    titan_status st = titan_fs_write_file(path, txt, n + 1);
    free(txt);
    return st;
}

/* ---- export ---- */

static const char *torch_dtype(titan_dtype t) {
    return t == TITAN_DTYPE_BF16 ? "bfloat16" : t == TITAN_DTYPE_F16 ? "float16" : "float32";
}

static int64_t max_position(const titan_llama_config *mc, const titan_hf_export_opts *o) {
    if (o->max_position > 0) return o->max_position;
    return mc->rope_scaling_factor > 0 ? (int64_t)(mc->rope_original_context * (double)mc->rope_scaling_factor)
                                       : mc->rope_original_context;
}

/* bos/eos < 0: written as null (no tokenizer known). */
static json_t *hf_config(const titan_llama_config *mc, const titan_hf_export_opts *o, int64_t bos, int64_t eos) {
    int64_t maxpos = max_position(mc, o);
    json_t *scaling = json_null();
    if (mc->rope_scaling_factor > 0)
        scaling = json_pack("{s:o, s:o, s:o, s:i, s:s}", "factor", json_float(mc->rope_scaling_factor),
                            "low_freq_factor", json_float(mc->rope_low_freq_factor), "high_freq_factor",
                            json_float(mc->rope_high_freq_factor), "original_max_position_embeddings",
                            mc->rope_original_context, "rope_type", "llama3");
    json_t *c = json_pack("{s:[s], s:b, s:f, s:o, s:o, s:i, s:s, s:i, s:f, s:i, s:I, s:b, s:s}",
                          "architectures", "LlamaForCausalLM", "attention_bias", 0, "attention_dropout", 0.0,
                          "bos_token_id", bos >= 0 ? json_integer(bos) : json_null(),
                          "eos_token_id", eos >= 0 ? json_integer(eos) : json_null(),
                          "head_dim", mc->dim / mc->n_heads, "hidden_act", "silu", "hidden_size", mc->dim,
                          "initializer_range", 0.02, "intermediate_size", titan_llama_hidden_dim(mc),
                          "max_position_embeddings", (json_int_t)maxpos, "mlp_bias", 0, "model_type", "llama");
    if (!c) return NULL;
    json_object_set_new(c, "num_attention_heads", json_integer(mc->n_heads));
    json_object_set_new(c, "num_hidden_layers", json_integer(mc->n_layers));
    json_object_set_new(c, "num_key_value_heads", json_integer(mc->n_kv_heads));
    json_object_set_new(c, "pretraining_tp", json_integer(1));
    json_object_set_new(c, "rms_norm_eps", json_float(mc->norm_eps));
    json_object_set_new(c, "rope_scaling", scaling);
    json_object_set_new(c, "rope_theta", json_float(mc->rope_theta));
    json_object_set_new(c, "tie_word_embeddings", json_boolean(mc->tie_embeddings));
    json_object_set_new(c, "torch_dtype", json_string(torch_dtype(o->dtype)));
    json_object_set_new(c, "use_cache", json_true());
    json_object_set_new(c, "vocab_size", json_integer(mc->vocab_size));
    return c;
}

typedef struct {
    titan_param p;
    char hf[128];
    int shard;
} xparam;

/* Writes one shard: the parameters [a, b) of xs. buf/perm hold max numel f32, out the converted copy. */
static titan_status write_shard(titan_ckpt *ck, const titan_llama_config *mc, const xparam *xs, int a,
                                int b, const char *path, titan_dtype dt, float *buf, float *perm,
                                uint16_t *out) {
    titan_st_writer *w = NULL;
    TITAN_TRY(titan_st_writer_new(&w));
    titan_status st = titan_st_writer_meta(w, "format", "pt");
    for (int i = a; i < b && st == TITAN_OK; i++)
        st = titan_st_writer_add(w, xs[i].hf, dt, xs[i].p.ndim, xs[i].p.shape);
    if (st == TITAN_OK) st = titan_st_writer_begin(w, path);
    for (int i = a; i < b && st == TITAN_OK; i++) {
        const titan_param *p = &xs[i].p;
        st = titan_ckpt_read(ck, p->name, TITAN_DTYPE_F32, NULL, buf);
        if (st != TITAN_OK) break;
        const float *src = buf;
        int nh = permute_heads(p, mc);
        if (nh) {
            titan_hf_permute_rows(perm, buf, nh, mc->dim / mc->n_heads, p->shape[1], 1);
            src = perm;
        }
        if (dt == TITAN_DTYPE_F32) {
            st = titan_st_writer_write(w, src);
        } else {
            titan_dtype_convert(out, dt, src, TITAN_DTYPE_F32, p->numel); /* dt: a float type */
            st = titan_st_writer_write(w, out);
        }
    }
    if (st == TITAN_OK) st = titan_st_writer_finish(w);
    titan_st_writer_free(w);
    return st;
}

static int dir_is_empty(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *de;
    int empty = 1;
    while (empty && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) empty = 0;
    closedir(d);
    return empty;
}

static titan_status export_into(titan_ckpt *ck, const titan_llama_config *mc, const char *tmp,
                                const titan_hf_export_opts *o, const titan_tokenizer *tok) {
    int np;
    titan_param *ps = titan_llama_params_new(mc, &np);
    if (!ps) return TITAN_ERR_NOMEM;
    xparam *xs = calloc((size_t)np, sizeof *xs);
    if (!xs) {
        free(ps);
        return titan_error(TITAN_ERR_NOMEM, "export: out of memory");
    }
    uint64_t maxb = o->max_shard_bytes ? o->max_shard_bytes : TITAN_HF_SHARD_BYTES, cur = 0, total = 0;
    size_t es = titan_dtype_size(o->dtype), maxn = 0;
    int nshards = 1;
    for (int i = 0; i < np; i++) {
        xs[i].p = ps[i];
        TITAN_ASSERT(titan_hf_name(ps[i].name, xs[i].hf, sizeof xs[i].hf) == 0);
        uint64_t b = ps[i].numel * es;
        if (cur > 0 && cur + b > maxb) { nshards++; cur = 0; }
        cur += b;
        total += b;
        xs[i].shard = nshards - 1;
        if (ps[i].numel > maxn) maxn = ps[i].numel;
    }
    float *buf = titan_alloc(maxn * sizeof(float), "export buffer");
    float *perm = titan_alloc(maxn * sizeof(float), "export buffer");
    uint16_t *out = titan_alloc(maxn * sizeof(uint16_t), "export buffer");
    titan_status st = buf && perm && out ? TITAN_OK : TITAN_ERR_NOMEM;
    json_t *wmap = json_object();
    for (int s = 0, a = 0; s < nshards && st == TITAN_OK; s++) {
        int b = a;
        while (b < np && xs[b].shard == s) b++;
        char name[64], path[PATH_MAX];
        if (nshards == 1) snprintf(name, sizeof name, "model.safetensors");
        else snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, nshards);
        st = titan_fs_join(path, sizeof path, tmp, name);
        if (st == TITAN_OK) st = write_shard(ck, mc, xs, a, b, path, o->dtype, buf, perm, out);
        for (int i = a; i < b; i++) json_object_set_new(wmap, xs[i].hf, json_string(name));
        titan_info("%s: %d tensors", name, b - a);
        a = b;
    }
    if (st == TITAN_OK && nshards > 1) {
        json_t *idx = json_pack("{s:{s:I}, s:O}", "metadata", "total_size", (json_int_t)total, "weight_map", wmap);
        st = write_json(tmp, "model.safetensors.index.json", idx);
        json_decref(idx);
    }
    json_decref(wmap);
    int64_t bos = tok ? (int64_t)titan_tokenizer_bos(tok) : -1, eos = tok ? (int64_t)titan_tokenizer_eos(tok) : -1;
    if (st == TITAN_OK) {
        json_t *c = hf_config(mc, o, bos, eos);
        st = c ? write_json(tmp, "config.json", c) : titan_error(TITAN_ERR_NOMEM, "config.json: out of memory");
        json_decref(c);
    }
    if (st == TITAN_OK && tok) st = titan_hf_write_tokenizer(tok, tmp, max_position(mc, o));
    if (st == TITAN_OK && tok) {
        json_t *g = json_pack("{s:b, s:I, s:I}", "_from_model_config", 1, "bos_token_id", (json_int_t)bos,
                              "eos_token_id", (json_int_t)eos);
        st = write_json(tmp, "generation_config.json", g);
        json_decref(g);
    }
    titan_free(buf);
    titan_free(perm);
    titan_free(out);
    free(xs);
    free(ps);
    return st;
}

titan_status titan_hf_export(const char *ckpt_path, const char *outdir, const titan_hf_export_opts *o) {
    if (!titan_dtype_is_float(o->dtype))
        return titan_error(TITAN_ERR_USAGE, "--dtype: must be f32, bf16 or f16");
    if (titan_fs_exists(outdir) && !o->force && !(titan_fs_is_dir(outdir) && dir_is_empty(outdir))) {
        titan_error(TITAN_ERR_USAGE, "%s: exists and is not empty", outdir);
        titan_error_hint("choose a new directory, or pass --force to replace it");
        return TITAN_ERR_USAGE;
    }
    titan_ckpt *ck = NULL;
    TITAN_TRY(titan_ckpt_open(&ck, ckpt_path));
    titan_llama_config mc;
    titan_tokenizer *tok = NULL;
    titan_status st = titan_ckpt_model_config(ck, &mc);
    if (st == TITAN_OK) st = titan_ckpt_tokenizer_if_any(ck, o->tokenizer, &tok);
    char tmp[PATH_MAX];
    if (st == TITAN_OK && snprintf(tmp, sizeof tmp, "%s.tmp", outdir) >= (int)sizeof tmp)
        st = titan_error(TITAN_ERR_USAGE, "%s: path too long", outdir);
    if (st == TITAN_OK) st = titan_fs_remove_tree(tmp);
    if (st == TITAN_OK) st = titan_fs_mkdir_p(tmp);
    if (st == TITAN_OK) st = export_into(ck, &mc, tmp, o, tok);
    if (st == TITAN_OK) st = titan_fs_fsync_path(tmp);
    if (st == TITAN_OK) st = titan_fs_replace_dir(tmp, outdir);
    if (st != TITAN_OK) titan_fs_remove_tree(tmp);
    if (st == TITAN_OK)
        titan_info("%s: step %" PRId64 " as %s (Hugging Face Llama), tokenizer %s", outdir, titan_ckpt_step(ck),
                   titan_dtype_name(o->dtype), tok ? titan_tokenizer_id(tok) : "none");
    titan_tokenizer_free(tok);
    titan_ckpt_close(ck);
    return st;
}

/* ---- import ---- */

typedef struct {
    titan_st_file **files;
    char **names;
    int n;
    json_t *wmap; /* NULL: one file */
} hf_set;

static void hf_set_free(hf_set *s) {
    for (int i = 0; i < s->n; i++) {
        titan_st_close(s->files[i]);
        free(s->names[i]);
    }
    free(s->files);
    free(s->names);
    if (s->wmap) json_decref(s->wmap);
}

static titan_status hf_set_add(hf_set *s, const char *dir, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) return TITAN_OK;
    if (!*name || strchr(name, '/') || !strcmp(name, "..") || !strcmp(name, "."))
        return titan_error(TITAN_ERR_FORMAT, "%s/model.safetensors.index.json: weight_map: \"%s\" is not "
                           "a file name in the directory", dir, name);
    titan_st_file **nf = realloc(s->files, (size_t)(s->n + 1) * sizeof *nf);
    if (nf) s->files = nf;
    char **nn = realloc(s->names, (size_t)(s->n + 1) * sizeof *nn);
    if (nn) s->names = nn;
    if (!nf || !nn) return titan_error(TITAN_ERR_NOMEM, "import: out of memory");
    char path[PATH_MAX];
    TITAN_TRY(titan_fs_join(path, sizeof path, dir, name));
    titan_st_file *f;
    TITAN_TRY(titan_st_open(&f, path));
    s->files[s->n] = f;
    s->names[s->n] = strdup(name);
    s->n++;
    return TITAN_OK;
}

static titan_status hf_set_open(hf_set *s, const char *dir) {
    memset(s, 0, sizeof *s);
    char path[PATH_MAX];
    TITAN_TRY(titan_fs_join(path, sizeof path, dir, "model.safetensors.index.json"));
    if (!titan_fs_exists(path)) return hf_set_add(s, dir, "model.safetensors");
    char *txt;
    size_t len;
    TITAN_TRY(titan_fs_read_regular(path, &txt, &len, (size_t)64 << 20));
    json_error_t je;
    json_t *idx = json_loadb(txt, len, JSON_REJECT_DUPLICATES, &je);
    free(txt);
    if (!idx) return titan_error(TITAN_ERR_FORMAT, "%s: line %d: %s", path, je.line, je.text);
    json_t *wm = json_object_get(idx, "weight_map");
    if (!json_is_object(wm)) {
        json_decref(idx);
        return titan_error(TITAN_ERR_FORMAT, "%s: no \"weight_map\" object", path);
    }
    s->wmap = json_incref(wm);
    json_decref(idx);
    const char *k;
    json_t *v;
    json_object_foreach(s->wmap, k, v) {
        if (!json_is_string(v)) return titan_error(TITAN_ERR_FORMAT, "%s: weight_map: %s: not a string", path, k);
        TITAN_TRY(hf_set_add(s, dir, json_string_value(v)));
    }
    return TITAN_OK;
}

/* The file and entry of HF tensor `name`, or NULL. */
static const titan_st_tensor *hf_set_find(const hf_set *s, const char *name, titan_st_file **file) {
    int lo = 0, hi = s->n;
    if (s->wmap) {
        json_t *v = json_object_get(s->wmap, name);
        if (!v) return NULL;
        for (lo = 0; lo < s->n && strcmp(s->names[lo], json_string_value(v)); lo++) {}
        hi = lo + 1;
    }
    for (int i = lo; i < hi && i < s->n; i++) {
        const titan_st_tensor *t = titan_st_find(s->files[i], name);
        if (t) { *file = s->files[i]; return t; }
    }
    return NULL;
}

static titan_status cfg_int(json_t *c, const char *path, const char *key, int dflt, int *out) {
    json_t *v = json_object_get(c, key);
    if (!v || (json_is_null(v) && dflt >= 0)) {
        if (dflt < 0) return titan_error(TITAN_ERR_FORMAT, "%s: \"%s\": missing", path, key);
        *out = dflt;
        return TITAN_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
        return titan_error(TITAN_ERR_FORMAT, "%s: \"%s\": not a non-negative integer", path, key);
    *out = (int)json_integer_value(v);
    return TITAN_OK;
}

static titan_status cfg_num(json_t *c, const char *path, const char *key, double dflt, float *out) {
    json_t *v = json_object_get(c, key);
    if (!v) { *out = (float)dflt; return TITAN_OK; }
    if (!json_is_number(v)) return titan_error(TITAN_ERR_FORMAT, "%s: \"%s\": not a number", path, key);
    *out = (float)json_number_value(v);
    return TITAN_OK;
}

/* multiple_of and ffn_dim_multiplier that give intermediate_size: a published
 * flavor with these dimensions first, else the smallest power-of-two multiple. */
static int find_ffn(titan_llama_config *mc, int inter) {
    static const char *const fl[] = {"debugmodel", "1B", "3B", "8B", "70B", "405B"};
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
        titan_llama_config f;
        if (titan_llama_flavor(fl[i], &f) != TITAN_OK) continue;
        if (f.dim != mc->dim || f.n_layers != mc->n_layers || f.n_heads != mc->n_heads) continue;
        titan_llama_config t = *mc;
        t.multiple_of = f.multiple_of;
        t.ffn_dim_multiplier = f.ffn_dim_multiplier;
        if (titan_llama_hidden_dim(&t) == inter) { *mc = t; return 0; }
    }
    static const float mults[] = {0.0f, 1.3f, 1.5f, 1.2f, 1.4f, 2.0f};
    for (size_t m = 0; m < sizeof mults / sizeof mults[0]; m++)
        for (int mo = 1; mo <= 4096; mo *= 2) {
            mc->ffn_dim_multiplier = mults[m];
            mc->multiple_of = mo;
            if (titan_llama_hidden_dim(mc) == inter) return 0;
        }
    /* Exact: multiple_of = intermediate_size, with a multiplier below 1 when
     * the size is under Meta's 8/3 * dim. */
    mc->multiple_of = inter;
    mc->ffn_dim_multiplier = 0.0f;
    int h0 = titan_llama_hidden_dim(&(titan_llama_config){.dim = mc->dim, .multiple_of = 1});
    if (inter < h0) mc->ffn_dim_multiplier = (float)(floor((double)inter / h0 * 1e6) / 1e6);
    return titan_llama_hidden_dim(mc) == inter ? 0 : -1;
}

static titan_status read_hf_config(const char *dir, const titan_hf_import_opts *o, titan_llama_config *mc) {
    char path[PATH_MAX];
    TITAN_TRY(titan_fs_join(path, sizeof path, dir, "config.json"));
    char *txt;
    size_t len;
    TITAN_TRY(titan_fs_read_regular(path, &txt, &len, (size_t)16 << 20));
    titan_status st = titan_hf_parse_config(txt, len, path, o, mc);
    free(txt);
    return st;
}

titan_status titan_hf_parse_config(const char *txt, size_t len, const char *path, const titan_hf_import_opts *o,
                                   titan_llama_config *mc) {
    json_error_t je;
    json_t *c = json_loadb(txt, len, JSON_REJECT_DUPLICATES, &je); /* a key twice: which would transformers take? */
    if (!c || !json_is_object(c)) {
        if (c) json_decref(c);
        return c ? titan_error(TITAN_ERR_FORMAT, "%s: not a JSON object", path)
                 : titan_error(TITAN_ERR_FORMAT, "%s: line %d: %s", path, je.line, je.text);
    }
    memset(mc, 0, sizeof *mc);
    titan_status st = TITAN_OK;
    json_t *mt = json_object_get(c, "model_type"), *act = json_object_get(c, "hidden_act");
    if (!json_is_string(mt) || strcmp(json_string_value(mt), "llama"))
        st = titan_error(TITAN_ERR_FORMAT, "%s: model_type is not \"llama\"", path);
    if (st == TITAN_OK && act && (!json_is_string(act) || strcmp(json_string_value(act), "silu")))
        st = titan_error(TITAN_ERR_FORMAT, "%s: hidden_act is not \"silu\"", path);
    if (st == TITAN_OK && (json_is_true(json_object_get(c, "attention_bias")) || json_is_true(json_object_get(c, "mlp_bias"))))
        st = titan_error(TITAN_ERR_FORMAT, "%s: biases (attention_bias, mlp_bias) are not supported", path);
    int inter = 0, maxpos = 0, hd = 0;
    if (st == TITAN_OK) st = cfg_int(c, path, "hidden_size", -1, &mc->dim);
    if (st == TITAN_OK) st = cfg_int(c, path, "num_hidden_layers", -1, &mc->n_layers);
    if (st == TITAN_OK && mc->n_layers > TITAN_LLAMA_MAX_LAYERS)
        st = titan_error(TITAN_ERR_FORMAT, "%s: \"num_hidden_layers\": %d layers, more than the %d titan takes", path,
                         mc->n_layers, TITAN_LLAMA_MAX_LAYERS);
    if (st == TITAN_OK) st = cfg_int(c, path, "num_attention_heads", -1, &mc->n_heads);
    if (st == TITAN_OK) st = cfg_int(c, path, "num_key_value_heads", mc->n_heads, &mc->n_kv_heads);
    if (st == TITAN_OK) st = cfg_int(c, path, "vocab_size", -1, &mc->vocab_size);
    if (st == TITAN_OK) st = cfg_int(c, path, "intermediate_size", -1, &inter);
    if (st == TITAN_OK) st = cfg_int(c, path, "max_position_embeddings", 8192, &maxpos);
    if (st == TITAN_OK && mc->n_heads > 0) st = cfg_int(c, path, "head_dim", mc->dim / mc->n_heads, &hd);
    if (st == TITAN_OK && mc->n_heads > 0 && (int64_t)hd * mc->n_heads != mc->dim) /* head_dim from the file */
        st = titan_error(TITAN_ERR_FORMAT, "%s: head_dim %d times %d heads is not hidden_size %d", path, hd,
                         mc->n_heads, mc->dim);
    if (st == TITAN_OK) st = cfg_num(c, path, "rms_norm_eps", 1e-6, &mc->norm_eps);
    /* transformers 5 writes rope_parameters {rope_type, rope_theta, factor, ...} in place of
     * rope_theta and rope_scaling; the older keys win where both are there. */
    json_t *rp = json_object_get(c, "rope_parameters");
    if (st == TITAN_OK && rp && !json_is_null(rp) && !json_is_object(rp))
        st = titan_error(TITAN_ERR_FORMAT, "%s: rope_parameters: not an object", path);
    if (!json_is_object(rp)) rp = NULL;
    if (st == TITAN_OK)
        st = cfg_num(rp && !json_object_get(c, "rope_theta") ? rp : c, path, "rope_theta", 10000.0, &mc->rope_theta);
    json_t *tie = json_object_get(c, "tie_word_embeddings");
    if (st == TITAN_OK && tie && !json_is_boolean(tie) && !json_is_null(tie))
        st = titan_error(TITAN_ERR_FORMAT, "%s: \"tie_word_embeddings\": not true or false", path);
    mc->tie_embeddings = json_is_true(tie);
    json_t *rs = json_object_get(c, "rope_scaling");
    if ((!rs || json_is_null(rs)) && rp) {
        json_t *ty = json_object_get(rp, "rope_type");
        if (!ty) ty = json_object_get(rp, "type");
        if (ty && !(json_is_string(ty) && !strcmp(json_string_value(ty), "default"))) rs = rp;
    }
    mc->rope_low_freq_factor = 1.0f;
    mc->rope_high_freq_factor = 4.0f;
    mc->rope_original_context = maxpos;
    if (st == TITAN_OK && rs && !json_is_null(rs)) {
        json_t *ty = json_object_get(rs, "rope_type");
        if (!ty) ty = json_object_get(rs, "type");
        if (!json_is_object(rs) || !json_is_string(ty) || strcmp(json_string_value(ty), "llama3"))
            st = titan_error(TITAN_ERR_FORMAT, "%s: %s: only rope_type \"llama3\" is supported", path,
                             rs == rp ? "rope_parameters" : "rope_scaling");
        if (st == TITAN_OK) st = cfg_num(rs, path, "factor", 8.0, &mc->rope_scaling_factor);
        if (st == TITAN_OK) st = cfg_num(rs, path, "low_freq_factor", 1.0, &mc->rope_low_freq_factor);
        if (st == TITAN_OK) st = cfg_num(rs, path, "high_freq_factor", 4.0, &mc->rope_high_freq_factor);
        /* without it transformers takes max_position_embeddings */
        if (st == TITAN_OK) st = cfg_int(rs, path, "original_max_position_embeddings", maxpos, &mc->rope_original_context);
    }
    json_decref(c);
    TITAN_TRY(st);
    if (o->multiple_of > 0) {
        mc->multiple_of = o->multiple_of;
        mc->ffn_dim_multiplier = o->ffn_dim_multiplier > 0 ? o->ffn_dim_multiplier : 0.0f;
        if (titan_llama_hidden_dim(mc) != inter)
            return titan_error(TITAN_ERR_USAGE, "--multiple-of %d with ffn_dim_multiplier %g gives FFN size %d, "
                               "but %s has intermediate_size %d", o->multiple_of, (double)mc->ffn_dim_multiplier,
                               titan_llama_hidden_dim(mc), path, inter);
    } else if (mc->dim <= 0 || find_ffn(mc, inter)) {
        return titan_error(TITAN_ERR_FORMAT, "%s: intermediate_size %d: no multiple_of fits it", path, inter);
    }
    if (titan_llama_config_check(mc) != TITAN_OK) {
        titan_error_context("%s", path);
        return TITAN_ERR_FORMAT;
    }
    return TITAN_OK;
}

/* Each parameter of mc in catalog order, read from s as f32 with q and k
 * back in Meta's row order, handed to take(ctx, param, data). */
typedef titan_status (*param_sink)(void *ctx, const titan_param *p, const float *data);

static titan_status each_param(hf_set *s, const titan_llama_config *mc, const char *dir, param_sink take,
                               void *ctx) {
    int np;
    titan_param *ps = titan_llama_params_new(mc, &np);
    if (!ps) return TITAN_ERR_NOMEM;
    size_t maxn = 0;
    for (int i = 0; i < np; i++) if (ps[i].numel > maxn) maxn = ps[i].numel;
    float *buf = titan_alloc(maxn * sizeof(float), "import buffer");
    float *perm = titan_alloc(maxn * sizeof(float), "import buffer");
    titan_status st = buf && perm ? TITAN_OK : TITAN_ERR_NOMEM;
    int used = 0;
    for (int i = 0; i < np && st == TITAN_OK; i++) {
        char hf[128];
        TITAN_ASSERT(titan_hf_name(ps[i].name, hf, sizeof hf) == 0);
        titan_st_file *f = NULL;
        const titan_st_tensor *t = hf_set_find(s, hf, &f);
        if (!t) {
            st = titan_error(TITAN_ERR_FORMAT, "%s: tensor %s: missing", dir, hf);
            break;
        }
        used++;
        if (t->ndim != ps[i].ndim || t->shape[0] != ps[i].shape[0] || (t->ndim == 2 && t->shape[1] != ps[i].shape[1])) {
            st = titan_error(TITAN_ERR_FORMAT, "%s: tensor %s: shape does not match config.json "
                             "(want %lld x %lld)", dir, hf, (long long)ps[i].shape[0],
                             (long long)(ps[i].ndim == 2 ? ps[i].shape[1] : 1));
            break;
        }
        st = titan_st_read(f, t, TITAN_DTYPE_F32, buf);
        if (st != TITAN_OK) break;
        const float *src = buf;
        int nh = permute_heads(&ps[i], mc);
        if (nh) {
            titan_hf_permute_rows(perm, buf, nh, mc->dim / mc->n_heads, ps[i].shape[1], 0);
            src = perm;
        }
        st = take(ctx, &ps[i], src);
    }
    int total = 0;
    for (int k = 0; k < s->n; k++) total += titan_st_num_tensors(s->files[k]);
    titan_st_file *dummy;
    if (st == TITAN_OK && mc->tie_embeddings && hf_set_find(s, "lm_head.weight", &dummy)) used++;
    if (st == TITAN_OK && total > used)
        titan_warn("%s: %d tensors not used (not part of a Llama model)", dir, total - used);
    titan_free(buf);
    titan_free(perm);
    free(ps);
    return st;
}

/* The model hfdir holds (config.json, and tied when it has no lm_head.weight)
 * and its open tensor files. */
static titan_status open_hf(const char *hfdir, const titan_hf_import_opts *o, titan_llama_config *mc, hf_set *s) {
    TITAN_TRY(read_hf_config(hfdir, o, mc));
    titan_status st = hf_set_open(s, hfdir);
    if (st != TITAN_OK) {
        hf_set_free(s);
        return st;
    }
    titan_st_file *dummy;
    if (!hf_set_find(s, "lm_head.weight", &dummy)) {
        if (!mc->tie_embeddings) titan_info("%s: no lm_head.weight: output tied to the embeddings", hfdir);
        mc->tie_embeddings = 1;
    }
    /* A layer count the files cannot hold is refused before its catalog is built. */
    int64_t need = 9 * (int64_t)mc->n_layers + 2 + !mc->tie_embeddings, have = 0;
    for (int k = 0; k < s->n; k++) have += titan_st_num_tensors(s->files[k]);
    if (have < need) {
        hf_set_free(s);
        return titan_error(TITAN_ERR_FORMAT, "%s/config.json: \"num_hidden_layers\": %d layers need %" PRId64
                           " tensors, but the safetensors files hold %" PRId64, hfdir, mc->n_layers, need, have);
    }
    return TITAN_OK;
}

static titan_status add_to_ckpt(void *w, const titan_param *p, const float *data) {
    return titan_ckpt_add(w, p->name, TITAN_DTYPE_F32, p->ndim, p->shape, NULL, data);
}

static titan_status copy_to_params(void *params, const titan_param *p, const float *data) {
    memcpy((float *)params + p->offset, data, p->numel * sizeof(float));
    return TITAN_OK;
}

titan_status titan_hf_import(const char *hfdir, const char *outroot, const titan_hf_import_opts *o,
                             char *step_dir, size_t cap) {
    titan_llama_config mc;
    hf_set s;
    TITAN_TRY(open_hf(hfdir, o, &mc, &s));
    titan_status st = TITAN_OK;
    int count = 0;
    if (titan_fs_is_dir(outroot)) st = titan_ckpt_list_steps(outroot, NULL, 0, &count);
    if (st == TITAN_OK && count > 0 && !o->force) {
        titan_error(TITAN_ERR_USAGE, "%s: already holds %d checkpoint%s", outroot, count, count == 1 ? "" : "s");
        titan_error_hint("choose a new directory, or pass --force to add step 0 beside them");
        st = TITAN_ERR_USAGE;
    }
    titan_ckpt_writer *w = NULL;
    if (st == TITAN_OK) st = titan_ckpt_begin(&w, outroot, 0);
    if (st == TITAN_OK) {
#define PUT_I(f) if (st == TITAN_OK) st = titan_ckpt_meta_i64(w, "model." #f, mc.f);
#define PUT_F(f) if (st == TITAN_OK) st = titan_ckpt_meta_f64(w, "model." #f, mc.f);
        TITAN_LLAMA_INT_FIELDS(PUT_I)
        TITAN_LLAMA_FLT_FIELDS(PUT_F)
        if (st == TITAN_OK) st = titan_ckpt_meta_str(w, "model.name", "llama3");
        if (st == TITAN_OK) st = titan_ckpt_put_tokenizer_spec(w, o->tokenizer, "hf-import");
        if (st == TITAN_OK) st = titan_ckpt_meta_i64(w, "train.step", 0);
        if (st == TITAN_OK) st = titan_ckpt_meta_i64(w, "train.tokens_seen", 0);
        if (st == TITAN_OK) st = titan_ckpt_meta_i64(w, "loader.position", 0);
        if (st == TITAN_OK) st = titan_ckpt_meta_str(w, "layout", "single");
        if (st == TITAN_OK) st = titan_ckpt_meta_str(w, "source", "hf");
        if (st == TITAN_OK) st = each_param(&s, &mc, hfdir, add_to_ckpt, w);
        if (st == TITAN_OK) st = titan_ckpt_commit(w, 0);
        else titan_ckpt_abort(w);
    }
    hf_set_free(&s);
    if (st == TITAN_OK && step_dir) {
        char name[64];
        titan_ckpt_step_name(name, sizeof name, 0);
        snprintf(step_dir, cap, "%s/%s", outroot, name);
    }
    return st;
}

/* TITAN_ERR_USAGE naming the first way the model in hfdir differs from want. */
static titan_status same_model(const char *hfdir, const titan_llama_config *got, const titan_llama_config *want) {
    const struct { const char *hf, *titan; double got, want; } f[] = {
        {"hidden_size", "dim", got->dim, want->dim},
        {"num_hidden_layers", "n_layers", got->n_layers, want->n_layers},
        {"num_attention_heads", "n_heads", got->n_heads, want->n_heads},
        {"num_key_value_heads", "n_kv_heads", got->n_kv_heads, want->n_kv_heads},
        {"intermediate_size", "FFN hidden size", titan_llama_hidden_dim(got), titan_llama_hidden_dim(want)},
        {"vocab_size", "vocabulary size (model.tokenizer's)", got->vocab_size, want->vocab_size},
        {"tie_word_embeddings (or no lm_head.weight)", "tie_embeddings", got->tie_embeddings, want->tie_embeddings},
        {"rms_norm_eps", "norm_eps", got->norm_eps, want->norm_eps},
        {"rope_theta", "rope_theta", got->rope_theta, want->rope_theta},
        {"rope_scaling.factor (0: none)", "rope_scaling_factor", got->rope_scaling_factor, want->rope_scaling_factor},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if ((float)f[i].got == (float)f[i].want) continue;
        titan_error(TITAN_ERR_USAGE, "%s/config.json: %s is %g, but the job's model has %s %g", hfdir, f[i].hf,
                    f[i].got, f[i].titan, f[i].want);
        if (!strncmp(f[i].hf, "vocab", 5))
            titan_error_hint("model.tokenizer must be the tokenizer these weights were trained with");
        else
            titan_error_hint("set model.flavor and the [model] keys to the model these weights belong to");
        return TITAN_ERR_USAGE;
    }
    /* The scaling's shape matters only when there is scaling; titan's flavors use Llama 3.1's. */
    if (want->rope_scaling_factor > 0 &&
        (got->rope_low_freq_factor != want->rope_low_freq_factor ||
         got->rope_high_freq_factor != want->rope_high_freq_factor ||
         got->rope_original_context != want->rope_original_context))
        return titan_error(TITAN_ERR_USAGE, "%s/config.json: rope_scaling (low_freq_factor %g, high_freq_factor %g, "
                           "original_max_position_embeddings %d) is not titan's Llama 3.1 scaling (%g, %g, %d)",
                           hfdir, (double)got->rope_low_freq_factor, (double)got->rope_high_freq_factor,
                           got->rope_original_context, (double)want->rope_low_freq_factor,
                           (double)want->rope_high_freq_factor, want->rope_original_context);
    return TITAN_OK;
}

titan_status titan_hf_load_params(const char *hfdir, const titan_llama_config *want, float *params) {
    titan_llama_config mc;
    hf_set s;
    titan_hf_import_opts o = {NULL, 0, -1.0f, 0};
    TITAN_TRY(open_hf(hfdir, &o, &mc, &s));
    titan_status st = same_model(hfdir, &mc, want);
    /* want's multiple_of and multiplier: the catalog is the same, and the model is the job's */
    if (st == TITAN_OK) st = each_param(&s, want, hfdir, copy_to_params, params);
    hf_set_free(&s);
    return st;
}
