/*
 * connect(2) on unix sockets. Landlock scopes abstract unix sockets but not pathname
 * ones, and a listening socket is a door out of the sandbox: a container engine's or
 * systemd's socket runs anything as root, another session's broker changes files under
 * its own policy. A command may connect to its own temp dir's sockets, to the sockets
 * it was given (`--unix-socket`: the session's broker, configured ones such as an ssh
 * agent), and to nothing else.
 *
 * The address is read once, here, and the supervisor connects the command's own socket
 * (a pidfd_getfd duplicate shares it) with that copy: letting the kernel re-read it
 * would let another thread swap the path after the check. The peer then sees the
 * supervisor's credentials (same user; it is the tool call's launcher). A socket of
 * another family is left to the kernel: its family is fixed, whatever the address says.
 */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

static bool allowed_socket(const struct bsh_config *cfg, const char *real) {
  for (size_t i = 0; i < cfg->n_unix_sockets; i++)
    if (strcmp(real, cfg->unix_sockets[i]) == 0) return true;
  return bsh_in_scratch(cfg, real);
}

static enum bsh_action answered(struct bsh_call *c, int err) {
  c->err = err;
  return err == 0 ? BSH_ACT_DONE : BSH_ACT_ERRNO;
}

/* connect(sock, addr) without blocking the supervisor: a full backlog gives EAGAIN, not a wait. */
static int connect_now(int sock, const struct sockaddr *addr, socklen_t len) {
  int flags = fcntl(sock, F_GETFL);
  if (flags < 0) return errno;
  if (!(flags & O_NONBLOCK) && fcntl(sock, F_SETFL, flags | O_NONBLOCK) != 0) return errno;
  int rc = connect(sock, addr, len) == 0 ? 0 : errno;
  if (!(flags & O_NONBLOCK)) fcntl(sock, F_SETFL, flags);
  return rc;
}

/* A pathname address: resolved here, checked, and reached through an fd so no name can be swapped. */
static enum bsh_action connect_path(const struct bsh_config *cfg, struct bsh_call *c, int sock,
                                    const struct sockaddr_un *sun, socklen_t len) {
  size_t n = len - offsetof(struct sockaddr_un, sun_path);
  char raw[sizeof sun->sun_path + 1];
  memcpy(raw, sun->sun_path, n);
  raw[n] = '\0';
  char base[BSH_PATH_MAX] = "/";
  bool slash;
  int rc = raw[0] == '/' ? 0 : bsh_proc_base_dir(c->tid, AT_FDCWD, base, sizeof base);
  if (rc == 0) rc = bsh_lexical_join(base, raw, c->path, sizeof c->path, &slash);
  /* The command's /proc/self, not ours: resolved below in this process. */
  if (rc == 0 && bsh_mentions_proc_self(c->path) && (rc = bsh_proc_status(c)) == 0)
    rc = bsh_rewrite_proc_self(c->path, sizeof c->path, c->tgid, c->tid);
  if (rc != 0) return answered(c, -rc);
  char real[PATH_MAX];
  if (!realpath(c->path, real)) return answered(c, errno == ENOENT ? ENOENT : ECONNREFUSED);
  if (!allowed_socket(cfg, real)) {
    if (!bsh_utf8_valid(c->path)) c->path[0] = '\0';
    return bsh_report(c, EACCES, "unix socket %s is outside the command's temp dir and the allowed sockets",
                      bsh_utf8_valid(real) ? real : "(not UTF-8)");
  }
  struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
  int fd = (int)syscall(__NR_openat2, AT_FDCWD, real, &how, sizeof how);
  if (fd < 0) return answered(c, errno == ELOOP ? ECONNREFUSED : errno);
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    close(fd);
    return answered(c, ECONNREFUSED);
  }
  struct sockaddr_un via = {.sun_family = AF_UNIX};
  int m = snprintf(via.sun_path, sizeof via.sun_path, "/proc/self/fd/%d", fd);
  rc = connect_now(sock, (const struct sockaddr *)&via, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)m + 1));
  close(fd);
  return answered(c, rc);
}

enum bsh_action bsh_dec_connect(const struct bsh_config *cfg, struct bsh_call *c, int fd, uint64_t uaddr,
                                uint64_t ulen) {
  int sock = bsh_proc_dup_fd(c, fd);
  if (sock < 0) return BSH_ACT_CONTINUE; /* not an fd: the kernel's EBADF, whatever the address */
  int domain = -1;
  socklen_t dlen = sizeof domain;
  if (getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &dlen) != 0 || domain != AF_UNIX) {
    close(sock);
    return BSH_ACT_CONTINUE;
  }
  struct sockaddr_un sun;
  memset(&sun, 0, sizeof sun);
  enum bsh_action act;
  if (ulen < sizeof sun.sun_family || ulen > sizeof sun) {
    act = answered(c, EINVAL);
  } else if (bsh_mem_read(c->tid, uaddr, &sun, (size_t)ulen) != 0) {
    act = answered(c, EFAULT);
  } else if (sun.sun_family == AF_UNIX && ulen > offsetof(struct sockaddr_un, sun_path) && sun.sun_path[0] == '\0') {
    /* Abstract: Landlock's scope applies only in the kernel, and the kernel would re-read the address. */
    act = bsh_report(c, EPERM, "abstract unix sockets are not reachable from the sandbox");
  } else if (sun.sun_family == AF_UNIX && ulen > offsetof(struct sockaddr_un, sun_path)) {
    act = connect_path(cfg, c, sock, &sun, (socklen_t)ulen);
  } else {
    /* No name (AF_UNSPEC dissolves a datagram association, a bare family is EINVAL): as the kernel says. */
    act = answered(c, connect_now(sock, (const struct sockaddr *)&sun, (socklen_t)ulen));
  }
  close(sock);
  return act;
}
