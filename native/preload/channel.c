/*
 * The connection to the broker: one per process, kept open, one request at a time
 * under a mutex (the broker answers each connection in order, so concurrent threads
 * simply queue here).
 *
 * After fork the child must not share the parent's connection: answers would go to
 * whoever reads first. A pthread_atfork handler drops it in the child. A process
 * created without fork handlers (vfork, a raw clone) shares our memory or skipped the
 * handler: its pid differs from the owner's, so it uses a connection of its own for
 * each request and touches no shared state. A hook re-entered on the same thread (a
 * signal handler that opens a file while we wait for an answer) does the same, so it
 * never waits for the mutex its own thread holds.
 *
 * Our socket is moved to a high fd, and before each use we check it is still the
 * socket we connected: a program that closed or reused that number (closefrom, dup2)
 * must never receive our request in one of its files.
 */
#include "preload.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

enum { EXCHANGED = 0, DEAD = -1, PROTOCOL = -2 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int conn_fd = -1;
static dev_t conn_dev;
static ino_t conn_ino;
/* The process whose connection conn_fd is; 0 until first known. */
static pid_t owner;
static __thread int depth __attribute__((tls_model("initial-exec")));

__attribute__((constructor)) static void remember_owner(void) { __atomic_store_n(&owner, getpid(), __ATOMIC_RELEASE); }

static bool still_ours(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == conn_dev && st.st_ino == conn_ino;
}

void bp_channel_after_fork(void) {
  if (conn_fd >= 0 && still_ours(conn_fd)) close(conn_fd);
  conn_fd = -1;
  pthread_mutex_init(&lock, NULL);
  __atomic_store_n(&owner, getpid(), __ATOMIC_RELEASE);
}

static int connect_broker(const struct bp_config *cfg) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, cfg->socket, strlen(cfg->socket) + 1);
  while (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    if (errno == EINTR) continue;
    if (errno == EISCONN) break;
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  /* Out of the way of the numbers programs use for their own files. */
  static const int k_high[] = {900, 400, 100};
  for (size_t i = 0; i < sizeof k_high / sizeof k_high[0]; i++) {
    int high = fcntl(fd, F_DUPFD_CLOEXEC, k_high[i]);
    if (high >= 0) {
      close(fd);
      fd = high;
      break;
    }
  }
  return fd;
}

/* Reads the one-line answer, and any fd that came with it. */
static int read_answer(int fd, enum bp_reply_kind kind, struct bp_reply *out) {
  char chunk[256];
  size_t word_len = 0;
  bool any = false;
  for (;;) {
    struct iovec iov = {chunk, sizeof chunk};
    union {
      struct cmsghdr align;
      char buf[CMSG_SPACE(sizeof(int) * 4)];
    } u;
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = u.buf;
    msg.msg_controllen = sizeof u.buf;
    ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) {
      for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
          int passed;
          memcpy(&passed, CMSG_DATA(cm) + i * sizeof(int), sizeof passed);
          if (out->fd < 0) out->fd = passed;
          else close(passed);
        }
      }
    }
    if (n <= 0) return any ? PROTOCOL : DEAD;
    any = true;
    for (ssize_t i = 0; i < n; i++) {
      char c = chunk[i];
      if (c == '\n') {
        /* One request, one line: anything after it means we lost track. */
        if (i + 1 != n) return PROTOCOL;
        if (kind == BP_REPLY_JSON && (out->json.bad || !out->json.ok_seen)) return PROTOCOL;
        return EXCHANGED;
      }
      if (kind == BP_REPLY_JSON) {
        bp_json_feed(&out->json, c);
      } else if (word_len + 1 < sizeof out->word) {
        out->word[word_len++] = c;
        out->word[word_len] = '\0';
      } else {
        out->overlong = true;
      }
    }
  }
}

static int exchange(int fd, bp_emit_fn emit, const void *ctx, enum bp_reply_kind kind, struct bp_reply *out) {
  struct bp_writer w;
  w.fd = fd;
  w.failed = false;
  w.len = 0;
  emit(&w, ctx);
  if (bp_w_flush(&w) != 0) return DEAD;
  return read_answer(fd, kind, out);
}

static void reset_reply(struct bp_reply *out) {
  if (out->fd >= 0) close(out->fd);
  out->fd = -1;
  out->word[0] = '\0';
  out->overlong = false;
  bp_json_init(&out->json);
}

/* A connection of its own for this one request (re-entered hook, vfork child). */
static int one_shot(const struct bp_config *cfg, bp_emit_fn emit, const void *ctx, enum bp_reply_kind kind,
                    struct bp_reply *out) {
  int fd = connect_broker(cfg);
  if (fd < 0) return -1;
  int r = exchange(fd, emit, ctx, kind, out);
  close(fd);
  if (r != EXCHANGED) reset_reply(out);
  return r == EXCHANGED ? 0 : -1;
}

int bp_transact(bp_emit_fn emit, const void *ctx, enum bp_reply_kind kind, struct bp_reply *out) {
  const struct bp_config *cfg = bp_config();
  out->fd = -1;
  reset_reply(out);
  if (!cfg->usable) return -1;
  pid_t me = getpid();
  pid_t own = __atomic_load_n(&owner, __ATOMIC_ACQUIRE);
  if (depth > 0 || (own != 0 && own != me)) return one_shot(cfg, emit, ctx, kind, out);
  depth++;
  pthread_mutex_lock(&lock);
  if (own == 0) __atomic_store_n(&owner, me, __ATOMIC_RELEASE);
  int rc = -1;
  for (int attempt = 0; attempt < 2; attempt++) {
    /* Someone else's file now (closed and reused): forget it, never close it. */
    if (conn_fd >= 0 && !still_ours(conn_fd)) conn_fd = -1;
    bool fresh = conn_fd < 0;
    if (fresh) {
      conn_fd = connect_broker(cfg);
      struct stat st;
      if (conn_fd < 0 || fstat(conn_fd, &st) != 0) {
        if (conn_fd >= 0) close(conn_fd);
        conn_fd = -1;
        break;
      }
      conn_dev = st.st_dev;
      conn_ino = st.st_ino;
    }
    int r = exchange(conn_fd, emit, ctx, kind, out);
    if (r == EXCHANGED) {
      rc = 0;
      break;
    }
    close(conn_fd);
    conn_fd = -1;
    reset_reply(out);
    /* Only a kept connection that turned out closed (the broker drops idle ones) is retried. */
    if (r == PROTOCOL || fresh) break;
  }
  pthread_mutex_unlock(&lock);
  depth--;
  return rc;
}
