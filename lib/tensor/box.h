/* box.h - a chunk of a global tensor: offsets and sizes per dimension.
 * A sharded tensor is a set of boxes that cover its global shape exactly once. */
#ifndef TITAN_TENSOR_BOX_H
#define TITAN_TENSOR_BOX_H

#include <stddef.h>
#include <stdint.h>

#define TITAN_MAX_DIMS 4

typedef struct {
    int ndim;
    int64_t offset[TITAN_MAX_DIMS];
    int64_t size[TITAN_MAX_DIMS];
} titan_box;

int64_t titan_box_numel(const titan_box *b);
/* Intersection of a and b; returns 0 when empty. */
int titan_box_intersect(const titan_box *a, const titan_box *b, titan_box *out);
/* Copies the region `region` (global coordinates) from src (a dense chunk laid
 * out over box sbox) into dst (a dense chunk over box dbox). elem = bytes per element. */
void titan_box_copy(void *dst, const titan_box *dbox, const void *src, const titan_box *sbox,
                    const titan_box *region, size_t elem);

#endif
