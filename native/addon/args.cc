#include "args.h"

#include <cmath>

#include "errno-error.h"

namespace bsh {

static std::string ArgLabel(size_t index, const char* name) {
  return std::string("argument ") + std::to_string(index + 1) + " (" + name + ")";
}

bool StringArg(const Napi::CallbackInfo& info, size_t index, const char* name, std::string* out) {
  Napi::Env env = info.Env();
  if (index >= info.Length() || !info[index].IsString()) {
    ThrowArgError(env, "ERR_INVALID_ARG_TYPE", ArgLabel(index, name) + " must be a string");
    return false;
  }
  *out = info[index].As<Napi::String>().Utf8Value();
  if (out->find('\0') != std::string::npos) {
    ThrowArgError(env, "ERR_INVALID_ARG_VALUE", ArgLabel(index, name) + " must not contain NUL bytes");
    return false;
  }
  return true;
}

bool IntegerArg(const Napi::CallbackInfo& info, size_t index, const char* name, int64_t min,
                int64_t max, int64_t* out) {
  Napi::Env env = info.Env();
  if (index >= info.Length() || !info[index].IsNumber()) {
    ThrowArgError(env, "ERR_INVALID_ARG_TYPE", ArgLabel(index, name) + " must be a number");
    return false;
  }
  double value = info[index].As<Napi::Number>().DoubleValue();
  if (!std::isfinite(value) || std::trunc(value) != value || value < static_cast<double>(min) ||
      value > static_cast<double>(max)) {
    ThrowArgError(env, "ERR_OUT_OF_RANGE",
                  ArgLabel(index, name) + " must be an integer in [" + std::to_string(min) + ", " +
                      std::to_string(max) + "]");
    return false;
  }
  *out = static_cast<int64_t>(value);
  return true;
}

bool OptionalBoolArg(const Napi::CallbackInfo& info, size_t index, const char* name, bool fallback,
                     bool* out) {
  if (index >= info.Length() || info[index].IsUndefined() || info[index].IsNull()) {
    *out = fallback;
    return true;
  }
  if (!info[index].IsBoolean()) {
    ThrowArgError(info.Env(), "ERR_INVALID_ARG_TYPE", ArgLabel(index, name) + " must be a boolean");
    return false;
  }
  *out = info[index].As<Napi::Boolean>().Value();
  return true;
}

bool OptionalBoolOption(const Napi::CallbackInfo& info, size_t index, const char* key, bool* out) {
  *out = false;
  if (index >= info.Length() || info[index].IsUndefined() || info[index].IsNull()) return true;
  Napi::Env env = info.Env();
  if (!info[index].IsObject()) {
    ThrowArgError(env, "ERR_INVALID_ARG_TYPE", ArgLabel(index, "options") + " must be an object");
    return false;
  }
  Napi::Value value = info[index].As<Napi::Object>().Get(key);
  if (env.IsExceptionPending()) return false;  // a throwing getter
  if (value.IsUndefined() || value.IsNull()) return true;
  if (!value.IsBoolean()) {
    ThrowArgError(env, "ERR_INVALID_ARG_TYPE", std::string("options.") + key + " must be a boolean");
    return false;
  }
  *out = value.As<Napi::Boolean>().Value();
  return true;
}

}  // namespace bsh
