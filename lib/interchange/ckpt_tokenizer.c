/* ckpt_tokenizer.c - the tokenizer a checkpoint carries (ckpt_tokenizer.h). */
#include "interchange/ckpt_tokenizer.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"


const char *titan_ckpt_tokenizer_file_name(const char *kind) {
    if (!kind) return NULL;
    if (!strcmp(kind, "tiktoken")) return "tokenizer.tiktoken";
    if (!strcmp(kind, "hf")) return "tokenizer.json";
    return NULL;
}

titan_status titan_ckpt_put_tokenizer(titan_ckpt_writer *w, const titan_tokenizer *t) {
    TITAN_TRY(titan_ckpt_meta_str(w, "tokenizer", titan_tokenizer_id(t)));
    const char *data;
    size_t len;
    const char *name = titan_ckpt_tokenizer_file_name(titan_tokenizer_file(t, &data, &len));
    if (!name) return TITAN_OK;
    TITAN_TRY(titan_ckpt_add_file(w, name, data, len));
    return titan_ckpt_meta_str(w, "tokenizer.file", name);
}

titan_status titan_ckpt_put_tokenizer_spec(titan_ckpt_writer *w, const char *spec, const char *none) {
    if (!spec) return titan_ckpt_meta_str(w, "tokenizer", none);
    titan_tokenizer *t;
    TITAN_TRY(titan_tokenizer_open(&t, spec));
    titan_status st = titan_ckpt_put_tokenizer(w, t);
    titan_tokenizer_free(t);
    return st;
}

/* The recorded id, or NULL (an old import, a hand-made checkpoint). */
static const char *recorded_id(const titan_ckpt *ck) {
    const char *id = NULL;
    if (titan_ckpt_meta_get_str(ck, "tokenizer", &id) != TITAN_OK) id = NULL;
    titan_error_clear();
    return id;
}

titan_status titan_ckpt_tokenizer_spec(const titan_ckpt *ck, char *spec, size_t cap) {
    const char *id = recorded_id(ck), *file = NULL;
    if (titan_ckpt_meta_get_str(ck, "tokenizer.file", &file) != TITAN_OK) file = NULL;
    titan_error_clear();
    if (file) {
        const char *kind = !strcmp(file, "tokenizer.tiktoken") ? "tiktoken"
                           : !strcmp(file, "tokenizer.json")   ? "hf"
                                                                : NULL;
        if (!kind)
            return titan_error(TITAN_ERR_FORMAT, "%s/metadata.json: tokenizer.file \"%s\" is not tokenizer.tiktoken "
                               "or tokenizer.json", titan_ckpt_path(ck), file);
        int n = snprintf(spec, cap, "%s:%s/%s", kind, titan_ckpt_path(ck), file);
        if (n < 0 || (size_t)n >= cap) return titan_error(TITAN_ERR_USAGE, "%s: path too long", titan_ckpt_path(ck));
        return TITAN_OK;
    }
    if (id && !strcmp(id, "byte")) {
        snprintf(spec, cap, "byte");
        return TITAN_OK;
    }
    titan_error(TITAN_ERR_USAGE, "%s: tokenizer %s: the checkpoint carries no copy of it%s", titan_ckpt_path(ck),
                id ? id : "(none recorded)",
                id && !strcmp(id, "hf-import") ? " (imported from Hugging Face without --tokenizer)"
                                               : " (saved before checkpoints carried their tokenizer)");
    titan_error_hint("pass --tokenizer SPEC, the tokenizer the run used (e.g. tiktoken:PATH)");
    return TITAN_ERR_USAGE;
}

titan_status titan_ckpt_open_tokenizer(const titan_ckpt *ck, const char *override, titan_tokenizer **out) {
    *out = NULL;
    const char *cid = recorded_id(ck);
    char spec[4200];
    if (!override) TITAN_TRY(titan_ckpt_tokenizer_spec(ck, spec, sizeof spec));
    TITAN_TRY(titan_tokenizer_open(out, override ? override : spec));
    const char *id = titan_tokenizer_id(*out);
    if (!cid || !strcmp(cid, "hf-import") || !strcmp(cid, id)) return TITAN_OK;
    if (override) {
        titan_error(TITAN_ERR_USAGE, "--tokenizer %s: its id is %s, but %s was trained with tokenizer %s", override,
                    id, titan_ckpt_path(ck), cid);
        titan_error_hint("give the tokenizer file the run was sharded with");
    } else {
        titan_error(TITAN_ERR_CORRUPT, "%s: the tokenizer copy has id %s, the checkpoint records %s",
                    spec, id, cid);
    }
    titan_tokenizer_free(*out);
    *out = NULL;
    return titan_error_code();
}

titan_status titan_ckpt_tokenizer_if_any(const titan_ckpt *ck, const char *override, titan_tokenizer **out) {
    char spec[4200];
    *out = NULL;
    if (!override && titan_ckpt_tokenizer_spec(ck, spec, sizeof spec) == TITAN_ERR_USAGE) {
        titan_warn("%s; exporting without a tokenizer (pass --tokenizer SPEC to add one)", titan_error_message());
        titan_error_clear();
        return TITAN_OK;
    }
    titan_error_clear();
    return titan_ckpt_open_tokenizer(ck, override, out);
}
