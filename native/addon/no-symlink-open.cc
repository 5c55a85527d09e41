#include "no-symlink-open.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "args.h"
#include "errno-error.h"
#include "exports.h"
#include "kernel-compat.h"

namespace bsh {

// Magic links (/proc/<pid>/fd/N) are symlinks too, but name both so the intent is explicit.
static constexpr uint64_t kResolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

int OpenNoSymlinks(const std::string& path, uint64_t flags, uint64_t mode) {
  if (path.empty() || path[0] != '/') return -EINVAL;
  struct open_how how = {};
  how.flags = flags | O_CLOEXEC;
  // openat2 rejects a mode unless the open can create a file.
  how.mode = (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE ? mode : 0;
  how.resolve = kResolve;
  long fd = syscall(__NR_openat2, AT_FDCWD, path.c_str(), &how, sizeof how);
  return fd >= 0 ? static_cast<int>(fd) : -errno;
}

UniqueFd OpenDirOrThrow(Napi::Env env, const std::string& dir) {
  int fd = OpenNoSymlinks(dir, O_PATH | O_DIRECTORY, 0);
  if (fd < 0) {
    bool relative = dir.empty() || dir[0] != '/';
    ThrowErrno(env, -fd, {"openat2", dir, "", relative ? "directory must be an absolute path" : ""});
    return UniqueFd();
  }
  return UniqueFd(fd);
}

bool CheckNameOrThrow(Napi::Env env, const char* syscall, const std::string& dir,
                      const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    ThrowErrno(env, EINVAL, {syscall, JoinPath(dir, name), "", "name must be a single path component"});
    return false;
  }
  return true;
}

static Napi::Value OpenNoSymlinksJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string path;
  int64_t flags = 0;
  int64_t mode = 0;
  if (!StringArg(info, 0, "path", &path) || !IntegerArg(info, 1, "flags", 0, INT_MAX, &flags)) {
    return env.Undefined();
  }
  if (info.Length() > 2 && !info[2].IsUndefined() && !IntegerArg(info, 2, "mode", 0, 07777, &mode)) {
    return env.Undefined();
  }
  int fd = OpenNoSymlinks(path, static_cast<uint64_t>(flags), static_cast<uint64_t>(mode));
  if (fd < 0) {
    bool relative = path.empty() || path[0] != '/';
    return ThrowErrno(env, -fd, {"openat2", path, "", relative ? "path must be absolute" : ""});
  }
  return Napi::Number::New(env, fd);
}

void RegisterOpenNoSymlinks(Napi::Env env, Napi::Object exports) {
  exports.Set("openNoSymlinks", Napi::Function::New(env, OpenNoSymlinksJs, "openNoSymlinks"));
}

}  // namespace bsh
