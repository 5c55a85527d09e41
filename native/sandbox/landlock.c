/*
 * Landlock: the kernel-enforced floor under everything the supervisor decides.
 * The child may read and execute everywhere, write only in scratch dirs and a few
 * devices, and may not signal or reach abstract sockets outside its domain. The
 * managed roots (the workspace) get no write right on purpose: every change there
 * must be performed by the supervisor after the broker said yes, so a syscall we
 * forgot to notify, or a path swapped after we read it, fails here.
 */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ABI 6 is the first with LANDLOCK_SCOPE_SIGNAL, which keeps the command from killing us. */
#define BSH_LANDLOCK_MIN_ABI 6

/*
 * Without a read policy, reads and executes are not handled at all: the command may read
 * and run everything. With one (spec->read_denied), reading a file and executing it are
 * handled and allowed everywhere but the denied paths (read-allow.c): a file that may not
 * be read may not be run either, since running a program or a script is a way to read
 * it. Their walk costs nothing extra: TRUNCATE, handled anyway, already makes the kernel
 * walk every opened path. Listing a folder (READ_DIR) is never handled: names stay
 * visible (`ls ~` keeps working), and a right not handled costs nothing.
 */
#define FS_READ_RIGHTS (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE)
#define FS_NEVER_HANDLED LANDLOCK_ACCESS_FS_READ_DIR
#define FS_DEVICE_FILE (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
/* Rights that may be granted on a non-directory; the kernel rejects the others there. */
#define FS_FILE_RIGHTS (FS_DEVICE_FILE | FS_READ_RIGHTS)

/* Built-in writable devices; missing ones are skipped (not every container has /dev/tty). */
static const char *const k_devices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts"};

int bsh_landlock_abi(void) {
  long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? -errno : (int)abi;
}

/*
 * Every write-side fs right the running kernel knows: ABI 1 has bits 0-12, then REFER,
 * TRUNCATE, IOCTL_DEV. TRUNCATE costs a path walk on every open, reads included, and is
 * still handled: the supervisor lets some truncations continue in the kernel (a scratch
 * path, a /proc/self/fd alias), and only Landlock judges the file the kernel finally
 * reaches, after a symlink swapped in or an fd replaced by dup2 meanwhile.
 */
static uint64_t handled_fs(int abi, bool reads) {
  uint64_t all = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;
  if (abi >= 2) all |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) all |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) all |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  all &= ~(uint64_t)FS_NEVER_HANDLED;
  return reads ? all : all & ~(uint64_t)FS_READ_RIGHTS;
}

static int add_rule(int ruleset, const char *path, uint64_t access, bool optional, char *err,
                    size_t errlen) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) {
    if (optional && errno == ENOENT) return 0;
    snprintf(err, errlen, "cannot open %s for a Landlock rule: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    snprintf(err, errlen, "cannot stat %s: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) access &= FS_FILE_RIGHTS;
  struct landlock_path_beneath_attr attr = {.allowed_access = access, .parent_fd = fd};
  int rc = (int)syscall(__NR_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0);
  int saved = errno;
  close(fd);
  if (rc != 0) {
    snprintf(err, errlen, "Landlock rule for %s refused: %s", path, strerror(saved));
    return -1;
  }
  return 0;
}

int bsh_landlock_restrict(const struct bsh_landlock_spec *spec, char *err, size_t errlen) {
  int abi = spec->abi;
  bool reads = spec->n_read_denied > 0;
  uint64_t fs = handled_fs(abi, reads);
  /* Write rules never carry reads: a writable root may hold a denied path (`.env` in the workspace). */
  uint64_t write = fs & ~(uint64_t)FS_READ_RIGHTS;
  struct bsh_landlock_ruleset_attr rs = {.handled_access_fs = fs, .handled_access_net = 0, .scoped = 0};
  /* The attribute grew with the ABI: older kernels accept only the fields they know. */
  size_t size = sizeof rs.handled_access_fs;
  if (abi >= 4) size += sizeof rs.handled_access_net;
  if (abi >= 6) {
    rs.scoped = LANDLOCK_SCOPE_SIGNAL | LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET;
    size += sizeof rs.scoped;
  }
  int ruleset = (int)syscall(__NR_landlock_create_ruleset, &rs, size, 0);
  if (ruleset < 0) {
    snprintf(err, errlen, "cannot create a Landlock ruleset: %s", strerror(errno));
    return -1;
  }
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < spec->n_writable; i++)
    rc = add_rule(ruleset, spec->writable[i], write, false, err, errlen);
  for (size_t i = 0; rc == 0 && i < sizeof k_devices / sizeof k_devices[0]; i++)
    rc = add_rule(ruleset, k_devices[i], FS_DEVICE_FILE & fs, true, err, errlen);
  for (size_t i = 0; rc == 0 && i < spec->n_devices; i++)
    rc = add_rule(ruleset, spec->devices[i], FS_DEVICE_FILE & fs, false, err, errlen);
  if (rc == 0 && reads)
    rc = bsh_read_allow_rules(ruleset, FS_READ_RIGHTS & fs, spec->read_denied, spec->n_read_denied, err, errlen);
  if (rc == 0 && syscall(__NR_landlock_restrict_self, ruleset, 0) != 0) {
    snprintf(err, errlen, "landlock_restrict_self: %s", strerror(errno));
    rc = -1;
  }
  close(ruleset);
  return rc;
}

int bsh_landlock_apply(const struct bsh_config *cfg, char *err, size_t errlen) {
  int abi = bsh_landlock_abi();
  if (abi < BSH_LANDLOCK_MIN_ABI) {
    snprintf(err, errlen, "Landlock ABI %d is below %d", abi, BSH_LANDLOCK_MIN_ABI);
    return -1;
  }
  struct bsh_landlock_spec spec = {
      .abi = abi,
      .writable = cfg->scratch,
      .n_writable = cfg->n_scratch,
      .devices = cfg->write_dev,
      .n_devices = cfg->n_write_dev,
      .read_denied = (const char *const *)cfg->read_denied,
      .n_read_denied = cfg->n_read_denied,
  };
  return bsh_landlock_restrict(&spec, err, errlen);
}
