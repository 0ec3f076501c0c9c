/** Every route a Fastify app serves, read from its own route tree: a sweep covers a new route unasked. */
import type { FastifyInstance } from 'fastify';

export interface RouteRef {
  method: string;
  url: string;
}

/** Routes as `printRoutes` draws them (one line a node, four columns a level), HEAD left out. */
export function routesOf(app: FastifyInstance): RouteRef[] {
  const routes: RouteRef[] = [];
  const prefixes: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const node = /^([│ ]*)[├└]── (\S+) \(([^)]+)\)$/.exec(line);
    if (!node) continue;
    const depth = node[1]!.length / 4;
    prefixes.length = depth;
    const url = (prefixes[depth - 1] ?? '') + node[2]!;
    prefixes[depth] = url;
    for (const method of node[3]!.split(', ')) if (method !== 'HEAD') routes.push({ method, url });
  }
  return routes;
}
