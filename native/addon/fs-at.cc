// Host operations relative to directory handles opened without following any
// symlink, acting on a final name that is never followed either. Together this closes
// the window between the broker's check of a path and the change it makes.
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "args.h"
#include "errno-error.h"
#include "exports.h"
#include "kernel-compat.h"
#include "no-symlink-open.h"

namespace bsh {

namespace {

// One directory handle plus a checked final name: the shape every call below starts from.
struct Target {
  std::string dir;
  std::string name;
  UniqueFd dirFd;
  std::string Path() const { return JoinPath(dir, name); }
};

bool TargetArgs(const Napi::CallbackInfo& info, size_t index, const char* syscall, Target* out) {
  Napi::Env env = info.Env();
  if (!StringArg(info, index, "dir", &out->dir) || !StringArg(info, index + 1, "name", &out->name)) {
    return false;
  }
  if (!CheckNameOrThrow(env, syscall, out->dir, out->name)) return false;
  out->dirFd = OpenDirOrThrow(env, out->dir);
  return out->dirFd.Valid();
}

bool ModeArg(const Napi::CallbackInfo& info, size_t index, mode_t* out) {
  int64_t mode = 0;
  if (!IntegerArg(info, index, "mode", 0, 07777, &mode)) return false;
  *out = static_cast<mode_t>(mode);
  return true;
}

// -1 keeps the current owner/group, as chown(2) and Node's fs.chown define it.
bool IdArg(const Napi::CallbackInfo& info, size_t index, const char* name, uint32_t* out) {
  int64_t id = 0;
  if (!IntegerArg(info, index, name, -1, UINT32_MAX - 1, &id)) return false;
  *out = id < 0 ? static_cast<uint32_t>(-1) : static_cast<uint32_t>(id);
  return true;
}

// null/undefined → UTIME_NOW; the string "omit" → UTIME_OMIT; else { sec, nsec }.
bool TimeArg(const Napi::CallbackInfo& info, size_t index, const char* name, struct timespec* out) {
  Napi::Env env = info.Env();
  Napi::Value value = index < info.Length() ? info[index] : env.Undefined();
  std::string label = std::string("argument ") + std::to_string(index + 1) + " (" + name + ")";
  if (value.IsUndefined() || value.IsNull()) {
    *out = {0, UTIME_NOW};
    return true;
  }
  if (value.IsString()) {
    if (value.As<Napi::String>().Utf8Value() == "omit") {
      *out = {0, UTIME_OMIT};
      return true;
    }
    ThrowArgError(env, "ERR_INVALID_ARG_VALUE", label + " must be null, 'omit' or { sec, nsec }");
    return false;
  }
  if (!value.IsObject()) {
    ThrowArgError(env, "ERR_INVALID_ARG_TYPE", label + " must be null, 'omit' or { sec, nsec }");
    return false;
  }
  Napi::Object object = value.As<Napi::Object>();
  Napi::Value sec = object.Get("sec");
  if (env.IsExceptionPending()) return false;
  Napi::Value nsec = object.Get("nsec");
  if (env.IsExceptionPending()) return false;
  if (!sec.IsNumber() || !nsec.IsNumber()) {
    ThrowArgError(env, "ERR_INVALID_ARG_TYPE", label + ".sec and .nsec must be numbers");
    return false;
  }
  double s = sec.As<Napi::Number>().DoubleValue();
  double ns = nsec.As<Napi::Number>().DoubleValue();
  constexpr double kMaxSafe = 9007199254740991.0;
  if (!std::isfinite(s) || std::trunc(s) != s || std::fabs(s) > kMaxSafe || !std::isfinite(ns) ||
      std::trunc(ns) != ns || ns < 0 || ns > 999999999) {
    ThrowArgError(env, "ERR_OUT_OF_RANGE",
                  label + " needs an integral sec and an integral nsec in [0, 999999999]");
    return false;
  }
  out->tv_sec = static_cast<time_t>(s);
  out->tv_nsec = static_cast<long>(ns);
  return true;
}

}  // namespace

static Napi::Value UnlinkAt(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Target target;
  bool directory = false;
  if (!OptionalBoolOption(info, 2, "directory", &directory)) return env.Undefined();
  if (!TargetArgs(info, 0, "unlinkat", &target)) return env.Undefined();
  if (unlinkat(target.dirFd.Get(), target.name.c_str(), directory ? AT_REMOVEDIR : 0) != 0) {
    return ThrowErrno(env, errno, {"unlinkat", target.Path(), "", ""});
  }
  return env.Undefined();
}

static Napi::Value RenameAt(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  bool noReplace = false, exchange = false;
  if (!OptionalBoolOption(info, 4, "noReplace", &noReplace) ||
      !OptionalBoolOption(info, 4, "exchange", &exchange)) {
    return env.Undefined();
  }
  Target from, to;
  if (!TargetArgs(info, 0, "renameat2", &from) || !TargetArgs(info, 2, "renameat2", &to)) {
    return env.Undefined();
  }
  unsigned int flags = (noReplace ? RENAME_NOREPLACE : 0) | (exchange ? RENAME_EXCHANGE : 0);
  // Both flags together are EINVAL from the kernel; let it say so.
  if (renameat2(from.dirFd.Get(), from.name.c_str(), to.dirFd.Get(), to.name.c_str(), flags) != 0) {
    return ThrowErrno(env, errno, {"renameat2", from.Path(), to.Path(), ""});
  }
  return env.Undefined();
}

static Napi::Value MkdirAt(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Target target;
  mode_t mode = 0;
  if (!ModeArg(info, 2, &mode) || !TargetArgs(info, 0, "mkdirat", &target)) return env.Undefined();
  if (mkdirat(target.dirFd.Get(), target.name.c_str(), mode) != 0) {
    return ThrowErrno(env, errno, {"mkdirat", target.Path(), "", ""});
  }
  return env.Undefined();
}

// mknodat's file type from the manifest's name for it; 0 for anything else.
static mode_t NodeTypeBits(const std::string& type) {
  if (type == "fifo") return S_IFIFO;
  if (type == "socket") return S_IFSOCK;
  if (type == "char-device") return S_IFCHR;
  if (type == "block-device") return S_IFBLK;
  return 0;
}

// Optional [name, value] pairs of extended attributes; false (with a pending TypeError) when malformed.
static bool XattrPairsArg(const Napi::CallbackInfo& info, size_t index, std::vector<std::pair<std::string, Napi::Buffer<char>>>* out) {
  Napi::Env env = info.Env();
  if (index >= info.Length() || info[index].IsUndefined()) return true;
  if (!info[index].IsArray()) {
    ThrowArgError(env, "ERR_INVALID_ARG_TYPE", "argument 8 (xattrs) must be an array of [name, Buffer] pairs");
    return false;
  }
  Napi::Array pairs = info[index].As<Napi::Array>();
  for (uint32_t i = 0; i < pairs.Length(); i++) {
    Napi::Value item = pairs.Get(i);
    Napi::Array pair = item.IsArray() ? item.As<Napi::Array>() : Napi::Array::New(env);
    if (pair.Length() != 2 || !pair.Get(0u).IsString() || !pair.Get(1u).IsBuffer()) {
      ThrowArgError(env, "ERR_INVALID_ARG_TYPE", "argument 8 (xattrs) must be an array of [name, Buffer] pairs");
      return false;
    }
    out->emplace_back(pair.Get(0u).As<Napi::String>().Utf8Value(), pair.Get(1u).As<Napi::Buffer<char>>());
  }
  return true;
}

// mknodat, then everything else through an O_PATH descriptor of what was made, checked
// first to be a fresh node of ours (a name swapped in between is never chowned or
// chmodded): owner, xattrs, then the exact mode (umask-proof, and after chown, which
// clears setuid). Returns the node's identity for the caller's rename-if-ours.
static Napi::Value MknodAt(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string type;
  mode_t mode = 0;
  int64_t rdev = 0;
  uint32_t uid = 0, gid = 0;
  std::vector<std::pair<std::string, Napi::Buffer<char>>> xattrs;
  if (!StringArg(info, 2, "type", &type) || !ModeArg(info, 3, &mode) ||
      !IntegerArg(info, 4, "rdev", 0, (int64_t{1} << 53) - 1, &rdev) || !IdArg(info, 5, "uid", &uid) ||
      !IdArg(info, 6, "gid", &gid) || !XattrPairsArg(info, 7, &xattrs)) {
    return env.Undefined();
  }
  mode_t typeBits = NodeTypeBits(type);
  if (typeBits == 0) {
    ThrowArgError(env, "ERR_INVALID_ARG_VALUE", "argument 3 (type) must be fifo, socket, char-device or block-device");
    return env.Undefined();
  }
  Target target;
  if (!TargetArgs(info, 0, "mknodat", &target)) return env.Undefined();
  const dev_t device = static_cast<dev_t>(rdev);
  if (mknodat(target.dirFd.Get(), target.name.c_str(), typeBits | 0600, device) != 0) {
    return ThrowErrno(env, errno, {"mknodat", target.Path(), "", ""});
  }
  UniqueFd node(openat(target.dirFd.Get(), target.name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!node.Valid()) return ThrowErrno(env, errno, {"openat", target.Path(), "", ""});
  struct stat made;
  if (fstat(node.Get(), &made) != 0) return ThrowErrno(env, errno, {"fstat", target.Path(), "", ""});
  const bool isDevice = typeBits == S_IFCHR || typeBits == S_IFBLK;
  if ((made.st_mode & S_IFMT) != typeBits || made.st_uid != geteuid() || made.st_nlink != 1 ||
      (isDevice && made.st_rdev != device)) {
    return ThrowErrno(env, EEXIST, {"mknodat", target.Path(), "", "replaced by something else before its owner and mode were set"});
  }
  if (fchownat(node.Get(), "", uid, gid, AT_EMPTY_PATH) != 0) {
    return ThrowErrno(env, errno, {"fchownat", target.Path(), "", ""});
  }
  // fsetxattr refuses an O_PATH descriptor; its /proc link reaches the same inode.
  const std::string viaFd = "/proc/self/fd/" + std::to_string(node.Get());
  for (const auto& [name, value] : xattrs) {
    if (setxattr(viaFd.c_str(), name.c_str(), value.Data(), value.Length(), 0) != 0) {
      return ThrowErrno(env, errno, {"setxattr", target.Path(), "", ""});
    }
  }
  if (syscall(__NR_fchmodat2, node.Get(), "", mode, AT_EMPTY_PATH) != 0) {
    return ThrowErrno(env, errno, {"fchmodat2", target.Path(), "", ""});
  }
  Napi::Object identity = Napi::Object::New(env);
  identity.Set("dev", Napi::BigInt::New(env, static_cast<uint64_t>(made.st_dev)));
  identity.Set("ino", Napi::BigInt::New(env, static_cast<uint64_t>(made.st_ino)));
  return identity;
}

static Napi::Value LinkAt(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Target from, to;
  if (!TargetArgs(info, 0, "linkat", &from) || !TargetArgs(info, 2, "linkat", &to)) {
    return env.Undefined();
  }
  // No AT_SYMLINK_FOLLOW: a symlink source is linked as the symlink itself.
  if (linkat(from.dirFd.Get(), from.name.c_str(), to.dirFd.Get(), to.name.c_str(), 0) != 0) {
    return ThrowErrno(env, errno, {"linkat", from.Path(), to.Path(), ""});
  }
  return env.Undefined();
}

static Napi::Value SymlinkAt(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string linkTarget;
  Target target;
  if (!StringArg(info, 0, "target", &linkTarget) || !TargetArgs(info, 1, "symlinkat", &target)) {
    return env.Undefined();
  }
  if (symlinkat(linkTarget.c_str(), target.dirFd.Get(), target.name.c_str()) != 0) {
    return ThrowErrno(env, errno, {"symlinkat", target.Path(), "", ""});
  }
  return env.Undefined();
}

static Napi::Value ChmodAt(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Target target;
  mode_t mode = 0;
  if (!ModeArg(info, 2, &mode) || !TargetArgs(info, 0, "fchmodat2", &target)) return env.Undefined();
  // fchmodat2 is the only chmod that honours AT_SYMLINK_NOFOLLOW in the kernel; on a
  // symlink it fails (EOPNOTSUPP) instead of changing the target. No fallback: a kernel
  // without it reports ENOSYS and the probe tells the operator why.
  if (syscall(__NR_fchmodat2, target.dirFd.Get(), target.name.c_str(), mode, AT_SYMLINK_NOFOLLOW) != 0) {
    return ThrowErrno(env, errno, {"fchmodat2", target.Path(), "", ""});
  }
  return env.Undefined();
}

static Napi::Value ChownAt(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Target target;
  uint32_t uid = 0, gid = 0;
  if (!IdArg(info, 2, "uid", &uid) || !IdArg(info, 3, "gid", &gid) ||
      !TargetArgs(info, 0, "fchownat", &target)) {
    return env.Undefined();
  }
  if (fchownat(target.dirFd.Get(), target.name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
    return ThrowErrno(env, errno, {"fchownat", target.Path(), "", ""});
  }
  return env.Undefined();
}

static Napi::Value UtimesAt(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Target target;
  struct timespec times[2];
  if (!TimeArg(info, 2, "atime", &times[0]) || !TimeArg(info, 3, "mtime", &times[1]) ||
      !TargetArgs(info, 0, "utimensat", &target)) {
    return env.Undefined();
  }
  if (utimensat(target.dirFd.Get(), target.name.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
    return ThrowErrno(env, errno, {"utimensat", target.Path(), "", ""});
  }
  return env.Undefined();
}

void RegisterFsAt(Napi::Env env, Napi::Object exports) {
  exports.Set("unlinkAt", Napi::Function::New(env, UnlinkAt, "unlinkAt"));
  exports.Set("renameAt", Napi::Function::New(env, RenameAt, "renameAt"));
  exports.Set("mkdirAt", Napi::Function::New(env, MkdirAt, "mkdirAt"));
  exports.Set("mknodAt", Napi::Function::New(env, MknodAt, "mknodAt"));
  exports.Set("linkAt", Napi::Function::New(env, LinkAt, "linkAt"));
  exports.Set("symlinkAt", Napi::Function::New(env, SymlinkAt, "symlinkAt"));
  exports.Set("chmodAt", Napi::Function::New(env, ChmodAt, "chmodAt"));
  exports.Set("chownAt", Napi::Function::New(env, ChownAt, "chownAt"));
  exports.Set("utimesAt", Napi::Function::New(env, UtimesAt, "utimesAt"));
}

}  // namespace bsh
