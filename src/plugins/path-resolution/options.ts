import os from 'node:os';
import { z } from 'zod';
import { BrokerError, ErrorCodes, absolutePathSchema } from '../../core/index.js';

export const pathResolutionOptionsSchema = z.strictObject({
  /** The home directory abbreviated to `~` in the rule-matching form (default: the OS's). */
  home: absolutePathSchema.optional(),
});
export type PathResolutionOptions = z.input<typeof pathResolutionOptionsSchema>;
export type ParsedPathResolutionOptions = z.infer<typeof pathResolutionOptionsSchema>;

export function parsePathResolutionOptions(input: unknown): ParsedPathResolutionOptions & { home: string } {
  const parsed = pathResolutionOptionsSchema.safeParse(input ?? {});
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => {
      const where = issue.path.map(String).join('.') || 'options';
      return issue.code === 'unrecognized_keys' ? `${where}: unknown key(s) ${issue.keys.join(', ')}` : `${where}: ${issue.message}`;
    });
    throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `path-resolution options are invalid:\n  ${lines.join('\n  ')}`, {
      details: { issues: parsed.error.issues },
    });
  }
  return { ...parsed.data, home: parsed.data.home ?? os.homedir() };
}
