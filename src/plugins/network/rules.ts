import { isIPv4, isIPv6 } from 'node:net';
import { z } from 'zod';

/**
 * The entries of `network.allow` and `network.deny`: a host name (`example.org`), every
 * name below one (`*.example.org`, not the name itself), an address or a CIDR block
 * (`10.0.0.0/8`, `fd00::/8`), each with an optional port or port range
 * (`example.org:443`, `127.0.0.1:8000-8100`; IPv6 in brackets then: `[::1]:8080`,
 * `[fd00::/8]:443`). No port: every port. Names are matched without regard to case.
 */
export type NetworkRule =
  | { kind: 'name'; pattern: string; ports: readonly [number, number]; text: string }
  | { kind: 'cidr'; address: string; prefix: number; v4: boolean; ports: readonly [number, number]; text: string };

const ALL_PORTS = [0, 65535] as const;
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;

function parsePorts(text: string): readonly [number, number] | string {
  const match = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(text);
  if (!match) return `${JSON.stringify(text)} is not a port or a port range (8080, 8000-8100)`;
  const lo = Number(match[1]);
  const hi = match[2] === undefined ? lo : Number(match[2]);
  if (lo > 65535 || hi > 65535 || hi < lo) return `${text} is not a port range within 0-65535`;
  return [lo, hi];
}

function parseHost(text: string): string | { error: string } {
  const host = text.toLowerCase().replace(/\.$/, '');
  const wildcard = host.startsWith('*.');
  const rest = wildcard ? host.slice(2) : host;
  const labels = rest.split('.');
  if (rest.includes('*')) return { error: `${JSON.stringify(text)}: a * may only stand first, as *.example.org` };
  if (rest.length === 0 || rest.length > 253 || !labels.every((label) => LABEL.test(label))) {
    return { error: `${JSON.stringify(text)} is not a host name, address or CIDR block` };
  }
  if (labels.length < 2 && wildcard) return { error: `${JSON.stringify(text)} would match every name below a top-level domain` };
  return host;
}

function parseCidr(text: string, ports: readonly [number, number], original: string): NetworkRule | string {
  const [address = '', prefixText, extra] = text.split('/');
  if (extra !== undefined) return `${JSON.stringify(original)} has more than one /`;
  const v4 = isIPv4(address);
  if (!v4 && !isIPv6(address)) return `${JSON.stringify(original)} is not an address`;
  if (/%/.test(address)) return `${JSON.stringify(original)}: a zone index (%eth0) cannot be matched`;
  const max = v4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
  if (!(prefix >= 0 && prefix <= max)) return `${JSON.stringify(original)}: the prefix must be 0-${max}`;
  return { kind: 'cidr', address, prefix, v4, ports, text: original };
}

/** One entry, or why it is not one. */
export function parseNetworkRule(text: string): NetworkRule | { error: string } {
  const original = text;
  const trimmed = text.trim();
  if (trimmed !== text || text === '') return { error: `${JSON.stringify(text)} is empty or has spaces around it` };
  let body = trimmed;
  let ports: readonly [number, number] = ALL_PORTS;
  const bracket = /^\[([^\]]+)\](?::(.+))?$/.exec(body);
  if (bracket) {
    body = bracket[1] ?? '';
    if (bracket[2] !== undefined) {
      const parsed = parsePorts(bracket[2]);
      if (typeof parsed === 'string') return { error: parsed };
      ports = parsed;
    }
    const rule = parseCidr(body, ports, original);
    return typeof rule === 'string' ? { error: rule } : rule;
  }
  // An IPv6 address without brackets has no port: its colons are its own.
  const colons = (body.match(/:/g) ?? []).length;
  if (colons === 1) {
    const at = body.lastIndexOf(':');
    const parsed = parsePorts(body.slice(at + 1));
    if (typeof parsed === 'string') return { error: parsed };
    ports = parsed;
    body = body.slice(0, at);
  }
  const address = body.split('/')[0] ?? '';
  if (isIPv4(address) || isIPv6(address) || body.includes('/')) {
    const rule = parseCidr(body, ports, original);
    return typeof rule === 'string' ? { error: rule } : rule;
  }
  const host = parseHost(body);
  if (typeof host !== 'string') return host;
  return { kind: 'name', pattern: host, ports, text: original };
}

export const networkRuleSchema = z
  .string()
  .max(300)
  .superRefine((value, context) => {
    const parsed = parseNetworkRule(value);
    if ('error' in parsed) context.addIssue({ code: 'custom', message: parsed.error });
  });

/** Every entry of a list, parsed (the schema has refused the bad ones already). */
export function parseNetworkRules(texts: readonly string[]): NetworkRule[] {
  return texts.flatMap((text) => {
    const parsed = parseNetworkRule(text);
    return 'error' in parsed ? [] : [parsed];
  });
}

/**
 * Link-local and metadata addresses: cloud instance metadata (169.254.169.254,
 * fd00:ec2::254) hands out credentials, so they are reached only through an allow
 * entry that lies inside one of these ranges, never through a broader one or a name.
 */
export const GUARDED_RANGES: readonly NetworkRule[] = parseNetworkRules(['169.254.0.0/16', 'fe80::/10', 'fd00:ec2::254']);

export const networkModeSchema = z.enum(['allowlist', 'open', 'off']);
export type NetworkMode = z.infer<typeof networkModeSchema>;

/** How far each mode lets a command reach: a project's file may only move down. */
export const MODE_REACH: Record<NetworkMode, number> = { off: 0, allowlist: 1, open: 2 };
