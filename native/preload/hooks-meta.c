/*
 * Changes to an existing file's content length or metadata: truncate, chmod, chown,
 * utimes and extended attributes, by path and by fd. Each asks with a text token
 * request (the broker backs the file up, mode and times included) and then makes the
 * real call; on an fd grant the change is made through the broker's fd instead.
 *
 * Landlock does not govern chmod, chown, utimes or xattrs, so in this runtime these
 * hooks are what applies the policy to them. An fd-based change through an fd held
 * open for writing was already asked for when that fd was opened.
 */
#include "preload.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <utime.h>

/* `with_fd` (using `fd`) when `check` (which may set `fd`) says the broker granted one,
 * else `real`; errno as the caller left it either way. */
#define GUARD(check, with_fd, real)                                        \
  do {                                                                     \
    struct bp_saved_errno saved_ = BP_SAVE_ERRNO();                        \
    int fd = -1;                                                           \
    switch (check) {                                                       \
      case BP_FAIL:                                                        \
        return -1;                                                         \
      case BP_USE_FD:                                                      \
        BP_RESTORE_ERRNO(saved_);                                          \
        return bp_finish_fd(fd, (with_fd));                                \
      case BP_PROCEED:                                                     \
        break;                                                             \
    }                                                                      \
    BP_RESTORE_ERRNO(saved_);                                              \
    return (real);                                                         \
  } while (0)

/* By path. */
#define GUARD_PATH(dirfd, path, nofollow, with_fd, real) \
  GUARD(bp_check_path_change((dirfd), (path), (nofollow), &fd), with_fd, real)

/* By fd: `with_fd` runs on the broker's fd (named `fd` there). */
#define GUARD_FD(target, with_fd, real) GUARD(bp_check_fd_change((target), &fd), with_fd, real)

/* truncate */
BP_EXPORT int truncate(const char *path, off_t length) {
  GUARD_PATH(AT_FDCWD, path, false, ftruncate(fd, length), BP_REAL(truncate)(path, length));
}
BP_EXPORT int truncate64(const char *path, off64_t length) {
  GUARD_PATH(AT_FDCWD, path, false, ftruncate64(fd, length), BP_REAL(truncate64)(path, length));
}

/* chmod; no set-uid or set-gid program is made (set-id.c). */
BP_EXPORT int chmod(const char *path, mode_t mode) {
  if (!bp_chmod_allowed_at(AT_FDCWD, path, mode, false)) return -1;
  GUARD_PATH(AT_FDCWD, path, false, BP_REAL(fchmod)(fd, mode), BP_REAL(chmod)(path, mode));
}
BP_EXPORT int lchmod(const char *path, mode_t mode) {
  if (!bp_chmod_allowed_at(AT_FDCWD, path, mode, true)) return -1;
  GUARD_PATH(AT_FDCWD, path, true, BP_REAL(fchmod)(fd, mode), BP_REAL(lchmod)(path, mode));
}
BP_EXPORT int fchmod(int target, mode_t mode) {
  if (!bp_chmod_allowed_fd(target, mode)) return -1;
  GUARD_FD(target, BP_REAL(fchmod)(fd, mode), BP_REAL(fchmod)(target, mode));
}
BP_EXPORT int fchmodat(int dirfd, const char *path, mode_t mode, int flags) {
  if ((flags & AT_EMPTY_PATH) && !path[0]) {
    if (!bp_chmod_allowed_fd(dirfd, mode)) return -1;
    GUARD_FD(dirfd, BP_REAL(fchmod)(fd, mode), BP_REAL(fchmodat)(dirfd, path, mode, flags));
  }
  if (!bp_chmod_allowed_at(dirfd, path, mode, flags & AT_SYMLINK_NOFOLLOW)) return -1;
  GUARD_PATH(dirfd, path, flags & AT_SYMLINK_NOFOLLOW, BP_REAL(fchmod)(fd, mode),
             BP_REAL(fchmodat)(dirfd, path, mode, flags));
}

/* chown */
BP_EXPORT int chown(const char *path, uid_t uid, gid_t gid) {
  GUARD_PATH(AT_FDCWD, path, false, BP_REAL(fchown)(fd, uid, gid), BP_REAL(chown)(path, uid, gid));
}
BP_EXPORT int lchown(const char *path, uid_t uid, gid_t gid) {
  GUARD_PATH(AT_FDCWD, path, true, BP_REAL(fchown)(fd, uid, gid), BP_REAL(lchown)(path, uid, gid));
}
BP_EXPORT int fchown(int target, uid_t uid, gid_t gid) {
  GUARD_FD(target, BP_REAL(fchown)(fd, uid, gid), BP_REAL(fchown)(target, uid, gid));
}
BP_EXPORT int fchownat(int dirfd, const char *path, uid_t uid, gid_t gid, int flags) {
  if ((flags & AT_EMPTY_PATH) && !path[0])
    GUARD_FD(dirfd, BP_REAL(fchown)(fd, uid, gid), BP_REAL(fchownat)(dirfd, path, uid, gid, flags));
  GUARD_PATH(dirfd, path, flags & AT_SYMLINK_NOFOLLOW, BP_REAL(fchown)(fd, uid, gid),
             BP_REAL(fchownat)(dirfd, path, uid, gid, flags));
}

/* times */
BP_EXPORT int utimensat(int dirfd, const char *path, const struct timespec times[2], int flags) {
  /* A NULL path (a Linux extension) or AT_EMPTY_PATH acts on dirfd itself. */
  if (bp_is_null(path) || ((flags & AT_EMPTY_PATH) && !path[0]))
    GUARD_FD(dirfd, BP_REAL(futimens)(fd, times), BP_REAL(utimensat)(dirfd, path, times, flags));
  GUARD_PATH(dirfd, path, flags & AT_SYMLINK_NOFOLLOW, BP_REAL(futimens)(fd, times),
             BP_REAL(utimensat)(dirfd, path, times, flags));
}
BP_EXPORT int futimens(int target, const struct timespec times[2]) {
  GUARD_FD(target, BP_REAL(futimens)(fd, times), BP_REAL(futimens)(target, times));
}
BP_EXPORT int utimes(const char *path, const struct timeval times[2]) {
  GUARD_PATH(AT_FDCWD, path, false, BP_REAL(futimes)(fd, times), BP_REAL(utimes)(path, times));
}
BP_EXPORT int lutimes(const char *path, const struct timeval times[2]) {
  GUARD_PATH(AT_FDCWD, path, true, BP_REAL(futimes)(fd, times), BP_REAL(lutimes)(path, times));
}
BP_EXPORT int futimes(int target, const struct timeval times[2]) {
  GUARD_FD(target, BP_REAL(futimes)(fd, times), BP_REAL(futimes)(target, times));
}
BP_EXPORT int futimesat(int dirfd, const char *path, const struct timeval times[2]) {
  if (bp_is_null(path)) GUARD_FD(dirfd, BP_REAL(futimes)(fd, times), BP_REAL(futimesat)(dirfd, path, times));
  GUARD_PATH(dirfd, path, false, BP_REAL(futimes)(fd, times), BP_REAL(futimesat)(dirfd, path, times));
}

static int futime_buf(int fd, const struct utimbuf *times) {
  if (!times) return BP_REAL(futimens)(fd, NULL);
  struct timespec ts[2] = {{times->actime, 0}, {times->modtime, 0}};
  return BP_REAL(futimens)(fd, ts);
}
BP_EXPORT int utime(const char *path, const struct utimbuf *times) {
  GUARD_PATH(AT_FDCWD, path, false, futime_buf(fd, times), BP_REAL(utime)(path, times));
}

/* extended attributes */
BP_EXPORT int setxattr(const char *path, const char *name, const void *value, size_t size, int flags) {
  GUARD_PATH(AT_FDCWD, path, false, BP_REAL(fsetxattr)(fd, name, value, size, flags),
             BP_REAL(setxattr)(path, name, value, size, flags));
}
BP_EXPORT int lsetxattr(const char *path, const char *name, const void *value, size_t size, int flags) {
  GUARD_PATH(AT_FDCWD, path, true, BP_REAL(fsetxattr)(fd, name, value, size, flags),
             BP_REAL(lsetxattr)(path, name, value, size, flags));
}
BP_EXPORT int fsetxattr(int target, const char *name, const void *value, size_t size, int flags) {
  GUARD_FD(target, BP_REAL(fsetxattr)(fd, name, value, size, flags), BP_REAL(fsetxattr)(target, name, value, size, flags));
}
BP_EXPORT int removexattr(const char *path, const char *name) {
  GUARD_PATH(AT_FDCWD, path, false, BP_REAL(fremovexattr)(fd, name), BP_REAL(removexattr)(path, name));
}
BP_EXPORT int lremovexattr(const char *path, const char *name) {
  GUARD_PATH(AT_FDCWD, path, true, BP_REAL(fremovexattr)(fd, name), BP_REAL(lremovexattr)(path, name));
}
BP_EXPORT int fremovexattr(int target, const char *name) {
  GUARD_FD(target, BP_REAL(fremovexattr)(fd, name), BP_REAL(fremovexattr)(target, name));
}
