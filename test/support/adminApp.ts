/**
 * The management listener as the operator's route tests build it: their own database and routing
 * table, a recording lifecycle in place of Temporal, no traffic, no host events, a silent logger.
 */
import pino from 'pino';
import { type AdminDeps, buildManagementApp } from '../../gateway/managementApp.js';
import { LoadBoard } from '../../gateway/loadBoard.js';
import { RoutingTable } from '../../gateway/routingTable.js';
import { storePorts } from '../../server/storePorts.js';
import type { Db } from '../../store/db.js';
import { recordingLifecycle } from './operatorLifecycle.js';

/** No request runs or waits anywhere. */
export const quietFigures: AdminDeps['figures'] = {
  deployment: () => ({ inFlight: 0, inFlightLimit: 32, waiting: 0, waitingLimit: 64 }),
  instanceInFlight: () => 0,
};

export function buildAdminApp(
  db: Db,
  admin: Pick<AdminDeps, 'adminToken'> & Partial<AdminDeps> & { hosts?: readonly string[] },
) {
  const { hosts, ...rest } = admin;
  const table = rest.table ?? new RoutingTable();
  return buildManagementApp({
    store: storePorts(db),
    board: new LoadBoard(),
    hostEvents: { registered: async () => {}, engineExited: async () => {} },
    logger: pino({ level: 'silent' }),
    admin: { table, figures: quietFigures, lifecycle: recordingLifecycle(db, table, hosts), ...rest },
  });
}
