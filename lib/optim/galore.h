/* galore.h - GaLore's projection (Zhao et al. 2024, "GaLore: Memory-
 * Efficient LLM Training by Gradient Low-Rank Projection"; at scale: Su,
 * Gu, Xu, Tian, Zhao 2025, "GaLore 2"): a matrix's gradient G (m x n) is
 * projected onto r leading singular vectors of a recent gradient, Adam's
 * moments live in that r-dimensional space, and the normalised update is
 * projected back. Used by titan_optim (optim.h); exposed for tests. */
#ifndef TITAN_OPTIM_GALORE_H
#define TITAN_OPTIM_GALORE_H

#include <stdint.h>

#include "optim/optim.h"

/* Whether a matrix of m x n is projected on the right (low = G Q^T with Q
 * r x n, the leading right vectors; else low = P^T G with P m x r). */
int titan_galore_is_right(titan_galore_proj t, int64_t m, int64_t n);
/* low (right: m x r; left: r x n) from g (m x n, row-major) and the
 * projector proj (right: r x n; left: m x r): host memory, through the CPU
 * backend's GEMMs (a step runs the same products on its own backend). */
void titan_galore_project(const float *g, int64_t m, int64_t n, const float *proj, int r, int right, float *low);
/* full (m x n) = scale x the back-projection of low. */
void titan_galore_project_back(const float *low, int64_t m, int64_t n, const float *proj, int r, int right,
                               float scale, float *full);

#endif
