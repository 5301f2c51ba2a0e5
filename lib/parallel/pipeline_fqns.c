/* pipeline_fqns.c - a stage split from module names (torchtitan's
 * parallelism.module_fqns_per_model_part), checked block by block. */
#include "parallel/pipeline.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

#define KEY "parallelism.module_fqns_per_model_part"

/* What one name is: a layer (its index), or one of the other blocks. */
enum { NAME_LAYER, NAME_EMBEDDING, NAME_NORM, NAME_OUTPUT, NAME_SUBMODULE, NAME_UNKNOWN };

static int classify(const char *name, size_t len, int *layer) {
    if (len == 14 && !strncmp(name, "tok_embeddings", len)) return NAME_EMBEDDING;
    if (len == 4 && !strncmp(name, "norm", len)) return NAME_NORM;
    if (len == 6 && !strncmp(name, "output", len)) return NAME_OUTPUT;
    if (len > 7 && !strncmp(name, "layers.", 7) && isdigit((unsigned char)name[7])) {
        size_t d = 7;
        long x = 0;
        while (d < len && isdigit((unsigned char)name[d]) && x < 1000000) x = x * 10 + (name[d++] - '0');
        *layer = (int)x;
        if (d == len && (name[7] != '0' || len == 8)) return NAME_LAYER;
        if (d < len && name[d] == '.') return NAME_SUBMODULE;
    }
    if ((len > 15 && !strncmp(name, "tok_embeddings.", 15)) || (len > 5 && !strncmp(name, "norm.", 5)) ||
        (len > 7 && !strncmp(name, "output.", 7)))
        return NAME_SUBMODULE;
    return NAME_UNKNOWN;
}

/* The blocks other than the layers: where each belongs, and the part that
 * named it (-1: none yet). */
typedef struct {
    int part[3]; /* embedding, norm, output */
} others;

static titan_status check_name(const char *name, size_t len, int i, int nparts, int n_layers, int *next,
                               int *layer_part, others *o, short *count) {
    int layer = -1, kind = classify(name, len, &layer);
    const char *what[] = {"tok_embeddings", "norm", "output"};
    if (kind == NAME_SUBMODULE)
        return titan_error(TITAN_ERR_USAGE, KEY ": part %d: '%.*s' names part of a block; titan cuts stages at whole "
                           "blocks (tok_embeddings, layers.N, norm, output)", i, (int)len, name);
    if (kind == NAME_UNKNOWN || (kind == NAME_LAYER && layer >= n_layers))
        return titan_error(TITAN_ERR_USAGE, KEY ": part %d: '%.*s' is not a block of the model (tok_embeddings, "
                           "layers.0 to layers.%d, norm, output)", i, (int)len, name, n_layers - 1);
    if (kind != NAME_LAYER) {
        int b = kind - NAME_EMBEDDING, want = b == 0 ? 0 : nparts - 1;
        if (o->part[b] >= 0)
            return titan_error(TITAN_ERR_USAGE, KEY ": part %d: '%s' is named twice (also in part %d)", i, what[b],
                               o->part[b]);
        if (i != want)
            return titan_error(TITAN_ERR_USAGE, KEY ": part %d: '%s' belongs to the %s part (part %d): the %s", i,
                               what[b], b == 0 ? "first" : "last", want,
                               b == 0 ? "embedding starts the pipeline" : "head and the loss end it");
        o->part[b] = i;
        return TITAN_OK;
    }
    if (layer_part[layer] >= 0)
        return titan_error(TITAN_ERR_USAGE, KEY ": part %d: 'layers.%d' is named twice (also in part %d)", i, layer,
                           layer_part[layer]);
    if (layer != *next)
        return titan_error(TITAN_ERR_USAGE, KEY ": part %d: 'layers.%d' out of order: the parts must name "
                           "layers.0 to layers.%d in order, a contiguous run each, and layers.%d comes next", i, layer,
                           n_layers - 1, *next);
    layer_part[layer] = i;
    count[i]++;
    (*next)++;
    return TITAN_OK;
}

titan_status titan_pipeline_fqn_split(const char *parts, int n_layers, titan_stage_layers *out) {
    memset(out, 0, sizeof *out);
    int nparts = 1;
    for (const char *c = parts; *c; c++) nparts += *c == ';';
    if (nparts > TITAN_LAYOUT_MAX_STAGES)
        return titan_error(TITAN_ERR_USAGE, KEY ": %d parts, more than the %d stages titan splits into", nparts,
                           TITAN_LAYOUT_MAX_STAGES);
    int *layer_part = titan_alloc((size_t)(n_layers > 0 ? n_layers : 1) * sizeof *layer_part, "stage split");
    if (!layer_part) return TITAN_ERR_NOMEM;
    for (int l = 0; l < n_layers; l++) layer_part[l] = -1;
    others o = {{-1, -1, -1}};
    int next = 0, i = 0;
    titan_status st = TITAN_OK;
    for (const char *p = parts; st == TITAN_OK;) {
        size_t len = strcspn(p, ",;");
        st = check_name(p, len, i, nparts, n_layers, &next, layer_part, &o, out->count);
        p += len;
        if (*p == ';') i++;
        if (!*p++) break;
    }
    titan_free(layer_part);
    if (st != TITAN_OK) return st;
    const char *what[] = {"tok_embeddings", "norm", "output"};
    for (int b = 0; b < 3; b++)
        if (o.part[b] < 0)
            return titan_error(TITAN_ERR_USAGE, KEY ": '%s' is in no part (it belongs to the %s, part %d)", what[b],
                               b == 0 ? "first" : "last", b == 0 ? 0 : nparts - 1);
    if (next < n_layers)
        return titan_error(TITAN_ERR_USAGE, KEY ": 'layers.%d' is in no part (every layer of the %d goes in exactly "
                           "one)", next, n_layers);
    out->n = nparts;
    return TITAN_OK;
}
