// The broker's path walk (src/plugins/path-resolution/walk.ts) for its common case, in one
// call: an absolute path with no `.`, `..` or symlink in it and nothing under /proc. There
// the walk's answer is the path itself and what is at its end, and each component costs
// the JS walk an lstat with a Stats object. Here one openat2 that refuses every link looks
// the whole path up once. Anything else (a link, a dot, /proc, any error but a missing
// final name) is answered "not plain" and the JS walk, which checks every link before it
// follows it, resolves it from the start. So this never decides a path differently; it
// only skips the per-component work.
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
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

// Whether a path names no `.`, `..` or /proc component: those take the JS walk.
bool PlainSpelling(const std::string& path) {
  if (path.empty() || path[0] != '/') return false;
  size_t i = 0;
  const size_t n = path.size();
  bool first = true;
  while (true) {
    while (i < n && path[i] == '/') i++;
    if (i == n) return true;
    const size_t start = i;
    while (i < n && path[i] != '/') i++;
    std::string_view name(path.data() + start, i - start);
    if (name == "." || name == ".." || (first && name == "proc")) return false;
    first = false;
  }
}

// An lstat per component, each a lookup from the root: the walk where openat2 is missing.
double WalkByLstat(const std::string& path, bool allowMissingFinal) {
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
    size_t after = i;
    while (after < n && path[after] == '/') after++;
    const bool last = after == n;
    current += '/';
    current.append(path, start, i - start);
    if (lstat(current.c_str(), &st) != 0) {
      return errno == ENOENT && last && allowMissingFinal ? kAbsent : kNotPlain;
    }
    // A trailing slash after a non-directory fails the lookup (ENOTDIR), as openat2 does.
    if (S_ISLNK(st.st_mode) || ((!last || after != i) && !S_ISDIR(st.st_mode))) return kNotPlain;
  }
  if (current.empty() && lstat("/", &st) != 0) return kNotPlain;
  return Encode(st);
}

// Set once, by whichever thread (a worker's broker too) meets a kernel without openat2.
std::atomic<bool> openat2Missing{false};

// O_PATH opens nothing (no device, no atime); RESOLVE_NO_SYMLINKS fails with ELOOP on a link
// anywhere before the final name, and O_NOFOLLOW hands back a final link itself.
int OpenWithoutLinks(const char* path, int extraFlags) {
  struct open_how how = {};
  how.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC | extraFlags;
  how.resolve = RESOLVE_NO_SYMLINKS;
  return static_cast<int>(syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how));
}

// One lookup in the kernel instead of one lstat per component (≈ 1.7 against 5.4 µs for
// seven components here). Every failure but "only the final name is missing" is not plain.
double Walk(const std::string& path, bool allowMissingFinal) {
  if (!PlainSpelling(path)) return kNotPlain;
  if (openat2Missing.load(std::memory_order_relaxed)) return WalkByLstat(path, allowMissingFinal);
  const int fd = OpenWithoutLinks(path.c_str(), 0);
  if (fd < 0) {
    if (errno == ENOSYS) {
      openat2Missing.store(true, std::memory_order_relaxed);
      return WalkByLstat(path, allowMissingFinal);
    }
    if (errno != ENOENT || !allowMissingFinal) return kNotPlain;
    // Missing somewhere: plain and absent only when the parent is all there, without links.
    size_t end = path.size();
    while (end > 1 && path[end - 1] == '/') end--;
    size_t cut = path.rfind('/', end - 1);
    while (cut > 0 && path[cut - 1] == '/') cut--;
    const std::string parent = cut == 0 ? std::string("/") : path.substr(0, cut);
    const int dir = OpenWithoutLinks(parent.c_str(), O_DIRECTORY);
    if (dir < 0) return kNotPlain;
    close(dir);
    return kAbsent;
  }
  struct stat st;
  const int failed = fstat(fd, &st);
  close(fd);
  if (failed != 0 || S_ISLNK(st.st_mode)) return kNotPlain;
  return Encode(st);
}

// walkPlain(path, allowMissingFinal) → nlink * 65536 + st_mode of the final component,
// -1 when only the final name is missing (and that is allowed), -2 when not plain.
template <double (*walk)(const std::string&, bool)>
Napi::Value WalkPlainWith(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string path;
  bool allowMissingFinal = false;
  if (!StringArg(info, 0, "path", &path) || !OptionalBoolArg(info, 1, "allowMissingFinal", false, &allowMissingFinal)) {
    return env.Undefined();
  }
  return Napi::Number::New(env, walk(path, allowMissingFinal));
}

double WalkWithoutOpenat2(const std::string& path, bool allowMissingFinal) {
  return PlainSpelling(path) ? WalkByLstat(path, allowMissingFinal) : kNotPlain;
}

}  // namespace

void RegisterPlainWalk(Napi::Env env, Napi::Object exports) {
  exports.Set("walkPlain", Napi::Function::New(env, WalkPlainWith<Walk>, "walkPlain"));
  // The walk kernels without openat2 get, exported so tests hold it to the same answers.
  exports.Set("walkPlainByLstat", Napi::Function::New(env, WalkPlainWith<WalkWithoutOpenat2>, "walkPlainByLstat"));
}

}  // namespace bsh
