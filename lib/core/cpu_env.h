/* cpu_env.h - process environment the CPU math libraries read at load time. */
#ifndef TITAN_CORE_CPU_ENV_H
#define TITAN_CORE_CPU_ENV_H

/* OpenBLAS 0.3.21 does not recognise some AVX-512 Xeons and falls back to a
 * kernel ~5x slower; it reads OPENBLAS_CORETYPE only when it is loaded, before
 * main(). So when the CPU has AVX-512 and the variable is unset, set it and
 * re-execute this program once. Returns normally otherwise (or if exec fails). */
void titan_cpu_env_setup(char **argv);

#endif
