/**
 * `GET /events` as a black box over real HTTP: attribution, filtering by what the subscriber may
 * read (done by the daemon), `Last-Event-ID` resume, many subscribers, refusals.
 */
import t from 'tap';
import { withCast, startService, client } from '../helpers/http.js';
import { openEvents, type EventStream } from '../helpers/sse.js';

// 'many subscribers' opens 30 streams each for alice and bob: above the default per-user cap (16,
// test/http/caps.test.ts tests the caps), so this server allows more per user.
const cast = await withCast(t, { env: { SERVICE_EVENTS_MAX_STREAMS_PER_USER: '64' } });
const { svc, alice, bob, root, botToken } = cast;
const streams: EventStream[] = [];
t.teardown(() => {
  for (const s of streams) s.close();
});
async function events(auth: string | undefined, headers: Record<string, string> = {}): Promise<EventStream> {
  const s = await openEvents(svc, { ...(auth === undefined ? {} : { auth }), headers });
  streams.push(s);
  return s;
}

t.test('a stream starts with ready and is an event stream', async (t) => {
  const s = await events('User alice');
  t.equal(s.status, 200);
  t.match(String(s.headers['content-type']), /^text\/event-stream/);
  t.equal(s.ready?.reset, false);
  t.match(s.ready?.last_id, /^[0-9a-z]+\.\d+$/);
  t.equal(s.frames[0]?.id, s.ready?.last_id, 'ready carries the newest id, to resume from');
  s.close();
});

t.test('a change is reported with who made it and on whose behalf', async (t) => {
  const s = await events('User alice');
  // Delegated calls pass every check for both, so the agent writes where both may: /tmp.
  t.equal((await alice.post('/auth/delegations', { agent: 'bot' })).status, 200, "alice's consent");
  const w = await client(svc, { auth: `Bearer ${botToken}`, onBehalfOf: 'alice' }).put(
    '/fs//tmp/agent.md',
    'from the agent',
  );
  t.equal(w.status, 200, w.text);
  const ev = await s.until((e) => e.paths.includes('/tmp/agent.md'));
  t.equal(ev.by, 'bot');
  t.equal(ev.on_behalf_of, 'alice');
  t.type(ev.time, 'number');
  const own = await alice.put('/fs/own.md', 'mine');
  t.equal(own.status, 200);
  const ev2 = await s.until((e) => e.paths.includes('/home/alice/own.md'));
  t.equal(ev2.by, 'alice');
  t.notOk('on_behalf_of' in ev2);
  s.close();
});

t.test("bob's stream never carries alice's private changes; root's does", async (t) => {
  const b = await events('User bob');
  const r = await events(undefined);
  t.equal((await alice.put('/fs/private/secret-plan.md', 'secret')).status, 200);
  t.equal((await alice.put('/fs//tmp/shared.md', 'hello')).status, 200);
  // The shared write comes after the private one: once bob has it, he would have had the other.
  const shared = await b.until((e) => e.paths.includes('/tmp/shared.md'));
  t.equal(shared.by, 'alice');
  await r.until((e) => e.paths.includes('/home/alice/private/secret-plan.md'));
  const leaked = b.changes().filter((e) => e.paths.some((p) => p.startsWith('/home/alice')));
  t.same(leaked, [], 'no path under /home/alice reaches bob');
  // A move out of the private dir shows only its visible end.
  t.equal((await alice.post('/fs/private/secret-plan.md?op=move&dst=%2Ftmp%2Fplan.md')).status, 200);
  const moved = await b.until((e) => e.paths.includes('/tmp/plan.md'));
  t.same(moved.paths, ['/tmp/plan.md']);
  b.close();
  r.close();
});

t.test('Last-Event-ID resumes exactly after the last event seen', async (t) => {
  const s1 = await events('User alice');
  const from = s1.ready!.last_id;
  s1.close();
  await alice.put('/fs/r1.md', '1');
  await bob.put('/fs//tmp/r-bob.md', 'b');
  await alice.put('/fs/r2.md', '2');
  const s2 = await events('User alice', { 'last-event-id': from });
  t.equal(s2.ready?.reset, false);
  await s2.until((e) => e.paths.includes('/home/alice/r2.md'));
  const paths = s2.changes().flatMap((e) => e.paths);
  t.same(
    paths,
    ['/home/alice/r1.md', '/tmp/r-bob.md', '/home/alice/r2.md'],
    'the missed events, in order, nothing before',
  );
  const ids = s2.changes().map((e) => e.id);
  t.same(
    s2.frames.filter((f) => f.event === 'change').map((f) => f.id),
    ids,
    'each frame has its id',
  );
  // Resuming from the middle replays only what follows.
  const s3 = await events('User alice', { 'last-event-id': ids[1]! });
  await s3.until((e) => e.paths.includes('/home/alice/r2.md'));
  t.same(
    s3.changes().flatMap((e) => e.paths),
    ['/home/alice/r2.md'],
  );
  // The query form, for clients that cannot set headers.
  const s4 = await openEvents(svc, {
    auth: 'User alice',
    path: `/events?last_event_id=${encodeURIComponent(ids[1]!)}`,
  });
  streams.push(s4);
  await s4.until((e) => e.paths.includes('/home/alice/r2.md'));
  t.equal(s4.changes().length, 1);
  for (const s of [s2, s3, s4]) s.close();
});

t.test('an unknown or foreign Last-Event-ID asks for a reset', async (t) => {
  for (const id of ['nonsense', 'zzzz.5', '0.0']) {
    const s = await events('User alice', { 'last-event-id': id });
    t.equal(s.ready?.reset, true, id);
    t.same(s.changes(), [], `${id}: nothing replayed`);
    s.close();
  }
});

t.test('many subscribers each get every event they may see', async (t) => {
  const n = 60;
  const subs = await Promise.all(Array.from({ length: n }, (_, i) => events(i % 2 === 0 ? 'User alice' : 'User bob')));
  await root.put('/fs//tmp/many.md', 'x');
  await alice.put('/fs/only-alice.md', 'x');
  const got = await Promise.all(subs.map((s) => s.until((e) => e.paths.includes('/tmp/many.md'))));
  t.equal(got.length, n);
  await Promise.all(
    subs.filter((_, i) => i % 2 === 0).map((s) => s.until((e) => e.paths.includes('/home/alice/only-alice.md'))),
  );
  // Bob's streams: a later public write arrives, alice's private one never did.
  await root.put('/fs//tmp/after.md', 'x');
  const bobs = subs.filter((_, i) => i % 2 === 1);
  await Promise.all(bobs.map((s) => s.until((e) => e.paths.includes('/tmp/after.md'))));
  t.notOk(bobs.some((s) => s.changes().some((e) => e.paths.includes('/home/alice/only-alice.md'))));
  for (const s of subs) s.close();
  // Closed streams are dropped: the service keeps answering and new streams work.
  const again = await events('User bob');
  await root.put('/fs//tmp/again.md', 'x');
  await again.until((e) => e.paths.includes('/tmp/again.md'));
  again.close();
});

t.test('bad credentials are refused before any stream opens', async (t) => {
  const s = await events('Bearer not-a-token');
  t.equal(s.status, 401);
  t.match(JSON.parse(s.body), { code: 'EAUTH' });
});

t.test('a revoked token ends its stream', async (t) => {
  const tok = (await root.post('/admin/users/bob/tokens')).json.token as string;
  const s = await events(`Bearer ${tok}`);
  t.equal(s.status, 200);
  await root.post('/admin/users/bob/tokens'); // regenerating revokes the old one
  await new Promise<void>((resolve) => {
    const check = setInterval(() => {
      if (s.frames.some((f) => f.event === 'end')) {
        clearInterval(check);
        resolve();
      }
    }, 20);
  });
  t.pass('the stream was ended');
  s.close();
});

t.test('workspace callers see workspace paths only', async (t) => {
  // Under /tmp, where the agent may read what alice writes.
  t.equal((await alice.put('/fs//tmp/proj/in.md', 'x')).status, 200);
  const ws = await root.post('/workspaces', { name: 'proj', root_path: '/tmp/proj' });
  t.equal(ws.status, 200, ws.text);
  const agentTok = (await root.post('/admin/users/bot/tokens')).json.token as string;
  const sec = await root.post(`/workspaces/${ws.json.id}/tokens`, { name: 'w', agent_token: agentTok });
  t.equal(sec.status, 200, sec.text);
  const s = await events(`Bearer ${sec.json.secret}`, { 'x-service-workspace': ws.json.id });
  t.equal(s.status, 200, s.body);
  await alice.put('/fs//tmp/outside.md', 'x');
  await alice.put('/fs//tmp/proj/in.md', 'y');
  const ev = await s.until((e) => e.paths.includes('/in.md'));
  t.equal(ev.by, 'alice');
  t.notOk(
    s.changes().some((e) => e.paths.some((p) => p.includes('outside') || p.startsWith('/tmp'))),
    'nothing outside, no real paths',
  );
  s.close();
});

t.test('SERVICE_ANONYMOUS=deny: no credentials, no stream', async (t) => {
  const denied = await startService(t, { env: { SERVICE_ANONYMOUS: 'deny' } });
  const s = await openEvents(denied);
  t.equal(s.status, 401);
});
