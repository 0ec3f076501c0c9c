/** Where a process finds Temporal. */
import { z } from 'zod';
import { address } from './fields.js';

export const temporalSettings = (defaultAddress?: string) =>
  z.strictObject({
    address: defaultAddress === undefined ? address.optional() : address.default(defaultAddress),
    namespace: z.string().min(1).default('default'),
  });
