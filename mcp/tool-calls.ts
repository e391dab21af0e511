/**
 * tools/call without re-validating what we built ourselves.
 *
 * The SDK's tools/call path parses each request three times (the transport's message union, the
 * handler's request schema, the Server's tools/call check), validates the arguments, then validates
 * the result twice (the tool's output schema, then CallToolResultSchema, which also copies it). Our
 * tools build their results field by field from the daemon's typed answers, so the result checks
 * can never fail; the request checks only matter for odd requests.
 *
 * This handler (installed through the SDK's public `removeRequestHandler` and
 * `fallbackRequestHandler`) answers exactly as the SDK's does, message for message: a plain request
 * is checked by hand, anything else goes through `CallToolRequestSchema` with the SDK's error;
 * the arguments are validated with the tool's own input schema and the SDK's error text; the tool's
 * registration (handler, enabled) is the one McpServer keeps, so tools/list and tools/call agree.
 * test/mcp/tool-calls.test.ts compares both paths request by request.
 */
import type { McpServer, RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import { getParseErrorMessage, safeParseAsync, type AnySchema } from '@modelcontextprotocol/sdk/server/zod-compat.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  McpError,
  type CallToolResult,
  type JSONRPCRequest,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';

/** The SDK's per-request context, as tool handlers receive it. */
export type RequestExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

export type ToolTable = Map<string, RegisteredTool>;

type ToolHandler = (args: unknown, extra: RequestExtra) => CallToolResult | Promise<CallToolResult>;

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** As McpServer.createToolError. */
function toolError(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}

/** The SDK's "Method not found" answer for a method without a handler. */
function methodNotFound(): Error {
  return Object.assign(new Error('Method not found'), { code: ErrorCode.MethodNotFound });
}

/** The `params` of a tools/call request, checked as the SDK's Server does (same error text). */
function callParams(request: JSONRPCRequest): { name: string; arguments?: Record<string, unknown> | undefined } {
  const p = request.params;
  // The shape every client sends: {name, arguments?} and nothing else. The schema would accept it unchanged.
  if (isPlainObject(p) && typeof p.name === 'string' && (p.arguments === undefined || isPlainObject(p.arguments))) {
    let plain = true;
    for (const k in p) if (k !== 'name' && k !== 'arguments') plain = false;
    if (plain) return p as { name: string; arguments?: Record<string, unknown> };
  }
  const v = CallToolRequestSchema.safeParse(request);
  // The SDK's Protocol parses the request with the handler's schema before its Server checks it
  // again, so a malformed request fails with the bare ZodError (an internal error, -32603).
  if (!v.success) throw v.error;
  // A task-augmented call never gets here: the server declares no task capability, so the SDK
  // refuses it before any handler runs.
  return v.data.params;
}

async function run(
  tools: ToolTable,
  name: string,
  args: Record<string, unknown> | undefined,
  extra: RequestExtra,
): Promise<CallToolResult> {
  try {
    const tool = tools.get(name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Tool ${name} not found`);
    if (!tool.enabled) throw new McpError(ErrorCode.InvalidParams, `Tool ${name} disabled`);
    let input: unknown = undefined;
    if (tool.inputSchema) {
      const parsed = await safeParseAsync(tool.inputSchema as AnySchema, args ?? {});
      if (!parsed.success) {
        throw new McpError(
          ErrorCode.InvalidParams,
          `Input validation error: Invalid arguments for tool ${name}: ${getParseErrorMessage(parsed.error)}`,
        );
      }
      input = parsed.data;
    }
    // Our handlers turn every failure into an isError result with the daemon's code; their results
    // carry structuredContent built to the output schema, so neither result check is repeated here.
    return await (tool.handler as unknown as ToolHandler)(input, extra);
  } catch (err) {
    return toolError(err instanceof Error ? err.message : String(err));
  }
}

/** Replaces the SDK's tools/call handler of `server` by the lean one, for the tools in `tools`. */
export function installToolCalls(server: McpServer, tools: ToolTable): void {
  const sdk = server.server;
  sdk.removeRequestHandler('tools/call');
  const previous = sdk.fallbackRequestHandler;
  sdk.fallbackRequestHandler = async (request, extra) => {
    if (request.method !== 'tools/call') {
      if (previous) return previous(request, extra);
      throw methodNotFound();
    }
    const params = callParams(request);
    return run(tools, params.name, params.arguments, extra);
  };
}
