/** Where a process finds Temporal. */
import { z } from 'zod';
import { address } from './fields.js';

/**
 * The Temporal CLI dev server's own ports (`temporal server start-dev`), its frontend's and its Web
 * UI's: where a process looks for Temporal unless told, and where a standalone runs its own.
 */
export const TEMPORAL_DEV_PORTS = { port: 7233, ui_port: 8233 } as const;
export const TEMPORAL_DEV_ADDRESS = `127.0.0.1:${TEMPORAL_DEV_PORTS.port}`;

export const temporalSettings = (defaultAddress?: string) =>
  z.strictObject({
    address: defaultAddress === undefined ? address.optional() : address.default(defaultAddress),
    namespace: z.string().min(1).default('default'),
  });
