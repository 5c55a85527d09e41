/*
 * libFuzzer target: the supervisor's side of the broker protocol
 * (native/sandbox/broker-channel.c, see native/sandbox/PROTOCOL.md).
 *  1. Any bytes from the broker: bsh_channel_next returns frames, "need more" or
 *     -EPROTO, exactly as a reference decoder of PROTOCOL.md says, never reads past
 *     what arrived, and every answer's paths are NUL-free and shorter than PATH_MAX.
 *  2. Answers encoded as the broker encodes them (src/sandbox/protocol.ts encodeAnswer)
 *     decode to the same id, errno and paths.
 *  3. Requests queued by bsh_channel_queue carry the call's fields and paths, laid out
 *     as PROTOCOL.md says (what the broker's decodeRequest reads).
 * Input: u8 mode, then either raw stream bytes (mode even) or fields and strings.
 */
#include "sandbox.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-input.h"

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

struct ref_answer {
  uint32_t id;
  int32_t err;
  const uint8_t *path, *to;
  size_t path_len, to_len;
};

/* PROTOCOL.md's answer frame, read independently: 1 frame, 0 need more, -1 malformed. */
static int ref_next(const uint8_t *p, size_t n, struct ref_answer *a, size_t *used) {
  if (n < 4) return 0;
  uint32_t len = le32(p);
  if (len < 12 || len > 16384) return -1;
  if (n - 4 < len) return 0;
  const uint8_t *body = p + 4;
  a->id = le32(body);
  a->err = (int32_t)le32(body + 4);
  size_t o = 8;
  const uint8_t **strs[2] = {&a->path, &a->to};
  size_t *lens[2] = {&a->path_len, &a->to_len};
  for (int i = 0; i < 2; i++) {
    if (o + 2 > len) return -1;
    size_t sl = le16(body + o);
    o += 2;
    if (sl > BSH_PATH_MAX - 1 || o + sl > len || memchr(body + o, 0, sl)) return -1;
    *strs[i] = body + o;
    *lens[i] = sl;
    o += sl;
  }
  /* An optional third string (aside). */
  if (o < len) {
    if (o + 2 > len) return -1;
    size_t sl = le16(body + o);
    o += 2;
    if (sl > BSH_PATH_MAX - 1 || o + sl > len || memchr(body + o, 0, sl)) return -1;
    o += sl;
  }
  if (o != len) return -1;
  *used = 4 + len;
  return 1;
}

static void decode_stream(const uint8_t *data, size_t size) {
  struct bsh_channel ch;
  memset(&ch, 0, sizeof ch);
  ch.fd = -1;
  ch.in = malloc(size ? size : 1); /* exactly what arrived: reading further is caught */
  if (!ch.in) abort();
  memcpy(ch.in, data, size);
  ch.in_len = ch.in_cap = size;
  size_t off = 0;
  struct bsh_answer *a = malloc(sizeof *a);
  if (!a) abort();
  for (;;) {
    struct ref_answer want;
    size_t used = 0;
    int expect = ref_next(data + off, size - off, &want, &used);
    int rc = bsh_channel_next(&ch, a);
    if (expect < 0) {
      FUZZ_CHECK(rc == -EPROTO, "rc=%d for a malformed frame at %zu", rc, off);
      break;
    }
    if (expect == 0) {
      FUZZ_CHECK(rc == 0, "rc=%d for an incomplete frame at %zu", rc, off);
      FUZZ_CHECK(ch.in_len == size - off, "consumed a partial frame");
      break;
    }
    FUZZ_CHECK(rc == 1, "rc=%d for a good frame at %zu", rc, off);
    FUZZ_CHECK(a->id == want.id && a->err == want.err, "id/errno differ");
    FUZZ_CHECK(a->path_len == want.path_len && strlen(a->path) == a->path_len &&
                   memcmp(a->path, want.path, want.path_len) == 0,
               "path differs");
    FUZZ_CHECK(a->to_len == want.to_len && strlen(a->to) == a->to_len && memcmp(a->to, want.to, want.to_len) == 0,
               "to differs");
    off += used;
    FUZZ_CHECK(ch.in_len == size - off, "in_len %zu after a frame, want %zu", ch.in_len, size - off);
    FUZZ_CHECK(size - off == 0 || memcmp(ch.in, data + off, size - off) == 0, "left-over bytes changed");
  }
  free(a);
  free(ch.in);
}

/* Truncated to what a path may hold. */
static char *bounded(struct fuzz_input *in) {
  char *s = fuzz_string(in);
  if (strlen(s) >= BSH_PATH_MAX) s[BSH_PATH_MAX - 1] = '\0';
  return s;
}

static void answer_round_trip(struct fuzz_input *in) {
  uint32_t id = fuzz_u32(in);
  int32_t err = (int32_t)fuzz_u32(in);
  char *path = bounded(in);
  char *to = bounded(in);
  size_t lp = strlen(path), lt = strlen(to);
  size_t body = 8 + 2 + lp + 2 + lt;
  uint8_t *frame = malloc(4 + body);
  if (!frame) abort();
  uint8_t *p = frame;
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(body >> (8 * i));
  for (int i = 0; i < 4; i++) p[4 + i] = (uint8_t)(id >> (8 * i));
  for (int i = 0; i < 4; i++) p[8 + i] = (uint8_t)((uint32_t)err >> (8 * i));
  p[12] = (uint8_t)lp;
  p[13] = (uint8_t)(lp >> 8);
  memcpy(p + 14, path, lp);
  p[14 + lp] = (uint8_t)lt;
  p[15 + lp] = (uint8_t)(lt >> 8);
  memcpy(p + 16 + lp, to, lt);

  struct bsh_channel ch;
  memset(&ch, 0, sizeof ch);
  ch.in = frame;
  ch.in_len = ch.in_cap = 4 + body;
  struct bsh_answer *a = malloc(sizeof *a);
  if (!a) abort();
  int rc = bsh_channel_next(&ch, a);
  if (body > 16384) {
    FUZZ_CHECK(rc == -EPROTO, "an oversized frame gave %d", rc);
  } else {
    FUZZ_CHECK(rc == 1 && a->id == id && a->err == err && strcmp(a->path, path) == 0 && strcmp(a->to, to) == 0 &&
                   ch.in_len == 0,
               "answer round trip failed: rc=%d", rc);
  }
  free(a);
  free(frame);
  free(path);
  free(to);
}

static void request_layout(struct fuzz_input *in) {
  struct bsh_call *c = calloc(1, sizeof *c);
  if (!c) abort();
  c->broker_id = fuzz_u32(in);
  c->op = (enum bsh_op)(1 + fuzz_u8(in) % 15);
  c->tid = (pid_t)fuzz_u32(in);
  c->tgid = (pid_t)fuzz_u32(in);
  c->flags = fuzz_u32(in);
  c->mode = fuzz_u32(in);
  c->follow = fuzz_u8(in) & 1;
  char *path = bounded(in), *to = bounded(in), *link = bounded(in);
  memcpy(c->path, path, strlen(path) + 1);
  memcpy(c->to, to, strlen(to) + 1);
  memcpy(c->link_target, link, strlen(link) + 1);

  struct bsh_channel ch;
  memset(&ch, 0, sizeof ch);
  /* Something already queued and half sent, as in the loop. */
  uint8_t queued = fuzz_u8(in) % 3;
  for (uint8_t i = 0; i < queued; i++) FUZZ_CHECK(bsh_channel_queue(&ch, c) == 0, "queue failed");
  size_t before = ch.out_len;
  FUZZ_CHECK(bsh_channel_queue(&ch, c) == 0, "queue failed");
  const uint8_t *f = ch.out + before;
  size_t lp = strlen(path), lt = strlen(to), ll = strlen(link);
  size_t total = 32 + 6 + lp + lt + ll;
  FUZZ_CHECK(ch.out_len - before == total, "frame size %zu want %zu", ch.out_len - before, total);
  FUZZ_CHECK(le32(f) == total - 4 && total - 4 <= 16384, "length field");
  FUZZ_CHECK(le32(f + 4) == c->broker_id && le16(f + 8) == (uint16_t)c->op && le16(f + 10) == 0, "id/op");
  FUZZ_CHECK(le32(f + 12) == (uint32_t)c->tid && le32(f + 16) == (uint32_t)c->tgid, "pid/tgid");
  FUZZ_CHECK(le32(f + 20) == c->flags && le32(f + 24) == c->mode && f[28] == (c->follow ? 1 : 0), "flags/mode/follow");
  FUZZ_CHECK(f[29] == 0 && f[30] == 0 && f[31] == 0, "reserved bytes");
  size_t o = 32;
  const char *strs[3] = {path, to, link};
  for (int i = 0; i < 3; i++) {
    size_t n = le16(f + o);
    FUZZ_CHECK(n == strlen(strs[i]) && memcmp(f + o + 2, strs[i], n) == 0, "string %d", i);
    o += 2 + n;
  }
  FUZZ_CHECK(o == total, "trailing bytes");
  free(ch.out);
  free(path);
  free(to);
  free(link);
  free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  uint8_t mode = data[0];
  if ((mode & 1) == 0) {
    decode_stream(data + 1, size - 1);
    return 0;
  }
  struct fuzz_input in = {data, size, 1};
  if (mode & 2) answer_round_trip(&in);
  else request_layout(&in);
  return 0;
}
