/*
 * posix_spawn's file actions: the child opens the file inside libc, where no hook
 * reaches, so a write-mode open is asked for when the action is added (before the
 * change, in the same cwd). A path only the broker may open (an fd grant) cannot be
 * handed to the child this way and is refused.
 */
#include "preload.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>

BP_EXPORT int posix_spawn_file_actions_addopen(posix_spawn_file_actions_t *actions, int fd, const char *path,
                                               int flags, mode_t mode) {
  struct bp_saved_errno saved = BP_SAVE_ERRNO();
  int granted = -1, alias = -1;
  int err = 0;
  switch (bp_check_open(AT_FDCWD, path, flags, mode, &granted, &alias)) {
    case BP_FAIL:
      err = errno;
      break;
    case BP_USE_FD:
      bp_finish_fd(granted, 0);
      err = EACCES;
      break;
    case BP_PROCEED:
      break;
  }
  BP_RESTORE_ERRNO(saved);
  /* Like the function itself, report failure as the error number. */
  if (err) return err;
  return BP_REAL(posix_spawn_file_actions_addopen)(actions, fd, path, flags, mode);
}
