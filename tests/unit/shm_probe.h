/* shm_probe.h - whether POSIX shared memory works here, for the tests whose
 * ranks talk through it (the shared-memory communicator): some sandboxes
 * have no /dev/shm. */
#ifndef TITAN_TESTS_SHM_PROBE_H
#define TITAN_TESTS_SHM_PROBE_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* 1 when a shared-memory segment can be made; else 0 after printing why
 * (the caller then exits 77, skip). */
static inline int shm_works(void) {
    char probe[64];
    snprintf(probe, sizeof probe, "/titan-probe-%ld", (long)getpid());
    int fd = shm_open(probe, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        printf("no POSIX shared memory here (shm_open: %s)\n", strerror(errno));
        return 0;
    }
    close(fd);
    shm_unlink(probe);
    return 1;
}

#endif
