/* clip.c - global-norm gradient clipping with torch.nn.utils.clip_grad_norm_ semantics. */
#include <math.h>

#include "optim/optim.h"

double titan_grad_norm(const titan_backend *be, const float *grads, size_t n) {
    return sqrt(be->sumsq(grads, n));
}

/* torch forms the coefficient in fp32 and skips nothing; multiplying by a
 * clamped 1.0 is the identity, so scaling only when < 1 matches. */
float titan_clip_coef(double norm, double max_norm) {
    if (!(max_norm > 0.0) || !isfinite(norm)) return 1.0f;
    float coef = (float)max_norm / ((float)norm + 1e-6f);
    return coef < 1.0f ? coef : 1.0f;
}

void titan_clip_scale(const titan_backend *be, float *grads, size_t n, double norm, double max_norm) {
    float coef = titan_clip_coef(norm, max_norm);
    if (coef != 1.0f) be->scale(grads, n, coef);
}

double titan_clip_grad_norm(const titan_backend *be, float *grads, size_t n, double max_norm) {
    double norm = titan_grad_norm(be, grads, n);
    titan_clip_scale(be, grads, n, norm, max_norm);
    return norm;
}
