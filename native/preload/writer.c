/*
 * Requests are streamed to the socket through a small buffer: paths may be 4 KiB each,
 * and the hooks run on whatever stack the program gives them (a thread's, a signal
 * handler's), so nothing request-sized lives on it.
 */
#include "preload.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

int bp_w_flush(struct bp_writer *w) {
  size_t off = 0;
  while (!w->failed && off < w->len) {
    ssize_t n = send(w->fd, w->buf + off, w->len - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      w->failed = true;
      break;
    }
    off += (size_t)n;
  }
  w->len = 0;
  return w->failed ? -1 : 0;
}

void bp_w_bytes(struct bp_writer *w, const char *s, size_t n) {
  while (n > 0 && !w->failed) {
    if (w->len == sizeof w->buf && bp_w_flush(w) != 0) return;
    size_t room = sizeof w->buf - w->len;
    size_t take = n < room ? n : room;
    memcpy(w->buf + w->len, s, take);
    w->len += take;
    s += take;
    n -= take;
  }
}

void bp_w_str(struct bp_writer *w, const char *s) { bp_w_bytes(w, s, strlen(s)); }

void bp_w_uint(struct bp_writer *w, unsigned long v) {
  char digits[24];
  size_t i = sizeof digits;
  do {
    digits[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v > 0);
  bp_w_bytes(w, digits + i, sizeof digits - i);
}

void bp_w_json(struct bp_writer *w, const char *s) {
  static const char hex[] = "0123456789abcdef";
  bp_w_bytes(w, "\"", 1);
  const char *run = s;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    bp_w_bytes(w, run, (size_t)(s - run));
    char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
    if (c == '"' || c == '\\') {
      esc[1] = (char)c;
      bp_w_bytes(w, esc, 2);
    } else {
      bp_w_bytes(w, esc, 6);
    }
    run = s + 1;
  }
  bp_w_bytes(w, run, (size_t)(s - run));
  bp_w_bytes(w, "\"", 1);
}
