/**
 * The 11 MCP tools. Each is one daemon call: the daemon resolves paths for the caller (relative
 * paths land in the caller's home, or the delegate's) and checks every permission, so nothing here
 * decides who may do what. Failures come back as `isError` results with the daemon's message and
 * code, the same pair REST puts in its `{error, code}` body.
 */
import type { McpServer, RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Caller } from '../daemon/rpc/client.js';
import { LIST_PAGE_MAX, type CommitRecord, type DirEntry } from '../daemon/rpc/protocol.js';
import { VfsError, toWireError } from '../daemon/errors.js';
import type { ToolTable } from './tool-calls.js';

export type RequestExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;
/** Picks the daemon caller (credentials) for one MCP request. */
export type CallerFor = (extra: RequestExtra) => Caller;

// ---------- results ----------

/** A tool failure as an `isError` result; the text is the daemon's message (it starts with the code). */
export function toolError(err: unknown): CallToolResult {
  if (!(err instanceof VfsError)) process.stderr.write(`mdvfs-mcp: tool failed: ${err instanceof Error ? err.message : String(err)}\n`);
  const w = toWireError(err);
  const text = w.message.startsWith(`${w.code}:`) ? w.message : `${w.code}: ${w.message}`;
  // structuredContent would have to match the success schema, so the code travels in _meta.
  // (Keys in the order the SDK's result schema writes them: _meta, content, isError.)
  return { _meta: { code: w.code, error: w.message }, content: [{ type: 'text', text }], isError: true };
}

function ok(text: string, data: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text }], structuredContent: data };
}

async function attempt(work: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await work();
  } catch (err) {
    return toolError(err);
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** File bytes as text when they are UTF-8 (markdown is), else base64 so nothing is mangled. */
export function decodeContent(data: Buffer): { content: string; encoding: 'utf8' | 'base64' } {
  try {
    return { content: utf8.decode(data), encoding: 'utf8' };
  } catch {
    return { content: data.toString('base64'), encoding: 'base64' };
  }
}

// ---------- schemas ----------

const pathArg = z.string().max(65536);
const pathDesc =
  'Path as you would write it in a shell: relative (resolved in your home directory, or the delegated user\'s home), "~/..." or absolute ("/...").';

const entrySchema = z.object({
  name: z.string(),
  is_dir: z.boolean(),
  is_symlink: z.boolean(),
  mode: z.string(),
  uid: z.number(),
  gid: z.number(),
  size: z.number(),
  modified: z.number(),
});

const commitSchema = z.object({
  hash: z.string(),
  message: z.string(),
  author: z.string(),
  on_behalf_of: z.string().optional(),
  timestamp: z.number(),
  parent: z.string().nullable(),
  changes: z.number(),
});

// Structured content is built field by field so the daemon can grow its records without breaking
// clients that validate against these (closed) output schemas.
function entryOut(e: DirEntry): z.infer<typeof entrySchema> {
  return { name: e.name, is_dir: e.is_dir, is_symlink: e.is_symlink, mode: e.mode, uid: e.uid, gid: e.gid, size: e.size, modified: e.modified };
}

function commitOut(c: CommitRecord): z.infer<typeof commitSchema> {
  const out: z.infer<typeof commitSchema> = { hash: c.hash, message: c.message, author: c.author, timestamp: c.timestamp, parent: c.parent, changes: c.changes };
  if (c.on_behalf_of !== undefined) out.on_behalf_of = c.on_behalf_of;
  return out;
}

function commitLine(c: CommitRecord): string {
  const who = c.on_behalf_of === undefined ? c.author : `${c.author} (for ${c.on_behalf_of})`;
  return `${c.hash}  ${new Date(c.timestamp * 1000).toISOString()}  ${who}  ${c.message}`;
}

function typeFlag(type: 'f' | 'd' | 'l' | 'file' | 'directory' | 'symlink' | undefined): 'f' | 'd' | 'l' | undefined {
  if (type === undefined) return undefined;
  return type === 'file' ? 'f' : type === 'directory' ? 'd' : type === 'symlink' ? 'l' : type;
}

// ---------- registration ----------

/** server.registerTool, also keeping each registration in `tools` (for mcp/tool-calls.ts). */
function recorder(server: McpServer, tools: ToolTable): McpServer['registerTool'] {
  const record = (name: string, config: never, cb: never): RegisteredTool => {
    const tool = server.registerTool(name, config, cb);
    tools.set(name, tool);
    return tool;
  };
  return record as unknown as McpServer['registerTool'];
}

/**
 * Registers read_file, write_file, list_directory, search_files, find_files, create_directory,
 * delete_file, move_file, commit, get_history, revert; returns their registrations by name.
 */
export function registerTools(server: McpServer, callerFor: CallerFor): ToolTable {
  const tools: ToolTable = new Map();
  const registerTool = recorder(server, tools);
  registerTool(
    'read_file',
    {
      title: 'Read file',
      description:
        'Read the complete contents of a file. Returns the text (UTF-8; other bytes come back base64-encoded with encoding "base64") ' +
        'and an etag you can pass to write_file as expected_etag to avoid overwriting someone else\'s change.',
      inputSchema: { path: pathArg.describe(pathDesc) },
      outputSchema: { path: z.string(), content: z.string(), encoding: z.enum(['utf8', 'base64']), size: z.number(), etag: z.string() },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async ({ path }, extra) =>
      attempt(async () => {
        const { result, data } = await callerFor(extra).request('fs.read', { path });
        const body = decodeContent(data);
        return {
          content: [{ type: 'text', text: body.content }],
          structuredContent: { path: result.path, content: body.content, encoding: body.encoding, size: result.size, etag: result.etag },
        };
      }),
  );

  registerTool(
    'write_file',
    {
      title: 'Write file',
      description:
        'Create a file or replace its whole contents with `content` (UTF-8 text). Missing parent directories are created. ' +
        'Pass expected_etag (from read_file) to write only if the file has not changed since you read it (EPRECOND otherwise). ' +
        'Changes are not versioned until you call commit.',
      inputSchema: {
        path: pathArg.describe(pathDesc),
        content: z.string().describe('The complete new contents of the file.'),
        expected_etag: z.string().optional().describe('Only write if the file\'s current etag equals this (optimistic locking).'),
      },
      outputSchema: { path: z.string(), size: z.number(), etag: z.string(), created: z.boolean() },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    async ({ path, content, expected_etag }, extra) =>
      attempt(async () => {
        const params = expected_etag === undefined ? { path } : { path, if_match: expected_etag };
        const r = await callerFor(extra).call('fs.write', params, { data: Buffer.from(content, 'utf8') });
        return ok(`${r.created ? 'Created' : 'Wrote'} ${r.path} (${r.size} bytes)`, { path: r.path, size: r.size, etag: r.etag, created: r.created });
      }),
  );

  registerTool(
    'list_directory',
    {
      title: 'List directory',
      description:
        'List the entries of a directory (name order) with type, octal mode, owner uid/gid, size and modification time. ' +
        `Without a path, lists your home directory. At most ${LIST_PAGE_MAX} entries per call (\`limit\`); a longer listing ends with ` +
        '`truncated: true` and a `next_cursor` to pass as `cursor` for the next page.',
      inputSchema: {
        path: pathArg.optional().describe(`${pathDesc} Defaults to your home directory.`),
        limit: z.number().int().min(1).max(LIST_PAGE_MAX).optional().describe(`Most entries to return (default and maximum ${LIST_PAGE_MAX}).`),
        cursor: z.string().max(2048).optional().describe('The next_cursor of the previous page, to continue a truncated listing.'),
      },
      outputSchema: { path: z.string(), entries: z.array(entrySchema), truncated: z.boolean().optional(), next_cursor: z.string().optional() },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async ({ path, limit, cursor }, extra) =>
      attempt(async () => {
        const r = await callerFor(extra).call('fs.list', { path: path ?? '', ...(limit === undefined ? {} : { limit }), ...(cursor === undefined ? {} : { cursor }) });
        const lines = r.entries.map((e) => {
          const kind = e.is_dir ? '[DIR] ' : e.is_symlink ? '[LINK]' : '[FILE]';
          return `${kind} ${e.mode} ${String(e.size).padStart(8)}  ${e.name}${e.is_dir ? '/' : ''}`;
        });
        if (r.truncated === true) lines.push(`(truncated after ${r.entries.length} entries: call again with cursor "${r.next_cursor ?? ''}" for more)`);
        const out = { path: r.path, entries: r.entries.map(entryOut), ...(r.truncated === true ? { truncated: true, next_cursor: r.next_cursor } : {}) };
        return ok(`${r.path}:\n${lines.length ? lines.join('\n') : '(empty)'}`, out);
      }),
  );

  registerTool(
    'search_files',
    {
      title: 'Search file contents',
      description:
        'Search file contents for a regular expression (JavaScript RegExp syntax), like `grep -rn`. Returns each matching line with ' +
        'its file and line number. Searches your home directory by default, recursively. Files and directories you cannot read are skipped.',
      inputSchema: {
        pattern: z.string().min(1).max(10000).describe('Regular expression, e.g. "TODO|FIXME" or "^# ".'),
        path: pathArg.optional().describe(`Directory or file to search. ${pathDesc} Defaults to your home directory.`),
        recursive: z.boolean().optional().describe('Descend into subdirectories (default true).'),
        ignore_case: z.boolean().optional().describe('Case-insensitive match (default false).'),
        max_results: z.number().int().min(1).max(100000).optional().describe('Stop after this many matching lines.'),
      },
      outputSchema: {
        results: z.array(z.object({ file: z.string(), line_num: z.number(), line: z.string() })),
        count: z.number(),
        truncated: z.boolean(),
      },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async ({ pattern, path, recursive, ignore_case, max_results }, extra) =>
      attempt(async () => {
        const params: { pattern: string; path: string; recursive: boolean; ignore_case?: boolean; max_results?: number } = {
          pattern,
          path: path ?? '',
          recursive: recursive ?? true,
        };
        if (ignore_case !== undefined) params.ignore_case = ignore_case;
        if (max_results !== undefined) params.max_results = max_results;
        const r = await callerFor(extra).call('search.grep', params);
        const results = r.results.map((m) => ({ file: m.file, line_num: m.line_num, line: m.line }));
        const text = results.length ? results.map((m) => `${m.file}:${m.line_num}: ${m.line}`).join('\n') : 'No matches.';
        return ok(r.truncated ? `${text}\n(truncated after ${r.count} results)` : text, { results, count: r.count, truncated: r.truncated });
      }),
  );

  registerTool(
    'find_files',
    {
      title: 'Find files by name',
      description:
        'Find files and directories whose name matches a glob (e.g. "*.md", "notes-202?-*"), like `find -name`, under a directory ' +
        '(your home by default, recursively). Returns matching paths. Places you cannot read are skipped.',
      inputSchema: {
        name: z.string().max(4096).optional().describe('Glob matched against each entry\'s name; omit to list everything.'),
        path: pathArg.optional().describe(`Directory to search. ${pathDesc} Defaults to your home directory.`),
        type: z.enum(['f', 'd', 'l', 'file', 'directory', 'symlink']).optional().describe('Only files (f), directories (d) or symlinks (l).'),
      },
      outputSchema: { results: z.array(z.string()), count: z.number(), truncated: z.boolean().optional() },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async ({ name, path, type }, extra) =>
      attempt(async () => {
        const params: { path: string; name?: string; type?: 'f' | 'd' | 'l' } = { path: path ?? '' };
        if (name !== undefined) params.name = name;
        const t = typeFlag(type);
        if (t !== undefined) params.type = t;
        const r = await callerFor(extra).call('search.find', params);
        const text = r.results.length ? r.results.join('\n') : 'No matches.';
        if (r.truncated) return ok(`${text}\n(truncated after ${r.count} results; narrow the path or the name)`, { results: r.results, count: r.count, truncated: true });
        return ok(text, { results: r.results, count: r.count });
      }),
  );

  registerTool(
    'create_directory',
    {
      title: 'Create directory',
      description: 'Create a directory, including any missing parents (like `mkdir -p`). Succeeds if it already exists.',
      inputSchema: { path: pathArg.describe(pathDesc) },
      outputSchema: { path: z.string(), created: z.boolean() },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async ({ path }, extra) =>
      attempt(async () => {
        const r = await callerFor(extra).call('fs.mkdir', { path, parents: true });
        return ok(r.created ? `Created directory ${r.path}` : `Directory ${r.path} already exists`, { path: r.path, created: r.created });
      }),
  );

  registerTool(
    'delete_file',
    {
      title: 'Delete file or directory',
      description:
        'Delete a file or symlink, or an empty directory. With recursive: true, delete a directory and everything in it ' +
        '(all or nothing: if any entry may not be deleted, nothing is). Committed versions stay in the history and can be restored with revert.',
      inputSchema: {
        path: pathArg.describe(pathDesc),
        recursive: z.boolean().optional().describe('Delete a non-empty directory with all its contents (default false).'),
      },
      outputSchema: { path: z.string(), deleted: z.number() },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    async ({ path, recursive }, extra) =>
      attempt(async () => {
        const r = await callerFor(extra).call('fs.delete', recursive === undefined ? { path } : { path, recursive });
        return ok(`Deleted ${r.path}${r.deleted > 1 ? ` (${r.deleted} entries)` : ''}`, { path: r.path, deleted: r.deleted });
      }),
  );

  registerTool(
    'move_file',
    {
      title: 'Move or rename',
      description:
        'Move or rename a file or directory (like `mv`). If the destination is an existing directory, the source moves into it ' +
        '(destination/<name of source>). An existing destination file is replaced; an existing non-empty directory is not.',
      inputSchema: {
        source: pathArg.describe(`What to move. ${pathDesc}`),
        destination: pathArg.describe(`The new path. ${pathDesc}`),
      },
      outputSchema: { source: z.string(), destination: z.string() },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
    async ({ source, destination }, extra) =>
      attempt(async () => {
        const r = await callerFor(extra).call('fs.move', { src: source, dst: destination, into_dir: true });
        return ok(`Moved ${r.src} to ${r.dst}`, { source: r.src, destination: r.dst });
      }),
  );

  registerTool(
    'commit',
    {
      title: 'Commit',
      description:
        'Record the current state of the filesystem as a new version (like `git commit -a`) with a message, so it can be found with ' +
        'get_history and restored with revert. Returns the short hash of the new commit.',
      inputSchema: { message: z.string().min(1).max(100000).describe('What changed and why.') },
      outputSchema: commitSchema.shape,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    async ({ message }, extra) =>
      attempt(async () => {
        const c = await callerFor(extra).call('vcs.commit', { message });
        return ok(`Committed ${c.hash}: ${c.message} (${c.changes} changes)`, commitOut(c));
      }),
  );

  registerTool(
    'get_history',
    {
      title: 'Get history',
      description:
        'List commits, newest first: hash, time, author and message. Optionally only commits that touched a path, and at most `limit` of them.',
      inputSchema: {
        path: pathArg.optional().describe(`Only commits that changed this file or directory. ${pathDesc}`),
        limit: z.number().int().min(1).max(10000).optional().describe('At most this many commits (newest first).'),
      },
      outputSchema: { commits: z.array(commitSchema) },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async ({ path, limit }, extra) =>
      attempt(async () => {
        const params: { path?: string; limit?: number } = {};
        if (path !== undefined) params.path = path;
        if (limit !== undefined) params.limit = limit;
        const r = await callerFor(extra).call('vcs.log', params);
        return ok(r.commits.length ? r.commits.map(commitLine).join('\n') : 'No commits yet.', { commits: r.commits.map(commitOut) });
      }),
  );

  registerTool(
    'revert',
    {
      title: 'Revert to a commit',
      description:
        'Restore the filesystem to the state of an earlier commit (hash or unique prefix of at least 4 hex digits, from get_history; ' +
        'or HEAD~n / <hash>~n, n commits before it, e.g. HEAD~1 for the one before the last). ' +
        'Uncommitted changes are committed first and the restore is recorded as a new commit, so nothing is lost.',
      inputSchema: { hash: z.string().min(4).max(64).describe('Commit hash or unique prefix, or HEAD~n / <hash>~n.') },
      outputSchema: { hash: z.string(), reverted_to: z.string(), saved: z.string().nullable(), commit: commitSchema },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
    async ({ hash }, extra) =>
      attempt(async () => {
        const r = await callerFor(extra).call('vcs.revert', { hash });
        const saved = r.saved === null ? '' : ` (uncommitted changes saved as ${r.saved})`;
        return ok(`Reverted to ${r.reverted_to}; new commit ${r.hash}${saved}`, { hash: r.hash, reverted_to: r.reverted_to, saved: r.saved, commit: commitOut(r.commit) });
      }),
  );

  return tools;
}
