/**
 * A whole answer made from the engine's stream of it. The gateway asks the engine to stream every
 * answer, so it sees the first output of a non-streamed one too (a hang-up after it parks the model
 * rather than stopping it); for the client that did not ask for a stream, the chunks are put
 * together into the JSON the engine would have answered: the envelope of the first chunk (its
 * object without `.chunk`), each choice's text or message with the deltas joined in order, its
 * logprobs joined, its finish reason and other fields as the last chunk gave them, and the usage
 * (asked for with `stream_options.include_usage`).
 */

type Json = Record<string, unknown>;

/** What the client is answered: the engine's status and JSON body. */
export interface AssembledAnswer {
  status: number;
  body: Json;
}

// An event ends at a blank line, whichever line ending the engine writes.
const EVENT_END = /\r\n\r\n|\n\n|\r\r/;
const LINE_END = /\r\n|\n|\r/;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What an engine streams when it fails mid-way: `{"error": {…}}`, or vLLM ≤ 0.10.0's `{"object": "error", …}`. */
function errorStatus(event: Json): number | undefined {
  const detail = isObject(event.error) ? event.error : event.object === 'error' ? event : undefined;
  if (!detail) return undefined;
  const code = detail.code;
  return typeof code === 'number' && Number.isInteger(code) && code >= 400 && code <= 599 ? code : 500;
}

/**
 * Joins `more` into `into`: the strings of `text` fields append (a delta's content, a tool call's
 * arguments), arrays concatenate (logprobs), objects join field by field, anything else replaces; a
 * null does not replace a value. Both are parsed chunks, the assembler's own to change.
 */
function join(into: Json, more: Json, text: (key: string) => boolean): void {
  for (const key in more) {
    const value = more[key];
    const held = into[key];
    if (value === null || value === undefined) {
      if (!(key in into)) into[key] = value;
    } else if (typeof value === 'string' && typeof held === 'string' && text(key)) into[key] = held + value;
    else if (Array.isArray(value) && Array.isArray(held)) held.push(...value);
    else if (isObject(value) && isObject(held)) join(held, value, text);
    else into[key] = value;
  }
}

const noText = () => false;
/** A delta's strings are text to append, but for the role it names. */
const deltaText = (key: string) => key !== 'role';
const argumentsText = (key: string) => key === 'arguments';

/** A delta's tool calls, each joined into the one of the same index. */
function joinToolCalls(held: Json[], calls: unknown[]): void {
  for (const call of calls) {
    if (!isObject(call)) continue;
    const { index, ...rest } = call;
    const at = typeof index === 'number' ? index : held.length;
    held[at] ??= {};
    join(held[at]!, rest, argumentsText);
  }
}

class Choice {
  readonly fields: Json = {};
  private message: Json | undefined;
  private toolCalls: Json[] = [];

  constructor(readonly index: number) {}

  add(chunk: Json): void {
    for (const key in chunk) {
      const value = chunk[key];
      if (key === 'index') continue;
      if (key === 'delta') this.addDelta(isObject(value) ? value : {});
      else if (key === 'logprobs' && isObject(value) && isObject(this.fields.logprobs)) join(this.fields.logprobs, value, noText);
      else if (key === 'text' && typeof value === 'string') this.fields.text = ((this.fields.text as string | undefined) ?? '') + value;
      else if (value !== null || !(key in this.fields)) this.fields[key] = value;
    }
  }

  private addDelta(delta: Json): void {
    this.message ??= { role: 'assistant', content: null };
    const { tool_calls: calls, ...rest } = delta;
    if (Array.isArray(calls)) joinToolCalls(this.toolCalls, calls);
    join(this.message, rest, deltaText);
  }

  whole(): Json {
    if (!this.message) return { index: this.index, ...this.fields };
    return { index: this.index, message: { ...this.message, tool_calls: this.toolCalls.filter(Boolean) }, ...this.fields };
  }
}

export class AnswerAssembler {
  private envelope: Json | undefined;
  private readonly choices = new Map<number, Choice>();
  private usage: unknown;
  private error: AssembledAnswer | undefined;

  /** Takes whole events (the bytes up to an event's end). */
  push(events: Buffer): void {
    if (events.length === 0 || this.error) return;
    for (const event of events.toString('utf8').split(EVENT_END)) {
      let data = '';
      for (const line of event.split(LINE_END)) {
        if (line.startsWith('data:')) data += (data === '' ? '' : '\n') + line.slice(line[5] === ' ' ? 6 : 5);
      }
      if (data === '' || data === '[DONE]') continue;
      this.add(JSON.parse(data) as unknown);
    }
  }

  private add(chunk: unknown): void {
    if (!isObject(chunk)) return;
    const status = errorStatus(chunk);
    if (status !== undefined) {
      this.error = { status, body: chunk };
      return;
    }
    const { choices, usage, ...envelope } = chunk;
    if (!this.envelope) this.envelope = envelope;
    else join(this.envelope, envelope, noText);
    if (usage !== undefined && usage !== null) this.usage = usage;
    if (!Array.isArray(choices)) return;
    for (const c of choices) {
      if (!isObject(c)) continue;
      const index = typeof c.index === 'number' ? c.index : 0;
      let choice = this.choices.get(index);
      if (!choice) this.choices.set(index, (choice = new Choice(index)));
      choice.add(c);
    }
  }

  /** The whole answer, once the stream has ended. */
  whole(): AssembledAnswer {
    if (this.error) return this.error;
    const body: Json = { ...this.envelope };
    if (typeof body.object === 'string') body.object = body.object.replace(/\.chunk$/, '');
    body.choices = [...this.choices.values()].sort((x, y) => x.index - y.index).map((c) => c.whole());
    if (this.usage !== undefined) body.usage = this.usage;
    return { status: 200, body };
  }
}
