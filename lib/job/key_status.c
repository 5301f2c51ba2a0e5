/* key_status.c - what titan does with each key of torchtitan's job schema:
 * implemented, meaningless here, or refused (and why), for the whole schema
 * (titan-train --print-keys, titan-train(1)'s table) or for the keys one job
 * file sets; and the defaults a job file leaves out where titan's differ from
 * torchtitan's. The facts come from keys.c's tables and schema.c. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/log.h"
#include "core/toml.h"
#include "keys.h"

/* Two TOML texts of the same value ("0" and "0.0", "1e-08" and "1e-8"). */
static int same_value(const char *a, const char *b) {
    titan_toml_value va, vb;
    int ok = 0;
    if (titan_toml_parse_value(a, "a", &va) != TITAN_OK) {
        titan_error_clear();
        return 0;
    }
    if (titan_toml_parse_value(b, "b", &vb) == TITAN_OK) {
        int na = va.type == TITAN_TOML_INT || va.type == TITAN_TOML_FLOAT;
        int nb = vb.type == TITAN_TOML_INT || vb.type == TITAN_TOML_FLOAT;
        if (na && nb) {
            double x = va.type == TITAN_TOML_INT ? (double)va.u.i : va.u.f;
            double y = vb.type == TITAN_TOML_INT ? (double)vb.u.i : vb.u.f;
            ok = x == y;
        } else {
            ok = titan_toml_value_equal(&va, &vb);
        }
        titan_toml_value_free(&vb);
    }
    titan_error_clear();
    titan_toml_value_free(&va);
    return ok;
}

/* titan's default of k as TOML text. */
static void titan_default(const key_def *k, char *out, size_t cap) {
    titan_job_config *d = malloc(sizeof *d);
    out[0] = '\0';
    if (!d) return;
    titan_config_defaults(d);
    titan_job_format_value(k, d, out, cap);
    free(d);
}

/* The status of a key whatever its value, with what follows it in a listing
 * ("as training.seed", "false accepted"). */
titan_key_status titan_config_key_status(const char *section, const char *key, char *detail, size_t cap) {
    detail[0] = '\0';
    const key_def *k = titan_job_find_key(section, key);
    if (k) return TITAN_KEY_IMPLEMENTED;
    k = titan_job_find_alias(section, key);
    if (k) {
        snprintf(detail, cap, "as %s.%s", k->section, k->key);
        return TITAN_KEY_IMPLEMENTED;
    }
    int ig = titan_job_find_ignored(section, key);
    if (ig < 0) return TITAN_KEY_UNKNOWN;
    if (!titan_job_ignored[ig].harmless) return TITAN_KEY_MEANINGLESS;
    char accepted[256];
    titan_job_harmless(ig, NULL, accepted, sizeof accepted);
    if (accepted[0]) snprintf(detail, cap, "%s accepted", accepted);
    return TITAN_KEY_REFUSED;
}

const char *titan_config_key_status_name(titan_key_status s) {
    switch (s) {
    case TITAN_KEY_IMPLEMENTED: return "implemented";
    case TITAN_KEY_MEANINGLESS: return "meaningless here";
    case TITAN_KEY_REFUSED: return "refused";
    default: return "unknown";
    }
}

/* "titan's default is X, torchtitan's Y" when they differ, else "". */
static void default_note(const key_schema *s, char *out, size_t cap) {
    out[0] = '\0';
    const key_def *k = titan_job_find_key(s->section, s->key);
    if (!k || !s->tt_default) return;
    char mine[TITAN_VALUE_TEXT];
    titan_default(k, mine, sizeof mine);
    if (!same_value(mine, s->tt_default))
        snprintf(out, cap, "default %.400s (torchtitan: %.400s)", mine, s->tt_default);
}

static void print_entry(FILE *f, const key_schema *s) {
    char detail[300], defaults[900];
    titan_key_status st = titan_config_key_status(s->section, s->key, detail, sizeof detail);
    default_note(s, defaults, sizeof defaults);
    fprintf(f, "%s.%s\t%s%s%s%s%s%s%s%s\n", s->section, s->key, titan_config_key_status_name(st),
            detail[0] ? " (" : "", detail, detail[0] ? ")" : "", defaults[0] ? "; " : "", defaults,
            s->why ? ": " : "", s->why ? s->why : "");
}

void titan_config_print_schema(FILE *f) {
    for (int older = 0; older < 2; older++) {
        if (older) fputs("# older torchtitan keys\n", f);
        for (int i = 0; i < titan_job_nschema; i++)
            if (titan_job_schema[i].older == older) print_entry(f, &titan_job_schema[i]);
    }
}

/* ---- the keys of one job file ---- */

static int is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

typedef struct {
    FILE *out;
    const char *name;
    titan_job_config *scratch;
    int refused;
} listing;

static titan_status list_key(void *ctx, const char *table, const char *key, const titan_toml_value *v, int line) {
    listing *l = ctx;
    char value[512], detail[300], place[300];
    titan_toml_format_value(value, sizeof value, v);
    snprintf(place, sizeof place, "%s:%d", l->name, line);
    titan_key_status st = titan_config_key_status(table, key, detail, sizeof detail);
    const key_schema *s = titan_job_find_schema(table, key);
    const char *why = s && s->why ? s->why : "";
    char text[2048] = ""; /* an implemented key says no more than its other spelling */
    if (st == TITAN_KEY_IMPLEMENTED) {
        const key_def *k = titan_job_find_key(table, key);
        if (!k) k = titan_job_find_alias(table, key);
        if (titan_job_set_value(l->scratch, k, v, place) != TITAN_OK) {
            st = TITAN_KEY_REFUSED;
            snprintf(text, sizeof text, "%s", titan_error_message());
            titan_error_clear();
        } else if (!strcmp(key, "dataset") && v->type == TITAN_TOML_STRING && !is_dir(v->u.str.ptr)) {
            snprintf(text, sizeof text, "a dataset name, no shard directory: training needs %s.dataset_path",
                     table);
        } else {
            snprintf(text, sizeof text, "%s", detail);
        }
    } else if (st != TITAN_KEY_UNKNOWN) {
        char accepted[256];
        int idx = titan_job_find_ignored(table, key);
        if (!titan_job_harmless(idx, v, accepted, sizeof accepted)) st = TITAN_KEY_REFUSED;
        else st = TITAN_KEY_MEANINGLESS;
        snprintf(text, sizeof text, "%s", why);
    }
    if (st == TITAN_KEY_REFUSED || st == TITAN_KEY_UNKNOWN) l->refused++;
    fprintf(l->out, "%s%s%s = %s\t%s%s%s\n", table, table[0] ? "." : "", key, value, titan_config_key_status_name(st),
            text[0] ? ": " : "", text);
    return TITAN_OK;
}

int titan_config_print_keys(const char *path, FILE *out) {
    titan_toml_doc *doc;
    if (titan_toml_parse_file(path, &doc) != TITAN_OK) return -1;
    listing l = {out, doc->name, malloc(sizeof(titan_job_config)), 0};
    if (!l.scratch) {
        titan_toml_free(doc);
        titan_error(TITAN_ERR_NOMEM, "out of memory");
        return -1;
    }
    titan_config_defaults(l.scratch);
    titan_toml_walk(doc, list_key, &l);
    free(l.scratch);
    titan_toml_free(doc);
    return l.refused;
}

/* ---- defaults a job leaves out ---- */

/* Whether the document sets k (under its name or another spelling). */
static int doc_sets(const titan_toml_doc *doc, const key_def *k) {
    char path[300];
    snprintf(path, sizeof path, "%s.%s", k->section, k->key);
    if (titan_toml_get(doc, path)) return 1;
    for (int i = 0; i < titan_job_naliases; i++) {
        const key_alias *a = &titan_job_aliases[i];
        if (strcmp(a->target_section, k->section) || strcmp(a->target, k->key)) continue;
        snprintf(path, sizeof path, "%s.%s", a->section, a->key);
        if (titan_toml_get(doc, path)) return 1;
    }
    return 0;
}

int titan_config_default_differences(const char *path, const titan_job_config *cfg, char *out, size_t cap) {
    titan_toml_doc *doc;
    out[0] = '\0';
    if (titan_toml_parse_file(path, &doc) != TITAN_OK) {
        titan_error_clear();
        return 0;
    }
    int count = 0;
    size_t used = 0;
    for (int i = 0; i < titan_job_nschema; i++) {
        const key_schema *s = &titan_job_schema[i];
        const key_def *k = titan_job_find_key(s->section, s->key);
        if (s->older || !s->tt_default || !k || doc_sets(doc, k)) continue;
        if (!strcmp(k->section, "validation") && !cfg->validation_enable) continue; /* cannot matter */
        char mine[TITAN_VALUE_TEXT], now[TITAN_VALUE_TEXT];
        titan_default(k, mine, sizeof mine);
        titan_job_format_value(k, cfg, now, sizeof now);
        /* a key the command line set is no default */
        if (same_value(mine, s->tt_default) || strcmp(mine, now) != 0) continue;
        int w = snprintf(out + used, used < cap ? cap - used : 0, "%s%s.%s = %s (torchtitan: %s)", count ? "; " : "",
                         k->section, k->key, mine, s->tt_default);
        if (w > 0 && used + (size_t)w < cap) used += (size_t)w;
        count++;
    }
    titan_toml_free(doc);
    return count;
}

void titan_config_note_defaults(const char *path, const titan_job_config *cfg) {
    char buf[4096];
    int count = titan_config_default_differences(path, cfg, buf, sizeof buf);
    if (count)
        titan_info("%s leaves at titan's default %d key%s whose torchtitan default differs (titan-train(1), "
                   "Defaults): %s", path, count, count == 1 ? "" : "s", buf);
}
