/**
 * Path walking: from the root to the node a path names, with search (x) permission on every
 * directory walked and symlinks followed (the final one only when asked), at most MAX_SYMLINKS of
 * them. A missing entry is an answer (undefined), never an exception; every refusal throws.
 */
import { VfsError } from '../errors.js';
import { pathOf, type DirNode, type Node } from './inode.js';
import { components, isWithin } from './paths.js';
import { requireAccess, requireFollow, X, type Cred } from './perms.js';

export const MAX_SYMLINKS = 40;

export function walk(
  root: DirNode,
  cred: Cred,
  abs: string,
  op: string,
  follow: boolean,
  links = { n: 0 },
): Node | undefined {
  let cur: Node = root;
  let queue = components(abs);
  let i = 0;
  const jail = cred.workspace?.root;
  while (i < queue.length) {
    const name = queue[i++]!;
    if (cur.kind !== 'directory') throw new VfsError('ENOTDIR', op, abs);
    if (name === '.' || name === '') continue;
    // Security: a workspace caller steps only inside its workspace (or on the way down to it), and a
    // step outside fails before anything there is looked up, so a symlink cannot tell which outside paths exist.
    if (
      jail !== undefined &&
      !onJailPath(name === '..' ? pathOf(cur.parent ?? root) : joinPath(pathOf(cur), name), jail)
    )
      throw new VfsError('EACCES', op, abs, 'outside the workspace');
    requireAccess(cred, cur, X, op, abs);
    if (name === '..') {
      cur = cur.parent ?? root;
      continue;
    }
    const child: Node | undefined = cur.children.get(name);
    if (child === undefined) return undefined;
    if (child.kind === 'symlink' && (i < queue.length || follow)) {
      requireFollow(cred, cur, child, op, abs);
      if (++links.n > MAX_SYMLINKS) throw new VfsError('ELOOP', op, abs);
      const target = child.target;
      if (target.startsWith('/')) cur = root;
      queue = [...target.split('/'), ...queue.slice(i)];
      i = 0;
      continue;
    }
    cur = child;
  }
  return cur;
}

/** Security: workspace callers never reach outside the workspace root, even through symlinks. */
export function confine(cred: Cred, node: Node, op: string, abs: string): void {
  if (cred.workspace === undefined) return;
  if (!isWithin(pathOf(node), cred.workspace.root)) throw new VfsError('EACCES', op, abs, 'outside the workspace');
}

/** `p` is inside the workspace `jail` or one of the directories leading down to it. */
function onJailPath(p: string, jail: string): boolean {
  return isWithin(p, jail) || isWithin(jail, p);
}

function joinPath(dir: string, name: string): string {
  return dir === '/' ? `/${name}` : `${dir}/${name}`;
}
