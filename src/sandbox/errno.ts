import { constants } from 'node:os';

const table: Readonly<Record<string, number>> = constants.errno;

/** The number of an errno name on this platform (`errnoFromName('EACCES')` → 13). */
export function errnoFromName(name: string): number {
  const value = table[name];
  if (value === undefined) throw new RangeError(`unknown errno name ${name}`);
  return value;
}

/** The name of an errno number, or `E<number>` when the platform has none. */
export function errnoName(errno: number): string {
  for (const [name, value] of Object.entries(table)) if (value === errno) return name;
  return `E${errno}`;
}
