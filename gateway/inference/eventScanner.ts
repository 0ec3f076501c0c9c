/**
 * Reads a streamed answer's server-sent events as their bytes pass through the gateway, without
 * changing or re-encoding a byte: only to tell when the first output comes and when a single event
 * is larger than the spec allows.
 */
import { MAX_STREAM_PIECE_BYTES } from '../../domain/limits.js';

/** What one chunk of the stream showed. */
export interface Scan {
  /** The bytes of the events that ended, up to the first one too large: what can go to the client now. */
  whole: Buffer;
  /** An event carrying output has ended, in this chunk or earlier. */
  output: boolean;
  /** An event, ended or still arriving, is larger than MAX_STREAM_PIECE_BYTES: the stream must end. */
  oversized: boolean;
}

// An event ends at a blank line, whichever line ending the engine writes.
const EVENT_END = /\r\n\r\n|\n\n|\r\r/g;
const EVENT_ENDS = ['\r\n\r\n', '\n\n', '\r\r'].map((end) => Buffer.from(end, 'latin1'));

/** Where the bytes after the last event's end begin: 0 when no event ended in them. */
function lastEventEnd(bytes: Buffer): number {
  // Engines write whole events, so the bytes mostly end with an event's end: then nothing is searched.
  for (const end of EVENT_ENDS) if (endsWith(bytes, end)) return bytes.length;
  let start = 0;
  for (const end of EVENT_ENDS) {
    const at = bytes.lastIndexOf(end);
    if (at >= 0) start = Math.max(start, at + end.length);
  }
  return start;
}

function endsWith(bytes: Buffer, end: Buffer): boolean {
  const from = bytes.length - end.length;
  if (from < 0) return false;
  for (let i = 0; i < end.length; i++) if (bytes[from + i] !== end[i]) return false;
  return true;
}

/**
 * Holds an event's bytes until it ends, so the client gets whole events only: none of a piece too
 * large, and every event before it.
 */
export class EventScanner {
  /** The bytes of the event still arriving. */
  private partial: Buffer = Buffer.alloc(0);
  private sawOutput: boolean;

  /**
   * `findOutput: false` when what reads the events parses them and says when the output comes (the
   * assembler of a whole answer): then only event ends and sizes are looked for, and `output` says nothing.
   */
  constructor({ findOutput = true }: { findOutput?: boolean } = {}) {
    this.sawOutput = !findOutput;
  }

  push(chunk: Buffer): Scan {
    const bytes = this.partial.length === 0 ? chunk : Buffer.concat([this.partial, chunk]);
    // Once the output began, an event's content no longer matters, only its size; and in bytes no
    // longer than the largest piece, no event can be too large. Then only the last event's end is
    // needed, which a native search finds without reading the events one by one.
    if (this.sawOutput && bytes.length <= MAX_STREAM_PIECE_BYTES) {
      const start = lastEventEnd(bytes);
      this.partial = bytes.subarray(start);
      return { whole: bytes.subarray(0, start), output: true, oversized: false };
    }
    // latin1 keeps one character per byte, so string indexes are byte offsets.
    const text = bytes.toString('latin1');
    let start = 0;
    for (const end of text.matchAll(EVENT_END)) {
      if (end.index - start > MAX_STREAM_PIECE_BYTES)
        return { whole: bytes.subarray(0, start), output: this.sawOutput, oversized: true };
      if (!this.sawOutput && isOutput(bytes.subarray(start, end.index).toString('utf8'))) this.sawOutput = true;
      start = end.index + end[0].length;
    }
    this.partial = bytes.subarray(start);
    return {
      whole: bytes.subarray(0, start),
      output: this.sawOutput,
      oversized: this.partial.length > MAX_STREAM_PIECE_BYTES,
    };
  }

  /** What came after the last event's end, once the stream has ended. */
  rest(): Buffer {
    return this.partial;
  }
}
/**
 * Whether an event is part of the answer. The opening chunk that only names the assistant role is
 * not (TensorFold sends it before it reads the prompt), nor is an empty delta, a comment or `[DONE]`;
 * anything else is, including what cannot be read, since the engine said something.
 */
function isOutput(event: string): boolean {
  const data = event
    .split(/\r\n|\n|\r/)
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice('data:'.length).replace(/^ /, ''))
    .join('\n');
  if (data === '' || data === '[DONE]') return false;
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    return true;
  }
  return !isEmptyChunk(parsed);
}

type Choice = { finish_reason?: unknown; text?: unknown; delta?: Record<string, unknown> };

/** A chunk whose every choice has no text, no finish reason and a delta holding only the role or empty fields. */
export function isEmptyChunk(chunk: unknown): boolean {
  const choices = (chunk as { choices?: unknown } | null)?.choices;
  if (!Array.isArray(choices) || choices.length === 0) return false;
  return (choices as Choice[]).every(
    (c) =>
      (c.finish_reason === null || c.finish_reason === undefined) &&
      (c.text === undefined || c.text === '' || c.text === null) &&
      Object.entries(c.delta ?? {}).every(([field, value]) => field === 'role' || value === '' || value === null),
  );
}
