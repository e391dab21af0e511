/** Unified diffs between two commits, or a commit and the working tree. */
import { createTwoFilesPatch } from 'diff';
import { slicer } from '../core/vfs.js';
import type { Cred } from '../core/perms.js';
import { shortId, type TreeEntry } from '../core/objects.js';
import { find } from './history.js';
import { visibleInHistory } from './status.js';
import type { Scope, Trees } from './trees.js';

/**
 * Unified diff between two commits, or a commit and the working tree, optionally one path.
 *
 * Stall-free and consistent (see docs/architecture.md): what to diff is decided synchronously,
 * in one turn of the event loop and in O(changes): the trees, the changed paths the caller may
 * see, and the content buffers of both sides (working-tree blobs can be freed by a later write).
 * The text diffs, the expensive part, then run in slices that yield the event loop, each file
 * bounded in time, and the output stops at DIFF_MAX_BYTES with `truncated` and a marker line.
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
  const changes = v.changesBetween(fromTree, toTree);
  const filter = opts.path === undefined ? undefined : opts.path.replace(/\/$/, '');
  const work: {
    label: string;
    before: TreeEntry | undefined;
    after: TreeEntry | undefined;
    a: Buffer | string;
    b: Buffer | string;
  }[] = [];
  for (const c of changes) {
    if (filter !== undefined && filter !== '' && c.path !== filter && !c.path.startsWith(filter + '/')) continue;
    if (c.path.endsWith('/')) continue;
    // Security: both sides' content, and the name, by the one history rule (readable now and in both)
    if (!visibleInHistory(v, cred, scope, c.path, [fromTree, toTree], memo)) continue;
    work.push({
      label: c.path.slice(1),
      before: c.before,
      after: c.after,
      a: entryContent(v, c.before),
      b: entryContent(v, c.after),
    });
  }
  const parts: string[] = [];
  let bytes = 0;
  let shown = 0;
  // Myers' algorithm is O(N·D): past a time budget for the request a file's diff becomes a whole
  // replacement, and no single file may hold the event loop longer than DIFF_FILE_MS.
  const deadline = Date.now() + DIFF_BUDGET_MS;
  const pause = slicer();
  for (const w of work) {
    await pause();
    const a = textOf(w.a);
    const b = textOf(w.b);
    let part: string;
    if (a === b)
      part = `diff ${w.label}\nmode ${w.before?.mode.toString(8) ?? '-'} -> ${w.after?.mode.toString(8) ?? '-'}\n`;
    else {
      const oldName = w.before === undefined ? '/dev/null' : `a/${w.label}`;
      const newName = w.after === undefined ? '/dev/null' : `b/${w.label}`;
      const timeout = Math.max(DIFF_MIN_MS, Math.min(DIFF_FILE_MS, deadline - Date.now()));
      const patch = createTwoFilesPatch(oldName, newName, a, b, undefined, undefined, { context: 3, timeout });
      part = patch === undefined ? wholeReplacement(oldName, newName, a, b) : patch.replace(/^=+\n/m, '');
    }
    const size = Buffer.byteLength(part);
    if (bytes + size > DIFF_MAX_BYTES) {
      // The first file alone is too big: show its beginning, cut at a line.
      if (shown === 0) parts.push(part.slice(0, part.lastIndexOf('\n', DIFF_MAX_BYTES / 2) + 1));
      parts.push(
        `[diff truncated: the output is limited to ${DIFF_MAX_BYTES} bytes; ${work.length - shown} of ${work.length} changed files not shown (narrow it with a path)]\n`,
      );
      return { diff: parts.join(''), truncated: true };
    }
    parts.push(part);
    bytes += size;
    shown++;
  }
  return { diff: parts.join(''), truncated: false };
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
