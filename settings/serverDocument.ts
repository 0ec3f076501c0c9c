/** server.yaml (`capyctl start server`), and the `server:` section of a standalone document. */
import { z } from 'zod';
import { address, durationMs, timerMs } from './fields.js';
import { TEMPORAL_DEV_ADDRESS, TEMPORAL_DEV_PORTS, temporalSettings } from './temporal.js';

const SECOND = 1_000;
/** A metrics token short enough to guess, or with a space (never sent as a bearer token), is refused. */
const METRICS_TOKEN_MIN_LENGTH = 16;

/**
 * A scraper's one static credential: it reads `GET /metrics` on the management listener and on
 * every host's ingress, and nothing else. The problem is said without the value: it is a secret.
 */
export const metricsToken = z.string().refine((t) => t.length >= METRICS_TOKEN_MIN_LENGTH && /^\S+$/.test(t), {
  message:
    `must be at least ${METRICS_TOKEN_MIN_LENGTH} characters, without spaces ` +
    '(the value is not shown: it is a secret)',
});
const DAY = 86_400 * SECOND;
/** The shortest idle timer a document may set. */
export const IDLE_TIMEOUT_MIN_MS = 1 * SECOND;

/** `temporalAddress`: the default frontend, or undefined for a standalone (which then starts its own). */
export const serverSection = (temporalAddress?: string) =>
  z.strictObject({
    listen: z
      .strictObject({
        inference: address.default('127.0.0.1:8080'),
        management: address.default('127.0.0.1:7443'),
      })
      .prefault({}),
    temporal: temporalSettings(temporalAddress)
      .extend({
        /** The Temporal Web UI the status page links each switch to: the Temporal CLI dev server's by default. */
        web_ui: z.url({ protocol: /^https?$/ }).default(`http://127.0.0.1:${TEMPORAL_DEV_PORTS.ui_port}`),
      })
      .prefault({}),
    database_url: z.string().min(1).optional(),
    /** Without a token, `GET /metrics` takes the admin token alone, and the hosts' take none. */
    metrics: z.strictObject({ token: metricsToken.optional() }).prefault({}),
    switching: z
      .strictObject({
        drain_timeout: durationMs(1 * SECOND, 600 * SECOND).default(30 * SECOND),
        /** How long a wake may take before it fails with wake_uncertain. */
        wake_window: durationMs(1 * SECOND, 3_600 * SECOND).default(300 * SECOND),
        /** How long a start (launch, load, first answer) may take before it fails. */
        start_timeout: durationMs(1 * SECOND, 3_600 * SECOND).default(900 * SECOND),
      })
      .prefault({}),
    hosts: z
      .strictObject({
        /**
         * How long a host may go without reporting (its agent reports about once a second) before it
         * is shown down and nothing is routed to its engines any more.
         */
        down_after: durationMs(2 * SECOND, 600 * SECOND).default(10 * SECOND),
      })
      .prefault({}),
    lifecycle_defaults: z
      .strictObject({
        ready_idle_timeout: timerMs(IDLE_TIMEOUT_MIN_MS, 30 * DAY),
        parked_idle_timeout: timerMs(IDLE_TIMEOUT_MIN_MS, 30 * DAY),
      })
      .prefault({}),
  });

export const serverDocument = serverSection(TEMPORAL_DEV_ADDRESS);
export type ServerSettings = z.output<typeof serverDocument>;
