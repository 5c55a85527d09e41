import path from 'node:path';
import { z } from 'zod';
import { escapeGlob } from '../plugins/file-safety/glob.js';
import { fileSafetyRuleSchema, refuseReadPrompts, type FileSafetyRule } from '../plugins/file-safety/options.js';
import { secretPathSchema } from '../plugins/read-policy/options.js';
import { MODE_REACH, networkRuleSchema } from '../plugins/network/rules.js';
import { PROJECT_CONFIG_FILE, type BrokeredShellConfig } from './schema.js';

/**
 * The project file (`.brokered-shell.json` in the workspace) only narrows.
 *
 * It comes with the repository, and the repository is what the sandboxed command works
 * on: a clone, a pull request, a model's own edits. If it could add a writable root,
 * exclude a command from the sandbox, grant a path, turn the sandbox or the backups off
 * or pick a weaker runtime, a repository could widen its own sandbox. So the home config
 * (`<home>/config.json`, the user's own) decides everything, and a project file may only:
 *
 * - add `fileSafety.rules` whose decision is `deny` or `prompt` (never `sandbox` or
 *   `grant-token`). A `prompt` rule is confined to the workspace: outside it the answer
 *   for a path no rule named is `deny`, and a prompt there would turn that denial into a
 *   question the repository worded. Relative patterns are taken from the workspace,
 *   absolute ones must lie inside it, `~` ones are refused. `deny` rules keep their
 *   file-safety meaning everywhere: they can only take away;
 * - turn things on, never off: `sandbox.enabled: true`, `fileBackup.enabled: true`;
 * - pick the stricter value: `fileBackup.oversize: "deny"`, `fileSafety.outsideRoots: "deny"`;
 * - add to `secrets.add`: more paths commands may not read. Its `remove` and `defaults`
 *   are refused: they would let commands read credentials the user keeps from them.
 *
 * - narrow the network: add `network.deny` entries, choose `network.mode` `"off"` (or
 *   `"allowlist"`, which only narrows an open home config; the stricter of the two holds).
 *
 * `cacheRoots` is refused whole: adding one would let commands change more without a
 * backup, and which of this machine's tool caches are left to the tools is the user's call.
 *
 * Every other key of the configuration is refused by name with the reason, so a person
 * reading the error learns where the setting belongs. This schema lists every key of
 * the home schema (a test checks it), so a key added there must be decided here.
 */

const refused = (why: string) => z.never({ error: `refused: ${why}` }).optional();

/** `z.enum` whose message for a known but looser value says why it is refused. */
function onlyStricter<const V extends string>(allowed: V, looser: readonly string[], why: string) {
  return z.enum([allowed], {
    error: (issue) => (typeof issue.input === 'string' && looser.includes(issue.input) ? `refused: ${JSON.stringify(issue.input)} ${why}` : undefined),
  });
}

const onlyTrue = (why: string) => z.boolean().refine((value) => value, { error: `refused: ${why}` });

export const projectRuleSchema = fileSafetyRuleSchema.extend({
  decision: z.enum(['deny', 'prompt'], {
    error: (issue) =>
      typeof issue.input === 'string' && ['sandbox', 'grant-token'].includes(issue.input)
        ? `refused: a project may only add deny or prompt rules; ${JSON.stringify(issue.input)} would let commands change more (grants belong in the home config)`
        : undefined,
  }),
});
export type ProjectRule = z.infer<typeof projectRuleSchema>;

export const projectConfigSchema = z
  .strictObject({
    $schema: z.string().optional().describe('The JSON Schema of this file, for editors (the package ships it: dist/project-config.schema.json); ignored'),
    sandbox: z
      .strictObject({
        enabled: onlyTrue('a repository may not turn the sandbox off').optional(),
        excludedCommands: refused('a repository may not run commands outside the sandbox (excludedCommands belong in the home config)'),
        runtime: refused('a repository may not choose how it is sandboxed (runtime belongs in the home config)'),
        unixSockets: refused('a repository may not open doors out of the sandbox (unixSockets belong in the home config)'),
      })
      .optional(),
    writableRoots: refused('a repository may not make more paths writable (writableRoots belong in the home config)'),
    cacheRoots: z
      .strictObject({
        add: refused('a repository may not name folders that commands change without a question or a backup (cacheRoots belong in the home config)'),
        remove: refused("which of this machine's tool caches commands change without a backup is the user's setting (cacheRoots belong in the home config)"),
        defaults: refused("which of this machine's tool caches commands change without a backup is the user's setting (cacheRoots belong in the home config)"),
      })
      .optional(),
    fileBackup: z
      .strictObject({
        enabled: onlyTrue('a repository may not turn backups off (it may turn them on)').optional(),
        maxSizeMB: refused("the backup size cap is the user's disk budget (maxSizeMB belongs in the home config)"),
        oversize: onlyStricter('deny', ['skip'], 'would let files over the size cap change without a backup; a project may only choose "deny"').optional(),
        durability: onlyStricter('each', ['turn'], 'would let a power cut lose backups of changes it kept; a project may only choose "each"').optional(),
      })
      .optional(),
    network: z
      .strictObject({
        mode: z
          .enum(['off', 'allowlist'], {
            error: (issue) => (issue.input === 'open' ? 'refused: "open" would let commands reach more of the network; a project may only choose "off" or "allowlist"' : undefined),
          })
          .optional(),
        allow: refused('a repository may not open the network to hosts of its choosing (network.allow belongs in the home config)'),
        deny: z.array(networkRuleSchema).optional(),
      })
      .optional(),
    approvals: refused('how a person is asked is the user\'s choice (approvals belongs in the home config)'),
    approvalTimeoutSeconds: refused('how long a question waits is the user\'s choice (approvalTimeoutSeconds belongs in the home config)'),
    secrets: z
      .strictObject({
        add: z.array(secretPathSchema).optional(),
        remove: refused("which of this machine's credentials commands may read is the user's setting (secrets.remove belongs in the home config)"),
        defaults: refused("which of this machine's credentials commands may read is the user's setting (secrets.defaults belongs in the home config)"),
      })
      .optional(),
    fileSafety: z
      .strictObject({
        rules: z.array(projectRuleSchema).superRefine(refuseReadPrompts).optional(),
        outsideRoots: onlyStricter('deny', ['prompt'], 'would turn denials outside the writable roots into questions; a project may only choose "deny"').optional(),
      })
      .optional(),
  })
  .meta({ title: 'brokered-shell project configuration', description: `${PROJECT_CONFIG_FILE}: may only narrow the home configuration` });
export type ProjectConfig = z.infer<typeof projectConfigSchema>;

/** The glob prefix of a workspace form (escaped as file-safety's matcher reads it): `/` becomes the empty string so `${prefix}/x` stays `/x`. */
const prefixOf = (workspace: string) => (workspace === '/' ? '' : escapeGlob(workspace));

/** One line per problem, in the `key: message` form of `issueLines`. */
export type ProblemLines = string[];

/**
 * Confine the project's `prompt` rules to the workspace (see the comment at the top).
 * `workspaces` are the forms of the workspace (as given, real path); a rule is rewritten
 * to one rule per form. `deny` rules pass unchanged; `undefined` entries (rules that did
 * not parse) are skipped, so the problems of the others are still reported.
 */
export function confineProjectRules(
  rules: ReadonlyArray<ProjectRule | undefined>,
  workspaces: readonly string[],
): { rules: FileSafetyRule[]; problems: ProblemLines } {
  const problems: ProblemLines = [];
  const out: FileSafetyRule[] = [];
  const forms = [...new Set(workspaces)];
  rules.forEach((rule, index) => {
    // A rule the schema refused is reported there; its index still counts.
    if (rule === undefined) return;
    if (rule.decision === 'deny') {
      out.push(rule);
      return;
    }
    const where = `fileSafety.rules.${index}.pattern`;
    const pattern = rule.pattern;
    if (pattern === '~' || pattern.startsWith('~/')) {
      problems.push(`${where}: refused: a project's prompt rule may only name paths inside the workspace; write it relative to the workspace`);
      return;
    }
    if (pattern.startsWith('/')) {
      // The pattern must begin with the workspace literally, then a separator: a glob in
      // the first components (`/ws{,2}/x`) could reach a sibling directory.
      const inside = forms.some((ws) => pattern.startsWith(`${prefixOf(ws)}/`));
      if (!inside) {
        problems.push(
          `${where}: refused: ${JSON.stringify(pattern)} is outside the workspace; a project's prompt rules may only name paths inside it (outside, the answer is deny, and a prompt would loosen that)`,
        );
        return;
      }
      out.push(rule);
      return;
    }
    const relative = pattern.replace(/^(\.\/)+/, '').replace(/\/+$/, '');
    if (relative === '' || relative === '.') {
      problems.push(`${where}: refused: a project's prompt rule must name something inside the workspace, not the workspace itself`);
      return;
    }
    // Relative patterns match at any depth, as in file-safety, but only beneath the workspace.
    const anyDepth = relative.startsWith('**/') ? relative : `**/${relative}`;
    for (const ws of forms) out.push({ ...rule, pattern: `${prefixOf(ws)}/${anyDepth}` });
  });
  return { rules: out, problems };
}

/**
 * The project file itself is protected from the commands the sandbox runs: changing or
 * deleting it (or creating it) needs a person's approval, or a command could edit its
 * own restrictions for the next session. Added to the rules file-safety gets, whatever
 * the configuration says; one rule per form of the workspace.
 */
export function projectFileRules(workspaces: readonly string[]): FileSafetyRule[] {
  return [...new Set(workspaces)].map((ws) => ({
    pattern: `${prefixOf(ws)}/${PROJECT_CONFIG_FILE}`,
    access: ['write', 'delete'],
    decision: 'prompt',
    reason: `${PROJECT_CONFIG_FILE} holds this project's restrictions; a command may not change them without approval`,
  }));
}

/**
 * Home config + project file → the effective configuration. Only what the schema above
 * lets through can change, and each change only narrows: the project's rules are added
 * (they can only make a decision stricter: among matching rules the most restrictive
 * wins), the switches can only be turned on, the choices only to their strict value.
 */
export function mergeProjectConfig(home: BrokeredShellConfig, project: ProjectConfig, projectRules: readonly FileSafetyRule[]): BrokeredShellConfig {
  return {
    sandbox: {
      ...home.sandbox,
      excludedCommands: [...home.sandbox.excludedCommands],
      unixSockets: [...home.sandbox.unixSockets],
      enabled: home.sandbox.enabled || project.sandbox?.enabled === true,
    },
    writableRoots: [...home.writableRoots],
    cacheRoots: { ...home.cacheRoots, add: [...home.cacheRoots.add], remove: [...home.cacheRoots.remove] },
    fileBackup: {
      ...home.fileBackup,
      enabled: home.fileBackup.enabled || project.fileBackup?.enabled === true,
      oversize: project.fileBackup?.oversize ?? home.fileBackup.oversize,
      durability: project.fileBackup?.durability ?? home.fileBackup.durability,
    },
    fileSafety: {
      rules: [...home.fileSafety.rules, ...projectRules],
      outsideRoots: project.fileSafety?.outsideRoots ?? home.fileSafety.outsideRoots,
    },
    // What the project adds stays unreadable even where the home config's remove named it.
    secrets: {
      ...home.secrets,
      add: [...new Set([...home.secrets.add, ...(project.secrets?.add ?? [])])],
      remove: home.secrets.remove.filter((entry) => !(project.secrets?.add ?? []).includes(entry)),
    },
    network: {
      // The stricter mode holds: a project's "allowlist" does not open an "off" home config.
      mode: project.network?.mode !== undefined && MODE_REACH[project.network.mode] < MODE_REACH[home.network.mode] ? project.network.mode : home.network.mode,
      allow: [...home.network.allow],
      deny: [...home.network.deny, ...(project.network?.deny ?? [])],
    },
    approvals: home.approvals,
    approvalTimeoutSeconds: home.approvalTimeoutSeconds,
  };
}

/** Absolute, normalised, without a trailing slash. */
export function normalWorkspace(workspace: string): string {
  const resolved = path.resolve(workspace);
  return resolved.length > 1 ? resolved.replace(/\/+$/, '') : resolved;
}

/**
 * The rules of a project file that parse on their own, by index, even when the file as a
 * whole does not: so one error can name every bad key, confinement problems included.
 */
export function parsableProjectRules(value: unknown): Array<ProjectRule | undefined> {
  if (typeof value !== 'object' || value === null) return [];
  const fileSafety: unknown = (value as Record<string, unknown>).fileSafety;
  if (typeof fileSafety !== 'object' || fileSafety === null) return [];
  const rules: unknown = (fileSafety as Record<string, unknown>).rules;
  if (!Array.isArray(rules)) return [];
  return rules.map((rule: unknown) => {
    const parsed = projectRuleSchema.safeParse(rule);
    return parsed.success ? parsed.data : undefined;
  });
}
