/** File commands: ls, cat, write, mkdir, rm, mv, cp, stat, tree, find, grep, chmod, chown, ln. */
import { Option, type Command } from 'commander';
import { VfsError } from '../../daemon/errors.js';
import { listAll } from '../../daemon/rpc/listing.js';
import type { DirEntry, Stat } from '../../daemon/rpc/protocol.js';
import type { CmdContext, CommandHost } from '../context.js';
import { CliError, UsageError } from '../errors.js';
import { baseName, columns, isoTime, joinPath, modeString, Names, shortTime } from '../format.js';
import { applyMode, isSymbolicMode, validateMode } from '../mode.js';

type StatResult = Stat & { path: string };

function isCode(err: unknown, code: string): boolean {
  return err instanceof VfsError && err.code === code;
}

async function statOrNull(ctx: CmdContext, path: string, nofollow = false): Promise<StatResult | null> {
  try {
    return await ctx.caller.call('fs.stat', nofollow ? { path, nofollow } : { path });
  } catch (err) {
    if (isCode(err, 'ENOENT')) return null;
    throw err;
  }
}

/**
 * Splits `<src...> <dst>`. The daemon (`into_dir`) turns an existing directory destination into
 * dst/<name>, like mv/cp; several sources need a directory destination.
 */
async function targets(ctx: CmdContext, paths: string[], verb: string): Promise<Array<{ src: string; dst: string }>> {
  if (paths.length < 2) throw new UsageError(`${verb}: missing destination file operand after '${paths[0] ?? ''}'`);
  const dstArg = paths[paths.length - 1] as string;
  const srcs = paths.slice(0, -1).map((p) => ctx.path(p));
  const dst = ctx.path(dstArg);
  if (srcs.length > 1 && (await statOrNull(ctx, dst))?.kind !== 'directory')
    throw new CliError('ENOTDIR', `target '${dstArg}' is not a directory`);
  return srcs.map((src) => ({ src, dst }));
}

function isRootPath(p: string): boolean {
  return /^\/+$/.test(p) || /^\/+(\.\/*)*$/.test(p);
}

export function registerFileCommands(program: Command, host: CommandHost): void {
  // ---- ls ----
  host.action(
    program
      .command('ls')
      .description('list a directory (or show a file)')
      .argument('[paths...]', 'directories or files (default: the current directory, or your home)')
      .option('-l, --long', 'long format: mode, owner, group, size, time')
      .option('-a, --all', 'include names that start with a dot')
      .option('--json', 'print the listing as JSON'),
    async (ctx, cmd) => {
      const [paths] = cmd.processedArgs as [string[]];
      const o = cmd.opts<{ long?: boolean; all?: boolean; json?: boolean }>();
      const list = paths.length === 0 ? [ctx.here] : paths.map((p) => ctx.path(p));
      const names = o.long ? await Names.load(ctx.caller) : undefined;
      let first = true;
      for (const [i, path] of list.entries()) {
        try {
          const st = await ctx.caller.call('fs.stat', { path });
          let entries: DirEntry[];
          let shown = path;
          if (st.kind === 'directory') {
            const listing = await listAll(ctx.caller, path);
            entries = listing.entries.filter((e) => o.all || !e.name.startsWith('.'));
            shown = listing.path;
          } else {
            const lst = await ctx.caller.call('fs.stat', { path, nofollow: true });
            const name = paths[i] ?? st.path;
            entries = [
              {
                name,
                is_dir: false,
                is_symlink: lst.kind === 'symlink',
                mode: lst.mode,
                uid: lst.uid,
                gid: lst.gid,
                size: lst.size,
                modified: lst.modified,
                inode_id: lst.inode_id,
                mtime_ns: lst.mtime_ns,
              },
            ];
          }
          if (o.json) {
            ctx.out.write(`${JSON.stringify({ path: shown, entries })}\n`);
            continue;
          }
          if (list.length > 1 && st.kind === 'directory') ctx.out.write(`${first ? '' : '\n'}${paths[i] ?? path}:\n`);
          first = false;
          if (!names) {
            for (const e of entries) ctx.out.write(`${e.name}\n`);
            continue;
          }
          const rows: string[][] = [];
          for (const e of entries) {
            let name = e.name;
            if (e.is_symlink) {
              const linkPath = st.kind === 'directory' ? joinPath(path, e.name) : path;
              const target = await ctx.caller.call('fs.readlink', { path: linkPath }).then(
                (r) => r.target,
                () => '?',
              );
              name += ` -> ${target}`;
            }
            const kind = e.is_symlink ? 'symlink' : e.is_dir ? 'directory' : 'file';
            rows.push([
              modeString(kind, e.mode),
              names.user(e.uid),
              names.group(e.gid),
              String(e.size),
              shortTime(e.modified),
              name,
            ]);
          }
          for (const line of columns(rows, 'lllrll')) ctx.out.write(`${line}\n`);
        } catch (err) {
          ctx.report(err);
        }
      }
    },
  );

  // ---- cat ----
  host.action(
    program
      .command('cat')
      .description('print files')
      .argument('<paths...>', 'files to print')
      .option('--at <commit>', 'as they were at this commit (HEAD~1, a hash prefix)'),
    async (ctx, cmd) => {
      const [paths] = cmd.processedArgs as [string[]];
      const { at } = cmd.opts<{ at?: string }>();
      for (const p of paths) {
        try {
          const { data } =
            at === undefined
              ? await ctx.caller.request('fs.read', { path: ctx.path(p) })
              : await ctx.caller.request('vcs.cat', { rev: at, path: ctx.path(p) });
          ctx.out.write(data);
        } catch (err) {
          ctx.report(err);
        }
      }
    },
  );

  // ---- write ----
  host.action(
    program
      .command('write')
      .description('write a file from the text arguments (with a newline), or from stdin byte for byte')
      .argument('<path>', 'file to write (parent directories are created)')
      .argument('[text...]', 'the text; omitted = read stdin')
      .option('-a, --append', 'append instead of replacing')
      .option('-n, --no-newline', 'do not add a newline after the text arguments')
      .option('-m, --mode <mode>', 'mode for a new file, e.g. 600'),
    async (ctx, cmd) => {
      const [path, text] = cmd.processedArgs as [string, string[]];
      const o = cmd.opts<{ append?: boolean; newline: boolean; mode?: string }>();
      if (o.mode !== undefined && !/^[0-7]{1,4}$/.test(o.mode)) throw new UsageError(`invalid mode: '${o.mode}'`);
      let data: Buffer;
      if (text.length > 0) data = Buffer.from(text.join(' ') + (o.newline ? '\n' : ''), 'utf8');
      else {
        const input = await ctx.input();
        if (input === undefined) throw new UsageError('write: no text given and nothing piped in');
        data = input;
      }
      await ctx.caller.call(
        'fs.write',
        {
          path: ctx.path(path),
          ...(o.append ? { append: true } : {}),
          ...(o.mode !== undefined ? { mode: o.mode } : {}),
        },
        { data },
      );
    },
  );

  // ---- mkdir ----
  host.action(
    program
      .command('mkdir')
      .description('create directories')
      .argument('<paths...>', 'directories to create')
      .option('-p, --parents', 'create missing parents; no error if it exists')
      .option('-m, --mode <mode>', 'mode of the new directories, e.g. 750'),
    async (ctx, cmd) => {
      const [paths] = cmd.processedArgs as [string[]];
      const o = cmd.opts<{ parents?: boolean; mode?: string }>();
      if (o.mode !== undefined && !/^[0-7]{1,4}$/.test(o.mode)) throw new UsageError(`invalid mode: '${o.mode}'`);
      for (const p of paths) {
        try {
          await ctx.caller.call('fs.mkdir', {
            path: ctx.path(p),
            parents: o.parents === true,
            ...(o.mode !== undefined ? { mode: o.mode } : {}),
          });
        } catch (err) {
          ctx.report(err);
        }
      }
    },
  );

  // ---- rm ----
  host.action(
    program
      .command('rm')
      .description('remove files, or directories with -r')
      .argument('<paths...>', 'what to remove')
      .option('-r, --recursive', 'remove directories and their contents (all or nothing)')
      .option('-f, --force', 'ignore missing files')
      .option('--no-preserve-root', "allow 'rm -r /'"),
    async (ctx, cmd) => {
      const [paths] = cmd.processedArgs as [string[]];
      const o = cmd.opts<{ recursive?: boolean; force?: boolean; preserveRoot: boolean }>();
      for (const p of paths) {
        const path = ctx.path(p);
        try {
          if (o.recursive && o.preserveRoot && isRootPath(path))
            throw new CliError('EPERM', "refusing to remove '/' recursively (use --no-preserve-root)");
          if (o.recursive) await ctx.caller.call('fs.delete', { path, recursive: true });
          else await ctx.caller.call('fs.unlink', { path });
        } catch (err) {
          if (o.force && isCode(err, 'ENOENT')) continue;
          if (isCode(err, 'EISDIR'))
            ctx.report(new CliError('EISDIR', `cannot remove '${p}': is a directory (use -r)`));
          else ctx.report(err);
        }
      }
    },
  );

  // ---- mv ----
  host.action(
    program
      .command('mv')
      .description('move or rename; into a directory when the destination is one')
      .argument('<paths...>', 'sources, then the destination'),
    async (ctx, cmd) => {
      const [paths] = cmd.processedArgs as [string[]];
      for (const { src, dst } of await targets(ctx, paths, 'mv')) {
        try {
          await ctx.caller.call('fs.move', { src, dst, into_dir: true });
        } catch (err) {
          ctx.report(err);
        }
      }
    },
  );

  // ---- cp ----
  host.action(
    program
      .command('cp')
      .description('copy files, or directories with -r; into a directory when the destination is one')
      .argument('<paths...>', 'sources, then the destination')
      .option('-r, --recursive', 'copy directories recursively'),
    async (ctx, cmd) => {
      const [paths] = cmd.processedArgs as [string[]];
      const o = cmd.opts<{ recursive?: boolean }>();
      for (const { src, dst } of await targets(ctx, paths, 'cp')) {
        try {
          if (!o.recursive) {
            const st = await ctx.caller.call('fs.stat', { path: src });
            if (st.kind === 'directory') throw new CliError('EISDIR', `-r not specified; omitting directory '${src}'`);
          }
          await ctx.caller.call('fs.copy', {
            src,
            dst,
            recursive: o.recursive === true,
            overwrite: true,
            into_dir: true,
          });
        } catch (err) {
          ctx.report(err);
        }
      }
    },
  );

  // ---- stat ----
  host.action(
    program
      .command('stat')
      .description('show inode details (a symlink itself unless -L)')
      .argument('<paths...>', 'paths to describe')
      .option('-L, --dereference', 'follow symbolic links')
      .option('--follow', 'follow symbolic links (same as -L)')
      .option('--json', 'print stat records as JSON'),
    async (ctx, cmd) => {
      const [paths] = cmd.processedArgs as [string[]];
      const o = cmd.opts<{ dereference?: boolean; follow?: boolean; json?: boolean }>();
      if (o.follow) o.dereference = true;
      const names = o.json ? undefined : await Names.load(ctx.caller);
      for (const p of paths) {
        try {
          const st = await ctx.caller.call('fs.stat', { path: ctx.path(p), nofollow: !o.dereference });
          if (o.json || !names) {
            ctx.out.write(`${JSON.stringify(st)}\n`);
            continue;
          }
          ctx.out.write(
            [
              `  File: ${st.path}${st.kind === 'symlink' && st.target !== undefined ? ` -> ${st.target}` : ''}`,
              `  Kind: ${st.kind}  Size: ${st.size}  Inode: ${st.inode_id}  Links: ${st.nlink}`,
              `Access: (${st.mode}/${modeString(st.kind, st.mode)})  Uid: (${st.uid}/${names.user(st.uid)})  Gid: (${st.gid}/${names.group(st.gid)})`,
              `Access: ${isoTime(st.accessed)}`,
              `Modify: ${isoTime(st.modified)}`,
              `Change: ${isoTime(st.changed)}`,
              ` Birth: ${isoTime(st.created)}`,
              ...(st.etag !== undefined ? [`  ETag: ${st.etag}`] : []),
              '',
            ].join('\n'),
          );
        } catch (err) {
          ctx.report(err);
        }
      }
    },
  );

  // ---- tree ----
  host.action(
    program
      .command('tree')
      .description('show a directory tree')
      .argument('[path]', 'directory (default: here)')
      .option('-L, --level <depth>', 'descend at most this many levels', (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1) throw new UsageError(`invalid level: '${v}'`);
        return n;
      }),
    async (ctx, cmd) => {
      const [path] = cmd.processedArgs as [string | undefined];
      const o = cmd.opts<{ level?: number }>();
      const r = await ctx.caller.call('search.tree', {
        path: path === undefined ? ctx.here : ctx.path(path),
        ...(o.level !== undefined ? { depth: o.level } : {}),
      });
      ctx.out.write(r.text.endsWith('\n') ? r.text : `${r.text}\n`);
    },
  );

  // ---- find ----
  host.action(
    program
      .command('find')
      .description('find paths by name under a directory')
      .argument('[path]', 'where to start (default: here)')
      .option('--name <glob>', "match names against a glob, e.g. '*.md'")
      .addOption(new Option('--type <type>', 'f files, d directories, l symlinks').choices(['f', 'd', 'l']))
      .option('--json', 'print the result as JSON'),
    async (ctx, cmd) => {
      const [path] = cmd.processedArgs as [string | undefined];
      const o = cmd.opts<{ name?: string; type?: 'f' | 'd' | 'l'; json?: boolean }>();
      const r = await ctx.caller.call('search.find', {
        path: path === undefined ? ctx.here : ctx.path(path),
        ...(o.name !== undefined ? { name: o.name } : {}),
        ...(o.type !== undefined ? { type: o.type } : {}),
      });
      if (o.json) ctx.out.write(`${JSON.stringify(r)}\n`);
      else for (const p of r.results) ctx.out.write(`${p}\n`);
    },
  );

  // ---- grep ----
  host.action(
    program
      .command('grep')
      .description('search file contents with a regular expression (JavaScript syntax); exit 1 when nothing matches')
      .argument('<pattern>', 'regular expression')
      .argument('[paths...]', 'files or directories (default: here; in a shell pipeline: the piped text)')
      .option('-r, --recursive', 'search subdirectories too')
      .option('-i, --ignore-case', 'ignore case')
      .option('-n, --line-number', 'prefix each line with its line number')
      .option('-l, --files-with-matches', 'print only the names of files with matches')
      .option('--json', 'print the daemon result as JSON'),
    async (ctx, cmd) => {
      const [pattern, paths] = cmd.processedArgs as [string, string[]];
      const o = cmd.opts<{
        recursive?: boolean;
        ignoreCase?: boolean;
        lineNumber?: boolean;
        filesWithMatches?: boolean;
        json?: boolean;
      }>();
      let matched = 0;
      if (paths.length === 0 && ctx.interactive) {
        const input = await ctx.input();
        if (input !== undefined) {
          let re: RegExp;
          try {
            re = new RegExp(pattern, o.ignoreCase ? 'i' : '');
          } catch (err) {
            throw new UsageError(`grep: invalid pattern: ${(err as Error).message}`);
          }
          const lines = input.toString('utf8').split('\n');
          if (lines[lines.length - 1] === '') lines.pop();
          lines.forEach((line, i) => {
            if (!re.test(line)) return;
            matched++;
            if (!o.filesWithMatches) ctx.out.write(`${o.lineNumber ? `${i + 1}:` : ''}${line}\n`);
          });
          if (o.filesWithMatches && matched > 0) ctx.out.write('(standard input)\n');
          if (matched === 0) ctx.exitCode = 1;
          return;
        }
      }
      const list = paths.length === 0 ? [ctx.here] : paths.map((p) => ctx.path(p));
      const seen = new Set<string>();
      for (const path of list) {
        try {
          const single =
            list.length === 1 && !o.recursive && (await ctx.caller.call('fs.stat', { path })).kind === 'file';
          const r = await ctx.caller.call('search.grep', {
            pattern,
            path,
            recursive: o.recursive === true,
            ignore_case: o.ignoreCase === true,
          });
          matched += r.count;
          if (o.json) {
            ctx.out.write(`${JSON.stringify(r)}\n`);
            continue;
          }
          for (const m of r.results) {
            if (o.filesWithMatches) {
              if (!seen.has(m.file)) ctx.out.write(`${m.file}\n`);
              seen.add(m.file);
              continue;
            }
            const prefix = (single ? '' : `${m.file}:`) + (o.lineNumber ? `${m.line_num}:` : '');
            ctx.out.write(`${prefix}${m.line}\n`);
          }
          if (r.truncated) ctx.err.write(`grep: results truncated after ${r.count} matches\n`);
        } catch (err) {
          ctx.report(err);
        }
      }
      if (matched === 0 && ctx.exitCode === 0) ctx.exitCode = 1;
    },
  );

  // ---- chmod ----
  host.action(
    program
      .command('chmod')
      .description('change permission bits: octal (644) or symbolic (u+x,go-w)')
      .argument('<mode>', 'octal or symbolic mode')
      .argument('<paths...>', 'files or directories'),
    async (ctx, cmd) => {
      const [mode, paths] = cmd.processedArgs as [string, string[]];
      validateMode(mode);
      for (const p of paths) {
        const path = ctx.path(p);
        try {
          let m: string | number = mode;
          if (isSymbolicMode(mode)) {
            const st = await ctx.caller.call('fs.stat', { path });
            m = applyMode(mode, parseInt(st.mode, 8), st.kind === 'directory');
          }
          await ctx.caller.call('fs.chmod', { path, mode: typeof m === 'number' ? m.toString(8).padStart(4, '0') : m });
        } catch (err) {
          ctx.report(err);
        }
      }
    },
  );

  // ---- chown ----
  host.action(
    program
      .command('chown')
      .description('change owner and/or group (owner, owner:group, or :group)')
      .argument('<owner>', 'owner[:group] as names or numeric ids')
      .argument('<paths...>', 'files or directories'),
    async (ctx, cmd) => {
      const [spec, paths] = cmd.processedArgs as [string, string[]];
      const m = /^([^:]*)(?::(.*))?$/.exec(spec);
      const owner = m?.[1] ?? '';
      const group = m?.[2];
      if (owner === '' && (group === undefined || group === '')) throw new UsageError(`invalid owner: '${spec}'`);
      for (const p of paths) {
        try {
          await ctx.caller.call('fs.chown', {
            path: ctx.path(p),
            ...(owner !== '' ? { owner } : {}),
            ...(group !== undefined && group !== '' ? { group } : {}),
          });
        } catch (err) {
          ctx.report(err);
        }
      }
    },
  );

  // ---- ln ----
  host.action(
    program
      .command('ln')
      .description('make a symbolic link (ln -s <target> <path>)')
      .argument('<target>', 'what the link points to (stored as written)')
      .argument('<path>', 'the link to create')
      .option('-s, --symbolic', 'make a symbolic link (required: hard links are not supported)'),
    async (ctx, cmd) => {
      const [target, path] = cmd.processedArgs as [string, string];
      if (!cmd.opts<{ symbolic?: boolean }>().symbolic)
        throw new UsageError('ln: hard links are not supported; use ln -s');
      let dst = ctx.path(path);
      const st = await statOrNull(ctx, dst);
      if (st?.kind === 'directory') dst = joinPath(dst, baseName(target));
      await ctx.caller.call('fs.symlink', { target, path: dst });
    },
  );
}
