import { realpathSync } from 'node:fs';
import path from 'node:path';
import {
  ResolveStage,
  type Broker,
  type BrokerPlugin,
  type BrokerRequest,
  type RequestTarget,
  type ResolvedTarget,
} from '../../core/index.js';
import { parsePathResolutionOptions, type PathResolutionOptions } from './options.js';
import { describeStats, lexicalPath, resolveWithStats } from './resolve.js';
import { normaliseForRuleMatch } from './rule-form.js';
import { strategyFor } from './strategies.js';
import { getLeaseHooks } from '../lease/hooks.js';
import { programsOf } from '../file-safety/lease.js';

export const PLUGIN_NAME = 'path-resolution';

/** What resolving one target needs to know about its request. */
export type ResolveContext = Pick<BrokerRequest, 'operation'> & { options?: Pick<BrokerRequest['options'], 'followSymlinks' | 'recursive'> };

/**
 * Fill in every form of one target: lexical, resolved (by the strategy its operation and
 * role call for), the rule-matching form and what is there now.
 */
export async function resolveTarget(target: RequestTarget, request: ResolveContext, home: string): Promise<ResolvedTarget> {
  const strategy = strategyFor(request.operation, target.role, request.options?.followSymlinks, request.options?.recursive);
  const lexical = lexicalPath(target.path);
  // What the walk saw where it ended is what is there now: no second lstat.
  const { path: resolved, stats } = resolveWithStats(strategy, target.path);
  const { kind, links } = describeStats(stats);
  // Spelled out: on Node 20's V8 a literal that spreads an object and then adds fields
  // costs ≈ 1 µs per added field (each one a runtime call), per target of every request.
  const out: ResolvedTarget = { role: target.role, path: target.path, access: target.access, lexical, resolved, ruleForm: normaliseForRuleMatch(resolved, { home }), kind };
  if (links !== undefined) out.links = links;
  return out;
}

/**
 * Resolves every target of a request at `ResolveStage.RESOLVE`. Any failure (missing
 * parent, loop, a path into the broker's own process) throws, and the broker answers deny.
 */
export class PathResolutionPlugin implements BrokerPlugin {
  readonly name = PLUGIN_NAME;
  /** Real path of home, so `~` also abbreviates resolved paths when home has links in it. */
  readonly home: string;

  constructor(options: PathResolutionOptions = {}) {
    const parsed = parsePathResolutionOptions(options);
    this.home = realHome(parsed.home);
  }

  apply(broker: Broker): void {
    // The supervisor leases only paths it walks without a symlink, which resolve to themselves. What their rule
    // form rewrites (a BSD sed temp name, a backslash) makes the round trip, so rules match them here as usual.
    getLeaseHooks(broker).contribute.tap(PLUGIN_NAME, (lease) => {
      for (const pattern of ['.!*!*', '*\\\\*']) lease.globs.push({ write: true, delete: true, programs: programsOf(pattern, []) });
    });
    broker.hooks.resolvePath.tapPromise({ name: PLUGIN_NAME, stage: ResolveStage.RESOLVE }, async (resolution, request, context) => {
      const targets: ResolvedTarget[] = [];
      for (const draft of resolution.targets) {
        const target = await resolveTarget(draft, request, this.home);
        const { role, path: named, resolved, ruleForm, kind } = target;
        // Asked of the broker's logger: the request's child logger is only made when something is logged.
        if (broker.log.isLevelEnabled('debug')) {
          context.log.debug(
            { phase: 'resolve', operation: request.operation, role, path: named, normalisedPath: resolved, ruleForm, kind },
            'path resolved',
          );
        }
        targets.push(target);
      }
      return Object.assign({}, resolution, { targets });
    });
  }
}

function realHome(home: string): string {
  try {
    return realpathSync(home);
  } catch {
    // A home that does not exist yet still abbreviates the paths that name it.
    return lexicalPath(path.posix.resolve(home));
  }
}
