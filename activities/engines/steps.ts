/**
 * Runs a park or a wake as the contract table lists it (engines/contracts.ts): each step's request, and what
 * its answer means. A step of an optional route the engine does not have is skipped with a warning;
 * every failure names the engine, the request and what the engine answered.
 */
import { z } from 'zod';
import type { EngineName, ParkTier } from '../../domain/vocabulary.js';
import {
  engineContracts,
  type RouteContract,
  routesTierNeeds,
  type Step,
  type StepFacts,
  type VersionRequests,
} from '../../engines/contracts.js';
import { type CallOptions, type EngineEndpoint, EngineError } from '../../engines/engine.js';
import { type EngineReply, exchange, expectJson, refusal, succeeded } from './http.js';

const label = (engine: EngineName): string => engineContracts[engine].label;

const sleepState = z.object({ is_sleeping: z.boolean() });
const modelInfo = z.object({ model_path: z.string() });
const weightsUpdate = z.object({ success: z.boolean(), message: z.string().nullish() });

/** The path and query a step asks for. */
const target = (route: RouteContract, query?: string): string => `${route.path}${query ? `?${query}` : ''}`;

/** A step's query string, built from what is known when its function needs it. */
const queryOf = (step: Step, facts: StepFacts): string | undefined =>
  typeof step.query === 'function' ? step.query(facts) : step.query;
/** How a message names a request: `POST /sleep?level=1`. */
const requestLine = (route: RouteContract, query?: string): string => `${route.method} ${target(route, query)}`;

/** The body as JSON; undefined when it is not JSON. */
function jsonOf(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

/** What a step's successful answer says, checked by its role. */
function checkAnswer(
  engine: EngineName,
  endpoint: EngineEndpoint,
  step: Step,
  line: string,
  reply: EngineReply,
  facts: StepFacts,
): void {
  const who = `${label(engine)} at ${endpoint.baseUrl}`;
  switch (step.role) {
    case 'expect_asleep':
      if (!expectJson(endpoint, line, reply, sleepState, label(engine)).is_sleeping)
        throw new EngineError('refused', `${who} answered the sleep with 200 but ${line} says it is not sleeping`);
      return;
    case 'expect_awake':
      if (expectJson(endpoint, line, reply, sleepState, label(engine)).is_sleeping)
        throw new EngineError('not_ready', `${who} answered the wake with 200 but ${line} says it is still sleeping`);
      return;
    case 'read_model_path':
      facts.modelPath = expectJson(endpoint, line, reply, modelInfo, label(engine)).model_path;
      return;
    case 'reload': {
      // A failed load usually answers an error status, but a 200 with `success: false` (SGLang) says the same.
      const outcome = weightsUpdate.safeParse(jsonOf(reply.body));
      if (outcome.success && !outcome.data.success)
        throw new EngineError(
          'reload_failed',
          `${who} did not reload its weights: ${line} answered ${outcome.data.message ?? 'success: false'}`,
        );
      return;
    }
    case undefined:
      return;
  }
}

/** The error of a step the engine answered with an error status. */
function failedStep(
  engine: EngineName,
  endpoint: EngineEndpoint,
  step: Step,
  line: string,
  reply: EngineReply,
): EngineError {
  const error = refusal(endpoint, line, reply, label(engine));
  // An error answer from a reload (a full GPU among them) means the weights did not come back.
  if (step.role === 'reload')
    return new EngineError(
      'reload_failed',
      `${label(engine)} at ${endpoint.baseUrl} did not reload its weights: ${error.message}`,
    );
  return error;
}

async function runSteps(
  engine: EngineName,
  endpoint: EngineEndpoint,
  steps: readonly Step[],
  sends: VersionRequests,
  options: CallOptions = {},
): Promise<void> {
  const facts: StepFacts = { modelPath: '', sends };
  for (const step of steps) {
    const query = queryOf(step, facts);
    const line = requestLine(step.route, query);
    const json = typeof step.json === 'function' ? (step.json as (f: StepFacts) => unknown)(facts) : step.json;
    const reply = await exchange(endpoint, target(step.route, query), {
      method: step.route.method,
      json,
      signal: options.signal,
    });
    if (reply.status === 404 && step.route.optional) {
      options.warn?.(
        `${label(engine)} at ${endpoint.baseUrl} has no ${line} (404); skipped, since it only refines the step`,
      );
      continue;
    }
    if (!succeeded(reply)) throw failedStep(engine, endpoint, step, line, reply);
    checkAnswer(engine, endpoint, step, line, reply, facts);
  }
}

/** What the engine answered when asked whether it has the routes a tier needs. */
interface RouteCheck {
  /** The routes it does not have, each with its answer (`POST /collective_rpc`, `404 {"detail":"Not Found"}`). */
  missing: Array<{ line: string; answer: string }>;
  /** The routes it answered for. */
  present: string[];
}

/** An answer as a message quotes it: its status and the start of its body. */
const answerWords = (reply: EngineReply): string => {
  const body = reply.body.trim().slice(0, 200);
  return body === '' ? String(reply.status) : `${reply.status} ${body}`;
};

/**
 * Before a park: every route the tier's park and wake need, where the engine can be asked without
 * doing anything (a GET route, or `GET` on a POST route: 405 when it has it). A missing one refuses
 * the park, so the model stops instead of parking where it could never wake.
 */
async function checkRoutes(
  endpoint: EngineEndpoint,
  routes: readonly RouteContract[],
  options: CallOptions = {},
): Promise<RouteCheck> {
  const check: RouteCheck = { missing: [], present: [] };
  for (const route of routes) {
    if (route.method !== 'GET' && !route.probedByGet) continue;
    const reply = await exchange(endpoint, route.path, { method: 'GET', signal: options.signal });
    if (reply.status === 404) check.missing.push({ line: requestLine(route), answer: answerWords(reply) });
    else check.present.push(requestLine(route));
  }
  return check;
}

/**
 * Why the engine lacks the routes, as far as its answers tell: when none of them answers, the switch
 * that turns them on is off (the contract's hint); when some do, that switch is on, and this version
 * has no such route.
 */
function missingRoutesCause(engine: EngineName, check: RouteCheck): string {
  const hint = engineContracts[engine].missingRouteHint;
  if (check.present.length === 0) return hint ? `; ${hint}` : '';
  return (
    `; its ${check.present.join(', ')} answer, so what switches these routes on is set and this ` +
    `${label(engine)} build lacks ${check.missing.length === 1 ? 'it' : 'them'}`
  );
}

/** The steps of a park or wake at `tier`; refused for a tier the engine does not park at. */
function tierSteps(engine: EngineName, phase: 'park' | 'wake', tier: ParkTier): readonly Step[] {
  const steps = engineContracts[engine][phase][tier];
  if (steps === undefined) throw new EngineError('refused', `${label(engine)} cannot park at tier ${tier}`);
  return steps;
}

/**
 * A park as the table lists it, after checking the engine has every route the tier's park and wake
 * need: a missing one refuses this (first) park, naming the route and the engine's version, rather
 * than failing the wake after the memory is gone.
 */
export async function parkByContract(
  engine: EngineName,
  endpoint: EngineEndpoint,
  tier: ParkTier,
  sends: VersionRequests,
  version: () => Promise<string | null>,
  options: CallOptions = {},
): Promise<void> {
  const steps = tierSteps(engine, 'park', tier);
  const check = await checkRoutes(endpoint, routesTierNeeds(engine, tier), options);
  if (check.missing.length > 0) {
    const reported = await version().catch(() => null);
    const answers = [...new Set(check.missing.map((m) => m.answer))].join(', ');
    throw new EngineError(
      'refused',
      `${label(engine)} ${reported ?? '(version not reported)'} at ${endpoint.baseUrl} cannot park at tier ${tier}: ` +
        `it has no ${check.missing.map((m) => m.line).join(', ')} (GET answered ${answers})` +
        missingRoutesCause(engine, check),
    );
  }
  await runSteps(engine, endpoint, steps, sends, options);
}

export const wakeByContract = (
  engine: EngineName,
  endpoint: EngineEndpoint,
  tier: ParkTier,
  sends: VersionRequests,
  options: CallOptions = {},
): Promise<void> => runSteps(engine, endpoint, tierSteps(engine, 'wake', tier), sends, options);
