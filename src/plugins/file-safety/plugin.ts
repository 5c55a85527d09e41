import { PolicyStage, type Broker, type BrokerPlugin, type Decision, type RequestContext, type ResolvedTarget } from '../../core/index.js';
import { evaluateMandatoryStage, evaluateRoots, evaluateRules, policyTargetFor, shadowedRules } from './evaluate.js';
import type { FileSafetyOptions } from './options.js';
import { compileFileSafety, type FileSafetyPolicy } from './policy.js';

export const PLUGIN_NAME = 'file-safety';

/** The tap names, one per stage, so traces and errors say which part decided. */
export const FILE_SAFETY_TAPS = Object.freeze({
  mandatory: `${PLUGIN_NAME}:mandatory`,
  rules: `${PLUGIN_NAME}:rules`,
  roots: `${PLUGIN_NAME}:roots`,
});

/**
 * The file-safety policy on evaluate-policy, in three taps:
 * - `MANDATORY`: shell startup files and git hooks/config → prompt, the broker's own
 *   files → deny (writes and deletes only; no option turns these off);
 * - `RULES`: the configured rules, most restrictive match wins;
 * - `DEFAULTS`: reads → sandbox; writes inside a writable root → sandbox; elsewhere →
 *   `outsideRoots`; a path that resolves out of a root → deny.
 * Other policy plugins placed between these stages see targets the earlier taps left.
 */
export class FileSafetyPlugin implements BrokerPlugin {
  readonly name = PLUGIN_NAME;
  readonly policy: FileSafetyPolicy;

  constructor(options: FileSafetyOptions) {
    this.policy = compileFileSafety(options);
  }

  apply(broker: Broker): void {
    for (const shadowed of shadowedRules(this.policy)) {
      const { index, pattern, decision, example, protection } = shadowed;
      broker.log.warn(
        { phase: 'policy', plugin: PLUGIN_NAME, rule: index, pattern, example, protection },
        `file-safety rule ${pattern} (${decision}) cannot lift the mandatory protection of ${example}; it is never applied there`,
      );
    }
    const tap = (name: string, stage: number, decide: (target: ResolvedTarget) => Decision | undefined) =>
      broker.hooks.evaluatePolicy.tap({ name, stage }, (target, resolved, context) => {
        const decision = decide(policyTargetFor(target, resolved.request));
        if (decision) logDecision(context, target, decision);
        return decision;
      });
    tap(FILE_SAFETY_TAPS.mandatory, PolicyStage.MANDATORY, (target) => evaluateMandatoryStage(target, this.policy));
    tap(FILE_SAFETY_TAPS.rules, PolicyStage.RULES, (target) => evaluateRules(target, this.policy));
    tap(FILE_SAFETY_TAPS.roots, PolicyStage.DEFAULTS, (target) => evaluateRoots(target, this.policy));
  }
}

function logDecision(context: RequestContext, target: ResolvedTarget, decision: Decision): void {
  context.log.debug(
    {
      phase: 'host-policy',
      access: target.access,
      path: target.path,
      normalisedPath: target.resolved,
      ruleForm: target.ruleForm,
      verdict: decision.verdict,
      source: decision.source,
    },
    decision.reason ?? 'file-safety decided',
  );
}
