// A recorded sample of REST and MCP answers (status, content type, body), compared on every run, so a
// refactor of how operations are declared changes no answer by accident. Volatile values (times,
// hashes, tokens, ids) are replaced by placeholders. Re-record on purpose with
// `MDVFS_GOLDEN=record npx tap test/e2e/golden-answers.test.ts` and review the diff of the JSON file.
import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { request, startService } from '../helpers/http.js';
import { call, httpClient } from '../helpers/mcp.js';

const FILE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'golden-answers.json');
const RECORD = process.env.MDVFS_GOLDEN === 'record';

const VOLATILE = new Set([
  'timestamp',
  'created',
  'modified',
  'changed',
  'accessed',
  'mtime_ns',
  'atime_ns',
  'ctime_ns',
  'birthtime_ns',
  'uptime',
  'token',
  'secret',
  'hash',
  'parent',
  'id',
  'workspace_id',
  'token_id',
  'revoked',
  'reverted_to',
  'saved',
  'inode_id',
  'pid',
  'next_cursor',
  'version',
  'mcp-session-id',
]);

/** Placeholders for what changes from run to run; everything else must match exactly. */
function scrub(v: unknown, key = ''): unknown {
  if (VOLATILE.has(key) && (typeof v === 'string' || typeof v === 'number')) return `<${key}>`;
  if (typeof v === 'string') {
    return (
      v
        .replace(/\b[0-9a-f]{40,64}\b/g, '<hex>')
        .replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g, '<uuid>')
        .replace(/\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z\b/g, '<date>')
        .replace(/mdv_[A-Za-z0-9_-]+/g, '<token>')
        // a short hash where the history's text puts one (whatever its digits: 1 in 300 is all decimal)
        .replace(/^[0-9a-f]{7,12}(?= {2})/gm, '<short>')
        .replace(/(pass cursor )[0-9a-f]{7,12}\b/g, '$1<short>')
        .replace(/\b[0-9a-f]{7,12}\b/g, (m) => (/[a-f]/.test(m) && /\d/.test(m) ? '<short>' : m))
        .replace(/127\.0\.0\.1:\d+/g, '127.0.0.1:<port>')
        .replace(/\b1\d{9}\b/g, '<time>')
    );
  }
  if (Array.isArray(v)) return v.map((x) => scrub(x));
  if (v !== null && typeof v === 'object')
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, scrub(x, k)]));
  return v;
}

interface Entry {
  name: string;
  answer: unknown;
}
const got: Entry[] = [];

const svc = await startService(t, { env: { SERVICE_MODE: 'local' } });
const root = 'User root';

async function rest(
  name: string,
  method: string,
  p: string,
  opts: { auth?: string; body?: string | object; headers?: Record<string, string> } = {},
): Promise<void> {
  const r = await request(svc, method, p, {
    auth: opts.auth ?? root,
    ...(opts.body === undefined ? {} : { body: opts.body }),
    ...(opts.headers === undefined ? {} : { headers: opts.headers }),
  });
  const type = String(r.headers['content-type'] ?? '');
  got.push({
    name: `REST ${name}: ${method} ${p}`,
    answer: scrub({
      status: r.status,
      type,
      etag: r.headers.etag === undefined ? undefined : 'present',
      allow: r.headers.allow,
      body: r.json ?? r.text,
    }),
  });
}

// ---- REST: one request per route, successes and typical failures ----
await rest('health', 'GET', '/health');
await rest('bootstrap', 'POST', '/auth/bootstrap', { body: { username: 'admin' } });
await rest('whoami', 'GET', '/auth/whoami');
await rest('login', 'POST', '/auth/login', { body: { username: 'root' } });
await rest('add user', 'POST', '/admin/users', { body: { name: 'alice' } });
await rest('add agent', 'POST', '/admin/users', { body: { name: 'helper', is_agent: true } });
await rest('add user again', 'POST', '/admin/users', { body: { name: 'alice' } });
await rest('list users', 'GET', '/admin/users');
await rest('token', 'POST', '/admin/users/alice/tokens');
await rest('add group', 'POST', '/admin/groups', { body: { name: 'team' } });
await rest('list groups', 'GET', '/admin/groups');
await rest('member add', 'POST', '/admin/users/alice/groups/team');
await rest('member del', 'DELETE', '/admin/users/alice/groups/team');
await rest('user bad body', 'POST', '/admin/users', { body: { name: 3 } });
await rest('write', 'PUT', '/fs//notes/a.md', {
  body: '# A\nline one\nline two\n',
  headers: { 'content-type': 'text/markdown' },
});
await rest('write b', 'PUT', '/fs//notes/sub/b.md', { body: 'bee\n' });
await rest('read', 'GET', '/fs//notes/a.md');
await rest('read missing', 'GET', '/fs//notes/missing.md');
await rest('list', 'GET', '/fs//notes');
await rest('list page', 'GET', '/fs//notes?limit=1');
await rest('list bad limit', 'GET', '/fs//notes?limit=0');
await rest('stat', 'GET', '/fs//notes/a.md?stat=true');
await rest('mkdir', 'PUT', '/fs//notes/dir', { headers: { 'x-service-type': 'directory' } });
await rest('mkdir exists', 'PUT', '/fs//notes/dir', {
  headers: { 'x-service-type': 'directory', 'if-none-match': '*' },
});
await rest('symlink', 'PUT', '/fs//notes/link.md', { body: 'a.md', headers: { 'x-service-type': 'symlink' } });
await rest('stat link', 'GET', '/fs//notes/link.md?stat=true');
await rest('stat link follow', 'GET', '/fs//notes/link.md?stat=true&follow=true');
await rest('copy', 'POST', '/fs//notes/a.md?op=copy&dst=/notes/c.md');
await rest('move', 'POST', '/fs//notes/c.md?op=move&dst=/notes/d.md');
await rest('bad op', 'POST', '/fs//notes/a.md?op=frobnicate');
await rest('chmod', 'POST', '/admin/chmod//notes/a.md', { body: { mode: '0640' } });
await rest('chown', 'POST', '/admin/chown//notes/a.md', { body: { owner: 'alice' } });
await rest('chmod bad', 'POST', '/admin/chmod//notes/a.md', { body: {} });
await rest('grep', 'GET', '/search/grep?pattern=line&path=/notes&recursive=true');
await rest('grep bad', 'GET', '/search/grep?path=/notes');
await rest('find', 'GET', '/search/find?path=/notes&name=*.md');
await rest('find bad type', 'GET', '/search/find?path=/notes&type=x');
await rest('tree', 'GET', '/tree//notes');
await rest('tree json', 'GET', '/tree//notes?format=json');
await rest('status', 'GET', '/vcs/status');
await rest('status json', 'GET', '/vcs/status?format=json');
await rest('commit', 'POST', '/vcs/commit', { body: { message: 'first' } });
await rest('commit empty message', 'POST', '/vcs/commit', { body: {} });
await rest('write again', 'PUT', '/fs//notes/a.md', { body: '# A\nline one changed\nline two\n' });
await rest('diff', 'GET', '/vcs/diff');
await rest('diff json', 'GET', '/vcs/diff?format=json');
await rest('commit 2', 'POST', '/vcs/commit', { body: { message: 'second' } });
await rest('log', 'GET', '/vcs/log');
await rest('log limit', 'GET', '/vcs/log?limit=1');
await rest('log bad limit', 'GET', '/vcs/log?limit=x');
await rest('revert bad', 'POST', '/vcs/revert', { body: { hash: 'ffff0000' } });
await rest('workspace create', 'POST', '/workspaces', { body: { name: 'proj', root_path: '/notes' } });
await rest('workspaces', 'GET', '/workspaces');
await rest('delete', 'DELETE', '/fs//notes/d.md');
await rest('delete dir', 'DELETE', '/fs//notes/sub?recursive=true');
await rest('delete user', 'DELETE', '/admin/users/helper');
await rest('method not allowed', 'PATCH', '/vcs/log');
await rest('unknown route', 'GET', '/nope');
await rest('anonymous whoami', 'GET', '/auth/whoami', { auth: '' });
await rest('bad bearer', 'GET', '/auth/whoami', { auth: 'Bearer nope' });

// ---- MCP over HTTP with the SDK client ----
const { client } = await httpClient(
  t,
  { ...svc, url: new URL('/mcp', svc.base), stderr: svc.stderr },
  { authorization: root },
);
const tools = await client.listTools();
got.push({ name: 'MCP tools/list', answer: scrub(tools) });
async function mcp(name: string, tool: string, args: Record<string, unknown>): Promise<void> {
  got.push({ name: `MCP ${name}: ${tool}`, answer: scrub(await call(client, tool, args)) });
}
await mcp('read', 'read_file', { path: '/notes/a.md' });
await mcp('read lines', 'read_file', { path: '/notes/a.md', head: 1 });
await mcp('read missing', 'read_file', { path: '/notes/zzz.md' });
await mcp('write', 'write_file', { path: '/notes/m.md', content: 'mcp\n' });
await mcp('edit', 'edit_file', { path: '/notes/m.md', edits: [{ oldText: 'mcp', newText: 'MCP' }] });
await mcp('list', 'list_directory', { path: '/notes' });
await mcp('info', 'get_file_info', { path: '/notes/m.md' });
await mcp('search', 'search_files', { pattern: 'line', path: '/notes' });
await mcp('find', 'find_files', { path: '/notes', name: '*.md' });
await mcp('mkdir', 'create_directory', { path: '/notes/mdir' });
await mcp('move', 'move_file', { source: '/notes/m.md', destination: '/notes/mdir/m.md' });
await mcp('delete', 'delete_file', { path: '/notes/mdir/m.md' });
await mcp('commit', 'commit', { message: 'from mcp' });
await mcp('history', 'get_history', { limit: 2 });
await mcp('revert bad', 'revert', { hash: 'ffff0000' });

if (RECORD) {
  writeFileSync(FILE, `${JSON.stringify(got, null, 1)}\n`);
  t.pass(`recorded ${got.length} answers to ${FILE}`);
} else {
  const want = JSON.parse(readFileSync(FILE, 'utf8')) as Entry[];
  t.same(
    got.map((e) => e.name),
    want.map((e) => e.name),
    'the same requests',
  );
  for (const [i, e] of got.entries()) t.same(e.answer, want[i]?.answer, e.name);
}
