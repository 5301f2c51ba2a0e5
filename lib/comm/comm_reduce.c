/* comm_reduce.c - the reduction every host-buffer backend shares (comm.h:
 * rank order, in f32, bf16 rounded once), so that shm and mpi give the
 * same bits. */
#include <stdint.h>
#include <string.h>

#include "comm_impl.h"

#define RBLK 1024 /* elements reduced per block: an accumulator that stays in L1 */

static inline float bf16_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The same rounding as titan_f32_to_bf16 (tensor/dtype.c), inlined for speed. */
static inline uint16_t f32_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* out1[i] (and out2[i]) = src[0][i] + src[1][i] + ... + src[n-1][i], in that
 * order in f32, then / n for avg. out1 and out2 may each be one of the
 * sources: a block is read whole before it is written. */
void comm_reduce_ranks(const unsigned char *const *src, int n, size_t m, titan_dtype dt, int avg,
                   void *out1, void *out2) {
    float acc[RBLK];
    float fn = (float)n;
    for (size_t i0 = 0; i0 < m; i0 += RBLK) {
        size_t b = m - i0 < RBLK ? m - i0 : RBLK;
        if (dt == TITAN_DTYPE_F32) {
            const float *p0 = (const float *)src[0] + i0;
            for (size_t i = 0; i < b; i++) acc[i] = p0[i];
            for (int j = 1; j < n; j++) {
                const float *pj = (const float *)src[j] + i0;
                for (size_t i = 0; i < b; i++) acc[i] += pj[i];
            }
            if (avg)
                for (size_t i = 0; i < b; i++) acc[i] /= fn;
            memcpy((float *)out1 + i0, acc, b * 4);
            if (out2) memcpy((float *)out2 + i0, acc, b * 4);
        } else {
            const uint16_t *p0 = (const uint16_t *)src[0] + i0;
            for (size_t i = 0; i < b; i++) acc[i] = bf16_f32(p0[i]);
            for (int j = 1; j < n; j++) {
                const uint16_t *pj = (const uint16_t *)src[j] + i0;
                for (size_t i = 0; i < b; i++) acc[i] += bf16_f32(pj[i]);
            }
            if (avg)
                for (size_t i = 0; i < b; i++) acc[i] /= fn;
            uint16_t *o1 = (uint16_t *)out1 + i0, *o2 = out2 ? (uint16_t *)out2 + i0 : NULL;
            for (size_t i = 0; i < b; i++) {
                uint16_t h = f32_bf16(acc[i]);
                o1[i] = h;
                if (o2) o2[i] = h;
            }
        }
    }
}


void titan_comm_sum_ranks(const void *const *src, int n, size_t m, titan_dtype dt, void *out) {
    comm_reduce_ranks((const unsigned char *const *)src, n, m, dt, 0, out, NULL);
}
