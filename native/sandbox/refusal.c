/*
 * Refusals the broker would otherwise never hear of. The filter sends some syscalls to
 * the supervisor only so they can be refused *visibly* (io_uring, handles, mounts,
 * namespaces, ptrace, x32; ioctls are ioctl.c's), and sends the calls that act on
 * another process (signals, limits, scheduling) when they name one. A refusal is
 * answered to the target only after it was reported to the broker (BSH_OP_REFUSED),
 * so it is audited like any policy denial and a flood of refused calls waits for the
 * broker instead of piling up in memory.
 */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

enum bsh_action bsh_report(struct bsh_call *c, int err, const char *fmt, ...) {
  char buf[48];
  c->err = err;
  int n = snprintf(c->refusal, sizeof c->refusal, "%s ", bsh_syscall_name(c->nr, buf, sizeof buf));
  if (n < 0 || (size_t)n >= sizeof c->refusal) n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->refusal + n, sizeof c->refusal - (size_t)n, fmt, ap);
  va_end(ap);
  return BSH_ACT_REPORT;
}

/* A call on process `pid`: continue for a sandboxed (or vanished) one, else refuse and report. */
static enum bsh_action on_process(struct bsh_call *c, long pid, const char *doing) {
  if (pid <= 0 || pid > 0x3fffffff) return BSH_ACT_CONTINUE; /* the kernel's own EINVAL/ESRCH */
  if (bsh_in_sandbox_tree((pid_t)pid) != 0) return BSH_ACT_CONTINUE;
  /* Landlock's signal scoping would refuse a signal with EPERM too: the same errno, now audited. */
  return bsh_report(c, EPERM, "%s process %ld, which is outside the sandbox", doing, pid);
}

static enum bsh_action signal_call(struct bsh_call *c, long pid, long sig) {
  char doing[48];
  snprintf(doing, sizeof doing, "signal %ld to", sig);
  return on_process(c, pid, doing);
}

/* setpriority/ioprio_set: a process (checked), or a group or user, which reach beyond the sandbox. */
static enum bsh_action priority_call(struct bsh_call *c, long which, long who, long process_kind, long min_kind,
                                     long max_kind) {
  if (which == process_kind) return on_process(c, who == 0 ? -1 : who, "a new priority for");
  if (which < min_kind || which > max_kind) return BSH_ACT_CONTINUE; /* the kernel's EINVAL */
  return bsh_report(c, EPERM, "a new priority for a process group or a user, which reach outside the sandbox");
}

/*
 * A change through an fd (ftruncate, fallocate, a shared writable mmap). The kernel
 * decides it by the fd's mode, and a writable fd on a managed file exists only if the
 * supervisor made it, so the call continues whenever the fd may make the change (the
 * kernel still checks it). On a read-only regular file the kernel would refuse it with
 * `err`: refuse it here with the same errno, so the attempt is reported (audited).
 * Anything unusual (no such fd, O_PATH, not a regular file) is left to the kernel.
 */
static enum bsh_action fd_write(struct bsh_call *c, int fd, bool needs_read_write, int err, const char *what) {
  int dup = bsh_proc_dup_fd(c, fd);
  if (dup < 0) return BSH_ACT_CONTINUE;
  int fl = fcntl(dup, F_GETFL);
  struct stat st;
  bool regular = fstat(dup, &st) == 0 && S_ISREG(st.st_mode);
  int acc = fl & O_ACCMODE;
  bool may = acc == O_RDWR || (!needs_read_write && acc == O_WRONLY);
  if (fl < 0 || (fl & O_PATH) || !regular || may) {
    close(dup);
    return BSH_ACT_CONTINUE;
  }
  bool anonymous = false;
  if (bsh_fd_path(dup, c->path, sizeof c->path, &anonymous) != 0) c->path[0] = '\0';
  close(dup);
  return bsh_report(c, err, "%s through a descriptor opened %s", what, acc == O_WRONLY ? "write-only" : "read-only");
}

enum bsh_action bsh_dec_refusal(struct bsh_call *c, const uint64_t *a) {
#if defined(__x86_64__)
  if (c->nr >= __X32_SYSCALL_BIT) return bsh_report(c, ENOSYS, "x32 syscalls are not available in the sandbox");
#endif
  switch (c->nr) {
  case __NR_clone:
    /* Notified only with a namespace flag or CLONE_PARENT (BSH_CLONE_DENY_MASK). */
    return bsh_report(c, EPERM, "new namespaces and CLONE_PARENT are refused in the sandbox (flags %#llx)",
                      (unsigned long long)(uint32_t)a[0]);
  case __NR_kill: return signal_call(c, (long)(int)a[0], (long)(int)a[1]);
  case __NR_rt_sigqueueinfo: return signal_call(c, (long)(int)a[0], (long)(int)a[1]);
  case __NR_pidfd_send_signal: {
    int dup = bsh_proc_dup_fd(c, (int)a[0]);
    if (dup < 0) return BSH_ACT_CONTINUE; /* no such fd: the kernel says EBADF */
    pid_t pid = bsh_pidfd_pid(dup);
    close(dup);
    return signal_call(c, pid, (long)(int)a[1]);
  }
  case __NR_ftruncate: return fd_write(c, (int)a[0], false, EINVAL, "a truncation");
  case __NR_fallocate: return fd_write(c, (int)a[0], false, EBADF, "space allocation or a hole");
  case __NR_mmap:
    /* Notified only for a shared, writable, file-backed mapping, which needs O_RDWR. */
    return fd_write(c, (int)a[4], true, EACCES, "a shared writable mapping");
  case __NR_prlimit64:
    if (a[2] == 0) return BSH_ACT_CONTINUE; /* reading limits changes nothing */
    return on_process(c, (long)(int)a[0], "new resource limits for");
  case __NR_sched_setaffinity:
  case __NR_sched_setscheduler:
  case __NR_sched_setparam:
  case __NR_sched_setattr: return on_process(c, (long)(int)a[0], "new scheduling for");
  case __NR_setpriority: return priority_call(c, (long)(int)a[0], (long)(int)a[1], PRIO_PROCESS, PRIO_PROCESS, PRIO_USER);
  case __NR_ioprio_set: return priority_call(c, (long)(int)a[0], (long)(int)a[1], 1, 1, 3);
  default:
    /* The deny table (io_uring, handles, mounts, namespaces, ptrace, keys, bpf, …), or a
     * table/decoder mismatch: refused either way. */
    return bsh_report(c, EPERM, "is refused in the sandbox");
  }
}

/*
 * Landlock lets the command write its scratch dirs itself, and (its REFER rule) refuses to
 * link or move a file from elsewhere into them, with EXDEV. The supervisor performs
 * renames and links outside Landlock, so it must keep the same rule: a name in scratch
 * for a file that lives elsewhere would let every later write through that name skip the
 * broker (no policy, no backup) — a hard link there to an outside file would make that
 * file writable. Paths are the lexical ones at decode time and the broker's resolved ones
 * before acting. An exchange moves both ways, so either side entering scratch counts.
 */
bool bsh_enters_scratch(const struct bsh_config *cfg, const struct bsh_call *c, const char *path, const char *to,
                        bool path_anonymous) {
  if (c->op != BSH_OP_RENAME && c->op != BSH_OP_LINK) return false;
  bool from_in = path_anonymous || (bsh_in_scratch(cfg, path) && !bsh_has_dotdot(path));
  bool to_in = bsh_in_scratch(cfg, to) && !bsh_has_dotdot(to);
  if (c->op == BSH_OP_RENAME && (c->flags & RENAME_EXCHANGE)) return from_in != to_in;
  return to_in && !from_in;
}

/*
 * The other way: a rename that takes a name out of scratch. What it moves may be a
 * directory, and the broker judges a directory moved in by what it holds; in scratch the
 * command changes that without asking, between the broker's look and the rename. So it
 * gets EXDEV, as from another file system: `mv` then copies, and each file it makes is
 * asked about on its own.
 */
bool bsh_leaves_scratch(const struct bsh_config *cfg, const struct bsh_call *c, const char *path, const char *to) {
  if (c->op != BSH_OP_RENAME) return false;
  bool from_in = bsh_in_scratch(cfg, path) && !bsh_has_dotdot(path);
  bool to_in = bsh_in_scratch(cfg, to) && !bsh_has_dotdot(to);
  return from_in && !to_in;
}
