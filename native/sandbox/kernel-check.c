/*
 * Asks the running kernel for every feature the sandbox depends on, before anything
 * runs. Header constants prove nothing about the kernel, so each feature is probed.
 * A missing feature is a clear message and exit 126: the command never runs
 * unprotected.
 */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static int check_landlock(char *err, size_t errlen) {
  int abi = bsh_landlock_abi();
  if (abi == -ENOSYS) {
    snprintf(err, errlen, "Landlock is not supported by this kernel (needs Linux 6.12+, ABI 6)");
    return -1;
  }
  if (abi == -EOPNOTSUPP) {
    snprintf(err, errlen, "Landlock is built in but disabled (add landlock to the lsm= boot parameter)");
    return -1;
  }
  if (abi < 0) {
    snprintf(err, errlen, "cannot query the Landlock ABI: %s", strerror(-abi));
    return -1;
  }
  if (abi < 6) {
    snprintf(err, errlen, "Landlock ABI %d is too old: missing%s%s%s signal scoping (ABI 6)", abi,
             abi < 2 ? " REFER (ABI 2)," : "", abi < 3 ? " TRUNCATE (ABI 3)," : "",
             abi < 5 ? " IOCTL_DEV (ABI 5)," : "");
    return -1;
  }
  return 0;
}

static int check_seccomp(char *err, size_t errlen) {
  if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) {
    snprintf(err, errlen, "seccomp is not available: %s", strerror(errno));
    return -1;
  }
  uint32_t action = SECCOMP_RET_USER_NOTIF;
  if (syscall(__NR_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) != 0) {
    snprintf(err, errlen, "seccomp user notification is not available: %s", strerror(errno));
    return -1;
  }
  struct seccomp_notif_sizes sizes;
  if (syscall(__NR_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) {
    snprintf(err, errlen, "cannot query seccomp notification sizes: %s", strerror(errno));
    return -1;
  }
  return 0;
}

/* pidfd_getfd, openat2 and process_vm_readv are how the supervisor reaches a target safely. */
static int check_helpers(char *err, size_t errlen) {
  int pidfd = (int)syscall(__NR_pidfd_open, getpid(), 0);
  if (pidfd < 0) {
    snprintf(err, errlen, "pidfd_open is not available: %s", strerror(errno));
    return -1;
  }
  int dup = (int)syscall(__NR_pidfd_getfd, pidfd, pidfd, 0);
  int saved = errno;
  close(pidfd);
  if (dup < 0) {
    snprintf(err, errlen, "pidfd_getfd is not available: %s", strerror(saved));
    return -1;
  }
  close(dup);
  struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
  int fd = (int)syscall(__NR_openat2, AT_FDCWD, "/", &how, sizeof how);
  if (fd < 0) {
    snprintf(err, errlen, "openat2 is not available: %s", strerror(errno));
    return -1;
  }
  close(fd);
  char probe = 'x', got = 0;
  struct iovec local = {&got, 1}, remote = {&probe, 1};
  if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != 1) {
    snprintf(err, errlen, "process_vm_readv is not available: %s", strerror(errno));
    return -1;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
  struct stat st;
  if (stat("/proc/self/cwd", &st) != 0 || stat(path, &st) != 0) {
    snprintf(err, errlen, "/proc is not mounted or lacks task children lists (CONFIG_PROC_CHILDREN)");
    return -1;
  }
  return 0;
}

/*
 * Landlock ABI 6 means Linux 6.12 or later, which also brings what has no cheap probe:
 * ADDFD_FLAG_SEND (5.14), WAIT_KILLABLE_RECV (5.19, verified when the filter is
 * installed), fchmodat2 (6.6) and PIDFD_THREAD (6.9).
 */
int bsh_kernel_check(char *err, size_t errlen) {
  if (check_landlock(err, errlen) != 0) return -1;
  if (check_seccomp(err, errlen) != 0) return -1;
  return check_helpers(err, errlen);
}
