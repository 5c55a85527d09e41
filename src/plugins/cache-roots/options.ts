import path from 'node:path';
import { z } from 'zod';
import { absolutePathSchema } from '../../core/index.js';
import { CACHE_ROOT_DEFAULT_NAMES } from './defaults.js';

const noNul = (value: string) => !value.includes('\0');
const isPathForm = (value: string) => value.startsWith('/') || value === '~' || value.startsWith('~/');
/** `/`, `~` and `~/` (however spelled): everything, or all of home, is no cache. */
const isEverything = (value: string) => ['/', '~'].includes(path.posix.normalize(value).replace(/(.)\/+$/, '$1'));

/** A cache root as a configuration names it: absolute, or under home (`~/…`). */
export const cacheRootPathSchema = z
  .string()
  .min(1)
  .max(4096)
  .refine(noNul, 'contains a NUL byte')
  .refine(isPathForm, 'must be an absolute path or start with ~/ (a relative path has no base here)')
  .refine((value) => !value.split('/').includes('..'), "must not contain '..'; name the folder itself")
  .refine((value) => !isEverything(value), 'names / or the whole home; a cache root is a folder a tool keeps its cache in');

/** A default's name (`npm`) or a path, as `cacheRoots.remove` takes them. */
export const cacheRootRemovalSchema = z
  .string()
  .min(1)
  .max(4096)
  .refine(noNul, 'contains a NUL byte')
  .refine(
    (value) => CACHE_ROOT_DEFAULT_NAMES.includes(value) || isPathForm(value),
    `must be the name of a default (${CACHE_ROOT_DEFAULT_NAMES.join(', ')}) or an absolute or ~/ path`,
  );

const settingsShape = {
  defaults: z.boolean().default(true).describe("The built-in list of tools' caches, each where this machine's tool writes it and only if present at session start"),
  add: z.array(cacheRootPathSchema).default([]).describe('More cache roots (absolute or ~/ paths)'),
  remove: z
    .array(cacheRootRemovalSchema)
    .default([])
    .describe("Defaults to leave out: by name (npm, cargo, …), or by path (the defaults at or under it; a folder inside a root is kept out of it)"),
};

/** The same entry in `add` and in `remove` says two things at once: refused, not guessed. */
function noContradiction(value: { add: string[]; remove: string[] }, context: z.RefinementCtx): void {
  const added = new Set(value.add);
  value.remove.forEach((entry, index) => {
    if (added.has(entry)) context.addIssue({ code: 'custom', path: ['remove', index], message: `${entry} is in add too; name it once` });
  });
}

/**
 * `cacheRoots` of the configuration: folders where tools keep caches, which commands
 * write, create, rename and delete in without a question and without a backup.
 */
export const cacheRootsSettingsSchema = z.strictObject(settingsShape).superRefine(noContradiction);
export type CacheRootsSettings = z.infer<typeof cacheRootsSettingsSchema>;
export type CacheRootsSettingsInput = z.input<typeof cacheRootsSettingsSchema>;

export const cacheRootsOptionsSchema = z
  .strictObject({
    ...settingsShape,
    /** Whose `~` the entries mean and where the tools' defaults are (default: the OS's home). */
    home: absolutePathSchema.optional(),
    /** The environment the commands run with, for the tools' own variables (default: this process's). */
    env: z
      .custom<Readonly<Record<string, string | undefined>>>((value) => typeof value === 'object' && value !== null, 'must be an object of variables')
      .optional(),
  })
  .superRefine(noContradiction);
export type CacheRootsOptions = z.input<typeof cacheRootsOptionsSchema>;
