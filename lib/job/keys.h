/* keys.h - the job config's key table (keys.c), private to lib/job: every key's
 * type, default, check, choices and doc line; config.c reads it to set
 * defaults, load, override, check, explain and write a config. */
#ifndef TITAN_JOB_KEYS_H
#define TITAN_JOB_KEYS_H

#include <stddef.h>

#include "core/toml.h"
#include "job/config.h"

/* T_LIST: a TOML array of strings, kept comma-joined in a char[TITAN_STR]
 * (on the command line also "a,b"); its choices, if any, bound each element.
 * T_LISTS: a TOML array of non-empty arrays of strings, kept in a
 * char[TITAN_LONG_STR], the inner lists comma-joined, joined by ';'. */
typedef enum { T_STR, T_INT, T_INT64, T_DOUBLE, T_BOOL, T_TRI, T_LIST, T_LISTS } key_type;
/* Room for any key's value as TOML text (every byte a \uXXXX escape). */
#define TITAN_VALUE_TEXT (6 * TITAN_LONG_STR + 16)

enum {
    F_LO = 1,        /* lo is a bound */
    F_HI = 2,        /* hi is a bound */
    F_LO_OPEN = 4,   /* value > lo (else >= lo) */
    F_HI_OPEN = 8,   /* value < hi (else <= hi) */
    F_MINUS1 = 16,   /* -1 is also allowed ("unset" / "the flavor's") */
    F_NONEMPTY = 32, /* strings: "" is refused */
    F_ENUM = 64,     /* strings: eoff is an enum field, set to the index of the matching choice */
};

typedef struct {
    const char *section, *key;
    key_type type;
    size_t off;
    const char *sdef;    /* default of a string key */
    double ndef;         /* default of any other key */
    const char *choices; /* "a,b,c" or NULL */
    double lo, hi;
    unsigned flags;
    const char *doc;
    size_t eoff; /* F_ENUM: the enum field the choice resolves into */
} key_def;

extern const key_def titan_job_keys[];
extern const int titan_job_nkeys;
extern const char *const titan_job_sections[];
extern const int titan_job_nsections;

/* Other spellings that mean a supported key: titan's older ones, and
 * torchtitan's where titan has the key under another name (debug.seed). */
typedef struct { const char *section, *key, *target_section, *target; } key_alias;
extern const key_alias titan_job_aliases[];
extern const int titan_job_naliases;

/* Old names of a whole section: its keys are the new section's. */
typedef struct { const char *section, *target; } section_alias;
extern const section_alias titan_job_section_aliases[];
extern const int titan_job_nsection_aliases;

/* Values a supported key will have one day, refused with a reason. */
typedef struct { const char *section, *key, *value, *why, *hint; } key_not_yet;
extern const key_not_yet titan_job_not_yet[];
extern const int titan_job_nnot_yet;

/* torchtitan keys that titan does not implement (keys.c says which values are harmless). */
typedef struct { const char *section, *key, *harmless; } key_ignored;
extern const key_ignored titan_job_ignored[];
extern const int titan_job_nignored;
/* harmless: no value is (the key is refused whatever it is set to) */
#define KEY_REFUSED ""

/* torchtitan's TOML job schema, every key of its last release
 * (tests/fixtures/torchtitan_schema.txt) and the older ones titan still
 * reads, with what titan does with it (schema.c). Whether a key is
 * implemented, meaningless here or refused follows from the tables above;
 * this one says why, and what torchtitan's default is. */
typedef struct {
    const char *section, *key;
    int older;              /* 1: an older torchtitan key, not in the last schema */
    const char *tt_default; /* torchtitan's default in titan's spelling (TOML); NULL: none to compare */
    const char *why;        /* what the key means here, or why it is meaningless or refused */
} key_schema;
extern const key_schema titan_job_schema[];
extern const int titan_job_nschema;

/* Lookups over the tables (config.c). */
const key_def *titan_job_find_key(const char *section, const char *key);
const key_def *titan_job_find_alias(const char *section, const char *key);
int titan_job_find_ignored(const char *section, const char *key);
/* Whether v (NULL: none) is a harmless value of ignored key idx; accepted
 * gets the values that are, "a or b" ("" when none is). */
int titan_job_harmless(int idx, const titan_toml_value *v, char *accepted, size_t cap);
/* k's value in cfg as TOML writes it. */
void titan_job_format_value(const key_def *k, const titan_job_config *cfg, char *buf, size_t cap);
/* Sets key k of cfg from v, with its checks (TITAN_ERR_USAGE naming place). */
titan_status titan_job_set_value(titan_job_config *cfg, const key_def *k, const titan_toml_value *v,
                                 const char *place);
const key_schema *titan_job_find_schema(const char *section, const char *key);

#endif
