/**
 * The daemon's service: one runner for every operation of the methods table. The table declares
 * each operation's traits (who may call it, which params are paths, which result fields are shown
 * as the caller names them, whether it mutates); the runner applies them around the operation's own
 * work, which lives in one module per area (sys, identity, fs, search, vcs, mcp).
 */
import type { EventFeed } from '../events.js';
import { McpSessions } from '../mcp-sessions.js';
import { VfsError } from '../errors.js';
import { requireAdmin, type Cred } from '../core/perms.js';
import { methods, type Creds, type Method, type OpTraits, type ParsedParams } from '../rpc/protocol.js';
import { Kit, type Ctx, type Handlers, type Ops, type ServiceDeps } from './context.js';
import { sysOps } from './sys.js';
import { identityOps } from './identity.js';
import { fsOps } from './fs.js';
import { searchOps } from './search.js';
import { vcsOps } from './vcs.js';
import { mcpOps } from './mcp.js';

export class Service {
  private readonly k: Kit;
  /** The attributed, permission-filtered change feed (`events.subscribe`). */
  readonly events: EventFeed;
  /** MCP over HTTP sessions, shared by every HTTP worker. */
  readonly mcpSessions = new McpSessions();
  /** Every operation's own work, by method. */
  private readonly ops: Ops;

  constructor(d: ServiceDeps) {
    this.k = new Kit(d);
    this.events = this.k.events;
    // Resource notifications are recorded per session as changes happen, for replay (Last-Event-ID).
    d.vfs.onChange((paths) => this.mcpSessions.record(paths));
    this.ops = {
      ...sysOps(this.k),
      ...identityOps(this.k),
      ...fsOps(this.k),
      ...searchOps(this.k),
      ...vcsOps(this.k),
      ...mcpOps(this.mcpSessions),
    };
  }

  authenticate(creds: Creds): Cred {
    return this.k.authenticate(creds);
  }

  /** What `invoke` calls: every method through the runner. */
  readonly handlers: Handlers = Object.fromEntries(
    (Object.keys(methods) as Method[]).map((m) => [m, (ctx: Ctx, p: ParsedParams<Method>) => this.run(m, ctx, p)]),
  ) as unknown as Handlers;

  /**
   * The runner: the steps every operation shares, as its traits in the methods table declare them
   * (access, workspace refusal, path params, shown result paths, durability), around its handler.
   */
  private run(method: Method, ctx: Ctx, params: ParsedParams<Method>): unknown {
    const spec = methods[method] as OpTraits;
    const op = spec.op ?? method;
    let cred: Cred | undefined;
    if (spec.access === 'local') {
      if (ctx.creds.origin === 'remote') throw new VfsError('EACCES', op, undefined, 'not available over the network');
    } else if (spec.access !== 'public') {
      cred = this.k.auth(ctx);
      if (spec.access === 'admin') requireAdmin(cred, op);
      if (spec.noWorkspace === true) this.k.noWorkspace(cred, op);
    }
    let p = params as Record<string, unknown>;
    if (spec.paths !== undefined && cred !== undefined) {
      p = { ...p };
      for (const [key, kind] of Object.entries(spec.paths)) {
        const written = p[key] as string | undefined;
        p[key] = kind === 'entry' ? this.k.entryAbs(cred, written ?? '', op) : this.k.abs(cred, written, op);
      }
    }
    const handler = this.ops[method] as (p: unknown, r: { ctx: Ctx; cred: Cred | undefined }) => unknown;
    const out = handler(p, { ctx, cred });
    return out instanceof Promise ? out.then((r) => this.finish(spec, cred, r)) : this.finish(spec, cred, out);
  }

  private finish(spec: OpTraits, cred: Cred | undefined, out: unknown): unknown {
    if (spec.shows !== undefined && cred !== undefined) {
      const rec = out as Record<string, string>;
      for (const key of spec.shows) rec[key] = this.k.show(cred, rec[key]!);
    }
    if (spec.mutates === undefined) return out;
    if (spec.mutates === 'users') this.k.d.vfs.notifyAll();
    return this.k.durable().then(() => out);
  }
}
