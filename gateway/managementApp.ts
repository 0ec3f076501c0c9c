/** The management listener (default 127.0.0.1:7443): host agents and, with the admin token, operators. */
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { Db } from '../store/db.js';
import type { LoadBoard } from './loadBoard.js';
import { type HostEventSink, hostRoutes } from './management/hosts.js';
import { loadRoutes } from './management/load.js';
import { adminAuth } from './plugins/adminAuth.js';
import { apiErrorsPlugin } from './plugins/apiErrors.js';
import type { RouterFigures } from './routerFigures.js';
import type { RoutingTable } from './routingTable.js';

/** What the operator's routes need; all of them read memory the server keeps. */
export interface AdminDeps {
  adminToken: string;
  table: RoutingTable;
  figures: RouterFigures;
}

export interface ManagementDeps {
  db: Db;
  board: LoadBoard;
  hostEvents: HostEventSink;
  logger: FastifyBaseLogger;
  /** The operator's side; left out by test benches that only run host agents against the listener. */
  admin?: AdminDeps;
}

/** Every operator route sits in this one scope, behind the admin token. */
function adminRoutes(deps: AdminDeps & { board: LoadBoard }) {
  return async (app: FastifyInstance) => {
    await app.register(adminAuth, { adminToken: deps.adminToken });
    await app.register(loadRoutes({ table: deps.table, board: deps.board, figures: deps.figures }));
  };
}

export async function buildManagementApp(deps: ManagementDeps) {
  const app = Fastify({ loggerInstance: deps.logger, bodyLimit: 1024 * 1024 });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  await app.register(apiErrorsPlugin);
  await app.register(hostRoutes({ db: deps.db, board: deps.board, events: deps.hostEvents }));
  if (deps.admin) await app.register(adminRoutes({ ...deps.admin, board: deps.board }));
  return app;
}
