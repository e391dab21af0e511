/** `mdvfs shell` driven through a real pseudo-terminal (node-pty), the way a person types. */
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { cliEnv, spawnShell } from '../helpers/cli.js';

const UP = '\x1b[A';
const CTRL_C = '\x03';
const CTRL_D = '\x04';

void t.test('first run: create the first admin, then work in the shell', async (t) => {
  const cli = await cliEnv(t);
  const sh = await spawnShell(t, cli.env);

  await sh.expect('Create the first admin user now? [Y/n] ');
  sh.mark();
  sh.write('y\r');
  await sh.expect('Admin user name: ');
  sh.mark();
  sh.write('alice\r');
  const shown = await sh.expect('alice@mdvfs:~ $ ');
  const token = /API token \(shown once[^\n]*\n(\S+)\n/.exec(shown)?.[1];
  t.ok(token, 'the token is printed once');
  const who = await cli.run(['whoami', '-v'], { token: token ?? '' });
  t.match(who.stdout, /^user: alice \(admin\)\n/, 'the token belongs to the new admin');
  t.notMatch(
    sh.screen().slice(sh.screen().indexOf(token ?? '') + 1),
    new RegExp(token ?? 'x'),
    'the token is not shown again',
  );

  const run = async (line: string, expectText: string | RegExp, prompt = '$ ') => {
    sh.mark();
    sh.write(`${line}\r`);
    await sh.expect(expectText);
    await sh.expect(new RegExp(`${prompt.replace(/[$~/]/g, '\\$&')}$`));
    return sh.sinceMark();
  };

  await run('mkdir notes', 'alice@mdvfs:~ $ ');
  await run("echo 'alpha x' > notes/alpha.md", 'alice@mdvfs:~ $ ');
  await run('write notes/beta.md "beta x" ; echo "gamma" >> notes/beta.md', 'alice@mdvfs:~ $ ');

  let out = await run('cd notes', 'alice@mdvfs:~/notes $ ');
  t.match(out, /alice@mdvfs:~\/notes \$ $/, 'the prompt shows the new cwd');
  out = await run('pwd', '/home/alice/notes\n');
  t.match(out, /^pwd\n\/home\/alice\/notes\nalice@mdvfs:~\/notes \$ $/);

  out = await run('cat alpha.md beta.md | grep x | wc -l', /\n2\n/);
  t.match(out, /wc -l\n2\nalice@mdvfs:~\/notes \$ $/, 'a pipeline between built-ins');
  out = await run('cat beta.md | head -n 1', /\nbeta x\n/);
  t.notMatch(out, /gamma/);

  // Tab completion of a command name and of a path.
  sh.mark();
  sh.write('wh\t');
  await sh.expect('whoami ');
  sh.write('\r');
  await sh.expect(/\nalice\n/);
  sh.mark();
  sh.write('cat be\t');
  await sh.expect('cat beta.md');
  sh.write('\r');
  out = await sh.expect(/beta x\ngamma\n.*\$ $/);
  sh.mark();
  sh.write('cd ../no\t');
  await sh.expect('cd ../notes/');
  sh.write('\r');
  await sh.expect(/alice@mdvfs:~\/notes \$ $/);

  // History recall: the up arrow brings back the last line.
  await run('echo recall-me', /\nrecall-me\n/);
  sh.mark();
  sh.write(UP);
  await sh.expect('echo recall-me');
  sh.write('\r');
  out = await sh.expect(/\nrecall-me\n.*\$ $/);
  t.pass('history recall runs the previous command again');

  // Ctrl-C abandons the line being typed and keeps the shell usable.
  sh.mark();
  sh.write('cat should-not-run.md');
  await sh.expect('should-not-run');
  sh.write(CTRL_C);
  await sh.expect('^C');
  out = await run('pwd', '/home/alice/notes\n');
  t.notMatch(sh.screen(), /ENOENT/, 'the interrupted line never ran');

  // Errors are reported and the shell goes on.
  out = await run('cat missing.md', /cat: .*\(ENOENT\)\n/);
  out = await run('ls', 'alpha.md\nbeta.md\n');

  // Ctrl-D leaves with status 0.
  sh.write(CTRL_D);
  const exit = await sh.exited;
  t.equal(exit.exitCode, 0);
  const cat = await cli.run(['cat', '/home/alice/notes/beta.md']);
  t.equal(cat.stdout, 'beta x\ngamma\n', 'what the shell wrote is in the filesystem');
});

void t.test('an existing user: no admin offer, cd errors, exit status', async (t) => {
  const cli = await cliEnv(t);
  await cli.run(['useradd', 'admin']);
  await cli.run(['useradd', 'bob']);
  await cli.run(['write', '/home/bob/todo.md', 'one']);
  await cli.run(['chown', 'bob', '/home/bob/todo.md']);
  const sh = await spawnShell(t, cli.env, ['--user', 'bob']);
  await sh.expect('bob@mdvfs:~ $ ');
  t.notMatch(sh.screen(), /first admin/);
  sh.mark();
  sh.write('cd /home/admin\r');
  await sh.expect(/\(EACCES\)\n/);
  await sh.expect('bob@mdvfs:~ $ ');
  sh.mark();
  sh.write('cd todo.md\r');
  await sh.expect(/\(ENOTDIR\)\n/);
  sh.mark();
  sh.write('cd /\r');
  await sh.expect('bob@mdvfs:/ $ ');
  sh.mark();
  sh.write('cat ~/todo.md | wc -c\r');
  await sh.expect(/\n4\n/);
  sh.mark();
  sh.write('ls --bogus\r');
  await sh.expect(/unknown option '--bogus' \(EUSAGE\)\n/);
  sh.mark();
  sh.write('help\r');
  await sh.expect(/grep.*\n/);
  sh.mark();
  sh.write('exit 3\r');
  // Without a terminal the shell reads commands from stdin: no prompt, the same commands.
  const piped = await cli.run(['shell', '--user', 'bob'], {
    input: 'pwd\ncat todo.md | wc -c\ncd /nope\necho still here\nexit 4\necho never\n',
  });
  t.equal(piped.stdout, '/home/bob\n4\nstill here\n');
  t.match(piped.stderr, /^cd: .*\(ENOENT\)\n$/);
  t.equal(piped.code, 4);
  const exit = await sh.exited;
  t.equal(exit.exitCode, 3);
});

void t.test(
  'history is kept across sessions, privately, without first-run answers or space-prefixed lines',
  async (t) => {
    const cli = await cliEnv(t);
    const file = path.join(cli.env.XDG_STATE_HOME ?? '', 'mdvfs', 'shell_history');
    const first = await spawnShell(t, cli.env);
    await first.expect('Create the first admin user now? [Y/n] ');
    first.write('y\r');
    await first.expect('Admin user name: ');
    first.write('hist-admin\r');
    await first.expect('hist-admin@mdvfs:~ $ ');
    for (const line of ['echo one', 'echo two', ' echo hidden-from-file']) {
      first.mark();
      first.write(`${line}\r`);
      await first.expect(/\$ $/);
    }
    first.write(CTRL_D);
    t.equal((await first.exited).exitCode, 0);
    t.equal(
      readFileSync(file, 'utf8'),
      'echo one\necho two\n',
      'the file holds the commands, oldest first, and nothing else',
    );
    t.equal(statSync(file).mode & 0o777, 0o600, 'readable by its owner only');
    t.equal(statSync(path.dirname(file)).mode & 0o777, 0o700);

    // A later session (as a user now: root has no history of its own here) recalls them with the up arrow.
    const second = await spawnShell(t, cli.env, ['--user', 'hist-admin']);
    await second.expect('hist-admin@mdvfs:~ $ ');
    second.mark();
    second.write(UP);
    await second.expect('echo two');
    second.write(UP);
    await second.expect('echo one');
    second.mark();
    second.write('\r');
    await second.expect(/\none\n/);
    second.write(CTRL_D);
    await second.exited;
    t.equal(
      readFileSync(file, 'utf8'),
      'echo two\necho one\n',
      'a recalled command moves to the end (duplicates removed)',
    );

    // A history file that cannot be written (its directory is under a regular file: ENOTDIR, even for root)
    // is a warning, not a failure.
    const blocker = path.join(path.dirname(file), 'blocker');
    writeFileSync(blocker, '');
    const third = await spawnShell(t, { ...cli.env, XDG_STATE_HOME: path.join(blocker, 'state') }, [
      '--user',
      'hist-admin',
    ]);
    await third.expect('hist-admin@mdvfs:~ $ ');
    third.mark();
    third.write('echo still-works\r');
    await third.expect(/\nstill-works\n/);
    third.mark();
    third.write('echo again\r');
    await third.expect(/\nagain\n/);
    t.match(
      third.screen(),
      /history file .*blocker\/state.*\n?.*\(history is kept for this session only\)/,
      'a warning names the file',
    );
    t.equal(third.screen().split('history is kept for this session only').length, 2, 'once, not at every command');
    third.write(CTRL_D);
    t.equal((await third.exited).exitCode, 0);
  },
);

void t.test('Ctrl-C interrupts a running command: the prompt returns, the rest of the line never runs', async (t) => {
  // A catastrophic regex keeps the daemon's grep busy until its time bound (4 s here).
  const cli = await cliEnv(t, { SERVICE_REGEX_TIMEOUT_MS: '4000' });
  await cli.run(['useradd', 'admin']);
  await cli.run(['useradd', 'dora']);
  await cli.run(['write', '/home/dora/slow.md', `${'a'.repeat(40)}!\n`]);
  await cli.run(['chown', 'dora', '/home/dora/slow.md']);
  const sh = await spawnShell(t, cli.env, ['--user', 'dora']);
  await sh.expect('dora@mdvfs:~ $ ');
  sh.mark();
  sh.write("grep '(a+)+$' slow.md > found.md ; write after.md ran\r");
  // Wait until the grep is really running in the daemon (its worker is busy), then interrupt.
  await new Promise((r) => setTimeout(r, 500));
  sh.write(CTRL_C);
  await sh.expect(/\^C\n.*dora@mdvfs:~ \$ $/);
  sh.mark();
  sh.write('echo responsive\r');
  await sh.expect(/\nresponsive\n/);
  // A later stage that calls no daemon (exit) must not run either once its pipeline is interrupted.
  sh.mark();
  sh.write("grep '(a+)+$' slow.md | exit 7\r");
  await new Promise((r) => setTimeout(r, 500));
  sh.write(CTRL_C);
  await sh.expect(/\^C\n.*dora@mdvfs:~ \$ $/);
  // Past the grep's own end (it fails with ETIMEDOUT after 4 s): nothing of it shows up, nothing was written.
  await new Promise((r) => setTimeout(r, 5000));
  t.notMatch(sh.screen(), /ETIMEDOUT|took longer/, 'the interrupted command prints nothing afterwards');
  const client = await cli.client();
  await t.rejects(
    client.call('fs.stat', { path: '/home/dora/found.md' }),
    { code: 'ENOENT' },
    'its redirect never wrote',
  );
  await t.rejects(
    client.call('fs.stat', { path: '/home/dora/after.md' }),
    { code: 'ENOENT' },
    'the next command of the line never ran',
  );
  t.equal(
    sh.screen().includes('exit 7') &&
      (await Promise.race([sh.exited.then(() => 'exited'), new Promise((r) => setTimeout(() => r('alive'), 200))])),
    'alive',
    'the interrupted `| exit 7` never ran',
  );
  const size = (await client.call('fs.stat', { path: '/home/dora/slow.md' })).size;
  sh.mark();
  sh.write('cat slow.md | wc -c\r');
  await sh.expect(`\n${size}\n`);
  t.pass('the shell goes on working');
  sh.write(CTRL_D);
  t.equal((await sh.exited).exitCode, 0);
});

void t.test('tab completion of names with spaces and quotes: the word comes back quoted, and runs', async (t) => {
  const cli = await cliEnv(t);
  await cli.run(['useradd', 'admin']);
  await cli.run(['useradd', 'carol']);
  await cli.run(['write', '/home/carol/My Note.md', 'note body']);
  await cli.run(['mkdir', '/home/carol/Dir with space']);
  await cli.run(['write', '/home/carol/Dir with space/inner file.md', 'inner body']);
  await cli.run(['write', '/home/carol/Plan A.md', 'plan a']);
  await cli.run(['write', '/home/carol/Plan B.md', 'plan b']);
  await cli.run(['write', "/home/carol/it's.md", 'apostrophe']);
  const sh = await spawnShell(t, cli.env, ['--user', 'carol']);
  await sh.expect('carol@mdvfs:~ $ ');

  // Types `typed`, presses Tab (and `more` + Tab after each step), expects the line to show `shown`,
  // then runs it and expects the file's content: the parser accepts what completion inserted.
  const complete = async (steps: [string, string][], body: string) => {
    sh.mark();
    for (const [typed, shown] of steps) {
      sh.write(`${typed}\t`);
      await sh.expect(shown);
    }
    sh.mark();
    sh.write('\r');
    const out = await sh.expect(/\$ $/);
    t.match(out, new RegExp(`^\\n${body}\\n`), `${steps.map(([s]) => s).join('<TAB>')}<TAB> runs`);
    t.notMatch(out, /\(E[A-Z]+\)/);
  };

  await complete([['cat My', 'cat My\\ Note.md ']], 'note body');
  await complete([["cat 'My N", "cat 'My Note.md' "]], 'note body');
  await complete([['cat "My', 'cat "My Note.md" ']], 'note body');
  // A directory keeps the quote open, so the next name goes on inside it.
  await complete(
    [
      ['cat "Dir', 'cat "Dir with space/'],
      ['in', 'inner file.md" '],
    ],
    'inner body',
  );
  // Completing inside a word already escaped with backslashes.
  await complete([['cat Dir\\ with\\ space/in', 'inner\\ file.md ']], 'inner body');
  await complete(
    [
      ['cat Dir\\ w', 'cat Dir\\ with\\ space/'],
      ['in', 'inner\\ file.md '],
    ],
    'inner body',
  );
  // Two matches: the shared part (with its escaped space) first, then the rest.
  await complete(
    [
      ['cat Pl', 'cat Plan\\ '],
      ['B', 'B.md '],
    ],
    'plan b',
  );
  await complete([['cat it', "cat it\\'s.md "]], 'apostrophe');
  await complete([["cat 'it", "cat 'it'\\''s.md' "]], 'apostrophe');
  // A word typed in mixed quoting is rewritten in one style.
  await complete([['cat My" "N', 'cat My\\ Note.md ']], 'note body');

  sh.write(CTRL_D);
  t.equal((await sh.exited).exitCode, 0);
});
