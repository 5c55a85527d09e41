/*
 * Kernel interfaces newer than the build host's headers (Debian 12 ships 6.1 uapi
 * headers; the machines we run on have 6.18). Each definition is guarded so newer
 * headers win. Feature presence is always asked of the running kernel, never assumed
 * from these numbers.
 */
#ifndef BROKERED_SHELL_KERNEL_COMPAT_H
#define BROKERED_SHELL_KERNEL_COMPAT_H

#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <stdint.h>

/* Syscall numbers added after 6.1; identical on x86_64 and aarch64 (unified table). */
#ifndef __NR_openat2
#define __NR_openat2 437
#endif
#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif
#ifndef __NR_pidfd_getfd
#define __NR_pidfd_getfd 438
#endif
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#define __NR_getxattrat 464
#define __NR_listxattrat 465
#define __NR_removexattrat 466
#endif
#ifndef __NR_open_tree_attr
#define __NR_open_tree_attr 467
#endif
#ifndef __NR_file_getattr
#define __NR_file_getattr 468
#define __NR_file_setattr 469
#endif

/* Landlock rights and scopes missing from 6.1 headers. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/* The ruleset attribute as of ABI 6 (handled_access_net since ABI 4, scoped since ABI 6). */
struct bsh_landlock_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

/* seccomp user-notification pieces added after 6.1 headers. */
#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
#ifndef SECCOMP_ADDFD_FLAG_SEND
#define SECCOMP_ADDFD_FLAG_SEND (1UL << 1)
#endif
/* Linux 6.6: the target hands its CPU to the supervisor instead of waking it on another one. */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

/* pidfd_open(2) flag for a pidfd naming one thread (Linux 6.9); O_EXCL's value. */
#ifndef PIDFD_THREAD
#define PIDFD_THREAD 00000200
#endif

/* setxattrat(2) argument block (Linux 6.13); named apart so newer headers cannot clash. */
struct bsh_xattr_args {
  uint64_t value;
  uint32_t size;
  uint32_t flags;
};

/* openat2(2) resolve flags and struct, in case <linux/openat2.h> is missing. */
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#else
struct open_how {
  uint64_t flags;
  uint64_t mode;
  uint64_t resolve;
};
#define RESOLVE_NO_XDEV 0x01
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_NO_SYMLINKS 0x04
#define RESOLVE_BENEATH 0x08
#define RESOLVE_IN_ROOT 0x10
#define RESOLVE_CACHED 0x20
#endif

#endif
