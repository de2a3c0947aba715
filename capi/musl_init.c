/* Starts the Go runtime on musl (see musl_init.ld): with the process's
 * environment, no arguments and an empty auxiliary vector, after which the
 * runtime reads the vector from /proc/self/auxv itself. Elsewhere the C
 * library passes the runtime its arguments and this file builds nothing. */
#include <stdlib.h>

#if defined(__linux__) && !defined(__GLIBC__) && !defined(__ANDROID__)

extern char **environ;

typedef void (*prosodyInt_go_init)(int argc, char **argv, char **envp);

/* Defined by the linker when musl_init.ld made the section; a library
 * linked without it has neither, and the runtime starts as it would. */
extern prosodyInt_go_init __start_prosody_go_init[] __attribute__((weak));
extern prosodyInt_go_init __stop_prosody_go_init[] __attribute__((weak));

__attribute__((constructor)) static void prosodyInt_start_go_on_musl(void) {
  size_t n = 0, i;
  char **args;
  prosodyInt_go_init *f;
  if (__start_prosody_go_init == NULL) return;
  while (environ != NULL && environ[n] != NULL) n++;
  /* What the runtime walks: argv (empty) and its NULL, the environment and
   * its NULL, then the auxiliary vector (AT_NULL, 0). It keeps pointers
   * into this array for the life of the process. */
  args = calloc(n + 4, sizeof *args);
  if (args == NULL) abort();
  for (i = 0; i < n; i++) args[1 + i] = environ[i];
  for (f = __start_prosody_go_init; f < __stop_prosody_go_init; f++) (*f)(0, args, args + 1);
}

#endif
