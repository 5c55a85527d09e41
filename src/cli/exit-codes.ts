/** Exit statuses of brokered-shell's own commands (`run` passes the command's through). */
export const ExitCode = {
  OK: 0,
  /** Something failed; the message on stderr says what. */
  FAILURE: 1,
  /** The command line itself was wrong. */
  USAGE: 2,
  /** `backups restore` left files alone because they changed since the turn. */
  CONFLICTS: 3,
  /**
   * `run`: the command needed a person's approval and nobody could give it (no terminal,
   * neither --yes nor --no); what needs approval is listed on stderr and was not changed.
   * 77 is EX_NOPERM of sysexits.h.
   */
  APPROVAL_NEEDED: 77,
  /** `run`: the sandbox could not start; nothing ran. */
  SANDBOX_UNAVAILABLE: 126,
} as const;
