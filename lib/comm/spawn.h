/* spawn.h - the local launcher: start N ranks of a program on this host
 * (`titan-train --nproc N`) without mpirun.
 *
 * Each rank is a fork+exec of argv with, in its environment:
 *   TITAN_RANK, TITAN_WORLD_SIZE, TITAN_LOCAL_RANK, TITAN_LOCAL_SIZE
 *   TITAN_RENDEZVOUS   a fresh directory (TMPDIR or /tmp, titan-rdv-XXXXXX)
 *                      for the bootstrap's key/value files (bootstrap.h)
 *   TITAN_JOB_ID       "L<pid>-<hex>", unique among jobs running at once;
 *                      shared-memory segments of the job are named
 *                      /titan-<job id>-... (comm.h)
 * and without PMIX_* variables, so that a spawn under a PMIx launcher does
 * not make N processes claim the launcher's one PMIx identity.
 *
 * Every rank gets PR_SET_PDEATHSIG (SIGTERM): if the launcher dies, its ranks
 * die too. SIGINT, SIGTERM and SIGHUP sent to the launcher are passed on to
 * every rank. When a rank fails (non-zero exit or a signal), the others get
 * grace_s seconds to end on their own (a comm operation reports the lost
 * peer by itself, with a message worth reading); then SIGTERM, and SIGKILL
 * 5 s later. At the end the rendezvous directory is removed, with any
 * /dev/shm/titan-<job id>-* segment a crashed rank left behind.
 *
 * Call it before starting threads: it blocks those signals in the calling
 * thread while it waits. */
#ifndef TITAN_COMM_SPAWN_H
#define TITAN_COMM_SPAWN_H

#include "core/error.h"

typedef struct {
    int nproc;            /* ranks to start, 1..1024 */
    double grace_s;       /* see above; <= 0 means 30 */
    const char *tmp_dir;  /* parent of the rendezvous directory; NULL: $TMPDIR, else /tmp */
    int *exit_codes;      /* optional, nproc entries: exit status, or 128+N if killed by signal N */
    int *interrupted;     /* optional: the signal (SIGINT, SIGTERM, SIGHUP) the launcher was sent
                           * and passed on, 0 when none (its ranks' deaths are then no fault of theirs) */
} titan_dist_spawn_options;

/* Runs argv (argv[0] is looked up like execvp) as opt->nproc ranks and
 * waits for all of them. TITAN_OK when every rank exits 0; otherwise
 * TITAN_ERR_FAIL with a message naming the rank that failed first and how
 * (the first other than with status 8, "another rank failed", when one did),
 * and *first_code (optional) set to that rank's code as in exit_codes, for
 * the launcher to exit with. */
titan_status titan_dist_spawn_local(char *const argv[], const titan_dist_spawn_options *opt,
                                    int *first_code);

#endif
