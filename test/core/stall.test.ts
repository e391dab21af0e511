/**
 * One request must not stall the daemon for everyone (issue 12, item 6): while a huge diff or a
 * huge recursive delete runs for one client, another client's small read is answered (it completes
 * before the heavy request does; no wall-clock limit). The heavy requests stay correct: the diff
 * names every changed file (and is cut with a marker past its size bound), the delete removes
 * everything, and the store still loads after a restart.
 */
import t from 'tap';
import { connectSocket, type Caller } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import { spawnDaemon } from '../helpers/daemon.js';

const d = await spawnDaemon(t, { SERVICE_FSYNC: 'off' });
const root = d.client.as({});

async function fill(c: Caller, paths: string[], body: (p: string) => string): Promise<void> {
  for (let s = 0; s < paths.length; s += 500) await Promise.all(paths.slice(s, s + 500).map((p) => c.call('fs.write', { path: p }, { data: Buffer.from(body(p)) })));
}

/**
 * Starts `heavy` on the shared connection, then (once the daemon has had time to take it up) a
 * stat from a second connection; says which answered first.
 */
async function race<T>(heavy: () => Promise<T>): Promise<{ smallFirst: boolean; result: T }> {
  const other = await connectSocket(socketPathFor(d.dataDir));
  try {
    await other.call('fs.stat', { path: '/tmp' }); // connected and warm
    const order: string[] = [];
    const h = heavy().then((r) => {
      order.push('heavy');
      return r;
    });
    await new Promise((r) => setTimeout(r, 5));
    const s = other.call('fs.stat', { path: '/tmp' }).then(() => order.push('small'));
    const [result] = await Promise.all([h, s]);
    return { smallFirst: order[0] === 'small', result };
  } finally {
    other.close();
  }
}

const lines = (p: string, tag: string): string => Array.from({ length: 40 }, (_, i) => `${p} line ${i}${i === 20 ? ` ${tag}` : ''}`).join('\n') + '\n';

void t.test('a small read is answered while a diff of 3,000 changed files runs', async (t) => {
  const files = Array.from({ length: 3000 }, (_, i) => `/srv/diff/d${String(i % 30).padStart(2, '0')}/f${String(i).padStart(4, '0')}.md`);
  await fill(root, files, (p) => lines(p, 'old'));
  await root.call('vcs.commit', { message: 'base' });
  await fill(root, files, (p) => lines(p, 'new'));
  const { smallFirst, result } = await race(() => root.call('vcs.diff', {}));
  t.ok(smallFirst, 'the stat answered before the diff finished');
  t.equal(result.truncated, undefined, 'not cut');
  const named = result.diff.match(/^\+\+\+ b\/.*$/gm) ?? [];
  t.same(named.map((l) => `/${l.slice(6)}`).sort(), [...files].sort(), 'every changed file is in the diff once');
  t.equal((result.diff.match(/^\+.* new$/gm) ?? []).length, 3000, 'with its changed line');
});

void t.test('a diff past its size bound is cut with a clear marker', async (t) => {
  const big = Array.from({ length: 6 }, (_, i) => `/srv/bigdiff/b${i}.md`);
  await fill(root, big, (p) => `${p}\n`.repeat(40000));
  const r = await root.call('vcs.diff', { path: '/srv/bigdiff' });
  t.equal(r.truncated, true);
  t.match(r.diff, /\[diff truncated: the output is limited to 4194304 bytes; \d+ of 6 changed files not shown/);
  t.ok(Buffer.byteLength(r.diff) <= 4 * 1024 * 1024 + 1024, 'within the bound');
  await root.call('fs.delete', { path: '/srv/bigdiff', recursive: true });
});

void t.test('a small read is answered while a recursive delete of 60,000 entries runs', async (t) => {
  const files = Array.from({ length: 60000 }, (_, i) => `/srv/del/sub${i % 3}/f${String(i).padStart(5, '0')}.md`);
  await fill(root, files, (p) => p);
  const { smallFirst, result } = await race(() => root.call('fs.delete', { path: '/srv/del', recursive: true }));
  t.ok(smallFirst, 'the stat answered before the delete finished');
  t.equal(result.deleted, 60004, 'every entry (and the four directories) deleted');
  await t.rejects(root.call('fs.stat', { path: '/srv/del' }), { code: 'ENOENT' });
  await d.kill('SIGTERM');
  await d.restart();
  await t.rejects(d.client.call('fs.stat', { path: '/srv/del' }), { code: 'ENOENT' }, 'still gone after a restart');
  const fsck = await d.client.call('sys.fsck', {});
  t.same(fsck.problems, [], 'and the store is consistent');
});
