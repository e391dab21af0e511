/**
 * Issue 30, item 5: no user can starve the others. Per-principal caps over real HTTP against a real
 * `mdvfs serve`: `GET /events` streams counted per user across its token and workspace secrets
 * (the total is only a last resort), workspaces and workspace secrets bounded per user with a clear
 * error, and identity-change events (who changed which user) only for those who may list users.
 */
import t from 'tap';
import { client, withCast } from '../helpers/http.js';
import { openEvents, type EventStream } from '../helpers/sse.js';
import { principalCapsFromEnv, mcpSessionsFromEnv } from '../../daemon/rpc/settings.js';

const closeAll = (streams: EventStream[]) => () => {
  for (const s of streams) s.close();
};

t.test("an agent at its per-user stream cap cannot take everyone's /events streams", async (t) => {
  // Scaled down: 8 streams in all, 3 per user.
  const cast = await withCast(t, {
    env: { SERVICE_EVENTS_MAX_STREAMS: '8', SERVICE_EVENTS_MAX_STREAMS_PER_USER: '3' },
  });
  const { svc, botToken } = cast;
  const bot = client(svc, { auth: `Bearer ${botToken}` });
  // The agent's own workspaces and secrets: more credentials, one principal.
  const creds: { auth: string; headers: Record<string, string> }[] = [{ auth: `Bearer ${botToken}`, headers: {} }];
  for (const n of [0, 1]) {
    t.equal((await bot.put(`/fs/w${n}/keep.md`, 'x')).status, 200);
    const ws = await bot.post('/workspaces', { name: `w${n}`, root_path: `/home/bot/w${n}` });
    t.equal(ws.status, 200, ws.text);
    const sec = await bot.post(`/workspaces/${ws.json.id}/tokens`, { name: 's', agent_token: botToken });
    t.equal(sec.status, 200, sec.text);
    creds.push({ auth: `Bearer ${sec.json.secret}`, headers: { 'x-service-workspace': ws.json.id } });
  }
  const held: EventStream[] = [];
  t.teardown(closeAll(held));
  const statuses: number[] = [];
  let refusal: EventStream | undefined;
  // As many streams as the whole server holds, spread over the agent's token and workspace secrets.
  for (let i = 0; i < 8; i++) {
    const c = creds[i % creds.length]!;
    const s = await openEvents(svc, { auth: c.auth, headers: c.headers });
    statuses.push(s.status);
    if (s.status === 200) held.push(s);
    else refusal ??= s;
  }
  t.same(
    statuses.filter((s) => s === 200).length,
    3,
    'the agent holds 3 streams, whichever credentials it opens them with',
  );
  t.equal(refusal?.status, 429, 'the rest are refused: 429');
  const err = JSON.parse(refusal?.body ?? '{}') as { code?: string; error?: string };
  t.equal(err.code, 'ELIMIT');
  t.match(err.error, /bot already holds 3 event streams.*SERVICE_EVENTS_MAX_STREAMS_PER_USER=3/);

  const alice = await openEvents(svc, { auth: 'User alice' });
  held.push(alice);
  t.equal(alice.status, 200, `alice still gets her live view: ${alice.body}`);
  const web = await openEvents(svc, {});
  held.push(web);
  t.equal(web.status, 200, `and so does root (the local web UI): ${web.body}`);

  // A closed stream gives its place back.
  held.shift()!.close();
  await new Promise((r) => setTimeout(r, 200));
  let again: EventStream | undefined;
  for (let i = 0; i < 50 && again?.status !== 200; i++) {
    again = await openEvents(svc, { auth: `Bearer ${botToken}` });
    if (again.status !== 200) await new Promise((r) => setTimeout(r, 100));
  }
  held.push(again!);
  t.equal(again?.status, 200, 'the agent may open one again once it closed one');
});

t.test('identity changes reach only those who may list users', async (t) => {
  const { svc, root, alice, botToken } = await withCast(t);
  t.equal((await alice.put('/fs//tmp/proj/in.md', 'x')).status, 200);
  const ws = await root.post('/workspaces', { name: 'proj', root_path: '/tmp/proj' });
  t.equal(ws.status, 200, ws.text);
  const sec = await root.post(`/workspaces/${ws.json.id}/tokens`, { name: 'w', agent_token: botToken });
  t.equal(sec.status, 200, sec.text);
  const streams: EventStream[] = [];
  t.teardown(closeAll(streams));
  const open = async (auth: string | undefined, headers: Record<string, string> = {}): Promise<EventStream> => {
    const s = await openEvents(svc, { ...(auth === undefined ? {} : { auth }), headers });
    t.equal(s.status, 200, s.body);
    streams.push(s);
    return s;
  };
  const confined = await open(`Bearer ${sec.json.secret}`, { 'x-service-workspace': ws.json.id });
  const bob = await open('User bob');
  const rootView = await open(undefined);
  const adminView = await open('User admin');

  // An identity change by root, then a change every subscriber may see: once that arrives, the
  // identity change (made before it) would have arrived too.
  t.equal((await root.post('/admin/users', { name: 'carol' })).status, 200);
  t.equal((await alice.put('/fs//tmp/proj/after.md', 'y')).status, 200);
  await confined.until((e) => e.paths.includes('/after.md'));
  await bob.until((e) => e.paths.includes('/tmp/proj/after.md'));
  await rootView.until((e) => e.paths.includes('/tmp/proj/after.md'));
  await adminView.until((e) => e.paths.includes('/tmp/proj/after.md'));

  t.same(
    confined.changes().filter((e) => e.paths.length === 0),
    [],
    'the workspace secret hears nothing of identity changes',
  );
  t.same(
    bob.changes().filter((e) => e.paths.length === 0),
    [],
    'nor does bob',
  );
  const seen = rootView.changes().find((e) => e.paths.length === 0);
  t.equal(seen?.by, 'root', 'root, who may list users, sees who changed them');
  t.ok(
    adminView.changes().some((e) => e.paths.length === 0),
    'so does a wheel member',
  );
});

t.test('workspaces and workspace secrets are bounded per user, with a clear error', async (t) => {
  const { root, alice, botToken } = await withCast(t, {
    env: { SERVICE_MAX_WORKSPACES_PER_USER: '2', SERVICE_MAX_WORKSPACE_SECRETS_PER_USER: '3' },
  });
  const ids: string[] = [];
  for (const n of [0, 1]) {
    t.equal((await alice.put(`/fs/w${n}/keep.md`, 'x')).status, 200);
    const ws = await alice.post('/workspaces', { name: `w${n}`, root_path: `/home/alice/w${n}` });
    t.equal(ws.status, 200, ws.text);
    ids.push(ws.json.id as string);
  }
  t.equal((await alice.put('/fs/w2/keep.md', 'x')).status, 200);
  const third = await alice.post('/workspaces', { name: 'w2', root_path: '/home/alice/w2' });
  t.equal(third.status, 429, 'a third workspace is refused');
  t.equal(third.json.code, 'ELIMIT');
  t.match(third.json.error, /alice already has 2 workspaces.*SERVICE_MAX_WORKSPACES_PER_USER=2/);
  const mine = await alice.get('/workspaces');
  t.equal(mine.json.workspaces.length, 2, 'nothing was created');
  t.equal(
    (await root.post('/workspaces', { name: 'r', root_path: '/srv/r' })).status,
    200,
    "alice's bound is hers alone",
  );

  // Secrets count across all of alice's workspaces.
  const issue = (id: string) => alice.post(`/workspaces/${id}/tokens`, { name: 's', agent_token: botToken });
  for (const id of [ids[0]!, ids[1]!, ids[0]!]) t.equal((await issue(id)).status, 200);
  const fourth = await issue(ids[1]!);
  t.equal(fourth.status, 429, 'a fourth secret is refused');
  t.equal(fourth.json.code, 'ELIMIT');
  t.match(fourth.json.error, /alice already has 3 workspace secrets.*SERVICE_MAX_WORKSPACE_SECRETS_PER_USER=3/);
  const listed = await alice.get(`/workspaces/${ids[0]}/tokens`);
  t.equal(listed.json.tokens.length, 2);
  t.equal((await alice.del(`/workspaces/${ids[0]}/tokens/${listed.json.tokens[0].id}`)).status, 200);
  t.equal((await issue(ids[1]!)).status, 200, 'a revoked secret gives its place back');
});

t.test('a per-user cap must stay below the total', async (t) => {
  t.throws(
    () => principalCapsFromEnv({ SERVICE_EVENTS_MAX_STREAMS: '10', SERVICE_EVENTS_MAX_STREAMS_PER_USER: '10' }),
    /SERVICE_EVENTS_MAX_STREAMS_PER_USER \(10\) must be below SERVICE_EVENTS_MAX_STREAMS \(10\)/,
  );
  t.throws(
    () => mcpSessionsFromEnv({ SERVICE_MCP_MAX_SESSIONS: '50', SERVICE_MCP_MAX_SESSIONS_PER_USER: '64' }),
    /SERVICE_MCP_MAX_SESSIONS_PER_USER \(64\) must be below SERVICE_MCP_MAX_SESSIONS \(50\)/,
  );
  t.equal(mcpSessionsFromEnv({}).maxSessionsPerUser, 64);
  t.equal(
    mcpSessionsFromEnv({ SERVICE_MCP_MAX_SESSIONS: '50' }).maxSessionsPerUser,
    25,
    'unset, it follows a lower total',
  );
  t.equal(principalCapsFromEnv({}).eventStreamsPerUser, 16);
});
