/**
 * Path strings: validation, lexical normalisation and the contract's resolution table
 * (relative → home, `~` → home, absolute unchanged, empty → home; root's home is `/`).
 */
import { VfsError } from '../errors.js';

export const NAME_MAX = 255;
export const PATH_MAX = 4096;
/**
 * Security: the deepest level an entry may have below `/` (`/a` is level 1). PATH_MAX does not bound
 * depth (moves nest chains), and deep trees cost every walk; creations, copies, moves and reverts
 * that would reach past it are ENAMETOOLONG.
 */
export const MAX_DEPTH = 1024;

/** Throws EINVAL / ENAMETOOLONG for a name that can never exist. */
export function validateName(name: string, op: string, path?: string): void {
  if (name === '' || name === '.' || name === '..')
    throw new VfsError('EINVAL', op, path, `invalid file name '${name}'`);
  if (name.includes('/') || name.includes('\0'))
    throw new VfsError('EINVAL', op, path, 'file names may not contain / or NUL');
  if (Buffer.byteLength(name, 'utf8') > NAME_MAX) throw new VfsError('ENAMETOOLONG', op, path);
}

/** Splits an absolute, normalised path into its components. */
export function components(abs: string): string[] {
  return abs === '/' ? [] : abs.slice(1).split('/');
}

/**
 * Lexically normalises `path` against `base` (both as written; base absolute): `.` is dropped,
 * `..` pops one component and never climbs above `/`. Security: this is what keeps `/fs/../../x`
 * and workspace paths from escaping.
 */
export function normalize(path: string, base = '/'): string {
  const out: string[] = path.startsWith('/') ? [] : components(base);
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') out.pop();
    else out.push(part);
  }
  return '/' + out.join('/');
}

export function checkPathString(path: string, op: string): void {
  if (path.includes('\0')) throw new VfsError('EINVAL', op, undefined, 'paths may not contain NUL bytes');
  if (Buffer.byteLength(path, 'utf8') > PATH_MAX) throw new VfsError('ENAMETOOLONG', op, path.slice(0, 64) + '...');
}

/**
 * Resolves a path as written by a caller whose home is `home` (`/` for root), inside an optional
 * workspace rooted at `jail`. Returns the absolute path in the real tree.
 */
export function resolveFor(path: string, home: string, op: string, jail?: string): string {
  checkPathString(path, op);
  if (jail !== undefined) {
    // Inside a workspace `/`, `~` and relative paths all start at the workspace root.
    let rel = path;
    if (rel === '~') rel = '';
    else if (rel.startsWith('~/')) rel = rel.slice(2);
    const inner = normalize(rel, '/');
    return inner === '/' ? jail : jail === '/' ? inner : jail + inner;
  }
  if (path === '' || path === '~') return home;
  if (path.startsWith('~/')) return normalize(path.slice(2), home);
  if (path.startsWith('/')) return normalize(path, '/');
  return normalize(path, home);
}

/** Whether `abs` is `root` or below it. */
export function isWithin(abs: string, root: string): boolean {
  if (root === '/') return true;
  return abs === root || abs.startsWith(root + '/');
}

/** The path as a workspace caller sees it (`/` is the workspace root). */
export function displayPath(abs: string, jail?: string): string {
  if (jail === undefined || jail === '/') return abs;
  if (abs === jail) return '/';
  return abs.startsWith(jail + '/') ? abs.slice(jail.length) : abs;
}

export function splitParent(abs: string): { dir: string; name: string } {
  const i = abs.lastIndexOf('/');
  return { dir: i <= 0 ? '/' : abs.slice(0, i), name: abs.slice(i + 1) };
}
