/* args.c - job config keys on the command line, collected while the tool
 * parses its options and applied once its config is loaded. */
#include "job/args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

titan_status titan_args_add(titan_args *a, const char *override) {
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 8;
        char **items = realloc(a->items, (size_t)cap * sizeof *items);
        if (!items) return titan_error(TITAN_ERR_NOMEM, "command line: out of memory");
        a->items = items;
        a->cap = cap;
    }
    if (!(a->items[a->n] = strdup(override))) return titan_error(TITAN_ERR_NOMEM, "command line: out of memory");
    a->n++;
    return TITAN_OK;
}

titan_status titan_args_collect(void *ctx, const char *arg, const char *next, int *took_next) {
    titan_args *a = ctx;
    int is_bool = 0;
    *took_next = 0;
    TITAN_TRY(titan_config_key_check(arg, &is_bool));
    /* --key value: "--x" after it is an option, not a value; the override
     * then says the value is missing. */
    int take = next && !strchr(arg, '=') && strncmp(next, "--", 2) != 0 &&
               (!is_bool || !strcmp(next, "true") || !strcmp(next, "false"));
    if (!take) return titan_args_add(a, arg);
    size_t len = strlen(arg) + strlen(next) + 2;
    char *kv = malloc(len);
    if (!kv) return titan_error(TITAN_ERR_NOMEM, "command line: out of memory");
    snprintf(kv, len, "%s=%s", arg, next);
    titan_status st = titan_args_add(a, kv);
    free(kv);
    *took_next = st == TITAN_OK;
    return st;
}

char *titan_args_take(titan_args *a, const char *key) {
    char *value = NULL;
    size_t len = strlen(key);
    int kept = 0;
    for (int i = 0; i < a->n; i++) {
        const char *item = a->items[i];
        if (!strncmp(item, "--", 2) && !strncmp(item + 2, key, len) && item[2 + len] == '=') {
            free(value);
            value = strdup(item + 3 + len);
            free(a->items[i]);
        } else {
            a->items[kept++] = a->items[i];
        }
    }
    a->n = kept;
    return value;
}

titan_status titan_args_apply(titan_job_config *cfg, const titan_args *a) {
    for (int i = 0; i < a->n; i++) TITAN_TRY(titan_config_override(cfg, a->items[i]));
    return TITAN_OK;
}

void titan_args_free(titan_args *a) {
    for (int i = 0; i < a->n; i++) free(a->items[i]);
    free(a->items);
    *a = (titan_args){0};
}
