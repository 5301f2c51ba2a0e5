/* op_profile.c - the op profiler: a backend table whose ops time the inner
 * backend's (see op_profile.h). */
#define _GNU_SOURCE
#include "backend/op_profile.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/fsutil.h"

typedef struct {
    const char *name; /* the op's table name (static) */
    double t0, dur;   /* seconds: start on titan_now_s, duration */
    double flops;
    char shape[64];
} op_event;

struct titan_op_profile {
    const titan_backend *inner;
    titan_backend table;
    int on;
    double start; /* of the recording */
    double start_wall; /* the same moment on the wall clock (traces of other kinds line up on it) */
    op_event *ev;
    size_t n, cap;
    pthread_mutex_t lock;
};

/* the one profiler (the table's ops have no context pointer) */
static titan_op_profile *g_prof;

static double op_begin(void) {
    g_prof->inner->sync(); /* earlier work is not this op's */
    return titan_now_s();
}

static void op_end(const char *name, double t0, double flops, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void op_end(const char *name, double t0, double flops, const char *fmt, ...) {
    titan_op_profile *p = g_prof;
    p->inner->sync();
    double t1 = titan_now_s();
    pthread_mutex_lock(&p->lock);
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 1024;
        op_event *ev = realloc(p->ev, cap * sizeof *ev);
        if (!ev) { /* the profile loses this event, training goes on */
            pthread_mutex_unlock(&p->lock);
            return;
        }
        p->ev = ev, p->cap = cap;
    }
    op_event *e = &p->ev[p->n++];
    e->name = name, e->t0 = t0, e->dur = t1 - t0, e->flops = flops;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->shape, sizeof e->shape, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&p->lock);
}

/* Runs CALL; when recording, timed and kept as op NAME with FLOPS and a shape. */
#define TIMED(NAME, FLOPS, CALL, ...)                    \
    do {                                                 \
        if (!g_prof->on) {                               \
            CALL;                                        \
            return;                                      \
        }                                                \
        double t0_ = op_begin();                         \
        CALL;                                            \
        op_end(NAME, t0_, (FLOPS), __VA_ARGS__);         \
    } while (0)

#define IN (g_prof->inner)

static void p_zero(void *p, size_t nbytes) {
    TIMED("zero", 0, IN->zero(p, nbytes), "%zu bytes", nbytes);
}
static void p_to_device(void *dst, const void *src, size_t nbytes) {
    TIMED("to_device", 0, IN->to_device(dst, src, nbytes), "%zu bytes", nbytes);
}
static void p_to_host(void *dst, const void *src, size_t nbytes) {
    TIMED("to_host", 0, IN->to_host(dst, src, nbytes), "%zu bytes", nbytes);
}
static void p_convert(void *dst, titan_dtype dt_dst, const void *src, titan_dtype dt_src,
                      size_t n) {
    TIMED("convert", 0, IN->convert(dst, dt_dst, src, dt_src, n), "%s <- %s x %zu",
          titan_dtype_name(dt_dst), titan_dtype_name(dt_src), n);
}
static void p_matmul_forward(titan_dtype dt, void *out, const void *inp, const void *w, int N,
                             int IC, int OC) {
    TIMED("matmul_forward", 2.0 * N * IC * OC, IN->matmul_forward(dt, out, inp, w, N, IC, OC),
          "N=%d IC=%d OC=%d", N, IC, OC);
}
static void p_matmul_add_forward(titan_dtype dt, void *out, const void *inp, const void *w,
                                 const void *resid, int N, int IC, int OC) {
    TIMED("matmul_add_forward", 2.0 * N * IC * OC,
          IN->matmul_add_forward(dt, out, inp, w, resid, N, IC, OC), "N=%d IC=%d OC=%d%s", N, IC, OC,
          out == resid ? " in place" : "");
}
/* Shapes say which gradient outputs add ("+="): those read their old values. */
static const char *adds(int acc, int bit) { return acc & bit ? "+=" : ""; }

static void p_matmul_backward(titan_dtype dt, int acc, void *dinp, float *dw, const void *dout,
                              const void *inp, const void *w, int N, int IC, int OC) {
    double products = (dinp != NULL) + (dw != NULL);
    TIMED("matmul_backward", 2.0 * N * IC * OC * products,
          IN->matmul_backward(dt, acc, dinp, dw, dout, inp, w, N, IC, OC),
          "N=%d IC=%d OC=%d%s%s%s%s", N, IC, OC, dinp ? " dinp" : "",
          dinp ? adds(acc, TITAN_ACC_DX) : "", dw ? " dw" : "", dw ? adds(acc, TITAN_ACC_DW) : "");
}
static int p_fp8_matmul_forward(titan_dtype dt, const titan_fp8_recipe *r, void *out, const void *inp,
                                const void *w, const void *resid, int N, int IC, int OC) {
    if (!g_prof->on) return IN->fp8_matmul_forward(dt, r, out, inp, w, resid, N, IC, OC);
    double t0 = op_begin();
    int gemms = IN->fp8_matmul_forward(dt, r, out, inp, w, resid, N, IC, OC);
    op_end("fp8_matmul_forward", t0, 2.0 * N * IC * OC, "N=%d IC=%d OC=%d%s", N, IC, OC, resid ? " +resid" : "");
    return gemms;
}
static void p_fp8_quantize(titan_dtype dt, uint8_t *q, float *scale, const void *x, int rows, int cols,
                           titan_fp8_axis axis, titan_fp8_format f, int pow2, const float *amax) {
    TIMED("fp8_quantize", 0.0, IN->fp8_quantize(dt, q, scale, x, rows, cols, axis, f, pow2, amax), "%dx%d %s", rows,
          cols, titan_fp8_format_name(f));
}
static void p_fp8_dequantize(titan_dtype dt, void *out, const uint8_t *q, const float *scale, size_t n,
                             titan_fp8_format f) {
    TIMED("fp8_dequantize", 0.0, IN->fp8_dequantize(dt, out, q, scale, n, f), "n=%zu %s", n, titan_fp8_format_name(f));
}
static void p_fp8_amax(titan_dtype dt, float *amax, const void *x, int rows, int cols, titan_fp8_axis axis) {
    TIMED("fp8_amax", 0.0, IN->fp8_amax(dt, amax, x, rows, cols, axis), "%dx%d", rows, cols);
}
static int p_fp8_matmul_backward(titan_dtype dt, const titan_fp8_recipe *r, int acc, void *dinp, float *dw,
                                 const void *dout, const void *inp, const void *w, int N, int IC, int OC) {
    if (!g_prof->on) return IN->fp8_matmul_backward(dt, r, acc, dinp, dw, dout, inp, w, N, IC, OC);
    double t0 = op_begin();
    int gemms = IN->fp8_matmul_backward(dt, r, acc, dinp, dw, dout, inp, w, N, IC, OC);
    op_end("fp8_matmul_backward", t0, 2.0 * N * IC * OC * ((dinp != NULL) + (dw != NULL)),
           "N=%d IC=%d OC=%d%s%s, %d in float8", N, IC, OC, dinp ? " dinp" : "", dw ? " dw" : "", gemms);
    return gemms;
}
static void p_add(titan_dtype dt, void *out, const void *a, const void *b, size_t n) {
    TIMED("add", 0, IN->add(dt, out, a, b, n), "n=%zu", n);
}
static void p_embedding_forward(titan_dtype dt, void *out, const uint32_t *tokens,
                                const void *wte, int N, int C, int V) {
    TIMED("embedding_forward", 0, IN->embedding_forward(dt, out, tokens, wte, N, C, V),
          "N=%d C=%d V=%d", N, C, V);
}
static void p_embedding_backward(titan_dtype dt, int acc, float *dwte, const void *dout,
                                 const uint32_t *tokens, int N, int C, int V) {
    TIMED("embedding_backward", 0, IN->embedding_backward(dt, acc, dwte, dout, tokens, N, C, V),
          "N=%d C=%d V=%d%s", N, C, V, acc & TITAN_ACC_DW ? " +=" : "");
}
static void p_rmsnorm_forward(titan_dtype dt, void *out, float *rstd, const void *inp,
                              const void *weight, int N, int C, float eps) {
    TIMED("rmsnorm_forward", 0, IN->rmsnorm_forward(dt, out, rstd, inp, weight, N, C, eps),
          "N=%d C=%d", N, C);
}
static void p_rmsnorm_backward(titan_dtype dt, int acc, void *dinp, float *dweight,
                               const void *dout, const void *inp, const void *weight,
                               const float *rstd, int N, int C) {
    TIMED("rmsnorm_backward", 0,
          IN->rmsnorm_backward(dt, acc, dinp, dweight, dout, inp, weight, rstd, N, C),
          "N=%d C=%d%s%s", N, C, acc & TITAN_ACC_DX ? " dinp+=" : "",
          acc & TITAN_ACC_DW ? " dw+=" : "");
}
static void p_rope_forward(titan_dtype dt, void *out, const void *inp, const float *cos,
                           const float *sin, int B, int T, int NHX, int HD) {
    TIMED("rope_forward", 0, IN->rope_forward(dt, out, inp, cos, sin, B, T, NHX, HD),
          "B=%d T=%d heads=%d HD=%d", B, T, NHX, HD);
}
static void p_rope_backward(titan_dtype dt, int acc, void *dinp, const void *dout,
                            const float *cos, const float *sin, int B, int T, int NHX, int HD) {
    TIMED("rope_backward", 0, IN->rope_backward(dt, acc, dinp, dout, cos, sin, B, T, NHX, HD),
          "B=%d T=%d heads=%d HD=%d%s", B, T, NHX, HD, acc & TITAN_ACC_DX ? " +=" : "");
}

/* Causal attention's products: S = Q K^T and P V over the query-key pairs
 * a query sees, 2 flops per multiply-add. Query i at key position off + i
 * sees min(off + i + 1, Tk) keys (the plain ops: off = Tk - Tq, T (T + 1) /
 * 2 pairs for Tq = Tk = T): the first c = clamp(Tk - off, 0, Tq) rows
 * (off + 1) .. (off + c) keys, the rest all Tk. The backward does five such
 * products (S again, dP, dV, dK, dQ). */
static double attention_flops(int B, int Tq, int Tk, int off, int NH, int HD, int products) {
    double c = Tk - off < 0 ? 0 : Tk - off > Tq ? Tq : Tk - off;
    double pairs = c * (off + 1) + c * (c - 1) / 2 + ((double)Tq - c) * Tk;
    return 2.0 * products * B * NH * HD * pairs;
}

static void p_attention_forward(titan_dtype dt, void *out, float *lse, const void *q,
                                const void *k, const void *v, int B, int Tq, int Tk, int NH,
                                int NKV, int HD) {
    TIMED("attention_forward", attention_flops(B, Tq, Tk, Tk - Tq, NH, HD, 2),
          IN->attention_forward(dt, out, lse, q, k, v, B, Tq, Tk, NH, NKV, HD),
          "B=%d Tq=%d Tk=%d NH=%d NKV=%d HD=%d", B, Tq, Tk, NH, NKV, HD);
}
static void p_attention_backward(titan_dtype dt, int acc, void *dq, void *dk, void *dv,
                                 const void *dout, const void *out, const float *lse,
                                 const void *q, const void *k, const void *v, int B, int Tq,
                                 int Tk, int NH, int NKV, int HD) {
    TIMED("attention_backward", attention_flops(B, Tq, Tk, Tk - Tq, NH, HD, 5),
          IN->attention_backward(dt, acc, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, NH, NKV,
                                 HD),
          "B=%d Tq=%d Tk=%d NH=%d NKV=%d HD=%d%s", B, Tq, Tk, NH, NKV, HD,
          acc & TITAN_ACC_DX ? " +=" : "");
}
static void p_attention_forward_at(titan_dtype dt, void *out, float *lse, const void *q, const void *k,
                                   const void *v, int B, int Tq, int Tk, int off, int NH, int NKV, int HD) {
    TIMED("attention_forward_at", attention_flops(B, Tq, Tk, off, NH, HD, 2),
          IN->attention_forward_at(dt, out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD),
          "B=%d Tq=%d Tk=%d off=%d NH=%d NKV=%d HD=%d", B, Tq, Tk, off, NH, NKV, HD);
}
static void p_attention_backward_at(titan_dtype dt, int acc, void *dq, void *dk, void *dv, const void *dout,
                                    const void *out, const float *lse, const void *q, const void *k, const void *v,
                                    int B, int Tq, int Tk, int off, int NH, int NKV, int HD) {
    TIMED("attention_backward_at", attention_flops(B, Tq, Tk, off, NH, HD, 5),
          IN->attention_backward_at(dt, acc, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD),
          "B=%d Tq=%d Tk=%d off=%d NH=%d NKV=%d HD=%d%s", B, Tq, Tk, off, NH, NKV, HD,
          acc & TITAN_ACC_DX ? " +=" : "");
}
static void p_attention_merge(titan_dtype dt, float *acc, float *acc_lse, const void *out, const float *lse, int B,
                              int T, int NH, int HD, int first) {
    TIMED("attention_merge", 0, IN->attention_merge(dt, acc, acc_lse, out, lse, B, T, NH, HD, first),
          "B=%d T=%d NH=%d HD=%d%s", B, T, NH, HD, first ? " first" : "");
}
static void p_swiglu_forward(titan_dtype dt, void *out, const void *h1, const void *h3, int N,
                             int H) {
    TIMED("swiglu_forward", 0, IN->swiglu_forward(dt, out, h1, h3, N, H), "N=%d H=%d", N, H);
}
static void p_swiglu_backward(titan_dtype dt, int acc, void *dh1, void *dh3, const void *dout,
                              const void *h1, const void *h3, int N, int H) {
    TIMED("swiglu_backward", 0, IN->swiglu_backward(dt, acc, dh1, dh3, dout, h1, h3, N, H),
          "N=%d H=%d%s", N, H, acc & TITAN_ACC_DX ? " +=" : "");
}
static void p_cross_entropy(titan_dtype dt, float *losses, void *dlogits, const void *logits,
                            const uint32_t *targets, int N, int V, float dscale,
                            const float *lse) {
    TIMED("cross_entropy", 0,
          IN->cross_entropy(dt, losses, dlogits, logits, targets, N, V, dscale, lse),
          "N=%d V=%d%s%s", N, V, dlogits ? " dlogits" : "", lse ? " shard" : "");
}
static void p_logsumexp(titan_dtype dt, float *lse, const void *logits, int N, int V) {
    TIMED("logsumexp", 0, IN->logsumexp(dt, lse, logits, N, V), "N=%d V=%d", N, V);
}
static void p_adamw_step(float *p, void *p_bf16, const float *g, float gscale, float *m,
                         float *v, size_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, int64_t t) {
    TIMED("adamw_step", 0,
          IN->adamw_step(p, p_bf16, g, gscale, m, v, n, lr, beta1, beta2, eps, weight_decay, t),
          "n=%zu%s%s", n, p_bf16 ? " +bf16 copy" : "", gscale != 1.0f ? " clipped" : "");
}
static void p_scale(float *x, size_t n, float s) {
    TIMED("scale", 0, IN->scale(x, n, s), "n=%zu", n);
}
static void p_sumsq_into(double *out, const float *x, size_t n) {
    TIMED("sumsq", 0, IN->sumsq_into(out, x, n), "n=%zu", n);
}
/* a shared window's copies and sums (async tensor parallelism on a device) */
static void p_copy(void *dst, const void *src, size_t nbytes) {
    TIMED("copy", 0, IN->copy(dst, src, nbytes), "bytes=%zu", nbytes);
}
static void p_sum_ranks(titan_dtype dt, void *out, const void *const *src, int n, size_t m) {
    TIMED("sum_ranks", 0, IN->sum_ranks(dt, out, src, n, m), "ranks=%d m=%zu", n, m);
}
static double p_sumsq(const float *x, size_t n) {
    if (!g_prof->on) return IN->sumsq(x, n);
    double t0 = op_begin();
    double s = IN->sumsq(x, n);
    op_end("sumsq", t0, 0, "n=%zu", n);
    return s;
}

titan_status titan_op_profile_create(const titan_backend *inner, titan_op_profile **out,
                                     const titan_backend **table) {
    if (g_prof) return titan_error(TITAN_ERR_USAGE, "op profiler: one exists already");
    titan_op_profile *p = calloc(1, sizeof *p);
    if (!p) return titan_error(TITAN_ERR_NOMEM, "op profiler: out of memory");
    pthread_mutex_init(&p->lock, NULL);
    p->inner = inner;
    p->table = *inner; /* name, host flag, caps, set_option, memory ops, sync: inner's own */
    titan_backend *t = &p->table;
    t->zero = p_zero, t->to_device = p_to_device, t->to_host = p_to_host, t->convert = p_convert;
    t->matmul_forward = p_matmul_forward, t->matmul_backward = p_matmul_backward;
    t->matmul_add_forward = p_matmul_add_forward;
    if (inner->fp8_matmul_forward) t->fp8_matmul_forward = p_fp8_matmul_forward;
    if (inner->fp8_matmul_backward) t->fp8_matmul_backward = p_fp8_matmul_backward;
    if (inner->fp8_quantize) t->fp8_quantize = p_fp8_quantize;
    if (inner->fp8_amax) t->fp8_amax = p_fp8_amax;
    if (inner->fp8_dequantize) t->fp8_dequantize = p_fp8_dequantize;
    t->add = p_add;
    t->embedding_forward = p_embedding_forward, t->embedding_backward = p_embedding_backward;
    t->rmsnorm_forward = p_rmsnorm_forward, t->rmsnorm_backward = p_rmsnorm_backward;
    t->rope_forward = p_rope_forward, t->rope_backward = p_rope_backward;
    t->attention_forward = p_attention_forward, t->attention_backward = p_attention_backward;
    t->swiglu_forward = p_swiglu_forward, t->swiglu_backward = p_swiglu_backward;
    t->cross_entropy = p_cross_entropy, t->logsumexp = p_logsumexp;
    t->adamw_step = p_adamw_step, t->sumsq = p_sumsq, t->scale = p_scale;
    t->sumsq_into = p_sumsq_into; /* the side stream's calls are inner's own */
    if (inner->copy) t->copy = p_copy; /* ipc_* and host_call: inner's own */
    if (inner->sum_ranks) t->sum_ranks = p_sum_ranks;
    if (inner->attention_forward_at) t->attention_forward_at = p_attention_forward_at;
    if (inner->attention_backward_at) t->attention_backward_at = p_attention_backward_at;
    if (inner->attention_merge) t->attention_merge = p_attention_merge;
    g_prof = p;
    *out = p;
    *table = &p->table;
    return TITAN_OK;
}

void titan_op_profile_free(titan_op_profile *p) {
    if (!p) return;
    if (g_prof == p) g_prof = NULL;
    pthread_mutex_destroy(&p->lock);
    free(p->ev);
    free(p);
}

void titan_op_profile_record(titan_op_profile *p, int on) {
    pthread_mutex_lock(&p->lock);
    if (on) {
        p->n = 0;
        p->start = titan_now_s();
        p->start_wall = titan_wall_s();
    }
    p->on = on;
    pthread_mutex_unlock(&p->lock);
}

/* the JSON string body of s (shapes and op names: no quotes, but be safe) */
static void json_str(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
}

titan_status titan_op_profile_write_trace(const titan_op_profile *p, const char *path, int rank,
                                          int64_t step) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return titan_error(TITAN_ERR_NOMEM, "op profile %s: out of memory", path);
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"step\": %lld, \"rank\": %d, "
               "\"backend\": \"%s\", \"start_unix_s\": %.6f},\n \"traceEvents\": [\n",
            (long long)step, rank, p->inner->name, p->start_wall);
    fprintf(f, "  {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": "
               "\"rank %d (%s)\"}}",
            rank, rank, p->inner->name);
    for (size_t i = 0; i < p->n; i++) {
        const op_event *e = &p->ev[i];
        fprintf(f, ",\n  {\"name\": \"%s\", \"cat\": \"op\", \"ph\": \"X\", \"pid\": %d, \"tid\": 0, "
                   "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"shape\": \"",
                e->name, rank, (e->t0 - p->start) * 1e6, e->dur * 1e6);
        json_str(f, e->shape);
        fputc('"', f);
        if (e->flops > 0) fprintf(f, ", \"flops\": %.0f", e->flops);
        fputs("}}", f);
    }
    fputs("\n]}\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return titan_error(TITAN_ERR_NOMEM, "op profile %s: out of memory", path);
    }
    titan_status st = titan_fs_write_atomic(path, buf, len);
    free(buf);
    return st;
}

typedef struct {
    const char *name;
    long calls;
    double s, flops;
} op_total;

static int by_time(const void *a, const void *b) {
    double x = ((const op_total *)a)->s, y = ((const op_total *)b)->s;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* per-name totals into t[] (sorted, costliest first); returns their count */
static int totals(const titan_op_profile *p, op_total *t, int cap) {
    int nt = 0;
    for (size_t i = 0; i < p->n; i++) {
        const op_event *e = &p->ev[i];
        int j = 0;
        while (j < nt && strcmp(t[j].name, e->name) != 0) j++;
        if (j == nt) {
            if (nt == cap) continue;
            t[nt++] = (op_total){e->name, 0, 0, 0};
        }
        t[j].calls++, t[j].s += e->dur, t[j].flops += e->flops;
    }
    qsort(t, (size_t)nt, sizeof *t, by_time);
    return nt;
}

enum { MAX_OPS = 32 }; /* distinct op names: the table has 21 */

double titan_op_profile_total_s(const titan_op_profile *p, const char **top, double *top_s) {
    op_total t[MAX_OPS];
    int nt = totals(p, t, MAX_OPS);
    double all = 0;
    for (int i = 0; i < nt; i++) all += t[i].s;
    if (top) *top = nt ? t[0].name : NULL;
    if (top_s) *top_s = nt ? t[0].s : 0;
    return all;
}

void titan_op_profile_summary(const titan_op_profile *p, FILE *f, double step_s) {
    op_total t[MAX_OPS];
    int nt = totals(p, t, MAX_OPS);
    double all = 0;
    for (int i = 0; i < nt; i++) all += t[i].s;
    fprintf(f, "%-20s %7s %11s %7s %11s %9s\n", "op", "calls", "total ms", "share", "ms/call",
            "TFLOP/s");
    for (int i = 0; i < nt; i++) {
        fprintf(f, "%-20s %7ld %11.3f %6.1f%% %11.4f", t[i].name, t[i].calls, 1e3 * t[i].s,
                all > 0 ? 100 * t[i].s / all : 0.0, 1e3 * t[i].s / t[i].calls);
        if (t[i].flops > 0 && t[i].s > 0) fprintf(f, " %9.2f", t[i].flops / t[i].s / 1e12);
        fputc('\n', f);
    }
    fprintf(f, "%-20s %7s %11.3f", "all ops", "", 1e3 * all);
    if (step_s > 0) fprintf(f, "  (%.1f%% of the step's %.3f ms)", 100 * all / step_s, 1e3 * step_s);
    fputc('\n', f);
}
