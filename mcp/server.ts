/** One MCP server (tools + resources) for one identity; shared by the stdio binary and /mcp. */
import { VERSION } from '../daemon/rpc/version.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { registerResources, type ChangeFeed, type SubscriptionStore } from './resources.js';
import { installToolCalls } from './tool-calls.js';
import { registerTools, type CallerFor } from './tools.js';

export const SERVER_NAME = 'mdvfs';
export const SERVER_VERSION = VERSION;

const INSTRUCTIONS = `mdvfs is a versioned markdown filesystem with Unix users and permissions.
Paths: relative paths and "~" resolve in your home directory (/home/<you>, or the delegated user's home); "/..." is absolute.
Every call is checked against your permissions; a denial comes back as an error starting with EACCES.
Edit with read_file/write_file (pass expected_etag from read_file to avoid overwriting concurrent edits), organise with
create_directory/move_file/delete_file, look things up with list_directory/find_files/search_files.
Changes are versioned only when you call commit; get_history lists commits and revert restores one (nothing is lost).`;

export interface CreateServerOptions {
  callerFor: CallerFor;
  /** Enables resource subscriptions kept by this server. */
  feed?: ChangeFeed;
  /** Enables resource subscriptions kept elsewhere (MCP over HTTP: in the daemon). */
  store?: SubscriptionStore;
  /** Answer tools/call through the SDK's own (re-validating) handler instead of mcp/tool-calls.ts (tests compare the two). */
  sdkToolCalls?: boolean;
}

export function createMcpServer(opts: CreateServerOptions): McpServer {
  const server = new McpServer(
    { name: SERVER_NAME, version: SERVER_VERSION, title: 'mdvfs: versioned markdown filesystem' },
    {
      instructions: INSTRUCTIONS,
      capabilities: { tools: {}, resources: { subscribe: opts.feed !== undefined || opts.store !== undefined } },
    },
  );
  const tools = registerTools(server, opts.callerFor);
  if (opts.sdkToolCalls !== true) installToolCalls(server, tools);
  registerResources(server, opts.callerFor, {
    ...(opts.feed === undefined ? {} : { feed: opts.feed }),
    ...(opts.store === undefined ? {} : { store: opts.store }),
  });
  return server;
}
