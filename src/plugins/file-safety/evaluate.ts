import type { BrokerRequest, Decision, Verdict } from '../../core/index.js';
import { literalBase } from './glob.js';
import { evaluateMandatory } from './mandatory.js';
import { formsOf, isBeneath, isWithin, unique, type PolicyTarget, type TargetForms } from './patterns.js';
import type { CompiledRule, FileSafetyPolicy } from './policy.js';

/** Most restrictive first when rules disagree: deny > prompt > grant-token > sandbox. */
export const VERDICT_SEVERITY: Readonly<Record<Verdict, number>> = Object.freeze({ sandbox: 0, 'grant-token': 1, prompt: 2, deny: 3 });

const isPermissive = (verdict: Verdict) => verdict === 'sandbox' || verdict === 'grant-token';

function stricter(a: Decision, b: Decision | undefined): Decision {
  return b && VERDICT_SEVERITY[b.verdict] > VERDICT_SEVERITY[a.verdict] ? b : a;
}

/**
 * Built-in protections (shell startup files, what git takes commands from, the broker's
 * own files). A configured rule can only make them stricter (a deny rule on `~/.bashrc`
 * still denies); a rule that grants them is never reached.
 */
export function evaluateMandatoryStage(
  target: PolicyTarget,
  policy: FileSafetyPolicy,
  forms = formsOf(target, policy.homes),
): Decision | undefined {
  const shared = sharedInodeWrite(target);
  if (shared) return shared;
  const mandatory = evaluateMandatory(target, forms, policy.protections);
  if (!mandatory || mandatory.verdict === 'deny') return mandatory;
  return stricter(mandatory, evaluateRules(target, policy, forms));
}

/**
 * A write in place to a file with other hard links changes every name of that inode,
 * and the other names may be anywhere (outside the roots, in a package store). No path
 * check can vouch for names it cannot see, so such writes are refused. Replacing the
 * name (rename over it) or removing it stays possible.
 */
export function sharedInodeWrite(target: PolicyTarget): Decision | undefined {
  if (!target.inPlace || target.access !== 'write' || (target.links ?? 1) <= 1) return undefined;
  return {
    verdict: 'deny',
    reason: `${target.resolved} has ${target.links} hard links; writing it would change the other names too`,
    source: 'file-safety:mandatory',
  };
}

/**
 * Configured rules. Every rule whose access list includes the target's access and whose
 * pattern matches the target (or a directory above it) takes part; the most restrictive
 * of them decides, whatever their order (it is not "last match wins"). Restrictive rules
 * match any form of the path (the link's own path, its target, the rule form);
 * permissive ones only the forms that name the file actually touched.
 */
export function evaluateRules(
  target: PolicyTarget,
  policy: FileSafetyPolicy,
  forms = formsOf(target, policy.homes),
): Decision | undefined {
  let winner: { rule: CompiledRule; form: string } | undefined;
  for (const rule of policy.rules) {
    if (!rule.access.has(target.access)) continue;
    if (winner && VERDICT_SEVERITY[winner.rule.decision] >= VERDICT_SEVERITY[rule.decision]) continue;
    const form = matchingForm(rule, forms);
    if (form !== undefined) winner = { rule, form };
  }
  if (!winner) return undefined;
  const { rule, form } = winner;
  const decision: Decision = {
    verdict: rule.decision,
    reason: rule.reason ?? `${form} matches rule ${rule.pattern} (${rule.decision} for ${target.access})`,
    source: `file-safety:rules[${rule.index}]`,
  };
  // A prompt that matched only another name (a link's own path) must not turn the file
  // actually touched from "denied" into "ask": the defaults still judge that file.
  return forms.touched.includes(form) ? decision : stricter(decision, evaluateRoots(target, policy));
}

function matchingForm(rule: CompiledRule, forms: TargetForms): string | undefined {
  return (isPermissive(rule.decision) ? forms.touched : forms.all).find((form) => rule.matches(form));
}

/** What would let in a path outside the roots, as every such denial says (`run` names the real file for `<home>`). */
export const OUTSIDE_ROOTS_REMEDY = "writableRoots, or cacheRoots.add for a tool's cache, in <home>/config.json would allow it";

/**
 * Defaults for what no rule named. Reads are left to the sandbox everywhere (Landlock
 * lets it read; read denials come from rules). Writes and deletes are left to the
 * sandbox inside a writable root (a delete must be strictly beneath it: the root itself
 * is not deleted or renamed away), else `outsideRoots`. A path named inside a root that
 * resolves outside every root (a symlink pointing out) is always denied.
 */
export function evaluateRoots(target: PolicyTarget, policy: FileSafetyPolicy): Decision {
  const source = 'file-safety:roots';
  if (target.access === 'read') return { verdict: 'sandbox', reason: 'reads are left to the sandbox', source };
  const inside = target.access === 'delete' ? isBeneath : isWithin;
  const root = policy.roots.find((entry) => inside(target.resolved, entry.real));
  if (root) return { verdict: 'sandbox', reason: `${target.resolved} is inside the writable root ${root.real}`, source };
  const named = policy.roots.find((entry) => [entry.given, entry.real].some((base) => inside(target.lexical, base)));
  if (named) {
    return {
      verdict: 'deny',
      reason: `${target.lexical} resolves to ${target.resolved}, outside the writable roots; ${OUTSIDE_ROOTS_REMEDY}`,
      source,
    };
  }
  return { verdict: policy.outsideRoots, reason: `${target.resolved} is outside the writable roots; ${OUTSIDE_ROOTS_REMEDY}`, source };
}

/**
 * The access policy judges a target by, given its request. A hard link's source gets a
 * second name through which the same file can be written, so it is judged as a write
 * where it lives (else `ln /outside/file root/x` would carry a write out of the roots).
 */
/** Operations that change an existing file's inode (content or metadata) rather than its name. */
const IN_PLACE: ReadonlySet<string> = new Set(['open', 'truncate', 'chmod', 'chown', 'xattr', 'touch', 'copy']);
/** Of those, what changes a FIFO's, socket's or device's inode: data written into one is not kept in it. */
const SPECIAL_IN_PLACE: ReadonlySet<string> = new Set(['chmod', 'chown', 'xattr', 'touch']);

export function policyTargetFor<T extends PolicyTarget & { role?: string; kind?: string }>(
  target: T,
  request?: Pick<BrokerRequest, 'operation' | 'options'>,
): T {
  const hardLinkSource = request?.operation === 'link' && target.role === 'from' && request.options.symbolic !== true;
  // Object.assign, not `{ ...target, field }`: on Node 20's V8 each field after a spread costs a runtime call.
  const judged = hardLinkSource && target.access === 'read' ? Object.assign({}, target, { access: 'write' as const }) : target;
  if (!request || target.role === 'from') return judged;
  const inPlace = target.kind === 'other' ? SPECIAL_IN_PLACE : IN_PLACE;
  return inPlace.has(request.operation) ? Object.assign({}, judged, { inPlace: true }) : judged;
}

/**
 * The whole file-safety policy for one target, as the plugin's three taps decide it:
 * mandatory protections, then rules, then the defaults. The same target, request and
 * policy always give the same decision, but for looks at the disk: whether a folder holds
 * a HEAD (then it is a git directory), and, for a hard link, what the symlink it copies
 * holds.
 */
export function evaluateFileSafety(
  input: PolicyTarget & { role?: string },
  policy: FileSafetyPolicy,
  request?: Pick<BrokerRequest, 'operation' | 'options'>,
): Decision {
  const target = policyTargetFor(input, request);
  const forms = formsOf(target, policy.homes);
  return evaluateMandatoryStage(target, policy, forms) ?? evaluateRules(target, policy, forms) ?? evaluateRoots(target, policy);
}

export interface ShadowedRule {
  readonly index: number;
  readonly pattern: string;
  readonly decision: Verdict;
  /** A path the rule would grant that a mandatory protection keeps. */
  readonly example: string;
  readonly protection: string;
}

/**
 * Permissive rules that name a path a mandatory protection keeps: they never take effect
 * there, which a person reading the config should be told about.
 */
export function shadowedRules(policy: FileSafetyPolicy): ShadowedRule[] {
  const found: ShadowedRule[] = [];
  for (const rule of policy.rules) {
    if (!isPermissive(rule.decision) || (!rule.access.has('write') && !rule.access.has('delete'))) continue;
    const roots = policy.roots.flatMap((root) => [root.given, root.real]);
    const bases = unique(['/x', ...roots, ...patternBases(rule.pattern, policy.homes)]);
    // Name the strictest protection the rule runs into: that is the one a reader must know.
    const strictestFirst = [...policy.protections].sort((x, y) => VERDICT_SEVERITY[y.verdict] - VERDICT_SEVERITY[x.verdict]);
    for (const protection of strictestFirst) {
      const example = protection.samples(bases).find((sample) => rule.matches(sample));
      if (example) {
        found.push({ index: rule.index, pattern: rule.pattern, decision: rule.decision, example, protection: protection.id });
        break;
      }
    }
  }
  return found;
}

/** The literal directory a pattern starts from, where git samples are tried. */
function patternBases(pattern: string, homes: readonly string[]): string[] {
  const expanded = pattern === '~' || pattern.startsWith('~/') ? homes.map((home) => home + pattern.slice(1)) : [pattern];
  return expanded
    .filter((value) => value.startsWith('/'))
    .map((value) => literalBase(value).replace(/\/+$/, ''));
}
