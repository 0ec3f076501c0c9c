/** `GET /v1/models`: every deployment of the routing table, by the name requests route by, in OpenAI's list shape. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { decodeTime } from 'ulid';
import { z } from 'zod';
import type { RoutingTable } from '../routingTable.js';

const modelList = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({ id: z.string(), object: z.literal('model'), created: z.number().int(), owned_by: z.string() }),
  ),
});

export function modelRoutes(deps: { table: RoutingTable }) {
  return async (app: FastifyInstance) => {
    app
      .withTypeProvider<ZodTypeProvider>()
      .get(
        '/v1/models',
        { schema: { response: { 200: modelList } } },
        async (): Promise<z.infer<typeof modelList>> => ({
          object: 'list',
          // A deployment ID is a ULID: it carries the time the deployment was created.
          data: deps.table.list().map((d) => ({
            id: d.name,
            object: 'model',
            created: Math.floor(decodeTime(d.id) / 1000),
            owned_by: 'capyctl',
          })),
        }),
      );
  };
}
