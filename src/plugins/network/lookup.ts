import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { NetworkRule } from './rules.js';

/** Resolves a name to its addresses (IPv4 and IPv6); the default asks the system resolver as programs do. */
export type Lookup = (name: string) => Promise<string[]>;

export const systemLookup: Lookup = async (name) => (await dnsLookup(name, { all: true, verbatim: true })).map((entry) => entry.address);

/** How long the broker trusts what it resolved: the system resolver gives no TTL. */
export const RESOLVED_TTL_SECONDS = 300;

export interface ResolvedAddress {
  name: string;
  address: string;
  ports: readonly [number, number];
  /** Seconds it is trusted for, counted from when it was looked up. */
  ttl: number;
  at: number;
}

/** Loopback and link-local answers for a name come only from `localhost`: elsewhere they are a rebinding. */
function plausible(name: string, address: string): boolean {
  const local = name === 'localhost' || name.endsWith('.localhost');
  const v4 = isIP(address) === 4;
  const loopback = v4 ? address.startsWith('127.') || address === '0.0.0.0' : address === '::1' || address === '::';
  const linkLocal = v4 ? address.startsWith('169.254.') : /^fe[89ab]/i.test(address);
  return local || (!loopback && !linkLocal);
}

/**
 * The addresses of the exact names among `rules` (a `*.` pattern names no host to look
 * up), looked up again when older than their TTL. What fails to resolve is left out.
 */
export class NameAddresses {
  readonly #cache = new Map<string, { at: number; addresses: string[] }>();

  constructor(private readonly lookup: Lookup = systemLookup) {}

  async resolve(rules: readonly NetworkRule[], now = Date.now()): Promise<ResolvedAddress[]> {
    const names = rules.filter((rule): rule is Extract<NetworkRule, { kind: 'name' }> => rule.kind === 'name' && !rule.pattern.startsWith('*.'));
    const looked = await Promise.all(
      [...new Set(names.map((rule) => rule.pattern))].map(async (name) => {
        const cached = this.#cache.get(name);
        if (cached && now - cached.at < RESOLVED_TTL_SECONDS * 1000) return [name, cached] as const;
        const addresses = await this.lookup(name).catch(() => [] as string[]);
        const entry = { at: now, addresses: addresses.filter((address) => plausible(name, address)) };
        this.#cache.set(name, entry);
        return [name, entry] as const;
      }),
    );
    const byName = new Map(looked);
    return names.flatMap((rule) => {
      const entry = byName.get(rule.pattern);
      if (!entry) return [];
      const ttl = Math.max(1, RESOLVED_TTL_SECONDS - Math.floor((now - entry.at) / 1000));
      return entry.addresses.map((address) => ({ name: rule.pattern, address, ports: rule.ports, ttl, at: entry.at }));
    });
  }
}
