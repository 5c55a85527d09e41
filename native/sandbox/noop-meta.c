/*
 * fd-based ownership and mode calls that would change nothing. `sed -i` and `tar -x` give
 * every file they write the owner it already has: each is a broker round trip for no
 * change at all. Such a call needs nobody's
 * permission and leaves nothing to back up, so it is answered as done without touching
 * the file. Only what the kernel itself would also leave unchanged qualifies, asked by
 * the file's owner (the kernel's own condition for it without capabilities); anything
 * we cannot confirm goes to the broker as before. What differs from running it: the
 * file's ctime does not move and no IN_ATTRIB event is raised.
 */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

/*
 * A chown of a regular file drops set-id bits and the file's capabilities, even to the
 * same owner: only a file without them stays unchanged.
 */
static bool holds_privilege(int dup, mode_t mode) {
  if (mode & (S_ISUID | S_ISGID)) return true;
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", dup);
  if (getxattr(proc, "security.capability", NULL, 0) >= 0) return true;
  return !(errno == ENODATA || errno == EOPNOTSUPP);
}

/* Where the kernel would refuse a change: read-only mount, immutable or append-only file. */
static bool frozen(int dup, const struct statx *stx) {
  const uint64_t flags = STATX_ATTR_IMMUTABLE | STATX_ATTR_APPEND;
  if ((stx->stx_attributes_mask & flags) != flags || (stx->stx_attributes & flags) != 0) return true;
  struct statvfs vfs;
  return fstatvfs(dup, &vfs) != 0 || (vfs.f_flag & ST_RDONLY);
}

bool bsh_meta_noop(const struct bsh_call *c) {
  if (c->op != BSH_OP_CHOWN && c->op != BSH_OP_CHMOD) return false;
  if (c->dup_fd < 0 || !c->have_status) return false;
  /* fchown/fchmod on an O_PATH fd fail with EBADF: the kernel's answer, not ours to give. */
  if (c->fd_form == BSH_FD_PLAIN) {
    int fl = fcntl(c->dup_fd, F_GETFL);
    if (fl < 0 || (fl & O_PATH)) return false;
  } else if (c->fd_form != BSH_FD_EMPTY) {
    return false;
  }
  const unsigned need = STATX_TYPE | STATX_MODE | STATX_UID | STATX_GID;
  struct statx stx;
  if (statx(c->dup_fd, "", AT_EMPTY_PATH | AT_STATX_SYNC_AS_STAT, need, &stx) != 0 || (stx.stx_mask & need) != need) return false;
  if ((!S_ISREG(stx.stx_mode) && !S_ISDIR(stx.stx_mode)) || c->fsuid != stx.stx_uid) return false;
  /* Same ids or mode first: most calls do change something, and then no more syscalls are spent. */
  mode_t mode = stx.stx_mode & 07777;
  if (c->op == BSH_OP_CHMOD) {
    if ((c->mode & (S_ISUID | S_ISGID)) != 0 || (mode_t)c->mode != mode) return false;
  } else {
    bool same_uid = c->uid == (uid_t)-1 || c->uid == stx.stx_uid;
    bool same_gid = c->gid == (gid_t)-1 || c->gid == stx.stx_gid;
    if (!same_uid || !same_gid || holds_privilege(c->dup_fd, mode)) return false;
  }
  return !frozen(c->dup_fd, &stx);
}
