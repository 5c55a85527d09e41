// What the running kernel offers, asked of the kernel itself: a distribution kernel
// may backport or disable features, so the release string proves nothing.
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "errno-error.h"
#include "exports.h"
#include "kernel-compat.h"
#include "seccomp-notif-probe.h"
#include "unique-fd.h"

namespace bsh {

namespace {

struct Probe {
  std::string release;
  std::string machine;
  int landlockAbi = 0;
  bool seccompUserNotif = false;
  bool seccompAddfdSend = false;
  bool seccompWaitKillableRecv = false;
  bool seccompSyncWakeUp = false;
  bool openat2 = false;
  bool pidfdGetfd = false;
  bool fchmodat2 = false;
  std::vector<std::string> notes;

  void Note(const std::string& what, int err) { notes.push_back(what + ": " + ErrnoName(err)); }
};

void ProbeLandlock(Probe* probe) {
  long abi = syscall(__NR_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi >= 0) {
    probe->landlockAbi = static_cast<int>(abi);
  } else {
    // ENOSYS: not built in; EOPNOTSUPP: built in but disabled at boot.
    probe->Note("landlock_create_ruleset(VERSION)", errno);
  }
}

void ProbeSeccomp(Probe* probe) {
  unsigned int action = SECCOMP_RET_USER_NOTIF;
  if (syscall(__NR_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) != 0) {
    probe->Note("seccomp(GET_ACTION_AVAIL, RET_USER_NOTIF)", errno);
    probe->notes.push_back("seccomp ADDFD_FLAG_SEND, WAIT_KILLABLE_RECV, SYNC_WAKE_UP: not probed without user notification");
    return;
  }
  probe->seccompUserNotif = true;
  NotifProbeResult addfd = ProbeAddfdSend();
  probe->seccompAddfdSend = addfd.ok;
  if (!addfd.ok) probe->notes.push_back(addfd.note);
  NotifProbeResult killable = ProbeWaitKillableRecv();
  probe->seccompWaitKillableRecv = killable.ok;
  if (!killable.ok) probe->notes.push_back(killable.note);
  NotifProbeResult sync = ProbeSyncWakeUp();
  probe->seccompSyncWakeUp = sync.ok;
  if (!sync.ok) probe->notes.push_back(sync.note);
}

// A real openat2 that resolves "/" the way the broker will use it.
void ProbeOpenat2(Probe* probe) {
  struct open_how how = {};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = syscall(__NR_openat2, AT_FDCWD, "/", &how, sizeof how);
  if (fd < 0) {
    probe->Note("openat2", errno);
    return;
  }
  close(static_cast<int>(fd));
  probe->openat2 = true;
}

// A real pidfd_getfd on ourselves: duplicate our own pidfd through it.
void ProbePidfdGetfd(Probe* probe) {
  long pidfd = syscall(__NR_pidfd_open, getpid(), 0);
  if (pidfd < 0) {
    probe->Note("pidfd_open", errno);
    return;
  }
  UniqueFd own(static_cast<int>(pidfd));
  long copy = syscall(__NR_pidfd_getfd, own.Get(), own.Get(), 0);
  if (copy < 0) {
    probe->Note("pidfd_getfd", errno);
    return;
  }
  close(static_cast<int>(copy));
  probe->pidfdGetfd = true;
}

// fchmodat2 checks its flags before touching any path, so an unknown flag bit gets
// EINVAL from a kernel that has the syscall and ENOSYS from one that does not,
// without changing anything.
void ProbeFchmodat2(Probe* probe) {
  constexpr unsigned int kUnknownFlag = 0x80000000u;
  long result = syscall(__NR_fchmodat2, AT_FDCWD, "/", 0, AT_SYMLINK_NOFOLLOW | kUnknownFlag);
  int err = result < 0 ? errno : 0;
  if (err == EINVAL) {
    probe->fchmodat2 = true;
    return;
  }
  if (err == 0) {
    probe->notes.push_back("fchmodat2: accepted an unknown flag");
  } else {
    probe->Note("fchmodat2", err);
  }
}

Napi::Value ProbeKernel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Probe probe;
  struct utsname names;
  if (uname(&names) == 0) {
    probe.release = names.release;
    probe.machine = names.machine;
  } else {
    probe.Note("uname", errno);
  }
  ProbeLandlock(&probe);
  ProbeSeccomp(&probe);
  ProbeOpenat2(&probe);
  ProbePidfdGetfd(&probe);
  ProbeFchmodat2(&probe);

  Napi::Object result = Napi::Object::New(env);
  result.Set("release", probe.release);
  result.Set("machine", probe.machine);
  result.Set("landlockAbi", Napi::Number::New(env, probe.landlockAbi));
  result.Set("seccompUserNotif", Napi::Boolean::New(env, probe.seccompUserNotif));
  result.Set("seccompAddfdSend", Napi::Boolean::New(env, probe.seccompAddfdSend));
  result.Set("seccompWaitKillableRecv", Napi::Boolean::New(env, probe.seccompWaitKillableRecv));
  result.Set("seccompSyncWakeUp", Napi::Boolean::New(env, probe.seccompSyncWakeUp));
  result.Set("openat2", Napi::Boolean::New(env, probe.openat2));
  result.Set("pidfdGetfd", Napi::Boolean::New(env, probe.pidfdGetfd));
  result.Set("fchmodat2", Napi::Boolean::New(env, probe.fchmodat2));
  Napi::Array notes = Napi::Array::New(env, probe.notes.size());
  for (size_t i = 0; i < probe.notes.size(); i++) notes.Set(static_cast<uint32_t>(i), probe.notes[i]);
  result.Set("notes", notes);
  return result;
}

}  // namespace

void RegisterKernelProbe(Napi::Env env, Napi::Object exports) {
  exports.Set("probeKernel", Napi::Function::New(env, ProbeKernel, "probeKernel"));
}

}  // namespace bsh
