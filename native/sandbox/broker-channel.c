/*
 * The framed binary protocol to the broker (PROTOCOL.md). Requests are queued and
 * written as the socket accepts them; answers are parsed strictly, and anything
 * malformed is a protocol error the caller treats as a lost broker (fail closed).
 * The socket is non-blocking: the notification loop never waits on the broker.
 */
#include "sandbox.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define REQ_HEADER 32 /* including the length field */
#define ANSWER_MIN 12 /* id + errno + two empty strings, after the length field */
#define FRAME_MAX 16384

static int reserve(uint8_t **buf, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : 4096;
  while (n < need) n *= 2;
  uint8_t *p = realloc(*buf, n);
  if (!p) return -ENOMEM;
  *buf = p;
  *cap = n;
  return 0;
}

static void put_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static size_t put_str(uint8_t *p, const char *s) {
  size_t n = strlen(s);
  put_u16(p, (uint16_t)n);
  memcpy(p + 2, s, n);
  return 2 + n;
}

/* Room for a `total`-byte frame at the end of the output, its header zeroed and its length, id and op set; NULL without memory. */
static uint8_t *new_frame(struct bsh_channel *ch, size_t total, uint32_t id, uint16_t op) {
  if (ch->out_off > 0 && ch->out_off == ch->out_len) ch->out_off = ch->out_len = 0;
  if (reserve(&ch->out, &ch->out_cap, ch->out_len + total) != 0) return NULL;
  uint8_t *p = ch->out + ch->out_len;
  memset(p, 0, REQ_HEADER);
  put_u32(p, (uint32_t)(total - 4));
  put_u32(p + 4, id);
  put_u16(p + 8, op);
  ch->out_len += total;
  return p;
}

int bsh_channel_queue(struct bsh_channel *ch, const struct bsh_call *c) {
  /* A refusal report: errno in `flags`, the syscall number in `mode`, its text in the third string. */
  bool refused = c->op == BSH_OP_REFUSED;
  const char *third = refused ? c->refusal : c->link_target;
  size_t lp = strlen(c->path), lt = strlen(c->to), ll = strlen(third);
  if (lp >= BSH_PATH_MAX || lt >= BSH_PATH_MAX || ll >= BSH_PATH_MAX) return -ENAMETOOLONG;
  uint8_t *p = new_frame(ch, REQ_HEADER + 6 + lp + lt + ll, c->broker_id, (uint16_t)c->op);
  if (!p) return -ENOMEM;
  put_u32(p + 12, (uint32_t)c->tid);
  put_u32(p + 16, (uint32_t)c->tgid);
  put_u32(p + 20, refused ? (uint32_t)c->err : c->flags);
  put_u32(p + 24, refused ? (uint32_t)c->nr : c->mode);
  p[28] = !refused && c->follow ? 1 : 0;
  size_t o = REQ_HEADER;
  o += put_str(p + o, c->path);
  o += put_str(p + o, c->to);
  put_str(p + o, third);
  return 0;
}

/* The notice that allowed request `id` is over (performed or dropped): the header and three empty strings. */
int bsh_channel_queue_performed(struct bsh_channel *ch, uint32_t id) {
  uint8_t *p = new_frame(ch, REQ_HEADER + 6, id, (uint16_t)BSH_OP_PERFORMED);
  if (!p) return -ENOMEM;
  memset(p + REQ_HEADER, 0, 6);
  return 0;
}

int bsh_channel_queue_frame(struct bsh_channel *ch, uint16_t op, uint32_t id, pid_t tid, pid_t tgid, uint32_t flags,
                            uint32_t mode, const char *s1, const char *s2, const char *s3) {
  size_t l1 = strlen(s1), l2 = strlen(s2), l3 = strlen(s3);
  if (l1 >= BSH_PATH_MAX || l2 >= BSH_PATH_MAX || l3 >= BSH_PATH_MAX) return -ENAMETOOLONG;
  uint8_t *p = new_frame(ch, REQ_HEADER + 6 + l1 + l2 + l3, id, op);
  if (!p) return -ENOMEM;
  put_u32(p + 12, (uint32_t)tid);
  put_u32(p + 16, (uint32_t)tgid);
  put_u32(p + 20, flags);
  put_u32(p + 24, mode);
  size_t o = REQ_HEADER;
  o += put_str(p + o, s1);
  o += put_str(p + o, s2);
  put_str(p + o, s3);
  return 0;
}

size_t bsh_channel_unsent(const struct bsh_channel *ch) { return ch->out_len - ch->out_off; }

/* Writes what the socket takes now. 0, or -errno when the broker is gone. */
int bsh_channel_flush(struct bsh_channel *ch) {
  while (ch->out_off < ch->out_len) {
    ssize_t n = send(ch->fd, ch->out + ch->out_off, ch->out_len - ch->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n <= 0) return n < 0 ? -errno : -EPIPE;
    ch->out_off += (size_t)n;
  }
  ch->out_off = ch->out_len = 0;
  return 0;
}

/*
 * Reads what is available, to EAGAIN. 0, or -EPIPE at end of stream, or -errno. Reading
 * on after a short read costs one recv per answer, but a broker that answered and then
 * died is seen as gone here, before the next request is written to it.
 */
int bsh_channel_fill(struct bsh_channel *ch) {
  for (;;) {
    int rc = reserve(&ch->in, &ch->in_cap, ch->in_len + 4096);
    if (rc != 0) return rc;
    ssize_t n = recv(ch->fd, ch->in + ch->in_len, ch->in_cap - ch->in_len, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n < 0) return -errno;
    if (n == 0) return -EPIPE;
    ch->in_len += (size_t)n;
  }
}

static int take_str(const uint8_t *p, size_t len, size_t *o, char *out, size_t *out_len) {
  if (*o + 2 > len) return -EPROTO;
  size_t n = get_u16(p + *o);
  *o += 2;
  if (n >= BSH_PATH_MAX || *o + n > len || memchr(p + *o, '\0', n)) return -EPROTO;
  memcpy(out, p + *o, n);
  out[n] = '\0';
  *out_len = n;
  *o += n;
  return 0;
}

/* 1 and an answer, 0 when more bytes are needed, -EPROTO for a malformed frame. */
int bsh_channel_next(struct bsh_channel *ch, struct bsh_answer *a) {
  if (ch->in_len < 4) return 0;
  uint32_t len = get_u32(ch->in);
  if (len < ANSWER_MIN || len > FRAME_MAX) return -EPROTO;
  if (ch->in_len < 4 + (size_t)len) return 0;
  const uint8_t *p = ch->in + 4;
  a->id = get_u32(p);
  a->err = (int32_t)get_u32(p + 4);
  size_t o = 8;
  if (take_str(p, len, &o, a->path, &a->path_len) != 0 || take_str(p, len, &o, a->to, &a->to_len) != 0)
    return -EPROTO;
  /* The third string is optional: an answer without it moves nothing aside. */
  a->aside[0] = '\0';
  a->aside_len = 0;
  if (o < len && take_str(p, len, &o, a->aside, &a->aside_len) != 0) return -EPROTO;
  if (o != len) return -EPROTO;
  memmove(ch->in, ch->in + 4 + len, ch->in_len - 4 - len);
  ch->in_len -= 4 + len;
  return 1;
}
