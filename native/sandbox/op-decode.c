/*
 * One helper per kind of operation: read the path arguments once, make them absolute,
 * and decide whether the call continues in the kernel (Landlock guards it), is
 * refused, is performed at once, or needs the broker. The syscall-specific unpacking
 * of registers lives in syscall-decode.c.
 */
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

static enum bsh_action refuse(struct bsh_call *c, int err) {
  c->err = err;
  return BSH_ACT_ERRNO;
}

/*
 * A path that is not valid UTF-8 cannot be sent to the broker (the protocol carries text),
 * so it is refused — a sandbox decision the kernel would not have made, so it is reported.
 * The path itself cannot be reported either.
 */
static enum bsh_action not_utf8(struct bsh_call *c) {
  c->path[0] = c->to[0] = '\0';
  return bsh_report(c, EACCES, "a path that is not valid UTF-8 cannot be checked");
}

/* read_path's answer when it refused the path itself and filled in the report (c->refusal). */
#define REPORTED (-100000)

/* A failed step: -EILSEQ (not UTF-8) and REPORTED are reported, anything else is the kernel's own errno. */
static enum bsh_action failed(struct bsh_call *c, int rc) {
  if (rc == REPORTED) return BSH_ACT_REPORT;
  return rc == -EILSEQ ? not_utf8(c) : refuse(c, -rc);
}

/*
 * /proc/<pid>/fd/<n> of a process outside the sandbox (the supervisor, the broker, …), or
 * a name below it: the kernel refuses it (Landlock scopes ptrace access) without a trace,
 * so it is refused here, the same way, and reported.
 */
static int foreign_fd(struct bsh_call *c, const char *path) {
  pid_t pid;
  int fd;
  if (!bsh_proc_fd_prefix(path, &pid, &fd) || pid == c->tgid || pid == c->tid) return 0;
  if (bsh_in_sandbox_tree(pid) != 0) return 0; /* sandboxed (or gone: the kernel's ENOENT) */
  if (path != c->path) memmove(c->path, path, strlen(path) + 1); /* the report names this path (it may be `to`) */
  bsh_report(c, EACCES, "names descriptor %d of process %d, which is outside the sandbox", fd, (int)pid);
  return REPORTED;
}

/* 0, or 1 for a final "." and 2 for a final ".." (trailing slashes ignored). */
static int final_dot(const char *raw) {
  size_t n = strlen(raw);
  while (n > 1 && raw[n - 1] == '/') n--;
  size_t start = n;
  while (start > 0 && raw[start - 1] != '/') start--;
  size_t len = n - start;
  if (len == 1 && raw[start] == '.') return 1;
  if (len == 2 && raw[start] == '.' && raw[start + 1] == '.') return 2;
  return 0;
}

/*
 * Reads one path argument into `out` (absolute, lexical). `raw` receives what the
 * target wrote; an empty path returns 0 with raw[0] == '\0' and leaves `out` alone.
 */
static int read_path(struct bsh_call *c, int dirfd, uint64_t addr, char *raw, char *out, bool *slash) {
  int n = bsh_mem_read_string(c->tid, addr, raw, BSH_PATH_MAX);
  if (n < 0) return n;
  if (n == 0) return 0;
  char base[BSH_PATH_MAX] = "/";
  if (raw[0] != '/') {
    int rc = bsh_proc_base_dir(c->tid, dirfd, base, sizeof base);
    if (rc != 0) return rc;
  }
  int rc = bsh_lexical_join(base, raw, out, BSH_PATH_MAX, slash);
  if (rc != 0) return rc;
  /* Documented limit: the broker protocol carries UTF-8 text only. */
  if (!bsh_utf8_valid(out)) return -EILSEQ;
  if (bsh_mentions_proc_self(out)) {
    if ((rc = bsh_proc_status(c)) != 0) return rc;
    return bsh_rewrite_proc_self(out, BSH_PATH_MAX, c->tgid, c->tid);
  }
  /* /dev/fd/<n>/name: /dev/fd leads to /proc/self, which the broker must not resolve as its own. */
  if (strncmp(out, "/dev/", 5) == 0 && bsh_dev_alias_dir(out)) {
    if ((rc = bsh_proc_status(c)) != 0) return rc;
    return bsh_rewrite_dev_alias(out, BSH_PATH_MAX, c->tgid);
  }
  if (strncmp(out, "/proc/", 6) == 0) {
    if ((rc = bsh_proc_status(c)) != 0) return rc;
    return foreign_fd(c, out);
  }
  return 0;
}

/* A non-empty path argument, or the errno the kernel gives for an empty one. */
static int read_named(struct bsh_call *c, int dirfd, uint64_t addr, char *out, bool *slash, int *dot) {
  char raw[BSH_PATH_MAX];
  int rc = read_path(c, dirfd, addr, raw, out, slash);
  if (rc != 0) return rc;
  if (raw[0] == '\0') return -ENOENT;
  if (dot) *dot = final_dot(raw);
  return 0;
}

/*
 * Whether `path` (in scratch, lexically) stays there: no symlink on the way (at its end
 * too, when the call follows it), or the links lead to scratch again.
 */
static bool stays_in_scratch(const struct bsh_config *cfg, const char *path, bool follow) {
  struct open_how how = {.flags = O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW),
                         .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
  int fd = (int)syscall(__NR_openat2, AT_FDCWD, path, &how, sizeof how);
  if (fd >= 0) close(fd);
  if (fd >= 0 || errno != ELOOP) return true; /* no link on the way: the kernel says the rest */
  char dir[BSH_PATH_MAX], real[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  if (!follow) {
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) *slash = '\0';
  }
  return realpath(dir, real) != NULL && bsh_in_scratch(cfg, real);
}

/*
 * Landlock lets the command do this itself, and would refuse a swapped-in path. A scratch
 * path whose symlinks lead out of scratch would meet Landlock's refusal, which leaves no
 * trace: such a call goes to the broker instead, which resolves the links and decides
 * (audited), and the supervisor performs what it allows. A link made after this check
 * still meets Landlock.
 */
static bool landlock_guarded(const struct bsh_config *cfg, const char *path, bool follow) {
  if (bsh_has_dotdot(path)) return false;
  if (bsh_is_write_dev(cfg, path)) return true;
  return bsh_in_scratch(cfg, path) && stays_in_scratch(cfg, path, follow);
}

/* mkdir and mknod in scratch continue in the kernel, which gives the mode asked: never a set-id one. */
static enum bsh_action continue_create(struct bsh_call *c, bool directory) {
  return bsh_setid_refused(c->mode, directory) ? bsh_refuse_setid(c, c->mode) : BSH_ACT_CONTINUE;
}

/* Landlock's REFER rule, kept for what the supervisor performs (refusal.c, bsh_enters_scratch). */
static enum bsh_action enters_scratch(struct bsh_call *c) {
  return bsh_report(c, EXDEV, "would give a file from outside the command's temp dir a name inside it, "
                              "where writes skip the broker");
}

static enum bsh_action ask(struct bsh_call *c) {
  int rc = bsh_proc_status(c); /* tgid for the request, umask for creation */
  return rc == 0 ? BSH_ACT_ASK : refuse(c, -rc);
}

/*
 * True when the directory that would hold the last name of `path` does not exist. One
 * `stat` more for each exclusive create of a new name, against a broker round trip for
 * each one in a missing directory.
 */
static bool parent_missing(const char *path) {
  char parent[BSH_PATH_MAX];
  const char *name;
  struct stat st;
  return bsh_split_parent(path, parent, sizeof parent, &name) == 0 && stat(parent, &st) != 0 && errno == ENOENT;
}

/*
 * mkdir, mknod, symlink and O_CREAT|O_EXCL of a name that is there: EEXIST; in a directory
 * that is not there: ENOENT. The kernel reports both before a read-only mount, a
 * permission on the last directory, Landlock or the policy could matter, and neither
 * changes anything (`mkdir -p` and `makedirs(exist_ok=True)` meet EEXIST on every
 * existing level, `tar -x` on every file it replaces; git meets ENOENT once per object
 * directory, creating its first object before the directory). Anything else is asked.
 */
static enum bsh_action create_unless_there(struct bsh_call *c) {
  struct stat st;
  if (lstat(c->path, &st) == 0) return refuse(c, EEXIST);
  return errno == ENOENT && parent_missing(c->path) ? refuse(c, ENOENT) : ask(c);
}

/*
 * True when `path` is a directory (not a link to one) holding any name but "." and "..".
 * Read as the supervisor, like create_unless_there's lstat: what the supervisor cannot
 * read is asked about as before.
 */
static bool directory_has_entries(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  DIR *dir = fdopendir(fd);
  if (!dir) {
    close(fd);
    return false;
  }
  bool found = false;
  const struct dirent *e;
  while (!found && (e = readdir(dir)) != NULL) found = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(dir);
  return found;
}

/*
 * rmdir of a directory that holds names: ENOTEMPTY, without a question. `git stash` and
 * git's other cleanups remove emptied directories upwards until one is not empty, ending
 * with rmdir(".git"): asked, that needed a person's approval (the policy protects .git)
 * for a call that removes nothing. The kernel says ENOTEMPTY after its permission and
 * Landlock checks, so a caller they would refuse reads ENOTEMPTY instead of EACCES:
 * either way the call fails and nothing changes. A trailing slash (which follows a link)
 * is asked about as before.
 */
static enum bsh_action rmdir_unless_full(struct bsh_call *c) {
  return !c->path_slash && directory_has_entries(c->path) ? refuse(c, ENOTEMPTY) : ask(c);
}

/* openat2's restricting resolve flags, checked on what the target named, from its dirfd. */
static int check_resolve(struct bsh_call *c, int dirfd, const char *raw, int flags, uint64_t resolve) {
  int base = AT_FDCWD;
  if (raw[0] != '/') {
    if (dirfd == AT_FDCWD) {
      char cwd[64];
      snprintf(cwd, sizeof cwd, "/proc/%d/cwd", (int)c->tid);
      base = open(cwd, O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (base < 0) return -ENOENT;
    } else if ((base = bsh_proc_dup_fd(c, dirfd)) < 0) {
      return base;
    }
  }
  struct open_how how = {.flags = O_PATH | O_CLOEXEC | (uint64_t)(flags & O_NOFOLLOW), .resolve = resolve};
  int fd = (int)syscall(__NR_openat2, base, raw, &how, sizeof how);
  int rc = fd >= 0 ? 0 : -errno;
  if (rc == -ENOENT && (flags & O_CREAT)) {
    /* The file may be created: check the directory that would hold it instead. */
    char parent[BSH_PATH_MAX];
    snprintf(parent, sizeof parent, "%s", raw);
    size_t n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/') parent[--n] = '\0';
    char *slash = strrchr(parent, '/');
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == parent) parent[1] = '\0';
    else *slash = '\0';
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    fd = (int)syscall(__NR_openat2, base, parent, &how, sizeof how);
    rc = fd >= 0 ? 0 : -errno;
  }
  if (fd >= 0) close(fd);
  if (base >= 0) close(base);
  return rc;
}

/*
 * An open that continues in the kernel (Landlock guards it). What the kernel creates in
 * scratch (O_CREAT, O_TMPFILE) gets the mode asked, unseen by the broker: never a set-id one.
 */
static enum bsh_action continue_open(const struct bsh_config *cfg, struct bsh_call *c) {
  bool creates = (c->open_flags & (O_CREAT | BSH_O_TMPFILE_BIT)) && bsh_in_scratch(cfg, c->path);
  return creates && bsh_setid_refused(c->mode, false) ? bsh_refuse_setid(c, c->mode) : BSH_ACT_CONTINUE;
}

/*
 * An open through /dev/stdout, /dev/fd/N or /proc/<pid>/fd/N (the caller's own, or another
 * sandboxed process's; `dup` is our duplicate of that fd, or -errno): judge the file behind it.
 * An O_TMPFILE open through a directory's alias creates a file in that directory: it is
 * judged (and performed) as an O_TMPFILE open of the directory's path.
 */
static enum bsh_action open_alias(const struct bsh_config *cfg, struct bsh_call *c, int dup) {
  if (dup < 0) return refuse(c, dup == -EBADF ? ENOENT : -dup);
  struct stat st;
  bool tmpfile_dir = fstat(dup, &st) == 0 && S_ISDIR(st.st_mode) && (c->open_flags & BSH_O_TMPFILE_BIT);
  if (!tmpfile_dir && (fstat(dup, &st) != 0 || !S_ISREG(st.st_mode))) {
    /* Pipes, terminals, devices, directories: the kernel's reopen meets Landlock. */
    close(dup);
    return BSH_ACT_CONTINUE;
  }
  bool anonymous;
  int rc = bsh_fd_path(dup, c->path, sizeof c->path, &anonymous);
  if (rc != 0) {
    close(dup);
    return failed(c, rc);
  }
  /*
   * Reopened through our duplicate, with nobody's permission: an object no one else can
   * name, or a file the caller already holds open for writing (its own stdout redirected
   * to a log, say) — it can write and truncate that file through the fd it holds, so a
   * second description of it gives nothing new. A read-only fd goes to the broker.
   */
  int held = fcntl(dup, F_GETFL);
  bool held_for_writing = held >= 0 && !(held & O_PATH) && (held & O_ACCMODE) != O_RDONLY;
  if (anonymous || held_for_writing) {
    c->dup_fd = dup;
    c->reopen_dup = true;
    return BSH_ACT_DIRECT;
  }
  close(dup);
  if (!bsh_utf8_valid(c->path)) return not_utf8(c);
  if (landlock_guarded(cfg, c->path, false)) return continue_open(cfg, c);
  c->follow = false;
  c->path_slash = false;
  return ask(c);
}

enum bsh_action bsh_dec_open(const struct bsh_config *cfg, struct bsh_call *c, int dirfd, uint64_t upath,
                             int flags, uint32_t mode, const struct open_how *how) {
  c->op = BSH_OP_OPEN;
  /* Read-only opens (also O_PATH, which drops every other flag) may continue: Landlock allows reads. */
  if (!(flags & BSH_OPEN_WRITE_MASK)) return BSH_ACT_CONTINUE;
  if (how && (how->resolve & RESOLVE_IN_ROOT))
    return bsh_report(c, EACCES, "RESOLVE_IN_ROOT is not supported in the sandbox"); /* documented limit */
  c->open_flags = flags;
  c->flags = (uint32_t)flags;
  c->mode = mode;
  bool excl_create = (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL);
  c->follow = !(flags & O_NOFOLLOW) && !excl_create;
  char raw[BSH_PATH_MAX];
  int rc = read_path(c, dirfd, upath, raw, c->path, &c->path_slash);
  if (rc != 0) return failed(c, rc);
  if (raw[0] == '\0') return refuse(c, ENOENT);
  /* The restrictions the program asked for hold first, on its own view (an fd alias is a magic link). */
  uint64_t restrict_flags = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  if (how && (how->resolve & restrict_flags)) {
    rc = check_resolve(c, dirfd, raw, flags, how->resolve & restrict_flags);
    if (rc != 0) return failed(c, rc);
  }
  int alias_fd;
  if (strncmp(c->path, "/dev/", 5) == 0 || strncmp(c->path, "/proc/", 6) == 0) {
    if ((rc = bsh_proc_status(c)) != 0) return failed(c, rc);
    /* An alias is a (magic) symlink: O_NOFOLLOW refuses it, as the kernel would. */
    if (bsh_fd_alias(c->path, c->tgid, c->tid, &alias_fd))
      return (flags & O_NOFOLLOW) ? refuse(c, ELOOP) : open_alias(cfg, c, bsh_proc_dup_fd(c, alias_fd));
    /* Another sandboxed process's fd (foreign ones were refused by read_path): judged like the caller's own. */
    pid_t owner;
    if (bsh_proc_fd_path(c->path, &owner, &alias_fd))
      return (flags & O_NOFOLLOW) ? refuse(c, ELOOP) : open_alias(cfg, c, bsh_pid_dup_fd(owner, alias_fd));
  }
  if (landlock_guarded(cfg, c->path, c->follow)) return continue_open(cfg, c);
  struct stat st;
  if ((flags & O_NOFOLLOW) && !excl_create && lstat(c->path, &st) == 0 && S_ISLNK(st.st_mode))
    return refuse(c, ELOOP);
  /* The kernel's EEXIST for an exclusive create; not for O_TMPFILE, O_DIRECTORY or a trailing slash. */
  bool plain_create = (flags & (__O_TMPFILE | O_DIRECTORY)) == 0 && !c->path_slash;
  return excl_create && plain_create ? create_unless_there(c) : ask(c);
}

enum bsh_action bsh_dec_truncate(const struct bsh_config *cfg, struct bsh_call *c, uint64_t upath,
                                 int64_t length) {
  c->op = BSH_OP_TRUNCATE;
  c->follow = true;
  if (length < 0) return refuse(c, EINVAL);
  c->length = (uint64_t)length;
  int rc = read_named(c, AT_FDCWD, upath, c->path, &c->path_slash, NULL);
  if (rc != 0) return failed(c, rc);
  return landlock_guarded(cfg, c->path, true) ? BSH_ACT_CONTINUE : ask(c);
}

enum bsh_action bsh_dec_unlink(const struct bsh_config *cfg, struct bsh_call *c, int dirfd, uint64_t upath,
                               int flags) {
  if (flags & ~AT_REMOVEDIR) return refuse(c, EINVAL);
  c->op = flags ? BSH_OP_RMDIR : BSH_OP_UNLINK;
  c->flags = (uint32_t)flags;
  int dot = 0;
  int rc = read_named(c, dirfd, upath, c->path, &c->path_slash, &dot);
  if (rc != 0) return failed(c, rc);
  if (dot) return refuse(c, c->op == BSH_OP_UNLINK ? EISDIR : dot == 1 ? EINVAL : ENOTEMPTY);
  if (landlock_guarded(cfg, c->path, false)) return BSH_ACT_CONTINUE;
  return c->op == BSH_OP_RMDIR ? rmdir_unless_full(c) : ask(c);
}

enum bsh_action bsh_dec_rename(const struct bsh_config *cfg, struct bsh_call *c, int od, uint64_t uold, int nd,
                               uint64_t unew, unsigned flags) {
  c->op = BSH_OP_RENAME;
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) return refuse(c, EINVAL);
  if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE)) return refuse(c, EINVAL);
  /* A whiteout is a 0:0 character device: nothing a command needs, and mknod of devices is refused. */
  if (flags & RENAME_WHITEOUT) return bsh_report(c, EPERM, "RENAME_WHITEOUT makes a device node");
  c->flags = flags;
  int dot1 = 0, dot2 = 0;
  int rc = read_named(c, od, uold, c->path, &c->path_slash, &dot1);
  if (rc == 0) rc = read_named(c, nd, unew, c->to, &c->to_slash, &dot2);
  if (rc != 0) return failed(c, rc);
  if (dot1 || dot2) return refuse(c, EBUSY);
  if (bsh_enters_scratch(cfg, c, c->path, c->to, false)) return enters_scratch(c);
  /* The kernel's own answer between file systems, and mv's cue to copy (refusal.c). */
  if (bsh_leaves_scratch(cfg, c, c->path, c->to)) return refuse(c, EXDEV);
  bool guarded = landlock_guarded(cfg, c->path, false) && landlock_guarded(cfg, c->to, false);
  if (guarded) return BSH_ACT_CONTINUE;
  /*
   * A swap changes both names at once: each is replaced by the other's file (a deny on
   * writing either is sidestepped) and neither is removed, so nothing here would be
   * backed up or judged as what it is. Within scratch it is the command's own business.
   */
  if (flags & RENAME_EXCHANGE)
    return bsh_report(c, EPERM, "RENAME_EXCHANGE outside the command's temp dir: a swap is neither backed up nor judged");
  /*
   * RENAME_NOREPLACE over a name that is there: the kernel's EEXIST, which it gives right
   * after finding both names (a missing source is ENOENT first). mv tries it before every
   * plain rename over a file; asked, it would have the broker back up the file it keeps.
   */
  struct stat st;
  if ((flags & RENAME_NOREPLACE) && !c->to_slash && lstat(c->path, &st) == 0 && lstat(c->to, &st) == 0) return refuse(c, EEXIST);
  return ask(c);
}

/*
 * link(2), or linkat(2) without AT_SYMLINK_FOLLOW, of /proc/<pid>/fd/N or /dev/fd/N: a hard
 * link to the magic link itself, which lives on /proc (or /dev). The kernel refuses it with
 * EXDEV, after the new name's EEXIST or ENOENT and before any permission check: the same
 * answers here, nothing asked. Python before 3.14 makes os.link() such a call.
 */
static enum bsh_action link_to_magic_link(struct bsh_call *c) {
  struct stat st;
  if (lstat(c->to, &st) == 0) return refuse(c, EEXIST);
  return refuse(c, errno == ENOENT && parent_missing(c->to) ? ENOENT : EXDEV);
}

enum bsh_action bsh_dec_link(const struct bsh_config *cfg, struct bsh_call *c, int od, uint64_t uold, int nd,
                             uint64_t unew, int flags) {
  c->op = BSH_OP_LINK;
  if (flags & ~(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH)) return refuse(c, EINVAL);
  c->flags = (uint32_t)flags;
  c->follow = flags & AT_SYMLINK_FOLLOW;
  int dot = 0;
  int rc = read_named(c, nd, unew, c->to, &c->to_slash, &dot);
  if (rc != 0) return failed(c, rc);
  if (dot) return refuse(c, EEXIST);
  char raw[BSH_PATH_MAX];
  if ((rc = read_path(c, od, uold, raw, c->path, &c->path_slash)) != 0) return failed(c, rc);
  int source_fd = od;
  pid_t owner = 0; /* another sandboxed process whose fd the source names */
  if (raw[0] != '\0') {
    if (final_dot(raw)) return refuse(c, EPERM);
    if ((rc = bsh_proc_status(c)) != 0) return failed(c, rc);
    /* linkat("/proc/self/fd/N", AT_SYMLINK_FOLLOW): the O_TMPFILE idiom; the fd names the file. */
    bool own = bsh_fd_alias(c->path, c->tgid, c->tid, &source_fd);
    bool other = !own && bsh_proc_fd_path(c->path, &owner, &source_fd);
    if ((own || other) && !c->follow) return link_to_magic_link(c);
    if (!own && !other) {
      if (bsh_enters_scratch(cfg, c, c->path, c->to, false)) return enters_scratch(c);
      bool guarded = landlock_guarded(cfg, c->path, c->follow) && landlock_guarded(cfg, c->to, false);
      return guarded ? BSH_ACT_CONTINUE : ask(c);
    }
  } else {
    if (!(flags & AT_EMPTY_PATH)) return refuse(c, ENOENT);
    if (od == AT_FDCWD) return refuse(c, EPERM); /* would hard-link the cwd, a directory */
  }
  /* flink(): link the file behind the target's fd (an O_TMPFILE, typically) into place. */
  if ((rc = bsh_proc_status(c)) != 0) return failed(c, rc);
  c->flags |= AT_EMPTY_PATH;
  int dup = owner ? bsh_pid_dup_fd(owner, source_fd) : bsh_proc_dup_fd(c, source_fd);
  /* A name for a missing fd is missing itself (ENOENT); an empty path with a bad fd is EBADF. */
  if (dup < 0) return refuse(c, dup == -EBADF && raw[0] != '\0' ? ENOENT : -dup);
  c->dup_fd = dup;
  c->fd_form = BSH_FD_EMPTY;
  c->follow = false;
  bool anonymous;
  if ((rc = bsh_fd_path(dup, c->path, sizeof c->path, &anonymous)) != 0) return failed(c, rc);
  if (!bsh_utf8_valid(c->path)) return not_utf8(c);
  if (bsh_enters_scratch(cfg, c, c->path, c->to, anonymous)) return enters_scratch(c);
  bool source_ok = anonymous || (bsh_in_scratch(cfg, c->path) && !bsh_has_dotdot(c->path));
  if (source_ok && bsh_in_scratch(cfg, c->to) && !bsh_has_dotdot(c->to)) return BSH_ACT_DIRECT;
  return ask(c);
}

enum bsh_action bsh_dec_symlink(const struct bsh_config *cfg, struct bsh_call *c, uint64_t utarget, int nd,
                                uint64_t upath) {
  c->op = BSH_OP_SYMLINK;
  int n = bsh_mem_read_string(c->tid, utarget, c->link_target, sizeof c->link_target);
  if (n < 0) return refuse(c, -n);
  if (n == 0) return refuse(c, ENOENT);
  if (!bsh_utf8_valid(c->link_target)) {
    c->link_target[0] = '\0';
    return not_utf8(c);
  }
  int dot = 0;
  int rc = read_named(c, nd, upath, c->path, &c->path_slash, &dot);
  if (rc != 0) return failed(c, rc);
  if (dot) return refuse(c, EEXIST);
  return landlock_guarded(cfg, c->path, false) ? BSH_ACT_CONTINUE : create_unless_there(c);
}

enum bsh_action bsh_dec_mkdir(const struct bsh_config *cfg, struct bsh_call *c, int dirfd, uint64_t upath,
                              uint32_t mode) {
  c->op = BSH_OP_MKDIR;
  c->mode = mode & 07777;
  int dot = 0;
  int rc = read_named(c, dirfd, upath, c->path, &c->path_slash, &dot);
  if (rc != 0) return failed(c, rc);
  if (dot) return refuse(c, EEXIST);
  return landlock_guarded(cfg, c->path, false) ? continue_create(c, true) : create_unless_there(c);
}

enum bsh_action bsh_dec_mknod(const struct bsh_config *cfg, struct bsh_call *c, int dirfd, uint64_t upath,
                              uint32_t mode, uint64_t dev) {
  c->op = BSH_OP_MKNOD;
  uint32_t type = mode & S_IFMT;
  if (type == 0) type = S_IFREG;
  /* Devices (and sockets, which bind(2) makes) are not something a command creates here. */
  if (type != S_IFREG && type != S_IFIFO && type != S_IFCHR && type != S_IFBLK && type != S_IFSOCK)
    return refuse(c, EINVAL);
  c->mode = type | (mode & 07777);
  int dot = 0;
  int rc = read_named(c, dirfd, upath, c->path, &c->path_slash, &dot);
  if (rc != 0) return failed(c, rc);
  if (type == S_IFCHR || type == S_IFBLK || type == S_IFSOCK)
    return bsh_report(c, EPERM, "device and socket nodes are not made in the sandbox (device %llu:%llu)",
                      (unsigned long long)major((dev_t)dev), (unsigned long long)minor((dev_t)dev));
  if (dot) return refuse(c, EEXIST);
  return landlock_guarded(cfg, c->path, false) ? continue_create(c, false) : create_unless_there(c);
}

/* Performed on our duplicate without asking: a chmod there sets no set-id bit (set-id.c). */
static enum bsh_action direct_on_fd(struct bsh_call *c) {
  if (c->op != BSH_OP_CHMOD) return BSH_ACT_DIRECT;
  struct stat st;
  bool directory = fstat(c->dup_fd, &st) == 0 && S_ISDIR(st.st_mode);
  return bsh_setid_refused(c->mode, directory) ? bsh_refuse_setid(c, c->mode) : BSH_ACT_DIRECT;
}

/*
 * Metadata calls through an fd: take our own duplicate FIRST, then name what it
 * refers to. The target may dup2 another file onto that number meanwhile; our
 * duplicate still refers to the file we ask about and act on.
 */
enum bsh_action bsh_dec_meta_fd(const struct bsh_config *cfg, struct bsh_call *c, int fd, enum bsh_fd_form form) {
  int rc = bsh_proc_status(c);
  if (rc != 0) return failed(c, rc);
  int dup = bsh_proc_dup_fd(c, fd);
  if (dup < 0) return refuse(c, -dup);
  c->dup_fd = dup;
  c->fd_form = form;
  c->follow = false;
  bool anonymous;
  if ((rc = bsh_fd_path(dup, c->path, sizeof c->path, &anonymous)) != 0) return failed(c, rc);
  if (anonymous) return direct_on_fd(c);
  if (!bsh_utf8_valid(c->path)) return not_utf8(c);
  if (bsh_in_scratch(cfg, c->path) && !bsh_has_dotdot(c->path)) return direct_on_fd(c);
  if (bsh_meta_noop(c)) return BSH_ACT_DONE;
  c->flags |= AT_EMPTY_PATH;
  return ask(c);
}

/*
 * Metadata calls by path (chmod, chown, utimes, xattrs). Landlock does not guard
 * metadata, so CONTINUE is never safe here: in scratch we resolve and perform the
 * call ourselves; elsewhere the broker decides. `null_is_fd`: a NULL path with a
 * real dirfd means "this fd" (utimensat, futimesat).
 */
enum bsh_action bsh_dec_meta_path(const struct bsh_config *cfg, struct bsh_call *c, int dirfd, uint64_t upath,
                                  int atflags, bool null_is_fd) {
  c->flags = (uint32_t)atflags;
  c->follow = !(atflags & AT_SYMLINK_NOFOLLOW);
  if (upath == 0 && null_is_fd) {
    if (dirfd == AT_FDCWD) return refuse(c, EFAULT);
    if (atflags != 0) return refuse(c, EINVAL);
    c->flags = 0;
    return bsh_dec_meta_fd(cfg, c, dirfd, BSH_FD_PLAIN);
  }
  char raw[BSH_PATH_MAX];
  int rc = read_path(c, dirfd, upath, raw, c->path, &c->path_slash);
  if (rc != 0) return failed(c, rc);
  if (raw[0] == '\0') {
    if (!(atflags & AT_EMPTY_PATH)) return refuse(c, ENOENT);
    c->flags &= ~(uint32_t)AT_EMPTY_PATH;
    if (dirfd != AT_FDCWD) return bsh_dec_meta_fd(cfg, c, dirfd, BSH_FD_EMPTY);
    /* AT_FDCWD with "": the cwd itself. */
    if ((rc = bsh_proc_base_dir(c->tid, AT_FDCWD, c->path, sizeof c->path)) != 0) return failed(c, rc);
    if (!bsh_utf8_valid(c->path)) return not_utf8(c);
    c->follow = false;
  }
  if (bsh_in_scratch(cfg, c->path) && !bsh_has_dotdot(c->path)) {
    char local[BSH_PATH_MAX];
    rc = bsh_local_resolve(cfg, c->path, c->follow, local, sizeof local);
    if (rc < 0) return failed(c, rc);
    if (rc == 0) {
      memcpy(c->path, local, strlen(local) + 1);
      return c->op == BSH_OP_CHMOD ? bsh_setid_chmod_scratch(c) : BSH_ACT_DIRECT;
    }
  }
  return ask(c);
}
