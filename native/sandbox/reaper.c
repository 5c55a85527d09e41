/*
 * The end of a run: every process the command started dies with it. The supervisor
 * is a child subreaper, so orphans of the command are re-parented to it; killing
 * only our direct children (whose pids cannot be reused before we reap them) and
 * repeating until none is left walks the whole tree one level per round without
 * ever signalling a pid that might belong to someone else.
 */
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static size_t read_children_file(const char *path, pid_t *out, size_t n, size_t cap) {
  FILE *f = fopen(path, "re");
  if (!f) return n;
  long pid;
  while (n < cap && fscanf(f, "%ld", &pid) == 1)
    if (pid > 0) out[n++] = (pid_t)pid;
  fclose(f);
  return n;
}

int bsh_list_children(pid_t *out, size_t cap) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -errno;
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[96];
    snprintf(path, sizeof path, "/proc/self/task/%ld/children", strtol(e->d_name, NULL, 10));
    n = read_children_file(path, out, n, cap);
  }
  closedir(d);
  return (int)n;
}

void bsh_kill_descendants(int listener) {
  enum { CAP = 4096 };
  pid_t *pids = malloc(CAP * sizeof *pids);
  if (!pids) abort();
  for (;;) {
    int n = bsh_list_children(pids, CAP);
    if (n <= 0) {
      /* Nothing listed: reap any zombie left and stop once the kernel says there is no child. */
      pid_t r = waitpid(-1, NULL, WNOHANG | __WALL);
      if (r > 0) continue;
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 || n < 0) break;
      /* r == 0: a child exists that the lists did not show (they race with exits); look again. */
      struct timespec pause = {0, 1000 * 1000};
      nanosleep(&pause, NULL);
      continue;
    }
    for (int i = 0; i < n; i++) kill(pids[i], SIGKILL);
    /* Targets blocked in a notification die on SIGKILL; newcomers are refused meanwhile. */
    if (listener >= 0) bsh_refuse_pending(listener);
    for (int i = 0; i < n; i++)
      while (waitpid(pids[i], NULL, __WALL) < 0 && errno == EINTR) {
      }
  }
  free(pids);
}
