/** A check of a secret a request sent (a token, a host's ingress secret) against the one expected. */
import { createHash, timingSafeEqual } from 'node:crypto';

// Both sides are hashed first so the comparison takes the same time whatever the length or
// content of the secret sent: `timingSafeEqual` needs equal lengths, and a length check would leak.
const digest = (secret: string) => createHash('sha256').update(secret).digest();

/** Whether a secret sent is `expected`, compared in constant time; nothing sent never matches. */
export function secretMatcher(expected: string): (sent: string | undefined) => boolean {
  const wanted = digest(expected);
  return (sent) => sent !== undefined && timingSafeEqual(digest(sent), wanted);
}
