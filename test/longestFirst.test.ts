import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ciSeconds } from './support/longestFirst.js';

describe('the order test files start in', () => {
  it('names only files that exist: a renamed one would silently start in size order again', () => {
    expect(Object.keys(ciSeconds).filter((file) => !existsSync(file))).toEqual([]);
  });
});
