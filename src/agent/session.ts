import { mkdtemp, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { TurnManifest } from '../backup/manifest-schema.js';
import type { RestoreReport, RewindReport } from '../backup/restore.js';
import { HOME_CONFIG_FILE } from '../config/schema.js';
import { BrokerError, ErrorCodes, type Broker, type BrokerRequestInput, type Logger } from '../core/index.js';
import { ApprovalPlugin, blockKey, type ApprovalChoice, type ApprovalPrompt, type PromptBlock } from '../plugins/approval/index.js';
import { ReadPolicyPlugin, type ReadLaunch } from '../plugins/read-policy/index.js';
import { NetworkPlugin, type RefusedConnection } from '../plugins/network/index.js';
import { SessionGrantsPlugin, type SessionGrant } from '../plugins/session-grants.js';
import { openTargets, operationTargets } from '../requests/targets.js';
import { BackupCollector } from './backup-collector.js';
import { isExcluded, toInvocation, type Invocation } from './command-line.js';
import type { SessionConfig } from './config.js';
import { mergeEnv, withoutBrokerEnv } from './env.js';
import { SandboxUnavailableError } from './errors.js';
import { NOT_RUN_EXIT_CODE, notRun, outputOf, reasonOf, refusalsOf } from './execute-result.js';
import { DEFAULT_MAX_OUTPUT_BYTES } from './output-capture.js';
import { DenialCollector } from './refusals.js';
import { finishCommand, startLocal, stdioFor, type FinishedCommand } from './run-process.js';
import { startSandboxed } from './sandboxed-run.js';
import { checkBeginTurnOptions, checkSessionOptions } from './options.js';
import { newId, setUpSession, type SandboxResources, type SessionResources } from './session-setup.js';
import type { TurnDiff } from './turn-diff.js';
import { TurnHistory, openBackupHome, type TurnRestoreOptions } from './turn-history.js';
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

export { NOT_RUN_EXIT_CODE };

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
  readonly #denials: DenialCollector;
  readonly #turns: TurnController;
  readonly #history: TurnHistory;
  readonly #maxOutputBytes: number;
  readonly #maxApprovalRounds: number;
  readonly #inflight = new Set<Promise<unknown>>();
  /** What each running tool call is (a command line, or a file tool), for the questions its changes raise. */
  readonly #calls = new Map<string, { command: string } | { tool: GuardTool | 'delete' }>();
  /** Connections refused per running tool call, for its result. */
  readonly #refusedConnections = new Map<string, RefusedConnection[]>();
  #closed = false;

  /**
   * Use `createSandboxSession`.
   * @internal
   */
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
    this.#denials = new DenialCollector(this.broker, path.join(resources.home, HOME_CONFIG_FILE));
    this.#history = new TurnHistory(openBackupHome(resources.home), async () => [this.sessionId]);
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
      const stopDenials = this.#denials.watch(toolCallId);
      this.#calls.set(toolCallId, { command: invocation.display });
      try {
        const result =
          this.#approval?.options.mode === 'inline'
            ? await this.#sandboxedInline(sandbox, invocation, options, cwd, toolCallId)
            : await this.#sandboxedWithApproval(sandbox, invocation, options, cwd, toolCallId);
        return { ...result, ...refusalsOf(stopDenials(), result), turnId: turn.turnId, backups: stop() };
      } finally {
        this.#calls.delete(toolCallId);
        stopDenials();
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

  /** This session's turns in the store (the open one too), oldest first. */
  turns(): Promise<TurnManifest[]> {
    return this.#history.list();
  }

  /**
   * What a turn of this session changed, against what is on disk now: one unified diff per
   * file (`path`: that file only). `turn` is an id, a unique prefix or `latest` (the last
   * committed).
   */
  diff(turn: string, options: { path?: string } = {}): Promise<TurnDiff> {
    return this.#history.diff(turn, options);
  }

  /**
   * Put a turn's files back as they were before it (paths it created are removed). A turn
   * still open is committed first, so `latest` is the turn the commands just ran in. A file
   * changed since the turn is a conflict, left alone, unless `force`; what the restore
   * replaces is kept in a new turn (`rescueTurnId`), which `undoLast` restores.
   */
  async restore(turn: string, options: TurnRestoreOptions = {}): Promise<RestoreReport> {
    await this.#settle();
    return this.#track(() => this.#history.restore(turn, options));
  }

  /** A turn and every later turn of this session undone, newest first (`backups restore --to`). */
  async rewind(turn: string, options: TurnRestoreOptions = {}): Promise<RewindReport> {
    await this.#settle();
    return this.#track(() => this.#history.rewind(turn, options));
  }

  /** Undo this session's last restore (or rewind): its rescue turn restored. Twice redoes it. */
  async undoLast(options: TurnRestoreOptions = {}): Promise<RestoreReport> {
    await this.#settle();
    return this.#track(() => this.#history.undoLast(options));
  }

  /** Before a restore: no command still running, and the open turn committed. The restore is then a running call: close() waits for it. */
  async #settle(): Promise<void> {
    this.#assertOpen();
    await this.#idle();
    if (this.#turns.current) {
      const ended = await this.#turns.end();
      if (!ended.ok) throw new BrokerError(ErrorCodes.BACKUP_FAILED, `the open turn could not be committed before the restore: ${ended.error ?? 'unknown error'}`);
    }
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
  ): Promise<Omit<ExecuteResult, 'backups' | 'refusals' | 'unlistedRefusals'>> {
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
  ): Promise<Omit<ExecuteResult, 'backups' | 'refusals' | 'unlistedRefusals'>> {
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
      const reads = await this.#readLaunch(scratch);
      const started = startSandboxed({
        broker: this.broker,
        log: this.#log,
        sandbox,
        argv: invocation.kind === 'shell' ? ['/bin/bash', '-c', invocation.script] : invocation.argv,
        cwd,
        env: mergeEnv(mergeEnv(this.#resources.env, reads.env), options.env),
        scratch,
        readDenied: reads.readDenied,
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

  /** What the command about to start may not read (the read policy), worked out now: files change between commands. */
  async #readLaunch(scratch: string): Promise<ReadLaunch> {
    const reads = this.broker.plugin<ReadPolicyPlugin>(ReadPolicyPlugin.PLUGIN_NAME);
    if (!reads) return { readDenied: [], env: {} };
    try {
      return await reads.prepareLaunch(scratch);
    } catch (error) {
      const message = error instanceof BrokerError ? `${error.message} [${error.code}]` : error instanceof Error ? error.message : String(error);
      throw new SandboxUnavailableError(`the read policy cannot be applied: ${message}`, { cause: error });
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
    return { ...outputOf(finished), sandboxed: false, ran: true, mode, toolCallId, promptBlocks: [], refusals: [], unlistedRefusals: 0, backups: [] };
  }

  #finishOptions(options: ExecuteOptions) {
    return {
      stdin: options.stdin ?? 'ignore',
      maxOutputBytes: options.maxOutputBytes ?? this.#maxOutputBytes,
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.onStart ? { onStart: options.onStart } : {}),
      ...(options.onStdout ? { onStdout: this.#guarded('onStdout', options.onStdout) } : {}),
      ...(options.onStderr ? { onStderr: this.#guarded('onStderr', options.onStderr) } : {}),
    };
  }

  /** A caller's output callback: its throw must not stop the reading (the command would block on a full pipe). */
  #guarded(name: string, each: (chunk: Buffer) => void): (chunk: Buffer) => void {
    return (chunk) => {
      try {
        each(chunk);
      } catch (error) {
        this.#log.error({ phase: 'execute', err: error }, `${name} threw; the output goes on`);
      }
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

async function assertDirectory(dir: string): Promise<void> {
  const info = await stat(dir).catch(() => undefined);
  if (!info?.isDirectory()) throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `the command's working directory is not a directory: ${dir}`);
}
