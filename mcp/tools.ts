/**
 * The 14 MCP tools. Each is one daemon call (edit_file: a read, then a write conditional on it): the daemon resolves paths for the caller (relative
 * paths land in the caller's home, or the delegate's) and checks every permission, so nothing here
 * decides who may do what. Failures come back as `isError` results with the daemon's message and
 * code, the same pair REST puts in its `{error, code}` body.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Caller } from '../daemon/rpc/client.js';
import {
  ANSWER_MAX,
  SEARCH_DEFAULT,
  toolBindings,
  type CommitRecord,
  type DirEntry,
  type Stat,
  type ToolArgs,
  type ToolCommit,
  type ToolEntry,
  type ToolName,
  type ToolStat,
} from '../daemon/rpc/protocol.js';
import { VfsError, toWireError } from '../daemon/errors.js';
import type { RequestExtra, ToolTable } from './tool-calls.js';
import { applyEdits, fitAnswer, lineRange, unifiedDiff, utf8End } from './content.js';

/** Picks the daemon caller (credentials) for one MCP request. */
export type CallerFor = (extra: RequestExtra) => Caller;

// ---------- results ----------

/** A tool failure as an `isError` result; the text is the daemon's message (it starts with the code). */
export function toolError(err: unknown): CallToolResult {
  if (!(err instanceof VfsError))
    process.stderr.write(`mdvfs-mcp: tool failed: ${err instanceof Error ? err.message : String(err)}\n`);
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

// ---------- structured content ----------

// Structured content is built field by field so the daemon can grow its records without breaking
// clients that validate against the tools' (closed) output schemas, declared with the tools in
// daemon/rpc/protocol.ts.
function entryOut(e: DirEntry): ToolEntry {
  return {
    name: e.name,
    is_dir: e.is_dir,
    is_symlink: e.is_symlink,
    mode: e.mode,
    uid: e.uid,
    gid: e.gid,
    size: e.size,
    modified: e.modified,
  };
}

function statOut(st: Stat & { path: string }): ToolStat {
  const out: ToolStat = {
    path: st.path,
    inode_id: st.inode_id,
    kind: st.kind,
    size: st.size,
    mode: st.mode,
    uid: st.uid,
    gid: st.gid,
    nlink: st.nlink,
    created: st.created,
    modified: st.modified,
    changed: st.changed,
    accessed: st.accessed,
  };
  if (st.etag !== undefined) out.etag = st.etag;
  if (st.target !== undefined) out.target = st.target;
  return out;
}

function commitOut(c: CommitRecord): ToolCommit {
  const out: ToolCommit = {
    hash: c.hash,
    message: c.message,
    author: c.author,
    timestamp: c.timestamp,
    parent: c.parent,
    changes: c.changes,
  };
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

type Presenter<T extends ToolName> = (args: ToolArgs<T>, caller: Caller) => Promise<CallToolResult>;

/**
 * What each tool does with its arguments and the daemon's answer. The tools themselves (names,
 * texts, argument and output schemas, hints) are declared with their operations in the `methods`
 * table (daemon/rpc/protocol.ts); a tool declared there without a presenter here is a compile error.
 */
const presenters: { [T in ToolName]: Presenter<T> } = {
  read_file: async ({ path, offset, length, head, tail, expected_etag, at }, caller) => {
    // at a commit: the snapshot's bytes, cut as fs.read cuts them
    const read: typeof caller.request<'fs.read'> =
      at === undefined
        ? (m, p) => caller.request(m, p)
        : async (_m, p) => {
            const r = await caller.request('vcs.cat', { rev: at, path });
            const off = Math.min(p.offset ?? 0, r.data.length);
            return {
              result: r.result,
              data: p.length === undefined ? r.data.subarray(off) : r.data.subarray(off, off + p.length),
            };
          };
    return attemptEtag(caller, path, async () => {
      const lines = head !== undefined || tail !== undefined;
      if (head !== undefined && tail !== undefined)
        throw new VfsError('EINVAL', 'read', undefined, 'pass head or tail, not both');
      if (lines && (offset !== undefined || length !== undefined))
        throw new VfsError(
          'EINVAL',
          'read',
          undefined,
          'head and tail count lines from an end of the file; they do not go with offset or length',
        );
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
        content.push({
          type: 'text',
          text: `[bytes ${start}-${end} of ${result.size} of ${result.path} (etag ${result.etag})${why}${more}]`,
        });
      }
      // The content travels once (the text block); structuredContent carries what describes it.
      return { content, structuredContent: out };
    });
  },

  write_file: async ({ path, content, expected_etag }, caller) => {
    return attemptEtag(caller, path, async () => {
      const params = expected_etag === undefined ? { path } : { path, if_match: expected_etag };
      const r = await caller.call('fs.write', params, { data: Buffer.from(content, 'utf8') });
      return ok(`${r.created ? 'Created' : 'Wrote'} ${r.path} (${r.size} bytes)`, {
        path: r.path,
        size: r.size,
        etag: r.etag,
        created: r.created,
      });
    });
  },

  edit_file: async ({ path, edits, dryRun, expected_etag }, caller) => {
    return attemptEtag(caller, path, async () => {
      const { result, data } = await caller.request(
        'fs.read',
        expected_etag === undefined ? { path } : { path, if_match: expected_etag },
      );
      const body = decodeContent(data);
      if (body.encoding !== 'utf8')
        throw new VfsError('EINVAL', 'edit', result.path, 'the file is not UTF-8 text; edit_file edits text');
      const after = applyEdits(body.content, edits, result.path);
      const { diff, truncated } = unifiedDiff(result.path, body.content, after);
      let size = result.size;
      let etag = result.etag;
      if (dryRun !== true && after !== body.content) {
        // Conditional on the version the edits were made to: a concurrent write fails this one (EPRECOND).
        const w = await caller.call(
          'fs.write',
          { path, parents: false, if_match: result.etag },
          { data: Buffer.from(after, 'utf8') },
        );
        size = w.size;
        etag = w.etag;
      }
      let fence = '```';
      while (diff.includes(fence)) fence += '`';
      const head =
        dryRun === true
          ? `Dry run: ${result.path} was not changed.`
          : after === body.content
            ? `${result.path} is unchanged.`
            : `Edited ${result.path}.`;
      const out = {
        path: result.path,
        diff,
        dry_run: dryRun === true,
        size,
        etag,
        ...(truncated ? { truncated: true } : {}),
      };
      return ok(`${head}\n${fence}diff\n${diff}${fence}`, out);
    });
  },

  list_directory: async ({ path, limit, cursor }, caller) =>
    attempt(async () => {
      const r = await caller.call('fs.list', {
        path: path ?? '',
        ...(limit === undefined ? {} : { limit }),
        ...(cursor === undefined ? {} : { cursor }),
      });
      const lines = r.entries.map((e) => {
        const kind = e.is_dir ? '[DIR] ' : e.is_symlink ? '[LINK]' : '[FILE]';
        return `${kind} ${e.mode} ${String(e.size).padStart(8)}  ${e.name}${e.is_dir ? '/' : ''}`;
      });
      if (r.truncated === true)
        lines.push(
          `(truncated after ${r.entries.length} entries: call again with cursor "${r.next_cursor ?? ''}" for more)`,
        );
      const out = {
        path: r.path,
        entries: r.entries.map(entryOut),
        ...(r.truncated === true ? { truncated: true, next_cursor: r.next_cursor } : {}),
      };
      return ok(`${r.path}:\n${lines.length ? lines.join('\n') : '(empty)'}`, out);
    }),

  get_file_info: async ({ path, follow }, caller) =>
    attempt(async () => {
      const st = await caller.call('fs.stat', { path, nofollow: follow !== true });
      const out = statOut(st);
      const extraLine =
        st.kind === 'symlink' ? ` -> ${st.target ?? ''}` : st.etag === undefined ? '' : `, etag ${st.etag}`;
      return ok(
        `${st.path}: ${st.kind}, mode ${st.mode}, uid ${st.uid}, gid ${st.gid}, ${st.size} bytes, modified ${st.modified}${extraLine}`,
        out,
      );
    }),

  search_files: async ({ pattern, path, recursive, ignore_case, max_results, offset }, caller) =>
    attempt(async () => {
      const from = offset ?? 0;
      const params: {
        pattern: string;
        path: string;
        recursive: boolean;
        ignore_case?: boolean;
        max_results: number;
        offset?: number;
      } = {
        pattern,
        path: path ?? '',
        recursive: recursive ?? true,
        max_results: max_results ?? SEARCH_DEFAULT,
      };
      if (ignore_case !== undefined) params.ignore_case = ignore_case;
      if (from > 0) params.offset = from;
      const r = await caller.call('search.grep', params);
      // The answer's bound: the lines (as JSON, as they travel) up to ANSWER_MAX bytes.
      const all = r.results.map((m) => ({ file: m.file, line_num: m.line_num, line: m.line }));
      const { items: results, cut } = fitAnswer(
        all,
        (m) => Buffer.byteLength(JSON.stringify(m.line)) + Buffer.byteLength(m.file) + 16,
      );
      const next = cut ? from + results.length : r.next_offset;
      const out = {
        results,
        count: results.length,
        truncated: r.truncated || cut,
        ...(next === undefined ? {} : { next_offset: next }),
        ...(r.skipped_binary === undefined ? {} : { skipped_binary: r.skipped_binary }),
      };
      const lines = results.length ? results.map((m) => `${m.file}:${m.line_num}: ${m.line}`) : ['No matches.'];
      if (next !== undefined)
        lines.push(`(${results.length} matches shown; more follow: call again with offset ${next})`);
      else if (r.truncated) lines.push('(some lines were cut)');
      if (r.skipped_binary !== undefined)
        lines.push(`(${r.skipped_binary} binary file${r.skipped_binary === 1 ? '' : 's'} not searched)`);
      return ok(lines.join('\n'), out);
    }),

  find_files: async ({ name, path, type }, caller) =>
    attempt(async () => {
      const params: { path: string; name?: string; type?: 'f' | 'd' | 'l' } = { path: path ?? '' };
      if (name !== undefined) params.name = name;
      const t = typeFlag(type);
      if (t !== undefined) params.type = t;
      const r = await caller.call('search.find', params);
      // Paths travel twice (text and structuredContent): at most ANSWER_MAX bytes of them in all.
      const { items: results, cut } = fitAnswer(r.results, (p) => 2 * Buffer.byteLength(JSON.stringify(p)) + 2);
      const text = results.length ? results.join('\n') : 'No matches.';
      if (r.truncated === true || cut)
        return ok(`${text}\n(truncated after ${results.length} results; narrow the path or the name)`, {
          results,
          count: results.length,
          truncated: true,
        });
      return ok(text, { results, count: results.length });
    }),

  create_directory: async ({ path }, caller) =>
    attempt(async () => {
      const r = await caller.call('fs.mkdir', { path, parents: true });
      return ok(r.created ? `Created directory ${r.path}` : `Directory ${r.path} already exists`, {
        path: r.path,
        created: r.created,
      });
    }),

  delete_file: async ({ path, recursive }, caller) =>
    attempt(async () => {
      const r = await caller.call('fs.delete', recursive === undefined ? { path } : { path, recursive });
      return ok(`Deleted ${r.path}${r.deleted > 1 ? ` (${r.deleted} entries)` : ''}`, {
        path: r.path,
        deleted: r.deleted,
      });
    }),

  move_file: async ({ source, destination }, caller) =>
    attempt(async () => {
      const r = await caller.call('fs.move', { src: source, dst: destination, into_dir: true });
      return ok(`Moved ${r.src} to ${r.dst}`, { source: r.src, destination: r.dst });
    }),

  commit: async ({ message, paths }, caller) =>
    attempt(async () => {
      const c = await caller.call('vcs.commit', paths === undefined ? { message } : { message, paths });
      return ok(`Committed ${c.hash}: ${c.message} (${c.changes} changes)`, commitOut(c));
    }),

  get_history: async ({ path, limit, cursor }, caller) =>
    attempt(async () => {
      const params: { path?: string; limit?: number; cursor?: string } = {};
      if (path !== undefined) params.path = path;
      if (limit !== undefined) params.limit = limit;
      if (cursor !== undefined) params.cursor = cursor;
      const r = await caller.call('vcs.log', params);
      // Messages may be 100,000 characters each and travel twice (text and structuredContent): bound them.
      const { items: commits, cut } = fitAnswer(
        r.commits,
        (c) => 2 * Buffer.byteLength(JSON.stringify(c.message)) + 400,
      );
      const lines = commits.length ? commits.map(commitLine) : ['No commits yet.'];
      const truncated = cut || r.truncated === true;
      if (truncated) lines.push(`(the ${commits.length} newest shown; pass a path or a smaller limit)`);
      const next = cut ? commits[commits.length - 1]?.hash : r.next_cursor;
      if (next !== undefined) lines.push(`(older commits: pass cursor ${next})`);
      return ok(lines.join('\n'), {
        commits: commits.map(commitOut),
        ...(truncated ? { truncated: true } : {}),
        ...(next === undefined ? {} : { next_cursor: next }),
      });
    }),

  revert: async ({ hash, paths }, caller) =>
    attempt(async () => {
      const r = await caller.call('vcs.revert', paths === undefined ? { hash } : { hash, paths });
      const saved = r.saved === null ? '' : ` (uncommitted changes saved as ${r.saved})`;
      return ok(`Reverted to ${r.reverted_to}; new commit ${r.hash}${saved}`, {
        hash: r.hash,
        reverted_to: r.reverted_to,
        saved: r.saved,
        commit: commitOut(r.commit),
      });
    }),

  undo: async ({ actor, since }, caller) =>
    attempt(async () => {
      const r = await caller.call('vcs.undo', since === undefined ? { actor } : { actor, since });
      const saved = r.saved === null ? '' : ` (uncommitted changes saved as ${r.saved})`;
      const n = r.paths.length;
      return ok(
        `Undid ${actor}'s changes to ${n} path${n === 1 ? '' : 's'} since ${r.reverted_to}; new commit ${r.hash}${saved}\n` +
          r.paths.join('\n'),
        { hash: r.hash, reverted_to: r.reverted_to, saved: r.saved, paths: r.paths, commit: commitOut(r.commit) },
      );
    }),
};

/** Registers every tool of the table, in table order; returns their registrations by name. */
export function registerTools(server: McpServer, callerFor: CallerFor): ToolTable {
  const tools: ToolTable = new Map();
  for (const b of toolBindings()) {
    const present = presenters[b.tool] as Presenter<ToolName>;
    const config = {
      title: b.title,
      description: b.description,
      inputSchema: b.args,
      outputSchema: b.output,
      annotations: b.annotations,
    };
    const handler = (args: Record<string, unknown>, extra: RequestExtra): Promise<CallToolResult> =>
      present(args as ToolArgs<ToolName>, callerFor(extra));
    tools.set(b.tool, server.registerTool(b.tool, config, handler as never));
  }
  return tools;
}
