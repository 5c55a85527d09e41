/*
 * Set-id bits: a set-uid or set-gid program the command leaves behind runs with its
 * owner's or group's rights for whoever starts it later, outside the sandbox. The text
 * token protocol carries no mode, so the broker cannot judge a chmod or a creating open
 * here: the library refuses them itself (EACCES, the answer to a denial), with the
 * broker's rule (src/plugins/set-id-bits.ts): set-uid on anything, set-gid on anything
 * but a directory. A mkdir goes to the broker as a host operation with its mode, and is
 * judged there. mknod is hooked here for this alone: the library asks nothing else about
 * it (a FIFO or file it makes is one Landlock allows, like any create of a static program).
 */
#include "preload.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>

bool bp_setid_refused(mode_t mode, bool directory) {
  return (mode & S_ISUID) || (!directory && (mode & S_ISGID));
}

/* Whether the object `st` describes (or could not be looked at: fail closed) takes `mode`. */
static bool allowed(mode_t mode, int looked, const struct stat *st) {
  if (!(mode & (S_ISUID | S_ISGID))) return true;
  bool refused = bp_setid_refused(mode, looked == 0 && S_ISDIR(st->st_mode));
  if (refused) errno = EACCES;
  return !refused;
}

bool bp_chmod_allowed_at(int dirfd, const char *path, mode_t mode, bool nofollow) {
  struct stat st;
  if (!(mode & (S_ISUID | S_ISGID))) return true;
  return allowed(mode, fstatat(dirfd, path, &st, nofollow ? AT_SYMLINK_NOFOLLOW : 0), &st);
}

bool bp_chmod_allowed_fd(int fd, mode_t mode) {
  struct stat st;
  if (!(mode & (S_ISUID | S_ISGID))) return true;
  return allowed(mode, fstat(fd, &st), &st);
}

BP_EXPORT int mknodat(int dirfd, const char *path, mode_t mode, dev_t dev) {
  if (bp_setid_refused(mode, false)) {
    errno = EACCES;
    return -1;
  }
  return BP_REAL(mknodat)(dirfd, path, mode, dev);
}

BP_EXPORT int mknod(const char *path, mode_t mode, dev_t dev) { return mknodat(AT_FDCWD, path, mode, dev); }
