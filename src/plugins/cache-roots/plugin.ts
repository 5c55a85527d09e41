import os from 'node:os';
import { PolicyStage, type Broker, type BrokerPlugin, type BrokerRequest, type Decision, type ResolvedTarget } from '../../core/index.js';
import { getModifyBackupHooks } from '../modify-backup/hooks.js';
import { getLeaseHooks } from '../lease/hooks.js';
import { parseOptions } from '../options.js';
import { cacheRootsOptionsSchema, type CacheRootsOptions } from './options.js';
import { compileCacheRoots, type CacheRootSet } from './roots.js';

export const PLUGIN_NAME = 'cache-roots';

/** What lets a kept-out folder in, as its denials say (`run` names the real file for `<home>`). */
export const KEPT_OUT_REMEDY = 'cacheRoots.add in <home>/config.json would let it in';

/**
 * After the mandatory protections, an organisation's plugins and the configured rules,
 * before file-safety's defaults: a protection or a rule that asks or denies still does
 * (a prompt is held past this stage, a denial ends the ballot), and only what none of
 * them named gets here.
 */
export const CACHE_ROOTS_STAGE = PolicyStage.DEFAULTS - 50;

/**
 * Tools' caches (npm's, cargo's, pip's, …) change with nearly every command an agent runs,
 * hold nothing a person wrote, and are rebuilt by the tool itself. Inside a cache root a
 * write, creation, rename or delete is left to the sandbox without a question, and is
 * kept out of the turn's backups (modify-backup's `exempt` hook): not backed up, not
 * recorded as created, so a restore leaves the cache as it is. The turn counts such paths.
 *
 * A move or copy between a cache root and the workspace is judged, and recorded, on the
 * workspace side as any change there. A folder kept out of a root (npx's installs, …) is
 * refused, with the reason, and so is a folder above one, but for making it: moving,
 * removing, linking or replacing it would take the kept-out one along. Refused, not left
 * to file-safety's defaults: `outsideRoots: prompt` must not make a question of it.
 */
export class CacheRootsPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = PLUGIN_NAME;
  readonly name = PLUGIN_NAME;
  /** The roots, fixed when the plugin is made (which defaults exist is looked at then). */
  readonly roots: CacheRootSet;

  constructor(options: CacheRootsOptions = {}) {
    const parsed = parseOptions(PLUGIN_NAME, cacheRootsOptionsSchema, options);
    this.roots = compileCacheRoots(parsed, { home: parsed.home ?? os.homedir(), env: parsed.env ?? process.env });
  }

  apply(broker: Broker): void {
    if (this.roots.roots.length === 0) return;
    // Changes in a cache root (or a folder kept out of one) are left to the broker: the round trip.
    getLeaseHooks(broker).contribute.tap(PLUGIN_NAME, (lease) => void lease.claims.push(...this.roots.roots.map((root) => root.real)));
    broker.hooks.evaluatePolicy.tap({ name: PLUGIN_NAME, stage: CACHE_ROOTS_STAGE }, (target, resolved) => this.decide(target, resolved.request));
    getModifyBackupHooks(broker).exempt.tap(PLUGIN_NAME, (path) => (this.#inRoot(path) ? PLUGIN_NAME : undefined));
  }

  /** The plugin's opinion of one target: `sandbox` inside a root, else none. Pure: no I/O. */
  decide(target: ResolvedTarget, request: Pick<BrokerRequest, 'operation' | 'options'>): Decision | undefined {
    // A hard link's source gets a second name it can be written through: a write where it lives (as file-safety judges it).
    const hardLinkSource = request.operation === 'link' && target.role === 'from' && request.options.symbolic !== true;
    if (target.access === 'read' && !hardLinkSource) return undefined;
    const resolved = target.resolved;
    const root = this.roots.rootOf(resolved);
    if (!root) {
      const out = this.roots.keptOutOf(resolved);
      return out && { verdict: 'deny', reason: `${resolved} is in ${out.real}, kept out of the cache roots (${out.why}); ${KEPT_OUT_REMEDY}`, source: PLUGIN_NAME };
    }
    // Above a kept-out folder only a new, empty folder is free: anything else would move or swap what it holds.
    const holds = request.operation === 'mkdir' ? undefined : this.roots.keptOutBeneath(resolved);
    if (holds) {
      return { verdict: 'deny', reason: `${resolved} holds ${holds.real}, kept out of the cache roots (${holds.why}); it would be taken along`, source: PLUGIN_NAME };
    }
    return { verdict: 'sandbox', reason: `${resolved} is in the cache root ${root.real}: changed without a question or a backup`, source: PLUGIN_NAME };
  }

  /** In a root, and (whatever lies beneath it) nothing kept out: what the exempt hook promises of a name. */
  #inRoot(path: string): boolean {
    return this.roots.rootOf(path) !== undefined && this.roots.keptOutBeneath(path) === undefined;
  }
}
