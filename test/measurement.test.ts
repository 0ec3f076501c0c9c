import { describe, expect, it } from 'vitest';
import { apiErrors } from '../domain/catalogue.js';
import { awaitsMeasurement, measurementState, unmeasuredRefusal } from '../domain/measurement.js';

const measured = { checkpoint: { weightBytes: 1, kvBytes: 1 }, measureFailure: null };
const measuring = { checkpoint: null, measureFailure: null };
const failed = { checkpoint: null, measureFailure: 'config.json is not readable' };

describe('a start and the checkpoint measurement: one decision for the route, the scheduler and start --wait', () => {
  it('lets a measured revision start, and start --wait goes straight on', () => {
    expect(measurementState(measured)).toBe('measured');
    expect(unmeasuredRefusal('chat', measured)).toBeNull();
    expect(awaitsMeasurement('measured')).toBe(false);
  });

  it('refuses a revision still being measured retryably, and start --wait waits for it', () => {
    expect(measurementState(measuring)).toBe('measuring');
    expect(unmeasuredRefusal('chat', measuring)).toEqual(apiErrors.checkpointUnmeasured('chat', null));
    expect(unmeasuredRefusal('chat', measuring)?.retryable).toBe(true);
    expect(awaitsMeasurement('measuring')).toBe(true);
  });

  it('refuses a revision whose measurement failed with why, for good, and start --wait does not wait', () => {
    expect(measurementState(failed)).toBe('failed');
    const refusal = unmeasuredRefusal('chat', failed);
    expect(refusal).toEqual(apiErrors.checkpointUnmeasured('chat', 'config.json is not readable'));
    expect(refusal?.message).toContain('config.json is not readable');
    expect(refusal?.retryable).toBe(false);
    expect(awaitsMeasurement('failed')).toBe(false);
  });
});
