export { blockKey, type BlockFilter, type PromptBlock } from './blocks.js';
export {
  ApprovalPlugin,
  DEFAULT_APPROVAL_TIMEOUT_MS,
  PLUGIN_NAME,
  approvalModeSchema,
  approvalOptionsSchema,
  type ApprovalChoice,
  type ApprovalMode,
  type ApprovalOptions,
  type ApprovalPrompt,
  type AskedQuestion,
  type PromptApprover,
} from './plugin.js';
