import { z } from 'zod';
import { BrokerError, ErrorCodes, absolutePathSchema, accessSchema, verdictSchema, issueLines, type Access } from '../../core/index.js';
import { patternProblem } from './patterns.js';

const noNul = (value: string) => !value.includes('\0');
/** `~` only as a whole first component: `~user/…` is a shell feature rules do not have. */
const tildeIsHome = (value: string) => !value.startsWith('~') || value === '~' || value.startsWith('~/');

export const fileSafetyRuleSchema = z.strictObject({
  /**
   * `/…` absolute, `~/…` under home, anything else at any depth (`*.pem`, `.git/config`,
   * `secrets/**`). A pattern that names a directory covers what is inside it. Syntax:
   * glob.ts; a pattern that can never match is refused (patternProblem).
   */
  pattern: z
    .string()
    .min(1)
    .max(4096)
    .refine(noNul, 'pattern contains a NUL byte')
    .refine(tildeIsHome, 'a pattern may start with ~ only as ~ or ~/')
    .refine((value) => !value.startsWith('!'), 'negated patterns are not supported; write a rule with the decision you want')
    .superRefine((value, context) => {
      // What the checks above refuse is reported there: one line per problem.
      if (value === '' || value.length > 4096 || value.includes('\0') || value.startsWith('!') || !tildeIsHome(value)) return;
      const problem = patternProblem(value);
      if (problem !== undefined) context.addIssue({ code: 'custom', message: problem });
    }),
  /** Which accesses the rule governs; when absent, every access its decision can govern (ruleAccess). */
  access: z.array(accessSchema).min(1).optional(),
  decision: verdictSchema,
  /** Shown in the audit log and to a person asked to approve. */
  reason: z.string().max(1000).optional(),
});
export type FileSafetyRule = z.infer<typeof fileSafetyRuleSchema>;

/**
 * The accesses a rule governs. A `prompt` cannot govern reads: a command's reads never
 * reach the broker (the kernel decides them where they happen), so nothing could be
 * asked; a prompt rule without `access` is about writes and deletes, and one that names
 * `read` is refused (refuseReadPrompts).
 */
export function ruleAccess(rule: Pick<FileSafetyRule, 'access' | 'decision'>): Access[] {
  return rule.access ?? (rule.decision === 'prompt' ? ['write', 'delete'] : ['read', 'write', 'delete']);
}

/** A list of rules: each one refused, by its `access` key, when it asks about reads. */
export function refuseReadPrompts(rules: ReadonlyArray<Pick<FileSafetyRule, 'access' | 'decision'>>, context: z.RefinementCtx): void {
  rules.forEach((rule, index) => {
    if (rule.decision !== 'prompt' || !rule.access?.includes('read')) return;
    context.addIssue({
      code: 'custom',
      path: [index, 'access'],
      message:
        'refused: a read cannot be asked about: a command\'s reads never reach the broker (the kernel decides them where they happen), so the question would never come and the read would go ahead; use "deny" for read, or take "read" out of access',
    });
  });
}

/** Rules as a configuration lists them. */
export const fileSafetyRulesSchema = z.array(fileSafetyRuleSchema).superRefine(refuseReadPrompts);

export const fileSafetyOptionsSchema = z.strictObject({
  /** Where writes and deletes are left to the sandbox. Must exist; resolved to real paths. */
  writableRoots: z.array(absolutePathSchema),
  /** Configured rules. Among the rules that match a target, the most restrictive decides. */
  rules: fileSafetyRulesSchema.default([]),
  /** The broker's own files (socket directory, backup store): never written, never deleted. */
  protectedPaths: z.array(absolutePathSchema).default([]),
  /** What `~` means in patterns and where shell startup files live (default: the OS's home). */
  home: absolutePathSchema.optional(),
  /** The answer for writes outside every root that no rule named. */
  outsideRoots: z.enum(['deny', 'prompt']).default('deny'),
});
/** What a caller passes. */
export type FileSafetyOptions = z.input<typeof fileSafetyOptionsSchema>;
/** After defaults are applied. */
export type ParsedFileSafetyOptions = z.infer<typeof fileSafetyOptionsSchema>;

/** Validate options; a failure is one INVALID_OPTIONS error that names every bad key. */
export function parseFileSafetyOptions(input: unknown): ParsedFileSafetyOptions {
  const parsed = fileSafetyOptionsSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  throw invalidOptions(issueLines(parsed.error, 'options'), parsed.error);
}

export function invalidOptions(lines: readonly string[], cause?: unknown): BrokerError {
  return new BrokerError(ErrorCodes.INVALID_OPTIONS, `file-safety options are invalid:\n  ${lines.join('\n  ')}`, {
    cause,
    details: { problems: [...lines] },
  });
}
