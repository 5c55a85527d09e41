/*
 * Which paths need nobody's permission. Scratch dirs and a few devices are writable
 * under Landlock, so an operation there may simply continue in the kernel: if a racing
 * thread swaps the path after we read it, the kernel re-reads the new path and Landlock,
 * which allows writes only to these same places, refuses it. That is the only reason
 * CONTINUE is safe, so it is used only where Landlock guards the operation.
 *
 * Also here: fd aliases (/dev/stdout, /dev/fd/N, /proc/<self>/fd/N), which reopen
 * one of the caller's own fds rather than name a file, or, used as a directory
 * (/dev/fd/N/name), name what is below the directory that fd holds.
 */
#include "sandbox.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const k_dev_exact[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"};
static const char *const k_dev_dirs[] = {"/dev/pts"};

/* Standard aliases, trusted only if /dev really links them to /proc/self/fd (checked once). */
static const struct {
  const char *path, *expect;
  int fd; /* -1: a directory of fds */
} k_alias[] = {
    {"/dev/stdin", "/proc/self/fd/0", 0},
    {"/dev/stdout", "/proc/self/fd/1", 1},
    {"/dev/stderr", "/proc/self/fd/2", 2},
    {"/dev/fd", "/proc/self/fd", -1},
};
static bool alias_ok[sizeof k_alias / sizeof k_alias[0]];

void bsh_fast_path_init(void) {
  for (size_t i = 0; i < sizeof k_alias / sizeof k_alias[0]; i++) {
    char buf[64];
    ssize_t n = readlink(k_alias[i].path, buf, sizeof buf - 1);
    if (n < 0) continue;
    buf[n] = '\0';
    alias_ok[i] = strcmp(buf, k_alias[i].expect) == 0;
  }
}

bool bsh_in_scratch(const struct bsh_config *cfg, const char *path) {
  for (size_t i = 0; i < cfg->n_scratch; i++)
    if (bsh_path_under(path, cfg->scratch[i]) || bsh_path_under(path, cfg->scratch_real[i])) return true;
  return false;
}

/* Parses "<digits>" followed by end or '/'; returns the position after it, or NULL. */
static const char *digits(const char *p, long *value) {
  if (!isdigit((unsigned char)*p)) return NULL;
  char *end;
  errno = 0;
  long v = strtol(p, &end, 10);
  if (errno || v < 0 || v > INT_MAX || (*end != '\0' && *end != '/')) return NULL;
  *value = v;
  return end;
}

/*
 * /proc/<pid>/fd/<n> or /proc/<pid>/task/<tid>/fd/<n> (tid = -1 when absent); with
 * `below`, also followed by "/..." (the fd used as a directory).
 */
static bool parse_proc_fd(const char *path, bool below, long *pid, long *tid, long *fd) {
  if (strncmp(path, "/proc/", 6) != 0) return false;
  const char *p = digits(path + 6, pid);
  if (!p || *p != '/') return false;
  *tid = -1;
  if (strncmp(p, "/task/", 6) == 0) {
    p = digits(p + 6, tid);
    if (!p || *p != '/') return false;
  }
  if (strncmp(p, "/fd/", 4) != 0) return false;
  p = digits(p + 4, fd);
  return p && (*p == '\0' || (below && *p == '/'));
}

/* /dev/stdin|stdout|stderr and /dev/fd/<n>, when /dev links them as usual. */
static bool dev_alias(const char *path, long *fd) {
  for (size_t i = 0; i < sizeof k_alias / sizeof k_alias[0]; i++) {
    if (!alias_ok[i]) continue;
    if (k_alias[i].fd >= 0 && strcmp(path, k_alias[i].path) == 0) {
      *fd = k_alias[i].fd;
      return true;
    }
    size_t n = strlen(k_alias[i].path);
    if (k_alias[i].fd < 0 && strncmp(path, k_alias[i].path, n) == 0 && path[n] == '/') {
      const char *end = digits(path + n + 1, fd);
      return end && *end == '\0';
    }
  }
  return false;
}

/*
 * Devices and fd aliases Landlock lets the command write (or, for an alias, judges by
 * the file behind the fd, which is exactly the kernel's own check on reopen).
 */
bool bsh_is_write_dev(const struct bsh_config *cfg, const char *path) {
  for (size_t i = 0; i < sizeof k_dev_exact / sizeof k_dev_exact[0]; i++)
    if (strcmp(path, k_dev_exact[i]) == 0) return true;
  for (size_t i = 0; i < sizeof k_dev_dirs / sizeof k_dev_dirs[0]; i++)
    if (bsh_path_under(path, k_dev_dirs[i])) return true;
  for (size_t i = 0; i < cfg->n_write_dev; i++)
    if (bsh_path_under(path, cfg->write_dev[i])) return true;
  long pid, tid, fd;
  return dev_alias(path, &fd) || parse_proc_fd(path, false, &pid, &tid, &fd);
}

/* Is `path` /proc/<pid>/fd/<n> or /proc/<pid>/task/<tid>/fd/<n>? Then the process (or thread) and n. */
bool bsh_proc_fd_path(const char *path, pid_t *pid, int *fd) {
  long p, t, n;
  if (!parse_proc_fd(path, false, &p, &t, &n)) return false;
  *pid = (pid_t)(t < 0 ? p : t);
  *fd = (int)n;
  return true;
}

/* The same, or a path below such an fd (/proc/<pid>/fd/<n>/name): the fd as a directory. */
bool bsh_proc_fd_prefix(const char *path, pid_t *pid, int *fd) {
  long p, t, n;
  if (!parse_proc_fd(path, true, &p, &t, &n)) return false;
  *pid = (pid_t)(t < 0 ? p : t);
  *fd = (int)n;
  return true;
}

/*
 * The alias that `path` goes below (/dev/fd/3/a.txt, /dev/stdin/x): the fd used as a
 * directory. Index into k_alias, or -1. The exact aliases (/dev/stdout, /dev/fd/3) are
 * bsh_fd_alias's.
 */
static int alias_below(const char *path) {
  for (size_t i = 0; i < sizeof k_alias / sizeof k_alias[0]; i++) {
    size_t n = strlen(k_alias[i].path);
    if (!alias_ok[i] || strncmp(path, k_alias[i].path, n) != 0 || path[n] != '/') continue;
    /* The directory of fds: "/<n>/" must follow, a name below one fd. */
    const char *slash = strchr(path + n + 1, '/');
    if (k_alias[i].fd < 0 && (!slash || slash == path + n + 1)) return -1;
    return (int)i;
  }
  return -1;
}

bool bsh_dev_alias_dir(const char *path) { return alias_below(path) >= 0; }

/*
 * /dev/fd/<n>/rest → /proc/<tgid>/fd/<n>/rest (and /dev/stdin/rest → /proc/<tgid>/fd/0/rest):
 * what the kernel reaches through /dev's links, in the caller's view. Resolved as named, the
 * alias would lead the broker through its own /proc/self. 0 (rewritten or not an alias
 * directory), or -ENAMETOOLONG.
 */
int bsh_rewrite_dev_alias(char *path, size_t cap, pid_t tgid) {
  int i = alias_below(path);
  if (i < 0) return 0;
  static const char self[] = "/proc/self";
  char tmp[BSH_PATH_MAX];
  int n = snprintf(tmp, sizeof tmp, "/proc/%d%s%s", (int)tgid, k_alias[i].expect + sizeof self - 1,
                   path + strlen(k_alias[i].path));
  if (n < 0 || (size_t)n >= sizeof tmp || (size_t)n >= cap) return -ENAMETOOLONG;
  memcpy(path, tmp, (size_t)n + 1);
  return 0;
}

/* Does `path` reopen one of the caller's own fds? Then *fd is its number. */
bool bsh_fd_alias(const char *path, pid_t tgid, pid_t tid, int *fd) {
  long p, t, n;
  if (dev_alias(path, &n)) {
    *fd = (int)n;
    return true;
  }
  if (!parse_proc_fd(path, false, &p, &t, &n)) return false;
  bool own = t < 0 ? (p == tgid || p == tid) : (p == tgid && t == tid);
  if (own) *fd = (int)n;
  return own;
}

/*
 * For metadata calls in scratch, which Landlock does not guard: resolve the path
 * ourselves and act on the result only if it is still inside scratch. Returns 0
 * (out is usable), 1 (not ours to decide: ask the broker) or -errno.
 */
int bsh_local_resolve(const struct bsh_config *cfg, const char *lexical, bool follow, char *out, size_t cap) {
  char real[PATH_MAX], parent[BSH_PATH_MAX];
  const char *name = NULL;
  if (follow) {
    if (!realpath(lexical, real)) return -errno;
  } else {
    int rc = bsh_split_parent(lexical, parent, sizeof parent, &name);
    if (rc != 0) return 1;
    if (!realpath(parent, real)) return -errno;
  }
  int n = name ? snprintf(out, cap, "%s/%s", strcmp(real, "/") == 0 ? "" : real, name)
               : snprintf(out, cap, "%s", real);
  if (n < 0 || (size_t)n >= cap) return -ENAMETOOLONG;
  return bsh_in_scratch(cfg, out) && !bsh_has_dotdot(out) ? 0 : 1;
}
