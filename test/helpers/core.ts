/**
 * A core in this process, built from a JSON map of files (as memfs does), for tests of core and
 * VCS semantics without a daemon per test (a daemon start costs ~0.8 s). Requests go through the
 * same `invoke` as the socket server, so params, credentials and errors are checked alike; the
 * black-box tests of each transport stay as they are.
 *
 *   const { root, as } = await coreFrom(t, { '/notes/a.md': '# A\n', '/srv': { dir: true, mode: '0750' } });
 *   const alice = as({ authorization: 'User alice' });
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { openCore } from '../../daemon/main.js';
import type { InProcessCaller } from '../../daemon/rpc/in-process.js';
import type { Creds } from '../../daemon/rpc/protocol.js';
import { DIST } from './http.js';

// The built core (as the black-box tests use): its grep workers are plain JavaScript threads.
const { configFromEnv, openCore: open } = (await import(
  pathToFileURL(path.join(DIST, 'daemon', 'main.js')).href
)) as typeof import('../../daemon/main.js');
const { InProcessCaller: Caller } = (await import(
  pathToFileURL(path.join(DIST, 'daemon', 'rpc', 'in-process.js')).href
)) as typeof import('../../daemon/rpc/in-process.js');

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** One entry of the map: file content, or what to make at that path. */
export type Entry =
  | string
  | Buffer
  | { content?: string | Buffer; dir?: true; symlink?: string; mode?: string; owner?: string; group?: string };

export interface InProcessCore {
  core: ReturnType<typeof openCore>;
  root: InProcessCaller;
  as(creds: Creds): InProcessCaller;
  dataDir: string;
}

/** Opens a core on a fresh store (fsync off) and creates `files` as root, in key order. */
export async function coreFrom(t: Teardown, files: Record<string, Entry> = {}): Promise<InProcessCore> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-core-'));
  const core = open({ ...configFromEnv({ SERVICE_FSYNC: 'off' }), dataDir });
  t.teardown(() => {
    core.grep.close();
    core.store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const root = new Caller(core.service.handlers, {});
  for (const [p, e] of Object.entries(files)) {
    const spec = typeof e === 'string' || Buffer.isBuffer(e) ? { content: e } : e;
    if (spec.dir === true) await root.call('fs.mkdir', { path: p, parents: true });
    else if (spec.symlink !== undefined) await root.call('fs.symlink', { path: p, target: spec.symlink });
    else await root.call('fs.write', { path: p }, { data: Buffer.from(spec.content ?? '') });
    if (spec.owner !== undefined || spec.group !== undefined) {
      await root.call('fs.chown', {
        path: p,
        ...(spec.owner === undefined ? {} : { owner: spec.owner }),
        ...(spec.group === undefined ? {} : { group: spec.group }),
        nofollow: true,
      });
    }
    if (spec.mode !== undefined) await root.call('fs.chmod', { path: p, mode: spec.mode });
  }
  return { core, root, as: (creds) => root.as(creds), dataDir };
}
