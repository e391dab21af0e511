// The official MCP Inspector CLI (`mcp-inspector --cli`) lists and calls the tools on both transports.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import t from 'tap';
import { INSPECTOR, MCP_STDIO, TOOL_NAMES, withCast } from '../helpers/mcp.js';

const run = promisify(execFile);
const cast = await withCast(t);
const { svc } = cast;

async function inspector(args: string[], env: Record<string, string> = {}): Promise<unknown> {
  const { stdout } = await run(INSPECTOR, ['--cli', ...args], {
    env: { ...process.env, SERVICE_DATA_DIR: svc.dataDir, ...env },
    timeout: 60000,
  });
  return JSON.parse(stdout);
}

// Each Inspector run spawns two node processes, so the list and the call run side by side.
void t.test('Streamable HTTP: tools/list and tools/call', async (t) => {
  const [list, res] = (await Promise.all([
    inspector([svc.url.href, '--transport', 'http', '--method', 'tools/list']),
    inspector([
      svc.url.href,
      '--transport',
      'http',
      '--method',
      'tools/call',
      '--tool-name',
      'write_file',
      '--tool-arg',
      'path=/tmp-inspector.md',
      '--tool-arg',
      'content=from the inspector',
    ]),
  ])) as [{ tools: { name: string }[] }, { structuredContent: { path: string } }];
  t.same(list.tools.map((x) => x.name).sort(), [...TOOL_NAMES].sort());
  t.equal(res.structuredContent.path, '/tmp-inspector.md');
  const { data } = await cast.daemon.request('fs.read', { path: '/tmp-inspector.md' });
  t.equal(data.toString(), 'from the inspector');
});

void t.test('stdio: tools/list and tools/call as a user', async (t) => {
  const stdio = ['-e', 'SERVICE_AS_USER=alice', process.execPath, MCP_STDIO];
  const [list, res] = (await Promise.all([
    inspector([...stdio, '--method', 'tools/list']),
    inspector([
      ...stdio,
      '--method',
      'tools/call',
      '--tool-name',
      'write_file',
      '--tool-arg',
      'path=inspected.md',
      '--tool-arg',
      'content=hello',
    ]),
  ])) as [{ tools: { name: string }[] }, { structuredContent: { path: string } }];
  t.same(list.tools.map((x) => x.name).sort(), [...TOOL_NAMES].sort());
  t.equal(res.structuredContent.path, '/home/alice/inspected.md');
  const { data } = await cast.daemon.request('fs.read', { path: '/home/alice/inspected.md' });
  t.equal(data.toString(), 'hello');
});
