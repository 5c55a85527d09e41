/*
 * The DNS proxy. A command's socket connected to a resolver (an address of
 * /etc/resolv.conf) is connected to this proxy instead, on loopback, UDP or TCP alike:
 * whatever the command writes there reaches only the supervisor. Each query is read,
 * its one question checked against the table's names, and only an allowed name is asked
 * of the real resolver, written afresh (net-dns.c), from the supervisor's own socket; a
 * refused name is answered REFUSED at once; a name the table does not know is the
 * broker's question, and the query waits for its answer (glibc's resolver, over TCP,
 * waits as long as it takes). The addresses an answer gives an allowed name are learned
 * (net-policy.c), so the connection that follows is allowed without a question.
 *
 * Only sockets the supervisor connected here are served: a datagram or connection from
 * any other local address is dropped.
 */
#include "sandbox.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define MSG_MAX 4096
#define UPSTREAM_MS 5000
#define RCODE_SERVFAIL 2
#define RCODE_REFUSED 5
#define MAX_CLIENTS 4096
/* Queries waiting for the resolver or the broker at once; past it a query is answered SERVFAIL (each holds a socket). */
#define MAX_QUERIES 256

struct client {
  int proto;
  uint8_t addr[sizeof(struct sockaddr_in6)];
  socklen_t addr_len;
  int resolver;
  pid_t tid, tgid;
  int conn; /* TCP: the accepted connection, or -1 */
  uint8_t in[2 + MSG_MAX];
  size_t in_len;
};

struct query {
  struct client *client;
  struct bsh_dns_question q;
  int upstream; /* connected to the resolver, or -1 while the broker is asked */
  uint16_t upstream_id;
  uint32_t ask_id;
  struct timespec deadline;
};

static int g_udp[2] = {-1, -1}, g_tcp[2] = {-1, -1};
static uint8_t g_udp_addr[2][sizeof(struct sockaddr_in6)], g_tcp_addr[2][sizeof(struct sockaddr_in6)];
static socklen_t g_addr_len[2];
static struct client **g_clients;
static size_t g_n_clients, g_cap_clients;
static struct query **g_queries;
static size_t g_n_queries, g_cap_queries;

static int open_endpoint(int family, int type, uint8_t *addr_out) {
  int fd = socket(family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  struct bsh_ip loop = {{0}};
  if (family == AF_INET) {
    loop.b[10] = loop.b[11] = 0xff;
    loop.b[12] = 127;
    loop.b[15] = 1;
  } else {
    loop.b[15] = 1;
  }
  uint8_t sa[sizeof(struct sockaddr_in6)];
  size_t len = bsh_ip_to_sockaddr(&loop, 0, family, sa);
  socklen_t got = sizeof(struct sockaddr_in6);
  if (bind(fd, (struct sockaddr *)sa, (socklen_t)len) != 0 || (type == SOCK_STREAM && listen(fd, 64) != 0) ||
      getsockname(fd, (struct sockaddr *)addr_out, &got) != 0) {
    int err = errno;
    close(fd);
    return -err;
  }
  return fd;
}

int bsh_dns_proxy_open(char *err, size_t errlen) {
  const int families[2] = {AF_INET, AF_INET6};
  for (int i = 0; i < 2; i++) {
    g_udp[i] = open_endpoint(families[i], SOCK_DGRAM, g_udp_addr[i]);
    g_tcp[i] = open_endpoint(families[i], SOCK_STREAM, g_tcp_addr[i]);
    g_addr_len[i] = families[i] == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  }
  /* IPv6 may be missing; IPv4's loopback must be there. */
  if (g_udp[0] < 0 || g_tcp[0] < 0) {
    snprintf(err, errlen, "the DNS proxy cannot listen on 127.0.0.1: %s", strerror(-(g_udp[0] < 0 ? g_udp[0] : g_tcp[0])));
    return -1;
  }
  return 0;
}

int bsh_dns_proxy_address(int family, int proto, void *out, size_t *len) {
  int i = family == AF_INET6 ? 1 : 0;
  int fd = proto == BSH_PROTO_TCP ? g_tcp[i] : g_udp[i];
  if (fd < 0) return -ECONNREFUSED;
  memcpy(out, proto == BSH_PROTO_TCP ? g_tcp_addr[i] : g_udp_addr[i], g_addr_len[i]);
  *len = g_addr_len[i];
  return 0;
}

static bool same_addr(const struct client *c, int proto, const void *addr, socklen_t len) {
  return c->proto == proto && c->addr_len == len && memcmp(c->addr, addr, len) == 0;
}

static struct client *find_client(int proto, const void *addr, socklen_t len) {
  for (size_t i = 0; i < g_n_clients; i++)
    if (same_addr(g_clients[i], proto, addr, len)) return g_clients[i];
  return NULL;
}

static void forget_client(struct client *c) {
  for (size_t i = 0; i < g_n_queries; i++)
    if (g_queries[i]->client == c) g_queries[i]->client = NULL;
  for (size_t i = 0; i < g_n_clients; i++)
    if (g_clients[i] == c) {
      g_clients[i] = g_clients[--g_n_clients];
      break;
    }
  if (c->conn >= 0) close(c->conn);
  free(c);
}

void bsh_dns_proxy_client(int sock, int proto, int resolver, pid_t tid, pid_t tgid) {
  struct client *c = calloc(1, sizeof *c);
  if (!c) return;
  c->proto = proto;
  c->addr_len = sizeof c->addr;
  c->resolver = resolver;
  c->tid = tid;
  c->tgid = tgid;
  c->conn = -1;
  if (getsockname(sock, (struct sockaddr *)c->addr, &c->addr_len) != 0) {
    free(c);
    return;
  }
  /* A socket connected again under the same address takes the old one's place; the oldest go past the bound. */
  struct client *old = find_client(proto, c->addr, c->addr_len);
  if (old) forget_client(old);
  if (g_n_clients >= MAX_CLIENTS) forget_client(g_clients[0]);
  if (g_n_clients == g_cap_clients) {
    size_t n = g_cap_clients ? g_cap_clients * 2 : 16;
    struct client **p = realloc(g_clients, n * sizeof *p);
    if (!p) {
      free(c);
      return;
    }
    g_clients = p;
    g_cap_clients = n;
  }
  g_clients[g_n_clients++] = c;
}

static void reply(struct client *c, const uint8_t *msg, size_t len) {
  if (!c) return;
  if (c->proto == BSH_PROTO_UDP) {
    int i = c->addr_len == sizeof(struct sockaddr_in) ? 0 : 1;
    sendto(g_udp[i], msg, len, MSG_DONTWAIT, (const struct sockaddr *)c->addr, c->addr_len);
    return;
  }
  uint8_t framed[2 + MSG_MAX];
  if (len > MSG_MAX || c->conn < 0) return;
  framed[0] = (uint8_t)(len >> 8);
  framed[1] = (uint8_t)len;
  memcpy(framed + 2, msg, len);
  /* An answer the command does not read in time is its own loss, not a reason to wait. */
  if (send(c->conn, framed, len + 2, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)(len + 2)) forget_client(c);
}

static void reply_error(struct client *c, const struct bsh_dns_question *q, int rcode) {
  uint8_t out[MSG_MAX];
  size_t n = bsh_dns_build_error(q, rcode, out, sizeof out);
  if (n > 0) reply(c, out, n);
}

static void drop_query(size_t i) {
  struct query *q = g_queries[i];
  if (q->upstream >= 0) close(q->upstream);
  free(q);
  g_queries[i] = g_queries[--g_n_queries];
}

static void deadline_in(struct timespec *t, int ms) {
  clock_gettime(CLOCK_MONOTONIC, t);
  t->tv_sec += ms / 1000;
  t->tv_nsec += (long)(ms % 1000) * 1000000;
  if (t->tv_nsec >= 1000000000) {
    t->tv_sec++;
    t->tv_nsec -= 1000000000;
  }
}

/* Asks the real resolver; on failure the client gets SERVFAIL. */
static void forward(struct query *q) {
  uint16_t port;
  const struct bsh_ip *ip = bsh_net_resolver_ip(q->client ? q->client->resolver : -1, &port);
  uint8_t msg[MSG_MAX], sa[sizeof(struct sockaddr_in6)];
  if (!ip || getrandom(&q->upstream_id, sizeof q->upstream_id, 0) != sizeof q->upstream_id) return reply_error(q->client, &q->q, RCODE_SERVFAIL);
  size_t n = bsh_dns_build_query(&q->q, q->upstream_id, msg, sizeof msg);
  int family = bsh_ip_is_v4(ip) ? AF_INET : AF_INET6;
  size_t salen = bsh_ip_to_sockaddr(ip, port, family, sa);
  q->upstream = socket(family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (n == 0 || q->upstream < 0 || connect(q->upstream, (struct sockaddr *)sa, (socklen_t)salen) != 0 ||
      send(q->upstream, msg, n, 0) != (ssize_t)n) {
    if (q->upstream >= 0) close(q->upstream);
    q->upstream = -1;
    return reply_error(q->client, &q->q, RCODE_SERVFAIL);
  }
  deadline_in(&q->deadline, UPSTREAM_MS);
}

static void record_query(const struct client *c, int err, const char *name, const char *why) {
  struct bsh_call call = {.tid = c->tid, .tgid = c->tgid, .nr = -1};
  uint16_t port;
  const struct bsh_ip *ip = bsh_net_resolver_ip(c->resolver, &port);
  bsh_net_record(&call, err, c->proto, BSH_NET_DNS_QUERY, ip, ip ? port : 53, name, why);
}

static void on_query(struct client *c, const uint8_t *msg, size_t len) {
  struct query *q = calloc(1, sizeof *q);
  if (!q) return;
  q->client = c;
  q->upstream = -1;
  if (bsh_dns_parse_query(msg, len, &q->q) != 0) {
    record_query(c, EACCES, "", "not a query of one plain host name");
    free(q);
    return;
  }
  char why[160];
  enum bsh_net_name_verdict v = bsh_net_name(q->q.name, why, sizeof why);
  if (v == BSH_NAME_DENY) {
    record_query(c, EACCES, q->q.name, why);
    reply_error(c, &q->q, RCODE_REFUSED);
    free(q);
    return;
  }
  if (g_n_queries >= MAX_QUERIES) {
    reply_error(c, &q->q, RCODE_SERVFAIL);
    free(q);
    return;
  }
  if (g_n_queries == g_cap_queries) {
    size_t n = g_cap_queries ? g_cap_queries * 2 : 16;
    struct query **p = realloc(g_queries, n * sizeof *p);
    if (!p) {
      free(q);
      return;
    }
    g_queries = p;
    g_cap_queries = n;
  }
  g_queries[g_n_queries++] = q;
  if (v == BSH_NAME_ALLOW) {
    record_query(c, 0, q->q.name, why);
    return forward(q);
  }
  uint16_t port;
  q->ask_id = bsh_net_ask_name(c->tid, c->tgid, c->proto, bsh_net_resolver_ip(c->resolver, &port), q->q.name);
  if (q->ask_id == 0) reply_error(c, &q->q, RCODE_REFUSED);
}

bool bsh_dns_proxy_on_answer(uint32_t id, int err) {
  for (size_t i = 0; i < g_n_queries; i++) {
    struct query *q = g_queries[i];
    if (q->ask_id != id) continue;
    q->ask_id = 0;
    if (err == 0 && q->client) {
      forward(q);
      if (q->upstream >= 0) return true;
    } else {
      reply_error(q->client, &q->q, RCODE_REFUSED);
    }
    drop_query(i);
    return true;
  }
  return false;
}

static void learn(const struct bsh_ip *ip, uint32_t ttl, void *arg) { bsh_net_learn(arg, ip, ttl); }

static void on_upstream(size_t i) {
  struct query *q = g_queries[i];
  uint8_t msg[MSG_MAX];
  ssize_t n = recv(q->upstream, msg, sizeof msg, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n >= 12 && (uint16_t)(msg[0] << 8 | msg[1]) == q->upstream_id) {
    bsh_dns_answers(msg, (size_t)n, learn, q->q.name);
    msg[0] = (uint8_t)(q->q.id >> 8);
    msg[1] = (uint8_t)q->q.id;
    reply(q->client, msg, (size_t)n);
  } else if (n >= 0 && n < 12) {
    reply_error(q->client, &q->q, RCODE_SERVFAIL);
  } else if (n >= 12) {
    return; /* not this query's answer: wait for it */
  } else {
    reply_error(q->client, &q->q, RCODE_SERVFAIL);
  }
  drop_query(i);
}

static void on_udp(int fd) {
  for (int round = 0; round < 64; round++) {
    uint8_t msg[MSG_MAX], from[sizeof(struct sockaddr_in6)];
    socklen_t flen = sizeof from;
    ssize_t n = recvfrom(fd, msg, sizeof msg, MSG_DONTWAIT, (struct sockaddr *)from, &flen);
    if (n < 0) return;
    struct client *c = find_client(BSH_PROTO_UDP, from, flen);
    if (c) on_query(c, msg, (size_t)n);
  }
}

static void on_accept(int fd) {
  for (;;) {
    uint8_t from[sizeof(struct sockaddr_in6)];
    socklen_t flen = sizeof from;
    int conn = accept4(fd, (struct sockaddr *)from, &flen, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) return;
    struct client *c = find_client(BSH_PROTO_TCP, from, flen);
    if (!c || c->conn >= 0) {
      close(conn);
      continue;
    }
    c->conn = conn;
  }
}

static void on_conn(struct client *c) {
  ssize_t n = recv(c->conn, c->in + c->in_len, sizeof c->in - c->in_len, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) return forget_client(c);
  c->in_len += (size_t)n;
  while (c->in_len >= 2) {
    size_t len = (size_t)(c->in[0] << 8 | c->in[1]);
    if (len > MSG_MAX) return forget_client(c);
    if (c->in_len < 2 + len) return;
    on_query(c, c->in + 2, len);
    memmove(c->in, c->in + 2 + len, c->in_len - 2 - len);
    c->in_len -= 2 + len;
  }
}

size_t bsh_dns_proxy_poll_fds(struct pollfd *out, size_t cap) {
  size_t n = 0;
  for (int i = 0; i < 2; i++) {
    if (g_udp[i] >= 0 && n < cap) out[n++] = (struct pollfd){g_udp[i], POLLIN, 0};
    if (g_tcp[i] >= 0 && n < cap) out[n++] = (struct pollfd){g_tcp[i], POLLIN, 0};
  }
  for (size_t i = 0; i < g_n_clients && n < cap; i++)
    if (g_clients[i]->conn >= 0) out[n++] = (struct pollfd){g_clients[i]->conn, POLLIN, 0};
  for (size_t i = 0; i < g_n_queries && n < cap; i++)
    if (g_queries[i]->upstream >= 0) out[n++] = (struct pollfd){g_queries[i]->upstream, POLLIN, 0};
  return n;
}

int bsh_dns_proxy_timeout_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  long best = -1;
  for (size_t i = 0; i < g_n_queries; i++) {
    if (g_queries[i]->upstream < 0) continue;
    long ms = (g_queries[i]->deadline.tv_sec - now.tv_sec) * 1000 + (g_queries[i]->deadline.tv_nsec - now.tv_nsec) / 1000000;
    if (ms < 0) ms = 0;
    if (best < 0 || ms < best) best = ms;
  }
  return (int)best;
}

void bsh_dns_proxy_on_poll(const struct pollfd *fds, size_t n) {
  for (size_t k = 0; k < n; k++) {
    if (!fds[k].revents) continue;
    int fd = fds[k].fd;
    if (fd == g_udp[0] || fd == g_udp[1]) on_udp(fd);
    else if (fd == g_tcp[0] || fd == g_tcp[1]) on_accept(fd);
    for (size_t i = 0; i < g_n_clients; i++)
      if (g_clients[i]->conn == fd) {
        on_conn(g_clients[i]);
        break;
      }
    for (size_t i = 0; i < g_n_queries; i++)
      if (g_queries[i]->upstream == fd) {
        on_upstream(i);
        break;
      }
  }
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  for (size_t i = 0; i < g_n_queries;) {
    struct query *q = g_queries[i];
    bool late = q->upstream >= 0 && (now.tv_sec > q->deadline.tv_sec ||
                                     (now.tv_sec == q->deadline.tv_sec && now.tv_nsec >= q->deadline.tv_nsec));
    if (!late && q->client && (q->upstream >= 0 || q->ask_id != 0)) {
      i++;
      continue;
    }
    if (late && q->client) reply_error(q->client, &q->q, RCODE_SERVFAIL);
    drop_query(i);
  }
}

/* A query the command sends itself to a resolver from an unconnected socket: the answer comes straight back to it. */
static void send_checked(struct bsh_net_op *op) {
  const struct bsh_dns_question *q = op->payload;
  uint8_t msg[MSG_MAX];
  size_t n = bsh_dns_build_query(q, q->id, msg, sizeof msg);
  ssize_t sent = n == 0 ? -1 : sendto(op->sock, msg, n, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)op->addr, (socklen_t)op->addr_len);
  /* The command asked to send its own bytes: it learns it sent all of them. */
  bsh_net_finish(op, sent < 0 ? -(long)(n == 0 ? EINVAL : errno) : op->count);
}

static void free_payload(struct bsh_net_op *op) { free(op->payload); }

enum bsh_action bsh_dns_send(struct bsh_call *c, int sock, int resolver, const uint8_t *msg, size_t len, int flags,
                             const void *addr, size_t addrlen) {
  (void)flags;
  struct bsh_dns_question *q = malloc(sizeof *q);
  uint16_t port;
  const struct bsh_ip *ip = bsh_net_resolver_ip(resolver, &port);
  if (!q || bsh_dns_parse_query(msg, len, q) != 0) {
    bsh_net_record(c, EACCES, BSH_PROTO_UDP, BSH_NET_DNS_QUERY, ip, port, "", "not a query of one plain host name");
    free(q);
    close(sock);
    c->err = EACCES;
    return BSH_ACT_ERRNO;
  }
  char why[160];
  enum bsh_net_name_verdict v = bsh_net_name(q->name, why, sizeof why);
  if (v == BSH_NAME_DENY) {
    bsh_net_record(c, EACCES, BSH_PROTO_UDP, BSH_NET_DNS_QUERY, ip, port, q->name, why);
    free(q);
    close(sock);
    c->err = EACCES;
    return BSH_ACT_ERRNO;
  }
  struct bsh_net_op *op = bsh_net_hold(c, sock);
  if (!op) {
    free(q);
    close(sock);
    c->err = ENOMEM;
    return BSH_ACT_ERRNO;
  }
  op->payload = q;
  op->release = free_payload;
  op->perform = send_checked;
  op->count = (long)len;
  memcpy(op->addr, addr, addrlen);
  op->addr_len = addrlen;
  if (v == BSH_NAME_ALLOW) {
    bsh_net_record(c, 0, BSH_PROTO_UDP, BSH_NET_DNS_QUERY, ip, port, q->name, why);
    send_checked(op);
  } else {
    bsh_net_ask(op, BSH_PROTO_UDP, BSH_NET_DNS_QUERY, ip, port, q->name);
  }
  return BSH_ACT_HELD;
}
