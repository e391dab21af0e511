/**
 * The 12 MCP tools. Each is one daemon call (edit_file: a read, then a write conditional on it): the daemon resolves paths for the caller (relative
 * paths land in the caller's home, or the delegate's) and checks every permission, so nothing here
 * decides who may do what. Failures come back as `isError` results with the daemon's message and
 * code, the same pair REST puts in its `{error, code}` body.
 */
import type { McpServer, RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Caller } from '../daemon/rpc/client.js';
import { LIST_PAGE_MAX, type CommitRecord, type DirEntry, type Stat } from '../daemon/rpc/protocol.js';
import { VfsError, toWireError } from '../daemon/errors.js';
import type { RequestExtra, ToolTable } from './tool-calls.js';
import { ANSWER_MAX, applyEdits, fitAnswer, lineRange, unifiedDiff, utf8End } from './content.js';

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

/**
 * As attempt; a failed precondition (EPRECOND: the file is not the version the caller named) also
 * says the file's current etag, in the text and in `_meta.etag`, so the agent can read it again.
 */
async function attemptEtag(caller: Caller, path: string, work: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await work();
  } catch (err) {
    const res = toolError(err);
    if (!(err instanceof VfsError) || err.code !== 'EPRECOND') return res;
    try {
      const { result } = await caller.request('fs.read', { path, if_none_match: '*' });
      const first = res.content[0];
      if (first?.type === 'text') first.text += `; the file's etag is now ${result.etag} (read it again)`;
      res._meta = { ...res._meta, etag: result.etag };
    } catch {
      // gone or unreadable now: the error says enough
    }
    return res;
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

/** Matches search_files returns per call unless max_results says otherwise. */
export const SEARCH_DEFAULT = 200;

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

const statSchema = z.object({
  path: z.string(),
  inode_id: z.number(),
  kind: z.enum(['file', 'directory', 'symlink']),
  size: z.number(),
  mode: z.string(),
  uid: z.number(),
  gid: z.number(),
  nlink: z.number(),
  created: z.number(),
  modified: z.number(),
  changed: z.number(),
  accessed: z.number(),
  etag: z.string().optional(),
  target: z.string().optional(),
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

function statOut(st: Stat & { path: string }): z.infer<typeof statSchema> {
  const out: z.infer<typeof statSchema> = {
    path: st.path, inode_id: st.inode_id, kind: st.kind, size: st.size, mode: st.mode, uid: st.uid, gid: st.gid, nlink: st.nlink,
    created: st.created, modified: st.modified, changed: st.changed, accessed: st.accessed,
  };
  if (st.etag !== undefined) out.etag = st.etag;
  if (st.target !== undefined) out.target = st.target;
  return out;
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
 * Registers read_file, write_file, edit_file, list_directory, search_files, find_files, create_directory,
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
        'Read a file. The text block is the file\'s text (UTF-8; other bytes come back base64-encoded, encoding "base64"); structuredContent ' +
        `gives its path, size, etag and the byte range returned. At most ${ANSWER_MAX} bytes come back per call: a longer file is cut, ` +
        'with truncated: true and next_offset (and a note in a second text block); call again with offset = next_offset to read on. ' +
        'head or tail return only the first or last N lines; offset and length a byte range. Pass the etag as expected_etag to write_file ' +
        'or edit_file to avoid overwriting a change you have not seen, or to read_file while paging to keep all pages of one version.',
      inputSchema: {
        path: pathArg.describe(pathDesc),
        offset: z.number().int().min(0).optional().describe('First byte to return (default 0), e.g. the next_offset of the previous call.'),
        length: z.number().int().min(1).optional().describe(`Most bytes to return (default and at most ${ANSWER_MAX}).`),
        head: z.number().int().min(1).optional().describe('Return only the first N lines.'),
        tail: z.number().int().min(1).optional().describe('Return only the last N lines.'),
        expected_etag: z.string().max(200).optional().describe('Fail (EPRECOND) unless the file\'s etag is still this one.'),
        at: z.string().min(1).max(200).optional().describe('Read the file as it was at this commit (hash prefix, HEAD, HEAD~n; from get_history).'),
      },
      outputSchema: {
        path: z.string(),
        encoding: z.enum(['utf8', 'base64']),
        size: z.number(),
        etag: z.string(),
        offset: z.number(),
        length: z.number(),
        truncated: z.boolean().optional(),
        next_offset: z.number().optional(),
      },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async ({ path, offset, length, head, tail, expected_etag, at }, extra) => {
      const caller = callerFor(extra);
      // at a commit: the snapshot's bytes, cut as fs.read cuts them
      const read: typeof caller.request<'fs.read'> =
        at === undefined
          ? (m, p) => caller.request(m, p)
          : async (_m, p) => {
              const r = await caller.request('vcs.cat', { rev: at, path });
              const off = Math.min(p.offset ?? 0, r.data.length);
              return { result: r.result, data: p.length === undefined ? r.data.subarray(off) : r.data.subarray(off, off + p.length) };
            };
      return attemptEtag(caller, path, async () => {
        const lines = head !== undefined || tail !== undefined;
        if (head !== undefined && tail !== undefined) throw new VfsError('EINVAL', 'read', undefined, 'pass head or tail, not both');
        if (lines && (offset !== undefined || length !== undefined)) throw new VfsError('EINVAL', 'read', undefined, 'head and tail count lines from an end of the file; they do not go with offset or length');
        const cond = expected_etag === undefined ? {} : { if_match: expected_etag };
        let reply: Awaited<ReturnType<typeof caller.request<'fs.read'>>>;
        let bytes: Buffer;
        let start: number;
        let asked: number; // where the range asked for ends
        if (lines) {
          reply = await read('fs.read', { path, ...cond });
          const r = lineRange(reply.data, head, tail);
          start = r.start;
          asked = r.end;
          bytes = reply.data.subarray(start, utf8End(reply.data, start, Math.min(r.end, start + ANSWER_MAX)));
        } else {
          const want = Math.min(length ?? ANSWER_MAX, ANSWER_MAX);
          // One byte more than wanted, to see whether the cut splits a character.
          reply = await read('fs.read', { path, offset: offset ?? 0, length: want + 1, ...cond });
          start = Math.min(offset ?? 0, reply.result.size);
          asked = length === undefined ? reply.result.size : Math.min(reply.result.size, start + length);
          bytes = reply.data.subarray(0, utf8End(reply.data, 0, Math.min(want, reply.data.length)));
        }
        const { result } = reply;
        const end = start + bytes.length;
        const body = decodeContent(bytes);
        const cut = end < asked;
        const out = {
          path: result.path,
          encoding: body.encoding,
          size: result.size,
          etag: result.etag,
          offset: start,
          length: bytes.length,
          ...(cut ? { truncated: true } : {}),
          ...(end < result.size ? { next_offset: end } : {}),
        };
        const content: CallToolResult['content'] = [{ type: 'text', text: body.content }];
        if (start > 0 || end < result.size) {
          const more = end < result.size ? `; read on with offset ${end}` : '';
          const why = cut ? `; cut at ${ANSWER_MAX} bytes per answer` : '';
          content.push({ type: 'text', text: `[bytes ${start}-${end} of ${result.size} of ${result.path} (etag ${result.etag})${why}${more}]` });
        }
        // The content travels once (the text block); structuredContent carries what describes it.
        return { content, structuredContent: out };
      });
    },
  );

  registerTool(
    'write_file',
    {
      title: 'Write file',
      description:
        'Create a file or replace its whole contents with `content` (UTF-8 text). Missing parent directories are created. ' +
        'Pass expected_etag (from read_file) to write only if the file has not changed since you read it: otherwise nothing is written and ' +
        'the error (EPRECOND) gives the current etag. Changes are not versioned until you call commit.',
      inputSchema: {
        path: pathArg.describe(pathDesc),
        content: z.string().describe('The complete new contents of the file.'),
        expected_etag: z.string().max(200).optional().describe('Only write if the file\'s current etag equals this (the REST ETag; "*": only if it exists).'),
      },
      outputSchema: { path: z.string(), size: z.number(), etag: z.string(), created: z.boolean() },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    async ({ path, content, expected_etag }, extra) => {
      const caller = callerFor(extra);
      return attemptEtag(caller, path, async () => {
        const params = expected_etag === undefined ? { path } : { path, if_match: expected_etag };
        const r = await caller.call('fs.write', params, { data: Buffer.from(content, 'utf8') });
        return ok(`${r.created ? 'Created' : 'Wrote'} ${r.path} (${r.size} bytes)`, { path: r.path, size: r.size, etag: r.etag, created: r.created });
      });
    },
  );

  registerTool(
    'edit_file',
    {
      title: 'Edit file',
      description:
        'Replace exact text in a UTF-8 file. Each edit\'s oldText must occur exactly once (in the text left by the edits before it) and is ' +
        'replaced by newText; if any oldText is missing or occurs more than once, the call fails and nothing is written. Returns a ' +
        'git-style unified diff. dryRun: true returns the diff without writing. The file is written only if nobody changed it since it ' +
        'was read for the edit (EPRECOND otherwise: nothing written); pass expected_etag (from read_file) to also require that it is ' +
        'still the version you read. Changes are not versioned until you call commit.',
      inputSchema: {
        path: pathArg.describe(pathDesc),
        edits: z
          .array(z.object({ oldText: z.string().describe('Text to find: it must match exactly once.'), newText: z.string().describe('Text to put in its place.') }))
          .min(1)
          .max(1000)
          .describe('Replacements, applied in order.'),
        dryRun: z.boolean().optional().describe('Only show the diff; write nothing (default false).'),
        expected_etag: z.string().max(200).optional().describe('Only edit if the file\'s current etag equals this.'),
      },
      outputSchema: { path: z.string(), diff: z.string(), dry_run: z.boolean(), size: z.number(), etag: z.string(), truncated: z.boolean().optional() },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
    async ({ path, edits, dryRun, expected_etag }, extra) => {
      const caller = callerFor(extra);
      return attemptEtag(caller, path, async () => {
        const { result, data } = await caller.request('fs.read', expected_etag === undefined ? { path } : { path, if_match: expected_etag });
        const body = decodeContent(data);
        if (body.encoding !== 'utf8') throw new VfsError('EINVAL', 'edit', result.path, 'the file is not UTF-8 text; edit_file edits text');
        const after = applyEdits(body.content, edits, result.path);
        const { diff, truncated } = unifiedDiff(result.path, body.content, after);
        let size = result.size;
        let etag = result.etag;
        if (dryRun !== true && after !== body.content) {
          // Conditional on the version the edits were made to: a concurrent write fails this one (EPRECOND).
          const w = await caller.call('fs.write', { path, parents: false, if_match: result.etag }, { data: Buffer.from(after, 'utf8') });
          size = w.size;
          etag = w.etag;
        }
        let fence = '```';
        while (diff.includes(fence)) fence += '`';
        const head = dryRun === true ? `Dry run: ${result.path} was not changed.` : after === body.content ? `${result.path} is unchanged.` : `Edited ${result.path}.`;
        const out = { path: result.path, diff, dry_run: dryRun === true, size, etag, ...(truncated ? { truncated: true } : {}) };
        return ok(`${head}\n${fence}diff\n${diff}${fence}`, out);
      });
    },
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
    'get_file_info',
    {
      title: 'File information',
      description:
        'The stat record of a path: kind (file, directory or symlink), size, octal mode, owner uid/gid, link count, times (Unix seconds), ' +
        'the etag of a file (pass it as expected_etag to write_file or edit_file) and the target of a symlink. Like lstat: a symlink is ' +
        'described itself; with follow: true, what it points to.',
      inputSchema: {
        path: pathArg.describe(pathDesc),
        follow: z.boolean().optional().describe('Describe what a symlink points to instead of the link itself (default false).'),
      },
      outputSchema: statSchema.shape,
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async ({ path, follow }, extra) =>
      attempt(async () => {
        const st = await callerFor(extra).call('fs.stat', { path, nofollow: follow !== true });
        const out = statOut(st);
        const extraLine = st.kind === 'symlink' ? ` -> ${st.target ?? ''}` : st.etag === undefined ? '' : `, etag ${st.etag}`;
        return ok(`${st.path}: ${st.kind}, mode ${st.mode}, uid ${st.uid}, gid ${st.gid}, ${st.size} bytes, modified ${st.modified}${extraLine}`, out);
      }),
  );

  registerTool(
    'search_files',
    {
      title: 'Search file contents',
      description:
        'Search file contents for a regular expression (JavaScript RegExp syntax), like `grep -rn`. Returns each matching line with ' +
        'its file and line number, in path order. Searches your home directory by default, recursively. Files and directories you ' +
        'cannot read are skipped, and so are binary files (a NUL byte in their first 8 KiB; counted in skipped_binary). ' +
        `At most max_results matches per call (default ${SEARCH_DEFAULT}) and ${ANSWER_MAX} bytes of lines: when more match, ` +
        'truncated is true and next_offset says where the next page starts (pass it as offset).',
      inputSchema: {
        pattern: z.string().min(1).max(10000).describe('Regular expression, e.g. "TODO|FIXME" or "^# ".'),
        path: pathArg.optional().describe(`Directory or file to search. ${pathDesc} Defaults to your home directory.`),
        recursive: z.boolean().optional().describe('Descend into subdirectories (default true).'),
        ignore_case: z.boolean().optional().describe('Case-insensitive match (default false).'),
        max_results: z.number().int().min(1).max(10000).optional().describe(`Most matching lines to return (default ${SEARCH_DEFAULT}).`),
        offset: z.number().int().min(0).optional().describe('Matches to pass over first: the next_offset of the previous page.'),
      },
      outputSchema: {
        results: z.array(z.object({ file: z.string(), line_num: z.number(), line: z.string() })),
        count: z.number(),
        truncated: z.boolean(),
        next_offset: z.number().optional(),
        skipped_binary: z.number().optional(),
      },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async ({ pattern, path, recursive, ignore_case, max_results, offset }, extra) =>
      attempt(async () => {
        const from = offset ?? 0;
        const params: { pattern: string; path: string; recursive: boolean; ignore_case?: boolean; max_results: number; offset?: number } = {
          pattern,
          path: path ?? '',
          recursive: recursive ?? true,
          max_results: max_results ?? SEARCH_DEFAULT,
        };
        if (ignore_case !== undefined) params.ignore_case = ignore_case;
        if (from > 0) params.offset = from;
        const r = await callerFor(extra).call('search.grep', params);
        // The answer's bound: the lines (as JSON, as they travel) up to ANSWER_MAX bytes.
        const all = r.results.map((m) => ({ file: m.file, line_num: m.line_num, line: m.line }));
        const { items: results, cut } = fitAnswer(all, (m) => Buffer.byteLength(JSON.stringify(m.line)) + Buffer.byteLength(m.file) + 16);
        const next = cut ? from + results.length : r.next_offset;
        const out = {
          results,
          count: results.length,
          truncated: r.truncated || cut,
          ...(next === undefined ? {} : { next_offset: next }),
          ...(r.skipped_binary === undefined ? {} : { skipped_binary: r.skipped_binary }),
        };
        const lines = results.length ? results.map((m) => `${m.file}:${m.line_num}: ${m.line}`) : ['No matches.'];
        if (next !== undefined) lines.push(`(${results.length} matches shown; more follow: call again with offset ${next})`);
        else if (r.truncated) lines.push('(some lines were cut)');
        if (r.skipped_binary !== undefined) lines.push(`(${r.skipped_binary} binary file${r.skipped_binary === 1 ? '' : 's'} not searched)`);
        return ok(lines.join('\n'), out);
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
        // Paths travel twice (text and structuredContent): at most ANSWER_MAX bytes of them in all.
        const { items: results, cut } = fitAnswer(r.results, (p) => 2 * Buffer.byteLength(JSON.stringify(p)) + 2);
        const text = results.length ? results.join('\n') : 'No matches.';
        if (r.truncated === true || cut) return ok(`${text}\n(truncated after ${results.length} results; narrow the path or the name)`, { results, count: results.length, truncated: true });
        return ok(text, { results, count: results.length });
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
        'Record your pending changes as a new version (like `git commit -a`) with a message, so they can be found with ' +
        'get_history and restored with revert: every change you may read (others\' private changes stay pending), or only those ' +
        'at or below `paths`. Returns the short hash of the new commit.',
      inputSchema: {
        message: z.string().min(1).max(100000).describe('What changed and why.'),
        paths: z.array(pathArg).min(1).max(10000).optional().describe('Only the changes at or below these paths (default: every change you may read).'),
      },
      outputSchema: commitSchema.shape,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    async ({ message, paths }, extra) =>
      attempt(async () => {
        const c = await callerFor(extra).call('vcs.commit', paths === undefined ? { message } : { message, paths });
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
        cursor: z.string().max(200).optional().describe('The next_cursor of the previous call, to go on with older commits.'),
      },
      outputSchema: { commits: z.array(commitSchema), truncated: z.boolean().optional(), next_cursor: z.string().optional() },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async ({ path, limit, cursor }, extra) =>
      attempt(async () => {
        const params: { path?: string; limit?: number; cursor?: string } = {};
        if (path !== undefined) params.path = path;
        if (limit !== undefined) params.limit = limit;
        if (cursor !== undefined) params.cursor = cursor;
        const r = await callerFor(extra).call('vcs.log', params);
        // Messages may be 100,000 characters each and travel twice (text and structuredContent): bound them.
        const { items: commits, cut } = fitAnswer(r.commits, (c) => 2 * Buffer.byteLength(JSON.stringify(c.message)) + 400);
        const lines = commits.length ? commits.map(commitLine) : ['No commits yet.'];
        const truncated = cut || r.truncated === true;
        if (truncated) lines.push(`(the ${commits.length} newest shown; pass a path or a smaller limit)`);
        const next = cut ? commits[commits.length - 1]?.hash : r.next_cursor;
        if (next !== undefined) lines.push(`(older commits: pass cursor ${next})`);
        return ok(lines.join('\n'), { commits: commits.map(commitOut), ...(truncated ? { truncated: true } : {}), ...(next === undefined ? {} : { next_cursor: next }) });
      }),
  );

  registerTool(
    'revert',
    {
      title: 'Revert to a commit',
      description:
        'Restore the files you may read (or only `paths`, e.g. one file) to their state at an earlier commit (hash or unique prefix of ' +
        'at least 4 hex digits, from get_history; or HEAD~n / <hash>~n, n commits before it, e.g. HEAD~1 for the one before the last). ' +
        'All or nothing: if you may not write one of them, nothing changes and the error names it. ' +
        'Your uncommitted changes there are committed first and the restore is recorded as a new commit, so nothing is lost.',
      inputSchema: {
        hash: z.string().min(4).max(64).describe('Commit hash or unique prefix, or HEAD~n / <hash>~n.'),
        paths: z.array(pathArg).min(1).max(10000).optional().describe('Only restore these files or directories (default: every path you may read).'),
      },
      outputSchema: { hash: z.string(), reverted_to: z.string(), saved: z.string().nullable(), commit: commitSchema },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
    async ({ hash, paths }, extra) =>
      attempt(async () => {
        const r = await callerFor(extra).call('vcs.revert', paths === undefined ? { hash } : { hash, paths });
        const saved = r.saved === null ? '' : ` (uncommitted changes saved as ${r.saved})`;
        return ok(`Reverted to ${r.reverted_to}; new commit ${r.hash}${saved}`, { hash: r.hash, reverted_to: r.reverted_to, saved: r.saved, commit: commitOut(r.commit) });
      }),
  );

  return tools;
}
