// The broker's path walk (src/plugins/path-resolution/walk.ts) for its common case, in one
// call: an absolute path with no `.`, `..` or symlink in it and nothing under /proc. There
// the walk's answer is the path itself and what the last lstat saw, and each component
// costs it a JS lstat with a Stats object. Anything else (a link, a dot, /proc, any error
// but a missing final name) is answered "not plain" and the JS walk, which checks every
// link before it follows it, resolves it from the start. So this never decides a path
// differently; it only skips the per-component JS work.
#include <sys/stat.h>

#include <cerrno>
#include <string>
#include <string_view>

#include "args.h"
#include "exports.h"

namespace bsh {

namespace {

constexpr double kAbsent = -1;    // every component but the last exists; the last does not
constexpr double kNotPlain = -2;  // leave it to the JS walk
// st_mode fits in 16 bits; nlink above this could not share a double exactly with it.
constexpr nlink_t kMaxLinks = nlink_t{1} << 36;

double Encode(const struct stat& st) {
  if (st.st_nlink > kMaxLinks) return kNotPlain;
  return static_cast<double>(st.st_nlink) * 65536.0 + static_cast<double>(st.st_mode & 0xffff);
}

double Walk(const std::string& path, bool allowMissingFinal) {
  if (path.empty() || path[0] != '/') return kNotPlain;
  std::string current;
  current.reserve(path.size());
  struct stat st;
  size_t i = 0;
  const size_t n = path.size();
  while (true) {
    while (i < n && path[i] == '/') i++;
    if (i == n) break;
    const size_t start = i;
    while (i < n && path[i] != '/') i++;
    std::string_view name(path.data() + start, i - start);
    if (name == "." || name == ".." || (current.empty() && name == "proc")) return kNotPlain;
    size_t after = i;
    while (after < n && path[after] == '/') after++;
    const bool last = after == n;
    current += '/';
    current.append(name);
    if (lstat(current.c_str(), &st) != 0) {
      return errno == ENOENT && last && allowMissingFinal ? kAbsent : kNotPlain;
    }
    if (S_ISLNK(st.st_mode) || (!last && !S_ISDIR(st.st_mode))) return kNotPlain;
  }
  if (current.empty() && lstat("/", &st) != 0) return kNotPlain;
  return Encode(st);
}

// walkPlain(path, allowMissingFinal) → nlink * 65536 + st_mode of the final component,
// -1 when only the final name is missing (and that is allowed), -2 when not plain.
Napi::Value WalkPlain(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string path;
  bool allowMissingFinal = false;
  if (!StringArg(info, 0, "path", &path) || !OptionalBoolArg(info, 1, "allowMissingFinal", false, &allowMissingFinal)) {
    return env.Undefined();
  }
  return Napi::Number::New(env, Walk(path, allowMissingFinal));
}

}  // namespace

void RegisterPlainWalk(Napi::Env env, Napi::Object exports) {
  exports.Set("walkPlain", Napi::Function::New(env, WalkPlain, "walkPlain"));
}

}  // namespace bsh
