/*
 * The open family: open, open64, openat, openat64, creat, creat64 and the fortified
 * __open_2 / __open64_2 / __openat_2 / __openat64_2. A read-only open goes straight to
 * libc; a write-mode open asks first (see decide.c). All of them end in libc's openat,
 * which is what each of them is on Linux.
 */
#include "preload.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>

int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

BP_HIDDEN int bp_open_common(int dirfd, const char *path, int flags, mode_t mode) {
  struct bp_saved_errno saved = BP_SAVE_ERRNO();
  int fd = -1, alias = -1;
  switch (bp_check_open(dirfd, path, flags, mode, &fd, &alias)) {
    case BP_FAIL:
      return -1;
    case BP_USE_FD:
      BP_RESTORE_ERRNO(saved);
      return fd;
    case BP_PROCEED:
      break;
  }
  BP_RESTORE_ERRNO(saved);
  int rc = BP_REAL(openat)(dirfd, path, flags, mode);
  /* A reopen of a file we hold for writing that Landlock refuses: the held fd stands in. */
  if (rc < 0 && alias >= 0 && errno == EACCES) rc = bp_reopen_alias(alias, flags);
  return rc;
}

/* The mode argument is there only when the open may create a file. */
#define MODE_ARG(flags, last, mode)                 \
  do {                                              \
    if ((flags) & (O_CREAT | BP_O_TMPFILE_BIT)) {   \
      va_list ap;                                   \
      va_start(ap, last);                           \
      mode = (mode_t)va_arg(ap, int);               \
      va_end(ap);                                   \
    }                                               \
  } while (0)

BP_EXPORT int open(const char *path, int flags, ...) {
  mode_t mode = 0;
  MODE_ARG(flags, flags, mode);
  return bp_open_common(AT_FDCWD, path, flags, mode);
}

BP_EXPORT int open64(const char *path, int flags, ...) {
  mode_t mode = 0;
  MODE_ARG(flags, flags, mode);
  return bp_open_common(AT_FDCWD, path, flags | O_LARGEFILE, mode);
}

BP_EXPORT int openat(int dirfd, const char *path, int flags, ...) {
  mode_t mode = 0;
  MODE_ARG(flags, flags, mode);
  return bp_open_common(dirfd, path, flags, mode);
}

BP_EXPORT int openat64(int dirfd, const char *path, int flags, ...) {
  mode_t mode = 0;
  MODE_ARG(flags, flags, mode);
  return bp_open_common(dirfd, path, flags | O_LARGEFILE, mode);
}

BP_EXPORT int creat(const char *path, mode_t mode) {
  return bp_open_common(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

BP_EXPORT int creat64(const char *path, mode_t mode) {
  return bp_open_common(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC | O_LARGEFILE, mode);
}

/* _FORTIFY_SOURCE versions: called without a mode (they abort on O_CREAT in libc). */
BP_EXPORT int __open_2(const char *path, int flags) { return bp_open_common(AT_FDCWD, path, flags, 0); }
BP_EXPORT int __open64_2(const char *path, int flags) { return bp_open_common(AT_FDCWD, path, flags | O_LARGEFILE, 0); }
BP_EXPORT int __openat_2(int dirfd, const char *path, int flags) { return bp_open_common(dirfd, path, flags, 0); }
BP_EXPORT int __openat64_2(int dirfd, const char *path, int flags) {
  return bp_open_common(dirfd, path, flags | O_LARGEFILE, 0);
}
