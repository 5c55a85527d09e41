/*
 * The read allow-list: Landlock can only allow, so "read everything but these paths"
 * is written as "read each entry of each folder above a denied path, but the denied
 * path itself and the folders on the way to another one". Rights are inherited down a
 * hierarchy, so one rule per sibling covers everything below it, and a read of a denied
 * path (however it is spelled: a symlink, /proc/self/root, a dirfd, a hard link made
 * later in the same folder) reaches no rule on its way up and is refused in the kernel.
 * Reads pay nothing for it: the kernel already walks each opened path for TRUNCATE.
 *
 * What it leaves out, by construction: an entry made after the rules were added in a
 * folder above a denied path has no rule, so it stays unreadable until the next command;
 * folder listings (READ_DIR) are not handled, so the names in a denied folder stay
 * visible while their contents do not.
 */
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A sorted set of paths, searched by bsearch. */
struct path_set {
  char **items;
  size_t n, cap;
};

static int by_string(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int set_add(struct path_set *set, const char *path, size_t len) {
  if (set->n == set->cap) {
    size_t cap = set->cap ? set->cap * 2 : 64;
    char **grown = realloc(set->items, cap * sizeof *grown);
    if (!grown) return -1;
    set->items = grown;
    set->cap = cap;
  }
  char *copy = strndup(path, len);
  if (!copy) return -1;
  set->items[set->n++] = copy;
  return 0;
}

/* Sorts and drops duplicates. */
static void set_seal(struct path_set *set) {
  if (set->n == 0) return;
  qsort(set->items, set->n, sizeof *set->items, by_string);
  size_t kept = 1;
  for (size_t i = 1; i < set->n; i++) {
    if (strcmp(set->items[i], set->items[kept - 1]) == 0) free(set->items[i]);
    else set->items[kept++] = set->items[i];
  }
  set->n = kept;
}

static bool set_has(const struct path_set *set, const char *path) {
  return set->n > 0 && bsearch(&path, set->items, set->n, sizeof *set->items, by_string) != NULL;
}

static void set_free(struct path_set *set) {
  for (size_t i = 0; i < set->n; i++) free(set->items[i]);
  free(set->items);
  memset(set, 0, sizeof *set);
}

/* Is `path` below (or at) any member of `denied`? Members are few per level; a prefix scan is enough. */
static bool under_denied(const struct path_set *denied, const char *path) {
  for (size_t i = 0; i < denied->n; i++)
    if (bsh_path_under(path, denied->items[i])) return true;
  return false;
}

/* Every folder above each denied path: "/", "/a", "/a/b" for "/a/b/c". */
static int add_ancestors(struct path_set *ancestors, const char *path) {
  if (set_add(ancestors, "/", 1) != 0) return -1;
  for (const char *slash = strchr(path + 1, '/'); slash; slash = strchr(slash + 1, '/'))
    if (set_add(ancestors, path, (size_t)(slash - path)) != 0) return -1;
  return 0;
}

static int add_rule_at(int ruleset, int dirfd, const char *name, uint64_t rights, bool *added) {
  *added = false;
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT || errno == EACCES ? 0 : -1;
  /* A symlink needs no rule: what it names is judged where it lies. Following it here
   * would allow a denied folder that a link elsewhere points at. */
  if (S_ISLNK(st.st_mode)) return 0;
  int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  /* Gone meanwhile, or not reachable with our (capability-less) rights: then not by the command's either. */
  if (fd < 0) return errno == ENOENT || errno == EACCES ? 0 : -1;
  struct landlock_path_beneath_attr attr = {.allowed_access = rights, .parent_fd = fd};
  int rc = (int)syscall(__NR_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0);
  int saved = errno;
  close(fd);
  errno = saved;
  if (rc == 0) *added = true;
  /* A file system Landlock takes no rule on (an nsfs bind mount): what is there stays unreadable. */
  return rc != 0 && saved == EBADFD ? 0 : rc;
}

/* One rule per entry of `folder` that is neither denied nor on the way to a denied path. */
static int allow_siblings(int ruleset, const char *folder, const struct path_set *denied, const struct path_set *ancestors,
                          uint64_t rights, size_t *rules, char *err, size_t errlen) {
  int fd = open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    /* A folder we may not list gets no rules: reading below it is then refused, never allowed by mistake. */
    if (errno == ENOENT || errno == EACCES) return 0;
    snprintf(err, errlen, "cannot open %s for the read policy: %s", folder, strerror(errno));
    return -1;
  }
  DIR *dir = fdopendir(fd);
  if (!dir) {
    snprintf(err, errlen, "cannot list %s for the read policy: %s", folder, strerror(errno));
    close(fd);
    return -1;
  }
  char child[BSH_PATH_MAX];
  size_t here = 0;
  int rc = 0;
  for (struct dirent *entry; rc == 0 && (errno = 0, entry = readdir(dir)) != NULL;) {
    const char *name = entry->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    int n = snprintf(child, sizeof child, "%s%s%s", folder, strcmp(folder, "/") == 0 ? "" : "/", name);
    if (n < 0 || (size_t)n >= sizeof child) continue; /* no path can name it: nothing to read there */
    if (set_has(denied, child) || set_has(ancestors, child)) continue;
    bool added;
    if (add_rule_at(ruleset, dirfd(dir), name, rights, &added) != 0) {
      snprintf(err, errlen, "cannot allow reading %s: %s", child, strerror(errno));
      rc = -1;
    } else if (added && ++*rules > BSH_MAX_READ_RULES) {
      snprintf(err, errlen,
               "the read policy needs more than %d Landlock rules (one per entry of each folder above a denied path; %s "
               "gave %zu of them): deny a folder as a whole rather than many paths inside it",
               BSH_MAX_READ_RULES, folder, here + 1);
      rc = -1;
    }
    here++;
  }
  if (rc == 0 && errno != 0) {
    snprintf(err, errlen, "cannot list %s for the read policy: %s", folder, strerror(errno));
    rc = -1;
  }
  closedir(dir);
  return rc;
}

int bsh_read_allow_rules(int ruleset, uint64_t rights, const char *const *paths, size_t n, char *err, size_t errlen) {
  struct path_set denied = {0}, ancestors = {0};
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const char *p = paths[i];
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/') len--;
    if (p[0] != '/' || len == 1) {
      snprintf(err, errlen, "cannot deny reading %s: the read policy takes absolute paths below /", p);
      rc = -1;
    } else if (set_add(&denied, p, len) != 0) {
      snprintf(err, errlen, "out of memory building the read policy");
      rc = -1;
    }
  }
  if (rc == 0) {
    set_seal(&denied);
    /* A path below another denied one adds nothing: the folder above it already has no rule. */
    struct path_set outer = {0};
    for (size_t i = 0; rc == 0 && i < denied.n; i++) {
      bool inner = false;
      for (size_t j = 0; j < denied.n && !inner; j++) inner = j != i && bsh_path_under(denied.items[i], denied.items[j]);
      if (!inner && set_add(&outer, denied.items[i], strlen(denied.items[i])) != 0) rc = -1;
    }
    set_free(&denied);
    denied = outer;
    set_seal(&denied);
    for (size_t i = 0; rc == 0 && i < denied.n; i++) rc = add_ancestors(&ancestors, denied.items[i]);
    if (rc != 0) snprintf(err, errlen, "out of memory building the read policy");
  }
  if (rc == 0) {
    set_seal(&ancestors);
    size_t rules = 0;
    for (size_t i = 0; rc == 0 && i < ancestors.n; i++) {
      /* An ancestor below a denied path cannot occur (inner paths were dropped), but stay safe. */
      if (under_denied(&denied, ancestors.items[i])) continue;
      rc = allow_siblings(ruleset, ancestors.items[i], &denied, &ancestors, rights, &rules, err, errlen);
    }
  }
  set_free(&denied);
  set_free(&ancestors);
  return rc;
}

int bsh_read_denied_add(char ***list, size_t *n, const char *arg) {
  if (arg[0] != '/') {
    fprintf(stderr, "%s: --deny-read %s must be an absolute path\n", BSH_NAME, arg);
    return -1;
  }
  if (*n == BSH_MAX_READ_DENIED) {
    fprintf(stderr, "%s: more than %d --deny-read paths (%s): deny their folders instead\n", BSH_NAME, BSH_MAX_READ_DENIED, arg);
    return -1;
  }
  /* Landlock judges the file a read reaches, so the rule is about the real path; a link to it is covered too. */
  char *real = realpath(arg, NULL);
  if (!real) {
    if (errno == ENOENT || errno == ENOTDIR) return 0;
    fprintf(stderr, "%s: --deny-read %s cannot be resolved: %s\n", BSH_NAME, arg, strerror(errno));
    return -1;
  }
  if (strcmp(real, "/") == 0) {
    fprintf(stderr, "%s: --deny-read %s would deny reading everything\n", BSH_NAME, arg);
    free(real);
    return -1;
  }
  if (*n % 64 == 0) {
    char **grown = realloc(*list, (*n + 64) * sizeof *grown);
    if (!grown) {
      free(real);
      fprintf(stderr, "%s: out of memory\n", BSH_NAME);
      return -1;
    }
    *list = grown;
  }
  (*list)[(*n)++] = real;
  return 0;
}
