import { request } from 'node:http';

/**
 * A GET that sends `name` once per value, each on its own header line (as raw pairs; fetch and
 * undici would join them into one), and its answer's status and JSON body.
 */
export function getWithRepeatedHeader(
  url: string,
  name: string,
  values: readonly string[],
): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    // The raw form sends no Host of its own.
    const headers = ['host', target.host, ...values.flatMap((value) => [name, value])];
    const req = request(target, { headers }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end();
  });
}
