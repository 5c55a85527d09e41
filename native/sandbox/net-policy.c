/*
 * The network table: what the supervisor decides about a connection without asking the
 * broker. The broker compiles the session's `network` configuration into text lines
 * (PROTOCOL.md, "Network table") and sends a whole table before the command starts and
 * again whenever it changes; a table replaces the previous one at its `end` line, so a
 * decision never sees half of one. Addresses the DNS proxy learned for allowed names
 * are kept across tables, each until its TTL runs out.
 *
 * The order of a decision is the order of trust: the mode, the resolvers (whose traffic
 * goes to the DNS proxy), deny rules, the guarded ranges (link-local and metadata
 * addresses, reached only through an allow rule inside them, never through a broad one
 * or a host name that resolves there), allow rules, the addresses of allowed hosts, the
 * command's own loopback listeners; whatever is left is the broker's question.
 */
#include "sandbox.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

enum mode { MODE_NONE, MODE_OPEN, MODE_ALLOWLIST, MODE_OFF };

struct cidr {
  struct bsh_ip net;
  uint8_t prefix; /* in IPv6 bits: an IPv4 /n is 96 + n */
  uint16_t lo, hi;
};
struct name_rule {
  char pattern[BSH_HOST_MAX]; /* lower case, no trailing dot; "*.x" matches below x */
  uint16_t lo, hi;
};
struct learned {
  struct bsh_ip ip;
  uint16_t lo, hi;
  time_t expires; /* 0: until the next table */
  char name[BSH_HOST_MAX];
};
struct resolver {
  struct bsh_ip ip;
  uint16_t port;
};

#define LIST(name, T) \
  struct name {         \
    T *v;               \
    size_t n, cap;      \
  }
LIST(cidrs, struct cidr);
LIST(names, struct name_rule);
LIST(learned_list, struct learned);
LIST(resolvers, struct resolver);

struct table {
  enum mode mode;
  struct cidrs allow, deny, guard;
  struct names allow_names, deny_names;
  struct learned_list addrs;
  struct resolvers resolvers;
};

static struct table g_table, g_next;
static bool g_building;
/* What the DNS proxy learned; kept across tables. */
static struct learned_list g_learned;

/* Appends `item` to a growable list. 0 or -ENOMEM. */
static int push(void **v, size_t *n, size_t *cap, size_t size, const void *item) {
  if (*n == *cap) {
    size_t grown = *cap ? *cap * 2 : 16;
    void *p = realloc(*v, grown * size);
    if (!p) return -ENOMEM;
    *v = p;
    *cap = grown;
  }
  memcpy((uint8_t *)*v + *n * size, item, size);
  (*n)++;
  return 0;
}
#define PUSH(list, item) push((void **)&(list)->v, &(list)->n, &(list)->cap, sizeof *(list)->v, &(item))

static void table_free(struct table *t) {
  free(t->allow.v);
  free(t->deny.v);
  free(t->guard.v);
  free(t->allow_names.v);
  free(t->deny_names.v);
  free(t->addrs.v);
  free(t->resolvers.v);
  memset(t, 0, sizeof *t);
}

bool bsh_net_policy_on(void) { return g_table.mode != MODE_NONE && g_table.mode != MODE_OPEN; }

bool bsh_ip_is_v4(const struct bsh_ip *ip) {
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(ip->b, mapped, sizeof mapped) == 0;
}

bool bsh_ip_is_loopback(const struct bsh_ip *ip) {
  static const uint8_t any6[16] = {0}, one6[16] = {[15] = 1};
  /* 0.0.0.0 and :: reach this machine too, as its loopback does. */
  if (bsh_ip_is_v4(ip)) return ip->b[12] == 127 || (ip->b[12] | ip->b[13] | ip->b[14] | ip->b[15]) == 0;
  return memcmp(ip->b, one6, 16) == 0 || memcmp(ip->b, any6, 16) == 0;
}

bool bsh_ip_from_sockaddr(const void *sa, size_t len, struct bsh_ip *ip, uint16_t *port) {
  sa_family_t family;
  if (len < sizeof family) return false;
  memcpy(&family, sa, sizeof family);
  memset(ip, 0, sizeof *ip);
  if (family == AF_INET && len >= sizeof(struct sockaddr_in)) {
    struct sockaddr_in in;
    memcpy(&in, sa, sizeof in);
    ip->b[10] = ip->b[11] = 0xff;
    memcpy(ip->b + 12, &in.sin_addr, 4);
    *port = ntohs(in.sin_port);
    return true;
  }
  if (family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 in6;
    memcpy(&in6, sa, sizeof in6);
    memcpy(ip->b, &in6.sin6_addr, 16);
    *port = ntohs(in6.sin6_port);
    return true;
  }
  return false;
}

size_t bsh_ip_to_sockaddr(const struct bsh_ip *ip, uint16_t port, int family, void *out) {
  if (family == AF_INET) {
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(port)};
    memcpy(&in.sin_addr, ip->b + 12, 4);
    memcpy(out, &in, sizeof in);
    return sizeof in;
  }
  struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
  memcpy(&in6.sin6_addr, ip->b, 16);
  memcpy(out, &in6, sizeof in6);
  return sizeof in6;
}

void bsh_ip_format(const struct bsh_ip *ip, char *out, size_t cap) {
  if (!inet_ntop(bsh_ip_is_v4(ip) ? AF_INET : AF_INET6, bsh_ip_is_v4(ip) ? ip->b + 12 : ip->b, out, (socklen_t)cap))
    snprintf(out, cap, "?");
}

const char *bsh_net_proto_name(int proto) {
  switch (proto) {
  case BSH_PROTO_TCP: return "tcp";
  case BSH_PROTO_UDP: return "udp";
  case BSH_PROTO_ICMP: return "icmp";
  default: return "other";
  }
}

static bool parse_ip(const char *text, struct bsh_ip *ip) {
  memset(ip, 0, sizeof *ip);
  struct in_addr v4;
  if (inet_pton(AF_INET, text, &v4) == 1) {
    ip->b[10] = ip->b[11] = 0xff;
    memcpy(ip->b + 12, &v4, 4);
    return true;
  }
  return inet_pton(AF_INET6, text, ip->b) == 1;
}

/* "ADDR/PREFIX" (the prefix as written for the address's family). */
static bool parse_cidr(const char *text, struct cidr *out) {
  char buf[80];
  const char *slash = strchr(text, '/');
  if (!slash || (size_t)(slash - text) >= sizeof buf) return false;
  memcpy(buf, text, (size_t)(slash - text));
  buf[slash - text] = '\0';
  if (!parse_ip(buf, &out->net)) return false;
  char *end;
  long prefix = strtol(slash + 1, &end, 10);
  bool v4 = bsh_ip_is_v4(&out->net) && strchr(buf, ':') == NULL;
  if (*end || prefix < 0 || prefix > (v4 ? 32 : 128)) return false;
  out->prefix = (uint8_t)(v4 ? 96 + prefix : prefix);
  return true;
}

static bool parse_ports(const char *text, uint16_t *lo, uint16_t *hi) {
  char *end;
  long a = strtol(text, &end, 10);
  if (end == text || *end != '-' || a < 0 || a > 65535) return false;
  const char *rest = end + 1;
  long b = strtol(rest, &end, 10);
  if (end == rest || *end || b < a || b > 65535) return false;
  *lo = (uint16_t)a;
  *hi = (uint16_t)b;
  return true;
}

static bool in_cidr(const struct bsh_ip *ip, const struct bsh_ip *net, uint8_t prefix) {
  size_t whole = prefix / 8;
  if (memcmp(ip->b, net->b, whole) != 0) return false;
  if (prefix % 8 == 0) return true;
  uint8_t mask = (uint8_t)(0xff << (8 - prefix % 8));
  return (ip->b[whole] & mask) == (net->b[whole] & mask);
}

static bool ports_match(uint16_t port, uint16_t lo, uint16_t hi) { return port >= lo && port <= hi; }

/* One line of a table being built. */
static int table_line(struct table *t, char *line) {
  char *save = NULL, *kind = strtok_r(line, " ", &save);
  if (!kind) return 0;
  char *a = strtok_r(NULL, " ", &save), *b = strtok_r(NULL, " ", &save), *c = strtok_r(NULL, " ", &save);
  char *d = strtok_r(NULL, " ", &save);
  if (strcmp(kind, "mode") == 0 && a) {
    t->mode = strcmp(a, "open") == 0 ? MODE_OPEN : strcmp(a, "allowlist") == 0 ? MODE_ALLOWLIST
              : strcmp(a, "off") == 0 ? MODE_OFF : MODE_NONE;
    return t->mode == MODE_NONE ? -EPROTO : 0;
  }
  if ((strcmp(kind, "allow") == 0 || strcmp(kind, "deny") == 0 || strcmp(kind, "guard") == 0) && a && b) {
    struct cidr rule;
    if (!parse_cidr(a, &rule) || !parse_ports(b, &rule.lo, &rule.hi)) return -EPROTO;
    return PUSH(kind[0] == 'a' ? &t->allow : kind[0] == 'd' ? &t->deny : &t->guard, rule);
  }
  if ((strcmp(kind, "allow-name") == 0 || strcmp(kind, "deny-name") == 0) && a && b) {
    struct name_rule rule;
    if (strlen(a) >= sizeof rule.pattern || !parse_ports(b, &rule.lo, &rule.hi)) return -EPROTO;
    snprintf(rule.pattern, sizeof rule.pattern, "%s", a);
    return PUSH(kind[0] == 'a' ? &t->allow_names : &t->deny_names, rule);
  }
  if (strcmp(kind, "addr") == 0 && a && b && c && d) {
    /* addr IP PORTS SECONDS NAME: an allowed host's address the broker resolved. */
    struct learned entry = {0};
    char *end;
    long ttl = strtol(c, &end, 10);
    if (!parse_ip(a, &entry.ip) || !parse_ports(b, &entry.lo, &entry.hi) || *end || ttl < 0 ||
        strlen(d) >= sizeof entry.name)
      return -EPROTO;
    entry.expires = ttl == 0 ? 0 : time(NULL) + ttl;
    snprintf(entry.name, sizeof entry.name, "%s", d);
    return PUSH(&t->addrs, entry);
  }
  if (strcmp(kind, "resolver") == 0 && a && b) {
    struct resolver r;
    char *end;
    long port = strtol(b, &end, 10);
    if (!parse_ip(a, &r.ip) || *end || port < 1 || port > 65535) return -EPROTO;
    r.port = (uint16_t)port;
    return PUSH(&t->resolvers, r);
  }
  return -EPROTO;
}

int bsh_net_table_chunk(const char *text, size_t len) {
  const char *p = text, *stop = text + len;
  while (p < stop) {
    const char *nl = memchr(p, '\n', (size_t)(stop - p));
    if (!nl) return -EPROTO; /* frames hold whole lines */
    char line[512];
    size_t n = (size_t)(nl - p);
    if (n >= sizeof line) return -EPROTO;
    memcpy(line, p, n);
    line[n] = '\0';
    p = nl + 1;
    if (strcmp(line, "begin") == 0) {
      table_free(&g_next);
      g_building = true;
      continue;
    }
    if (!g_building) return -EPROTO;
    if (strcmp(line, "end") == 0) {
      if (g_next.mode == MODE_NONE || p != stop) return -EPROTO;
      table_free(&g_table);
      g_table = g_next;
      memset(&g_next, 0, sizeof g_next);
      g_building = false;
      return 1;
    }
    if (table_line(&g_next, line) != 0) return -EPROTO;
  }
  return 0;
}

/* Case-insensitively: the name itself, or below the suffix of a "*." pattern. */
static bool name_matches(const char *name, const char *pattern) {
  if (strncmp(pattern, "*.", 2) != 0) return strcasecmp(name, pattern) == 0;
  size_t n = strlen(name), s = strlen(pattern + 1);
  return n > s && strcasecmp(name + n - s, pattern + 1) == 0;
}

enum bsh_net_name_verdict bsh_net_name(const char *name, char *why, size_t cap) {
  for (size_t i = 0; i < g_table.deny_names.n; i++)
    if (name_matches(name, g_table.deny_names.v[i].pattern)) {
      snprintf(why, cap, "network.deny names %s", g_table.deny_names.v[i].pattern);
      return BSH_NAME_DENY;
    }
  for (size_t i = 0; i < g_table.allow_names.n; i++)
    if (name_matches(name, g_table.allow_names.v[i].pattern)) {
      snprintf(why, cap, "network.allow names %s", g_table.allow_names.v[i].pattern);
      return BSH_NAME_ALLOW;
    }
  snprintf(why, cap, "%s is not in network.allow", name);
  return BSH_NAME_UNKNOWN;
}

/* The ports the allow rules give `name` (the union's bounds), or false when none allows it. */
static bool name_ports(const char *name, uint16_t *lo, uint16_t *hi) {
  bool any = false;
  for (size_t i = 0; i < g_table.allow_names.n; i++) {
    const struct name_rule *r = &g_table.allow_names.v[i];
    if (!name_matches(name, r->pattern)) continue;
    if (!any || r->lo < *lo) *lo = r->lo;
    if (!any || r->hi > *hi) *hi = r->hi;
    any = true;
  }
  return any;
}

/* Guarded, loopback, unspecified and multicast addresses never come from a name's DNS answer (rebinding). */
static bool learnable(const struct bsh_ip *ip) {
  if (bsh_ip_is_loopback(ip)) return false;
  if (bsh_ip_is_v4(ip) ? ip->b[12] >= 224 : ip->b[0] == 0xff) return false;
  for (size_t i = 0; i < g_table.guard.n; i++)
    if (in_cidr(ip, &g_table.guard.v[i].net, g_table.guard.v[i].prefix)) return false;
  return true;
}

void bsh_net_learn(const char *name, const struct bsh_ip *ip, uint32_t ttl) {
  struct learned entry = {.ip = *ip};
  if (!learnable(ip) || !name_ports(name, &entry.lo, &entry.hi)) return;
  /* At least a minute: a short TTL must not outlive the connect that follows the lookup. */
  time_t now = time(NULL);
  entry.expires = now + (ttl < 60 ? 60 : ttl > 86400 ? 86400 : ttl);
  snprintf(entry.name, sizeof entry.name, "%s", name);
  for (size_t i = 0; i < g_learned.n; i++) {
    struct learned *e = &g_learned.v[i];
    if (e->expires < now || (memcmp(&e->ip, ip, sizeof *ip) == 0 && strcasecmp(e->name, name) == 0)) {
      *e = entry;
      return;
    }
  }
  (void)PUSH(&g_learned, entry);
}

int bsh_net_resolver(const struct bsh_ip *ip, uint16_t port) {
  for (size_t i = 0; i < g_table.resolvers.n; i++)
    if (g_table.resolvers.v[i].port == port && memcmp(&g_table.resolvers.v[i].ip, ip, sizeof *ip) == 0)
      return (int)i;
  return -1;
}

const struct bsh_ip *bsh_net_resolver_ip(int index, uint16_t *port) {
  if (index < 0 || (size_t)index >= g_table.resolvers.n) return NULL;
  *port = g_table.resolvers.v[index].port;
  return &g_table.resolvers.v[index].ip;
}

static const struct learned *find_learned(const struct bsh_ip *ip, uint16_t port, const struct learned *v, size_t n) {
  time_t now = time(NULL);
  for (size_t i = 0; i < n; i++)
    if ((v[i].expires == 0 || v[i].expires >= now) && ports_match(port, v[i].lo, v[i].hi) &&
        memcmp(&v[i].ip, ip, sizeof *ip) == 0)
      return &v[i];
  return NULL;
}

static void set(struct bsh_net_decision *d, enum bsh_net_verdict v, const char *why) {
  d->verdict = v;
  snprintf(d->why, sizeof d->why, "%s", why);
}

void bsh_net_decide(const struct bsh_ip *ip, uint16_t port, int proto, struct bsh_net_decision *d) {
  memset(d, 0, sizeof *d);
  if (g_table.mode == MODE_NONE || g_table.mode == MODE_OPEN) return set(d, BSH_NET_ALLOW, "network.mode is open");
  if (g_table.mode == MODE_OFF) return set(d, BSH_NET_REFUSE, "network.mode is off");
  if (bsh_net_resolver(ip, port) >= 0) return set(d, BSH_NET_DNS, "a resolver of /etc/resolv.conf: its queries go through the supervisor");
  for (size_t i = 0; i < g_table.deny.n; i++) {
    const struct cidr *r = &g_table.deny.v[i];
    if (in_cidr(ip, &r->net, r->prefix) && ports_match(port, r->lo, r->hi)) return set(d, BSH_NET_REFUSE, "network.deny names it");
  }
  for (size_t i = 0; i < g_table.guard.n; i++) {
    const struct cidr *g = &g_table.guard.v[i];
    if (!in_cidr(ip, &g->net, g->prefix)) continue;
    for (size_t j = 0; j < g_table.allow.n; j++) {
      const struct cidr *r = &g_table.allow.v[j];
      if (r->prefix >= g->prefix && in_cidr(&r->net, &g->net, g->prefix) && in_cidr(ip, &r->net, r->prefix) &&
          ports_match(port, r->lo, r->hi))
        return set(d, BSH_NET_ALLOW, "network.allow names it");
    }
    return set(d, BSH_NET_REFUSE, "link-local and metadata addresses are refused unless network.allow names them");
  }
  for (size_t i = 0; i < g_table.allow.n; i++) {
    const struct cidr *r = &g_table.allow.v[i];
    if (in_cidr(ip, &r->net, r->prefix) && ports_match(port, r->lo, r->hi)) return set(d, BSH_NET_ALLOW, "network.allow names it");
  }
  const struct learned *hit = find_learned(ip, port, g_table.addrs.v, g_table.addrs.n);
  if (!hit) hit = find_learned(ip, port, g_learned.v, g_learned.n);
  if (hit) {
    snprintf(d->host, sizeof d->host, "%s", hit->name);
    return set(d, BSH_NET_ALLOW, "an address of a host network.allow names");
  }
  if (bsh_ip_is_loopback(ip) && bsh_own_listener(port, proto)) return set(d, BSH_NET_ALLOW, "a process of this command listens there");
  set(d, BSH_NET_ASK, "not in network.allow");
}
