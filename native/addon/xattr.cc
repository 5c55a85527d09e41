// Extended attributes by path, for backing up and restoring a file's metadata.
// The l* variants act on a symlink itself instead of its target.
#include <sys/xattr.h>

#include <cerrno>
#include <string>
#include <vector>

#include "args.h"
#include "errno-error.h"
#include "exports.h"

namespace bsh {

// A value or name list can grow between the size probe and the read (ERANGE);
// retry a few times, then report ERANGE rather than loop forever against a writer.
static constexpr int kSizeAttempts = 8;

static Napi::Value ListXattrs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string path;
  bool noFollow = false;
  if (!StringArg(info, 0, "path", &path) || !OptionalBoolArg(info, 1, "noFollow", false, &noFollow)) {
    return env.Undefined();
  }
  const char* syscall = noFollow ? "llistxattr" : "listxattr";
  auto list = noFollow ? llistxattr : listxattr;

  std::vector<char> names;
  ssize_t length = 0;
  for (int attempt = 0;; attempt++) {
    ssize_t size = list(path.c_str(), nullptr, 0);
    if (size < 0) return ThrowErrno(env, errno, {syscall, path, "", ""});
    if (size == 0) return Napi::Array::New(env, 0);
    names.resize(static_cast<size_t>(size));
    length = list(path.c_str(), names.data(), names.size());
    if (length >= 0) break;
    if (errno != ERANGE || attempt + 1 >= kSizeAttempts) {
      return ThrowErrno(env, errno, {syscall, path, "", ""});
    }
  }

  // The kernel returns NUL-terminated names back to back.
  Napi::Array result = Napi::Array::New(env);
  uint32_t count = 0;
  size_t start = 0;
  for (size_t i = 0; i < static_cast<size_t>(length); i++) {
    if (names[i] != '\0') continue;
    if (i > start) result.Set(count++, Napi::String::New(env, names.data() + start, i - start));
    start = i + 1;
  }
  return result;
}

static Napi::Value GetXattr(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string path, name;
  bool noFollow = false;
  if (!StringArg(info, 0, "path", &path) || !StringArg(info, 1, "name", &name) ||
      !OptionalBoolArg(info, 2, "noFollow", false, &noFollow)) {
    return env.Undefined();
  }
  const char* syscall = noFollow ? "lgetxattr" : "getxattr";
  auto get = noFollow ? lgetxattr : getxattr;

  std::vector<char> value;
  for (int attempt = 0;; attempt++) {
    ssize_t size = get(path.c_str(), name.c_str(), nullptr, 0);
    if (size < 0) return ThrowErrno(env, errno, {syscall, path, "", ""});
    if (size == 0) return Napi::Buffer<char>::New(env, 0);
    value.resize(static_cast<size_t>(size));
    ssize_t length = get(path.c_str(), name.c_str(), value.data(), value.size());
    if (length >= 0) return Napi::Buffer<char>::Copy(env, value.data(), static_cast<size_t>(length));
    if (errno != ERANGE || attempt + 1 >= kSizeAttempts) {
      return ThrowErrno(env, errno, {syscall, path, "", ""});
    }
  }
}

static Napi::Value SetXattr(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string path, name;
  bool noFollow = false;
  if (!StringArg(info, 0, "path", &path) || !StringArg(info, 1, "name", &name)) return env.Undefined();
  if (info.Length() < 3 || !info[2].IsBuffer()) {
    return ThrowArgError(env, "ERR_INVALID_ARG_TYPE", "argument 3 (value) must be a Buffer");
  }
  if (!OptionalBoolArg(info, 3, "noFollow", false, &noFollow)) return env.Undefined();
  Napi::Buffer<char> value = info[2].As<Napi::Buffer<char>>();
  const char* syscall = noFollow ? "lsetxattr" : "setxattr";
  auto set = noFollow ? lsetxattr : setxattr;
  // flags 0: create or replace, which is what a restore wants.
  if (set(path.c_str(), name.c_str(), value.Data(), value.Length(), 0) != 0) {
    return ThrowErrno(env, errno, {syscall, path, "", ""});
  }
  return env.Undefined();
}

static Napi::Value RemoveXattr(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string path, name;
  bool noFollow = false;
  if (!StringArg(info, 0, "path", &path) || !StringArg(info, 1, "name", &name) ||
      !OptionalBoolArg(info, 2, "noFollow", false, &noFollow)) {
    return env.Undefined();
  }
  const char* syscall = noFollow ? "lremovexattr" : "removexattr";
  auto remove = noFollow ? lremovexattr : removexattr;
  if (remove(path.c_str(), name.c_str()) != 0) return ThrowErrno(env, errno, {syscall, path, "", ""});
  return env.Undefined();
}

void RegisterXattr(Napi::Env env, Napi::Object exports) {
  exports.Set("listXattrs", Napi::Function::New(env, ListXattrs, "listXattrs"));
  exports.Set("getXattr", Napi::Function::New(env, GetXattr, "getXattr"));
  exports.Set("setXattr", Napi::Function::New(env, SetXattr, "setXattr"));
  exports.Set("removeXattr", Napi::Function::New(env, RemoveXattr, "removeXattr"));
}

}  // namespace bsh
