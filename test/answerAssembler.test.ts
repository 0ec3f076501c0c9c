/**
 * The whole answer the gateway makes from an engine's stream, on its own: what the engine would have
 * answered without a stream, however its chunks are written (tokens whose text needs escapes, which
 * the template of a token's chunk must read as a parse would; other line endings; tool calls and
 * logprobs in pieces; an error mid-way).
 */
import { describe, expect, it } from 'vitest';
import { AnswerAssembler } from '../gateway/inference/answerAssembler.js';

const envelope = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1790000000, model: 'chat-a' };
const chunk = (choice: Record<string, unknown>, more: Record<string, unknown> = {}) => ({
  ...envelope,
  choices: [{ index: 0, logprobs: null, finish_reason: null, ...choice }],
  ...more,
});
const usage = { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 };

function assemble(chunks: unknown[], end = '\n\n'): ReturnType<AnswerAssembler['whole']> {
  const assembler = new AnswerAssembler();
  for (const c of chunks) assembler.push(Buffer.from(`data: ${JSON.stringify(c)}${end}`));
  assembler.push(Buffer.from(`data: [DONE]${end}`));
  return assembler.whole();
}

describe('the answer assembler', () => {
  const tokens = ['Say "hi"', ' \\ back', '\nnew line', ' ünïcödé ✓', ''];
  const stream = [
    chunk({ delta: { role: 'assistant', content: '' } }),
    ...tokens.map((content) => chunk({ delta: { content } })),
    chunk({ delta: { content: '.' }, finish_reason: 'stop', stop_reason: null }),
    { ...envelope, choices: [], usage },
  ];
  const whole = {
    status: 200,
    body: {
      ...envelope,
      object: 'chat.completion',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: `${tokens.join('')}.`, tool_calls: [] },
          logprobs: null,
          finish_reason: 'stop',
          stop_reason: null,
        },
      ],
      usage,
    },
  };

  it.each([
    ['\\n\\n', '\n\n'],
    ['\\r\\n\\r\\n', '\r\n\r\n'],
  ])('joins a chat stream into the whole answer, events ending %s', (_, end) => {
    expect(assemble(stream, end)).toEqual(whole);
  });

  it('joins a completion’s text, its logprobs and a tool call’s arguments', () => {
    const text = (t: string, at: number) => ({
      ...envelope,
      object: 'text_completion',
      choices: [{ index: 0, text: t, logprobs: { tokens: [t], text_offset: [at] }, finish_reason: null }],
    });
    expect(assemble([text('Capy', 0), text('baras', 4)]).body).toMatchObject({
      object: 'text_completion',
      choices: [
        {
          index: 0,
          text: 'Capybaras',
          logprobs: { tokens: ['Capy', 'baras'], text_offset: [0, 4] },
          finish_reason: null,
        },
      ],
    });
    const call = (fn: Record<string, unknown>, more: Record<string, unknown> = {}) =>
      chunk({ delta: { tool_calls: [{ index: 0, ...more, function: fn }] } });
    const tools = assemble([
      call({ name: 'weather', arguments: '' }, { id: 'call_1', type: 'function' }),
      call({ arguments: '{"city":' }),
      call({ arguments: '"Lima"}' }),
    ]);
    expect(tools.body.choices).toEqual([
      {
        index: 0,
        message: {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Lima"}' } }],
        },
        logprobs: null,
        finish_reason: null,
      },
    ]);
  });

  it('says when the output comes: not with the role or an empty text, with the first word', () => {
    const assembler = new AnswerAssembler();
    const push = (c: unknown) => {
      assembler.push(Buffer.from(`data: ${JSON.stringify(c)}\n\n`));
      return assembler.output;
    };
    // The second empty text is read by the template of a token's chunk the first one made.
    expect([stream[0], chunk({ delta: { content: '' } }), chunk({ delta: { content: '' } })].map(push)).toEqual([
      false,
      false,
      false,
    ]);
    expect(push(stream[1])).toBe(true);
  });

  it('answers an error the engine streamed with its status and body', () => {
    const error = { error: { message: 'boom', type: 'InternalServerError', param: null, code: 503 } };
    expect(assemble([stream[0], stream[1], error])).toEqual({ status: 503, body: error });
  });
});
