/**
 * The package's version, read once from package.json (the one source): the CLI, `mdvfs-mcp`, the
 * daemon's health answer and the MCP server name all report it. Found by walking up from this module,
 * so it works from dist/ and from the TypeScript sources alike.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

function readVersion(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file)) {
      try {
        const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; version?: unknown };
        if (pkg.name === 'mdvfs' && typeof pkg.version === 'string') return pkg.version;
      } catch {
        // not ours: keep looking
      }
    }
    const up = path.dirname(dir);
    if (up === dir) return '0.0.0-unknown';
    dir = up;
  }
}

export const VERSION = readVersion();
