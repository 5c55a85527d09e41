/*
 * brokered-sandbox --mode preload: the launcher of the preload runtime, for hosts
 * without seccomp user notification (and for benchmarks of the reference's per-call
 * IPC model).
 *
 *   brokered-sandbox --mode preload --preload LIB [--writable DIR]... [--write-dev PATH]...
 *                    [--deny-read PATH]... -- PROGRAM [ARGS...]
 *
 *   --preload LIB    the brokered-preload library, put first in LD_PRELOAD of PROGRAM
 *   --writable DIR   a directory the program may change (the workspace, the writable
 *                    roots, its temp dir): the library makes the real call there after
 *                    the broker answered SANDBOX
 *   --write-dev PATH another device (or directory of devices) below /dev it may write
 *   --no-landlock    run without Landlock, as on a kernel that lacks it (for benchmarks of
 *                    the reference's model and for tests of the advisory case)
 *   --deny-read PATH a file or folder the program may not read or execute. Only Landlock can
 *                    keep it so (the library never sees reads, and a static program not even
 *                    writes): without Landlock the launcher refuses to start
 *
 * The program runs without capabilities, with no_new_privs, under a Landlock domain
 * that lets it read and execute everywhere but write only the --writable dirs and a few
 * devices; with ABI 6 it also cannot signal processes outside it. Where Landlock is
 * missing the program runs without it, and we say so once on stderr: the library's
 * checks are then advisory. There is no supervisor: the launcher forks the program and
 * stays as its child subreaper (so the program's orphans stay below it), passes on the
 * signals sent to it, and kills what the program left when it ends.
 *
 * Exit status: the program's (128+signal if it was killed); 126 when the runtime cannot
 * be set up (nothing ran); 127 when the program cannot be found.
 */
#include "preload-mode.h"

#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct preload_config {
  const char *library;
  const char *writable[BSH_MAX_LIST];
  size_t n_writable;
  const char *write_dev[BSH_MAX_LIST];
  size_t n_write_dev;
  char **read_denied;
  size_t n_read_denied;
  bool no_landlock;
  char **argv;
};

static int fail(const char *fmt, const char *arg) {
  fprintf(stderr, "%s: ", BSH_NAME);
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  return BSH_EXIT_SETUP;
}

static int check_dir(const char *arg) {
  struct stat st;
  if (arg[0] != '/' || stat(arg, &st) != 0 || !S_ISDIR(st.st_mode))
    return fail("--writable %s must be an existing directory, named by an absolute path", arg);
  if (strcmp(arg, "/") == 0) return fail("--writable %s would make everything writable", arg);
  return 0;
}

static int check_dev(const char *arg) {
  struct stat st;
  if (stat(arg, &st) != 0 || !bsh_path_under(arg, "/dev") || strcmp(arg, "/dev") == 0 || bsh_has_dotdot(arg) ||
      S_ISBLK(st.st_mode) || S_ISREG(st.st_mode))
    return fail("--write-dev %s must be a character device, FIFO or directory below /dev", arg);
  return 0;
}

static int parse(int argc, char **argv, struct preload_config *cfg) {
  int i = 0;
  for (; i < argc; i++) {
    const char *a = argv[i];
    bool has_value = i + 1 < argc;
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    } else if (strcmp(a, "--preload") == 0 && has_value) {
      cfg->library = argv[++i];
    } else if (strcmp(a, "--writable") == 0 && has_value) {
      if (cfg->n_writable == BSH_MAX_LIST) return fail("too many --writable dirs (%s)", argv[i + 1]);
      if (check_dir(argv[++i]) != 0) return BSH_EXIT_SETUP;
      cfg->writable[cfg->n_writable++] = argv[i];
    } else if (strcmp(a, "--no-landlock") == 0) {
      cfg->no_landlock = true;
    } else if (strcmp(a, "--deny-read") == 0 && has_value) {
      if (bsh_read_denied_add(&cfg->read_denied, &cfg->n_read_denied, argv[++i]) != 0) return BSH_EXIT_SETUP;
    } else if (strcmp(a, "--write-dev") == 0 && has_value) {
      if (cfg->n_write_dev == BSH_MAX_LIST) return fail("too many --write-dev paths (%s)", argv[i + 1]);
      if (check_dev(argv[++i]) != 0) return BSH_EXIT_SETUP;
      cfg->write_dev[cfg->n_write_dev++] = argv[i];
    } else {
      fprintf(stderr,
              "usage: %s --mode preload --preload LIB [--writable DIR]... [--write-dev PATH]... [--deny-read PATH]... "
              "[--no-landlock] -- PROGRAM [ARGS...]\n",
              BSH_NAME);
      return fail("unknown or incomplete option %s", a);
    }
  }
  struct stat st;
  if (!cfg->library || cfg->library[0] != '/' || stat(cfg->library, &st) != 0 || !S_ISREG(st.st_mode))
    return fail("--preload %s must name the preload library by an absolute path", cfg->library ? cfg->library : "(missing)");
  /* LD_PRELOAD splits on spaces and colons: such a path would load something else. */
  if (strpbrk(cfg->library, " :\t\n")) return fail("--preload %s: the path may not contain spaces or colons", cfg->library);
  if (i >= argc) return fail("%s", "no PROGRAM given");
  cfg->argv = argv + i;
  return 0;
}

static int prepend_preload(const char *library) {
  const char *existing = getenv("LD_PRELOAD");
  size_t len = strlen(library) + (existing ? strlen(existing) + 1 : 0) + 1;
  char *value = malloc(len);
  if (!value) return -1;
  snprintf(value, len, "%s%s%s", library, existing && *existing ? " " : "", existing ? existing : "");
  int rc = setenv("LD_PRELOAD", value, 1);
  free(value);
  return rc;
}

/* The command's side of the fork: locked down, then exec'd. Never returns. */
static void run_command(const struct preload_config *cfg, pid_t launcher, const sigset_t *mask) __attribute__((noreturn));
static void run_command(const struct preload_config *cfg, pid_t launcher, const sigset_t *mask) {
  char err[768];
  sigprocmask(SIG_SETMASK, mask, NULL);
  /* Without its launcher the command has no subreaper and no end: it goes with it. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != launcher) _exit(fail("%s", "the launcher went away during setup"));
  int abi = cfg->no_landlock ? 0 : bsh_landlock_abi();
  if (abi >= 1) {
    struct bsh_landlock_spec spec = {
        .abi = abi,
        .writable = cfg->writable,
        .n_writable = cfg->n_writable,
        .devices = cfg->write_dev,
        .n_devices = cfg->n_write_dev,
        .read_denied = (const char *const *)cfg->read_denied,
        .n_read_denied = cfg->n_read_denied,
    };
    if (bsh_landlock_restrict(&spec, err, sizeof err) != 0) _exit(fail("%s", err));
  } else {
    const char *why = cfg->no_landlock ? "turned off with --no-landlock" : abi == -EOPNOTSUPP ? "disabled at boot" : strerror(-abi);
    if (cfg->n_read_denied > 0) {
      snprintf(err, sizeof err,
               "a read policy is in force (%zu paths) and Landlock is not available (%s): nothing else keeps them "
               "unreadable, so nothing was run",
               cfg->n_read_denied, why);
      _exit(fail("%s", err));
    }
    fprintf(stderr,
            "%s: Landlock is not available here (%s); the preload runtime runs without it, so its checks are "
            "advisory: a program the library does not reach can write wherever this user can\n",
            BSH_NAME, why);
  }
  if (prepend_preload(cfg->library) != 0) _exit(fail("cannot set LD_PRELOAD: %s", strerror(errno)));
  /* Only stdin, stdout and stderr go in: another inherited fd was opened outside the sandbox. */
  if (syscall(__NR_close_range, 3, ~0U, 0) != 0) _exit(fail("cannot close inherited fds: %s", strerror(errno)));
  execvp(cfg->argv[0], cfg->argv);
  int saved = errno;
  fprintf(stderr, "%s: cannot execute %s: %s\n", BSH_NAME, cfg->argv[0], strerror(saved));
  _exit(saved == ENOENT ? 127 : 126);
}

/*
 * The launcher's side: it waits for the command, passes on the signals a process sends
 * it (a terminal's already reached the whole group), and when the command ends kills
 * whatever it left, as the seccomp supervisor does. Returns the command's status.
 */
static int wait_command(pid_t child, const sigset_t *waited) {
  int status = 0;
  for (;;) {
    siginfo_t si;
    if (sigwaitinfo(waited, &si) < 0) continue;
    if (si.si_signo != SIGCHLD) {
      if (si.si_code != SI_KERNEL) kill(child, si.si_signo);
      continue;
    }
    bool over = false;
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG | __WALL)) > 0) {
      if (p != child) continue;
      status = st;
      over = true;
    }
    if (over) break;
  }
  bsh_kill_descendants(-1);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int bsh_preload_main(int argc, char **argv) {
  struct preload_config cfg;
  memset(&cfg, 0, sizeof cfg);
  int rc = parse(argc, argv, &cfg);
  if (rc != 0) return rc;
  char err[768];
  pid_t parent = getppid();
  /* If the broker's process dies, nobody answers the library: the command goes with it. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent)
    return fail("%s", "the broker went away during setup");
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return fail("cannot set no_new_privs: %s", strerror(errno));
  if (bsh_caps_drop_all(err, sizeof err) != 0) return fail("%s", err);
  /*
   * The launcher stays, outside Landlock, as the command's child subreaper: an orphan of
   * the command (`(cmd &)`) comes to it instead of init, so it stays below the pid the
   * broker bound the tool call to, and it ends with the command.
   */
  sigset_t waited, old;
  sigemptyset(&waited);
  int sigs[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaddset(&waited, sigs[i]);
  sigprocmask(SIG_BLOCK, &waited, &old);
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) return fail("cannot become the command's subreaper: %s", strerror(errno));
  pid_t launcher = getpid();
  pid_t child = fork();
  if (child < 0) return fail("fork: %s", strerror(errno));
  if (child == 0) run_command(&cfg, launcher, &old);
  /* The command's stdin and fds are its own; the launcher keeps only stderr, for its messages. */
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    close(null);
  }
  syscall(__NR_close_range, 3, ~0U, 0);
  return wait_command(child, &waited);
}
