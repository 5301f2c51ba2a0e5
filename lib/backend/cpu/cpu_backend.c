/* cpu_backend.c - the CPU reference backend's op table, memory, threads and
 * the small elementwise ops (add, scale, sumsq). */
#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "core/mem.h"

/* --- memory: host memory, so "device" copies are memcpy --- */

/* Bytes held through cpu_alloc, for memory(). */
static struct {
    pthread_mutex_t lock;
    size_t in_use, peak;
} acct = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Page-backed: memory is resident once touched (FSDP frees pages, mem.h).
 * One page in front of the data keeps the size asked for, so cpu_free can
 * account for it; the data stays page-aligned. */
static void *cpu_alloc(size_t nbytes) {
    size_t page = titan_page_size();
    if (nbytes > SIZE_MAX - page) {
        titan_error(TITAN_ERR_NOMEM, "cpu backend buffer: cannot allocate %zu bytes", nbytes);
        return NULL;
    }
    char *base = titan_alloc_pages(page + nbytes, "cpu backend buffer");
    if (!base) return NULL;
    memcpy(base, &nbytes, sizeof nbytes);
    pthread_mutex_lock(&acct.lock);
    acct.in_use += nbytes;
    if (acct.in_use > acct.peak) acct.peak = acct.in_use;
    pthread_mutex_unlock(&acct.lock);
    return base + page;
}

static void cpu_free(void *p) {
    if (!p) return;
    char *base = (char *)p - titan_page_size();
    size_t nbytes;
    memcpy(&nbytes, base, sizeof nbytes);
    pthread_mutex_lock(&acct.lock);
    acct.in_use -= nbytes;
    pthread_mutex_unlock(&acct.lock);
    titan_free_pages(base);
}

/* Host pages fault back in, zeroed, when touched: nothing to commit. */
static int cpu_commit(void *p, size_t nbytes) { return 0; }
static void cpu_release(void *p, size_t nbytes) { titan_mem_release_zero(p, nbytes); }

static void cpu_memory(size_t *in_use, size_t *peak, size_t *device_used, int reset) {
    pthread_mutex_lock(&acct.lock);
    if (in_use) *in_use = acct.in_use;
    if (peak) *peak = acct.peak;
    if (reset) acct.peak = acct.in_use;
    pthread_mutex_unlock(&acct.lock);
    if (device_used) *device_used = 0;
}
/* in 1 MiB pieces across the threads: a first touch of fresh pages
 * faults them in on every core at once */
static void cpu_zero(void *p, size_t nbytes) {
    enum { PIECE = 1 << 20 };
    if (nbytes <= PIECE) {
        if (nbytes) memset(p, 0, nbytes);
        return;
    }
    long pieces = (long)((nbytes + PIECE - 1) / PIECE);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < pieces; i++) {
        size_t off = (size_t)i * PIECE, n = nbytes - off < PIECE ? nbytes - off : PIECE;
        memset((char *)p + off, 0, n);
    }
}
static void cpu_copy(void *dst, const void *src, size_t nbytes) {
    if (nbytes && dst != src) memcpy(dst, src, nbytes);
}

/* --- threads --- */

void titan_backend_cpu_set_threads(int n) {
    if (n <= 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

int titan_backend_cpu_threads(void) { return omp_get_max_threads(); }

/* --- elementwise ops: one rounding each, so any split gives the same bits --- */

void titan_cpu_add(float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for schedule(static) if (n > 4 * TITAN_CPU_BLOCK)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* Kept out of line and uncontracted: a caller's product must not fuse with
 * this add into an FMA, whose single rounding the overwrite (x stored,
 * then read by nobody) would not share. Serial: callers run it per row. */
__attribute__((optimize("fp-contract=off"), noinline)) void
titan_cpu_store_grad(float *dst, const float *x, size_t n, int add) {
    if (add)
        for (size_t i = 0; i < n; i++) dst[i] = dst[i] + x[i];
    else
        memcpy(dst, x, n * sizeof(float));
}

void titan_cpu_scale(float *x, size_t n, float s) {
#pragma omp parallel for schedule(static) if (n > 4 * TITAN_CPU_BLOCK)
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

/* 16 double lanes keep the loop vectorisable without reassociating a
 * reduction; the lanes are folded in a fixed order. */
double titan_cpu_row_sumsq(const float *x, size_t n) {
    double lane[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) lane[l] += (double)x[i + l] * (double)x[i + l];
    for (; i < n; i++) lane[i & 15] += (double)x[i] * (double)x[i];
    double s = 0.0;
    for (int l = 0; l < 16; l++) s += lane[l];
    return s;
}

/* Fixed pieces: at most 256 blocks whose size depends on n only; partial sums
 * are added in block order. */
double titan_cpu_sumsq(const float *x, size_t n) {
    enum { MAXB = 256 };
    double part[MAXB];
    size_t bs = (n + MAXB - 1) / MAXB;
    if (bs < TITAN_CPU_BLOCK) bs = TITAN_CPU_BLOCK;
    bs = (bs + 63) & ~(size_t)63;
    long nb = (long)((n + bs - 1) / bs);
#pragma omp parallel for schedule(static) if (nb > 1)
    for (long b = 0; b < nb; b++) {
        size_t lo = (size_t)b * bs, hi = lo + bs < n ? lo + bs : n;
        part[b] = titan_cpu_row_sumsq(x + lo, hi - lo);
    }
    double s = 0.0;
    for (long b = 0; b < nb; b++) s += part[b];
    return s;
}

static void cpu_sumsq_into(double *out, const float *x, size_t n) { *out = titan_cpu_sumsq(x, n); }

static void cpu_sync(void) {} /* every op has finished when it returns */

static int cpu_set_option(const char *key, int value) {
    (void)key, (void)value;
    return -1; /* none of backend.h's TITAN_OPT_* applies */
}

static const titan_backend cpu_backend = {
    .name = "cpu",
    .host = 1,
    .caps = TITAN_CAP_CPU,
    .set_option = cpu_set_option,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .zero = cpu_zero,
    .to_device = cpu_copy,
    .to_host = cpu_copy,
    .memory = cpu_memory,
    .sync = cpu_sync,
    .alloc_releasable = cpu_alloc, /* page-backed already */
    .commit = cpu_commit,
    .release = cpu_release,
    .convert = titan_cpu_convert,
    .matmul_forward = titan_cpu_dt_matmul_forward,
    .matmul_backward = titan_cpu_dt_matmul_backward,
    .matmul_add_forward = titan_cpu_dt_matmul_add_forward,
    .fp8_matmul_forward = titan_cpu_fp8_matmul_forward,
    .fp8_matmul_backward = titan_cpu_fp8_matmul_backward,
    .fp8_quantize = titan_cpu_fp8_quantize_op,
    .fp8_amax = titan_cpu_fp8_amax,
    .fp8_dequantize = titan_cpu_fp8_dequantize,
    .add = titan_cpu_dt_add,
    .embedding_forward = titan_cpu_dt_embedding_forward,
    .embedding_backward = titan_cpu_dt_embedding_backward,
    .rmsnorm_forward = titan_cpu_dt_rmsnorm_forward,
    .rmsnorm_backward = titan_cpu_dt_rmsnorm_backward,
    .rope_forward = titan_cpu_dt_rope_forward,
    .rope_backward = titan_cpu_dt_rope_backward,
    .attention_forward = titan_cpu_dt_attention_forward,
    .attention_backward = titan_cpu_dt_attention_backward,
    .attention_forward_at = titan_cpu_dt_attention_forward_at,
    .attention_backward_at = titan_cpu_dt_attention_backward_at,
    .swiglu_forward = titan_cpu_dt_swiglu_forward,
    .swiglu_backward = titan_cpu_dt_swiglu_backward,
    .cross_entropy = titan_cpu_dt_cross_entropy,
    .logsumexp = titan_cpu_dt_logsumexp,
    .adamw_step = titan_cpu_adamw_step,
    .sumsq = titan_cpu_sumsq,
    .scale = titan_cpu_scale,
    .sumsq_into = cpu_sumsq_into,
    .galore_adam = titan_cpu_galore_adam,
    .galore_update = titan_cpu_galore_update,
    .qr_orthonormal = titan_cpu_qr_orthonormal,
    .svd_thin = titan_cpu_svd_thin,
    .svd_signs = titan_cpu_svd_signs,
    .attention_merge = titan_cpu_attention_merge,
};

const titan_backend *titan_backend_cpu(void) { return &cpu_backend; }
