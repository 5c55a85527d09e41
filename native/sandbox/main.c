/*
 * brokered-sandbox: runs one program under Landlock + seccomp user notification and
 * becomes its supervisor, asking a broker (over an inherited socket) before any
 * modification of the file system and performing allowed ones itself.
 *
 *   brokered-sandbox --broker-fd N [--scratch DIR]... [--write-dev PATH]... [--unix-socket PATH]...
 *                    [--deny-read PATH]... -- PROGRAM [ARGS...]
 *   brokered-sandbox --check          probe the kernel; "ok" and 0, or a message and 126
 *   brokered-sandbox --print-filter   the seccomp syscall tables as JSON
 *   brokered-sandbox --mode preload … the preload runtime instead (preload-mode.c)
 *
 *   --broker-fd N    the broker's stream socket (PROTOCOL.md); never reaches the program
 *   --scratch DIR    a directory the program may change freely (Landlock allows it)
 *   --write-dev PATH another device (or directory of devices) below /dev the program may write
 *   --deny-read PATH a file or folder the program may not read or execute (read-allow.c); a
 *                    path not there at start is skipped
 *   --network        connections follow the network table the broker sends first (PROTOCOL.md)
 *
 * Exit status: the program's (128+signal if killed); 125 when the broker channel is
 * lost (the command is killed); 126 when the sandbox cannot be set up (nothing ran);
 * 127 when the program cannot be found.
 */
#include "sandbox.h"
#include "preload-mode.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int setup_error(const char *fmt, const char *arg) {
  fprintf(stderr, "%s: ", BSH_NAME);
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  return BSH_EXIT_SETUP;
}

static void usage(void) {
  fprintf(stderr,
          "usage: %s --broker-fd N [--scratch DIR]... [--write-dev PATH]... [--unix-socket PATH]... [--deny-read PATH]... [--network] -- "
          "PROGRAM [ARGS...]\n"
          "       %s --check | --print-filter\n",
          BSH_NAME, BSH_NAME);
}

/* An absolute, lexically clean form of a path given on the command line. */
static char *absolute(const char *arg) {
  char cwd[BSH_PATH_MAX] = "/", out[BSH_PATH_MAX];
  bool slash;
  if (arg[0] != '/' && !getcwd(cwd, sizeof cwd)) return NULL;
  if (bsh_lexical_join(cwd, arg, out, sizeof out, &slash) != 0) return NULL;
  return strdup(out);
}

static int add_scratch(struct bsh_config *cfg, const char *arg) {
  if (cfg->n_scratch == BSH_MAX_LIST) return setup_error("too many --scratch dirs (%s)", arg);
  char *given = absolute(arg), *real = realpath(arg, NULL);
  struct stat st;
  if (!given || !real || stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
    return setup_error("--scratch %s is not an existing directory", arg);
  if (strcmp(real, "/") == 0) return setup_error("--scratch %s would make everything writable", arg);
  cfg->scratch[cfg->n_scratch] = given;
  cfg->scratch_real[cfg->n_scratch++] = real;
  return 0;
}

static int add_unix_socket(struct bsh_config *cfg, const char *arg) {
  if (cfg->n_unix_sockets == BSH_MAX_LIST) return setup_error("too many --unix-socket paths (%s)", arg);
  /* Compared with the real path of what a command names; one not made yet keeps its clean absolute form. */
  char *path = realpath(arg, NULL);
  if (!path) path = absolute(arg);
  if (!path || path[0] != '/') return setup_error("--unix-socket %s is not a usable path", arg);
  cfg->unix_sockets[cfg->n_unix_sockets++] = path;
  return 0;
}

static int add_write_dev(struct bsh_config *cfg, const char *arg) {
  if (cfg->n_write_dev == BSH_MAX_LIST) return setup_error("too many --write-dev paths (%s)", arg);
  char *given = absolute(arg);
  struct stat st;
  if (!given || stat(given, &st) != 0) return setup_error("--write-dev %s does not exist", arg);
  /* Devices only: a capability-less root still owns (and could write) every root-owned node. */
  if (!bsh_path_under(given, "/dev") || strcmp(given, "/dev") == 0 || bsh_has_dotdot(given) ||
      S_ISBLK(st.st_mode) || S_ISREG(st.st_mode))
    return setup_error("--write-dev %s must be a character device, FIFO or directory below /dev", arg);
  cfg->write_dev[cfg->n_write_dev++] = given;
  return 0;
}

static int check_broker_fd(int fd) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return -1;
  int fl = fcntl(fd, F_GETFD);
  return fl >= 0 && fcntl(fd, F_SETFD, fl | FD_CLOEXEC) == 0 ? 0 : -1;
}

/* The child's report: 'L' and the listener's fd number (we take our own copy), or 'E' and a message. */
static int receive_listener(int sock, pid_t child, char *err, size_t errlen) {
  char buf[1024];
  ssize_t n;
  do n = read(sock, buf, sizeof buf - 1);
  while (n < 0 && errno == EINTR);
  if (n == 1 + (ssize_t)sizeof(int) && buf[0] == 'L') {
    int fd;
    memcpy(&fd, buf + 1, sizeof fd);
    int pidfd = (int)syscall(__NR_pidfd_open, child, 0);
    int own = pidfd < 0 ? -1 : (int)syscall(__NR_pidfd_getfd, pidfd, fd, 0);
    if (pidfd >= 0) close(pidfd);
    if (own >= 0 && fcntl(own, F_SETFD, FD_CLOEXEC) == 0) return own;
    snprintf(err, errlen, "cannot take the seccomp listener from the child: %s", strerror(errno));
    if (own >= 0) close(own);
    return -1;
  }
  if (n > 1 && buf[0] == 'E') {
    size_t len = (size_t)n;
    ssize_t m;
    while (len < sizeof buf - 1 && (m = read(sock, buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)m;
    buf[len] = '\0';
    snprintf(err, errlen, "%s", buf + 1);
  } else {
    snprintf(err, errlen, "the sandboxed child failed during setup");
  }
  return -1;
}

static int run(struct bsh_config *cfg) {
  char err[1024];
  bsh_fast_path_init();
  /* Blocked before fork so no SIGCHLD is lost; the child restores the mask before exec. */
  sigset_t block, old;
  sigemptyset(&block);
  int sigs[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaddset(&block, sigs[i]);
  sigprocmask(SIG_BLOCK, &block, &old);
  int sigfd = signalfd(-1, &block, SFD_CLOEXEC | SFD_NONBLOCK);
  int sp[2];
  /* Subreaper before fork: orphans of the command must come to us, never escape to init. */
  if (sigfd < 0 || prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 ||
      socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
    return setup_error("cannot prepare the supervisor: %s", strerror(errno));
  pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) return setup_error("fork: %s", strerror(errno));
  if (child == 0) {
    close(sp[0]);
    close(sigfd);
    bsh_child_run(cfg, sp[1], parent, &old);
  }
  close(sp[1]);
  int listener = receive_listener(sp[0], child, err, sizeof err);
  if (listener >= 0 && bsh_caps_limit_supervisor(err, sizeof err) != 0) {
    close(listener);
    listener = -1;
  }
  if (listener < 0) {
    kill(child, SIGKILL);
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
    }
    return setup_error("the sandbox cannot be set up, nothing was run: %s", err);
  }
  /* We create files for the target with its own umask applied explicitly. */
  umask(0);
  if (chdir("/") != 0) return setup_error("chdir /: %s", strerror(errno));
  signal(SIGPIPE, SIG_IGN);
  /* The command starts only once the network table it is held to has arrived. */
  if (cfg->network && bsh_net_start(cfg->broker_fd, err, sizeof err) != 0) {
    kill(child, SIGKILL);
    return setup_error("the sandbox cannot be set up, nothing was run: %s", err);
  }
  char go = 'G';
  if (write(sp[0], &go, 1) != 1) {
    kill(child, SIGKILL);
    return setup_error("cannot start the child: %s", strerror(errno));
  }
  close(sp[0]);
  return bsh_supervise(cfg, listener, child, sigfd);
}

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[1], "--mode") == 0 && strcmp(argv[2], "preload") == 0)
    return bsh_preload_main(argc - 3, argv + 3);
  struct bsh_config cfg = {.broker_fd = -1};
  bool check = false, print_filter = false;
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    bool has_value = i + 1 < argc;
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    } else if (strcmp(a, "--broker-fd") == 0 && has_value) {
      char *end;
      long fd = strtol(argv[++i], &end, 10);
      if (*end || fd < 0 || fd > 65535) return setup_error("bad --broker-fd %s", argv[i]);
      cfg.broker_fd = (int)fd;
    } else if (strcmp(a, "--scratch") == 0 && has_value) {
      if (add_scratch(&cfg, argv[++i]) != 0) return BSH_EXIT_SETUP;
    } else if (strcmp(a, "--write-dev") == 0 && has_value) {
      if (add_write_dev(&cfg, argv[++i]) != 0) return BSH_EXIT_SETUP;
    } else if (strcmp(a, "--unix-socket") == 0 && has_value) {
      if (add_unix_socket(&cfg, argv[++i]) != 0) return BSH_EXIT_SETUP;
    } else if (strcmp(a, "--deny-read") == 0 && has_value) {
      if (bsh_read_denied_add(&cfg.read_denied, &cfg.n_read_denied, argv[++i]) != 0) return BSH_EXIT_SETUP;
    } else if (strcmp(a, "--network") == 0) {
      cfg.network = true;
    } else if (strcmp(a, "--check") == 0) {
      check = true;
    } else if (strcmp(a, "--print-filter") == 0) {
      print_filter = true;
    } else {
      usage();
      return setup_error("unknown or incomplete option %s", a);
    }
  }
  if (print_filter) {
    bsh_seccomp_print_tables();
    return 0;
  }
  char err[1024];
  if (bsh_kernel_check(err, sizeof err) != 0) return setup_error("%s; refusing to run unprotected", err);
  if (check) {
    printf("ok\n");
    return 0;
  }
  if (i >= argc) {
    usage();
    return setup_error("%s", "no PROGRAM given");
  }
  if (check_broker_fd(cfg.broker_fd) != 0) return setup_error("%s", "--broker-fd must name an open socket");
  cfg.argv = argv + i;
  return run(&cfg);
}
