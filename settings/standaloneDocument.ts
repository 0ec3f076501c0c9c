/** standalone.yaml (`capyctl start standalone`): a server and one host in one process. */
import { z } from 'zod';
import { DEFAULT_DATA_DIR } from '../domain/dataDir.js';
import { port } from './fields.js';
import { hostSection } from './hostDocument.js';
import { REQUEST_DEADLINE_DEFAULT_MS } from './queue.js';
import { serverSection } from './serverDocument.js';
import { TEMPORAL_DEV_PORTS } from './temporal.js';

export const standaloneDocument = z.strictObject({
  /** Where the standalone keeps its embedded database, Temporal file and admin token. */
  data_dir: z.string().min(1).default(DEFAULT_DATA_DIR),
  /** Deploy the example models of deploy/examples/ when the catalogue is empty (the embedded defaults do). */
  examples: z.boolean().default(false),
  /**
   * The Temporal dev server the standalone runs when `server.temporal.address` names none: its
   * frontend and its Web UI, on the Temporal CLI's own ports unless set.
   */
  temporal_dev_server: z
    .strictObject({
      port: port().default(TEMPORAL_DEV_PORTS.port),
      ui_port: port().default(TEMPORAL_DEV_PORTS.ui_port),
    })
    .refine((p) => p.port !== p.ui_port, { path: ['ui_port'], message: 'is the same as port: each needs its own' })
    .prefault({}),
  server: serverSection().prefault({}),
  host: hostSection(REQUEST_DEADLINE_DEFAULT_MS.standalone).prefault({}),
});
export type StandaloneSettings = z.output<typeof standaloneDocument>;
