/**
 * Streamable HTTP MCP at /mcp, mounted on the HTTP sidecar's express app (implemented in the MCP issue).
 * The REST app calls `mountMcp(app, client, opts)` once, before its JSON 404 handler.
 */
import type { Express } from 'express';
import type { DaemonClient } from '../daemon/rpc/client.js';

export interface McpHttpOptions {
  /** host:port the sidecar listens on (for the Host-header check on localhost binds). */
  listen: string;
}

export function mountMcp(_app: Express, _client: DaemonClient, _opts: McpHttpOptions): void {
  // filled in by the MCP issue
}
