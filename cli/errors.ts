/**
 * How the CLI reports failures: one stderr line `mdvfs: <message> (<CODE>)` and an exit code
 * (0 ok, 1 the operation failed, 2 the command line was wrong).
 */
import { VfsError } from '../daemon/errors.js';

/** A mistake in the command line itself (exit 2). */
export class UsageError extends Error {
  readonly code = 'EUSAGE';
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** A failure that is not a daemon error but has a code worth showing (exit 1). */
export class CliError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export interface Reported {
  message: string;
  code: string;
  exitCode: 1 | 2;
}

/** Turns anything thrown into the one-line report and its exit code. */
export function describeError(err: unknown): Reported {
  if (err instanceof UsageError) return { message: err.message, code: err.code, exitCode: 2 };
  if (err instanceof VfsError || err instanceof CliError) {
    // VfsError messages start with their code ("ENOENT: no such file..."); the code goes at the end instead.
    const message = err.message.startsWith(`${err.code}: `) ? err.message.slice(err.code.length + 2) : err.message;
    return { message, code: err.code, exitCode: 1 };
  }
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' && /^[A-Z][A-Z0-9_]*$/.test(e.code) ? e.code : 'EIO';
  const message = typeof e?.message === 'string' ? e.message : String(err);
  return { message: message.startsWith(`${code}: `) ? message.slice(code.length + 2) : message, code, exitCode: 1 };
}

/** The stderr line for an error, with a trailing newline. `prefix` is `mdvfs` or a shell command name. */
export function errorLine(err: unknown, prefix = 'mdvfs'): string {
  const r = describeError(err);
  return `${prefix}: ${r.message.replace(/\s*\n\s*/g, ' ')} (${r.code})\n`;
}
