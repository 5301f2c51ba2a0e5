/* cpu_ops.h - the CPU backend's ops, one file each; cpu_backend.c puts them
 * in the titan_backend table. Internal to lib/backend/cpu.
 *
 * Determinism rule for every op here: work is split into pieces whose
 * boundaries depend only on the shapes (rows, fixed blocks, tiles), never on
 * the thread count, and every reduction runs in a fixed order inside one
 * piece. The same inputs give the same bits with 1 or 64 threads. */
#ifndef TITAN_BACKEND_CPU_OPS_H
#define TITAN_BACKEND_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "tensor/dtype.h"

/* Elementwise work is cut into blocks of this many floats (a multiple of 64). */
#define TITAN_CPU_BLOCK 8192

/* cpu_backend.c: helpers shared by the ops */
double titan_cpu_sumsq(const float *x, size_t n);
/* sum of x[i]^2 of one short row in double, 16 lanes folded in a fixed order */
double titan_cpu_row_sumsq(const float *x, size_t n);
/* y[i] = exp(x[i]) for x <= 88; exactly 0 below -87.3 (vectorised, ~1 ulp) */
void titan_cpu_exp(float *y, const float *x, int n);
void titan_cpu_add(float *out, const float *a, const float *b, size_t n);
/* dst[i] = dst[i] + x[i] (add) or x[i]: a backward op's last step, never
 * fused with the product that made x (the acc rule, backend.h) */
void titan_cpu_store_grad(float *dst, const float *x, size_t n, int add);
void titan_cpu_scale(float *x, size_t n, float s);

/* matmul.c */
void titan_cpu_matmul_forward(float *out, const float *inp, const float *w, int N, int IC, int OC);
void titan_cpu_matmul_add_forward(float *out, const float *inp, const float *w, const float *resid,
                                  int N, int IC, int OC);
/* Backward ops take backend.h's acc mask first: which outputs add (+=). */
void titan_cpu_matmul_backward(int acc, float *dinp, float *dw, const float *dout,
                               const float *inp, const float *w, int N, int IC, int OC);

/* fp8_matmul.c: float8 linears (backend.h), emulated as torchao's
 * emulate=True: operands cast to float8 bytes, dequantized to fp32
 * (decode / scale) and multiplied by the fp32 kernels above. */
int titan_cpu_fp8_matmul_forward(titan_dtype dt, const titan_fp8_recipe *r, void *out, const void *inp,
                                 const void *w, const void *resid, int N, int IC, int OC);
int titan_cpu_fp8_matmul_backward(titan_dtype dt, const titan_fp8_recipe *r, int acc, void *dinp, float *dw,
                                  const void *dout, const void *inp, const void *w, int N, int IC, int OC);
/* One float8 operand [rows, cols] of type dt: q (bytes), scale (its
 * titan_fp8_nscales) and deq = fp32(decode(q) / scale) (NULL: not made);
 * scaled from amax where given, else from x's own. */
void titan_cpu_fp8_quantize(uint8_t *q, float *scale, float *deq, const void *x, titan_dtype dt, int rows,
                            int cols, titan_fp8_axis axis, titan_fp8_format f, int pow2, const float *amax);
/* backend.h's fp8_amax */
void titan_cpu_fp8_amax(titan_dtype dt, float *amax, const void *x, int rows, int cols, titan_fp8_axis axis);
/* backend.h's fp8_quantize, fp8_dequantize */
void titan_cpu_fp8_quantize_op(titan_dtype dt, uint8_t *q, float *scale, const void *x, int rows, int cols,
                               titan_fp8_axis axis, titan_fp8_format f, int pow2, const float *amax);
void titan_cpu_fp8_dequantize(titan_dtype dt, void *out, const uint8_t *q, const float *scale, size_t n,
                              titan_fp8_format f);

/* embedding.c */
void titan_cpu_embedding_forward(float *out, const uint32_t *tokens, const float *wte, int N,
                                 int C, int V);
void titan_cpu_embedding_backward(int acc, float *dwte, const float *dout, const uint32_t *tokens,
                                  int N, int C, int V);

/* rmsnorm.c */
void titan_cpu_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight,
                               int N, int C, float eps);
void titan_cpu_rmsnorm_backward(int acc, float *dinp, float *dweight, const float *dout, const float *inp,
                                const float *weight, const float *rstd, int N, int C);

/* rope.c */
void titan_cpu_rope_forward(float *out, const float *inp, const float *cos, const float *sin,
                            int B, int T, int NHX, int HD);
void titan_cpu_rope_backward(int acc, float *dinp, const float *dout, const float *cos, const float *sin,
                             int B, int T, int NHX, int HD);

/* attention.c */
/* q[B,Tq,NH,HD] are the last Tq of the Tk positions of k, v[B,Tk,NKV,HD]
 * (backend.h); 1 <= Tq <= Tk. */
void titan_cpu_attention_forward(float *out, float *lse, const float *q, const float *k,
                                 const float *v, int B, int Tq, int Tk, int NH, int NKV, int HD);
void titan_cpu_attention_backward(int acc, float *dq, float *dk, float *dv, const float *dout,
                                  const float *out, const float *lse, const float *q,
                                  const float *k, const float *v, int B, int Tq, int Tk, int NH,
                                  int NKV, int HD);
/* The same with query 0 at key position off (the above: off = Tk - Tq);
 * off >= Tk sees every key, unmasked. */
void titan_cpu_attention_forward_at(float *out, float *lse, const float *q, const float *k, const float *v, int B,
                                    int Tq, int Tk, int off, int NH, int NKV, int HD);
void titan_cpu_attention_backward_at(int acc, float *dq, float *dk, float *dv, const float *dout, const float *out,
                                     const float *lse, const float *q, const float *k, const float *v, int B, int Tq,
                                     int Tk, int off, int NH, int NKV, int HD);

/* swiglu.c */
void titan_cpu_swiglu_forward(float *out, const float *h1, const float *h3, int N, int H);
void titan_cpu_swiglu_backward(int acc, float *dh1, float *dh3, const float *dout, const float *h1,
                               const float *h3, int N, int H);

/* cross_entropy.c */
void titan_cpu_cross_entropy(float *losses, float *dlogits, const float *logits,
                             const uint32_t *targets, int N, int V, float dscale,
                             const float *lse);
void titan_cpu_logsumexp(float *lse, const float *logits, int N, int V);

/* adamw.c */
void titan_cpu_adamw_step(float *p, void *p_bf16, const float *g, float gscale, float *m,
                          float *v, size_t n, float lr, float beta1, float beta2, float eps,
                          float weight_decay, int64_t t);

/* galore.c: GaLore's low-rank Adam and update (backend.h) */
void titan_cpu_galore_adam(float *m, float *v, float *low, size_t n, float b1, float w1, float b2, float w2,
                           float eps);
void titan_cpu_galore_update(float *p, const float *upd, size_t n, float scale, float step, float decay);

/* linalg.c: LAPACK (backend.h's qr_orthonormal, svd_thin, svd_signs) */
int titan_cpu_qr_orthonormal(float *a, int rows, int cols);
int titan_cpu_svd_thin(const float *a, int rows, int cols, int k, float *u, float *vt);
void titan_cpu_svd_signs(float *u, float *vt, int rows, int cols, int k);
/* LAPACK dgesdd of the column-major rows x cols a (overwritten): s
 * (min(rows, cols)); u (rows x p, ld rows) and vt (p x cols, ld p) both
 * NULL for the values alone. Returns info (-1000: out of memory). */
int titan_cpu_dgesdd(double *a, int rows, int cols, double *s, double *u, double *vt);

/* lowp.c: the table's convert and typed compute entries (backend.h). F32
 * calls the kernels above; BF16 runs them on widened fp32 copies and
 * rounds each output once. */
void titan_cpu_convert(void *dst, titan_dtype dst_type, const void *src, titan_dtype src_type,
                       size_t n);
void titan_cpu_dt_matmul_forward(titan_dtype dt, void *out, const void *inp, const void *w, int N,
                                 int IC, int OC);
void titan_cpu_dt_matmul_add_forward(titan_dtype dt, void *out, const void *inp, const void *w,
                                     const void *resid, int N, int IC, int OC);
void titan_cpu_dt_matmul_backward(titan_dtype dt, int acc, void *dinp, float *dw, const void *dout,
                                  const void *inp, const void *w, int N, int IC, int OC);
void titan_cpu_dt_add(titan_dtype dt, void *out, const void *a, const void *b, size_t n);
void titan_cpu_dt_embedding_forward(titan_dtype dt, void *out, const uint32_t *tokens,
                                    const void *wte, int N, int C, int V);
void titan_cpu_dt_embedding_backward(titan_dtype dt, int acc, float *dwte, const void *dout,
                                     const uint32_t *tokens, int N, int C, int V);
void titan_cpu_dt_rmsnorm_forward(titan_dtype dt, void *out, float *rstd, const void *inp,
                                  const void *weight, int N, int C, float eps);
void titan_cpu_dt_rmsnorm_backward(titan_dtype dt, int acc, void *dinp, float *dweight, const void *dout,
                                   const void *inp, const void *weight, const float *rstd, int N,
                                   int C);
void titan_cpu_dt_rope_forward(titan_dtype dt, void *out, const void *inp, const float *cos,
                               const float *sin, int B, int T, int NHX, int HD);
void titan_cpu_dt_rope_backward(titan_dtype dt, int acc, void *dinp, const void *dout, const float *cos,
                                const float *sin, int B, int T, int NHX, int HD);
void titan_cpu_dt_attention_forward(titan_dtype dt, void *out, float *lse, const void *q,
                                    const void *k, const void *v, int B, int Tq, int Tk, int NH,
                                    int NKV, int HD);
void titan_cpu_dt_attention_backward(titan_dtype dt, int acc, void *dq, void *dk, void *dv,
                                     const void *dout, const void *out, const float *lse,
                                     const void *q, const void *k, const void *v, int B, int Tq,
                                     int Tk, int NH, int NKV, int HD);
void titan_cpu_dt_attention_forward_at(titan_dtype dt, void *out, float *lse, const void *q, const void *k,
                                       const void *v, int B, int Tq, int Tk, int off, int NH, int NKV, int HD);
void titan_cpu_dt_attention_backward_at(titan_dtype dt, int acc, void *dq, void *dk, void *dv, const void *dout,
                                        const void *out, const float *lse, const void *q, const void *k,
                                        const void *v, int B, int Tq, int Tk, int off, int NH, int NKV, int HD);
void titan_cpu_dt_swiglu_forward(titan_dtype dt, void *out, const void *h1, const void *h3, int N,
                                 int H);
void titan_cpu_dt_swiglu_backward(titan_dtype dt, int acc, void *dh1, void *dh3, const void *dout,
                                  const void *h1, const void *h3, int N, int H);
void titan_cpu_dt_cross_entropy(titan_dtype dt, float *losses, void *dlogits, const void *logits,
                                const uint32_t *targets, int N, int V, float dscale,
                                const float *lse);
void titan_cpu_dt_logsumexp(titan_dtype dt, float *lse, const void *logits, int N, int V);
/* attention_merge.c: backend.h's attention_merge (dt f32 or bf16) */
void titan_cpu_attention_merge(titan_dtype dt, float *acc, float *acc_lse, const void *out, const float *lse, int B,
                               int T, int NH, int HD, int first);

#endif
