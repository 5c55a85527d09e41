import path from 'node:path';
import { z } from 'zod';
import { fileBackupConfigSchema } from '../config/schema.js';
import { parseOptions } from '../plugins/options.js';
import { pathSchema, sessionConfigSchema } from './config.js';
import type { SandboxSessionOptions } from './types.js';

const functionSchema = z.custom<(...args: never[]) => unknown>((value) => typeof value === 'function', 'must be a function');
const pluginSchema = z.looseObject({ name: z.string().min(1), apply: functionSchema });

/**
 * What `createSandboxSession` accepts, checked before anything is made: a wrong type
 * from a library caller must fail as clearly as a bad config file, never quietly weaken
 * the sandbox (`enabled: 0` running commands outside it, a string of roots split into
 * characters).
 */
const sessionOptionsSchema = z.strictObject({
  workspace: pathSchema.optional(),
  sessionId: z.string().optional(),
  config: sessionConfigSchema.optional(),
  home: pathSchema.optional(),
  userHome: pathSchema.optional(),
  // process.env is not a plain object, which z.record requires.
  env: z
    .custom<NodeJS.ProcessEnv>(
      (value) => typeof value === 'object' && value !== null && Object.values(value).every((v) => v === undefined || typeof v === 'string'),
      'must be an object of strings',
    )
    .optional(),
  logger: z.looseObject({ child: functionSchema, info: functionSchema, warn: functionSchema, error: functionSchema }).optional(),
  plugins: z.array(pluginSchema).optional(),
  approver: functionSchema.optional(),
  maxApprovalRounds: z.number().int().min(1).optional(),
  storeUnavailable: z.enum(['disable-backup', 'deny-changes']).optional(),
  maxOutputBytes: z.number().int().min(1).optional(),
  policyTimeoutMs: z.number().int().min(0).max(2 ** 31 - 1).optional(),
});

/** The options as given, each checked; the store root made absolute (taken from the current directory). */
export function checkSessionOptions(options: SandboxSessionOptions): SandboxSessionOptions {
  const checked = parseOptions('session', sessionOptionsSchema, options);
  // The parsed copy fills the config's defaults; the caller's own objects (logger, plugins) are kept as given.
  return { ...options, config: checked.config, home: options.home === undefined ? undefined : path.resolve(options.home) };
}

const beginTurnSchema = z.strictObject({
  userMessage: z.string(),
  fileBackup: z
    .strictObject({ enabled: z.boolean().optional(), maxSizeMB: fileBackupConfigSchema.shape.maxSizeMB.optional() })
    .optional(),
});

/** A turn's options, checked: a per-turn size cap that is not a number must not turn into the default. */
export function checkBeginTurnOptions<T>(options: T): T {
  // Absent options are refused too (parseOptions reads them as {}, which lacks userMessage).
  parseOptions('beginTurn', beginTurnSchema, options);
  return options;
}
