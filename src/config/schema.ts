import { z } from 'zod';
import { DEFAULT_DURABILITY, FILE_BACKUP_MAX_SIZE_MB, durabilitySchema, oversizePolicySchema } from '../backup/settings.js';
import { cacheRootsSettingsSchema } from '../plugins/cache-roots/options.js';
import { DEFAULT_APPROVAL_TIMEOUT_MS, approvalModeSchema } from '../plugins/approval/plugin.js';
import { fileSafetyRulesSchema } from '../plugins/file-safety/options.js';
import { secretsSettingsSchema } from '../plugins/read-policy/options.js';
import { networkModeSchema, networkRuleSchema } from '../plugins/network/rules.js';

/**
 * The whole configuration of brokered-shell, one schema. Every object is strict (an
 * unknown key is an error, never ignored) and every field has a default, so `{}` — or no
 * file at all — is a complete, safe configuration. Types come from the schema.
 *
 * Where it comes from (see load.ts): `<home>/config.json` says everything; the project's
 * `.brokered-shell.json` may only narrow it (project.ts).
 */

/** The file in the store root (`$BROKERED_SHELL_HOME`, default `~/.brokered-shell`). */
export const HOME_CONFIG_FILE = 'config.json';
/** The file in the workspace. */
export const PROJECT_CONFIG_FILE = '.brokered-shell.json';

export const sandboxRuntimeSchema = z
  .enum(['auto', 'seccomp', 'preload'])
  .describe('How commands are confined: seccomp user notification + Landlock, the preload hook (fallback), or the best this kernel offers');
export type SandboxRuntime = z.infer<typeof sandboxRuntimeSchema>;

/**
 * An absolute path. The home config has no directory its relative paths could be taken
 * from (the same file serves every workspace), so a relative one is an error, not a guess.
 */
export const absoluteRootSchema = z
  .string()
  .min(1)
  .max(4096)
  .regex(/^\//, 'must be an absolute path (a relative path has no base in this file; ~ is not expanded)')
  .refine((value) => !value.includes('\0'), 'contains a NUL byte');

export const sandboxConfigSchema = z.strictObject({
  enabled: z.boolean().default(true).describe('Run commands in the kernel sandbox'),
  excludedCommands: z
    .array(z.string().min(1).max(1024))
    .default([])
    .describe('Commands that run outside the sandbox (only the home config may name them)'),
  runtime: sandboxRuntimeSchema.default('auto'),
  unixSockets: z
    .array(absoluteRootSchema)
    .default([])
    .describe("Unix sockets a sandboxed command may connect to besides its temp dir's and the broker's (an ssh agent's, say); only the home config may name them"),
});

export const fileBackupConfigSchema = z.strictObject({
  enabled: z.boolean().default(true).describe('Back up every existing file before a command changes it'),
  maxSizeMB: z
    .number()
    .min(FILE_BACKUP_MAX_SIZE_MB.min)
    .max(FILE_BACKUP_MAX_SIZE_MB.max)
    .default(FILE_BACKUP_MAX_SIZE_MB.default)
    .describe('Largest file backed up, in megabytes'),
  oversize: oversizePolicySchema.default('deny').describe('A change to a file over the cap: refused (deny) or made without a content backup (skip)'),
  durability: durabilitySchema
    .default(DEFAULT_DURABILITY)
    .describe('When backups reach the disk: all at the turn\'s commit (turn, the default: a kill loses nothing, a power cut during a turn may), or each one before its change (each)'),
});

export const fileSafetyConfigSchema = z.strictObject({
  rules: fileSafetyRulesSchema
    .default([])
    .describe('Path rules: /absolute, ~/under-home or relative (any depth); among matching rules the most restrictive wins; deny for read is enforced on every read, prompt cannot be for read'),
  outsideRoots: z.enum(['deny', 'prompt']).default('deny').describe('The answer for a write outside every writable root that no rule named'),
});

/**
 * Tools' caches: written, created, renamed and deleted in without a question and without
 * a backup (a restore leaves them as they are). The built-in list where this machine's
 * tools keep them, less `remove`, plus `add`. Home config only.
 */
export const cacheRootsConfigSchema = cacheRootsSettingsSchema.describe(
  "Tools' caches, changed without a question or a backup: the defaults present at session start (defaults), less remove (names or paths), plus add (home config only)",
);

/**
 * What commands may not read besides the store and the rules that deny `read`: the
 * built-in list of credentials where this machine keeps them, less `remove`, plus `add`.
 * A project may only add.
 */
export const secretsConfigSchema = secretsSettingsSchema.describe(
  'Files and folders commands may not read: the default credential list present when a command starts (defaults), less remove (names or paths), plus add',
);

/**
 * Where a sandboxed command may connect (the seccomp runtime decides each connection).
 * `allowlist`: the entries of `allow` and the defaults (the package registries the
 * user's tools are set to, the workspace repository's git remotes, the command's own
 * loopback servers), less `deny`; anything else is asked, or refused without a terminal.
 */
export const networkConfigSchema = z.strictObject({
  mode: networkModeSchema
    .default('allowlist')
    .describe('allowlist: what allow and the defaults name, anything else asked; open: everything; off: nothing'),
  allow: z
    .array(networkRuleSchema)
    .default([])
    .describe('Hosts (example.org, *.example.org), addresses and CIDR blocks, each with an optional :port or :lo-hi'),
  deny: z.array(networkRuleSchema).default([]).describe('Refused whatever allow or a default says'),
});

export const approvalsSchema = approvalModeSchema
  .default('inline')
  .describe('inline: a change that needs approval waits at its syscall while a person is asked, and a yes lets it through; after: it is refused, and the command runs again once approved');

export const approvalTimeoutSecondsSchema = z
  .number()
  .int()
  .min(0)
  .max(86_400)
  .default(DEFAULT_APPROVAL_TIMEOUT_MS / 1000)
  .describe('How long an inline question waits for its answer before it counts as no (0: no limit)');

export const brokeredShellConfigSchema = z
  .strictObject({
    $schema: z.string().optional().describe('The JSON Schema of this file, for editors (the package ships it: dist/config.schema.json); ignored'),
    sandbox: sandboxConfigSchema.prefault({}),
    writableRoots: z
      .array(absoluteRootSchema)
      .default([])
      .describe('Absolute directories writable besides the workspace (home config only)'),
    cacheRoots: cacheRootsConfigSchema.prefault({}),
    fileBackup: fileBackupConfigSchema.prefault({}),
    fileSafety: fileSafetyConfigSchema.prefault({}),
    secrets: secretsConfigSchema.prefault({}),
    network: networkConfigSchema.prefault({}),
    approvals: approvalsSchema,
    approvalTimeoutSeconds: approvalTimeoutSecondsSchema,
  })
  .meta({
    title: 'brokered-shell configuration',
    description: `${HOME_CONFIG_FILE} in the brokered-shell home; a project's ${PROJECT_CONFIG_FILE} may only narrow it`,
  });

/** The configuration after defaults: what a session is given. */
export type BrokeredShellConfig = z.infer<typeof brokeredShellConfigSchema>;
/** What a file (or a caller) may write: every field optional. */
export type BrokeredShellConfigInput = z.input<typeof brokeredShellConfigSchema>;

/** The configuration when no file says anything. */
export function defaultConfig(): BrokeredShellConfig {
  return brokeredShellConfigSchema.parse({});
}

/**
 * The JSON Schema of a config file (input side: fields with defaults are optional), for
 * editors and for `brokered-shell config schema`.
 */
export function configJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(brokeredShellConfigSchema, { io: 'input' }) as Record<string, unknown>;
}
