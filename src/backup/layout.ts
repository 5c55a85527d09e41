import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { BrokerError, ErrorCodes } from '../core/errors.js';

/**
 * Where everything lives. `home` and the `workspace/sessions/<id>/modify_backup` part
 * are a contract; the inside of `modify_backup/` is ours:
 *
 *   modify_backup/blobs/<ab>/<sha256>      content, named by its hash
 *   modify_backup/turns/<turn-id>.journal  an open turn: header + one line per backup (journal.ts)
 *   modify_backup/turns/<turn-id>.json     a committed turn's manifest (written once, at commit)
 *   modify_backup/tmp/                     temp files; nothing here is ever trusted
 */
export const HOME_ENV = 'BROKERED_SHELL_HOME';

/** `$BROKERED_SHELL_HOME`, else `~/.brokered-shell`; always absolute. */
export function resolveHome(env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env[HOME_ENV];
  if (fromEnv !== undefined && fromEnv !== '') return path.resolve(fromEnv);
  return path.join(os.homedir(), '.brokered-shell');
}

// An id becomes one path component: no separators, no dot-dot, no control characters.
const pathComponentId = (what: string) =>
  z
    .string()
    .min(1, `${what} is empty`)
    .max(128, `${what} is longer than 128 characters`)
    .refine((v) => !v.includes('/') && !v.includes('\\'), `${what} contains a path separator`)
    .refine((v) => !v.includes('..'), `${what} contains '..'`)
    .refine((v) => v !== '.', `${what} is '.'`)
    .refine((v) => !/\p{Cc}/u.test(v), `${what} contains a control character`);

export const sessionIdSchema = pathComponentId('session id');

/** Turn ids are ours or the broker's (`YYYYMMDD-HHMMSS-xxxxxx`), but any safe name is accepted. */
export const turnIdSchema = pathComponentId('turn id').refine(
  (v) => /^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(v),
  'turn id may only hold letters, digits, ".", "_" and "-" and must start with a letter or digit',
);

export const sha256Schema = z.string().regex(/^[0-9a-f]{64}$/, 'not a sha256 hex digest');

function parseId(schema: z.ZodType<string>, value: unknown, what: string): string {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const why = parsed.error.issues.map((i) => i.message).join('; ');
  throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `invalid ${what} ${JSON.stringify(value)}: ${why}`);
}

export function validateSessionId(value: unknown): string {
  return parseId(sessionIdSchema, value, 'session id');
}

/** Turn ids already found valid: a turn's id is checked on every backup into it. */
const validTurnIds = new Set<string>();

export function validateTurnId(value: unknown): string {
  if (typeof value === 'string' && validTurnIds.has(value)) return value;
  const id = parseId(turnIdSchema, value, 'turn id');
  if (validTurnIds.size > 4096) validTurnIds.clear();
  validTurnIds.add(id);
  return id;
}

/** A fresh turn id of the broker's shape: UTC `YYYYMMDD-HHMMSS-` and six hex digits. */
export function newTurnId(now: Date = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  return `${stamp}-${randomBytes(3).toString('hex')}`;
}

export function sessionsDir(home: string): string {
  return path.join(home, 'workspace', 'sessions');
}

/** `<home>/workspace/sessions/<session-id>/modify_backup` (contract). */
export function sessionBackupDir(home: string, sessionId: string): string {
  return path.join(sessionsDir(home), validateSessionId(sessionId), 'modify_backup');
}

export interface StoreLayout {
  readonly root: string;
  readonly blobs: string;
  readonly turns: string;
  readonly tmp: string;
}

export function storeLayout(root: string): StoreLayout {
  return {
    root,
    blobs: path.join(root, 'blobs'),
    turns: path.join(root, 'turns'),
    tmp: path.join(root, 'tmp'),
  };
}

/** Blob location relative to the store root, as manifests record it. */
export function blobRelativePath(sha256: string): string {
  return path.posix.join('blobs', sha256.slice(0, 2), sha256);
}

export const MANIFEST_SUFFIX = '.json';
export const JOURNAL_SUFFIX = '.journal';

export function manifestFileName(turnId: string): string {
  return `${validateTurnId(turnId)}${MANIFEST_SUFFIX}`;
}

/** The append-only journal of a turn that is still open (see journal.ts). */
export function journalFileName(turnId: string): string {
  return `${validateTurnId(turnId)}${JOURNAL_SUFFIX}`;
}
