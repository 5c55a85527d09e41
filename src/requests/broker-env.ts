/** The variables a command (and the shims and libraries inside it) finds the broker by. */
export const BROKER_ENV = {
  socket: 'BROKERED_SHELL_SOCKET',
  sessionId: 'BROKERED_SHELL_SESSION_ID',
  toolCallId: 'BROKERED_SHELL_TOOL_CALL_ID',
  traceId: 'BROKERED_SHELL_TRACE_ID',
  /** Set by the preload runtime only: `preload`. */
  runtime: 'BROKERED_SHELL_RUNTIME',
} as const;
