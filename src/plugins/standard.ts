import type { BrokerPlugin } from '../core/index.js';
import { ApprovalPlugin, type ApprovalOptions } from './approval/index.js';
import { AuditPlugin, type AuditOptions } from './audit.js';
import { CacheRootsPlugin, type CacheRootsOptions } from './cache-roots/index.js';
import { CommandPrebackupPlugin } from './command-prebackup/index.js';
import { FdGrantPlugin } from './fd-grant.js';
import { FileSafetyPlugin, type FileSafetyRule } from './file-safety/index.js';
import { GitPlanNoticePlugin } from './git-plan-notice/index.js';
import { HeldWritesPlugin } from './held-writes/index.js';
import { HostOperationsPlugin } from './host-operations/index.js';
import { LeasePlugin } from './lease/index.js';
import { ModifyBackupPlugin } from './modify-backup/index.js';
import { NetworkPlugin, type NetworkOptions, type SaveRule } from './network/index.js';
import { PathResolutionPlugin } from './path-resolution/index.js';
import { ReadPolicyPlugin, type SecretsSettingsInput } from './read-policy/index.js';
import { RequesterAccessPlugin } from './requester-access.js';
import { SandboxTokenPlugin } from './sandbox-token.js';
import { SessionGrantsPlugin } from './session-grants.js';
import { SessionGuardPlugin } from './session-guard.js';
import { SetIdBitsPlugin } from './set-id-bits.js';
import { ToolCallBindingPlugin } from './tool-call-binding.js';

export interface StandardPluginsOptions {
  /** Backup store root (`$BROKERED_SHELL_HOME` or `~/.brokered-shell`); protected from writes. */
  home: string;
  /** Where writes are left to the sandbox: the workspace and any configured roots. */
  writableRoots: string[];
  rules?: FileSafetyRule[];
  outsideRoots?: 'deny' | 'prompt';
  /** The broker's own files besides the store (e.g. the socket directory). */
  protectedPaths?: string[];
  /** The user's home, for `~` in rules and shell startup files (default: the OS's). */
  userHome?: string;
  backup?: { enabled?: boolean; fileBackupMaxSizeMB?: number; oversize?: 'deny' | 'skip'; durability?: 'each' | 'turn' };
  deleteMode?: 'trash' | 'unlink';
  /**
   * Tools' caches, changed without a question and kept out of the backups (CacheRootsPlugin;
   * its `home` defaults to `userHome`). None when absent.
   */
  cacheRoots?: CacheRootsOptions;
  /**
   * What commands may not read besides the store and the rules that deny `read`
   * (ReadPolicyPlugin): the default secret list, changed by `secrets`; `env` is the
   * commands' environment, where tools name their own files (default: this process's).
   */
  readPolicy?: { secrets?: SecretsSettingsInput; env?: NodeJS.ProcessEnv };
  /** Directories the command changes without asking (its temp dir): see HostOperationsPlugin. */
  volatileRoots?: string[];
  /** Environment used to locate the home trash (XDG_DATA_HOME, HOME). */
  trashEnv?: Record<string, string>;
  approval?: ApprovalOptions;
  audit?: AuditOptions;
  /** The network policy of the seccomp runtime (NetworkPlugin); none when absent. */
  network?: NetworkOptions;
  /** How a "save" answer to a connection question writes the home config. */
  networkSave?: SaveRule;
}

/**
 * The set an agent CLI registers in one call. Order in this list does not matter: every
 * plugin taps at a named stage.
 */
export function standardPlugins(options: StandardPluginsOptions): BrokerPlugin[] {
  const home = options.userHome ? { home: options.userHome } : {};
  return [
    new SessionGuardPlugin(),
    // Empty until the owner binds its running calls (one instance per broker).
    new ToolCallBindingPlugin(),
    new PathResolutionPlugin(home),
    new FileSafetyPlugin({
      writableRoots: options.writableRoots,
      rules: options.rules ?? [],
      protectedPaths: [options.home, ...(options.protectedPaths ?? [])],
      ...(options.outsideRoots ? { outsideRoots: options.outsideRoots } : {}),
      ...home,
    }),
    // What may not be read: the store, the secret list, the rules that deny reading (kernel and broker alike).
    new ReadPolicyPlugin({
      store: options.home,
      rules: options.rules ?? [],
      roots: options.writableRoots,
      ...(options.readPolicy?.secrets ? { secrets: options.readPolicy.secrets } : {}),
      ...(options.readPolicy?.env ? { env: options.readPolicy.env } : {}),
      ...home,
    }),
    // The broker reads (copies, backs up) and changes for a sandboxed requester only what it could itself.
    new RequesterAccessPlugin(),
    new SetIdBitsPlugin(),
    new ApprovalPlugin(options.approval),
    // Empty until the owner grants what a person approved (one instance per broker).
    new SessionGrantsPlugin(),
    new ModifyBackupPlugin({ home: options.home, ...options.backup }),
    ...(options.cacheRoots ? [new CacheRootsPlugin({ ...(options.userHome ? { home: options.userHome } : {}), ...options.cacheRoots })] : []),
    new HostOperationsPlugin({
      ...(options.deleteMode ? { defaultDeleteMode: options.deleteMode } : {}),
      ...(options.trashEnv ? { env: options.trashEnv } : {}),
      ...(options.volatileRoots ? { volatileRoots: options.volatileRoots } : {}),
    }),
    new FdGrantPlugin(),
    new SandboxTokenPlugin(),
    // The policy compiled for the kernel supervisor, from what the plugins above say of it.
    new LeasePlugin(),
    new CommandPrebackupPlugin(),
    // A file still held for writing when a turn commits is backed up into the next one.
    new HeldWritesPlugin(),
    // A stopped rebase, am, cherry-pick or revert the turn left for --continue: said at the commit.
    new GitPlanNoticePlugin({ roots: options.writableRoots }),
    ...(options.network ? [new NetworkPlugin(options.network, options.networkSave ? { save: options.networkSave } : {})] : []),
    new AuditPlugin(options.audit),
  ];
}
