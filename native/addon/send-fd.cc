// sendWithFd: one write on a connected Unix stream socket carrying a file descriptor
// (SCM_RIGHTS) with its first byte. The broker hands a client the file it opened on
// the client's behalf this way (an fd grant), instead of a token.
//
// The socket belongs to libuv, which may have writes of its own queued on it: the
// caller sends only once everything written before has been flushed, or the bytes
// would overtake them. Non-blocking (MSG_DONTWAIT): EAGAIN is the caller's to retry,
// and a short count means only those bytes went (the fd went with the first one).
#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "args.h"
#include "errno-error.h"
#include "exports.h"

namespace bsh {

static Napi::Value SendWithFd(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t socket = 0;
  int64_t fd = 0;
  if (!IntegerArg(info, 0, "socketFd", 0, INT_MAX, &socket)) return env.Undefined();
  if (info.Length() < 2 || !info[1].IsBuffer()) {
    return ThrowArgError(env, "ERR_INVALID_ARG_TYPE", "argument 2 (data) must be a Buffer");
  }
  Napi::Buffer<char> data = info[1].As<Napi::Buffer<char>>();
  // A stream socket carries ancillary data only with at least one byte of data.
  if (data.Length() == 0) return ThrowArgError(env, "ERR_INVALID_ARG_VALUE", "argument 2 (data) must not be empty");
  if (!IntegerArg(info, 2, "fd", 0, INT_MAX, &fd)) return env.Undefined();

  struct iovec iov = {data.Data(), data.Length()};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } control;
  std::memset(&control, 0, sizeof control);
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof control.buf;
  struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  int passed = static_cast<int>(fd);
  std::memcpy(CMSG_DATA(cm), &passed, sizeof passed);

  ssize_t sent;
  do sent = sendmsg(static_cast<int>(socket), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (sent < 0 && errno == EINTR);
  if (sent < 0) return ThrowErrno(env, errno, {"sendmsg", "", "", ""});
  return Napi::Number::New(env, static_cast<double>(sent));
}

void RegisterSendWithFd(Napi::Env env, Napi::Object exports) {
  exports.Set("sendWithFd", Napi::Function::New(env, SendWithFd, "sendWithFd"));
}

}  // namespace bsh
