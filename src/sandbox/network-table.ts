import { isIPv4 } from 'node:net';
import type { NetworkMode, NetworkRule } from '../plugins/network/rules.js';

/**
 * The network table the supervisor decides connections by, as the text lines of
 * native/sandbox/PROTOCOL.md ("Network table"). Compiled here from the policy; the
 * supervisor only matches.
 */
export interface NetworkTableInput {
  mode: NetworkMode;
  allow: readonly NetworkRule[];
  deny: readonly NetworkRule[];
  /** Ranges reached only through an allow entry inside them (link-local, metadata). */
  guarded: readonly NetworkRule[];
  /** Addresses of allowed names, resolved by the broker: until `ttl` seconds from now (0: until the next table). */
  resolved: ReadonlyArray<{ name: string; address: string; ports: readonly [number, number]; ttl: number }>;
  /** The resolvers of /etc/resolv.conf: their traffic goes through the supervisor's DNS proxy. */
  resolvers: ReadonlyArray<{ address: string; port: number }>;
}

const ports = (range: readonly [number, number]) => `${range[0]}-${range[1]}`;

function cidrLine(kind: 'allow' | 'deny' | 'guard', rule: Extract<NetworkRule, { kind: 'cidr' }>): string {
  return `${kind} ${rule.address}/${rule.prefix} ${ports(rule.ports)}`;
}

export function compileNetworkTable(input: NetworkTableInput): string[] {
  const lines = [`mode ${input.mode}`];
  for (const [kind, rules] of [
    ['allow', input.allow],
    ['deny', input.deny],
  ] as const) {
    for (const rule of rules) lines.push(rule.kind === 'cidr' ? cidrLine(kind, rule) : `${kind}-name ${rule.pattern} ${ports(rule.ports)}`);
  }
  for (const rule of input.guarded) if (rule.kind === 'cidr') lines.push(cidrLine('guard', rule));
  for (const entry of input.resolved) lines.push(`addr ${entry.address} ${ports(entry.ports)} ${Math.max(0, Math.round(entry.ttl))} ${entry.name}`);
  for (const resolver of input.resolvers) lines.push(`resolver ${resolver.address} ${resolver.port}`);
  return lines;
}

/** An address as the supervisor writes it (IPv4 dotted, IPv6 compressed), for matching records and rules. */
export function addressKey(address: string): string {
  return isIPv4(address) ? address : address.toLowerCase();
}
