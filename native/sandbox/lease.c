/*
 * The lease: the session's policy, compiled by the broker (src/plugins/lease/) into data
 * this supervisor applies itself. It says only where a change certainly goes through:
 * inside a writable root, outside every claimed scope and protected anchor, with no
 * protected name in the path and no rule glob matching it, an operation the lease names.
 * Anything else makes the round trip, so a gap in what the lease knows is a slower
 * change, never an unjudged one. src/plugins/lease/evaluate.ts is the same decision in
 * TypeScript; the tests hold both to one table.
 *
 * The file: one item a line, a keyword, a space, the rest of the line (format.ts).
 */
#include "sandbox.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int push_str(struct bsh_strings *s, const char *v) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    char **grown = realloc(s->v, cap * sizeof *grown);
    if (!grown) return -ENOMEM;
    s->v = grown;
    s->cap = cap;
  }
  if (!(s->v[s->n] = strdup(v))) return -ENOMEM;
  s->n++;
  return 0;
}

static bool has(const struct bsh_strings *s, const char *v) {
  return s->n > 0 && bsearch(&v, s->v, s->n, sizeof *s->v, cmp_str) != NULL;
}

/* `path` or a directory above it is in `s` (each ancestor looked up once). */
static bool has_within(const struct bsh_strings *s, const char *path) {
  if (s->n == 0) return false;
  char buf[BSH_PATH_MAX];
  size_t len = strlen(path);
  if (len >= sizeof buf) return true;
  memcpy(buf, path, len + 1);
  for (;;) {
    if (has(s, buf)) return true;
    char *slash = strrchr(buf, '/');
    if (!slash) return false;
    if (slash == buf) return has(s, "/");
    *slash = '\0';
  }
}

static void free_strings(struct bsh_strings *s) {
  for (size_t i = 0; i < s->n; i++) free(s->v[i]);
  free(s->v);
  memset(s, 0, sizeof *s);
}

void bsh_lease_free(struct bsh_lease *l) {
  free_strings(&l->roots);
  free_strings(&l->claims);
  free_strings(&l->anchors);
  free_strings(&l->holds);
  free_strings(&l->names);
  free_strings(&l->finals);
  for (size_t i = 0; i < l->n_globs; i++) {
    for (size_t k = 0; k < l->globs[i].n; k++) bsh_glob_free(&l->globs[i].progs[k]);
    free(l->globs[i].progs);
  }
  free(l->globs);
  free(l->header);
  memset(l, 0, sizeof *l);
}

static const struct {
  const char *name;
  unsigned bit;
} k_ops[] = {
    {"create", BSH_LEASE_CREATE}, {"mkdir", BSH_LEASE_MKDIR}, {"unlink", BSH_LEASE_UNLINK},
    {"rmdir", BSH_LEASE_RMDIR},   {"rename", BSH_LEASE_RENAME}, {"link", BSH_LEASE_LINK},
    {"chmod", BSH_LEASE_CHMOD},   {"chown", BSH_LEASE_CHOWN}, {"utimes", BSH_LEASE_UTIMES},
};

static int parse_ops(struct bsh_lease *l, char *rest) {
  for (char *save = NULL, *word = strtok_r(rest, " ", &save); word; word = strtok_r(NULL, " ", &save)) {
    bool known = false;
    for (size_t i = 0; i < sizeof k_ops / sizeof k_ops[0]; i++)
      if (strcmp(word, k_ops[i].name) == 0) l->ops |= k_ops[i].bit, known = true;
    if (!known) return -EINVAL;
  }
  return 0;
}

/* Numbers of a line ("1 2 3"); count returned, -EINVAL on anything else. */
static long parse_longs(char *rest, long *out, size_t cap) {
  size_t n = 0;
  for (char *p = rest; *p;) {
    while (*p == ' ') p++;
    if (!*p) break;
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno || n == cap) return -EINVAL;
    out[n++] = v;
    p = end;
  }
  return (long)n;
}

static int hexval(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

/* A program being read: its instructions come as `op` lines, `alt N` says how many. */
struct reading {
  struct bsh_glob_prog *prog;
  size_t want;
};

static int start_alt(struct bsh_lease *l, struct reading *r, char *rest) {
  if (l->n_globs == 0) return -EINVAL;
  struct bsh_lease_glob *g = &l->globs[l->n_globs - 1];
  long n = 0;
  if (parse_longs(rest, &n, 1) != 1 || n <= 0 || n > 100000) return -EINVAL;
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 4;
    struct bsh_glob_prog *grown = realloc(g->progs, cap * sizeof *grown);
    if (!grown) return -ENOMEM;
    g->progs = grown;
    g->cap = cap;
  }
  struct bsh_glob_prog *p = &g->progs[g->n++];
  memset(p, 0, sizeof *p);
  p->ops = calloc((size_t)n, 1);
  p->a = calloc((size_t)n, sizeof *p->a);
  p->b = calloc((size_t)n, sizeof *p->b);
  if (!p->ops || !p->a || !p->b) return -ENOMEM;
  r->prog = p;
  r->want = (size_t)n;
  return 0;
}

static int add_op(struct reading *r, char *rest) {
  long v[3];
  if (!r->prog || r->prog->n == r->want || parse_longs(rest, v, 3) != 3 || v[0] < 0 || v[0] > 6) return -EINVAL;
  struct bsh_glob_prog *p = r->prog;
  p->ops[p->n] = (uint8_t)v[0];
  p->a[p->n] = (int32_t)v[1];
  p->b[p->n] = (int32_t)v[2];
  /* Jumps must land inside the program. */
  if ((v[0] == 4 || v[0] == 5) && (v[1] < 0 || (size_t)v[1] >= r->want)) return -EINVAL;
  if (v[0] == 4 && (v[2] < 0 || (size_t)v[2] >= r->want)) return -EINVAL;
  p->n++;
  return 0;
}

static int add_class(struct reading *r, char *rest) {
  long v[512];
  long n = parse_longs(rest, v, 512);
  if (!r->prog || n < 1 || (n - 1) % 2 != 0) return -EINVAL;
  struct bsh_glob_prog *p = r->prog;
  struct bsh_glob_class *grown = realloc(p->classes, (p->n_classes + 1) * sizeof *grown);
  if (!grown) return -ENOMEM;
  p->classes = grown;
  struct bsh_glob_class *c = &p->classes[p->n_classes++];
  c->negated = v[0] != 0;
  c->n_ranges = (size_t)(n - 1);
  c->ranges = calloc(c->n_ranges ? c->n_ranges : 1, sizeof *c->ranges);
  if (!c->ranges) return -ENOMEM;
  for (size_t i = 0; i < c->n_ranges; i++) c->ranges[i] = (uint16_t)v[i + 1];
  return 0;
}

/* A needed text, as hex of its UTF-16LE code units. */
static int add_need(struct reading *r, const char *hex) {
  size_t len = strlen(hex);
  if (!r->prog || len == 0 || len % 4 != 0) return -EINVAL;
  struct bsh_glob_prog *p = r->prog;
  uint16_t **needs = realloc(p->needs, (p->n_needs + 1) * sizeof *needs);
  size_t *lens = needs ? realloc(p->need_len, (p->n_needs + 1) * sizeof *lens) : NULL;
  if (needs) p->needs = needs;
  if (!needs || !lens) return -ENOMEM;
  p->need_len = lens;
  uint16_t *units = malloc(len / 4 * sizeof *units);
  if (!units) return -ENOMEM;
  for (size_t i = 0; i < len / 4; i++) {
    int d[4];
    for (int k = 0; k < 4; k++)
      if ((d[k] = hexval(hex[i * 4 + k])) < 0) {
        free(units);
        return -EINVAL;
      }
    units[i] = (uint16_t)((d[0] << 4 | d[1]) | (d[2] << 4 | d[3]) << 8);
  }
  p->needs[p->n_needs] = units;
  p->need_len[p->n_needs++] = len / 4;
  return 0;
}

static int end_program(struct reading *r) {
  if (!r->prog) return 0;
  if (r->prog->n != r->want) return -EINVAL;
  for (size_t pc = 0; pc < r->prog->n; pc++)
    if (r->prog->ops[pc] == 3 && (r->prog->a[pc] < 0 || (size_t)r->prog->a[pc] >= r->prog->n_classes)) return -EINVAL;
  int rc = bsh_glob_finish(r->prog);
  r->prog = NULL;
  return rc;
}

static int copy_to(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap || src[0] != '/') return -EINVAL;
  memcpy(dst, src, n + 1);
  return 0;
}

static int parse_line(struct bsh_lease *l, struct reading *r, char *line) {
  char *rest = strchr(line, ' ');
  if (rest) *rest++ = '\0';
  else rest = line + strlen(line);
  const char *key = line;
  bool in_program = strcmp(key, "op") == 0 || strcmp(key, "class") == 0 || strcmp(key, "need") == 0;
  if (!in_program) {
    int rc = end_program(r);
    if (rc) return rc;
  }
  if (strcmp(key, "bsh-lease") == 0) return strcmp(rest, "1") == 0 ? 0 : -EINVAL;
  if (strcmp(key, "ops") == 0) return parse_ops(l, rest);
  if (strcmp(key, "setid") == 0) return (l->setid = strcmp(rest, "0") != 0), 0;
  if (strcmp(key, "root") == 0) return rest[0] == '/' ? push_str(&l->roots, rest) : -EINVAL;
  if (strcmp(key, "claim") == 0) return rest[0] == '/' ? push_str(&l->claims, rest) : -EINVAL;
  if (strcmp(key, "anchor") == 0) return rest[0] == '/' ? push_str(&l->anchors, rest) : -EINVAL;
  if (strcmp(key, "hold") == 0) return rest[0] == '/' ? push_str(&l->holds, rest) : -EINVAL;
  if (strcmp(key, "name") == 0) return push_str(&l->names, rest);
  if (strcmp(key, "final") == 0) return push_str(&l->finals, rest);
  if (strcmp(key, "glob") == 0) {
    long v[2];
    if (parse_longs(rest, v, 2) != 2) return -EINVAL;
    if (l->n_globs == l->cap_globs) {
      size_t cap = l->cap_globs ? l->cap_globs * 2 : 8;
      struct bsh_lease_glob *grown = realloc(l->globs, cap * sizeof *grown);
      if (!grown) return -ENOMEM;
      l->globs = grown;
      l->cap_globs = cap;
    }
    l->globs[l->n_globs++] = (struct bsh_lease_glob){.write = v[0] != 0, .del = v[1] != 0};
    return 0;
  }
  if (strcmp(key, "alt") == 0) return start_alt(l, r, rest);
  if (strcmp(key, "op") == 0) return add_op(r, rest);
  if (strcmp(key, "class") == 0) return add_class(r, rest);
  if (strcmp(key, "need") == 0) return add_need(r, rest);
  if (strcmp(key, "end") == 0) return 0;
  if (strcmp(key, "turn") == 0) {
    l->has_store = true;
    return snprintf(l->turn, sizeof l->turn, "%s", rest) < (int)sizeof l->turn ? 0 : -EINVAL;
  }
  if (strcmp(key, "durability") == 0) return (l->durable_each = strcmp(rest, "each") == 0), 0;
  if (strcmp(key, "blobs") == 0) return copy_to(l->blobs, sizeof l->blobs, rest);
  if (strcmp(key, "journal") == 0) return copy_to(l->journal, sizeof l->journal, rest);
  if (strcmp(key, "header") == 0) return (l->header = strdup(rest)) ? 0 : -ENOMEM;
  return -EINVAL; /* an item this supervisor does not know: no lease rather than half of one */
}

int bsh_lease_load(struct bsh_lease *out, const char *file, char *err, size_t errlen) {
  struct bsh_lease l = {0};
  FILE *f = fopen(file, "re");
  if (!f) {
    snprintf(err, errlen, "cannot open the lease %s: %s", file, strerror(errno));
    return -errno;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  struct reading r = {0};
  int rc = 0, at = 0;
  while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
    at++;
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    if (len == 0) continue;
    rc = parse_line(&l, &r, line);
  }
  if (rc == 0) rc = end_program(&r);
  free(line);
  fclose(f);
  if (rc == 0 && l.has_store && (!l.header || !l.journal[0] || !l.blobs[0])) rc = -EINVAL;
  if (rc != 0) {
    snprintf(err, errlen, "the lease %s is not one (line %d)", file, at);
    bsh_lease_free(&l);
    return rc;
  }
  struct bsh_strings *sorted[] = {&l.roots, &l.claims, &l.anchors, &l.holds, &l.names, &l.finals};
  for (size_t i = 0; i < sizeof sorted / sizeof sorted[0]; i++) qsort(sorted[i]->v, sorted[i]->n, sizeof *sorted[i]->v, cmp_str);
  l.active = true;
  *out = l;
  return 0;
}

static bool within(const char *path, const char *base) {
  size_t n = strlen(base);
  if (n == 1 && base[0] == '/') return true;
  return strncmp(path, base, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Clean and absolute: no empty, `.` or `..` component, no trailing slash. */
static bool clean(const char *path) {
  if (path[0] != '/') return false;
  if (path[1] == '\0') return true;
  for (const char *p = path; *p; p++) {
    if (*p != '/') continue;
    const char *next = p + 1;
    if (*next == '\0' || *next == '/') return false;
    if (next[0] == '.' && (next[1] == '/' || next[1] == '\0')) return false;
    if (next[0] == '.' && next[1] == '.' && (next[2] == '/' || next[2] == '\0')) return false;
  }
  return true;
}

bool bsh_lease_allows(const struct bsh_lease *l, unsigned op, const char *path, bool del, long mode, bool directory) {
  if (!l->active || !(l->ops & op) || !clean(path)) return false;
  bool rooted = false;
  for (size_t i = 0; i < l->roots.n && !rooted; i++) rooted = within(path, l->roots.v[i]) && (!del || strcmp(path, l->roots.v[i]) != 0);
  if (!rooted) return false;
  if (has_within(&l->claims, path) || has_within(&l->anchors, path) || has(&l->holds, path)) return false;
  /* Each component against the names; the last one against the final names too. */
  char part[256];
  const char *last = strrchr(path, '/') + 1;
  for (const char *p = path + 1; *p;) {
    const char *end = strchr(p, '/');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n >= sizeof part) return false;
    memcpy(part, p, n);
    part[n] = '\0';
    if (has(&l->names, part) || (p == last && has(&l->finals, part))) return false;
    p += n;
    if (*p == '/') p++;
  }
  if (l->n_globs > 0) {
    uint16_t units[BSH_PATH_MAX];
    ssize_t n = bsh_utf16_of(path, units, sizeof units / sizeof units[0]);
    if (n < 0) return false;
    for (size_t i = 0; i < l->n_globs; i++) {
      const struct bsh_lease_glob *g = &l->globs[i];
      if (!(del ? g->del : g->write)) continue;
      for (size_t k = 0; k < g->n; k++)
        if (bsh_glob_within(&g->progs[k], units, (size_t)n)) return false;
    }
  }
  if (mode >= 0 && l->setid && ((mode & 04000) || ((mode & 02000) && !directory))) return false;
  return true;
}
