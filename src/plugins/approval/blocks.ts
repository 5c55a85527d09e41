import { promptSubject, type Access, type ApprovalQuestion, type Operation, type PathKind } from '../../core/index.js';

/** A modification that needs (or needed) a person's approval. */
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
export const blockKey = (block: Pick<PromptBlock, 'normalisedPath' | 'access' | 'operation' | 'sourceKind'>): string => promptSubject(block);

export interface BlockFilter {
  toolCallId?: string;
}

/** The block a held prompt stands for. */
export function blockOf(question: Pick<ApprovalQuestion, 'request' | 'decision' | 'target'>): PromptBlock {
  const { request } = question.request;
  const sourceKind = question.request.targets.find((t) => t.role === 'from')?.kind;
  const block: PromptBlock = {
    path: question.target.path,
    normalisedPath: question.target.resolved,
    operation: request.operation,
    access: question.target.access,
    sessionId: request.sessionId,
    toolCallIds: request.toolCallId ? [request.toolCallId] : [],
    firstSeenAt: new Date().toISOString(),
    count: 1,
  };
  if (sourceKind !== undefined) block.sourceKind = sourceKind;
  if (question.decision.reason !== undefined) block.reason = question.decision.reason;
  return block;
}

/**
 * Blocks kept until their owner takes them, merged per path, access, operation and source,
 * bounded (the oldest is dropped first).
 */
export class BlockList {
  readonly #blocks = new Map<string, PromptBlock>();

  constructor(readonly maxBlocks: number) {}

  add(block: PromptBlock): void {
    const key = blockKey(block);
    const existing = this.#blocks.get(key);
    if (existing) {
      existing.count += 1;
      for (const id of block.toolCallIds) if (!existing.toolCallIds.includes(id)) existing.toolCallIds.push(id);
      return;
    }
    if (this.#blocks.size >= this.maxBlocks) {
      const oldest = this.#blocks.keys().next();
      if (!oldest.done) this.#blocks.delete(oldest.value);
    }
    this.#blocks.set(key, { ...block, toolCallIds: [...block.toolCallIds] });
  }

  list(filter: BlockFilter = {}): PromptBlock[] {
    return [...this.#blocks.values()].filter((b) => !filter.toolCallId || b.toolCallIds.includes(filter.toolCallId)).map((b) => ({ ...b, toolCallIds: [...b.toolCallIds] }));
  }

  take(filter: BlockFilter = {}): PromptBlock[] {
    const taken = this.list(filter);
    for (const block of taken) this.#blocks.delete(blockKey(block));
    return taken;
  }
}
