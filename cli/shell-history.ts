/**
 * The interactive shell's history across sessions, like bash's ~/.bash_history: one line per command,
 * oldest first, in `$XDG_STATE_HOME/mdvfs/shell_history` (default `~/.local/state/mdvfs/shell_history`),
 * readable by its owner only (mode 0600, directory 0700). Lines typed with a leading space are kept out
 * of the file, as with bash's HISTCONTROL=ignorespace. A history that cannot be read or written never
 * stops the shell: it warns once on stderr and goes on with the session's history only.
 */
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const HISTORY_SIZE = 1000;

export function historyFile(env: NodeJS.ProcessEnv = process.env): string {
  const state =
    env.XDG_STATE_HOME !== undefined && path.isAbsolute(env.XDG_STATE_HOME)
      ? env.XDG_STATE_HOME
      : path.join(os.homedir(), '.local', 'state');
  return path.join(state, 'mdvfs', 'shell_history');
}

export class ShellHistory {
  private warned = false;

  constructor(readonly file: string) {}

  /** Saved lines, newest first (the order readline keeps). */
  load(): string[] {
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.warn(err);
      return [];
    }
    return text
      .split('\n')
      .filter((l) => l.trim() !== '')
      .slice(-HISTORY_SIZE)
      .reverse();
  }

  /** Writes the history (newest first, as readline reports it) whole, through a temp file and a rename. */
  save(newestFirst: readonly string[]): void {
    const lines = newestFirst
      .filter((l) => !l.startsWith(' ') && l.trim() !== '')
      .slice(0, HISTORY_SIZE)
      .reverse();
    const tmp = `${this.file}.${process.pid}.tmp`;
    try {
      mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
      writeFileSync(tmp, lines.length > 0 ? `${lines.join('\n')}\n` : '', { mode: 0o600 });
      chmodSync(tmp, 0o600); // an umask cannot widen it, but a stale temp file of ours could be wider
      renameSync(tmp, this.file);
    } catch (err) {
      this.warn(err);
    }
  }

  private warn(err: unknown): void {
    if (this.warned) return;
    this.warned = true;
    process.stderr.write(
      `mdvfs shell: history file ${this.file}: ${(err as Error).message} (history is kept for this session only)\n`,
    );
  }
}
