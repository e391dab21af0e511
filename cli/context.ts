/**
 * What a command needs to run, in one place, so each command is written once and works both as
 * `mdvfs <cmd>` (one process per command) and inside `mdvfs shell` (pipes, a working directory).
 */
import type { Command } from 'commander';
import type { Caller } from '../daemon/rpc/client.js';
import { errorLine, describeError } from './errors.js';

export interface Output {
  write(chunk: string | Uint8Array): void;
}

export interface CmdContext {
  /** The caller bound to this session's credentials (local daemon or `--url` REST server). */
  readonly caller: Caller;
  readonly out: Output;
  readonly err: Output;
  /** True inside `mdvfs shell`. */
  readonly interactive: boolean;
  /** True when talking to a REST server with `--url`. */
  readonly remote: boolean;
  /**
   * The bytes piped into this command: the previous stage of a shell pipeline, or the CLI's stdin.
   * Undefined when nothing is piped in (a shell command at the start of a pipeline).
   */
  input(): Promise<Buffer | undefined>;
  /**
   * A path as it is sent to the daemon. The CLI passes paths through (the daemon resolves
   * relative and `~` paths against the caller's home); the shell resolves them against its cwd.
   */
  path(p: string): string;
  /** The path of "here" when a command's path argument is omitted ('' = the caller's home in the CLI). */
  readonly here: string;
  /** Prints a non-fatal error in the standard one-line form and remembers the exit status. */
  report(err: unknown): void;
  /** Sets the exit status without printing anything (grep without matches). */
  exitCode: number;
}

export interface CommandHost {
  /** True when the commands are registered for `mdvfs shell` rather than the process CLI. */
  readonly interactive: boolean;
  /** Attaches the action: builds a context for this invocation, runs `fn`, settles the exit status. */
  action(cmd: Command, fn: (ctx: CmdContext, cmd: Command) => Promise<void>): Command;
}

/** A report helper shared by the hosts: prints the standard line and keeps the worst exit code. */
export function reporter(err: Output, prefix: string, setCode: (code: number) => void): (e: unknown) => void {
  return (e: unknown) => {
    err.write(errorLine(e, prefix));
    setCode(describeError(e).exitCode);
  };
}
