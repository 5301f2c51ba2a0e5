/* keys.h - the job config's key table (keys.c), private to lib/job: every key's
 * type, default, check, choices and doc line; config.c reads it to set
 * defaults, load, override, check, explain and write a config. */
#ifndef TITAN_JOB_KEYS_H
#define TITAN_JOB_KEYS_H

#include <stddef.h>

#include "job/config.h"

typedef enum { T_STR, T_INT, T_INT64, T_DOUBLE, T_BOOL, T_TRI } key_type;

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

/* Old spellings that mean a supported key. */
/* target: a key of the same section, or "section.key" of another */
typedef struct { const char *section, *key, *target; } key_alias;
extern const key_alias titan_job_aliases[];
extern const int titan_job_naliases;

/* Values a supported key will have one day, refused with a reason. */
typedef struct { const char *section, *key, *value, *why, *hint; } key_not_yet;
extern const key_not_yet titan_job_not_yet[];
extern const int titan_job_nnot_yet;

/* torchtitan keys that titan does not implement (keys.c says which values are harmless). */
typedef struct { const char *section, *key, *harmless; } key_ignored;
extern const key_ignored titan_job_ignored[];
extern const int titan_job_nignored;

#endif
