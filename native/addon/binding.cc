// Module entry: every function is synchronous because each is one fast syscall
// (or, for the kernel probe, a bounded one-off check) that the broker calls rarely.
#include <napi.h>

#include "exports.h"

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  bsh::RegisterPeerCredentials(env, exports);
  bsh::RegisterXattr(env, exports);
  bsh::RegisterOpenNoSymlinks(env, exports);
  bsh::RegisterFsAt(env, exports);
  bsh::RegisterKernelProbe(env, exports);
  bsh::RegisterSendWithFd(env, exports);
  bsh::RegisterPlainWalk(env, exports);
  bsh::RegisterTerminal(env, exports);
  bsh::RegisterWriteLease(env, exports);
  return exports;
}

NODE_API_MODULE(brokered_shell_native, Init)
