import { readFileSync } from 'node:fs';
import { BrokerError, ErrorCodes, Stage, type Broker, type BrokerPlugin, type Decision } from '../core/index.js';
import { getLeaseHooks } from './lease/hooks.js';

/** The parent of a process, or undefined when it is gone (or unreadable). */
export type ParentOf = (pid: number) => number | undefined;

export interface ToolCallBindingOptions {
  /** How to find a process's parent (default: /proc/PID/stat). */
  parentOf?: ParentOf;
}

/** Ancestors walked before giving up (a deeper tree is treated as unknown: refused). */
const MAX_DEPTH = 256;

/** The parent pid from /proc/PID/stat (after the `comm` field, which may hold spaces and parentheses). */
export function procParentOf(pid: number): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const parent = Number(fields[1]);
  return Number.isInteger(parent) && parent >= 0 ? parent : undefined;
}

/**
 * A socket client names its tool call itself (`BROKERED_SHELL_TOOL_CALL_ID`), and a
 * prompt is remembered under that id until the call's owner asks a person. A command
 * could therefore name another running call's id: its writes would be asked about as
 * that call's, and what the person approves for that call is granted for the session.
 * The owner binds each running call to the pid of the process it started (`bind`); a
 * socket request (one with a peer) from a process below a bound call must name that
 * call or none, and a peer below no bound call may not name a bound call. A peer the
 * broker cannot place (its process gone) is refused while calls are bound. Requests
 * without a peer (the kernel supervisor's, in-process calls) carry the owner's own id
 * and are left alone; with nothing bound (`serve`), so is everything.
 */
export class ToolCallBindingPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'tool-call-binding';
  readonly name = ToolCallBindingPlugin.PLUGIN_NAME;
  readonly #calls = new Map<number, string>();
  readonly #parentOf: ParentOf;
  #broker: Broker | undefined;

  constructor(options: ToolCallBindingOptions = {}) {
    this.#parentOf = options.parentOf ?? procParentOf;
  }

  apply(broker: Broker): void {
    // It binds socket requests to their tool call; kernel requests are bound by the supervisor that sends them.
    getLeaseHooks(broker).contribute.tap(this.name, () => undefined);
    if (this.#broker && this.#broker !== broker) {
      throw new BrokerError(ErrorCodes.INVALID_OPTIONS, 'a tool-call-binding plugin serves one broker; make one per session');
    }
    this.#broker = broker;
    // After the session guard: a foreign session is refused for that reason first.
    broker.hooks.validateSession.tap({ name: this.name, stage: Stage.NORMAL }, (request, context) => {
      if (!request.peer || this.#calls.size === 0) return undefined;
      const claimed = request.toolCallId;
      const owner = this.ownerOf(request.peer.pid);
      let reason: string | undefined;
      if (owner === null) reason = 'the caller is in no known process tree while tool calls run';
      else if (owner !== undefined && claimed !== undefined && claimed !== owner) reason = 'request names a tool call other than the one its process belongs to';
      else if (owner === undefined && claimed !== undefined && this.#isBound(claimed)) reason = 'request names a running tool call its process does not belong to';
      if (reason === undefined) return undefined;
      context.log.warn({ phase: 'session', input: { toolCallId: claimed }, peer: request.peer, owner }, reason);
      const denial: Decision = { verdict: 'deny', reason, source: this.name };
      return denial;
    });
  }

  /** Bind a running call to the root of its processes; returns the unbind. */
  bind(rootPid: number, toolCallId: string): () => void {
    this.#calls.set(rootPid, toolCallId);
    return () => {
      if (this.#calls.get(rootPid) === toolCallId) this.#calls.delete(rootPid);
    };
  }

  /**
   * The call whose tree holds `pid`: its id; undefined when the process is below no bound
   * call; null when it cannot be placed (gone, or the walk failed).
   */
  ownerOf(pid: number): string | undefined | null {
    let current = pid;
    for (let depth = 0; depth < MAX_DEPTH; depth++) {
      const bound = this.#calls.get(current);
      if (bound !== undefined) return bound;
      if (current <= 1) return undefined;
      const parent = this.#parentOf(current);
      if (parent === undefined) return null;
      if (parent === 0) return undefined;
      current = parent;
    }
    return null;
  }

  #isBound(toolCallId: string): boolean {
    for (const id of this.#calls.values()) if (id === toolCallId) return true;
    return false;
  }
}
