/*
 * The seccomp program, written by hand (no libseccomp). Three ideas:
 *  - reads never leave the kernel: open/openat without a modifying flag are allowed
 *    in BPF, so the supervisor only pays a round trip for writes;
 *  - every syscall that changes the file system by name is sent to the supervisor
 *    (SECCOMP_RET_USER_NOTIF), which decides with the broker and performs it;
 *  - syscalls that would bypass both seccomp and Landlock (io_uring, handles) or
 *    escape the process model (namespaces, mounts, ptrace, keys, bpf, tty input
 *    injection) are refused — by the supervisor, which also reports each refusal to
 *    the broker so it is audited like a policy denial. They are rare in real commands,
 *    so the round trip costs nothing that matters.
 * An ioctl passes only when it cannot reach a file system's own code (terminals, sockets,
 * a few read-only file requests); the supervisor judges the rest by the fd it names.
 * Calls that act on another process and that Landlock's scoping does not cover
 * (resource limits, scheduling) or covers without a trace (signals) are sent to the
 * supervisor only when they name another process; it lets them through for sandboxed
 * targets and refuses (and reports) the rest.
 * Syscalls that act on an already-open fd (write, ftruncate, fallocate, mmap) are
 * allowed: a writable fd on a managed file only exists if the supervisor made it. The
 * rare ones of them (ftruncate, fallocate, a shared writable file mmap) are notified
 * all the same, so that the kernel's refusal on a read-only fd is reported (audited):
 * the supervisor continues them when the fd may make the change.
 * The tables are named so that `--print-filter` and doctor can show them.
 */
#include "sandbox.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/btrfs.h>
#include <linux/fiemap.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/fsverity.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define BSH_AUDIT_ARCH AUDIT_ARCH_X86_64
#define BSH_ARCH_NAME "x86_64"
#elif defined(__aarch64__)
#define BSH_AUDIT_ARCH AUDIT_ARCH_AARCH64
#define BSH_ARCH_NAME "aarch64"
#else
#error "brokered-sandbox supports x86_64 and aarch64 only"
#endif

struct bsh_syscall {
  const char *name;
  int nr;
};
#define SC(n) {#n, __NR_##n}

/* Always sent to the supervisor. aarch64 only has the *at and f* forms. */
static const struct bsh_syscall k_notify[] = {
#if defined(__x86_64__)
    SC(creat), SC(rename), SC(unlink), SC(rmdir), SC(link), SC(symlink), SC(mkdir), SC(mknod),
    SC(chmod), SC(chown), SC(lchown), SC(utime), SC(utimes), SC(futimesat),
#endif
#ifdef __NR_renameat
    SC(renameat),
#endif
    SC(openat2), SC(truncate), SC(renameat2), SC(unlinkat), SC(linkat), SC(symlinkat),
    SC(mkdirat), SC(mknodat), SC(fchmod), SC(fchmodat), SC(fchmodat2), SC(fchown), SC(fchownat),
    SC(utimensat), SC(setxattr), SC(lsetxattr), SC(fsetxattr), SC(removexattr),
    SC(lremovexattr), SC(fremovexattr), SC(setxattrat), SC(removexattrat), SC(file_setattr),
    /* Every connect is made by the supervisor on its copy of the address (connect.c); sendmsg and
     * sendmmsg name their address in memory the filter cannot read (net-send.c). */
    SC(connect), SC(sendmsg), SC(sendmmsg),
};

/*
 * The network calls notified only in some forms (net-send.c, net-sockets.c): sendto with
 * an address or MSG_FASTOPEN (without either it reaches the connected peer only); socket
 * of a family or protocol the network table does not govern; setsockopt of a source route.
 */
static const struct bsh_syscall k_notify_net[] = {SC(sendto), SC(socket), SC(setsockopt)};

/* Sent to the supervisor only when the flags argument has a modifying bit. */
static const struct bsh_syscall k_notify_if_writing[] = {
#if defined(__x86_64__)
    SC(open), /* flags are arg 1 */
#endif
    SC(openat), /* flags are arg 2 */
};

/*
 * Changes through an fd that the kernel refuses on a read-only one (ftruncate: EINVAL,
 * fallocate: EBADF). Always notified: the supervisor continues them on a writable fd and
 * reports the refusal otherwise (refusal.c). mmap is notified only when it asks for a
 * shared, writable, file-backed mapping (mmap_rule below).
 */
static const struct bsh_syscall k_notify_fd_write[] = {SC(ftruncate), SC(fallocate)};

/* Refused with EPERM by the supervisor, which reports each one (notified only to be refused). */
static const struct bsh_syscall k_deny[] = {
    /* io_uring performs file operations without passing through seccomp. */
    SC(io_uring_setup), SC(io_uring_enter), SC(io_uring_register),
    /* File handles open by inode, skipping path checks. */
    SC(open_by_handle_at), SC(name_to_handle_at),
    /* Defence in depth: caps are gone, but none of these has a place in a command. */
    SC(mount), SC(umount2), SC(pivot_root), SC(chroot), SC(move_mount), SC(fsopen), SC(fsconfig),
    SC(fsmount), SC(fspick), SC(open_tree), SC(open_tree_attr), SC(mount_setattr), SC(unshare),
    SC(setns), SC(ptrace), SC(process_vm_writev), SC(kexec_load), SC(kexec_file_load), SC(bpf),
    SC(userfaultfd), SC(perf_event_open), SC(add_key), SC(keyctl), SC(request_key),
};

/*
 * clone: arg 0 holds the flags on both architectures (they differ later: tls/ctid).
 * New namespaces are refused; so is CLONE_PARENT, which would make a process our
 * sibling and let it outlive the final sweep of our descendants. CLONE_NEWTIME is
 * absent because clone() reads that bit as part of the exit signal.
 */
#define BSH_CLONE_DENY_MASK                                                                 \
  (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | \
   CLONE_NEWNET | CLONE_PARENT)

struct bsh_ioctl {
  const char *name;
  uint32_t cmd;
};
#define IOC(n) {#n, (uint32_t)(n)}

/*
 * Terminal ioctls that push input into a tty: through the inherited controlling
 * terminal they would type commands into the user's shell, outside the sandbox.
 * Landlock's IOCTL_DEV does not cover fds opened before the sandbox, so refuse them here.
 */
static const struct bsh_ioctl k_deny_ioctl[] = {IOC(TIOCSTI), IOC(TIOCLINUX)};

/*
 * An ioctl on a file or directory goes to its file system, and many change the file
 * through an fd opened READ-ONLY (the kernel asks for ownership, not for a writable fd):
 * inode flags (chattr), the fsxattr block, the inode generation (FS_IOC_SETVERSION and
 * ext4's own EXT4_IOC_SETVERSION), fs-verity, encryption policies, btrfs subvolumes,
 * f2fs and XFS calls of every kind. Neither the supervisor nor Landlock would see them,
 * and every file system adds its own. So an ioctl passes in BPF only when its request
 * type is one that never reaches a file system (terminals and the generic fd flags
 * FIONBIO/FIOCLEX/FIONREAD, 'T'; sockets, 0x89) or it is one of the file system requests
 * below, known to change nothing. Every other ioctl goes to the supervisor (ioctl.c),
 * which lets it through on a device, pipe, socket or pseudo file and refuses it on a
 * file or directory: the next file system's ioctl is refused with no change here.
 */
static const struct bsh_ioctl k_pass_ioctl_type[] = {{"terminals and generic fd flags ('T')", 'T'},
                                                     {"sockets (0x89)", 0x89}};

/* The fs UUID and sysfs path queries (Linux 6.8), missing from older headers. */
#ifndef FS_IOC_GETFSUUID
#define BSH_FSUUID_SIZE 17      /* struct fsuuid2: u8 len, u8 uuid[16] */
#define BSH_FS_SYSFS_PATH_SIZE 129 /* struct fs_sysfs_path: u8 len, u8 name[128] */
#define FS_IOC_GETFSUUID _IOC(_IOC_READ, 0x15, 0, BSH_FSUUID_SIZE)
#define FS_IOC_GETFSSYSFSPATH _IOC(_IOC_READ, 0x15, 1, BSH_FS_SYSFS_PATH_SIZE)
#endif

/* ext4's own name for the generation query (FS_IOC_GETVERSION's twin); ext4 has no uapi header. */
#define EXT4_IOC_GETVERSION _IOR('f', 3, long)

/*
 * File system requests that only read: flags, generation, extent map, fsxattr, block size,
 * label, UUID, verity digest, encryption policy, btrfs facts. FICLONE and FICLONERANGE
 * write, but only into an fd the kernel demands be open for writing (EBADF otherwise),
 * and a writable fd on a managed file exists only because the broker allowed (and backed
 * up) the open: a clone is then one more write through it, like write(2) or
 * copy_file_range(2), which pass too (cp --reflink). FIDEDUPERANGE is not here: the kernel
 * lets it change the destination's extents through a read-only fd its owner holds.
 */
static const struct bsh_ioctl k_allow_file_ioctl[] = {
    IOC(FS_IOC_GETFLAGS),     IOC(FS_IOC32_GETFLAGS),   IOC(FS_IOC_GETVERSION),
    IOC(FS_IOC32_GETVERSION), IOC(EXT4_IOC_GETVERSION), IOC(FS_IOC_FIEMAP),
    IOC(FS_IOC_FSGETXATTR),   IOC(FIGETBSZ),            IOC(FS_IOC_GETFSLABEL),
    IOC(FS_IOC_GETFSUUID),    IOC(FS_IOC_GETFSSYSFSPATH), IOC(FS_IOC_MEASURE_VERITY),
    IOC(FS_IOC_GET_ENCRYPTION_POLICY), IOC(FS_IOC_GET_ENCRYPTION_POLICY_EX),
    IOC(BTRFS_IOC_FS_INFO),   IOC(BTRFS_IOC_GET_FEATURES), IOC(BTRFS_IOC_GET_SUBVOL_INFO),
    IOC(FICLONE),             IOC(FICLONERANGE),
};

/*
 * Calls aimed at another process. Landlock scopes signals (silently: no audit) and
 * ptrace, but not resource limits or scheduling: prlimit64(broker, RLIMIT_CPU, 0)
 * would kill the broker. Each is notified only when it names another process (the
 * forms that act on the caller pass in BPF), and the supervisor refuses it when that
 * process is not sandboxed. tgkill/tkill/rt_tgsigqueueinfo stay with Landlock alone:
 * language runtimes use them to signal their own threads many times a second.
 */
enum other_rule {
  OTHER_ARG0_POSITIVE, /* kill, rt_sigqueueinfo: pid > 0 (0 and negative pids are groups: Landlock) */
  OTHER_ARG0_NONZERO,  /* prlimit64, sched_*: pid != 0 (0 is the caller) */
  OTHER_NOT_SELF,      /* setpriority, ioprio_set: unless (which == `self`, who == 0) */
  OTHER_ALWAYS,        /* pidfd_send_signal: the pidfd names the process */
};
static const struct {
  const char *name;
  int nr;
  enum other_rule rule;
  uint32_t self;
} k_notify_if_other[] = {
    {"kill", __NR_kill, OTHER_ARG0_POSITIVE, 0},
    {"rt_sigqueueinfo", __NR_rt_sigqueueinfo, OTHER_ARG0_POSITIVE, 0},
    {"pidfd_send_signal", __NR_pidfd_send_signal, OTHER_ALWAYS, 0},
    {"prlimit64", __NR_prlimit64, OTHER_ARG0_NONZERO, 0},
    {"sched_setaffinity", __NR_sched_setaffinity, OTHER_ARG0_NONZERO, 0},
    {"sched_setscheduler", __NR_sched_setscheduler, OTHER_ARG0_NONZERO, 0},
    {"sched_setparam", __NR_sched_setparam, OTHER_ARG0_NONZERO, 0},
    {"sched_setattr", __NR_sched_setattr, OTHER_ARG0_NONZERO, 0},
    {"setpriority", __NR_setpriority, OTHER_NOT_SELF, 0 /* PRIO_PROCESS */},
    {"ioprio_set", __NR_ioprio_set, OTHER_NOT_SELF, 1 /* IOPRIO_WHO_PROCESS */},
};

#define ARG_LO(i) (offsetof(struct seccomp_data, args) + (i) * sizeof(uint64_t))
#define RET_ERRNO(e) (SECCOMP_RET_ERRNO | ((e) & SECCOMP_RET_DATA))
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

struct prog {
  struct sock_filter *ins;
  size_t len, cap;
};

static void emit(struct prog *p, struct sock_filter f) {
  if (p->len == p->cap) {
    p->cap = p->cap ? p->cap * 2 : 256;
    p->ins = realloc(p->ins, p->cap * sizeof *p->ins);
    if (!p->ins) abort();
  }
  p->ins[p->len++] = f;
}
#define STMT(code, k) emit(p, (struct sock_filter)BPF_STMT(code, k))
#define JUMP(code, k, jt, jf) emit(p, (struct sock_filter)BPF_JUMP(code, k, jt, jf))

/* `if (nr == n) return action;` — two instructions, so no jump ever exceeds 8 bits. */
static void ret_if_nr(struct prog *p, int nr, uint32_t action) {
  JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1);
  STMT(BPF_RET | BPF_K, action);
}

/*
 * `if (nr == n) return (arg & mask) ? hit : miss;`. Only the low 32 bits of the
 * argument are loaded: open/openat take `int flags` and clone's legacy path takes
 * lower_32_bits(flags), so the kernel itself ignores the high half. Both supported
 * architectures are little-endian, so the low half sits at the argument's offset.
 * The nr register is clobbered, which is fine: both branches return.
 */
static void ret_if_arg_bits(struct prog *p, int nr, int arg, uint32_t mask, uint32_t hit, uint32_t miss) {
  JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 4);
  STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(arg));
  JUMP(BPF_JMP | BPF_JSET | BPF_K, mask, 0, 1);
  STMT(BPF_RET | BPF_K, hit);
  STMT(BPF_RET | BPF_K, miss);
}

/* A call aimed at another process: notify per its rule, allow the forms that act on the caller. */
static void notify_if_other(struct prog *p, int nr, enum other_rule rule, uint32_t self) {
  uint32_t notify = SECCOMP_RET_USER_NOTIF, allow = SECCOMP_RET_ALLOW;
  switch (rule) {
  case OTHER_ALWAYS: ret_if_nr(p, nr, notify); return;
  case OTHER_ARG0_POSITIVE:
    /* [0] nr? [1] A = pid [2] negative → [5] [3] zero → [5] [4] notify [5] allow */
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 5);
    STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(0));
    JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x80000000u, 2, 0);
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0);
    STMT(BPF_RET | BPF_K, notify);
    STMT(BPF_RET | BPF_K, allow);
    return;
  case OTHER_ARG0_NONZERO:
    /* [0] nr? [1] A = pid [2] zero → [4] [3] notify [4] allow */
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 4);
    STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(0));
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0);
    STMT(BPF_RET | BPF_K, notify);
    STMT(BPF_RET | BPF_K, allow);
    return;
  case OTHER_NOT_SELF:
    /* [0] nr? [1] A = which [2] != self → [5] [3] A = who [4] zero → [6] [5] notify [6] allow */
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 6);
    STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(0));
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, self, 0, 2);
    STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(1));
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0);
    STMT(BPF_RET | BPF_K, notify);
    STMT(BPF_RET | BPF_K, allow);
    return;
  }
}

/*
 * mmap(addr, len, prot, flags, fd, off): notify when PROT_WRITE and MAP_SHARED (the bit
 * MAP_SHARED_VALIDATE shares) and not MAP_ANONYMOUS; everything else is allowed.
 * [0] nr? [1] A = prot [2] !WRITE → [7] [3] A = flags [4] ANON → [7] [5] !SHARED → [7]
 * [6] notify [7] allow
 */
static void mmap_rule(struct prog *p) {
  JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)__NR_mmap, 0, 7);
  STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(2));
  JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_WRITE, 0, 4);
  STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(3));
  JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_ANONYMOUS, 2, 0);
  JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_SHARED, 0, 1);
  STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
  STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
}

/*
 * ioctl(fd, cmd): cmd is an unsigned int, so the low half is all of it. Refused requests
 * are notified; a passing type or an allowed request is allowed; anything else is notified
 * for the supervisor to look at the fd. Every branch returns, so the nr register may go.
 * [0] nr? [1] A = cmd, deny: notify, allow: allow, A = type, pass types: allow, notify.
 */
static void ioctl_rule(struct prog *p) {
  size_t body = 1 + 2 * N_OF(k_deny_ioctl) + 2 * N_OF(k_allow_file_ioctl) + 2 + 2 * N_OF(k_pass_ioctl_type) + 1;
  JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, (uint8_t)body);
  STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(1));
  for (size_t i = 0; i < N_OF(k_deny_ioctl); i++) {
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, k_deny_ioctl[i].cmd, 0, 1);
    STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
  }
  for (size_t i = 0; i < N_OF(k_allow_file_ioctl); i++) {
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, k_allow_file_ioctl[i].cmd, 0, 1);
    STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  }
  STMT(BPF_ALU | BPF_RSH | BPF_K, _IOC_TYPESHIFT);
  STMT(BPF_ALU | BPF_AND | BPF_K, _IOC_TYPEMASK);
  for (size_t i = 0; i < N_OF(k_pass_ioctl_type); i++) {
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, k_pass_ioctl_type[i].cmd, 0, 1);
    STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  }
  STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
}

/*
 * sendto(fd, buf, len, flags, addr, addrlen): notify when addr (both halves) is not NULL
 * or flags has MSG_FASTOPEN. [0] nr? [1] A = flags [2] FASTOPEN → [7] [3] A = addr lo
 * [4] != 0 → [7] [5] A = addr hi [6] == 0 → [8] [7] notify [8] allow
 */
static void sendto_rule(struct prog *p) {
  JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)__NR_sendto, 0, 8);
  STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(3));
  JUMP(BPF_JMP | BPF_JSET | BPF_K, MSG_FASTOPEN, 4, 0);
  STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(4));
  JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 2);
  STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(4) + 4);
  JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0);
  STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
  STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
}

/*
 * socket(domain, type, protocol): unix and netlink pass; IPv4 and IPv6 pass for TCP
 * (SOCK_STREAM with protocol 0 or 6) and UDP or ICMP echo (SOCK_DGRAM with 0, 17, 1 or
 * 58); everything else is notified (net-sockets.c). The type's flags are masked off.
 */
static void socket_rule(struct prog *p) {
  const uint32_t allow = SECCOMP_RET_ALLOW, notify = SECCOMP_RET_USER_NOTIF;
  /* [0] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)__NR_socket, 0, 22);
  /* [1] */ STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(0));
  /* [2] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 19, 0);
  /* [3] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 18, 0);
  /* [4] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 1, 0);
  /* [5] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 0, 15);
  /* [6] */ STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(1));
  /* [7] */ STMT(BPF_ALU | BPF_AND | BPF_K, BSH_SOCK_TYPE_MASK);
  /* [8] */ STMT(BPF_MISC | BPF_TAX, 0);
  /* [9] */ STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(2));
  /* [10] protocol 0: the type's own (TCP, UDP) */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 4, 0);
  /* [11] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, 5, 0);
  /* [12] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 6, 0);
  /* [13] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_ICMP, 5, 0);
  /* [14] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_ICMPV6, 4, 6);
  /* [15] any of the two types */ STMT(BPF_MISC | BPF_TXA, 0);
  /* [16] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, 5, 3);
  /* [17] a stream */ STMT(BPF_MISC | BPF_TXA, 0);
  /* [18] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, 3, 2);
  /* [19] a datagram */ STMT(BPF_MISC | BPF_TXA, 0);
  /* [20] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_DGRAM, 1, 0);
  /* [21] */ STMT(BPF_RET | BPF_K, notify);
  /* [22] */ STMT(BPF_RET | BPF_K, allow);
}

/*
 * setsockopt(fd, level, name): notify the options that set a source route, IPv4's
 * IP_OPTIONS and IPv6's routing headers (also through the RFC 2292 forms).
 */
static void setsockopt_rule(struct prog *p) {
  const uint32_t allow = SECCOMP_RET_ALLOW, notify = SECCOMP_RET_USER_NOTIF;
  /* [0] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)__NR_setsockopt, 0, 11);
  /* [1] */ STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(1));
  /* [2] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_IP, 0, 2);
  /* [3] */ STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(2));
  /* [4] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, IP_OPTIONS, 5, 6);
  /* [5] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_IPV6, 0, 5);
  /* [6] */ STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(2));
  /* [7] */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPV6_RTHDR, 2, 0);
  /* [8] IPV6_2292RTHDR */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, 5, 1, 0);
  /* [9] IPV6_2292PKTOPTIONS */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, 6, 0, 1);
  /* [10] */ STMT(BPF_RET | BPF_K, notify);
  /* [11] */ STMT(BPF_RET | BPF_K, allow);
}

static int open_flags_arg(int nr) {
#if defined(__x86_64__)
  if (nr == __NR_open) return 1;
#endif
  (void)nr;
  return 2;
}

static void build(struct prog *p) {
  const uint32_t notify = SECCOMP_RET_USER_NOTIF;
  /* Another ABI on the same kernel (i386 via int 0x80, for instance) has other numbers: kill. */
  STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)offsetof(struct seccomp_data, arch));
  JUMP(BPF_JMP | BPF_JEQ | BPF_K, BSH_AUDIT_ARCH, 1, 0);
  STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
  STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)offsetof(struct seccomp_data, nr));
#if defined(__x86_64__)
  /* x32 numbers run x86_64 code under other numbers: the supervisor refuses them all (ENOSYS). */
  JUMP(BPF_JMP | BPF_JGE | BPF_K, __X32_SYSCALL_BIT, 0, 1);
  STMT(BPF_RET | BPF_K, notify);
#endif
  for (size_t i = 0; i < N_OF(k_notify_if_writing); i++) {
    int nr = k_notify_if_writing[i].nr;
    ret_if_arg_bits(p, nr, open_flags_arg(nr), BSH_OPEN_WRITE_MASK, notify, SECCOMP_RET_ALLOW);
  }
  ret_if_arg_bits(p, __NR_clone, 0, BSH_CLONE_DENY_MASK, notify, SECCOMP_RET_ALLOW);
  ioctl_rule(p);
  /* clone3 keeps its flags in memory BPF cannot read; glibc falls back to clone on ENOSYS. */
  ret_if_nr(p, __NR_clone3, RET_ERRNO(ENOSYS));
  for (size_t i = 0; i < N_OF(k_notify); i++) ret_if_nr(p, k_notify[i].nr, notify);
  for (size_t i = 0; i < N_OF(k_notify_fd_write); i++) ret_if_nr(p, k_notify_fd_write[i].nr, notify);
  mmap_rule(p);
  sendto_rule(p);
  socket_rule(p);
  setsockopt_rule(p);
  for (size_t i = 0; i < N_OF(k_notify_if_other); i++)
    notify_if_other(p, k_notify_if_other[i].nr, k_notify_if_other[i].rule, k_notify_if_other[i].self);
  for (size_t i = 0; i < N_OF(k_deny); i++) ret_if_nr(p, k_deny[i].nr, notify);
  STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
}

int bsh_seccomp_install(char *err, size_t errlen) {
  struct prog p = {0};
  build(&p);
  struct sock_fprog fprog = {.len = (unsigned short)p.len, .filter = p.ins};
  /* WAIT_KILLABLE_RECV: once we received a notification, only SIGKILL interrupts the target. */
  unsigned int flags = SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
  int listener = (int)syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, flags, &fprog);
  int saved = errno;
  free(p.ins);
  if (listener < 0) {
    snprintf(err, errlen, "cannot install the seccomp filter with a listener%s: %s",
             saved == EINVAL ? " (WAIT_KILLABLE_RECV needs Linux 5.19)" : "", strerror(saved));
    return -1;
  }
  return listener;
}

static void print_table(const char *key, const struct bsh_syscall *t, size_t n, bool last) {
  printf("  \"%s\": [", key);
  for (size_t i = 0; i < n; i++) printf("%s{\"name\": \"%s\", \"nr\": %d}", i ? ", " : "", t[i].name, t[i].nr);
  printf("]%s\n", last ? "" : ",");
}

static void print_ioctls(const char *key, const struct bsh_ioctl *t, size_t n) {
  printf("  \"%s\": [", key);
  for (size_t i = 0; i < n; i++) printf("%s{\"name\": \"%s\", \"cmd\": %u}", i ? ", " : "", t[i].name, t[i].cmd);
  printf("],\n");
}

void bsh_seccomp_print_tables(void) {
  static const struct bsh_syscall clone_t[] = {SC(clone)}, clone3_t[] = {SC(clone3)};
  static const char *const rules[] = {"pid > 0", "pid != 0", "not the caller", "always"};
  struct prog p = {0};
  build(&p);
  printf("{\n  \"arch\": \"%s\",\n  \"instructions\": %zu,\n", BSH_ARCH_NAME, p.len);
  free(p.ins);
  printf("  \"openWriteMask\": %d,\n  \"cloneDenyMask\": %d,\n", BSH_OPEN_WRITE_MASK, BSH_CLONE_DENY_MASK);
  print_table("notify", k_notify, N_OF(k_notify), false);
  print_table("notifyIfWriting", k_notify_if_writing, N_OF(k_notify_if_writing), false);
  static const struct bsh_syscall mmap_t[] = {SC(mmap)};
  printf("  \"notifyFdWrite\": [");
  for (size_t i = 0; i < N_OF(k_notify_fd_write); i++)
    printf("{\"name\": \"%s\", \"nr\": %d, \"when\": \"always\"}, ", k_notify_fd_write[i].name, k_notify_fd_write[i].nr);
  printf("{\"name\": \"%s\", \"nr\": %d, \"when\": \"shared writable file mapping\"}],\n", mmap_t[0].name,
         mmap_t[0].nr);
  printf("  \"notifyIfOtherProcess\": [");
  for (size_t i = 0; i < N_OF(k_notify_if_other); i++)
    printf("%s{\"name\": \"%s\", \"nr\": %d, \"when\": \"%s\"}", i ? ", " : "", k_notify_if_other[i].name,
           k_notify_if_other[i].nr, rules[k_notify_if_other[i].rule]);
  printf("],\n");
  static const char *const net_when[] = {"with an address or MSG_FASTOPEN", "a family or protocol other than unix, netlink, TCP, UDP, ICMP", "a source route"};
  printf("  \"notifyNet\": [");
  for (size_t i = 0; i < N_OF(k_notify_net); i++)
    printf("%s{\"name\": \"%s\", \"nr\": %d, \"when\": \"%s\"}", i ? ", " : "", k_notify_net[i].name, k_notify_net[i].nr, net_when[i]);
  printf("],\n");
  print_table("deny", k_deny, N_OF(k_deny), false);
  print_table("denyIfNamespace", clone_t, 1, false);
  print_ioctls("denyIoctl", k_deny_ioctl, N_OF(k_deny_ioctl));
  printf("  \"passIoctlTypes\": [");
  for (size_t i = 0; i < N_OF(k_pass_ioctl_type); i++)
    printf("%s{\"name\": \"%s\", \"type\": %u}", i ? ", " : "", k_pass_ioctl_type[i].name, k_pass_ioctl_type[i].cmd);
  printf("],\n");
  print_ioctls("allowFileIoctl", k_allow_file_ioctl, N_OF(k_allow_file_ioctl));
  print_table("enosys", clone3_t, 1, true);
  printf("}\n");
}

const char *bsh_refused_ioctl_name(uint32_t cmd) {
  for (size_t i = 0; i < N_OF(k_deny_ioctl); i++)
    if (k_deny_ioctl[i].cmd == cmd) return k_deny_ioctl[i].name;
  return NULL;
}

static const char *find_name(const struct bsh_syscall *t, size_t n, int nr) {
  for (size_t i = 0; i < n; i++)
    if (t[i].nr == nr) return t[i].name;
  return NULL;
}

const char *bsh_syscall_name(int nr, char *buf, size_t cap) {
  const char *name = find_name(k_notify, N_OF(k_notify), nr);
  if (!name) name = find_name(k_notify_if_writing, N_OF(k_notify_if_writing), nr);
  if (!name) name = find_name(k_deny, N_OF(k_deny), nr);
  if (!name) name = find_name(k_notify_fd_write, N_OF(k_notify_fd_write), nr);
  if (!name) name = find_name(k_notify_net, N_OF(k_notify_net), nr);
  if (!name && nr == __NR_mmap) name = "mmap";
  for (size_t i = 0; !name && i < N_OF(k_notify_if_other); i++)
    if (k_notify_if_other[i].nr == nr) name = k_notify_if_other[i].name;
  if (!name && nr == __NR_clone) name = "clone";
  if (!name && nr == __NR_ioctl) name = "ioctl";
  if (name) return name;
#if defined(__x86_64__)
  if (nr >= __X32_SYSCALL_BIT) {
    snprintf(buf, cap, "x32-syscall-%d", nr - __X32_SYSCALL_BIT);
    return buf;
  }
#endif
  snprintf(buf, cap, "syscall-%d", nr);
  return buf;
}
