/*
 * The supervisor's loop: one thread, poll(2) on the seccomp listener, the broker
 * socket and a signalfd. A notification is decoded at once; one that needs the
 * broker becomes a pending request (by id) while the loop keeps serving others, so no
 * target ever blocks the loop. When the broker answers, the target is re-checked
 * (it may have died) and the operation is performed on the paths the broker checked.
 * Questions go out as they come, several at once: the broker's check and backup
 * describe the file the operation then reaches only if no other call of the command
 * changes that name in between (a link or rename onto a name the broker just saw absent
 * or backed up would otherwise redirect the write to a file nobody backed up), and the
 * broker keeps that true per name: after an allow it starts no change of that name, of a
 * directory above it or below it, until this loop's performed notice says the operation
 * is over (a name that resolves elsewhere than it reads holds every name). Calls on
 * other names, and a call held for a person's answer, keep nobody else waiting.
 * A refusal the supervisor decides itself is reported to the broker the same way (a
 * pending BSH_OP_REFUSED request) and answered to the target when the broker has
 * recorded it, so it is audited and a loop of refused calls waits for the broker.
 * Losing the broker fails closed: everything pending and later is refused, the
 * sandboxed tree is killed, exit 125.
 */
#include "sandbox.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The most fds the network module waits on at once (proxy sockets, sockets of held calls). */
#define NET_FDS 512

struct loop {
  const struct bsh_config *cfg;
  int listener;
  bool listener_done;
  struct bsh_channel ch;
  struct bsh_call **pending;
  size_t n_pending, cap_pending;
  uint32_t next_id;
  pid_t child;
  int child_status;
  bool child_done;
};

/* Kernel-sized buffers: the notification structs may grow in later kernels. */
static size_t g_notif_size, g_resp_size;
static void *g_notif, *g_resp;

static int init_buffers(void) {
  struct seccomp_notif_sizes s;
  if (syscall(__NR_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &s) != 0) return -errno;
  g_notif_size = s.seccomp_notif > sizeof(struct seccomp_notif) ? s.seccomp_notif : sizeof(struct seccomp_notif);
  g_resp_size = s.seccomp_notif_resp > sizeof(struct seccomp_notif_resp) ? s.seccomp_notif_resp
                                                                         : sizeof(struct seccomp_notif_resp);
  g_notif = calloc(1, g_notif_size);
  g_resp = calloc(1, g_resp_size);
  return g_notif && g_resp ? 0 : -ENOMEM;
}

static void respond(int listener, uint64_t id, int err, uint32_t flags) {
  struct seccomp_notif_resp *r = g_resp;
  memset(r, 0, g_resp_size);
  r->id = id;
  r->error = err;
  r->flags = flags;
  /* ENOENT: the target died or was interrupted meanwhile; nothing is left to answer. */
  while (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, r) != 0 && errno == EINTR) {
  }
}

static bool id_valid(int listener, uint64_t id) {
  return ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

static void call_free(struct bsh_call *c) {
  if (c->dup_fd >= 0) close(c->dup_fd);
  free(c->xvalue);
  free(c);
}

/* Performs the operation and answers: an injected fd for opens (atomically, ADDFD_FLAG_SEND). */
static void finish(struct loop *L, struct bsh_call *c, const char *path, const char *to, const char *aside) {
  int fd = -1;
  int rc = bsh_perform(c, path, to, aside, &fd);
  if (rc == 0 && c->op == BSH_OP_OPEN) {
    struct seccomp_notif_addfd add = {
        .id = c->notif_id,
        .flags = SECCOMP_ADDFD_FLAG_SEND,
        .srcfd = (uint32_t)fd,
        .newfd = 0,
        .newfd_flags = (c->open_flags & O_CLOEXEC) ? O_CLOEXEC : 0,
    };
    /*
     * The kernel marks the call answered before the target takes the fd. If this process
     * is killed (or stopped, then restarted) inside the ioctl before the target took it,
     * the fd is dropped and the target's open returns 0, its own stdin: the change itself
     * was checked and backed up before the open, and the target is left writing to fd 0.
     */
    int r;
    while ((r = ioctl(L->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add)) < 0 && errno == EINTR) {
    }
    int saved = errno;
    close(fd);
    if (r >= 0 || saved == ENOENT) return;
    rc = -saved; /* e.g. EMFILE in the target */
  }
  respond(L->listener, c->notif_id, rc, 0);
}

static void refuse_all_pending(struct loop *L, int err) {
  for (size_t i = 0; i < L->n_pending; i++) {
    respond(L->listener, L->pending[i]->notif_id, -err, 0);
    call_free(L->pending[i]);
  }
  L->n_pending = 0;
}

/* Appends `c` to a growable list of calls. 0 or -ENOMEM. */
static int push_call(struct bsh_call ***list, size_t *n, size_t *cap, struct bsh_call *c) {
  if (*n == *cap) {
    size_t grown = *cap ? *cap * 2 : 64;
    struct bsh_call **p = realloc(*list, grown * sizeof *p);
    if (!p) return -ENOMEM;
    *list = p;
    *cap = grown;
  }
  (*list)[(*n)++] = c;
  return 0;
}

static uint32_t next_id(struct loop *L) {
  if (++L->next_id == 0) ++L->next_id; /* 0 is never an id */
  return L->next_id;
}

/* Sends `c` to the broker (a question, or a refusal to record) and keeps it pending. 0 or -errno. */
static int send_pending(struct loop *L, struct bsh_call *c) {
  c->broker_id = next_id(L);
  int rc = bsh_channel_queue(&L->ch, c);
  if (rc == 0) rc = push_call(&L->pending, &L->n_pending, &L->cap_pending, c);
  return rc;
}

/* A refusal decided here: recorded by the broker first, then answered (on_answer). 0 when pending. */
static int send_report(struct loop *L, struct bsh_call *c) {
  if (bsh_proc_status(c) != 0) return -ESRCH; /* the caller is gone: nobody to refuse, nothing to record */
  c->op = BSH_OP_REFUSED;
  if (c->path[0] != '/' || !bsh_utf8_valid(c->path)) c->path[0] = '\0';
  c->to[0] = '\0';
  return send_pending(L, c);
}

/* 0, or -errno when the listener itself failed (then nothing can be supervised any more). */
static int on_notification(struct loop *L) {
  memset(g_notif, 0, g_notif_size);
  if (ioctl(L->listener, SECCOMP_IOCTL_NOTIF_RECV, g_notif) != 0)
    return errno == EINTR || errno == ENOENT ? 0 : -errno; /* ENOENT: the target is gone already */
  struct bsh_call *c = calloc(1, sizeof *c);
  if (!c) {
    respond(L->listener, ((struct seccomp_notif *)g_notif)->id, -ENOMEM, 0);
    return 0;
  }
  enum bsh_action act = bsh_decode(L->cfg, g_notif, c);
  /* Everything was read from the target: was it still the target blocked in this call? */
  if (!id_valid(L->listener, c->notif_id)) {
    call_free(c);
    return 0;
  }
  switch (act) {
  case BSH_ACT_ERRNO: respond(L->listener, c->notif_id, -c->err, 0); break;
  case BSH_ACT_DONE: respond(L->listener, c->notif_id, 0, 0); break;
  case BSH_ACT_CONTINUE: respond(L->listener, c->notif_id, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE); break;
  case BSH_ACT_DIRECT: finish(L, c, c->path, c->to, NULL); break;
  case BSH_ACT_HELD: break; /* the network module owns the call (and its socket) now */
  case BSH_ACT_COUNT: bsh_net_answer(c->notif_id, c->count); break;
  case BSH_ACT_ASK: {
    int rc = send_pending(L, c);
    if (rc == 0) return 0; /* owned by the pending table now */
    respond(L->listener, c->notif_id, rc == -ENAMETOOLONG ? rc : -EACCES, 0);
    break;
  }
  case BSH_ACT_REPORT:
    if (send_report(L, c) == 0) return 0;
    respond(L->listener, c->notif_id, -c->err, 0);
    break;
  }
  call_free(c);
  return 0;
}

/* A rename or link the broker allowed that would bring a file from elsewhere into scratch. */
static bool enters_scratch(struct loop *L, const struct bsh_call *c, const struct bsh_answer *a) {
  if (c->fd_form == BSH_FD_NONE) return bsh_enters_scratch(L->cfg, c, a->path, a->to, false);
  /* flink(): the source is our duplicate; where does it live now? */
  char now[BSH_PATH_MAX];
  bool anonymous = false;
  if (bsh_fd_path(c->dup_fd, now, sizeof now, &anonymous) != 0) return true;
  return bsh_enters_scratch(L->cfg, c, now, a->to, anonymous);
}

/* Acts on the broker's answer to `c` (pending no more), and frees `c`. 0, or -errno to fail closed. */
static int act_on_answer(struct loop *L, struct bsh_call *c, const struct bsh_answer *a) {
  if (!id_valid(L->listener, c->notif_id)) {
    call_free(c);
    return 0;
  }
  if (c->op == BSH_OP_REFUSED) {
    /* The broker recorded the refusal; whatever it answered, the call is refused. */
    respond(L->listener, c->notif_id, -c->err, 0);
    call_free(c);
    return 0;
  }
  bool needs_to = c->op == BSH_OP_RENAME || c->op == BSH_OP_LINK;
  if (a->err == 0 && needs_to && a->to_len > 0 && enters_scratch(L, c, a)) {
    /* The broker allowed what Landlock would refuse (EXDEV): refuse it, and have that recorded too. */
    snprintf(c->path, sizeof c->path, "%s", a->path);
    bsh_report(c, EXDEV, "would give a file from outside the command's temp dir a name inside it, "
                         "where writes skip the broker");
    if (send_report(L, c) == 0) return 0;
    respond(L->listener, c->notif_id, -EXDEV, 0);
    call_free(c);
    return 0;
  }
  if (a->err == 0 && c->op == BSH_OP_RENAME && a->to_len > 0 && bsh_leaves_scratch(L->cfg, c, a->path, a->to)) {
    /* Named through a link, the source turned out to be in scratch: copied instead, and recorded. */
    snprintf(c->path, sizeof c->path, "%s", a->path);
    bsh_report(c, EXDEV, "would move a name out of the command's temp dir, where what it holds changes without asking");
    if (send_report(L, c) == 0) return 0;
    respond(L->listener, c->notif_id, -EXDEV, 0);
    call_free(c);
    return 0;
  }
  if (a->err != 0) {
    respond(L->listener, c->notif_id, a->err > 0 && a->err < 4096 ? -a->err : -EACCES, 0);
  } else if (a->path_len == 0 || a->path[0] != '/' || needs_to != (a->to_len > 0) ||
             (needs_to && a->to[0] != '/') ||
             (a->aside_len > 0 && (a->aside[0] != '/' || (c->op != BSH_OP_UNLINK && c->op != BSH_OP_RENAME)))) {
    respond(L->listener, c->notif_id, -EACCES, 0); /* an "allow" without usable paths */
  } else {
    finish(L, c, a->path, a->to, a->aside_len > 0 ? a->aside : NULL);
  }
  call_free(c);
  return 0;
}

/*
 * The broker's answer. -EPROTO when it answers an id we never asked (fail closed). After
 * an allow, the broker holds back every other change (its socket clients' too) until it
 * hears that this one is over, whether it was performed or not: a name it just checked
 * cannot change under the operation in between.
 */
static int answer_one(struct loop *L, const struct bsh_answer *a) {
  size_t i = 0;
  while (i < L->n_pending && L->pending[i]->broker_id != a->id) i++;
  if (i == L->n_pending) return -EPROTO;
  struct bsh_call *c = L->pending[i];
  L->pending[i] = L->pending[--L->n_pending];
  bool allowed = c->op != BSH_OP_REFUSED && a->err == 0;
  int rc = act_on_answer(L, c, a);
  if (rc == 0 && allowed) rc = bsh_channel_queue_performed(&L->ch, a->id);
  return rc;
}

static int on_answer(struct loop *L, const struct bsh_answer *a) {
  /* The broker's messages (id 0) and answers to network questions go to the network module. */
  if (a->id == 0 || (a->id & BSH_NET_ID_BIT)) return bsh_net_on_answer(a);
  return answer_one(L, a);
}

static void reap(struct loop *L) {
  int st;
  pid_t p;
  while ((p = waitpid(-1, &st, WNOHANG | __WALL)) > 0) {
    if (p == L->child) {
      L->child_status = st;
      L->child_done = true;
    }
  }
}

static void on_signals(struct loop *L, int sigfd) {
  struct signalfd_siginfo si;
  while (read(sigfd, &si, sizeof si) == sizeof si) {
    if (si.ssi_signo == SIGCHLD) {
      reap(L);
    } else if (si.ssi_code != SI_KERNEL && !L->child_done) {
      /* Sent by a process (e.g. the embedding app): pass it on. A terminal's signal already reached the group. */
      kill(L->child, (int)si.ssi_signo);
    }
  }
}

/* Nothing can be decided any more: refuse what waits, kill the command, exit 125. */
static int fail_closed(struct loop *L, const char *why) {
  fprintf(stderr, "%s: %s: stopping the command\n", BSH_NAME, why);
  /* Kill first: a target refused now could still act through fds it holds before it dies. */
  bsh_kill_descendants(L->listener);
  refuse_all_pending(L, EPERM);
  free(L->pending);
  return BSH_EXIT_BROKER_LOST;
}

void bsh_refuse_pending(int listener) {
  struct pollfd p = {listener, POLLIN, 0};
  while (g_notif && poll(&p, 1, 0) == 1 && (p.revents & POLLIN)) {
    memset(g_notif, 0, g_notif_size);
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, g_notif) != 0) {
      if (errno == EINTR || errno == ENOENT) continue;
      return;
    }
    respond(listener, ((struct seccomp_notif *)g_notif)->id, -EPERM, 0);
  }
}

int bsh_supervise(const struct bsh_config *cfg, int listener, pid_t child, int sigfd) {
  struct loop L = {.cfg = cfg, .listener = listener, .child = child, .ch = {.fd = cfg->broker_fd}};
  /*
   * Where the kernel has it (6.6+), a target entering a notified call hands its CPU to this
   * loop instead of waking it on another one: ≈ 2 µs a round trip rather than 20–50. An
   * older kernel refuses the flag (EINVAL, ENOTTY): the loop works the same, only slower.
   */
  (void)ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, 0);
  if (init_buffers() != 0) {
    fprintf(stderr, "%s: cannot size seccomp notifications\n", BSH_NAME);
    bsh_kill_descendants(listener);
    return BSH_EXIT_SETUP;
  }
  bsh_net_attach(&L.ch, listener);
  struct pollfd fds[3 + NET_FDS];
  while (!L.child_done) {
    /* Past a backlog of records the broker has not read, new calls wait for it (net-async.c). */
    fds[0] = (struct pollfd){L.listener_done || bsh_net_backlogged() ? -1 : listener, POLLIN, 0};
    fds[1] = (struct pollfd){cfg->broker_fd, (short)(POLLIN | (L.ch.out_len > L.ch.out_off ? POLLOUT : 0)), 0};
    fds[2] = (struct pollfd){sigfd, POLLIN, 0};
    size_t n_net = bsh_net_poll_fds(fds + 3, NET_FDS);
    if (poll(fds, 3 + n_net, bsh_net_timeout_ms()) < 0) {
      if (errno == EINTR) continue;
      return fail_closed(&L, "poll failed");
    }
    bsh_net_on_poll(fds + 3, n_net);
    if (fds[2].revents & POLLIN) on_signals(&L, sigfd);
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      int rc = bsh_channel_fill(&L.ch);
      struct bsh_answer a;
      int got;
      while ((got = bsh_channel_next(&L.ch, &a)) == 1)
        if (on_answer(&L, &a) != 0) return fail_closed(&L, "broker channel lost (answer for an unknown request)");
      if (got < 0) return fail_closed(&L, "broker channel lost (malformed answer)");
      if (rc == -EPIPE) return fail_closed(&L, "broker channel lost (end of stream)");
      if (rc < 0) return fail_closed(&L, "broker channel lost (read error)");
    }
    if (fds[0].revents & POLLIN) {
      if (on_notification(&L) != 0) return fail_closed(&L, "seccomp listener failed");
    } else if (fds[0].revents & (POLLHUP | POLLERR)) {
      L.listener_done = true; /* no filtered task is left */
    }
    if (bsh_channel_flush(&L.ch) < 0) return fail_closed(&L, "broker channel lost (write error)");
  }
  /* The command is over: whatever it left running goes too. */
  bsh_kill_descendants(listener);
  bsh_net_flush_records();
  refuse_all_pending(&L, EPERM);
  free(L.pending);
  if (WIFEXITED(L.child_status)) return WEXITSTATUS(L.child_status);
  if (WIFSIGNALED(L.child_status)) return 128 + WTERMSIG(L.child_status);
  return 1;
}
