/*
 * fopen and freopen: libc opens their files internally (not through `open`), so they
 * need hooks of their own. The mode string becomes open flags for the decision.
 */
#include "preload.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

/* open(2) flags for an fopen mode; -1 for a mode fopen itself rejects. */
static int mode_flags(const char *mode) {
  int flags;
  switch (mode[0]) {
    case 'r':
      flags = O_RDONLY;
      break;
    case 'w':
      flags = O_WRONLY | O_CREAT | O_TRUNC;
      break;
    case 'a':
      flags = O_WRONLY | O_CREAT | O_APPEND;
      break;
    default:
      return -1;
  }
  for (const char *p = mode + 1; *p && *p != ','; p++) {
    if (*p == '+') flags = (flags & ~O_ACCMODE) | O_RDWR;
    else if (*p == 'x') flags |= O_EXCL;
    else if (*p == 'e') flags |= O_CLOEXEC;
  }
  return flags;
}

static FILE *from_fd(int fd, const char *mode) {
  FILE *f = fdopen(fd, mode);
  if (!f) bp_finish_fd(fd, 0);
  return f;
}

static FILE *fopen_common(const char *path, const char *mode, FILE *(*real)(const char *, const char *)) {
  struct bp_saved_errno saved = BP_SAVE_ERRNO();
  int flags = mode_flags(mode);
  int fd = -1, alias = -1;
  if (flags >= 0) {
    switch (bp_check_open(AT_FDCWD, path, flags, 0666, &fd, &alias)) {
      case BP_FAIL:
        return NULL;
      case BP_USE_FD:
        BP_RESTORE_ERRNO(saved);
        return from_fd(fd, mode);
      case BP_PROCEED:
        break;
    }
  }
  BP_RESTORE_ERRNO(saved);
  FILE *f = real(path, mode);
  if (!f && alias >= 0 && errno == EACCES) {
    int dup = bp_reopen_alias(alias, flags);
    if (dup >= 0) f = from_fd(dup, mode);
  }
  return f;
}

BP_EXPORT FILE *fopen(const char *path, const char *mode) { return fopen_common(path, mode, BP_REAL(fopen)); }
BP_EXPORT FILE *fopen64(const char *path, const char *mode) { return fopen_common(path, mode, BP_REAL(fopen64)); }

/*
 * freopen with a path: asked like fopen. A granted fd cannot be put into an existing
 * stream portably, so a path only the broker may open (an fd grant) is refused here.
 */
static FILE *freopen_common(const char *path, const char *mode, FILE *stream,
                            FILE *(*real)(const char *, const char *, FILE *)) {
  struct bp_saved_errno saved = BP_SAVE_ERRNO();
  int flags = mode_flags(mode);
  int fd = -1, alias = -1;
  /* A NULL path only changes the mode of the stream's own file. */
  if (flags >= 0 && !bp_is_null(path)) {
    switch (bp_check_open(AT_FDCWD, path, flags, 0666, &fd, &alias)) {
      case BP_FAIL:
        return NULL;
      case BP_USE_FD:
        bp_finish_fd(fd, 0);
        errno = EACCES;
        return NULL;
      case BP_PROCEED:
        break;
    }
  }
  BP_RESTORE_ERRNO(saved);
  return real(path, mode, stream);
}

BP_EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream) {
  return freopen_common(path, mode, stream, BP_REAL(freopen));
}
BP_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream) {
  return freopen_common(path, mode, stream, BP_REAL(freopen64));
}
