/* leak_canary.c - leaks on purpose. tests/c/run.sh expects LeakSanitizer to
 * report it, proving leak checking works with the Go runtime loaded. */
#include <stdlib.h>
#include <string.h>

#include "prosody.h"

static void *volatile sink;

int main(void) {
  const char *v;
  if (prosody_version(&v) != PROSODY_OK) return 2;
  char *p = malloc(4242);
  memset(p, 1, 4242);
  sink = p;
  sink = NULL;
  return 0;
}
