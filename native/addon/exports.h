// Each mechanism's source file adds its functions to the module's exports.
#ifndef BROKERED_SHELL_EXPORTS_H
#define BROKERED_SHELL_EXPORTS_H

#include <napi.h>

namespace bsh {

void RegisterPeerCredentials(Napi::Env env, Napi::Object exports);  // peer-credentials.cc
void RegisterXattr(Napi::Env env, Napi::Object exports);            // xattr.cc
void RegisterOpenNoSymlinks(Napi::Env env, Napi::Object exports);   // no-symlink-open.cc
void RegisterFsAt(Napi::Env env, Napi::Object exports);             // fs-at.cc
void RegisterKernelProbe(Napi::Env env, Napi::Object exports);      // kernel-probe.cc
void RegisterSendWithFd(Napi::Env env, Napi::Object exports);       // send-fd.cc
void RegisterPlainWalk(Napi::Env env, Napi::Object exports);        // plain-walk.cc
void RegisterTerminal(Napi::Env env, Napi::Object exports);         // terminal.cc
void RegisterWriteLease(Napi::Env env, Napi::Object exports);       // write-lease.cc

}  // namespace bsh

#endif
