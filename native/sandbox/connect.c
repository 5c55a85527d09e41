/*
 * connect(2), performed by the supervisor on its own duplicate of the command's socket
 * (pidfd_getfd) with the address it read once: letting the kernel re-read it, or run
 * the call on whatever the fd number names by then, would let another thread swap the
 * address or the socket after the check. Every family goes this way.
 *
 * Unix sockets: Landlock scopes abstract unix sockets but not pathname ones, and a
 * listening socket is a door out of the sandbox: a container engine's or systemd's
 * socket runs anything as root, another session's broker changes files under its own
 * policy. A command may connect to its own temp dir's sockets, to the sockets it was
 * given (`--unix-socket`: the session's broker, configured ones such as an ssh agent),
 * and to nothing else. The peer then sees the supervisor's credentials (same user; it
 * is the tool call's launcher).
 *
 * Internet sockets follow the network table (net-policy.c): allowed, refused, sent to
 * the DNS proxy (a resolver's address), or asked of the broker while the call waits. A
 * blocking socket's connect in progress is waited for by the loop, not here.
 */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

bool bsh_unix_socket_allowed(const struct bsh_config *cfg, const char *real) {
  for (size_t i = 0; i < cfg->n_unix_sockets; i++)
    if (strcmp(real, cfg->unix_sockets[i]) == 0) return true;
  return bsh_in_scratch(cfg, real);
}

static enum bsh_action answered(struct bsh_call *c, int err) {
  c->err = err;
  return err == 0 ? BSH_ACT_DONE : BSH_ACT_ERRNO;
}

/* connect(sock, addr) without blocking the supervisor: a full backlog gives EAGAIN, not a wait. */
static int connect_now(int sock, const void *addr, socklen_t len) {
  int flags = fcntl(sock, F_GETFL);
  if (flags < 0) return errno;
  if (!(flags & O_NONBLOCK) && fcntl(sock, F_SETFL, flags | O_NONBLOCK) != 0) return errno;
  int rc = connect(sock, addr, len) == 0 ? 0 : errno;
  if (!(flags & O_NONBLOCK)) fcntl(sock, F_SETFL, flags);
  return rc;
}

int bsh_unix_address(const struct bsh_config *cfg, struct bsh_call *c, const void *addr, size_t len, void *via_out,
                     size_t *via_len, int *pathfd, enum bsh_action *act) {
  struct sockaddr_un sun;
  *pathfd = -1;
  if (len > sizeof sun) {
    *act = answered(c, EINVAL);
    return -1;
  }
  memset(&sun, 0, sizeof sun);
  memcpy(&sun, addr, len);
  if (len <= offsetof(struct sockaddr_un, sun_path) || sun.sun_family != AF_UNIX) return 1; /* no name: as given */
  if (sun.sun_path[0] == '\0') {
    /* Abstract: Landlock's scope applies only in the kernel, and the kernel would re-read the address. */
    *act = bsh_report(c, EPERM, "abstract unix sockets are not reachable from the sandbox");
    return -1;
  }
  size_t n = len - offsetof(struct sockaddr_un, sun_path);
  char raw[sizeof sun.sun_path + 1];
  memcpy(raw, sun.sun_path, n);
  raw[n] = '\0';
  char base[BSH_PATH_MAX] = "/";
  bool slash;
  int rc = raw[0] == '/' ? 0 : bsh_proc_base_dir(c->tid, AT_FDCWD, base, sizeof base);
  if (rc == 0) rc = bsh_lexical_join(base, raw, c->path, sizeof c->path, &slash);
  /* The command's /proc/self, not ours: resolved below in this process. */
  if (rc == 0 && bsh_mentions_proc_self(c->path) && (rc = bsh_proc_status(c)) == 0)
    rc = bsh_rewrite_proc_self(c->path, sizeof c->path, c->tgid, c->tid);
  if (rc != 0) {
    *act = answered(c, -rc);
    return -1;
  }
  char real[PATH_MAX];
  if (!realpath(c->path, real)) {
    *act = answered(c, errno == ENOENT ? ENOENT : ECONNREFUSED);
    return -1;
  }
  if (!bsh_unix_socket_allowed(cfg, real)) {
    if (!bsh_utf8_valid(c->path)) c->path[0] = '\0';
    *act = bsh_report(c, EACCES, "unix socket %s is outside the command's temp dir and the allowed sockets",
                      bsh_utf8_valid(real) ? real : "(not UTF-8)");
    return -1;
  }
  struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
  int fd = (int)syscall(__NR_openat2, AT_FDCWD, real, &how, sizeof how);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    int err = fd < 0 && errno != ELOOP ? errno : ECONNREFUSED;
    if (fd >= 0) close(fd);
    *act = answered(c, err);
    return -1;
  }
  /* Reached through the fd, so no name can be swapped between the check and the call. */
  struct sockaddr_un via = {.sun_family = AF_UNIX};
  int m = snprintf(via.sun_path, sizeof via.sun_path, "/proc/self/fd/%d", fd);
  memcpy(via_out, &via, sizeof via);
  *via_len = offsetof(struct sockaddr_un, sun_path) + (size_t)m + 1;
  *pathfd = fd;
  return 0;
}

static enum bsh_action connect_unix(const struct bsh_config *cfg, struct bsh_call *c, int sock, const void *addr,
                                    size_t len) {
  struct sockaddr_un via;
  size_t via_len = 0;
  int pathfd;
  enum bsh_action act = BSH_ACT_ERRNO;
  int rc = bsh_unix_address(cfg, c, addr, len, &via, &via_len, &pathfd, &act);
  if (rc < 0) return act;
  /* No name (AF_UNSPEC dissolves a datagram association, a bare family is EINVAL): as the kernel says. */
  if (rc == 1) return answered(c, connect_now(sock, addr, (socklen_t)len));
  int err = connect_now(sock, &via, (socklen_t)via_len);
  close(pathfd);
  return answered(c, err);
}

static int proto_of(int type, int protocol) {
  if (type == SOCK_STREAM && (protocol == 0 || protocol == IPPROTO_TCP)) return BSH_PROTO_TCP;
  if (type == SOCK_DGRAM && (protocol == IPPROTO_ICMP || protocol == IPPROTO_ICMPV6)) return BSH_PROTO_ICMP;
  if (type == SOCK_DGRAM) return BSH_PROTO_UDP;
  return BSH_PROTO_OTHER;
}

static enum bsh_action connect_dns(struct bsh_call *c, int sock, int family, int proto, int resolver,
                                   const struct bsh_ip *ip, uint16_t port) {
  uint8_t proxy[sizeof(struct sockaddr_in6)];
  size_t len = 0;
  int rc = proto == BSH_PROTO_TCP || proto == BSH_PROTO_UDP ? bsh_dns_proxy_address(family, proto, proxy, &len) : -EACCES;
  if (rc != 0) {
    bsh_net_record(c, -rc, proto, BSH_NET_CONNECT, ip, port, "", "the DNS proxy cannot take this socket");
    return answered(c, -rc);
  }
  int err = connect_now(sock, proxy, (socklen_t)len);
  /* A TCP connect to the proxy's own listener on loopback completes as the loop accepts it. */
  if (err == EINPROGRESS) err = 0;
  if (err == 0) bsh_dns_proxy_client(sock, proto, resolver, c->tid, c->tgid);
  bsh_net_record(c, err, proto, BSH_NET_CONNECT, ip, port, "", "a resolver: its queries go through the supervisor");
  return answered(c, err);
}

static enum bsh_action connect_inet(struct bsh_call *c, int sock, int family, int type, int protocol, const void *addr,
                                    size_t len) {
  struct bsh_ip ip;
  uint16_t port;
  int proto = proto_of(type, protocol);
  sa_family_t given = AF_UNSPEC;
  if (len >= sizeof given) memcpy(&given, addr, sizeof given);
  /* AF_UNSPEC dissolves an association; anything unparsable is the kernel's to refuse. */
  if (given == AF_UNSPEC || !bsh_ip_from_sockaddr(addr, len, &ip, &port)) return answered(c, connect_now(sock, addr, (socklen_t)len));
  struct bsh_net_decision d;
  bsh_net_decide(&ip, port, proto, &d);
  if (d.verdict == BSH_NET_DNS) return connect_dns(c, sock, family, proto, bsh_net_resolver(&ip, port), &ip, port);
  if (d.verdict == BSH_NET_REFUSE) {
    bsh_net_record(c, EACCES, proto, BSH_NET_CONNECT, &ip, port, d.host, d.why);
    return answered(c, EACCES);
  }
  struct bsh_net_op *op = bsh_net_hold(c, sock);
  if (!op) return answered(c, ENOMEM);
  memcpy(op->addr, addr, len);
  op->addr_len = len;
  if (d.verdict == BSH_NET_ASK) {
    bsh_net_ask(op, proto, BSH_NET_CONNECT, &ip, port, d.host);
  } else {
    bsh_net_record(c, 0, proto, BSH_NET_CONNECT, &ip, port, d.host, d.why);
    bsh_net_connect_op(op);
  }
  return BSH_ACT_HELD;
}

enum bsh_action bsh_dec_connect(const struct bsh_config *cfg, struct bsh_call *c, int fd, uint64_t uaddr,
                                uint64_t ulen) {
  int sock = bsh_net_dup(c, fd);
  if (sock == -EBADF) return answered(c, EBADF);
  if (sock < 0) return answered(c, -sock == ESRCH ? ESRCH : EACCES);
  int domain = -1, type = -1, protocol = 0;
  socklen_t dlen = sizeof domain;
  if (getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &dlen) != 0) {
    close(sock);
    return answered(c, ENOTSOCK);
  }
  dlen = sizeof type;
  getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &dlen);
  /* A stream socket under a policy is TCP (socket(2) refuses the others); only a datagram's protocol tells UDP from ICMP. */
  dlen = sizeof protocol;
  if (type != SOCK_STREAM) getsockopt(sock, SOL_SOCKET, SO_PROTOCOL, &protocol, &dlen);
  struct sockaddr_storage addr;
  memset(&addr, 0, sizeof addr);
  enum bsh_action act;
  if (ulen > sizeof addr) {
    act = answered(c, EINVAL);
  } else if (bsh_mem_read(c->tid, uaddr, &addr, (size_t)ulen) != 0) {
    act = answered(c, EFAULT);
  } else if (domain == AF_UNIX) {
    act = connect_unix(cfg, c, sock, &addr, (size_t)ulen);
  } else if (domain == AF_INET || domain == AF_INET6) {
    act = connect_inet(c, sock, domain, type, protocol, &addr, (size_t)ulen);
    if (act == BSH_ACT_HELD) return act; /* the held op owns the socket */
  } else {
    /* Netlink and the like: a kernel endpoint, not a door out; still made on our copy. */
    act = answered(c, connect_now(sock, &addr, (socklen_t)ulen));
  }
  close(sock);
  return act;
}
