/**
 * The depth limit trusts each directory's cached height (so a move never walks its subtree): after
 * any sequence of creations, moves, copies and deletions every height must equal a fresh count.
 */
import t from 'tap';
import { Vfs } from '../../daemon/core/vfs.js';
import { Vcs } from '../../daemon/vcs/vcs.js';
import type { Node } from '../../daemon/core/inode.js';
import type { Cred } from '../../daemon/core/perms.js';

const journal = {
  inode: () => undefined,
  inodeRemoved: () => undefined,
  object: () => undefined,
  objectRemoved: () => undefined,
  setRef: () => undefined,
  mark: () => undefined,
  forgetMarks: () => undefined,
  durable: () => Promise.resolve(),
  close: () => undefined,
};
const root: Cred = { user: { uid: 0, gid: 0, groups: new Set([0]), name: 'root', home: '/', isAgent: false } };

/** Levels below a node, counted from scratch. */
function counted(n: Node): number {
  let best = 0;
  const stack: { node: Node; depth: number }[] = [{ node: n, depth: 0 }];
  while (stack.length > 0) {
    const { node, depth } = stack.pop()!;
    best = Math.max(best, depth);
    if (node.kind === 'directory') for (const c of node.children.values()) stack.push({ node: c, depth: depth + 1 });
  }
  return best;
}

function wrongHeights(vfs: Vfs): string[] {
  const bad: string[] = [];
  for (const n of vfs.nodes.values())
    if (n.kind === 'directory' && n.height !== counted(n)) bad.push(`${n.name}: ${n.height} != ${counted(n)}`);
  return bad;
}

t.test('heights stay exact through random operations and reverts', async (t) => {
  const vfs = new Vfs({ maxFileSize: 1 << 20, journal });
  vfs.initFresh();
  const vcs = new Vcs(vfs, journal);
  const scope = { id: '', root: '/' };
  const commits: string[] = [];
  const succeeded = new Array<number>(8).fill(0);
  let reverts = 0;
  let seed = 12345;
  const rand = (n: number): number => {
    // mulberry32: deterministic, and every bit is usable
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), seed | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) % n;
  };
  const paths = (kind: Node['kind']): string[] => {
    const out: string[] = [];
    vfs.forEachNode(vfs.root, (n) => {
      if (n.kind === kind && n.parent !== null) out.push(pathOf(n));
    });
    return out.sort();
  };
  const pick = (kind: Node['kind'] = 'directory'): string => {
    const all = paths(kind);
    return all.length === 0 ? '/tmp' : all[rand(all.length)]!;
  };
  for (let step = 0; step < 400; step++) {
    const op = rand(8);
    try {
      if (op === 0) vfs.mkdir(root, pick() + '/c'.repeat(1 + rand(30)) + `/n${step}`, { parents: true });
      else if (op === 1) vfs.write(root, `${pick()}/f${step}.md`, Buffer.from('x'));
      else if (op === 2) vfs.remove(root, pick(), true);
      else if (op === 3) vfs.move(root, pick(), `${pick()}/m${step}`);
      else if (op === 4) vfs.copy(root, pick(), `${pick()}/k${step}`, { recursive: true });
      else if (op === 5) vfs.symlink(root, rand(2) === 0 ? pick() : '../..', `${pick()}/l${step}`);
      else if (op === 7) {
        if (rand(2) === 0 || commits.length === 0) commits.push(vcs.commit(root, scope, `step ${step}`).hash);
        else {
          vcs.revert(root, scope, commits[rand(commits.length)]!);
          reverts++;
        }
      } else vfs.mkdir(root, pick('symlink') + '/s'.repeat(1 + rand(5)) + `/n${step}`, { parents: true }); // mkdir -p through a link
      succeeded[op]!++;
    } catch {
      // refusals (a move into itself, removing /tmp, ...) are part of the mix
    }
    const bad = wrongHeights(vfs);
    if (bad.length > 0) {
      t.fail(`after step ${step} (op ${op}): ${bad.slice(0, 3).join(', ')}`);
      return;
    }
  }
  t.pass('every directory height matched a fresh count after each of 400 operations');
  t.ok(
    succeeded.every((n) => n > 0) && reverts > 0,
    `every kind of operation succeeded at least once (${succeeded.join(', ')}; ${reverts} reverts)`,
  );
});

function pathOf(n: Node): string {
  const parts: string[] = [];
  for (let c: Node | null = n; c !== null && c.parent !== null; c = c.parent) parts.push(c.name);
  return '/' + parts.reverse().join('/');
}
