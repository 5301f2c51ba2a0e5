/* ckpt_dir.c - the checkpoint root: step dir names, listing, `latest`, pruning. */
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"
#include "core/log.h"

enum { ENT_STEP, ENT_TMP, ENT_OLD, ENT_DEL };

typedef struct {
    int64_t step;
    int kind;
    char name[64];
} step_entry;

void titan_ckpt_step_name(char *out, size_t outsz, int64_t step) {
    snprintf(out, outsz, "step-%08" PRId64, step);
}

/* Parses "step-<digits>" and returns a pointer to what follows, or NULL. */
static const char *parse_prefix(const char *name, int64_t *step) {
    if (strncmp(name, "step-", 5) != 0) return NULL;
    const char *p = name + 5;
    int64_t v = 0;
    int nd = 0;
    for (; *p >= '0' && *p <= '9'; p++, nd++) {
        if (v > (INT64_MAX - 9) / 10) return NULL;
        v = v * 10 + (*p - '0');
    }
    if (nd == 0) return NULL;
    *step = v;
    return p;
}

int titan_ckpt_parse_step_name(const char *name, int64_t *step) {
    int64_t v;
    const char *rest = parse_prefix(name, &v);
    if (!rest || *rest) return -1;
    *step = v;
    return 0;
}

static int has_metadata(const char *root, const char *name) {
    char p[PATH_MAX];
    int n = snprintf(p, sizeof p, "%s/%s/metadata.json", root, name);
    return n > 0 && (size_t)n < sizeof p && titan_fs_exists(p);
}

static int cmp_entry(const void *a, const void *b) {
    const step_entry *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    return x->kind - y->kind;
}

/* All step-related entries of root, sorted by step; ENT_STEP only when complete. */
static titan_status list_entries(const char *root, step_entry **out, int *count) {
    *out = NULL;
    *count = 0;
    DIR *d = opendir(root);
    if (!d) return titan_error(TITAN_ERR_IO, "%s: open: %s", root, strerror(errno));
    step_entry *e = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        int64_t step;
        const char *rest = parse_prefix(de->d_name, &step);
        if (!rest || strlen(de->d_name) >= sizeof e->name) continue;
        int kind;
        if (!*rest) kind = ENT_STEP;
        else if (!strcmp(rest, ".tmp")) kind = ENT_TMP;
        else if (!strcmp(rest, ".old")) kind = ENT_OLD;
        else if (!strcmp(rest, ".del")) kind = ENT_DEL;
        else continue;
        if (kind == ENT_STEP && !has_metadata(root, de->d_name)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            step_entry *ne = realloc(e, (size_t)cap * sizeof *e);
            if (!ne) {
                free(e);
                closedir(d);
                return titan_error(TITAN_ERR_NOMEM, "%s: listing: out of memory", root);
            }
            e = ne;
        }
        e[n].step = step;
        e[n].kind = kind;
        memcpy(e[n].name, de->d_name, strlen(de->d_name) + 1); /* length checked above */
        n++;
    }
    closedir(d);
    if (n) qsort(e, (size_t)n, sizeof *e, cmp_entry);
    *out = e;
    *count = n;
    return TITAN_OK;
}

titan_status titan_ckpt_list_steps(const char *root, int64_t *steps, int max, int *count) {
    step_entry *e;
    int n;
    TITAN_TRY(list_entries(root, &e, &n));
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (e[i].kind != ENT_STEP) continue;
        if (k < max) steps[k] = e[i].step;
        k++;
    }
    free(e);
    *count = k;
    return TITAN_OK;
}

/* Reads `latest`; 1 with the name when it names a complete step dir, else 0 and why. */
static int read_latest(const char *root, char *name, size_t namesz, int64_t *step,
                       char *why, size_t whysz) {
    char p[PATH_MAX];
    if (titan_fs_join(p, sizeof p, root, "latest") != TITAN_OK) {
        snprintf(why, whysz, "path too long");
        return 0;
    }
    if (!titan_fs_exists(p)) {
        snprintf(why, whysz, "missing");
        return 0;
    }
    char *txt = NULL;
    if (titan_fs_read_regular(p, &txt, NULL, 4096) != TITAN_OK) {
        snprintf(why, whysz, "unreadable (%s)", titan_error_message());
        return 0;
    }
    size_t len = strcspn(txt, " \t\r\n");
    txt[len] = '\0';
    int ok = 0;
    if (titan_ckpt_parse_step_name(txt, step) != 0 || len >= namesz)
        snprintf(why, whysz, "malformed (\"%.64s\")", txt);
    else if (!has_metadata(root, txt))
        snprintf(why, whysz, "names %s, which is missing or incomplete", txt);
    else {
        snprintf(name, namesz, "%s", txt);
        ok = 1;
    }
    free(txt);
    return ok;
}

titan_status titan_ckpt_resolve(const char *root, char *dir, size_t dirsz, int64_t *step, int warn) {
    char name[64], why[2300];
    int64_t s = 0;
    if (!read_latest(root, name, sizeof name, &s, why, sizeof why)) {
        step_entry *e;
        int n;
        TITAN_TRY(list_entries(root, &e, &n));
        int best = -1;
        for (int i = 0; i < n; i++)
            if (e[i].kind == ENT_STEP) best = i;
        if (best < 0) {
            free(e);
            return titan_error(TITAN_ERR_IO, "no checkpoint in %s", root);
        }
        s = e[best].step;
        snprintf(name, sizeof name, "%s", e[best].name);
        free(e);
        if (warn) titan_warn("%s/latest: %s; using %s, the highest complete step", root, why, name);
        titan_error_clear();
    }
    TITAN_TRY(titan_fs_join(dir, dirsz, root, name));
    if (step) *step = s;
    return TITAN_OK;
}

titan_status titan_ckpt_latest_step(const char *root, int64_t *step) {
    char dir[PATH_MAX];
    return titan_ckpt_resolve(root, dir, sizeof dir, step, 0);
}

titan_status titan_ckpt_set_latest(const char *root, int64_t step) {
    char p[PATH_MAX], txt[64];
    TITAN_TRY(titan_fs_join(p, sizeof p, root, "latest"));
    titan_ckpt_step_name(txt, sizeof txt - 1, step);
    strcat(txt, "\n");
    return titan_fs_write_atomic(p, txt, strlen(txt));
}

/* Renames name to step-N.del (atomic), then removes that tree. */
static titan_status remove_step_dir(const char *root, const step_entry *e) {
    char from[PATH_MAX], to[PATH_MAX], delname[96];
    TITAN_TRY(titan_fs_join(from, sizeof from, root, e->name));
    if (e->kind == ENT_STEP) {
        snprintf(delname, sizeof delname, "%s.del", e->name);
        TITAN_TRY(titan_fs_join(to, sizeof to, root, delname));
        TITAN_TRY(titan_fs_remove_tree(to));
        TITAN_TRY(titan_fs_rename(from, to));
        return titan_fs_remove_tree(to);
    }
    return titan_fs_remove_tree(from);
}

titan_status titan_ckpt_prune(const char *root, int keep, int64_t keep_step) {
    step_entry *e;
    int n;
    TITAN_TRY(list_entries(root, &e, &n));
    int complete = 0;
    for (int i = 0; i < n; i++) complete += e[i].kind == ENT_STEP;
    int excess = keep > 0 ? complete - keep : 0;
    titan_status st = TITAN_OK;
    int removed_step = 0;
    for (int i = 0; i < n && st == TITAN_OK; i++) {
        int rm = 0;
        if (e[i].kind == ENT_STEP) {
            if (excess > 0 && e[i].step != keep_step) {
                rm = 1;
                excess--;
            }
        } else if (e[i].kind == ENT_OLD || e[i].kind == ENT_DEL) {
            rm = 1;
        } else if (e[i].kind == ENT_TMP) {
            rm = e[i].step < keep_step;
        }
        if (!rm) continue;
        st = remove_step_dir(root, &e[i]);
        removed_step |= e[i].kind == ENT_STEP;
    }
    free(e);
    if (st != TITAN_OK) return st;
    return removed_step ? titan_fs_fsync_path(root) : TITAN_OK;
}

titan_status titan_ckpt_resolve_arg(const char *arg, char *out, size_t cap) {
    char p[PATH_MAX];
    TITAN_TRY(titan_fs_join(p, sizeof p, arg, "metadata.json"));
    if (!titan_fs_exists(p)) {
        TITAN_TRY(titan_fs_join(p, sizeof p, arg, "checkpoint"));
        if (titan_fs_is_dir(p)) arg = p;
    }
    if (snprintf(out, cap, "%s", arg) >= (int)cap) return titan_error(TITAN_ERR_USAGE, "%s: path too long", arg);
    if (!titan_fs_exists(out)) return titan_error(TITAN_ERR_IO, "%s: %s", out, strerror(ENOENT));
    return TITAN_OK;
}
