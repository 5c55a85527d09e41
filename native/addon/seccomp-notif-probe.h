// A real round trip through seccomp user notification in a forked child, because
// the flags the broker depends on can only be shown to work by using them.
#ifndef BROKERED_SHELL_SECCOMP_NOTIF_PROBE_H
#define BROKERED_SHELL_SECCOMP_NOTIF_PROBE_H

#include <string>

namespace bsh {

struct NotifProbeResult {
  bool ok;
  std::string note;  // why it failed (errno names); empty when ok
};

// Filter with NEW_LISTENER; the notification is answered with ADDFD + ADDFD_FLAG_SEND and
// the child must get the injected fd as the syscall's return value and write through it.
NotifProbeResult ProbeAddfdSend();

// Filter with NEW_LISTENER | WAIT_KILLABLE_RECV; the notification is answered with a plain
// return value that the child must see.
NotifProbeResult ProbeWaitKillableRecv();

// The same round trip with SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP set on the listener (Linux 6.6+).
NotifProbeResult ProbeSyncWakeUp();

}  // namespace bsh

#endif
