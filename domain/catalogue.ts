/**
 * Every status, code and message the spec names, and the few more the API needs. Call sites pick
 * an entry and pass its facts; no error text is written anywhere else.
 */
import { z } from 'zod';
import { INGRESS_SECRET_HEADER } from './hostIngress.js';
import { RETRY_AFTER_SECONDS } from './limits.js';
import type { MaxModelLenSource, ParkTier, ResidueSource } from './vocabulary.js';

export const errorCodes = z.enum([
  'unavailable',
  'queue_full',
  'deployment_inactive',
  'deployment_stopped',
  'capability_missing:deep_park',
  'wake_mismatch',
  'wake_reload_failed',
  'wake_uncertain',
  'parked_capacity',
  'insufficient_capacity',
  'checkpoint_unmeasured',
  'engine_version_unsupported',
  'host_of_another_installation',
  'not_found',
  'unauthorized',
  'forbidden',
  'invalid_request',
  'payload_too_large',
  'internal',
]);
export type ErrorCode = z.infer<typeof errorCodes>;

export interface ApiError {
  readonly status: number;
  readonly code: ErrorCode;
  readonly message: string;
  readonly retryable: boolean;
}

const error = (status: number, code: ErrorCode, retryable: boolean, message: string): ApiError => ({
  status,
  code,
  message,
  retryable,
});

/** A model that memory pressure never moves, and the setting that keeps it loaded (spec, "Only on your command"). */
export interface KeptHolder {
  name: string;
  keptBy: 'explicit' | 'warm';
}

const keptBySetting: Record<KeptHolder['keptBy'], string> = {
  explicit: 'activation: explicit',
  warm: 'lifecycle.warm: true',
};

/** "a, b, which activation: explicit keeps loaded, and c, which lifecycle.warm: true keeps loaded". */
function keptHolders(holders: readonly KeptHolder[]): string {
  const groups = (['explicit', 'warm'] as const)
    .map((keptBy) => ({ keptBy, names: holders.filter((h) => h.keptBy === keptBy).map((h) => h.name) }))
    .filter((g) => g.names.length > 0);
  return groups.map((g) => `${g.names.join(', ')}, which ${keptBySetting[g.keptBy]} keeps loaded`).join(', and ');
}

/**
 * A host whose scheduler (`host-scheduler/<hostId>`) runs on the task queue of another installation
 * sharing this Temporal namespace: no worker of this one polls it, and a second scheduler for the
 * same GPUs must never start, so this installation refuses the host.
 */
export interface ForeignScheduler {
  hostId: string;
  /** The other installation's workflow task queue, `capyctl-workflows-<its store id>`. */
  theirTaskQueue: string;
  ownTaskQueue: string;
  temporalAddress: string;
  namespace: string;
}

/** The one line that says whose the host is, and the three ways out. */
const foreignSchedulerLine = (f: ForeignScheduler) =>
  `host ${f.hostId} is scheduled by another capyctl installation on this Temporal namespace (${f.namespace}): ` +
  `host-scheduler/${f.hostId} runs on task queue ${f.theirTaskQueue}, not this installation's ${f.ownTaskQueue}; ` +
  `give the host another ID (id in its host document, host.id in a standalone's), or give this installation a ` +
  `Temporal namespace of its own (temporal.namespace in the server's and its hosts' documents, ` +
  `server.temporal.namespace in a standalone's), or, if the other installation is gone, end its scheduler with ` +
  `\`temporal workflow terminate --address ${f.temporalAddress} --namespace ${f.namespace} -w ` +
  `host-scheduler/${f.hostId}\` and start this host again`;

/** Bytes as GiB, to two decimals at most: `10`, `7.5`. */
const gib = (bytes: number): string => String(Math.round((bytes / 2 ** 30) * 100) / 100);

/** The things an API error can say was not found. */
export type Missing = 'deployment' | 'model' | 'host' | 'instance' | 'switch' | 'route';

export const apiErrors = {
  // The spec's "Errors while waiting" table, row by row.
  queueDeadline: (deploymentId: string) =>
    error(
      503,
      'unavailable',
      true,
      `deployment ${deploymentId} did not become servable within the queue deadline; retry shortly`,
    ),
  drainTimeout: (targetId: string, drainTimeoutMs: number, requestsStillRunning: number) =>
    error(
      503,
      'unavailable',
      true,
      `switch to ${targetId} failed: drain timeout after ${drainTimeoutMs} ms with ${requestsStillRunning} ` +
        `request(s) still charged; the victims serve again; retry shortly`,
    ),
  /** Not in the spec: a switch cancelled (from the Temporal Web UI) before its target came up. */
  switchCancelled: (targetId: string) =>
    error(503, 'unavailable', true, `switch to ${targetId} was cancelled; retry shortly`),
  dispatchClosed: (deploymentId: string) =>
    error(503, 'unavailable', true, `dispatch to deployment ${deploymentId} is closed; retry shortly`),
  waitingLimit: (deploymentId: string) =>
    error(429, 'queue_full', true, `too many requests are waiting for deployment ${deploymentId}`),
  bufferedBytes: () => error(429, 'queue_full', true, 'waiting requests exceed the buffered-bytes bound'),
  inFlightDeadline: (deploymentId: string) =>
    error(429, 'queue_full', true, `deployment ${deploymentId} stayed at its in-flight bound for the queue deadline`),
  inFlightNoWait: (deploymentId: string) =>
    error(
      429,
      'queue_full',
      true,
      `deployment ${deploymentId} is at its in-flight bound and lets no request wait; retry shortly`,
    ),
  notServableNoWait: (deploymentId: string) =>
    error(
      429,
      'queue_full',
      true,
      `deployment ${deploymentId} is not servable now and lets no request wait; retry shortly`,
    ),

  // Models a request does not start or wake.
  deploymentInactive: (deploymentId: string) =>
    error(
      409,
      'deployment_inactive',
      false,
      `deployment ${deploymentId} is not running and its activation is explicit (lifecycle.activation: explicit); ` +
        `inference does not start or wake it; start it with \`capyctl start deployment ${deploymentId}\``,
    ),
  deploymentStopped: (deploymentId: string) =>
    error(
      409,
      'deployment_stopped',
      false,
      `deployment ${deploymentId} was stopped by an operator; inference does not start it; start it with \`capyctl ` +
        `start deployment ${deploymentId}\``,
    ),

  // Parking and waking.
  capabilityMissingDeepPark: (deploymentName: string, reason: string) =>
    error(
      409,
      'capability_missing:deep_park',
      false,
      `deployment ${deploymentName} cannot be parked: ${reason}; declare residency: restart_only`,
    ),
  wakeMismatch: (deploymentId: string) =>
    error(
      503,
      'wake_mismatch',
      true,
      `wake of deployment ${deploymentId} failed: its answer to the wake check differs from its first answer; the ` +
        `model was stopped and the next request loads it fresh`,
    ),
  wakeReloadFailed: (deploymentId: string) =>
    error(
      503,
      'wake_reload_failed',
      true,
      `wake of deployment ${deploymentId} failed: its weights did not reload; the model was stopped and the next ` +
        `request loads it fresh`,
    ),
  wakeUncertain: (deploymentId: string, wakeWindowMs: number) =>
    error(
      503,
      'wake_uncertain',
      true,
      `wake of deployment ${deploymentId} failed: it did not finish within the wake window of ${wakeWindowMs} ms; ` +
        `the model was stopped and the next request loads it fresh`,
    ),
  /**
   * A wake that failed for a reason none of the three above names (an engine that refused a step,
   * exited or stopped answering): what really happened, under the code of a wake whose outcome is unknown.
   */
  wakeFailed: (deploymentId: string, what: string) =>
    error(
      503,
      'wake_uncertain',
      true,
      `wake of deployment ${deploymentId} failed: ${what}; the model was stopped and the next request loads it fresh`,
    ),
  /** A start the switch could not finish (the engine ran out of memory, exited, or never became ready). */
  startFailed: (deploymentId: string, reason: string) =>
    error(503, 'unavailable', true, `deployment ${deploymentId} failed to start: ${reason}; retry shortly`),
  /** A start whose engine exited: how, then its last lines of stderr, why in its own words. */
  startFailedEngineExited: (deploymentId: string, how: string, stderr: readonly string[]) =>
    error(
      503,
      'unavailable',
      true,
      `deployment ${deploymentId} failed to start: its engine exited (${how}); retry shortly. Its last lines of ` +
        `stderr:\n${stderr.map((l) => `  ${l}`).join('\n')}`,
    ),
  /**
   * A start whose engine reports a version capyctl does not know (`hostStepFailures.engineVersionUnsupported`):
   * a retry meets the same engine, so it is not retryable.
   */
  engineVersionUnsupported: (deploymentId: string, reason: string) =>
    error(409, 'engine_version_unsupported', false, `deployment ${deploymentId} failed to start: ${reason}`),
  parkedCapacity: (deploymentId: string) =>
    error(
      409,
      'parked_capacity',
      false,
      `deployment ${deploymentId} cannot be parked: the parked set has no room and its activation is explicit, so ` +
        `nothing is stopped to make room; it serves again`,
    ),
  /** Only models kept loaded hold the memory: a start --evict and a request are refused alike. */
  insufficientCapacity: (deploymentId: string, holders: readonly KeptHolder[]) =>
    error(
      409,
      'insufficient_capacity',
      false,
      `deployment ${deploymentId} needs memory held by ${keptHolders(holders)}; stop one of them first`,
    ),
  /**
   * A checkpoint larger than every GPU of the hosts it may run on, even empty: no eviction and no
   * wait can make room, so a request and a start are refused alike, naming no holder.
   */
  fitsNoGpu: (deploymentId: string, needBytes: number, largest: { hostId: string; memoryBytes: number }, gpus = 1) =>
    error(
      409,
      'insufficient_capacity',
      false,
      gpus === 1
        ? `deployment ${deploymentId} needs ${gib(needBytes)} GiB of GPU memory, more than the largest GPU it may ` +
            `run on has (${gib(largest.memoryBytes)} GiB on ${largest.hostId})`
        : `deployment ${deploymentId} needs ${gib(needBytes)} GiB of GPU memory on each of ${gpus} GPUs, more than ` +
            `any host it may run on has on ${gpus} of its GPUs (${gib(largest.memoryBytes)} GiB each on ` +
            `${largest.hostId})`,
    ),
  /**
   * An instance needing more GPUs (its engine's parallelism options) than every registered host it may
   * run on has: refused at deploy, and at a start or a request for a host registered since.
   */
  needsMoreGpus: (deploymentRef: string, gpus: number, largest: { hostId: string; gpus: number }) =>
    error(
      409,
      'insufficient_capacity',
      false,
      `deployment ${deploymentRef} needs ${gpus === 1 ? '1 GPU' : `${gpus} GPUs`}; the largest host it may run on, ${largest.hostId}, has ` +
        `${largest.gpus}`,
    ),
  /** A start without --evict while other models hold the memory it needs: nothing was started, nothing waits. */
  memoryHeld: (deploymentId: string, holders: readonly string[]) =>
    error(
      409,
      'insufficient_capacity',
      true,
      `deployment ${deploymentId} needs GPU memory held by ${holders.join(', ')}; nothing was started: start it ` +
        `with --evict to park them, or with --wait to wait until the memory is free`,
    ),
  /** A preinitialize while other models hold the memory it needs: nothing was started, nothing waits. */
  memoryHeldToPreinitialize: (deploymentId: string, holders: readonly string[]) =>
    error(
      409,
      'insufficient_capacity',
      true,
      `deployment ${deploymentId} needs GPU memory held by ${holders.join(', ')}; nothing was started: park or ` +
        `stop them, or preinitialize it again once the memory is free`,
    ),
  /** A start with --evict whose memory is held by models that may not yield it now (requests wait for them). */
  memoryBusy: (deploymentId: string, holders: readonly string[]) =>
    error(
      409,
      'insufficient_capacity',
      true,
      `deployment ${deploymentId} needs GPU memory held by ${holders.join(', ')}, which requests are waiting for; ` +
        `nothing was started: start it again shortly, or with --wait to wait until the memory is free`,
    ),
  /** `failure`: why its measurement failed, when it did; a start cannot help until it is measured again. */
  checkpointUnmeasured: (deploymentName: string, failure: string | null) =>
    failure === null
      ? error(
          409,
          'checkpoint_unmeasured',
          true,
          `the checkpoint of deployment ${deploymentName} is still being measured; start it again once it is ` +
            `measured, or use --wait`,
        )
      : error(
          409,
          'checkpoint_unmeasured',
          false,
          `the checkpoint of deployment ${deploymentName} could not be measured: ${failure}; make it readable on ` +
            `its host, then deploy the document again`,
        ),

  // The API's own.
  /** A host agent registering, or an operator's command for a host, that another installation schedules. */
  hostOfAnotherInstallation: (facts: ForeignScheduler) =>
    error(409, 'host_of_another_installation', false, foreignSchedulerLine(facts)),
  /** A request for a model only such a host may run: answered at once, not left to its deadline. */
  deploymentOnHostOfAnotherInstallation: (deploymentId: string, facts: ForeignScheduler) =>
    error(
      409,
      'host_of_another_installation',
      false,
      `deployment ${deploymentId} cannot be served here: ${foreignSchedulerLine(facts)}`,
    ),
  noHost: (deploymentName: string) =>
    error(
      503,
      'unavailable',
      true,
      `no registered host may run deployment ${deploymentName}; start a host agent (capyctl start host) or retry ` +
        `shortly`,
    ),
  notFound: (what: Missing, ref: string) => error(404, 'not_found', false, `${what} ${ref} not found`),
  unauthorized: (
    token: 'admin token' | 'host token' | 'inference token' | 'admin token or metrics token' | 'metrics token',
  ) => error(401, 'unauthorized', false, `a valid ${token} is required: send Authorization: Bearer <${token}>`),
  /** A host's ingress takes requests from the server alone, which it knows by the secret it gave at registration. */
  ingressUnauthorized: () =>
    error(
      401,
      'unauthorized',
      false,
      `a valid ingress secret is required: send ${INGRESS_SECRET_HEADER}: <the secret the server gave this host ` +
        `when it registered>`,
    ),
  /** Another token registering a host ID that is bound to its first token: the take-over the binding stops. */
  hostBoundToAnotherToken: (hostId: string) =>
    error(
      401,
      'unauthorized',
      false,
      `host ${hostId} is registered with another host token; to register it with a new one, an operator revokes ` +
        `the old one first (capyctl revoke host-token ${hostId})`,
    ),
  tokenBoundToAnotherHost: (hostId: string) =>
    error(
      401,
      'unauthorized',
      false,
      `this host token is bound to another host, not ${hostId}; register ${hostId} with a token of its own ` +
        `(capyctl create host-token)`,
    ),
  /** A host reporting on an instance the catalogue places on another host (or on none). */
  notHostsInstance: (hostId: string, instance: string) =>
    error(
      403,
      'forbidden',
      false,
      `host ${hostId} may report only its own instances; instance ${instance} does not run on it`,
    ),
  invalidRequest: (detail: string) => error(400, 'invalid_request', false, detail),
  /** `detail`: what the JSON parser said was wrong. */
  invalidJson: (detail: string) => error(400, 'invalid_request', false, `the body is not valid JSON: ${detail}`),
  /** Deeper bodies are refused before anything walks them again (domain/limits.ts, MAX_NESTING). */
  nestedTooDeep: (maxDepth: number) =>
    error(400, 'invalid_request', false, `the body nests arrays and objects more than ${maxDepth} levels deep`),
  /** `where`: as a validation failure names it, e.g. `params.ref`. */
  controlCharacter: (where: string) =>
    error(400, 'invalid_request', false, `${where}: must not contain control characters`),
  /** Postgres keeps no NUL in text: a document that holds one could not be stored as sent. */
  nulInBody: (where: string) =>
    error(400, 'invalid_request', false, `${where}: must not contain NUL (\\u0000) characters`),
  /** A lone UTF-16 surrogate has no UTF-8 form: Postgres refuses the document that holds one. */
  loneSurrogateInBody: (where: string) =>
    error(400, 'invalid_request', false, `${where}: must not contain a lone surrogate (\\ud800-\\udfff) character`),
  paramTooLong: (maxLength: number) =>
    error(414, 'invalid_request', false, `a name or ID in the path is longer than ${maxLength} characters`),
  badUrl: (path: string) => error(400, 'invalid_request', false, `${path} is not a valid URL path`),
  repeatedHeader: (header: string) => error(400, 'invalid_request', false, `the ${header} header must be sent once`),
  payloadTooLarge: (limitBytes: number) =>
    error(413, 'payload_too_large', false, `the request body is larger than ${limitBytes} bytes`),
  engineUnreachable: (instance: string) =>
    error(502, 'unavailable', true, `the engine of instance ${instance} did not answer; retry shortly`),
  /** A bug, not a condition: logged with its stack, answered without it. */
  internal: () => error(500, 'internal', true, 'internal error; it was logged'),
} as const;

/**
 * What `capyctl` itself says went wrong, before or instead of an answer from the API: a command it
 * does not know, a connection it cannot make, an address that is no capyctl. `exit` names the exit
 * code (cli/command.ts); under `--json` the code and message are printed as the API's are.
 */
export const cliErrorCodes = z.enum([
  'usage',
  'unknown_command',
  'invalid_settings',
  'no_admin_token',
  'invalid_server',
  'unreachable',
  'not_capyctl',
  'internal',
]);
export type CliErrorCode = z.infer<typeof cliErrorCodes>;

export interface CliError {
  readonly code: CliErrorCode;
  readonly message: string;
  /** Usage: the command or what it was given is wrong; refused: what it reached said no, or nothing did. */
  readonly exit: 'usage' | 'refused';
}

const cliError = (code: CliErrorCode, exit: CliError['exit'], message: string): CliError => ({ code, message, exit });

/** How an address the CLI reached failed to answer, by Node's error code; any other code is said as it is. */
const unreachableWords: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'its name did not resolve',
  ETIMEDOUT: 'the connection timed out',
  ECONNRESET: 'the connection was closed before an answer',
  EHOSTUNREACH: 'no route to the host',
};

/** The management listener's address, as the operator's commands take it. */
const SERVER_FLAG =
  '--server (or CAPYCTL_SERVER) names the management listener (listen.management, default 127.0.0.1:7443)';

export const cliErrors = {
  /** `suggestions`: the commands closest to what was typed, by their words; none when nothing is close. */
  unknownCommand: (typed: string, suggestions: readonly string[]) =>
    cliError(
      'unknown_command',
      'usage',
      `unknown command "${typed}"; ` +
        (suggestions.length === 0
          ? '`capyctl --help` lists every command'
          : `did you mean ${suggestions.map((s) => `"capyctl ${s}"`).join(' or ')}?`),
    ),
  /** A command given the wrong arguments: its usage line; `detail`, what was wrong when it is known. */
  usage: (usage: string, detail?: string) =>
    cliError('usage', 'usage', detail === undefined ? `usage: ${usage}` : `${detail}; usage: ${usage}`),
  deployNeedsFile: () => cliError('usage', 'usage', 'deploy model needs --file with the deployment document'),
  /** A flag given none of the values it takes (`--log-format yaml`). */
  notAChoice: (flag: string, choices: readonly string[], given: string) =>
    cliError('usage', 'usage', `${flag} is ${choices.join(' or ')}, not "${given}"`),
  /** `capyctl start server` without what it cannot run without: its database, the admin token. */
  serverNeeds: (missing: readonly string[]) => cliError('usage', 'usage', `the server needs ${missing.join(' and ')}`),
  /** `text`: every problem as the settings loader words it, each with its field. */
  invalidSettings: (text: string) => cliError('invalid_settings', 'usage', text),
  noAdminToken: (file: string) =>
    cliError(
      'no_admin_token',
      'usage',
      `no admin token: pass --admin-token, set CAPYCTL_ADMIN_TOKEN, or point --admin-token-file ` +
        `(CAPYCTL_ADMIN_TOKEN_FILE) at the file the standalone writes; ${file} is missing or empty`,
    ),
  invalidServer: (given: string) =>
    cliError(
      'invalid_server',
      'usage',
      `--server ${JSON.stringify(given)} is not an http(s) address such as http://127.0.0.1:7443 or 127.0.0.1:7443`,
    ),
  /** `why`: Node's error code (ECONNREFUSED) or message. */
  unreachable: (url: string, why: string) =>
    cliError(
      'unreachable',
      'refused',
      `the management API at ${url} did not answer: ${unreachableWords[why] ? `${unreachableWords[why]} (${why})` : why}; ` +
        `is the server running? ${SERVER_FLAG}`,
    ),
  /** `found`: what answered instead, e.g. `200 text/html: "<!doctype html>…"`. */
  notCapyctl: (url: string, request: string, found: string) =>
    cliError(
      'not_capyctl',
      'refused',
      `${url} is not a capyctl management API: ${request} was answered ${found}; ${SERVER_FLAG}`,
    ),
  /** A capyctl listener without the management routes: the inference listener, or a host's ingress. */
  notManagementListener: (url: string, request: string) =>
    cliError(
      'not_capyctl',
      'refused',
      `${url} is a capyctl listener without the management API (${request}: route not found), such as the ` +
        `inference listener or a host's ingress; ${SERVER_FLAG}`,
    ),
  /** A failure that is a bug, not a condition: what it said. */
  internal: (what: string) => cliError('internal', 'usage', what),
} as const;

/** Why a host's step failed, in the words its switch's error then gives (`startFailed`'s reason). */
export const hostStepFailures = {
  /**
   * The engine started reports a version the contract table does not list (`reported`, null when it
   * reported none): `supported` is the span capyctl knows, `setting` the host document's override.
   */
  engineVersionUnsupported: (
    label: string,
    reported: string | null,
    versionRoute: string,
    supported: string,
    setting: string,
  ) =>
    `${reported === null ? `${label} did not report its version (${versionRoute})` : `${label} reports version ${reported}`}, ` +
    `which capyctl does not know: it supports ${label} ${supported}; run one of those, or, to run this one, set ` +
    `${setting} in the host document to the supported version whose requests it takes`,
  /** Every port of the host's `engine_ports` is taken: `ownEngines` of them by engines this host runs. */
  enginePortsExhausted: (first: number, last: number, ownEngines: number) =>
    `no free port for its engine in the host's engine_ports ${first}-${last} (${ownEngines} taken by this ` +
    `host's engines, the rest by other processes); widen engine_ports, or stop or delete a model on this host`,
} as const;

/** Why an engine's launch settings are refused: a host's `engines.<name>` section, or a deployment's extra_args. */
export const engineSettingRefusals = {
  /** `where` holds `option`, which parks the engine on its own (contracts.ts `selfParkOptions`). */
  selfParkOption: (where: string, option: string, label: string) =>
    `${where} has ${option}, which makes ${label} sleep on its own when idle, behind capyctl's back; remove it: ` +
    `capyctl parks and wakes the engine itself`,
  /** The host's `engines.<name>.unlisted_version_as` names a version the table does not list. */
  unlistedAsUnknown: (setting: string, given: string, label: string, supported: string) =>
    `${setting}: ${given} is not a version capyctl knows; name one of ${label} ${supported}, the one whose ` +
    `requests the engine takes`,
} as const;

/** How a person reads where a parked instance's weights are: the words of the release lines below. */
export const parkTierWords = { host_ram: 'host RAM', deep: 'deep', kv_only: 'weights kept' } as const satisfies Record<
  ParkTier,
  string
>;

/** How `status deployment` says where the longest sequence its engine serves comes from. */
export const maxModelLenWords = {
  declared: 'declared',
  model: "the model's own",
  kv_budget: 'what its KV budget holds',
  engine_default: 'chosen by the engine',
} as const satisfies Record<MaxModelLenSource, string>;

/** How `status deployment` says where a parked instance's residue comes from. */
export const residueSourceWords = {
  measured: 'measured after park',
  reserved: 'reserved at measurement',
} as const satisfies Record<ResidueSource, string>;

/** The line a receipt prints for each way a victim was released. */
export const releasedLines = {
  parkedHostRam: 'released: parked (host RAM)',
  parkedDeep: 'released: parked (deep)',
  parkedKvOnly: 'released: parked (weights kept)',
  stopped: 'released: stopped',
  stoppedNoRoom: 'released: stopped (no room to park)',
  /** Its park failed, so it was stopped rather than left half-parked: why, in the words of what failed. */
  stoppedParkFailed: (cause: string) => `released: stopped (its park failed: ${cause})`,
} as const;

/** The same, on the receipt of a start that answers as its switch begins: the victim is on its way out. */
export const releasingLines = {
  parkingHostRam: 'releasing: parking (host RAM)',
  parkingDeep: 'releasing: parking (deep)',
  parkingKvOnly: 'releasing: parking (weights kept)',
  stopping: 'releasing: stopping',
  stoppingNoRoom: 'releasing: stopping (no room to park)',
} as const;

export interface RenderedError {
  status: number;
  headers: Record<string, string>;
  body: { code: ErrorCode; message: string; retryable: boolean };
}

/** The HTTP reply for an error: JSON `{code, message, retryable}`, and `Retry-After` on every 429. */
export function renderApiError(e: ApiError): RenderedError {
  const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8' };
  if (e.status === 429) headers['retry-after'] = String(RETRY_AFTER_SECONDS);
  return { status: e.status, headers, body: { code: e.code, message: e.message, retryable: e.retryable } };
}

/** Carries a catalogue entry through layers that throw; the edge renders `apiError`. */
export class CapyError extends Error {
  constructor(readonly apiError: ApiError) {
    super(apiError.message);
    this.name = 'CapyError';
  }
}
