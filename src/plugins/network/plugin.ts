import { isIP } from 'node:net';
import { z } from 'zod';
import { Stage, type Broker, type BrokerPlugin } from '../../core/index.js';
import type { KernelConnection, KernelConnectionRecord, KernelNetworkQuestion } from '../../sandbox/network-protocol.js';
import { compileNetworkTable } from '../../sandbox/network-table.js';
import { ApprovalPlugin } from '../approval/index.js';
import { parseOptions } from '../options.js';
import { auditDecided, describeConnection, TurnConnections, type ConnectionFact, type Decided } from './connections.js';
import { NameAddresses, type Lookup, type ResolvedAddress } from './lookup.js';
import { RESOLV_CONF, readResolvers, type Resolver } from './resolvers.js';
import { GUARDED_RANGES, networkModeSchema, networkRuleSchema, parseNetworkRule, parseNetworkRules, type NetworkMode, type NetworkRule } from './rules.js';

export const PLUGIN_NAME = 'network';

const EACCES = 13;

export const networkOptionsSchema = z.strictObject({
  mode: networkModeSchema.default('allowlist'),
  allow: z.array(networkRuleSchema).default([]),
  deny: z.array(networkRuleSchema).default([]),
  /** The default entries (networkDefaults), each with where it came from. */
  defaults: z.array(z.strictObject({ rule: networkRuleSchema, from: z.string() })).default([]),
  /** Where the resolvers are read from. */
  resolvConf: z.string().min(1).default(RESOLV_CONF),
  /** The home config a "save" answer adds its entry to; without it, saving is not offered. */
  saveTo: z.string().min(1).optional(),
});
export type NetworkOptions = z.input<typeof networkOptionsSchema>;

/** What a yes to a connection covers: this command, the session, or the home config for good. */
export type ConnectionChoice = { readonly scope: 'once' } | { readonly scope: 'session' } | { readonly scope: 'save'; readonly file: string };

/** A connection a person is asked about while the call waits. */
export interface ConnectionPrompt {
  readonly connection: KernelConnection;
  /** The `network.allow` entry a yes adds (`example.org`, `203.0.113.5:443`). */
  readonly rule: string;
  readonly choices: readonly ConnectionChoice[];
  readonly toolCallId?: string;
  /** Aborted when the question times out. */
  readonly signal: AbortSignal;
}
export type ConnectionApprover = (prompt: ConnectionPrompt) => Promise<ConnectionChoice | boolean | undefined> | ConnectionChoice | boolean | undefined;

/** Adds an entry to `network.allow` of the home config. */
export type SaveRule = (rule: string, file: string) => Promise<void>;

/** A refused connection and the entry that would allow it, for `run`'s summary. */
export interface RefusedConnection {
  connection: KernelConnection;
  reason: string;
  rule: string;
}

interface Call {
  grants: NetworkRule[];
  push?: (lines: string[]) => void;
  refused: Map<string, RefusedConnection>;
}

/** The entry that would allow a connection: the name for a DNS query, else the address and port. */
export function ruleFor(c: Pick<KernelConnection, 'kind' | 'host' | 'address' | 'port'>): string {
  if (c.kind === 'dns') return c.host ?? c.address;
  return isIP(c.address) === 6 ? `[${c.address}]:${c.port}` : `${c.address}:${c.port}`;
}

/**
 * The network policy of a session. It compiles the configuration (the `allow` and `deny`
 * entries, the defaults, what was approved) into the table each tool call's supervisor
 * decides connections by, and answers what that table cannot decide: first by resolving
 * the allowed names again (an address may have changed), then by asking a person while
 * the call waits (in the approval plugin's queue, with its timeout), else a refusal.
 * Every connection, allowed or refused, becomes an audit record and counts in the turn's
 * record (`turn.facts.connections`).
 */
export class NetworkPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = PLUGIN_NAME;
  readonly name = PLUGIN_NAME;
  readonly options: z.infer<typeof networkOptionsSchema>;
  readonly resolvers: readonly Resolver[];
  readonly #allow: NetworkRule[];
  readonly #deny: NetworkRule[];
  readonly #session: NetworkRule[] = [];
  readonly #calls = new Map<string, Call>();
  readonly #names: NameAddresses;
  readonly #turn = new TurnConnections();
  readonly #save: SaveRule | undefined;
  #resolved: ResolvedAddress[] = [];
  #approver: ConnectionApprover | undefined;
  #broker: Broker | undefined;

  constructor(options: NetworkOptions = {}, extra: { lookup?: Lookup; save?: SaveRule } = {}) {
    this.options = parseOptions(this.name, networkOptionsSchema, options);
    this.#allow = parseNetworkRules([...this.options.allow, ...this.options.defaults.map((entry) => entry.rule)]);
    this.#deny = parseNetworkRules(this.options.deny);
    this.#names = new NameAddresses(extra.lookup);
    this.#save = extra.save;
    this.resolvers = readResolvers(this.options.resolvConf);
  }

  get mode(): NetworkMode {
    return this.options.mode;
  }

  /** Who answers connection questions (without one, each is refused). */
  setApprover(approver: ConnectionApprover | undefined): void {
    this.#approver = approver;
  }

  apply(broker: Broker): void {
    this.#broker = broker;
    broker.hooks.turnStarted.tap(this.name, () => this.#turn.clear());
    broker.hooks.turnCommitting.tap({ name: this.name, stage: Stage.EARLY }, (turn) => {
      if (this.#turn.list().length > 0) turn.facts.connections = this.#turn.list();
      if (this.#turn.dropped > 0) turn.facts.connectionsDropped = this.#turn.dropped;
    });
  }

  /** A tool call's supervisor: its table, and where the tables that replace it go. Returns the detach. */
  attach(toolCallId: string, push?: (lines: string[]) => void): () => void {
    this.#calls.set(toolCallId, { grants: [], refused: new Map(), ...(push ? { push } : {}) });
    return () => this.#calls.delete(toolCallId);
  }

  /** The table for a tool call's supervisor. */
  tableFor(toolCallId?: string): string[] {
    const call = toolCallId === undefined ? undefined : this.#calls.get(toolCallId);
    const now = Date.now();
    return compileNetworkTable({
      mode: this.options.mode,
      allow: [...this.#allow, ...this.#session, ...(call?.grants ?? [])],
      deny: this.#deny,
      guarded: GUARDED_RANGES,
      resolved: this.#resolved
        .map((entry) => ({ ...entry, ttl: entry.ttl - Math.floor((now - entry.at) / 1000) }))
        .filter((entry) => entry.ttl > 0),
      resolvers: this.resolvers,
    });
  }

  /** What the supervisor decided itself. */
  record(record: KernelConnectionRecord, meta: { toolCallId?: string; traceId?: string } = {}): void {
    this.#decided({ connection: record, allowed: record.errno === 0, errno: record.errno, reason: record.reason, decidedBy: 'sandbox:supervisor', count: record.count, ...meta });
  }

  /** The refused connections of a tool call, each target once, and forgets them. */
  takeRefused(toolCallId: string): RefusedConnection[] {
    const call = this.#calls.get(toolCallId);
    if (!call) return [];
    const taken = [...call.refused.values()];
    call.refused.clear();
    return taken;
  }

  /** A connection the supervisor's table could not decide: 0 allows it, an errno refuses it. */
  async question(question: KernelNetworkQuestion, meta: { toolCallId?: string; traceId?: string } = {}): Promise<number> {
    const allow = (reason: string, decidedBy: string) => {
      this.#decided({ connection: question, allowed: true, reason, decidedBy, ...meta });
      return 0;
    };
    if (this.options.mode !== 'allowlist') return this.#refuse(question, `network.mode is ${this.options.mode}`, meta);
    if (question.kind !== 'dns') {
      const found = await this.#resolveAgain(question);
      if (found) return allow(`an address of ${found}, which network.allow names (resolved again)`, 'network');
    }
    const approval = this.#broker?.plugin<ApprovalPlugin>(ApprovalPlugin.PLUGIN_NAME);
    const approver = this.#approver;
    if (!approver || !approval || approval.options.mode !== 'inline') return this.#refuse(question, 'not in network.allow, and nobody could be asked', meta);
    const rule = ruleFor(question);
    const choices: ConnectionChoice[] = [{ scope: 'once' }, { scope: 'session' }, ...(this.#save && this.options.saveTo ? [{ scope: 'save' as const, file: this.options.saveTo }] : [])];
    const answer = await approval.oneAtATime(() => this.#ask(approver, { connection: question, rule, choices, ...(meta.toolCallId ? { toolCallId: meta.toolCallId } : {}) }, approval.options.timeoutMs));
    if (typeof answer === 'string') return this.#refuse(question, `not in network.allow; ${answer}`, meta);
    try {
      await this.#grant(rule, answer, meta.toolCallId);
    } catch (error) {
      // A yes that cannot be kept as asked (the home config cannot be written) is no yes.
      return this.#refuse(question, `approved, but ${error instanceof Error ? error.message : String(error)}`, meta);
    }
    return allow(`approved ${answer.scope === 'once' ? 'for this command' : answer.scope === 'session' ? 'for this session' : `and saved to ${answer.file}`}`, 'approval');
  }

  async #ask(approver: ConnectionApprover, prompt: Omit<ConnectionPrompt, 'signal'>, timeoutMs: number): Promise<ConnectionChoice | string> {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      if (timeoutMs > 0) timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    try {
      const answer = await Promise.race([Promise.resolve(approver({ ...prompt, signal: controller.signal })), timedOut]);
      if (answer === 'timeout') {
        controller.abort();
        return `no answer within ${Math.round(timeoutMs / 1000)} s`;
      }
      if (answer === true) return { scope: 'once' };
      const chosen = typeof answer === 'object' && answer !== null ? prompt.choices.find((choice) => choice.scope === answer.scope) : undefined;
      return chosen ?? 'not approved';
    } catch (error) {
      controller.abort();
      return `the approver failed (${error instanceof Error ? error.message : String(error)})`;
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  async #grant(rule: string, choice: ConnectionChoice, toolCallId: string | undefined): Promise<void> {
    const parsed = parseNetworkRule(rule);
    if ('error' in parsed) return;
    if (choice.scope === 'once') {
      const call = toolCallId === undefined ? undefined : this.#calls.get(toolCallId);
      call?.grants.push(parsed);
      if (call && toolCallId !== undefined) call.push?.(this.tableFor(toolCallId));
      return;
    }
    if (choice.scope === 'save') await this.#save?.(rule, choice.file);
    this.#session.push(parsed);
    this.#pushAll();
  }

  /** Resolves the allowed names again; the name the address now belongs to, if any (the tables then carry it). */
  async #resolveAgain(question: KernelConnection): Promise<string | undefined> {
    this.#resolved = await this.#names.resolve([...this.#allow, ...this.#session]);
    const hit = this.#resolved.find((entry) => sameAddress(entry.address, question.address) && question.port >= entry.ports[0] && question.port <= entry.ports[1]);
    if (hit) this.#pushAll();
    return hit?.name;
  }

  #pushAll(): void {
    for (const [id, call] of this.#calls) call.push?.(this.tableFor(id));
  }

  #refuse(question: KernelConnection, reason: string, meta: { toolCallId?: string; traceId?: string }): number {
    this.#decided({ connection: question, allowed: false, errno: EACCES, reason, decidedBy: 'network', ...meta });
    return EACCES;
  }

  #decided(decided: Decided): void {
    if (this.#broker) auditDecided(this.#broker, decided);
    if (this.#turn.add(decided)) {
      const turn = this.#broker?.currentTurn;
      if (turn) turn.facts.connections = this.#turn.list();
    }
    if (decided.allowed || decided.toolCallId === undefined) return;
    const call = this.#calls.get(decided.toolCallId);
    const rule = ruleFor(decided.connection);
    if (call && !call.refused.has(rule)) call.refused.set(rule, { connection: decided.connection, reason: decided.reason, rule });
  }
}

function sameAddress(a: string, b: string): boolean {
  const norm = (x: string) => x.toLowerCase().replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, '$1');
  return norm(a) === norm(b);
}

export { describeConnection, type ConnectionFact };
