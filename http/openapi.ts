/**
 * The OpenAPI 3.1 description served at `/openapi.json`. Every operation names the express route
 * that serves it (`x-express-path`), and a test checks both directions: every registered route is
 * described and every described operation is registered.
 */

type Json = Record<string, unknown>;

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Json, description = 'success'): Json => ({ description, content: { 'application/json': { schema } } });
const errors = (...statuses: number[]): Json =>
  Object.fromEntries(statuses.map((s) => [String(s), { $ref: `#/components/responses/E${s}` }]));
const q = (name: string, description: string, schema: Json = { type: 'string' }, required = false): Json => ({ name, in: 'query', required, description, schema });
const p = (name: string, description: string): Json => ({ name, in: 'path', required: true, description, schema: { type: 'string' } });
const body = (properties: Json, required: string[]): Json => ({
  required: true,
  content: { 'application/json': { schema: { type: 'object', properties, required, additionalProperties: true } } },
});
const bool = { type: 'boolean' };
const str = { type: 'string' };
const int = { type: 'integer' };

interface Op {
  method: 'get' | 'post' | 'put' | 'delete';
  /** The express route path that serves this operation. */
  express: string;
  /** The OpenAPI path(s): a wildcard route is described once for the home (`/fs/`) and once with `{path}`. */
  paths: string[];
  spec: Json;
}

const fsPathParam = p('path', 'File path; may contain `/`. `notes/a.md` is relative to the caller\'s home; a leading `/` (written `//` or `%2F` after the prefix) makes it absolute.');
const common = [400, 401, 403, 404, 500];

const ops: Op[] = [
  { method: 'get', express: '/health', paths: ['/health'], spec: { summary: 'Service health (no credentials needed)', security: [], responses: { '200': json(ref('Health')), ...errors(403, 500) } } },
  { method: 'post', express: '/auth/login', paths: ['/auth/login'], spec: { summary: 'Check a user name and return its identity (groups are gids, primary first)', requestBody: body({ username: str }, ['username']), responses: { '200': json(ref('WhoAmI')), ...errors(400, 401, 404, 500) } } },
  { method: 'get', express: '/auth/whoami', paths: ['/auth/whoami'], spec: { summary: 'The authenticated caller', responses: { '200': json(ref('WhoAmI')), ...errors(401, 403, 500) } } },
  { method: 'post', express: '/auth/bootstrap', paths: ['/auth/bootstrap'], spec: { summary: 'Create the first admin (wheel) user and return its token; only while no user but root exists', requestBody: body({ username: str }, ['username']), responses: { '200': json({ type: 'object', properties: { username: str, uid: int, token: str } }), ...errors(400, 401, 409, 500) } } },

  { method: 'get', express: '/admin/users', paths: ['/admin/users'], spec: { summary: 'List users (never tokens)', responses: { '200': json({ type: 'object', properties: { users: { type: 'array', items: ref('User') } } }), ...errors(401, 403, 500) } } },
  { method: 'post', express: '/admin/users', paths: ['/admin/users'], spec: { summary: 'Create a user or agent', requestBody: body({ name: str, is_agent: bool }, ['name']), responses: { '200': json(ref('User')), ...errors(400, 401, 403, 409, 500) } } },
  { method: 'delete', express: '/admin/users/:name', paths: ['/admin/users/{name}'], spec: { summary: 'Delete a user', parameters: [p('name', 'user name')], responses: { '200': json({ type: 'object', properties: { deleted: str } }), ...errors(400, 401, 403, 404, 500) } } },
  { method: 'post', express: '/admin/users/:name/tokens', paths: ['/admin/users/{name}/tokens'], spec: { summary: 'Issue or regenerate the user\'s token; the raw token is shown only in this response', parameters: [p('name', 'user name')], responses: { '200': json({ type: 'object', properties: { name: str, token: str } }), ...errors(400, 401, 403, 404, 500) } } },
  { method: 'get', express: '/admin/groups', paths: ['/admin/groups'], spec: { summary: 'List groups', responses: { '200': json({ type: 'object', properties: { groups: { type: 'array', items: ref('Group') } } }), ...errors(401, 403, 500) } } },
  { method: 'post', express: '/admin/groups', paths: ['/admin/groups'], spec: { summary: 'Create a group', requestBody: body({ name: str }, ['name']), responses: { '200': json(ref('Group')), ...errors(400, 401, 403, 409, 500) } } },
  { method: 'post', express: '/admin/users/:name/groups/:group', paths: ['/admin/users/{name}/groups/{group}'], spec: { summary: 'Add a user to a group', parameters: [p('name', 'user name'), p('group', 'group name')], responses: { '200': json(ref('Group')), ...errors(400, 401, 403, 404, 500) } } },
  { method: 'delete', express: '/admin/users/:name/groups/:group', paths: ['/admin/users/{name}/groups/{group}'], spec: { summary: 'Remove a user from a group', parameters: [p('name', 'user name'), p('group', 'group name')], responses: { '200': json(ref('Group')), ...errors(400, 401, 403, 404, 500) } } },
  { method: 'post', express: '/admin/chmod{/*path}', paths: ['/admin/chmod/{path}'], spec: { summary: 'chmod (owner, wheel or root)', parameters: [fsPathParam], requestBody: body({ mode: { type: 'string', pattern: '^[0-7]{1,4}$' } }, ['mode']), responses: { '200': json({ type: 'object', properties: { path: str, mode: str } }), ...errors(...common) } } },
  { method: 'post', express: '/admin/chown{/*path}', paths: ['/admin/chown/{path}'], spec: { summary: 'chown (only root gives files to another user; owners may chgrp to their own groups)', parameters: [fsPathParam], requestBody: body({ owner: str, group: str }, []), responses: { '200': json({ type: 'object', properties: { path: str, uid: int, gid: int } }), ...errors(...common) } } },

  { method: 'get', express: '/workspaces', paths: ['/workspaces'], spec: { summary: 'List workspaces', responses: { '200': json({ type: 'object', properties: { workspaces: { type: 'array', items: ref('Workspace') } } }), ...errors(401, 403, 500) } } },
  { method: 'post', express: '/workspaces', paths: ['/workspaces'], spec: { summary: 'Create a workspace rooted at an absolute path', requestBody: body({ name: str, root_path: str }, ['name', 'root_path']), responses: { '200': json(ref('Workspace')), ...errors(...common, 409) } } },
  { method: 'post', express: '/workspaces/:id/tokens', paths: ['/workspaces/{id}/tokens'], spec: { summary: 'Issue a workspace secret against an existing agent token; use it as `Bearer <secret>` with `X-Service-Workspace: <id>`', parameters: [p('id', 'workspace UUID')], requestBody: body({ name: str, agent_token: str }, ['name', 'agent_token']), responses: { '200': json({ type: 'object', properties: { workspace_id: str, name: str, secret: str, token_id: str } }), ...errors(...common) } } },
  { method: 'get', express: '/workspaces/:id/tokens', paths: ['/workspaces/{id}/tokens'], spec: { summary: "List a workspace's secrets (id, name, agent, created; never the secret): its owner, root or wheel", parameters: [p('id', 'workspace UUID')], responses: { '200': json({ type: 'object', properties: { workspace_id: str, tokens: { type: 'array', items: { type: 'object', properties: { id: str, name: str, agent: str, created: { type: 'integer' } } } } } }), ...errors(...common) } } },
  { method: 'delete', express: '/workspaces/:id/tokens/:tokenId', paths: ['/workspaces/{id}/tokens/{tokenId}'], spec: { summary: 'Revoke one workspace secret by its id', parameters: [p('id', 'workspace UUID'), p('tokenId', 'the token id from the listing')], responses: { '200': json({ type: 'object', properties: { workspace_id: str, revoked: str } }), ...errors(...common) } } },

  {
    method: 'get', express: '/fs{/*path}', paths: ['/fs', '/fs/{path}'],
    spec: {
      summary: 'Read a file (raw bytes, ETag), list a directory (JSON), or stat (`?stat=true`); `/fs` alone is the home directory',
      parameters: [q('stat', 'answer the stat record instead of the content', bool), q('follow', 'with stat: follow a final symlink (by default a symlink is described as itself, like lstat)', bool), q('nofollow', 'with stat: describe a final symlink as itself (the default)', bool), q('limit', 'directory: at most this many entries per page (default and maximum 10,000)', int), q('cursor', 'directory: the `next_cursor` of the previous page', str), { name: 'If-None-Match', in: 'header', required: false, schema: str, description: 'ETag; a match answers 304' }],
      responses: {
        '200': { description: 'file content, listing or stat record', headers: { ETag: { schema: str } }, content: { 'text/markdown': { schema: str }, 'text/plain': { schema: str }, 'application/octet-stream': { schema: { type: 'string', format: 'binary' } }, 'application/json': { schema: { oneOf: [ref('Listing'), ref('Stat')] } } } },
        '304': { description: 'not modified' },
        ...errors(...common),
      },
    },
  },
  {
    method: 'put', express: '/fs{/*path}', paths: ['/fs/{path}'],
    spec: {
      summary: 'Write a file (raw body, any content type; parents created), or mkdir -p with `X-Service-Type: directory`, or a symlink with `X-Service-Type: symlink` (body = target)',
      parameters: [
        { name: 'X-Service-Type', in: 'header', required: false, schema: { type: 'string', enum: ['file', 'directory', 'symlink'] } },
        { name: 'If-Match', in: 'header', required: false, schema: str, description: 'write only if the current ETag matches (else 412)' },
        { name: 'If-None-Match', in: 'header', required: false, schema: { type: 'string', enum: ['*'] }, description: 'create only (else 412), for a file or a directory' },
        q('mode', 'octal mode for a new file or directory', { type: 'string', pattern: '^[0-7]{1,4}$' }),
      ],
      requestBody: { required: false, content: { '*/*': { schema: { type: 'string', format: 'binary' } } } },
      responses: { '200': json({ oneOf: [ref('WriteResult'), ref('MkdirResult'), ref('SymlinkResult')] }), ...errors(...common, 409, 412, 413) },
    },
  },
  { method: 'delete', express: '/fs{/*path}', paths: ['/fs/{path}'], spec: { summary: 'Delete a file, an empty directory, or a subtree with `?recursive=true` (all-or-nothing)', parameters: [q('recursive', 'delete a non-empty directory', bool)], responses: { '200': json({ type: 'object', required: ['path', 'deleted'], properties: { path: str, deleted: { type: 'integer', description: 'entries removed' } } }), ...errors(...common, 409) } } },
  { method: 'post', express: '/fs{/*path}', paths: ['/fs/{path}'], spec: { summary: 'Copy or move: `?op=copy|move&dst=<path>`', parameters: [q('op', 'copy or move', { type: 'string', enum: ['copy', 'move'] }, true), q('dst', 'destination path (resolved like the source)', str, true), q('overwrite', 'replace an existing destination', bool), q('recursive', 'copy: include subdirectories (default true)', bool)], responses: { '200': json({ type: 'object', required: ['src', 'dst'], properties: { src: str, dst: str, copied: { type: 'integer', description: 'copy: entries copied' } } }), ...errors(...common, 409) } } },

  { method: 'get', express: '/search/grep', paths: ['/search/grep'], spec: { summary: 'Regex search over file contents (JavaScript RegExp; bounded in time)', parameters: [q('pattern', 'regular expression', str, true), q('path', 'file or directory (default home)'), q('recursive', 'include subdirectories', bool), q('ignore_case', 'case-insensitive', bool), q('max_results', 'stop after this many matches', int), q('offset', 'pass over this many matches first (the next_offset of the previous page)', int)], responses: { '200': json(ref('GrepResult')), ...errors(...common) } } },
  { method: 'get', express: '/search/find', paths: ['/search/find'], spec: { summary: 'Find by name (glob)', parameters: [q('path', 'directory to search (default home)'), q('name', 'glob on the entry name, e.g. `*.md`'), q('type', 'f, d or l', { type: 'string', enum: ['f', 'd', 'l'] })], responses: { '200': json({ type: 'object', required: ['results', 'count'], properties: { results: { type: 'array', items: str }, count: int, truncated: bool } }), ...errors(...common) } } },
  { method: 'get', express: '/tree{/*path}', paths: ['/tree', '/tree/{path}'], spec: { summary: 'Directory tree like the Unix `tree` command', parameters: [q('depth', 'maximum depth', int), q('format', 'text (default) or json', { type: 'string', enum: ['text', 'json'] })], responses: { '200': { description: 'tree view (text, or JSON with `?format=json`)', content: { 'text/plain': { schema: str }, 'application/json': { schema: ref('Tree') } } }, ...errors(...common) } } },

  { method: 'post', express: '/vcs/commit', paths: ['/vcs/commit'], spec: { summary: 'Commit the working tree', requestBody: body({ message: str }, ['message']), responses: { '200': json(ref('Commit')), ...errors(400, 401, 403, 500) } } },
  { method: 'get', express: '/vcs/log', paths: ['/vcs/log'], spec: { summary: 'Commits, newest first', parameters: [q('path', 'only commits touching this path'), q('limit', 'at most this many', int)], responses: { '200': json({ type: 'object', required: ['commits'], properties: { commits: { type: 'array', items: ref('Commit') }, truncated: bool } }), ...errors(400, 401, 403, 500) } } },
  { method: 'post', express: '/vcs/revert', paths: ['/vcs/revert'], spec: { summary: 'Restore a commit\'s snapshot as a new commit (uncommitted changes are committed first)', requestBody: body({ hash: str }, ['hash']), responses: { '200': json({ type: 'object', properties: { hash: str, reverted_to: str, saved: { type: ['string', 'null'] }, commit: ref('Commit') } }), ...errors(...common, 409) } } },
  { method: 'get', express: '/vcs/status', paths: ['/vcs/status'], spec: { summary: 'Changes since the last commit (plain text; `?format=json` for JSON)', parameters: [q('format', 'text or json', { type: 'string', enum: ['text', 'json'] })], responses: { '200': { description: 'status', content: { 'text/plain': { schema: str }, 'application/json': { schema: ref('Status') } } }, ...errors(400, 401, 403, 500) } } },
  { method: 'get', express: '/vcs/diff', paths: ['/vcs/diff'], spec: { summary: 'Unified diff between commits or against the working tree', parameters: [q('from', 'commit prefix (default HEAD)'), q('to', 'commit prefix (default the working tree)'), q('path', 'limit to this path'), q('format', 'text or json', { type: 'string', enum: ['text', 'json'] })], responses: { '200': { description: 'unified diff (text, or JSON with `?format=json`)', content: { 'text/x-diff': { schema: str }, 'application/json': { schema: { type: 'object', required: ['diff'], properties: { diff: str, truncated: { type: 'boolean', description: 'present (true) when the diff was cut' } } } } } }, ...errors(...common) } } },

  { method: 'get', express: '/openapi.json', paths: ['/openapi.json'], spec: { summary: 'This document (follows SERVICE_ANONYMOUS=deny like every route but /health)', responses: { '200': json({ type: 'object' }), ...errors(401, 403, 500) } } },
  // The change feed (http/events.ts); self-contained on purpose.
  {
    method: 'get', express: '/events', paths: ['/events'],
    spec: {
      summary: 'Server-sent events: every change the caller may read, attributed (`by`, `on_behalf_of`); resumable with `Last-Event-ID`',
      description: 'A `text/event-stream`. First `event: ready` (`{last_id, reset}`; `reset: true` when the events after the given id are no longer kept: reload), then one `event: change` per change with `id:` and data `{id, time, paths, by?, on_behalf_of?}` (paths as the caller names them; `paths: []` means anything may have changed: reload). `event: end` when the credentials stop being valid. Filtered by the daemon with the caller\'s own permissions.',
      parameters: [{ name: 'Last-Event-ID', in: 'header', required: false, schema: str, description: 'resume after this event id' }, q('last_event_id', 'the same, for clients that cannot set headers', str)],
      responses: { '200': { description: 'the event stream', content: { 'text/event-stream': { schema: str } } }, ...errors(400, 401, 403, 500) },
    },
  },
];

const nsTime = { type: 'string', pattern: '^-?[0-9]+$', description: 'nanoseconds since the epoch, as a decimal string' };
const mode = { type: 'string', pattern: '^[0-7]{4}$', description: 'four octal digits, e.g. `0644`' };

/**
 * Response schemas, each declared once. `required` lists what every answer carries, so the `oneOf`
 * alternatives exclude each other (a listing has `entries`, a stat has `kind`; a write has `etag`,
 * a mkdir `created`, a symlink `target`). Objects stay open: a later field is not a breaking change.
 */
const schemas: Json = {
  Error: { type: 'object', required: ['error', 'code'], properties: { error: str, code: { type: 'string', description: 'ENOENT, EACCES, EEXIST, EINVAL, EAUTH, ...' } } },
  Health: { type: 'object', required: ['status', 'version'], properties: { status: str, version: str, uptime: { type: 'number' }, inodes: int, commits: int, objects: int, needs_bootstrap: bool } },
  WhoAmI: { type: 'object', required: ['user', 'uid', 'gid', 'groups', 'home'], properties: { user: str, username: str, uid: int, gid: int, groups: { type: 'array', items: int, description: 'gids, primary first' }, home: str, is_agent: bool, is_admin: bool, on_behalf_of: str, workspace: ref('Workspace') } },
  User: { type: 'object', required: ['name', 'uid', 'gid'], properties: { name: str, uid: int, gid: int, groups: { type: 'array', items: int }, home: str, is_agent: bool, is_admin: bool, has_token: bool, token: { type: 'string', description: 'only in the answer that creates an agent: its raw token, shown once' } } },
  Group: { type: 'object', required: ['name', 'gid'], properties: { name: str, gid: int, members: { type: 'array', items: str } } },
  Workspace: { type: 'object', required: ['id', 'name', 'root_path'], properties: { id: { type: 'string', format: 'uuid' }, name: str, root_path: str, owner: str, created: int } },
  DirEntry: {
    type: 'object',
    required: ['name', 'is_dir', 'is_symlink', 'mode', 'uid', 'gid', 'size', 'modified', 'inode_id', 'mtime_ns'],
    properties: { name: str, is_dir: bool, is_symlink: bool, mode, uid: int, gid: int, size: int, modified: { type: 'integer', description: 'Unix seconds' }, inode_id: int, mtime_ns: nsTime, atime_ns: nsTime, ctime_ns: nsTime },
  },
  Listing: { type: 'object', required: ['path', 'entries'], properties: { path: str, entries: { type: 'array', items: ref('DirEntry') }, truncated: { type: 'boolean', description: 'present (true) when the page was cut at `limit`' }, next_cursor: str } },
  Stat: {
    type: 'object',
    required: ['path', 'inode_id', 'kind', 'size', 'mode', 'uid', 'gid', 'nlink', 'created', 'modified', 'changed', 'accessed', 'mtime_ns', 'atime_ns', 'ctime_ns'],
    properties: {
      path: str, inode_id: int, kind: { type: 'string', enum: ['file', 'directory', 'symlink'] }, size: int, mode, uid: int, gid: int, nlink: int,
      created: int, modified: { type: 'integer', description: 'Unix seconds' }, changed: int, accessed: int, mtime_ns: nsTime, atime_ns: nsTime, ctime_ns: nsTime,
      etag: { type: 'string', description: 'files: content id' }, target: { type: 'string', description: 'symlinks: link target' },
    },
  },
  WriteResult: { type: 'object', required: ['path', 'size', 'etag'], properties: { path: str, size: int, etag: str } },
  MkdirResult: { type: 'object', required: ['path', 'created'], properties: { path: str, created: { type: 'boolean', description: 'false when the directory existed' } } },
  SymlinkResult: { type: 'object', required: ['path', 'target'], properties: { path: str, target: str } },
  GrepResult: { type: 'object', required: ['results', 'count', 'truncated'], properties: { results: { type: 'array', items: { type: 'object', required: ['file', 'line_num', 'line'], properties: { file: str, line_num: int, line: str } } }, count: int, truncated: bool, skipped_binary: { type: 'integer', description: 'binary files (a NUL byte in the first 8 KiB) not searched; present when not 0' }, next_offset: { type: 'integer', description: 'the offset of the next page, when more matches follow' } } },
  Tree: { type: 'object', required: ['text', 'directories', 'files'], properties: { text: str, directories: int, files: int, truncated: bool } },
  Commit: { type: 'object', required: ['hash', 'message', 'author', 'timestamp', 'parent', 'changes'], properties: { hash: str, message: str, author: str, on_behalf_of: str, workspace: { type: 'string', description: 'the workspace it was made in, if any' }, timestamp: int, parent: { type: ['string', 'null'] }, changes: int } },
  Status: { type: 'object', properties: { added: { type: 'array', items: str }, modified: { type: 'array', items: str }, deleted: { type: 'array', items: str }, clean: bool, head: { type: ['string', 'null'] }, text: str } },
};

const responses: Json = Object.fromEntries(
  [
    [400, 'bad request (EINVAL, ENOTDIR, EISDIR, ...)'],
    [401, 'missing or invalid credentials (EAUTH)'],
    [403, 'permission denied (EACCES, EPERM), or refused by the browser guard (a foreign Host or Origin, EACCES)'],
    [404, 'not found (ENOENT)'],
    [409, 'conflict (EEXIST, ENOTEMPTY)'],
    [412, 'precondition failed (EPRECOND)'],
    [413, 'body too large (EFBIG)'],
    [500, 'internal error (EIO)'],
  ].map(([s, d]) => [`E${s}`, { description: d, content: { 'application/json': { schema: ref('Error') } } }]),
);

/** Builds the document; `server` is the base URL shown in it. */
export function openApiDocument(server?: string): Json {
  const paths: Record<string, Record<string, Json>> = {};
  for (const op of ops) {
    for (const path of op.paths) {
      const item = (paths[path] ??= {});
      const parameters = [...(path.includes('{path}') && !op.express.startsWith('/admin/') ? [fsPathParam] : []), ...((op.spec.parameters as Json[] | undefined) ?? [])];
      item[op.method] = { ...op.spec, operationId: `${op.method}${path.replace(/[^a-zA-Z]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`, ...(parameters.length ? { parameters } : {}), 'x-express-path': op.express };
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'mdvfs',
      version: '0.1.0',
      license: { name: 'MIT', identifier: 'MIT' },
      description: 'A versioned markdown filesystem: files, Unix permissions, users and agents, commits, search, workspaces. Errors are JSON `{error, code}`. The MCP endpoint lives at `/mcp` (streamable HTTP) and is described by MCP itself.',
    },
    ...(server ? { servers: [{ url: server }] } : {}),
    security: [{}, { user: [] }, { bearer: [] }],
    paths,
    components: {
      schemas,
      responses,
      securitySchemes: {
        user: { type: 'apiKey', in: 'header', name: 'Authorization', description: '`User <name>` (disabled by SERVICE_USER_AUTH=off)' },
        bearer: { type: 'http', scheme: 'bearer', description: 'an API token; with `X-Service-Workspace: <uuid>`, a workspace secret' },
      },
    },
  };
}
