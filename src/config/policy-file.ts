import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import { BrokerError, ErrorCodes, issueLines } from '../core/index.js';
import { durabilitySchema, normaliseMaxSizeMB } from '../backup/settings.js';
import { cacheRootPathSchema } from '../plugins/cache-roots/options.js';
import { fileSafetyRulesSchema } from '../plugins/file-safety/index.js';
import { networkModeSchema, networkRuleSchema } from '../plugins/network/rules.js';
import type { BrokeredShellConfig } from './schema.js';

/**
 * The `--policy FILE` of `run` and `serve`: writable roots, cache roots and file-safety rules.
 * Relative roots are taken from the workspace, so one policy file fits any checkout.
 * A subset of the configuration (schema.ts) in its own older shape; `applyPolicyFile`
 * below maps it onto the configuration.
 */
export const policyFileSchema = z.strictObject({
  writableRoots: z.array(z.string().min(1)).default([]),
  /** Added to `cacheRoots.add`: absolute, `~/…`, or relative (taken from the workspace, like the writable roots). */
  cacheRoots: z
    .array(
      z
        .string()
        .min(1)
        .max(4096)
        .refine((value) => !value.startsWith('~') || value === '~' || value.startsWith('~/'), 'may start with ~ only as ~/'),
    )
    .default([]),
  rules: fileSafetyRulesSchema.default([]),
  outsideRoots: z.enum(['deny', 'prompt']).optional(),
  /** As the home config's `network`: `allow` and `deny` are added to it, `mode` replaces it. */
  network: z
    .strictObject({
      mode: networkModeSchema.optional(),
      allow: z.array(networkRuleSchema).default([]),
      deny: z.array(networkRuleSchema).default([]),
    })
    .optional(),
  backup: z
    .strictObject({
      enabled: z.boolean().optional(),
      fileBackupMaxSizeMB: z.number().optional(),
      oversize: z.enum(['deny', 'skip']).optional(),
      durability: durabilitySchema.optional(),
    })
    .optional(),
});
export type PolicyFile = z.infer<typeof policyFileSchema>;

export async function readPolicyFile(file: string, workspace: string): Promise<PolicyFile> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `cannot read policy file ${file}: ${(error as Error).message}`, { cause: error });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `policy file ${file} is not valid JSON: ${(error as Error).message}`);
  }
  const parsed = policyFileSchema.safeParse(value);
  if (!parsed.success) {
    const lines = issueLines(parsed.error, '(top level)').map((line) => `  - ${line}`);
    throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `policy file ${file} is invalid:\n${lines.join('\n')}`);
  }
  const base = workspace || dirname(file);
  const fromBase = (root: string) => (isAbsolute(root) || root === '~' || root.startsWith('~/') ? root : resolve(base, root));
  const cacheRoots = parsed.data.cacheRoots.map(fromBase);
  // Checked as the home config's cacheRoots.add checks them, once relative ones have their base.
  const problems = cacheRoots.flatMap((root, index) => {
    const checked = cacheRootPathSchema.safeParse(root);
    return checked.success ? [] : checked.error.issues.map((issue) => `cacheRoots.${index}: ${root} ${issue.message}`);
  });
  if (problems.length > 0) throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `policy file ${file} is invalid:\n${problems.map((line) => `  - ${line}`).join('\n')}`);
  return { ...parsed.data, writableRoots: parsed.data.writableRoots.map(fromBase), cacheRoots };
}

/**
 * The policy file as an overlay on the configuration (config/schema.ts), for callers that
 * build a session from both. It comes from the command line, so it is trusted like the
 * home config, not narrowed like a project file: its roots and rules are added, its
 * `outsideRoots` and `backup` values replace the configured ones.
 *
 *   writableRoots              → writableRoots (already made absolute by readPolicyFile)
 *   cacheRoots                 → cacheRoots.add (relative ones made absolute by readPolicyFile)
 *   rules                      → fileSafety.rules
 *   outsideRoots               → fileSafety.outsideRoots
 *   backup.enabled             → fileBackup.enabled
 *   backup.fileBackupMaxSizeMB → fileBackup.maxSizeMB (clamped to the store's bounds)
 *   backup.oversize            → fileBackup.oversize
 *   backup.durability          → fileBackup.durability
 *   network.mode               → network.mode
 *   network.allow, .deny       → network.allow, .deny (added)
 */
export function applyPolicyFile(config: BrokeredShellConfig, policy: PolicyFile): BrokeredShellConfig {
  const backup = policy.backup ?? {};
  return {
    sandbox: { ...config.sandbox, excludedCommands: [...config.sandbox.excludedCommands], unixSockets: [...config.sandbox.unixSockets] },
    writableRoots: [...config.writableRoots, ...policy.writableRoots],
    cacheRoots: { ...config.cacheRoots, add: [...config.cacheRoots.add, ...policy.cacheRoots], remove: [...config.cacheRoots.remove] },
    fileBackup: {
      enabled: backup.enabled ?? config.fileBackup.enabled,
      maxSizeMB: backup.fileBackupMaxSizeMB === undefined ? config.fileBackup.maxSizeMB : normaliseMaxSizeMB(backup.fileBackupMaxSizeMB),
      oversize: backup.oversize ?? config.fileBackup.oversize,
      durability: backup.durability ?? config.fileBackup.durability,
    },
    fileSafety: {
      rules: [...config.fileSafety.rules, ...policy.rules],
      outsideRoots: policy.outsideRoots ?? config.fileSafety.outsideRoots,
    },
    secrets: { ...config.secrets, add: [...config.secrets.add], remove: [...config.secrets.remove] },
    network: {
      mode: policy.network?.mode ?? config.network.mode,
      allow: [...config.network.allow, ...(policy.network?.allow ?? [])],
      deny: [...config.network.deny, ...(policy.network?.deny ?? [])],
    },
    approvals: config.approvals,
    approvalTimeoutSeconds: config.approvalTimeoutSeconds,
  };
}
