/** Polls until `check` returns a value (every 10 ms); throws after `limitMs` (a safety net, not a measurement). */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined> | T | undefined, limitMs = 20_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
