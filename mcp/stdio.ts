#!/usr/bin/env node
/** `mdvfs-mcp`: the stdio MCP server (implemented in the MCP issue). */
process.stderr.write('mdvfs-mcp: not implemented yet\n');
process.exitCode = 1;
