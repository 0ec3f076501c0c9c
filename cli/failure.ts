/**
 * How a command ends when it fails. A command throws; main prints it once: one line on stderr
 * (`capyctl: <message>`, the API's refusal as `capyctl: <code>: <message>`), or under `--json` one
 * document on stdout, `{"error": {"code", "message", …}}`, so that a script reading a command's JSON
 * reads JSON either way. The exit code is the same with or without `--json`.
 */
import type { CliError, cliErrors, ErrorCode } from '../domain/catalogue.js';
import { exitCodes, printJson } from './command.js';

/** The API said no: its code and message. */
export class ApiRefusal extends Error {
  constructor(
    /** The HTTP status; 0 when the refusal did not come as one (a followed switch that failed). */
    readonly status: number,
    readonly code: ErrorCode | string,
    readonly apiMessage: string,
    /** The same command may succeed later (the catalogue's `retryable`). */
    readonly retryable = false,
  ) {
    super(`${code}: ${apiMessage}`);
    this.name = 'ApiRefusal';
  }

  /** The same refusal, its message worded otherwise. */
  saying(apiMessage: string): ApiRefusal {
    return new ApiRefusal(this.status, this.code, apiMessage, this.retryable);
  }
}

/** One of the catalogue's CLI errors; `details` go into its `--json` form (a document's problems). */
export class CliFailure extends Error {
  constructor(
    readonly error: CliError,
    readonly details: Record<string, unknown> = {},
  ) {
    super(error.message);
    this.name = 'CliFailure';
  }
}

type CliErrors = typeof cliErrors;

/**
 * The catalogue's CLI error `key`, as a failure to throw. Loaded only when a command fails: the
 * catalogue brings zod, which most commands that succeed never load (a call's cost is mostly what
 * it loads).
 */
export async function failure<K extends keyof CliErrors>(
  key: K,
  ...args: Parameters<CliErrors[K]>
): Promise<CliFailure> {
  const { cliErrors } = await import('../domain/catalogue.js');
  return new CliFailure((cliErrors[key] as (...a: Parameters<CliErrors[K]>) => CliError)(...args));
}

/** Node's own refusal of a command line (`parseArgs`: an unknown option, a flag without its value). */
const isArgsError = (e: unknown): e is Error & { code: string } =>
  e instanceof TypeError && String((e as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS');

/** What a command threw, as a failure to print; `usage`: its usage line, for a command line Node refused. */
export async function asFailure(e: unknown, usage: string): Promise<CliFailure | ApiRefusal> {
  if (e instanceof CliFailure || e instanceof ApiRefusal) return e;
  if (isArgsError(e)) return failure('usage', usage, e.message);
  // Already loaded by a command that read a document, the one kind that throws a SettingsError.
  const { SettingsError } = await import('../settings/load.js');
  if (e instanceof SettingsError) {
    // Its problems, and each one in `--json`'s `problems`.
    const { error } = await failure('invalidSettings', e.message);
    return new CliFailure(error, { problems: e.problems });
  }
  return failure('internal', e instanceof Error ? e.message : String(e));
}

/** Prints `f` as `--json` asks, and returns its exit code. */
export function printFailure(f: CliFailure | ApiRefusal, json: boolean): number {
  const refusal = f instanceof ApiRefusal;
  if (json) {
    const error = refusal
      ? { code: f.code, message: f.apiMessage, retryable: f.retryable }
      : { code: f.error.code, message: f.error.message, ...f.details };
    printJson({ error });
  } else if (refusal) {
    process.stderr.write(`capyctl: ${f.code}: ${f.apiMessage}\n`);
  } else {
    // A document's problems are their own heading (`invalid deployment settings in …:`), as ever.
    process.stderr.write(
      f.error.code === 'invalid_settings' ? `${f.error.message}\n` : `capyctl: ${f.error.message}\n`,
    );
  }
  return refusal ? exitCodes.refused : exitCodes[f.error.exit];
}
