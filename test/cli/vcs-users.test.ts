/** `mdvfs` VCS, user, group, token, workspace and delegation commands as real subprocesses. */
import t from 'tap';
import { cliEnv } from '../helpers/cli.js';

const ERR_LINE = /^mdvfs: .+ \([A-Z][A-Z0-9_]+\)\n$/;

void t.test('users, groups, tokens', async (t) => {
  const cli = await cliEnv(t);
  let r = await cli.run(['useradd', 'alice']);
  t.equal(r.code, 0);
  t.match(r.stdout, /^created user alice \(uid \d+, gid \d+, home \/home\/alice\)\n$/);
  r = await cli.run(['useradd', '--agent', '--issue-token', 'bot']);
  t.equal(r.code, 0);
  t.match(r.stdout, /^created agent bot .*\ntoken: \S+\n$/);
  const botToken = /token: (\S+)/.exec(r.stdout)?.[1] ?? '';
  t.equal((await cli.run(['whoami'], { token: botToken })).stdout, 'bot\n');

  r = await cli.run(['useradd', 'alice']);
  t.equal(r.code, 1, 'a duplicate user is an operation error');
  t.match(r.stderr, ERR_LINE);
  t.match(r.stderr, /\(EEXIST\)/);
  r = await cli.run(['useradd', 'Bad Name']);
  t.equal(r.code, 1);
  t.match(r.stderr, /\(EINVAL\)\n$/);
  r = await cli.run(['useradd', 'eve'], { user: 'alice' });
  t.equal(r.code, 1, 'alice is no admin');
  t.match(r.stderr, /\((EACCES|EPERM)\)\n$/);

  r = await cli.run(['groupadd', 'team']);
  t.equal(r.code, 0);
  t.match(r.stdout, /^created group team \(gid (\d+)\)\n$/);
  const teamGid = Number(/gid (\d+)/.exec(r.stdout)?.[1]);
  t.equal((await cli.run(['usermod', '-aG', 'team', 'alice'])).code, 0);
  let who = JSON.parse((await cli.run(['whoami', '--json'], { user: 'alice' })).stdout) as {
    groups: number[];
    is_admin: boolean;
  };
  t.ok(who.groups.includes(teamGid), 'alice is in team');
  r = await cli.run(['usermod', '-G', 'team', 'alice']);
  t.equal(r.code, 2, 'usermod needs -a or -r');
  t.equal((await cli.run(['usermod', '-rG', 'team', 'alice'])).code, 0);
  who = JSON.parse((await cli.run(['whoami', '--json'], { user: 'alice' })).stdout) as {
    groups: number[];
    is_admin: boolean;
  };
  t.notOk(who.groups.includes(teamGid), 'alice left team');
  t.equal((await cli.run(['usermod', '-aG', 'wheel', 'alice'])).code, 0);
  r = await cli.run(['whoami', '-v'], { user: 'alice' });
  t.match(r.stdout, /^user: alice \(admin\)\nuid: \d+ +gid: \d+ +groups: [\d,]+\nhome: \/home\/alice\n$/);
  r = await cli.run(['usermod', '-aG', 'nosuchgroup', 'alice']);
  t.equal(r.code, 1);
  t.match(r.stderr, /\(ENOENT\)\n$/);

  r = await cli.run(['token', 'alice']);
  t.equal(r.code, 0);
  const tok1 = r.stdout.trim();
  t.match(r.stdout, /^\S+\n$/, 'token prints only the token');
  t.equal((await cli.run(['whoami'], { token: tok1 })).stdout, 'alice\n');
  const tok2 = (await cli.run(['token', 'alice'])).stdout.trim();
  t.not(tok1, tok2);
  t.equal((await cli.run(['whoami'], { token: tok1 })).code, 1, 'regenerating replaces the old token');

  t.equal((await cli.run(['useradd', 'temp'])).code, 0);
  t.equal((await cli.run(['userdel', 'temp'])).code, 0);
  r = await cli.run(['whoami'], { user: 'temp' });
  t.equal(r.code, 1);
  t.match(r.stderr, /\(EAUTH\)\n$/);
  r = await cli.run(['userdel', 'temp']);
  t.equal(r.code, 1);
  t.match(r.stderr, /\(ENOENT\)\n$/);

  await t.test('delegation with --on-behalf-of and SERVICE_ON_BEHALF_OF', async (t) => {
    // Intersection semantics: the agent needs access too, so alice opens a shared directory.
    await cli.run(['chmod', '755', '/home/alice'], { user: 'alice' });
    await cli.run(['mkdir', 'shared'], { user: 'alice' });
    await cli.run(['chmod', '777', 'shared'], { user: 'alice' });
    r = await cli.run(['write', 'shared/from-bot.md', 'hi'], {
      token: botToken,
      env: { SERVICE_ON_BEHALF_OF: 'alice' },
    });
    t.equal(r.code, 1, 'no delegation without her grant');
    t.match(r.stderr, /no delegation grant: alice has not granted bot/);
    r = await cli.run(['delegate', 'add', 'bot'], { user: 'alice' });
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, 'bot may act on behalf of alice\n');
    t.match((await cli.run(['delegate', 'ls'], { user: 'alice' })).stdout, /^alice\s+bot\s+\d{4}-/);
    r = await cli.run(['write', 'private.md', 'hi'], { token: botToken, env: { SERVICE_ON_BEHALF_OF: 'alice' } });
    t.equal(r.code, 1, 'the agent may not write where only alice may');
    t.match(r.stderr, /\(EACCES\)\n$/);
    r = await cli.run(['write', 'shared/from-bot.md', 'hi'], {
      token: botToken,
      env: { SERVICE_ON_BEHALF_OF: 'alice' },
    });
    t.equal(r.code, 0, r.stderr);
    const st = JSON.parse((await cli.run(['stat', '--json', '/home/alice/shared/from-bot.md'])).stdout) as {
      uid: number;
    };
    const alice = JSON.parse((await cli.run(['whoami', '--json'], { user: 'alice' })).stdout) as { uid: number };
    t.equal(st.uid, alice.uid, 'the delegate owns what the agent wrote in her home');
    r = await cli.run(['whoami', '-v', '--on-behalf-of', 'alice'], { token: botToken });
    t.match(r.stdout, /on behalf of: alice/);
    r = await cli.run(['delegate', 'rm', 'bot'], { user: 'alice' });
    t.equal(r.stdout, 'bot may no longer act on behalf of alice\n');
    r = await cli.run(['whoami', '--on-behalf-of', 'alice'], { token: botToken });
    t.equal(r.code, 1, 'revoked: the next request is refused');
    await cli.run(['delegate', 'add', 'bot', '--for', 'alice']); // root grants for her
    t.equal((await cli.run(['whoami', '--on-behalf-of', 'alice'], { token: botToken })).code, 0);
    // --share: the agent joins her personal group (so a folder she opens to it is open to the agent)
    r = await cli.run(['delegate', 'add', 'bot', '--share'], { user: 'alice' });
    t.equal(r.stdout, 'bot may act on behalf of alice and is in group alice\n', r.stderr);
    t.match((await cli.run(['delegate', 'ls'], { user: 'alice' })).stdout, /^alice\s+bot\s+\S+\s+shares group\n/m);
    const botWho = JSON.parse((await cli.run(['whoami', '--json'], { token: botToken })).stdout) as {
      groups: number[];
    };
    const aliceWho = JSON.parse((await cli.run(['whoami', '--json'], { user: 'alice' })).stdout) as { gid: number };
    t.ok(botWho.groups.includes(aliceWho.gid), 'bot is in group alice');
  });

  await t.test('workspaces', async (t) => {
    await cli.run(['mkdir', '-p', '/srv/proj']);
    await cli.run(['chown', 'bot', '/srv/proj']);
    await cli.run(['write', '/srv/proj/readme.md', 'project']);
    await cli.run(['chown', 'bot', '/srv/proj/readme.md']);
    r = await cli.run(['workspace', 'create', 'proj', '/srv/proj']);
    t.equal(r.code, 0);
    const id = r.stdout.trim();
    t.match(id, /^[0-9a-f-]{36}$/);
    r = await cli.run(['workspace', 'list']);
    t.match(r.stdout, new RegExp(`^${id} +proj +\\S+ +/srv/proj\\n`, 'm'));
    t.same(
      JSON.parse((await cli.run(['workspace', 'list', '--json'])).stdout).workspaces.map(
        (w: { name: string }) => w.name,
      ),
      ['proj'],
    );
    r = await cli.run(['workspace', 'token', 'proj', 'ci']);
    t.equal(r.code, 2, 'an agent token is needed');
    r = await cli.run(['workspace', 'token', 'proj', 'ci', '--agent-token', botToken]);
    t.equal(r.code, 0);
    const secret = r.stdout.trim();
    const ws = { token: secret, env: { SERVICE_WORKSPACE: id } };
    t.equal((await cli.run(['ls', '/'], ws)).stdout, 'readme.md\n', 'inside the workspace, / is its root');
    t.equal((await cli.run(['cat', 'readme.md'], ws)).stdout, 'project\n');
    t.equal(
      (await cli.run(['ls', '/', '--workspace', id], { token: secret })).stdout,
      'readme.md\n',
      'the same with the --workspace flag',
    );
    r = await cli.run(['cat', '/../../home/alice/shared/from-bot.md'], ws);
    t.not(r.stdout, 'hi\n', 'paths cannot escape the workspace');
    t.equal(r.code, 1);
    r = await cli.run(['whoami'], { token: secret });
    t.equal(r.code, 1, 'a workspace secret without its workspace id is refused');
  });
});

void t.test('version control', async (t) => {
  const cli = await cliEnv(t);
  await cli.run(['useradd', 'alice']);
  const alice = (args: string[]) => cli.run(args, { user: 'alice' });
  await alice(['write', 'a.md', 'one']);
  let r = await alice(['status']);
  t.equal(r.code, 0);
  t.match(r.stdout, /a\.md/, 'status lists the new file');
  r = await alice(['status', '--json']);
  t.ok((JSON.parse(r.stdout) as { added: string[] }).added.includes('/home/alice/a.md'));
  r = await alice(['commit', '-m', 'first']);
  t.equal(r.code, 0);
  const first = /^\[([0-9a-f]{12})\] first\n/.exec(r.stdout)?.[1];
  t.ok(first, `commit prints the hash: ${r.stdout}`);
  r = await alice(['status', '--json']);
  t.equal((JSON.parse(r.stdout) as { clean: boolean }).clean, true);
  await alice(['write', 'a.md', 'two']);
  await alice(['write', 'b.md', 'bee']);
  r = await alice(['diff']);
  t.equal(r.code, 0);
  t.match(r.stdout, /^-one$/m);
  t.match(r.stdout, /^\+two$/m);
  r = await alice(['diff', '--path', 'b.md']);
  t.notMatch(r.stdout, /two/, 'diff --path limits the diff');
  r = await alice(['commit', '-m', 'second\n\nwith a body']);
  const second = /^\[([0-9a-f]{12})\] second\n/.exec(r.stdout)?.[1] ?? '';
  t.ok(second);
  r = await alice(['diff', first ?? '', second]);
  t.match(r.stdout, /^\+two$/m, 'diff between two commits');
  r = await alice(['log']);
  t.match(
    r.stdout,
    new RegExp(
      `^commit ${second}\\nAuthor: alice\\nDate: +\\d{4}-\\d\\d-\\d\\dT[\\d:]+Z\\n\\n    second\\n    \\n    with a body\\n\\ncommit ${first}\\n`,
    ),
  );
  r = await alice(['log', '--oneline']);
  t.equal(r.stdout, `${second} second\n${first} first\n`);
  r = await alice(['log', '--oneline', '-n', '1']);
  t.equal(r.stdout, `${second} second\n`);
  r = await alice(['log', '--oneline', '--path', 'b.md']);
  t.equal(r.stdout, `${second} second\n`, 'log --path shows only commits touching the path');
  t.same(
    (JSON.parse((await alice(['log', '--json'])).stdout) as { commits: Array<{ hash: string }> }).commits.map(
      (c) => c.hash,
    ),
    [second, first],
  );
  await alice(['write', 'a.md', 'uncommitted']);
  r = await alice(['revert', (first ?? '').slice(0, 6)]);
  t.equal(r.code, 0);
  t.match(r.stdout, /reverted to [0-9a-f]+ as \[[0-9a-f]{12}\]/);
  t.equal((await alice(['cat', 'a.md'])).stdout, 'one\n');
  t.equal((await alice(['cat', 'b.md'])).code, 1, 'b.md did not exist at the first commit');
  r = await alice(['log', '--oneline', '-n', '3']);
  t.match(r.stdout, /^[0-9a-f]{12} revert to /, 'the revert is a new commit');
  r = await alice(['revert', 'ffffffffffff']);
  t.equal(r.code, 1);
  t.match(r.stderr, ERR_LINE);

  // The maintenance commands keep working next to the new ones.
  r = await cli.run(['fsck']);
  t.equal(r.code, 0);
  t.match(r.stdout, /^fsck: ok \(\d+ objects, \d+ inodes\)\n$/);
  r = await cli.run(['gc']);
  t.equal(r.code, 0);
  t.match(r.stdout, /^gc: removed \d+ object\(s\), kept \d+\n$/);
  r = await cli.run(['--version']);
  t.equal(r.code, 0);
  t.match(r.stdout, /^\d+\.\d+\.\d+\n$/);
});
