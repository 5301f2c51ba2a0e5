/* test_job_schema.c - every key of torchtitan's last TOML schema
 * (tests/fixtures/torchtitan_schema.txt, written by
 * scripts/torchtitan-schema.py from torchtitan's job_config.py) has one
 * status in titan: implemented, meaningless here or refused, with a reason
 * where it is not implemented; schema.c lists exactly those keys (and the
 * older ones titan reads); torchtitan's defaults it gives are the fixture's;
 * no key is both implemented and ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/toml.h"
#include "job/config.h"
#include "job/keys.h"

#include "check.h"

static const char *fixture(void) {
    static char path[4096];
    const char *src = __FILE__;
    const char *slash = strrchr(src, '/');
    snprintf(path, sizeof path, "%.*s/../fixtures/torchtitan_schema.txt", slash ? (int)(slash - src) : 1,
             slash ? src : ".");
    if (access(path, R_OK) != 0) snprintf(path, sizeof path, "tests/fixtures/torchtitan_schema.txt");
    return path;
}

/* Two TOML texts of one value (numbers compared as numbers). */
static int same_value(const char *a, const char *b) {
    titan_toml_value va, vb;
    if (titan_toml_parse_value(a, "a", &va) != TITAN_OK) return 0;
    if (titan_toml_parse_value(b, "b", &vb) != TITAN_OK) {
        titan_toml_value_free(&va);
        return 0;
    }
    int na = va.type == TITAN_TOML_INT || va.type == TITAN_TOML_FLOAT;
    int nb = vb.type == TITAN_TOML_INT || vb.type == TITAN_TOML_FLOAT;
    int same = na && nb ? (va.type == TITAN_TOML_INT ? (double)va.u.i : va.u.f) ==
                              (vb.type == TITAN_TOML_INT ? (double)vb.u.i : vb.u.f)
                        : titan_toml_value_equal(&va, &vb);
    titan_toml_value_free(&va);
    titan_toml_value_free(&vb);
    return same;
}

static int in_fixture[512];

static void test_fixture_keys(void) {
    FILE *f = fopen(fixture(), "r");
    CHECK(f != NULL, "%s: cannot open", fixture());
    if (!f) return;
    char line[1024];
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *section = strtok(line, "\t"), *key = strtok(NULL, "\t"), *type = strtok(NULL, "\t");
        char *def = strtok(NULL, "\t");
        CHECK(section && key && type && def, "fixture row %d has four fields", rows + 1);
        if (!def) continue;
        rows++;
        const key_schema *s = titan_job_find_schema(section, key);
        CHECK(s && !s->older, "%s.%s: in torchtitan's last schema, not in schema.c (as a last-schema key)", section,
              key);
        if (!s) continue;
        in_fixture[s - titan_job_schema] = 1;
        char detail[300];
        titan_key_status st = titan_config_key_status(section, key, detail, sizeof detail);
        CHECK(st != TITAN_KEY_UNKNOWN, "%s.%s: no status (neither implemented nor in titan_job_ignored)", section, key);
        CHECK(st == TITAN_KEY_IMPLEMENTED || (s->why && s->why[0]), "%s.%s: %s without a reason", section, key,
              titan_config_key_status_name(st));
        if (s->tt_default && strcmp(def, "None") != 0)
            CHECK(same_value(s->tt_default, def), "%s.%s: schema.c gives torchtitan's default as %s, job_config.py %s",
                  section, key, s->tt_default, def);
        titan_error_clear();
    }
    fclose(f);
    CHECK(rows > 140, "the fixture holds the schema (%d rows)", rows);
    for (int i = 0; i < titan_job_nschema; i++)
        CHECK(titan_job_schema[i].older || in_fixture[i], "%s.%s: marked as the last schema's, not in the fixture",
              titan_job_schema[i].section, titan_job_schema[i].key);
}

/* Every torchtitan key titan accepts without implementing it says why. */
static void test_tables_agree(void) {
    CHECK(titan_job_nschema < (int)(sizeof in_fixture / sizeof in_fixture[0]), "in_fixture is large enough");
    for (int i = 0; i < titan_job_nignored; i++) {
        const key_ignored *ig = &titan_job_ignored[i];
        if (!strcmp(ig->key, "*")) continue;
        const key_schema *s = titan_job_find_schema(ig->section, ig->key);
        CHECK(s && s->why, "%s.%s: accepted (titan_job_ignored) but schema.c gives no reason", ig->section, ig->key);
        CHECK(!titan_job_find_key(ig->section, ig->key) && !titan_job_find_alias(ig->section, ig->key),
              "%s.%s: both implemented and in titan_job_ignored", ig->section, ig->key);
        char accepted[256];
        if (ig->harmless && ig->harmless[0])
            CHECK(titan_job_harmless(i, NULL, accepted, sizeof accepted) == 0 && accepted[0],
                  "%s.%s: harmless values \"%s\" parse", ig->section, ig->key, ig->harmless);
    }
    for (int i = 0; i < titan_job_naliases; i++) {
        const key_alias *a = &titan_job_aliases[i];
        CHECK(titan_job_find_key(a->target_section, a->target) != NULL, "alias %s.%s names a key", a->section, a->key);
        CHECK(titan_job_find_schema(a->section, a->key) != NULL, "alias %s.%s: in schema.c", a->section, a->key);
    }
    /* each key once in schema.c */
    for (int i = 0; i < titan_job_nschema; i++)
        CHECK(titan_job_find_schema(titan_job_schema[i].section, titan_job_schema[i].key) == &titan_job_schema[i],
              "%s.%s: listed twice", titan_job_schema[i].section, titan_job_schema[i].key);
}

/* The statuses that matter most, pinned: a table that accepts everything fails. */
static void test_statuses(void) {
    static const struct {
        const char *section, *key;
        titan_key_status want;
    } pins[] = {
        {"training", "enable_cpu_offload", TITAN_KEY_REFUSED},
        {"training", "dtype", TITAN_KEY_REFUSED},
        {"fault_tolerance", "enable", TITAN_KEY_REFUSED},
        {"model", "converters", TITAN_KEY_IMPLEMENTED},
        {"quantize.linear.float8", "recipe_name", TITAN_KEY_IMPLEMENTED},
        {"quantize.linear.mx", "recipe_name", TITAN_KEY_MEANINGLESS},
        {"model", "hf_assets_path", TITAN_KEY_IMPLEMENTED},
        {"training", "dataset", TITAN_KEY_IMPLEMENTED},
        {"debug", "seed", TITAN_KEY_IMPLEMENTED},
        {"debug", "deterministic", TITAN_KEY_IMPLEMENTED},
        {"compile", "enable", TITAN_KEY_MEANINGLESS},
        {"training.dataloader", "num_workers", TITAN_KEY_MEANINGLESS},
        {"fault_tolerance", "replica_id", TITAN_KEY_MEANINGLESS},
        {"parallelism", "module_fqns_per_model_part", TITAN_KEY_IMPLEMENTED},
    };
    for (size_t i = 0; i < sizeof pins / sizeof pins[0]; i++) {
        char detail[300];
        titan_key_status st = titan_config_key_status(pins[i].section, pins[i].key, detail, sizeof detail);
        CHECK(st == pins[i].want, "%s.%s: %s, want %s", pins[i].section, pins[i].key,
              titan_config_key_status_name(st), titan_config_key_status_name(pins[i].want));
    }
    char detail[300];
    titan_config_key_status("debug", "seed", detail, sizeof detail);
    CHECK(!strcmp(detail, "as training.seed"), "debug.seed: %s", detail);
    titan_config_key_status("training", "enable_cpu_offload", detail, sizeof detail);
    CHECK(!strcmp(detail, "false accepted"), "enable_cpu_offload: %s", detail);
    titan_config_key_status("model", "tokenizer_path", detail, sizeof detail);
    CHECK(!detail[0], "tokenizer_path: refused whatever its value (%s)", detail);
}

/* [debug] seed reaches training.seed; nested tables load; refusals say why. */
static void test_loading(void) {
    titan_job_config c;
    titan_config_defaults(&c);
    titan_status st = titan_config_load_string(&c,
                                               "[debug]\nseed = 42\ndeterministic = true\n"
                                               "[training.dataloader]\nnum_workers = 4\n"
                                               "[quantize.linear.float8]\nfilter_fqns = [\"output\"]\n",
                                               "d.toml");
    CHECK(st == TITAN_OK && c.training_seed == 42 && c.training_deterministic == 1, "debug keys: %s",
          titan_error_message());
    st = titan_config_load_string(&c, "[training]\nseed = 1\n[debug]\nseed = 2\n", "d.toml");
    CHECK(st == TITAN_ERR_USAGE && strstr(titan_error_message(), "same key as training.seed"), "%s",
          titan_error_message());
    st = titan_config_load_string(&c, "[training]\nenable_cpu_offload = true\n", "d.toml");
    CHECK(st == TITAN_ERR_USAGE && strstr(titan_error_message(), "enable_cpu_offload = true: not supported: FSDP's"),
          "%s", titan_error_message());
    st = titan_config_load_string(&c, "[fault_tolerance]\nenable = true\n", "d.toml");
    CHECK(st == TITAN_ERR_USAGE && strstr(titan_error_message(), "torchft") &&
              strstr(titan_error_hint_text(), "set it to false"),
          "%s", titan_error_message());
    st = titan_config_load_string(&c, "[fault_tolerance]\nenabel = true\n", "d.toml");
    CHECK(st == TITAN_ERR_USAGE && strstr(titan_error_message(), "unknown key"), "a misspelt key: %s",
          titan_error_message());
    st = titan_config_load_string(&c, "[training.dataloader]\nworkers = 1\n", "d.toml");
    CHECK(st == TITAN_ERR_USAGE && strstr(titan_error_message(), "training.dataloader.workers"), "%s",
          titan_error_message());
    st = titan_config_override(&c, "--training.dataloader.num_workers=2");
    CHECK(st == TITAN_OK, "a nested key on the command line: %s", titan_error_message());
    st = titan_config_override(&c, "--debug.seed=7");
    CHECK(st == TITAN_OK && c.training_seed == 7, "--debug.seed: %s", titan_error_message());
}

int main(void) {
    titan_log_init("test_job_schema");
    test_fixture_keys();
    test_tables_agree();
    test_statuses();
    test_loading();
    if (failures) {
        fprintf(stderr, "test_job_schema: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_job_schema: ok\n");
    return 0;
}
