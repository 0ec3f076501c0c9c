/**
 * The API's messages name a deployment by its ID (`deployment 01J… needs GPU memory held by …`),
 * which an operator who typed its name may never have seen: a command on one deployment tells each
 * refusal with the deployment as its operator named it.
 */
import { ApiRefusal } from './failure.js';
import type { ManagementClient } from './managementClient.js';

/** A deployment ID as the API writes one: a ULID. */
const DEPLOYMENT_ID = /[0-9A-HJKMNP-TV-Z]{26}/;

export interface NamedAsTyped {
  /** The client, its refusals said with `ref` for the deployment's ID. */
  api: ManagementClient;
  /** The same for a refusal the command made of what it read (a followed switch's error). */
  asTyped(e: unknown): Promise<unknown>;
}

export function namedAsTyped(api: ManagementClient, ref: string): NamedAsTyped {
  // Asked once, and only when a refusal names an ID: most refusals name none, and most commands succeed.
  let id: Promise<string | undefined> | undefined;
  const idOf = () =>
    (id ??= api.call<{ deployment_id: string }>('GET', `/deployments/${encodeURIComponent(ref)}`).then(
      (d) => d.deployment_id,
      () => undefined,
    ));
  const asTyped = async (e: unknown) => {
    if (!(e instanceof ApiRefusal) || !DEPLOYMENT_ID.test(e.apiMessage)) return e;
    const known = await idOf();
    return known === undefined || known === ref ? e : e.saying(e.apiMessage.replaceAll(known, ref));
  };
  return {
    asTyped,
    api: {
      url: api.url,
      call: <T>(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown) =>
        api.call<T>(method, path, body).catch(async (e: unknown) => {
          throw await asTyped(e);
        }),
    },
  };
}
