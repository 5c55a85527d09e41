import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The parts of a sampling heap profile (`HeapProfiler.stopSampling`) this summary reads. */
interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
}

export interface HeapEntry {
  key: string;
  bytes: number;
  share: number;
}

export interface HeapSummary {
  totalBytes: number;
  /** Bytes allocated by each function itself. */
  selfByFunction: HeapEntry[];
  /** Bytes allocated inside each of our own (dist/src) functions and what they called. */
  inclusiveOwn: HeapEntry[];
}

function shortUrl(url: string, root: string): string {
  let file = url;
  if (file.startsWith('file://')) file = fileURLToPath(file);
  if (file.startsWith(root)) file = file.slice(root.length).replace(/^\/+/, '');
  return file;
}

/** Sum a sampling heap profile by allocating function, and inclusively by our own functions. */
export function summarizeHeapProfile(file: string, root: string, limit = 12): HeapSummary {
  const head = JSON.parse(readFileSync(file, 'utf8')) as { head: HeapNode };
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let total = 0;
  const keyOf = (node: HeapNode) =>
    `${node.callFrame.functionName || '(anonymous)'}${node.callFrame.url ? ` ${shortUrl(node.callFrame.url, root)}:${node.callFrame.lineNumber + 1}` : ''}`;
  const isOwn = (node: HeapNode) => {
    const f = shortUrl(node.callFrame.url, root);
    return f.startsWith('dist/') || f.startsWith('src/');
  };
  // Walk with the stack of own functions above each node, each counted once per path.
  const visit = (node: HeapNode, own: readonly string[]) => {
    const key = keyOf(node);
    const stack = isOwn(node) && !own.includes(key) ? [...own, key] : own;
    if (node.selfSize > 0) {
      total += node.selfSize;
      self.set(key, (self.get(key) ?? 0) + node.selfSize);
      for (const k of stack) inclusive.set(k, (inclusive.get(k) ?? 0) + node.selfSize);
    }
    for (const child of node.children) visit(child, stack);
  };
  visit(head.head, []);
  const top = (map: Map<string, number>) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, limit)
      .map(([key, bytes]) => ({ key, bytes, share: total > 0 ? bytes / total : 0 }));
  return { totalBytes: total, selfByFunction: top(self), inclusiveOwn: top(inclusive) };
}
