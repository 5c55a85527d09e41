// Placeholder module entry; the native-addon work fills in the real functions.
#include <napi.h>

static Napi::Object Init(Napi::Env env, Napi::Object exports) { return exports; }

NODE_API_MODULE(brokered_shell_native, Init)
