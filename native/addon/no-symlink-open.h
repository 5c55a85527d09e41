// openat2 with RESOLVE_NO_SYMLINKS: the one way this addon turns a path into an fd,
// so a symlink swapped into any component after the broker checked it fails with ELOOP.
#ifndef BROKERED_SHELL_NO_SYMLINK_OPEN_H
#define BROKERED_SHELL_NO_SYMLINK_OPEN_H

#include <napi.h>

#include <cstdint>
#include <string>

#include "unique-fd.h"

namespace bsh {

// fd on success; -errno on failure. `path` must be absolute (else -EINVAL): a relative
// path would be resolved from a cwd nobody checked.
int OpenNoSymlinks(const std::string& path, uint64_t flags, uint64_t mode);

// An O_PATH directory handle for the *at calls, or a thrown JS error (syscall "openat2",
// path = dir) and an invalid fd.
UniqueFd OpenDirOrThrow(Napi::Env env, const std::string& dir);

// A single path component: not "", ".", "..", and no '/'. Throws EINVAL otherwise.
bool CheckNameOrThrow(Napi::Env env, const char* syscall, const std::string& dir,
                      const std::string& name);

}  // namespace bsh

#endif
