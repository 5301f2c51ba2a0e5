/* box.c - boxes of a global tensor: intersection and region copies. */
#include <stddef.h> /* box.h uses size_t without including it */
#include <string.h>

#include "box.h"

#include "core/error.h"

int64_t titan_box_numel(const titan_box *b) {
    int64_t n = 1;
    for (int d = 0; d < b->ndim; d++) n *= b->size[d];
    return n;
}

int titan_box_intersect(const titan_box *a, const titan_box *b, titan_box *out) {
    TITAN_ASSERT(a->ndim == b->ndim && a->ndim >= 0 && a->ndim <= TITAN_MAX_DIMS);
    titan_box r;
    memset(&r, 0, sizeof r);
    r.ndim = a->ndim;
    int nonempty = 1;
    for (int d = 0; d < a->ndim; d++) {
        int64_t lo = a->offset[d] > b->offset[d] ? a->offset[d] : b->offset[d];
        int64_t ha = a->offset[d] + a->size[d], hb = b->offset[d] + b->size[d];
        int64_t hi = ha < hb ? ha : hb;
        r.offset[d] = lo;
        r.size[d] = hi > lo ? hi - lo : 0;
        if (hi <= lo) nonempty = 0;
    }
    *out = r;
    return nonempty;
}

static int box_contains(const titan_box *outer, const titan_box *inner) {
    for (int d = 0; d < inner->ndim; d++)
        if (inner->offset[d] < outer->offset[d] ||
            inner->offset[d] + inner->size[d] > outer->offset[d] + outer->size[d])
            return 0;
    return 1;
}

void titan_box_copy(void *dst, const titan_box *dbox, const void *src, const titan_box *sbox,
                    const titan_box *region, size_t elem) {
    int nd = region->ndim;
    TITAN_ASSERT(nd >= 0 && nd <= TITAN_MAX_DIMS && dbox->ndim == nd && sbox->ndim == nd);
    TITAN_ASSERT(box_contains(dbox, region) && box_contains(sbox, region));
    for (int d = 0; d < nd; d++)
        if (region->size[d] <= 0) return;

    /* Row-major byte strides of both chunks and the region's start offsets. */
    int64_t sstride[TITAN_MAX_DIMS], dstride[TITAN_MAX_DIMS];
    int64_t soff = 0, doff = 0, ss = (int64_t)elem, ds = (int64_t)elem;
    for (int d = nd - 1; d >= 0; d--) {
        sstride[d] = ss;
        dstride[d] = ds;
        soff += (region->offset[d] - sbox->offset[d]) * ss;
        doff += (region->offset[d] - dbox->offset[d]) * ds;
        ss *= sbox->size[d];
        ds *= dbox->size[d];
    }
    /* The contiguous run: the innermost dims, merged outward while the
     * region spans them whole in both chunks. */
    int inner = nd; /* dims [inner, nd) form one run */
    int64_t run = (int64_t)elem;
    while (inner > 0) {
        int d = inner - 1;
        run *= region->size[d];
        inner--;
        if (region->size[d] != sbox->size[d] || region->size[d] != dbox->size[d]) break;
    }
    const char *s = (const char *)src + soff;
    char *t = (char *)dst + doff;
    if (inner == 0) {
        memcpy(t, s, (size_t)run);
        return;
    }
    /* Odometer over the outer dims [0, inner). */
    int64_t idx[TITAN_MAX_DIMS] = {0};
    for (;;) {
        int64_t so = 0, dof = 0;
        for (int d = 0; d < inner; d++) {
            so += idx[d] * sstride[d];
            dof += idx[d] * dstride[d];
        }
        memcpy(t + dof, s + so, (size_t)run);
        int d = inner - 1;
        while (d >= 0 && ++idx[d] == region->size[d]) idx[d--] = 0;
        if (d < 0) return;
    }
}
