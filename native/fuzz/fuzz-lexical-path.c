/*
 * libFuzzer target: the supervisor's lexical path handling (native/sandbox/path-resolve.c).
 * Every path the supervisor sends to the broker, and every Landlock-guarded fast path
 * it takes, goes through these functions, so each is checked against an independent
 * reference written here:
 *   bsh_lexical_join   — equals a plain split/filter/join normaliser; idempotent; the
 *                        result is absolute, without "//", "/./" or a trailing slash;
 *                        -ENAMETOOLONG exactly when the result does not fit `cap`;
 *   bsh_utf8_valid     — equals the Unicode well-formed table (Table 3-7);
 *   bsh_has_dotdot     — true exactly when a component is "..";
 *   bsh_path_under     — component-wise prefix, never "/root2" under "/root";
 *   bsh_split_parent   — parent + "/" + name gives the path back;
 *   bsh_rewrite_proc_self — "/proc/self…" becomes "/proc/<tgid>…" and fits.
 * Input: u8 cap selector, u32 tgid, u32 tid, then base NUL raw NUL dir NUL utf8-bytes.
 */
#include "sandbox.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-input.h"

/* Joined form before normalising, as the implementation builds it; NULL if too long. */
static char *ref_join(const char *base, const char *raw) {
  size_t need = strlen(base) + strlen(raw) + 2;
  if (need > 2 * BSH_PATH_MAX + 2) return NULL;
  char *joined = malloc(need);
  if (!joined) abort();
  if (raw[0] == '/') snprintf(joined, need, "%s", raw);
  else snprintf(joined, need, "%s/%s", base, raw);
  return joined;
}

/* The reference normaliser: split on "/", drop empty and "." components, join. */
static char *ref_normalise(const char *joined) {
  size_t n = strlen(joined);
  char *out = malloc(n + 2);
  if (!out) abort();
  size_t o = 0;
  const char *p = joined;
  while (*p) {
    const char *end = strchr(p, '/');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > 0 && !(len == 1 && p[0] == '.')) {
      out[o++] = '/';
      memcpy(out + o, p, len);
      o += len;
    }
    p += len;
    if (*p == '/') p++;
  }
  if (o == 0) out[o++] = '/';
  out[o] = '\0';
  return out;
}

static bool ref_has_dotdot_component(const char *path) {
  const char *p = path;
  for (;;) {
    const char *end = strchr(p, '/');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == 2 && p[0] == '.' && p[1] == '.') return true;
    if (!end) return false;
    p = end + 1;
  }
}

/* Unicode 15, Table 3-7: well-formed UTF-8 byte sequences. */
static bool ref_utf8(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    unsigned lo = 0x80, hi = 0xBF;
    size_t extra;
    if (c <= 0x7F) {
      i++;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    for (size_t k = 1; k <= extra; k++) {
      if (i + k >= n) return false;
      unsigned b = s[i + k];
      unsigned l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
      if (b < l || b > h) return false;
    }
    i += extra + 1;
  }
  return true;
}

static void check_lexical(const char *base, const char *raw, size_t cap) {
  char *out = malloc(cap); /* exactly cap bytes: writing past them is caught */
  if (!out) abort();
  bool slash = false;
  int rc = bsh_lexical_join(base, raw, out, cap, &slash);

  size_t rl = strlen(raw);
  bool want_slash = (rl > 1 && raw[rl - 1] == '/') || strcmp(raw, ".") == 0 || (rl > 1 && strcmp(raw + rl - 2, "/.") == 0);
  FUZZ_CHECK(slash == want_slash, "raw=\"%s\" slash=%d", raw, slash);

  char *joined = ref_join(base, raw);
  char *want = joined ? ref_normalise(joined) : NULL;
  if (!want || strlen(want) >= cap) {
    FUZZ_CHECK(rc == -ENAMETOOLONG, "rc=%d for a result that does not fit (cap %zu)", rc, cap);
  } else {
    FUZZ_CHECK(rc == 0, "rc=%d, want \"%s\"", rc, want);
    FUZZ_CHECK(strcmp(out, want) == 0, "got \"%s\" want \"%s\"", out, want);
    FUZZ_CHECK(out[0] == '/', "not absolute: \"%s\"", out);
    FUZZ_CHECK(strstr(out, "//") == NULL, "double slash: \"%s\"", out);
    FUZZ_CHECK(strstr(out, "/./") == NULL, "dot component: \"%s\"", out);
    size_t ol = strlen(out);
    FUZZ_CHECK(ol == 1 || (out[ol - 1] != '/' && strcmp(out + ol - 2, "/.") != 0), "trailing: \"%s\"", out);

    /* Idempotent, and the same from any base once absolute. */
    char *again = malloc(cap);
    if (!again) abort();
    bool slash2 = true;
    FUZZ_CHECK(bsh_lexical_join("/elsewhere", out, again, cap, &slash2) == 0, "re-join failed: \"%s\"", out);
    FUZZ_CHECK(strcmp(again, out) == 0 && !slash2, "not idempotent: \"%s\" -> \"%s\"", out, again);
    free(again);

    FUZZ_CHECK(bsh_has_dotdot(out) == ref_has_dotdot_component(out), "has_dotdot wrong for \"%s\"", out);

    char *parent = malloc(BSH_PATH_MAX);
    if (!parent) abort();
    const char *name = NULL;
    int sp = bsh_split_parent(out, parent, BSH_PATH_MAX, &name);
    const char *last = strrchr(out, '/') + 1;
    if (strcmp(out, "/") == 0 || strcmp(last, "..") == 0) {
      FUZZ_CHECK(sp == -EINVAL, "split_parent(\"%s\") = %d", out, sp);
    } else {
      FUZZ_CHECK(sp == 0, "split_parent(\"%s\") = %d", out, sp);
      FUZZ_CHECK(name == last && strchr(name, '/') == NULL, "name of \"%s\"", out);
      size_t pl = strlen(parent);
      bool root_parent = strcmp(parent, "/") == 0;
      FUZZ_CHECK(strncmp(out, parent, pl) == 0 && (root_parent ? name == out + 1 : out[pl] == '/' && name == out + pl + 1),
                 "split \"%s\" into \"%s\" + \"%s\"", out, parent, name);
    }
    free(parent);
  }
  free(want);
  free(joined);
  free(out);
}

static void check_under(const char *path, const char *dir_raw) {
  /* `dir` as callers give it: absolute, normalised, no trailing slash. */
  char *dir = ref_normalise(dir_raw);
  size_t n = strlen(dir);
  bool want = strcmp(dir, "/") == 0 ? path[0] == '/'
                                    : strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
  FUZZ_CHECK(bsh_path_under(path, dir) == want, "path_under(\"%s\", \"%s\")", path, dir);
  /* Never "/root2" under "/root". */
  if (strcmp(dir, "/") != 0 && bsh_path_under(path, dir))
    FUZZ_CHECK(path[n] == '\0' || path[n] == '/', "prefix without a boundary: \"%s\" under \"%s\"", path, dir);
  free(dir);
}

static void check_proc_self(const char *raw, pid_t tgid, pid_t tid) {
  char *path = malloc(BSH_PATH_MAX);
  if (!path) abort();
  snprintf(path, BSH_PATH_MAX, "%s", raw);
  char before[BSH_PATH_MAX];
  memcpy(before, path, BSH_PATH_MAX);
  bool self = strncmp(path, "/proc/self", 10) == 0 && (path[10] == '\0' || path[10] == '/');
  bool thread = strncmp(path, "/proc/thread-self", 17) == 0 && (path[17] == '\0' || path[17] == '/');
  FUZZ_CHECK(bsh_mentions_proc_self(path) == (self || thread), "mentions_proc_self(\"%s\")", path);
  int rc = bsh_rewrite_proc_self(path, BSH_PATH_MAX, tgid, tid);
  if (!self && !thread) {
    FUZZ_CHECK(rc == 0 && strcmp(path, before) == 0, "changed a path without /proc/self: \"%s\"", before);
  } else {
    char want[3 * BSH_PATH_MAX];
    if (self) snprintf(want, sizeof want, "/proc/%d%s", (int)tgid, before + 10);
    else snprintf(want, sizeof want, "/proc/%d/task/%d%s", (int)tgid, (int)tid, before + 17);
    if (strlen(want) >= BSH_PATH_MAX) {
      FUZZ_CHECK(rc == -ENAMETOOLONG && strcmp(path, before) == 0, "rc=%d for \"%s\"", rc, want);
    } else {
      FUZZ_CHECK(rc == 0 && strcmp(path, want) == 0, "got \"%s\" want \"%s\"", path, want);
      FUZZ_CHECK(!bsh_mentions_proc_self(path), "still /proc/self: \"%s\"", path);
    }
  }
  free(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fuzz_input in = {data, size, 0};
  uint8_t sel = fuzz_u8(&in);
  /* Callers pass BSH_PATH_MAX; small capacities exercise the boundary (at least 2: "/" + NUL). */
  size_t cap = sel < 128 ? BSH_PATH_MAX : 2 + (size_t)(fuzz_u16(&in) % (BSH_PATH_MAX - 1));
  pid_t tgid = (pid_t)(fuzz_u32(&in) & 0x3fffffff);
  pid_t tid = (pid_t)(fuzz_u32(&in) & 0x3fffffff);
  char *base = fuzz_string(&in);
  char *raw = fuzz_string(&in);
  char *dir = fuzz_string(&in);
  const uint8_t *rest = in.data + in.at;
  size_t rest_len = in.size - in.at;

  /* The cwd or dirfd a relative path starts from is always absolute. */
  char *abs_base = malloc(strlen(base) + 2);
  if (!abs_base) abort();
  snprintf(abs_base, strlen(base) + 2, "%s%s", base[0] == '/' ? "" : "/", base);

  check_lexical(abs_base, raw, cap);
  check_under(raw, dir);
  if (raw[0] == '/') check_proc_self(raw, tgid, tid);

  /* UTF-8: the bytes after the strings, as a C string (up to the first NUL). */
  char *text = malloc(rest_len + 1);
  if (!text) abort();
  memcpy(text, rest, rest_len);
  text[rest_len] = '\0';
  size_t tl = strlen(text);
  FUZZ_CHECK(bsh_utf8_valid(text) == ref_utf8((const unsigned char *)text, tl), "utf8_valid disagrees (%zu bytes)", tl);
  FUZZ_CHECK(bsh_utf8_valid(raw) == ref_utf8((const unsigned char *)raw, strlen(raw)), "utf8_valid disagrees on raw");

  free(text);
  free(abs_base);
  free(base);
  free(raw);
  free(dir);
  return 0;
}
