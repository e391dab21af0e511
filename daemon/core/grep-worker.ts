/**
 * Runs one grep job off the daemon's event loop. The daemon terminates this worker when a job
 * exceeds its time bound, so a catastrophic regex never stalls other clients.
 */
import { parentPort } from 'node:worker_threads';

export interface GrepJob {
  pattern: string;
  flags: string;
  max: number;
  files: { path: string; id: string; buf: SharedArrayBuffer; len: number }[];
}

export interface GrepReply {
  results: { file: string; line_num: number; line: string }[];
  truncated: boolean;
}

// Decoded contents by blob id, so repeated searches skip UTF-8 decoding.
const cache = new Map<string, string>();
let cached = 0;
const CACHE_LIMIT = 512 * 1024 * 1024;

function text(id: string, buf: SharedArrayBuffer, len: number): string {
  let s = cache.get(id);
  if (s === undefined) {
    s = Buffer.from(buf, 0, len).toString('utf8');
    if (cached + s.length > CACHE_LIMIT) {
      cache.clear();
      cached = 0;
    }
    cache.set(id, s);
    cached += s.length;
  }
  return s;
}

function run(job: GrepJob): GrepReply {
  const line = new RegExp(job.pattern, job.flags);
  // A cheap whole-file pre-test: most files of a selective search do not match at all.
  const whole = new RegExp(job.pattern, job.flags + 'm');
  const results: GrepReply['results'] = [];
  for (const f of job.files) {
    const s = text(f.id, f.buf, f.len);
    if (!whole.test(s)) continue;
    const lines = s.split('\n');
    if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
    for (let i = 0; i < lines.length; i++) {
      if (line.test(lines[i]!)) {
        if (results.length >= job.max) return { results, truncated: true };
        results.push({ file: f.path, line_num: i + 1, line: lines[i]! });
      }
    }
  }
  return { results, truncated: false };
}

parentPort?.on('message', (job: GrepJob) => {
  try {
    parentPort!.postMessage({ ok: run(job) });
  } catch (err) {
    parentPort!.postMessage({ error: (err as Error).message });
  }
});
