/*
 * The supervisor's glob matcher: it runs the programs src/plugins/file-safety/glob.ts
 * compiles, which the lease carries, over the path's UTF-16 code units, as glob.ts does
 * (so `?` is one code unit there and here alike). One pass over the path, a set of
 * states, no backtracking: time linear in the path's length. The same table of cases
 * (test/fixtures/lease/glob-vectors.json) checks both.
 */
#include "sandbox.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { OP_CHAR, OP_ANY, OP_ANY_SLASH, OP_CLASS, OP_SPLIT, OP_JUMP, OP_MATCH };

#define SLASH 0x2f

ssize_t bsh_utf16_of(const char *s, uint16_t *out, size_t cap) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n = 0;
  while (*p) {
    uint32_t cp;
    int extra;
    if (*p < 0x80) cp = *p, extra = 0;
    else if ((*p & 0xe0) == 0xc0) cp = *p & 0x1f, extra = 1;
    else if ((*p & 0xf0) == 0xe0) cp = *p & 0x0f, extra = 2;
    else if ((*p & 0xf8) == 0xf0) cp = *p & 0x07, extra = 3;
    else return -1;
    p++;
    for (int i = 0; i < extra; i++, p++) {
      if ((*p & 0xc0) != 0x80) return -1;
      cp = (cp << 6) | (*p & 0x3f);
    }
    if (cp > 0xffff) {
      if (n + 2 > cap) return -1;
      cp -= 0x10000;
      out[n++] = (uint16_t)(0xd800 + (cp >> 10));
      out[n++] = (uint16_t)(0xdc00 + (cp & 0x3ff));
    } else {
      if (n + 1 > cap) return -1;
      out[n++] = (uint16_t)cp;
    }
  }
  return (ssize_t)n;
}

/* The closures glob.ts works out: for each instruction, the testing ones reachable through splits and jumps. */
int bsh_glob_finish(struct bsh_glob_prog *p) {
  p->cl_start = calloc(p->n + 1, sizeof *p->cl_start);
  p->cl_match = calloc(p->n ? p->n : 1, 1);
  size_t cap = 16, len = 0;
  p->cl_list = malloc(cap * sizeof *p->cl_list);
  int32_t *stack = malloc((p->n * 2 + 2) * sizeof *stack);
  uint8_t *seen = malloc(p->n ? p->n : 1);
  if (!p->cl_start || !p->cl_match || !p->cl_list || !stack || !seen) {
    free(stack);
    free(seen);
    return -ENOMEM;
  }
  for (size_t pc = 0; pc < p->n; pc++) {
    p->cl_start[pc] = (int32_t)len;
    memset(seen, 0, p->n);
    size_t top = 0;
    stack[top++] = (int32_t)pc;
    while (top > 0) {
      int32_t at = stack[--top];
      if (at < 0 || (size_t)at >= p->n || seen[at]) continue;
      seen[at] = 1;
      uint8_t op = p->ops[at];
      if (op == OP_SPLIT) {
        stack[top++] = p->b[at];
        stack[top++] = p->a[at];
      } else if (op == OP_JUMP) {
        stack[top++] = p->a[at];
      } else if (op == OP_MATCH) {
        p->cl_match[pc] = 1;
      } else {
        if (len == cap) {
          int32_t *grown = realloc(p->cl_list, (cap *= 2) * sizeof *grown);
          if (!grown) {
            free(stack);
            free(seen);
            return -ENOMEM;
          }
          p->cl_list = grown;
        }
        p->cl_list[len++] = at;
      }
    }
  }
  p->cl_start[p->n] = (int32_t)len;
  free(stack);
  free(seen);
  return 0;
}

void bsh_glob_free(struct bsh_glob_prog *p) {
  free(p->ops);
  free(p->a);
  free(p->b);
  for (size_t i = 0; i < p->n_classes; i++) free(p->classes[i].ranges);
  free(p->classes);
  for (size_t i = 0; i < p->n_needs; i++) free(p->needs[i]);
  free(p->needs);
  free(p->need_len);
  free(p->cl_start);
  free(p->cl_list);
  free(p->cl_match);
}

static bool contains(const uint16_t *hay, size_t n, const uint16_t *needle, size_t m) {
  if (m == 0) return true;
  for (size_t i = 0; i + m <= n; i++)
    if (hay[i] == needle[0] && memcmp(hay + i, needle, m * sizeof *hay) == 0) return true;
  return false;
}

static bool in_class(const struct bsh_glob_class *c, uint16_t unit) {
  if (unit == SLASH) return false;
  bool found = false;
  for (size_t i = 0; i + 1 < c->n_ranges && !found; i += 2) found = c->ranges[i] <= unit && unit <= c->ranges[i + 1];
  return found != c->negated;
}

/* Adds the states `pc` leads to; `gen` marks what the list holds already. */
static size_t follow(const struct bsh_glob_prog *p, int32_t *list, size_t len, int32_t pc, uint32_t *marks, uint32_t gen) {
  for (int32_t k = p->cl_start[pc]; k < p->cl_start[pc + 1]; k++) {
    int32_t state = p->cl_list[k];
    if (marks[state] == gen) continue;
    marks[state] = gen;
    list[len++] = state;
  }
  return len;
}

bool bsh_glob_within(const struct bsh_glob_prog *p, const uint16_t *units, size_t n) {
  if (p->n == 0) return false;
  for (size_t i = 0; i < p->n_needs; i++)
    if (!contains(units, n, p->needs[i], p->need_len[i])) return false;
  int32_t small_cur[64], small_next[64];
  uint32_t small_marks[64];
  int32_t *cur = small_cur, *next = small_next;
  uint32_t *marks = small_marks;
  bool heap = p->n > 64;
  if (heap) {
    cur = malloc(p->n * sizeof *cur);
    next = malloc(p->n * sizeof *next);
    marks = malloc(p->n * sizeof *marks);
    if (!cur || !next || !marks) {
      free(cur);
      free(next);
      free(marks);
      return true; /* no memory: count it as a match, which sends the change the round trip */
    }
  }
  memset(marks, 0, p->n * sizeof *marks);
  uint32_t gen = 1;
  size_t cur_len = follow(p, cur, 0, 0, marks, gen);
  bool absolute = n > 0 && units[0] == SLASH, result = false;
  for (size_t i = 0; i < n; i++) {
    uint16_t unit = units[i];
    gen++;
    bool matched = false;
    size_t next_len = 0;
    for (size_t k = 0; k < cur_len; k++) {
      int32_t pc = cur[k];
      uint8_t op = p->ops[pc];
      bool passes = op == OP_CHAR    ? p->a[pc] == unit
                    : op == OP_ANY   ? unit != SLASH
                    : op == OP_ANY_SLASH ? true
                    : op == OP_CLASS ? (p->a[pc] >= 0 && (size_t)p->a[pc] < p->n_classes && in_class(&p->classes[p->a[pc]], unit))
                                     : false;
      if (!passes) continue;
      next_len = follow(p, next, next_len, pc + 1, marks, gen);
      if (p->cl_match[pc + 1]) matched = true;
    }
    int32_t *swap = cur;
    cur = next;
    next = swap;
    cur_len = next_len;
    size_t consumed = i + 1;
    bool boundary = consumed == n || (absolute && consumed == 1) || units[consumed] == SLASH;
    if (matched && boundary) {
      result = true;
      break;
    }
    if (cur_len == 0) break;
  }
  if (heap) {
    free(cur);
    free(next);
    free(marks);
  }
  return result;
}
