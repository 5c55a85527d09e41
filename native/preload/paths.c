/*
 * Paths as the broker must see them: absolute (from the cwd or the dirfd a call
 * names), lexically clean, and never naming "self" — the broker is another process,
 * so /proc/self there would be the broker. Files reached through /proc or /dev links
 * (/dev/stdout, /proc/<pid>/fd/N) are named by their real path, read here.
 *
 * Our own lookups use the raw syscalls or libc functions no hook stands in front of.
 */
#include "preload.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static size_t format_int(char *out, long v) {
  char digits[24];
  size_t n = 0;
  bool neg = v < 0;
  unsigned long u = neg ? (unsigned long)-v : (unsigned long)v;
  do {
    digits[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u > 0);
  size_t len = 0;
  if (neg) out[len++] = '-';
  while (n > 0) out[len++] = digits[--n];
  out[len] = '\0';
  return len;
}

static int raw_open(const char *path, int flags) { return (int)syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC, 0); }

int bp_fd_path(int fd, char out[BP_PATH_MAX]) {
  char link[32] = "/proc/self/fd/";
  format_int(link + strlen(link), fd);
  ssize_t n = readlink(link, out, BP_PATH_MAX - 1);
  if (n <= 0 || out[0] != '/') return -1;
  out[n] = '\0';
  static const char deleted[] = " (deleted)";
  size_t dl = sizeof deleted - 1;
  if ((size_t)n >= dl && memcmp(out + n - dl, deleted, dl) == 0) return -1;
  return 0;
}

/* Appends the components of `rel` to out (length *len), dropping "" and ".". */
static int append(char out[BP_PATH_MAX], size_t *len, const char *rel) {
  const char *p = rel;
  while (*p) {
    while (*p == '/') p++;
    const char *start = p;
    while (*p && *p != '/') p++;
    size_t n = (size_t)(p - start);
    if (n == 0 || (n == 1 && start[0] == '.')) continue;
    size_t need = (*len > 1 ? 1 : 0) + n;
    if (*len + need + 1 > BP_PATH_MAX) {
      errno = ENAMETOOLONG;
      return -1;
    }
    if (*len > 1) out[(*len)++] = '/';
    memcpy(out + *len, start, n);
    *len += n;
    out[*len] = '\0';
  }
  return 0;
}

/* /proc/self and /proc/thread-self named by number. */
static int unself(char out[BP_PATH_MAX]) {
  static const char self[] = "/proc/self", thread[] = "/proc/thread-self";
  const char *rest;
  char head[64] = "/proc/";
  if (strncmp(out, thread, sizeof thread - 1) == 0 && (out[sizeof thread - 1] == '/' || !out[sizeof thread - 1])) {
    rest = out + sizeof thread - 1;
    size_t n = strlen(head);
    n += format_int(head + n, getpid());
    memcpy(head + n, "/task/", 7);
    n += 6;
    format_int(head + n, (long)syscall(SYS_gettid));
  } else if (strncmp(out, self, sizeof self - 1) == 0 && (out[sizeof self - 1] == '/' || !out[sizeof self - 1])) {
    rest = out + sizeof self - 1;
    format_int(head + strlen(head), getpid());
  } else {
    return 0;
  }
  size_t hl = strlen(head), rl = strlen(rest);
  if (hl + rl + 1 > BP_PATH_MAX) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memmove(out + hl, rest, rl + 1);
  memcpy(out, head, hl);
  return 0;
}

int bp_absolute(int dirfd, const char *path, char out[BP_PATH_MAX]) {
  if (!path) {
    errno = EFAULT;
    return -1;
  }
  if (!*path) {
    errno = ENOENT;
    return -1;
  }
  out[0] = '/';
  out[1] = '\0';
  size_t len = 1;
  if (path[0] != '/') {
    char base[BP_PATH_MAX];
    if (dirfd == AT_FDCWD) {
      if (!getcwd(base, sizeof base)) return -1;
      if (base[0] != '/') {
        /* "(unreachable)/…": the cwd is outside our root; no path names it. */
        errno = ENOENT;
        return -1;
      }
    } else {
      struct stat st;
      if (fstat(dirfd, &st) != 0) return -1;
      if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
      }
      if (bp_fd_path(dirfd, base) != 0) {
        errno = ENOENT;
        return -1;
      }
    }
    if (append(out, &len, base) != 0) return -1;
  }
  if (append(out, &len, path) != 0) return -1;
  return unself(out);
}

static bool starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static int parse_fd(const char *s) {
  if (!*s) return -1;
  long v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || v > 1 << 20) return -1;
    v = v * 10 + (*s - '0');
  }
  return (int)v;
}

int bp_fd_alias(const char *abs) {
  if (strcmp(abs, "/dev/stdin") == 0) return 0;
  if (strcmp(abs, "/dev/stdout") == 0) return 1;
  if (strcmp(abs, "/dev/stderr") == 0) return 2;
  if (starts(abs, "/dev/fd/")) return parse_fd(abs + strlen("/dev/fd/"));
  char mine[48] = "/proc/";
  size_t n = strlen(mine);
  n += format_int(mine + n, getpid());
  memcpy(mine + n, "/fd/", 5);
  if (starts(abs, mine)) return parse_fd(abs + strlen(mine));
  return -1;
}

bool bp_is_magic(const char *abs) {
  return starts(abs, "/proc/") || starts(abs, "/dev/") || strcmp(abs, "/proc") == 0 || strcmp(abs, "/dev") == 0;
}

int bp_canonical(const char *abs, bool nofollow, char out[BP_PATH_MAX]) {
  int fd = raw_open(abs, O_PATH | (nofollow ? O_NOFOLLOW : 0));
  if (fd < 0) return -1;
  int rc = bp_fd_path(fd, out);
  close(fd);
  return rc;
}

int bp_stat(const char *abs, bool nofollow, struct stat *st) {
  return fstatat(AT_FDCWD, abs, st, nofollow ? AT_SYMLINK_NOFOLLOW : 0);
}

/* One record of getdents64, as the kernel lays it out. */
struct bp_dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

bool bp_dir_has_entries(const char *abs) {
  int fd = raw_open(abs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  if (fd < 0) return false;
  char buf[1024] __attribute__((aligned(8)));
  bool found = false;
  long n;
  while (!found && (n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
    for (long at = 0; at < n && !found;) {
      const struct bp_dirent64 *e = (const struct bp_dirent64 *)(buf + at);
      found = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
      at += e->d_reclen;
    }
  }
  close(fd);
  return found;
}

int bp_deny_errno(const char *abs) {
  char parent[BP_PATH_MAX];
  size_t len = strlen(abs);
  while (len > 1 && abs[len - 1] != '/') len--;
  if (len > 1) len--;
  memcpy(parent, abs, len);
  parent[len] = '\0';
  struct stat st;
  if (bp_stat(parent, false, &st) != 0) return errno == ENOENT || errno == ENOTDIR ? errno : EACCES;
  return S_ISDIR(st.st_mode) ? EACCES : ENOTDIR;
}

mode_t bp_umask(void) {
  int fd = raw_open("/proc/self/status", O_RDONLY);
  mode_t mask = 022;
  if (fd < 0) return mask;
  char buf[2048];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return mask;
  buf[n] = '\0';
  const char *line = strstr(buf, "\nUmask:");
  if (!line) return mask;
  line += strlen("\nUmask:");
  while (*line == ' ' || *line == '\t') line++;
  mode_t value = 0;
  bool any = false;
  for (; *line >= '0' && *line <= '7'; line++) {
    value = (mode_t)(value * 8 + (mode_t)(*line - '0'));
    any = true;
  }
  return any ? value & 0777 : mask;
}
