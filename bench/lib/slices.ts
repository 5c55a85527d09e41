import type { Broker, BrokerPlugin } from '../../src/core/index.js';

/**
 * The standard plugin set cut into slices that grow one part at a time, so a bench can
 * charge each part its own cost: the core with stand-ins, then path resolution, file
 * safety, every other plugin but the backup ones, and the whole set.
 */

/** Resolves every path to itself as an absent file: the core's own work with no real resolution. */
export const standInResolver: BrokerPlugin = {
  name: 'bench-stand-in-resolver',
  apply(broker: Broker) {
    broker.hooks.resolvePath.tap('bench-stand-in-resolver', (resolution) => ({
      targets: resolution.targets.map((t) => ({ role: t.role, path: t.path, access: t.access, lexical: t.path, resolved: t.path, ruleForm: t.path, kind: 'absent' as const })),
    }));
  },
};

/** Allows everything it is asked about, for the slices that have no policy plugin yet. */
export const allowAll: BrokerPlugin = {
  name: 'bench-allow-all',
  apply(broker: Broker) {
    broker.hooks.evaluatePolicy.tap('bench-allow-all', () => ({ verdict: 'sandbox' as const, source: 'bench-allow-all' }));
  },
};

const BACKUP_PLUGINS = ['modify-backup', 'command-prebackup'];

export interface Slice {
  id: string;
  label: string;
  /** The slice's plugins, given the standard set; `keep` names plugins every slice has (e.g. the token issuer a socket needs). */
  plugins: (standard: BrokerPlugin[], keep?: readonly string[]) => BrokerPlugin[];
}

export const SLICES: readonly Slice[] = [
  { id: 'core', label: 'the core alone (a stand-in resolver, allow all)', plugins: (all, keep = []) => [standInResolver, allowAll, ...pick(all, keep)] },
  { id: 'resolution', label: '+ path-resolution', plugins: (all, keep = []) => [...pick(all, ['path-resolution', ...keep]), allowAll] },
  { id: 'file-safety', label: '+ file-safety (no allow-all)', plugins: (all, keep = []) => pick(all, ['path-resolution', 'file-safety', ...keep]) },
  { id: 'no-backup', label: '+ every other standard plugin but the backup ones', plugins: (all) => all.filter((p) => !BACKUP_PLUGINS.includes(p.name)) },
  { id: 'standard', label: '+ modify-backup and command-prebackup: the standard set', plugins: (all) => all },
];

export function sliceById(id: string): Slice {
  const slice = SLICES.find((s) => s.id === id);
  if (!slice) throw new Error(`no slice ${id}; the slices are ${SLICES.map((s) => s.id).join(', ')}`);
  return slice;
}

function pick(all: BrokerPlugin[], names: readonly string[]): BrokerPlugin[] {
  return all.filter((plugin) => names.includes(plugin.name));
}
