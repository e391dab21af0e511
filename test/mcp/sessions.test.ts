// Issue 12, item 8: one caller's session churn must never evict another caller's MCP session.
// Real `mdvfs serve`, alice on the SDK client, bob and anonymous callers with raw initialize requests.
import http from 'node:http';
import t from 'tap';
import { INIT, call, httpClient, rawMcp, text, until, withCast } from '../helpers/mcp.js';

const PROTO = { 'mcp-protocol-version': '2025-06-18' };

/** `n` initialize requests with `headers`, a few at a time; returns the statuses and the session ids. */
async function initializeMany(
  svc: { port: number },
  n: number,
  headers: Record<string, string>,
): Promise<{ statuses: Map<number, number>; ids: string[] }> {
  const statuses = new Map<number, number>();
  const ids: string[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n) {
      next++;
      const r = await rawMcp(svc, 'POST', INIT, headers);
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      const sid = r.headers['mcp-session-id'];
      if (typeof sid === 'string') ids.push(sid);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return { statuses, ids };
}

const listTools = (svc: { port: number }, sid: string, headers: Record<string, string>) =>
  rawMcp(
    svc,
    'POST',
    { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} },
    { ...headers, ...PROTO, 'mcp-session-id': sid },
  );

t.test("1,005+ initialize calls by bob and by anonymous callers leave alice's session alone", async (t) => {
  const { svc, daemon } = await withCast(t);
  await daemon.call('fs.write', { path: '/home/alice/kept.md' }, { data: Buffer.from('still here\n') });
  await daemon.call('fs.chown', { path: '/home/alice/kept.md', owner: 'alice' });
  // Alice's session as a plain client keeps it: no open SSE stream (which would shield it from LRU eviction).
  const ALICE = { authorization: 'User alice' };
  const init = await rawMcp(svc, 'POST', INIT, ALICE);
  const aliceSid = String(init.headers['mcp-session-id']);
  t.equal(init.status, 200);
  const readKept = {
    jsonrpc: '2.0',
    id: 3,
    method: 'tools/call',
    params: { name: 'read_file', arguments: { path: 'kept.md' } },
  };
  t.match((await rawMcp(svc, 'POST', readKept, { ...ALICE, ...PROTO, 'mcp-session-id': aliceSid })).text, /still here/);
  // And one on the SDK client, as an agent would hold it.
  const { client: aliceSdk } = await httpClient(t, svc, ALICE);

  const bob = await initializeMany(svc, 1005, { authorization: 'User bob' });
  t.same([...bob.statuses], [[200, 1005]], 'bob may churn: each new session replaces his own oldest');
  const anon = await initializeMany(svc, 1005, {});
  t.same([...anon.statuses], [[200, 1005]]);

  const again = await rawMcp(svc, 'POST', readKept, { ...ALICE, ...PROTO, 'mcp-session-id': aliceSid });
  t.equal(again.status, 200, "alice's session still exists");
  t.match(again.text, /still here/, "alice's session still answers");
  t.match(text(await call(aliceSdk, 'read_file', { path: 'kept.md' })), /still here/);
  const first = bob.ids[0]!;
  t.equal(
    (await listTools(svc, first, { authorization: 'User bob' })).status,
    404,
    "bob's oldest session made way for his newer ones",
  );
  const last = bob.ids[bob.ids.length - 1]!;
  t.equal((await listTools(svc, last, { authorization: 'User bob' })).status, 200, "bob's newest session works");
});

t.test('a full server refuses new sessions with a clear error instead of evicting', async (t) => {
  const { svc, daemon } = await withCast(t, {
    env: { SERVICE_MCP_MAX_SESSIONS: '4', SERVICE_MCP_MAX_SESSIONS_PER_CLIENT: '2' },
  });
  await daemon.call('admin.userAdd', { name: 'carol' });
  const { client: alice } = await httpClient(t, svc, { authorization: 'User alice' });
  await initializeMany(svc, 2, { authorization: 'User bob' });
  await initializeMany(svc, 1, {});
  const refused = await rawMcp(svc, 'POST', INIT, { authorization: 'User carol' });
  t.equal(refused.status, 503, 'carol cannot push anyone out');
  t.equal(refused.json.error.data.code, 'EBUSY');
  t.match(refused.json.error.message, /SERVICE_MCP_MAX_SESSIONS=4/);
  const again = await initializeMany(svc, 3, { authorization: 'User bob' });
  t.same([...again.statuses], [[200, 3]], 'bob at his own cap replaces his own sessions');
  t.equal(
    (await initializeMany(svc, 2, { authorization: 'user  bob' })).statuses.get(200),
    2,
    'bob spelled differently is still bob: his own sessions make way',
  );
  t.equal(
    (await rawMcp(svc, 'POST', INIT, { authorization: 'user  carol' })).status,
    503,
    'and carol spelled differently is still refused',
  );
  t.ok((await call(alice, 'list_directory', {})).isError !== true, "alice's session still answers");
});

t.test('an idle session expires after SERVICE_MCP_SESSION_TTL; one with an open event stream does not', async (t) => {
  const { svc } = await withCast(t, { env: { SERVICE_MCP_SESSION_TTL: '1' } });
  const ALICE = { authorization: 'User alice' };
  const idle = String((await rawMcp(svc, 'POST', INIT, ALICE)).headers['mcp-session-id']);
  // The SDK client keeps its session's GET stream open.
  const { client: streaming } = await httpClient(t, svc, ALICE);
  t.equal((await listTools(svc, idle, ALICE)).status, 200, 'a fresh session answers');
  // Watched with bob's credentials: refused (403) while the session lives, without counting as its activity.
  t.equal((await listTools(svc, idle, { authorization: 'User bob' })).status, 403);
  await until(
    async () => (await listTools(svc, idle, { authorization: 'User bob' })).status === 404,
    'the idle session to expire',
  );
  t.equal((await listTools(svc, idle, ALICE)).status, 404, 'the idle session is gone');
  t.ok((await call(streaming, 'list_directory', {})).isError !== true, 'the session with a stream is kept');
});

t.test("an agent's own workspaces do not buy it more sessions: alice's initialize still succeeds", async (t) => {
  // Issue 30, item 5, scaled down with the same shape: the agent makes 15 workspaces of its own and
  // opens its per-client maximum of sessions in each (15 x 4 = the 60 the server holds in all).
  const { svc, botToken } = await withCast(t, {
    env: {
      SERVICE_MCP_MAX_SESSIONS: '60',
      SERVICE_MCP_MAX_SESSIONS_PER_CLIENT: '4',
      SERVICE_MCP_MAX_SESSIONS_PER_USER: '8',
    },
  });
  const rest = async (
    method: string,
    url: string,
    body: unknown,
  ): Promise<{ status: number; json: { id: string; secret: string } }> => {
    const r = await fetch(`http://127.0.0.1:${svc.port}${url}`, {
      method,
      headers: { authorization: `Bearer ${botToken}`, 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    return { status: r.status, json: (await r.json()) as { id: string; secret: string } };
  };
  const opened: { sid: string; headers: Record<string, string> }[] = [];
  const statuses = new Map<number, number>();
  for (let n = 0; n < 15; n++) {
    t.equal((await rest('PUT', `/fs/w${n}/keep.md`, 'x')).status, 200);
    const ws = await rest('POST', '/workspaces', { name: `w${n}`, root_path: `/home/bot/w${n}` });
    t.equal(ws.status, 200);
    const sec = await rest('POST', `/workspaces/${ws.json.id}/tokens`, { name: 's', agent_token: botToken });
    t.equal(sec.status, 200);
    const headers = { authorization: `Bearer ${sec.json.secret}`, 'x-service-workspace': String(ws.json.id) };
    for (let k = 0; k < 4; k++) {
      const r = await rawMcp(svc, 'POST', INIT, headers);
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      if (r.status === 200) opened.push({ sid: String(r.headers['mcp-session-id']), headers });
    }
  }
  t.same([...statuses], [[200, 60]], 'the agent may churn: each new session replaces its own oldest');

  const alice = await rawMcp(svc, 'POST', INIT, { authorization: 'User alice' });
  t.equal(alice.status, 200, `alice's initialize succeeds: ${alice.text.slice(0, 200)}`);
  const aliceSid = String(alice.headers['mcp-session-id']);
  t.equal((await listTools(svc, aliceSid, { authorization: 'User alice' })).status, 200, "alice's session answers");

  // The agent keeps its 8 newest sessions, across its workspaces; the older ones made way.
  const first = opened[0]!;
  t.equal((await listTools(svc, first.sid, first.headers)).status, 404, "the agent's oldest session is gone");
  for (const o of opened.slice(-8))
    t.equal((await listTools(svc, o.sid, o.headers)).status, 200, "the agent's newest sessions answer");
});

t.test('a session holds at most 4 open event streams', async (t) => {
  const { svc } = await withCast(t);
  const ALICE = { authorization: 'User alice' };
  const sid = String((await rawMcp(svc, 'POST', INIT, ALICE)).headers['mcp-session-id']);
  const open: http.ClientRequest[] = [];
  t.teardown(() => {
    for (const r of open) r.destroy();
  });
  /** GET /mcp on the session: the status, and the body when it is a refusal. */
  const stream = (): Promise<{ status: number; body: string }> =>
    new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port: svc.port,
          method: 'GET',
          path: '/mcp',
          agent: false,
          headers: { ...ALICE, ...PROTO, accept: 'text/event-stream', 'mcp-session-id': sid },
        },
        (res) => {
          if (res.statusCode === 200) return resolve({ status: 200, body: '' });
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      open.push(req);
      req.end();
    });
  const statuses: number[] = [];
  let refused = '';
  for (let i = 0; i < 6; i++) {
    const r = await stream();
    statuses.push(r.status);
    if (r.status !== 200) refused = r.body;
  }
  t.same(statuses, [200, 200, 200, 200, 429, 429], 'four streams, then 429');
  t.match(refused, /ELIMIT/);
  t.match(refused, /already has 4 event streams open/);
  t.equal((await listTools(svc, sid, ALICE)).status, 200, 'the session itself still answers');
});
