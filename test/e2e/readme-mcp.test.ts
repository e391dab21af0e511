// The README's stdio MCP instructions work as written: the Claude/Cursor snippet (run with the SDK's
// stdio client, as those apps do) and the MCP Inspector commands (run verbatim in the checkout).
import { exec } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { runCli } from '../helpers/cli.js';
import { ROOT, tempDataDir } from '../helpers/http.js';

const sh = promisify(exec);
const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');

interface ServerEntry {
  command: string;
  args?: string[];
  env?: Record<string, string>;
}

/** The stdio snippet: the first ```json block after "stdio (Claude Desktop". */
function stdioSnippet(): ServerEntry {
  const at = readme.indexOf('stdio (Claude Desktop');
  const m = /```json\n([\s\S]*?)```/.exec(readme.slice(at));
  if (at < 0 || m === null) throw new Error('the README has no stdio MCP snippet');
  return (JSON.parse(m[1]!) as { mcpServers: Record<string, ServerEntry> }).mcpServers.mdvfs!;
}

/** The README's Inspector commands for stdio, continuation lines joined. */
function inspectorCommands(): string[] {
  const block = /MCP Inspector CLI[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme);
  if (block === null) throw new Error('the README has no Inspector block');
  return block[1]!
    .replace(/\\\n\s*/g, '')
    .split('\n')
    .filter((l) => /^npx @modelcontextprotocol\/inspector --cli -e /.test(l));
}

/** A data dir with user alice (the README's examples act as alice). */
async function dataDirWithAlice(t: Test): Promise<string> {
  const dataDir = tempDataDir(t);
  const env = { ...process.env, SERVICE_DATA_DIR: dataDir };
  t.equal((await runCli(env, ['useradd', 'alice'])).code, 0);
  t.teardown(() => runCli(env, ['stop']));
  return dataDir;
}

async function useSnippet(t: Test, entry: ServerEntry, extraEnv: Record<string, string> = {}): Promise<void> {
  const dataDir = await dataDirWithAlice(t);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('SERVICE_')) env[k] = v;
  Object.assign(env, entry.env, { SERVICE_DATA_DIR: dataDir }, extraEnv);
  // As Claude Desktop does: started from elsewhere, not from the checkout.
  const transport = new StdioClientTransport({
    command: entry.command,
    args: entry.args ?? [],
    env,
    cwd: '/',
    stderr: 'pipe',
  });
  const client = new Client({ name: 'readme-test', version: '1' });
  await client.connect(transport);
  t.teardown(() => client.close());
  const tools = await client.listTools();
  t.ok(
    tools.tools.some((x) => x.name === 'write_file'),
    'the tools are listed',
  );
  const res = await client.callTool({
    name: 'write_file',
    arguments: { path: 'notes/readme.md', content: 'from the snippet' },
  });
  t.notOk(res.isError, JSON.stringify(res.content));
  const cat = await runCli({ ...process.env, SERVICE_DATA_DIR: dataDir }, ['cat', '/home/alice/notes/readme.md']);
  t.equal(cat.stdout, 'from the snippet', "written as alice (the snippet's SERVICE_AS_USER)");
}

t.test('the Claude/Cursor stdio snippet, with the checkout path filled in', async (t) => {
  const entry = stdioSnippet();
  t.equal(entry.env?.SERVICE_AS_USER, 'alice');
  const args = (entry.args ?? []).map((a) => a.replace('/path/to/mdvfs', ROOT));
  t.not(args.join(' '), (entry.args ?? []).join(' '), 'the snippet names the checkout as /path/to/mdvfs');
  await useSnippet(t, { ...entry, args });
});

t.test('the snippet with "command": "mdvfs-mcp" after npm link (the bin on PATH)', async (t) => {
  const entry = stdioSnippet();
  t.match(readme, /After `npm link`, `"command": "mdvfs-mcp"` with no `args` works too/);
  // What npm link makes: a symlink named after the bin, to the bin file, in a directory on PATH.
  const bin = path.join(tempDataDir(t, 'mdvfs-bin-'), 'bin');
  mkdirSync(bin);
  symlinkSync(path.join(ROOT, 'dist', 'mcp', 'stdio.js'), path.join(bin, 'mdvfs-mcp'));
  await useSnippet(t, { command: 'mdvfs-mcp', env: entry.env ?? {} }, { PATH: `${bin}:${process.env.PATH ?? ''}` });
});

t.test('the Inspector stdio commands, verbatim, in the checkout', async (t) => {
  const cmds = inspectorCommands();
  t.equal(cmds.length, 2, 'two stdio commands');
  const dataDir = await dataDirWithAlice(t);
  const env = { ...process.env, SERVICE_DATA_DIR: dataDir };
  const list = await sh(cmds[0]!, { cwd: ROOT, env, timeout: 180_000, shell: '/bin/bash' });
  t.ok(
    (JSON.parse(list.stdout) as { tools: { name: string }[] }).tools.some((x) => x.name === 'read_file'),
    'tools/list',
  );
  const call = await sh(cmds[1]!, { cwd: ROOT, env, timeout: 180_000, shell: '/bin/bash' });
  t.match(
    JSON.parse(call.stdout),
    { structuredContent: { path: '/home/alice/notes/hello.md' } },
    'tools/call write_file',
  );
  const cat = await runCli(env, ['cat', '/home/alice/notes/hello.md']);
  t.equal(cat.stdout, '# Hello');
});

t.test('read top to bottom, the Inspector block writes hello.md before it reads it', async (t) => {
  const block = /MCP Inspector CLI[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme);
  if (block === null) throw new Error('the README has no Inspector block');
  const lines = block[1]!.replace(/\\\n\s*/g, '').split('\n');
  const write = lines.findIndex((l) => /--tool-name write_file .*path=notes\/hello\.md/.test(l));
  const read = lines.findIndex((l) => /--tool-name read_file .*path=\/home\/alice\/notes\/hello\.md/.test(l));
  t.ok(write >= 0 && read >= 0, 'both commands are there');
  t.ok(write < read, 'the write comes first, so the read finds the file');
});

t.test('read top to bottom, the mount block makes its mount point and reads .history before unmounting', async (t) => {
  const block = /## Mount it \(FUSE\)\s*```sh\n([\s\S]*?)```/.exec(readme);
  if (block === null) throw new Error('the README has no mount block');
  const lines = block[1]!.split('\n');
  const at = (re: RegExp): number => lines.findIndex((l) => re.test(l));
  const mkdir = at(/^mkdir -p ~\/mdvfs\b/);
  const mount = at(/^mdvfs mount ~\/mdvfs\b/);
  const history = at(/^ls ~\/mdvfs\/\.history\b/);
  const umount = at(/^mdvfs umount ~\/mdvfs\b/);
  t.ok(mkdir >= 0 && mkdir < mount, 'mkdir -p ~/mdvfs before the first mount');
  t.ok(history > mount && history < umount, '.history is read while mounted');
});
