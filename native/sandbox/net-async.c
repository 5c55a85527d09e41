/*
 * What the network module holds across rounds of the notification loop: calls that wait
 * for the broker's answer to a question (a host the table does not know), and connects
 * and sends in progress on a blocking socket. The loop never waits on either: a held
 * call is a pending notification (its caller blocked in the syscall), its socket is in
 * the loop's poll set while it waits to be writable, and the broker's answer arrives
 * like any other. Questions carry ids with BSH_NET_ID_BIT set and are answered in any
 * order, beside the one-at-a-time file requests: a connection changes no file.
 *
 * Every connection the table decides is recorded (BSH_OP_NET_RECORD, never answered)
 * before its caller is answered; a broker that reads them too slowly makes the loop stop
 * taking notifications until it has caught up, so records never pile up without bound.
 */
#include "sandbox.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Unsent channel bytes past which notifications wait: about ten thousand records. */
#define BACKLOG_BYTES (1u << 20)
/* How often held calls are checked for a caller that died meanwhile. */
#define SWEEP_MS 1000
#define FRAME_MAX 16384

static struct bsh_channel *g_ch;
static int g_listener = -1;
static bool g_records;
static struct bsh_net_op *g_ops;
static uint32_t g_next_ask;
static size_t g_resp_size;
static void *g_resp;

static int init_resp(void) {
  struct seccomp_notif_sizes s;
  if (syscall(__NR_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &s) != 0) return -errno;
  g_resp_size = s.seccomp_notif_resp > sizeof(struct seccomp_notif_resp) ? s.seccomp_notif_resp : sizeof(struct seccomp_notif_resp);
  g_resp = calloc(1, g_resp_size);
  return g_resp ? 0 : -ENOMEM;
}

static void respond(uint64_t id, long result) {
  struct seccomp_notif_resp *r = g_resp;
  if (!r) return;
  memset(r, 0, g_resp_size);
  r->id = id;
  if (result < 0) r->error = (int32_t)result;
  else r->val = result;
  /* ENOENT: the caller died or was killed meanwhile; nothing is left to answer. */
  while (ioctl(g_listener, SECCOMP_IOCTL_NOTIF_SEND, r) != 0 && errno == EINTR) {
  }
}

/* Linux 6.6's flag (absent from older headers): the target that waits wakes the supervisor's CPU at once. */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

void bsh_net_attach(struct bsh_channel *ch, int listener) {
  g_ch = ch;
  g_listener = listener;
  if (!g_resp) init_resp();
  /*
   * A connect is a notification and an answer on the caller's critical path, every
   * time; without this, each pays a scheduler wake-up (tens of microseconds) twice. An
   * older kernel refuses the flag and only loses that speed.
   */
  (void)ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
}

bool bsh_net_backlogged(void) { return g_ch && bsh_channel_unsent(g_ch) > BACKLOG_BYTES; }

static uint32_t mode_field(int proto, enum bsh_net_kind kind, uint16_t port) {
  return (uint32_t)port | ((uint32_t)proto << 16) | ((uint32_t)kind << 24);
}

/*
 * Records are counted per target: the first of a kind goes out at once; the same call
 * made again by the same process to the same place within a second is added to a count
 * sent when the second is over (or the command ends), so a loop of connects costs the
 * broker one record a second, not one each.
 */
#define AGG_SLOTS 64
#define AGG_MS 1000
struct aggregate {
  bool used;
  pid_t tid, tgid;
  int nr, err, proto;
  enum bsh_net_kind kind;
  struct bsh_ip ip;
  uint16_t port;
  char host[BSH_HOST_MAX];
  char why[160];
  uint32_t pending;
  struct timespec since;
};
static struct aggregate g_agg[AGG_SLOTS];

static long ms_since(const struct timespec *t) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

static void send_record(const struct aggregate *a, uint32_t count) {
  char address[64] = "", text[BSH_REFUSAL_MAX], name[48];
  bsh_ip_format(&a->ip, address, sizeof address);
  snprintf(text, sizeof text, "%s %s", a->nr < 0 ? "dns" : bsh_syscall_name(a->nr, name, sizeof name), a->why);
  if (bsh_channel_queue_frame(g_ch, BSH_OP_NET_RECORD, 0, a->tid, a->tgid, (uint32_t)a->err, mode_field(a->proto, a->kind, a->port),
                              address, a->host, text) != 0)
    return;
  /* The count rides in the last four header bytes (PROTOCOL.md). */
  uint8_t *frame = g_ch->out + g_ch->out_len - (32 + 6 + strlen(address) + strlen(a->host) + strlen(text));
  for (int i = 0; i < 4; i++) frame[28 + i] = (uint8_t)(count >> (8 * i));
}

static void flush_aggregates(bool all) {
  for (size_t i = 0; i < AGG_SLOTS; i++) {
    struct aggregate *a = &g_agg[i];
    if (!a->used || (!all && ms_since(&a->since) < AGG_MS)) continue;
    if (a->pending > 0) send_record(a, a->pending);
    a->used = false;
  }
}

void bsh_net_record(const struct bsh_call *c, int err, int proto, enum bsh_net_kind kind, const struct bsh_ip *ip,
                    uint16_t port, const char *host, const char *why) {
  if (!g_records || !g_ch) return;
  struct aggregate key = {.used = true, .tid = c->tid, .tgid = c->tgid, .nr = c->nr, .err = err, .proto = proto, .kind = kind, .port = port};
  if (ip) key.ip = *ip;
  snprintf(key.host, sizeof key.host, "%s", bsh_utf8_valid(host) ? host : "");
  snprintf(key.why, sizeof key.why, "%s", why);
  struct aggregate *free_slot = NULL, *oldest = NULL;
  for (size_t i = 0; i < AGG_SLOTS; i++) {
    struct aggregate *a = &g_agg[i];
    if (!a->used) {
      if (!free_slot) free_slot = a;
      continue;
    }
    if (a->tgid == key.tgid && a->nr == key.nr && a->err == err && a->proto == proto && a->kind == kind && a->port == port &&
        memcmp(&a->ip, &key.ip, sizeof key.ip) == 0 && strcmp(a->host, key.host) == 0) {
      a->pending++;
      return;
    }
    if (!oldest || a->since.tv_sec < oldest->since.tv_sec ||
        (a->since.tv_sec == oldest->since.tv_sec && a->since.tv_nsec < oldest->since.tv_nsec))
      oldest = a;
  }
  send_record(&key, 1);
  if (!free_slot) {
    if (oldest->pending > 0) send_record(oldest, oldest->pending);
    free_slot = oldest;
  }
  *free_slot = key;
  free_slot->pending = 0;
  clock_gettime(CLOCK_MONOTONIC, &free_slot->since);
}

void bsh_net_flush_records(void) {
  if (!g_ch) return;
  flush_aggregates(true);
  /* What the broker has not taken yet goes now: the command is over, and a record must not be lost with it. */
  for (int waited = 0; bsh_channel_unsent(g_ch) > 0 && waited < 2000; waited += 10) {
    if (bsh_channel_flush(g_ch) < 0) return;
    if (bsh_channel_unsent(g_ch) == 0) return;
    struct pollfd p = {g_ch->fd, POLLOUT, 0};
    poll(&p, 1, 10);
  }
}

/* Our own reference to the command's fd. A thread-group leader's pidfd tells its process at once; another thread's status is read. */
int bsh_net_dup(struct bsh_call *c, int fd) {
  if (fd < 0) return -EBADF;
  int pidfd = (int)syscall(__NR_pidfd_open, c->tid, 0);
  if (pidfd >= 0 && !c->have_status) c->tgid = c->tid;
  /* Another thread than the leader: the kernel says ENOENT (EINVAL before PIDFD_THREAD existed). */
  if (pidfd < 0 && (errno == ENOENT || errno == EINVAL)) {
    int rc = bsh_proc_status(c);
    if (rc != 0) return rc;
    pidfd = (int)syscall(__NR_pidfd_open, c->tid, PIDFD_THREAD);
  }
  if (pidfd < 0) return -ESRCH;
  int dup = (int)syscall(__NR_pidfd_getfd, pidfd, fd, 0);
  int saved = errno;
  close(pidfd);
  if (dup < 0) return saved == EBADF ? -EBADF : -EACCES;
  return dup;
}

struct bsh_net_op *bsh_net_hold(const struct bsh_call *c, int sock) {
  struct bsh_net_op *op = calloc(1, sizeof *op);
  if (!op) return NULL;
  op->notif_id = c->notif_id;
  op->tid = c->tid;
  op->tgid = c->tgid;
  op->nr = c->nr;
  op->sock = sock;
  op->perform = bsh_net_connect_op;
  op->next = g_ops;
  g_ops = op;
  return op;
}

static void drop(struct bsh_net_op *op) {
  for (struct bsh_net_op **p = &g_ops; *p; p = &(*p)->next)
    if (*p == op) {
      *p = op->next;
      break;
    }
  if (op->release) op->release(op);
  if (op->sock >= 0) close(op->sock);
  free(op);
}

void bsh_net_answer(uint64_t notif_id, long result) { respond(notif_id, result); }

void bsh_net_finish(struct bsh_net_op *op, long result) {
  respond(op->notif_id, result);
  drop(op);
}

void bsh_net_wait(struct bsh_net_op *op) { op->waiting = true; }

static uint32_t next_ask_id(void) {
  g_next_ask = (g_next_ask + 1) & ~BSH_NET_ID_BIT;
  if (g_next_ask == 0) g_next_ask = 1;
  return BSH_NET_ID_BIT | g_next_ask;
}

void bsh_net_ask(struct bsh_net_op *op, int proto, enum bsh_net_kind kind, const struct bsh_ip *ip, uint16_t port,
                 const char *host) {
  char address[64] = "", name[48], text[64];
  bsh_ip_format(ip, address, sizeof address);
  snprintf(text, sizeof text, "%s", bsh_syscall_name(op->nr, name, sizeof name));
  op->ask_id = next_ask_id();
  if (!g_ch || bsh_channel_queue_frame(g_ch, BSH_OP_NET_ASK, op->ask_id, op->tid, op->tgid, 0,
                                       mode_field(proto, kind, port), address, bsh_utf8_valid(host) ? host : "", text) != 0)
    bsh_net_finish(op, -EACCES);
}

uint32_t bsh_net_ask_name(pid_t tid, pid_t tgid, int proto, const struct bsh_ip *resolver, const char *name) {
  char address[64] = "";
  bsh_ip_format(resolver, address, sizeof address);
  uint32_t id = next_ask_id();
  if (!g_ch || bsh_channel_queue_frame(g_ch, BSH_OP_NET_ASK, id, tid, tgid, 0, mode_field(proto, BSH_NET_DNS_QUERY, 53),
                                       address, name, "dns") != 0)
    return 0;
  return id;
}

void bsh_net_connect_op(struct bsh_net_op *op) {
  if (!op->connecting) {
    int flags = fcntl(op->sock, F_GETFL);
    if (flags < 0) return bsh_net_finish(op, -errno);
    op->blocking = !(flags & O_NONBLOCK);
    if (op->blocking && fcntl(op->sock, F_SETFL, flags | O_NONBLOCK) != 0) return bsh_net_finish(op, -errno);
    int rc = connect(op->sock, (const struct sockaddr *)op->addr, (socklen_t)op->addr_len) == 0 ? 0 : errno;
    if (op->blocking) fcntl(op->sock, F_SETFL, flags);
    op->connecting = true;
    if (rc != EINPROGRESS || !op->blocking) return bsh_net_finish(op, -rc);
    /* A local peer has usually answered by now: no round of the loop for it. */
    struct pollfd p = {op->sock, POLLOUT, 0};
    if (poll(&p, 1, 0) != 1) return bsh_net_wait(op);
    if (!(p.revents & (POLLERR | POLLHUP))) return bsh_net_finish(op, 0);
  }
  /* The socket became writable: the connect is over, one way or the other. */
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(op->sock, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  bsh_net_finish(op, -err);
}

size_t bsh_net_poll_fds(struct pollfd *out, size_t cap) {
  size_t n = bsh_dns_proxy_poll_fds(out, cap);
  for (struct bsh_net_op *op = g_ops; op && n < cap; op = op->next)
    if (op->waiting) out[n++] = (struct pollfd){op->sock, POLLOUT, 0};
  return n;
}

static struct timespec g_last_sweep;

static long since_sweep_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - g_last_sweep.tv_sec) * 1000 + (now.tv_nsec - g_last_sweep.tv_nsec) / 1000000;
}

static int sooner(int a, int b) { return a < 0 ? b : b < 0 ? a : a < b ? a : b; }

int bsh_net_timeout_ms(void) {
  int timeout = bsh_dns_proxy_timeout_ms();
  if (g_ops) {
    long left = SWEEP_MS - since_sweep_ms();
    timeout = sooner(timeout, left < 0 ? 0 : (int)left);
  }
  for (size_t i = 0; i < AGG_SLOTS; i++) {
    if (!g_agg[i].used) continue;
    long left = AGG_MS - ms_since(&g_agg[i].since);
    timeout = sooner(timeout, left < 0 ? 0 : (int)left);
  }
  return timeout;
}

/* A held call whose caller is gone (killed, or its thread exited) has nobody to answer. */
static void sweep(void) {
  clock_gettime(CLOCK_MONOTONIC, &g_last_sweep);
  for (struct bsh_net_op *op = g_ops, *next; op; op = next) {
    next = op->next;
    uint64_t id = op->notif_id;
    if (ioctl(g_listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) != 0) drop(op);
  }
}

void bsh_net_on_poll(const struct pollfd *fds, size_t n) {
  bsh_dns_proxy_on_poll(fds, n);
  for (size_t i = 0; i < n; i++) {
    if (!(fds[i].revents & (POLLOUT | POLLERR | POLLHUP))) continue;
    for (struct bsh_net_op *op = g_ops; op; op = op->next)
      if (op->waiting && op->sock == fds[i].fd) {
        op->waiting = false;
        op->perform(op);
        break;
      }
  }
  if (g_ops && since_sweep_ms() >= SWEEP_MS) sweep();
  flush_aggregates(false);
}

int bsh_net_on_answer(const struct bsh_answer *a) {
  if (a->id == 0) {
    /* A message of the broker's: type 1 is (a frame of) a network table. */
    if (a->err != 1 || a->to_len != 0) return -EPROTO;
    return bsh_net_table_chunk(a->path, a->path_len) < 0 ? -EPROTO : 0;
  }
  if (bsh_dns_proxy_on_answer(a->id, a->err)) return 0;
  for (struct bsh_net_op *op = g_ops; op; op = op->next) {
    if (op->ask_id != a->id) continue;
    op->ask_id = 0;
    if (a->err != 0) bsh_net_finish(op, a->err > 0 && a->err < 4096 ? -a->err : -EACCES);
    else op->perform(op);
    return 0;
  }
  /* A question whose caller died was dropped: its late answer is no protocol error. */
  return (a->id & BSH_NET_ID_BIT) ? 0 : -EPROTO;
}

/* Reads exactly `len` bytes within the deadline. */
static int read_exact(int fd, uint8_t *buf, size_t len, int timeout_ms) {
  size_t got = 0;
  while (got < len) {
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return r == 0 ? -ETIMEDOUT : -errno;
    ssize_t n = read(fd, buf + got, len - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? -EPIPE : -errno;
    got += (size_t)n;
  }
  return 0;
}

int bsh_net_start(int broker_fd, char *err, size_t errlen) {
  static uint8_t body[FRAME_MAX];
  for (;;) {
    uint8_t head[4];
    int rc = read_exact(broker_fd, head, sizeof head, 10000);
    uint32_t len = (uint32_t)head[0] | (uint32_t)head[1] << 8 | (uint32_t)head[2] << 16 | (uint32_t)head[3] << 24;
    if (rc == 0 && (len < 12 || len > FRAME_MAX)) rc = -EPROTO;
    if (rc == 0) rc = read_exact(broker_fd, body, len, 10000);
    /* id 0, type 1, then the chunk as a string and an empty one. */
    uint32_t id = body[0] | body[1] << 8 | body[2] << 16 | (uint32_t)body[3] << 24;
    uint32_t type = body[4] | body[5] << 8 | body[6] << 16 | (uint32_t)body[7] << 24;
    size_t slen = rc == 0 ? (size_t)(body[8] | body[9] << 8) : 0;
    if (rc == 0 && (id != 0 || type != 1 || 10 + slen + 2 != len || body[10 + slen] || body[11 + slen])) rc = -EPROTO;
    if (rc == 0) rc = bsh_net_table_chunk((const char *)body + 10, slen);
    if (rc < 0) {
      snprintf(err, errlen, "the network table did not arrive from the broker (%s)", strerror(-rc));
      return rc;
    }
    if (rc == 1) break;
  }
  g_records = true;
  return bsh_dns_proxy_open(err, errlen);
}
