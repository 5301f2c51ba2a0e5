/* test_attention_chunk.c - the CPU attention op with queries that are the
 * last Tq of Tk positions (backend.h; context parallelism cuts a sequence's
 * queries into such chunks). With dt = f32:
 *   - forward out and lse against a naive double-precision reference, for
 *     Tq and Tk - Tq not multiples of the 64-row tile, Tq = 1, GQA with
 *     NH/NKV = 2 and 4, HD 16/32/64/100/128;
 *   - dq, dk, dv against central finite differences of that reference
 *     (small shapes, Tq < Tk), and the acc mode adding into them;
 *   - the chunk property: cutting a T-long sequence's queries into chunks
 *     [a, a+L), each called with Tq = L, Tk = a + L on k, v rows [0, a+L),
 *     gives the whole call's out, lse and dq rows bit for bit, and the
 *     chunks' dk, dv (zero-padded to T) sum to the whole call's within 4e-6
 *     (fp32 sums in other groupings: about 1e-6 apart).
 *     Bitwise because a chunk's query meets the same key tiles in the same
 *     order as in the whole call, plus fully masked tiles that add exact
 *     zeros: exp(-inf) = 0 and the online softmax's rescale exp(0) = 1
 *     exactly in titan_cpu_exp (checked first). dk, dv sum over other
 *     groupings of the queries, so only to rounding;
 *   - attention_forward_at / _backward_at with off = Tk (every key, the
 *     ring's blocks): each query's out, lse and dq the bits of that query
 *     alone seeing all Tk keys through the causal op, dk and dv their sum;
 *   - the bits do not depend on the thread count.
 * One line per check; exit 1 on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h" /* titan_cpu_exp */
#include "core/rng.h"

#include "ops_test.h"

#define F32 TITAN_DTYPE_F32

static const titan_backend *be;

/* ------------------------------------------------------------- checks */

static void test_exp_exact(void) {
    float x[3] = {0.0f, -INFINITY, -0.0f}, y[3];
    titan_cpu_exp(y, x, 3);
    int ok = y[0] == 1.0f && y[1] == 0.0f && y[2] == 1.0f && !signbit(y[1]);
    printf("%-4s %-50s exp(0) = %.9g, exp(-inf) = %g\n", ok ? "ok" : "FAIL",
           "exp(0) = 1 and exp(-inf) = +0 exactly", y[0], y[1]);
    if (!ok) failures++;
}

/* Forward against the reference; with fd, the backward against finite
 * differences; then acc adds (x2) and 1 vs 2 threads give the same bits. */
static void test_case(int B, int Tq, int Tk, int NH, int NKV, int HD, int fd) {
    char name[112], sh[64];
    snprintf(sh, sizeof sh, "B%d Tq%d Tk%d NH%d NKV%d HD%d", B, Tq, Tk, NH, NKV, HD);
    size_t nq = (size_t)B * Tq * NH * HD, nk = (size_t)B * Tk * NKV * HD, nl = (size_t)B * NH * Tq;
    float *q = randf(nq, -1.5, 1.5), *k = randf(nk, -1.5, 1.5), *v = randf(nk, -1, 1);
    float *wt = randf(nq, -1, 1), *out = zerosf(nq), *lse = zerosf(nl);
    at_ctx c = {B, Tq, Tk, NH, NKV, HD, to_double(q, nq), to_double(k, nk), to_double(v, nk), wt};
    double *oref = zerosd(nq), *lref = zerosd(nl);
    at_ref(oref, lref, &c);
    be->attention_forward(F32, out, lse, q, k, v, B, Tq, Tk, NH, NKV, HD);
    snprintf(name, sizeof name, "fwd %s", sh);
    check(name, out, oref, nq, 1e-5);
    snprintf(name, sizeof name, "lse %s", sh);
    check(name, lse, lref, nl, 1e-6);

    float *dq = zerosf(nq), *dk = zerosf(nk), *dv = zerosf(nk);
    be->attention_backward(F32, 0, dq, dk, dv, wt, out, lse, q, k, v, B, Tq, Tk, NH, NKV, HD);
    if (fd) {
        snprintf(name, sizeof name, "dq (fd) %s", sh);
        check_grad(name, at_loss, &c, c.q, dq, nq, 1e-4);
        snprintf(name, sizeof name, "dk (fd) %s", sh);
        check_grad(name, at_loss, &c, c.k, dk, nk, 1e-4);
        snprintf(name, sizeof name, "dv (fd) %s", sh);
        check_grad(name, at_loss, &c, c.v, dv, nk, 1e-4);
    }
    double *t = zerosd(nq + 2 * nk);
    for (size_t i = 0; i < nq; i++) t[i] = 2.0 * dq[i];
    for (size_t i = 0; i < nk; i++) t[nq + i] = 2.0 * dk[i], t[nq + nk + i] = 2.0 * dv[i];
    float *g1 = malloc((nq + 2 * nk) * sizeof(float));
    memcpy(g1, dq, nq * 4), memcpy(g1 + nq, dk, nk * 4), memcpy(g1 + nq + nk, dv, nk * 4);
    be->attention_backward(F32, TITAN_ACC_DX, dq, dk, dv, wt, out, lse, q, k, v, B, Tq, Tk, NH,
                           NKV, HD);
    snprintf(name, sizeof name, "bwd adds (x2) dq %s", sh);
    check(name, dq, t, nq, 1e-6);
    snprintf(name, sizeof name, "bwd adds (x2) dk %s", sh);
    check(name, dk, t + nq, nk, 1e-6);
    snprintf(name, sizeof name, "bwd adds (x2) dv %s", sh);
    check(name, dv, t + nq + nk, nk, 1e-6);

    /* one thread gives the bits of two */
    float *o1 = zerosf(nq), *l1 = zerosf(nl), *g2 = zerosf(nq + 2 * nk);
    titan_backend_cpu_set_threads(1);
    be->attention_forward(F32, o1, l1, q, k, v, B, Tq, Tk, NH, NKV, HD);
    be->attention_backward(F32, 0, g2, g2 + nq, g2 + nq + nk, wt, out, lse, q, k, v, B, Tq, Tk, NH,
                           NKV, HD);
    titan_backend_cpu_set_threads(0);
    int same = !memcmp(o1, out, nq * 4) && !memcmp(l1, lse, nl * 4) &&
               !memcmp(g2, g1, (nq + 2 * nk) * 4);
    snprintf(name, sizeof name, "1 thread = 2 threads %s", sh);
    check_bits(name, &same, &(int){1}, sizeof same);
    free(q), free(k), free(v), free(wt), free(out), free(lse), free(c.q), free(c.k), free(c.v);
    free(oref), free(lref), free(dq), free(dk), free(dv), free(t), free(g1), free(o1), free(l1);
    free(g2);
}

/* Chunks [cut[i], cut[i+1]) of a T-long sequence's queries against the whole
 * call. The chunk's tensors are gathered from the whole ones per batch row. */
static void test_chunks(int B, int T, int NH, int NKV, int HD, const int *cut, int ncut) {
    char name[112], sh[48];
    snprintf(sh, sizeof sh, "B%d T%d NH%d NKV%d HD%d", B, T, NH, NKV, HD);
    size_t qrow = (size_t)NH * HD, krow = (size_t)NKV * HD;
    size_t nq = (size_t)B * T * qrow, nk = (size_t)B * T * krow, nl = (size_t)B * NH * T;
    float *q = randf(nq, -1.5, 1.5), *k = randf(nk, -1.5, 1.5), *v = randf(nk, -1, 1);
    float *dy = randf(nq, -1, 1), *out = zerosf(nq), *lse = zerosf(nl);
    float *dq = zerosf(nq), *dk = zerosf(nk), *dv = zerosf(nk);
    be->attention_forward(F32, out, lse, q, k, v, B, T, T, NH, NKV, HD);
    be->attention_backward(F32, 0, dq, dk, dv, dy, out, lse, q, k, v, B, T, T, NH, NKV, HD);
    /* the chunks' results, scattered back to whole-call layout */
    float *cout = zerosf(nq), *clse = zerosf(nl), *cdq = zerosf(nq);
    double *sdk = zerosd(nk), *sdv = zerosd(nk);
    for (int ci = 0; ci + 1 < ncut; ci++) {
        int a = cut[ci], L = cut[ci + 1] - a, Tk = a + L;
        size_t mq = (size_t)B * L * qrow, mk = (size_t)B * Tk * krow, ml = (size_t)B * NH * L;
        float *xq = zerosf(mq), *xdy = zerosf(mq), *xk = zerosf(mk), *xv = zerosf(mk);
        float *xo = zerosf(mq), *xl = zerosf(ml), *xdq = zerosf(mq);
        float *xdk = randf(mk, -1, 1), *xdv = randf(mk, -1, 1); /* overwritten: all Tk rows */
        for (int b = 0; b < B; b++) {
            memcpy(xq + (size_t)b * L * qrow, q + ((size_t)b * T + a) * qrow, L * qrow * 4);
            memcpy(xdy + (size_t)b * L * qrow, dy + ((size_t)b * T + a) * qrow, L * qrow * 4);
            memcpy(xk + (size_t)b * Tk * krow, k + (size_t)b * T * krow, Tk * krow * 4);
            memcpy(xv + (size_t)b * Tk * krow, v + (size_t)b * T * krow, Tk * krow * 4);
        }
        be->attention_forward(F32, xo, xl, xq, xk, xv, B, L, Tk, NH, NKV, HD);
        be->attention_backward(F32, 0, xdq, xdk, xdv, xdy, xo, xl, xq, xk, xv, B, L, Tk, NH, NKV,
                               HD);
        for (int b = 0; b < B; b++) {
            memcpy(cout + ((size_t)b * T + a) * qrow, xo + (size_t)b * L * qrow, L * qrow * 4);
            memcpy(cdq + ((size_t)b * T + a) * qrow, xdq + (size_t)b * L * qrow, L * qrow * 4);
            for (int h = 0; h < NH; h++)
                memcpy(clse + ((size_t)b * NH + h) * T + a, xl + ((size_t)b * NH + h) * L, L * 4);
            for (size_t i = 0; i < (size_t)Tk * krow; i++) {
                sdk[(size_t)b * T * krow + i] += xdk[(size_t)b * Tk * krow + i];
                sdv[(size_t)b * T * krow + i] += xdv[(size_t)b * Tk * krow + i];
            }
        }
        free(xq), free(xdy), free(xk), free(xv), free(xo), free(xl), free(xdq), free(xdk);
        free(xdv);
    }
    snprintf(name, sizeof name, "chunks: out = whole call's %s", sh);
    check_bits(name, cout, out, nq * 4);
    snprintf(name, sizeof name, "chunks: lse = whole call's %s", sh);
    check_bits(name, clse, lse, nl * 4);
    snprintf(name, sizeof name, "chunks: dq = whole call's %s", sh);
    check_bits(name, cdq, dq, nq * 4);
    /* the whole call's dk, dv against the chunks' sum (in double): each side
     * adds up to T * NH / NKV fp32 terms per element in its own grouping,
     * about 1e-6 of rounding apart (measured up to 1.2e-6) */
    snprintf(name, sizeof name, "chunks: sum dk = whole call's %s", sh);
    check(name, dk, sdk, nk, 4e-6);
    snprintf(name, sizeof name, "chunks: sum dv = whole call's %s", sh);
    check(name, dv, sdv, nk, 4e-6);
    free(q), free(k), free(v), free(dy), free(out), free(lse), free(dq), free(dk);
    free(dv), free(cout), free(clse), free(cdq), free(sdk), free(sdv);
}

/* attention_forward_at / _backward_at with off = Tk: every query sees every
 * key (a ring block wholly before the queries). Each query row must be the
 * bits of that query alone at position Tk - 1 of the causal op (Tq = 1:
 * it sees all Tk keys), dq too; dk, dv the sum of the lone queries' to
 * rounding (4e-6, as above). */
static void test_unmasked(int B, int Tq, int Tk, int NH, int NKV, int HD) {
    char name[112], sh[48];
    snprintf(sh, sizeof sh, "B%d Tq%d Tk%d NH%d NKV%d HD%d", B, Tq, Tk, NH, NKV, HD);
    size_t qrow = (size_t)NH * HD, krow = (size_t)NKV * HD;
    size_t nq = (size_t)B * Tq * qrow, nk = (size_t)B * Tk * krow, nl = (size_t)B * NH * Tq;
    float *q = randf(nq, -1.5, 1.5), *k = randf(nk, -1.5, 1.5), *v = randf(nk, -1, 1), *dy = randf(nq, -1, 1);
    float *out = zerosf(nq), *lse = zerosf(nl), *dq = zerosf(nq), *dk = zerosf(nk), *dv = zerosf(nk);
    be->attention_forward_at(F32, out, lse, q, k, v, B, Tq, Tk, Tk, NH, NKV, HD);
    be->attention_backward_at(F32, 0, dq, dk, dv, dy, out, lse, q, k, v, B, Tq, Tk, Tk, NH, NKV, HD);
    float *rout = zerosf(nq), *rlse = zerosf(nl), *rdq = zerosf(nq), *xdk = zerosf(krow * Tk), *xdv = zerosf(krow * Tk);
    float *xl = zerosf(NH);
    double *sdk = zerosd(nk), *sdv = zerosd(nk);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tq; i++) {
            size_t qo = ((size_t)b * Tq + i) * qrow, ko = (size_t)b * Tk * krow;
            be->attention_forward(F32, rout + qo, xl, q + qo, k + ko, v + ko, 1, 1, Tk, NH, NKV, HD);
            for (int h = 0; h < NH; h++) rlse[((size_t)b * NH + h) * Tq + i] = xl[h];
            be->attention_backward(F32, 0, rdq + qo, xdk, xdv, dy + qo, rout + qo, xl, q + qo, k + ko, v + ko, 1, 1,
                                   Tk, NH, NKV, HD);
            for (size_t e = 0; e < (size_t)Tk * krow; e++) sdk[ko + e] += xdk[e], sdv[ko + e] += xdv[e];
        }
    snprintf(name, sizeof name, "unmasked: out = lone queries' %s", sh);
    check_bits(name, out, rout, nq * 4);
    snprintf(name, sizeof name, "unmasked: lse = lone queries' %s", sh);
    check_bits(name, lse, rlse, nl * 4);
    snprintf(name, sizeof name, "unmasked: dq = lone queries' %s", sh);
    check_bits(name, dq, rdq, nq * 4);
    snprintf(name, sizeof name, "unmasked: dk = lone queries' sum %s", sh);
    check(name, dk, sdk, nk, 4e-6);
    snprintf(name, sizeof name, "unmasked: dv = lone queries' sum %s", sh);
    check(name, dv, sdv, nk, 4e-6);
    free(q), free(k), free(v), free(dy), free(out), free(lse), free(dq), free(dk), free(dv);
    free(rout), free(rlse), free(rdq), free(xdk), free(xdv), free(xl), free(sdk), free(sdv);
}

int main(void) {
    be = titan_backend_cpu();
    titan_backend_cpu_set_threads(0);
    test_exp_exact();
    /* reference and finite differences (small), then larger forward-only */
    test_case(2, 9, 23, 4, 2, 16, 1);   /* GQA 2, offset 14 */
    test_case(1, 1, 40, 4, 1, 32, 1);   /* one query, GQA 4 */
    test_case(1, 12, 80, 2, 1, 16, 1);  /* keys in two tiles, the queries in the second */
    test_case(1, 6, 20, 2, 2, 100, 1);  /* generic HD */
    test_case(2, 37, 100, 4, 2, 16, 0); /* Tq and Tk - Tq not tile multiples */
    test_case(1, 1, 130, 4, 1, 32, 0);  /* Tq = 1 behind three key tiles */
    test_case(1, 64, 192, 4, 2, 64, 0); /* tile-aligned chunk */
    test_case(1, 70, 135, 8, 2, 100, 0); /* GQA 4, Tq and offset 65 */
    test_case(2, 130, 200, 2, 2, 16, 0); /* three query tiles, offset 70 */
    test_case(1, 5, 300, 2, 1, 128, 0);
    test_case(1, 100, 100, 4, 2, 32, 0); /* Tq = Tk */
    /* chunks of a sequence: ragged, tile-aligned, one-query, uneven */
    test_chunks(2, 200, 4, 2, 16, (int[]){0, 37, 100, 164, 200}, 5);
    test_chunks(1, 256, 4, 1, 64, (int[]){0, 64, 128, 192, 256}, 5);
    test_chunks(1, 150, 8, 2, 100, (int[]){0, 1, 2, 149, 150}, 5);
    test_chunks(1, 190, 2, 2, 32, (int[]){0, 95, 190}, 3);
    /* every key (context parallelism's ring): tile-aligned, ragged, more queries than keys */
    test_unmasked(1, 64, 64, 4, 2, 16);
    test_unmasked(2, 37, 100, 4, 2, 32);
    test_unmasked(1, 130, 70, 2, 1, 64);
    if (failures) {
        printf("test_attention_chunk: %d check(s) FAILED\n", failures);
        return 1;
    }
    printf("test_attention_chunk: all checks passed\n");
    return 0;
}
