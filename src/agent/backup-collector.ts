import type { BackupEntry } from '../backup/manifest-schema.js';
import type { Broker } from '../core/index.js';
import { getModifyBackupHooks, type BackedUpInfo } from '../plugins/modify-backup/index.js';
import type { BackupSummary } from './types.js';

export function summarise(entry: BackupEntry, info: BackedUpInfo): BackupSummary {
  return {
    path: entry.path,
    operation: entry.operation,
    kind: entry.kind,
    size: entry.size,
    sha256: entry.sha256,
    ...(entry.skipped ? { skipped: entry.skipped } : {}),
    turnId: info.turnId,
    ...(info.toolCallId ? { toolCallId: info.toolCallId } : {}),
  };
}

/**
 * The backups taken for each tool call while it runs, from the modify-backup plugin's
 * published `backedUp` hook: `watch(id)` starts a list, `stop` returns it.
 */
export class BackupCollector {
  readonly #active = new Map<string, Set<BackupSummary[]>>();

  constructor(broker: Broker) {
    getModifyBackupHooks(broker).backedUp.tap('sandbox-session', (entry, info) => {
      if (!info.toolCallId) return;
      const lists = this.#active.get(info.toolCallId);
      if (!lists) return;
      const summary = summarise(entry, info);
      for (const list of lists) list.push({ ...summary });
    });
  }

  /** Start collecting for a tool call; the returned function stops and gives what was collected. */
  watch(toolCallId: string): () => BackupSummary[] {
    const list: BackupSummary[] = [];
    let lists = this.#active.get(toolCallId);
    if (!lists) {
      lists = new Set();
      this.#active.set(toolCallId, lists);
    }
    lists.add(list);
    return () => {
      const current = this.#active.get(toolCallId);
      current?.delete(list);
      if (current?.size === 0) this.#active.delete(toolCallId);
      return list;
    };
  }
}
