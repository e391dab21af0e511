// /openapi.json describes every registered express route, and every described operation is served.
import t from 'tap';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DIST, client, startService } from '../helpers/http.js';

const svc = await startService(t);
const root = client(svc);
const doc = (await root.get('/openapi.json')).json;

interface Layer {
  route?: { path: string; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
}

t.test('document shape', async (t) => {
  t.equal(doc.openapi, '3.1.0');
  t.type(doc.info.title, 'string');
  t.ok(Object.keys(doc.paths).length >= 25);
  for (const [p, item] of Object.entries<Record<string, { responses?: object; operationId?: string }>>(doc.paths)) {
    for (const [m, op] of Object.entries(item)) {
      t.ok(op.responses && Object.keys(op.responses).length > 0, `${m} ${p} has responses`);
      t.type(op.operationId, 'string');
    }
  }
  const ids = Object.values<Record<string, { operationId: string }>>(doc.paths).flatMap((i) => Object.values(i).map((o) => o.operationId));
  t.equal(new Set(ids).size, ids.length, 'operationIds are unique');
});

t.test('every registered route is described, and every description is registered', async (t) => {
  const { createApp } = (await import(pathToFileURL(path.join(DIST, 'http', 'app.js')).href)) as typeof import('../../http/app.js');
  const { connectDaemon } = (await import(pathToFileURL(path.join(DIST, 'daemon', 'rpc', 'connect.js')).href)) as typeof import('../../daemon/rpc/connect.js');
  const { httpSettingsFromEnv } = (await import(pathToFileURL(path.join(DIST, 'daemon', 'rpc', 'settings.js')).href)) as typeof import('../../daemon/rpc/settings.js');
  const daemon = await connectDaemon({ dataDir: svc.dataDir, spawn: false });
  t.teardown(() => daemon.close());
  const app = createApp(daemon, { settings: httpSettingsFromEnv({ SERVICE_LISTEN: '127.0.0.1:0' }), log: () => {} });
  const registered = new Set<string>();
  const walk = (stack: Layer[]) => {
    for (const layer of stack) {
      if (layer.route) {
        for (const [m, on] of Object.entries(layer.route.methods)) if (on && m !== '_all') registered.add(`${m} ${layer.route.path}`);
      } else if (layer.handle?.stack) walk(layer.handle.stack);
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack);
  const described = new Set<string>();
  for (const item of Object.values<Record<string, { 'x-express-path': string }>>(doc.paths)) {
    for (const [m, op] of Object.entries(item)) described.add(`${m} ${op['x-express-path']}`);
  }
  // /mcp belongs to the MCP issue and documents itself through MCP.
  const ours = [...registered].filter((r) => !/ \/mcp/.test(r));
  t.ok(ours.length >= 30, `${ours.length} routes registered`);
  t.same(ours.filter((r) => !described.has(r)), [], 'every route is in /openapi.json');
  t.same([...described].filter((d) => !registered.has(d)), [], 'every operation in /openapi.json is a route');
});

t.test('every described operation answers (never 404 ENOSYS or 405)', async (t) => {
  for (const [p, item] of Object.entries<Record<string, unknown>>(doc.paths)) {
    for (const m of Object.keys(item)) {
      const url = p.replace('{path}', 'x.md').replace('{name}', 'nobody').replace('{group}', 'nogroup').replace('{id}', 'nows');
      const r = await root.req(m.toUpperCase(), url);
      t.not(r.status, 405, `${m} ${url}`);
      t.not(r.json?.code, 'ENOSYS', `${m} ${url}`);
    }
  }
});

t.test('/openapi.json follows SERVICE_ANONYMOUS=deny, like every route but /health', async (t) => {
  const strict = await startService(t, { env: { SERVICE_ANONYMOUS: 'deny' } });
  const anon = client(strict);
  const denied = await anon.get('/openapi.json');
  t.equal(denied.status, 401);
  t.equal(denied.json.code, 'EAUTH');
  t.equal(denied.json.paths, undefined, 'no document');
  t.equal((await anon.get('/health')).status, 200);
  const boot = await anon.post('/auth/bootstrap', { username: 'admin' });
  t.equal((await client(strict, { auth: `Bearer ${boot.json.token}` }).get('/openapi.json')).json.openapi, '3.1.0', 'with a token it is served');
});
