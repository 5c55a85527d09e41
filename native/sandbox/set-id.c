/*
 * Set-id bits on the supervisor's own paths. A set-uid or set-gid program the command
 * leaves behind runs with its owner's (here root's) or group's rights for whoever starts
 * it later, outside the sandbox, so the broker refuses such a mode (its set-id-bits
 * plugin). The calls the supervisor lets through or performs without asking (creates in
 * scratch, chmod in scratch or of an unnamed file) are checked here instead: a set-uid
 * file in $TMPDIR runs as well as one in the workspace, and an unnamed one can be given a
 * name later. The rule is the plugin's: S_ISUID on anything, S_ISGID on anything but a
 * directory (there it only makes new entries inherit the directory's group, which is
 * what `git init --shared` wants). The errno is the broker's for a refusal, EACCES, so a
 * command meets the same answer in the workspace and in $TMPDIR.
 */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

bool bsh_setid_refused(uint32_t mode, bool directory) {
  return (mode & S_ISUID) || (!directory && (mode & S_ISGID));
}

enum bsh_action bsh_refuse_setid(struct bsh_call *c, uint32_t mode) {
  return bsh_report(c, EACCES, "a set-uid or set-gid mode (%04o) is refused in the sandbox: it would leave a program "
                               "that runs with its owner's or group's rights",
                    (unsigned)(mode & 07777));
}

/*
 * chmod by path in scratch (`c->path` resolved there), performed without asking. S_ISGID
 * is allowed on a directory only, and the command may swap the name for a file at any time
 * there: the object is pinned (O_PATH, not followed) and checked, and the call becomes one
 * on that fd, so the mode lands on what was checked.
 */
enum bsh_action bsh_setid_chmod_scratch(struct bsh_call *c) {
  if (c->mode & S_ISUID) return bsh_refuse_setid(c, c->mode);
  if (!(c->mode & S_ISGID)) return BSH_ACT_DIRECT;
  /* No link anywhere on the way, as the perform step walks: a directory swapped for a link to one elsewhere is not reached. */
  struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
  int fd = (int)syscall(__NR_openat2, AT_FDCWD, c->path, &how, sizeof how);
  if (fd < 0) {
    c->err = errno;
    return BSH_ACT_ERRNO;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
    close(fd);
    return bsh_refuse_setid(c, c->mode);
  }
  c->dup_fd = fd;
  c->fd_form = BSH_FD_EMPTY;
  return BSH_ACT_DIRECT;
}
