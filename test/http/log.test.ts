// The request log: exactly one JSON line per request on stderr, with its id, and every field.
import t from 'tap';
import { request, startService, until } from '../helpers/http.js';

const svc = await startService(t);

function logLines(): Record<string, unknown>[] {
  return svc
    .stderr()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

async function lineFor(id: string): Promise<Record<string, unknown>[]> {
  for (let i = 0; i < 100; i++) {
    const found = logLines().filter((l) => l.req_id === id);
    if (found.length > 0) {
      await new Promise((r) => setTimeout(r, 100)); // a second line would show up by now
      return logLines().filter((l) => l.req_id === id);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return [];
}

t.test('a PUT and a GET: one line each, every field, in order', async (t) => {
  const put = await request(svc, 'PUT', '/fs/log/a.md', {
    body: '# hello\n',
    headers: { 'x-request-id': 'log-put-1' },
  });
  t.equal(put.status, 200, put.text);
  const get = await request(svc, 'GET', '/fs/log/a.md', { headers: { 'x-request-id': 'log-get-1' } });
  t.equal(get.status, 200);
  const [p] = await lineFor('log-put-1');
  const lines = await lineFor('log-get-1');
  t.equal(lines.length, 1, 'one line per request');
  const g = lines[0]!;
  t.same(Object.keys(g), ['time', 'level', 'req_id', 'method', 'path', 'status', 'ms', 'bytes']);
  t.equal(g.level, 'info');
  t.ok(!Number.isNaN(Date.parse(String(g.time))), 'an ISO time');
  t.equal(g.method, 'GET');
  t.equal(g.path, '/fs/log/a.md');
  t.equal(g.status, 200);
  t.type(g.ms, 'number');
  t.equal(g.bytes, 8, 'the body size');
  t.equal(p?.method, 'PUT');
  t.equal(p?.bytes, Number(put.headers['content-length']));
});

t.test('errors carry their code; odd characters in the path stay valid JSON; generated ids are UUIDs', async (t) => {
  const odd = '/fs/log/a\\b%22.md?stat=1&q=%5C';
  const r = await request(svc, 'GET', odd, { headers: { 'x-request-id': 'log-odd-1' } });
  t.equal(r.status, 404, r.text);
  const [l] = await lineFor('log-odd-1');
  t.ok(l, 'the line parses as JSON');
  t.equal(l?.code, 'ENOENT');
  t.equal(l?.status, 404);
  t.equal(l?.path, odd, 'a backslash in the path is escaped');
  const bad = await request(svc, 'PATCH', '/fs/log/a.md', { headers: { 'x-request-id': 'bad id with spaces' } });
  t.equal(bad.status, 405);
  const id = bad.headers['x-request-id'];
  t.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, 'an insane id is replaced by a UUID');
  const [m] = await lineFor(String(id));
  t.equal(m?.code, 'EMETHOD');
});

t.test('lines are batched, but a clean stop writes the last ones', async (t) => {
  const other = await startService(t);
  const r = await request(other, 'GET', '/health', { headers: { 'x-request-id': 'log-last-1' } });
  t.equal(r.status, 200);
  const exit = await other.stop('SIGTERM');
  t.equal(exit.code, 0);
  // The exit and the last bytes on the stderr pipe reach this process as separate events.
  await until(() => /"req_id":"log-last-1"/.test(other.stderr()), 'the last log line', 5000).catch(() => {});
  t.match(other.stderr(), /"req_id":"log-last-1"/, 'the line of the last request before SIGTERM');
});
