import { SyncBailHook, SyncHook } from 'tapable';
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
  /**
   * Asked for each path a request is about to change (resolved, absolute) before anything
   * is recorded. A tap that returns a name keeps the path, everything beneath it, and the
   * name it adds to or removes from its folder out of the turn: not backed up, not
   * recorded as created, so a restore leaves it as it is. The turn counts such paths per
   * name (`turn.facts.exempted`). Every modifying request asks for each of its paths: a
   * tap must be a cheap, synchronous test, with no I/O. A tap that throws fails the
   * request (deny), as any backup failure does.
   */
  readonly exempt: SyncBailHook<[string], string | undefined>;
}

const modifyBackupHooks = new WeakMap<Broker, ModifyBackupHooks>();

/**
 * The backup hooks of a broker, created on first use so listeners may register before or
 * after the plugin. A `backedUp` tap that throws is logged by the plugin and never fails
 * the backup.
 */
export function getModifyBackupHooks(broker: Broker): ModifyBackupHooks {
  let hooks = modifyBackupHooks.get(broker);
  if (!hooks) {
    hooks = Object.freeze({
      backedUp: new SyncHook<[BackupEntry, BackedUpInfo]>(['entry', 'info']),
      exempt: new SyncBailHook<[string], string | undefined>(['path']),
    });
    modifyBackupHooks.set(broker, hooks);
  }
  return hooks;
}
