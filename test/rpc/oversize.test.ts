/**
 * Issue 12, item 3 at the frame level: both socket ends survive any frame.
 * - A client that sends an oversized length prefix to the real daemon loses only its own connection.
 * - The daemon never sends a frame over the limits: a too-large answer is an E2BIG error for that request.
 * - The client (every front end's) skips an oversized frame from its peer: only the request it
 *   names fails, clearly, and the connection keeps serving the others.
 */
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import t from 'tap';
import { connectSocket } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import { encodeFrame, FrameDecoder, MAX_HEADER } from '../../daemon/rpc/framing.js';
import { text } from '../helpers/daemon.js';
import { quickDaemon, settle } from '../vcs/lib.js';

t.test('an oversized length prefix from a client closes only that connection', async (t) => {
  const d = await quickDaemon(t);
  const other = await connectSocket(socketPathFor(d.dataDir));
  t.teardown(() => other.close());

  const raw = net.createConnection(socketPathFor(d.dataDir));
  await new Promise<void>((r) => raw.once('connect', () => r()));
  const frames: unknown[] = [];
  const dec = new FrameDecoder();
  raw.on('data', (c: Buffer) => frames.push(...dec.push(c).map((f) => f.header)));
  raw.on('error', () => undefined); // ECONNRESET: our garbage arrives after the daemon closed
  const closed = new Promise<void>((r) => raw.once('close', () => r()));
  const prefix = Buffer.alloc(8);
  prefix.writeUInt32BE(0xffffffff, 0);
  prefix.writeUInt32BE(0xffffffff, 4);
  raw.write(prefix);
  // a slow stream of garbage afterwards must not keep the connection (or memory) alive
  raw.write(Buffer.alloc(64 * 1024, 0x41));
  await closed;
  t.equal(frames.length, 1, 'one answer, then closed');
  t.match(frames[0], { id: null, error: { code: 'EPROTO', message: /frame too large/ } }, 'saying why');

  t.equal((await other.call('sys.ping', {})).pong, true, 'another connection is served');
  t.equal((await d.client.call('sys.ping', {})).pong, true, 'and the first one too');
  t.equal(d.proc.exitCode, null, 'the daemon is running');
});

t.test('the daemon answers E2BIG instead of sending a frame over the limit', async (t) => {
  const d = await quickDaemon(t);
  const root = d.client.as({});
  // A commit's directory listing (vcs.ls, what the mount's .history shows) is not paged: 12,000 names
  // of 250 control characters are about 18 MB of JSON (6 bytes each), more than one frame may carry.
  const ctl = '\u0001'.repeat(245);
  await root.call('fs.mkdir', { path: '/srv/w', parents: true });
  for (let i = 0; i < 12000; i += 500) {
    await Promise.all(
      Array.from({ length: 500 }, (_, k) =>
        root.call('fs.write', { path: `/srv/w/${ctl}${String(i + k).padStart(5, '0')}` }, text('x')),
      ),
    );
  }
  const c = await root.call('vcs.commit', { message: 'wide' });
  const r = await settle(root.call('vcs.ls', { rev: c.hash, path: '/srv/w' }));
  t.equal(r.ok ? 'ok' : r.error.code, 'E2BIG', 'the request fails clearly');
  if (!r.ok) t.match(r.error.message, /larger than .* narrow the request/);
  t.equal(d.client.isClosed, false, 'the connection stays open');
  t.equal((await root.call('sys.ping', {})).pong, true, 'and serves the next request');
});

t.test('vcs.log answers with the newest commits that fit, flagged truncated', async (t) => {
  const d = await quickDaemon(t);
  const root = d.client.as({});
  // control characters take 6 bytes of JSON each: 30 commits of 100,000 are 18 MB of log
  const msg = '\u0001'.repeat(100000);
  for (let i = 0; i < 30; i++) {
    await root.call('fs.write', { path: '/srv/l/a.md' }, text(String(i)));
    await root.call('vcs.commit', { message: msg });
  }
  const log = await root.call('vcs.log', {});
  t.equal(log.truncated, true, 'the log says it was cut');
  t.ok(log.commits.length > 0 && log.commits.length < 30, `the newest commits that fit (${log.commits.length})`);
  t.same((await root.call('vcs.log', { limit: 2 })).commits.length, 2, 'a narrower request is whole');
});

t.test('the client skips an oversized frame: only the request it names fails', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-oversize-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const sockPath = path.join(dir, 's');
  // a peer that answers request 1 with a frame over the header limit, then request 2 normally
  const server = net.createServer((s) => {
    const dec = new FrameDecoder();
    s.on('data', (c: Buffer) => {
      for (const f of dec.push(c)) {
        const id = (f.header as { id: number }).id;
        if (id === 1) {
          const big = Buffer.alloc(MAX_HEADER + 1024, 0x20);
          const head = Buffer.from(`{"id":1,"result":"`);
          head.copy(big, 0);
          const prefix = Buffer.alloc(8);
          prefix.writeUInt32BE(big.length, 0);
          prefix.writeUInt32BE(0, 4);
          // in pieces, as a socket delivers it
          s.write(prefix);
          for (let off = 0; off < big.length; off += 1 << 20) s.write(big.subarray(off, off + (1 << 20)));
        } else {
          for (const b of encodeFrame({ id, result: { pong: true } })) s.write(b);
        }
      }
    });
  });
  await new Promise<void>((r) => server.listen(sockPath, () => r()));
  t.teardown(() => server.close());
  const client = await connectSocket(sockPath);
  t.teardown(() => client.close());
  const first = settle(client.call('sys.ping', {}));
  const second = client.call('sys.ping', {});
  const r1 = await first;
  t.equal(r1.ok ? 'ok' : r1.error.code, 'E2BIG', 'the oversized answer fails its own request');
  if (!r1.ok) t.match(r1.error.message, /frame too large.*narrow the request/);
  t.same(await second, { pong: true }, 'the next answer on the same connection arrives');
  t.same(await client.call('sys.ping', {}), { pong: true }, 'and the connection keeps working');
  t.equal(client.isClosed, false);
});
