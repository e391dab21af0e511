/** chmod mode arguments: octal (`644`, `2775`) or symbolic (`u+x`, `go-w`, `a=rX`, `+t`). */
import { UsageError } from './errors.js';

const OCTAL = /^[0-7]{1,4}$/;

/** True when `spec` needs the current mode (symbolic); octal modes do not. */
export function isSymbolicMode(spec: string): boolean {
  return !OCTAL.test(spec);
}

/** Checks a mode argument without applying it (usage errors come before any request). */
export function validateMode(spec: string): void {
  if (OCTAL.test(spec)) return;
  for (const clause of spec.split(',')) {
    // Several operations may follow one another in a clause (u+r-w); split them for the check.
    const m = /^([ugoa]*)((?:[-+=](?:[rwxXst]*|[ugo]))+)$/.exec(clause);
    if (!m) throw new UsageError(`invalid mode: '${spec}'`);
  }
}

/** Applies a symbolic mode to `current` (12 bits), as chmod(1) does with umask 0. */
export function applyMode(spec: string, current: number, isDir: boolean): number {
  if (OCTAL.test(spec)) return parseInt(spec, 8);
  validateMode(spec);
  let mode = current & 0o7777;
  for (const clause of spec.split(',')) {
    const whoMatch = /^[ugoa]*/.exec(clause);
    const who = whoMatch?.[0] ?? '';
    let rest = clause.slice(who.length);
    const mask =
      who === '' || who.includes('a')
        ? 0o7777
        : (who.includes('u') ? 0o4700 : 0) | (who.includes('g') ? 0o2070 : 0) | (who.includes('o') ? 0o1007 : 0);
    while (rest.length > 0) {
      const m = /^([-+=])([rwxXst]*|[ugo])/.exec(rest);
      if (!m) throw new UsageError(`invalid mode: '${spec}'`);
      rest = rest.slice(m[0].length);
      const op = m[1];
      const perms = m[2] ?? '';
      let bits = 0;
      if (perms === 'u' || perms === 'g' || perms === 'o') {
        const shift = perms === 'u' ? 6 : perms === 'g' ? 3 : 0;
        const v = (mode >> shift) & 7;
        bits = (v << 6) | (v << 3) | v;
      } else {
        for (const c of perms) {
          if (c === 'r') bits |= 0o444;
          else if (c === 'w') bits |= 0o222;
          else if (c === 'x') bits |= 0o111;
          else if (c === 'X') bits |= isDir || (mode & 0o111) !== 0 ? 0o111 : 0;
          else if (c === 's') bits |= 0o6000;
          else if (c === 't') bits |= 0o1000;
        }
      }
      bits &= mask;
      if (op === '+') mode |= bits;
      else if (op === '-') mode &= ~bits;
      else mode = (mode & ~((mask & 0o0777) | (mask & 0o6000 & ~0o1000))) | bits;
    }
  }
  return mode & 0o7777;
}
