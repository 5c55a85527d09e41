// tcflush(TCIFLUSH): drop what was typed on a terminal and not read yet, so a question
// is answered only by what is typed after it (a `y` typed earlier, or one a command's
// fake prompt drew out, must not approve anything).
#include <termios.h>

#include <cerrno>
#include <climits>

#include "args.h"
#include "errno-error.h"
#include "exports.h"

namespace bsh {

static Napi::Value FlushTerminalInput(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t fd = 0;
  if (!IntegerArg(info, 0, "fd", 0, INT_MAX, &fd)) return env.Undefined();
  if (tcflush(static_cast<int>(fd), TCIFLUSH) != 0) return ThrowErrno(env, errno, {"tcflush", "", "", ""});
  return env.Undefined();
}

void RegisterTerminal(Napi::Env env, Napi::Object exports) {
  exports.Set("flushTerminalInput", Napi::Function::New(env, FlushTerminalInput, "flushTerminalInput"));
}

}  // namespace bsh
