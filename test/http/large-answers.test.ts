/**
 * Issue 12, item 3: no answer size crashes anything. The reproduction from the security review, on
 * a real `mdvfs serve`: bob writes two 9 MB one-line files and greps them over REST and MCP (the
 * answer used to be an 18 MB frame that threw in the sidecar's socket reader, and the sidecar
 * exited, failing every other request in flight) while alice's requests run. The sidecar stays up,
 * every one of alice's requests succeeds, and bob's answer is cut clearly (`truncated: true`).
 */
import t from 'tap';
import { call, data, httpClient, withCast } from '../helpers/mcp.js';
import { childPids, cmdline } from '../helpers/http.js';

const NINE_MB = 9 * 1024 * 1024;

t.test('grep over two 9 MB one-line files: cut answer, sidecar up, other users unharmed', async (t) => {
  const { svc, daemon } = await withCast(t);
  const sidecar = () => childPids(svc.proc.pid!).filter((p) => / http$/.test(cmdline(p).trim()));
  const before = sidecar();
  t.equal(before.length, 1, 'one sidecar process');

  const bob = daemon.as({ authorization: 'User bob' });
  await bob.call('fs.write', { path: 'big1.md' }, { data: Buffer.alloc(NINE_MB, 'x') });
  await bob.call('fs.write', { path: 'big2.md' }, { data: Buffer.alloc(NINE_MB, 'y') });
  const alice = daemon.as({ authorization: 'User alice' });
  await alice.call('fs.write', { path: 'note.md' }, { data: Buffer.from('hello\n') });

  // alice reads her note over REST, 20 at a time, for as long as bob's attack runs
  let stop = false;
  let aliceOk = 0;
  const aliceFailures: string[] = [];
  const aliceLoop = async () => {
    while (!stop) {
      const rs = await Promise.all(
        Array.from({ length: 20 }, () =>
          fetch(`${svc.base}/fs/note.md`, { headers: { authorization: 'User alice' } }).then(
            async (r) => ({ status: r.status, body: await r.text() }),
            (e: Error) => ({ status: 0, body: e.message }),
          ),
        ),
      );
      for (const r of rs) {
        if (r.status === 200 && r.body === 'hello\n') aliceOk++;
        else aliceFailures.push(`${r.status} ${r.body.slice(0, 200)}`);
      }
    }
  };
  const aliceDone = aliceLoop();
  t.teardown(() => {
    stop = true; // also when an assertion below throws
  });

  const { client } = await httpClient(t, svc, { authorization: 'User bob' });
  for (let round = 0; round < 3; round++) {
    const res = await fetch(`${svc.base}/search/grep?pattern=.&recursive=true`, {
      headers: { authorization: 'User bob' },
    });
    t.equal(res.status, 200, `REST grep round ${round} answers`);
    const body = (await res.json()) as {
      results: { file: string; line_num: number; line: string }[];
      count: number;
      truncated: boolean;
    };
    t.equal(body.count, 2, 'both matching lines are reported');
    t.equal(body.truncated, true, 'the answer says it was cut');
    for (const m of body.results) {
      t.ok(m.line.length < 8192, `the line of ${m.file} is cut (${m.line.length} characters)`);
      t.match(m.line, /\[… line cut: 9437184 characters\]$/, 'with a marker giving its real length');
    }

    const r = await call(client, 'search_files', { pattern: '.' });
    t.notOk(r.isError, `MCP search_files round ${round} answers`);
    const d = data(r) as { count: number; truncated: boolean };
    t.equal(d.count, 2);
    t.equal(d.truncated, true);
  }

  stop = true;
  await aliceDone;
  t.same(aliceFailures, [], "none of alice's requests failed");
  t.ok(aliceOk >= 20, `alice's requests were served meanwhile (${aliceOk})`);
  t.same(sidecar(), before, 'the same sidecar process is still serving');
  t.notMatch(svc.stderr(), /connection to the daemon closed/, 'the sidecar never lost its daemon connection');
});

t.test('find and tree over a directory too large for one answer are cut, not fatal', async (t) => {
  const { svc, daemon } = await withCast(t);
  const root = daemon.as({});
  // 9,000 names of 250 characters: about 2.4 M characters of paths, and as much tree text
  const dir = '/srv/wide';
  await root.call('fs.mkdir', { path: dir, parents: true });
  for (let i = 0; i < 9000; i += 500) {
    await Promise.all(
      Array.from({ length: 500 }, (_, k) =>
        root.call(
          'fs.write',
          { path: `${dir}/${String(i + k).padStart(5, '0')}${'f'.repeat(245)}` },
          { data: Buffer.from('x') },
        ),
      ),
    );
  }
  const find = await fetch(`${svc.base}/search/find?path=/srv/wide`);
  t.equal(find.status, 200);
  const f = (await find.json()) as { results: string[]; count: number; truncated?: boolean };
  t.equal(f.truncated, true, 'find says it was cut');
  t.equal(f.count, f.results.length);
  t.ok(f.count > 1000 && f.count < 9000, `a useful part is returned (${f.count})`);
  const tree = await fetch(`${svc.base}/tree/srv/wide?format=json`);
  t.equal(tree.status, 200);
  const tr = (await tree.json()) as { text: string; truncated?: boolean };
  t.equal(tr.truncated, true, 'tree says it was cut');
  t.match(tr.text, /tree cut at/);
  t.equal((await fetch(`${svc.base}/health`)).status, 200, 'the service is up');
});
