/**
 * Where a process's logs go: pretty on a terminal, with the standalone's whole JSON log kept in its
 * data folder, and JSON on stdout when asked (`--log-format json`, CAPYCTL_LOG_FORMAT=json) or when
 * nobody watches (a pipe, a service manager). The flag is taken by every `capyctl start` command.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLogger, logDestination } from '../logging/logger.js';
import { capyctl } from './support/capyctl.js';
import { until } from './support/until.js';

describe('the logs’ destination', () => {
  const jsonFile = '/data/capyctl.log';

  it('is pretty on a terminal with the whole JSON log kept in the file, and JSON elsewhere', () => {
    expect(logDestination({ jsonFile }, true, {})).toEqual({ stdout: 'pretty', jsonFile });
    expect(logDestination({}, true, {})).toEqual({ stdout: 'pretty' });
    expect(logDestination({ jsonFile }, false, {})).toEqual({ stdout: 'json' });
  });

  it('is JSON on stdout when asked, by the flag or the variable, and the flag wins', () => {
    expect(logDestination({ jsonFile, format: 'json' }, true, {})).toEqual({ stdout: 'json' });
    expect(logDestination({ jsonFile }, true, { CAPYCTL_LOG_FORMAT: 'json' })).toEqual({ stdout: 'json' });
    expect(logDestination({ jsonFile, format: 'pretty' }, false, { CAPYCTL_LOG_FORMAT: 'json' })).toEqual({
      stdout: 'pretty',
      jsonFile,
    });
    // A value that is not a format leaves the choice to the terminal.
    expect(logDestination({ jsonFile }, false, { CAPYCTL_LOG_FORMAT: 'yaml' })).toEqual({ stdout: 'json' });
  });

  it('keeps each line whole, as JSON, in the file while the terminal shows it pretty', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'capyctl-log-')), '.data', 'capyctl.log');
    const logger = createLogger('capyctl-standalone', { format: 'pretty', jsonFile: file });
    logger.info({ managementUrl: 'http://127.0.0.1:7443' }, 'standalone ready');
    const line = await until('the line in the JSON log', () => {
      try {
        return readFileSync(file, 'utf8')
          .split('\n')
          .find((l) => l.includes('standalone ready'));
      } catch {
        return undefined;
      }
    });
    expect(JSON.parse(line)).toMatchObject({
      level: 30,
      name: 'capyctl-standalone',
      msg: 'standalone ready',
      managementUrl: 'http://127.0.0.1:7443',
    });
  });
});

describe('--log-format', () => {
  it('is taken by every start command, and a value other than json or pretty is refused by name', async () => {
    for (const kind of ['standalone', 'server', 'host']) {
      // An unknown key stops the start after the flags were read: the refusal is the document's, not the flag's.
      const read = await capyctl(['start', kind, '--log-format', 'json', '--set', 'nope=1']);
      expect(read, kind).toMatchObject({
        code: 2,
        stderr: expect.stringContaining('nope: unknown key (from --set nope=1)'),
      });
      expect(await capyctl(['start', kind, '--log-format', 'yaml']), kind).toEqual({
        code: 2,
        stdout: '',
        stderr: 'capyctl: --log-format is json or pretty, not "yaml"\n',
      });
    }
  });
});
