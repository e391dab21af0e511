/**
 * Issue 12, item 3: a file larger than one read answer (READ_CHUNK, 8 MiB) travels in bounded
 * parts and round-trips byte-exact over REST and the CLI, and a read spanning parts never mixes two
 * versions of a file that is being rewritten meanwhile.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { READ_CHUNK } from '../../daemon/rpc/protocol.js';
import { rootDaemon, startServe } from '../helpers/mcp.js';
import { runCli } from '../helpers/cli.js';
import { sha256 } from '../helpers/daemon.js';

const SIZE = 2 * READ_CHUNK + 12345; // three parts

t.test('a file of three read parts round-trips byte-exact over REST and the CLI', async (t) => {
  const svc = await startServe(t, { env: { SERVICE_MAX_FILE_SIZE: String(64 * 1024 * 1024) } });
  const body = randomBytes(SIZE);
  const put = await fetch(`${svc.base}/fs//srv/big.bin`, { method: 'PUT', body });
  t.equal(put.status, 200, 'REST PUT accepted');
  const got = await fetch(`${svc.base}/fs//srv/big.bin`);
  t.equal(got.status, 200);
  const back = Buffer.from(await got.arrayBuffer());
  t.equal(back.length, SIZE, 'REST GET: every byte');
  t.equal(sha256(back), sha256(body), 'REST GET: byte-exact');

  const env = { ...process.env, SERVICE_DATA_DIR: svc.dataDir };
  const cat = await runCli(env, ['cat', '/srv/big.bin']);
  t.equal(cat.code, 0, cat.stderr);
  t.equal(sha256(cat.out), sha256(body), 'CLI cat: byte-exact');

  const other = randomBytes(SIZE);
  const w = await runCli(env, ['write', '/srv/big2.bin'], { input: other });
  t.equal(w.code, 0, w.stderr);
  const got2 = Buffer.from(await (await fetch(`${svc.base}/fs//srv/big2.bin`)).arrayBuffer());
  t.equal(sha256(got2), sha256(other), 'CLI write, REST read: byte-exact');
});

t.test('a read in parts never mixes two versions', async (t) => {
  const svc = await startServe(t, { env: { SERVICE_MAX_FILE_SIZE: String(64 * 1024 * 1024) } });
  const daemon = await rootDaemon(t, svc.dataDir);
  const root = daemon.as({});
  const a = Buffer.alloc(SIZE, 'a');
  const b = Buffer.alloc(SIZE, 'b');
  await root.call('fs.write', { path: '/srv/flip.bin' }, { data: a });
  let stop = false;
  const writer = (async () => {
    for (let i = 0; !stop; i++) {
      await root.call('fs.write', { path: '/srv/flip.bin' }, { data: i % 2 ? a : b });
      await new Promise((r) => setTimeout(r, 30));
    }
  })();
  t.teardown(() => {
    stop = true;
  });
  const seen = new Set<string>();
  let whole = 0;
  for (let i = 0; i < 8; i++) {
    const r = await fetch(`${svc.base}/fs//srv/flip.bin`);
    const buf = Buffer.from(await r.arrayBuffer());
    if (r.status === 412) {
      // rewritten under every retry: a clear error, never a mix
      t.match(
        JSON.parse(buf.toString()),
        { code: 'EPRECOND', error: /changed while it was being read in parts/ },
        `read ${i}: a clear error`,
      );
      continue;
    }
    t.equal(r.status, 200);
    const first = buf[0]!;
    t.ok(
      buf.length === SIZE && buf.every((x) => x === first),
      `read ${i}: one version, whole (${String.fromCharCode(first)})`,
    );
    seen.add(String.fromCharCode(first));
    whole++;
  }
  t.ok(whole > 0, `${whole} of 8 reads were whole`);
  stop = true;
  await writer;
  t.ok(seen.size >= 1, `versions seen: ${[...seen].join(', ')}`);
});
