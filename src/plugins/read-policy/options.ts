import path from 'node:path';
import { z } from 'zod';
import { absolutePathSchema } from '../../core/index.js';
import { fileSafetyRuleSchema } from '../file-safety/options.js';
import { SECRET_DEFAULT_NAMES } from './secrets.js';

const noNul = (value: string) => !value.includes('\0');
const isPathForm = (value: string) => value.startsWith('/') || value === '~' || value.startsWith('~/');
/** `/` and `~` (however spelled): denying every read leaves nothing to run. */
const isEverything = (value: string) => ['/', '~'].includes(path.posix.normalize(value).replace(/(.)\/+$/, '$1'));

/** A path the secret list names: absolute, or under home (`~/…`). */
export const secretPathSchema = z
  .string()
  .min(1)
  .max(4096)
  .refine(noNul, 'contains a NUL byte')
  .refine(isPathForm, 'must be an absolute path or start with ~/ (a relative path has no base here; use a fileSafety rule with access ["read"] for a pattern)')
  .refine((value) => !value.split('/').includes('..'), "must not contain '..'; name the file or folder itself")
  .refine((value) => !isEverything(value), 'names / or the whole home; nothing could run with every read denied');

/** A default's name (`ssh`) or a path, as `secrets.remove` takes them. */
export const secretRemovalSchema = z
  .string()
  .min(1)
  .max(4096)
  .refine(noNul, 'contains a NUL byte')
  .refine(
    (value) => SECRET_DEFAULT_NAMES.includes(value) || isPathForm(value),
    `must be the name of a default (${SECRET_DEFAULT_NAMES.join(', ')}) or an absolute or ~/ path`,
  );

const settingsShape = {
  defaults: z.boolean().default(true).describe('The built-in list of credential files and folders, each where this machine keeps it'),
  add: z.array(secretPathSchema).default([]).describe('More files or folders commands may not read (absolute or ~/ paths)'),
  remove: z
    .array(secretRemovalSchema)
    .default([])
    .describe('Defaults to leave readable: by name (ssh, npmrc, …), or by path (the defaults at or under it; a path inside one stays readable)'),
};

/** The same entry in `add` and in `remove` says two things at once: refused, not guessed. */
function noContradiction(value: { add: string[]; remove: string[] }, context: z.RefinementCtx): void {
  const added = new Set(value.add);
  value.remove.forEach((entry, index) => {
    if (added.has(entry)) context.addIssue({ code: 'custom', path: ['remove', index], message: `${entry} is in add too; name it once` });
  });
}

/** `secrets` of the configuration: what commands may not read, beyond the read rules. */
export const secretsSettingsSchema = z.strictObject(settingsShape).superRefine(noContradiction);
export type SecretsSettings = z.infer<typeof secretsSettingsSchema>;
export type SecretsSettingsInput = z.input<typeof secretsSettingsSchema>;

export const readPolicyOptionsSchema = z.strictObject({
  secrets: secretsSettingsSchema.prefault({}),
  /**
   * The file-safety rules: those that deny `read` (or every access) are enforced on
   * reads; the others are left to file-safety.
   */
  rules: z.array(fileSafetyRuleSchema).default([]),
  /** The broker's own store: never readable, whatever the settings say. */
  store: absolutePathSchema,
  /** Where a relative read rule (`.env`, any depth) is looked for when a command starts: the workspace and writable roots. */
  roots: z.array(absolutePathSchema).default([]),
  /** Whose `~` the entries mean (default: the OS's home). */
  home: absolutePathSchema.optional(),
  /** The commands' environment: the tools' own variables (default: this process's). */
  env: z
    .custom<Readonly<Record<string, string | undefined>>>((value) => typeof value === 'object' && value !== null, 'must be an object of variables')
    .optional(),
});
export type ReadPolicyOptions = z.input<typeof readPolicyOptionsSchema>;
export type ParsedReadPolicyOptions = z.infer<typeof readPolicyOptionsSchema>;
