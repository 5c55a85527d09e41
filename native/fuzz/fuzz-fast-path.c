/*
 * libFuzzer target: the supervisor's fast-path classifiers (native/sandbox/fast-path.c).
 * They decide, from a lexical path alone, that a modifying syscall may CONTINUE in the
 * kernel (scratch dirs, writable devices) or reopens one of the caller's own fds. Each
 * is compared with an independent reference that splits the path into components:
 *   bsh_in_scratch    — under a scratch dir (as given or real), at a component boundary;
 *   bsh_is_write_dev  — /dev/null|zero|full|tty, under /dev/pts or a --write-dev, an
 *                       fd alias (/dev/stdin…, /dev/fd/N) or /proc/<pid>[/task/<tid>]/fd/<n>;
 *   bsh_fd_alias      — the fd number, only for the caller's own pid/tid, within int;
 *   bsh_rewrite_dev_alias — a path below /dev/fd/<name> or /dev/std{in,out,err} becomes
 *                       /proc/<tgid>/fd/<name or 0..2>/rest; every other path is kept.
 * Input: u32 tgid, u32 tid, u8 counts, then scratch/write-dev dirs and the path, NUL-separated.
 */
#include "sandbox.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz-input.h"

static bool alias_linked[4];
static const char *const k_alias_path[] = {"/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/fd"};
static const char *const k_alias_expect[] = {"/proc/self/fd/0", "/proc/self/fd/1", "/proc/self/fd/2", "/proc/self/fd"};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  bsh_fast_path_init();
  for (int i = 0; i < 4; i++) {
    char buf[64];
    ssize_t n = readlink(k_alias_path[i], buf, sizeof buf - 1);
    if (n < 0) continue;
    buf[n] = '\0';
    alias_linked[i] = strcmp(buf, k_alias_expect[i]) == 0;
  }
  return 0;
}

/* Components of an absolute path with no empty component (no "//", no trailing "/"). */
struct comps {
  char *buf;
  const char *part[16];
  size_t n;
  bool clean; /* absolute and no empty component */
};

static void split(const char *path, struct comps *c) {
  c->buf = strdup(path);
  if (!c->buf) abort();
  c->n = 0;
  c->clean = path[0] == '/' && path[1] != '\0';
  char *p = c->buf + (path[0] == '/' ? 1 : 0);
  for (;;) {
    char *slash = strchr(p, '/');
    if (slash) *slash = '\0';
    if (*p == '\0') c->clean = false;
    if (c->n < 16) c->part[c->n] = p;
    c->n++;
    if (!slash) break;
    p = slash + 1;
  }
}

/* All digits and at most INT_MAX (leading zeros allowed, as strtol reads them). */
static bool number(const char *s, long *value) {
  if (!*s) return false;
  long v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (*p - '0');
    if (v > INT_MAX) return false;
  }
  *value = v;
  return true;
}

static bool ref_under(const char *path, const char *dir) {
  if (strcmp(dir, "/") == 0) return path[0] == '/';
  size_t n = strlen(dir);
  return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* /proc/<pid>/fd/<n> or /proc/<pid>/task/<tid>/fd/<n>. */
static bool ref_proc_fd(const struct comps *c, long *pid, long *tid, long *fd) {
  if (!c->clean || c->n > 16 || strcmp(c->part[0], "proc") != 0) return false;
  *tid = -1;
  if (c->n == 4) return number(c->part[1], pid) && strcmp(c->part[2], "fd") == 0 && number(c->part[3], fd);
  if (c->n == 6)
    return number(c->part[1], pid) && strcmp(c->part[2], "task") == 0 && number(c->part[3], tid) &&
           strcmp(c->part[4], "fd") == 0 && number(c->part[5], fd);
  return false;
}

static bool ref_dev_alias(const char *path, const struct comps *c, long *fd) {
  for (int i = 0; i < 3; i++)
    if (alias_linked[i] && strcmp(path, k_alias_path[i]) == 0) {
      *fd = i;
      return true;
    }
  return alias_linked[3] && c->clean && c->n == 3 && strcmp(c->part[0], "dev") == 0 && strcmp(c->part[1], "fd") == 0 &&
         number(c->part[2], fd);
}

static char *absolute_dir(const char *raw) {
  /* A configured dir: absolute, without a trailing slash (main.c strips them). */
  size_t n = strlen(raw);
  char *dir = malloc(n + 2);
  if (!dir) abort();
  snprintf(dir, n + 2, "%s%s", raw[0] == '/' ? "" : "/", raw);
  size_t l = strlen(dir);
  while (l > 1 && dir[l - 1] == '/') dir[--l] = '\0';
  return dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fuzz_input in = {data, size, 0};
  pid_t tgid = (pid_t)(fuzz_u32(&in) & 0x7fffffff);
  pid_t tid = (pid_t)(fuzz_u32(&in) & 0x7fffffff);
  uint8_t counts = fuzz_u8(&in);
  struct bsh_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.n_scratch = counts & 3;
  cfg.n_write_dev = (counts >> 2) & 3;
  char *owned[16];
  size_t n_owned = 0;
  for (size_t i = 0; i < cfg.n_scratch; i++) {
    char *raw = fuzz_string(&in);
    char *dir = absolute_dir(raw);
    free(raw);
    cfg.scratch[i] = owned[n_owned++] = dir;
    /* The real form: here a second, different dir, so both lists are exercised. */
    char *raw2 = fuzz_string(&in);
    cfg.scratch_real[i] = owned[n_owned++] = absolute_dir(raw2);
    free(raw2);
  }
  for (size_t i = 0; i < cfg.n_write_dev; i++) {
    char *raw = fuzz_string(&in);
    cfg.write_dev[i] = owned[n_owned++] = absolute_dir(raw);
    free(raw);
  }
  char *path = fuzz_string(&in);

  bool want_scratch = false;
  for (size_t i = 0; i < cfg.n_scratch; i++)
    want_scratch = want_scratch || ref_under(path, cfg.scratch[i]) || ref_under(path, cfg.scratch_real[i]);
  FUZZ_CHECK(bsh_in_scratch(&cfg, path) == want_scratch, "in_scratch(\"%s\")", path);

  struct comps c;
  split(path, &c);
  long pid = 0, ptid = 0, pfd = 0, afd = 0;
  bool proc_fd = ref_proc_fd(&c, &pid, &ptid, &pfd);
  bool dev_alias = ref_dev_alias(path, &c, &afd);
  bool want_dev = strcmp(path, "/dev/null") == 0 || strcmp(path, "/dev/zero") == 0 || strcmp(path, "/dev/full") == 0 ||
                  strcmp(path, "/dev/tty") == 0 || ref_under(path, "/dev/pts") || dev_alias || proc_fd;
  for (size_t i = 0; i < cfg.n_write_dev; i++) want_dev = want_dev || ref_under(path, cfg.write_dev[i]);
  FUZZ_CHECK(bsh_is_write_dev(&cfg, path) == want_dev, "is_write_dev(\"%s\") want %d", path, want_dev);

  int fd = -12345;
  bool alias = bsh_fd_alias(path, tgid, tid, &fd);
  bool own = proc_fd && (ptid < 0 ? (pid == tgid || pid == tid) : (pid == tgid && ptid == tid));
  bool want_alias = dev_alias || own;
  FUZZ_CHECK(alias == want_alias, "fd_alias(\"%s\", %d, %d) = %d", path, (int)tgid, (int)tid, alias);
  if (alias) {
    long want_fd = dev_alias ? afd : pfd;
    FUZZ_CHECK(fd >= 0 && fd == want_fd, "fd_alias(\"%s\") fd %d want %ld", path, fd, want_fd);
  } else {
    FUZZ_CHECK(fd == -12345, "fd written without an alias");
  }

  /* The alias-as-directory rewrite, against a prefix test of its own. */
  char want[3 * BSH_PATH_MAX];
  want[0] = '\0';
  static const char *const std_names[] = {"/dev/stdin/", "/dev/stdout/", "/dev/stderr/"};
  for (int i = 0; i < 3 && !want[0]; i++) {
    size_t n = strlen(std_names[i]);
    if (alias_linked[i] && strncmp(path, std_names[i], n) == 0)
      snprintf(want, sizeof want, "/proc/%d/fd/%d%s", (int)tgid, i, path + n - 1);
  }
  const char *below = strncmp(path, "/dev/fd/", 8) == 0 ? strchr(path + 8, '/') : NULL;
  if (!want[0] && alias_linked[3] && below && below != path + 8)
    snprintf(want, sizeof want, "/proc/%d/fd/%s", (int)tgid, path + 8);
  FUZZ_CHECK(bsh_dev_alias_dir(path) == (want[0] != '\0'), "dev_alias_dir(\"%s\")", path);
  char rewritten[BSH_PATH_MAX];
  if (strlen(path) < sizeof rewritten) {
    memcpy(rewritten, path, strlen(path) + 1);
    int rc = bsh_rewrite_dev_alias(rewritten, sizeof rewritten, tgid);
    if (!want[0]) FUZZ_CHECK(rc == 0 && strcmp(rewritten, path) == 0, "rewrite changed \"%s\"", path);
    else if (strlen(want) < sizeof rewritten) FUZZ_CHECK(rc == 0 && strcmp(rewritten, want) == 0, "rewrite(\"%s\") = \"%s\" want \"%s\"", path, rewritten, want);
    else FUZZ_CHECK(rc == -ENAMETOOLONG, "rewrite(\"%s\") too long: rc %d", path, rc);
  }

  free(c.buf);
  free(path);
  for (size_t i = 0; i < n_owned; i++) free(owned[i]);
  return 0;
}
