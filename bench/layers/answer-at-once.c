/*
 * The cheapest broker the supervisor can have: it allows every request the moment it
 * arrives, on the path it names (native/sandbox/PROTOCOL.md). Run as
 *   answer-at-once LAUNCHER COMMAND...
 * it starts the launcher with its channel on fd 3, so the supervisor's own cost can be
 * told apart from the broker's. A bench tool only: it checks nothing.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define OP_RENAME 5
#define OP_LINK 6
#define OP_REFUSED 16
#define OP_PERFORMED 17

static uint16_t u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* The answer to one request body (after its length field); returns the frame's size. */
static size_t answer(const uint8_t *body, uint8_t *out) {
  uint16_t op = u16(body + 4);
  const uint8_t *path = body + 28;
  uint16_t path_len = u16(path);
  const uint8_t *to = path + 2 + path_len;
  uint16_t to_len = op == OP_RENAME || op == OP_LINK ? u16(to) : 0;
  if (op == OP_REFUSED) path_len = 0; /* an acknowledgement: its paths are ignored */
  size_t o = 4;
  memcpy(out + o, body, 4); /* the request's id */
  put32(out + o + 4, 0);
  o += 8;
  put16(out + o, path_len);
  memcpy(out + o + 2, path + 2, path_len);
  o += 2 + path_len;
  put16(out + o, to_len);
  memcpy(out + o + 2, to + 2, to_len);
  o += 2 + to_len;
  put32(out, (uint32_t)(o - 4));
  return o;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: answer-at-once LAUNCHER COMMAND...\n");
    return 2;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 2;
  pid_t pid = fork();
  if (pid == 0) {
    if (dup2(sv[1], 3) != 3) _exit(126);
    char *args[argc + 4];
    int n = 0;
    args[n++] = argv[1];
    args[n++] = "--broker-fd";
    args[n++] = "3";
    args[n++] = "--";
    for (int i = 2; i < argc; i++) args[n++] = argv[i];
    args[n] = NULL;
    execv(argv[1], args);
    _exit(126);
  }
  close(sv[1]);
  static uint8_t in[1 << 16], out[3 * 4096 + 64];
  size_t have = 0;
  long requests = 0;
  for (;;) {
    ssize_t got = read(sv[0], in + have, sizeof in - have);
    if (got <= 0) break;
    have += (size_t)got;
    size_t off = 0;
    while (have - off >= 4 && have - off >= 4 + (size_t)u32(in + off)) {
      /* A performed notice is never answered: nothing here waits on it. */
      if (u16(in + off + 8) != OP_PERFORMED) {
        size_t n = answer(in + off + 4, out);
        if (write(sv[0], out, n) != (ssize_t)n) return 2;
        requests++;
      }
      off += 4 + u32(in + off);
    }
    memmove(in, in + off, have - off);
    have -= off;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  fprintf(stderr, "answer-at-once: %ld requests\n", requests);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
