import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';

/** Where the resolvers are read from when nothing else is said. */
export const RESOLV_CONF = '/etc/resolv.conf';

export interface Resolver {
  address: string;
  port: number;
}

/**
 * The `nameserver` lines of a resolv.conf: the resolvers whose traffic the supervisor
 * takes into its DNS proxy. A file of our own may give a port (`nameserver
 * 127.0.0.1:5353`, `[::1]:5353`), which glibc's files never do: tests point the broker
 * at a resolver of their own that way. A file that cannot be read gives none, and then
 * every query is an ordinary datagram to an address that needs allowing.
 */
export function readResolvers(file: string = RESOLV_CONF): Resolver[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const found: Resolver[] = [];
  for (const line of text.split('\n')) {
    const match = /^\s*nameserver\s+(\S+)/.exec(line);
    if (!match) continue;
    const value = match[1] ?? '';
    const bracketed = /^\[([^\]]+)\]:(\d+)$/.exec(value);
    const v4port = /^(\d+\.\d+\.\d+\.\d+):(\d+)$/.exec(value);
    const [address, port] = bracketed ? [bracketed[1] ?? '', Number(bracketed[2])] : v4port ? [v4port[1] ?? '', Number(v4port[2])] : [value.replace(/%.*$/, ''), 53];
    if (isIP(address) !== 0 && port > 0 && port < 65536) found.push({ address, port });
  }
  return found;
}
