/**
 * Named stages order taps on a hook (tapable `stage`): lower runs first. Plugins pick a
 * stage by meaning, never rely on registration order.
 */

/** evaluate-policy: the first tap with an opinion wins. */
export const PolicyStage = {
  /** Protections no configuration can lift (rc files, git hooks, the broker's own files). */
  MANDATORY: -300,
  /** Grants a person approved earlier in this session. */
  SESSION_GRANTS: -200,
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
