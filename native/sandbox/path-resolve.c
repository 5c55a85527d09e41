/*
 * Lexical paths: what the target named, made absolute, without touching the file
 * system. "." and duplicate slashes go; ".." stays, because only a walk of the real
 * tree (the broker's job) knows where ".." leads after a symlink. /proc/self and
 * /proc/thread-self are rewritten to the target's own ids: resolved anywhere else
 * they would name the resolver.
 */
#include "sandbox.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
bool bsh_utf8_valid(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned c = *p;
    size_t n;
    unsigned min, cp;
    if (c < 0x80) {
      p++;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, min = 0x80, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, min = 0x800, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, min = 0x10000, cp = c & 0x07;
    } else {
      return false;
    }
    for (size_t i = 1; i <= n; i++) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    p += n + 1;
  }
  return true;
}

/*
 * base (absolute, used only when raw is relative) + raw → out. `slash` reports a
 * trailing "/" or "/." on raw: the kernel then requires a directory there.
 */
int bsh_lexical_join(const char *base, const char *raw, char *out, size_t cap, bool *slash) {
  size_t rl = strlen(raw);
  *slash = rl > 1 && (raw[rl - 1] == '/' || (raw[rl - 1] == '.' && raw[rl - 2] == '/'));
  if (rl == 1 && raw[0] == '.') *slash = true;
  char joined[2 * BSH_PATH_MAX + 2];
  int n = raw[0] == '/' ? snprintf(joined, sizeof joined, "%s", raw)
                        : snprintf(joined, sizeof joined, "%s/%s", base, raw);
  if (n < 0 || (size_t)n >= sizeof joined) return -ENAMETOOLONG;
  size_t o = 0;
  for (const char *p = joined; *p;) {
    while (*p == '/') p++;
    const char *end = strchrnul(p, '/');
    size_t len = (size_t)(end - p);
    if (len == 0) break;
    if (!(len == 1 && p[0] == '.')) {
      if (o + 1 + len >= cap) return -ENAMETOOLONG;
      out[o++] = '/';
      memcpy(out + o, p, len);
      o += len;
    }
    p = end;
  }
  if (o == 0) out[o++] = '/';
  out[o] = '\0';
  return 0;
}

static const char *proc_self_rest(const char *path, const char *name) {
  size_t n = strlen(name);
  if (strncmp(path, name, n) != 0) return NULL;
  return path[n] == '\0' || path[n] == '/' ? path + n : NULL;
}

bool bsh_mentions_proc_self(const char *path) {
  return proc_self_rest(path, "/proc/self") || proc_self_rest(path, "/proc/thread-self");
}

int bsh_rewrite_proc_self(char *path, size_t cap, pid_t tgid, pid_t tid) {
  char tmp[BSH_PATH_MAX];
  const char *rest;
  int n;
  if ((rest = proc_self_rest(path, "/proc/self")) != NULL)
    n = snprintf(tmp, sizeof tmp, "/proc/%d%s", (int)tgid, rest);
  else if ((rest = proc_self_rest(path, "/proc/thread-self")) != NULL)
    n = snprintf(tmp, sizeof tmp, "/proc/%d/task/%d%s", (int)tgid, (int)tid, rest);
  else
    return 0;
  if (n < 0 || (size_t)n >= sizeof tmp || (size_t)n >= cap) return -ENAMETOOLONG;
  memcpy(path, tmp, (size_t)n + 1);
  return 0;
}

bool bsh_has_dotdot(const char *path) {
  for (const char *p = strstr(path, "/.."); p; p = strstr(p + 1, "/.."))
    if (p[3] == '/' || p[3] == '\0') return true;
  return false;
}

/* Component-wise prefix test; `dir` is absolute without a trailing slash (or "/"). */
bool bsh_path_under(const char *path, const char *dir) {
  size_t n = strlen(dir);
  if (n == 1 && dir[0] == '/') return path[0] == '/';
  return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* "/a/b/c" → parent "/a/b", name "c". Refuses "/" and a final "." or "..". */
int bsh_split_parent(const char *path, char *parent, size_t cap, const char **name) {
  const char *slash = strrchr(path, '/');
  if (!slash || path[0] != '/') return -EINVAL;
  const char *base = slash + 1;
  if (base[0] == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) return -EINVAL;
  size_t plen = slash == path ? 1 : (size_t)(slash - path);
  if (plen >= cap) return -ENAMETOOLONG;
  memcpy(parent, path, plen);
  parent[plen] = '\0';
  *name = base;
  return 0;
}
