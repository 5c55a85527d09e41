import path from 'node:path';
import type { FileSafetyRule } from '../plugins/file-safety/index.js';
import type { StandardPluginsOptions } from '../plugins/standard.js';

/**
 * The settings a sandbox session takes, in the shape of the configuration file
 * (src/config/schema.ts produces exactly this after defaults). Declared here
 * structurally so the session depends on the shape, not on how it was loaded.
 */
export interface SessionConfig {
  sandbox: {
    /** false: commands run locally with plain bash, without the broker (no policy, no backup). */
    enabled: boolean;
    /** Commands whose root word is listed run locally (see command-line.ts for the matching). */
    excludedCommands: string[];
    /** `auto`: seccomp where the kernel supports it, else preload. */
    runtime: 'auto' | 'seccomp' | 'preload';
  };
  /** Writable besides the workspace (relative ones are taken from the workspace). */
  writableRoots: string[];
  fileBackup: { enabled: boolean; maxSizeMB: number; oversize: 'deny' | 'skip'; durability: 'each' | 'turn' };
  fileSafety: { rules: FileSafetyRule[]; outsideRoots: 'deny' | 'prompt' };
}

/** Any part of the configuration; what is missing takes the default. */
export interface SessionConfigInput {
  sandbox?: Partial<SessionConfig['sandbox']>;
  writableRoots?: string[];
  fileBackup?: Partial<SessionConfig['fileBackup']>;
  fileSafety?: Partial<SessionConfig['fileSafety']>;
}

/** The defaults, the same as the configuration file's. */
export function defaultSessionConfig(): SessionConfig {
  return {
    sandbox: { enabled: true, excludedCommands: [], runtime: 'auto' },
    writableRoots: [],
    fileBackup: { enabled: true, maxSizeMB: 10, oversize: 'deny', durability: 'each' },
    fileSafety: { rules: [], outsideRoots: 'deny' },
  };
}

/** A whole configuration from a partial one (a full one passes through, copied). */
export function completeSessionConfig(input: SessionConfigInput = {}): SessionConfig {
  const base = defaultSessionConfig();
  return {
    sandbox: {
      ...base.sandbox,
      ...defined(input.sandbox),
      excludedCommands: [...(input.sandbox?.excludedCommands ?? base.sandbox.excludedCommands)],
    },
    writableRoots: [...(input.writableRoots ?? base.writableRoots)],
    fileBackup: { ...base.fileBackup, ...defined(input.fileBackup) },
    fileSafety: { ...base.fileSafety, ...defined(input.fileSafety), rules: [...(input.fileSafety?.rules ?? base.fileSafety.rules)] },
  };
}

/** The fields that are set (an explicit `undefined` does not replace a default). */
function defined<T extends object>(value: T | undefined): Partial<T> {
  if (!value) return {};
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Where a broker built from a configuration runs. */
export interface BrokerPlace {
  /** Backup store root. */
  home: string;
  /** The workspace (real path): the first writable root; relative configured roots are taken from it. */
  workspace: string;
  /** Writable besides the workspace and the configured roots (a command's temp dir). */
  extraRoots?: string[];
  /** The broker's own files besides the store (its socket directory). */
  protectedPaths?: string[];
  userHome?: string;
}

/** The standard plugins' options for a configuration, as `run`, `serve` and sessions build them. */
export function standardOptionsOf(config: SessionConfig, place: BrokerPlace): StandardPluginsOptions {
  return {
    home: place.home,
    writableRoots: [place.workspace, ...(place.extraRoots ?? []), ...config.writableRoots.map((root) => path.resolve(place.workspace, root))],
    rules: config.fileSafety.rules,
    outsideRoots: config.fileSafety.outsideRoots,
    protectedPaths: place.protectedPaths ?? [],
    ...(place.userHome ? { userHome: place.userHome } : {}),
    backup: {
      enabled: config.fileBackup.enabled,
      fileBackupMaxSizeMB: config.fileBackup.maxSizeMB,
      oversize: config.fileBackup.oversize,
      durability: config.fileBackup.durability,
    },
  };
}
