/* test_guard_backend.c - the "cpu-guard" backend (backend.h) catches what a
 * GPU would not forgive: host code reading or writing its buffers directly
 * dies with SIGSEGV, and an op handed a host pointer aborts; through its own
 * ops and copies it computes the CPU backend's bits. Also the model on it:
 * a forward and backward equal the CPU model's, bit for bit. Releasable
 * memory: ops on what is not committed abort; release zeroes and gives
 * back (cpu and cpu-guard). Each fatal case runs in a child process. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "check.h"
#include "core/rng.h"
#include "model/llama.h"

static const titan_backend *gb, *cb;

/* Runs fn in a child with stderr silenced; returns the signal that ended it (0: none). */
static int dies_by(void (*fn)(void)) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit none = {0, 0}; /* no core files */
        setrlimit(RLIMIT_CORE, &none);
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        signal(SIGSEGV, SIG_DFL); /* dies by the signal, even under ASan (make check-asan), whose handler reports and exits */
        fn();
        _exit(0);
    }
    int ws = 0;
    if (pid < 0 || waitpid(pid, &ws, 0) != pid) return -1;
    return WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
}

static void host_reads_device(void) {
    float *d = gb->alloc(64 * sizeof(float));
    volatile float x = d[3]; /* what train.c must never do */
    (void)x;
}

static void host_writes_device(void) {
    float *d = gb->alloc(64 * sizeof(float));
    memset(d, 0, 64 * sizeof(float));
}

static void op_gets_host_pointer(void) {
    float host[64] = {0};
    float *d = gb->alloc(64 * sizeof(float));
    gb->add(TITAN_DTYPE_F32, d, d, host, 64);
}

static void to_device_from_device(void) {
    float *a = gb->alloc(64 * sizeof(float)), *b = gb->alloc(64 * sizeof(float));
    gb->to_device(a, b, 64 * sizeof(float));
}

static void proper_use(void) {
    float host[64];
    for (int i = 0; i < 64; i++) host[i] = (float)i;
    float *d = gb->alloc(64 * sizeof(float));
    gb->to_device(d, host, sizeof host);
    gb->scale(d, 64, 2.0f);
    gb->to_host(host, d, sizeof host);
    gb->free(d);
    if (host[5] != 10.0f) abort();
}

/* Releasable memory (backend.h): nothing usable until committed. */
enum { PAGEF = 1024 }; /* floats per 4 KiB page */

static void op_on_uncommitted(void) {
    float *d = gb->alloc_releasable(4 * PAGEF * sizeof(float));
    gb->zero(d, 16);
}

static void op_on_released(void) {
    float *d = gb->alloc_releasable(4 * PAGEF * sizeof(float));
    gb->commit(d, 4 * PAGEF * sizeof(float));
    gb->release(d + PAGEF, 2 * PAGEF * sizeof(float));
    gb->scale(d, 4 * PAGEF, 2.0f); /* pages 1 and 2 were given back */
}

/* commit/release keep values outside the released range, zero inside it,
 * and memory() counts committed bytes only. */
static void test_releasable(const titan_backend *be) {
    size_t n = 4 * PAGEF, in0 = 0, in1 = 0, in2 = 0, in3 = 0;
    be->memory(&in0, NULL, NULL, 0);
    float *d = be->alloc_releasable(n * sizeof(float));
    CHECK(d != NULL, "%s: alloc_releasable", be->name);
    be->memory(&in1, NULL, NULL, 0);
    CHECK(be->commit(d, n * sizeof(float)) == 0, "%s: commit", be->name);
    be->memory(&in2, NULL, NULL, 0);
    float h[4 * PAGEF];
    for (size_t i = 0; i < n; i++) h[i] = (float)i + 1.0f;
    be->to_device(d, h, sizeof h);
    /* release from the middle of page 0 to the middle of page 3: pages 1
     * and 2 go back, the ends are zeroed in place */
    size_t lo = PAGEF / 2, hi = 3 * PAGEF + PAGEF / 2;
    be->release(d + lo, (hi - lo) * sizeof(float));
    be->memory(&in3, NULL, NULL, 0);
    CHECK(be->commit(d, n * sizeof(float)) == 0, "%s: commit again", be->name);
    be->to_host(h, d, sizeof h);
    int good = 1;
    for (size_t i = 0; i < n; i++) good &= h[i] == (i < lo || i >= hi ? (float)i + 1.0f : 0.0f);
    CHECK(good, "%s: released range reads zeros, the rest keeps its values", be->name);
    if (be == gb) {
        CHECK(in1 == in0 && in2 == in0 + n * sizeof(float) && in3 == in2 - 2 * PAGEF * sizeof(float),
              "cpu-guard: memory() counts committed pages (%zu, %zu, %zu, %zu)", in0, in1, in2, in3);
    }
    be->free(d);
}

static void fill(float *x, size_t n, uint64_t stream) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(titan_rng_uniform(11, stream, i) - 0.5) * 0.2f;
}

/* The same model on both backends (cpu-guard's with activation
 * checkpointing ac; 4 layers, so that every 2nd recomputes two through one
 * shared slot): losses, logits and gradients in bits. */
static void test_model(titan_dtype dt, titan_ac_mode ac) {
    titan_llama_config c;
    CHECK(titan_llama_flavor("debugmodel", &c) == TITAN_OK);
    c.dim = 32, c.n_layers = 4, c.n_heads = 4, c.n_kv_heads = 2, c.multiple_of = 16, c.vocab_size = 50;
    enum { B = 2, T = 16, N = B * T };
    titan_llama *mc = NULL, *mg = NULL;
    CHECK(titan_llama_create(&mc, &c, cb, B, T, TITAN_AC_NONE, dt) == TITAN_OK);
    CHECK(titan_llama_create(&mg, &c, gb, B, T, ac, dt) == TITAN_OK);
    if (!mc || !mg) return;
    size_t np = titan_llama_params_count(mc), V = (size_t)c.vocab_size;
    float *p = malloc(np * sizeof(float)), *g1 = malloc(np * sizeof(float)), *g2 = malloc(np * sizeof(float));
    float *l1 = malloc((size_t)N * V * sizeof(float)), *l2 = malloc((size_t)N * V * sizeof(float));
    uint32_t tok[N], tgt[N];
    for (int i = 0; i < N; i++) tok[i] = (uint32_t)(i * 7 % 50), tgt[i] = (uint32_t)(i * 3 % 50);
    fill(p, np, 1);
    memcpy(titan_llama_params_data(mc), p, np * sizeof(float));
    gb->to_device(titan_llama_params_data(mg), p, np * sizeof(float));
    CHECK(titan_llama_backend(mg) == gb);
    float lc = 0, lg = 0;
    CHECK(titan_llama_forward(mc, tok, tgt, &lc) == TITAN_OK);
    CHECK(titan_llama_forward(mg, tok, tgt, &lg) == TITAN_OK);
    CHECK(memcmp(&lc, &lg, sizeof lc) == 0, "%s loss %.9g vs %.9g", titan_dtype_name(dt), (double)lc, (double)lg);
    CHECK(titan_llama_logits_host(mc, l1) == TITAN_OK && titan_llama_logits_host(mg, l2) == TITAN_OK);
    CHECK(memcmp(l1, l2, (size_t)N * V * sizeof(float)) == 0, "%s logits", titan_dtype_name(dt));
    titan_llama_backward(mc, 0.5f);
    titan_llama_backward(mg, 0.5f);
    memcpy(g1, titan_llama_grads_data(mc), np * sizeof(float));
    gb->to_host(g2, titan_llama_grads_data(mg), np * sizeof(float));
    CHECK(memcmp(g1, g2, np * sizeof(float)) == 0, "%s gradients", titan_dtype_name(dt));
    titan_llama_free(mc);
    titan_llama_free(mg);
    free(p), free(g1), free(g2), free(l1), free(l2);
}

int main(void) {
    gb = titan_backend_cpu_guard();
    cb = titan_backend_cpu();
    titan_backend_cpu_set_threads(2);
    CHECK(strcmp(gb->name, "cpu-guard") == 0);
    CHECK(gb->caps == TITAN_CAP_CPU && gb->set_option(TITAN_OPT_ATTENTION_CUDNN, 1) == -1,
          "a CPU backend (caps), without the attention option");
    CHECK(dies_by(host_reads_device) == SIGSEGV, "a host read of backend memory faults");
    CHECK(dies_by(host_writes_device) == SIGSEGV, "a host write to backend memory faults");
    CHECK(dies_by(op_gets_host_pointer) == SIGABRT, "an op given host memory aborts");
    CHECK(dies_by(to_device_from_device) == SIGABRT, "to_device from backend memory aborts");
    CHECK(dies_by(proper_use) == 0, "copies and ops work");
    CHECK(dies_by(op_on_uncommitted) == SIGABRT, "an op on releasable memory not committed aborts");
    CHECK(dies_by(op_on_released) == SIGABRT, "an op on released memory aborts");
    test_releasable(gb);
    test_releasable(cb);
    const titan_backend *be = NULL;
    CHECK(titan_backend_open("cpu-guard", &be) == TITAN_OK && be == gb, "opened by name");
    test_model(TITAN_DTYPE_F32, TITAN_AC_FULL);
    test_model(TITAN_DTYPE_BF16, TITAN_AC_FULL);
    test_model(TITAN_DTYPE_BF16, TITAN_AC_OP);
    test_model(TITAN_DTYPE_F32, 2);
    printf("%s: %d failure%s\n", failures ? "FAIL" : "ok", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
