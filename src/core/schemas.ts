import { z } from 'zod';

/** What a request does to one path, for policy purposes. */
export const accessSchema = z.enum(['read', 'write', 'delete']);
export type Access = z.infer<typeof accessSchema>;

/** The operations a host may be asked to perform on a client's behalf (JSON protocol). */
export const hostOperationSchema = z.enum(['delete', 'mkdir', 'rename', 'copy', 'chmod', 'link', 'touch']);
export type HostOperation = z.infer<typeof hostOperationSchema>;

/**
 * Every operation a request may describe: the host operations, `open` (text token
 * requests and kernel opens) and the metadata/special syscalls only the kernel reports.
 */
export const operationSchema = z.enum([
  ...hostOperationSchema.options,
  'open',
  'truncate',
  'chown',
  'xattr',
  'mknod',
]);
export type Operation = z.infer<typeof operationSchema>;

/** Which role a path plays in its request. */
export const targetRoleSchema = z.enum(['path', 'from', 'to']);
export type TargetRole = z.infer<typeof targetRoleSchema>;

const noNul = (value: string) => !value.includes('\0');
export const absolutePathSchema = z
  .string()
  .min(1)
  .max(4096)
  .refine(noNul, 'path contains a NUL byte')
  .refine((value) => value.startsWith('/'), 'path must be absolute');

export const requestTargetSchema = z.strictObject({
  role: targetRoleSchema,
  path: absolutePathSchema,
  access: accessSchema,
});
export type RequestTarget = z.infer<typeof requestTargetSchema>;

/** Where a request came from; plugins may treat origins differently (e.g. audit). */
export const originSchema = z.enum(['text-token', 'host-op', 'kernel', 'api']);
export type Origin = z.infer<typeof originSchema>;

/**
 * What the caller wants back: a token answer, the host performing the operation, or
 * only the decision (the kernel supervisor performs the operation itself).
 */
export const actionSchema = z.enum(['token', 'host-op', 'check']);
export type Action = z.infer<typeof actionSchema>;

export const requestOptionsSchema = z.strictObject({
  deleteMode: z.enum(['trash', 'unlink']).optional(),
  recursive: z.boolean().optional(),
  force: z.boolean().optional(),
  mode: z.number().int().min(0).max(0o7777).optional(),
  symbolic: z.boolean().optional(),
  safeDeleteReportPath: absolutePathSchema.optional(),
  /**
   * Whether the operation follows a symlink in the final component. Absent: the
   * operation's usual semantics (the path-resolution plugin knows them). Kernel requests
   * set it from O_NOFOLLOW / AT_SYMLINK_NOFOLLOW / AT_SYMLINK_FOLLOW.
   */
  followSymlinks: z.boolean().optional(),
  /** open(2) flags, for kernel-originated opens. */
  openFlags: z.number().int().optional(),
  /**
   * The caller performs the change itself and can move the file it removes or replaces to
   * where the broker says (`Outcome.handover`) instead of deleting it (the kernel supervisor).
   */
  movesAside: z.boolean().optional(),
  /** A token request for the session's lease (the kernel supervisor's), not for a file: see the lease plugin. */
  lease: z.boolean().optional(),
  /** For touch: the times to set (seconds since the epoch); now when absent. */
  atime: z.number().optional(),
  mtime: z.number().optional(),
  /** For link with symbolic: the link's content, which is not a path the policy checks. */
  linkTarget: z.string().max(4096).refine(noNul, 'link target contains a NUL byte').optional(),
});
export type RequestOptions = z.infer<typeof requestOptionsSchema>;

export const peerSchema = z.strictObject({
  pid: z.number().int(),
  uid: z.number().int(),
  gid: z.number().int(),
});
export type Peer = z.infer<typeof peerSchema>;

const idSchema = z.string().max(256).refine(noNul, 'id contains a NUL byte');

export const brokerRequestSchema = z.strictObject({
  /** Client-chosen id echoed in answers; the broker assigns its own request id too. */
  clientId: idSchema.optional(),
  origin: originSchema,
  action: actionSchema,
  operation: operationSchema,
  targets: z.array(requestTargetSchema).min(1).max(2),
  sessionId: idSchema,
  toolCallId: idSchema.optional(),
  traceId: idSchema.optional(),
  options: requestOptionsSchema.default({}),
  peer: peerSchema.optional(),
});
export type BrokerRequest = z.infer<typeof brokerRequestSchema>;
export type BrokerRequestInput = z.input<typeof brokerRequestSchema>;

export const pathKindSchema = z.enum(['file', 'directory', 'symlink', 'other', 'absent']);
export type PathKind = z.infer<typeof pathKindSchema>;

/** A target after the resolve-path hook: every form of the path a plugin may need. */
export const resolvedTargetSchema = requestTargetSchema.extend({
  /** Absolute and lexically normalised (no `.`/`..`, no duplicate slashes); links not followed. */
  lexical: absolutePathSchema,
  /** Symlinks followed as the resolution strategy for this operation and role demands. */
  resolved: absolutePathSchema,
  /** The form rules are matched against (`~` for home, BSD sed temp names undone). */
  ruleForm: z.string(),
  /** What is at `resolved` now (lstat). */
  kind: pathKindSchema,
  /** Hard-link count of a file at `resolved` (lstat), when known. */
  links: z.number().int().min(0).optional(),
});
export type ResolvedTarget = z.infer<typeof resolvedTargetSchema>;

export const verdictSchema = z.enum(['grant-token', 'sandbox', 'deny', 'prompt']);
export type Verdict = z.infer<typeof verdictSchema>;

export const decisionSchema = z.strictObject({
  verdict: verdictSchema,
  /** Why, in words a person reads in an audit log. */
  reason: z.string().optional(),
  /** The rule or plugin that decided. */
  source: z.string().optional(),
  /** Which target of the request this decision is about (set by the core when combining). */
  targetRole: targetRoleSchema.optional(),
});
export type Decision = z.infer<typeof decisionSchema>;

/** The decision word of the JSON wire protocol. */
export const wireDecisionSchema = z.enum(['grant-token', 'host-op', 'sandbox', 'deny']);
export type WireDecision = z.infer<typeof wireDecisionSchema>;

/** What issue-token hands the client so it may proceed. */
export const grantSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('token'), token: z.string().min(1) }),
  z.strictObject({ kind: z.literal('sandbox') }),
  z.strictObject({ kind: z.literal('fd'), fd: z.number().int().min(0) }),
  /** The session's policy compiled for the kernel supervisor (the lease plugin's; opaque to the core). */
  z.strictObject({ kind: z.literal('lease'), lease: z.record(z.string(), z.unknown()) }),
]);
export type Grant = z.infer<typeof grantSchema>;

export const hostOpResultSchema = z.strictObject({
  /** Where a deleted file went, when it went to a trash. */
  trashedTo: z.string().optional(),
  detail: z.record(z.string(), z.unknown()).optional(),
});
export type HostOpResult = z.infer<typeof hostOpResultSchema>;

export const outcomeErrorSchema = z.strictObject({
  code: z.string(),
  message: z.string(),
  errno: z.string().optional(),
  plugin: z.string().optional(),
  hook: z.string().optional(),
});
export type OutcomeError = z.infer<typeof outcomeErrorSchema>;

export interface Outcome {
  requestId: string;
  /** Absent when the input was not a valid request at all. */
  request: BrokerRequest | undefined;
  ok: boolean;
  decision: Decision;
  wireDecision: WireDecision;
  targets: ResolvedTarget[];
  grant?: Grant;
  result?: HostOpResult;
  error?: OutcomeError;
  /** For a caller that performs the change itself: what a plugin arranged (see Handover in hooks.ts). */
  handover?: { aside?: { role: TargetRole; into: string } };
  durationMs: number;
}
