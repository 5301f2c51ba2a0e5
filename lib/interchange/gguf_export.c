/* gguf_export.c - a titan checkpoint as a llama.cpp "llama" GGUF model. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "interchange/ckpt_tokenizer.h"
#include "interchange/gguf.h"
#include "interchange/hf_convert.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/mem.h"

static const char *const layer_map[][2] = {
    {"attention.wq", "attn_q"},       {"attention.wk", "attn_k"},       {"attention.wv", "attn_v"},
    {"attention.wo", "attn_output"},  {"feed_forward.w1", "ffn_gate"},  {"feed_forward.w2", "ffn_down"},
    {"feed_forward.w3", "ffn_up"},    {"attention_norm", "attn_norm"},  {"ffn_norm", "ffn_norm"},
};

/* llama.cpp's name of a titan parameter ("layers.0.attention.wq.weight" ->
 * "blk.0.attn_q.weight"); -1 when it has none. */
static int gguf_name(const char *tn, char *out, size_t cap) {
    int n = -1;
    if (!strcmp(tn, "tok_embeddings.weight")) n = snprintf(out, cap, "token_embd.weight");
    else if (!strcmp(tn, "norm.weight")) n = snprintf(out, cap, "output_norm.weight");
    else if (!strcmp(tn, "output.weight")) n = snprintf(out, cap, "output.weight");
    else {
        int layer, used = 0;
        if (sscanf(tn, "layers.%d.%n", &layer, &used) != 1 || used == 0) return -1;
        for (size_t k = 0; k < sizeof layer_map / sizeof layer_map[0]; k++) {
            size_t l = strlen(layer_map[k][0]);
            if (!strncmp(tn + used, layer_map[k][0], l) && !strcmp(tn + used + l, ".weight"))
                n = snprintf(out, cap, "blk.%d.%s.weight", layer, layer_map[k][1]);
        }
    }
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* Llama 3.1 scaling as llama.cpp applies it: angle = pos * base_freq / factor.
 * The scaled frequencies are titan's (backend/cpu/rope.c); the factors are
 * their ratio to the unscaled ones. */
static void rope_factors(const titan_llama_config *c, float *out) {
    int hd = c->dim / c->n_heads;
    for (int i = 0; i < hd / 2; i++) {
        float f0 = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)hd), f = f0;
        float low_wl = (float)c->rope_original_context / c->rope_low_freq_factor;
        float high_wl = (float)c->rope_original_context / c->rope_high_freq_factor;
        float wl = 2.0f * (float)M_PI / f0;
        if (wl > low_wl) {
            f = f0 / c->rope_scaling_factor;
        } else if (wl >= high_wl) {
            float smooth = ((float)c->rope_original_context / wl - c->rope_low_freq_factor) /
                           (c->rope_high_freq_factor - c->rope_low_freq_factor);
            f = (1.0f - smooth) * f0 / c->rope_scaling_factor + smooth * f0;
        }
        out[i] = f0 / f;
    }
}

static titan_status put_model_keys(titan_gguf_writer *w, titan_ckpt *ck, const titan_llama_config *mc,
                                   const titan_gguf_export_opts *o, const char *tok_id) {
    int64_t ctx = o->context_length;
    if (ctx <= 0)
        ctx = mc->rope_scaling_factor > 0 ? (int64_t)(mc->rope_original_context * (double)mc->rope_scaling_factor)
                                          : mc->rope_original_context;
    if (ctx > UINT32_MAX) ctx = UINT32_MAX;
    const char *name = NULL;
    if (titan_ckpt_meta_get_str(ck, "model.name", &name) != TITAN_OK) name = "llama3";
    titan_error_clear();
    uint32_t file_type = o->dtype == TITAN_DTYPE_F32 ? 0 : o->dtype == TITAN_DTYPE_F16 ? 1 : 32; /* llama_ftype */
    TITAN_TRY(titan_gguf_kv_str(w, "general.architecture", "llama"));
    TITAN_TRY(titan_gguf_kv_str(w, "general.name", name));
    TITAN_TRY(titan_gguf_kv_u32(w, "general.file_type", file_type));
    TITAN_TRY(titan_gguf_kv_u32(w, "general.alignment", TITAN_GGUF_ALIGNMENT));
    TITAN_TRY(titan_gguf_kv_u32(w, "llama.context_length", (uint32_t)ctx));
    TITAN_TRY(titan_gguf_kv_u32(w, "llama.embedding_length", (uint32_t)mc->dim));
    TITAN_TRY(titan_gguf_kv_u32(w, "llama.block_count", (uint32_t)mc->n_layers));
    TITAN_TRY(titan_gguf_kv_u32(w, "llama.feed_forward_length", (uint32_t)titan_llama_hidden_dim(mc)));
    TITAN_TRY(titan_gguf_kv_u32(w, "llama.attention.head_count", (uint32_t)mc->n_heads));
    TITAN_TRY(titan_gguf_kv_u32(w, "llama.attention.head_count_kv", (uint32_t)mc->n_kv_heads));
    TITAN_TRY(titan_gguf_kv_f32(w, "llama.rope.freq_base", mc->rope_theta));
    TITAN_TRY(titan_gguf_kv_u32(w, "llama.rope.dimension_count", (uint32_t)(mc->dim / mc->n_heads)));
    TITAN_TRY(titan_gguf_kv_f32(w, "llama.attention.layer_norm_rms_epsilon", mc->norm_eps));
    TITAN_TRY(titan_gguf_kv_u32(w, "llama.vocab_size", (uint32_t)mc->vocab_size));
    TITAN_TRY(titan_gguf_kv_i64(w, "titan.step", titan_ckpt_step(ck)));
    return titan_gguf_kv_str(w, "titan.tokenizer", tok_id);
}

static titan_status write_model(titan_ckpt *ck, const titan_llama_config *mc, const titan_gguf_export_opts *o,
                                const char *out_path) {
    titan_tokenizer *tok = NULL;
    TITAN_TRY(titan_ckpt_open_tokenizer(ck, o->tokenizer, &tok)); /* --tokenizer, else the one it carries */
    int np = titan_llama_params(mc, NULL);
    titan_param *ps = malloc((size_t)np * sizeof *ps);
    int hd = mc->dim / mc->n_heads;
    float *factors = malloc((size_t)hd / 2 * sizeof *factors);
    titan_gguf_writer *w = NULL;
    titan_status st = ps && factors ? titan_gguf_writer_new(&w) : titan_error(TITAN_ERR_NOMEM, "export: out of memory");
    if (st == TITAN_OK) {
        titan_llama_params(mc, ps);
        st = put_model_keys(w, ck, mc, o, titan_tokenizer_id(tok));
    }
    if (st == TITAN_OK) st = titan_gguf_put_vocab(w, tok, mc->vocab_size);
    size_t maxb = 0;
    char name[TITAN_GGUF_NAME_MAX + 1];
    int scaled = mc->rope_scaling_factor > 0;
    if (st == TITAN_OK && scaled) st = titan_gguf_add_tensor(w, "rope_freqs.weight", TITAN_DTYPE_F32, 1,
                                                             (int64_t[]){hd / 2});
    for (int i = 0; i < np && st == TITAN_OK; i++) {
        TITAN_ASSERT(gguf_name(ps[i].name, name, sizeof name) == 0);
        titan_dtype dt = ps[i].ndim == 1 ? TITAN_DTYPE_F32 : o->dtype;
        st = titan_gguf_add_tensor(w, name, dt, ps[i].ndim, ps[i].shape);
        if (ps[i].numel * titan_dtype_size(dt) > maxb) maxb = ps[i].numel * titan_dtype_size(dt);
    }
    void *buf = st == TITAN_OK ? titan_alloc(maxb, "export buffer") : NULL;
    if (st == TITAN_OK && !buf) st = TITAN_ERR_NOMEM;
    if (st == TITAN_OK) st = titan_gguf_begin(w, out_path);
    if (st == TITAN_OK && scaled) {
        rope_factors(mc, factors);
        st = titan_gguf_write(w, factors);
    }
    for (int i = 0; i < np && st == TITAN_OK; i++) {
        const titan_param *p = &ps[i];
        /* The reader converts (through f32, rounding to nearest even). */
        st = titan_ckpt_read(ck, p->name, p->ndim == 1 ? TITAN_DTYPE_F32 : o->dtype, NULL, buf);
        if (st == TITAN_OK) st = titan_gguf_write(w, buf);
    }
    if (st == TITAN_OK) st = titan_gguf_finish(w);
    if (st == TITAN_OK)
        titan_info("%s: step %" PRId64 " as GGUF llama, %d tensors (%s), %" PRIu64 " bytes of data, tokenizer %s",
                   out_path, titan_ckpt_step(ck), np + scaled, titan_dtype_name(o->dtype), titan_gguf_data_bytes(w),
                   titan_tokenizer_id(tok));
    titan_gguf_writer_free(w);
    titan_free(buf);
    free(factors);
    free(ps);
    titan_tokenizer_free(tok);
    return st;
}

titan_status titan_gguf_export(const char *ckpt_path, const char *out_path, const titan_gguf_export_opts *o) {
    if (!titan_dtype_is_float(o->dtype))
        return titan_error(TITAN_ERR_USAGE, "--dtype: must be f32, bf16 or f16");
    if (titan_fs_is_dir(out_path))
        return titan_error(TITAN_ERR_USAGE, "%s: is a directory; give the name of the .gguf file to write", out_path);
    if (titan_fs_exists(out_path) && !o->force) {
        titan_error(TITAN_ERR_USAGE, "%s: exists", out_path);
        titan_error_hint("choose a new file name, or pass --force to replace it");
        return TITAN_ERR_USAGE;
    }
    titan_ckpt *ck = NULL;
    TITAN_TRY(titan_ckpt_open(&ck, ckpt_path));
    titan_llama_config mc;
    titan_status st = titan_ckpt_model_config(ck, &mc);
    if (st == TITAN_OK) st = write_model(ck, &mc, o, out_path);
    titan_ckpt_close(ck);
    return st;
}
