/**
 * A whole answer made from the engine's stream of it. The gateway asks the engine to stream every
 * answer, so it sees the first output of a non-streamed one too (a hang-up after it parks the model
 * rather than stopping it); for the client that did not ask for a stream, the chunks are put
 * together into the JSON the engine would have answered: the envelope of the first chunk (its
 * object without `.chunk`), each choice's text or message with the deltas joined in order, its
 * logprobs joined, its finish reason and other fields as the last chunk gave them, and the usage
 * (asked for with `stream_options.include_usage`).
 */

import { isEmptyChunk } from './eventScanner.js';

type Json = Record<string, unknown>;

/** What the client is answered: the engine's status and JSON body. */
export interface AssembledAnswer {
  status: number;
  body: Json;
}

// An event ends at a blank line, whichever line ending the engine writes.
const EVENT_END = /\r\n\r\n|\n\n|\r\r/;
const LINE_END = /\r\n|\n|\r/;

/** An event's data: its `data:` lines joined. */
function dataOf(event: string): string {
  let data = '';
  for (const line of event.split(LINE_END)) {
    if (line.startsWith('data:')) data += (data === '' ? '' : '\n') + line.slice(line[5] === ' ' ? 6 : 5);
  }
  return data;
}

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
      else if (key === 'logprobs' && isObject(value) && isObject(this.fields.logprobs))
        join(this.fields.logprobs, value, noText);
      else if (key === 'text' && typeof value === 'string')
        this.fields.text = ((this.fields.text as string | undefined) ?? '') + value;
      else if (value !== null || !(key in this.fields)) this.fields[key] = value;
    }
  }

  private addDelta(delta: Json): void {
    this.message ??= { role: 'assistant', content: null };
    const { tool_calls: calls, ...rest } = delta;
    if (Array.isArray(calls)) joinToolCalls(this.toolCalls, calls);
    join(this.message, rest, deltaText);
  }

  /** A token's text: a chat delta's content, or a completion's text. */
  appendText(field: TextField, text: string): void {
    if (field === 'text') this.fields.text = ((this.fields.text as string | undefined) ?? '') + text;
    else this.message!.content = ((this.message!.content as string | null) ?? '') + text;
  }

  whole(): Json {
    if (!this.message) return { index: this.index, ...this.fields };
    return {
      index: this.index,
      message: { ...this.message, tool_calls: this.toolCalls.filter(Boolean) },
      ...this.fields,
    };
  }
}

type TextField = 'content' | 'text';

/** Where the first unescaped `"` is in `s` from `from`; -1 when there is none. */
function closingQuote(s: string, from: number): number {
  for (let at = s.indexOf('"', from); at >= 0; at = s.indexOf('"', at + 1)) {
    let backslashes = 0;
    while (s[at - 1 - backslashes] === '\\') backslashes++;
    if (backslashes % 2 === 0) return at;
  }
  return -1;
}

const allNull = (o: Json, but: readonly string[]) =>
  Object.keys(o).every((key) => but.includes(key) || o[key] === null);

/**
 * The one field a token's chunk adds to the answer, when it adds nothing else: a single choice whose
 * text (a delta's content, or a completion's text) is a string and whose every other field is null.
 */
function tokenTextOf(chunk: Json): { index: number; field: TextField; text: string } | undefined {
  const { choices } = chunk;
  if (
    (chunk.usage !== undefined && chunk.usage !== null) ||
    !Array.isArray(choices) ||
    choices.length !== 1 ||
    !isObject(choices[0])
  )
    return undefined;
  const choice = choices[0];
  const index = typeof choice.index === 'number' ? choice.index : 0;
  if (isObject(choice.delta)) {
    const { content } = choice.delta;
    return typeof content === 'string' && allNull(choice.delta, ['content']) && allNull(choice, ['index', 'delta'])
      ? { index, field: 'content', text: content }
      : undefined;
  }
  return typeof choice.text === 'string' && allNull(choice, ['index', 'text'])
    ? { index, field: 'text', text: choice.text }
    : undefined;
}

/**
 * A token chunk's JSON around its text. Engines write every token's chunk alike but for the text, so
 * a chunk made of the same bytes around another text adds only that text: it is read without being
 * parsed, which is most of the assembler's cost.
 */
interface TokenTemplate {
  before: string;
  after: string;
  choice: Choice;
  field: TextField;
}

export class AnswerAssembler {
  private envelope: Json | undefined;
  private readonly choices = new Map<number, Choice>();
  private usage: unknown;
  private error: AssembledAnswer | undefined;
  private template: TokenTemplate | undefined;
  /** A chunk carrying output has come: as the event scanner tells it, which is told not to look. */
  output = false;

  /** Takes whole events (the bytes up to an event's end). */
  push(events: Buffer): void {
    if (events.length === 0 || this.error) return;
    const text = events.toString('utf8');
    if (text.includes('\r')) {
      for (const event of text.split(EVENT_END)) {
        const data = dataOf(event);
        this.addData(data, 0, data.length);
      }
      return;
    }
    // Engines write `data: {…}\n\n`: the events are read in place, by native searches, which cost
    // far less than splitting them and matching lines with regular expressions.
    for (let from = 0; from < text.length;) {
      let to = text.indexOf('\n\n', from);
      if (to < 0) to = text.length;
      if (text.startsWith('data: ', from) && text.indexOf('\n', from) >= to) this.addData(text, from + 6, to);
      else {
        const data = dataOf(text.slice(from, to));
        this.addData(data, 0, data.length);
      }
      from = to + 2;
    }
  }

  /** Adds the data of one event, `text` from `from` to `to`. */
  private addData(text: string, from: number, to: number): void {
    if (from === to || this.error || this.addFromTemplate(text, from, to)) return;
    const data = text.slice(from, to);
    if (data === '[DONE]') return;
    const chunk = JSON.parse(data) as unknown;
    if (!this.output && !isEmptyChunk(chunk)) this.output = true;
    this.add(chunk);
    if (isObject(chunk) && !this.error) this.learnTemplate(data, chunk);
  }

  /** Adds a chunk's text when the chunk is the template's bytes around it. */
  private addFromTemplate(text: string, from: number, to: number): boolean {
    const t = this.template;
    if (
      !t ||
      to - from < t.before.length + t.after.length ||
      !text.startsWith(t.before, from) ||
      !text.endsWith(t.after, to)
    )
      return false;
    const [start, end] = [from + t.before.length, to - t.after.length];
    if (closingQuote(text, start) !== end) return false;
    const raw = text.slice(start, end);
    if (raw !== '') this.output = true;
    t.choice.appendText(t.field, raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw);
    return true;
  }

  private learnTemplate(data: string, chunk: Json): void {
    const token = tokenTextOf(chunk);
    if (!token) return;
    const key = `"${token.field}":`;
    const keyAt = data.indexOf(key);
    if (keyAt < 0 || data.indexOf(key, keyAt + 1) >= 0) return;
    let start = keyAt + key.length;
    while (data[start] === ' ') start++;
    if (data[start] !== '"') return;
    const end = closingQuote(data, start + 1);
    if (end < 0 || JSON.parse(data.slice(start, end + 1)) !== token.text) return;
    this.template = {
      before: data.slice(0, start + 1),
      after: data.slice(end),
      choice: this.choices.get(token.index)!,
      field: token.field,
    };
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
