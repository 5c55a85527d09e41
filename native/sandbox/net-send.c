/*
 * sendto(2) with an address, sendmsg(2) and sendmmsg(2): calls that may name where their
 * bytes go. The filter notifies sendto only with an address (or MSG_FASTOPEN, which
 * connects), and sendmsg and sendmmsg always, since their address lies in memory the
 * filter cannot read. Each is performed here, on our duplicate of the socket, with the
 * message copied out of the command once (name, data, control): the kernel re-reading
 * it, or running the call on whatever socket the fd number names by then, would let
 * another thread swap the address or the socket after the check. send(2), write(2) and
 * sendto without an address stay in the kernel: they reach only the connected peer,
 * which connect(2) checked.
 *
 * A name is checked as connect checks it: a unix socket against the allowed ones, an
 * internet address against the network table (a datagram to a resolver is a DNS query,
 * net-proxy.c). A stream socket ignores the name. A blocking socket's send that the
 * socket cannot take at once waits in the loop (net-async.c), never here.
 */
#include "sandbox.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

/* Most one call copies: a stream send past it is answered short, as a socket may; a datagram gets EMSGSIZE. */
#define DATA_MAX (4u << 20)
#define CONTROL_MAX 65536
#define IOV_MAX_N 1024
#define MMSG_MAX 1024
#define MAX_FDS 253 /* SCM_MAX_FD */

struct message {
  struct sockaddr_storage name;
  size_t name_len;
  uint8_t *data;
  size_t len;
  uint8_t *control;
  size_t control_len;
  int fds[MAX_FDS];
  size_t n_fds;
  int pathfd; /* a unix name reached through an O_PATH fd */
  int flags;
  size_t sent;
  bool nosignal;
  /* sendmmsg's first message, waiting on its own: its count goes into the vector, the call answers 1. */
  bool many;
  uint64_t many_uvec;
};

struct sock_info {
  int domain, type, protocol;
};

static void message_free(struct message *m) {
  if (!m) return;
  free(m->data);
  free(m->control);
  for (size_t i = 0; i < m->n_fds; i++) close(m->fds[i]);
  if (m->pathfd >= 0) close(m->pathfd);
  free(m);
}

static struct message *message_new(void) {
  struct message *m = calloc(1, sizeof *m);
  if (m) m->pathfd = -1;
  return m;
}

static enum bsh_action refuse(struct bsh_call *c, int err) {
  c->err = err;
  return BSH_ACT_ERRNO;
}

static bool sock_info(int sock, struct sock_info *s) {
  socklen_t len = sizeof s->domain;
  if (getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &s->domain, &len) != 0) return false;
  len = sizeof s->type;
  getsockopt(sock, SOL_SOCKET, SO_TYPE, &s->type, &len);
  len = sizeof s->protocol;
  s->protocol = 0;
  getsockopt(sock, SOL_SOCKET, SO_PROTOCOL, &s->protocol, &len);
  return true;
}

static int proto_of(const struct sock_info *s) {
  if (s->type == SOCK_STREAM) return s->protocol == 0 || s->protocol == IPPROTO_TCP ? BSH_PROTO_TCP : BSH_PROTO_OTHER;
  if (s->type == SOCK_DGRAM) return s->protocol == IPPROTO_ICMP || s->protocol == IPPROTO_ICMPV6 ? BSH_PROTO_ICMP : BSH_PROTO_UDP;
  return BSH_PROTO_OTHER;
}

/* Copies `total` bytes spread over the command's iovecs into one buffer. */
static int read_iov(pid_t tid, uint64_t uiov, size_t n, bool stream, struct message *m) {
  if (n > IOV_MAX_N) return -EMSGSIZE;
  struct iovec iov[IOV_MAX_N];
  if (n > 0 && bsh_mem_read(tid, uiov, iov, n * sizeof *iov) != 0) return -EFAULT;
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += iov[i].iov_len > DATA_MAX ? DATA_MAX + 1 : iov[i].iov_len;
  if (total > DATA_MAX && !stream) return -EMSGSIZE;
  if (total > DATA_MAX) total = DATA_MAX;
  m->data = malloc(total ? total : 1);
  if (!m->data) return -ENOMEM;
  for (size_t i = 0; i < n && m->len < total; i++) {
    size_t take = iov[i].iov_len < total - m->len ? iov[i].iov_len : total - m->len;
    if (bsh_mem_read(tid, (uint64_t)(uintptr_t)iov[i].iov_base, m->data + m->len, take) != 0) return -EFAULT;
    m->len += take;
  }
  return 0;
}

/*
 * The command's control messages, as the supervisor sends them: descriptors passed
 * (SCM_RIGHTS) become our duplicates of them, credentials become ours (the kernel checks
 * them against the sender, and the peer sees the supervisor as the sender anyway), and
 * source routes (IP options, IPv6 routing headers), which would send the packet past
 * the checked address, are refused.
 */
static int read_control(struct bsh_call *c, uint64_t ucontrol, size_t len, struct message *m) {
  if (len == 0) return 0;
  if (len > CONTROL_MAX) return -ENOBUFS;
  m->control = malloc(len);
  if (!m->control) return -ENOMEM;
  if (bsh_mem_read(c->tid, ucontrol, m->control, len) != 0) return -EFAULT;
  m->control_len = len;
  struct msghdr h = {.msg_control = m->control, .msg_controllen = len};
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&h); cm; cm = CMSG_NXTHDR(&h, cm)) {
    if (cm->cmsg_len < CMSG_LEN(0) || (uint8_t *)cm + cm->cmsg_len > m->control + len) return -EINVAL;
    size_t payload = cm->cmsg_len - CMSG_LEN(0);
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
      int *fds = (int *)CMSG_DATA(cm);
      for (size_t i = 0; i < payload / sizeof(int); i++) {
        if (m->n_fds == MAX_FDS) return -EINVAL;
        int own = bsh_proc_dup_fd(c, fds[i]);
        if (own < 0) return own == -EBADF ? -EBADF : -EACCES;
        m->fds[m->n_fds++] = own;
        fds[i] = own;
      }
    } else if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS && payload >= sizeof(struct ucred)) {
      struct ucred own = {.pid = getpid(), .uid = getuid(), .gid = getgid()};
      memcpy(CMSG_DATA(cm), &own, sizeof own);
    } else if ((cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_RETOPTS) ||
               (cm->cmsg_level == IPPROTO_IPV6 && (cm->cmsg_type == IPV6_RTHDR || cm->cmsg_type == 5 /* IPV6_2292RTHDR */))) {
      return -EPERM;
    }
  }
  return 0;
}

/* Sends what is left of `m` on `sock` without waiting: the bytes sent, or -errno. */
static long send_now(int sock, struct message *m) {
  struct iovec iov = {m->data + m->sent, m->len - m->sent};
  struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = m->control, .msg_controllen = m->control_len};
  if (m->name_len > 0) {
    h.msg_name = &m->name;
    h.msg_namelen = (socklen_t)m->name_len;
  }
  int flags = (m->flags & ~(MSG_DONTWAIT | MSG_ZEROCOPY | MSG_FASTOPEN)) | MSG_DONTWAIT | MSG_NOSIGNAL;
  ssize_t n = sendmsg(sock, &h, flags);
  return n < 0 ? -errno : n;
}

static int write_count(pid_t tid, uint64_t uvec, size_t index, unsigned count);

/* The op's perform: the message goes out, all of it on a blocking stream socket before the call returns. */
static void send_op(struct bsh_net_op *op) {
  struct message *m = op->payload;
  long n = send_now(op->sock, m);
  if (n > 0) {
    m->sent += (size_t)n;
    /* Control messages go with the first bytes only. */
    m->control_len = 0;
  }
  bool more = m->sent < m->len;
  if ((n > 0 && more) || n == -EAGAIN) {
    if (op->blocking) return bsh_net_wait(op);
  }
  if (n == -EPIPE && !m->nosignal) syscall(__NR_tgkill, op->tgid, op->tid, SIGPIPE);
  long result = m->sent > 0 || n >= 0 ? (long)m->sent : n;
  if (m->many && result >= 0) result = write_count(op->tid, m->many_uvec, 0, (unsigned)result) == 0 ? 1 : -EFAULT;
  bsh_net_finish(op, result);
}

static void release_message(struct bsh_net_op *op) { message_free(op->payload); }

/* Hands `m` to an op on `sock` (which it then owns): performed now, or asked about first. */
static enum bsh_action hold_send(struct bsh_call *c, int sock, struct message *m, bool ask, int proto,
                                 const struct bsh_ip *ip, uint16_t port, const char *host) {
  struct bsh_net_op *op = bsh_net_hold(c, sock);
  if (!op) {
    message_free(m);
    close(sock);
    return refuse(c, ENOMEM);
  }
  int fl = fcntl(sock, F_GETFL);
  op->blocking = !(m->flags & MSG_DONTWAIT) && fl >= 0 && !(fl & O_NONBLOCK);
  op->payload = m;
  op->release = release_message;
  op->perform = send_op;
  if (ask) bsh_net_ask(op, proto, BSH_NET_DATAGRAM, ip, port, host);
  else send_op(op);
  return BSH_ACT_HELD;
}

enum verdict { SEND, REFUSED, ASK, DNS };

struct where {
  int proto;
  struct bsh_ip ip;
  uint16_t port;
  struct bsh_net_decision d;
  enum bsh_action act; /* for REFUSED */
};

/* Where `m` goes, checked: SEND (its name made safe to use), REFUSED (w->act), ASK or DNS. */
static enum verdict check_name(const struct bsh_config *cfg, struct bsh_call *c, const struct sock_info *s, struct message *m,
                               struct where *w) {
  memset(w, 0, sizeof *w);
  w->proto = proto_of(s);
  bool inet = s->domain == AF_INET || s->domain == AF_INET6;
  if (inet && s->type == SOCK_STREAM && (m->flags & MSG_FASTOPEN)) {
    w->act = bsh_report(c, EOPNOTSUPP, "TCP Fast Open connects without a connect(2) to check; the sandbox refuses it");
    return REFUSED;
  }
  if (s->domain == AF_UNIX && m->name_len > 0) {
    struct sockaddr_un via;
    size_t via_len = 0;
    int rc = bsh_unix_address(cfg, c, &m->name, m->name_len, &via, &via_len, &m->pathfd, &w->act);
    if (rc < 0) return REFUSED;
    if (rc == 0) {
      memcpy(&m->name, &via, via_len);
      m->name_len = via_len;
    }
    return SEND;
  }
  if (inet && s->type == SOCK_STREAM) {
    m->name_len = 0; /* a stream socket goes to its peer, whatever the name says */
    return SEND;
  }
  sa_family_t given = AF_UNSPEC;
  if (m->name_len >= sizeof given) memcpy(&given, &m->name, sizeof given);
  if (!inet || given == AF_UNSPEC || !bsh_ip_from_sockaddr(&m->name, m->name_len, &w->ip, &w->port)) return SEND;
  bsh_net_decide(&w->ip, w->port, w->proto, &w->d);
  switch (w->d.verdict) {
  case BSH_NET_DNS: return DNS;
  case BSH_NET_ASK: return ASK;
  case BSH_NET_REFUSE:
    bsh_net_record(c, EACCES, w->proto, BSH_NET_DATAGRAM, &w->ip, w->port, w->d.host, w->d.why);
    w->act = refuse(c, EACCES);
    return REFUSED;
  case BSH_NET_ALLOW: break;
  }
  bsh_net_record(c, 0, w->proto, BSH_NET_DATAGRAM, &w->ip, w->port, w->d.host, w->d.why);
  return SEND;
}

/* Where `m` goes decides what happens to it; `sock` is ours to close or hand over. */
static enum bsh_action route(const struct bsh_config *cfg, struct bsh_call *c, int sock, struct message *m) {
  struct sock_info s;
  struct where w;
  if (!sock_info(sock, &s)) {
    message_free(m);
    close(sock);
    return refuse(c, ENOTSOCK);
  }
  enum verdict v = check_name(cfg, c, &s, m, &w);
  if (v == REFUSED) {
    message_free(m);
    close(sock);
    return w.act;
  }
  if (v == DNS) {
    enum bsh_action act = bsh_dns_send(c, sock, bsh_net_resolver(&w.ip, w.port), m->data, m->len, m->flags, &m->name, m->name_len);
    message_free(m);
    return act;
  }
  return hold_send(c, sock, m, v == ASK, w.proto, &w.ip, w.port, w.d.host);
}

static int read_name(struct bsh_call *c, uint64_t uname, uint64_t len, struct message *m) {
  if (uname == 0 || len == 0) return 0;
  if (len > sizeof m->name) return -EINVAL;
  if (bsh_mem_read(c->tid, uname, &m->name, (size_t)len) != 0) return -EFAULT;
  m->name_len = (size_t)len;
  return 0;
}

enum bsh_action bsh_dec_sendto(const struct bsh_config *cfg, struct bsh_call *c, const uint64_t *a) {
  int sock = bsh_net_dup(c, (int)a[0]);
  if (sock < 0) return refuse(c, sock == -EBADF ? EBADF : EACCES);
  struct message *m = message_new();
  struct sock_info s;
  int rc = !m ? -ENOMEM : !sock_info(sock, &s) ? -ENOTSOCK : 0;
  if (rc == 0) {
    m->flags = (int)a[3];
    m->nosignal = (m->flags & MSG_NOSIGNAL) != 0;
    rc = read_name(c, a[4], a[5], m);
  }
  if (rc == 0) {
    struct iovec one = {(void *)(uintptr_t)a[1], (size_t)a[2]};
    /* One iovec, as the kernel makes of sendto's buffer. */
    size_t total = one.iov_len > DATA_MAX ? DATA_MAX + (s.type != SOCK_STREAM) : one.iov_len;
    if (total > DATA_MAX) rc = -EMSGSIZE;
    else if ((m->data = malloc(total ? total : 1)) == NULL) rc = -ENOMEM;
    else if (bsh_mem_read(c->tid, a[1], m->data, total) != 0) rc = -EFAULT;
    else m->len = total;
  }
  if (rc != 0) {
    message_free(m);
    close(sock);
    return refuse(c, -rc);
  }
  return route(cfg, c, sock, m);
}

/* One struct msghdr of the command's, copied out: name, data, control. */
static int read_msghdr(struct bsh_call *c, uint64_t uhdr, int flags, bool stream, struct message *m) {
  struct msghdr h;
  if (bsh_mem_read(c->tid, uhdr, &h, sizeof h) != 0) return -EFAULT;
  m->flags = flags;
  m->nosignal = (flags & MSG_NOSIGNAL) != 0;
  int rc = read_name(c, (uint64_t)(uintptr_t)h.msg_name, h.msg_namelen, m);
  if (rc == 0) rc = read_iov(c->tid, (uint64_t)(uintptr_t)h.msg_iov, h.msg_iovlen, stream, m);
  if (rc == 0) rc = read_control(c, (uint64_t)(uintptr_t)h.msg_control, h.msg_controllen, m);
  return rc;
}

/* sendmmsg: each message's count goes back into its mmsghdr, as the kernel writes it. */
static int write_count(pid_t tid, uint64_t uvec, size_t index, unsigned count) {
  struct iovec local = {&count, sizeof count};
  struct iovec remote = {(void *)(uintptr_t)(uvec + index * sizeof(struct mmsghdr) + offsetof(struct mmsghdr, msg_len)), sizeof count};
  return process_vm_writev(tid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof count ? 0 : -EFAULT;
}

/*
 * The messages of a sendmmsg go out in order while each can be sent at once, and the
 * call returns how many went (the kernel's may return fewer than asked, and callers send
 * the rest again). A first message that must wait (a question, a full blocking socket)
 * waits as a sendmsg of its own, and then counts as one.
 */
static enum bsh_action many(const struct bsh_config *cfg, struct bsh_call *c, int sock, const uint64_t *a) {
  struct sock_info s;
  if (!sock_info(sock, &s)) {
    close(sock);
    return refuse(c, ENOTSOCK);
  }
  size_t vlen = a[2] > MMSG_MAX ? MMSG_MAX : (size_t)a[2];
  size_t done = 0;
  enum bsh_action first_act = BSH_ACT_DONE;
  for (; done < vlen; done++) {
    struct message *m = message_new();
    int rc = m ? read_msghdr(c, a[1] + done * sizeof(struct mmsghdr), (int)a[3], s.type == SOCK_STREAM, m) : -ENOMEM;
    struct where w;
    enum verdict v = rc == 0 ? check_name(cfg, c, &s, m, &w) : REFUSED;
    if (rc != 0) w.act = rc == -EPERM ? bsh_report(c, EPERM, "a source route would send the packet past the checked address") : refuse(c, -rc);
    long n = v == SEND ? send_now(sock, m) : 0;
    int fl = fcntl(sock, F_GETFL);
    bool blocking = !(m && (m->flags & MSG_DONTWAIT)) && fl >= 0 && !(fl & O_NONBLOCK);
    if (done == 0 && (v == ASK || v == DNS || (v == SEND && n == -EAGAIN && blocking))) {
      m->many_uvec = a[1];
      m->many = true;
      int copy = dup(sock);
      close(sock);
      if (copy < 0) {
        message_free(m);
        return refuse(c, errno);
      }
      if (v == DNS) {
        enum bsh_action act = bsh_dns_send(c, copy, bsh_net_resolver(&w.ip, w.port), m->data, m->len, m->flags, &m->name, m->name_len);
        message_free(m);
        return act;
      }
      return hold_send(c, copy, m, v == ASK, w.proto, &w.ip, w.port, w.d.host);
    }
    if (v == SEND && n >= 0) write_count(c->tid, a[1], done, (unsigned)n);
    if (done == 0 && v == REFUSED) first_act = w.act;
    else if (done == 0 && v == SEND && n < 0) first_act = refuse(c, (int)-n);
    message_free(m);
    if (v != SEND || n < 0) break;
  }
  close(sock);
  if (done == 0) return first_act == BSH_ACT_DONE ? refuse(c, EINVAL) : first_act;
  c->err = 0;
  c->count = (long)done;
  return BSH_ACT_COUNT;
}

enum bsh_action bsh_dec_sendmsg(const struct bsh_config *cfg, struct bsh_call *c, const uint64_t *a, bool is_many) {
  int sock = bsh_net_dup(c, (int)a[0]);
  if (sock < 0) return refuse(c, sock == -EBADF ? EBADF : EACCES);
  if (is_many) return many(cfg, c, sock, a);
  struct sock_info s;
  struct message *m = message_new();
  int rc = !m ? -ENOMEM : !sock_info(sock, &s) ? -ENOTSOCK : read_msghdr(c, a[1], (int)a[2], s.type == SOCK_STREAM, m);
  if (rc != 0) {
    message_free(m);
    close(sock);
    return rc == -EPERM ? bsh_report(c, EPERM, "a source route would send the packet past the checked address")
                        : refuse(c, -rc);
  }
  return route(cfg, c, sock, m);
}
