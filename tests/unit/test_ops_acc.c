/* test_ops_acc.c - the acc mask of every backward op (backend.h), on the
 * CPU backend with dt f32 and bf16, and on cpu-guard. R is an op's outputs
 * computed into zero-filled buffers with every acc bit set. Then:
 *   - acc 0 into outputs filled with NaN, and with random bit patterns,
 *     gives R bit for bit (+0 and -0 alike): an overwritten output is never
 *     read;
 *   - every bit set, into random g0: fp32 outputs are g0 + R (max error /
 *     max |g0 + R| <= 1e-6, test_ops.c's tolerance for its sums); bf16
 *     outputs are round(bf16 g0 + fp32 result) bit for bit: "+=" reads the
 *     bf16 value, adds in fp32 and rounds once, the fp32 result being the
 *     f32 op on the widened inputs (the CPU's definition of a bf16 op).
 *     matmul's dinp may be one bf16 ulp off: sgemm with beta 1 adds g0 in
 *     before the partial sums of its later K blocks (none at these shapes);
 *   - one bit set (matmul, rmsnorm): the output with the bit adds, the other
 *     is overwritten (NaN on entry); matmul with dinp or dw NULL;
 *   - embedding with repeated tokens and tokens absent: overwritten, the
 *     absent rows are 0; N = 0 overwrites parameter gradients with zeros.
 * cpu-guard runs the first shape of each op and must give the cpu's bits.
 * One line per check; exit 1 on any failure. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/rng.h"
#include "tensor/dtype.h"
#include "model/rope_freqs.h" /* titan_rope_tables: the cos/sin the rope ops take */

#define F32 TITAN_DTYPE_F32
#define BF16 TITAN_DTYPE_BF16
#define DX TITAN_ACC_DX
#define DW TITAN_ACC_DW
#define ALL (TITAN_ACC_DX | TITAN_ACC_DW)

static int checks, failures;
static uint64_t stream = 1;

static void report(int ok, const char *name, const char *what) {
    checks++;
    printf("%-4s %-58s %s\n", ok ? "ok" : "FAIL", name, what);
    if (!ok) failures++;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "test_ops_acc: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

/* ---------------------------------------------------------------- a case */

/* Inputs: dt floats, fp32 whatever dt (rstd, lse, rope tables), raw bytes (token ids). */
enum { IN_DT, IN_F32, IN_RAW };
enum { MAX_IN = 8, MAX_OUT = 3 };
enum { OP_MATMUL, OP_EMB, OP_RMSNORM, OP_ROPE, OP_ATTN, OP_SWIGLU };

typedef struct {
    int kind;
    size_t n;  /* elements; bytes for IN_RAW */
    void *h;   /* host copy as the op reads it (dt, fp32 or bytes) */
    float *f;  /* its fp32 values (exact widening); NULL for IN_RAW */
} input;

typedef struct {
    const char *name;
    size_t n;
    int f32; /* 1: fp32 whatever dt (a parameter gradient) */
    int bit; /* the acc bit that makes it add */
} output;

typedef struct {
    char name[64];
    int op, d[6]; /* the op and its dims in the table's argument order */
    titan_dtype dt;
    int nin, nout;
    input in[MAX_IN];
    output out[MAX_OUT];
} acase;

static size_t in_bytes(const acase *c, const input *x) {
    return x->kind == IN_RAW ? x->n : x->n * (x->kind == IN_F32 ? 4 : titan_dtype_size(c->dt));
}

static size_t out_esize(const acase *c, int j) {
    return c->out[j].f32 ? 4 : titan_dtype_size(c->dt);
}

/* An input from host data of its kind (copied); fp32 values widened. */
static void add_input(acase *c, int kind, size_t n, const void *data) {
    input *x = &c->in[c->nin++];
    x->kind = kind, x->n = n;
    size_t nb = in_bytes(c, x);
    x->h = xmalloc(nb);
    memcpy(x->h, data, nb);
    x->f = NULL;
    if (kind == IN_RAW) return;
    x->f = xmalloc(n * sizeof(float));
    titan_dtype_convert(x->f, F32, x->h, kind == IN_F32 ? F32 : c->dt, n);
}

/* Random values in [lo, hi), rounded to the case's dt. */
static void add_random(acase *c, size_t n, double lo, double hi) {
    float *f = xmalloc(n * sizeof(float));
    void *h = xmalloc(n * 4);
    uint64_t s = stream++;
    for (size_t i = 0; i < n; i++) f[i] = (float)(lo + (hi - lo) * titan_rng_uniform(11, s, i));
    titan_dtype_convert(h, c->dt, f, F32, n);
    add_input(c, IN_DT, n, h);
    free(f), free(h);
}

static void add_output(acase *c, const char *name, size_t n, int f32, int bit) {
    c->out[c->nout++] = (output){name, n, f32, bit};
}

static void free_case(acase *c) {
    for (int i = 0; i < c->nin; i++) free(c->in[i].h), free(c->in[i].f);
}

/* The op on backend b with inputs in[] and outputs out[] (b's pointers). */
static void run_op(const acase *c, const titan_backend *b, titan_dtype dt, int acc,
                   void *const *in, void *const *out) {
    const int *d = c->d;
    switch (c->op) {
    case OP_MATMUL:
        b->matmul_backward(dt, acc, out[0], out[1], in[0], in[1], in[2], d[0], d[1], d[2]);
        break;
    case OP_EMB:
        b->embedding_backward(dt, acc, out[0], in[0], in[1], d[0], d[1], d[2]);
        break;
    case OP_RMSNORM:
        b->rmsnorm_backward(dt, acc, out[0], out[1], in[0], in[1], in[2], in[3], d[0], d[1]);
        break;
    case OP_ROPE:
        b->rope_backward(dt, acc, out[0], in[0], in[1], in[2], d[0], d[1], d[2], d[3]);
        break;
    case OP_ATTN:
        b->attention_backward(dt, acc, out[0], out[1], out[2], in[0], in[1], in[2], in[3], in[4],
                              in[5], d[0], d[1], d[2], d[3], d[4], d[5]);
        break;
    case OP_SWIGLU:
        b->swiglu_backward(dt, acc, out[0], out[1], in[0], in[1], in[2], d[0], d[1]);
        break;
    }
}

/* ------------------------------------------------------------ the cases */

static void set_name(acase *c, const char *op, const char *shape) {
    snprintf(c->name, sizeof c->name, "%s %s %s", op, shape, titan_dtype_name(c->dt));
}

static acase make_matmul(titan_dtype dt, int N, int IC, int OC) {
    acase c = {.op = OP_MATMUL, .d = {N, IC, OC}, .dt = dt};
    char s[32];
    snprintf(s, sizeof s, "%dx%dx%d", N, IC, OC);
    set_name(&c, "matmul", s);
    add_random(&c, (size_t)N * OC, -1, 1); /* dout */
    add_random(&c, (size_t)N * IC, -1, 1); /* inp */
    add_random(&c, (size_t)OC * IC, -1, 1); /* w */
    add_output(&c, "dinp", (size_t)N * IC, 0, DX);
    add_output(&c, "dw", (size_t)OC * IC, 1, DW);
    return c;
}

/* Token n is `rep` when n % 3 == 0, else (n * 7) % V: repeats, and with V
 * larger than the distinct ids, rows no token hits. */
static acase make_embedding(titan_dtype dt, int N, int C, int V, int rep) {
    acase c = {.op = OP_EMB, .d = {N, C, V}, .dt = dt};
    char s[32];
    snprintf(s, sizeof s, "N%d C%d V%d", N, C, V);
    set_name(&c, "embedding", s);
    add_random(&c, (size_t)N * C, -1, 1); /* dout */
    uint32_t *tok = xmalloc((size_t)N * 4);
    for (int n = 0; n < N; n++) tok[n] = (uint32_t)(n % 3 == 0 ? rep : (n * 7) % V);
    add_input(&c, IN_RAW, (size_t)N * 4, tok);
    add_output(&c, "dwte", (size_t)V * C, 1, DW);
    free(tok);
    return c;
}

static acase make_rmsnorm(titan_dtype dt, int N, int C) {
    acase c = {.op = OP_RMSNORM, .d = {N, C}, .dt = dt};
    char s[32];
    snprintf(s, sizeof s, "N%d C%d", N, C);
    set_name(&c, "rmsnorm", s);
    add_random(&c, (size_t)N * C, -1, 1);    /* dout */
    add_random(&c, (size_t)N * C, -2, 2);    /* inp */
    add_random(&c, (size_t)C, 0.5, 1.5);     /* weight */
    void *y = xmalloc((size_t)N * C * 4);
    float *rstd = xmalloc((size_t)N * 4);
    titan_backend_cpu()->rmsnorm_forward(dt, y, rstd, c.in[1].h, c.in[2].h, N, C, 1e-5f);
    add_input(&c, IN_F32, (size_t)N, rstd);
    add_output(&c, "dinp", (size_t)N * C, 0, DX);
    add_output(&c, "dweight", (size_t)C, 1, DW);
    free(y), free(rstd);
    return c;
}

static acase make_rope(titan_dtype dt, int B, int T, int NHX, int HD) {
    acase c = {.op = OP_ROPE, .d = {B, T, NHX, HD}, .dt = dt};
    char s[48];
    snprintf(s, sizeof s, "B%d T%d NHX%d HD%d", B, T, NHX, HD);
    set_name(&c, "rope", s);
    size_t n = (size_t)B * T * NHX * HD, tab = (size_t)T * (HD / 2);
    add_random(&c, n, -1, 1); /* dout */
    float *cs = xmalloc(tab * 4), *sn = xmalloc(tab * 4);
    titan_rope_tables(cs, sn, T, HD, 500000.0f, 8.0f, 1.0f, 4.0f, 64);
    add_input(&c, IN_F32, tab, cs);
    add_input(&c, IN_F32, tab, sn);
    add_output(&c, "dinp", n, 0, DX);
    free(cs), free(sn);
    return c;
}

/* Tq < Tk: the queries are the last Tq of Tk positions (a context-parallel
 * chunk); dk, dv have all Tk rows. */
static acase make_attention(titan_dtype dt, int B, int Tq, int Tk, int NH, int NKV, int HD) {
    acase c = {.op = OP_ATTN, .d = {B, Tq, Tk, NH, NKV, HD}, .dt = dt};
    char s[48];
    if (Tq == Tk) snprintf(s, sizeof s, "B%d T%d NH%d NKV%d HD%d", B, Tq, NH, NKV, HD);
    else snprintf(s, sizeof s, "B%d Tq%d Tk%d NH%d NKV%d HD%d", B, Tq, Tk, NH, NKV, HD);
    set_name(&c, "attention", s);
    size_t nq = (size_t)B * Tq * NH * HD, nk = (size_t)B * Tk * NKV * HD;
    size_t nl = (size_t)B * NH * Tq;
    add_random(&c, nq, -1, 1); /* in[0] dout */
    void *o = xmalloc(nq * 4);
    float *lse = xmalloc(nl * 4);
    acase qkv = {.dt = dt}; /* q, k, v first: out and lse come from them */
    add_random(&qkv, nq, -1, 1);
    add_random(&qkv, nk, -1, 1);
    add_random(&qkv, nk, -1, 1);
    titan_backend_cpu()->attention_forward(dt, o, lse, qkv.in[0].h, qkv.in[1].h, qkv.in[2].h, B,
                                           Tq, Tk, NH, NKV, HD);
    add_input(&c, IN_DT, nq, o);   /* in[1] out */
    add_input(&c, IN_F32, nl, lse); /* in[2] lse */
    for (int i = 0; i < 3; i++) c.in[c.nin++] = qkv.in[i]; /* in[3..5] q, k, v */
    add_output(&c, "dq", nq, 0, DX);
    add_output(&c, "dk", nk, 0, DX);
    add_output(&c, "dv", nk, 0, DX);
    free(o), free(lse);
    return c;
}

static acase make_swiglu(titan_dtype dt, int N, int H) {
    acase c = {.op = OP_SWIGLU, .d = {N, H}, .dt = dt};
    char s[32];
    snprintf(s, sizeof s, "N%d H%d", N, H);
    set_name(&c, "swiglu", s);
    add_random(&c, (size_t)N * H, -1, 1); /* dout */
    add_random(&c, (size_t)N * H, -4, 4); /* h1 */
    add_random(&c, (size_t)N * H, -2, 2); /* h3 */
    add_output(&c, "dh1", (size_t)N * H, 0, DX);
    add_output(&c, "dh3", (size_t)N * H, 0, DX);
    return c;
}

/* ---------------------------------------------------------- comparisons */

/* Elements whose bits differ, +0 and -0 alike; *first the first. */
static size_t diff_bits(const void *a, const void *b, size_t n, size_t es, size_t *first) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t x = 0, y = 0, mag = es == 4 ? 0x7fffffffu : 0x7fffu;
        memcpy(&x, (const char *)a + i * es, es);
        memcpy(&y, (const char *)b + i * es, es);
        if (x != y && ((x | y) & mag) != 0 && !bad++) *first = i;
    }
    return bad;
}

/* bf16 values as ordered integers (+0 and -0 both 0), for ulp distances */
static long ord16(uint16_t h) { return h & 0x8000 ? -(long)(h & 0x7fff) : (long)h; }

/* One accumulated output: got against g0 + R (fp32: R the op into zeros;
 * bf16: Z the fp32 op on widened inputs into zeros). Appends to what. */
static int check_added(const acase *c, int j, const void *got, const void *g0, const void *R,
                       const float *Z, char *what, size_t len) {
    long ulps = c->op == OP_MATMUL; /* sgemm's K blocks: see the top */
    const output *o = &c->out[j];
    size_t es = out_esize(c, j), used = strlen(what);
    if (es == 4) {
        double err = 0.0, scale = 0.0;
        int nan = 0;
        for (size_t i = 0; i < o->n; i++) {
            double want = (double)((const float *)g0)[i] + ((const float *)R)[i];
            double d = fabs((double)((const float *)got)[i] - want);
            if (d != d) nan = 1;
            err = fmax(err, d), scale = fmax(scale, fabs(want));
        }
        double rel = err / (scale > 0 ? scale : 1.0);
        snprintf(what + used, len - used, " %s rel %.1e", o->name, rel);
        return !nan && rel <= 1e-6;
    }
    size_t exact = 0;
    long worst = 0;
    for (size_t i = 0; i < o->n; i++) {
        float sum = titan_bf16_to_f32(((const uint16_t *)g0)[i]) + Z[i]; /* one fp32 add */
        long d = labs(ord16(((const uint16_t *)got)[i]) - ord16(titan_f32_to_bf16(sum)));
        exact += d == 0;
        if (d > worst) worst = d;
    }
    snprintf(what + used, len - used, " %s %zu/%zu exact, max %ld ulp", o->name, exact, o->n,
             worst);
    return worst <= ulps;
}

/* ------------------------------------------------------------ the runs */

typedef struct {
    const titan_backend *b;
    const char *label;   /* "cpu", "cpu-guard" */
    void *din[MAX_IN];   /* the inputs on b */
    void *dout[MAX_OUT]; /* the outputs on b */
    void *R[MAX_OUT];    /* host: outputs into zeros, every bit set */
    float *Z[MAX_OUT];   /* host: the f32 op on widened inputs, into zeros (bf16 outputs) */
} rig;

/* Fills host buffer p (n elements of es bytes): 0 zeros, 1 NaN, 2 random
 * bits, 3 random values in [-1, 1) (rounded to bf16 when es is 2). */
static void fill(void *p, size_t n, size_t es, int how) {
    uint64_t s = stream++;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = 0;
        float f = (float)(2.0 * titan_rng_uniform(13, s, i) - 1.0);
        if (how == 1) u = es == 4 ? 0x7fc00000u : 0x7fc0u;
        if (how == 2) u = (uint32_t)titan_rng_u64(13, s, i);
        if (how == 3 && es == 4) memcpy(&u, &f, 4);
        if (how == 3 && es == 2) u = titan_f32_to_bf16(f);
        memcpy((char *)p + i * es, &u, es);
    }
}

/* Runs the op on the rig with outputs set from init[] (NULL init: the
 * output is passed as NULL), results to host res[]. */
static void run_rig(const acase *c, rig *r, int acc, void *const *init, void *const *res) {
    void *outs[MAX_OUT] = {0};
    for (int j = 0; j < c->nout; j++) {
        if (!init[j]) continue;
        outs[j] = r->dout[j];
        r->b->to_device(outs[j], init[j], c->out[j].n * out_esize(c, j));
    }
    run_op(c, r->b, c->dt, acc, r->din, outs);
    r->b->sync();
    for (int j = 0; j < c->nout; j++)
        if (init[j]) r->b->to_host(res[j], r->dout[j], c->out[j].n * out_esize(c, j));
}

/* Rows of an embedding case that no token hits: each must read 0. */
static void check_absent_rows(const acase *c, const rig *r, const float *dwte) {
    int N = c->d[0], C = c->d[1], V = c->d[2], absent = 0, bad = 0;
    const uint32_t *tok = c->in[1].h;
    char *hit = calloc((size_t)V, 1), name[96], what[64];
    for (int n = 0; n < N; n++) hit[tok[n]] = 1;
    for (int v = 0; v < V; v++) {
        if (hit[v]) continue;
        absent++;
        for (int i = 0; i < C; i++) bad += dwte[(size_t)v * C + i] != 0.0f;
    }
    snprintf(name, sizeof name, "%s %s: absent rows 0", c->name, r->label);
    snprintf(what, sizeof what, "%d of %d rows absent, %d nonzero", absent, V, bad);
    report(!bad && absent > 0, name, what);
    free(hit);
}

/* One check: outputs whose bit is in `add` start as g0 and must read g0 +
 * R; the others start as `how` (1 NaN, 2 junk) and must read R; outputs in
 * `null` are passed as NULL. */
static void check_mask(const acase *c, rig *r, int acc, int add, int how, int null,
                       const char *what_run) {
    void *init[MAX_OUT] = {0}, *res[MAX_OUT] = {0};
    for (int j = 0; j < c->nout; j++) {
        if (null >> j & 1) continue;
        size_t es = out_esize(c, j);
        init[j] = xmalloc(c->out[j].n * es), res[j] = xmalloc(c->out[j].n * es);
        fill(init[j], c->out[j].n, es, (add & c->out[j].bit) ? 3 : how);
    }
    run_rig(c, r, acc, init, res);
    char name[128], what[256] = "";
    snprintf(name, sizeof name, "%s %s: %s", c->name, r->label, what_run);
    int ok = 1;
    for (int j = 0; j < c->nout; j++) {
        if (!init[j]) continue;
        if (add & c->out[j].bit) {
            ok &= check_added(c, j, res[j], init[j], r->R[j], r->Z[j], what, sizeof what);
            continue;
        }
        size_t first = 0, bad = diff_bits(res[j], r->R[j], c->out[j].n, out_esize(c, j), &first);
        size_t used = strlen(what);
        if (bad)
            snprintf(what + used, sizeof what - used, " %s %zu/%zu differ, first [%zu]",
                     c->out[j].name, bad, c->out[j].n, first);
        else
            snprintf(what + used, sizeof what - used, " %s = R", c->out[j].name);
        ok &= !bad;
    }
    report(ok, name, what + 1);
    if (c->op == OP_EMB && how == 1 && !add) check_absent_rows(c, r, res[0]);
    for (int j = 0; j < c->nout; j++) free(init[j]), free(res[j]);
}

/* Every check of one case on backend b; R_cpu (the cpu's R) when b is not the cpu. */
static void run_case(const acase *c, const titan_backend *b, const char *label, void *const *R_cpu,
                     void **R_keep) {
    rig r = {.b = b, .label = label};
    for (int i = 0; i < c->nin; i++) {
        size_t nb = in_bytes(c, &c->in[i]);
        r.din[i] = b->alloc(nb);
        b->to_device(r.din[i], c->in[i].h, nb);
    }
    void *zeros[MAX_OUT];
    for (int j = 0; j < c->nout; j++) {
        size_t nb = c->out[j].n * out_esize(c, j);
        r.dout[j] = b->alloc(nb);
        r.R[j] = xmalloc(nb);
        zeros[j] = calloc(nb ? nb : 1, 1);
    }
    run_rig(c, &r, ALL, zeros, r.R);
    /* Z: the f32 op on the widened inputs (cpu, host memory) */
    if (c->dt != F32) {
        const void *fin[MAX_IN];
        void *fout[MAX_OUT];
        for (int i = 0; i < c->nin; i++)
            fin[i] = c->in[i].kind == IN_RAW ? c->in[i].h : (const void *)c->in[i].f;
        for (int j = 0; j < c->nout; j++) fout[j] = r.Z[j] = calloc(c->out[j].n ? c->out[j].n : 1, 4);
        run_op(c, titan_backend_cpu(), F32, ALL, (void *const *)fin, fout);
    }
    char name[128];
    if (R_cpu) {
        int same = 1;
        for (int j = 0; j < c->nout; j++)
            same &= !memcmp(R_cpu[j], r.R[j], c->out[j].n * out_esize(c, j));
        snprintf(name, sizeof name, "%s %s: into zeros = cpu", c->name, label);
        report(same, name, same ? "bitwise equal" : "bits differ");
    }
    check_mask(c, &r, 0, 0, 1, 0, "acc 0 into NaN = R");
    check_mask(c, &r, 0, 0, 2, 0, "acc 0 into junk = R");
    int bits = 0;
    for (int j = 0; j < c->nout; j++) bits |= c->out[j].bit;
    check_mask(c, &r, ALL, ALL, 1, 0, "acc all into g0 = g0 + R");
    if (bits == ALL) {
        check_mask(c, &r, DX, DX, 1, 0, "acc DX: dinp adds, param grad over NaN = R");
        check_mask(c, &r, DW, DW, 1, 0, "acc DW: param grad adds, dinp over NaN = R");
    }
    if (c->op == OP_MATMUL) {
        check_mask(c, &r, 0, 0, 1, 1, "acc 0, dinp NULL: dw = R");
        check_mask(c, &r, 0, 0, 1, 2, "acc 0, dw NULL: dinp = R");
        check_mask(c, &r, DX, DX, 1, 2, "acc DX, dw NULL: dinp adds");
    }
    for (int i = 0; i < c->nin; i++) b->free(r.din[i]);
    for (int j = 0; j < c->nout; j++) {
        b->free(r.dout[j]), free(zeros[j]), free(r.Z[j]);
        if (R_keep) R_keep[j] = r.R[j];
        else free(r.R[j]);
    }
}

/* cpu, then (guard set) cpu-guard on the same case */
static void run_both(acase c, int guard) {
    void *R[MAX_OUT] = {0};
    run_case(&c, titan_backend_cpu(), "cpu", NULL, R);
    if (guard) run_case(&c, titan_backend_cpu_guard(), "cpu-guard", R, NULL);
    for (int j = 0; j < c.nout; j++) free(R[j]);
    free_case(&c);
}

/* N = 0 rows: nothing to add, so an overwritten parameter gradient is all zeros. */
static void test_empty(titan_dtype dt) {
    const titan_backend *b = titan_backend_cpu();
    int C = 40, V = 7, OC = 9; /* dw holds V*C or OC*C floats */
    float *dw = xmalloc((size_t)OC * C * 4);
    char name[96];
    size_t first = 0;
    float *zero = calloc((size_t)OC * C, 4);
    uint16_t one[1] = {0};
    fill(dw, (size_t)V * C, 4, 1);
    b->embedding_backward(dt, 0, dw, one, (const uint32_t *)one, 0, C, V);
    snprintf(name, sizeof name, "embedding N0 %s: acc 0 into NaN", titan_dtype_name(dt));
    size_t bad = diff_bits(dw, zero, (size_t)V * C, 4, &first);
    report(!bad, name, bad ? "dwte not all 0" : "dwte all 0");
    fill(dw, (size_t)OC * C, 4, 1);
    b->matmul_backward(dt, 0, NULL, dw, one, one, one, 0, C, OC);
    snprintf(name, sizeof name, "matmul N0 %s: acc 0 into NaN", titan_dtype_name(dt));
    bad = diff_bits(dw, zero, (size_t)OC * C, 4, &first);
    report(!bad, name, bad ? "dw not all 0" : "dw all 0");
    fill(dw, (size_t)C, 4, 1);
    uint16_t *w16 = calloc((size_t)C, 4); /* weight: C elements of dt */
    b->rmsnorm_backward(dt, DX, one, dw, one, one, w16, (const float *)one, 0, C);
    snprintf(name, sizeof name, "rmsnorm N0 %s: acc DX into NaN dweight", titan_dtype_name(dt));
    bad = diff_bits(dw, zero, (size_t)C, 4, &first);
    report(!bad, name, bad ? "dweight not all 0" : "dweight all 0");
    free(dw), free(zero), free(w16);
}

int main(void) {
    titan_backend_cpu_set_threads(0);
    for (int t = 0; t < 2; t++) {
        titan_dtype dt = t ? BF16 : F32;
        run_both(make_matmul(dt, 37, 70, 45), 1);
        run_both(make_matmul(dt, 256, 256, 256), 0); /* two sgemm blocks a product */
        run_both(make_embedding(dt, 40, 72, 50, 5), 1);
        run_both(make_embedding(dt, 300, 200, 1000, 999), 0); /* threaded column blocks */
        run_both(make_rmsnorm(dt, 13, 53), 1);
        run_both(make_rmsnorm(dt, 400, 200), 0); /* threaded; bf16 in 2 pieces */
        run_both(make_rope(dt, 2, 11, 3, 8), 1);
        run_both(make_rope(dt, 2, 300, 4, 64), 0); /* bf16 pieces inside a sequence */
        run_both(make_attention(dt, 2, 37, 37, 4, 2, 16), 1);  /* GQA, ragged tile */
        run_both(make_attention(dt, 1, 150, 150, 2, 1, 32), 0); /* MQA, several tiles */
        run_both(make_attention(dt, 2, 65, 65, 4, 1, 12), 0);  /* HD not a multiple of 16 */
        run_both(make_attention(dt, 2, 70, 163, 4, 2, 16), 1); /* a chunk: keys before it */
        run_both(make_attention(dt, 1, 1, 100, 4, 1, 32), 0);  /* one query (decode-like) */
        run_both(make_swiglu(dt, 7, 300), 1);
        run_both(make_swiglu(dt, 140, 500), 0); /* threaded; bf16 in 2 pieces */
        test_empty(dt);
    }
    if (failures) {
        printf("test_ops_acc: %d of %d check(s) FAILED\n", failures, checks);
        return 1;
    }
    printf("test_ops_acc: all %d checks passed\n", checks);
    return 0;
}
