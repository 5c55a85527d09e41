/*
 * The two requests of the reference's wire protocols, as this library sends them.
 *
 * Text token request (writes only):
 *   brokered-shell.read-write \t <absolute path> \t <session id> \t <tool call id> \n
 * Answers: SANDBOX (make the real call), DENY, or FD — the broker opened the file itself
 * and passed the descriptor with the answer (SCM_RIGHTS); we use it instead of opening.
 * Any other word (a macOS extension token, say) means nothing on Linux: refused.
 *
 * The reference asked eagerly before every open, reads included. We ask only for
 * writes: a read changes nothing to back up, Landlock already lets the command read
 * everywhere, and a round trip per read would make every `grep -r` pay for each file.
 *
 * JSON HostFileOperation (rename, delete, mkdir, link): the broker performs it; its
 * answer's `ok`, `errno` and `errorCode` become our return value and errno.
 */
#include "preload.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define TEXT_CLASS "brokered-shell.read-write"
#define HOST_OP_COMMAND "HostFileOperation"

static void emit_token(struct bp_writer *w, const void *ctx) {
  const struct bp_config *cfg = bp_config();
  bp_w_str(w, TEXT_CLASS "\t");
  bp_w_str(w, (const char *)ctx);
  bp_w_str(w, "\t");
  bp_w_str(w, cfg->session);
  bp_w_str(w, "\t");
  bp_w_str(w, cfg->tool_call);
  bp_w_str(w, "\n");
}

enum bp_token bp_ask_write(const char *path, int *fd) {
  *fd = -1;
  /* A tab or newline cannot be said in the text protocol: such a name is refused. */
  if (path[0] != '/' || strpbrk(path, "\t\n\r")) return BP_TOKEN_FAILED;
  struct bp_reply reply;
  if (bp_transact(emit_token, path, BP_REPLY_TEXT, &reply) != 0) return BP_TOKEN_FAILED;
  enum bp_token token = BP_TOKEN_FAILED;
  if (!reply.overlong && strcmp(reply.word, "SANDBOX") == 0) token = BP_TOKEN_SANDBOX;
  else if (!reply.overlong && strcmp(reply.word, "DENY") == 0) token = BP_TOKEN_DENY;
  else if (!reply.overlong && strcmp(reply.word, "FD") == 0 && reply.fd >= 0) token = BP_TOKEN_FD;
  if (token == BP_TOKEN_FD) {
    *fd = reply.fd;
  } else if (reply.fd >= 0) {
    close(reply.fd);
  }
  return token;
}

static void field(struct bp_writer *w, const char *name, const char *value) {
  bp_w_str(w, ",\"");
  bp_w_str(w, name);
  bp_w_str(w, "\":");
  bp_w_json(w, value);
}

static void emit_host_op(struct bp_writer *w, const void *ctx) {
  const struct bp_host_op *op = ctx;
  const struct bp_config *cfg = bp_config();
  static unsigned long sequence;
  bp_w_str(w, "{\"id\":\"preload-");
  bp_w_uint(w, (unsigned long)getpid());
  bp_w_str(w, "-");
  bp_w_uint(w, __atomic_add_fetch(&sequence, 1, __ATOMIC_RELAXED));
  bp_w_str(w, "\",\"command\":\"" HOST_OP_COMMAND "\"");
  field(w, "operation", op->operation);
  if (op->path) field(w, "path", op->path);
  if (op->from) field(w, "from", op->from);
  if (op->to) field(w, "to", op->to);
  if (strcmp(op->operation, "delete") == 0) {
    /* unlink semantics: gone, not moved to a trash, never recursive. */
    bp_w_str(w, ",\"deleteMode\":\"unlink\",\"recursive\":false,\"force\":false");
  }
  if (op->symbolic) bp_w_str(w, ",\"symbolic\":true");
  if (op->has_mode) {
    bp_w_str(w, ",\"mode\":");
    bp_w_uint(w, op->mode & 07777);
  }
  field(w, "sessionId", cfg->session);
  if (cfg->tool_call[0]) field(w, "toolCallId", cfg->tool_call);
  if (cfg->trace[0]) field(w, "brokerTraceId", cfg->trace);
  bp_w_str(w, "}\n");
}

int bp_host_op(const struct bp_host_op *op) {
  struct bp_reply reply;
  if (bp_transact(emit_host_op, op, BP_REPLY_JSON, &reply) != 0) {
    errno = EACCES;
    return -1;
  }
  if (reply.fd >= 0) close(reply.fd);
  if (reply.json.ok) return 0;
  /*
   * A failure of the operation itself (EXDEV, so that mv copies instead; ENOENT,
   * EEXIST, ENOTEMPTY) or of finding its path keeps its errno; a refusal (policy,
   * approval needed, backup failed) is EACCES.
   */
  const char *code = reply.json.error_code;
  bool own_errno = strcmp(code, "BSH_HOST_OP_FAILED") == 0 || strcmp(code, "BSH_PATH_NOT_FOUND") == 0 ||
                   strcmp(code, "BSH_PATH_UNRESOLVED") == 0;
  int err = own_errno ? bp_errno_from_name(reply.json.errno_name) : 0;
  errno = err ? err : EACCES;
  return -1;
}
