/*
 * A tiny reader over a fuzzer's input, shared by the harnesses: numbers and strings are
 * taken from the front; what is left is the "rest". Reading past the end yields zeros,
 * so every input is valid for every harness.
 */
#ifndef BSH_FUZZ_INPUT_H
#define BSH_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fuzz_input {
  const uint8_t *data;
  size_t size;
  size_t at;
};

static inline uint8_t fuzz_u8(struct fuzz_input *in) { return in->at < in->size ? in->data[in->at++] : 0; }

static inline uint16_t fuzz_u16(struct fuzz_input *in) {
  uint16_t lo = fuzz_u8(in);
  return (uint16_t)(lo | ((uint16_t)fuzz_u8(in) << 8));
}

static inline uint32_t fuzz_u32(struct fuzz_input *in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)fuzz_u8(in) << (8 * i);
  return v;
}

static inline uint64_t fuzz_u64(struct fuzz_input *in) {
  uint64_t lo = fuzz_u32(in);
  return lo | ((uint64_t)fuzz_u32(in) << 32);
}

/*
 * The next NUL-terminated piece (or the rest of the input), copied into a fresh
 * allocation of exactly its size plus the NUL, so the sanitizer sees any over-read.
 */
static inline char *fuzz_string(struct fuzz_input *in) {
  size_t start = in->at;
  while (in->at < in->size && in->data[in->at] != '\0') in->at++;
  size_t n = in->at - start;
  if (in->at < in->size) in->at++; /* the NUL */
  char *s = malloc(n + 1);
  if (!s) abort();
  memcpy(s, in->data + start, n);
  s[n] = '\0';
  return s;
}

/* A failed property: say which and stop, so libFuzzer saves the input as a crash. */
#define FUZZ_CHECK(cond, ...)                                                    \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: property failed: %s\n  ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                              \
      fputc('\n', stderr);                                                       \
      abort();                                                                   \
    }                                                                            \
  } while (0)

#endif
