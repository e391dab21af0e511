// Issue 12, item 1: a web page the user visits must not be root. The attacks of a hostile page,
// performed with real fetch requests (what a browser sends: Origin, Sec-Fetch-Site, simple form
// POSTs) and raw requests with a rebinding Host, against a real `mdvfs serve`; then hosted mode,
// the refusal to listen off loopback, and a daemon started earlier by the CLI in a local environment.
import t from 'tap';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { cliEnv } from '../helpers/cli.js';
import { CLI, client, request, startService, tempDataDir, withCast } from '../helpers/http.js';

const LISTED = 'https://app.example.com';
const EVIL = 'https://evil.example';

const cast = await withCast(t, { env: { SERVICE_CORS_ORIGINS: `${LISTED}, http://localhost:5173` } });
const { svc, root, alice } = cast;
const base = svc.base;
await alice.put('/fs/secret.md', 'alice private words\n');
await root.post('/admin/chmod//home/alice/secret.md', { mode: '0600' });
await root.put('/fs//tmp/evil.md', 'pwned\n');

const secret = async (): Promise<string> => (await alice.get('/fs/secret.md')).text;

t.test('a foreign page cannot read a private file (no credentials = root)', async (t) => {
  const r = await fetch(`${base}/fs//home/alice/secret.md`, {
    headers: { Origin: EVIL, 'Sec-Fetch-Site': 'cross-site' },
  });
  const body = await r.text();
  t.equal(r.status, 403);
  t.equal(r.headers.get('access-control-allow-origin'), null, 'no CORS grant for an unlisted origin');
  t.notMatch(body, /private words/, 'nothing leaked');
  t.equal(JSON.parse(body).code, 'EACCES');
  t.match(JSON.parse(body).error, /SERVICE_CORS_ORIGINS/, 'the error says how to allow an origin');
  const withUser = await fetch(`${base}/fs/secret.md`, { headers: { Origin: EVIL, Authorization: 'User alice' } });
  t.equal(withUser.status, 403, 'User <name> needs no secret either: refused just the same');
  t.notMatch(await withUser.text(), /private words/);
});

t.test('a cross-site "simple" form POST changes nothing', async (t) => {
  // text/plain and urlencoded POSTs need no preflight: the browser sends them straight away.
  const copy = await fetch(`${base}/fs//tmp/evil.md?op=copy&dst=/home/alice/secret.md&overwrite=true`, {
    method: 'POST',
    headers: { Origin: EVIL, 'Content-Type': 'text/plain', 'Sec-Fetch-Site': 'cross-site' },
    body: 'x',
  });
  t.equal(copy.status, 403);
  const move = await fetch(`${base}/fs//home/alice/secret.md?op=move&dst=/tmp/stolen.md`, {
    method: 'POST',
    headers: { Origin: EVIL, 'Content-Type': 'application/x-www-form-urlencoded' },
    body: 'a=b',
  });
  t.equal(move.status, 403);
  const put = await fetch(`${base}/fs//home/alice/secret.md`, {
    method: 'PUT',
    headers: { Origin: EVIL },
    body: 'pwned',
  });
  t.equal(put.status, 403);
  const del = await fetch(`${base}/fs//home/alice/secret.md`, { method: 'DELETE', headers: { Origin: 'null' } });
  t.equal(del.status, 403, 'Origin: null (sandboxed iframe, file://) is foreign too');
  t.equal(await secret(), 'alice private words\n', 'the file is unchanged');
  t.equal((await root.get('/fs//tmp/stolen.md')).status, 404);
});

t.test('Sec-Fetch-Site: cross-site without Origin (an <img>, a link) is refused', async (t) => {
  const r = await fetch(`${base}/fs//home/alice/secret.md`, { headers: { 'Sec-Fetch-Site': 'cross-site' } });
  t.equal(r.status, 403);
  t.notMatch(await r.text(), /private words/);
});

t.test('a foreign preflight is refused and grants nothing', async (t) => {
  const r = await fetch(`${base}/fs/secret.md`, {
    method: 'OPTIONS',
    headers: {
      Origin: EVIL,
      'Access-Control-Request-Method': 'PUT',
      'Access-Control-Request-Headers': 'authorization',
    },
  });
  t.equal(r.status, 403);
  for (const h of ['access-control-allow-origin', 'access-control-allow-methods', 'access-control-allow-headers'])
    t.equal(r.headers.get(h), null, `no ${h}`);
});

t.test('DNS rebinding: a foreign Host is refused on REST and on /mcp', async (t) => {
  for (const host of [`evil.example:${svc.port}`, 'evil.example', `127.0.0.1:${svc.port + 1}`]) {
    const rest = await request(svc, 'GET', '/fs//home/alice/secret.md', { headers: { host } });
    t.equal(rest.status, 403, `REST with Host ${host}`);
    t.notMatch(rest.text, /private words/);
    const mcp = await request(svc, 'POST', '/mcp', {
      headers: { host, accept: 'application/json, text/event-stream' },
      body: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
    });
    t.equal(mcp.status, 403, `/mcp with Host ${host}`);
    t.equal(mcp.json.error.data.code, 'EACCES');
  }
  for (const host of [`127.0.0.1:${svc.port}`, `localhost:${svc.port}`, `[::1]:${svc.port}`]) {
    t.equal(
      (await request(svc, 'GET', '/fs/secret.md', { auth: 'User alice', headers: { host } })).status,
      200,
      `Host ${host} is ours`,
    );
  }
});

t.test('a listed origin works and gets its origin echoed', async (t) => {
  const pre = await fetch(`${base}/fs/secret.md`, {
    method: 'OPTIONS',
    headers: {
      Origin: LISTED,
      'Access-Control-Request-Method': 'PUT',
      'Access-Control-Request-Headers': 'authorization,x-service-type',
    },
  });
  t.equal(pre.status, 204);
  t.equal(pre.headers.get('access-control-allow-origin'), LISTED);
  t.match(pre.headers.get('vary') ?? '', /Origin/);
  t.match(pre.headers.get('access-control-allow-methods') ?? '', /PUT/);
  t.match(pre.headers.get('access-control-allow-headers') ?? '', /Authorization/);
  const r = await fetch(`${base}/fs/secret.md`, { headers: { Origin: LISTED, Authorization: 'User alice' } });
  t.equal(r.status, 200);
  t.equal(await r.text(), 'alice private words\n');
  t.equal(r.headers.get('access-control-allow-origin'), LISTED);
  t.match(r.headers.get('access-control-expose-headers') ?? '', /ETag/);
  t.equal(
    (await fetch(`${base}/health`, { headers: { Origin: 'http://localhost:5173' } })).headers.get(
      'access-control-allow-origin',
    ),
    'http://localhost:5173',
    'every listed origin',
  );
});

t.test("the server's own origin (its web UI) always works", async (t) => {
  for (const origin of [`http://127.0.0.1:${svc.port}`, `http://localhost:${svc.port}`]) {
    const r = await fetch(`${base}/fs/secret.md`, {
      method: 'PUT',
      headers: { Origin: origin, Authorization: 'User alice', 'Sec-Fetch-Site': 'same-origin' },
      body: 'alice private words\n',
    });
    t.equal(r.status, 200, origin);
  }
});

t.test('clients without Origin (curl, SDKs, the CLI) work as before', async (t) => {
  const r = await fetch(`${base}/fs//home/alice/secret.md`);
  t.equal(r.status, 200, 'no credentials is root, as the contract says');
  t.equal(r.headers.get('access-control-allow-origin'), null);
});

t.test('a malformed SERVICE_CORS_ORIGINS entry refuses to start with one line', async (t) => {
  for (const bad of ['https://ok.example,https://app.example.com/path', '*', 'app.example.com']) {
    const r = await runServe({
      SERVICE_DATA_DIR: tempDataDir(t),
      SERVICE_LISTEN: '127.0.0.1:0',
      SERVICE_CORS_ORIGINS: bad,
    });
    t.not(r.code, 0, `'${bad}' refused`);
    t.equal(r.stderr.trim().split('\n').length, 1, 'one line');
    t.match(r.stderr, /SERVICE_CORS_ORIGINS/);
  }
});

t.test('local mode refuses a non-loopback listen address', async (t) => {
  for (const cmd of ['serve', 'http']) {
    const r = await runServe({ SERVICE_DATA_DIR: tempDataDir(t), SERVICE_LISTEN: '0.0.0.0:0' }, cmd);
    t.not(r.code, 0, `mdvfs ${cmd} exits non-zero`);
    const lines = r.stderr.trim().split('\n');
    t.equal(lines.length, 1, `one line: ${r.stderr}`);
    t.match(lines[0], /0\.0\.0\.0/);
    t.match(lines[0], /SERVICE_MODE=hosted/);
    t.match(lines[0], /127\.0\.0\.1/);
  }
});

t.test('hosted mode: every request needs a bearer secret, CORS is permissive', async (t) => {
  const hosted = await startService(t, { env: { SERVICE_MODE: 'hosted' } });
  const anon = client(hosted);
  const denied = await fetch(`${hosted.base}/fs/`, { headers: { Origin: EVIL } });
  t.equal(denied.status, 401, 'anonymous is not root');
  t.equal(denied.headers.get('access-control-allow-origin'), '*');
  // Hosted bootstrap needs the one-time secret of the data dir (test/http/hosted-bootstrap.test.ts).
  t.equal((await anon.post('/auth/bootstrap', { username: 'admin' })).status, 401, 'not without the secret');
  const secret = readFileSync(path.join(hosted.dataDir, 'bootstrap-secret'), 'utf8').trim();
  const boot = await anon.post('/auth/bootstrap', { username: 'admin', secret });
  t.equal(boot.status, 200, boot.text);
  const admin = client(hosted, { auth: `Bearer ${boot.json.token}` });
  t.equal((await admin.post('/admin/users', { name: 'x', is_agent: false })).status, 200);
  t.equal((await client(hosted, { auth: 'User x' }).get('/fs/')).status, 401, 'User x needs no secret: off');
  t.equal((await client(hosted, { auth: 'User root' }).get('/fs/')).status, 401);
  const ok = await fetch(`${hosted.base}/fs/hosted.md`, {
    method: 'PUT',
    headers: { Origin: EVIL, Authorization: `Bearer ${boot.json.token}` },
    body: 'ok',
  });
  t.equal(ok.status, 200, 'a bearer token works from any origin');
  t.equal(ok.headers.get('access-control-allow-origin'), '*');
  t.equal(
    (
      await request(hosted, 'GET', '/fs/hosted.md', {
        auth: `Bearer ${boot.json.token}`,
        headers: { host: 'notes.example.com' },
      })
    ).status,
    200,
    'any Host',
  );
  t.equal((await anon.get('/openapi.json')).status, 401, '/openapi.json follows SERVICE_ANONYMOUS=deny');
  t.equal((await admin.get('/openapi.json')).status, 200);
  t.equal((await anon.get('/health')).status, 200, '/health needs nothing');
});

t.test('explicit SERVICE_ANONYMOUS / SERVICE_USER_AUTH still win in hosted mode', async (t) => {
  const hosted = await startService(t, {
    env: { SERVICE_MODE: 'hosted', SERVICE_ANONYMOUS: 'root', SERVICE_USER_AUTH: 'on' },
  });
  t.equal((await client(hosted).get('/auth/whoami')).json.user, 'root');
});

t.test('a daemon started by the CLI in a local environment: hosted serve still denies anonymous', async (t) => {
  const cli = await cliEnv(t);
  const who = await cli.run(['whoami']);
  t.equal(who.code, 0, 'the CLI started a background daemon (local mode, anonymous = root)');
  const daemonPid = await cli.daemonPid();
  const hosted = await startService(t, { dataDir: cli.dataDir, env: { SERVICE_MODE: 'hosted' } });
  t.match(hosted.stderr(), /already serves/, 'serve reuses the running daemon');
  t.equal(await cli.daemonPid(), daemonPid);
  const anon = await client(hosted).get('/fs//');
  t.equal(anon.status, 401, "the HTTP server's policy is in force, not the daemon's environment");
  t.equal((await client(hosted, { auth: 'User root' }).get('/fs//')).status, 401, 'and the User scheme is off');
  t.match((await cli.run(['whoami'])).stdout, /root/, 'the local CLI is still root');
  // The same with the older switch: an explicit SERVICE_ANONYMOUS=deny on the server (one serve
  // per data dir: the first goes before the second starts).
  await hosted.stop();
  const strict = await startService(t, { dataDir: cli.dataDir, env: { SERVICE_ANONYMOUS: 'deny' } });
  t.equal((await client(strict).get('/fs//')).status, 401, 'SERVICE_ANONYMOUS=deny of the server holds');
});

/** Runs `mdvfs serve` (or `http`) expecting it to refuse to start; resolves with its exit code and stderr. */
function runServe(env: Record<string, string>, cmd = 'serve'): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    // Own process group: if it starts after all (a failure), teardown of the group stops what it spawned.
    const p = spawn(process.execPath, [CLI, cmd], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
      detached: true,
    });
    let stderr = '';
    p.stderr.setEncoding('utf8');
    p.stderr.on('data', (s: string) => (stderr += s));
    const timer = setTimeout(() => {
      try {
        process.kill(-p.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }, 10_000);
    p.on('error', reject);
    // 'exit', not 'close': a serve that did start has children (own process groups) holding stderr.
    p.on('exit', (code) => {
      clearTimeout(timer);
      setTimeout(() => resolve({ code, stderr }), 50);
    });
  });
}
