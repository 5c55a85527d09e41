/**
 * An audit sink: every audit record of a broker, appended to a file as one JSON line.
 *
 * Built on the hook the audit plugin publishes for sinks (`getAuditHooks(broker).record`),
 * so no other plugin carries audit code. Register it next to the standard set (which
 * includes the audit plugin that fills the hook):
 *
 *   broker.use(...standardPlugins(options), new AuditSinkPlugin({ file: '/var/log/brokered-shell/audit.jsonl' }));
 *
 * Put the file where sandboxed commands cannot write: outside every writable root, or
 * under the brokered-shell home (the broker's own files are never writable to them).
 * It imports 'brokered-shell' by name, as your own package does.
 */
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { BrokerError, ErrorCodes, Stage, getAuditHooks, issueLines, type AuditRecord, type Broker, type BrokerPlugin } from 'brokered-shell';

export const auditSinkOptionsSchema = z.strictObject({
  /** The JSON-lines file; created (0600) when missing, appended to otherwise. */
  file: z.string().startsWith('/', 'must be an absolute path'),
  /** Keep only some records (for example only denials); all of them by default. */
  filter: z.custom<(record: AuditRecord) => boolean>((value) => typeof value === 'function', 'must be a function').optional(),
});
export type AuditSinkOptions = z.input<typeof auditSinkOptionsSchema>;

export class AuditSinkPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'example-audit-sink';
  readonly name = AuditSinkPlugin.PLUGIN_NAME;
  readonly #options: z.infer<typeof auditSinkOptionsSchema>;
  #fd: number | undefined;

  constructor(options: AuditSinkOptions) {
    const parsed = auditSinkOptionsSchema.safeParse(options);
    if (!parsed.success) {
      throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `${this.name} options are invalid:\n  ${issueLines(parsed.error, 'options').join('\n  ')}`);
    }
    this.#options = parsed.data;
  }

  apply(broker: Broker): void {
    const { file, filter } = this.#options;
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    // O_APPEND: each line lands whole at the end, even with another writer on the file.
    this.#fd = openSync(file, 'a', 0o600);
    // `record` is a SyncHook called once per request, after the request is done: a
    // synchronous append keeps lines in request order and loses none when the process exits.
    getAuditHooks(broker).record.tap(this.name, (record) => {
      if (this.#fd === undefined || (filter && !filter(record))) return;
      writeSync(this.#fd, `${JSON.stringify(record)}\n`);
    });
    broker.hooks.close.tap({ name: this.name, stage: Stage.LAST }, () => {
      if (this.#fd !== undefined) closeSync(this.#fd);
      this.#fd = undefined;
    });
  }
}
