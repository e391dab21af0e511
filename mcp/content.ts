/**
 * What the file tools do with content in the MCP process: the bound on one answer, byte ranges cut at
 * UTF-8 boundaries, head/tail line ranges, exact-text edits and their unified diff. Nothing here
 * touches the daemon; tools.ts reads and writes through it.
 */
import { createTwoFilesPatch } from 'diff';
import { VfsError } from '../daemon/errors.js';
import { ANSWER_MAX } from '../daemon/rpc/protocol.js';

/**
 * Where to end a byte range of `data` that starts at `start` and may end at most at `end`: moved back
 * so that it does not split a UTF-8 character, unless that would leave nothing.
 */
export function utf8End(data: Buffer, start: number, end: number): number {
  if (end >= data.length) return data.length;
  let e = end;
  // A continuation byte (10xxxxxx) right after the cut means a character straddles it: cut before it.
  for (let back = 0; back < 3 && e > start && (data[e]! & 0xc0) === 0x80; back++) e--;
  return e > start && (data[e]! & 0xc0) !== 0x80 ? e : end;
}

/** The byte range of the first `head` or the last `tail` lines of `data`. */
export function lineRange(
  data: Buffer,
  head: number | undefined,
  tail: number | undefined,
): { start: number; end: number } {
  if (head !== undefined) {
    let end = 0;
    for (let n = 0; n < head; n++) {
      const nl = data.indexOf(10, end);
      if (nl < 0) return { start: 0, end: data.length };
      end = nl + 1;
    }
    return { start: 0, end };
  }
  if (tail !== undefined) {
    // A final newline ends the last line; it does not start another.
    let pos = data.length > 0 && data[data.length - 1] === 10 ? data.length - 1 : data.length;
    for (let n = 0; n < tail; n++) {
      const nl = data.lastIndexOf(10, pos - 1);
      if (nl < 0 || pos === 0) return { start: 0, end: data.length };
      pos = nl;
    }
    return { start: pos + 1, end: data.length };
  }
  return { start: 0, end: data.length };
}

/** The leading items whose sizes (bytes) add up to at most ANSWER_MAX, and whether any were left out. */
export function fitAnswer<T>(items: T[], size: (x: T) => number): { items: T[]; cut: boolean } {
  let budget = ANSWER_MAX;
  for (let i = 0; i < items.length; i++) {
    budget -= size(items[i]!);
    if (budget < 0) return { items: items.slice(0, i), cut: true };
  }
  return { items, cut: false };
}

export interface TextEdit {
  oldText: string;
  newText: string;
}

/** A short, quoted form of an edit's text for error messages. */
function quote(s: string): string {
  return JSON.stringify(s.length > 60 ? `${s.slice(0, 60)}…` : s);
}

/**
 * Applies `edits` in order, each to the result of the ones before. Each oldText must occur exactly
 * once (overlapping occurrences count), else EINVAL naming the edit and the path; nothing is changed.
 */
export function applyEdits(text: string, edits: TextEdit[], path: string): string {
  let out = text;
  edits.forEach((e, i) => {
    const which = edits.length === 1 ? 'the edit' : `edit ${i + 1} of ${edits.length}`;
    if (e.oldText === '')
      throw new VfsError('EINVAL', 'edit', path, `${which} has an empty oldText (give the exact text to replace)`);
    const at = out.indexOf(e.oldText);
    if (at < 0)
      throw new VfsError(
        'EINVAL',
        'edit',
        path,
        `${which}: oldText ${quote(e.oldText)} is not in the file (it must match exactly, whitespace included); nothing was written`,
      );
    let times = 1;
    for (let k = out.indexOf(e.oldText, at + 1); k >= 0; k = out.indexOf(e.oldText, k + 1)) times++;
    if (times > 1)
      throw new VfsError(
        'EINVAL',
        'edit',
        path,
        `${which}: oldText ${quote(e.oldText)} occurs ${times} times (add surrounding lines so it matches once); nothing was written`,
      );
    out = out.slice(0, at) + e.newText + out.slice(at + e.oldText.length);
  });
  return out;
}

/** Milliseconds the diff of one edit may take before it is given up (the edit itself still applies). */
const DIFF_TIMEOUT_MS = 2000;

/** Lines of context around each change in a diff. */
const CONTEXT = 3;
/**
 * Lines kept around the changed region before diffing it. More than CONTEXT: among equal lines (a run
 * of blank lines) the diff may place a change a little away from where the texts first differ.
 */
const SLACK = 64;

/**
 * The part of `before` and `after` that a diff needs to look at: from SLACK lines before the first
 * difference to SLACK lines after the last, in whole lines, and how many lines precede it. An edit
 * to a big file then diffs a few lines, not the whole file.
 */
function changedRegion(
  before: string,
  after: string,
): { start: number; endBefore: number; endAfter: number; line: number } {
  const n = Math.min(before.length, after.length);
  let i = 0;
  while (i < n && before.charCodeAt(i) === after.charCodeAt(i)) i++;
  let j = 0;
  while (j < n - i && before.charCodeAt(before.length - 1 - j) === after.charCodeAt(after.length - 1 - j)) j++;
  // back to the start of the line holding the first difference, then SLACK lines more
  let start = i === 0 ? 0 : before.lastIndexOf('\n', i - 1) + 1;
  for (let k = 0; k < SLACK && start > 0; k++) start = start < 2 ? 0 : before.lastIndexOf('\n', start - 2) + 1;
  // on to the end of the line holding the last difference, then SLACK lines more
  let end = before.length - j;
  if (end > 0 && before.charCodeAt(end - 1) !== 10) {
    const nl = before.indexOf('\n', end);
    end = nl < 0 ? before.length : nl + 1;
  }
  for (let k = 0; k < SLACK && end < before.length; k++) {
    const nl = before.indexOf('\n', end);
    end = nl < 0 ? before.length : nl + 1;
  }
  let line = 0;
  for (let k = before.indexOf('\n'); k >= 0 && k < start; k = before.indexOf('\n', k + 1)) line++;
  return { start, endBefore: end, endAfter: after.length - (before.length - end), line };
}

/**
 * A git-style unified diff (`--- a/<path>`, `+++ b/<path>`, 3 lines of context), cut at ANSWER_MAX
 * bytes with a note saying so.
 */
export function unifiedDiff(label: string, before: string, after: string): { diff: string; truncated: boolean } {
  const name = label.replace(/^\/+/, '');
  const r = changedRegion(before, after);
  const a = before.slice(r.start, r.endBefore);
  const b = after.slice(r.start, r.endAfter);
  const patch = createTwoFilesPatch(`a/${name}`, `b/${name}`, a, b, undefined, undefined, {
    context: CONTEXT,
    timeout: DIFF_TIMEOUT_MS,
  });
  if (patch === undefined)
    return {
      diff: `[diff of ${label} not shown: it took longer than ${DIFF_TIMEOUT_MS} ms to compute]\n`,
      truncated: true,
    };
  // Hunk lines are numbered within the region: shift them by the lines before it.
  const diff = patch
    .replace(/^=+\n/m, '')
    .replace(
      /^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@/gm,
      (_m, x: string, xn: string | undefined, y: string, yn: string | undefined) =>
        `@@ -${Number(x) + r.line}${xn ?? ''} +${Number(y) + r.line}${yn ?? ''} @@`,
    );
  if (Buffer.byteLength(diff) <= ANSWER_MAX) return { diff, truncated: false };
  const cut = Buffer.from(diff).subarray(0, ANSWER_MAX).toString('utf8');
  return { diff: `${cut.slice(0, cut.lastIndexOf('\n') + 1)}[diff cut at ${ANSWER_MAX} bytes]\n`, truncated: true };
}
