/** Unified diffs between two commits, or a commit and the working tree. */
import { createTwoFilesPatch } from 'diff';
import { isWithin } from '../core/paths.js';
import { slicer } from '../core/vfs.js';
import type { Cred } from '../core/perms.js';
import { shortId, type TreeEntry } from '../core/objects.js';
import { find } from './history.js';
import { mayLookBelow, visibleInHistory } from './status.js';
import type { Scope, Trees } from './trees.js';

/**
 * Unified diff between two commits, or a commit and the working tree, optionally one path.
 *
 * Stall-free and consistent (see docs/architecture.md): the trees to compare are taken in one turn
 * of the event loop (the working tree's as it is then), and the working tree's contents are held
 * (`BlobStore.hold`) until the diff ends, so a write meanwhile does not change what it shows. The
 * walk over the changes, the visibility of each and the text diffs, the expensive part, then run in
 * slices that yield the event loop, each file bounded in time; subtrees the caller cannot search are
 * skipped whole. The output stops at DIFF_MAX_BYTES with `truncated` and a marker line (the walk
 * goes on, counting, to say how many changed files it left out).
 */
export async function diff(
  v: Trees,
  cred: Cred,
  scope: Scope,
  opts: { from?: string; to?: string; path?: string },
): Promise<{ diff: string; truncated: boolean }> {
  const memo = new Map<string, boolean>();
  // The default `from` is the scope's last commit, the one status compares with (hidden or not:
  // its tree only judges what may be shown); a named commit must be one the caller may see.
  const fromId = opts.from === undefined ? v.head(scope) : find(v, cred, scope, opts.from, 'diff', memo);
  const fromTree = fromId === null ? v.emptyTree : v.commits.get(fromId)!.tree;
  const toWorking = opts.to === undefined;
  const toTree = toWorking
    ? v.treeOf(v.scopeDir(scope))
    : v.commits.get(find(v, cred, scope, opts.to!, 'diff', memo))!.tree;
  const filter = opts.path === undefined ? undefined : opts.path.replace(/\/$/, '');
  const unhold = v.vfs.blobs.hold();
  v.reading++;
  try {
    const enter = (dir: string): boolean =>
      (filter === undefined || filter === '' || isWithin(dir, filter) || isWithin(filter, dir)) &&
      (!toWorking || mayLookBelow(v, cred, scope, dir, memo));
    const parts: string[] = [];
    let bytes = 0;
    let shown = 0;
    let left = 0; // changed files past the size bound
    // Myers' algorithm is O(N·D): past a time budget for the request a file's diff becomes a whole
    // replacement, and no single file may hold the event loop longer than DIFF_FILE_MS.
    const deadline = Date.now() + DIFF_BUDGET_MS;
    const pause = slicer();
    for (const c of v.changes(fromTree, toTree, '', enter)) {
      const p = pause();
      if (p !== undefined) await p;
      if (filter !== undefined && filter !== '' && c.path !== filter && !c.path.startsWith(filter + '/')) continue;
      if (c.path.endsWith('/')) continue;
      // Security: both sides' content, and the name, by the one history rule (readable now and in both)
      if (!visibleInHistory(v, cred, scope, c.path, [fromTree, toTree], memo)) continue;
      if (left > 0) {
        left++;
        continue;
      }
      const part = filePatch(
        c.path.slice(1),
        c.before,
        c.after,
        entryContent(v, c.before),
        entryContent(v, c.after),
        deadline,
      );
      const size = Buffer.byteLength(part);
      if (bytes + size > DIFF_MAX_BYTES) {
        // The first file alone is too big: show its beginning, cut at a line.
        if (shown === 0) parts.push(part.slice(0, part.lastIndexOf('\n', DIFF_MAX_BYTES / 2) + 1));
        left = 1;
        continue;
      }
      parts.push(part);
      bytes += size;
      shown++;
    }
    if (left > 0) {
      const all = shown + left;
      parts.push(
        `[diff truncated: the output is limited to ${DIFF_MAX_BYTES} bytes; ${left} of ${all} changed files not shown (narrow it with a path)]\n`,
      );
    }
    return { diff: parts.join(''), truncated: left > 0 };
  } finally {
    v.reading--;
    unhold();
  }
}

/** One file's part of a diff: a unified diff of its text, or its mode change. */
function filePatch(
  label: string,
  before: TreeEntry | undefined,
  after: TreeEntry | undefined,
  ca: Buffer | string,
  cb: Buffer | string,
  deadline: number,
): string {
  const a = textOf(ca);
  const b = textOf(cb);
  if (a === b) return `diff ${label}\nmode ${before?.mode.toString(8) ?? '-'} -> ${after?.mode.toString(8) ?? '-'}\n`;
  const oldName = before === undefined ? '/dev/null' : `a/${label}`;
  const newName = after === undefined ? '/dev/null' : `b/${label}`;
  const timeout = Math.max(DIFF_MIN_MS, Math.min(DIFF_FILE_MS, deadline - Date.now()));
  const patch = createTwoFilesPatch(oldName, newName, a, b, undefined, undefined, { context: 3, timeout });
  return patch === undefined ? wholeReplacement(oldName, newName, a, b) : patch.replace(/^=+\n/m, '');
}

/** The bytes to diff for one side of a change, taken now (a symlink's text, nothing for a directory). */
function entryContent(v: Trees, e: TreeEntry | undefined): Buffer | string {
  if (e === undefined || e.kind === 'd') return '';
  if (e.kind === 'l') return `-> ${e.ref}\n`;
  const data = v.vfs.blobs.get(e.ref);
  return data.includes(0) ? `Binary content (${data.length} bytes, ${shortId(e.ref)})\n` : data;
}
/** Time a diff request may spend finding minimal diffs, the least any one file gets, and the most. */
const DIFF_BUDGET_MS = 1000;
const DIFF_MIN_MS = 5;
const DIFF_FILE_MS = 30;
/**
 * The most a diff answers, in bytes (a clear marker and `truncated` say when it was cut): well
 * under a socket frame even with JSON escaping, and more than anyone reads; narrow with a path.
 */
export const DIFF_MAX_BYTES = 4 * 1024 * 1024;

function textOf(content: Buffer | string): string {
  return typeof content === 'string' ? content : content.toString('utf8');
}

/** A unified diff that removes every old line and adds every new one (valid, not minimal). */
function wholeReplacement(oldName: string, newName: string, a: string, b: string): string {
  const lines = (s: string): string[] => (s === '' ? [] : (s.endsWith('\n') ? s.slice(0, -1) : s).split('\n'));
  const la = lines(a);
  const lb = lines(b);
  const range = (n: number) => (n === 0 ? '0,0' : `1,${n}`);
  const out = [`--- ${oldName}`, `+++ ${newName}`, `@@ -${range(la.length)} +${range(lb.length)} @@`];
  for (const l of la) out.push('-' + l);
  if (a !== '' && !a.endsWith('\n')) out.push('\\ No newline at end of file');
  for (const l of lb) out.push('+' + l);
  if (b !== '' && !b.endsWith('\n')) out.push('\\ No newline at end of file');
  return out.join('\n') + '\n';
}
