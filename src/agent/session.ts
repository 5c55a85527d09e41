import { mkdtemp, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { BrokerError, ErrorCodes, type Broker, type BrokerRequestInput, type Logger, type Outcome } from '../core/index.js';
import { ApprovalPlugin, blockKey, type ApprovalChoice, type ApprovalPrompt, type PromptBlock } from '../plugins/approval/index.js';
import { NetworkPlugin, type RefusedConnection } from '../plugins/network/index.js';
import { SessionGrantsPlugin, type SessionGrant } from '../plugins/session-grants.js';
import { openTargets, operationTargets } from '../requests/targets.js';
import { BackupCollector } from './backup-collector.js';
import { isExcluded, toInvocation, type Invocation } from './command-line.js';
import type { SessionConfig } from './config.js';
import { mergeEnv, withoutBrokerEnv } from './env.js';
import { DEFAULT_MAX_OUTPUT_BYTES } from './output-capture.js';
import { finishCommand, startLocal, stdioFor, type FinishedCommand } from './run-process.js';
import { startSandboxed } from './sandboxed-run.js';
import { checkBeginTurnOptions, checkSessionOptions } from './options.js';
import { newId, setUpSession, type SandboxResources, type SessionResources } from './session-setup.js';
import { TurnController } from './turns.js';
import type {
  ApprovalRequest,
  Approver,
  BeginTurnOptions,
  EndTurnOptions,
  EndTurnResult,
  ExecuteApproval,
  ExecuteOptions,
  ExecuteResult,
  ExecutionMode,
  GuardDeleteOptions,
  GuardResult,
  GuardTool,
  GuardWriteOptions,
  SandboxSessionOptions,
  TurnInfo,
} from './types.js';

/** The status of a command that was not run because leaving the sandbox was not approved. */
export const NOT_RUN_EXIT_CODE = 126;

/** A session with what every run needs: `createSandboxSession` makes one. */
export async function createSandboxSession(given: SandboxSessionOptions = {}): Promise<SandboxSession> {
  const options = checkSessionOptions(given);
  const resources = await setUpSession(options);
  return new SandboxSession(resources, options);
}

/**
 * What an agent CLI embeds: one broker per session (policy, approvals, grants, backups),
 * commands run in the sandbox as tool calls of turns, and guards for the agent's own file
 * tools so they are checked and backed up into the same turns.
 */
export class SandboxSession {
  readonly sessionId: string;
  /** The workspace, resolved: commands' default cwd and the first writable root. */
  readonly workspace: string;
  readonly config: SessionConfig;
  readonly broker: Broker;
  readonly #resources: SessionResources;
  readonly #log: Logger;
  readonly #approver: Approver | undefined;
  readonly #approval: ApprovalPlugin | undefined;
  readonly #grants: SessionGrantsPlugin | undefined;
  readonly #backups: BackupCollector;
  readonly #turns: TurnController;
  readonly #maxOutputBytes: number;
  readonly #maxApprovalRounds: number;
  readonly #inflight = new Set<Promise<unknown>>();
  /** What each running tool call is (a command line, or a file tool), for the questions its changes raise. */
  readonly #calls = new Map<string, { command: string } | { tool: GuardTool | 'delete' }>();
  /** Connections refused per running tool call, for its result. */
  readonly #refusedConnections = new Map<string, RefusedConnection[]>();
  #closed = false;

  /** Use `createSandboxSession`. */
  constructor(resources: SessionResources, options: SandboxSessionOptions) {
    this.#resources = resources;
    this.sessionId = resources.sessionId;
    this.workspace = resources.workspace;
    this.config = resources.config;
    this.broker = resources.broker;
    this.#log = resources.log;
    this.#approver = options.approver;
    this.#approval = this.broker.plugin<ApprovalPlugin>(ApprovalPlugin.PLUGIN_NAME);
    this.#grants = this.broker.plugin<SessionGrantsPlugin>(SessionGrantsPlugin.PLUGIN_NAME);
    this.#backups = new BackupCollector(this.broker);
    this.#maxOutputBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    this.#maxApprovalRounds = options.maxApprovalRounds ?? DEFAULT_APPROVAL_ROUNDS;
    if (this.#approval?.options.mode === 'inline') this.#approval.setApprover(this.#approver ? (prompt) => this.#askInline(prompt) : undefined);
    const network = this.broker.plugin<NetworkPlugin>(NetworkPlugin.PLUGIN_NAME);
    const approver = this.#approver;
    network?.setApprover(
      approver
        ? async (prompt) => {
            const call = prompt.toolCallId === undefined ? undefined : this.#calls.get(prompt.toolCallId);
            const answer = await approver({ kind: 'connection', ...prompt, ...(call && 'command' in call ? { command: call.command } : {}) });
            return typeof answer === 'object' && 'scope' in answer && (answer.scope === 'once' || answer.scope === 'session' || answer.scope === 'save') ? answer : answer === true;
          }
        : undefined,
    );
    this.#turns = new TurnController({
      broker: this.broker,
      config: this.config,
      log: this.#log,
      storeUnavailable: options.storeUnavailable ?? 'disable-backup',
      idle: () => this.#idle(),
    });
  }

  /** The sandbox runtime commands run in; undefined when the sandbox is disabled. */
  get runtime(): 'seccomp' | 'preload' | undefined {
    return this.#resources.sandbox?.runtime.runtime;
  }

  /** Why `auto` did not get seccomp, when it fell back to preload. */
  get runtimeNotice(): string | undefined {
    return this.#resources.sandbox?.runtime.fallback;
  }

  /** The broker's socket (what the command finds in BROKERED_SHELL_SOCKET); undefined without the sandbox. */
  get socketPath(): string | undefined {
    return this.#resources.sandbox?.socketPath;
  }

  /** The open turn. */
  get turn(): TurnInfo | undefined {
    return this.#turns.current;
  }

  /** What a person approved in this session so far. */
  get grants(): SessionGrant[] {
    return this.#grants?.list() ?? [];
  }

  /**
   * Start a turn for a user message: file backup is enabled for it (EnableModifyBackup),
   * or off, with the reason in the result and in the log. A turn still open is committed first.
   */
  async beginTurn(options: BeginTurnOptions): Promise<TurnInfo> {
    this.#assertOpen();
    return this.#turns.begin(checkBeginTurnOptions(options));
  }

  /**
   * Commit the open turn (after the session's running calls finish), with a message made
   * from the user's message. Never throws: a failure is `{ ok: false, error }` (logged),
   * and the next turn continues the uncommitted one.
   */
  endTurn(options: EndTurnOptions = {}): Promise<EndTurnResult> {
    return this.#turns.end(options);
  }

  /**
   * Run a command as one tool call. Rejects only for invalid arguments (no program, a cwd
   * that is not a directory) and when the sandbox cannot start (SandboxUnavailableError).
   */
  async execute(command: string | readonly string[], options: ExecuteOptions = {}): Promise<ExecuteResult> {
    this.#assertOpen();
    const invocation = toInvocation(command, options.rawCommand === true);
    const toolCallId = options.toolCallId ?? newId('call');
    const cwd = path.resolve(this.workspace, options.cwd ?? '.');
    await assertDirectory(cwd);
    const sandbox = this.#resources.sandbox;
    const log = this.#log.child({ toolCallId });
    if (!sandbox) return this.#track(() => this.#local(invocation, options, cwd, toolCallId, 'sandbox-disabled'));
    if (isExcluded(invocation, this.config.sandbox.excludedCommands)) {
      log.info({ phase: 'execute', command: invocation.display }, 'excluded command: run without the sandbox');
      return this.#track(() => this.#local(invocation, options, cwd, toolCallId, 'excluded'));
    }
    if (options.dangerouslyDisableSandbox) {
      return this.#track(async () => {
        const asked = this.#approver !== undefined;
        const approved = asked && (await this.#ask({ kind: 'unsandboxed', command: invocation.display, toolCallId, ...(options.reason ? { reason: options.reason } : {}) }));
        const approval: ExecuteApproval = { asked, approved, rerun: false, blocks: [], rounds: asked ? 1 : 0 };
        if (!approved) return { ...notRun(toolCallId, asked), approval };
        return { ...(await this.#local(invocation, options, cwd, toolCallId, 'unsandboxed-approved')), approval };
      });
    }
    const turn = await this.#turns.ensure();
    return this.#track(async () => {
      const stop = this.#backups.watch(toolCallId);
      this.#calls.set(toolCallId, { command: invocation.display });
      try {
        const result =
          this.#approval?.options.mode === 'inline'
            ? await this.#sandboxedInline(sandbox, invocation, options, cwd, toolCallId)
            : await this.#sandboxedWithApproval(sandbox, invocation, options, cwd, toolCallId);
        return { ...result, turnId: turn.turnId, backups: stop() };
      } finally {
        this.#calls.delete(toolCallId);
        stop();
      }
    });
  }

  /**
   * Before an agent's file tool writes `file`: the same pipeline as a command's write
   * (session, resolution, policy, backup into the open turn). The tool writes only when
   * `allowed`. A prompt goes to the approver; approved, the path is granted and re-checked.
   */
  guardWrite(file: string, options: GuardWriteOptions): Promise<GuardResult> {
    return this.#guard(file, 'write', options.tool, options);
  }

  /** Before an agent's tool deletes `file` (with `recursive`, a directory and its contents). */
  guardDelete(file: string, options: GuardDeleteOptions = {}): Promise<GuardResult> {
    return this.#guard(file, 'delete', 'delete', options);
  }

  /** Wait for running calls, commit an open turn, stop the broker and remove the session's temp dirs. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#idle();
    if (this.#turns.current) {
      const ended = await this.#turns.end();
      if (!ended.ok) this.#log.error({ phase: 'turn', error: ended.error }, 'the open turn could not be committed at close');
    }
    await this.#resources.release();
  }

  /** Inline approvals: the command runs once; each prompt was asked while its change waited. */
  async #sandboxedInline(
    sandbox: SandboxResources,
    invocation: Invocation,
    options: ExecuteOptions,
    cwd: string,
    toolCallId: string,
  ): Promise<Omit<ExecuteResult, 'backups'>> {
    const finished = await this.#runSandboxed(sandbox, invocation, options, cwd, toolCallId);
    const base = { sandboxed: true, ran: true, mode: 'sandboxed' as const, runtime: sandbox.runtime.runtime, toolCallId, ...this.#takeRefusedConnections(toolCallId) };
    return { ...outputOf(finished), ...base, ...this.#inlineOutcome(toolCallId) };
  }

  /** What inline questions of a tool call came to: the refused (or unasked) ones as prompt blocks, and every question. */
  #inlineOutcome(toolCallId: string): { promptBlocks: PromptBlock[]; approval?: ExecuteApproval } {
    const questions = this.#approval?.takeAsked({ toolCallId }) ?? [];
    const promptBlocks = this.#takeBlocks(toolCallId);
    if (questions.length === 0) return { promptBlocks };
    const put = questions.filter((q) => q.byScope === undefined && q.refusal !== 'nobody could be asked');
    const approval: ExecuteApproval = {
      asked: put.length > 0,
      approved: put.length > 0 && questions.every((q) => q.choice !== undefined),
      rerun: false,
      blocks: put.map((q) => q.block),
      questions,
      rounds: put.length,
    };
    return { promptBlocks, approval };
  }

  async #sandboxedWithApproval(
    sandbox: SandboxResources,
    invocation: Invocation,
    options: ExecuteOptions,
    cwd: string,
    toolCallId: string,
  ): Promise<Omit<ExecuteResult, 'backups'>> {
    let latest = await this.#runSandboxed(sandbox, invocation, options, cwd, toolCallId);
    let blocks = this.#takeBlocks(toolCallId);
    const base = { sandboxed: true, ran: true, mode: 'sandboxed' as const, runtime: sandbox.runtime.runtime, toolCallId, ...this.#takeRefusedConnections(toolCallId) };
    if (blocks.length === 0) return { ...outputOf(latest), ...base, promptBlocks: [] };
    if (!this.#approver) {
      this.#log.info({ phase: 'approval', toolCallId, blocks: blocks.length }, 'approval needed, and no approver: the sandboxed result stands');
      return { ...outputOf(latest), ...base, promptBlocks: blocks, approval: { asked: false, approved: false, rerun: false, blocks, rounds: 0 } };
    }
    // A command that stops at its first refusal (git init: .git, then .git/hooks, …) shows
    // the next path only once the last one is granted: ask again after each rerun.
    const asked: PromptBlock[] = [];
    const granted = new Set<string>();
    // Refused again although granted (a grant does not lift a directory taken whole): never asked twice.
    let stuck: PromptBlock[] = [];
    for (let round = 1; ; round += 1) {
      const approved = await this.#ask({ kind: 'paths', blocks, command: invocation.display, toolCallId, round });
      asked.push(...blocks);
      const approval = { asked: true, approved, rerun: round > 1 || approved, blocks: asked, rounds: round };
      if (!approved) return { ...outputOf(latest), ...base, promptBlocks: [...stuck, ...blocks], approval };
      this.#grants?.grant(blocks);
      for (const block of blocks) granted.add(blockKey(block));
      // Brokered again, in the same turn: what the rerun changes is backed up like any change.
      latest = await this.#runSandboxed(sandbox, invocation, options, cwd, toolCallId);
      const refused = this.#takeBlocks(toolCallId);
      stuck = refused.filter((block) => granted.has(blockKey(block)));
      blocks = refused.filter((block) => !granted.has(blockKey(block)));
      // Done, or nothing new to ask, or out of rounds: what is left stays refused and is listed.
      if (blocks.length === 0 || round >= this.#maxApprovalRounds) return { ...outputOf(latest), ...base, promptBlocks: refused, approval };
    }
  }

  async #runSandboxed(sandbox: SandboxResources, invocation: Invocation, options: ExecuteOptions, cwd: string, toolCallId: string): Promise<FinishedCommand> {
    const scratch = await mkdtemp(path.join(sandbox.scratchBase, 'call-'));
    try {
      const stdin = options.stdin ?? 'ignore';
      const started = startSandboxed({
        broker: this.broker,
        log: this.#log,
        sandbox,
        argv: invocation.kind === 'shell' ? ['/bin/bash', '-c', invocation.script] : invocation.argv,
        cwd,
        env: mergeEnv(this.#resources.env, options.env),
        scratch,
        writableRoots: this.#resources.writableRoots,
        unixSockets: this.config.sandbox.unixSockets,
        toolCallId,
        traceId: newId('trace'),
        stdio: stdioFor(stdin, options.output ?? 'capture'),
      });
      try {
        return await finishCommand(started, this.#finishOptions(options));
      } finally {
        const refused = this.broker.plugin<NetworkPlugin>(NetworkPlugin.PLUGIN_NAME)?.takeRefused(toolCallId) ?? [];
        if (refused.length > 0) this.#refusedConnections.set(toolCallId, [...(this.#refusedConnections.get(toolCallId) ?? []), ...refused]);
        started.detachNetwork?.();
      }
    } finally {
      await rm(scratch, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  #takeRefusedConnections(toolCallId: string): { refusedConnections?: RefusedConnection[] } {
    const refused = this.#refusedConnections.get(toolCallId);
    this.#refusedConnections.delete(toolCallId);
    return refused ? { refusedConnections: refused } : {};
  }

  async #local(invocation: Invocation, options: ExecuteOptions, cwd: string, toolCallId: string, mode: ExecutionMode): Promise<ExecuteResult> {
    const stdin = options.stdin ?? 'ignore';
    const started = startLocal({
      argv: invocation.kind === 'shell' ? ['/bin/bash', '-c', invocation.script] : invocation.argv,
      cwd,
      env: withoutBrokerEnv(mergeEnv(this.#resources.env, options.env)),
      stdio: stdioFor(stdin, options.output ?? 'capture'),
    });
    this.#log.info({ phase: 'execute', toolCallId, mode, command: invocation.display }, 'running without the sandbox');
    const finished = await finishCommand(started, { ...this.#finishOptions(options), afterExit: () => started.stopLeftovers() });
    return { ...outputOf(finished), sandboxed: false, ran: true, mode, toolCallId, promptBlocks: [], backups: [] };
  }

  #finishOptions(options: ExecuteOptions) {
    return {
      stdin: options.stdin ?? 'ignore',
      maxOutputBytes: options.maxOutputBytes ?? this.#maxOutputBytes,
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.onStart ? { onStart: options.onStart } : {}),
    };
  }

  async #guard(file: string, access: 'write' | 'delete', tool: GuardTool | 'delete', options: GuardWriteOptions | GuardDeleteOptions): Promise<GuardResult> {
    this.#assertOpen();
    const target = path.resolve(this.workspace, file);
    const toolCallId = options.toolCallId ?? newId('guard');
    if (!this.#resources.sandbox) {
      return { allowed: true, decision: 'unguarded', reason: 'the sandbox is disabled', backedUp: false, backups: [], promptBlocks: [], toolCallId, path: target };
    }
    const recursive = 'recursive' in options && options.recursive === true;
    const request: BrokerRequestInput = {
      origin: 'api',
      action: 'check',
      operation: access === 'write' ? 'open' : 'delete',
      targets: access === 'write' ? openTargets(target, true) : operationTargets('delete', { path: target }),
      sessionId: this.sessionId,
      toolCallId,
      options: recursive ? { recursive: true } : {},
    };
    await this.#turns.ensure();
    return this.#track(async () => {
      const stop = this.#backups.watch(toolCallId);
      try {
        this.#log.debug({ phase: 'guard', tool, path: target, toolCallId }, 'file tool asks');
        this.#calls.set(toolCallId, { tool });
        let outcome = await this.broker.handle(request).finally(() => this.#calls.delete(toolCallId));
        let approval: ExecuteApproval | undefined;
        let promptBlocks: PromptBlock[] = [];
        if (this.#approval?.options.mode === 'inline') {
          ({ promptBlocks, approval } = this.#inlineOutcome(toolCallId));
        } else if (outcome.decision.verdict === 'prompt') {
          const blocks = this.#takeBlocks(toolCallId);
          promptBlocks = blocks;
          if (blocks.length > 0 && this.#approver) {
            const approved = await this.#ask({ kind: 'paths', blocks, tool, toolCallId });
            approval = { asked: true, approved, rerun: approved, blocks, rounds: 1 };
            if (approved) {
              this.#grants?.grant(blocks);
              outcome = await this.broker.handle(request);
              promptBlocks = this.#takeBlocks(toolCallId);
            }
          } else if (blocks.length > 0) {
            approval = { asked: false, approved: false, rerun: false, blocks, rounds: 0 };
          }
        }
        const backups = stop();
        return {
          allowed: outcome.ok,
          decision: outcome.decision.verdict,
          ...reasonOf(outcome),
          backedUp: backups.length > 0,
          backups,
          promptBlocks,
          ...(approval ? { approval } : {}),
          toolCallId,
          path: target,
        };
      } finally {
        stop();
      }
    });
  }

  #takeBlocks(toolCallId: string): PromptBlock[] {
    return this.#approval?.takeBlocks({ toolCallId }) ?? [];
  }

  /** An inline question, put to the session's approver with the command that raised it. */
  async #askInline(prompt: ApprovalPrompt): Promise<boolean | ApprovalChoice> {
    const approver = this.#approver;
    if (!approver) return false;
    const toolCallId = prompt.block.toolCallIds[0];
    const call = toolCallId === undefined ? undefined : this.#calls.get(toolCallId);
    const request: ApprovalRequest = {
      kind: 'path',
      block: prompt.block,
      choices: prompt.choices,
      round: prompt.round,
      signal: prompt.signal,
      ...call,
      ...(toolCallId === undefined ? {} : { toolCallId }),
    };
    const answer = await approver(request);
    // A connection's choice answers nothing about a path.
    return typeof answer === 'object' && answer.scope === 'save' ? false : answer;
  }

  async #ask(request: ApprovalRequest): Promise<boolean> {
    const approver = this.#approver;
    if (!approver) return false;
    const summary =
      request.kind === 'paths' ? { kind: request.kind, paths: request.blocks.map((b) => `${b.access} ${b.normalisedPath}`) } : { kind: request.kind, command: request.command };
    try {
      const approved = (await approver(request)) === true;
      this.#log.info({ phase: 'approval', toolCallId: request.toolCallId, ...summary, approved }, approved ? 'approved' : 'not approved');
      return approved;
    } catch (error) {
      this.#log.error({ phase: 'approval', toolCallId: request.toolCallId, ...summary, err: error }, 'the approver failed: not approved');
      return false;
    }
  }

  #track<T>(task: () => Promise<T>): Promise<T> {
    const running = task();
    const settled = running.then(
      () => undefined,
      () => undefined,
    );
    this.#inflight.add(settled);
    void settled.then(() => this.#inflight.delete(settled));
    return running;
  }

  async #idle(): Promise<void> {
    while (this.#inflight.size > 0) await Promise.all([...this.#inflight]);
  }

  #assertOpen(): void {
    if (this.#closed) throw new BrokerError(ErrorCodes.BROKER_CLOSED, 'this sandbox session is closed');
  }
}

/**
 * Approval rounds of one command by default; each approved round reruns the whole command.
 * `git init` stops at its first refusal and needs 16 (the .git directory, its hooks
 * directory, each sample hook, its config). What still needs approval after the last is
 * returned, unchanged.
 */
export const DEFAULT_APPROVAL_ROUNDS = 32;

function outputOf(finished: FinishedCommand) {
  return {
    exitCode: finished.exitCode,
    signal: finished.signal,
    stdout: finished.stdout.toString('utf8'),
    stderr: finished.stderr.toString('utf8'),
    raw: { stdout: finished.stdout, stderr: finished.stderr },
    truncated: finished.truncated,
    timedOut: finished.timedOut,
  };
}

function notRun(toolCallId: string, asked: boolean): ExecuteResult {
  const why = asked ? 'running it without the sandbox was not approved' : 'running it without the sandbox needs approval, and there is no approver';
  const stderr = Buffer.from(`brokered-shell: the command was not run: ${why}\n`);
  return {
    exitCode: NOT_RUN_EXIT_CODE,
    signal: null,
    stdout: '',
    stderr: stderr.toString('utf8'),
    raw: { stdout: Buffer.alloc(0), stderr },
    truncated: { stdout: false, stderr: false },
    timedOut: false,
    sandboxed: false,
    ran: false,
    mode: 'not-run',
    toolCallId,
    promptBlocks: [],
    backups: [],
  };
}

function reasonOf(outcome: Outcome): { reason?: string } {
  const reason = outcome.ok ? outcome.decision.reason : (outcome.error?.message ?? outcome.decision.reason);
  return reason === undefined ? {} : { reason };
}

async function assertDirectory(dir: string): Promise<void> {
  const info = await stat(dir).catch(() => undefined);
  if (!info?.isDirectory()) throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `the command's working directory is not a directory: ${dir}`);
}
