import { Command, CommanderError, Option } from 'commander';
import { createLogger } from '../core/index.js';
import { diffCommand, listCommand, restoreCommand, showCommand } from './backups.js';
import { doctorCommand } from './doctor.js';
import { ExitCode } from './exit-codes.js';
import { describeError, processIo, type Io } from './output.js';
import { serveCommand } from './serve.js';

const logFormat = new Option('--log-format <format>', 'log lines as JSON or human-readable').choices(['json', 'pretty']).default('json');
const logLevel = new Option('--log-level <level>', 'least severe log level shown').default(process.env.BROKERED_SHELL_LOG_LEVEL ?? 'info');

/** Builds the command tree; each action resolves to an exit status. */
export function buildProgram(io: Io, setStatus: (status: number) => void): Command {
  const program = new Command('brokered-shell')
    .description('Run shell commands under a policy broker that backs up every file before it changes')
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) });

  const act =
    <A extends unknown[]>(fn: (...args: A) => Promise<number>) =>
    async (...args: A) =>
      setStatus(await fn(...args));

  program
    .command('serve')
    .description('run the broker alone for external clients on a Unix socket; control commands on stdin')
    .requiredOption('--socket <path>', 'Unix socket to listen on (its directory is made 0700)')
    .requiredOption('--session <id>', 'the session this broker answers for')
    .option('--workspace <dir>', 'writable root (default: the current directory)')
    .option('--policy <file>', 'JSON policy: writableRoots, rules, outsideRoots, backup')
    .addOption(logFormat)
    .addOption(logLevel)
    .action(
      act(async (options: { socket: string; session: string; workspace?: string; policy?: string; logFormat: string; logLevel: string }) => {
        const log = createLogger({ pretty: options.logFormat === 'pretty', level: options.logLevel });
        return serveCommand(io, options, log);
      }),
    );

  const backups = program.command('backups').description('see and undo what turns changed');
  backups
    .command('list')
    .description('list turns and the files each backed up')
    .option('--session <id>', 'only this session')
    .option('--json', 'machine-readable output')
    .action(act((options: { session?: string; json?: boolean }) => listCommand(io, options)));
  backups
    .command('show')
    .argument('<turn>', 'turn id, unique prefix, or "latest"')
    .option('--json', 'machine-readable output')
    .action(act((turn: string, options: { json?: boolean }) => showCommand(io, turn, options)));
  backups
    .command('diff')
    .argument('<turn>', 'turn id, unique prefix, or "latest"')
    .argument('[path]', 'only this file')
    .option('--color', 'colour the diff (default: when stdout is a terminal)')
    .option('--no-color', 'never colour the diff')
    .action(
      act((turn: string, path: string | undefined, options: { color?: boolean }) =>
        diffCommand(io, turn, path, { color: options.color ?? process.stdout.isTTY === true }),
      ),
    );
  backups
    .command('restore')
    .argument('<turn>', 'turn id, unique prefix, or "latest"')
    .argument('[paths...]', 'only these files (default: every file the turn touched)')
    .option('--dry-run', 'show what would be restored and change nothing')
    .option('--force', 'also restore files that changed since the turn')
    .option('--json', 'machine-readable report')
    .action(act((turn: string, paths: string[], options: { dryRun?: boolean; force?: boolean; json?: boolean }) => restoreCommand(io, turn, paths, options)));

  program
    .command('doctor')
    .description('report what this kernel offers the sandbox')
    .option('--json', 'machine-readable output')
    .action(act((options: { json?: boolean }) => doctorCommand(io, options)));

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
