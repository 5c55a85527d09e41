/*
 * DNS messages (RFC 1035, with EDNS(0) of RFC 6891), as far as the DNS proxy needs
 * them: one question read out of a query, checked and written again from nothing but
 * its name, type and class (so no other field of the command's query, and no label a
 * name pattern would read differently, goes out), an error answer to a refused one, and
 * the A and AAAA records of an answer (the addresses of an allowed name).
 *
 * A name is accepted only in the letters, digits, `-` and `_` of host names: a label
 * holding a dot or a control byte would be one name to the pattern and another to the
 * resolver.
 */
#include "sandbox.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

#define HEADER 12
#define TYPE_A 1
#define TYPE_AAAA 28
#define TYPE_OPT 41
#define CLASS_IN 1
#define FLAG_QR 0x8000
#define FLAG_RD 0x0100
#define FLAG_RA 0x0080
#define FLAG_CD 0x0010
#define OPCODE_MASK 0x7800
#define EDNS_UDP_SIZE 1232

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static void put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

static bool host_char(uint8_t ch) { return isalnum(ch) || ch == '-' || ch == '_'; }

/* An uncompressed name at msg[*at] as lower-case dotted text ("" for the root). */
static int read_name(const uint8_t *msg, size_t len, size_t *at, char *out, size_t cap) {
  size_t o = 0, p = *at;
  for (;;) {
    if (p >= len) return -EINVAL;
    uint8_t n = msg[p++];
    if (n == 0) break;
    if (n > 63 || p + n > len || o + n + 2 > cap) return -EINVAL;
    if (o > 0) out[o++] = '.';
    for (uint8_t i = 0; i < n; i++) {
      if (!host_char(msg[p + i])) return -EINVAL;
      out[o++] = (char)tolower(msg[p + i]);
    }
    p += n;
  }
  out[o] = '\0';
  *at = p;
  return 0;
}

/* Skips a possibly compressed name. */
static int skip_name(const uint8_t *msg, size_t len, size_t *at) {
  size_t p = *at;
  for (int labels = 0; labels < 128; labels++) {
    if (p >= len) return -EINVAL;
    uint8_t n = msg[p];
    if ((n & 0xc0) == 0xc0) {
      if (p + 2 > len) return -EINVAL;
      *at = p + 2;
      return 0;
    }
    if (n > 63) return -EINVAL;
    p += 1 + n;
    if (n == 0) {
      *at = p;
      return 0;
    }
  }
  return -EINVAL;
}

int bsh_dns_parse_query(const uint8_t *msg, size_t len, struct bsh_dns_question *q) {
  memset(q, 0, sizeof *q);
  if (len < HEADER) return -EINVAL;
  q->id = get16(msg);
  q->flags = get16(msg + 2);
  if ((q->flags & FLAG_QR) || (q->flags & OPCODE_MASK)) return -EINVAL;
  uint16_t qd = get16(msg + 4), an = get16(msg + 6), ns = get16(msg + 8), ar = get16(msg + 10);
  if (qd != 1 || an != 0 || ns != 0 || ar > 1) return -EINVAL;
  size_t at = HEADER;
  if (read_name(msg, len, &at, q->name, sizeof q->name) != 0 || q->name[0] == '\0' || at + 4 > len) return -EINVAL;
  q->type = get16(msg + at);
  q->qclass = get16(msg + at + 2);
  at += 4;
  if (q->qclass != CLASS_IN) return -EINVAL;
  if (ar == 1) {
    /* Only an OPT record, on the root name. */
    if (at + 11 > len || msg[at] != 0 || get16(msg + at + 1) != TYPE_OPT) return -EINVAL;
    q->edns = true;
    q->edns_size = get16(msg + at + 3);
    q->dnssec_ok = (get32(msg + at + 5) & 0x8000) != 0;
    at += 11 + get16(msg + at + 9);
  }
  return at == len ? 0 : -EINVAL;
}

static size_t put_question(const struct bsh_dns_question *q, uint8_t *out, size_t cap, size_t at) {
  const char *p = q->name;
  while (*p) {
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    if (n == 0 || n > 63 || at + 1 + n + 5 > cap) return 0;
    out[at++] = (uint8_t)n;
    memcpy(out + at, p, n);
    at += n;
    p += n + (dot ? 1 : 0);
  }
  if (at + 5 > cap) return 0;
  out[at++] = 0;
  put16(out + at, q->type);
  put16(out + at + 2, q->qclass);
  return at + 4;
}

size_t bsh_dns_build_query(const struct bsh_dns_question *q, uint16_t id, uint8_t *out, size_t cap) {
  if (cap < HEADER) return 0;
  memset(out, 0, HEADER);
  put16(out, id);
  put16(out + 2, (uint16_t)(FLAG_RD | (q->flags & FLAG_CD)));
  put16(out + 4, 1);
  put16(out + 10, q->edns ? 1 : 0);
  size_t at = put_question(q, out, cap, HEADER);
  if (at == 0 || !q->edns) return at;
  if (at + 11 > cap) return 0;
  out[at] = 0;
  put16(out + at + 1, TYPE_OPT);
  put16(out + at + 3, EDNS_UDP_SIZE);
  memset(out + at + 5, 0, 6);
  if (q->dnssec_ok) out[at + 7] = 0x80;
  return at + 11;
}

size_t bsh_dns_build_error(const struct bsh_dns_question *q, int rcode, uint8_t *out, size_t cap) {
  if (cap < HEADER) return 0;
  memset(out, 0, HEADER);
  put16(out, q->id);
  put16(out + 2, (uint16_t)(FLAG_QR | (q->flags & FLAG_RD) | FLAG_RA | (rcode & 0xf)));
  put16(out + 4, 1);
  return put_question(q, out, cap, HEADER);
}

void bsh_dns_answers(const uint8_t *msg, size_t len, void (*learn)(const struct bsh_ip *ip, uint32_t ttl, void *arg),
                     void *arg) {
  if (len < HEADER || !(get16(msg + 2) & FLAG_QR) || (get16(msg + 2) & 0xf) != 0) return;
  uint16_t qd = get16(msg + 4), an = get16(msg + 6);
  size_t at = HEADER;
  for (uint16_t i = 0; i < qd; i++) {
    if (skip_name(msg, len, &at) != 0 || at + 4 > len) return;
    at += 4;
  }
  for (uint16_t i = 0; i < an; i++) {
    if (skip_name(msg, len, &at) != 0 || at + 10 > len) return;
    uint16_t type = get16(msg + at), qclass = get16(msg + at + 2), rdlen = get16(msg + at + 8);
    uint32_t ttl = get32(msg + at + 4);
    at += 10;
    if (at + rdlen > len) return;
    struct bsh_ip ip = {{0}};
    if (qclass == CLASS_IN && type == TYPE_A && rdlen == 4) {
      ip.b[10] = ip.b[11] = 0xff;
      memcpy(ip.b + 12, msg + at, 4);
      learn(&ip, ttl, arg);
    } else if (qclass == CLASS_IN && type == TYPE_AAAA && rdlen == 16) {
      memcpy(ip.b, msg + at, 16);
      learn(&ip, ttl, arg);
    }
    at += rdlen;
  }
}
