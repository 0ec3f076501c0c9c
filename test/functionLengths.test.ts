/**
 * The bound on a function's length (scripts/functionLengths.ts, run by `npm run lint`): the closures a
 * function holds count as its own lines, a class's methods and a module's functions do not.
 */
import { describe, expect, it } from 'vitest';
import { functionLengthsOf, MAX_LINES, readFunctionLengths, tooLong } from '../scripts/functionLengths.js';

const statements = (count: number, indent = '  ') =>
  Array.from({ length: count }, (_, i) => `${indent}const v${i} = ${i};`).join('\n');

describe('the length of a function', () => {
  it('counts lines of code, not blank lines or comments, and the closures inside it', () => {
    const text = [
      'export function wiring() {',
      '  // a comment',
      '',
      '  /**',
      '   * a block comment',
      '   */',
      statements(3),
      '  const step = async () => {',
      statements(4, '    '),
      '  };',
      '  return step;',
      '}',
    ].join('\n');
    const lengths = functionLengthsOf('server/wiring.ts', text);
    expect(lengths.map(({ name, line, lines }) => ({ name, line, lines }))).toEqual([
      { name: 'wiring', line: 1, lines: 12 },
      { name: 'step', line: 10, lines: 6 },
    ]);
  });

  it('does not count a class method in another method, nor module functions in each other', () => {
    const text = [
      'export class Switch {',
      '  window() {',
      statements(3, '    '),
      '  }',
      '  drain() {',
      statements(2, '    '),
      '  }',
      '}',
      'function alone() {',
      '  return 1;',
      '}',
    ].join('\n');
    expect(functionLengthsOf('workflows/s.ts', text).map(({ name, lines }) => [name, lines])).toEqual([
      ['window', 5],
      ['drain', 4],
      ['alone', 3],
    ]);
  });

  it('names a function over the bound, longest first', () => {
    const long = `export const build = () => {\n${statements(MAX_LINES)}\n};\n`;
    const longer = `export function wire() {\n${statements(MAX_LINES + 5)}\n}\n`;
    const lengths = [...functionLengthsOf('a/long.ts', long), ...functionLengthsOf('b/longer.ts', longer)];
    expect(tooLong(lengths).map(({ file, name, lines }) => `${file} ${name} ${lines}`)).toEqual([
      `b/longer.ts wire ${MAX_LINES + 7}`,
      `a/long.ts build ${MAX_LINES + 2}`,
    ]);
  });

  it(`of every function of the product is at most ${MAX_LINES} lines`, () => {
    const over = tooLong(readFunctionLengths()).map(
      ({ file, line, name, lines }) => `${file}:${line} ${name} ${lines}`,
    );
    expect(over).toEqual([]);
  });
});
