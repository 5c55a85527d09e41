// SO_PEERCRED: the kernel's record of who connected a Unix socket, which the broker
// uses to check that a client is the process it launched, not something else on the host.
#include <sys/socket.h>

#include <cerrno>
#include <climits>

#include "args.h"
#include "errno-error.h"
#include "exports.h"

namespace bsh {

static Napi::Value PeerCredentials(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t fd = 0;
  if (!IntegerArg(info, 0, "fd", 0, INT_MAX, &fd)) return env.Undefined();

  struct ucred credentials = {};
  socklen_t length = sizeof credentials;
  if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    return ThrowErrno(env, errno, {"getsockopt", "", "", ""});
  }
  Napi::Object result = Napi::Object::New(env);
  result.Set("pid", Napi::Number::New(env, credentials.pid));
  result.Set("uid", Napi::Number::New(env, credentials.uid));
  result.Set("gid", Napi::Number::New(env, credentials.gid));
  return result;
}

void RegisterPeerCredentials(Napi::Env env, Napi::Object exports) {
  exports.Set("peerCredentials", Napi::Function::New(env, PeerCredentials, "peerCredentials"));
}

}  // namespace bsh
