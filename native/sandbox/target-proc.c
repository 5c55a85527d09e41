/*
 * What /proc and pidfds tell us about a target: its thread group and umask, the
 * directory a relative path starts from, and our own duplicate of one of its fds.
 * All of it is read before SECCOMP_IOCTL_NOTIF_ID_VALID confirms the target was still
 * the one blocked in the syscall (so a recycled pid cannot fool us).
 */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * The fields needed come in the first lines of the status file (Name, Umask, State, Tgid,
 * …, Uid), well inside one page even with a long name: one read() of a page instead of
 * stdio's fstat and 1 KiB reads, on every create and fd call.
 */
int bsh_proc_status(struct bsh_call *c) {
  if (c->have_status) return 0;
  char path[64], text[4096];
  snprintf(path, sizeof path, "/proc/%d/status", (int)c->tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -ESRCH;
  ssize_t n;
  do n = read(fd, text, sizeof text - 1);
  while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return -ESRCH;
  text[n] = '\0';
  long tgid = -1;
  unsigned long mask = 022, ids[4];
  bool seen_umask = false, seen_uid = false;
  for (char *line = text, *end; line; line = end ? end + 1 : NULL) {
    end = strchr(line, '\n');
    if (strncmp(line, "Tgid:", 5) == 0) tgid = strtol(line + 5, NULL, 10);
    /* "Uid: real effective saved fs" */
    if (strncmp(line, "Uid:", 4) == 0) seen_uid = sscanf(line + 4, "%lu %lu %lu %lu", &ids[0], &ids[1], &ids[2], &ids[3]) == 4;
    if (strncmp(line, "Umask:", 6) == 0) {
      mask = strtoul(line + 6, NULL, 8);
      seen_umask = true;
    }
    if (tgid > 0 && seen_uid && seen_umask) break;
  }
  if (tgid <= 0 || !seen_umask || !seen_uid) return -ESRCH;
  c->tgid = (pid_t)tgid;
  c->fsuid = (uid_t)ids[3];
  c->umask = (mode_t)(mask & 0777);
  c->have_status = true;
  return 0;
}

/*
 * The absolute path a relative path of the target starts from: its cwd, or the
 * directory behind dirfd. Errors are the ones the syscall itself would give.
 */
int bsh_proc_base_dir(pid_t tid, int dirfd, char *out, size_t cap) {
  char link[64];
  if (dirfd == AT_FDCWD)
    snprintf(link, sizeof link, "/proc/%d/cwd", (int)tid);
  else if (dirfd < 0)
    return -EBADF;
  else
    snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)tid, dirfd);
  struct stat st;
  if (stat(link, &st) != 0) return dirfd == AT_FDCWD || errno != ENOENT ? -ENOENT : -EBADF;
  if (!S_ISDIR(st.st_mode)) return -ENOTDIR;
  if (st.st_nlink == 0) return -ENOENT; /* a deleted directory: nothing can be created there */
  ssize_t n = readlink(link, out, cap - 1);
  if (n < 0) return -ENOENT;
  if ((size_t)n >= cap - 1) return -ENAMETOOLONG;
  out[n] = '\0';
  return out[0] == '/' ? 0 : -ENOENT;
}

/* Our own reference to the target's fd, taken before its path is looked at. */
int bsh_proc_dup_fd(struct bsh_call *c, int fd) {
  if (fd < 0) return -EBADF;
  int rc = bsh_proc_status(c);
  if (rc != 0) return rc;
  unsigned int flags = c->tid == c->tgid ? 0 : PIDFD_THREAD;
  int pidfd = (int)syscall(__NR_pidfd_open, c->tid, flags);
  if (pidfd < 0) return -ESRCH;
  int dup = (int)syscall(__NR_pidfd_getfd, pidfd, fd, 0);
  int saved = errno;
  close(pidfd);
  if (dup < 0) return saved == EBADF ? -EBADF : -EACCES;
  return dup;
}

/*
 * Our own reference to an fd of another sandboxed process (a thread id is fine too),
 * or -errno. The process is pinned by its pidfd before it is checked to be sandboxed,
 * so a pid reused meanwhile cannot hand us an fd from outside.
 */
int bsh_pid_dup_fd(pid_t pid, int fd) {
  if (fd < 0) return -EBADF;
  int pidfd = (int)syscall(__NR_pidfd_open, pid, 0);
  if (pidfd < 0 && errno == EINVAL) pidfd = (int)syscall(__NR_pidfd_open, pid, PIDFD_THREAD);
  if (pidfd < 0) return -ENOENT;
  if (bsh_in_sandbox_tree(pid) != 1) {
    close(pidfd);
    return -EACCES;
  }
  int dup = (int)syscall(__NR_pidfd_getfd, pidfd, fd, 0);
  int saved = errno;
  close(pidfd);
  if (dup < 0) return saved == EBADF ? -EBADF : -EACCES;
  return dup;
}

/*
 * The path of one of our fds. `anonymous` is true when the object has no name any
 * other process can reach (pipes, sockets, memfd, O_TMPFILE, unlinked files with no
 * other link): changing such an object needs nobody's permission. A file that was
 * unlinked here but still has other links has a name we cannot know: -EACCES.
 */
int bsh_fd_path(int ownfd, char *out, size_t cap, bool *anonymous) {
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", ownfd);
  ssize_t n = readlink(link, out, cap - 1);
  if (n < 0) return -errno;
  if ((size_t)n >= cap - 1) return -ENAMETOOLONG;
  out[n] = '\0';
  struct stat st;
  if (fstat(ownfd, &st) != 0) return -errno;
  static const char deleted[] = " (deleted)";
  size_t dl = sizeof deleted - 1;
  bool unlinked = (size_t)n > dl && strcmp(out + n - dl, deleted) == 0;
  *anonymous = out[0] != '/' || st.st_nlink == 0;
  if (!*anonymous && unlinked) return -EACCES;
  return 0;
}

/* The parent of `pid` from /proc/<pid>/stat (the field after the parenthesised name), or -1. */
static pid_t parent_of(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *close_paren = strrchr(buf, ')');
  long ppid;
  char state;
  if (!close_paren || sscanf(close_paren + 1, " %c %ld", &state, &ppid) != 2) return -1;
  return (pid_t)ppid;
}

/*
 * Every sandboxed process descends from the supervisor: it forked the command, is the
 * child subreaper for orphans, and CLONE_PARENT is refused. Racy by nature (a pid may
 * be reused after we looked), which is fine: this only decides whether a call is
 * refused *visibly*; Landlock's scoping still refuses a signal that reaches outside.
 */
int bsh_in_sandbox_tree(pid_t pid) {
  pid_t self = getpid();
  if (pid == self) return 0;
  pid_t p = pid;
  for (int depth = 0; depth < 4096; depth++) {
    pid_t parent = parent_of(p);
    if (parent < 0) return depth == 0 ? -1 : 0;
    if (parent == self) return 1;
    if (parent <= 1) return 0;
    p = parent;
  }
  return 0;
}

pid_t bsh_pidfd_pid(int ownfd) {
  char path[64], line[128];
  snprintf(path, sizeof path, "/proc/self/fdinfo/%d", ownfd);
  FILE *f = fopen(path, "re");
  if (!f) return -1;
  long pid = -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "Pid:", 4) == 0) pid = strtol(line + 4, NULL, 10);
  fclose(f);
  return pid > 0 ? (pid_t)pid : -1;
}
