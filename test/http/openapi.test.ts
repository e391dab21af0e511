// /openapi.json describes every registered express route, and every described operation is served.
import t from 'tap';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createConfig, lintFromString } from '@redocly/openapi-core';
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
  const ids = Object.values<Record<string, { operationId: string }>>(doc.paths).flatMap((i) =>
    Object.values(i).map((o) => o.operationId),
  );
  t.equal(new Set(ids).size, ids.length, 'operationIds are unique');
});

t.test('every registered route is described, and every description is registered', async (t) => {
  const { createApp } = (await import(
    pathToFileURL(path.join(DIST, 'http', 'app.js')).href
  )) as typeof import('../../http/app.js');
  const { connectDaemon } = (await import(
    pathToFileURL(path.join(DIST, 'daemon', 'rpc', 'connect.js')).href
  )) as typeof import('../../daemon/rpc/connect.js');
  const { httpSettingsFromEnv } = (await import(
    pathToFileURL(path.join(DIST, 'daemon', 'rpc', 'settings.js')).href
  )) as typeof import('../../daemon/rpc/settings.js');
  const daemon = await connectDaemon({ dataDir: svc.dataDir, spawn: false });
  t.teardown(() => daemon.close());
  const app = createApp(daemon, { settings: httpSettingsFromEnv({ SERVICE_LISTEN: '127.0.0.1:0' }), log: () => {} });
  const registered = new Set<string>();
  const walk = (stack: Layer[]) => {
    for (const layer of stack) {
      if (layer.route) {
        for (const [m, on] of Object.entries(layer.route.methods))
          if (on && m !== '_all') registered.add(`${m} ${layer.route.path}`);
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
  t.same(
    ours.filter((r) => !described.has(r)),
    [],
    'every route is in /openapi.json',
  );
  t.same(
    [...described].filter((d) => !registered.has(d)),
    [],
    'every operation in /openapi.json is a route',
  );
});

t.test('every described operation answers (never 404 ENOSYS or 405)', async (t) => {
  for (const [p, item] of Object.entries<Record<string, unknown>>(doc.paths)) {
    for (const m of Object.keys(item)) {
      if (p === '/events') continue; // a stream that never ends: test/http/events.test.ts
      const url = p
        .replace('{path}', 'x.md')
        .replace('{name}', 'nobody')
        .replace('{group}', 'nogroup')
        .replace('{id}', 'nows');
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
  t.equal(
    (await client(strict, { auth: `Bearer ${boot.json.token}` }).get('/openapi.json')).json.openapi,
    '3.1.0',
    'with a token it is served',
  );
});

/**
 * The document's response schema for a real answer: the operation (by method and described path),
 * the status (or its shared error response), and the content type must all be described.
 */
type Schema = Record<string, unknown>;
function responseFor(
  method: string,
  described: string,
  status: number,
  contentType: string | undefined,
): { schema?: Schema; problem?: string } {
  const op = doc.paths[described]?.[method];
  if (!op) return { problem: `${method} ${described} is not described` };
  let resp = op.responses[String(status)] ?? op.responses[`${String(status)[0]}XX`];
  if (!resp) return { problem: `${method} ${described} does not describe status ${status}` };
  if (resp.$ref) resp = doc.components.responses[resp.$ref.split('/').pop()];
  if (!resp.content)
    return contentType === undefined
      ? {}
      : { problem: `${method} ${described} ${status} describes no body, got ${contentType}` };
  const type = (contentType ?? '').split(';')[0]!.trim();
  const media = resp.content[type] ?? resp.content['*/*'];
  if (!media)
    return {
      problem: `${method} ${described} ${status} does not describe ${type} (only ${Object.keys(resp.content).join(', ')})`,
    };
  return { schema: media.schema };
}

/**
 * A schema of the document for ajv: its `#/components` references point into the document added as
 * `openapi.json`. With `close`, every object schema without an `additionalProperties` of its own gets
 * `false`: an answer may then carry nothing undocumented.
 */
function forAjv(s: unknown, close: boolean): unknown {
  if (Array.isArray(s)) return s.map((v) => forAjv(v, close));
  if (s === null || typeof s !== 'object') return s;
  const o = Object.fromEntries(
    Object.entries(s).map(([k, v]) => [
      k,
      k === 'properties'
        ? Object.fromEntries(Object.entries(v as object).map(([pk, pv]) => [pk, forAjv(pv, close)]))
        : forAjv(v, close),
    ]),
  );
  if (close && o.properties !== undefined && o.additionalProperties === undefined) o.additionalProperties = false;
  if (typeof o.$ref === 'string') o.$ref = o.$ref.replace(/^#/, 'openapi.json#');
  return o;
}

t.test('real answers match the response schemas of the document (ajv, JSON Schema 2020-12)', async (t) => {
  const { Ajv2020 } = await import('ajv/dist/2020.js');
  // ajv-formats is CommonJS: its function is the module itself, which TypeScript types as a namespace.
  const addFormats = (await import('ajv-formats')).default as unknown as (ajv: InstanceType<typeof Ajv2020>) => void;
  // Two validators: the document as served (what a client's validator sees: its oneOf must pick exactly
  // one alternative), and the same closed (every field an answer carries is documented).
  const validators = [false, true].map((close) => {
    const ajv = new Ajv2020({ allErrors: true, strict: true, strictTypes: false });
    addFormats(ajv);
    ajv.addFormat('binary', true);
    ajv.addVocabulary(['components']);
    ajv.addSchema({ $id: 'openapi.json', components: { schemas: forAjv(doc.components.schemas, close) } });
    return { ajv, close };
  });
  const boot = await root.post('/auth/bootstrap', { username: 'oa-admin' });
  const admin = client(svc, { auth: `Bearer ${boot.json.token}` });
  await admin.post('/admin/users', { name: 'oa-user' });
  const user = client(svc, { auth: 'User oa-user' });

  const check = async (
    method: string,
    described: string,
    res: Promise<import('../helpers/http.js').Res>,
    status: number,
  ) => {
    const r = await res;
    const what = `${method.toUpperCase()} ${described} -> ${r.status}`;
    t.equal(r.status, status, `${what}: ${r.text.slice(0, 200)}`);
    const ct = r.headers['content-type'];
    const { schema, problem } = responseFor(method, described, r.status, r.body.length === 0 ? undefined : ct);
    if (problem) return t.fail(`${what}: ${problem}`);
    if (!schema || !/json/.test(String(ct))) return t.pass(`${what}: ${String(ct)} is described`);
    for (const { ajv, close } of validators) {
      const validate = ajv.compile(forAjv(schema, close) as Schema);
      const ok = validate(r.json);
      t.ok(
        ok,
        `${what} matches its schema${close ? ', with nothing undocumented' : ''}${ok ? '' : `: ${ajv.errorsText(validate.errors)} in ${JSON.stringify(r.json).slice(0, 300)}`}`,
      );
    }
  };

  await check('get', '/health', root.get('/health'), 200);
  await check('get', '/auth/whoami', admin.get('/auth/whoami'), 200);
  await check('get', '/openapi.json', root.get('/openapi.json'), 200);
  // Writes: a file, a directory, a symlink.
  await check('put', '/fs/{path}', root.put('/fs//oa/notes/a.md', '# A\n\nhello world\n'), 200);
  await check('put', '/fs/{path}', root.put('/fs//oa/dir', '', { headers: { 'x-service-type': 'directory' } }), 200);
  await check(
    'put',
    '/fs/{path}',
    root.put('/fs//oa/link.md', 'notes/a.md', { headers: { 'x-service-type': 'symlink' } }),
    200,
  );
  // Reads, listings and stats.
  await check('get', '/fs/{path}', root.get('/fs//oa/notes/a.md'), 200);
  await check('get', '/fs/{path}', root.get('/fs//oa'), 200);
  await check('get', '/fs/{path}', root.get('/fs//oa?limit=1'), 200);
  await check('get', '/fs', admin.get('/fs'), 200);
  await check('get', '/fs/{path}', root.get('/fs//oa/notes/a.md?stat=true'), 200);
  await check('get', '/fs/{path}', root.get('/fs//oa/dir?stat=true'), 200);
  await check('get', '/fs/{path}', root.get('/fs//oa/link.md?stat=true&nofollow=true'), 200);
  // Search, copy/move, version control.
  await check('get', '/search/grep', root.get('/search/grep?pattern=hello&path=/oa&recursive=true'), 200);
  await check('get', '/search/find', root.get('/search/find?path=/oa&name=*.md'), 200);
  await check('post', '/fs/{path}', root.post('/fs//oa/notes/a.md?op=copy&dst=/oa/b.md'), 200);
  await check('post', '/vcs/commit', root.post('/vcs/commit', { message: 'openapi' }), 200);
  await check('get', '/vcs/log', root.get('/vcs/log'), 200);
  await check('get', '/vcs/status', root.get('/vcs/status?format=json'), 200);
  await check('get', '/vcs/diff', root.get('/vcs/diff?format=json'), 200);
  await check('get', '/tree/{path}', root.get('/tree//oa?format=json'), 200);
  await check('get', '/tree/{path}', root.get('/tree//oa'), 200);
  await check('delete', '/fs/{path}', root.del('/fs//oa/b.md'), 200);
  await check('delete', '/fs/{path}', root.del('/fs//oa/dir?recursive=true'), 200);
  // Errors.
  await check('get', '/fs/{path}', root.get('/fs//oa/missing.md'), 404);
  await check('put', '/fs/{path}', root.put('/fs//oa/private.md?mode=0600', 'secret'), 200);
  await check('get', '/fs/{path}', user.get('/fs//oa/private.md'), 403);
  await check('get', '/health', root.get('/health', { headers: { host: 'evil.example' } }), 403);
  await check('get', '/auth/whoami', client(svc, { auth: 'Bearer nope' }).get('/auth/whoami'), 401);
  await check('put', '/fs/{path}', root.put('/fs//oa/notes/a.md', 'x', { headers: { 'if-none-match': '*' } }), 412);
  await check('delete', '/fs/{path}', root.del('/fs//oa/notes'), 409);
  await check('get', '/search/grep', root.get('/search/grep'), 400);
  await check(
    'get',
    '/fs/{path}',
    root.get('/fs//oa/notes/a.md', {
      headers: { 'if-none-match': (await root.get('/fs//oa/notes/a.md')).headers.etag as string },
    }),
    304,
  );
});

t.test('Redocly lint (recommended rules) finds nothing in the document', async (t) => {
  const config = await createConfig({ extends: ['recommended'] });
  const problems = await lintFromString({ source: JSON.stringify(doc, null, 2), absoluteRef: '/openapi.json', config });
  t.same(
    problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer ?? '?'}`),
    [],
    'no errors and no warnings',
  );
});
