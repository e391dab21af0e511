/**
 * The socket protocol under abuse: malformed frames get an error and never take the daemon down
 * for other clients; pipelining; one daemon per data dir; a corrupt store refuses to start; fsck.
 */
import t, { type Test } from 'tap';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, statSync, writeFileSync, writeSync, existsSync } from 'node:fs';
import path from 'node:path';
import { encodeFrame, FrameDecoder } from '../../daemon/rpc/framing.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import {
  CLI,
  DAEMON_ENTRY,
  ROOT_DIR,
  sha256,
  spawnDaemon,
  tempDir,
  cleanup,
  text,
  type TestDaemon,
} from '../helpers/daemon.js';

interface Reply {
  id: number | null;
  result?: Record<string, unknown>;
  error?: { code: string; message: string };
}

/** A raw connection: frames out, decoded reply headers in. */
class Raw {
  readonly replies: Reply[] = [];
  closed = false;
  private readonly decoder = new FrameDecoder();
  private waiters: (() => void)[] = [];

  private constructor(readonly sock: net.Socket) {
    sock.on('data', (c: Buffer) => {
      for (const f of this.decoder.push(c)) this.replies.push(f.header as Reply);
      this.wake();
    });
    sock.on('close', () => {
      this.closed = true;
      this.wake();
    });
    sock.on('error', () => undefined);
  }

  static open(sockPath: string): Promise<Raw> {
    return new Promise((resolve, reject) => {
      const s = net.createConnection(sockPath);
      s.once('connect', () => resolve(new Raw(s)));
      s.once('error', reject);
    });
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  send(header: unknown, data?: Buffer): void {
    for (const b of encodeFrame(header, data)) this.sock.write(b);
  }

  /** A frame whose header bytes are exactly `json` (possibly not JSON at all). */
  sendRawHeader(json: Buffer): void {
    const prefix = Buffer.alloc(8);
    prefix.writeUInt32BE(json.length, 0);
    prefix.writeUInt32BE(0, 4);
    this.sock.write(Buffer.concat([prefix, json]));
  }

  async waitFor(n: number, ms = 10000): Promise<Reply[]> {
    const deadline = Date.now() + ms;
    while (this.replies.length < n && !this.closed) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${n} replies (have ${this.replies.length})`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 100);
      });
    }
    return this.replies;
  }

  async waitClosed(ms = 10000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!this.closed) {
      if (Date.now() > deadline) throw new Error('the daemon did not close the connection');
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  close(): void {
    this.sock.destroy();
  }
}

function run(
  args: string[],
  env: NodeJS.ProcessEnv,
  timeoutMs = 20000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, args, { env, cwd: ROOT_DIR, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    p.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The daemon and another, well-behaved client both still answer. */
async function stillServing(t: Test, d: TestDaemon, what: string): Promise<void> {
  t.equal((await d.client.call('sys.ping', {})).pong, true, `${what}: the existing client is still served`);
  const other = await Raw.open(socketPathFor(d.dataDir));
  other.send({ id: 7, method: 'fs.resolve', params: { path: 'x' }, creds: {} });
  const [r] = await other.waitFor(1);
  t.same(r, { id: 7, result: { path: '/x' } }, `${what}: a new connection is served`);
  other.close();
}

t.test('malformed frames', async (t) => {
  const d = await spawnDaemon(t);
  const sockPath = socketPathFor(d.dataDir);

  t.test('a header that is not JSON: EPROTO with a null id, the stream stays in sync', async (t) => {
    const c = await Raw.open(sockPath);
    c.sendRawHeader(Buffer.from('{not json'));
    c.send({ id: 1, method: 'sys.ping', params: {} });
    const r = await c.waitFor(2);
    t.equal(r[0]!.id, null);
    t.equal(r[0]!.error?.code, 'EPROTO');
    t.equal(r[1]!.id, 1);
    t.equal(r[1]!.result?.pong, true);
    c.close();
    await stillServing(t, d, 'after invalid JSON');
  });

  t.test('headers that are JSON but not requests', async (t) => {
    const c = await Raw.open(sockPath);
    for (const h of [
      '42',
      'null',
      '"str"',
      '[]',
      '{}',
      '{"method":"sys.ping"}',
      '{"id":"1","method":"sys.ping"}',
      '{"id":1.5,"method":"sys.ping"}',
      '{"id":-0.5}',
      '{"id":1e300,"method":"sys.ping"}',
    ]) {
      c.sendRawHeader(Buffer.from(h));
    }
    c.sendRawHeader(Buffer.from([0xff, 0xfe, 0x00, 0x7b])); // not UTF-8 either
    const r = await c.waitFor(11);
    for (const x of r) {
      t.equal(x.id, null);
      t.equal(x.error?.code, 'EPROTO');
    }
    t.notOk(c.closed, 'the connection stays open');
    c.close();
    await stillServing(t, d, 'after non-request headers');
  });

  t.test('unknown methods: ENOSYS; invalid params and credentials: EINVAL; with the request id', async (t) => {
    const c = await Raw.open(sockPath);
    c.send({ id: 1, method: 'fs.nope', params: {} });
    c.send({ id: 2, params: {} });
    c.send({ id: 3, method: '__proto__', params: {} });
    c.send({ id: 4, method: 'constructor' });
    c.send({ id: 5, method: 'fs.write', params: { path: 5 } }, Buffer.from('x'));
    c.send({ id: 6, method: 'fs.stat', params: {} });
    c.send({ id: 7, method: 'fs.stat', params: 'x' });
    c.send({ id: 8, method: 'fs.chmod', params: { path: '/tmp', mode: { x: 1 } } });
    c.send({ id: 9, method: 'fs.stat', params: { path: '/' }, creds: { authorization: 5 } });
    c.send({ id: 10, method: 'fs.stat', params: { path: '/' }, creds: 'root' });
    c.send({ id: 11, method: 'fs.stat', params: { path: '/' }, creds: { origin: 'elsewhere' } });
    c.send({ id: 12, method: 'fs.truncate', params: { path: '/tmp/x', size: -1 } });
    c.send({ id: 13, method: 'fs.stat', params: { path: 'x'.repeat(70000) } });
    const r = await c.waitFor(13);
    const byId = new Map(r.map((x) => [x.id, x]));
    for (const id of [1, 2, 3, 4]) t.equal(byId.get(id)?.error?.code, 'ENOSYS', `id ${id}`);
    for (const id of [5, 6, 7, 8, 9, 10, 11, 12, 13]) t.equal(byId.get(id)?.error?.code, 'EINVAL', `id ${id}`);
    for (const x of r) t.notOk(x.error?.message.includes('    at '), 'no stack traces');
    await t.rejects(
      d.client.call('fs.stat', { path: '/tmp/x' }),
      { code: 'ENOENT' },
      'the invalid write did not happen',
    );
    c.close();
    await stillServing(t, d, 'after invalid requests');
    t.notOk(/"level":"error"/.test(d.stderr()), 'no internal error was logged');
  });

  t.test('an absurd length prefix: an error, then this connection (only) is closed', async (t) => {
    for (const [hlen, dlen] of [
      [0xffffffff, 0],
      [0x7fffffff, 0],
      [10, 0xffffffff],
    ]) {
      const c = await Raw.open(sockPath);
      const prefix = Buffer.alloc(8);
      prefix.writeUInt32BE(hlen!, 0);
      prefix.writeUInt32BE(dlen!, 4);
      c.sock.write(prefix);
      await c.waitClosed();
      t.equal(c.replies[0]?.error?.code, 'EPROTO', `${hlen}/${dlen}: EPROTO before closing`);
      t.equal(c.replies[0]?.id, null);
      await stillServing(t, d, `after length ${hlen}/${dlen}`);
    }
  });

  t.test('a truncated frame and a vanished client do no harm', async (t) => {
    const c = await Raw.open(sockPath);
    const [head] = encodeFrame(
      { id: 1, method: 'fs.write', params: { path: '/tmp/half.md' } },
      Buffer.alloc(1000, 0x61),
    );
    c.sock.write(head!); // length prefix and header
    c.sock.write(Buffer.alloc(10, 0x61)); // 990 bytes of data never come
    c.close();
    // a client that sends many requests and disconnects before the replies
    const v = await Raw.open(sockPath);
    for (let i = 0; i < 100; i++)
      v.send({ id: i, method: 'fs.write', params: { path: `/tmp/vanish-${i}.md` } }, Buffer.from(`v${i}`));
    v.close();
    await stillServing(t, d, 'after vanished clients');
    await t.rejects(
      d.client.call('fs.stat', { path: '/tmp/half.md' }),
      { code: 'ENOENT' },
      'the truncated write never happened',
    );
    t.equal((await d.client.call('sys.fsck', {})).ok, true);
  });

  t.test('frames split into single bytes, and many frames in one chunk', async (t) => {
    const c = await Raw.open(sockPath);
    const bytes = Buffer.concat(
      encodeFrame(
        { id: 1, method: 'fs.write', params: { path: '/tmp/bytewise.md' }, creds: {} },
        Buffer.from('one byte at a time'),
      ),
    );
    for (const b of bytes) {
      c.sock.write(Buffer.from([b]));
      await new Promise((r) => setImmediate(r));
    }
    const [r1] = await c.waitFor(1);
    t.equal(r1!.result?.path, '/tmp/bytewise.md');
    t.equal((await d.client.request('fs.read', { path: '/tmp/bytewise.md' })).data.toString(), 'one byte at a time');
    const many: Buffer[] = [];
    for (let i = 2; i < 52; i++) many.push(...encodeFrame({ id: i, method: 'fs.resolve', params: { path: `p${i}` } }));
    c.sock.write(Buffer.concat(many));
    const all = await c.waitFor(51);
    t.same(new Set(all.slice(1).map((x) => x.id)), new Set(Array.from({ length: 50 }, (_, i) => i + 2)));
    for (const x of all.slice(1)) t.equal(x.result?.path, `/p${String(x.id)}`);
    c.close();
  });
});

t.test('pipelining', async (t) => {
  const d = await spawnDaemon(t);
  const alice = d.client.as({ authorization: 'User alice' });
  await d.client.call('admin.userAdd', { name: 'alice' });

  t.test('500 writes fired without awaiting are all answered with the right ids', async (t) => {
    const bodies = Array.from({ length: 500 }, (_, i) => randomBytes(16 + (i % 300)));
    const replies = await Promise.all(
      bodies.map((b, i) => alice.call('fs.write', { path: `pipe/${i % 50}/f${i}.md` }, { data: b })),
    );
    for (let i = 0; i < 500; i++) {
      t.equal(replies[i]!.path, `/home/alice/pipe/${i % 50}/f${i}.md`);
      t.equal(replies[i]!.size, bodies[i]!.length);
    }
    const reads = await Promise.all(
      bodies.map((_, i) => alice.request('fs.read', { path: `pipe/${i % 50}/f${i}.md` })),
    );
    let same = 0;
    for (let i = 0; i < 500; i++) if (reads[i]!.data.equals(bodies[i]!)) same++;
    t.equal(same, 500, 'every byte is where it was sent');
  });

  t.test('raw: replies carry the request ids, in any order', async (t) => {
    const c = await Raw.open(socketPathFor(d.dataDir));
    const ids = Array.from({ length: 500 }, (_, i) => i * 7919 + 3);
    for (const id of ids)
      c.send({ id, method: 'fs.write', params: { path: `/tmp/raw/${id}.md` }, creds: {} }, Buffer.from(String(id)));
    const r = await c.waitFor(500);
    t.equal(r.length, 500);
    t.same(new Set(r.map((x) => x.id)), new Set(ids));
    let matched = 0;
    for (const x of r) if (x.result?.path === `/tmp/raw/${String(x.id)}.md`) matched++;
    t.equal(matched, 500);
    c.close();
    const listed = await d.client.call('fs.list', { path: '/tmp/raw' });
    t.equal(listed.entries.length, 500);
  });

  t.test('a mix of failing and succeeding requests in flight', async (t) => {
    const ops = Array.from({ length: 200 }, (_, i) =>
      i % 2 === 0
        ? alice.call('fs.write', { path: `mix/${i}.md` }, text(String(i))).then((r) => r.path)
        : alice.call('fs.read', { path: `mix/missing-${i}.md` }).then(
            () => 'unexpected',
            (e: { code: string }) => e.code,
          ),
    );
    const out = await Promise.all(ops);
    for (let i = 0; i < 200; i++) t.equal(out[i], i % 2 === 0 ? `/home/alice/mix/${i}.md` : 'ENOENT');
  });
});

t.test('one daemon per data dir', async (t) => {
  const d = await spawnDaemon(t);
  await d.client.call('fs.write', { path: '/tmp/first.md' }, text('first'));
  const r = await run([CLI, 'daemon'], d.env);
  t.equal(r.code, 75, 'the second daemon exits at once with EX_TEMPFAIL');
  t.match(r.stderr, /lock|another mdvfs daemon/i, 'and says the data dir is locked');
  t.match(r.stderr, d.dataDir);
  t.match(
    r.stderr,
    `another mdvfs daemon (pid ${d.proc.pid}) already runs for ${d.dataDir}`,
    'naming the daemon that holds it',
  );
  t.match(r.stderr, "stop it first ('mdvfs stop')", 'and how to stop it');
  t.equal(r.stderr.trim().split('\n').length, 1, 'in one line');
  t.equal((await d.client.call('sys.ping', {})).pid, d.proc.pid, 'the first daemon still answers on its socket');
  await stillServing(t, d, 'after a second daemon tried to start');
  t.equal((await d.client.request('fs.read', { path: '/tmp/first.md' })).data.toString(), 'first');
});

t.test('fsck reports ok on a healthy store', async (t) => {
  const d = await spawnDaemon(t);
  const root = d.client.as({});
  for (let i = 0; i < 20; i++) await root.call('fs.write', { path: `/tmp/f${i % 7}.md` }, text(`v${i}`));
  await root.call('vcs.commit', { message: 'one' });
  await root.call('fs.copy', { src: '/tmp', dst: '/copy', recursive: true });
  await root.call('fs.delete', { path: '/tmp/f1.md' });
  const r = await run([CLI, 'fsck'], d.env);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /^fsck: ok \(\d+ objects, \d+ inodes\)/);
  const api = await root.call('sys.fsck', {});
  t.equal(api.ok, true);
  t.same(api.problems, []);
  t.ok(api.objects > 0 && api.inodes > 0);
});

t.test(
  'a corrupt store refuses to start, loudly, and is left as it was',
  {
    // It damages the SQLite file itself; PostgreSQL (MDVFS_TEST_STORE=postgres) has no store.db to damage.
    skip:
      process.env.MDVFS_TEST_STORE === 'postgres'
        ? 'SQLite-specific: corrupts store.db, which a PostgreSQL store does not have'
        : false,
  },
  async (t) => {
    t.test('garbage in the middle of store.db', async (t) => {
      const d = await spawnDaemon(t);
      const root = d.client.as({});
      const writes: Promise<unknown>[] = [];
      for (let i = 0; i < 300; i++)
        writes.push(root.call('fs.write', { path: `/data/${i}.md` }, { data: randomBytes(6000) }));
      await Promise.all(writes);
      await d.kill('SIGTERM'); // a clean stop: everything checkpointed into store.db
      const file = path.join(d.dataDir, 'store.db');
      const size = statSync(file).size;
      t.ok(size > 1_000_000, `store.db holds the data (${size} bytes)`);
      const fd = openSync(file, 'r+');
      writeSync(fd, randomBytes(Math.floor(size / 5)), 0, Math.floor(size / 5), Math.floor(size * 0.4));
      closeSync(fd);
      const before = sha256(readFileSync(file));
      const r = await run([CLI, 'daemon'], d.env);
      t.not(r.code, 0, 'the daemon refuses to start');
      t.match(r.stderr, /corrupt/i, 'and says the store is corrupt');
      t.match(r.stderr, /Refusing to start/);
      t.equal(sha256(readFileSync(file)), before, 'the store was not reset or rewritten');
      t.notOk(existsSync(socketPathFor(d.dataDir)), 'no socket was left to connect to');
    });

    t.test('a fresh store.db full of garbage', async (t) => {
      const dir = tempDir();
      t.teardown(() => cleanup(dir));
      const file = path.join(dir, 'store.db');
      writeFileSync(file, Buffer.concat([Buffer.from('this is not a database\n'), randomBytes(64 * 1024)]));
      const before = sha256(readFileSync(file));
      const r = await run([CLI, 'daemon'], { ...process.env, SERVICE_DATA_DIR: dir });
      t.not(r.code, 0);
      t.match(r.stderr, /corrupt or unreadable/);
      t.match(r.stderr, file);
      t.equal(sha256(readFileSync(file)), before, 'left untouched');
      // the daemon entry used by connectDaemon says the same
      const r2 = await run([DAEMON_ENTRY], { ...process.env, SERVICE_DATA_DIR: dir });
      t.not(r2.code, 0);
      t.match(r2.stderr, /corrupt or unreadable/);
    });
  },
);
