// Whether anyone holds a file open for writing, asked of the kernel: a read lease is
// granted only when no descriptor of the file is open for writing (writable shared
// mappings included: they keep theirs), so taking one and letting it go at once answers
// without waiting on anybody. The store moves an old file into itself instead of copying
// it only when nobody could still change it through such a descriptor.
#include <fcntl.h>

#include <cerrno>
#include <climits>

#include "args.h"
#include "errno-error.h"
#include "exports.h"

namespace bsh {

static Napi::Value HeldForWriting(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t fd = 0;
  if (!IntegerArg(info, 0, "fd", 0, INT_MAX, &fd)) return env.Undefined();
  int descriptor = static_cast<int>(fd);
  if (fcntl(descriptor, F_SETLEASE, F_RDLCK) != 0) {
    // EAGAIN: a writer has it open. Anything else (EPERM: not the owner without CAP_LEASE;
    // EINVAL: a file system without leases, or an fd not open read-only) cannot tell.
    if (errno == EAGAIN) return Napi::Boolean::New(env, true);
    return ThrowErrno(env, errno, {"fcntl(F_SETLEASE)", "", "", ""});
  }
  if (fcntl(descriptor, F_SETLEASE, F_UNLCK) != 0) return ThrowErrno(env, errno, {"fcntl(F_SETLEASE)", "", "", ""});
  return Napi::Boolean::New(env, false);
}

void RegisterWriteLease(Napi::Env env, Napi::Object exports) {
  exports.Set("heldForWriting", Napi::Function::New(env, HeldForWriting, "heldForWriting"));
}

}  // namespace bsh
