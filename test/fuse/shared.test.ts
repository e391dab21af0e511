/**
 * `mdvfs mount --shared` (issue 18): one mount for every local user, each acting as the store's user
 * of the same name. Real local accounts (useradd) use it with real tools: the daemon decides for each
 * of them, owners show by name, what the kernel caches is not shown to users the modes shut out, and
 * a local user the store does not know gets nothing.
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import { localUser, type LocalUser } from '../helpers/unix-user.js';
import { mount, mountFailure, skipWithoutFuse, startDaemon } from '../helpers/fuse.js';

skipWithoutFuse(t);

const users: LocalUser[] = [];
for (let i = 0; i < 3; i++) {
  const u = await localUser(t);
  if (typeof u === 'string') {
    t.plan(0, `skipped: ${u}`);
    process.exit(0);
  }
  users.push(u);
}
const [ann, ben, stranger] = users as [LocalUser, LocalUser, LocalUser];

const d = await startDaemon(t);
const root = d.client;
// Store users named as two of the local users; the third has none. Their store uids are not their local ones.
const annInStore = await root.call('admin.userAdd', { name: ann.name });
const benInStore = await root.call('admin.userAdd', { name: ben.name });
const m = await mount(t, d, ['--shared']);
const home = (u: LocalUser): string => `${m.dir}/home/${u.name}`;
const as = (u: LocalUser, script: string) => u.run('sh', ['-c', script]);

void t.test('each local user acts as the store user of the same name', async (t) => {
  const made = await as(ann, `cd ${home(ann)} && echo hello > note.md && umask 077 && echo secret > private.md`);
  t.equal(made.code, 0, `ann writes in her home: ${made.stderr}`);
  t.equal(
    (await root.call('fs.stat', { path: `/home/${ann.name}/note.md` })).uid,
    annInStore.uid,
    'the daemon records ann',
  );
  t.equal(
    (await as(ann, `stat -c '%u %g' ${home(ann)}/note.md`)).stdout,
    `${ann.uid} ${ann.gid}\n`,
    "her file shows her local uid and gid, not the store's",
  );
  t.match(
    (await as(ben, `stat -c '%u' ${home(ann)}/note.md`)).stderr,
    /Permission denied/,
    "ben cannot even look into ann's 0700 home",
  );

  const mine = await as(ben, `echo mine > ${home(ben)}/mine.md && stat -c %u ${home(ben)}/mine.md`);
  t.equal(mine.stdout, `${ben.uid}\n`, `ben writes in his: ${mine.stderr}`);
  t.equal((await root.call('fs.stat', { path: `/home/${ben.name}/mine.md` })).uid, benInStore.uid);
});

void t.test("the kernel's caches are not shown to users the modes shut out", async (t) => {
  // ann opens her home to everyone: ben may list it and read note.md, never private.md.
  t.equal((await as(ann, `chmod 755 ${home(ann)} && ls ${home(ann)} && stat ${home(ann)}/private.md`)).code, 0);
  t.equal((await as(ben, `cat ${home(ann)}/note.md`)).stdout, 'hello\n', "ben reads ann's 0644 note");
  const secret = await as(ben, `cat ${home(ann)}/private.md`);
  t.match(secret.stderr, /Permission denied/, "ben cannot read ann's 0600 file");
  t.notMatch(secret.stdout, /secret/);
  t.match((await as(ben, `echo x > ${home(ann)}/x.md`)).stderr, /Permission denied/, 'nor create in her home');

  // She shuts it again: the kernel listed it and looked up its files for her, and must not show them to ben.
  t.equal((await as(ann, `chmod 700 ${home(ann)} && ls ${home(ann)} && stat ${home(ann)}/note.md`)).code, 0);
  t.match((await as(ben, `ls ${home(ann)}`)).stderr, /Permission denied/, 'her cached listing is not his');
  t.match((await as(ben, `stat ${home(ann)}/note.md`)).stderr, /Permission denied/, 'nor her cached entries');
});

void t.test('a change through the daemon binds every user at the next open', async (t) => {
  await root.call('fs.chmod', { path: `/home/${ann.name}`, mode: '0755' });
  t.equal((await as(ben, `cat ${home(ann)}/note.md`)).stdout, 'hello\n');
  await root.call('fs.chmod', { path: `/home/${ann.name}/note.md`, mode: '0600' });
  t.match(
    (await as(ben, `cat ${home(ann)}/note.md`)).stderr,
    /Permission denied/,
    'a chmod through the daemon holds at once',
  );
  await root.call('fs.chown', { path: `/home/${ann.name}/note.md`, owner: ben.name });
  t.equal(
    (await as(ben, `echo more >> ${home(ann)}/note.md && stat -c %u ${home(ann)}/note.md && cat ${home(ann)}/note.md`))
      .stdout,
    `${ben.uid}\nhello\nmore\n`,
    'a chown through the daemon gives ben the file',
  );
  t.match((await as(ann, `cat ${home(ann)}/note.md`)).stderr, /Permission denied/, 'and takes it from ann');
});

void t.test('a write by someone other than the owner takes the setuid and setgid bits off, as on Linux', async (t) => {
  // The kernel asks the mount, as the writer, to drop them before the write: a chmod the writer may make.
  for (const f of ['w.md', 't.md']) {
    await root.call('fs.write', { path: `/${f}`, mode: '0666' }, { data: Buffer.from('x\n') });
    await root.call('fs.chmod', { path: `/${f}`, mode: '6777' });
  }
  const w = await as(ann, `echo more >> ${m.dir}/w.md && stat -c %a ${m.dir}/w.md`);
  t.equal(w.code, 0, `ann's write succeeds: ${w.stderr}`);
  t.equal(w.stdout, '777\n', 'and takes both bits off');
  const tr = await as(ann, `truncate -s 1 ${m.dir}/t.md && stat -c '%a %s' ${m.dir}/t.md`);
  t.equal(tr.stdout, '777 1\n', `so does her truncate: ${tr.stderr}`);
  for (const f of ['w.md', 't.md'])
    t.equal((await root.call('fs.stat', { path: `/${f}` })).mode, '0777', `the daemon holds ${f} so`);
  t.match(
    (await as(ann, `chmod 666 ${m.dir}/w.md`)).stderr,
    /Operation not permitted/,
    'any other chmod is the owner’s',
  );
});

void t.test('root chowns to local users by name; an id with no namesake in the store is refused', async (t) => {
  const give = await m.sh(
    `chown ${ann.uid}:${ann.gid} home/${ben.name}/mine.md && stat -c '%u %g' home/${ben.name}/mine.md`,
  );
  t.equal(give.stdout, `${ann.uid} ${ann.gid}\n`, `root gives ben's file to ann: ${give.stderr}`);
  const st = await root.call('fs.stat', { path: `/home/${ben.name}/mine.md` });
  t.same([st.uid, st.gid], [annInStore.uid, annInStore.gid], 'the daemon records her store ids');
  t.match((await m.sh(`chown ${stranger.uid} home/${ben.name}/mine.md`)).stderr, /Invalid argument/);
  t.equal((await root.call('fs.stat', { path: `/home/${ben.name}/mine.md` })).uid, annInStore.uid, 'nothing changed');
});

void t.test('a local user with no store user of that name gets nothing', async (t) => {
  await root.call('fs.write', { path: '/open.md', mode: '0644' }, { data: Buffer.from('for all\n') });
  t.equal((await as(ann, `cat ${m.dir}/open.md`)).stdout, 'for all\n', 'a store user reads a 0644 file');
  const read = await as(stranger, `cat ${m.dir}/open.md`);
  t.match(read.stderr, /Permission denied/, 'the stranger cannot read it');
  t.notMatch(read.stdout, /for all/);
  t.match((await as(stranger, `echo x > ${m.dir}/tmp/x.md`)).stderr, /Permission denied/, 'nor create in /tmp (1777)');
  await t.rejects(root.call('fs.stat', { path: '/tmp/x.md' }), { code: 'ENOENT' });
  t.match(m.stderr(), new RegExp(`local uid ${stranger.uid} has no user of the same name`), 'the mount says why');

  // Once the store has a user of that name, the same local user is served (users are read again).
  await root.call('admin.userAdd', { name: stranger.name });
  let later = await as(stranger, `cat ${m.dir}/open.md`);
  for (let i = 0; i < 50 && later.code !== 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    later = await as(stranger, `cat ${m.dir}/open.md`);
  }
  t.equal(later.stdout, 'for all\n', 'a store user added later is served');
});

void t.test('a store user with no local account: the local nobody is not its owner (issue 30, low)', async (t) => {
  // Its owner used to show as 65534, the local nobody's uid: the kernel (default_permissions) then let
  // nobody search its 0700 home and stat the entries it had cached there for root.
  const ghost = `mdvfsghost${process.pid}`;
  await root.call('admin.userAdd', { name: ghost });
  await root.call('fs.write', { path: `/home/${ghost}/secret.md` }, { data: Buffer.from('boo\n') });
  const seen = await m.sh(`stat -c '%u %g %a' home/${ghost} && stat -c %s home/${ghost}/secret.md`);
  t.equal(seen.code, 0, `root looks inside (the kernel caches the entry): ${seen.stderr}`);
  const [owner, group, mode] = (seen.stdout.split('\n')[0] ?? '').split(' ');
  t.equal(mode, '700');
  t.not(owner, '65534', 'the owner is not shown as nobody');
  t.not(group, '65534', 'nor the group as nogroup');
  const local = (db: string, id: string) =>
    new Promise<string>((resolve) => execFile('getent', [db, id ?? ''], (_e, out) => resolve(out)));
  t.equal(await local('passwd', owner ?? ''), '', 'no local account has the uid shown');
  t.equal(await local('group', group ?? ''), '', 'no local group has the gid shown');
  const asNobody = (cmd: string) =>
    new Promise<{ code: number; stderr: string; stdout: string }>((resolve) =>
      execFile('runuser', ['-u', 'nobody', '--', 'sh', '-c', cmd], (e, stdout, stderr) =>
        resolve({ code: e === null ? 0 : ((e as { code?: number }).code ?? 1), stdout, stderr }),
      ),
    );
  const nobody = await asNobody(`stat -c %s ${m.dir}/home/${ghost}/secret.md`);
  t.match(nobody.stderr, /Permission denied/, "nobody cannot stat the cached entry in the ghost's 0700 home");
  t.notMatch(nobody.stdout, /\d/);
  t.match((await asNobody(`ls ${m.dir}/home/${ghost}`)).stderr, /Permission denied/, 'nor list it');
});

void t.test('--shared refuses a principal of its own and --writeback', async (t) => {
  for (const args of [
    ['--shared', '--user', ann.name],
    ['--shared', '--writeback'],
  ]) {
    const r = await mountFailure(t, d, args);
    t.not(r.code, 0, `${args.join(' ')} fails`);
    t.match(r.stderr, /--shared/, 'saying why');
  }
});
