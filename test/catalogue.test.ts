import { describe, expect, it } from 'vitest';
import { apiErrors, releasedLines, renderApiError } from '../domain/catalogue.js';

const ID = '01M3R7A6YJW402N962HH17A66W';

/**
 * The spec's "Errors while waiting" table, row by row, as it is written there with
 * <deployment id> = ID, the drain bound 30000 ms and <n> = 2.
 */
const table = [
  [
    apiErrors.queueDeadline(ID),
    503,
    'unavailable',
    `deployment ${ID} did not become servable within the queue deadline; retry shortly`,
  ],
  [
    apiErrors.drainTimeout(ID, 30_000, 2),
    503,
    'unavailable',
    `switch to ${ID} failed: drain timeout after 30000 ms with 2 request(s) still charged; the victims serve again; retry shortly`,
  ],
  [apiErrors.dispatchClosed(ID), 503, 'unavailable', `dispatch to deployment ${ID} is closed; retry shortly`],
  [apiErrors.waitingLimit(ID), 429, 'queue_full', `too many requests are waiting for deployment ${ID}`],
  [apiErrors.bufferedBytes(), 429, 'queue_full', 'waiting requests exceed the buffered-bytes bound'],
  [
    apiErrors.inFlightDeadline(ID),
    429,
    'queue_full',
    `deployment ${ID} stayed at its in-flight bound for the queue deadline`,
  ],
  [
    apiErrors.inFlightNoWait(ID),
    429,
    'queue_full',
    `deployment ${ID} is at its in-flight bound and lets no request wait; retry shortly`,
  ],
  [
    apiErrors.notServableNoWait(ID),
    429,
    'queue_full',
    `deployment ${ID} is not servable now and lets no request wait; retry shortly`,
  ],
] as const;

describe('the "Errors while waiting" table', () => {
  it.each(table)('renders %#: status, code, message word for word, retryable true', (error, status, code, message) => {
    const reply = renderApiError(error);
    expect(reply.status).toBe(status);
    expect(reply.body).toEqual({ code, message, retryable: true });
    expect(JSON.parse(JSON.stringify(reply.body))).toEqual({ code, message, retryable: true });
    expect(reply.headers['content-type']).toBe('application/json; charset=utf-8');
    if (status === 429) expect(reply.headers['retry-after']).toBe('1');
    else expect(reply.headers).not.toHaveProperty('retry-after');
  });

  it('puts the drain bound that applied into the drain message', () => {
    expect(apiErrors.drainTimeout(ID, 5_000, 1).message).toBe(
      `switch to ${ID} failed: drain timeout after 5000 ms with 1 request(s) still charged; the victims serve again; retry shortly`,
    );
  });
});

describe('409s for models a request does not start', () => {
  it('renders deployment_inactive with the spec body', () => {
    const reply = renderApiError(apiErrors.deploymentInactive(ID));
    expect(reply.status).toBe(409);
    expect(reply.body.code).toBe('deployment_inactive');
    expect(reply.body.message).toBe(
      'deployment 01M3R7A6YJW402N962HH17A66W is not running and its activation is explicit (lifecycle.activation: explicit); inference does not start or wake it; start it with `capyctl start deployment 01M3R7A6YJW402N962HH17A66W`',
    );
    expect(reply.body.retryable).toBe(false);
    expect(reply.headers).not.toHaveProperty('retry-after');
  });

  it('renders deployment_stopped as not retryable', () => {
    const reply = renderApiError(apiErrors.deploymentStopped(ID));
    expect([reply.status, reply.body.code, reply.body.retryable]).toEqual([409, 'deployment_stopped', false]);
    expect(reply.body.message).toContain(`capyctl start deployment ${ID}`);
  });
});

describe('the other codes the spec names', () => {
  it.each([
    [
      apiErrors.capabilityMissingDeepPark('chat-a', 'gpt-oss on vLLM does not wake correctly'),
      409,
      'capability_missing:deep_park',
      false,
    ],
    [apiErrors.wakeMismatch(ID), 503, 'wake_mismatch', true],
    [apiErrors.wakeReloadFailed(ID), 503, 'wake_reload_failed', true],
    [apiErrors.wakeUncertain(ID, 300_000), 503, 'wake_uncertain', true],
    [apiErrors.parkedCapacity(ID), 409, 'parked_capacity', false],
    [apiErrors.notFound('deployment', ID), 404, 'not_found', false],
    [apiErrors.unauthorized('admin token'), 401, 'unauthorized', false],
    [apiErrors.unauthorized('host token'), 401, 'unauthorized', false],
  ] as const)('%#: %s', (error, status, code, retryable) => {
    const reply = renderApiError(error);
    expect([reply.status, reply.body.code, reply.body.retryable]).toEqual([status, code, retryable]);
    expect(reply.body.message.length).toBeGreaterThan(0);
  });

  it('names what to declare for a model that cannot park', () => {
    expect(apiErrors.capabilityMissingDeepPark('chat-a', 'gpt-oss on vLLM does not wake correctly').message).toBe(
      'deployment chat-a cannot be parked: gpt-oss on vLLM does not wake correctly; declare residency: restart_only',
    );
  });

  it('names each holder of the memory with the setting that keeps it loaded: explicit activation or warm', () => {
    const explicit = { name: 'ex1', keptBy: 'explicit' } as const;
    const warm = { name: 'w1', keptBy: 'warm' } as const;
    expect(apiErrors.insufficientCapacity(ID, [explicit]).message).toBe(
      `deployment ${ID} needs memory held by ex1, which activation: explicit keeps loaded; stop one of them first`,
    );
    expect(apiErrors.insufficientCapacity(ID, [warm]).message).toBe(
      `deployment ${ID} needs memory held by w1, which lifecycle.warm: true keeps loaded; stop one of them first`,
    );
    expect(apiErrors.insufficientCapacity(ID, [warm, explicit, { name: 'ex2', keptBy: 'explicit' }]).message).toBe(
      `deployment ${ID} needs memory held by ex1, ex2, which activation: explicit keeps loaded, and w1, which lifecycle.warm: true keeps loaded; stop one of them first`,
    );
  });

  it('says a stopped victim had no room to park, as the spec words it', () => {
    expect(releasedLines.stoppedNoRoom).toBe('released: stopped (no room to park)');
  });
});
