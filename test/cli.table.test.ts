import { describe, expect, it } from 'vitest';
import { table } from '../cli/table.js';

describe('the table every capyctl listing prints', () => {
  it('lays out the spec’s list: each column its widest cell and three spaces, the last not padded', () => {
    const text = table(
      ['NAME', 'STATE', 'READY', 'REVISION', 'HOSTS'],
      [
        ['my-model', 'parked', '0/1', '1', 'gpu-box'],
        ['other-model', 'ready', '1/1', '1', 'gpu-box'],
      ],
    );
    expect(text).toBe(
      [
        'NAME          STATE    READY   REVISION   HOSTS',
        'my-model      parked   0/1     1          gpu-box',
        'other-model   ready    1/1     1          gpu-box',
        '',
      ].join('\n'),
    );
  });

  it('prints the header alone when there are no rows', () => {
    expect(table(['NAME', 'STATE'], [])).toBe('NAME   STATE\n');
  });
});
