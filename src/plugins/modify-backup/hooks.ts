import { SyncHook } from 'tapable';
import type { BackupEntry } from '../../backup/manifest-schema.js';
import type { Broker, Origin } from '../../core/index.js';

/** What a backup was taken for. */
export interface BackedUpInfo {
  /** The tool call the request named, if any. */
  toolCallId?: string;
  /** What was about to happen to the path (open, rename, delete, …; `modify` for the control command). */
  operation: string;
  /** The broker's id of the request, absent for the `ModifyBackup` control command. */
  requestId?: string;
  /** Where the request came from, absent for the control command. */
  origin?: Origin;
  turnId: string;
}

export interface ModifyBackupHooks {
  /** Called once for every entry stored (not for a path already backed up in the turn). */
  readonly backedUp: SyncHook<[BackupEntry, BackedUpInfo]>;
}

const modifyBackupHooks = new WeakMap<Broker, ModifyBackupHooks>();

/**
 * The backup hooks of a broker, created on first use so listeners may register before or
 * after the plugin. A tap that throws is logged by the plugin and never fails the backup.
 */
export function getModifyBackupHooks(broker: Broker): ModifyBackupHooks {
  let hooks = modifyBackupHooks.get(broker);
  if (!hooks) {
    hooks = Object.freeze({ backedUp: new SyncHook<[BackupEntry, BackedUpInfo]>(['entry', 'info']) });
    modifyBackupHooks.set(broker, hooks);
  }
  return hooks;
}
