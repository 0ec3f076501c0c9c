/** The management listener (default 127.0.0.1:7443): host agents and, with the admin token, operators. */
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { apiErrors } from '../domain/catalogue.js';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { GatewayStore } from './ports.js';
import type { LoadBoard } from './loadBoard.js';
import type { OperatorLifecycle } from './management/operatorLifecycle.js';
import { deploymentRoutes } from './management/deployments.js';
import { hostAdminRoutes } from './management/hostAdmin.js';
import { type HostEventSink, hostRoutes } from './management/hosts.js';
import { loadRoutes } from './management/load.js';
import { switchRoutes, type TemporalWebUi } from './management/switches.js';
import { bearerAuth } from './plugins/bearerAuth.js';
import { metricsRoute } from './plugins/metrics.js';
import { apiErrorsPlugin, frameworkErrors, MAX_PARAM_LENGTH } from './plugins/apiErrors.js';
import { jsonBody } from './plugins/jsonBody.js';
import { storableTextPlugin } from './plugins/storableText.js';
import { statusPageRoute } from './statusPage.js';
import type { RouterFigures } from './routerFigures.js';
import type { StatusHistory } from './statusHistory.js';
import { statusHistoryRoutes } from './management/statusHistory.js';
import type { RoutingTable } from './routingTable.js';

/** What the operator's routes need: the server's memory, and the lifecycle commands go to. */
export interface AdminDeps {
  adminToken: string;
  /** The server's metrics; left out by test benches of the operator's routes alone. */
  metrics?: Registry;
  table: RoutingTable;
  figures: RouterFigures;
  lifecycle: OperatorLifecycle;
  /** Where the listed switches link to; left out by test benches without a Temporal Web UI. */
  webUi?: TemporalWebUi;
  /** The status page's last hour; left out by test benches of the operator's routes alone. */
  history?: StatusHistory;
}

export interface ManagementDeps {
  /** The store, through the gateway's ports. */
  store: GatewayStore;
  board: LoadBoard;
  hostEvents: HostEventSink;
  logger: FastifyBaseLogger;
  /**
   * What a scraper reads the metrics with besides the admin token (`metrics.token`): here, and on
   * each host's ingress, which gets it in its registration's reply.
   */
  metricsToken?: string;
  /** The operator's side; left out by test benches that only run host agents against the listener. */
  admin?: AdminDeps;
}

/** Every operator route sits in this one scope, behind the admin token. */
function adminRoutes(deps: AdminDeps & { board: LoadBoard; store: GatewayStore }) {
  const { store, table, lifecycle } = deps;
  return async (app: FastifyInstance) => {
    await app.register(bearerAuth, { tokens: [deps.adminToken], refusal: apiErrors.unauthorized('admin token') });
    await app.register(loadRoutes({ table, board: deps.board, figures: deps.figures }));
    await app.register(deploymentRoutes({ catalogue: store.catalogue, hosts: store.hosts, table, lifecycle }));
    await app.register(hostAdminRoutes({ hosts: store.hosts, catalogue: store.catalogue, table, lifecycle }));
    await app.register(switchRoutes({ switchReceipts: store.switchReceipts, table, lifecycle, webUi: deps.webUi }));
    if (deps.history)
      await app.register(statusHistoryRoutes({ history: deps.history, switchReceipts: store.switchReceipts }));
  };
}

export async function buildManagementApp(deps: ManagementDeps) {
  const app = Fastify({
    loggerInstance: deps.logger,
    bodyLimit: 1024 * 1024,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors,
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  await app.register(apiErrorsPlugin);
  await app.register(jsonBody);
  await app.register(storableTextPlugin);
  await app.register(
    hostRoutes({
      hosts: deps.store.hosts,
      board: deps.board,
      events: deps.hostEvents,
      metricsToken: deps.metricsToken,
    }),
  );
  if (deps.admin) {
    await app.register(statusPageRoute());
    if (deps.admin.metrics)
      await app.register(
        metricsRoute({
          registry: deps.admin.metrics,
          adminToken: deps.admin.adminToken,
          metricsToken: deps.metricsToken,
        }),
      );
    await app.register(adminRoutes({ ...deps.admin, board: deps.board, store: deps.store }));
  }
  return app;
}
