import { PolicyStage, type Broker, type BrokerPlugin, type BrokerRequest, type Decision, type RequestContext, type ResolvedTarget } from '../../core/index.js';
import { VERDICT_SEVERITY, evaluateMandatoryStage, evaluateRoots, evaluateRules, policyTargetFor, shadowedRules } from './evaluate.js';
import { formsOf, type TargetForms } from './patterns.js';
import { symlinkIntoGit } from './git-directories.js';
import { evaluateTree } from './tree.js';
import type { FileSafetyOptions } from './options.js';
import { compileFileSafety, type FileSafetyPolicy } from './policy.js';
import { fileSafetyLease } from './lease.js';
import { getLeaseHooks } from '../lease/hooks.js';

export const PLUGIN_NAME = 'file-safety';

/** The tap names, one per stage, so traces and errors say which part decided. */
export const FILE_SAFETY_TAPS = Object.freeze({
  protected: `${PLUGIN_NAME}:protected`,
  mandatory: `${PLUGIN_NAME}:mandatory`,
  rules: `${PLUGIN_NAME}:rules`,
  tree: `${PLUGIN_NAME}:tree`,
  roots: `${PLUGIN_NAME}:roots`,
});

/**
 * The file-safety policy on evaluate-policy, in three taps:
 * - `MANDATORY`: shell startup files and git hooks/config → prompt, the broker's own
 *   files → deny (writes and deletes only; no option turns these off);
 * - `RULES`: the configured rules, most restrictive match wins;
 * - `DEFAULTS`: reads → sandbox; writes inside a writable root → sandbox; elsewhere →
 *   `outsideRoots`; a path that resolves out of a root → deny.
 * What git config names (its hooks folder, includes, the programs of its commands) is
 * read at each turn's start and among the mandatory protections (git-config-watch.ts).
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
    // Every tap judges the same target of the same request (the broker hands each tap the
    // same object): its judged form and the names it goes by are worked out once, not per tap.
    const views = new WeakMap<ResolvedTarget, TargetView>();
    const viewOf = (target: ResolvedTarget, request: BrokerRequest): TargetView => {
      let view = views.get(target);
      if (!view) {
        // A config written earlier in the turn (after approval) names what is protected from now on.
        this.policy.gitConfig.checkChanges();
        const judged = policyTargetFor(target, request);
        view = { judged, forms: formsOf(judged, this.policy.homes) };
        views.set(target, view);
      }
      return view;
    };
    const tap = (name: string, stage: number, decide: (view: TargetView) => Decision | undefined) =>
      broker.hooks.evaluatePolicy.tap({ name, stage }, (target, resolved, context) => {
        const decision = decide(viewOf(target, resolved.request));
        if (decision) logDecision(context, target, decision);
        return decision;
      });
    // Denials come before session grants (nothing lifts them); prompts after (a grant may):
    // both taps need the one answer, computed once.
    const mandatory = (view: TargetView) => {
      view.mandatory ??= evaluateMandatoryStage(view.judged, this.policy, view.forms) ?? null;
      return view.mandatory ?? undefined;
    };
    tap(FILE_SAFETY_TAPS.protected, PolicyStage.PROTECTED, (view) => only(mandatory(view), (v) => v === 'deny'));
    broker.hooks.evaluatePolicy.tap({ name: FILE_SAFETY_TAPS.mandatory, stage: PolicyStage.MANDATORY }, (target, resolved, context) => {
      const decision = only(mandatory(viewOf(target, resolved.request)), (v) => v !== 'deny') ?? symlinkIntoGit(target, resolved);
      if (decision) logDecision(context, target, decision);
      return decision;
    });
    // Before the rules: a whole-directory operation is judged by what is inside too.
    broker.hooks.evaluatePolicy.tapPromise({ name: FILE_SAFETY_TAPS.tree, stage: PolicyStage.RULES - 1 }, async (target, resolved, context) => {
      const inside = await evaluateTree(target, resolved, this.policy);
      if (!inside) return undefined;
      // What is inside can only make the directory's own verdict stricter, never looser.
      const { judged, forms } = viewOf(target, resolved.request);
      const own = [evaluateRules(judged, this.policy, forms), evaluateRoots(judged, this.policy)];
      const decision = own.reduce<Decision>((worst, d) => (d && VERDICT_SEVERITY[d.verdict] > VERDICT_SEVERITY[worst.verdict] ? d : worst), inside);
      logDecision(context, target, decision);
      return decision;
    });
    tap(FILE_SAFETY_TAPS.rules, PolicyStage.RULES, ({ judged, forms }) => evaluateRules(judged, this.policy, forms));
    tap(FILE_SAFETY_TAPS.roots, PolicyStage.DEFAULTS, ({ judged }) => evaluateRoots(judged, this.policy));
    // What each repository's git config names is read at the start of a turn, and again
    // once a change it lets happen touches config (an approved write of .git/config, say).
    broker.hooks.turnStarted.tapPromise(PLUGIN_NAME, () => this.policy.gitConfig.refresh());
    const lease = getLeaseHooks(broker);
    lease.contribute.tap(PLUGIN_NAME, (draft) => fileSafetyLease(this.policy, draft));
    // A change that may make git config name other files: the supervisors' leases are
    // withdrawn before it is answered and compiled again once it is made.
    const LEASE_STALE = Symbol('file-safety: lease stale');
    broker.hooks.decided.tap(PLUGIN_NAME, (decision, resolved, context) => {
      if (decision.verdict !== 'sandbox' && decision.verdict !== 'grant-token') return;
      let stale = false;
      for (const target of resolved.targets) {
        if (target.access === 'read') continue;
        stale ||= this.policy.gitConfig.mayChange(target.resolved) || this.policy.gitConfig.mayChange(target.lexical);
        this.policy.gitConfig.noteChange(target.resolved);
        this.policy.gitConfig.noteChange(target.lexical);
      }
      if (!stale) return;
      lease.revoke.call();
      if (context.whenPerformed) context.whenPerformed(async () => void lease.changed.call());
      else context.state.set(LEASE_STALE, true);
    });
    broker.hooks.requestDone.tap(PLUGIN_NAME, (_outcome, context) => {
      if (context.state.get(LEASE_STALE) === true) lease.changed.call();
    });
  }
}

/** A target as the policy judges it (see policyTargetFor), the names it goes by, and its mandatory verdict once asked (`null`: none). */
interface TargetView {
  readonly judged: ResolvedTarget;
  readonly forms: TargetForms;
  mandatory?: Decision | null;
}

function only(decision: Decision | undefined, keep: (verdict: Decision['verdict']) => boolean): Decision | undefined {
  return decision && keep(decision.verdict) ? decision : undefined;
}

function logDecision(context: RequestContext, target: ResolvedTarget, decision: Decision): void {
  // Asked of the broker's logger: the request's child logger is only made when something is logged.
  if (!context.broker.log.isLevelEnabled('debug')) return;
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
