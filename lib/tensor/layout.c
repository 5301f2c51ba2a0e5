/* layout.c - parallel layouts: parsing, rank coordinates, the box each rank holds. */
#include "tensor/layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keys in format order, and where each lives in the struct. */
static const struct {
    const char *key;
    size_t off;
} keys[] = {
    {"dp_replicate", offsetof(titan_layout, dp_replicate)},
    {"dp_shard", offsetof(titan_layout, dp_shard)},
    {"cp", offsetof(titan_layout, cp)},
    {"tp", offsetof(titan_layout, tp)},
    {"pp", offsetof(titan_layout, pp)},
};
#define NKEYS ((int)(sizeof keys / sizeof keys[0]))

static int *degree(titan_layout *l, int k) { return (int *)((char *)l + keys[k].off); }
static int degree_of(const titan_layout *l, int k) { return *(const int *)((const char *)l + keys[k].off); }

titan_layout titan_layout_single(void) { return (titan_layout){1, 1, 1, 1, 1}; }

int titan_layout_world(const titan_layout *l) {
    return l->dp_replicate * l->dp_shard * l->cp * l->tp * l->pp;
}

static int is_single(const titan_layout *l) { return titan_layout_world(l) == 1; }

static titan_status bad_item(const char *s, const char *item, size_t n, const char *why) {
    titan_error(TITAN_ERR_USAGE, "layout '%s': '%.*s': %s", s, (int)n, item, why);
    titan_error_hint("a layout is key=value items joined by commas, keys dp_replicate, dp_shard, cp, "
                     "tp, pp (missing ones are 1), e.g. \"dp_shard=4,tp=2\"");
    return TITAN_ERR_USAGE;
}

titan_status titan_layout_parse(const char *s, titan_layout *out) {
    titan_layout l = titan_layout_single();
    int seen[NKEYS] = {0};
    const char *p = s;
    while (*p == ' ') p++;
    if (!strncmp(p, "single", 6) && p[6 + strspn(p + 6, " ")] == '\0') {
        *out = l;
        return TITAN_OK;
    }
    if (!*p) return titan_error(TITAN_ERR_USAGE, "layout is empty (give e.g. \"dp_shard=4,tp=2\" or \"single\")");
    for (;;) {
        while (*p == ' ') p++;
        size_t n = strcspn(p, ",");
        size_t m = n;
        while (m > 0 && p[m - 1] == ' ') m--;
        const char *eq = memchr(p, '=', m);
        if (!eq) return bad_item(s, p, m, "expected key=value");
        size_t kl = (size_t)(eq - p);
        while (kl > 0 && p[kl - 1] == ' ') kl--;
        int k = 0;
        while (k < NKEYS && !(strlen(keys[k].key) == kl && !strncmp(keys[k].key, p, kl))) k++;
        if (k == NKEYS) return bad_item(s, p, m, "unknown key");
        if (seen[k]++) return bad_item(s, p, m, "key given twice");
        const char *v = eq + 1;
        while (*v == ' ') v++;
        char *end;
        errno = 0;
        long x = strtol(v, &end, 10);
        if (end == v || end != p + m || errno || x < 1 || x > TITAN_LAYOUT_MAX_WORLD)
            return bad_item(s, p, m, "the degree is not an integer >= 1");
        *degree(&l, k) = (int)x;
        p += n;
        if (!*p) break;
        p++; /* the comma */
    }
    int64_t world = 1;
    for (int k = 0; k < NKEYS; k++) {
        world *= degree_of(&l, k);
        if (world > TITAN_LAYOUT_MAX_WORLD)
            return titan_error(TITAN_ERR_USAGE, "layout '%s': more than %d ranks", s, TITAN_LAYOUT_MAX_WORLD);
    }
    *out = l;
    return TITAN_OK;
}

void titan_layout_format(const titan_layout *l, char *out, size_t cap) {
    if (!cap) return;
    if (is_single(l)) {
        snprintf(out, cap, "single");
        return;
    }
    size_t k = 0;
    out[0] = '\0';
    for (int i = 0; i < NKEYS && k < cap; i++) {
        int w = snprintf(out + k, cap - k, "%s%s=%d", i ? "," : "", keys[i].key, degree_of(l, i));
        if (w < 0) break;
        k += (size_t)w;
    }
}

void titan_layout_coord_of(const titan_layout *l, int rank, titan_layout_coord *c) {
    c->tp = rank % l->tp;
    rank /= l->tp;
    c->cp = rank % l->cp;
    rank /= l->cp;
    c->dp_shard = rank % l->dp_shard;
    rank /= l->dp_shard;
    c->dp_replicate = rank % l->dp_replicate;
    c->pp = rank / l->dp_replicate;
}

int titan_layout_rank_of(const titan_layout *l, const titan_layout_coord *c) {
    return (((c->pp * l->dp_replicate + c->dp_replicate) * l->dp_shard + c->dp_shard) * l->cp + c->cp) * l->tp +
           c->tp;
}

void titan_layout_chunk(int64_t n, int k, int i, int64_t *off, int64_t *len) {
    int64_t c = (n + k - 1) / k;
    int64_t o = c * i;
    if (o > n) o = n;
    *off = o;
    *len = n - o < c ? n - o : c;
}

titan_status titan_layout_check(const titan_layout *l, int n_layers) {
    if (n_layers < 0) return titan_error(TITAN_ERR_USAGE, "layout: %d layers", n_layers);
    if (l->pp > n_layers + 2) {
        titan_error(TITAN_ERR_USAGE, "layout: pp=%d stages for a model of %d layers (at most %d: the "
                    "embedding and the output count as one layer each)", l->pp, n_layers, n_layers + 2);
        return TITAN_ERR_USAGE;
    }
    return TITAN_OK;
}

void titan_layout_cp_chunks(int T, int cp, int c, int chunk[2]) {
    int len = T / (2 * cp);
    chunk[0] = c * len;
    chunk[1] = (2 * cp - 1 - c) * len;
}

/* torchtitan's default split (one stage per pp rank): the embedding and the
 * output head weigh one layer each; the effective layers are divided evenly,
 * the remainder going one each to the first stages. Requires pp <= layers + 2. */
void titan_layout_stage_layers(const titan_layout *l, int n_layers, int stage, int *first, int *end) {
    int pp = l->pp, eff = n_layers + 2;
    int per = eff / pp, extra = eff % pp;
    int cur = 0, lo = 0;
    for (int i = 0; i < pp - 1; i++) {
        cur += i == 0 ? per - 1 : per;
        if (extra > 0) {
            cur++;
            extra--;
        }
        if (cur > n_layers) cur = n_layers; /* only when pp > layers + 2, which check refuses */
        if (i == stage) {
            *first = lo;
            *end = cur;
            return;
        }
        lo = cur;
    }
    *first = lo;
    *end = n_layers;
}

int titan_layout_stage(const titan_layout *l, int n_layers, int block) {
    if (l->pp == 1 || block <= 0) return 0;
    if (block > n_layers) return l->pp - 1;
    for (int s = 0; s < l->pp; s++) {
        int a, b;
        titan_layout_stage_layers(l, n_layers, s, &a, &b);
        if (block - 1 < b) return s;
    }
    return l->pp - 1;
}

int titan_layout_box(const titan_layout *l, int n_layers, titan_layout_place place, int ndim,
                     const int64_t *shape, int rank, titan_box *box, int *writes) {
    if (writes) *writes = 0;
    if (ndim < 1 || ndim > TITAN_MAX_DIMS || rank < 0 || rank >= titan_layout_world(l)) return 0;
    titan_layout_coord c;
    titan_layout_coord_of(l, rank, &c);
    if (c.pp != titan_layout_stage(l, n_layers, place.block)) return 0;
    titan_box b;
    memset(&b, 0, sizeof b);
    b.ndim = ndim;
    for (int d = 0; d < ndim; d++) b.size[d] = shape[d];
    int td = place.tp_dim;
    if (td >= ndim) td = -1;
    if (td >= 0) titan_layout_chunk(shape[td], l->tp, c.tp, &b.offset[td], &b.size[td]);
    /* FSDP: dim-0 chunk of the tp-local box, over dp_shard x cp (dp_shard major). */
    int64_t off, len;
    titan_layout_chunk(b.size[0], l->dp_shard * l->cp, c.dp_shard * l->cp + c.cp, &off, &len);
    b.offset[0] += off;
    b.size[0] = len;
    for (int d = 0; d < ndim; d++)
        if (b.size[d] == 0) return 0;
    *box = b;
    if (writes) *writes = c.dp_replicate == 0 && (td >= 0 || c.tp == 0);
    return 1;
}
