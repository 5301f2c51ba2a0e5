/* cpu_env.c - set OPENBLAS_CORETYPE before OpenBLAS loads (see cpu_env.h). */
#include "core/cpu_env.h"

#include <stdlib.h>
#include <unistd.h>

void titan_cpu_env_setup(char **argv) {
#if defined(__x86_64__)
    if (getenv("OPENBLAS_CORETYPE") || getenv("TITAN_NO_REEXEC")) return;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f")) return;
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    setenv("TITAN_NO_REEXEC", "1", 1); /* never loop */
    execv("/proc/self/exe", argv);
    /* exec failed: go on with the slower kernel */
#else
    (void)argv;
#endif
}
