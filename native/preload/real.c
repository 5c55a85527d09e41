/*
 * The functions our hooks stand in front of. Each hook calls the next definition of its
 * own name (libc's) through dlsym(RTLD_NEXT), never itself: a hook that called `open`
 * by name would call the hook again.
 */
#include "preload.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

void *bp_next(const char *name) {
  void *fn = dlsym(RTLD_NEXT, name);
  if (!fn) {
    /* Without the real function there is nothing safe to do: say so once and stop. */
    static const char msg[] = "brokered-preload: the real function is missing; aborting\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    abort();
  }
  return fn;
}
