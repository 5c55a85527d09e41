/**
 * The order changes run in: per path, not one at a time. A change holds the names it is
 * about (and everything below them); another change that names one of those, or a
 * directory above one, waits for it, in arrival order, while changes elsewhere go on at
 * once. A change that holds `ALL_PATHS` waits for every change before it and holds back
 * every change after it (a commit, or a request whose names cannot be told apart from
 * others' by their text alone: see the broker).
 */
export const ALL_PATHS = Symbol('all paths');
export type OrderKeys = readonly string[] | typeof ALL_PATHS;

interface Holder {
  readonly keys: OrderKeys;
  start: () => void;
}

/** Whether `a` is `b` or lies below it, or the other way round. */
function related(a: string, b: string): boolean {
  if (a === b) return true;
  const [short, long] = a.length < b.length ? [a, b] : [b, a];
  return long.startsWith(short === '/' ? '/' : `${short}/`);
}

function conflict(a: OrderKeys, b: OrderKeys): boolean {
  if (a === ALL_PATHS || b === ALL_PATHS) return true;
  return a.some((x) => b.some((y) => related(x, y)));
}

export class PathOrder {
  readonly #running = new Set<Holder>();
  readonly #waiting: Holder[] = [];

  /**
   * Runs `task` once no earlier change holds a related name, then keeps the names until
   * `holdAfter`'s promise (if any) settles; its result is `task`'s.
   */
  run<T>(keys: OrderKeys, task: () => Promise<T>, holdAfter?: (value: T) => Promise<void> | undefined): Promise<T> {
    let holder!: Holder;
    const started = new Promise<void>((resolve) => (holder = { keys, start: resolve }));
    this.#waiting.push(holder);
    this.#pump();
    const result = started.then(task);
    void result
      .then((value) => holdAfter?.(value), () => undefined)
      .catch(() => undefined)
      .finally(() => {
        this.#running.delete(holder);
        this.#pump();
      });
    return result;
  }

  /** How many changes run or wait (for tests). */
  get size(): number {
    return this.#running.size + this.#waiting.length;
  }

  /** Starts every waiting change that conflicts with nothing running and nothing waiting before it. */
  #pump(): void {
    for (let i = 0; i < this.#waiting.length; i++) {
      const holder = this.#waiting[i] as Holder;
      const blocked =
        [...this.#running].some((other) => conflict(holder.keys, other.keys)) ||
        this.#waiting.slice(0, i).some((other) => conflict(holder.keys, other.keys));
      if (blocked) continue;
      this.#waiting.splice(i, 1);
      i -= 1;
      this.#running.add(holder);
      holder.start();
    }
  }
}
