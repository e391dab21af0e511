// The log: one JSON shape for the daemon and the HTTP workers (time, level, pid, role, msg, then the
// line's fields, no key twice); SERVICE_LOG_LEVEL; at debug, exactly one line per request on stderr,
// with its id, and every field.
import t from 'tap';
import { spawn } from 'node:child_process';
import { CLI, request, startService, tempDataDir, until } from '../helpers/http.js';

const svc = await startService(t, { env: { SERVICE_LOG_LEVEL: 'debug' } });

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
  t.same(Object.keys(g), ['time', 'level', 'pid', 'role', 'msg', 'req_id', 'method', 'path', 'status', 'ms', 'bytes']);
  t.equal(g.level, 'debug', 'request lines are debug lines');
  t.equal(g.role, 'http');
  t.equal(g.msg, 'request');
  t.type(g.pid, 'number');
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
  const other = await startService(t, { env: { SERVICE_LOG_LEVEL: 'debug' } });
  const r = await request(other, 'GET', '/health', { headers: { 'x-request-id': 'log-last-1' } });
  t.equal(r.status, 200);
  const exit = await other.stop('SIGTERM');
  t.equal(exit.code, 0);
  // The exit and the last bytes on the stderr pipe reach this process as separate events.
  await until(() => /"req_id":"log-last-1"/.test(other.stderr()), 'the last log line', 5000).catch(() => {});
  t.match(other.stderr(), /"req_id":"log-last-1"/, 'the line of the last request before SIGTERM');
});

/** The top-level keys of a JSON object's text, in order, duplicates kept (JSON.parse would merge them). */
function rawKeys(line: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === '"') {
      let j = i + 1;
      while (line[j] !== '"') j += line[j] === '\\' ? 2 : 1;
      if (depth === 1 && /^\s*:/.test(line.slice(j + 1))) keys.push(JSON.parse(line.slice(i, j + 1)) as string);
      i = j;
    } else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
  }
  return keys;
}

t.test('the daemon and the HTTP worker write one shape; no key twice (the daemon wrote pid twice)', async (t) => {
  const lines = svc
    .stderr()
    .split('\n')
    .filter((l) => l.startsWith('{'));
  const ready = lines.find((l) => l.includes('"daemon ready"'));
  t.ok(ready, 'the daemon logged that it is ready');
  const roles = new Set<unknown>();
  for (const l of lines) {
    const keys = rawKeys(l);
    t.same(keys.slice(0, 5), ['time', 'level', 'pid', 'role', 'msg'], `the five keys first: ${l.slice(0, 80)}`);
    t.equal(new Set(keys).size, keys.length, `no duplicate key: ${l.slice(0, 120)}`);
    const o = JSON.parse(l) as Record<string, unknown>;
    t.ok(['error', 'warn', 'info', 'debug'].includes(String(o.level)), 'a level name');
    roles.add(o.role);
  }
  t.same([...roles].sort(), ['daemon', 'http'], 'both processes wrote');
  const d = JSON.parse(ready!) as Record<string, unknown>;
  t.equal(d.role, 'daemon');
  t.equal(d.level, 'info');
  t.not(d.pid, process.pid);
});

t.test('at the default level (info) no request is logged, so npm start stays quiet', async (t) => {
  const quiet = await startService(t);
  for (let i = 0; i < 5; i++) {
    const r = await request(quiet, 'GET', '/health', { headers: { 'x-request-id': `quiet-${i}` } });
    t.equal(r.status, 200);
  }
  const exit = await quiet.stop('SIGTERM');
  t.equal(exit.code, 0);
  t.notMatch(quiet.stderr(), /quiet-\d/, 'no request line');
  t.match(quiet.stderr(), /"daemon ready"/, 'info lines are still written');
});

t.test('SERVICE_LOG_LEVEL=error: not even the info lines', async (t) => {
  const silent = await startService(t, { env: { SERVICE_LOG_LEVEL: 'error' } });
  t.equal((await request(silent, 'GET', '/health')).status, 200);
  const exit = await silent.stop('SIGTERM');
  t.equal(exit.code, 0);
  t.notMatch(silent.stderr(), /"level":"(info|debug|warn)"/);
  t.match(silent.stderr(), /listening on http/, 'the terminal line of serve is not a log line');
});

t.test('a bad SERVICE_LOG_LEVEL: one line naming it, exit 2 (serve, http, daemon)', async (t) => {
  for (const cmd of ['serve', 'http', 'daemon']) {
    const dataDir = tempDataDir(t);
    const p = spawn(process.execPath, [CLI, cmd], {
      env: { ...process.env, SERVICE_DATA_DIR: dataDir, SERVICE_LISTEN: '127.0.0.1:0', SERVICE_LOG_LEVEL: 'loud' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    p.stderr.setEncoding('utf8').on('data', (s: string) => {
      err += s;
      // Started anyway (the setting was not checked): stop it, so that the test fails instead of waiting.
      if (/listening on|daemon ready/.test(err)) p.kill('SIGTERM');
    });
    const code = await new Promise<number | null>((resolve) => p.once('exit', (c) => resolve(c)));
    t.equal(code, 2, `${cmd}: exit 2`);
    t.match(err, /SERVICE_LOG_LEVEL must be error, warn, info or debug, got 'loud'/, `${cmd}: says why`);
    t.equal(err.trim().split('\n').length, 1, `${cmd}: one line`);
  }
});
