/* sample.c - text generation from a trained model. */
#include "train/sample.h"

#include <math.h>
#include <string.h>

#include "core/mem.h"
#include "core/rng.h"

#define SAMPLE_CTX 256

static uint32_t pick(const float *logits, int V, double temperature, uint64_t seed, uint64_t i) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    if (temperature <= 0.0) return (uint32_t)best;
    double sum = 0.0;
    for (int v = 0; v < V; v++) sum += exp((logits[v] - logits[best]) / temperature);
    double r = titan_rng_uniform(seed, 0x5a3b1e, i) * sum, acc = 0.0;
    for (int v = 0; v < V; v++) {
        acc += exp((logits[v] - logits[best]) / temperature);
        if (acc >= r) return (uint32_t)v;
    }
    return (uint32_t)best;
}

static void emit(const titan_tokenizer *tok, const uint32_t *ids, size_t n, FILE *out) {
    char buf[4096];
    size_t len = titan_tokenizer_decode(tok, ids, n, buf, sizeof buf);
    fwrite(buf, 1, len, out);
    fflush(out);
}

titan_status titan_sample(titan_llama *model, const titan_tokenizer *tok, const char *prompt, int n,
                          double temperature, uint64_t seed, FILE *out) {
    const titan_llama_config *mc = titan_llama_get_config(model);
    titan_llama *m = NULL;
    titan_status st = TITAN_OK;
    /* Sampling runs on a whole CPU copy, made by tp rank 0 only; the trained
     * model may live on a device, or be split over a tp group whose ranks
     * all gather (also when rank 0 could not make its copy). */
    int keep = titan_llama_get_tp(model).rank == 0;
    if (keep) st = titan_llama_create(&m, mc, titan_backend_cpu(), 1, SAMPLE_CTX, TITAN_AC_NONE, TITAN_DTYPE_F32);
    titan_status gst = titan_llama_gather_whole(model, m ? titan_llama_params_data(m) : NULL);
    if (st == TITAN_OK) st = gst;
    if (st != TITAN_OK || !keep) {
        titan_llama_free(m);
        return st;
    }

    size_t plen = prompt ? strlen(prompt) : 0;
    size_t cap = plen + (size_t)n + 1;
    uint32_t *ids = titan_alloc(cap * sizeof(uint32_t), "sample tokens");
    uint32_t *window = titan_alloc(SAMPLE_CTX * sizeof(uint32_t), "sample window");
    float *row = titan_alloc((size_t)mc->vocab_size * sizeof(float), "sample logits");
    if (!ids || !window || !row) {
        st = TITAN_ERR_NOMEM;
        goto out;
    }
    size_t len = 0;
    ids[len++] = titan_tokenizer_bos(tok);
    len += titan_tokenizer_encode(tok, prompt ? prompt : "", plen, ids + len, cap - len);
    emit(tok, ids + 1, len - 1, out);
    for (int i = 0; i < n; i++) {
        /* Causal: positions after the last real token do not change its logits. */
        size_t start = len > SAMPLE_CTX ? len - SAMPLE_CTX : 0, w = len - start;
        memset(window, 0, SAMPLE_CTX * sizeof(uint32_t));
        memcpy(window, ids + start, w * sizeof(uint32_t));
        float unused;
        if ((st = titan_llama_forward(m, window, NULL, &unused)) != TITAN_OK) goto out;
        const float *logits = titan_llama_logits(m) + (w - 1) * (size_t)mc->vocab_size;
        titan_backend_cpu()->to_host(row, logits, (size_t)mc->vocab_size * sizeof(float));
        uint32_t next = pick(row, mc->vocab_size, temperature, seed, (uint64_t)i);
        if (next == titan_tokenizer_eos(tok)) break;
        ids[len++] = next;
        emit(tok, &next, 1, out);
    }
    fputc('\n', out);
out:
    titan_free(ids);
    titan_free(window);
    titan_free(row);
    titan_llama_free(m);
    return st;
}
