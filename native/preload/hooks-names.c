/*
 * Calls that change names: rename, renameat, renameat2, unlink, unlinkat, rmdir,
 * link, linkat, symlink, symlinkat, mkdir, mkdirat. Each becomes a JSON
 * HostFileOperation the broker performs after its policy check and backup; its
 * answer becomes our return value and errno (EXDEV stays EXDEV, so `mv` falls back to
 * copy and delete, each of which is asked again).
 *
 * Paths are sent lexically (a rename or unlink acts on the name, not on what a link
 * points to). What the kernel would refuse at once (EEXIST for an existing target of
 * mkdir/link/symlink or RENAME_NOREPLACE, EISDIR for unlink of a directory, ENOTDIR
 * for rmdir of a file, ENOTEMPTY for rmdir of a directory with names in it) fails here
 * without a round trip.
 */
#include "preload.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static int failed(int err) {
  errno = err;
  return -1;
}

static int done(int rc, struct bp_saved_errno saved) {
  if (rc == 0) BP_RESTORE_ERRNO(saved);
  return rc;
}

/* Whether the last component of the path as written is `name` ("." and ".." matter to rmdir). */
static bool last_is(const char *path, const char *name) {
  size_t len = strlen(path);
  while (len > 1 && path[len - 1] == '/') len--;
  size_t start = len;
  while (start > 0 && path[start - 1] != '/') start--;
  return len - start == strlen(name) && memcmp(path + start, name, len - start) == 0;
}

static bool ends_with_slash(const char *path) {
  size_t len = strlen(path);
  return len > 0 && path[len - 1] == '/';
}

static int rename_common(int od, const char *old, int nd, const char *new, unsigned flags) {
  struct bp_saved_errno saved = BP_SAVE_ERRNO();
  char from[BP_PATH_MAX], to[BP_PATH_MAX];
  if (bp_absolute(od, old, from) != 0 || bp_absolute(nd, new, to) != 0) return -1;
  if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) return failed(EINVAL);
  struct stat st;
  if (flags & RENAME_EXCHANGE) {
    if (flags & RENAME_NOREPLACE) return failed(EINVAL);
    /* Both names change in place: each is asked for (and backed up), then the real call. */
    if (bp_stat(from, true, &st) != 0 || bp_stat(to, true, &st) != 0) return -1;
    if (bp_check_create(from) != BP_PROCEED || bp_check_create(to) != BP_PROCEED) return -1;
    BP_RESTORE_ERRNO(saved);
    return BP_REAL(renameat2)(od, old, nd, new, flags);
  }
  if ((flags & RENAME_NOREPLACE) && bp_stat(to, true, &st) == 0) return failed(EEXIST);
  struct bp_host_op op = {.operation = "rename", .from = from, .to = to};
  return done(bp_host_op(&op), saved);
}

BP_EXPORT int rename(const char *old, const char *new) { return rename_common(AT_FDCWD, old, AT_FDCWD, new, 0); }
BP_EXPORT int renameat(int od, const char *old, int nd, const char *new) { return rename_common(od, old, nd, new, 0); }
BP_EXPORT int renameat2(int od, const char *old, int nd, const char *new, unsigned flags) {
  return rename_common(od, old, nd, new, flags);
}

static int unlink_common(int dirfd, const char *path, int flags) {
  struct bp_saved_errno saved = BP_SAVE_ERRNO();
  char abs[BP_PATH_MAX];
  if (flags & ~AT_REMOVEDIR) return failed(EINVAL);
  if (bp_absolute(dirfd, path, abs) != 0) return -1;
  bool dir = flags & AT_REMOVEDIR;
  if (dir) {
    /* rmdir("x/.") and rmdir("x/..") name no removable entry. */
    if (last_is(path, ".")) return failed(EINVAL);
    if (last_is(path, "..")) return failed(ENOTEMPTY);
  }
  struct stat st;
  if (bp_stat(abs, true, &st) != 0) return -1;
  if (dir && !S_ISDIR(st.st_mode)) return failed(ENOTDIR);
  /* Nothing would be removed: no question (git's cleanups end with rmdir(".git"), which needs approval). */
  if (dir && !ends_with_slash(path) && bp_dir_has_entries(abs)) return failed(ENOTEMPTY);
  if (!dir && S_ISDIR(st.st_mode)) return failed(EISDIR);
  if (!dir && ends_with_slash(path)) return failed(ENOTDIR);
  struct bp_host_op op = {.operation = "delete", .path = abs};
  return done(bp_host_op(&op), saved);
}

BP_EXPORT int unlink(const char *path) { return unlink_common(AT_FDCWD, path, 0); }
BP_EXPORT int unlinkat(int dirfd, const char *path, int flags) { return unlink_common(dirfd, path, flags); }
BP_EXPORT int rmdir(const char *path) { return unlink_common(AT_FDCWD, path, AT_REMOVEDIR); }

static int mkdir_common(int dirfd, const char *path, mode_t mode) {
  struct bp_saved_errno saved = BP_SAVE_ERRNO();
  char abs[BP_PATH_MAX];
  if (bp_absolute(dirfd, path, abs) != 0) return -1;
  struct stat st;
  if (bp_stat(abs, true, &st) == 0) return failed(EEXIST);
  mode_t want = mode & ~bp_umask() & 07777;
  struct bp_host_op op = {.operation = "mkdir", .path = abs, .has_mode = true, .mode = want};
  if (bp_host_op(&op) != 0) return -1;
  /* The broker's own umask applied too: give the directory the mode we would have. */
  if (bp_stat(abs, true, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) != want)
    BP_REAL(fchmodat)(AT_FDCWD, abs, want, 0);
  return done(0, saved);
}

BP_EXPORT int mkdir(const char *path, mode_t mode) { return mkdir_common(AT_FDCWD, path, mode); }
BP_EXPORT int mkdirat(int dirfd, const char *path, mode_t mode) { return mkdir_common(dirfd, path, mode); }

/*
 * A hard link. One whose source is an fd (AT_EMPTY_PATH, or /proc/<pid>/fd/N: the way
 * an O_TMPFILE is published) cannot be named to the broker: the new name is asked for
 * and the real call made (it only creates; linkat never replaces). The broker links
 * what the source path resolves to.
 */
static int link_common(int od, const char *old, int nd, const char *new, int flags) {
  struct bp_saved_errno saved = BP_SAVE_ERRNO();
  if (flags & ~(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH)) return failed(EINVAL);
  char from[BP_PATH_MAX], to[BP_PATH_MAX];
  if (bp_absolute(nd, new, to) != 0) return -1;
  bool from_fd = (flags & AT_EMPTY_PATH) && !old[0];
  if (!from_fd) {
    if (bp_absolute(od, old, from) != 0) return -1;
    from_fd = bp_is_magic(from);
  }
  struct stat st;
  if (bp_stat(to, true, &st) == 0) return failed(EEXIST);
  if (from_fd) {
    if (bp_check_create(to) != BP_PROCEED) return -1;
    BP_RESTORE_ERRNO(saved);
    return BP_REAL(linkat)(od, old, nd, new, flags);
  }
  struct bp_host_op op = {.operation = "link", .from = from, .to = to};
  return done(bp_host_op(&op), saved);
}

BP_EXPORT int link(const char *old, const char *new) { return link_common(AT_FDCWD, old, AT_FDCWD, new, 0); }
BP_EXPORT int linkat(int od, const char *old, int nd, const char *new, int flags) {
  return link_common(od, old, nd, new, flags);
}

static int symlink_common(const char *target, int nd, const char *linkpath) {
  struct bp_saved_errno saved = BP_SAVE_ERRNO();
  char to[BP_PATH_MAX];
  if (bp_absolute(nd, linkpath, to) != 0) return -1;
  if (!target) return failed(EFAULT);
  if (!target[0]) return failed(ENOENT);
  struct stat st;
  if (bp_stat(to, true, &st) == 0) return failed(EEXIST);
  struct bp_host_op op = {.operation = "link", .from = target, .to = to, .symbolic = true};
  return done(bp_host_op(&op), saved);
}

BP_EXPORT int symlink(const char *target, const char *linkpath) { return symlink_common(target, AT_FDCWD, linkpath); }
BP_EXPORT int symlinkat(const char *target, int nd, const char *linkpath) {
  return symlink_common(target, nd, linkpath);
}
