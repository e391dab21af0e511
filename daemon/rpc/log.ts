/**
 * The one log of every mdvfs server process (the daemon and the HTTP workers): one JSON object per
 * line on stderr, always beginning with the same five keys,
 *
 *   {"time":"2026-11-29T01:02:03.456Z","level":"info","pid":123,"role":"daemon","msg":"daemon ready", ...}
 *
 * followed by the line's own fields. A field named like one of the five is written with a leading
 * underscore (`_pid`), so that no line holds a key twice. Lines below SERVICE_LOG_LEVEL are not
 * written. (Human one-liners for a terminal, like `mdvfs: listening on …`, are not log lines.)
 */
import type { LogLevel } from './settings.js';

/** Which process wrote a line. */
export type LogRole = 'daemon' | 'http';

const RANK: Record<LogLevel, number> = { error: 0, warn: 1, info: 2, debug: 3 };
const RESERVED = new Set(['time', 'level', 'pid', 'role', 'msg']);

export interface Logger {
  error(fields: object, msg?: string): void;
  warn(fields: object, msg?: string): void;
  info(fields: object, msg?: string): void;
  debug(fields: object, msg?: string): void;
  /** Whether lines of this level are written (to skip building a line nobody reads). */
  enabled(level: LogLevel): boolean;
  /**
   * A line whose fields after `msg` are already JSON (`,"k":v…`), for the per-request line that is
   * built without an intermediate object.
   */
  writeTail(level: LogLevel, msg: string, tail: string): void;
}

// Lines are batched: one stderr write per FLUSH_MS (or per BATCH lines), not one per line. A write(2)
// per request was a visible share of the HTTP worker's profile. Errors and warnings are written at
// once, and what is pending is written on exit (stderr is synchronous on Linux), so no line is lost on
// a clean stop or a process.exit().
const FLUSH_MS = 20;
const BATCH = 256;
let pending: string[] = [];
let flushTimer: NodeJS.Timeout | undefined;
function flush(): void {
  if (flushTimer !== undefined) clearTimeout(flushTimer);
  flushTimer = undefined;
  if (pending.length === 0) return;
  const out = pending.join('');
  pending = [];
  process.stderr.write(out);
}
process.once('exit', flush);

function queue(line: string, now: boolean): void {
  pending.push(line);
  if (now || pending.length >= BATCH) flush();
  else if (flushTimer === undefined) flushTimer = setTimeout(flush, FLUSH_MS).unref();
}

/** The ISO time of now, formatted at most once per millisecond. */
let isoMs = 0;
let iso = '';
function isoNow(): string {
  const now = Date.now();
  if (now !== isoMs) {
    isoMs = now;
    iso = new Date(now).toISOString();
  }
  return iso;
}

/** JSON for a field's value; an Error shows its message (JSON.stringify would give `{}`), a bigint its digits. */
function jsonValue(v: unknown): string | undefined {
  if (v instanceof Error) return JSON.stringify({ message: v.message });
  if (typeof v === 'bigint') return `"${v}"`;
  try {
    return JSON.stringify(v);
  } catch {
    return JSON.stringify(String(v));
  }
}

/** `,"k":v` for each field with a value, reserved names prefixed with `_`. */
function tailOf(fields: object): string {
  let s = '';
  for (const [k, v] of Object.entries(fields)) {
    const json = jsonValue(v);
    if (json === undefined) continue;
    s += `,${JSON.stringify(RESERVED.has(k) ? `_${k}` : k)}:${json}`;
  }
  return s;
}

let role: LogRole = 'daemon';
let threshold = RANK.info;

function write(level: LogLevel, msg: string, tail: string): void {
  if (RANK[level] > threshold) return;
  queue(
    `{"time":"${isoNow()}","level":"${level}","pid":${process.pid},"role":"${role}","msg":${JSON.stringify(msg)}${tail}}\n`,
    RANK[level] <= RANK.warn,
  );
}

const line =
  (level: LogLevel) =>
  (fields: object, msg = ''): void => {
    if (RANK[level] <= threshold) write(level, msg, tailOf(fields));
  };

/** The process's log (see the module comment); `setupLog` names the process and its level. */
export const log: Logger = {
  error: line('error'),
  warn: line('warn'),
  info: line('info'),
  debug: line('debug'),
  enabled: (level) => RANK[level] <= threshold,
  writeTail: write,
};

/** Called once at start by the daemon and each HTTP worker, with SERVICE_LOG_LEVEL. */
export function setupLog(r: LogRole, level: LogLevel): void {
  role = r;
  threshold = RANK[level];
}
