/**
 * REST routes made from the operation table (`rest` bindings in daemon/rpc/protocol.ts): one
 * generic handler takes each param from where the binding says (path, query or JSON body), checks
 * its type against the param's schema with REST's own messages, calls the daemon and presents the
 * answer (JSON, or plain text where the binding has a text form). Adding an operation to REST is
 * a `rest` entry in the table, nothing here.
 */
import type { Request, Response } from 'express';
import { z } from 'zod';
import {
  methods,
  restBinding,
  restSource,
  type Method,
  type RestBinding,
  type RestSource,
} from '../daemon/rpc/protocol.js';
import { httpError } from './errors.js';
import {
  callerOf,
  jsonBody,
  query,
  sendJson,
  sendText,
  wildcardPath,
  type Registrar,
  type RouteContext,
} from './request.js';

/** How one param is read from a string (query, path) or a JSON value (body). */
export type ParamKind =
  | { type: 'string' }
  | { type: 'boolean' }
  | { type: 'integer'; min: number; max: number }
  | { type: 'enum'; values: string[] }
  | { type: 'scalar' }
  | { type: 'strings' };

export interface ParamSpec {
  name: string;
  kind: ParamKind;
  /** Required by the schema (a path param is always there: `:x` by routing, `{/*path}` as '' for the home). */
  required: boolean;
  from: RestSource;
  description?: string;
  /** The JSON Schema of the param, for the OpenAPI document. */
  schema: Record<string, unknown>;
}

export interface RestOp {
  method: Method;
  binding: RestBinding;
  params: ParamSpec[];
  /** The JSON Schema of the answer (JSON form). */
  result: z.ZodType;
}

type Json = Record<string, unknown>;

/** Integers without an explicit bound in the schema answer this range on REST. */
const INT_MAX = 1_000_000;

function kindOf(s: Json): ParamKind {
  if (Array.isArray(s.enum)) return { type: 'enum', values: s.enum.map(String) };
  if (s.type === 'string') return { type: 'string' };
  if (s.type === 'boolean') return { type: 'boolean' };
  if (s.type === 'integer') {
    const max = typeof s.maximum === 'number' && s.maximum < Number.MAX_SAFE_INTEGER ? s.maximum : INT_MAX;
    return {
      type: 'integer',
      min: typeof s.minimum === 'number' && s.minimum > Number.MIN_SAFE_INTEGER ? s.minimum : 0,
      max,
    };
  }
  if (Array.isArray(s.anyOf)) return { type: 'scalar' };
  if (s.type === 'array' && (s.items as Json | undefined)?.type === 'string') return { type: 'strings' };
  throw new Error(`no REST reading for schema ${JSON.stringify(s)}`);
}

/** The route's params, each with where it comes from and how it reads. */
function paramsOf(method: Method, b: RestBinding): ParamSpec[] {
  const schema = z.toJSONSchema(methods[method].params, { io: 'input' }) as Json;
  const props = (schema.properties ?? {}) as Record<string, Json>;
  const required = new Set((schema.required ?? []) as string[]);
  return Object.entries(props).map(([name, s]) => {
    const from = restSource(b, name);
    const spec: ParamSpec = { name, kind: kindOf(s), required: required.has(name), from, schema: s };
    if (typeof s.description === 'string') spec.description = s.description;
    return spec;
  });
}

/** Every operation with a REST binding, in table order. */
export const restOps: RestOp[] = (Object.keys(methods) as Method[]).flatMap((method) => {
  const b = restBinding(method);
  return b === undefined ? [] : [{ method, binding: b, params: paramsOf(method, b), result: methods[method].result }];
});

function kindName(k: ParamKind): string {
  if (k.type === 'strings') return 'an array of strings';
  return k.type === 'scalar'
    ? 'a string or an integer'
    : k.type === 'integer'
      ? 'an integer'
      : `a ${k.type === 'enum' ? 'string' : k.type}`;
}

/** A query or path value, as its param's type. */
function fromString(p: ParamSpec, v: string): unknown {
  const what = p.from === 'path' ? 'path parameter' : 'query parameter';
  switch (p.kind.type) {
    case 'boolean':
      if (v === '' || v === 'true' || v === '1' || v === 'yes') return true;
      if (v === 'false' || v === '0' || v === 'no') return false;
      throw httpError('EINVAL', `${what} '${p.name}' must be true or false`);
    case 'integer': {
      const { min, max } = p.kind;
      if (!/^\d{1,10}$/.test(v) || Number(v) < min || Number(v) > max)
        throw httpError('EINVAL', `${what} '${p.name}' must be an integer from ${min} to ${max}`);
      return Number(v);
    }
    case 'enum': {
      const vs = p.kind.values;
      if (!vs.includes(v))
        throw httpError('EINVAL', `${what} '${p.name}' must be ${vs.slice(0, -1).join(', ')} or ${vs[vs.length - 1]!}`);
      return v;
    }
    case 'string':
    case 'scalar':
      return v;
    case 'strings':
      return [v];
  }
}

/** A JSON body field, checked against its param's type. */
function fromJson(p: ParamSpec, v: unknown): unknown {
  const ok =
    p.kind.type === 'strings'
      ? Array.isArray(v) && v.every((x) => typeof x === 'string')
      : p.kind.type === 'scalar'
        ? typeof v === 'string' || (typeof v === 'number' && Number.isInteger(v))
        : p.kind.type === 'integer'
          ? typeof v === 'number' && Number.isInteger(v)
          : typeof v === (p.kind.type === 'enum' ? 'string' : p.kind.type);
  if (!ok) throw httpError('EINVAL', `field '${p.name}' must be ${kindName(p.kind)}`);
  return v;
}

function read(op: RestOp, req: Request): Record<string, unknown> {
  const out: Record<string, unknown> = { ...op.binding.fixed };
  const body = (req.body ?? {}) as Record<string, unknown>;
  for (const p of op.params) {
    let v: unknown;
    if (p.from === 'path')
      v =
        p.name === 'path' && op.binding.route.includes('{/*path}')
          ? wildcardPath(req)
          : String(req.params[p.name] ?? '');
    else if (p.from === 'query') {
      const s = query(req, p.name);
      // An empty optional value is no value (`?from=` is HEAD); a bare flag (`?recursive`) is true.
      v = s === undefined || (s === '' && p.kind.type !== 'boolean') ? undefined : fromString(p, s);
      if (v === undefined && p.required) throw httpError('EINVAL', `missing query parameter '${p.name}'`);
    } else {
      const raw = body[p.name];
      v = raw === undefined || raw === null ? undefined : fromJson(p, raw);
      if (p.required && (v === undefined || v === ''))
        throw httpError('EINVAL', `missing field '${p.name}' (${op.binding.hints?.[p.name] ?? p.kind.type})`);
    }
    if (v !== undefined) out[p.name] = v;
  }
  const problem = op.binding.check?.(out);
  if (problem !== undefined) throw httpError('EINVAL', problem);
  return out;
}

/** `?format=text` (default) or `?format=json`, for operations with a text answer. */
function wantsJson(req: Request): boolean {
  const f = query(req, 'format');
  if (f === undefined || f === 'text') return false;
  if (f === 'json') return true;
  throw httpError('EINVAL', "query parameter 'format' must be text or json");
}

async function serve(op: RestOp, ctx: RouteContext, req: Request, res: Response): Promise<void> {
  const { text } = op.binding;
  const json = text === undefined || wantsJson(req);
  // Every method's params are checked again by the daemon against the same schema.
  const result = (await callerOf(ctx, req).call(op.method, read(op, req) as never)) as Record<string, unknown>;
  if (json) {
    sendJson(res, result);
    return;
  }
  const s = String(result[text!.field] ?? '');
  sendText(res, text!.newline === true && s !== '' && !s.endsWith('\n') ? `${s}\n` : s, text!.type);
}

export function registerOps(r: Registrar, ctx: RouteContext): void {
  for (const op of restOps) {
    const { verb, route } = op.binding;
    const handler = (req: Request, res: Response): Promise<void> => serve(op, ctx, req, res);
    if (verb === 'post' || verb === 'put') r.add(verb, route, ...jsonBody(), handler);
    else r.add(verb, route, handler);
  }
}
