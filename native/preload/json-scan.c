/*
 * The broker's JSON answer, scanned byte by byte as it arrives: only the top-level
 * `ok`, `errno` and `errorCode` matter here, so nothing but those is kept. A proper
 * tokenizer (strings with escapes, nesting) rather than a substring search, so a path
 * that happens to contain `"ok":true` cannot fool it.
 */
#include "preload.h"

#include <string.h>

void bp_json_init(struct bp_json_scan *s) { memset(s, 0, sizeof *s); }

static void keep(char *buf, size_t cap, size_t *len, char c) {
  if (*len + 1 < cap) buf[(*len)++] = c;
  buf[*len] = '\0';
}

/* A complete top-level value (string or literal) for the current key. */
static void commit(struct bp_json_scan *s, bool is_string) {
  if (strcmp(s->key, "ok") == 0 && !is_string) {
    s->ok_seen = true;
    s->ok = strcmp(s->val, "true") == 0;
  } else if (strcmp(s->key, "errno") == 0 && is_string) {
    memcpy(s->errno_name, s->val, sizeof s->errno_name - 1);
    s->errno_name[sizeof s->errno_name - 1] = '\0';
  } else if (strcmp(s->key, "errorCode") == 0 && is_string) {
    memcpy(s->error_code, s->val, sizeof s->error_code - 1);
    s->error_code[sizeof s->error_code - 1] = '\0';
  }
  s->val_len = 0;
  s->val[0] = '\0';
}

void bp_json_feed(struct bp_json_scan *s, char c) {
  if (s->bad) return;
  if (s->in_string) {
    bool top = s->depth == 1;
    if (s->escape) {
      s->escape = false;
    } else if (c == '\\') {
      s->escape = true;
      return;
    } else if (c == '"') {
      s->in_string = false;
      if (top && s->is_key) return;
      if (top) commit(s, true);
      return;
    }
    if (top && s->is_key) keep(s->key, sizeof s->key, &s->key_len, c);
    else if (top) keep(s->val, sizeof s->val, &s->val_len, c);
    return;
  }
  switch (c) {
    case '"':
      s->in_string = true;
      s->is_key = s->depth == 1 && !s->after_colon;
      if (s->is_key) {
        s->key_len = 0;
        s->key[0] = '\0';
      }
      s->val_len = 0;
      s->val[0] = '\0';
      return;
    case '{':
    case '[':
      if (s->depth == 0 && c != '{') s->bad = true;
      s->depth++;
      return;
    case '}':
    case ']':
      if (s->depth == 1 && s->val_len > 0) commit(s, false);
      if (s->depth == 0) s->bad = true;
      else s->depth--;
      return;
    case ':':
      if (s->depth == 1) s->after_colon = true;
      return;
    case ',':
      if (s->depth == 1) {
        if (s->val_len > 0) commit(s, false);
        s->after_colon = false;
      }
      return;
    case ' ':
    case '\t':
    case '\r':
    case '\n':
      return;
    default:
      if (s->depth == 0) s->bad = true;
      else if (s->depth == 1 && s->after_colon) keep(s->val, sizeof s->val, &s->val_len, c);
      return;
  }
}
