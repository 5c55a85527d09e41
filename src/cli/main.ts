import { Command, CommanderError, Option } from 'commander';
import { ExitCode } from './exit-codes.js';
import { describeError, processIo, type Io } from './output.js';

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
    .command('run')
    .description('run COMMAND with bash in the kernel sandbox, as one turn; exits with its status (126: no sandbox, 77: needs approval)')
    .argument('<command>', 'the shell command (put it after --)')
    .option('--workspace <dir>', 'working directory and writable root (default: the current directory)')
    .option('--session <id>', 'session the turn belongs to (default: a new one)')
    .option('--policy <file>', 'JSON policy: writableRoots, rules, outsideRoots, backup')
    .option('--message <msg>', 'turn message (default: the command)')
    .option('--no-backup', 'enforce the policy but keep no backups')
    .option('--yes', 'approve what needs approval (then the command runs again, brokered); for scripts')
    .addOption(new Option('--no', 'refuse what needs approval without asking; for scripts').conflicts('yes'))
    .addOption(
      new Option('--runtime <runtime>', 'seccomp (kernel, every program) or preload (LD_PRELOAD library, dynamically linked programs); default: seccomp where the kernel supports it, else preload').choices([
        'seccomp',
        'preload',
      ]),
    )
    .addOption(logFormat())
    .addOption(logLevel('error'))
    .action(
      act(async (command: string, options: { workspace?: string; session?: string; policy?: string; message?: string; backup?: boolean; runtime?: 'seccomp' | 'preload'; yes?: boolean; no?: boolean } & LogOptions) => {
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
        (await import('./backups.js')).diffCommand(io, turn, path, { color: options.color ?? process.stdout.isTTY === true }),
      ),
    );
  backups
    .command('restore')
    .description('put files back as they were before the turn')
    .argument('<turn>', 'turn id, unique prefix, or "latest"')
    .argument('[paths...]', 'only these files (default: every file the turn touched)')
    .option('--dry-run', 'show what would be restored and change nothing')
    .option('--force', 'also restore files that changed since the turn')
    .option('--json', 'machine-readable report')
    .action(
      act(async (turn: string, paths: string[], options: { dryRun?: boolean; force?: boolean; json?: boolean }) =>
        (await import('./backups.js')).restoreCommand(io, turn, paths, options),
      ),
    );

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
