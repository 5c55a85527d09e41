/*
 * The child side: lock itself down, hand the seccomp listener to the supervisor,
 * wait for "go", exec the program. Order matters: no_new_privs first (Landlock and
 * seccomp need it without CAP_SYS_ADMIN), capabilities while we still may change
 * securebits, Landlock, then seccomp last so the setup syscalls are not notified.
 * Any failure is reported to the parent as text and the program is never executed.
 */
#include "sandbox.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <unistd.h>

static void send_all(int sock, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = send(sock, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    len -= (size_t)n;
  }
}

static void __attribute__((noreturn)) fail(int sock, const char *msg) {
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "E%s", msg);
  send_all(sock, buf, n > 0 && (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
  _exit(BSH_EXIT_SETUP);
}

/*
 * The listener's number, for the supervisor to take its own copy (pidfd_getfd): sendmsg
 * is notified by now, and nobody could answer it before the supervisor has the listener.
 */
static int send_fd(int sock, int fd) {
  char msg[1 + sizeof fd] = {'L'};
  memcpy(msg + 1, &fd, sizeof fd);
  ssize_t n;
  do n = send(sock, msg, sizeof msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == (ssize_t)sizeof msg ? 0 : -1;
}

void bsh_child_run(const struct bsh_config *cfg, int sock, pid_t parent, const void *sigmask) {
  char err[768];
  /* If the supervisor dies, nobody answers our notifications: die with it. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent)
    fail(sock, "the supervisor went away during setup");
  /* The broker channel belongs to the supervisor alone; the command must never reach it. */
  close(cfg->broker_fd);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    snprintf(err, sizeof err, "cannot set no_new_privs: %s", strerror(errno));
    fail(sock, err);
  }
  if (bsh_caps_drop_all(err, sizeof err) != 0) fail(sock, err);
  if (bsh_landlock_apply(cfg, err, sizeof err) != 0) fail(sock, err);
  int listener = bsh_seccomp_install(err, sizeof err);
  if (listener < 0) fail(sock, err);
  if (send_fd(sock, listener) != 0) _exit(BSH_EXIT_SETUP);
  char go = 0;
  ssize_t n;
  do n = read(sock, &go, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1 || go != 'G') _exit(BSH_EXIT_SETUP);
  close(listener);
  close(sock);
  /*
   * Only stdin, stdout and stderr go in. Any other fd this process inherited without
   * FD_CLOEXEC (from the caller's shell, or an embedding app's leaked descriptors) was
   * opened outside the sandbox, and writing through it would skip the broker.
   */
  if (syscall(__NR_close_range, 3, ~0U, 0) != 0) _exit(BSH_EXIT_SETUP);
  sigprocmask(SIG_SETMASK, (const sigset_t *)sigmask, NULL);
  execvp(cfg->argv[0], cfg->argv);
  int saved = errno;
  fprintf(stderr, "%s: cannot execute %s: %s\n", BSH_NAME, cfg->argv[0], strerror(saved));
  /* The shell's conventions: 127 not found, 126 found but not executable. */
  _exit(saved == ENOENT ? 127 : 126);
}
