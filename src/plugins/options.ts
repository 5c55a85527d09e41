import type { z } from 'zod';
import { BrokerError, ErrorCodes, issueLines } from '../core/index.js';

/** Parse a plugin's options, turning zod's issues into one message that names each bad key. */
export function parseOptions<S extends z.ZodType>(plugin: string, schema: S, input: unknown): z.infer<S> {
  const parsed = schema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  const lines = issueLines(parsed.error, 'options');
  throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `${plugin} options are invalid:\n  ${lines.join('\n  ')}`, {
    cause: parsed.error,
  });
}
