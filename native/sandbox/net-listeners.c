/*
 * A server the command started itself is reachable on loopback without a rule: the
 * port's listening socket (TCP) or bound socket (UDP) must be held by a process of the
 * sandbox, which is looked up when the connection is made. The kernel's socket tables
 * give the inode of whatever listens on the port; the sandbox's processes (the
 * supervisor's descendants) are searched for a descriptor of that inode. A port an
 * outside process listens on matches none of them, and is the policy's to decide.
 */
#include "sandbox.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_INODES 16
#define MAX_PIDS 4096

/* Inodes of the sockets bound to `port` in the given state, on a loopback or wildcard address. */
static size_t port_inodes(const char *table, uint16_t port, unsigned state, unsigned long *out, size_t n) {
  FILE *f = fopen(table, "re");
  if (!f) return n;
  char line[512];
  if (!fgets(line, sizeof line, f)) { /* the header */
    fclose(f);
    return n;
  }
  while (n < MAX_INODES && fgets(line, sizeof line, f)) {
    char local[64];
    unsigned lport, st;
    unsigned long inode;
    /* sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode */
    if (sscanf(line, " %*s %63[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*s %*s %lu", local, &lport, &st, &inode) != 4) continue;
    if (lport != port || st != state || inode == 0) continue;
    size_t len = strlen(local);
    bool any = strspn(local, "0") == len;
    /* 127.x in /proc's byte order ends in 7F; ::1 and ::ffff:127.x likewise have a fixed tail. */
    bool loop4 = len == 8 && strncasecmp(local + 6, "7F", 2) == 0;
    bool loop6 = len == 32 && (strcasecmp(local, "00000000000000000000000001000000") == 0 ||
                               (strncasecmp(local, "0000000000000000FFFF0000", 24) == 0 && strncasecmp(local + 30, "7F", 2) == 0));
    if (any || loop4 || loop6) out[n++] = inode;
  }
  fclose(f);
  return n;
}

static bool holds_inode(pid_t pid, const unsigned long *inodes, size_t n) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(dir);
  if (!d) return false;
  bool found = false;
  struct dirent *e;
  while (!found && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char link[320], target[64];
    snprintf(link, sizeof link, "%s/%s", dir, e->d_name);
    ssize_t len = readlink(link, target, sizeof target - 1);
    if (len <= 0) continue;
    target[len] = '\0';
    unsigned long inode;
    if (sscanf(target, "socket:[%lu]", &inode) != 1) continue;
    for (size_t i = 0; i < n && !found; i++) found = inodes[i] == inode;
  }
  closedir(d);
  return found;
}

/* Appends the children of every thread of `pid`. */
static size_t add_children(pid_t pid, pid_t *pids, size_t n) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  if (!d) return n;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[352];
    snprintf(path, sizeof path, "%s/%s/children", dir, e->d_name);
    FILE *f = fopen(path, "re");
    if (!f) continue;
    long child;
    while (n < MAX_PIDS && fscanf(f, "%ld", &child) == 1) pids[n++] = (pid_t)child;
    fclose(f);
  }
  closedir(d);
  return n;
}

bool bsh_own_listener(uint16_t port, int proto) {
  unsigned long inodes[MAX_INODES];
  size_t n = 0;
  bool tcp = proto == BSH_PROTO_TCP;
  /* TCP_LISTEN is 10; an unconnected UDP socket shows TCP_CLOSE, 7. */
  n = port_inodes(tcp ? "/proc/net/tcp" : "/proc/net/udp", port, tcp ? 10 : 7, inodes, n);
  n = port_inodes(tcp ? "/proc/net/tcp6" : "/proc/net/udp6", port, tcp ? 10 : 7, inodes, n);
  if (n == 0) return false;
  pid_t *pids = malloc(MAX_PIDS * sizeof *pids);
  if (!pids) return false;
  size_t count = add_children(getpid(), pids, 0);
  bool found = false;
  for (size_t i = 0; i < count && !found; i++) {
    found = holds_inode(pids[i], inodes, n);
    count = add_children(pids[i], pids, count);
  }
  free(pids);
  return found;
}
