/* attention_tc_check.cu - kernels/attention_tc.cu on a real GPU: the check
 * that the emulator (tests/emu) cannot make, since there the mma.sync
 * fragment layouts are the emulator's own reading of the PTX ISA.
 *
 * Run by hand or by scripts/gpu-check.sh on a machine with an sm_80 or later
 * GPU (not part of `make all`: nothing here runs without one). Standalone,
 * because libtitan-cuda.so hides its symbols; from the repository root:
 *   mkdir -p build && /usr/local/cuda/bin/nvcc -std=c++17 -O3 -arch=native \
 *       -Ilib -Ikernels tests/gpu/attention_tc_check.cu kernels/attention_tc.cu kernels/attention_tc_bwd.cu \
 *       -o build/attention_tc_check && build/attention_tc_check
 *
 * Compares forward (out, lse) and backward (dq, dk, dv added into random
 * nonzero gradients, and overwritten over NaN) with a double-precision CPU
 * reference on small shapes (normalised L2 error < 2e-2, lse within 1e-3,
 * the same bits from a second run), Tq = Tk and context-parallel chunks (the
 * queries the last Tq of Tk positions), then times two Llama-sized shapes
 * and a chunk (backward overwriting, as the model's first writer of a
 * gradient). Exit 0 when every shape passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <random>
#include <vector>

#include "cuda_ops.cuh"
#include "bf16_check.h"

#include "cuda_standins.h" /* cuda_backend.cu's, which this program does not link */

static float bfr(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

template <typename X>
static X *dev(const std::vector<X> &h) {
    X *d;
    CUDA_CHECK(cudaMalloc(&d, h.size() * sizeof(X) + 16));
    CUDA_CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(X), cudaMemcpyHostToDevice));
    return d;
}
template <typename X>
static std::vector<X> host(const X *d, size_t n) {
    std::vector<X> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(X), cudaMemcpyDeviceToHost));
    return h;
}
/* query i at position Tk - Tq + i sees keys 0 .. Tk - Tq + i */
static int check(int B, int Tq, int Tk, int NH, int NKV, int HD, unsigned seed) {
    std::mt19937 g(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    size_t nq = (size_t)B * Tq * NH * HD, nk = (size_t)B * Tk * NKV * HD,
           nl = (size_t)B * NH * Tq;
    auto rnd = [&](size_t n, float a) {
        std::vector<float> x(n);
        for (auto &e : x) e = bfr(a * nd(g));
        return x;
    };
    std::vector<float> q = rnd(nq, 1.5f), k = rnd(nk, 1.5f), v = rnd(nk, 1), dout = rnd(nq, 1);
    std::vector<float> g0q = rnd(nq, 0.05f), g0k = rnd(nk, 0.05f), g0v = rnd(nk, 0.05f);
    bf16 *qd = dev(to_bf16(q)), *kd = dev(to_bf16(k)), *vd = dev(to_bf16(v)), *ddo = dev(to_bf16(dout));
    bf16 *ob = dev(std::vector<bf16>(nq)), *gq = dev(to_bf16(g0q)), *gk = dev(to_bf16(g0k)),
         *gv = dev(to_bf16(g0v));
    float *dlse = dev(std::vector<float>(nl));
    titan_cuda_attention_tc_forward(ob, dlse, qd, kd, vd, B, Tq, Tk, NH, NKV, HD);
    titan_cuda_attention_tc_backward(1, gq, gk, gv, ddo, ob, dlse, qd, kd, vd, B, Tq, Tk, NH,
                                     NKV, HD);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<bf16> out = host(ob, nq), rq = host(gq, nq), rk = host(gk, nk), rv = host(gv, nk);
    std::vector<float> lse = host(dlse, nl);
    /* again: the same bits */
    CUDA_CHECK(cudaMemcpy(gq, to_bf16(g0q).data(), nq * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(gk, to_bf16(g0k).data(), nk * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(gv, to_bf16(g0v).data(), nk * 2, cudaMemcpyHostToDevice));
    titan_cuda_attention_tc_forward(ob, dlse, qd, kd, vd, B, Tq, Tk, NH, NKV, HD);
    titan_cuda_attention_tc_backward(1, gq, gk, gv, ddo, ob, dlse, qd, kd, vd, B, Tq, Tk, NH,
                                     NKV, HD);
    CUDA_CHECK(cudaDeviceSynchronize());
    bool same = memcmp(host(ob, nq).data(), out.data(), nq * 2) == 0 &&
                memcmp(host(dlse, nl).data(), lse.data(), nl * 4) == 0 &&
                memcmp(host(gq, nq).data(), rq.data(), nq * 2) == 0 &&
                memcmp(host(gk, nk).data(), rk.data(), nk * 2) == 0 &&
                memcmp(host(gv, nk).data(), rv.data(), nk * 2) == 0;
    /* overwritten: all-ones bytes are bf16 NaN, which must not be read */
    CUDA_CHECK(cudaMemset(gq, 0xff, nq * 2));
    CUDA_CHECK(cudaMemset(gk, 0xff, nk * 2));
    CUDA_CHECK(cudaMemset(gv, 0xff, nk * 2));
    titan_cuda_attention_tc_backward(0, gq, gk, gv, ddo, ob, dlse, qd, kd, vd, B, Tq, Tk, NH,
                                     NKV, HD);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<bf16> wq = host(gq, nq), wk = host(gk, nk), wv = host(gv, nk);

    /* reference (double): forward from q, k, v; backward from the kernel's out and lse */
    std::vector<double> ro(nq, 0), rl(nl), tq(nq), tk(nk), tv(nk);
    for (size_t i = 0; i < nq; i++) tq[i] = g0q[i];
    for (size_t i = 0; i < nk; i++) tk[i] = g0k[i], tv[i] = g0v[i];
    std::vector<float> of = to_f32(out);
    double scale = 1.0 / sqrt((double)HD), e_lse = 0;
    std::vector<double> s(Tk);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            int kh = h / (NH / NKV);
            for (int i = 0; i < Tq; i++) {
                size_t qo = (((size_t)b * Tq + i) * NH + h) * HD;
                double m = -INFINITY, l = 0, D = 0;
                const int last = Tk - Tq + i;
                for (int j = 0; j <= last; j++) {
                    size_t ko = (((size_t)b * Tk + j) * NKV + kh) * HD;
                    double d = 0;
                    for (int x = 0; x < HD; x++) d += (double)q[qo + x] * k[ko + x];
                    s[j] = d * scale;
                    m = std::max(m, s[j]);
                }
                for (int j = 0; j <= last; j++) l += exp(s[j] - m);
                for (int j = 0; j <= last; j++) {
                    size_t ko = (((size_t)b * Tk + j) * NKV + kh) * HD;
                    for (int x = 0; x < HD; x++) ro[qo + x] += exp(s[j] - m) / l * v[ko + x];
                }
                size_t li = ((size_t)b * NH + h) * Tq + i;
                rl[li] = m + log(l);
                e_lse = std::max(e_lse, fabs(rl[li] - lse[li]));
                for (int x = 0; x < HD; x++) D += (double)dout[qo + x] * of[qo + x];
                for (int j = 0; j <= last; j++) {
                    size_t ko = (((size_t)b * Tk + j) * NKV + kh) * HD;
                    double dp = 0;
                    for (int x = 0; x < HD; x++) dp += (double)dout[qo + x] * v[ko + x];
                    double p = exp(s[j] - lse[li]), ds = p * (dp - D);
                    for (int x = 0; x < HD; x++) {
                        tv[ko + x] += p * dout[qo + x];
                        tk[ko + x] += scale * ds * q[qo + x];
                        tq[qo + x] += scale * ds * k[ko + x];
                    }
                }
            }
        }
    double e_o = nerr(of, ro), e_q = nerr(to_f32(rq), tq), e_k = nerr(to_f32(rk), tk),
           e_v = nerr(to_f32(rv), tv);
    for (size_t i = 0; i < nq; i++) tq[i] -= g0q[i]; /* the gradients alone */
    for (size_t i = 0; i < nk; i++) tk[i] -= g0k[i], tv[i] -= g0v[i];
    double e_w = std::max({nerr(to_f32(wq), tq), nerr(to_f32(wk), tk), nerr(to_f32(wv), tv)});
    bool ok = std::max({e_o, e_q, e_k, e_v, e_w}) < 2e-2 && e_lse < 1e-3 && same;
    printf("%s B=%d Tq=%d Tk=%d NH=%d NKV=%d HD=%d: out %.2e lse %.1e dq %.2e dk %.2e dv %.2e "
           "overwrite %.2e %s\n",
           ok ? "ok  " : "FAIL", B, Tq, Tk, NH, NKV, HD, e_o, e_lse, e_q, e_k, e_v, e_w,
           same ? "same bits" : "BITS DIFFER");
    for (void *p : {(void *)qd, (void *)kd, (void *)vd, (void *)ddo, (void *)ob, (void *)gq,
                    (void *)gk, (void *)gv, (void *)dlse})
        CUDA_CHECK(cudaFree(p));
    return ok ? 0 : 1;
}

static void bench(int B, int Tq, int Tk, int NH, int NKV, int HD) {
    size_t nq = (size_t)B * Tq * NH * HD, nk = (size_t)B * Tk * NKV * HD,
           nl = (size_t)B * NH * Tq;
    std::vector<bf16> hq(nq), hk(nk);
    std::mt19937 g(9);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto &e : hq) e = __float2bfloat16_rn(nd(g));
    for (auto &e : hk) e = __float2bfloat16_rn(nd(g));
    bf16 *q = dev(hq), *k = dev(hk), *v = dev(hk), *o = dev(hq), *dq = dev(hq), *dk = dev(hk),
         *dv = dev(hk), *dout = dev(hq);
    float *lse = dev(std::vector<float>(nl));
    cudaEvent_t e0, e1, e2;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    CUDA_CHECK(cudaEventCreate(&e2));
    const int reps = 10;
    titan_cuda_attention_tc_forward(o, lse, q, k, v, B, Tq, Tk, NH, NKV, HD); /* warm up */
    titan_cuda_attention_tc_backward(0, dq, dk, dv, dout, o, lse, q, k, v, B, Tq, Tk, NH, NKV, HD);
    CUDA_CHECK(cudaEventRecord(e0));
    for (int i = 0; i < reps; i++)
        titan_cuda_attention_tc_forward(o, lse, q, k, v, B, Tq, Tk, NH, NKV, HD);
    CUDA_CHECK(cudaEventRecord(e1));
    for (int i = 0; i < reps; i++)
        titan_cuda_attention_tc_backward(0, dq, dk, dv, dout, o, lse, q, k, v, B, Tq, Tk, NH,
                                         NKV, HD);
    CUDA_CHECK(cudaEventRecord(e2));
    CUDA_CHECK(cudaEventSynchronize(e2));
    float tf, tb;
    CUDA_CHECK(cudaEventElapsedTime(&tf, e0, e1));
    CUDA_CHECK(cudaEventElapsedTime(&tb, e1, e2));
    /* causal forward: row i sees Tk - Tq + i + 1 keys */
    double flops = 4.0 * B * NH * ((double)Tq * (Tk - Tq) + (double)Tq * Tq / 2) * HD;
    printf("bench B=%d Tq=%d Tk=%d NH=%d NKV=%d HD=%d: forward %.3f ms (%.0f TFLOP/s), backward "
           "%.3f ms (%.0f TFLOP/s at 2.5x forward flops)\n",
           B, Tq, Tk, NH, NKV, HD, tf / reps, flops / (tf / reps * 1e-3) / 1e12, tb / reps,
           2.5 * flops / (tb / reps * 1e-3) / 1e12);
    for (void *p : {(void *)q, (void *)k, (void *)v, (void *)o, (void *)dq, (void *)dk, (void *)dv,
                    (void *)dout, (void *)lse})
        CUDA_CHECK(cudaFree(p));
}

int main(void) {
    int fails = 0;
    fails += check(1, 1, 1, 1, 1, 64, 1);
    fails += check(2, 100, 100, 4, 2, 64, 2);
    fails += check(1, 257, 257, 8, 2, 64, 3);
    fails += check(2, 130, 130, 4, 1, 128, 4);
    fails += check(1, 300, 300, 8, 8, 128, 5);
    /* context-parallel chunks: offsets 256 and 128 (whole key tiles), 130 and 30 (not) */
    fails += check(1, 128, 384, 8, 2, 64, 6);
    fails += check(2, 100, 228, 4, 1, 64, 7);
    fails += check(2, 100, 230, 4, 1, 128, 8);
    fails += check(1, 200, 230, 8, 2, 128, 9);
    bench(4, 2048, 2048, 32, 8, 128);
    bench(8, 2048, 2048, 16, 4, 64);
    bench(4, 1024, 4096, 32, 8, 128); /* the last quarter of a 4096-token sequence */
    printf(fails ? "FAILED %d\n" : "all ok\n", fails);
    return fails != 0;
}
