import os from 'node:os';
import { z } from 'zod';
import { absolutePathSchema } from '../../core/index.js';
import { parseOptions } from '../options.js';

export const pathResolutionOptionsSchema = z.strictObject({
  /** The home directory abbreviated to `~` in the rule-matching form (default: the OS's). */
  home: absolutePathSchema.optional(),
});
export type PathResolutionOptions = z.input<typeof pathResolutionOptionsSchema>;
export type ParsedPathResolutionOptions = z.infer<typeof pathResolutionOptionsSchema>;

export function parsePathResolutionOptions(input: unknown): ParsedPathResolutionOptions & { home: string } {
  const parsed = parseOptions('path-resolution', pathResolutionOptionsSchema, input);
  return { ...parsed, home: parsed.home ?? os.homedir() };
}
