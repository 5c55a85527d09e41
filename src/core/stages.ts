/**
 * Named stages order taps on a hook (tapable `stage`): lower runs first. Plugins pick a
 * stage by meaning, never rely on registration order.
 */

/**
 * evaluate-policy: the first stage with an opinion decides, the most restrictive opinion
 * within it; a prompt still lets a later stage's denial through (see policy-ballot.ts).
 */
export const PolicyStage = {
  /** What nothing may change, not even with a person's approval (the broker's own files). */
  PROTECTED: -400,
  /**
   * Grants a person approved earlier in this session. A grant exists only for a path and
   * access the whole pipeline answered `prompt` for, so it can lift prompts, never denials.
   */
  SESSION_GRANTS: -300,
  /** Built-in protections no configuration can lift, that a person may approve (rc files, git hooks). */
  MANDATORY: -200,
  /** An organisation's own plugins (e.g. "*.pem needs approval"). */
  ORGANISATION: -100,
  /** The configured file-safety rules. */
  RULES: 0,
  /** Defaults for paths no rule named (writable roots → sandbox, elsewhere → deny). */
  DEFAULTS: 100,
} as const;

/** resolve-path: a waterfall; later stages see what earlier ones produced. */
export const ResolveStage = {
  RESOLVE: 0,
  /** Adjust the rule-matching form after resolution. */
  NORMALISE: 100,
} as const;

/** Generic stages for the remaining hooks. */
export const Stage = {
  FIRST: -1000,
  EARLY: -100,
  NORMAL: 0,
  LATE: 100,
  LAST: 1000,
} as const;
