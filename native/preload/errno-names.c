/*
 * The broker names errors the way Node does ("EXDEV"); a hook returns the number. Only
 * errors a file operation can meet are listed; an unknown name becomes EACCES upstream.
 */
#include "preload.h"

#include <errno.h>
#include <string.h>

#define E(name) {#name, name}
static const struct {
  const char *name;
  int value;
} k_names[] = {
    E(EPERM),  E(ENOENT),  E(EINTR),   E(EIO),     E(ENXIO),        E(EBADF),   E(EAGAIN),
    E(ENOMEM), E(EACCES),  E(EFAULT),  E(EBUSY),   E(EEXIST),       E(EXDEV),   E(ENODEV),
    E(ENOTDIR), E(EISDIR), E(EINVAL),  E(ENFILE),  E(EMFILE),       E(ETXTBSY), E(EFBIG),
    E(ENOSPC), E(ESPIPE),  E(EROFS),   E(EMLINK),  E(EPIPE),        E(ENAMETOOLONG),
    E(ENOTEMPTY), E(ELOOP), E(EILSEQ), E(EOPNOTSUPP), E(ENOTSUP),   E(EDQUOT),  E(ESTALE),
    E(EOVERFLOW), E(ENOSYS), E(ENODATA), E(ETIMEDOUT), E(ECANCELED), E(ENOTSOCK),
};
#undef E

int bp_errno_from_name(const char *name) {
  for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++)
    if (strcmp(k_names[i].name, name) == 0) return k_names[i].value;
  return 0;
}
