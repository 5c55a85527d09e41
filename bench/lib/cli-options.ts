/** A whole number option (flag or environment variable): `fallback` when unset, an error naming it when invalid. */
export function positiveInt(name: string, value: string | undefined, fallback: number, min = 1): number {
  if (value === undefined || value === '') return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < min) throw new Error(`${name} must be an integer of at least ${min}, got ${JSON.stringify(value)}`);
  return parsed;
}
