/** The management listener (default 127.0.0.1:7443): host agents and, with the admin token, operators. */
import Fastify, { type FastifyBaseLogger } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { Db } from '../store/db.js';
import type { LoadBoard } from './loadBoard.js';
import { type HostEventSink, hostRoutes } from './management/hosts.js';
import { apiErrorsPlugin } from './plugins/apiErrors.js';

export interface ManagementDeps {
  db: Db;
  board: LoadBoard;
  hostEvents: HostEventSink;
  logger: FastifyBaseLogger;
}

export async function buildManagementApp(deps: ManagementDeps) {
  const app = Fastify({ loggerInstance: deps.logger, bodyLimit: 1024 * 1024 });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  await app.register(apiErrorsPlugin);
  await app.register(hostRoutes({ db: deps.db, board: deps.board, events: deps.hostEvents }));
  return app;
}
