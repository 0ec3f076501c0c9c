/**
 * The event scanner on its own: which bytes may pass, when the output begins, and when a piece is
 * too large, however the stream is cut into chunks (before the first output every event is read;
 * after it only event ends are searched for, which must come to the same).
 */
import { describe, expect, it } from 'vitest';
import { MAX_STREAM_PIECE_BYTES } from '../domain/limits.js';
import { EventScanner, type Scan } from '../gateway/inference/eventScanner.js';

const event = (delta: Record<string, unknown>, end = '\n\n') =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: null }] })}${end}`;
const role = event({ role: 'assistant', content: '' });
const words = ['Capybaras', ' are', ' the', ' largest', ' rodents', '.'].map((content) => event({ content }));

/** Feeds `text` in chunks of `size` bytes; what passed, and every scan. */
function feed(text: string, size: number): { passed: string; scans: Scan[]; rest: string } {
  const scanner = new EventScanner();
  const bytes = Buffer.from(text);
  const scans: Scan[] = [];
  for (let at = 0; at < bytes.length; at += size) scans.push(scanner.push(bytes.subarray(at, at + size)));
  return { passed: scans.map((s) => s.whole.toString()).join(''), scans, rest: scanner.rest().toString() };
}

describe('the event scanner', () => {
  const stream = role + words.join('') + 'data: [DONE]\n\n';

  it.each([1, 7, 64, 4096])('passes whole events only, every byte in order, in chunks of %i bytes', (size) => {
    const { passed, scans, rest } = feed(stream + 'data: {"partial', size);
    expect(passed).toBe(stream);
    expect(rest).toBe('data: {"partial');
    // Each chunk lets through only events that ended.
    for (const scan of scans) expect(scan.whole.toString()).toMatch(/^(|[^]*\n\n)$/);
  });

  it('the role-only opening is not output; the first word is', () => {
    const scanner = new EventScanner();
    expect(scanner.push(Buffer.from(role)).output).toBe(false);
    expect(scanner.push(Buffer.from(': keep-alive\n\n')).output).toBe(false);
    expect(scanner.push(Buffer.from(words[0]!)).output).toBe(true);
  });

  it('finds event ends written with CRLF or CR, before and after the output began', () => {
    for (const end of ['\r\n\r\n', '\r\r']) {
      const text =
        event({ role: 'assistant' }, end) + event({ content: 'Capybaras' }, end) + event({ content: ' swim' }, end);
      const { passed, scans } = feed(text + 'data: {"partial', 9);
      expect(passed).toBe(text);
      expect(scans.at(-1)!.output).toBe(true);
    }
  });

  it('a piece larger than the bound is found whole or arriving, after the output began, and none of it passes', () => {
    const big = `data: ${'x'.repeat(MAX_STREAM_PIECE_BYTES + 10)}\n\n`;
    for (const size of [1024, 16 * 1024, 64 * 1024, 128 * 1024]) {
      const { passed, scans } = feed(role + words[0]! + big + words[1]!, size);
      const cut = scans.findIndex((s) => s.oversized);
      expect(cut).toBeGreaterThanOrEqual(0);
      expect(
        scans
          .slice(0, cut + 1)
          .map((s) => s.whole.toString())
          .join(''),
      ).toBe(role + words[0]!);
      expect(passed.includes('xxxx')).toBe(false);
    }
  });

  it('a piece of exactly the bound is not too large', () => {
    const line = `data: ${'x'.repeat(MAX_STREAM_PIECE_BYTES - 'data: '.length)}`;
    const { scans, passed } = feed(role + words[0]! + line + '\n\n', 32 * 1024);
    expect(scans.some((s) => s.oversized)).toBe(false);
    expect(passed).toBe(role + words[0]! + line + '\n\n');
  });
});
