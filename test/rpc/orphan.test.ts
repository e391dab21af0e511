/**
 * A daemon whose socket is gone (its data dir deleted, or the socket file removed) can never be reached
 * again: it stops by itself instead of lingering, and on its way out it never removes a socket that a
 * newer daemon made on the same path.
 */
import { chmodSync, mkdirSync, rmSync, statSync } from 'node:fs';
import t from 'tap';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import { exitOf, spawnDaemon, tempDir } from '../helpers/daemon.js';

void t.test('deleting the data dir stops its daemon', async (t) => {
  const d = await spawnDaemon(t);
  t.equal((await d.client.call('sys.ping', {})).pid, d.proc.pid, 'serving');
  d.client.close();
  rmSync(d.dataDir, { recursive: true, force: true, maxRetries: 10 }); // retried: the running daemon may add a file meanwhile
  t.equal(await exitOf(d.proc), 0, 'it exits cleanly');
  t.match(d.stderr(), /socket removed, flushing and stopping/, 'and says why');
});

void t.test('a daemon on a data dir made again keeps its socket when the old one stops', async (t) => {
  const dir = tempDir();
  const old = await spawnDaemon(t, {}, dir);
  old.client.close();
  rmSync(dir, { recursive: true, force: true, maxRetries: 10 }); // retried: the running daemon may add a file meanwhile
  mkdirSync(dir, { mode: 0o700 });
  const fresh = await spawnDaemon(t, {}, dir); // a new store: no lock held on it
  const ino = statSync(socketPathFor(dir)).ino;
  t.equal(await exitOf(old.proc), 0, 'the old daemon sees its socket replaced and stops');
  t.equal(statSync(socketPathFor(dir)).ino, ino, "the new daemon's socket is still there");
  t.equal((await fresh.client.call('sys.ping', {})).pid, fresh.proc.pid, 'and it still serves');
});

void t.test(
  'a chmod -R of the data dir (the socket keeps its file, its change time moves) does not stop the daemon',
  async (t) => {
    const d = await spawnDaemon(t);
    const sock = socketPathFor(d.dataDir);
    const before = statSync(sock, { bigint: true }).ctimeNs;
    await new Promise((r) => setTimeout(r, 20));
    chmodSync(sock, 0o600);
    chmodSync(d.dataDir, 0o700);
    t.not(statSync(sock, { bigint: true }).ctimeNs, before, 'the socket file changed (ctime)');
    // Two checks of the watch (every 2 s) later, it still serves.
    await new Promise((r) => setTimeout(r, 4500));
    t.equal(d.proc.exitCode, null, 'still running');
    t.equal((await d.client.call('sys.ping', {})).pid, d.proc.pid, 'and serving');
    t.notMatch(d.stderr(), /socket removed/);
  },
);
