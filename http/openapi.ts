/**
 * The OpenAPI 3.1 description served at `/openapi.json`. Operations with a `rest` binding in the
 * operation table (daemon/rpc/protocol.ts) are generated from it: their parameters and answers come
 * from the same zod schemas the daemon checks. The composite `/fs` routes, `/health` and this
 * document are described here by hand. Every operation names the express route that serves it
 * (`x-express-path`), and a test checks both directions: every registered route is described and
 * every described operation is registered.
 */
import { z } from 'zod';
import { listingSchema, methods, pathStatSchema } from '../daemon/rpc/protocol.js';
import { VERSION } from '../daemon/rpc/version.js';
import { restOps, type ParamSpec, type RestOp } from './ops.js';

type Json = Record<string, unknown>;

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Json, description = 'success'): Json => ({
  description,
  content: { 'application/json': { schema } },
});
const errors = (...statuses: number[]): Json =>
  Object.fromEntries(statuses.map((s) => [String(s), { $ref: `#/components/responses/E${s}` }]));
const q = (name: string, description: string, schema: Json = { type: 'string' }, required = false): Json => ({
  name,
  in: 'query',
  required,
  description,
  schema,
});
const p = (name: string, description: string): Json => ({
  name,
  in: 'path',
  required: true,
  description,
  schema: { type: 'string' },
});
const body = (properties: Json, required: string[]): Json => ({
  required: true,
  content: { 'application/json': { schema: { type: 'object', properties, required, additionalProperties: true } } },
});
const bool = { type: 'boolean' };
const str = { type: 'string' };
const int = { type: 'integer' };

/**
 * JSON Schema of a zod schema for this document: records with an id (`.meta({ id })`) become
 * `#/components/schemas/<id>` (collected into `shared`); objects stay open, as the records are.
 */
function schemaOf(schema: z.ZodType, shared: Json): Json {
  const out = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Json;
  const defs = (out.$defs ?? {}) as Record<string, Json>;
  delete out.$defs;
  delete out.$schema;
  const fix = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(fix);
    if (v === null || typeof v !== 'object') return v;
    return Object.fromEntries(
      Object.entries(v).map(([k, x]) => [
        k,
        k === '$ref' && typeof x === 'string' ? x.replace('#/$defs/', '#/components/schemas/') : fix(x),
      ]),
    );
  };
  for (const [id, d] of Object.entries(defs)) shared[id] ??= fix(d);
  const id = z.globalRegistry.get(schema)?.id;
  if (typeof id === 'string') {
    shared[id] ??= fix(out);
    return ref(id);
  }
  return fix(out) as Json;
}

interface Op {
  method: 'get' | 'post' | 'put' | 'delete';
  /** The express route path that serves this operation. */
  express: string;
  /** The OpenAPI path(s): a wildcard route is described once for the home (`/fs/`) and once with `{path}`. */
  paths: string[];
  spec: Json;
}

const fsPathParam = p(
  'path',
  "File path; may contain `/`. `notes/a.md` is relative to the caller's home; a leading `/` (written `//` or `%2F` after the prefix) makes it absolute.",
);
const common = [400, 401, 403, 404, 500];

const ops: Op[] = [
  {
    method: 'get',
    express: '/health',
    paths: ['/health'],
    spec: {
      summary: 'Service health (no credentials needed)',
      security: [],
      responses: { '200': json(ref('Health')), ...errors(403, 500) },
    },
  },

  {
    method: 'get',
    express: '/fs{/*path}',
    paths: ['/fs', '/fs/{path}'],
    spec: {
      summary:
        'Read a file (raw bytes, ETag), list a directory (JSON), or stat (`?stat=true`); `/fs` alone is the home directory',
      parameters: [
        q('stat', 'answer the stat record instead of the content', bool),
        q(
          'follow',
          'with stat: follow a final symlink (by default a symlink is described as itself, like lstat)',
          bool,
        ),
        q('nofollow', 'with stat: describe a final symlink as itself (the default)', bool),
        q('limit', 'directory: at most this many entries per page (default and maximum 10,000)', int),
        q('cursor', 'directory: the `next_cursor` of the previous page', str),
        { name: 'If-None-Match', in: 'header', required: false, schema: str, description: 'ETag; a match answers 304' },
      ],
      responses: {
        '200': {
          description: 'file content, listing or stat record',
          headers: { ETag: { schema: str } },
          content: {
            'text/markdown': { schema: str },
            'text/plain': { schema: str },
            'application/octet-stream': { schema: { type: 'string', format: 'binary' } },
            'application/json': { schema: { oneOf: [ref('Listing'), ref('Stat')] } },
          },
        },
        '304': { description: 'not modified' },
        ...errors(...common),
      },
    },
  },
  {
    method: 'put',
    express: '/fs{/*path}',
    paths: ['/fs/{path}'],
    spec: {
      summary:
        'Write a file (raw body, any content type; parents created), or mkdir -p with `X-Service-Type: directory`, or a symlink with `X-Service-Type: symlink` (body = target)',
      parameters: [
        {
          name: 'X-Service-Type',
          in: 'header',
          required: false,
          schema: { type: 'string', enum: ['file', 'directory', 'symlink'] },
        },
        {
          name: 'If-Match',
          in: 'header',
          required: false,
          schema: str,
          description: 'write only if the current ETag matches (else 412)',
        },
        {
          name: 'If-None-Match',
          in: 'header',
          required: false,
          schema: { type: 'string', enum: ['*'] },
          description: 'create only (else 412), for a file or a directory',
        },
        q('mode', 'octal mode for a new file or directory', { type: 'string', pattern: '^[0-7]{1,4}$' }),
      ],
      requestBody: { required: false, content: { '*/*': { schema: { type: 'string', format: 'binary' } } } },
      responses: {
        '200': json({ oneOf: [ref('WriteResult'), ref('MkdirResult'), ref('SymlinkResult')] }),
        ...errors(...common, 409, 412, 413),
      },
    },
  },
  {
    method: 'delete',
    express: '/fs{/*path}',
    paths: ['/fs/{path}'],
    spec: {
      summary: 'Delete a file, an empty directory, or a subtree with `?recursive=true` (all-or-nothing)',
      parameters: [q('recursive', 'delete a non-empty directory', bool)],
      responses: {
        '200': json({
          type: 'object',
          required: ['path', 'deleted'],
          properties: { path: str, deleted: { type: 'integer', description: 'entries removed' } },
        }),
        ...errors(...common, 409),
      },
    },
  },
  {
    method: 'post',
    express: '/fs{/*path}',
    paths: ['/fs/{path}'],
    spec: {
      summary: 'Copy or move: `?op=copy|move&dst=<path>`',
      parameters: [
        q('op', 'copy or move', { type: 'string', enum: ['copy', 'move'] }, true),
        q('dst', 'destination path (resolved like the source)', str, true),
        q('overwrite', 'replace an existing destination', bool),
        q('recursive', 'copy: include subdirectories (default true)', bool),
      ],
      responses: {
        '200': json({
          type: 'object',
          required: ['src', 'dst'],
          properties: { src: str, dst: str, copied: { type: 'integer', description: 'copy: entries copied' } },
        }),
        ...errors(...common, 409),
      },
    },
  },

  {
    method: 'get',
    express: '/openapi.json',
    paths: ['/openapi.json'],
    spec: {
      summary: 'This document (follows SERVICE_ANONYMOUS=deny like every route but /health)',
      responses: { '200': json({ type: 'object' }), ...errors(401, 403, 500) },
    },
  },
  // Prometheus text (http/metrics.ts).
  {
    method: 'get',
    express: '/metrics',
    paths: ['/metrics'],
    spec: {
      summary: 'Prometheus metrics of the answering HTTP worker and of the daemon (root/wheel only)',
      responses: {
        '200': {
          description: 'the Prometheus text exposition format 0.0.4',
          content: { 'text/plain': { schema: str } },
        },
        ...errors(401, 403, 500),
      },
    },
  },
  // The change feed (http/events.ts); self-contained on purpose.
  {
    method: 'get',
    express: '/events',
    paths: ['/events'],
    spec: {
      summary:
        'Server-sent events: every change the caller may read, attributed (`by`, `on_behalf_of`); resumable with `Last-Event-ID`',
      description:
        "A `text/event-stream`. First `event: ready` (`{last_id, reset}`; `reset: true` when the events after the given id are no longer kept: reload), then one `event: change` per change with `id:` and data `{id, time, paths, by?, on_behalf_of?}` (paths as the caller names them; `paths: []` means anything may have changed: reload). `event: end` when the credentials stop being valid. Filtered by the daemon with the caller's own permissions.",
      parameters: [
        {
          name: 'Last-Event-ID',
          in: 'header',
          required: false,
          schema: str,
          description: 'resume after this event id',
        },
        q('last_event_id', 'the same, for clients that cannot set headers', str),
      ],
      responses: {
        '200': { description: 'the event stream', content: { 'text/event-stream': { schema: str } } },
        ...errors(400, 401, 403, 500),
      },
    },
  },
];

/**
 * Response schemas, each declared once. `required` lists what every answer carries, so the `oneOf`
 * alternatives exclude each other (a listing has `entries`, a stat has `kind`; a write has `etag`,
 * a mkdir `created`, a symlink `target`). Objects stay open: a later field is not a breaking change.
 */
const handSchemas: Json = {
  Error: {
    type: 'object',
    required: ['error', 'code'],
    properties: { error: str, code: { type: 'string', description: 'ENOENT, EACCES, EEXIST, EINVAL, EAUTH, ...' } },
  },
  WriteResult: { type: 'object', required: ['path', 'size', 'etag'], properties: { path: str, size: int, etag: str } },
  MkdirResult: {
    type: 'object',
    required: ['path', 'created'],
    properties: { path: str, created: { type: 'boolean', description: 'false when the directory existed' } },
  },
  SymlinkResult: { type: 'object', required: ['path', 'target'], properties: { path: str, target: str } },
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
    [429, 'a per-user cap is reached (ELIMIT): too many streams, workspaces or workspace secrets'],
    [500, 'internal error (EIO)'],
  ].map(([s, d]) => [`E${s}`, { description: d, content: { 'application/json': { schema: ref('Error') } } }]),
);

/** One table operation as an OpenAPI operation (see RestBinding). */
function fromTable(o: RestOp, shared: Json): Op {
  const b = o.binding;
  const wild = b.route.includes('{/*path}');
  const base = b.route.replace('{/*path}', '').replace(/:(\w+)/g, '{$1}');
  const homeToo = wild && !o.params.some((x) => x.name === 'path' && x.required);
  const paramSchema = (x: ParamSpec): Json => {
    const { description: _d, ...rest } = x.schema;
    return rest;
  };
  const parameters: Json[] = [];
  for (const x of o.params) {
    if (x.from === 'path' && !wild) parameters.push(p(x.name, x.description ?? x.name));
    if (x.from === 'query')
      parameters.push({
        name: x.name,
        in: 'query',
        required: x.required,
        ...(x.description === undefined ? {} : { description: x.description }),
        schema: paramSchema(x),
      });
  }
  if (b.text !== undefined)
    parameters.push(q('format', 'text (default) or json', { type: 'string', enum: ['text', 'json'] }));
  const bodyParams = o.params.filter((x) => x.from === 'body');
  const result = schemaOf(o.result, shared);
  const ok =
    b.text === undefined
      ? json(result)
      : {
          description: `${b.text.field} as text, or the JSON record with \`?format=json\``,
          content: {
            [(b.text.type ?? 'text/plain').split(';')[0]!]: { schema: str },
            'application/json': { schema: result },
          },
        };
  const spec: Json = {
    summary: b.summary,
    ...(parameters.length === 0 ? {} : { parameters }),
    ...(bodyParams.length === 0
      ? {}
      : {
          requestBody: body(
            Object.fromEntries(bodyParams.map((x) => [x.name, x.schema])),
            bodyParams.filter((x) => x.required).map((x) => x.name),
          ),
        }),
    responses: { '200': ok, ...errors(...b.errors) },
  };
  return {
    method: b.verb,
    express: b.route,
    paths: wild ? [...(homeToo ? [base] : []), `${base}/{path}`] : [base],
    spec,
  };
}

/** The table's operations and shared schemas, made once. */
let generated: { ops: Op[]; schemas: Json } | undefined;
function tableOps(): { ops: Op[]; schemas: Json } {
  if (generated !== undefined) return generated;
  const schemas: Json = { ...handSchemas };
  const list = restOps.map((o) => fromTable(o, schemas));
  for (const s of [listingSchema, pathStatSchema, methods['sys.health'].result]) schemaOf(s, schemas);
  generated = { ops: list, schemas };
  return generated;
}

/** Builds the document; `server` is the base URL shown in it. */
export function openApiDocument(server?: string): Json {
  const paths: Record<string, Record<string, Json>> = {};
  const table = tableOps();
  for (const op of [...ops, ...table.ops]) {
    for (const path of op.paths) {
      const item = (paths[path] ??= {});
      const parameters = [
        ...(path.includes('{path}') ? [fsPathParam] : []),
        ...((op.spec.parameters as Json[] | undefined) ?? []),
      ];
      item[op.method] = {
        ...op.spec,
        operationId: `${op.method}${path.replace(/[^a-zA-Z]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`,
        ...(parameters.length ? { parameters } : {}),
        'x-express-path': op.express,
      };
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'mdvfs',
      version: VERSION,
      license: { name: 'MIT', identifier: 'MIT' },
      description:
        'A versioned markdown filesystem: files, Unix permissions, users and agents, commits, search, workspaces. Errors are JSON `{error, code}`. The MCP endpoint lives at `/mcp` (streamable HTTP) and is described by MCP itself.',
    },
    ...(server ? { servers: [{ url: server }] } : {}),
    security: [{}, { user: [] }, { bearer: [] }],
    paths,
    components: {
      schemas: table.schemas,
      responses,
      securitySchemes: {
        user: {
          type: 'apiKey',
          in: 'header',
          name: 'Authorization',
          description: '`User <name>` (disabled by SERVICE_USER_AUTH=off)',
        },
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'an API token; with `X-Service-Workspace: <uuid>`, a workspace secret',
        },
      },
    },
  };
}
