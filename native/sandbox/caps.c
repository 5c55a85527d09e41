/*
 * Capabilities. The command runs as root on our machines, so it must lose every
 * capability for good: otherwise it could mount, ptrace or kill its way out, or
 * override file permissions the supervisor relies on. The supervisor keeps only
 * CAP_SYS_PTRACE, so what it performs on the command's behalf meets the same
 * permission checks the command itself would meet.
 */
#include "sandbox.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int capget_v3(struct __user_cap_data_struct data[2]) {
  struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  return (int)syscall(SYS_capget, &hdr, data);
}

static int capset_v3(struct __user_cap_data_struct data[2]) {
  struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  return (int)syscall(SYS_capset, &hdr, data);
}

static int last_cap(void) {
  FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
  int v = -1;
  if (f) {
    if (fscanf(f, "%d", &v) != 1) v = -1;
    fclose(f);
  }
  return v >= 0 && v < 64 ? v : CAP_LAST_CAP;
}

static bool has_effective(int cap) {
  struct __user_cap_data_struct d[2];
  memset(d, 0, sizeof d);
  if (capget_v3(d) != 0) return false;
  return (d[cap / 32].effective >> (cap % 32)) & 1u;
}

int bsh_caps_drop_all(char *err, size_t errlen) {
  /*
   * Without CAP_SETPCAP (a non-root caller) the bounding set and securebits cannot
   * change; such a process holds no capabilities and no_new_privs stops it from
   * gaining any through exec, so skipping those two steps loses nothing.
   */
  bool privileged = has_effective(CAP_SETPCAP);
  int last = last_cap();
  for (int cap = 0; privileged && cap <= last; cap++) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
      snprintf(err, errlen, "cannot drop capability %d from the bounding set: %s", cap, strerror(errno));
      return -1;
    }
  }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {
    snprintf(err, errlen, "cannot clear ambient capabilities: %s", strerror(errno));
    return -1;
  }
  if (privileged) {
    /* Locked so that uid 0 never regains capabilities on exec or setuid, even later. */
    unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                         SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED;
    if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0) {
      snprintf(err, errlen, "cannot set securebits: %s", strerror(errno));
      return -1;
    }
  }
  struct __user_cap_data_struct d[2];
  memset(d, 0, sizeof d);
  if (capset_v3(d) != 0) {
    snprintf(err, errlen, "cannot clear capabilities: %s", strerror(errno));
    return -1;
  }
  /* Verify rather than trust: any capability left is a setup failure. */
  if (capget_v3(d) != 0 || d[0].effective || d[0].permitted || d[0].inheritable || d[1].effective ||
      d[1].permitted || d[1].inheritable) {
    snprintf(err, errlen, "capabilities are still present after dropping them");
    return -1;
  }
  for (int cap = 0; privileged && cap <= last; cap++) {
    if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1) {
      snprintf(err, errlen, "capability %d is still in the bounding set", cap);
      return -1;
    }
  }
  return 0;
}

int bsh_caps_limit_supervisor(char *err, size_t errlen) {
  struct __user_cap_data_struct d[2];
  memset(d, 0, sizeof d);
  if (capget_v3(d) != 0) {
    snprintf(err, errlen, "capget: %s", strerror(errno));
    return -1;
  }
  /*
   * Keep CAP_SYS_PTRACE only if we have it: reading a target that made itself
   * non-dumpable needs it. Everything the supervisor does to files then meets the
   * command's own permission checks (same uid, no DAC_OVERRIDE/FOWNER/CHOWN).
   */
  uint32_t keep = (d[0].permitted >> CAP_SYS_PTRACE) & 1u ? 1u << CAP_SYS_PTRACE : 0;
  struct __user_cap_data_struct n[2];
  memset(n, 0, sizeof n);
  n[0].effective = n[0].permitted = keep;
  if (capset_v3(n) != 0) {
    snprintf(err, errlen, "cannot limit the supervisor's capabilities: %s", strerror(errno));
    return -1;
  }
  return 0;
}
