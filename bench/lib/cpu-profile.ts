import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The parts of a V8 `.cpuprofile` (as written by `node --cpu-prof`) this summary reads. */
interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileEntry {
  key: string;
  ms: number;
  share: number;
}

export interface ProfileSummary {
  file: string;
  totalMs: number;
  /** Busy time: everything except `(idle)`. */
  busyMs: number;
  /** Self time per function (`name file:line`). */
  selfByFunction: ProfileEntry[];
  /** Self time per area: a package, a file of ours, node internals, GC, native. */
  selfByArea: ProfileEntry[];
  /** Time inside each function including what it called, for our own (dist/src) functions. */
  inclusiveOwn: ProfileEntry[];
}

/** The newest `.cpuprofile` in a directory, or undefined. */
export function newestProfile(dir: string): string | undefined {
  const files = readdirSync(dir).filter((name) => name.endsWith('.cpuprofile')).sort();
  const last = files.at(-1);
  return last ? path.join(dir, last) : undefined;
}

function shortUrl(url: string, root: string): string {
  let file = url;
  if (file.startsWith('file://')) file = fileURLToPath(file);
  if (file.startsWith(root)) file = file.slice(root.length).replace(/^\/+/, '');
  return file;
}

/** What a frame is charged to in the per-area view. */
function areaOf(frame: CallFrame, root: string): string {
  const { url, functionName } = frame;
  if (!url) return functionName.startsWith('(') ? functionName : `(native) ${functionName}`;
  if (url.startsWith('node:')) return 'node: internals';
  const file = shortUrl(url, root);
  const modules = file.lastIndexOf('node_modules/');
  if (modules !== -1) {
    const rest = file.slice(modules + 'node_modules/'.length).split('/');
    return `pkg ${rest[0]?.startsWith('@') ? `${rest[0]}/${rest[1] ?? ''}` : (rest[0] ?? '?')}`;
  }
  return file;
}

function isOwn(frame: CallFrame, root: string): boolean {
  const file = shortUrl(frame.url, root);
  return file.startsWith('dist/') || file.startsWith('src/');
}

function top(map: Map<string, number>, total: number, limit: number): ProfileEntry[] {
  return [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([key, ms]) => ({ key, ms, share: total > 0 ? ms / total : 0 }));
}

/** Read a `.cpuprofile` and total its samples by function, by area and (inclusively) by our own functions. */
export function summarizeProfile(file: string, root: string, limit = 15): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map<number, ProfileNode>(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i += 1) {
    const id = profile.samples[i] as number;
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

  const keyOf = (frame: CallFrame) =>
    `${frame.functionName || '(anonymous)'}${frame.url ? ` ${shortUrl(frame.url, root)}:${frame.lineNumber + 1}` : ''}`;
  const selfByFunction = new Map<string, number>();
  const selfByArea = new Map<string, number>();
  const inclusiveOwn = new Map<string, number>();
  let totalUs = 0;
  let idleUs = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (!node) continue;
    totalUs += us;
    if (node.callFrame.functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    const ms = us / 1000;
    const key = keyOf(node.callFrame);
    selfByFunction.set(key, (selfByFunction.get(key) ?? 0) + ms);
    const area = areaOf(node.callFrame, root);
    selfByArea.set(area, (selfByArea.get(area) ?? 0) + ms);
    // Charge this sample to every distinct own function on its stack (once each, recursion-safe).
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)?.callFrame;
      if (!frame || !isOwn(frame, root)) continue;
      const ownKey = keyOf(frame);
      if (seen.has(ownKey)) continue;
      seen.add(ownKey);
      inclusiveOwn.set(ownKey, (inclusiveOwn.get(ownKey) ?? 0) + ms);
    }
  }
  const busyMs = (totalUs - idleUs) / 1000;
  return {
    file,
    totalMs: totalUs / 1000,
    busyMs,
    selfByFunction: top(selfByFunction, busyMs, limit),
    selfByArea: top(selfByArea, busyMs, limit),
    inclusiveOwn: top(inclusiveOwn, busyMs, limit),
  };
}
