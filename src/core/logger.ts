import { pino, type Logger, type DestinationStream, type LoggerOptions } from 'pino';

export type { Logger };

/** The phases a log line may carry; every line has one. */
export type LogPhase =
  | 'broker'
  | 'session'
  | 'resolve'
  | 'policy'
  | 'approval'
  | 'ipc'
  | 'ipc-token'
  | 'ipc-token-backup'
  | 'ipc-host-op'
  | 'host-policy'
  | 'host-modify-backup'
  | 'host-op'
  | 'audit'
  | 'control'
  | 'commit'
  | 'kernel'
  | 'cli'
  | (string & {});

export interface CreateLoggerOptions {
  level?: LoggerOptions['level'];
  /** Human-readable output instead of JSON lines. */
  pretty?: boolean;
  destination?: DestinationStream;
  name?: string;
}

const boundPhase = new WeakMap<Logger, boolean>();

/** Whether a logger (or a parent) bound `phase`; asked once per child logger. */
function bindsPhase(logger: Logger): boolean {
  let known = boundPhase.get(logger);
  if (known === undefined) {
    known = Object.hasOwn(logger.bindings(), 'phase');
    boundPhase.set(logger, known);
  }
  return known;
}

/**
 * Every line carries exactly one `phase`: the one the call or a child's bindings give, or
 * `broker`. (pino writes a key twice if both the bindings and the call set it, so code
 * sets `phase` in one place only: a child binding or the call.)
 */
export const phaseMixin: NonNullable<LoggerOptions['mixin']> = (object, _level, logger) =>
  'phase' in object || bindsPhase(logger as Logger) ? {} : { phase: 'broker' };

/** A pino logger whose lines always carry `phase` (defaults to `broker`). */
export function createLogger(options: CreateLoggerOptions = {}): Logger {
  const base: LoggerOptions = {
    name: options.name ?? 'brokered-shell',
    level: options.level ?? process.env.BROKERED_SHELL_LOG_LEVEL ?? 'info',
    mixin: phaseMixin,
  };
  if (options.destination) return pino(base, options.destination);
  if (options.pretty) {
    return pino({
      ...base,
      transport: { target: 'pino-pretty', options: { destination: 2, ignore: 'pid,hostname', singleLine: true } },
    });
  }
  return pino(base, pino.destination({ dest: 2, sync: true }));
}

/** A logger that drops everything: for tests and library callers that bring none. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
