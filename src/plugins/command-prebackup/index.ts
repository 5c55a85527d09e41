export {
  COMMAND_PREBACKUP,
  CommandPrebackupPlugin,
  DEFAULT_STREAM_PATHS,
  PLUGIN_NAME,
  commandPrebackupOptionsSchema,
  commandPrebackupPayloadSchema,
  type CommandPrebackupAnswer,
  type CommandPrebackupOptions,
  type CommandPrebackupPayload,
  type CommandTarget,
} from './plugin.js';
export {
  DEFAULT_COMMAND_SPECS,
  commandSpecSchema,
  writtenOperands,
  type CommandSpec,
  type CommandSpecInput,
  type WrittenOperand,
} from './specs.js';
