/**
 * An organisation's policy as its own package: three small plugins registered next to
 * brokered-shell's standard set, without touching its core.
 *
 *   broker.use(...standardPlugins(options), ...enterprisePolicy({ home: os.homedir() }));
 *
 * - `DenyPemPlugin`: writing or deleting a `*.pem` file is refused, wherever it is (also
 *   as part of a whole directory removed, moved or copied over);
 * - `PackageJsonApprovalPlugin`: changing a project's `package.json` (not those inside
 *   `node_modules`) needs a person's approval;
 * - `CacheGrantPlugin`: writes under `~/.cache` are granted (`grant-token`), although
 *   `~/.cache` is outside the writable roots. This one loosens the standard policy, on
 *   purpose, and only there.
 *
 * On evaluate-policy the first tap with an opinion wins, so where each plugin taps is
 * what makes it tighten or loosen:
 *
 *   PROTECTED, SESSION_GRANTS, MANDATORY   brokered-shell's own (the broker's files, rc files, git hooks)
 *   ORGANISATION - 10   DenyPemPlugin      deny: nothing after it can lift it, not even the cache grant
 *   ORGANISATION        PackageJson…       prompt, but only where the standard policy would allow the
 *                                          change; elsewhere it has no opinion, so it never turns a
 *                                          denial into a question
 *   RULES               the configured rules
 *   DEFAULTS - 1        CacheGrantPlugin   after every rule: it replaces only the default answer for
 *                                          paths outside the roots, never a rule, never a protection
 *   DEFAULTS            roots → sandbox, elsewhere → deny
 *
 * It imports 'brokered-shell' as a package of your own does (a peer dependency); in this
 * repository the name resolves to its sources (tsconfig.json `paths`, vitest's alias).
 */
import { realpathSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import {
  BrokerError,
  ErrorCodes,
  PolicyStage,
  evaluateFileSafety,
  isAllowed,
  issueLines,
  type Broker,
  type BrokerPlugin,
  type Decision,
  type FileSafetyPlugin,
  type ResolvedRequest,
  type ResolvedTarget,
} from 'brokered-shell';

/** Where each plugin taps evaluate-policy (see the table above). */
export const EnterpriseStage = {
  DENY: PolicyStage.ORGANISATION - 10,
  APPROVAL: PolicyStage.ORGANISATION,
  GRANT: PolicyStage.DEFAULTS - 1,
} as const;

const FILE_SAFETY = 'file-safety';

/** Both names a target goes by: the one asked about and the file actually touched. */
const namesOf = (target: ResolvedTarget) => [target.lexical, target.resolved];

/** Everything beneath a directory, or undefined when it cannot be read. */
async function below(dir: string): Promise<string[] | undefined> {
  try {
    return (await readdir(dir, { recursive: true })).map((entry) => path.posix.join(dir, entry));
  } catch {
    return undefined;
  }
}

/**
 * The paths a whole-directory operation reaches besides the directory itself: a
 * recursive delete or a move takes what is inside, a tree copy writes the source's
 * entries under the destination. A policy that looked only at the directory's own name
 * would let `rm -r certs` remove the key that `rm certs/server.pem` may not (file-safety
 * does the same for its rules, in tree.ts). `undefined`: the tree cannot be read.
 */
async function reachedBy(target: ResolvedTarget, resolved: ResolvedRequest): Promise<string[] | undefined> {
  if (target.kind !== 'directory') return [];
  const { operation, options } = resolved.request;
  if (operation === 'delete' || (operation === 'rename' && target.role === 'from')) return below(target.resolved);
  if (operation === 'copy' && target.role === 'to' && options.recursive) {
    const from = resolved.targets.find((t) => t.role === 'from');
    if (from?.kind !== 'directory') return [];
    const sources = await below(from.resolved);
    return sources?.map((source) => path.posix.join(target.resolved, path.posix.relative(from.resolved, source)));
  }
  return [];
}

function parse<S extends z.ZodType>(plugin: string, schema: S, input: unknown): z.infer<S> {
  const parsed = schema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `${plugin} options are invalid:\n  ${issueLines(parsed.error, 'options').join('\n  ')}`);
}

export const denyPemOptionsSchema = z.strictObject({
  suffixes: z.array(z.string().min(2).startsWith('.')).min(1).default(['.pem']),
});
export type DenyPemOptions = z.input<typeof denyPemOptionsSchema>;

/** Writing or deleting a private key file is refused, inside the workspace or not. */
export class DenyPemPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'enterprise-deny-pem';
  readonly name = DenyPemPlugin.PLUGIN_NAME;
  readonly #suffixes: readonly string[];

  constructor(options: DenyPemOptions = {}) {
    this.#suffixes = parse(this.name, denyPemOptionsSchema, options).suffixes;
  }

  apply(broker: Broker): void {
    broker.hooks.evaluatePolicy.tapPromise({ name: this.name, stage: EnterpriseStage.DENY }, async (target, resolved) => {
      if (target.access === 'read') return undefined;
      const deny = (reason: string): Decision => ({ verdict: 'deny', reason, source: this.name });
      const isKey = (name: string) => this.#suffixes.some((suffix) => name.endsWith(suffix));
      // A deny never loosens anything: no need to ask the standard policy.
      const named = namesOf(target).find(isKey);
      if (named) return deny(`${named}: private keys are never changed by commands`);
      const inside = await reachedBy(target, resolved);
      if (inside === undefined) return deny(`${target.resolved} cannot be inspected for private keys`);
      const key = inside.find(isKey);
      return key ? deny(`${target.resolved} contains ${key}: private keys are never changed by commands`) : undefined;
    });
  }
}

export const packageJsonApprovalOptionsSchema = z.strictObject({
  names: z.array(z.string().min(1)).min(1).default(['package.json']),
});
export type PackageJsonApprovalOptions = z.input<typeof packageJsonApprovalOptionsSchema>;

/** Changing a `package.json` (its dependencies run code on install) needs approval. */
export class PackageJsonApprovalPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'enterprise-package-json-approval';
  readonly name = PackageJsonApprovalPlugin.PLUGIN_NAME;
  readonly #names: ReadonlySet<string>;

  constructor(options: PackageJsonApprovalOptions = {}) {
    this.#names = new Set(parse(this.name, packageJsonApprovalOptionsSchema, options).names);
  }

  apply(broker: Broker): void {
    broker.hooks.evaluatePolicy.tap({ name: this.name, stage: EnterpriseStage.APPROVAL }, (target, resolved) => {
      if (target.access === 'read') return undefined;
      // The project's manifests, not the thousands inside node_modules that installs rewrite.
      const manifest = (name: string) => this.#names.has(path.posix.basename(name)) && !name.split('/').includes('node_modules');
      if (!namesOf(target).some(manifest)) return undefined;
      // Ask only where the standard policy would let the change through. Where it would
      // deny (outside the roots, a link pointing out) or ask anyway, say nothing: the
      // later taps then answer exactly as they would without this plugin.
      const standard = broker.plugin<FileSafetyPlugin>(FILE_SAFETY);
      if (standard && !isAllowed(evaluateFileSafety(target, standard.policy, resolved.request))) return undefined;
      const decision: Decision = { verdict: 'prompt', reason: `${target.resolved}: package.json changes need approval`, source: this.name };
      return decision;
    });
  }
}

export const cacheGrantOptionsSchema = z.strictObject({
  /** The user's home; `~/.cache` is taken from it. */
  home: z.string().startsWith('/').optional(),
  /** Directories under home whose contents are granted. */
  directories: z.array(z.string().min(1).refine((d) => !d.startsWith('/') && !d.split('/').includes('..'), 'must be relative to home, without ..')).default(['.cache']),
});
export type CacheGrantOptions = z.input<typeof cacheGrantOptionsSchema>;

function realOrSelf(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

/**
 * Writes under `~/.cache` are granted, although it lies outside the writable roots: this
 * plugin loosens the policy, and says so. It taps just before the defaults, so the
 * broker's protections, the organisation's denials and every configured rule still
 * decide first; it only replaces "outside the roots → deny" there. The resolved path
 * decides (a link under `~/.cache` pointing elsewhere is not granted).
 */
export class CacheGrantPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'enterprise-cache-grant';
  readonly name = CacheGrantPlugin.PLUGIN_NAME;
  readonly #granted: readonly string[];

  constructor(options: CacheGrantOptions = {}) {
    const parsed = parse(this.name, cacheGrantOptionsSchema, options);
    const home = path.resolve(parsed.home ?? os.homedir());
    this.#granted = [...new Set(parsed.directories.flatMap((dir) => [path.join(home, dir), realOrSelf(path.join(home, dir))]))];
  }

  apply(broker: Broker): void {
    broker.hooks.evaluatePolicy.tap({ name: this.name, stage: EnterpriseStage.GRANT }, (target) => {
      if (target.access === 'read') return undefined;
      // Writes anywhere in the directory (mkdir of it too); deletes only beneath it.
      const inside = (dir: string) =>
        target.resolved.startsWith(`${dir}/`) || (target.access === 'write' && target.resolved === dir);
      const dir = this.#granted.find(inside);
      return dir ? { verdict: 'grant-token', reason: `${target.resolved} is under ${dir}, which the organisation grants`, source: this.name } : undefined;
    });
  }
}

export interface EnterprisePolicyOptions {
  /** The user's home, for `~/.cache` (default: the OS's). */
  home?: string;
  denyPem?: DenyPemOptions;
  packageJson?: PackageJsonApprovalOptions;
  cacheGrant?: Omit<CacheGrantOptions, 'home'>;
}

/** The whole set, to register next to `standardPlugins(...)`. Order in the list does not matter: each taps its own stage. */
export function enterprisePolicy(options: EnterprisePolicyOptions = {}): BrokerPlugin[] {
  return [
    new DenyPemPlugin(options.denyPem),
    new PackageJsonApprovalPlugin(options.packageJson),
    new CacheGrantPlugin({ ...options.cacheGrant, ...(options.home ? { home: options.home } : {}) }),
  ];
}
