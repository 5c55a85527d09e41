/*
 * The broker's address and the ids this command's requests carry, read from the
 * environment once per process image (before main, and again lazily if a hook runs
 * first). Copied: a program may change its environment later, and getenv is not safe
 * against a concurrent setenv.
 *
 *   BROKERED_SHELL_SOCKET        the broker's Unix socket (required)
 *   BROKERED_SHELL_SESSION_ID    the session every request names (required)
 *   BROKERED_SHELL_TOOL_CALL_ID  the tool call, for audit and backup attribution
 *   BROKERED_SHELL_TRACE_ID      log correlation
 *
 * A missing socket or session makes the library fail closed: every write it would ask
 * about is refused with EACCES. There is deliberately no switch to fail open: the
 * command itself controls its environment, so such a switch would let it turn the
 * backups off for everything it starts.
 */
#include "preload.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static struct bp_config config;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static bool copy_env(const char *name, char *out, size_t cap, bool required) {
  const char *value = getenv(name);
  if (!value || !*value) {
    out[0] = '\0';
    return !required;
  }
  size_t len = strlen(value);
  if (len >= cap || strpbrk(value, "\t\n\r")) {
    out[0] = '\0';
    return false;
  }
  memcpy(out, value, len + 1);
  return true;
}

static void load(void) {
  bool ok = copy_env("BROKERED_SHELL_SOCKET", config.socket, sizeof config.socket, true);
  ok = copy_env("BROKERED_SHELL_SESSION_ID", config.session, sizeof config.session, true) && ok;
  ok = copy_env("BROKERED_SHELL_TOOL_CALL_ID", config.tool_call, sizeof config.tool_call, false) && ok;
  ok = copy_env("BROKERED_SHELL_TRACE_ID", config.trace, sizeof config.trace, false) && ok;
  config.usable = ok && config.socket[0] == '/';
  pthread_atfork(NULL, NULL, bp_channel_after_fork);
}

const struct bp_config *bp_config(void) {
  pthread_once(&once, load);
  return &config;
}

__attribute__((constructor)) static void bp_init(void) { (void)bp_config(); }
