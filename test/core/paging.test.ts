/**
 * Listing pages (issue 12, item 6): `limit` + cursor on the socket, REST and MCP; every entry once
 * across pages, also while entries are created; a clear 400 for a bad cursor; a default cap; and
 * the CLI's `ls` still lists everything by following the cursor.
 */
import t, { type Test } from 'tap';
import type { Caller } from '../../daemon/rpc/client.js';
import type { Listing } from '../../daemon/rpc/protocol.js';
import { cliEnv } from '../helpers/cli.js';
import { request } from '../helpers/http.js';
import { call, data, errorCode, httpClient, withCast } from '../helpers/mcp.js';

const name = (i: number): string => `e${String(i).padStart(5, '0')}.md`;

/** Creates `n` small files in `dir`, pipelined. */
async function fill(c: Caller, dir: string, n: number): Promise<string[]> {
  const names = Array.from({ length: n }, (_, i) => name(i));
  for (let s = 0; s < n; s += 500)
    await Promise.all(
      names.slice(s, s + 500).map((x) => c.call('fs.write', { path: `${dir}/${x}` }, { data: Buffer.from(x) })),
    );
  return names;
}

/** Follows the cursor to the end with `page` and checks each page's shape; returns every name seen in order. */
async function pages(
  t: Test,
  page: (cursor: string | undefined) => Promise<Listing>,
  limit: number,
  between?: (n: number) => Promise<void>,
): Promise<string[]> {
  const seen: string[] = [];
  let cursor: string | undefined;
  for (let n = 0; ; n++) {
    const p = await page(cursor);
    t.ok(p.entries.length <= limit, `page ${n} holds at most ${limit} entries`);
    seen.push(...p.entries.map((e) => e.name));
    if (p.truncated !== true) {
      t.equal(p.next_cursor, undefined, 'the last page has no cursor');
      return seen;
    }
    t.type(p.next_cursor, 'string', 'a cut page says where to go on');
    cursor = p.next_cursor;
    if (between) await between(n);
  }
}

function exactlyOnce(t: Test, seen: string[], expected: string[]): void {
  t.equal(new Set(seen).size, seen.length, 'no entry comes twice');
  const s = new Set(seen);
  t.same(
    expected.filter((x) => !s.has(x)),
    [],
    'every entry that existed throughout is listed',
  );
  t.same(seen, [...seen].sort(), 'in name order');
}

const cast = await withCast(t);
const { svc, daemon: root } = cast;
await root.call('fs.mkdir', { path: '/srv/small', parents: true });
await root.call('fs.write', { path: '/srv/small/a.md' }, { data: Buffer.from('a') });
const forty = await fill(root, '/srv/pg', 40);
const big = await fill(root, '/srv/big', 10050);

void t.test('socket: pages of `limit` cover the directory exactly once, also while entries are created', async (t) => {
  const plain = await root.call('fs.list', { path: '/srv/small' });
  t.same(Object.keys(plain).sort(), ['entries', 'path'], 'a small directory answers as it always did');
  t.same(
    await pages(
      t,
      (cursor) => root.call('fs.list', { path: '/srv/pg', limit: 7, ...(cursor === undefined ? {} : { cursor }) }),
      7,
    ),
    forty,
  );
  // New names land before and after the cursor while we page.
  const seen = await pages(
    t,
    (cursor) => root.call('fs.list', { path: '/srv/pg', limit: 7, ...(cursor === undefined ? {} : { cursor }) }),
    7,
    async (n) => {
      await root.call('fs.write', { path: `/srv/pg/a-new-${n}.md` }, { data: Buffer.from('x') });
      await root.call('fs.write', { path: `/srv/pg/z-new-${n}.md` }, { data: Buffer.from('x') });
    },
  );
  exactlyOnce(t, seen, forty);
});

void t.test('socket: the default cap cuts an unbounded listing at 10,000 entries', async (t) => {
  const first = await root.call('fs.list', { path: '/srv/big' });
  t.equal(first.entries.length, 10000);
  t.equal(first.truncated, true);
  const rest = await root.call('fs.list', { path: '/srv/big', cursor: first.next_cursor! });
  t.equal(rest.entries.length, 50);
  t.equal(rest.truncated, undefined);
  t.same(
    [...first.entries, ...rest.entries].map((e) => e.name),
    big,
  );
});

void t.test('socket: a bad cursor or limit is a clear EINVAL', async (t) => {
  const slash = `c1.${Buffer.from('a/b').toString('base64url')}`;
  for (const cursor of ['nonsense', 'c1.', 'c1.!!', slash, `c1.${Buffer.from('x').toString('base64url')}=`]) {
    await t.rejects(
      root.call('fs.list', { path: '/srv/pg', cursor }),
      { code: 'EINVAL', message: /invalid cursor/ },
      `cursor ${cursor}`,
    );
  }
  await t.rejects(root.call('fs.list', { path: '/srv/pg', limit: 0 }), { code: 'EINVAL' });
  await t.rejects(root.call('fs.list', { path: '/srv/pg', limit: 10001 }), { code: 'EINVAL' });
});

void t.test('REST: GET /fs/<dir>?limit=&cursor= pages; garbage is a 400', async (t) => {
  const plain = await request(svc, 'GET', '/fs//srv/small');
  t.same(Object.keys(plain.json as object).sort(), ['entries', 'path']);
  const seen = await pages(
    t,
    async (cursor) => {
      const r = await request(
        svc,
        'GET',
        `/fs//srv/big?limit=4000${cursor === undefined ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
      );
      t.equal(r.status, 200);
      return r.json as Listing;
    },
    4000,
  );
  t.same(seen, big);
  const bad = await request(svc, 'GET', '/fs//srv/pg?cursor=garbage');
  t.equal(bad.status, 400);
  t.equal(bad.json.code, 'EINVAL');
  t.match(bad.json.error, /invalid cursor/);
  t.equal((await request(svc, 'GET', '/fs//srv/pg?limit=0')).status, 400);
  t.equal((await request(svc, 'GET', '/fs//srv/pg?limit=lots')).status, 400);
});

void t.test('MCP list_directory: limit and cursor through the SDK client', async (t) => {
  const { client } = await httpClient(t, svc);
  const seen = await pages(
    t,
    async (cursor) =>
      data(
        await call(client, 'list_directory', {
          path: '/srv/pg',
          limit: 9,
          ...(cursor === undefined ? {} : { cursor }),
        }),
      ) as Listing,
    9,
  );
  exactlyOnce(t, seen, forty);
  t.equal(errorCode(await call(client, 'list_directory', { path: '/srv/pg', cursor: 'garbage' })), 'EINVAL');
  const whole = data(await call(client, 'list_directory', { path: '/srv/small' })) as Listing;
  t.equal(whole.truncated, undefined, 'a small directory is not cut');
});

void t.test('CLI ls lists a directory bigger than a page in full', async (t) => {
  const cli = await cliEnv(t);
  await fill(await cli.client(), '/srv/big', 10050);
  const r = await cli.run(['ls', '--json', '/srv/big']);
  t.equal(r.code, 0, r.stderr);
  const listed = JSON.parse(r.stdout) as Listing;
  t.same(
    listed.entries.map((e) => e.name),
    big,
  );
});
