/**
 * The CLI's edges, as processes, where no capyctl server is needed: its version, "did you mean",
 * bash completion, `engine list` with the connection flags, errors as JSON, and a `--server` that
 * is not capyctl (an HTML page, an engine's JSON, nothing listening) said in one line.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../processes/freePort.js';
import { capyctl } from './support/capyctl.js';

const REPO = new URL('..', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'capyctl-edges-'));
/** A command that reaches the server, with a token so that the token is not what fails. */
const listAt = (server: string, ...more: string[]) =>
  capyctl(['list', 'deployments', '--server', server, '--admin-token', 'capy_admin_x', ...more]);

describe('capyctl --version', () => {
  it("prints package.json's version and the checkout's commit, and both as JSON", async () => {
    const { version } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };
    const commit = execFileSync('git', ['-C', REPO, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
    expect(await capyctl(['--version'])).toEqual({
      code: 0,
      stdout: `capyctl ${version} (commit ${commit.slice(0, 12)})\n`,
      stderr: '',
    });
    const json = await capyctl(['--version', '--json']);
    expect(json).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(json.stdout)).toEqual({ version, commit });
  });
});

describe('a mistyped command', () => {
  it('is answered with the commands it may have meant, exit 2', async () => {
    const cases = [
      [['lst', 'deployments'], 'unknown command "lst deployments"; did you mean "capyctl list deployments"?'],
      [['deploy', 'modle', '--file', 'x.yaml'], 'unknown command "deploy modle"; did you mean "capyctl deploy model"?'],
      [['engine', 'lsit'], 'unknown command "engine lsit"; did you mean "capyctl engine list"?'],
      [['list'], 'unknown command "list"; did you mean "capyctl list deployments" or "capyctl list hosts"?'],
      // Two letters swapped are one typo: two edits otherwise, too many for a word of four.
      [['lsit'], 'unknown command "lsit"; did you mean "capyctl list deployments" or "capyctl list hosts"?'],
      // The closest (start, one edit) and those one edit further (stop, status).
      [
        ['stat', 'deployment'],
        'unknown command "stat deployment"; did you mean "capyctl start deployment" or "capyctl stop deployment" ' +
          'or "capyctl status deployment"?',
      ],
      [['frobnicate'], 'unknown command "frobnicate"; `capyctl --help` lists every command'],
    ] as const;
    const results = await Promise.all(cases.map(([args]) => capyctl(args)));
    expect(results).toEqual(cases.map(([, line]) => ({ code: 2, stdout: '', stderr: `capyctl: ${line}\n` })));
  });
});

describe('capyctl completion bash', () => {
  let script: string;
  beforeAll(async () => {
    const r = await capyctl(['completion', 'bash']);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    script = join(dir, 'capyctl.bash');
    writeFileSync(script, r.stdout);
  });

  /** What bash offers at TAB after `line` (the word being typed is its last, maybe empty). */
  const offered = (line: string) => {
    const words = line.split(' ');
    const program = [
      `source ${JSON.stringify(script)}`,
      `COMP_WORDS=(${words.map((w) => JSON.stringify(w)).join(' ')})`,
      `COMP_CWORD=${words.length - 1}`,
      '_capyctl',
      'printf "%s\\n" "${COMPREPLY[@]}"',
    ].join('\n');
    return execFileSync('bash', ['-c', program], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).sort();
  };

  it("completes the commands' words, each command's flags and the choices its usage names", () => {
    expect(offered('capyctl li')).toEqual(['list']);
    expect(offered('capyctl list ')).toEqual(['deployments', 'hosts']);
    expect(offered('capyctl st')).toEqual(['start', 'status', 'stop']);
    expect(offered('capyctl start ')).toEqual(['deployment', 'host', 'server', 'standalone']);
    expect(offered('capyctl start deployment my-model --e')).toEqual(['--evict']);
    expect(offered('capyctl settings check ')).toEqual(['deployment', 'host', 'server', 'standalone']);
    expect(offered('capyctl settings check host --f')).toEqual(['--file']);
    expect(offered('capyctl sim v')).toEqual(['vllm']);
    expect(offered('capyctl --v')).toEqual(['--version']);
  });
});

describe('capyctl engine list', () => {
  it('takes the connection flags as every other command does', async () => {
    const plain = await capyctl(['engine', 'list']);
    expect(plain.code).toBe(0);
    const connected = ['--server', '127.0.0.1:7443', '--admin-token', 'capy_admin_x', '--admin-token-file', 'f'];
    expect(await capyctl(['engine', 'list', ...connected])).toEqual(plain);
    expect(await capyctl(['engine', 'list', '--json', '--server', 'http://127.0.0.1:7443'])).toEqual(
      await capyctl(['engine', 'list', '--json']),
    );
  });
});

describe('errors under --json', () => {
  it('are one JSON document on stdout, {"error": {code, message}}, with the exit code as without', async () => {
    const usage = await capyctl(['park', 'deployment', '--json', '--admin-token', 'x']);
    expect(usage).toMatchObject({ code: 2, stderr: '' });
    expect(JSON.parse(usage.stdout)).toEqual({
      error: {
        code: 'usage',
        message: expect.stringMatching(/^usage: capyctl park deployment NAME \[--json\] /),
      },
    });

    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'name: bad-model\nengine: llama\nmodel: x\n');
    const text = await capyctl(['settings', 'check', 'deployment', '--file', bad]);
    const json = await capyctl(['settings', 'check', 'deployment', '--file', bad, '--json']);
    expect(text).toMatchObject({ code: 2, stdout: '' });
    expect(json).toMatchObject({ code: 2, stderr: '' });
    expect(JSON.parse(json.stdout)).toEqual({
      error: {
        code: 'invalid_settings',
        message: text.stderr.trimEnd(),
        problems: [expect.stringMatching(/^engine: "?llama"? is not one of vllm, sglang, tensorfold$/)],
      },
    });

    const unknown = await capyctl(['lst', 'deployments', '--json']);
    expect(unknown).toMatchObject({ code: 2, stderr: '' });
    expect(JSON.parse(unknown.stdout)).toEqual({
      error: {
        code: 'unknown_command',
        message: 'unknown command "lst deployments"; did you mean "capyctl list deployments"?',
      },
    });
  });
});

describe('a --server that is not capyctl', () => {
  let server: Server;
  let address: string;
  beforeAll(async () => {
    // A router's web page, and an engine's API (FastAPI's 404), on one port.
    server = createServer((request, reply) => {
      if (request.url?.startsWith('/engine/')) {
        reply.writeHead(404, { 'content-type': 'application/json' }).end('{"detail":"Not Found"}');
        return;
      }
      reply.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      reply.end('<!doctype html>\n<html><head><title>Router login</title></head><body>Please log in</body></html>');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
  });

  const listener =
    '--server (or CAPYCTL_SERVER) names the management listener (listen.management, default 127.0.0.1:7443)';

  it('says so in one line naming the address and what answered, exit 1', async () => {
    expect(await listAt(`http://${address}`)).toEqual({
      code: 1,
      stdout: '',
      stderr:
        `capyctl: http://${address} is not a capyctl management API: GET /management/v1/deployments was answered ` +
        `200 text/html; charset=utf-8: "<!doctype html> <html><head><title>Router login</title></head><body>Please log i…"; ${listener}\n`,
    });
    expect(await listAt(`http://${address}/engine`)).toEqual({
      code: 1,
      stdout: '',
      stderr:
        `capyctl: http://${address}/engine is not a capyctl management API: GET /engine/management/v1/deployments ` +
        `was answered 404 application/json: "{\\"detail\\":\\"Not Found\\"}"; ${listener}\n`,
    });
  });

  it('says that nothing answers where nothing listens', async () => {
    const port = await freePort();
    expect(await listAt(`127.0.0.1:${port}`)).toEqual({
      code: 1,
      stdout: '',
      stderr:
        `capyctl: the management API at http://127.0.0.1:${port} did not answer: connection refused ` +
        `(ECONNREFUSED); is the server running? ${listener}\n`,
    });
    const json = await listAt(`127.0.0.1:${port}`, '--json');
    expect(json).toMatchObject({ code: 1, stderr: '' });
    expect(JSON.parse(json.stdout)).toEqual({
      error: { code: 'unreachable', message: expect.stringMatching(/^the management API at .* did not answer/) },
    });
  });

  it('refuses an address that is no http(s) URL, exit 2', async () => {
    expect(await listAt('ftp://files.example')).toEqual({
      code: 2,
      stdout: '',
      stderr:
        'capyctl: --server "ftp://files.example" is not an http(s) address such as http://127.0.0.1:7443 or ' +
        '127.0.0.1:7443\n',
    });
  });
});
