import { createHash, randomBytes } from 'node:crypto';
import type { BackupHome } from '../backup/backup-home.js';

/**
 * The mark of a workspace's sessions: `ws-` and the first 16 hex digits of the sha256 of
 * its real path. A session made for a workspace (`workspaceSessionId`) starts its id with
 * it, so the store tells which sessions ran there without a file of its own: the session
 * directories are the only index, and an id cannot be moved to another workspace.
 */
export function workspaceMark(workspace: string): string {
  return `ws-${createHash('sha256').update(workspace).digest('hex').slice(0, 16)}`;
}

/** A new session id for a workspace (`workspace`: its real path); `kind` says who made it (`mcp`). */
export function workspaceSessionId(workspace: string, kind: string): string {
  return workspaceSession(workspace, `${kind}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`);
}

/**
 * The id of a named session of a workspace, the same each time: a tool that keeps its own
 * sessions (an agent's conversation) names them. What a session id may not hold (a
 * separator, `..`, a control character) becomes `_`, and the name is cut to fit 128.
 */
export function workspaceSession(workspace: string, name: string): string {
  return `${workspaceMark(workspace)}-${name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 100)}`;
}

/** Whether a session ran in this workspace (its real path): the one test of it. */
export function isWorkspaceSession(sessionId: string, workspace: string): boolean {
  return sessionId.startsWith(`${workspaceMark(workspace)}-`);
}

/** The sessions of a store that ran in this workspace (its real path). */
export async function workspaceSessions(backupHome: BackupHome, workspace: string): Promise<string[]> {
  return (await backupHome.listSessions()).filter((sessionId) => isWorkspaceSession(sessionId, workspace));
}
