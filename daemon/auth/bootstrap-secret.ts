/**
 * Security (issue 30, item 7): in hosted mode `POST /auth/bootstrap` would make the first anonymous
 * caller an administrator. There it also needs a one-time secret (DESIGN.md §4), as Jupyter, Grafana
 * and Jenkins do: 256 random bits in the file `bootstrap-secret` of the data dir (0600, like every
 * file there), written when hosted `mdvfs serve` starts on a store that needs bootstrap (serve names
 * the file on stderr) or at the first hosted bootstrap attempt, and deleted once bootstrap is done.
 * The secret itself is never logged.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { VfsError } from '../errors.js';

/** The file's name in the data dir. */
const BOOTSTRAP_SECRET_FILE = 'bootstrap-secret';

/** What a hosted caller is told, whatever was wrong: a wrong, missing or used secret, or no bootstrap to do. */
const REFUSED =
  'bootstrap needs the one-time secret in the file bootstrap-secret of the server\'s data dir (named by mdvfs serve on stderr at first start): {"username": ..., "secret": ...}; it is gone once the server has an administrator';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

export class BootstrapSecret {
  readonly file: string;

  constructor(dataDir: string) {
    this.file = path.join(dataDir, BOOTSTRAP_SECRET_FILE);
  }

  private read(): string | undefined {
    try {
      return readFileSync(this.file, 'utf8').trim();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  /**
   * While bootstrap is possible: makes sure the file holds a secret and returns its path (`created`
   * when written now). Afterwards: removes a leftover file and returns undefined.
   */
  ensure(needed: boolean): { file: string; created: boolean } | undefined {
    if (!needed) {
      this.consume();
      return undefined;
    }
    if (this.read() !== undefined) return { file: this.file, created: false };
    // 0600 whatever the umask; 'wx': never follow or replace what another process put there.
    writeFileSync(this.file, `mdvfs-boot-${randomBytes(32).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
    return { file: this.file, created: true };
  }

  /**
   * Checks a hosted caller's secret (constant time). Throws EAUTH with one message for every
   * refusal, so that an anonymous caller learns nothing about the store (not even whether it still
   * needs bootstrap).
   */
  verify(given: string | undefined, needed: boolean): void {
    const want = needed ? this.read() : undefined;
    const ok = want !== undefined && given !== undefined && timingSafeEqual(digest(want), digest(given.trim()));
    if (!ok) throw new VfsError('EAUTH', 'bootstrap', undefined, REFUSED);
  }

  /** Bootstrap is done: the secret is of no further use. */
  consume(): void {
    rmSync(this.file, { force: true });
  }
}
