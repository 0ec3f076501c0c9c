/** The host agent's calls to the server's management listener, with its host token. */
import { request } from 'undici';
import { type EngineExitBody, type RegistrationBody, registrationReply, type SamplesBody } from '../api/hosts.js';

/** The server refused the host token, or the host (another installation schedules it): retrying will not help. */
export class RegistrationRefused extends Error {}

/** The catalogue's message of an error reply, else the reply as it came. */
function messageOf(text: string): string {
  try {
    const { message } = JSON.parse(text) as { message?: unknown };
    return typeof message === 'string' ? message : text;
  } catch {
    return text;
  }
}

export interface Registration {
  ingressSecret: string;
  /** What a scraper sends for the ingress's `GET /metrics`; absent when the server sets none. */
  metricsToken: string | undefined;
}

export class ServerClient {
  constructor(
    private readonly serverUrl: string,
    private readonly token: string,
    private readonly hostId: string,
  ) {}

  /** The reply's body, as text. */
  private async post(path: string, body: unknown): Promise<string> {
    const response = await request(new URL(path, this.serverUrl), {
      method: 'POST',
      headers: { authorization: `Bearer ${this.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      headersTimeout: 5_000,
      bodyTimeout: 5_000,
    });
    const text = await response.body.text();
    if (response.statusCode === 401)
      throw new RegistrationRefused(`the server at ${this.serverUrl} refused the host token: ${text}`);
    // Only a registration is answered 409 (host_of_another_installation): the server's one line says what to do.
    if (response.statusCode === 409) throw new RegistrationRefused(messageOf(text));
    if (response.statusCode >= 300) throw new Error(`POST ${path} answered ${response.statusCode}: ${text}`);
    return text;
  }

  /**
   * Registers the host; returns the secret the server will send with its requests to the ingress, and
   * its metrics token.
   */
  async register(body: RegistrationBody): Promise<Registration> {
    const reply = registrationReply.parse(JSON.parse(await this.post('/management/v1/hosts/register', body)));
    return { ingressSecret: reply.ingress_secret, metricsToken: reply.metrics_token };
  }

  async reportSamples(body: SamplesBody): Promise<void> {
    await this.post(`/management/v1/hosts/${encodeURIComponent(this.hostId)}/samples`, body);
  }

  async reportEngineExit(body: EngineExitBody): Promise<void> {
    await this.post(`/management/v1/hosts/${encodeURIComponent(this.hostId)}/engine-exits`, body);
  }

  /** This agent stops: the server routes nothing new here, and what runs through the ingress finishes. */
  async reportStopping(): Promise<void> {
    await this.post(`/management/v1/hosts/${encodeURIComponent(this.hostId)}/stopping`, {});
  }
}
