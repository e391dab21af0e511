// Builds the libfuse3 low-level addon (fuse/native) at install, offline, with the node-gyp that npm
// brings. Without libfuse3's headers it only warns: everything but the mount works without it, and
// `mdvfs mount` then says what to install.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fuse', 'native');
const gyp = process.env.npm_config_node_gyp;
const [cmd, args] = gyp ? [process.execPath, [gyp, 'rebuild']] : ['node-gyp', ['rebuild']];
const probe = spawnSync('pkg-config', ['--exists', 'fuse3']);
if (probe.status !== 0) {
  process.stderr.write(
    'mdvfs: libfuse3 headers not found (pkg-config fuse3): the mount is not built; install libfuse3-dev and pkg-config, then npm install again\n',
  );
  process.exit(0);
}
const r = spawnSync(cmd, args, { cwd: dir, stdio: 'inherit' });
if (r.status !== 0)
  process.stderr.write(
    `mdvfs: building fuse/native failed (${r.error?.message ?? `exit ${r.status}`}): the mount is not available\n`,
  );
