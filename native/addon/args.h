// Argument checks shared by every exported function. Each returns false after
// throwing a TypeError, so callers write `if (!StringArg(...)) return env.Undefined();`.
#ifndef BROKERED_SHELL_ARGS_H
#define BROKERED_SHELL_ARGS_H

#include <napi.h>

#include <cstdint>
#include <string>

namespace bsh {

// A string without NUL bytes (a NUL would silently cut the path the kernel sees).
bool StringArg(const Napi::CallbackInfo& info, size_t index, const char* name, std::string* out);

// An integral number within [min, max].
bool IntegerArg(const Napi::CallbackInfo& info, size_t index, const char* name, int64_t min,
                int64_t max, int64_t* out);

// undefined/null → fallback; otherwise must be a boolean.
bool OptionalBoolArg(const Napi::CallbackInfo& info, size_t index, const char* name, bool fallback,
                     bool* out);

// `options.key` where options may be undefined/null; the property must be boolean if present.
bool OptionalBoolOption(const Napi::CallbackInfo& info, size_t index, const char* key, bool* out);

}  // namespace bsh

#endif
