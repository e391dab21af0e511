// Issue 16, item 1: SERVICE_HTTP_WORKERS=2. MCP sessions on the SDK client work whichever worker a
// request lands on (sessions live in the daemon): initialize, tool calls, resources/subscribe and a
// change notification, with every request on a new connection so that the cluster hands them to
// both workers in turn. kill -9 of one worker mid-run: serve restarts it and every session keeps
// working. The browser guard and blank credentials are refused by both workers.
import t from 'tap';
import http from 'node:http';
import { Readable } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { openEvents, type EventStream } from '../helpers/sse.js';
import {
  INIT,
  headersFor,
  rawMcp,
  text,
  until,
  withCast,
  type Identity,
  type Service,
  type Teardown,
} from '../helpers/mcp.js';

const WORKER = 'x-mdvfs-worker';

/** Which worker (pid) answered each request, per label. */
class Served {
  readonly all = new Map<string, number>();
  readonly by = new Map<string, Set<string>>();
  note(label: string, pid: string | undefined): void {
    if (pid === undefined) return;
    this.all.set(pid, (this.all.get(pid) ?? 0) + 1);
    let s = this.by.get(label);
    if (s === undefined) this.by.set(label, (s = new Set()));
    s.add(pid);
  }
}

/**
 * A fetch for the SDK transport that opens a new connection per request (node:http, no agent), so
 * the cluster's round robin spreads one session's requests over the workers; notes who served it.
 */
function spreadingFetch(served: Served, label: string) {
  return (url: string | URL, init?: RequestInit): Promise<Response> =>
    new Promise((resolve, reject) => {
      const u = new URL(url);
      const headers: Record<string, string> = {};
      new Headers(init?.headers).forEach((v, k) => {
        headers[k] = v;
      });
      const req = http.request(
        {
          host: u.hostname,
          port: u.port,
          path: u.pathname + u.search,
          method: init?.method ?? 'GET',
          headers,
          agent: false,
        },
        (res) => {
          const pid = res.headers[WORKER];
          served.note(label, typeof pid === 'string' ? pid : undefined);
          const h = new Headers();
          for (const [k, v] of Object.entries(res.headers))
            if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
          const status = res.statusCode ?? 500;
          const body =
            status === 204 || status === 304 ? null : (Readable.toWeb(res) as unknown as ReadableStream<Uint8Array>);
          if (body === null) res.resume();
          resolve(new Response(body, { status, headers: h }));
        },
      );
      init?.signal?.addEventListener('abort', () => req.destroy(new Error('aborted')));
      req.on('error', reject);
      if (typeof init?.body === 'string') req.end(init.body);
      else req.end();
    });
}

interface Agent {
  name: string;
  client: Client;
  updates: string[];
  file: string;
}

async function agent(t: Teardown, svc: Service, served: Served, name: string, id: Identity): Promise<Agent> {
  const transport = new StreamableHTTPClientTransport(svc.url, {
    requestInit: { headers: headersFor(id) },
    fetch: spreadingFetch(served, name),
    // A stream that dies with its worker comes back at once on another.
    reconnectionOptions: {
      initialReconnectionDelay: 100,
      maxReconnectionDelay: 500,
      reconnectionDelayGrowFactor: 1.5,
      maxRetries: 50,
    },
  });
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(transport);
  t.teardown(() => client.close().catch(() => undefined));
  const updates: string[] = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    updates.push(n.params.uri);
  });
  return { name, client, updates, file: `${name}.md` };
}

/** A request that died with its worker (no answer: a network error) is sent again, as a client would. */
async function again<T>(fn: () => Promise<T>, retried: { n: number }): Promise<T> {
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      const why = err instanceof Error ? `${err.message} ${String((err as { cause?: unknown }).cause)}` : String(err);
      if (!/fetch failed|socket hang up|ECONNRESET|ECONNREFUSED|aborted/i.test(why) || retried.n >= 100) throw err;
      retried.n++;
    }
  }
}

async function tool(a: Agent, name: string, args: Record<string, unknown>, retried: { n: number }): Promise<string> {
  const r = await again(() => a.client.callTool({ name, arguments: args }), retried);
  if (r.isError === true) throw new Error(`${a.name} ${name}: ${text(r as never)}`);
  return text(r as never);
}

/** Tool calls, a subscription, and writes through the session until the notification arrives. */
async function work(a: Agent, round: number, retried: { n: number }): Promise<void> {
  await tool(a, 'write_file', { path: a.file, content: `# ${a.name} round ${round}\n` }, retried);
  const read = await tool(a, 'read_file', { path: a.file }, retried);
  if (!read.includes(`round ${round}`)) throw new Error(`${a.name} read ${read}`);
  await tool(a, 'list_directory', { path: '' }, retried);
  await tool(a, 'get_file_info', { path: a.file }, retried);
  const uri = `mdvfs:///home/${a.name}/${a.file}`;
  await again(() => a.client.subscribeResource({ uri }), retried);
  a.updates.length = 0;
  // The event stream opens (or comes back) in the background: write until the update arrives.
  let n = 0;
  await until(async () => {
    await tool(a, 'write_file', { path: a.file, content: `# ${a.name} round ${round} change ${++n}\n` }, retried);
    await new Promise((r) => setTimeout(r, 100));
    return a.updates.includes(uri);
  }, `${a.name}'s update in round ${round}`);
}

t.test('MCP sessions over two HTTP workers, and kill -9 of one mid-run', async (t) => {
  const { svc, daemon } = await withCast(t, {
    env: { SERVICE_HTTP_WORKERS: '2', MDVFS_TEST_WORKER_HEADER: '1' },
  });
  t.match(svc.stderr(), /2 http workers/);
  const names = Array.from({ length: 10 }, (_, i) => `agent${i}`);
  for (const name of names) await daemon.call('admin.userAdd', { name });
  const served = new Served();
  const agents = await Promise.all(names.map((n) => agent(t, svc, served, n, { authorization: `User ${n}` })));
  const retried = { n: 0 };
  await Promise.all(agents.map((a) => work(a, 1, retried)));
  t.equal(retried.n, 0, 'no request failed before the kill');
  const workers = [...served.all.keys()];
  t.equal(workers.length, 2, `both workers served requests (${JSON.stringify([...served.all])})`);
  const spread = [...served.by.values()].filter((s) => s.size === 2).length;
  t.ok(spread > 0, `sessions whose requests both workers served: ${spread} of ${agents.length}`);

  // kill -9 one worker while every session is busy.
  const victim = Number(workers[0]);
  const total = (): number => [...served.all.values()].reduce((a, b) => a + b, 0);
  const before = total();
  const busy = Promise.all(agents.map((a) => work(a, 2, retried)));
  await until(() => total() >= before + 20, 'round 2 under way');
  process.kill(victim, 'SIGKILL');
  await busy;
  await until(() => /http worker \d exited \(SIGKILL\); restarting/.test(svc.stderr()), 'the restart');
  // The restarted worker serves too (a third pid), and every session still works.
  await until(async () => {
    await Promise.all(agents.map((a) => work(a, 3, retried)));
    return [...served.all.keys()].some((p) => !workers.includes(p));
  }, 'the restarted worker serving');
  t.pass(`every session kept working (${retried.n} call(s) in flight on the killed worker sent again)`);
});

t.test('both workers serve GET /events, and refuse a foreign Origin and blank credentials', async (t) => {
  // Up to 25 streams for alice: above the default per-user cap of 16 (test/http/caps.test.ts).
  const { svc, daemon } = await withCast(t, {
    env: { SERVICE_HTTP_WORKERS: '2', MDVFS_TEST_WORKER_HEADER: '1', SERVICE_EVENTS_MAX_STREAMS_PER_USER: '64' },
  });
  // Event streams on new connections until both workers serve one. A change reaches every stream.
  const streams: EventStream[] = [];
  t.teardown(() => {
    for (const s of streams) s.close();
  });
  const streamWorkers = new Set<string>();
  // Idle workers race for each new connection (they accept from one shared socket): open them
  // eight at a time, so both are busy at once.
  while (streamWorkers.size < 2 && streams.length < 24) {
    const batch = await Promise.all(Array.from({ length: 8 }, () => openEvents(svc, { auth: 'User alice' })));
    for (const s of batch) {
      streams.push(s);
      streamWorkers.add(String(s.headers[WORKER]));
    }
  }
  // The race may go to one worker every time: then the next stream is opened while that worker is
  // stopped, so the other one accepts it.
  if (streamWorkers.size < 2)
    await whileStopped(Number([...streamWorkers][0]), async () => {
      const s = await openEvents(svc, { auth: 'User alice' });
      streams.push(s);
      streamWorkers.add(String(s.headers[WORKER]));
    });
  t.equal(streamWorkers.size, 2, `both workers serve an event stream (${streams.length} opened)`);
  await daemon.call('fs.write', { path: '/home/alice/seen.md' }, { data: Buffer.from('hello') });
  for (const s of streams) await s.until((e) => e.paths.includes('/home/alice/seen.md'));

  const refusedBy = new Set<string>();
  const refusals = async (): Promise<void> => {
    // rawMcp opens a new connection each time, which either worker may accept.
    const foreign = await rawMcp(svc, 'POST', INIT, { origin: 'https://evil.example' });
    t.equal(foreign.status, 403);
    t.equal(foreign.json.error.data.code, 'EACCES');
    const blank = await rawMcp(svc, 'POST', INIT, { authorization: '   ' });
    t.equal(blank.status, 401);
    const rest = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http
        .get(
          { host: '127.0.0.1', port: svc.port, path: '/fs/', headers: { authorization: '' }, agent: false },
          (res) => {
            res.resume();
            resolve(res);
          },
        )
        .on('error', reject);
    });
    t.equal(rest.statusCode, 401, 'REST: a blank Authorization is refused');
    for (const r of [foreign.headers, blank.headers, rest.headers]) refusedBy.add(String(r[WORKER]));
  };
  for (let round = 0; round < 3 && refusedBy.size < 2; round++) await Promise.all(Array.from({ length: 8 }, refusals));
  if (refusedBy.size < 2) await whileStopped(Number([...refusedBy][0]), refusals);
  t.equal(refusedBy.size, 2, 'both workers refused');
});

/** Runs `fn` while worker `pid` is stopped (SIGSTOP), so that new connections go to the other worker. */
async function whileStopped(pid: number, fn: () => Promise<void>): Promise<void> {
  process.kill(pid, 'SIGSTOP');
  try {
    await fn();
  } finally {
    process.kill(pid, 'SIGCONT');
  }
}
