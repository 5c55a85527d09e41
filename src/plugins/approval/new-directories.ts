import path from 'node:path';
import type { Outcome } from '../../core/index.js';

/** `p` is `base` or beneath it, at a component boundary. */
export function isWithin(p: string, base: string): boolean {
  if (base === '/') return p.startsWith('/');
  return p.startsWith(base) && (p.length === base.length || p.charCodeAt(base.length) === 0x2f);
}

/** `p` and each directory above it, up to `/`. */
function* selfAndAncestors(p: string): Generator<string> {
  for (let dir = p; ; dir = path.posix.dirname(dir)) {
    yield dir;
    if (path.posix.dirname(dir) === dir) return;
  }
}

/**
 * What the command made in the current turn: the directories it created (a mkdir the
 * broker allowed), followed where they are renamed to. What is inside one of them was put
 * there by the command, so a person may let it set the whole directory up (a new
 * repository's hooks and config) with one answer; nothing older is offered that way.
 */
export class NewDirectories {
  readonly #made = new Set<string>();

  /** Follows an allowed request: remembers what it made, and where a made directory went. */
  observe(outcome: Outcome): void {
    if (!outcome.ok || !outcome.request) return;
    const { operation } = outcome.request;
    const at = (role: string) => outcome.targets.find((t) => t.role === role)?.resolved;
    if (operation === 'mkdir') {
      const made = at('path');
      if (made) this.#made.add(made);
    } else if (operation === 'rename') {
      const from = at('from');
      const to = at('to');
      if (from && to && this.#made.delete(from)) this.#made.add(to);
    }
  }

  clear(): void {
    this.#made.clear();
  }

  /**
   * The outermost directory made in this turn that holds `p` (or is it); with `creating`
   * (the request is the mkdir that makes `p`), `p` counts as made.
   */
  outermostAround(p: string, creating = false): string | undefined {
    let found = creating ? p : undefined;
    for (const dir of selfAndAncestors(p)) if (this.#made.has(dir)) found = dir;
    return found;
  }
}

/** A directory a person let the command set up, and until when. */
export interface DirectoryScope {
  readonly directory: string;
  readonly lasts: 'turn' | 'session';
}

/** The directory scopes granted so far; the turn's end forgets those that last a turn. */
export class DirectoryScopes {
  #scopes: DirectoryScope[] = [];

  add(scope: DirectoryScope): void {
    if (!this.#scopes.some((s) => s.directory === scope.directory && s.lasts === scope.lasts)) this.#scopes.push(scope);
  }

  covering(target: string): DirectoryScope | undefined {
    return this.#scopes.find((scope) => isWithin(target, scope.directory));
  }

  endTurn(): void {
    this.#scopes = this.#scopes.filter((scope) => scope.lasts === 'session');
  }

  list(): DirectoryScope[] {
    return [...this.#scopes];
  }
}
