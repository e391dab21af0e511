/**
 * Which MCP subscriptions a change event touches (`mcp.session.match`, asked by the HTTP workers on
 * every change): the same answer as `affects` path by path, and never the product of a large event
 * and many subscriptions run in one go. In-process: the daemon's session table itself.
 */
import t from 'tap';
import { McpSessions } from '../../daemon/mcp-sessions.js';
import { affects } from '../../daemon/rpc/affects.js';
import type { Cred, Principal } from '../../daemon/core/perms.js';

const alice: Principal = {
  name: 'alice',
  uid: 1000,
  gid: 1000,
  groups: new Set([1000]),
  home: '/home/alice',
  isAgent: false,
};
const cred: Cred = { user: alice };
const limits = { idleMs: 3_600_000, maxSessions: 100_000, maxSessionsPerClient: 100_000, maxSessionsPerUser: 100_000 };

/** A deterministic pseudo-random sequence, so a failure can be replayed. */
function rng(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

t.test('the same subscriptions as affects(), path by path', async (t) => {
  const next = rng(7);
  const names = ['a', 'b', 'a-b', 'a.b', 'ab', 'b c', 'é'];
  const randomPath = (): string => {
    const depth = 1 + Math.floor(next() * 4);
    let p = '';
    for (let i = 0; i < depth; i++) p += `/${names[Math.floor(next() * names.length)]}`;
    return p;
  };
  const sessions = new McpSessions();
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    const id = sessions.open({ authorization: 'User alice' }, cred, 'test', limits);
    ids.push(id);
    const s = sessions.get({ authorization: 'User alice' }, id);
    for (let k = 0; k < 30; k++) {
      const watched = next() < 0.05 ? '/' : randomPath();
      sessions.subscribe(s, { uri: `mdvfs://${watched}#${k}`, path: watched, global: watched });
    }
  }
  let checked = 0;
  for (let round = 0; round < 200; round++) {
    const paths = Array.from({ length: 1 + Math.floor(next() * 6) }, () => (next() < 0.02 ? '/' : randomPath()));
    const gone = `gone-${round}`;
    const { matches, gone: goneIds } = await sessions.match([...ids, gone], paths);
    t.same(goneIds, [gone]);
    const expected: string[] = [];
    for (const id of ids)
      for (const sub of sessions.subscriptions(sessions.get({ authorization: 'User alice' }, id)))
        if (paths.some((p) => affects(p, sub.global))) expected.push(`${id} ${sub.uri}`);
    const got = matches.map((m) => `${m.id} ${m.subscription.uri}`);
    if (JSON.stringify(got) !== JSON.stringify(expected)) {
      t.same(got, expected, `round ${round}: ${JSON.stringify(paths)}`);
      return;
    }
    checked += expected.length;
  }
  t.ok(checked > 1000, `${checked} matches compared with affects()`);
  t.same((await sessions.match(ids, [])).matches, [], 'an event naming no path touches nothing');
});

t.test('a large event over many subscriptions yields to the event loop', async (t) => {
  const sessions = new McpSessions();
  const ids: string[] = [];
  for (let i = 0; i < 100; i++) {
    const id = sessions.open({ authorization: 'User alice' }, cred, 'test', limits);
    ids.push(id);
    const s = sessions.get({ authorization: 'User alice' }, id);
    for (let k = 0; k < 1000; k++)
      sessions.subscribe(s, { uri: `u${k}`, path: `/w/${i}/${k}`, global: `/w/${i}/${k}` });
  }
  // 100,000 changed paths, none of them watched, and one that is.
  const paths = Array.from({ length: 100_000 }, (_, i) => `/other/${i % 977}/f${i}.md`);
  paths.push('/w/42/7/deep/x.md');
  const order: string[] = [];
  const heavy = sessions.match(ids, paths).then((r) => {
    order.push('match');
    return r;
  });
  const small = new Promise<void>((resolve) => setImmediate(() => (order.push('other work'), resolve())));
  const [r] = await Promise.all([heavy, small]);
  t.same(order, ['other work', 'match'], 'other work ran before the match finished');
  t.same(
    r.matches.map((m) => [ids.indexOf(m.id), m.subscription.uri]),
    [[42, 'u7']],
    'and the one watched path matched',
  );
});
