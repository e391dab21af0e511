// Makes the built bins executable (tsc keeps the shebang but not the mode).
import { chmodSync, existsSync } from 'node:fs';
for (const bin of ['dist/cli/main.js', 'dist/mcp/stdio.js']) {
  if (existsSync(bin)) chmodSync(bin, 0o755);
}
