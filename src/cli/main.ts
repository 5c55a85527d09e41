import { Command, CommanderError, Option } from 'commander';
import { ExitCode } from './exit-codes.js';
import { describeError, processIo, type Io } from './output.js';
import { packageVersion } from './version.js';

// For the launcher's code cache (bin/brokered-shell.js), read after `main` returns.
export { brokerAnsweredRequests } from './code-cache.js';

const logFormat = () => new Option('--log-format <format>', 'log lines as JSON or human-readable').choices(['json', 'pretty']).default('json');
const logLevel = (fallback: string) => new Option('--log-level <level>', 'least severe log level shown').default(process.env.BROKERED_SHELL_LOG_LEVEL ?? fallback);

interface LogOptions {
  logFormat: string;
  logLevel: string;
}

/** Loaded per command: `backups list` should not pay for the broker and the sandbox. */
async function logger(options: LogOptions) {
  const { createLogger } = await import('../core/logger.js');
  return createLogger({ pretty: options.logFormat === 'pretty', level: options.logLevel });
}

/** The environment variables brokered-shell reads, and those a command finds inside the sandbox: listed in `--help`. */
const ENVIRONMENT_HELP = `
Environment:
  BROKERED_SHELL_HOME         the store root: backups and config.json (default: ~/.brokered-shell)
  BROKERED_SHELL_LOG_LEVEL    least severe log level shown (default: error for run and mcp, info for serve)
  BROKERED_SHELL_NO_BUNDLE=1  start from dist/ instead of the one-file bundle of the CLI
  BROKERED_SHELL_PARTIAL_LINE_TIMEOUT_MS, BROKERED_SHELL_UNREAD_GRACE_MS
                              serve: how long a socket client may leave a line unfinished or
                              an answer unread before it is cut off
Set inside a command, for clients of the broker:
  BROKERED_SHELL_SOCKET, BROKERED_SHELL_SESSION_ID, BROKERED_SHELL_TOOL_CALL_ID, BROKERED_SHELL_TRACE_ID`;

/** One single-quoted shell word. */
function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

/** Builds the command tree; each action resolves to an exit status. */
export function buildProgram(io: Io, setStatus: (status: number) => void): Command {
  const program = new Command('brokered-shell')
    .description('Run shell commands under a policy broker that backs up every file before it changes')
    .version(packageVersion(), '-V, --version', 'print the version of brokered-shell')
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) })
    .addHelpText('after', ENVIRONMENT_HELP);

  const act =
    <A extends unknown[]>(fn: (...args: A) => Promise<number>) =>
    async (...args: A) =>
      setStatus(await fn(...args));

  program
    .command('run')
    .description('run COMMAND with bash in the kernel sandbox, as one turn; exits with its status (126: nothing could start, 77: needs approval)')
    .argument('<command>', 'the shell command, quoted as one argument (put it after --)')
    // Several words get a hint instead of commander's count: joining them would lose their quoting.
    .allowExcessArguments(true)
    .option('--workspace <dir>', 'working directory and writable root (default: the current directory)')
    .option('--session <id>', 'session the turn belongs to (default: a new one)')
    .option('--policy <file>', 'JSON policy: writableRoots, rules, outsideRoots, backup')
    .option('--message <msg>', 'turn message (default: the command)')
    .option('--no-backup', 'enforce the policy but keep no backups')
    .option('--yes', 'approve what needs approval, for this session; for scripts')
    .addOption(new Option('--no', 'refuse what needs approval without asking; for scripts').conflicts('yes'))
    .option('--json', "one JSON object on stdout after the command (exitCode, signal, turnId, summary, refusals, prompts), the command's own output captured in it")
    .addOption(
      new Option('--runtime <runtime>', 'seccomp (kernel, every program) or preload (LD_PRELOAD library, dynamically linked programs); default: seccomp where the kernel supports it, else preload').choices([
        'seccomp',
        'preload',
      ]),
    )
    .addOption(logFormat())
    .addOption(logLevel('error'))
    .action(
      act(async (command: string, options: import('./run.js').RunOptions & LogOptions, cmd: Command) => {
        if (cmd.args.length > 1) cmd.error(`error: run takes the command as one argument; quote it: brokered-shell run -- ${shellQuote(cmd.args.join(' '))}`);
        // An empty command is a mistake (an unset variable: run -- "$CMD"), not a turn that does nothing.
        if (command.trim() === '') cmd.error('error: run needs a command; it was empty');
        const { runCommand } = await import('./run.js');
        return runCommand(io, command, options, await logger(options));
      }),
    );

  program
    .command('serve')
    .description('run the broker alone for external clients on a Unix socket; control commands on stdin')
    .requiredOption('--socket <path>', 'Unix socket to listen on (its directory is made 0700)')
    .requiredOption('--session <id>', 'the session this broker answers for')
    .option('--workspace <dir>', 'writable root (default: the current directory)')
    .option('--policy <file>', 'JSON policy: writableRoots, rules, outsideRoots, backup')
    .addOption(logFormat())
    .addOption(logLevel('info'))
    .action(
      act(async (options: { socket: string; session: string; workspace?: string; policy?: string } & LogOptions) => {
        const { serveCommand } = await import('./serve.js');
        return serveCommand(io, options, await logger(options));
      }),
    );

  program
    .command('mcp')
    .description('an MCP server on stdio: tools run, list_turns, show_turn, diff_turn, restore_turn for one workspace; approvals asked through the client')
    .option('--workspace <dir>', 'the workspace commands run in and turns are listed for (default: the current directory)')
    .option('--policy <file>', 'JSON policy: writableRoots, rules, outsideRoots, backup')
    .addOption(
      new Option('--answer <answer>', 'what a question for approval gets when the client cannot be asked (no MCP elicitation)').choices(['yes', 'no']).default('no'),
    )
    .addOption(logFormat())
    .addOption(logLevel('error'))
    .action(
      act(async (options: import('./mcp.js').McpCommandOptions & LogOptions) => {
        const { mcpCommand } = await import('./mcp.js');
        return mcpCommand(io, options, await logger(options));
      }),
    );

  const backups = program.command('backups').description('see and undo what turns changed');
  backups
    .command('list')
    .description('list turns and the files each backed up')
    .option('--session <id>', 'only this session')
    .option('--json', 'machine-readable output')
    .action(act(async (options: { session?: string; json?: boolean }) => (await import('./backups.js')).listCommand(io, options)));
  backups
    .command('show')
    .description('the files one turn backed up')
    .argument('<turn>', 'turn id, unique prefix, or "latest"')
    .option('--json', 'machine-readable output')
    .action(act(async (turn: string, options: { json?: boolean }) => (await import('./backups.js')).showCommand(io, turn, options)));
  backups
    .command('diff')
    .description('what changed since the backup, as a unified diff')
    .argument('<turn>', 'turn id, unique prefix, or "latest"')
    .argument('[path]', 'only this file')
    .option('--color', 'colour the diff (default: when stdout is a terminal)')
    .option('--no-color', 'never colour the diff')
    .action(
      act(async (turn: string, path: string | undefined, options: { color?: boolean }) =>
        (await import('./backups.js')).diffCommand(io, turn, path, {
          color: options.color ?? process.stdout.isTTY === true,
          // Exact bytes only where no terminal can act on them: a pipe or file, uncoloured.
          raw: process.stdout.isTTY !== true && options.color !== true,
        }),
      ),
    );
  backups
    .command('restore')
    .description('put files back as they were before the turn (created ones are removed, kept in the rescue turn)')
    .argument('[turn]', 'turn id, unique prefix, or "latest" (not with --to or --undo-last)')
    .argument('[paths...]', 'only these files and what is under them (default: every path the turn touched)')
    .option('--dry-run', 'show what would be restored and change nothing')
    .option('--force', 'also restore files that changed since the turn')
    .option('--json', 'machine-readable report')
    // Rewind flags (src/backup/restore.ts): --to, --undo-last, and --session to narrow them.
    .addOption(new Option('--to <turn>', 'rewind this turn and every later turn of its session, newest first (stops at conflicts unless --force)').conflicts('undoLast'))
    .option('--undo-last', 'undo the most recent restore (restore its rescue turn)')
    .option('--session <id>', 'look for TURN, --to and --undo-last in this session only')
    .action(
      act(async (turn: string | undefined, paths: string[], options: import('./backups.js').RestoreCommandOptions, command: Command) => {
        // Commander's own words for a missing argument: TURN is optional only with --to or --undo-last.
        if (turn === undefined && options.to === undefined && !options.undoLast) command.error("error: missing required argument 'turn'");
        return (await import('./backups.js')).restoreCommand(io, turn, paths, options);
      }),
    );

  // backups prune / stats: retention (src/cli/retention.ts).
  backups
    .command('prune')
    .description('remove old turns, then the blobs no turn needs any more (never open turns or the newest of a session unless asked)')
    .option('--session <id>', 'only this session (default: every session)')
    .option('--keep-last <n>', 'keep the N newest turns of each session')
    .option('--older-than <when>', 'prune turns committed before a date (2026-11-01, UTC) or longer ago than a duration (30d, 12h, 2w)')
    .option('--max-size <size>', 'then drop the oldest turns until the blobs fit this budget (500M, 2G; powers of 1024)')
    .option('--include-newest', 'let the newest turn of a session go too')
    .option('--include-open', 'let open turns go whose journal is idle for an hour (a crashed broker\'s)')
    .option('--dry-run', 'show what would be pruned and change nothing')
    .option('--json', 'machine-readable report')
    .action(act(async (options: import('./retention.js').PruneCommandOptions) => (await import('./retention.js')).pruneCommand(io, options)));
  backups
    .command('stats')
    .description('turns, files, bytes stored vs logical, dedup ratio, per session and total')
    .option('--session <id>', 'only this session')
    .option('--json', 'machine-readable output')
    .action(act(async (options: { session?: string; json?: boolean }) => (await import('./retention.js')).statsCommand(io, options)));

  // backups ui: the backup viewer, a local page (src/ui/).
  backups
    .command('ui')
    .description('see and undo turns in a local web page (127.0.0.1, secret address printed on stdout); stops on Ctrl-C')
    .option('--port <n>', 'port to listen on (default: a random free one)')
    .option('--no-open', 'do not open a browser, only print the address')
    .action(act(async (options: { port?: string; open?: boolean }) => (await import('../ui/command.js')).uiCommand(io, options)));

  // config: the configuration files (src/cli/config.ts).
  const config = program.command('config').description('the configuration: <home>/config.json, narrowed by the project\'s .brokered-shell.json');
  config
    .command('schema')
    .description('print the JSON Schema of the configuration')
    .action(act(async () => (await import('./config.js')).schemaCommand(io)));
  config
    .command('show')
    .description('print the effective configuration for a workspace as JSON')
    .option('--workspace <dir>', 'the project whose .brokered-shell.json applies (default: the current directory)')
    .action(act(async (options: { workspace?: string }) => (await import('./config.js')).showCommand(io, options)));

  program
    .command('doctor')
    .description('report what this kernel offers the sandbox')
    .option('--json', 'machine-readable output')
    .action(act(async (options: { json?: boolean }) => (await import('./doctor.js')).doctorCommand(io, options)));

  return program;
}

/** Entry point: parses argv, runs one command, returns its exit status (never throws). */
export async function main(argv: string[], io: Io = processIo): Promise<number> {
  let status: number = ExitCode.OK;
  const program = buildProgram(io, (s) => (status = s));
  try {
    await program.parseAsync(argv);
    return status;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? ExitCode.OK : ExitCode.USAGE;
    io.err(`brokered-shell: ${describeError(error)}`);
    return ExitCode.FAILURE;
  }
}
