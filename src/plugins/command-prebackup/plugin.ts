import path from 'node:path';
import { z } from 'zod';
import {
  ErrorCodes,
  Stage,
  issueLines,
  type Broker,
  type BrokerPlugin,
  type ClientContext,
  type ClientPayload,
  type ControlResult,
} from '../../core/index.js';
import { openTargets } from '../../requests/targets.js';
import { parseOptions } from '../options.js';
import { DEFAULT_COMMAND_SPECS, commandSpecSchema, writtenOperands, type CommandSpec } from './specs.js';

export const PLUGIN_NAME = 'command-prebackup';
/** The client command this plugin answers. */
export const COMMAND_PREBACKUP = 'CommandPrebackup';

/** Paths that are streams rather than files; a trailing `/` makes an entry a prefix. */
export const DEFAULT_STREAM_PATHS: readonly string[] = Object.freeze([
  '/dev/null',
  '/dev/zero',
  '/dev/full',
  '/dev/stdin',
  '/dev/stdout',
  '/dev/stderr',
  '/dev/tty',
  '/dev/fd/',
  '/proc/self/fd/',
  '/proc/thread-self/fd/',
]);

const absolute = (what: string) =>
  z
    .string()
    .min(1)
    .max(4096)
    .refine((value) => !value.includes('\0'), `${what} contains a NUL byte`)
    .refine((value) => value.startsWith('/'), `${what} must be absolute`);

export const commandPrebackupOptionsSchema = z.strictObject({
  /**
   * Commands besides (or replacing) the built-in dd, truncate and tee, by name. A
   * command is looked up by the last component of argv[0].
   */
  commands: z.record(z.string().regex(/^[^/\0]+$/, 'a command name, not a path'), commandSpecSchema).default({}),
  /** Written paths that are streams, not files: never sent through the pipeline. */
  streamPaths: z.array(absolute('a stream path')).default([...DEFAULT_STREAM_PATHS]),
  /** More written files than this in one command line is refused. */
  maxTargets: z.number().int().min(1).default(256),
});
export type CommandPrebackupOptions = z.input<typeof commandPrebackupOptionsSchema>;

const idSchema = z.string().max(256).refine((value) => !value.includes('\0'), 'contains a NUL byte');

/** What a dispatcher sends before running a command that writes files. */
export const commandPrebackupPayloadSchema = z.object({
  argv: z
    .array(z.string().max(65536).refine((value) => !value.includes('\0'), 'an argument contains a NUL byte'))
    .min(1, 'argv needs at least the command name')
    .max(65536),
  cwd: absolute('cwd'),
  sessionId: idSchema,
  toolCallId: idSchema.optional(),
  brokerTraceId: idSchema.optional(),
});
export type CommandPrebackupPayload = z.infer<typeof commandPrebackupPayloadSchema>;

/** One written file of the command and what the pipeline answered for it. */
export interface CommandTarget {
  /** The argument as the command line gave it. */
  operand: string;
  /** Absolute: cwd joined with the operand (not normalised; the pipeline resolves it). */
  path: string;
  /** Resolved by the pipeline (symlinks followed as for an open), or lexical for a stream. */
  normalisedPath: string;
  /** The pipeline's wire decision, or `stream` for a path that is not a file. */
  decision: string;
  error?: string;
  errorCode?: string;
}

export interface CommandPrebackupAnswer extends ControlResult {
  ok: boolean;
  error?: string;
  errorCode?: string;
  command?: string;
  targets: CommandTarget[];
}

/**
 * Answers `CommandPrebackup` from a command dispatcher: finds the files the command line
 * will write (dd's `of=`, truncate's and tee's file operands, or any spec a caller adds)
 * and runs each through the normal pipeline as a write open. Session check, policy and
 * the modify-backup plugin therefore apply exactly as for any other write, and an
 * existing file is backed up before the command runs. Any refused target makes the
 * answer `ok: false`, and the dispatcher then does not run the command.
 */
export class CommandPrebackupPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = PLUGIN_NAME;
  readonly name = PLUGIN_NAME;
  readonly #options: z.infer<typeof commandPrebackupOptionsSchema>;
  readonly #specs: ReadonlyMap<string, CommandSpec>;

  constructor(options: CommandPrebackupOptions = {}) {
    this.#options = parseOptions(this.name, commandPrebackupOptionsSchema, options);
    const defaults = Object.entries(DEFAULT_COMMAND_SPECS).map(([name, spec]) => [name, commandSpecSchema.parse(spec)] as const);
    this.#specs = new Map([...defaults, ...Object.entries(this.#options.commands)]);
  }

  /** The spec for a command name (or path), if it writes files this plugin knows of. */
  specFor(command: string): CommandSpec | undefined {
    return this.#specs.get(path.posix.basename(command));
  }

  apply(broker: Broker): void {
    broker.hooks.clientCommand
      .for(COMMAND_PREBACKUP)
      .tapPromise({ name: this.name, stage: Stage.NORMAL }, (payload, context) => this.#answer(broker, payload, context));
  }

  async #answer(broker: Broker, payload: ClientPayload, context: ClientContext): Promise<CommandPrebackupAnswer> {
    const parsed = commandPrebackupPayloadSchema.safeParse(payload);
    if (!parsed.success) {
      const error = `${COMMAND_PREBACKUP}: ${issueLines(parsed.error, 'payload').join('; ')}`;
      context.log.info({ error }, 'malformed command announcement');
      return { ok: false, error, errorCode: ErrorCodes.BAD_REQUEST, targets: [] };
    }
    const { argv, cwd, sessionId, toolCallId, brokerTraceId } = parsed.data;
    const command = path.posix.basename(argv[0] ?? '');
    const spec = this.specFor(command);
    if (!spec) return { ok: true, command, targets: [] };

    const seen = new Set<string>();
    const written = writtenOperands(spec, argv).filter(({ operand }) => {
      const key = path.posix.normalize(joinCwd(cwd, operand));
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
    if (written.length > this.#options.maxTargets) {
      const error = `${command} names ${written.length} files to write; at most ${this.#options.maxTargets} are checked, so it is refused`;
      return { ok: false, error, errorCode: ErrorCodes.BAD_REQUEST, command, targets: [] };
    }

    const targets: CommandTarget[] = [];
    let refusal: { error: string; errorCode: string } | undefined;
    // Every target is checked, refused or not, so one answer names everything that needs a person.
    for (const { operand } of written) {
      const absolutePath = joinCwd(cwd, operand);
      const lexical = path.posix.normalize(absolutePath);
      if (this.#isStream(lexical)) {
        targets.push({ operand, path: absolutePath, normalisedPath: lexical, decision: 'stream' });
        continue;
      }
      const outcome = await broker.handle({
        origin: 'api',
        action: 'check',
        operation: 'open',
        targets: openTargets(absolutePath, true),
        sessionId,
        ...(toolCallId ? { toolCallId } : {}),
        ...(brokerTraceId ? { traceId: brokerTraceId } : {}),
        // The announcer's process, so the session and tool-call checks see who asks.
        ...(context.peer ? { peer: context.peer } : {}),
      });
      const target: CommandTarget = {
        operand,
        path: absolutePath,
        normalisedPath: outcome.targets[0]?.resolved ?? lexical,
        decision: outcome.wireDecision,
      };
      if (!outcome.ok) {
        target.error = outcome.error?.message ?? `policy answered ${outcome.decision.verdict}`;
        target.errorCode = outcome.error?.code ?? ErrorCodes.POLICY_DENIED;
        refusal ??= { error: `${command}: refused to write ${operand}: ${target.error}`, errorCode: target.errorCode };
      }
      targets.push(target);
    }
    context.log.info(
      { command, targets: targets.map((t) => ({ path: t.path, normalisedPath: t.normalisedPath, decision: t.decision })), ok: !refusal },
      refusal ? 'command refused before it ran' : 'command may run; its existing targets are backed up',
    );
    return refusal ? { ok: false, ...refusal, command, targets } : { ok: true, command, targets };
  }

  #isStream(lexical: string): boolean {
    return this.#options.streamPaths.some((entry) => (entry.endsWith('/') ? lexical.startsWith(entry) : lexical === entry));
  }
}

/** The operand as the command will open it: absolute as given, else below cwd (not normalised). */
function joinCwd(cwd: string, operand: string): string {
  if (operand.startsWith('/')) return operand;
  return `${cwd.endsWith('/') ? cwd : `${cwd}/`}${operand}`;
}
