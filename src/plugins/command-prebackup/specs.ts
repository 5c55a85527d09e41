import { z } from 'zod';

/**
 * How to find, in one command line, the files the command is about to write. A spec is
 * data, so a caller adds a command (or replaces one) through the plugin's options.
 */
export const commandSpecSchema = z.strictObject({
  /** `key=value` operands whose value names a file the command writes (dd's `of`). */
  keyTargets: z.array(z.string().regex(/^[A-Za-z0-9_.-]+$/, 'a key is letters, digits, _ . -')).default([]),
  /** Whether the plain operands (not options, not one of `keyTargets`) are files it writes. */
  operandTargets: z.boolean().default(false),
  /** Whether the command takes options at all; when false every argument is an operand (dd). */
  options: z.boolean().default(true),
  /** Short options whose value is the next argument or the rest of the cluster (`-s 0`, `-s0`). */
  shortWithValue: z.string().regex(/^[A-Za-z0-9]*$/, 'option letters only').default(''),
  /** Long options whose value is after `=` or the next argument; unique prefixes count too. */
  longWithValue: z.array(z.string().regex(/^[A-Za-z0-9][A-Za-z0-9-]*$/, 'a long option name without the dashes')).default([]),
  /** Operands that name a stream, not a file (none by default: GNU tee writes a file called `-`). */
  streamOperands: z.array(z.string()).default([]),
});
export type CommandSpec = z.infer<typeof commandSpecSchema>;
export type CommandSpecInput = z.input<typeof commandSpecSchema>;

/** The commands the dispatcher announces, as GNU coreutils and toybox both parse them. */
export const DEFAULT_COMMAND_SPECS: Readonly<Record<string, CommandSpecInput>> = Object.freeze({
  // dd takes only key=value operands; without of= the output is stdout and nothing is written.
  dd: { keyTargets: ['of'], options: false },
  // -s SIZE / -r REF take values (REF is read, never written); -c, -o and the rest are flags.
  truncate: { operandTargets: true, shortWithValue: 'sr', longWithValue: ['size', 'reference'] },
  // -a -i -p and --append, --ignore-interrupts, --output-error[=MODE] take no separate value.
  tee: { operandTargets: true },
});

/** One file a command line names for writing, as written and in the argv. */
export interface WrittenOperand {
  /** The argument as given (for dd, the value after `of=`). */
  operand: string;
  /** Index in argv. */
  index: number;
}

function takesLongValue(spec: CommandSpec, name: string): boolean {
  if (spec.longWithValue.includes(name)) return true;
  // getopt_long accepts an unambiguous prefix (`--ref FILE`); one match is enough to skip its value.
  return name.length > 0 && spec.longWithValue.filter((candidate) => candidate.startsWith(name)).length === 1;
}

/**
 * The operands of `argv` (argv[0] is the command) that name files the command writes.
 * Options are recognised GNU-style wherever they stand, `--` ends them and a lone `-` is
 * an operand. An option the spec does not know is taken as a flag: if it really took a
 * value, that value is checked as a target too, which can only refuse more, never less.
 */
export function writtenOperands(spec: CommandSpec, argv: readonly string[]): WrittenOperand[] {
  const found: WrittenOperand[] = [];
  const operand = (value: string, index: number) => {
    const eq = value.indexOf('=');
    if (eq > 0 && spec.keyTargets.includes(value.slice(0, eq))) {
      const target = value.slice(eq + 1);
      if (target !== '') found.push({ operand: target, index });
      return;
    }
    if (spec.operandTargets && !spec.streamOperands.includes(value)) found.push({ operand: value, index });
  };
  let optionsEnded = !spec.options;
  for (let i = 1; i < argv.length; i += 1) {
    const arg = argv[i] ?? '';
    if (optionsEnded || arg === '-' || !arg.startsWith('-')) {
      operand(arg, i);
      continue;
    }
    if (arg === '--') {
      optionsEnded = true;
      continue;
    }
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      if (eq < 0 && takesLongValue(spec, arg.slice(2))) i += 1;
      continue;
    }
    for (let j = 1; j < arg.length; j += 1) {
      if (spec.shortWithValue.includes(arg.charAt(j))) {
        if (j === arg.length - 1) i += 1;
        break;
      }
    }
  }
  return found;
}
