#include "seccomp-notif-probe.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "errno-error.h"
#include "kernel-compat.h"
#include "unique-fd.h"

namespace bsh {

namespace {

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "seccomp probe: unsupported architecture"
#endif

// getppid: nothing in the child calls it except the probe itself (glibc does not cache
// it and the child runs only raw syscalls), so the single notification is ours.
constexpr long kTrappedSyscall = __NR_getppid;
constexpr int kTimeoutMs = 3000;
constexpr long kPlainAnswer = 4242;
constexpr char kMark = 'K';

enum Stage : int32_t { kSetupFailed = 1, kInstallFailed = 2, kListenerSent = 3, kSyscallDone = 4 };

struct Report {
  int32_t stage;
  int32_t err;
  int64_t value;
  int32_t wrote;
};

// Everything from fork to _exit: raw syscalls only (no malloc, no locks, no JS), since
// the parent has other threads whose locks the child inherits in whatever state.
[[noreturn]] void RunChild(int sock, unsigned int filterFlags, const struct sock_fprog* program,
                           bool writeThroughResult) {
  Report report = {};
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    report = {kSetupFailed, errno, 0, 0};
    send(sock, &report, sizeof report, MSG_NOSIGNAL);
    _exit(1);
  }
  long listener = syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, filterFlags, program);
  if (listener < 0) {
    report = {kInstallFailed, errno, 0, 0};
    send(sock, &report, sizeof report, MSG_NOSIGNAL);
    _exit(1);
  }

  report = {kListenerSent, 0, listener, 0};
  struct iovec iov = {&report, sizeof report};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  struct msghdr message = {};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  struct cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  int listenerFd = static_cast<int>(listener);
  memcpy(CMSG_DATA(header), &listenerFd, sizeof listenerFd);
  if (sendmsg(sock, &message, MSG_NOSIGNAL) < 0) _exit(2);
  close(listenerFd);  // only the parent may answer

  long got = syscall(kTrappedSyscall);
  report = {kSyscallDone, got < 0 ? errno : 0, got, 0};
  if (got >= 0 && writeThroughResult) report.wrote = write(static_cast<int>(got), &kMark, 1) == 1;
  send(sock, &report, sizeof report, MSG_NOSIGNAL);
  _exit(0);
}

int64_t NowMs() {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
}

// Waits for `fd` to be readable before the deadline. 0 on success, else an errno
// (ETIMEDOUT when the deadline passed).
int WaitReadable(int fd, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - NowMs();
    if (left <= 0) return ETIMEDOUT;
    struct pollfd entry = {fd, POLLIN, 0};
    int ready = poll(&entry, 1, static_cast<int>(left));
    if (ready > 0) return 0;
    if (ready < 0 && errno != EINTR) return errno;
  }
}

// One report from the child, with a passed fd if it sent one. 0, an errno, or EPIPE when
// the child closed the socket (it died) without reporting.
int ReceiveReport(int sock, int64_t deadline, Report* report, UniqueFd* passed) {
  if (int err = WaitReadable(sock, deadline)) return err;
  struct iovec iov = {report, sizeof *report};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  struct msghdr message = {};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t length;
  do {
    length = recvmsg(sock, &message, MSG_CMSG_CLOEXEC);
  } while (length < 0 && errno == EINTR);
  if (length < 0) return errno;
  if (length != static_cast<ssize_t>(sizeof *report)) return EPIPE;
  for (struct cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS && passed != nullptr) {
      int fd;
      memcpy(&fd, CMSG_DATA(header), sizeof fd);
      passed->Reset(fd);
    }
  }
  return 0;
}

std::string ErrnoText(const char* what, int err) { return std::string(what) + ": " + ErrnoName(err); }

// Reaps the child exactly once; kills it first unless it already reported success.
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Reap();
    }
  }
  pid_t Pid() const { return pid_; }
  // Waits for a child that is expected to exit on its own; true when it exited 0.
  bool ReapClean(int64_t deadline) {
    while (NowMs() < deadline) {
      int status = 0;
      pid_t done = waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
      }
      if (done < 0 && errno != EINTR) return false;
      struct timespec pause = {0, 1000000};
      nanosleep(&pause, nullptr);
    }
    return false;
  }

 private:
  void Reap() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
  pid_t pid_;
};

NotifProbeResult Fail(const std::string& probe, const std::string& why) { return {false, probe + ": " + why}; }

NotifProbeResult RunProbe(bool waitKillable, bool syncWakeUp) {
  const std::string probe = syncWakeUp ? "seccomp SYNC_WAKE_UP" : waitKillable ? "seccomp WAIT_KILLABLE_RECV" : "seccomp ADDFD_FLAG_SEND";
  // Notify on the trapped syscall of this architecture; allow everything else.
  static struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kTrappedSyscall, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  static const struct sock_fprog program = {sizeof filter / sizeof filter[0], filter};
  unsigned int flags = SECCOMP_FILTER_FLAG_NEW_LISTENER;
  if (waitKillable) flags |= SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;

  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return Fail(probe, ErrnoText("socketpair", errno));
  }
  UniqueFd parentEnd(pair[0]), childEnd(pair[1]);
  const int64_t deadline = NowMs() + kTimeoutMs;

  pid_t pid = fork();
  if (pid < 0) return Fail(probe, ErrnoText("fork", errno));
  if (pid == 0) RunChild(childEnd.Get(), flags, &program, !waitKillable);
  Child child(pid);
  childEnd.Reset();  // so a dead child reads as EOF, not silence

  Report report = {};
  UniqueFd listener;
  if (int err = ReceiveReport(parentEnd.Get(), deadline, &report, &listener)) {
    return Fail(probe, ErrnoText("waiting for the listener", err));
  }
  if (report.stage == kSetupFailed) return Fail(probe, ErrnoText("PR_SET_NO_NEW_PRIVS", report.err));
  if (report.stage == kInstallFailed) {
    return Fail(probe, ErrnoText(waitKillable ? "seccomp(NEW_LISTENER|WAIT_KILLABLE_RECV)"
                                              : "seccomp(NEW_LISTENER)",
                                 report.err));
  }
  if (report.stage != kListenerSent || !listener.Valid()) return Fail(probe, "no listener fd received");
  if (syncWakeUp && ioctl(listener.Get(), SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, 0) != 0) {
    return Fail(probe, ErrnoText("SECCOMP_IOCTL_NOTIF_SET_FLAGS(SYNC_WAKE_UP)", errno));
  }

  if (int err = WaitReadable(listener.Get(), deadline)) {
    return Fail(probe, ErrnoText("waiting for the notification", err));
  }
  struct seccomp_notif request;
  memset(&request, 0, sizeof request);  // NOTIF_RECV requires a zeroed buffer
  if (ioctl(listener.Get(), SECCOMP_IOCTL_NOTIF_RECV, &request) != 0) {
    return Fail(probe, ErrnoText("SECCOMP_IOCTL_NOTIF_RECV", errno));
  }
  if (request.data.nr != kTrappedSyscall || static_cast<pid_t>(request.pid) != child.Pid()) {
    return Fail(probe, "notification for an unexpected syscall or process");
  }

  long expected = kPlainAnswer;
  UniqueFd pipeRead;
  if (waitKillable) {
    struct seccomp_notif_resp response = {};
    response.id = request.id;
    response.val = kPlainAnswer;
    if (ioctl(listener.Get(), SECCOMP_IOCTL_NOTIF_SEND, &response) != 0) {
      return Fail(probe, ErrnoText("SECCOMP_IOCTL_NOTIF_SEND", errno));
    }
  } else {
    // A pipe made after fork exists only here, so a byte arriving on it proves the
    // child wrote through the fd we injected, not one it inherited.
    int pipeFds[2];
    if (pipe2(pipeFds, O_CLOEXEC) != 0) return Fail(probe, ErrnoText("pipe2", errno));
    pipeRead.Reset(pipeFds[0]);
    UniqueFd pipeWrite(pipeFds[1]);
    struct seccomp_notif_addfd addfd = {};
    addfd.id = request.id;
    addfd.flags = SECCOMP_ADDFD_FLAG_SEND;
    addfd.srcfd = static_cast<uint32_t>(pipeWrite.Get());
    int injected = ioctl(listener.Get(), SECCOMP_IOCTL_NOTIF_ADDFD, &addfd);
    if (injected < 0) return Fail(probe, ErrnoText("SECCOMP_IOCTL_NOTIF_ADDFD(SEND)", errno));
    expected = injected;
  }

  if (int err = ReceiveReport(parentEnd.Get(), deadline, &report, nullptr)) {
    return Fail(probe, ErrnoText("waiting for the child's result", err));
  }
  if (report.stage != kSyscallDone) return Fail(probe, "child sent no syscall result");
  if (report.value < 0) return Fail(probe, ErrnoText("trapped syscall in the child", report.err));
  if (report.value != expected) return Fail(probe, "child saw a different return value than was sent");
  if (!waitKillable) {
    if (!report.wrote) return Fail(probe, "child could not write through the injected fd");
    char mark = 0;
    if (WaitReadable(pipeRead.Get(), deadline) != 0 || read(pipeRead.Get(), &mark, 1) != 1 ||
        mark != kMark) {
      return Fail(probe, "no byte arrived through the injected fd");
    }
  }
  if (!child.ReapClean(deadline)) return Fail(probe, "child did not exit cleanly");
  return {true, ""};
}

}  // namespace

NotifProbeResult ProbeAddfdSend() { return RunProbe(false, false); }
NotifProbeResult ProbeWaitKillableRecv() { return RunProbe(true, false); }
NotifProbeResult ProbeSyncWakeUp() { return RunProbe(true, true); }

}  // namespace bsh
