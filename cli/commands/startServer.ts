/**
 * `capyctl start server --file server.yaml [--set k=v …]`: runs the server until SIGTERM or SIGINT.
 * The database comes from `database_url` or DATABASE_URL; the admin token from CAPYCTL_ADMIN_TOKEN;
 * the inference listener's own token, if it is to ask for one, from CAPYCTL_INFERENCE_TOKEN.
 */
import { createLogger } from '../../logging/logger.js';
import { type Command, exitCodes } from '../command.js';
import { failure } from '../failure.js';
import { processSettings, START_FLAGS_USAGE, startedOrRefused, untilStopSignal } from '../processSettings.js';

export const startServer: Command = {
  words: ['start', 'server'],
  summary: 'run the server: the gateway, the management API and the lifecycle’s workflows',
  usage: `capyctl start server [--file server.yaml] ${START_FLAGS_USAGE}   (needs DATABASE_URL and CAPYCTL_ADMIN_TOKEN)`,
  example: 'DATABASE_URL=postgres://127.0.0.1/capyctl CAPYCTL_ADMIN_TOKEN=… capyctl start server --file server.yaml',
  async run(args) {
    const { settings, logFormat } = await processSettings('server', args);
    const databaseUrl = settings.database_url ?? process.env.DATABASE_URL;
    const adminToken = process.env.CAPYCTL_ADMIN_TOKEN;
    const missing = [
      ...(databaseUrl ? [] : ['database_url (or DATABASE_URL)']),
      ...(adminToken ? [] : ['CAPYCTL_ADMIN_TOKEN']),
    ];
    if (missing.length > 0) throw await failure('serverNeeds', missing);
    // Loaded here, not at the top: the Temporal worker is heavy and other commands do not need it.
    const [{ startServer: start, ListenRefused }, { postgresDb }] = await Promise.all([
      import('../../server/server.js'),
      import('../../store/db.js'),
    ]);
    const logger = createLogger('capyctl-server', { format: logFormat });
    const db = postgresDb(databaseUrl!);
    const server = await startedOrRefused(
      () =>
        start({
          settings,
          serverId: process.env.CAPYCTL_SERVER_ID ?? 'main',
          adminToken: adminToken!,
          db,
          logger,
          inferenceToken: process.env.CAPYCTL_INFERENCE_TOKEN || undefined,
        }).catch(async (e: unknown) => {
          await db.close();
          throw e;
        }),
      [ListenRefused],
    );
    if (!server) return exitCodes.refused;
    logger.info(
      {
        managementUrl: server.managementUrl,
        inferenceUrl: server.inferenceUrl,
        taskQueue: server.serverTaskQueue,
        workflowTaskQueue: server.workflowTaskQueue,
      },
      'server started',
    );
    await untilStopSignal();
    await server.stop();
    await db.close();
    return exitCodes.ok;
  },
};
