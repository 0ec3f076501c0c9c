import { describe, expect, it } from 'vitest';
import { readableAge, readableBytes } from '../cli/readable.js';
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

describe('quantities as a listing shows them', () => {
  it('rounds bytes to one decimal in the largest binary unit, and keeps whole sizes whole', () => {
    expect([24684092 * 1024, 8 * 2 ** 30, 64 * 2 ** 30, 1536, 512, 0, 3 * 2 ** 40].map(readableBytes)).toEqual([
      '23.5GiB',
      '8GiB',
      '64GiB',
      '1.5KiB',
      '512B',
      '0B',
      '3TiB',
    ]);
  });

  it('says how long ago a moment was, in the largest whole unit', () => {
    const now = Date.parse('2026-12-01T12:00:00Z');
    const ago = (ms: number) => readableAge(new Date(now - ms).toISOString(), now);
    expect([0, 59_000, 60_000, 3_599_000, 3_600_000, 86_399_000, 2 * 86_400_000, -5_000].map(ago)).toEqual([
      '0s ago',
      '59s ago',
      '1m ago',
      '59m ago',
      '1h ago',
      '23h ago',
      '2d ago',
      '0s ago',
    ]);
  });
});
