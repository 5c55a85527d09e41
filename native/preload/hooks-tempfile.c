/*
 * mkstemp and its siblings. libc creates the file internally (not through `open`), so
 * without these hooks the broker would never hear of it: a temp file that `sed -i`,
 * `perl -i` or toybox later renames over the original would look like a file that
 * existed before the turn, be backed up, and come back on restore. Here each name is
 * tried through our own open (O_CREAT|O_EXCL), so the broker records it as created.
 */
#include "preload.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define ATTEMPTS 1000

static void fill(char *x, unsigned attempt) {
  static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  unsigned char rnd[6];
  if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    unsigned long v = (unsigned long)ts.tv_nsec ^ ((unsigned long)getpid() << 16) ^ (attempt * 2654435761UL);
    for (size_t i = 0; i < sizeof rnd; i++, v /= 62) rnd[i] = (unsigned char)(v % 251);
  }
  for (size_t i = 0; i < sizeof rnd; i++) x[i] = letters[rnd[i] % (sizeof letters - 1)];
}

static int make_temp(char *tmpl, int suffixlen, int flags) {
  size_t len = strlen(tmpl);
  if (suffixlen < 0 || len < 6 + (size_t)suffixlen || memcmp(tmpl + len - (size_t)suffixlen - 6, "XXXXXX", 6) != 0) {
    errno = EINVAL;
    return -1;
  }
  char *x = tmpl + len - (size_t)suffixlen - 6;
  int open_flags = (flags & ~O_ACCMODE) | O_RDWR | O_CREAT | O_EXCL;
  for (unsigned attempt = 0; attempt < ATTEMPTS; attempt++) {
    fill(x, attempt);
    int fd = bp_open_common(AT_FDCWD, tmpl, open_flags, 0600);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

BP_EXPORT int mkstemp(char *tmpl) { return make_temp(tmpl, 0, 0); }
BP_EXPORT int mkstemp64(char *tmpl) { return make_temp(tmpl, 0, O_LARGEFILE); }
BP_EXPORT int mkostemp(char *tmpl, int flags) { return make_temp(tmpl, 0, flags); }
BP_EXPORT int mkostemp64(char *tmpl, int flags) { return make_temp(tmpl, 0, flags | O_LARGEFILE); }
BP_EXPORT int mkstemps(char *tmpl, int suffixlen) { return make_temp(tmpl, suffixlen, 0); }
BP_EXPORT int mkstemps64(char *tmpl, int suffixlen) { return make_temp(tmpl, suffixlen, O_LARGEFILE); }
BP_EXPORT int mkostemps(char *tmpl, int suffixlen, int flags) { return make_temp(tmpl, suffixlen, flags); }
BP_EXPORT int mkostemps64(char *tmpl, int suffixlen, int flags) {
  return make_temp(tmpl, suffixlen, flags | O_LARGEFILE);
}
