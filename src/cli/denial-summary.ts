import { printable } from '../core/printable.js';

/** Denials listed by name before the summary only counts the rest. */
export const LISTED_DENIALS = 20;

/**
 * What `run` tells a person the policy refused, on stderr after the command. Each refused
 * path once; past LISTED_DENIALS, only the first refusal of a kind not listed yet (a
 * delete after many refused writes), so no kind of refusal goes unmentioned; the rest are
 * counted.
 */
export class DenialSummary {
  readonly #listed = new Map<string, string>();
  readonly #kinds = new Set<string>();
  #unlisted = 0;

  add(access: string, path: string, why: string): void {
    const key = `${access} ${path}`;
    if (this.#listed.has(key)) return;
    if (this.#listed.size < LISTED_DENIALS || !this.#kinds.has(access)) {
      this.#listed.set(key, why);
      this.#kinds.add(access);
    } else {
      this.#unlisted++;
    }
  }

  lines(): string[] {
    // Paths are the command's (a model's) choosing: one line each, no escape sequence sent raw.
    const out = [...this.#listed].map(([what, why]) => `brokered-shell: denied ${printable(what)}: ${printable(why)}`);
    if (this.#unlisted > 0) out.push(`brokered-shell: … and ${this.#unlisted} more refused request${this.#unlisted === 1 ? '' : 's'} (each is in the audit log)`);
    return out;
  }
}
