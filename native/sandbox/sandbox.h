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
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include "kernel-compat.h"

#define BSH_NAME "brokered-sandbox"
/* Longest path we handle, including its NUL (the kernel's PATH_MAX). */
#define BSH_PATH_MAX 4096
/* Largest xattr value copied out of a target (the kernel's XATTR_SIZE_MAX). */
#define BSH_XATTR_VALUE_MAX 65536
#define BSH_MAX_LIST 64
/* Most paths a read policy may deny (--deny-read), and most Landlock rules its allow-list may take. */
#define BSH_MAX_READ_DENIED 4096
#define BSH_MAX_READ_RULES 20000

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
  /* Not operations: a connection the supervisor decided (never answered), and one it asks about (PROTOCOL.md). */
  BSH_OP_NET_RECORD = 18,
  BSH_OP_NET_ASK = 19,
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
  /* Paths the program may not read or execute (--deny-read), realpath()ed; none: no read policy. */
  char **read_denied;
  size_t n_read_denied;
  /* --network: connections follow the table the broker sends first (net-policy.c); else they are left open. */
  bool network;
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
  BSH_ACT_HELD,     /* the network module answers it later (a question, a connect or send in progress) */
  BSH_ACT_COUNT,    /* answer `count` (a sendmmsg's messages sent) */
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
  long count; /* for BSH_ACT_COUNT */
  /* For BSH_ACT_REPORT: the syscall's name, a space, and why it was refused. */
  char refusal[BSH_REFUSAL_MAX];
};

/* --- caps.c --- */
int bsh_caps_drop_all(char *err, size_t errlen);
int bsh_caps_limit_supervisor(char *err, size_t errlen);

/* --- landlock.c --- */
int bsh_landlock_abi(void);
/* A Landlock domain: write only below `writable` and to `devices` (plus the built-in
 * devices); read and execute everything but `read_denied` (all of it when there is none);
 * signals scoped from ABI 6. */
struct bsh_landlock_spec {
  int abi;
  const char *const *writable;
  size_t n_writable;
  const char *const *devices;
  size_t n_devices;
  const char *const *read_denied;
  size_t n_read_denied;
};
int bsh_landlock_restrict(const struct bsh_landlock_spec *spec, char *err, size_t errlen);
int bsh_landlock_apply(const struct bsh_config *cfg, char *err, size_t errlen);

/* --- read-allow.c --- */
/* Adds `rights` on every entry of every folder above a `paths` entry that is neither one of
 * them nor above one (absolute, real paths). 0, or -1 with `err` (past BSH_MAX_READ_RULES too). */
int bsh_read_allow_rules(int ruleset, uint64_t rights, const char *const *paths, size_t n, char *err, size_t errlen);
/* Takes a --deny-read argument: its real path appended to `*list` (a path not there now is
 * skipped: nothing to read). 0, or -1 with a message on stderr. */
int bsh_read_denied_add(char ***list, size_t *n, const char *arg);

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
/* Is the real path of a unix socket one the command may reach (its temp dirs, --unix-socket)? */
bool bsh_unix_socket_allowed(const struct bsh_config *cfg, const char *real);
/* A pathname or abstract unix address checked as connect checks it: 0 and `via` (reached through an O_PATH
 * fd, closed by the caller) or BSH_ACT_* through `act`. */
int bsh_unix_address(const struct bsh_config *cfg, struct bsh_call *c, const void *addr, size_t len, void *via,
                     size_t *via_len, int *pathfd, enum bsh_action *act);

/* --- net-policy.c: the network table (PROTOCOL.md, "Network table") --- */
/* An address, IPv4 ones as v4-mapped IPv6. */
struct bsh_ip {
  uint8_t b[16];
};
enum bsh_net_proto { BSH_PROTO_TCP = 1, BSH_PROTO_UDP = 2, BSH_PROTO_ICMP = 3, BSH_PROTO_OTHER = 4 };
enum bsh_net_verdict { BSH_NET_ALLOW, BSH_NET_REFUSE, BSH_NET_ASK, BSH_NET_DNS };
#define BSH_HOST_MAX 256
struct bsh_net_decision {
  enum bsh_net_verdict verdict;
  char host[BSH_HOST_MAX]; /* the allowed host name the address belongs to, when known */
  char why[160];
};
enum bsh_net_name_verdict { BSH_NAME_ALLOW, BSH_NAME_DENY, BSH_NAME_UNKNOWN };
bool bsh_net_policy_on(void);
/* Parses one frame of table lines; 1 when a whole table arrived (and replaced the old one), 0, or -EPROTO. */
int bsh_net_table_chunk(const char *text, size_t len);
void bsh_net_decide(const struct bsh_ip *ip, uint16_t port, int proto, struct bsh_net_decision *d);
enum bsh_net_name_verdict bsh_net_name(const char *name, char *why, size_t cap);
/* An address a DNS answer gave for an allowed name, kept until `ttl` seconds from now. */
void bsh_net_learn(const char *name, const struct bsh_ip *ip, uint32_t ttl);
/* The resolver a connection to ip:port names, or -1. */
int bsh_net_resolver(const struct bsh_ip *ip, uint16_t port);
const struct bsh_ip *bsh_net_resolver_ip(int index, uint16_t *port);
bool bsh_ip_from_sockaddr(const void *sa, size_t len, struct bsh_ip *ip, uint16_t *port);
size_t bsh_ip_to_sockaddr(const struct bsh_ip *ip, uint16_t port, int family, void *out);
bool bsh_ip_is_v4(const struct bsh_ip *ip);
bool bsh_ip_is_loopback(const struct bsh_ip *ip);
void bsh_ip_format(const struct bsh_ip *ip, char *out, size_t cap);
const char *bsh_net_proto_name(int proto);

/* --- net-listeners.c --- */
/* Does a process of the sandbox listen (TCP) or receive (UDP) on this loopback port? */
bool bsh_own_listener(uint16_t port, int proto);

/* --- net-send.c --- */
enum bsh_action bsh_dec_sendto(const struct bsh_config *cfg, struct bsh_call *c, const uint64_t *args);
enum bsh_action bsh_dec_sendmsg(const struct bsh_config *cfg, struct bsh_call *c, const uint64_t *args, bool many);

/* --- net-sockets.c --- */
/* socket(2) of a family or protocol the network policy does not govern, and setsockopt(2) that routes around it. */
enum bsh_action bsh_dec_socket(struct bsh_call *c, const uint64_t *args);
enum bsh_action bsh_dec_setsockopt(struct bsh_call *c, const uint64_t *args);
/* For the filter: is this socket(2) one the policy governs as it is (inet TCP, UDP, ICMP; unix; netlink)? */
#define BSH_SOCK_TYPE_MASK 0xf

/* --- net-async.c: what the network module holds across loop rounds --- */
struct bsh_channel;
struct bsh_answer;
struct pollfd;
/* Reads the first table from the broker (before the command starts) and opens the DNS proxy. 0 or -errno. */
int bsh_net_start(int broker_fd, char *err, size_t errlen);
void bsh_net_attach(struct bsh_channel *ch, int listener);
/* The fds the network module waits on, and how long the loop may sleep (-1: no deadline). */
size_t bsh_net_poll_fds(struct pollfd *out, size_t cap);
int bsh_net_timeout_ms(void);
void bsh_net_on_poll(const struct pollfd *fds, size_t n);
/* Answers with the network bit in their id, and the broker's messages (id 0). 0 or -EPROTO. */
#define BSH_NET_ID_BIT 0x80000000u
int bsh_net_on_answer(const struct bsh_answer *a);
/* The channel's unsent bytes past which the loop stops taking notifications (records wait for the broker). */
bool bsh_net_backlogged(void);
/* A connection decided here, for the audit log (BSH_OP_NET_RECORD). */
enum bsh_net_kind { BSH_NET_CONNECT = 1, BSH_NET_DATAGRAM = 2, BSH_NET_DNS_QUERY = 3 };
void bsh_net_record(const struct bsh_call *c, int err, int proto, enum bsh_net_kind kind, const struct bsh_ip *ip,
                    uint16_t port, const char *host, const char *why);
/* The counts not sent yet, and what the channel holds, before the supervisor exits. */
void bsh_net_flush_records(void);
/* Our duplicate of the caller's fd (its process id noted in c->tgid), or -errno. */
int bsh_net_dup(struct bsh_call *c, int fd);
/*
 * A call the network module answers later: asked of the broker, or a connect or send in
 * progress on a blocking socket. `perform` carries it out once allowed (and again each
 * time the socket is writable while it waits): it ends in bsh_net_finish or bsh_net_wait.
 */
struct bsh_net_op {
  struct bsh_net_op *next;
  uint64_t notif_id;
  pid_t tid, tgid;
  int nr;
  int sock; /* our duplicate of the command's socket */
  bool blocking; /* the command's socket waits for what it asks (no O_NONBLOCK, no MSG_DONTWAIT) */
  bool waiting;  /* for the socket to be writable */
  bool connecting;
  uint32_t ask_id;
  uint8_t addr[sizeof(struct sockaddr_storage)];
  size_t addr_len;
  long count; /* what a send answers once done: the bytes the command gave */
  void (*perform)(struct bsh_net_op *op);
  void (*release)(struct bsh_net_op *op);
  void *payload;
};
struct bsh_net_op *bsh_net_hold(const struct bsh_call *c, int sock);
/* Asks the broker (BSH_OP_NET_ASK); its answer runs `perform` or refuses the call. */
void bsh_net_ask(struct bsh_net_op *op, int proto, enum bsh_net_kind kind, const struct bsh_ip *ip, uint16_t port,
                 const char *host);
/* The op's perform for a connect to op->addr. */
void bsh_net_connect_op(struct bsh_net_op *op);
void bsh_net_wait(struct bsh_net_op *op);
/* Answers the call (-err, 0 or a count) and drops the op. */
void bsh_net_finish(struct bsh_net_op *op, long result);
/* Answers a notification with a count (BSH_ACT_COUNT). */
void bsh_net_answer(uint64_t notif_id, long result);
/* Sends a question of the DNS proxy's (a name); its id, or 0. */
uint32_t bsh_net_ask_name(pid_t tid, pid_t tgid, int proto, const struct bsh_ip *resolver, const char *name);

/* --- net-dns.c: DNS messages --- */
struct bsh_dns_question {
  char name[BSH_HOST_MAX];
  uint16_t id, type, qclass, flags;
  bool edns;
  uint16_t edns_size;
  bool dnssec_ok;
};
/* 0, or -EINVAL for anything but one plain question (what a name must be checked from). */
int bsh_dns_parse_query(const uint8_t *msg, size_t len, struct bsh_dns_question *q);
/* A fresh query for q (its id), with nothing of the original but the question: its length. */
size_t bsh_dns_build_query(const struct bsh_dns_question *q, uint16_t id, uint8_t *out, size_t cap);
size_t bsh_dns_build_error(const struct bsh_dns_question *q, int rcode, uint8_t *out, size_t cap);
/* Calls `learn` for each A and AAAA record of an answer. */
void bsh_dns_answers(const uint8_t *msg, size_t len, void (*learn)(const struct bsh_ip *ip, uint32_t ttl, void *arg),
                     void *arg);

/* --- net-proxy.c: the DNS proxy the command's resolver sockets are connected to --- */
int bsh_dns_proxy_open(char *err, size_t errlen);
/* The proxy address for a socket of `family` and `proto` meant for resolver `resolver`: 0 and the address, or -errno. */
int bsh_dns_proxy_address(int family, int proto, void *out, size_t *len);
/* After the command's socket was connected to the proxy: its own address is registered as a client of `resolver`. */
void bsh_dns_proxy_client(int sock, int proto, int resolver, pid_t tid, pid_t tgid);
/* A datagram query the command sends to a resolver itself (unconnected UDP): allowed, asked or refused. */
enum bsh_action bsh_dns_send(struct bsh_call *c, int sock, int resolver, const uint8_t *msg, size_t len, int flags,
                             const void *addr, size_t addrlen);
size_t bsh_dns_proxy_poll_fds(struct pollfd *out, size_t cap);
int bsh_dns_proxy_timeout_ms(void);
void bsh_dns_proxy_on_poll(const struct pollfd *fds, size_t n);
/* The broker's answer to a question about a name: the held queries go on. */
bool bsh_dns_proxy_on_answer(uint32_t id, int err);

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
/* A frame of the request layout with these fields (network records and questions). */
int bsh_channel_queue_frame(struct bsh_channel *ch, uint16_t op, uint32_t id, pid_t tid, pid_t tgid, uint32_t flags,
                            uint32_t mode, const char *s1, const char *s2, const char *s3);
size_t bsh_channel_unsent(const struct bsh_channel *ch);
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
