#include "errno-error.h"

#include <string.h>

#include <cctype>

namespace bsh {

const char* ErrnoName(int err) {
  // glibc >= 2.32; thread-safe and static, unlike building a table by hand.
  const char* name = strerrorname_np(err);
  return name != nullptr ? name : "UNKNOWN";
}

static std::string Describe(int err) {
  const char* text = strerrordesc_np(err);
  std::string description = text != nullptr ? text : "unknown error";
  // Node (libuv) writes descriptions in lower case; match it so messages read alike.
  if (!description.empty()) description[0] = static_cast<char>(std::tolower(description[0]));
  return description;
}

Napi::Value ThrowErrno(Napi::Env env, int err, const ErrnoContext& context) {
  const char* name = ErrnoName(err);
  std::string message = std::string(name) + ": " +
                        (context.detail.empty() ? Describe(err) : context.detail) + ", " +
                        context.syscall;
  if (!context.path.empty()) message += " '" + context.path + "'";
  if (!context.dest.empty()) message += " -> '" + context.dest + "'";

  Napi::Error error = Napi::Error::New(env, message);
  Napi::Object object = error.Value();
  object.Set("code", Napi::String::New(env, name));
  // Negative like Node's fs errors, so util.getSystemErrorName(error.errno) works.
  object.Set("errno", Napi::Number::New(env, -err));
  object.Set("syscall", Napi::String::New(env, context.syscall));
  if (!context.path.empty()) object.Set("path", Napi::String::New(env, context.path));
  if (!context.dest.empty()) object.Set("dest", Napi::String::New(env, context.dest));
  error.ThrowAsJavaScriptException();
  return env.Undefined();
}

Napi::Value ThrowArgError(Napi::Env env, const char* code, const std::string& message) {
  Napi::TypeError error = Napi::TypeError::New(env, message);
  error.Value().Set("code", Napi::String::New(env, code));
  error.ThrowAsJavaScriptException();
  return env.Undefined();
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace bsh
