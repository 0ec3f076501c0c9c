/**
 * What the gateway and a host's ingress agree on: the header that carries the host's ingress
 * secret (the server gives it to the host at each registration), and the engine routes the ingress
 * forwards, those the gateway sends. An engine's control routes (vLLM's `/sleep`, SGLang's
 * `/release_memory_occupation`, …) are the host's own activities' alone.
 */

/** Not `Authorization`: that is the client's, and the gateway does not pass it on. */
export const INGRESS_SECRET_HEADER = 'capyctl-ingress-secret';

/** The engine paths the ingress forwards, all `POST`. */
export const INGRESS_PATHS: ReadonlySet<string> = new Set(['/v1/chat/completions', '/v1/completions']);
