import path from 'node:path';
import { z } from 'zod';
import { approvalTimeoutSecondsSchema, approvalsSchema, cacheRootsConfigSchema, fileBackupConfigSchema, fileSafetyConfigSchema, networkConfigSchema, sandboxConfigSchema, secretsConfigSchema } from '../config/schema.js';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { issueLines } from '../core/issues.js';
import type { NetworkDefault } from '../plugins/network/index.js';
import type { StandardPluginsOptions } from '../plugins/standard.js';
import { HOME_CONFIG_FILE } from '../config/schema.js';

const noNul = (value: string) => !value.includes('\0');
export const pathSchema = z.string().min(1).refine(noNul, 'contains a NUL byte');

/**
 * The settings a sandbox session takes: the configuration file's own sections
 * (src/config/schema.ts), so a library caller's settings are checked as strictly as a
 * file's. Only the writable roots differ: a session has a workspace, so relative ones
 * are taken from it.
 */
export const sessionConfigSchema = z.strictObject({
  sandbox: sandboxConfigSchema.prefault({}),
  /** Writable besides the workspace (relative ones are taken from the workspace). */
  writableRoots: z.array(pathSchema).default([]),
  cacheRoots: cacheRootsConfigSchema.prefault({}),
  fileBackup: fileBackupConfigSchema.prefault({}),
  fileSafety: fileSafetyConfigSchema.prefault({}),
  secrets: secretsConfigSchema.prefault({}),
  network: networkConfigSchema.prefault({}),
  approvals: approvalsSchema,
  approvalTimeoutSeconds: approvalTimeoutSecondsSchema,
});

/** A session's whole configuration (what `sandbox.enabled: false` means: commands run locally, without the broker). */
export type SessionConfig = z.output<typeof sessionConfigSchema>;
/** Any part of the configuration; what is missing takes the default. */
export type SessionConfigInput = z.input<typeof sessionConfigSchema>;

/** The defaults, the same as the configuration file's. */
export function defaultSessionConfig(): SessionConfig {
  return sessionConfigSchema.parse({});
}

/** A whole, checked configuration from a partial one (a full one passes through, copied). */
export function completeSessionConfig(input: SessionConfigInput = {}): SessionConfig {
  const checked = sessionConfigSchema.safeParse(input);
  if (checked.success) return checked.data;
  const lines = issueLines(checked.error, 'config');
  throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `the session's config is invalid:\n  ${lines.join('\n  ')}`, { cause: checked.error });
}

/** Where a broker built from a configuration runs. */
export interface BrokerPlace {
  /** Backup store root. */
  home: string;
  /** The workspace (real path): the first writable root; relative configured roots are taken from it. */
  workspace: string;
  /** Writable besides the workspace and the configured roots (a command's temp dir). */
  extraRoots?: string[];
  /** Changed by the command without asking (its temp dir): no rename or tree copy out of them. */
  volatileRoots?: string[];
  /** The broker's own files besides the store (its socket directory). */
  protectedPaths?: string[];
  userHome?: string;
  /** The commands' environment: where the tools keep their caches (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /** The network's default allow entries (networkDefaults) and where the resolvers are read from. */
  network?: { defaults: readonly NetworkDefault[]; resolvConf?: string };
}

/** The standard plugins' options for a configuration, as `run`, `serve` and sessions build them. */
export function standardOptionsOf(config: SessionConfig, place: BrokerPlace): StandardPluginsOptions {
  return {
    home: place.home,
    writableRoots: [place.workspace, ...(place.extraRoots ?? []), ...config.writableRoots.map((root) => path.resolve(place.workspace, root))],
    rules: config.fileSafety.rules,
    outsideRoots: config.fileSafety.outsideRoots,
    cacheRoots: { ...config.cacheRoots, ...(place.env ? { env: place.env } : {}) },
    readPolicy: { secrets: config.secrets, ...(place.env ? { env: place.env } : {}) },
    protectedPaths: place.protectedPaths ?? [],
    ...(place.volatileRoots ? { volatileRoots: place.volatileRoots } : {}),
    ...(place.userHome ? { userHome: place.userHome } : {}),
    approval: { mode: config.approvals, timeoutMs: config.approvalTimeoutSeconds * 1000 },
    network: {
      mode: config.network.mode,
      allow: config.network.allow,
      deny: config.network.deny,
      defaults: [...(place.network?.defaults ?? [])],
      ...(place.network?.resolvConf ? { resolvConf: place.network.resolvConf } : {}),
      saveTo: path.join(place.home, HOME_CONFIG_FILE),
    },
    backup: {
      enabled: config.fileBackup.enabled,
      fileBackupMaxSizeMB: config.fileBackup.maxSizeMB,
      oversize: config.fileBackup.oversize,
      durability: config.fileBackup.durability,
    },
  };
}
