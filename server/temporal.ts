/**
 * The server's connections to Temporal: the client's (the schedulers' commands and demands, the
 * switches' results), made first; the workers', made once the listeners are bound. Both are closed
 * last, after the workers stopped and the server left the store's list.
 */
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import type { Logger } from 'pino';
import { installTemporalRuntime } from '../logging/temporalRuntime.js';

export class TemporalConnections {
  private workers: NativeConnection | undefined;

  private constructor(
    readonly client: Client,
    readonly address: string,
    readonly namespace: string,
  ) {}

  static async connect({ address, namespace }: { address: string; namespace: string }): Promise<TemporalConnections> {
    const client = new Client({ connection: await Connection.connect({ address }), namespace });
    return new TemporalConnections(client, address, namespace);
  }

  /** The workers' connection, made once the SDK's runtime logs through pino. */
  async workerConnection(logger: Logger): Promise<NativeConnection> {
    installTemporalRuntime(logger);
    this.workers = await NativeConnection.connect({ address: this.address });
    return this.workers;
  }

  async close(): Promise<void> {
    await this.workers?.close();
    await this.client.connection.close();
  }
}
