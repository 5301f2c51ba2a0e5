/* log.h - messages for people, on stderr. stdout is for data only. */
#ifndef TITAN_CORE_LOG_H
#define TITAN_CORE_LOG_H

#include "error.h"

void titan_log_init(const char *prog);      /* "titan-train" */
const char *titan_log_prog(void);
void titan_log_set_verbosity(int level);    /* 0 quiet, 1 normal, 2 verbose */
int titan_log_verbosity(void);

void titan_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  /* level >= 1 */
void titan_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* level >= 2 */
void titan_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  /* always */

/* Prints "prog: error: <message>" and "hint: <hint>" for the recorded error
 * and returns its status, so a main() ends with `return titan_report(st);`. */
int titan_report(titan_status st);

#endif
