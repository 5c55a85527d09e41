import { readdir } from 'node:fs/promises';
import path from 'node:path';
import type { Decision, ResolvedRequest, ResolvedTarget } from '../../core/index.js';
import { takenTree } from '../../requests/taken-tree.js';
import { normaliseForRuleMatch } from '../path-resolution/index.js';
import { linkIntoGit, symlinkContent } from './git-directories.js';
import { evaluateMandatory } from './mandatory.js';
import { VERDICT_SEVERITY, evaluateRules } from './evaluate.js';
import { formsOf, type PolicyTarget } from './patterns.js';
import type { FileSafetyPolicy } from './policy.js';

/**
 * A directory removed, moved or copied over as a whole takes everything inside with it
 * in one call, so a rule on a file inside (deny `secret.txt`, prompt `*.pem`) must be
 * asked about each entry too, or `rm -r dir` would remove what `rm dir/secret.txt` may
 * not, and `mv staged config` would put in place a `config/prod.json` that
 * `echo > config/prod.json` may not write. Returns the most restrictive verdict any
 * entry gets (deny or prompt), else undefined. An unreadable tree is refused: what
 * cannot be inspected is not allowed.
 */
export async function evaluateTree(target: ResolvedTarget, request: ResolvedRequest, policy: FileSafetyPolicy): Promise<Decision | undefined> {
  const entries = await treeEntries(target, request);
  if (!entries) return undefined;
  let worst: Decision | undefined;
  for (const [index, entry] of entries.entries()) {
    const inside: PolicyTarget = {
      access: entries.access,
      lexical: entry,
      resolved: entry,
      ruleForm: normaliseForRuleMatch(entry, { home: policy.homes[0] ?? '/' }),
    };
    const forms = formsOf(inside, policy.homes);
    // A symlink taken along is judged where it lands: a relative one names another place there.
    const link = entries.access === 'write' ? entries.links.get(index) : undefined;
    const linkVerdict = link === undefined ? undefined : linkIntoGit(entry, symlinkContent(link));
    for (const decision of [evaluateMandatory(inside, forms, policy.protections), linkVerdict, evaluateRules(inside, policy, forms)]) {
      if (!decision || (decision.verdict !== 'deny' && decision.verdict !== 'prompt')) continue;
      if (!worst || VERDICT_SEVERITY[decision.verdict] > VERDICT_SEVERITY[worst.verdict]) {
        const holds = entries.access === 'write' ? 'would then hold' : 'contains';
        worst = Object.assign({}, decision, { reason: `${target.resolved} ${holds} ${entry}: ${decision.reason ?? decision.verdict}` });
      }
    }
    if (worst?.verdict === 'deny') break;
  }
  return worst;
}

/** The paths reached, how, and which of them are symlinks (by index: where each one is now). */
type Entries = string[] & { access: 'delete' | 'write'; links: Map<number, string> };

/** The paths a whole-directory operation reaches, and how it reaches them. */
async function treeEntries(target: ResolvedTarget, resolved: ResolvedRequest): Promise<Entries | undefined> {
  const taken = takenTree(target, resolved);
  if (!taken) return undefined;
  const links = new Map<number, string>();
  const entries = await below(taken.dir, (index, at) => links.set(index, at));
  // Moved in or copied: each entry's relative path under the destination.
  const landed = taken.landsUnder === taken.dir ? entries : entries.map((entry) => path.posix.join(taken.landsUnder, path.posix.relative(taken.dir, entry)));
  return Object.assign(landed, { access: taken.access, links });
}


/**
 * Every path under `dir`, its own links included as entries but never followed (what a
 * move or copy takes along is the link, not what it names). Following them let a link to
 * /usr keep the broker listing for minutes, and a link into a directory the command may
 * not read put that directory's names in a denial.
 */
async function below(dir: string, onLink: (index: number, at: string) => void): Promise<string[]> {
  const found: string[] = [];
  const pending = [dir];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    for (const entry of await readdir(next, { withFileTypes: true })) {
      const child = path.posix.join(next, entry.name);
      if (entry.isSymbolicLink()) onLink(found.length, child);
      found.push(child);
      if (entry.isDirectory()) pending.push(child);
    }
  }
  return found;
}
