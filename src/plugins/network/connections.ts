import type { Broker } from '../../core/index.js';
import { errnoName } from '../../sandbox/errno.js';
import type { KernelConnection, NetKind, NetProtocol } from '../../sandbox/network-protocol.js';
import { auditConnection } from '../audit.js';

/** The error code of a refused connection in the audit log. */
export const NETWORK_REFUSED = 'BSH_NETWORK_REFUSED';

/**
 * One connection target of a turn, as the turn's record keeps it (`turn.facts.connections`,
 * then the manifest's `connections`): the same kind, protocol, host, address, port and
 * verdict count once, with how many times.
 */
export interface ConnectionFact {
  kind: NetKind;
  protocol: NetProtocol;
  host?: string;
  address: string;
  /** Absent for a DNS query (no port was named yet). */
  port?: number;
  verdict: 'allow' | 'deny';
  reason: string;
  count: number;
  /** The process that made the first of them. */
  pid: number;
  toolCallId?: string;
  firstAt: string;
}

/** Distinct targets kept per turn; past it the rest is only counted in `dropped`. */
export const MAX_FACTS = 2000;

export interface Decided {
  connection: KernelConnection;
  allowed: boolean;
  /** The errno a refused call got. */
  errno?: number;
  reason: string;
  /** `sandbox:supervisor` for the table's decisions, `network` or `approval` for the broker's. */
  decidedBy: string;
  toolCallId?: string;
  traceId?: string;
  /** How many calls the supervisor counted into this one record (the same target and outcome within a second). */
  count?: number;
}

/** What a person reads for a connection: `host (address):port/tcp`. */
export function describeConnection(c: Pick<KernelConnection, 'kind' | 'host' | 'address' | 'port' | 'protocol'>): string {
  if (c.kind === 'dns') return `the name ${c.host ?? '(none)'} (DNS, to ${c.address})`;
  const where = c.host ? `${c.host} (${c.address})` : c.address.includes(':') ? `[${c.address}]` : c.address;
  return `${where}:${c.port} (${c.protocol})`;
}

/** The audit record of a decided connection. */
export function auditDecided(broker: Broker, decided: Decided): void {
  const { connection } = decided;
  const record: Parameters<typeof auditConnection>[1] = {
    origin: 'kernel',
    operation: connection.kind,
    paths: [],
    verdict: decided.allowed ? 'allow' : 'deny',
    decision: decided.allowed ? 'allow' : 'deny',
    decidedBy: decided.decidedBy,
    reason: decided.reason,
    ok: decided.allowed,
    durationMs: 0,
    connection: { address: connection.address, port: connection.port, protocol: connection.protocol, pid: connection.tgid, tid: connection.pid, count: decided.count ?? 1 },
  };
  if (connection.host !== undefined) record.connection = { ...record.connection, host: connection.host } as NonNullable<typeof record.connection>;
  if (!decided.allowed) {
    const errno = decided.errno === undefined ? undefined : errnoName(decided.errno);
    record.error = { code: NETWORK_REFUSED, message: decided.reason, ...(errno ? { errno } : {}) };
  }
  if (decided.toolCallId) record.toolCallId = decided.toolCallId;
  if (decided.traceId) record.traceId = decided.traceId;
  auditConnection(broker, record);
}

/** A turn's connections, counted per target. */
export class TurnConnections {
  readonly #facts = new Map<string, ConnectionFact>();
  dropped = 0;

  /** Counts one; true when it is a target the turn had not seen (the caller publishes the list again). */
  add(decided: Decided): boolean {
    const c = decided.connection;
    const verdict = decided.allowed ? 'allow' : 'deny';
    const key = [c.kind, c.protocol, c.host ?? '', c.address, c.kind === 'dns' ? '' : c.port, verdict].join('\0');
    const known = this.#facts.get(key);
    if (known) {
      known.count += decided.count ?? 1;
      return false;
    }
    if (this.#facts.size >= MAX_FACTS) {
      this.dropped += 1;
      return false;
    }
    const fact: ConnectionFact = { kind: c.kind, protocol: c.protocol, address: c.address, verdict, reason: decided.reason, count: decided.count ?? 1, pid: c.tgid, firstAt: new Date().toISOString() };
    if (c.host !== undefined) fact.host = c.host;
    if (c.kind !== 'dns') fact.port = c.port;
    if (decided.toolCallId) fact.toolCallId = decided.toolCallId;
    this.#facts.set(key, fact);
    return true;
  }

  list(): ConnectionFact[] {
    return [...this.#facts.values()];
  }

  clear(): void {
    this.#facts.clear();
    this.dropped = 0;
  }
}
