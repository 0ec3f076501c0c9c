import { request } from 'node:http';

/**
 * A POST that declares a body of `declaredBytes` and sends only its first byte, and its answer's
 * status: what a listener refuses by the declared length alone (413) without waiting for the body.
 * Writing the whole oversized body races the listener's close after its answer (the writer's EPIPE).
 */
export function postDeclaringLength(
  url: string,
  headers: Record<string, string>,
  declaredBytes: number,
): Promise<{ status: number }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { ...headers, 'content-length': String(declaredBytes) } });
    req.on('response', (res) => {
      resolve({ status: res.statusCode! });
      req.destroy();
    });
    req.on('error', reject);
    req.write('{');
  });
}
