/* layout.c - parallel layouts: parsing, rank coordinates, the box each rank holds. */
#include "tensor/layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keys in format order, and where each lives in the struct; the first
 * five are degrees (the world is their product), the rest the stage split
 * (formatted only where it is not the default; 0 allowed for the weights). */
static const struct {
    const char *key;
    size_t off;
    int min;
} keys[] = {
    {"dp_replicate", offsetof(titan_layout, dp_replicate), 1},
    {"dp_shard", offsetof(titan_layout, dp_shard), 1},
    {"cp", offsetof(titan_layout, cp), 1},
    {"tp", offsetof(titan_layout, tp), 1},
    {"pp", offsetof(titan_layout, pp), 1},
    {"pp_v", offsetof(titan_layout, pp_v), 1},
    {"pp_first_less", offsetof(titan_layout, pp_first_less), 0},
    {"pp_last_less", offsetof(titan_layout, pp_last_less), 0},
    {"pp_vshape", offsetof(titan_layout, pp_vshape), 0},
};
#define NKEYS ((int)(sizeof keys / sizeof keys[0]))
#define NDEGREES 5

static int *degree(titan_layout *l, int k) { return (int *)((char *)l + keys[k].off); }
static int degree_of(const titan_layout *l, int k) { return *(const int *)((const char *)l + keys[k].off); }

titan_layout titan_layout_single(void) { return (titan_layout){1, 1, 1, 1, 1, 0, 0, 0, 0, {0}}; }

void titan_layout_split(const titan_layout *l, int *v, int *first_less, int *last_less) {
    int set = l->pp_v > 0;
    *v = set ? l->pp_v : 1;
    *first_less = set ? l->pp_first_less : 1;
    *last_less = set ? l->pp_last_less : 1;
}

int titan_layout_stages(const titan_layout *l) {
    int v, a, b;
    titan_layout_split(l, &v, &a, &b);
    return l->pp * v;
}

/* Whether the split is the default one (formatted as nothing). */
static int default_split(const titan_layout *l) {
    int v, a, b;
    titan_layout_split(l, &v, &a, &b);
    return v == 1 && a == 1 && b == 1 && !l->pp_vshape && !l->pp_layers.n;
}

int titan_layout_world(const titan_layout *l) {
    return l->dp_replicate * l->dp_shard * l->cp * l->tp * l->pp;
}

static int is_single(const titan_layout *l) { return titan_layout_world(l) == 1; }

/* "1:3:2:2" into *sl (a count each, >= 0, at most TITAN_LAYOUT_MAX_STAGES). */
static int parse_stage_layers(const char *v, size_t len, titan_stage_layers *sl) {
    sl->n = 0;
    for (size_t i = 0; i < len;) {
        char *end;
        errno = 0;
        long x = strtol(v + i, &end, 10);
        if (end == v + i || errno || x < 0 || x > 32767 || sl->n == TITAN_LAYOUT_MAX_STAGES) return 0;
        sl->count[sl->n++] = (short)x;
        i = (size_t)(end - v);
        if (i < len && v[i] != ':') return 0;
        if (i < len && ++i == len) return 0; /* a trailing ':' */
    }
    return sl->n > 0;
}

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
        if (kl == 9 && !strncmp(p, "pp_layers", 9)) { /* an explicit split: counts joined by ':' */
            const char *v = eq + 1;
            while (*v == ' ') v++;
            if (l.pp_layers.n) return bad_item(s, p, m, "key given twice");
            if (!parse_stage_layers(v, (size_t)(p + m - v), &l.pp_layers))
                return bad_item(s, p, m, "expected layer counts >= 0 joined by ':', e.g. 1:3:2:2");
            p += n;
            if (!*p) break;
            p++;
            continue;
        }
        int k = 0;
        while (k < NKEYS && !(strlen(keys[k].key) == kl && !strncmp(keys[k].key, p, kl))) k++;
        if (k == NKEYS) return bad_item(s, p, m, "unknown key");
        if (seen[k]++) return bad_item(s, p, m, "key given twice");
        const char *v = eq + 1;
        while (*v == ' ') v++;
        char *end;
        errno = 0;
        long x = strtol(v, &end, 10);
        if (end == v || end != p + m || errno || x < keys[k].min || x > TITAN_LAYOUT_MAX_WORLD)
            return bad_item(s, p, m, keys[k].min ? "the value is not an integer >= 1" : "the value is not an integer >= 0");
        *degree(&l, k) = (int)x;
        p += n;
        if (!*p) break;
        p++; /* the comma */
    }
    if (l.pp_vshape > 1) return bad_item(s, "pp_vshape", 9, "the placement is 0 (looped) or 1 (V)");
    if (l.pp_vshape && (!seen[5] || l.pp_v != 2))
        return bad_item(s, "pp_vshape", 9, "the V placement holds two stages a rank (pp_v=2)");
    /* Any of the split's keys given: the others default to 1. */
    if ((seen[5] || seen[6] || seen[7]) && !seen[5]) l.pp_v = 1;
    if (seen[5] && !seen[6]) l.pp_first_less = 1;
    if (seen[5] && !seen[7]) l.pp_last_less = 1;
    if (!seen[5] && (seen[6] || seen[7])) {
        if (!seen[6]) l.pp_first_less = 1;
        if (!seen[7]) l.pp_last_less = 1;
    }
    if (l.pp_layers.n) { /* stages a rank from the counts when pp_v is not given */
        if (!seen[5] && l.pp_layers.n % l.pp == 0) l.pp_v = l.pp_layers.n / l.pp;
        if (!seen[6]) l.pp_first_less = 1;
        if (!seen[7]) l.pp_last_less = 1;
        if (l.pp_layers.n != l.pp * (l.pp_v ? l.pp_v : 1))
            return bad_item(s, "pp_layers", 9, "there must be a layer count per stage (pp x pp_v of them)");
    }
    int64_t world = 1;
    for (int k = 0; k < NDEGREES; k++) {
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
    int n = default_split(l) ? NDEGREES : l->pp_vshape ? NKEYS : NKEYS - 1; /* pp_vshape only when set */
    titan_layout full = *l;
    titan_layout_split(l, &full.pp_v, &full.pp_first_less, &full.pp_last_less);
    l = &full;
    for (int i = 0; i < n && k < cap; i++) {
        int w = snprintf(out + k, cap - k, "%s%s=%d", i ? "," : "", keys[i].key, degree_of(l, i));
        if (w < 0) break;
        k += (size_t)w;
    }
    for (int s = 0; s < l->pp_layers.n && k < cap; s++) {
        int w = snprintf(out + k, cap - k, "%s%d", s ? ":" : ",pp_layers=", l->pp_layers.count[s]);
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

/* An explicit split: a count a stage, adding up to the layers, no stage
 * but the first (the embedding) and the last (the head) without one. */
static titan_status check_stage_layers(const titan_layout *l, int n_layers) {
    const titan_stage_layers *sl = &l->pp_layers;
    int S = titan_layout_stages(l), sum = 0;
    if (sl->n != S)
        return titan_error(TITAN_ERR_USAGE, "layout: pp_layers gives %d stages, pp=%d x %d a rank make %d", sl->n, l->pp,
                           S / l->pp, S);
    for (int s = 0; s < S; s++) {
        if (sl->count[s] == 0 && s > 0 && s < S - 1)
            return titan_error(TITAN_ERR_USAGE, "layout: pp_layers: stage %d holds no layer (only the first stage, "
                               "with the embedding, and the last, with the output, may)", s);
        sum += sl->count[s];
    }
    if (sum != n_layers)
        return titan_error(TITAN_ERR_USAGE, "layout: pp_layers splits %d layers, the model has %d", sum, n_layers);
    return TITAN_OK;
}

titan_status titan_layout_check(const titan_layout *l, int n_layers) {
    if (n_layers < 0) return titan_error(TITAN_ERR_USAGE, "layout: %d layers", n_layers);
    int v, in, out, S = titan_layout_stages(l);
    titan_layout_split(l, &v, &in, &out);
    if (l->pp_vshape && v != 2)
        return titan_error(TITAN_ERR_USAGE, "layout: the V placement (pp_vshape=1) holds 2 stages a rank, not %d", v);
    if (l->pp_layers.n) return check_stage_layers(l, n_layers);
    if (S == 1) return TITAN_OK;
    int eff = n_layers + in + out, per = eff / S;
    if (S > eff) {
        titan_error(TITAN_ERR_USAGE, "layout: %d pipeline stages (pp=%d x %d a rank) for a model of %d layers (at most "
                    "%d: the embedding and the output count as %d and %d layers)", S, l->pp, v, n_layers, eff, in, out);
        return TITAN_ERR_USAGE;
    }
    if (in > per || out > per) {
        titan_error(TITAN_ERR_USAGE, "layout: %d pipeline stages of %d effective layers (%d + %d for the embedding + %d "
                    "for the output) get %d each, fewer than the %s's weight %d", S, eff, n_layers, in, out, per,
                    in > per ? "embedding" : "output", in > per ? in : out);
        return TITAN_ERR_USAGE;
    }
    return TITAN_OK;
}

void titan_layout_cp_chunks(int T, int cp, int c, int chunk[2]) {
    int len = T / (2 * cp);
    chunk[0] = c * len;
    chunk[1] = (2 * cp - 1 - c) * len;
}

/* torchtitan's split (generate_llm_fqn_per_model_part): the effective
 * layers (n_layers + the embedding's and the output's weights) divided
 * evenly over the stages, the remainder one each to the first stages; the
 * first stage's share less the embedding's weight, the last's less the
 * output's. Requires a layout titan_layout_check accepts. */
void titan_layout_stage_layers(const titan_layout *l, int n_layers, int stage, int *first, int *end) {
    int v, in, out, S = titan_layout_stages(l);
    if (l->pp_layers.n) { /* an explicit split: the counts before it */
        int lo = 0;
        for (int s = 0; s < stage && s < l->pp_layers.n; s++) lo += l->pp_layers.count[s];
        int e = stage == S - 1 ? n_layers : lo + l->pp_layers.count[stage];
        *first = lo < n_layers ? lo : n_layers;
        *end = e < n_layers ? e : n_layers; /* clamped only for splits check refuses */
        return;
    }
    titan_layout_split(l, &v, &in, &out);
    int eff = n_layers + in + out, per = eff / S, extra = eff % S;
    int cur = 0, lo = 0;
    for (int i = 0; i < S - 1; i++) {
        cur += per + (i < extra) - (i == 0 ? in : 0);
        if (cur > n_layers) cur = n_layers; /* only for splits check refuses */
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

int titan_layout_stage_rank(const titan_layout *l, int s) {
    if (l->pp_vshape) return s < l->pp ? s : 2 * l->pp - 1 - s;
    return s % l->pp;
}

int titan_layout_rank_stage(const titan_layout *l, int r, int k) {
    if (l->pp_vshape) return k == 0 ? r : 2 * l->pp - 1 - r;
    return r + k * l->pp;
}

int titan_layout_stage(const titan_layout *l, int n_layers, int block) {
    int S = titan_layout_stages(l);
    if (S == 1 || block <= 0) return 0;
    if (block > n_layers) return titan_layout_stage_rank(l, S - 1);
    for (int s = 0; s < S; s++) {
        int a, b;
        titan_layout_stage_layers(l, n_layers, s, &a, &b);
        if (block - 1 < b) return titan_layout_stage_rank(l, s);
    }
    return titan_layout_stage_rank(l, S - 1);
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
