import { z } from 'zod';
import { Stage, type Access, type Broker, type BrokerPlugin, type Operation, type PathKind } from '../core/index.js';
import { parseOptions } from './options.js';

/** A modification that needs a person's approval; the request itself was denied. */
export interface PromptBlock {
  path: string;
  normalisedPath: string;
  operation: Operation;
  /** For a rename, copy or hard link: what its source was (a yes to moving a directory is not one to moving a link). */
  sourceKind?: PathKind;
  access: Access;
  sessionId: string;
  toolCallIds: string[];
  reason?: string;
  firstSeenAt: string;
  count: number;
}

/** What a block is about, as one string: blocks are merged per path, access, operation and source (a yes covers only what was asked). */
export const blockKey = (block: Pick<PromptBlock, 'normalisedPath' | 'access' | 'operation' | 'sourceKind'>): string =>
  `${block.normalisedPath}\0${block.access}\0${block.operation}\0${block.sourceKind ?? ''}`;

export const approvalOptionsSchema = z.strictObject({
  /** Bound on distinct blocks kept until the caller takes them (oldest dropped first). */
  maxBlocks: z.number().int().min(1).default(1000),
});
export type ApprovalOptions = z.input<typeof approvalOptionsSchema>;

export interface BlockFilter {
  toolCallId?: string;
}

/**
 * Records a prompt block for every `prompt` decision. The core already answers such
 * requests with deny; this plugin keeps what the caller must ask a person about,
 * merged per path and access, until the caller takes the blocks.
 */
export class ApprovalPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'approval';
  readonly name = ApprovalPlugin.PLUGIN_NAME;
  readonly #options: z.infer<typeof approvalOptionsSchema>;
  readonly #blocks = new Map<string, PromptBlock>();

  constructor(options: ApprovalOptions = {}) {
    this.#options = parseOptions(this.name, approvalOptionsSchema, options);
  }

  apply(broker: Broker): void {
    broker.hooks.decided.tap({ name: this.name, stage: Stage.NORMAL }, (decision, resolved, context) => {
      if (decision.verdict !== 'prompt') return;
      const target = resolved.targets.find((t) => t.role === decision.targetRole) ?? resolved.targets[0];
      if (!target) return;
      const { request } = resolved;
      const sourceKind = resolved.targets.find((t) => t.role === 'from')?.kind;
      const key = blockKey({ normalisedPath: target.resolved, access: target.access, operation: request.operation, sourceKind });
      const existing = this.#blocks.get(key);
      if (existing) {
        existing.count += 1;
        if (request.toolCallId && !existing.toolCallIds.includes(request.toolCallId)) existing.toolCallIds.push(request.toolCallId);
      } else {
        this.#remember(key, {
          path: target.path,
          normalisedPath: target.resolved,
          operation: request.operation,
          ...(sourceKind === undefined ? {} : { sourceKind }),
          access: target.access,
          sessionId: request.sessionId,
          toolCallIds: request.toolCallId ? [request.toolCallId] : [],
          ...(decision.reason === undefined ? {} : { reason: decision.reason }),
          firstSeenAt: new Date().toISOString(),
          count: 1,
        });
      }
      context.log.info(
        { phase: 'approval', path: target.path, normalisedPath: target.resolved, access: target.access },
        'approval needed; request denied for now',
      );
    });
  }

  /** The blocks recorded so far (optionally of one tool call), merged per path, access and operation. */
  blocks(filter: BlockFilter = {}): PromptBlock[] {
    return [...this.#blocks.values()].filter((b) => !filter.toolCallId || b.toolCallIds.includes(filter.toolCallId)).map((b) => ({ ...b, toolCallIds: [...b.toolCallIds] }));
  }

  /** Return and forget the blocks matching the filter, for a caller about to ask a person. */
  takeBlocks(filter: BlockFilter = {}): PromptBlock[] {
    const taken = this.blocks(filter);
    for (const block of taken) this.#blocks.delete(blockKey(block));
    return taken;
  }

  #remember(key: string, block: PromptBlock): void {
    if (this.#blocks.size >= this.#options.maxBlocks) {
      const oldest = this.#blocks.keys().next();
      if (!oldest.done) this.#blocks.delete(oldest.value);
    }
    this.#blocks.set(key, block);
  }
}
