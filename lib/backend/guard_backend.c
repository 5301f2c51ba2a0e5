/* guard_backend.c - "cpu-guard": the CPU backend under a GPU's memory rules,
 * so that code meant for a device can be checked on a machine without one.
 *
 * Its buffers are private pages that host code cannot touch: they are
 * PROT_NONE except while one of its own ops or copies runs. Code that reads
 * or writes backend memory other than through to_device/to_host faults at
 * once (SIGSEGV) where on a GPU it would read garbage or crash later; and
 * every op checks that the pointers it gets are its buffers (a host pointer
 * handed to a device op is the other mistake), aborting with the op's name.
 * The ops are the CPU backend's, so results are its bits. Gradient outputs
 * a backward op overwrites (acc bit clear) are filled with NaN first, as a
 * device's fresh memory may hold anything: an op or a caller that relies on
 * their old contents shows it.
 *
 * The protection flips are process-wide: ops are serialised by a mutex, and
 * no other thread may touch backend memory meanwhile (none does: titan's
 * background saver reads a host snapshot). Slow (two mprotect calls per
 * buffer and op): for tests only. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/mem.h"

enum { MAX_BUFS = 256 };

static struct {
    pthread_mutex_t lock;
    int n;
    struct {
        char *p;
        size_t len;    /* mapped bytes, whole pages */
        size_t nbytes; /* bytes asked for, for memory() */
        /* alloc_releasable's: one flag per page, 1 while committed; pages
         * not committed stay PROT_NONE even inside ops. NULL: all usable. */
        unsigned char *committed;
    } buf[MAX_BUFS];
    size_t in_use, peak;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const titan_backend *cpu(void) { return titan_backend_cpu(); }

static void protect(char *p, size_t len, int prot) {
    if (len && mprotect(p, len, prot) != 0) titan_panic(__FILE__, __LINE__, "mprotect of a guarded buffer");
}

static void protect_all(int prot) {
    size_t page = titan_page_size();
    for (int i = 0; i < g.n; i++) {
        const unsigned char *c = g.buf[i].committed;
        if (!c || prot == PROT_NONE) {
            protect(g.buf[i].p, g.buf[i].len, prot);
            continue;
        }
        size_t np = g.buf[i].len / page;
        for (size_t a = 0; a < np;) { /* runs of committed pages */
            size_t b = a;
            while (b < np && c[b] == c[a]) b++;
            if (c[a]) protect(g.buf[i].p + a * page, (b - a) * page, prot);
            a = b;
        }
    }
}

static void enter(void) {
    pthread_mutex_lock(&g.lock);
    protect_all(PROT_READ | PROT_WRITE);
}

static void leave(void) {
    protect_all(PROT_NONE);
    pthread_mutex_unlock(&g.lock);
}

/* The guarded buffer holding p, or -1 (caller holds the lock). */
static int find(const void *p) {
    const char *c = p;
    for (int i = 0; i < g.n; i++)
        if (c >= g.buf[i].p && c < g.buf[i].p + g.buf[i].len) return i;
    return -1;
}

/* Whether [p, p + bytes) lies in one guarded buffer (caller holds the lock). */
static int is_dev(const void *p, size_t bytes) {
    int i = find(p);
    return i >= 0 && bytes <= (size_t)(g.buf[i].p + g.buf[i].len - (const char *)p);
}

/* Whether all of [p, p + bytes) (backend memory) is committed. */
static int is_committed(const void *p, size_t bytes) {
    int i = find(p);
    if (i < 0 || !g.buf[i].committed || !bytes) return 1;
    size_t page = titan_page_size(), a = (size_t)((const char *)p - g.buf[i].p) / page;
    size_t b = (size_t)((const char *)p + bytes - 1 - g.buf[i].p) / page;
    for (size_t k = a; k <= b; k++)
        if (!g.buf[i].committed[k]) return 0;
    return 1;
}

/* A device pointer where the op needs one (NULL allowed where the op allows
 * it), to memory that is committed (a GPU would fault on the rest). */
static void need_dev(const char *op, const char *arg, const void *p, size_t bytes) {
    if (bytes == 0 || (p && is_dev(p, bytes) && is_committed(p, bytes))) return;
    char what[200];
    snprintf(what, sizeof what, "cpu-guard: %s: %s %p is not (all) %s (%zu bytes)", op, arg, p,
             p && is_dev(p, bytes) ? "committed memory: released and not committed again" : "backend memory", bytes);
    titan_panic(__FILE__, __LINE__, what);
}

static void need_host(const char *op, const char *arg, const void *p) {
    if (!is_dev(p, 1)) return;
    char what[160];
    snprintf(what, sizeof what, "cpu-guard: %s: %s %p is backend memory, not host memory", op, arg, p);
    titan_panic(__FILE__, __LINE__, what);
}

#define F sizeof(float)
#define DEV(op, p, n) need_dev(op, #p, p, (size_t)(n))
/* Bytes of one element of an op's dt tensors: 4 for f32, 2 for bf16 (0 for
 * another type, which the CPU backend refuses itself). */
static size_t elem(titan_dtype dt) {
    return dt == TITAN_DTYPE_F32 || dt == TITAN_DTYPE_BF16 ? titan_dtype_size(dt) : 0;
}
#define DEV_OPT(op, p, n) \
    do { if (p) DEV(op, p, n); } while (0)

/* ------------------------------------------------------------------ memory */

static void *alloc_buf(size_t nbytes, int releasable) {
    size_t page = titan_page_size();
    size_t len = ((nbytes ? nbytes : 1) + page - 1) / page * page;
    unsigned char *committed = releasable ? calloc(len / page, 1) : NULL;
    if (releasable && !committed) return NULL;
    pthread_mutex_lock(&g.lock);
    void *p = NULL;
    if (g.n < MAX_BUFS) {
        p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); /* zero-filled */
        if (p == MAP_FAILED) p = NULL;
    }
    if (p) {
        g.buf[g.n].p = p;
        g.buf[g.n].len = len;
        g.buf[g.n].nbytes = nbytes;
        g.buf[g.n].committed = committed;
        g.n++;
        if (!releasable) g.in_use += nbytes; /* releasable: counted as committed */
        if (g.in_use > g.peak) g.peak = g.in_use;
    } else {
        free(committed);
    }
    pthread_mutex_unlock(&g.lock);
    return p;
}

static void *g_alloc(size_t nbytes) { return alloc_buf(nbytes, 0); }
static void *g_alloc_releasable(size_t nbytes) { return alloc_buf(nbytes, 1); }

/* Bytes of buffer i that page k holds (the last page may hold fewer). */
static size_t page_bytes(int i, size_t k) {
    size_t page = titan_page_size(), at = k * page;
    return at >= g.buf[i].nbytes ? 0 : g.buf[i].nbytes - at < page ? g.buf[i].nbytes - at : page;
}

static int g_commit(void *p, size_t nbytes) {
    if (!nbytes) return 0;
    pthread_mutex_lock(&g.lock);
    int i = find(p);
    if (i < 0 || !g.buf[i].committed || !is_dev(p, nbytes))
        titan_panic(__FILE__, __LINE__, "cpu-guard: commit: not (all) memory of a releasable buffer");
    size_t page = titan_page_size(), a = (size_t)((char *)p - g.buf[i].p) / page;
    size_t b = (size_t)((char *)p + nbytes - 1 - g.buf[i].p) / page;
    for (size_t k = a; k <= b; k++)
        if (!g.buf[i].committed[k]) { /* released pages were given back: they read as zeros */
            g.buf[i].committed[k] = 1;
            g.in_use += page_bytes(i, k);
        }
    if (g.in_use > g.peak) g.peak = g.in_use;
    pthread_mutex_unlock(&g.lock);
    return 0;
}

static void g_release(void *p, size_t nbytes) {
    if (!nbytes) return;
    enter();
    int i = find(p);
    if (i < 0 || !g.buf[i].committed || !is_dev(p, nbytes))
        titan_panic(__FILE__, __LINE__, "cpu-guard: release: not (all) memory of a releasable buffer");
    size_t page = titan_page_size(), off = (size_t)((char *)p - g.buf[i].p), end = off + nbytes;
    for (size_t k = off / page; k * page < end; k++) {
        if (!g.buf[i].committed[k]) continue;
        size_t lo = k * page > off ? k * page : off, hi = (k + 1) * page < end ? (k + 1) * page : end;
        if (lo == k * page && hi == (k + 1) * page) { /* wholly inside: given back */
            if (madvise(g.buf[i].p + lo, page, MADV_DONTNEED) != 0) titan_panic(__FILE__, __LINE__, "madvise");
            g.buf[i].committed[k] = 0;
            g.in_use -= page_bytes(i, k);
        } else {
            memset(g.buf[i].p + lo, 0, hi - lo);
        }
    }
    leave();
}

static void g_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&g.lock);
    int i = 0;
    while (i < g.n && g.buf[i].p != p) i++;
    if (i == g.n) titan_panic(__FILE__, __LINE__, "cpu-guard: free of a pointer it did not allocate");
    munmap(g.buf[i].p, g.buf[i].len);
    if (g.buf[i].committed) {
        for (size_t k = 0; k < g.buf[i].len / titan_page_size(); k++)
            if (g.buf[i].committed[k]) g.in_use -= page_bytes(i, k);
        free(g.buf[i].committed);
    } else {
        g.in_use -= g.buf[i].nbytes;
    }
    g.buf[i] = g.buf[--g.n];
    pthread_mutex_unlock(&g.lock);
}

static void g_zero(void *p, size_t nbytes) {
    enter();
    DEV("zero", p, nbytes);
    cpu()->zero(p, nbytes);
    leave();
}

static void g_to_device(void *dst, const void *host_src, size_t nbytes) {
    enter();
    DEV("to_device", dst, nbytes);
    need_host("to_device", "host_src", host_src);
    memcpy(dst, host_src, nbytes);
    leave();
}

static void g_to_host(void *host_dst, const void *src, size_t nbytes) {
    enter();
    DEV("to_host", src, nbytes);
    need_host("to_host", "host_dst", host_dst);
    memcpy(host_dst, src, nbytes);
    leave();
}

static void g_memory(size_t *in_use, size_t *peak, size_t *device_used, int reset) {
    pthread_mutex_lock(&g.lock);
    if (in_use) *in_use = g.in_use;
    if (peak) *peak = g.peak;
    if (reset) g.peak = g.in_use;
    pthread_mutex_unlock(&g.lock);
    if (device_used) *device_used = 0;
}

static void g_convert(void *dst, titan_dtype dst_type, const void *src, titan_dtype src_type, size_t n) {
    enter();
    DEV("convert", dst, n * titan_dtype_size(dst_type));
    DEV("convert", src, n * titan_dtype_size(src_type));
    cpu()->convert(dst, dst_type, src, src_type, n);
    leave();
}

/* --------------------------------------------------------------------- ops */

static void g_matmul_forward(titan_dtype dt, void *out, const void *inp, const void *w, int N, int IC, int OC) {
    enter();
    DEV("matmul_forward", out, (size_t)N * OC * elem(dt));
    DEV("matmul_forward", inp, (size_t)N * IC * elem(dt));
    DEV("matmul_forward", w, (size_t)OC * IC * elem(dt));
    cpu()->matmul_forward(dt, out, inp, w, N, IC, OC);
    leave();
}

/* All-ones bytes: NaN in fp32 and in bf16. */
static void poison(void *p, size_t nbytes, int acc, int bit) {
    if (p && !(acc & bit)) memset(p, 0xff, nbytes);
}

static void g_matmul_backward(titan_dtype dt, int acc, void *dinp, float *dw, const void *dout,
                              const void *inp, const void *w, int N, int IC, int OC) {
    enter();
    DEV_OPT("matmul_backward", dinp, (size_t)N * IC * elem(dt));
    DEV_OPT("matmul_backward", dw, (size_t)OC * IC * F);
    DEV("matmul_backward", dout, (size_t)N * OC * elem(dt));
    if (dw) DEV("matmul_backward", inp, (size_t)N * IC * elem(dt));  /* read for dw only */
    if (dinp) DEV("matmul_backward", w, (size_t)OC * IC * elem(dt)); /* for dinp only */
    poison(dinp, (size_t)N * IC * elem(dt), acc, TITAN_ACC_DX);
    poison(dw, (size_t)OC * IC * F, acc, TITAN_ACC_DW);
    cpu()->matmul_backward(dt, acc, dinp, dw, dout, inp, w, N, IC, OC);
    leave();
}

/* out is written, not read, unless it is resid: poisoned otherwise. */
static void g_matmul_add_forward(titan_dtype dt, void *out, const void *inp, const void *w, const void *resid,
                                 int N, int IC, int OC) {
    enter();
    DEV("matmul_add_forward", out, (size_t)N * OC * elem(dt));
    DEV("matmul_add_forward", inp, (size_t)N * IC * elem(dt));
    DEV("matmul_add_forward", w, (size_t)OC * IC * elem(dt));
    DEV("matmul_add_forward", resid, (size_t)N * OC * elem(dt));
    poison(out != resid ? out : NULL, (size_t)N * OC * elem(dt), 0, TITAN_ACC_DX);
    cpu()->matmul_add_forward(dt, out, inp, w, resid, N, IC, OC);
    leave();
}

/* The amax a recipe gives for casts [c0, c1) (operands [rows, cols] each):
 * device memory of the cast's nscales values. */
static void given_amax(const char *op, const titan_fp8_recipe *r, int c0, int c1, const int *rows, const int *cols) {
    for (int c = c0; c < c1; c++)
        DEV_OPT(op, r->amax[c], (size_t)titan_fp8_nscales(titan_fp8_recipe_axis(r, c), rows[c - c0], cols[c - c0]) * F);
}

static int g_fp8_matmul_forward(titan_dtype dt, const titan_fp8_recipe *r, void *out, const void *inp,
                                const void *w, const void *resid, int N, int IC, int OC) {
    enter();
    DEV("fp8_matmul_forward", out, (size_t)N * OC * elem(dt));
    DEV("fp8_matmul_forward", inp, (size_t)N * IC * elem(dt));
    DEV("fp8_matmul_forward", w, (size_t)OC * IC * elem(dt));
    DEV_OPT("fp8_matmul_forward", resid, (size_t)N * OC * elem(dt));
    given_amax("fp8_matmul_forward", r, TITAN_FP8_X_OUT, TITAN_FP8_GO_GI, (const int[]){N, OC}, (const int[]){IC, IC});
    poison(out != resid ? out : NULL, (size_t)N * OC * elem(dt), 0, TITAN_ACC_DX);
    int gemms = cpu()->fp8_matmul_forward(dt, r, out, inp, w, resid, N, IC, OC);
    leave();
    return gemms;
}

static int g_fp8_matmul_backward(titan_dtype dt, const titan_fp8_recipe *r, int acc, void *dinp, float *dw,
                                 const void *dout, const void *inp, const void *w, int N, int IC, int OC) {
    enter();
    DEV_OPT("fp8_matmul_backward", dinp, (size_t)N * IC * elem(dt));
    DEV_OPT("fp8_matmul_backward", dw, (size_t)OC * IC * F);
    DEV("fp8_matmul_backward", dout, (size_t)N * OC * elem(dt));
    DEV("fp8_matmul_backward", inp, (size_t)N * IC * elem(dt));
    DEV("fp8_matmul_backward", w, (size_t)OC * IC * elem(dt));
    given_amax("fp8_matmul_backward", r, TITAN_FP8_GO_GI, TITAN_FP8_NCASTS, (const int[]){N, OC, N, N},
               (const int[]){OC, IC, OC, IC});
    poison(dinp, (size_t)N * IC * elem(dt), acc, TITAN_ACC_DX);
    poison(dw, (size_t)OC * IC * F, acc, TITAN_ACC_DW);
    int gemms = cpu()->fp8_matmul_backward(dt, r, acc, dinp, dw, dout, inp, w, N, IC, OC);
    leave();
    return gemms;
}

static void g_fp8_amax(titan_dtype dt, float *amax, const void *x, int rows, int cols, titan_fp8_axis axis) {
    enter();
    DEV("fp8_amax", amax, (size_t)titan_fp8_nscales(axis, rows, cols) * F);
    DEV("fp8_amax", x, (size_t)rows * cols * elem(dt));
    cpu()->fp8_amax(dt, amax, x, rows, cols, axis);
    leave();
}

static void g_fp8_dequantize(titan_dtype dt, void *out, const uint8_t *q, const float *scale, size_t n,
                             titan_fp8_format f) {
    enter();
    DEV("fp8_dequantize", out, n * elem(dt));
    DEV("fp8_dequantize", q, n);
    DEV("fp8_dequantize", scale, F);
    cpu()->fp8_dequantize(dt, out, q, scale, n, f);
    leave();
}

static void g_fp8_quantize(titan_dtype dt, uint8_t *q, float *scale, const void *x, int rows, int cols,
                           titan_fp8_axis axis, titan_fp8_format f, int pow2, const float *amax) {
    enter();
    DEV("fp8_quantize", q, (size_t)rows * cols);
    DEV("fp8_quantize", scale, (size_t)titan_fp8_nscales(axis, rows, cols) * F);
    DEV("fp8_quantize", x, (size_t)rows * cols * elem(dt));
    DEV_OPT("fp8_quantize", amax, (size_t)titan_fp8_nscales(axis, rows, cols) * F);
    cpu()->fp8_quantize(dt, q, scale, x, rows, cols, axis, f, pow2, amax);
    leave();
}

static void g_add(titan_dtype dt, void *out, const void *a, const void *b, size_t n) {
    enter();
    DEV("add", out, n * elem(dt));
    DEV("add", a, n * elem(dt));
    DEV("add", b, n * elem(dt));
    cpu()->add(dt, out, a, b, n);
    leave();
}

static void g_embedding_forward(titan_dtype dt, void *out, const uint32_t *tokens, const void *wte, int N,
                                int C, int V) {
    enter();
    DEV("embedding_forward", out, (size_t)N * C * elem(dt));
    DEV("embedding_forward", tokens, (size_t)N * sizeof(uint32_t));
    DEV("embedding_forward", wte, (size_t)V * C * elem(dt));
    cpu()->embedding_forward(dt, out, tokens, wte, N, C, V);
    leave();
}

static void g_embedding_backward(titan_dtype dt, int acc, float *dwte, const void *dout,
                                 const uint32_t *tokens, int N, int C, int V) {
    enter();
    DEV("embedding_backward", dwte, (size_t)V * C * F);
    DEV("embedding_backward", dout, (size_t)N * C * elem(dt));
    DEV("embedding_backward", tokens, (size_t)N * sizeof(uint32_t));
    poison(dwte, (size_t)V * C * F, acc, TITAN_ACC_DW);
    cpu()->embedding_backward(dt, acc, dwte, dout, tokens, N, C, V);
    leave();
}

static void g_rmsnorm_forward(titan_dtype dt, void *out, float *rstd, const void *inp, const void *weight, int N,
                              int C, float eps) {
    enter();
    DEV("rmsnorm_forward", out, (size_t)N * C * elem(dt));
    DEV("rmsnorm_forward", rstd, (size_t)N * F);
    DEV("rmsnorm_forward", inp, (size_t)N * C * elem(dt));
    DEV("rmsnorm_forward", weight, (size_t)C * elem(dt));
    cpu()->rmsnorm_forward(dt, out, rstd, inp, weight, N, C, eps);
    leave();
}

static void g_rmsnorm_backward(titan_dtype dt, int acc, void *dinp, float *dweight,
                               const void *dout, const void *inp, const void *weight,
                               const float *rstd, int N, int C) {
    enter();
    DEV("rmsnorm_backward", dinp, (size_t)N * C * elem(dt));
    DEV("rmsnorm_backward", dweight, (size_t)C * F);
    DEV("rmsnorm_backward", dout, (size_t)N * C * elem(dt));
    DEV("rmsnorm_backward", inp, (size_t)N * C * elem(dt));
    DEV("rmsnorm_backward", weight, (size_t)C * elem(dt));
    DEV("rmsnorm_backward", rstd, (size_t)N * F);
    poison(dinp, (size_t)N * C * elem(dt), acc, TITAN_ACC_DX);
    poison(dweight, (size_t)C * F, acc, TITAN_ACC_DW);
    cpu()->rmsnorm_backward(dt, acc, dinp, dweight, dout, inp, weight, rstd, N, C);
    leave();
}

static void g_rope_forward(titan_dtype dt, void *out, const void *inp, const float *cos, const float *sin, int B,
                           int T, int NHX, int HD) {
    size_t x = (size_t)B * T * NHX * HD * elem(dt), tab = (size_t)T * (HD / 2) * F;
    enter();
    DEV("rope_forward", out, x);
    DEV("rope_forward", inp, x);
    DEV("rope_forward", cos, tab);
    DEV("rope_forward", sin, tab);
    cpu()->rope_forward(dt, out, inp, cos, sin, B, T, NHX, HD);
    leave();
}

static void g_rope_backward(titan_dtype dt, int acc, void *dinp, const void *dout,
                            const float *cos, const float *sin, int B, int T, int NHX, int HD) {
    size_t x = (size_t)B * T * NHX * HD * elem(dt), tab = (size_t)T * (HD / 2) * F;
    enter();
    DEV("rope_backward", dinp, x);
    DEV("rope_backward", dout, x);
    DEV("rope_backward", cos, tab);
    DEV("rope_backward", sin, tab);
    poison(dinp, x, acc, TITAN_ACC_DX);
    cpu()->rope_backward(dt, acc, dinp, dout, cos, sin, B, T, NHX, HD);
    leave();
}

static void g_attention_forward(titan_dtype dt, void *out, float *lse, const void *q, const void *k,
                                const void *v, int B, int Tq, int Tk, int NH, int NKV, int HD) {
    size_t qs = (size_t)B * Tq * NH * HD * elem(dt), ks = (size_t)B * Tk * NKV * HD * elem(dt);
    enter();
    DEV("attention_forward", out, qs);
    DEV("attention_forward", lse, (size_t)B * NH * Tq * F);
    DEV("attention_forward", q, qs);
    DEV("attention_forward", k, ks);
    DEV("attention_forward", v, ks);
    cpu()->attention_forward(dt, out, lse, q, k, v, B, Tq, Tk, NH, NKV, HD);
    leave();
}

static void g_attention_backward(titan_dtype dt, int acc, void *dq, void *dk, void *dv,
                                 const void *dout, const void *out, const float *lse,
                                 const void *q, const void *k, const void *v, int B, int Tq,
                                 int Tk, int NH, int NKV, int HD) {
    size_t qs = (size_t)B * Tq * NH * HD * elem(dt), ks = (size_t)B * Tk * NKV * HD * elem(dt);
    enter();
    DEV("attention_backward", dq, qs);
    DEV("attention_backward", dk, ks);
    DEV("attention_backward", dv, ks);
    DEV("attention_backward", dout, qs);
    DEV("attention_backward", out, qs);
    DEV("attention_backward", lse, (size_t)B * NH * Tq * F);
    DEV("attention_backward", q, qs);
    DEV("attention_backward", k, ks);
    DEV("attention_backward", v, ks);
    poison(dq, qs, acc, TITAN_ACC_DX);
    poison(dk, ks, acc, TITAN_ACC_DX);
    poison(dv, ks, acc, TITAN_ACC_DX);
    cpu()->attention_backward(dt, acc, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, NH, NKV,
                              HD);
    leave();
}

static void g_swiglu_forward(titan_dtype dt, void *out, const void *h1, const void *h3, int N, int H) {
    size_t s = (size_t)N * H * elem(dt);
    enter();
    DEV("swiglu_forward", out, s);
    DEV("swiglu_forward", h1, s);
    DEV("swiglu_forward", h3, s);
    cpu()->swiglu_forward(dt, out, h1, h3, N, H);
    leave();
}

static void g_swiglu_backward(titan_dtype dt, int acc, void *dh1, void *dh3, const void *dout,
                              const void *h1, const void *h3, int N, int H) {
    size_t s = (size_t)N * H * elem(dt);
    enter();
    DEV("swiglu_backward", dh1, s);
    DEV("swiglu_backward", dh3, s);
    DEV("swiglu_backward", dout, s);
    DEV("swiglu_backward", h1, s);
    DEV("swiglu_backward", h3, s);
    poison(dh1, s, acc, TITAN_ACC_DX);
    poison(dh3, s, acc, TITAN_ACC_DX);
    cpu()->swiglu_backward(dt, acc, dh1, dh3, dout, h1, h3, N, H);
    leave();
}

static void g_cross_entropy(titan_dtype dt, float *losses, void *dlogits, const void *logits,
                            const uint32_t *targets, int N, int V, float dscale,
                            const float *lse) {
    enter();
    DEV_OPT("cross_entropy", losses, (size_t)N * F);
    DEV_OPT("cross_entropy", dlogits, (size_t)N * V * elem(dt));
    DEV("cross_entropy", logits, (size_t)N * V * elem(dt));
    DEV("cross_entropy", targets, (size_t)N * sizeof(uint32_t));
    DEV_OPT("cross_entropy", lse, (size_t)N * F);
    cpu()->cross_entropy(dt, losses, dlogits, logits, targets, N, V, dscale, lse);
    leave();
}

static void g_logsumexp(titan_dtype dt, float *lse, const void *logits, int N, int V) {
    enter();
    DEV("logsumexp", lse, (size_t)N * F);
    DEV("logsumexp", logits, (size_t)N * V * elem(dt));
    cpu()->logsumexp(dt, lse, logits, N, V);
    leave();
}

static void g_adamw_step(float *p, void *p_bf16, const float *gr, float gscale, float *m,
                         float *v, size_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, int64_t t) {
    enter();
    DEV("adamw_step", p, n * F);
    DEV_OPT("adamw_step", p_bf16, n * sizeof(uint16_t));
    DEV("adamw_step", gr, n * F);
    DEV("adamw_step", m, n * F);
    DEV("adamw_step", v, n * F);
    cpu()->adamw_step(p, p_bf16, gr, gscale, m, v, n, lr, beta1, beta2, eps, weight_decay, t);
    leave();
}

static double g_sumsq(const float *x, size_t n) {
    enter();
    DEV("sumsq", x, n * F);
    double s = cpu()->sumsq(x, n);
    leave();
    return s;
}

static void g_sumsq_into(double *out, const float *x, size_t n) {
    enter();
    DEV("sumsq_into", out, sizeof *out);
    DEV("sumsq_into", x, n * F);
    cpu()->sumsq_into(out, x, n);
    leave();
}

static void g_scale(float *x, size_t n, float s) {
    enter();
    DEV("scale", x, n * F);
    cpu()->scale(x, n, s);
    leave();
}

static void g_galore_adam(float *m, float *v, float *low, size_t n, float b1, float w1, float b2, float w2,
                          float eps) {
    enter();
    DEV("galore_adam", m, n * F);
    DEV("galore_adam", v, n * F);
    DEV("galore_adam", low, n * F);
    cpu()->galore_adam(m, v, low, n, b1, w1, b2, w2, eps);
    leave();
}

static void g_galore_update(float *p, const float *upd, size_t n, float scale, float step, float decay) {
    enter();
    DEV("galore_update", p, n * F);
    DEV("galore_update", upd, n * F);
    cpu()->galore_update(p, upd, n, scale, step, decay);
    leave();
}

static int g_qr_orthonormal(float *a, int rows, int cols) {
    enter();
    DEV("qr_orthonormal", a, (size_t)rows * cols * F);
    int info = cpu()->qr_orthonormal(a, rows, cols);
    leave();
    return info;
}

static int g_svd_thin(const float *a, int rows, int cols, int k, float *u, float *vt) {
    enter();
    DEV("svd_thin", a, (size_t)rows * cols * F);
    DEV_OPT("svd_thin", u, (size_t)rows * k * F);
    DEV_OPT("svd_thin", vt, (size_t)k * cols * F);
    int info = cpu()->svd_thin(a, rows, cols, k, u, vt);
    leave();
    return info;
}

static void g_svd_signs(float *u, float *vt, int rows, int cols, int k) {
    enter();
    DEV("svd_signs", u, (size_t)rows * k * F);
    DEV_OPT("svd_signs", vt, (size_t)k * cols * F);
    cpu()->svd_signs(u, vt, rows, cols, k);
    leave();
}

static void g_sync(void) {}

/* the CPU backend's options (none): its ops run them */
static int g_set_option(const char *key, int value) { return cpu()->set_option(key, value); }

static const titan_backend guard_backend = {
    .name = "cpu-guard",
    .host = 0, /* stands in for a device */
    .caps = TITAN_CAP_CPU,
    .set_option = g_set_option,
    .alloc = g_alloc,
    .free = g_free,
    .zero = g_zero,
    .to_device = g_to_device,
    .to_host = g_to_host,
    .memory = g_memory,
    .sync = g_sync,
    .alloc_releasable = g_alloc_releasable,
    .commit = g_commit,
    .release = g_release,
    .convert = g_convert,
    .matmul_forward = g_matmul_forward,
    .matmul_backward = g_matmul_backward,
    .matmul_add_forward = g_matmul_add_forward,
    .fp8_matmul_forward = g_fp8_matmul_forward,
    .fp8_matmul_backward = g_fp8_matmul_backward,
    .fp8_quantize = g_fp8_quantize,
    .fp8_amax = g_fp8_amax,
    .fp8_dequantize = g_fp8_dequantize,
    .add = g_add,
    .embedding_forward = g_embedding_forward,
    .embedding_backward = g_embedding_backward,
    .rmsnorm_forward = g_rmsnorm_forward,
    .rmsnorm_backward = g_rmsnorm_backward,
    .rope_forward = g_rope_forward,
    .rope_backward = g_rope_backward,
    .attention_forward = g_attention_forward,
    .attention_backward = g_attention_backward,
    .swiglu_forward = g_swiglu_forward,
    .swiglu_backward = g_swiglu_backward,
    .cross_entropy = g_cross_entropy,
    .logsumexp = g_logsumexp,
    .adamw_step = g_adamw_step,
    .sumsq = g_sumsq,
    .scale = g_scale,
    .sumsq_into = g_sumsq_into,
    .galore_adam = g_galore_adam,
    .galore_update = g_galore_update,
    .qr_orthonormal = g_qr_orthonormal,
    .svd_thin = g_svd_thin,
    .svd_signs = g_svd_signs,
};

const titan_backend *titan_backend_cpu_guard(void) { return &guard_backend; }
