// Every bin in package.json answers --help and --version (the package's version) and exits 0
// without starting anything: no data dir created, no daemon.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT, tempDataDir } from '../helpers/http.js';

const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  bin: Record<string, string>;
};
const DIST = process.env.MDVFS_TEST_DIST;

function run(
  file: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    // The bin file itself (its shebang and mode), as npm links it.
    const p = spawn(file, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    p.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    p.on('error', reject);
    // stdin left open: a server that started would wait on it instead of exiting.
    const timer = setTimeout(() => p.kill('SIGKILL'), 60000);
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

t.ok(Object.keys(pkg.bin).length >= 2, 'package.json declares the bins');
for (const [name, rel] of Object.entries(pkg.bin)) {
  const file = DIST === undefined ? path.join(ROOT, rel) : path.join(DIST, path.relative('dist', rel));
  for (const flag of ['--version', '-V', '--help', '-h']) {
    t.test(`${name} ${flag}`, async (t) => {
      const parent = tempDataDir(t);
      const dataDir = path.join(parent, 'data');
      const r = await run(file, [flag], { ...process.env, SERVICE_DATA_DIR: dataDir });
      t.equal(r.code, 0, `exit 0 (stderr: ${r.stderr})`);
      if (flag === '--version' || flag === '-V')
        t.equal(r.stdout, `${pkg.version}\n`, 'the version from package.json, alone');
      else t.match(r.stdout, new RegExp(`^Usage: ${name}\\b`), 'usage on stdout');
      t.equal(r.stderr, '', 'nothing on stderr');
      t.notOk(existsSync(dataDir), 'started nothing: no data dir');
    });
  }
}

t.test('mdvfs-mcp refuses an unknown argument with a usage error, starting nothing', async (t) => {
  const parent = tempDataDir(t);
  const dataDir = path.join(parent, 'data');
  const file = DIST === undefined ? path.join(ROOT, pkg.bin['mdvfs-mcp']!) : path.join(DIST, 'mcp', 'stdio.js');
  const r = await run(file, ['--stdio'], { ...process.env, SERVICE_DATA_DIR: dataDir });
  t.equal(r.code, 2);
  t.match(r.stderr, /^mdvfs-mcp: unknown argument '--stdio'.*\(EUSAGE\)\n$/);
  t.notOk(existsSync(dataDir), 'no data dir');
});
