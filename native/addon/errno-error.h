// Errors shaped like Node's fs errors (code, errno, syscall, path, dest) so callers
// can handle native failures and fs failures with the same code.
#ifndef BROKERED_SHELL_ERRNO_ERROR_H
#define BROKERED_SHELL_ERRNO_ERROR_H

#include <napi.h>

#include <string>

namespace bsh {

struct ErrnoContext {
  const char* syscall;
  std::string path;  // empty: no `path` property
  std::string dest;  // empty: no `dest` property
  std::string detail;  // replaces the strerror text in the message when set
};

// The errno's symbolic name ("ENOENT"), or "UNKNOWN" for numbers glibc does not know.
const char* ErrnoName(int err);

// Throws the error as a pending JS exception and returns undefined for the caller to return.
Napi::Value ThrowErrno(Napi::Env env, int err, const ErrnoContext& context);

// Throws a TypeError with a Node-style `code` (ERR_INVALID_ARG_TYPE / ERR_INVALID_ARG_VALUE).
Napi::Value ThrowArgError(Napi::Env env, const char* code, const std::string& message);

// "dir/name" for messages, without doubling the slash when dir is "/".
std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace bsh

#endif
