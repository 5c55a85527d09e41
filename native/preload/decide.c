/*
 * What a hook does before its real call, in one place: which calls need the broker's
 * word, what path to ask about, and what each answer means.
 *
 * Nothing is asked for what cannot change a file's content or a name the policy
 * covers: read-only opens, writes to devices, FIFOs and sockets (Landlock governs
 * which ones the command may open), an unnamed O_TMPFILE (naming it is asked), and a
 * reopen of a file this process already holds open for writing (/dev/stdout, /dev/fd/N).
 * A call the kernel will refuse anyway (a missing file without O_CREAT, O_EXCL on an
 * existing name) is left to fail, or fails here with the kernel's errno, without a
 * round trip.
 */
#include "preload.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

static enum bp_verdict fail(int err) {
  errno = err;
  return BP_FAIL;
}

static bool held_for_writing(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl >= 0 && !(fl & O_PATH) && (fl & O_ACCMODE) != O_RDONLY;
}

/*
 * The broker opened the file O_RDWR|O_CREAT|O_NONBLOCK (the text protocol carries no
 * flags): the rest of what the caller asked for is applied here.
 */
static int adopt(int fd, int flags, bool created, mode_t mode) {
  if ((flags & O_TRUNC) && ftruncate(fd, 0) != 0) return -1;
  /* The broker opens without blocking; the status flags become the caller's own. */
  int cur = fcntl(fd, F_GETFL);
  if (cur < 0) return -1;
  int want = (cur & ~(O_APPEND | O_NONBLOCK)) | (flags & (O_APPEND | O_NONBLOCK));
  if (want != cur && fcntl(fd, F_SETFL, want) != 0) return -1;
  if (!(flags & O_CLOEXEC) && fcntl(fd, F_SETFD, 0) != 0) return -1;
  /* A file the broker created gets the mode this process would have given it. */
  if (created && BP_REAL(fchmod)(fd, mode & ~bp_umask() & 07777) != 0) return -1;
  return 0;
}

static enum bp_verdict ask(const char *path, const char *lexical, int *fd) {
  int granted = -1;
  switch (bp_ask_write(path, &granted)) {
    case BP_TOKEN_SANDBOX:
      return BP_PROCEED;
    case BP_TOKEN_FD:
      *fd = granted;
      return BP_USE_FD;
    case BP_TOKEN_DENY:
      return fail(lexical ? bp_deny_errno(lexical) : EACCES);
    default:
      return fail(EACCES);
  }
}

enum bp_verdict bp_check_open(int dirfd, const char *path, int flags, mode_t mode, int *fd, int *alias) {
  *fd = -1;
  *alias = -1;
  /* A file it creates gets the mode asked, which the token request does not carry (set-id.c). */
  if ((flags & (O_CREAT | BP_O_TMPFILE_BIT)) && bp_setid_refused(mode, false)) return fail(EACCES);
  if (!(flags & BP_OPEN_WRITE_FLAGS) || (flags & BP_O_TMPFILE_BIT) || !path) return BP_PROCEED;
  char abs[BP_PATH_MAX];
  if (bp_absolute(dirfd, path, abs) != 0) return BP_FAIL;
  bool nofollow = flags & O_NOFOLLOW;
  int held = bp_fd_alias(abs);
  if (held >= 0 && held_for_writing(held)) {
    *alias = held;
    return BP_PROCEED;
  }
  struct stat st;
  if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL) && bp_stat(abs, true, &st) == 0) return fail(EEXIST);
  bool exists = bp_stat(abs, nofollow, &st) == 0;
  if (!exists && (errno != ENOENT || !(flags & O_CREAT))) return BP_PROCEED;
  if (exists && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) return BP_PROCEED;
  char canon[BP_PATH_MAX];
  const char *name = abs;
  if (exists && bp_is_magic(abs)) {
    if (bp_canonical(abs, nofollow, canon) != 0) return BP_PROCEED;
    name = canon;
  }
  int granted = -1;
  enum bp_verdict verdict = ask(name, abs, &granted);
  if (verdict != BP_USE_FD) return verdict;
  if (adopt(granted, flags, !exists, mode) != 0) {
    int err = errno;
    close(granted);
    return fail(err);
  }
  *fd = granted;
  return BP_USE_FD;
}

int bp_reopen_alias(int alias, int flags) {
  int fd = fcntl(alias, (flags & O_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
  struct stat st;
  if (fd >= 0 && (flags & O_TRUNC) && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ftruncate(fd, 0) != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

enum bp_verdict bp_check_fd_change(int fd, int *grant) {
  *grant = -1;
  if (fcntl(fd, F_GETFL) < 0 || held_for_writing(fd)) return BP_PROCEED;
  char path[BP_PATH_MAX];
  struct stat st;
  if (bp_fd_path(fd, path) != 0 || fstat(fd, &st) != 0 || S_ISLNK(st.st_mode)) return BP_PROCEED;
  return ask(path, NULL, grant);
}

enum bp_verdict bp_check_path_change(int dirfd, const char *path, bool nofollow, int *fd) {
  *fd = -1;
  if (!path) return BP_PROCEED;
  char abs[BP_PATH_MAX];
  if (bp_absolute(dirfd, path, abs) != 0) return BP_FAIL;
  int held = bp_fd_alias(abs);
  if (held >= 0 && !nofollow) return bp_check_fd_change(held, fd);
  struct stat st;
  if (bp_stat(abs, nofollow, &st) != 0) return BP_PROCEED;
  /* A link's own times or owner: no content, and the broker would judge its target. */
  if (S_ISLNK(st.st_mode)) return BP_PROCEED;
  char canon[BP_PATH_MAX];
  const char *name = abs;
  if (bp_is_magic(abs)) {
    if (bp_canonical(abs, nofollow, canon) != 0) return BP_PROCEED;
    name = canon;
  }
  return ask(name, NULL, fd);
}

enum bp_verdict bp_check_create(const char *abs) {
  int granted = -1;
  enum bp_verdict verdict = ask(abs, abs, &granted);
  if (verdict == BP_USE_FD) {
    /* Only an open can use a granted fd. */
    close(granted);
    return fail(EACCES);
  }
  return verdict;
}

int bp_finish_fd(int fd, int rc) {
  int err = errno;
  close(fd);
  errno = err;
  return rc;
}
