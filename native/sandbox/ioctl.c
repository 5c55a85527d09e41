/*
 * The ioctls the filter could not let pass (seccomp-filter.c): tty input injection,
 * refused whatever the fd, and every request whose type is not known never to reach a
 * file system. Which driver gets a request depends on the fd, not on its number, so the
 * fd decides: on a regular file or directory the request goes to a file system, which may
 * change the file through a read-only fd, unseen by the broker and by Landlock; it is
 * refused (EPERM, as an owner-only ioctl refuses) and reported. On a device the driver
 * answers, and Landlock's IOCTL_DEV governs the devices the command opens; pipes, sockets
 * and the pseudo files of pidfds, namespaces, anonymous inodes (epoll, inotify, a seccomp
 * listener) and /proc hold nothing a file system stores: those continue.
 */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#ifndef PID_FS_MAGIC
#define PID_FS_MAGIC 0x50494446 /* pidfs (Linux 6.9), missing from older headers */
#endif

/* File systems whose regular files and directories are views of the kernel, not stored files. */
static const long k_pseudo_fs[] = {ANON_INODE_FS_MAGIC, PID_FS_MAGIC, NSFS_MAGIC, PROC_SUPER_MAGIC};

static bool pseudo_fs(int fd) {
  struct statfs fs;
  if (fstatfs(fd, &fs) != 0) return false;
  for (size_t i = 0; i < sizeof k_pseudo_fs / sizeof k_pseudo_fs[0]; i++)
    if ((long)fs.f_type == k_pseudo_fs[i]) return true;
  return false;
}

/* True when the request on our duplicate `dup` would reach a file system's own ioctl code. */
static bool reaches_file_system(int dup) {
  int fl = fcntl(dup, F_GETFL);
  if (fl >= 0 && (fl & O_PATH)) return false; /* the kernel's EBADF */
  struct stat st;
  /* What cannot be looked at is refused: fail closed. */
  if (fl < 0 || fstat(dup, &st) != 0) return true;
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return false;
  return !pseudo_fs(dup);
}

enum bsh_action bsh_dec_ioctl(struct bsh_call *c, int fd, uint32_t cmd) {
  const char *name = bsh_refused_ioctl_name(cmd);
  if (name) return bsh_report(c, EPERM, "%s is refused in the sandbox", name);
  int dup = bsh_proc_dup_fd(c, fd);
  if (dup < 0) return BSH_ACT_CONTINUE; /* no such fd: the kernel's EBADF */
  bool refused = reaches_file_system(dup);
  bool anonymous = false;
  if (refused && bsh_fd_path(dup, c->path, sizeof c->path, &anonymous) != 0) c->path[0] = '\0';
  close(dup);
  if (!refused) return BSH_ACT_CONTINUE;
  unsigned type = _IOC_TYPE(cmd);
  char shown[8];
  if (type > ' ' && type < 0x7f) snprintf(shown, sizeof shown, "'%c'", (char)type);
  else snprintf(shown, sizeof shown, "%#x", type);
  return bsh_report(c, EPERM,
                    "request %#x (type %s, number %u) on a file: a file system's ioctl is refused unless known to "
                    "change nothing",
                    cmd, shown, _IOC_NR(cmd));
}
