/**
 * `mdvfs shell`: an interactive prompt (`alice@mdvfs:~/notes $ `) over the same commands as the
 * CLI, with a per-session working directory, pipes between built-ins, `>`/`>>` into files,
 * history and tab completion. Relative paths are resolved here against the session's cwd and
 * sent to the daemon as absolute paths; the daemon still checks every permission.
 */
import path from 'node:path';
import readline from 'node:readline';
import { Command, CommanderError } from 'commander';
import type { CallOptions, Caller } from '../daemon/rpc/client.js';
import type { Creds, Method, Params } from '../daemon/rpc/protocol.js';
import { registerAll } from './commands/shared.js';
import { registerShellBuiltins, type ShellState } from './commands/shell-builtins.js';
import { openConnection } from './connection.js';
import type { CmdContext, CommandHost, Output } from './context.js';
import { reporter } from './context.js';
import { describeError, errorLine } from './errors.js';
import { resolveIdentity, type IdentityOptions } from './identity.js';
import { HISTORY_SIZE, historyFile, ShellHistory } from './shell-history.js';
import { parseLine, quoteWord, scanPartial, type Pipeline, type ScanEnd } from './shell-parse.js';

interface StageIo {
  input: Buffer | undefined;
  out: Output;
  err: Output;
}

/** Collects a stage's output for the next stage of a pipeline. */
class Collector implements Output {
  readonly chunks: Buffer[] = [];
  write(chunk: string | Uint8Array): void {
    this.chunks.push(typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk));
  }
  bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

/** The terminal's stdout, remembering whether the last byte was a newline (the prompt needs a fresh line). */
class Terminal implements Output {
  atLineStart = true;
  write(chunk: string | Uint8Array): void {
    if (chunk.length === 0) return;
    process.stdout.write(chunk);
    const last = typeof chunk === 'string' ? chunk.charCodeAt(chunk.length - 1) : chunk[chunk.length - 1];
    this.atLineStart = last === 10;
  }
}

/**
 * One command line being run. Ctrl-C aborts it, as a signal would kill a process: the prompt comes back
 * at once, the line's later daemon calls are refused before they are sent (a call already on its way
 * completes in the daemon, like a system call in progress), and anything it would still print is dropped.
 */
class Run {
  aborted = false;
  private stop: () => void = () => undefined;
  readonly stopped = new Promise<void>((resolve) => (this.stop = resolve));

  abort(): void {
    this.aborted = true;
    this.stop();
  }

  private check(): void {
    if (this.aborted) throw new Error('interrupted');
  }

  caller(c: Caller): Caller {
    const guard = async <T>(send: () => Promise<T>): Promise<T> => {
      this.check();
      const r = await send();
      this.check();
      return r;
    };
    return {
      creds: c.creds,
      call: <M extends Method>(m: M, params: Params<M>, opts?: CallOptions) => guard(() => c.call(m, params, opts)),
      request: <M extends Method>(m: M, params: Params<M>, opts?: CallOptions) =>
        guard(() => c.request(m, params, opts)),
    };
  }

  output(o: Output): Output {
    return { write: (chunk) => void (this.aborted || o.write(chunk)) };
  }
}

export class ShellSession implements ShellState {
  cwd = '/';
  home = '/';
  previousCwd: string | undefined;
  user = 'root';
  exitRequested: number | undefined;
  lastStatus = 0;
  readonly terminal = new Terminal();
  rl: readline.Interface | undefined;
  private active: Run | undefined;

  constructor(
    public caller: Caller,
    readonly remote: boolean,
  ) {}

  /** Resolves a path the way a shell user means it: against the cwd, with `~` and `~user`. */
  resolve(p: string): string {
    if (p === '~' || p.startsWith('~/')) return path.posix.resolve(this.home, `.${p.slice(1)}`);
    const m = /^~([a-z_][a-z0-9_.-]*)(\/.*)?$/.exec(p);
    if (m) return path.posix.resolve(`/home/${m[1] ?? ''}`, `.${m[2] ?? ''}`);
    return path.posix.resolve(this.cwd, p);
  }

  /** `~/notes` for paths under the home directory, the absolute path otherwise. */
  displayCwd(): string {
    if (this.home !== '/' && (this.cwd === this.home || this.cwd.startsWith(`${this.home}/`)))
      return `~${this.cwd.slice(this.home.length)}`;
    return this.cwd;
  }

  prompt(): string {
    return `${this.user}@mdvfs:${this.displayCwd()} $ `;
  }

  history(): string[] {
    // readline keeps history newest first.
    const h = (this.rl as unknown as { history?: string[] } | undefined)?.history ?? [];
    return [...h].reverse();
  }

  /** Learns who we are and where home is; the cwd starts there when it exists. */
  async identify(): Promise<void> {
    const w = await this.caller.call('auth.whoami', {});
    this.user = w.user;
    this.home = w.workspace !== undefined || w.uid === 0 ? '/' : w.home;
    this.cwd = '/';
    try {
      const st = await this.caller.call('fs.stat', { path: this.home });
      if (st.kind === 'directory') this.cwd = this.home;
    } catch {
      // A home that is missing or unreadable leaves us at '/', like login(1) does.
    }
  }

  private context(io: StageIo, setStatus: (c: number) => void, name: string, run: Run): CmdContext {
    let exitCode = 0;
    const set = (c: number) => {
      exitCode = Math.max(exitCode, c);
      setStatus(exitCode);
    };
    return {
      caller: run.caller(this.caller),
      out: io.out,
      err: io.err,
      interactive: true,
      remote: this.remote,
      input: () => Promise.resolve(io.input),
      path: (p) => this.resolve(p),
      here: this.cwd,
      report: reporter(io.err, name, set),
      get exitCode() {
        return exitCode;
      },
      set exitCode(c: number) {
        set(c);
      },
    };
  }

  /** A fresh parser for one stage: commander keeps option values between parses, so never reuse one. */
  private program(io: StageIo, setStatus: (c: number) => void, run: Run): Command {
    const program = new Command('')
      .exitOverride()
      .helpCommand('help [command]', 'show help for a command')
      // Inside the shell a command is typed without the `mdvfs` prefix.
      .configureHelp({
        commandUsage: (cmd) => {
          const names: string[] = [];
          for (let c: Command | null = cmd; c?.parent; c = c.parent) names.unshift(c.name());
          return names.length === 0 ? '<command> [options] [arguments]' : `${names.join(' ')} ${cmd.usage()}`;
        },
      })
      .configureOutput({
        writeOut: (s) => io.out.write(s),
        writeErr: (s) => io.err.write(s),
        outputError: (s, write) =>
          write(
            `${s
              .replace(/^error: /, '')
              .trim()
              .replace(/\s*\n\s*/g, ' ')} (EUSAGE)\n`,
          ),
      });
    const host: CommandHost = {
      interactive: true,
      action: (cmd, fn) =>
        cmd.action(async (...args: unknown[]) => {
          const self = args[args.length - 1] as Command;
          await fn(this.context(io, setStatus, self.name(), run), self);
        }),
    };
    registerAll(program, host);
    registerShellBuiltins(program, host, this);
    return program;
  }

  /** Runs one stage; returns its exit status. */
  async runStage(argv: string[], io: StageIo, run: Run): Promise<number> {
    let status = 0;
    const setStatus = (c: number) => {
      status = Math.max(status, c);
    };
    try {
      await this.program(io, setStatus, run).parseAsync(argv, { from: 'user' });
    } catch (err) {
      if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
      io.err.write(errorLine(err, argv[0] ?? 'mdvfs'));
      return describeError(err).exitCode;
    }
    return status;
  }

  async runPipeline(p: Pipeline, run: Run): Promise<number> {
    let input: Buffer | undefined;
    let status = 0;
    const errOut = run.output({ write: (c) => process.stderr.write(c) });
    const terminal = run.output(this.terminal);
    for (const [i, argv] of p.stages.entries()) {
      if (run.aborted) return 130; // interrupted: later stages (even ones that call no daemon) never start
      const last = i === p.stages.length - 1;
      const collector = new Collector();
      const out: Output = last && !p.redirect ? terminal : collector;
      status = await this.runStage(argv, { input, out, err: errOut }, run);
      if (this.exitRequested !== undefined) return status;
      input = collector.bytes();
    }
    if (p.redirect && input !== undefined) {
      try {
        await run
          .caller(this.caller)
          .call(
            'fs.write',
            { path: this.resolve(p.redirect.path), ...(p.redirect.append ? { append: true } : {}) },
            { data: input },
          );
      } catch (err) {
        errOut.write(errorLine(err, 'mdvfs'));
        return 1;
      }
    }
    return status;
  }

  /** Runs one command line; resolves when it is done or was interrupted (status 130, as in bash). */
  async runLine(line: string): Promise<void> {
    const run = (this.active = new Run());
    try {
      await Promise.race([this.execute(line, run), run.stopped]);
    } finally {
      this.active = undefined;
    }
    if (run.aborted) this.lastStatus = 130;
  }

  /** Ctrl-C: aborts the running line; false when none is running. */
  interrupt(): boolean {
    if (this.active === undefined) return false;
    this.active.abort();
    return true;
  }

  private async execute(line: string, run: Run): Promise<void> {
    let pipelines: Pipeline[];
    try {
      pipelines = parseLine(line);
    } catch (err) {
      process.stderr.write(errorLine(err, 'mdvfs'));
      this.lastStatus = 2;
      return;
    }
    for (const p of pipelines) {
      const status = await this.runPipeline(p, run);
      if (run.aborted) return; // `a; b` interrupted in a: b never starts
      this.lastStatus = status;
      if (this.exitRequested !== undefined) return;
    }
  }

  /**
   * Tab completion: command names first, then paths via fs.list. Completes the word being typed as the
   * tokenizer reads it (quotes and backslashes included) and writes the completion back in the same style:
   * `cat My<TAB>` gives `cat My\ Note.md `, `cat 'My N<TAB>` gives `cat 'My Note.md' `. Readline replaces
   * the typed word (`raw`) with the answer, so a word typed in mixed quoting is rewritten in one style.
   */
  complete(line: string, commandNames: string[], cb: (err: null, result: [string[], string]) => void): void {
    const word: ScanEnd = scanPartial(line);
    const raw = line.slice(word.start);
    if (word.comment) {
      cb(null, [[], raw]);
      return;
    }
    const answer = (values: string[], isDir: (v: string) => boolean) => {
      const q = (v: string, close: boolean) => quoteWord(v, word.quote, close);
      const only = values[0];
      if (values.length === 1 && only !== undefined) {
        // One match: finish the word (close its quote, add a space) unless it is a directory to go into.
        cb(null, [[isDir(only) ? q(only, false) : `${q(only, true)} `], raw]);
        return;
      }
      if (values.length === 0) {
        cb(null, [[], raw]);
        return;
      }
      // Several: first extend to what they share (or rewrite the word in one style), then list them.
      const common = commonPrefix(values);
      if (q(common, false) !== raw) {
        cb(null, [[q(common, false)], raw]);
        return;
      }
      const shown = values.map((v) => q(v, false));
      // Readline inserts what the shown entries share; keep that exactly the typed word.
      cb(null, [commonPrefix(shown) === raw ? shown : [raw, ...shown], raw]);
    };
    if (word.command) {
      answer(commandNames.filter((c) => c.startsWith(word.value)).sort(), () => false);
      return;
    }
    const slash = word.value.lastIndexOf('/');
    const dirPart = slash < 0 ? '' : word.value.slice(0, slash + 1);
    const base = slash < 0 ? word.value : word.value.slice(slash + 1);
    const dir = dirPart === '' ? this.cwd : this.resolve(dirPart);
    this.caller.call('fs.list', { path: dir }).then(
      (listing) => {
        const hits = listing.entries
          .filter((e) => e.name.startsWith(base) && (base.startsWith('.') || !e.name.startsWith('.')))
          .map((e) => `${dirPart}${e.name}${e.is_dir ? '/' : ''}`)
          .sort();
        answer(hits, (v) => v.endsWith('/'));
      },
      () => cb(null, [[], raw]),
    );
  }
}

/** The longest prefix all values share, never ending inside a surrogate pair (emoji in names). */
function commonPrefix(values: string[]): string {
  let p = values[0] ?? '';
  for (const v of values) while (!v.startsWith(p)) p = p.slice(0, -1);
  return /[\uD800-\uDBFF]$/.test(p) ? p.slice(0, -1) : p;
}

function ask(rl: readline.Interface, question: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const onClose = () => resolve(undefined);
    rl.once('close', onClose);
    rl.question(question, (answer) => {
      rl.off('close', onClose);
      resolve(answer.trim());
    });
  });
}

/**
 * First run: no user but root exists. Offers to create the first admin and prints its token once;
 * returns the credentials of the new admin, or undefined to carry on as before.
 */
async function offerBootstrap(session: ShellSession, rl: readline.Interface, creds: Creds): Promise<Creds | undefined> {
  const health = await session.caller.call('sys.health', {}).catch(() => undefined);
  if (!health?.needs_bootstrap) return undefined;
  process.stdout.write('This filesystem has no users yet.\n');
  const yes = await ask(rl, 'Create the first admin user now? [Y/n] ');
  if (yes === undefined || /^n/i.test(yes)) {
    process.stdout.write('Continuing as root.\n');
    return undefined;
  }
  for (;;) {
    const name = await ask(rl, 'Admin user name: ');
    if (name === undefined || name === '') {
      process.stdout.write('Continuing as root.\n');
      return undefined;
    }
    try {
      const r = await session.caller.call('auth.bootstrap', { username: name });
      process.stdout.write(
        `Created admin ${r.username} (uid ${r.uid}).\nAPI token (shown once; keep it somewhere safe):\n${r.token}\n`,
      );
      return { ...creds, authorization: `Bearer ${r.token}` };
    } catch (err) {
      process.stderr.write(errorLine(err, 'mdvfs'));
    }
  }
}

/** Runs the interactive shell until Ctrl-D or `exit`; returns the exit status. */
export async function runShell(identity: IdentityOptions): Promise<number> {
  const { creds, url } = resolveIdentity(identity);
  let conn = await openConnection(creds, url);
  const session = new ShellSession(conn.caller, conn.remote);
  const tty = process.stdin.isTTY === true;
  const names = (() => {
    const probe = new Command('');
    const host: CommandHost = { interactive: true, action: (cmd) => cmd };
    registerAll(probe, host);
    registerShellBuiltins(probe, host, session);
    return [...probe.commands.map((c) => c.name()), 'help'];
  })();
  // Only a person at a terminal builds a history worth keeping; piped scripts leave the file alone.
  const saved = tty ? new ShellHistory(historyFile()) : undefined;
  const rl = readline.createInterface({
    input: process.stdin,
    output: process.stdout,
    terminal: tty,
    history: saved?.load() ?? [],
    historySize: HISTORY_SIZE,
    removeHistoryDuplicates: true,
    completer: (line: string, cb: (err: null, result: [string[], string]) => void) => session.complete(line, names, cb),
  });
  session.rl = rl;
  if (saved) rl.on('history', (h: string[]) => saved.save(h));
  // Listen from the start: piped input can arrive (and end) while we are still identifying ourselves.
  const pending: string[] = [];
  let closed = false;
  let onLine: () => void = () => undefined;
  let onClose: () => void = () => undefined;
  rl.on('line', (line) => {
    pending.push(line);
    onLine();
  });
  rl.on('close', () => {
    closed = true;
    onClose();
  });
  try {
    const before = session.history().length;
    const admin = tty && creds.authorization === undefined ? await offerBootstrap(session, rl, creds) : undefined;
    // Answers to the first-run questions are not commands: keep them out of the history.
    const h = (rl as unknown as { history?: string[] }).history;
    if (h !== undefined && h.length > before) {
      h.splice(0, h.length - before);
      saved?.save(h);
    }
    if (admin) {
      // Carry on as the new admin, with its token, like after a login.
      const next = await openConnection(admin, url);
      conn.close();
      conn = next;
      session.caller = conn.caller;
    }
    await session.identify();
  } catch (err) {
    process.stderr.write(errorLine(err, 'mdvfs'));
    rl.close();
    conn.close();
    return 1;
  }
  if (tty) process.stdout.write(`mdvfs shell: type 'help' for commands, Ctrl-D to leave.\n`);

  return new Promise<number>((resolve) => {
    let busy = false;
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      conn.close();
      resolve(session.exitRequested ?? 0);
    };
    const showPrompt = () => {
      if (!tty) {
        rl.resume();
        return;
      }
      if (!session.terminal.atLineStart) session.terminal.write('\n');
      rl.setPrompt(session.prompt());
      rl.prompt();
    };
    const pump = async () => {
      if (busy) return;
      busy = true;
      // At a terminal, keep reading while a command runs: Ctrl-C must reach us, and lines typed ahead
      // queue up as in bash. A piped script is read one command at a time.
      if (!tty) rl.pause();
      while (pending.length > 0 && session.exitRequested === undefined) {
        const line = pending.shift() as string;
        await session.runLine(line);
      }
      busy = false;
      if (session.exitRequested !== undefined) {
        rl.close();
        finish();
      } else if (closed) finish();
      else showPrompt();
    };
    onLine = () => void pump();
    rl.on('SIGINT', () => {
      if (busy) {
        // Ctrl-C while a command runs interrupts it; like a terminal's flush on SIGINT, lines typed
        // ahead are dropped too. The pump then shows the prompt.
        pending.length = 0;
        rl.write(null, { ctrl: true, name: 'e' });
        rl.write(null, { ctrl: true, name: 'u' });
        if (session.interrupt()) {
          process.stdout.write('^C\n');
          session.terminal.atLineStart = true;
        }
        return;
      }
      // Ctrl-C abandons the line being typed and keeps the shell, like bash.
      rl.write(null, { ctrl: true, name: 'e' });
      rl.write(null, { ctrl: true, name: 'u' });
      process.stdout.write('^C\n');
      session.terminal.atLineStart = true;
      showPrompt();
    });
    onClose = () => {
      if (tty && session.exitRequested === undefined) process.stdout.write('\n');
      if (!busy) finish();
    };
    if (pending.length > 0) void pump();
    else if (closed) finish();
    else showPrompt();
  });
}
