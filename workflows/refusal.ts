/**
 * How a command's refusal crosses Temporal: the host scheduler fails the update with an
 * ApplicationFailure that carries the catalogue's error, and the caller reads it back, so the
 * management API answers with the spec's status, code and message.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { ApiError } from '../domain/catalogue.js';

/**
 * The failure an update handler throws to refuse a command (non-retryable: the same command would be
 * refused again).
 */
export function refusal(error: ApiError): ApplicationFailure {
  return ApplicationFailure.create({ message: error.message, type: error.code, nonRetryable: true, details: [error] });
}

/** The catalogue's error a refusal carries, found anywhere in a failure's chain of causes. */
export function refusedWith(failure: unknown): ApiError | undefined {
  for (let f = failure; f instanceof Error; f = (f as Error & { cause?: unknown }).cause) {
    if (f instanceof ApplicationFailure && f.details?.[0] && typeof f.details[0] === 'object')
      return f.details[0] as ApiError;
  }
  return undefined;
}
