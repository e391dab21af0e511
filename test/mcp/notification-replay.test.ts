// Issue 31, item 5: resource notifications carry per-session event ids kept in the daemon, so a
// client whose stream died with its worker (kill -9) gets, on its next GET with Last-Event-ID (on
// whichever worker), the notifications of the changes made meanwhile. `mdvfs serve` with
// SERVICE_HTTP_WORKERS=2, raw HTTP (the SSE frames and their ids are what is under test).
import t from 'tap';
import http from 'node:http';
import { INIT, rawMcp, until, withCast } from '../helpers/mcp.js';

const WORKER = 'x-mdvfs-worker';
const PROTOCOL = { 'mcp-protocol-version': '2025-06-18' };

interface Frame {
  id?: string;
  data: string;
}

interface Stream {
  status: number;
  worker: string | undefined;
  frames: Frame[];
  /** The resources/updated notifications so far: [event id, uri]. */
  updates(): [string | undefined, string][];
  close(): void;
}

/** GET /mcp for session `sid` (with Last-Event-ID when given), its SSE frames parsed as they arrive. */
function openStream(port: number, sid: string, lastEventId?: string): Promise<Stream> {
  const headers: Record<string, string> = { accept: 'text/event-stream', 'mcp-session-id': sid, ...PROTOCOL };
  if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'GET', path: '/mcp', headers, agent: false }, (res) => {
      const frames: Frame[] = [];
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        for (let i = buf.indexOf('\n\n'); i !== -1; i = buf.indexOf('\n\n')) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const f: Frame = { data: '' };
          for (const line of block.split('\n')) {
            if (line.startsWith('id:')) f.id = line.slice(3).trim();
            else if (line.startsWith('data:')) f.data += line.slice(5).trim();
          }
          if (f.data !== '') frames.push(f);
        }
      });
      res.on('error', () => undefined);
      const pid = res.headers[WORKER];
      resolve({
        status: res.statusCode ?? 0,
        worker: typeof pid === 'string' ? pid : undefined,
        frames,
        updates: () =>
          frames.flatMap((f) => {
            const m = JSON.parse(f.data) as { method?: string; params?: { uri?: string } };
            return m.method === 'notifications/resources/updated' ? [[f.id, m.params?.uri ?? ''] as const] : [];
          }) as [string | undefined, string][],
        close: () => req.destroy(),
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** A REST write, sent again if it landed on the worker just killed. */
async function put(port: number, p: string, body: string): Promise<void> {
  await until(async () => {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/fs//${p}`, { method: 'PUT', body });
      return r.status === 200;
    } catch {
      return false;
    }
  }, `PUT ${p}`);
}

t.test(
  'kill -9 of the worker holding an MCP stream: a GET with Last-Event-ID gets what changed meanwhile',
  async (t) => {
    const { svc } = await withCast(t, { env: { SERVICE_HTTP_WORKERS: '2', MDVFS_TEST_WORKER_HEADER: '1' } });
    await put(svc.port, 'watched.md', 'v0');
    const init = await rawMcp(svc, 'POST', INIT);
    t.equal(init.status, 200);
    const sid = init.headers['mcp-session-id'] as string;
    t.ok(sid, 'a session');
    const h = { 'mcp-session-id': sid, ...PROTOCOL };
    t.equal(
      (await rawMcp(svc, 'POST', { jsonrpc: '2.0', method: 'notifications/initialized' }, h)).status,
      202,
      'initialized',
    );
    const uri = 'mdvfs:///watched.md';
    const sub = await rawMcp(svc, 'POST', { jsonrpc: '2.0', id: 2, method: 'resources/subscribe', params: { uri } }, h);
    t.equal(sub.status, 200, sub.text);

    const first = await openStream(svc.port, sid);
    t.teardown(() => first.close());
    t.equal(first.status, 200, 'the event stream opens');
    t.ok(first.worker, 'on a worker');
    let n = 0;
    await until(async () => {
      await put(svc.port, 'watched.md', `v${++n}`);
      await new Promise((r) => setTimeout(r, 100));
      return first.updates().length > 0;
    }, 'a notification on the stream');
    const [lastId, got] = first.updates().at(-1)!;
    t.equal(got, uri);
    t.match(lastId, /^\d+$/, 'the notification carries an event id');

    // The worker holding the stream dies; changes go on through the other.
    process.kill(Number(first.worker), 'SIGKILL');
    await put(svc.port, 'watched.md', 'while the stream was down 1');
    await put(svc.port, 'watched.md', 'while the stream was down 2');
    await put(svc.port, 'other.md', 'not watched');

    const again = await openStream(svc.port, sid, lastId);
    t.teardown(() => again.close());
    t.equal(again.status, 200, 'the GET with Last-Event-ID is served');
    await until(() => again.updates().length >= 2, 'the missed notifications to be replayed');
    const replayed = again.updates();
    t.ok(
      replayed.every(([, u]) => u === uri),
      'only the subscribed resource',
    );
    const ids = replayed.map(([id]) => Number(id));
    t.ok(
      ids.every((id, i) => id > Number(lastId) && (i === 0 || id > ids[i - 1]!)),
      `ids after ${lastId}, increasing: ${ids.join(', ')}`,
    );
    t.notOk(ids.includes(Number(lastId)), 'what the client had is not sent again');
    // The resumed stream goes on carrying live notifications.
    const before = again.updates().length;
    await put(svc.port, 'watched.md', 'after the resume');
    await until(() => again.updates().length > before, 'a live notification on the resumed stream');
  },
);
