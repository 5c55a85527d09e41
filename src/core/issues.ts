import type { z } from 'zod';

/**
 * One line per zod issue, naming where it is ("rules.0.decision: …"; unknown keys by
 * name), so every "invalid input" message in the project reads the same way.
 */
export function issueLines(error: z.ZodError, top = 'input'): string[] {
  return error.issues.map((issue) => {
    const where = issue.path.map(String).join('.') || top;
    return issue.code === 'unrecognized_keys' ? `${where}: unknown key(s) ${issue.keys.join(', ')}` : `${where}: ${issue.message}`;
  });
}
