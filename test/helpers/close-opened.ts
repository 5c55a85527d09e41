/**
 * Brokers and stores a test opened, closed before its temp dirs are removed. A backup store
 * keeps making spare temps and fan-out directories in the background (spare-temps.ts,
 * fanout-dirs.ts); removing its home while one is being made fails with ENOTEMPTY.
 */
interface Closable {
  close(): Promise<unknown>;
}

const opened: Closable[] = [];

export function closeLater<T extends Closable>(thing: T): T {
  opened.push(thing);
  return thing;
}

/** Close what `closeLater` was given, newest first; call it before removing temp dirs. */
export async function closeOpened(): Promise<void> {
  for (const thing of opened.splice(0).reverse()) await thing.close();
}
