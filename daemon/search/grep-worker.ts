/**
 * Runs one grep job off the daemon's event loop. The daemon terminates this worker when a job
 * exceeds its time bound, so a catastrophic regex never stalls other clients.
 */
import { parentPort } from 'node:worker_threads';

/** What the daemon asks for: the files to search, in order, with their contents. */
export interface GrepJob {
  pattern: string;
  flags: string;
  max: number;
  /** matches to pass over before the first one returned (paging: the previous answer's next_offset) */
  offset: number;
  files: { path: string; id: string; buf: SharedArrayBuffer; len: number }[];
}

/**
 * What crosses to the worker. Contents are content-addressed and immutable, so each one is sent to
 * a worker once and later jobs name it by id. New contents travel packed in one transferred buffer
 * (`fresh`: ids, byte lengths, data): posting thousands of separate buffers costs more than the
 * search. `reset` drops everything the worker holds (the pool bounds what each worker holds).
 */
export interface WireJob {
  pattern: string;
  flags: string;
  max: number;
  offset: number;
  reset: boolean;
  paths: string[];
  ids: string[];
  fresh: { ids: string[]; lens: number[]; data: ArrayBuffer };
}

/**
 * New contents sent ahead of a job whose new contents are many (the pool sends them in parts of a
 * few MiB, yielding between parts, since packing tens of MiB at once holds the daemon's loop).
 * No answer; the job that follows on the same port relies on them.
 */
export interface LoadJob {
  kind: 'load';
  reset: boolean;
  fresh: WireJob['fresh'];
}

/** find: which of `subjects` a compiled glob matches (globs backtrack too: `*a*a*a*b`). */
export interface MatchJob {
  kind: 'match';
  source: string;
  flags: string;
  subjects: string[];
}

export interface MatchReply {
  indices: number[];
}

export interface GrepReply {
  results: { file: string; line_num: number; line: string }[];
  /** true when results were left out (max_results, the answer budget) or a returned line was cut */
  truncated: boolean;
  /** true when matches follow the returned ones (the next page starts at offset + results.length) */
  more: boolean;
  /** files of the job not searched because they look binary (a NUL byte in their first BINARY_PROBE bytes) */
  skipped_binary: number;
}

/** Bytes at the start of a file checked for a NUL byte: like grep, a NUL there makes the file binary. */
export const BINARY_PROBE = 8192;

/** Characters of one matching line returned; a longer line is cut there and marked. */
export const GREP_LINE_MAX = 4096;
/**
 * Characters (lines plus paths) of one grep answer. At most 6 bytes of JSON per character, so a
 * full answer stays well under the socket's 16 MiB header limit; past it the answer is `truncated`.
 */
export const GREP_ANSWER_MAX = 2 * 1024 * 1024;

/** A line as returned: cut at GREP_LINE_MAX characters with a marker saying how long it was. */
export function cutLine(line: string): string {
  return line.length <= GREP_LINE_MAX
    ? line
    : `${line.slice(0, GREP_LINE_MAX)} [… line cut: ${line.length} characters]`;
}

// Decoded contents by id, as sent by the pool, so repeated searches skip copying and decoding.
const cache = new Map<string, string>();
// The ids of binary contents (kept in `cache` as '': they are never searched).
const binary = new Set<string>();

function text(id: string): string {
  const s = cache.get(id);
  if (s === undefined) throw new Error(`grep worker: content ${id.slice(0, 12)} was never sent`);
  return s;
}

function run(job: WireJob): GrepReply {
  const line = new RegExp(job.pattern, job.flags);
  // A cheap whole-file pre-test: most files of a selective search do not match at all.
  const whole = new RegExp(job.pattern, job.flags + 'm');
  const results: GrepReply['results'] = [];
  let skippedBinary = 0;
  for (const id of job.ids) if (binary.has(id)) skippedBinary++;
  let skip = job.offset;
  let budget = GREP_ANSWER_MAX;
  let cut = false;
  const stop = (): GrepReply => ({ results, truncated: true, more: true, skipped_binary: skippedBinary });
  for (let k = 0; k < job.ids.length; k++) {
    const id = job.ids[k]!;
    if (binary.has(id)) continue;
    const s = text(id);
    // an empty file has no lines (GNU grep finds nothing in it, not even with ^$)
    if (s === '' || !whole.test(s)) continue;
    const lines = s.split('\n');
    if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
    for (let i = 0; i < lines.length; i++) {
      if (line.test(lines[i]!)) {
        if (skip > 0) {
          skip--;
          continue;
        }
        if (results.length >= job.max) return stop();
        const shown = cutLine(lines[i]!);
        budget -= shown.length + job.paths[k]!.length + 32;
        if (budget < 0) return stop();
        if (shown.length !== lines[i]!.length) cut = true;
        results.push({ file: job.paths[k]!, line_num: i + 1, line: shown });
      }
    }
  }
  return { results, truncated: cut, more: false, skipped_binary: skippedBinary };
}

function match(job: MatchJob): MatchReply {
  const re = new RegExp(job.source, job.flags);
  const indices: number[] = [];
  for (let i = 0; i < job.subjects.length; i++) if (re.test(job.subjects[i]!)) indices.push(i);
  return { indices };
}

/** Registers contents sent to this worker (`reset` drops everything held first). */
function load(reset: boolean, fresh: WireJob['fresh']): void {
  if (reset) {
    cache.clear();
    binary.clear();
  }
  let off = 0;
  for (let k = 0; k < fresh.ids.length; k++) {
    const len = fresh.lens[k]!;
    const bytes = Buffer.from(fresh.data, off, len);
    const id = fresh.ids[k]!;
    if (bytes.subarray(0, BINARY_PROBE).includes(0)) {
      binary.add(id);
      cache.set(id, '');
    } else cache.set(id, bytes.toString('utf8'));
    off += len;
  }
}

parentPort?.on('message', (job: WireJob | MatchJob | LoadJob) => {
  if ('kind' in job && job.kind === 'load') {
    load(job.reset, job.fresh);
    return;
  }
  if ('kind' in job) {
    try {
      parentPort!.postMessage({ ok: match(job) });
    } catch (err) {
      parentPort!.postMessage({ error: (err as Error).message });
    }
    return;
  }
  // Register what was sent before anything can fail, so the pool's record of it stays true.
  load(job.reset, job.fresh);
  try {
    parentPort!.postMessage({ ok: run(job) });
  } catch (err) {
    parentPort!.postMessage({ error: (err as Error).message });
  }
});

// Loaded: the pool starts its time bound for a job only after this.
parentPort?.postMessage({ ready: true });
