/*
 * brokered-preload: an LD_PRELOAD library that asks the broker before a dynamically
 * linked program changes the file system. Shared declarations; every .c file of the
 * library includes this header first.
 *
 * The model is the reference design's eager per-call IPC, minus reads:
 *   - a write-mode open, truncate, chmod, chown, utimes or xattr change asks with a text
 *     token request and, on SANDBOX, makes the real call itself (Landlock lets it write
 *     only the workspace, the writable roots and its temp dir); on FD it uses the file
 *     descriptor the broker opened and passed over the socket;
 *   - rename, unlink, rmdir, link, symlink and mkdir are sent as JSON HostFileOperations
 *     that the broker performs; the answer becomes the call's return value and errno.
 * The broker backs every existing file up before it answers.
 */
#ifndef BROKERED_PRELOAD_H
#define BROKERED_PRELOAD_H

/*
 * Our hooks must define the plain symbols (open, not open64 under another name) and
 * must not be wrapped by fortified inline versions: node-gyp passes
 * _FILE_OFFSET_BITS=64 to every target, which would rename `open` to `open64`.
 */
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#if defined(__USE_FILE_OFFSET64) && defined(__LP64__)
#error "brokered-preload must be built without _FILE_OFFSET_BITS=64"
#endif

#define BP_EXPORT __attribute__((visibility("default")))
#define BP_HIDDEN __attribute__((visibility("hidden")))

/* Longest path handled, including its NUL (the kernel's PATH_MAX). */
#define BP_PATH_MAX 4096
/* Ids are at most 256 bytes in the broker's schema. */
#define BP_ID_MAX 257

/* Open flags that make an open modifying (the kernel's O_TMPFILE bit, without O_DIRECTORY). */
#define BP_O_TMPFILE_BIT (O_TMPFILE & ~O_DIRECTORY)
#define BP_OPEN_WRITE_FLAGS (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | BP_O_TMPFILE_BIT)

/* ---- real.c: the next definition of a symbol (libc's), found once. ---- */
BP_HIDDEN void *bp_next(const char *name);
/* The real function `name`, typed like our own hook of that name. */
#define BP_REAL(name)                                                        \
  ({                                                                         \
    static __typeof__(&name) bp_real_##name;                                 \
    __typeof__(&name) bp_fn = __atomic_load_n(&bp_real_##name, __ATOMIC_ACQUIRE); \
    if (!bp_fn) {                                                            \
      bp_fn = (__typeof__(&name))bp_next(#name);                             \
      __atomic_store_n(&bp_real_##name, bp_fn, __ATOMIC_RELEASE);            \
    }                                                                        \
    bp_fn;                                                                   \
  })

/* ---- config.c: the broker's address and the ids of this command, read once. ---- */
struct bp_config {
  /* False when BROKERED_SHELL_SOCKET or BROKERED_SHELL_SESSION_ID is missing or too long. */
  bool usable;
  char socket[108];
  char session[BP_ID_MAX];
  char tool_call[BP_ID_MAX];
  char trace[BP_ID_MAX];
};
BP_HIDDEN const struct bp_config *bp_config(void);

/* ---- writer.c: a request streamed to the socket through a small buffer. ---- */
struct bp_writer {
  int fd;
  bool failed;
  size_t len;
  char buf[512];
};
BP_HIDDEN void bp_w_bytes(struct bp_writer *w, const char *s, size_t n);
BP_HIDDEN void bp_w_str(struct bp_writer *w, const char *s);
BP_HIDDEN void bp_w_uint(struct bp_writer *w, unsigned long v);
/* A JSON string literal, quotes included. */
BP_HIDDEN void bp_w_json(struct bp_writer *w, const char *s);
/* Sends what is buffered; 0, or -1 with w->failed set. */
BP_HIDDEN int bp_w_flush(struct bp_writer *w);

/* ---- json-scan.c: the few fields of a JSON answer we act on, read as it streams in. ---- */
struct bp_json_scan {
  int depth;
  bool in_string, escape, is_key, after_colon, bad;
  size_t key_len, val_len;
  char key[32];
  char val[48];
  /* Results. */
  bool ok_seen, ok;
  char errno_name[24];
  char error_code[40];
};
BP_HIDDEN void bp_json_init(struct bp_json_scan *s);
BP_HIDDEN void bp_json_feed(struct bp_json_scan *s, char c);

/* ---- errno-names.c ---- */
/* The errno for a name such as "EXDEV"; 0 when unknown. */
BP_HIDDEN int bp_errno_from_name(const char *name);

/* ---- channel.c: one connection per process, one request at a time. ---- */
enum bp_reply_kind { BP_REPLY_TEXT, BP_REPLY_JSON };
struct bp_reply {
  /* Text answers: the first line, cut at 47 bytes (longer ones are unknown tokens anyway). */
  char word[48];
  bool overlong;
  /* An fd that came with the answer (SCM_RIGHTS), else -1. */
  int fd;
  struct bp_json_scan json;
};
typedef void (*bp_emit_fn)(struct bp_writer *w, const void *ctx);
/*
 * Sends one request (written by `emit`) and reads its one-line answer. 0 on an answer;
 * -1 when the broker cannot be reached or broke the protocol (the caller fails closed).
 */
BP_HIDDEN int bp_transact(bp_emit_fn emit, const void *ctx, enum bp_reply_kind kind, struct bp_reply *out);
/* After fork in the child (pthread_atfork): forget the parent's connection. */
BP_HIDDEN void bp_channel_after_fork(void);

/* ---- ask.c: the two request kinds. ---- */
enum bp_token {
  BP_TOKEN_SANDBOX, /* make the real call */
  BP_TOKEN_FD,      /* use the fd the broker passed */
  BP_TOKEN_DENY,    /* refused */
  BP_TOKEN_FAILED,  /* unreachable broker, unknown token, unsayable path: refused */
};
/* A text token request for writing `path` (absolute). On BP_TOKEN_FD, *fd is ours to close. */
BP_HIDDEN enum bp_token bp_ask_write(const char *path, int *fd);

struct bp_host_op {
  const char *operation; /* "rename", "delete", "mkdir", "link" */
  const char *path;      /* delete, mkdir */
  const char *from;      /* rename, link (symbolic: the link's content) */
  const char *to;        /* rename, link */
  bool symbolic;
  bool has_mode;
  unsigned mode;
};
/* A JSON HostFileOperation; 0 when the broker did it, else -1 with errno set. */
BP_HIDDEN int bp_host_op(const struct bp_host_op *op);

/* ---- paths.c ---- */
/*
 * `path` as seen from `dirfd` made absolute and lexically clean ("." and "//" removed,
 * ".." kept), /proc/self and /proc/thread-self named by number so the broker, another
 * process, reads ours. 0, or -1 with errno set.
 */
BP_HIDDEN int bp_absolute(int dirfd, const char *path, char out[BP_PATH_MAX]);
/* The fd an alias path names (/dev/stdout, /dev/fd/N, /proc/<our pid>/fd/N), else -1. */
BP_HIDDEN int bp_fd_alias(const char *abs);
/* Whether a path lies under /proc or /dev, where names are links we must read ourselves. */
BP_HIDDEN bool bp_is_magic(const char *abs);
/* The real path of an existing file (links followed unless nofollow); -1 for unnamed ones. */
BP_HIDDEN int bp_canonical(const char *abs, bool nofollow, char out[BP_PATH_MAX]);
/* The path an open fd names, if it is a named file; -1 for pipes, sockets, deleted files. */
BP_HIDDEN int bp_fd_path(int fd, char out[BP_PATH_MAX]);
/* stat/lstat without going through any hook. */
BP_HIDDEN int bp_stat(const char *abs, bool nofollow, struct stat *st);
/* A directory (not a link to one) holding a name other than "." and "..", as this process may read it. */
BP_HIDDEN bool bp_dir_has_entries(const char *abs);
/* The errno the kernel would give for creating `abs` when its parent is missing, else EACCES. */
BP_HIDDEN int bp_deny_errno(const char *abs);
/* This process's umask, read without changing it. */
BP_HIDDEN mode_t bp_umask(void);

/* ---- decide.c: what a hook does before (or instead of) its real call. ---- */
enum bp_verdict {
  BP_PROCEED, /* make the real call */
  BP_USE_FD,  /* the broker's fd (in *fd) replaces the real call */
  BP_FAIL,    /* return -1; errno is set */
};
/*
 * A write-mode open. BP_USE_FD hands back an fd already adjusted to `flags` (truncated,
 * append, close-on-exec, mode of a new file). *alias is set (>= 0) when the path names
 * an fd this process already holds open for writing: if the real open is refused, a
 * duplicate of that fd stands in.
 */
BP_HIDDEN enum bp_verdict bp_check_open(int dirfd, const char *path, int flags, mode_t mode, int *fd, int *alias);
/* A duplicate of a held fd standing in for a refused reopen (see bp_check_open). */
BP_HIDDEN int bp_reopen_alias(int alias, int flags);
/* A change of an existing path's content or metadata (truncate, chmod, chown, utimes, xattr). */
BP_HIDDEN enum bp_verdict bp_check_path_change(int dirfd, const char *path, bool nofollow, int *fd);
/* The same through an fd; one held open for writing was asked for when it was opened. */
BP_HIDDEN enum bp_verdict bp_check_fd_change(int fd, int *grant);
/*
 * A path the hook's own real call will change (the new name of a link from an fd, both
 * names of RENAME_EXCHANGE): asks, and backs it up if it exists. An fd answer cannot
 * serve such a call and is refused.
 */
BP_HIDDEN enum bp_verdict bp_check_create(const char *abs);
/* Closes a granted fd after its use and returns rc with errno kept. */
BP_HIDDEN int bp_finish_fd(int fd, int rc);

/* ---- set-id.c: no set-uid or set-gid program is made (the broker cannot see a mode here). ---- */
/* Would `mode` make a set-uid program, or a set-gid one (any set-gid non-directory)? */
BP_HIDDEN bool bp_setid_refused(mode_t mode, bool directory);
/* Whether a chmod to `mode` may go on (the path's object, the fd's); false with errno EACCES. */
BP_HIDDEN bool bp_chmod_allowed_at(int dirfd, const char *path, mode_t mode, bool nofollow);
BP_HIDDEN bool bp_chmod_allowed_fd(int fd, mode_t mode);

/* ---- hooks-open.c: a guarded open, for the other hooks that open files. ---- */
BP_HIDDEN int bp_open_common(int dirfd, const char *path, int flags, mode_t mode);

/*
 * A NULL test the compiler cannot fold away: libc declares some arguments nonnull that
 * Linux accepts as NULL (utimensat's path), and -Wnonnull-compare would refuse the test.
 */
static inline bool bp_is_null(const void *p) {
  __asm__("" : "+r"(p));
  return p == NULL;
}

/* ---- guard: errno kept across our own work. ---- */
struct bp_saved_errno {
  int value;
};
#define BP_SAVE_ERRNO() ((struct bp_saved_errno){errno})
#define BP_RESTORE_ERRNO(saved) (errno = (saved).value)

#endif
