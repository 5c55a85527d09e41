/*
 * Shared declarations of brokered-sandbox, the launcher and seccomp supervisor.
 * Each .c file owns one mechanism; this header is the only coupling between them.
 */
#ifndef BSH_SANDBOX_H
#define BSH_SANDBOX_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <sys/types.h>
#include <time.h>

#include "kernel-compat.h"

#define BSH_NAME "brokered-sandbox"
/* Longest path we handle, including its NUL (the kernel's PATH_MAX). */
#define BSH_PATH_MAX 4096
/* Largest xattr value copied out of a target (the kernel's XATTR_SIZE_MAX). */
#define BSH_XATTR_VALUE_MAX 65536
#define BSH_MAX_LIST 64

/*
 * The kernel's own O_TMPFILE bit. glibc's O_TMPFILE (and its __O_TMPFILE) include
 * O_DIRECTORY, which read-only directory opens also carry, so a mask must use this bit.
 */
#define BSH_O_TMPFILE_BIT (O_TMPFILE & ~O_DIRECTORY)
/*
 * Open flags that make an open modifying. O_WRONLY/O_RDWR: write access. O_CREAT:
 * may create. O_TRUNC: truncates, even with O_RDONLY on Linux. O_APPEND: only useful
 * with write access, but it states write intent and costs nothing to include. The
 * O_TMPFILE bit: creates an (unnamed) file; the kernel also demands write access for it.
 */
#define BSH_OPEN_WRITE_MASK (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | BSH_O_TMPFILE_BIT)

/* Exit codes of the launcher itself (the command's own status passes through otherwise). */
#define BSH_EXIT_BROKER_LOST 125
#define BSH_EXIT_SETUP 126

/* Operation codes of the broker protocol (PROTOCOL.md, src/sandbox/protocol.ts). */
enum bsh_op {
  BSH_OP_OPEN = 1,
  BSH_OP_TRUNCATE = 2,
  BSH_OP_UNLINK = 3,
  BSH_OP_RMDIR = 4,
  BSH_OP_RENAME = 5,
  BSH_OP_LINK = 6,
  BSH_OP_SYMLINK = 7,
  BSH_OP_MKDIR = 8,
  BSH_OP_MKNOD = 9,
  BSH_OP_CHMOD = 10,
  BSH_OP_CHOWN = 11,
  BSH_OP_UTIMES = 12,
  BSH_OP_SETXATTR = 13,
  BSH_OP_REMOVEXATTR = 14,
  BSH_OP_FILE_SETATTR = 15,
  /* Not an operation: the report of a syscall the supervisor refused without asking (PROTOCOL.md). */
  BSH_OP_REFUSED = 16,
  /* Not an operation: an allowed request's operation is over (PROTOCOL.md); never answered. */
  BSH_OP_PERFORMED = 17,
};

struct bsh_config {
  int broker_fd;
  /* Scratch dirs as given and as realpath()ed; a path matches either form. */
  const char *scratch[BSH_MAX_LIST];
  char *scratch_real[BSH_MAX_LIST];
  size_t n_scratch;
  /* Extra writable device paths (--write-dev); the built-in ones are in fast-path.c. */
  const char *write_dev[BSH_MAX_LIST];
  size_t n_write_dev;
  /* Unix sockets outside scratch the command may connect to (--unix-socket), realpath()ed. */
  char *unix_sockets[BSH_MAX_LIST];
  size_t n_unix_sockets;
  char **argv;
};

/* What the supervisor does with a decoded notification. */
enum bsh_action {
  BSH_ACT_ERRNO,    /* answer -errno now */
  BSH_ACT_CONTINUE, /* let the kernel run it: Landlock is the net (scratch, devices, reads) */
  BSH_ACT_DIRECT,   /* perform on behalf without asking (scratch metadata, anonymous files) */
  BSH_ACT_ASK,      /* ask the broker, then perform on behalf */
  BSH_ACT_REPORT,   /* refuse with -err, once the broker has recorded the refusal (audit) */
  BSH_ACT_DONE,     /* answer success without acting: the call would change nothing (noop-meta.c) */
};

/* Longest "<syscall> <why>" text of a refusal report. */
#define BSH_REFUSAL_MAX 256

/* How an fd-based call names its object, so we repeat the same form on our duplicate. */
enum bsh_fd_form {
  BSH_FD_NONE = 0, /* path-based */
  BSH_FD_PLAIN,    /* fchmod, fchown, fsetxattr, fremovexattr, utimensat(fd, NULL) */
  BSH_FD_EMPTY,    /* *at(fd, "", AT_EMPTY_PATH) */
};

/* One intercepted syscall, decoded. Lives until answered (possibly across a broker round trip). */
struct bsh_call {
  uint64_t notif_id;
  pid_t tid, tgid;
  int nr;
  bool have_status;
  mode_t umask;
  uid_t fsuid; /* the caller's file-system uid (with have_status) */

  enum bsh_op op;
  uint32_t flags; /* as sent to the broker: open flags, rename flags, AT_* flags */
  uint32_t mode;  /* as sent to the broker: requested mode (with type bits for mknod) */
  bool follow;    /* the op follows a symlink in the final component of `path` */

  /* Lexical absolute paths (no "." or "//"; ".." kept). */
  char path[BSH_PATH_MAX];
  char to[BSH_PATH_MAX];
  char link_target[BSH_PATH_MAX];
  bool path_slash, to_slash; /* the target wrote a trailing slash */

  /* fd-based calls: our own duplicate of the target's fd (pidfd_getfd), else -1. */
  int dup_fd;
  enum bsh_fd_form fd_form;
  /* open via an fd alias (/dev/stdout, /proc/<self>/fd/N) of an unlinked file: reopen the dup. */
  bool reopen_dup;

  /* Per-op arguments. */
  int open_flags;
  uint64_t length;
  uid_t uid;
  gid_t gid;
  struct timespec times[2];
  bool times_null;
  char xname[256];
  uint8_t *xvalue;
  size_t xsize;
  int xflags;

  uint32_t broker_id;
  int err; /* for BSH_ACT_ERRNO and BSH_ACT_REPORT */
  /* For BSH_ACT_REPORT: the syscall's name, a space, and why it was refused. */
  char refusal[BSH_REFUSAL_MAX];
};

/* --- caps.c --- */
int bsh_caps_drop_all(char *err, size_t errlen);
int bsh_caps_limit_supervisor(char *err, size_t errlen);

/* --- landlock.c --- */
int bsh_landlock_abi(void);
/* A Landlock domain: write only below `writable` and to `devices` (plus the built-in
 * devices); reads and executes are left alone; signals scoped from ABI 6. */
struct bsh_landlock_spec {
  int abi;
  const char *const *writable;
  size_t n_writable;
  const char *const *devices;
  size_t n_devices;
};
int bsh_landlock_restrict(const struct bsh_landlock_spec *spec, char *err, size_t errlen);
int bsh_landlock_apply(const struct bsh_config *cfg, char *err, size_t errlen);

/* --- seccomp-filter.c --- */
int bsh_seccomp_install(char *err, size_t errlen);
void bsh_seccomp_print_tables(void);
/* The name of a syscall the filter sends to the supervisor ("syscall-<nr>" if unknown). */
const char *bsh_syscall_name(int nr, char *buf, size_t cap);
/* Is `cmd` one of the ioctl requests refused whatever the fd (tty input injection)? Its name, or NULL. */
const char *bsh_refused_ioctl_name(uint32_t cmd);

/* --- kernel-check.c --- */
int bsh_kernel_check(char *err, size_t errlen);

/* --- child.c --- */
void bsh_child_run(const struct bsh_config *cfg, int sock, pid_t parent, const void *sigmask) __attribute__((noreturn));

/* --- reaper.c --- */
int bsh_list_children(pid_t *out, size_t cap);
void bsh_kill_descendants(int listener);

/* --- target-memory.c --- */
int bsh_mem_read(pid_t tid, uint64_t addr, void *buf, size_t len);
int bsh_mem_read_string(pid_t tid, uint64_t addr, char *buf, size_t cap);

/* --- target-proc.c --- */
int bsh_proc_status(struct bsh_call *c);
int bsh_proc_base_dir(pid_t tid, int dirfd, char *out, size_t cap);
int bsh_proc_dup_fd(struct bsh_call *c, int fd);
/* Our own duplicate of fd `fd` of the sandboxed process or thread `pid`; -EACCES when it is not sandboxed. */
int bsh_pid_dup_fd(pid_t pid, int fd);
int bsh_fd_path(int ownfd, char *out, size_t cap, bool *anonymous);
/* 1: `pid` is one of the sandboxed processes (the supervisor's descendants); 0: it is
 * not (the supervisor itself included); -1: no such process. */
int bsh_in_sandbox_tree(pid_t pid);
/* The pid a pidfd (our own duplicate) refers to: > 0, or -1 when it is not a live pidfd. */
pid_t bsh_pidfd_pid(int ownfd);

/* --- path-resolve.c --- */
bool bsh_utf8_valid(const char *s);
int bsh_lexical_join(const char *base, const char *raw, char *out, size_t cap, bool *slash);
bool bsh_mentions_proc_self(const char *path);
int bsh_rewrite_proc_self(char *path, size_t cap, pid_t tgid, pid_t tid);
bool bsh_has_dotdot(const char *path);
bool bsh_path_under(const char *path, const char *dir);
int bsh_split_parent(const char *path, char *parent, size_t cap, const char **name);

/* --- fast-path.c --- */
void bsh_fast_path_init(void);
bool bsh_in_scratch(const struct bsh_config *cfg, const char *path);
bool bsh_is_write_dev(const struct bsh_config *cfg, const char *path);
bool bsh_fd_alias(const char *path, pid_t tgid, pid_t tid, int *fd);
bool bsh_proc_fd_path(const char *path, pid_t *pid, int *fd);
/* /proc/<pid>/fd/<n>, or a path below it (the fd used as a directory). */
bool bsh_proc_fd_prefix(const char *path, pid_t *pid, int *fd);
/* Does `path` go below an fd alias of /dev (/dev/fd/<n>/name, /dev/stdin/name)? */
bool bsh_dev_alias_dir(const char *path);
/* Rewrites such a path to /proc/<tgid>/fd/<n>/name, the caller's view (else leaves it). 0 or -ENAMETOOLONG. */
int bsh_rewrite_dev_alias(char *path, size_t cap, pid_t tgid);
int bsh_local_resolve(const struct bsh_config *cfg, const char *lexical, bool follow, char *out, size_t cap);

/* --- op-decode.c --- */
enum bsh_action bsh_dec_open(const struct bsh_config *cfg, struct bsh_call *c, int dirfd, uint64_t upath,
                             int flags, uint32_t mode, const struct open_how *how);
enum bsh_action bsh_dec_truncate(const struct bsh_config *cfg, struct bsh_call *c, uint64_t upath,
                                 int64_t length);
enum bsh_action bsh_dec_unlink(const struct bsh_config *cfg, struct bsh_call *c, int dirfd, uint64_t upath,
                               int flags);
enum bsh_action bsh_dec_rename(const struct bsh_config *cfg, struct bsh_call *c, int od, uint64_t uold, int nd,
                               uint64_t unew, unsigned flags);
enum bsh_action bsh_dec_link(const struct bsh_config *cfg, struct bsh_call *c, int od, uint64_t uold, int nd,
                             uint64_t unew, int flags);
enum bsh_action bsh_dec_symlink(const struct bsh_config *cfg, struct bsh_call *c, uint64_t utarget, int nd,
                                uint64_t upath);
enum bsh_action bsh_dec_mkdir(const struct bsh_config *cfg, struct bsh_call *c, int dirfd, uint64_t upath,
                              uint32_t mode);
enum bsh_action bsh_dec_mknod(const struct bsh_config *cfg, struct bsh_call *c, int dirfd, uint64_t upath,
                              uint32_t mode, uint64_t dev);
/* --- noop-meta.c --- */
/* An fd-based chown/chmod (dup_fd taken, status read) that would change nothing: answer it as done. */
bool bsh_meta_noop(const struct bsh_call *c);

enum bsh_action bsh_dec_meta_fd(const struct bsh_config *cfg, struct bsh_call *c, int fd, enum bsh_fd_form form);
enum bsh_action bsh_dec_meta_path(const struct bsh_config *cfg, struct bsh_call *c, int dirfd, uint64_t upath,
                                  int atflags, bool null_is_fd);

/* --- set-id.c --- */
/* Would `mode` make a set-uid program, or a set-gid one (any set-gid non-directory)? */
bool bsh_setid_refused(uint32_t mode, bool directory);
/* Refuse a set-id mode the supervisor would have let through or performed itself (reported, EACCES). */
enum bsh_action bsh_refuse_setid(struct bsh_call *c, uint32_t mode);
/* A chmod by path in scratch: DIRECT, DIRECT on a pinned directory for S_ISGID, or refused. */
enum bsh_action bsh_setid_chmod_scratch(struct bsh_call *c);

/* --- ioctl.c --- */
/* An ioctl the filter notified: refused on a file or directory of a file system, else continued. */
enum bsh_action bsh_dec_ioctl(struct bsh_call *c, int fd, uint32_t cmd);

/* --- connect.c --- */
enum bsh_action bsh_dec_connect(const struct bsh_config *cfg, struct bsh_call *c, int fd, uint64_t uaddr,
                                uint64_t ulen);

/* --- refusal.c --- */
/* Refuse with `err` and report it to the broker first (BSH_ACT_REPORT), naming the syscall and why. */
enum bsh_action bsh_report(struct bsh_call *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Syscalls the filter sends only to refuse them visibly, and the calls that act on another
 * process (signals, limits, scheduling): continued for sandboxed targets, else refused. */
enum bsh_action bsh_dec_refusal(struct bsh_call *c, const uint64_t *args);
/* A rename or hard link that would give a file from outside the scratch dirs a name inside them. */
bool bsh_enters_scratch(const struct bsh_config *cfg, const struct bsh_call *c, const char *path, const char *to,
                        bool path_anonymous);
bool bsh_leaves_scratch(const struct bsh_config *cfg, const struct bsh_call *c, const char *path, const char *to);

/* --- syscall-decode.c --- */
enum bsh_action bsh_decode(const struct bsh_config *cfg, const void *notif, struct bsh_call *c);

/* --- onbehalf.c --- */
/* `aside`: NULL, or where an unlink's file or a rename's replaced file is moved instead of deleted. */
int bsh_perform(const struct bsh_call *c, const char *path, const char *to, const char *aside, int *out_fd);

/* --- broker-channel.c --- */
struct bsh_channel {
  int fd;
  uint8_t *in;
  size_t in_len, in_cap;
  uint8_t *out;
  size_t out_len, out_off, out_cap;
};
struct bsh_answer {
  uint32_t id;
  int32_t err;
  char path[BSH_PATH_MAX];
  char to[BSH_PATH_MAX];
  /* Where the file an unlink removes or a rename replaces goes instead (a blob in the store); empty: deleted as usual. */
  char aside[BSH_PATH_MAX];
  size_t path_len, to_len, aside_len;
};
int bsh_channel_queue(struct bsh_channel *ch, const struct bsh_call *c);
int bsh_channel_queue_performed(struct bsh_channel *ch, uint32_t id);
int bsh_channel_flush(struct bsh_channel *ch);
int bsh_channel_fill(struct bsh_channel *ch);
int bsh_channel_next(struct bsh_channel *ch, struct bsh_answer *a);

/* --- lease-glob.c --- */
/* One brace-free alternative of a rule glob, as glob.ts compiles it (the lease carries it). */
struct bsh_glob_class {
  bool negated;
  uint16_t *ranges; /* lo, hi pairs of UTF-16 code units */
  size_t n_ranges;
};
struct bsh_glob_prog {
  uint8_t *ops;
  int32_t *a, *b;
  size_t n;
  struct bsh_glob_class *classes;
  size_t n_classes;
  uint16_t **needs; /* texts every match contains, as code units */
  size_t *need_len;
  size_t n_needs;
  /* Worked out at load: the testing instructions each instruction reaches, and whether the match does. */
  int32_t *cl_start, *cl_list;
  uint8_t *cl_match;
};
int bsh_glob_finish(struct bsh_glob_prog *p);
void bsh_glob_free(struct bsh_glob_prog *p);
/* Does `p` match the path (`units`, its UTF-16 code units) or a directory above it? */
bool bsh_glob_within(const struct bsh_glob_prog *p, const uint16_t *units, size_t n);
/* UTF-8 to UTF-16 code units (as JavaScript sees the path); -1 when not valid UTF-8 or longer than `cap`. */
ssize_t bsh_utf16_of(const char *s, uint16_t *out, size_t cap);

/* --- lease.c --- */
/* The changes a lease may cover (src/plugins/lease/schema.ts leasedOpSchema). */
enum bsh_lease_op {
  BSH_LEASE_CREATE = 1 << 0,
  BSH_LEASE_MKDIR = 1 << 1,
  BSH_LEASE_UNLINK = 1 << 2,
  BSH_LEASE_RMDIR = 1 << 3,
  BSH_LEASE_RENAME = 1 << 4,
  BSH_LEASE_LINK = 1 << 5,
  BSH_LEASE_CHMOD = 1 << 6,
  BSH_LEASE_CHOWN = 1 << 7,
  BSH_LEASE_UTIMES = 1 << 8,
};
struct bsh_strings {
  char **v; /* sorted (strcmp), for bsearch */
  size_t n, cap;
};
struct bsh_lease_glob {
  bool write, del;
  struct bsh_glob_prog *progs;
  size_t n, cap;
};
struct bsh_lease {
  bool active;
  unsigned ops;
  bool setid;
  struct bsh_strings roots, claims, anchors, holds, names, finals;
  struct bsh_lease_glob *globs;
  size_t n_globs, cap_globs;
  /* Where records go; has_store false when backups are off. */
  bool has_store, durable_each;
  char turn[160];
  char journal[BSH_PATH_MAX];
  char blobs[BSH_PATH_MAX];
  char *header;
};
int bsh_lease_load(struct bsh_lease *out, const char *file, char *err, size_t errlen);
void bsh_lease_free(struct bsh_lease *l);
/* Does the lease cover `op` on `path` (absolute, walked without a symlink)? `mode` -1 when the change gives none. */
bool bsh_lease_allows(const struct bsh_lease *l, unsigned op, const char *path, bool del, long mode, bool directory);

/* --- notify-loop.c --- */
void bsh_refuse_pending(int listener);
int bsh_supervise(const struct bsh_config *cfg, int listener, pid_t child, int sigfd);

#endif
