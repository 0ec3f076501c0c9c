/**
 * The files that deploy capyctl on several machines (deploy/compose, deploy/systemd, deploy/helm),
 * checked as far as this machine allows: no container runtime and no cluster, so the Compose file
 * against what the Compose spec requires, the units with `systemd-analyze verify`, the chart with
 * `helm lint` and `helm template`; and every capyctl document they carry, with the environment
 * they give it, through the project's own `loadSettings`.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { builtinModules } from 'node:module';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SearchAttributeType } from '@temporalio/common';
import { buildSync } from 'esbuild';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import YAML from 'yaml';
import { deployTool } from '../processes/deployTool.js';
import { DYNAMIC_CONFIG_FILE, resolveTemporalCli } from '../standalone/temporalDevServer.js';
import { type DocumentKind, loadSettings } from '../settings/load.js';
import { ENV_PREFIX } from '../settings/overrides.js';
import { searchAttributes } from '../workflows/definitions.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const DEPLOY = join(REPO, 'deploy');
const scratch = mkdtempSync(join(tmpdir(), 'capyctl-deploy-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

type Env = Record<string, string>;

/** The variables capyctl's processes read by name, found in the sources that read them. */
const variablesCapyctlReads = new Set(
  ['cli', 'cli/commands', 'server', 'standalone', 'logging', 'hostAgent', 'settings', 'activities'].flatMap((dir) =>
    readdirSync(join(REPO, dir))
      .filter((f) => f.endsWith('.ts'))
      .flatMap((f) =>
        [...readFileSync(join(REPO, dir, f), 'utf8').matchAll(/\benv\.([A-Z][A-Z0-9_]+)/g)].map((m) => m[1]!),
      ),
  ),
);

/** Every variable is one capyctl reads, or a `CAPYCTL_SET__…` override (which loadSettings then checks). */
function expectKnownVariables(env: Env) {
  const unknown = Object.keys(env).filter((name) => !variablesCapyctlReads.has(name) && !name.startsWith(ENV_PREFIX));
  expect(unknown).toEqual([]);
}

const SECOND = 1_000;
/**
 * The longest a stop may take with these settings, from server.stop() and the host agent's stop():
 * the drain bound, then the worker forced at twice the grace (the server also closes two listeners,
 * a second each); the host then stops its engines, each with engine_stop_grace.
 */
function longestStopMs(kind: 'server' | 'host', text: string, env: Env): number {
  if (kind === 'server') return 3 * loadSettings('server', { text, env }).switching.drain_timeout + 2 * SECOND;
  const host = loadSettings('host', { text, env });
  return 3 * host.shutdown_grace + host.engine_stop_grace;
}

/**
 * The search attributes a script or command line creates, one per command (the CLI given several
 * `--name` creates only the first).
 */
function createdSearchAttributes(text: string): Record<string, string> {
  const commands = [...text.matchAll(/search-attribute create[^\n&]*/g)].map((m) => m[0]);
  for (const command of commands) expect(command.match(/--name /g), command).toHaveLength(1);
  return Object.fromEntries(
    commands.map((command) => [/--name (\w+)/.exec(command)![1], /--type (\w+)/.exec(command)![1]]),
  );
}

/** The CLI's type name of each search attribute every switch carries. */
const expectedSearchAttributes = Object.fromEntries(
  Object.values(searchAttributes).map((key) => [
    key.name,
    { [SearchAttributeType.KEYWORD]: 'Keyword', [SearchAttributeType.KEYWORD_LIST]: 'KeywordList' }[key.type as string],
  ]),
);

it('knows the CLI type name of every search attribute a switch carries', () => {
  expect(Object.keys(expectedSearchAttributes)).toHaveLength(Object.keys(searchAttributes).length);
  expect(Object.values(expectedSearchAttributes)).not.toContain(undefined);
});

describe('deploy/compose', () => {
  const dir = join(DEPLOY, 'compose');
  const given: Env = { CAPYCTL_ADMIN_TOKEN: 'admin-secret', CAPYCTL_HOST_TOKEN: 'capy_host_test' };
  /** Compose's interpolation: ${X}, ${X:-default}, ${X:?error}, $$. */
  const interpolate = (text: string, env: Env) =>
    text.replace(
      /\$\$|\$\{(\w+)(?:(:-|:\?)([^}]*))?\}/g,
      (whole, name: string | undefined, op: string | undefined, arg: string | undefined) => {
        if (whole === '$$') return '$';
        const value = env[name!];
        if (value) return value;
        if (op === ':?') throw new Error(`${name}: ${arg}`);
        return op === ':-' ? arg! : '';
      },
    );
  const read = (env: Env) =>
    YAML.parse(interpolate(readFileSync(join(dir, 'compose.yaml'), 'utf8'), env), { merge: true });
  const compose = read(given);
  const services: Record<string, any> = compose.services;

  it('refuses to start without an admin token, and says where to put it', () => {
    expect(() => read({})).toThrow(/CAPYCTL_ADMIN_TOKEN: put CAPYCTL_ADMIN_TOKEN in deploy\/compose\/.env/);
  });

  it('has the official Temporal server, admin-tools and UI images, and two Postgres', () => {
    const images = Object.values(services).map((s) => s.image);
    expect(images).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^temporalio\/server:1\./),
        expect.stringMatching(/^temporalio\/admin-tools:1\./),
        expect.stringMatching(/^temporalio\/ui:2\./),
      ]),
    );
    expect(images.filter((i) => /^postgres:\d+$/.test(i))).toHaveLength(2);
  });

  it('holds what the Compose spec requires of services, health checks, volumes and dependencies', () => {
    for (const [name, service] of Object.entries(services)) {
      expect(service.image ?? service.build, `${name} has an image or a build`).toBeDefined();
      if (service.healthcheck) {
        expect(service.healthcheck.test[0], `${name}'s health check`).toMatch(/^(CMD|CMD-SHELL)$/);
        expect(service.healthcheck.test.length).toBeGreaterThan(1);
      }
      for (const volume of service.volumes ?? []) {
        const [source] = String(volume).split(':');
        if (source!.startsWith('.')) expect(existsSync(resolve(dir, source!)), `${name} mounts ${source}`).toBe(true);
        else expect(Object.keys(compose.volumes), `${name}'s volume ${source} is declared`).toContain(source);
      }
      for (const [on, { condition }] of Object.entries<{ condition: string }>(service.depends_on ?? {})) {
        expect(Object.keys(services), `${name} depends on ${on}`).toContain(on);
        expect(['service_started', 'service_healthy', 'service_completed_successfully']).toContain(condition);
        if (condition === 'service_healthy')
          expect(services[on].healthcheck, `${on} has the health check ${name} waits for`).toBeDefined();
        if (condition === 'service_completed_successfully')
          expect(services[on].restart, `${on} runs once`).toBeUndefined();
      }
    }
    const used = Object.values(services).flatMap((s) =>
      (s.volumes ?? []).map((v: string) => v.split(':')[0]).filter((v: string) => !v.startsWith('.')),
    );
    expect(Object.keys(compose.volumes).sort()).toEqual([...new Set(used)].sort());
    expect(services['capyctl-server'].build).toEqual({ context: '../..', dockerfile: 'deploy/Dockerfile' });
  });

  it('runs capyctl start server and start host on documents that loadSettings takes, with the environment the file gives them', () => {
    for (const [name, kind] of [
      ['capyctl-server', 'server'],
      ['capyctl-host', 'host'],
    ] as const) {
      const service = services[name];
      expect(service.command.slice(0, 3)).toEqual(['start', kind, '--file']);
      const mount = service.volumes.find((v: string) => v.split(':')[1] === service.command[3]);
      const text = readFileSync(resolve(dir, mount.split(':')[0]), 'utf8');
      const env: Env = service.environment;
      expectKnownVariables(env);
      loadSettings(kind, { text, env });
      // Compose's own default stop (10 s) would kill a draining capyctl.
      const [, minutes] = /^(\d+)m$/.exec(service.stop_grace_period)!;
      expect(Number(minutes) * 60 * SECOND).toBeGreaterThan(longestStopMs(kind, text, env));
    }
    const host = loadSettings('host', {
      text: readFileSync(join(dir, 'host.yaml'), 'utf8'),
      env: services['capyctl-host'].environment,
    });
    expect(host.server).toEqual({ url: 'http://capyctl-server:7443', token: 'capy_host_test' });
    expect(host.ingress.url).toBe('http://capyctl-host:7080');
    const server = loadSettings('server', {
      text: readFileSync(join(dir, 'server.yaml'), 'utf8'),
      env: services['capyctl-server'].environment,
    });
    expect(server.temporal.address).toBe('temporal:7233');
    expect(services['capyctl-server'].environment.DATABASE_URL).toMatch(/@postgres:5432\//);
  });

  it('sets up Temporal: the schema before the server, then the namespace and the search attributes every switch carries', () => {
    const schema = readFileSync(join(dir, 'temporal-schema.sh'), 'utf8');
    for (const variable of [
      'DB',
      'POSTGRES_SEEDS',
      'DB_PORT',
      'POSTGRES_USER',
      'POSTGRES_PWD',
      'DBNAME',
      'VISIBILITY_DBNAME',
    ]) {
      expect(schema).toContain(`$${variable}`);
      expect(services['temporal-schema'].environment).toHaveProperty(variable);
      expect(services.temporal.environment).toHaveProperty(variable);
    }
    expect(createdSearchAttributes(readFileSync(join(dir, 'temporal-namespace.sh'), 'utf8'))).toEqual(
      expectedSearchAttributes,
    );
  });

  it("gives the Temporal server capyctl's dynamic configuration, the file the dev server and the real-Temporal tests read", () => {
    const path: string = services.temporal.environment.DYNAMIC_CONFIG_FILE_PATH;
    const [source, target] = (services.temporal.volumes as string[]).find((v) => v.split(':')[1] === path)!.split(':');
    expect(target).toBe(path);
    expect(join(dir, source!)).toBe(DYNAMIC_CONFIG_FILE);
    expect(YAML.parse(readFileSync(DYNAMIC_CONFIG_FILE, 'utf8'))).toEqual({
      'history.transferProcessorMaxPollRPS': [{ value: 1000 }],
    });
  });

  it('the namespace script, run twice on a real Temporal, leaves a namespace with the search attributes', async () => {
    const temporal = await resolveTemporalCli();
    const namespace = `compose-${process.pid}`;
    const env = {
      ...process.env,
      PATH: `${dirname(temporal)}:${process.env.PATH}`,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      NAMESPACE: namespace,
      RETENTION: '72h',
    };
    for (let run = 0; run < 2; run++)
      execFileSync('bash', [join(dir, 'temporal-namespace.sh')], { env, stdio: 'pipe' });
    const { customAttributes } = JSON.parse(
      execFileSync(temporal, ['operator', 'search-attribute', 'list', '-n', namespace, '-o', 'json'], {
        env,
      }).toString(),
    );
    const asListed = (type: string) => `INDEXED_VALUE_TYPE_${type.replace(/(?<=.)([A-Z])/g, '_$1').toUpperCase()}`;
    expect(customAttributes).toEqual(
      Object.fromEntries(Object.entries(expectedSearchAttributes).map(([name, type]) => [name, asListed(type!)])),
    );
  });
});

describe('deploy/Dockerfile', () => {
  it('installs from the lockfile and builds the CLI into the image, so a container starts without a build', () => {
    const dockerfile = readFileSync(join(DEPLOY, 'Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/RUN npm ci/);
    expect(dockerfile).toMatch(/RUN node bin\/capyctl\.js --help/);
    expect(dockerfile).toMatch(/ENTRYPOINT \["capyctl"\]/);
    expect(readFileSync(join(DEPLOY, 'Dockerfile.dockerignore'), 'utf8').split('\n')).toEqual(
      expect.arrayContaining(['node_modules', '.cli', '.data']),
    );
    // Pretty logs (on a terminal, as `docker run -t` gives) need pino-pretty, a dev dependency.
    expect(dockerfile).toMatch(/ENV CAPYCTL_LOG_FORMAT=json/);
  });

  it("npm ci installs no package that wants a newer Node than package.json's engines allow (npm's EBADENGINE warning)", () => {
    const dir = mkdtempSync(join(scratch, 'npm-ci-'));
    for (const file of ['package.json', 'package-lock.json']) copyFileSync(join(REPO, file), join(dir, file));
    // --dry-run reads the lockfile and checks each package's engines, and writes nothing.
    const ci = spawnSync('npm', ['ci', '--dry-run', '--ignore-scripts', '--no-audit', '--no-fund'], {
      cwd: dir,
      encoding: 'utf8',
    });
    expect(ci.status, ci.stderr).toBe(0);
    expect(ci.stderr).not.toMatch(/EBADENGINE/);
  });

  it('needs only the production dependencies it installs (npm ci --omit=dev): every package the built CLI imports is one', () => {
    const { metafile } = buildSync({
      entryPoints: [join(REPO, 'cli/main.ts')],
      outdir: join(scratch, 'cli'),
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      packages: 'external',
      metafile: true,
      write: false,
      logLevel: 'error',
    });
    const packageOf = (path: string) =>
      path
        .split('/')
        .slice(0, path.startsWith('@') ? 2 : 1)
        .join('/');
    const imported = new Set(
      Object.values(metafile.outputs).flatMap((output) =>
        output.imports
          .filter((i) => i.external && !i.path.startsWith('node:') && !builtinModules.includes(i.path))
          .map((i) => packageOf(i.path)),
      ),
    );
    expect(imported.size).toBeGreaterThan(5);
    const { dependencies } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8'));
    expect([...imported].filter((name) => !(name in dependencies))).toEqual([]);
  });
});

describe('deploy/systemd', () => {
  const dir = join(DEPLOY, 'systemd');
  const envFile = (name: string): Env =>
    Object.fromEntries(
      readFileSync(join(dir, name), 'utf8')
        .split('\n')
        .filter((l) => l.trim() && !l.startsWith('#'))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
  const directives = (unit: string) => {
    const found: Record<string, string> = {};
    for (const line of readFileSync(join(dir, unit), 'utf8').split('\n')) {
      const m = /^(\w+)=(.*)$/.exec(line);
      if (m) found[m[1]!] = m[2]!;
    }
    return found;
  };

  it('passes systemd-analyze verify with no warning (node where this machine has it)', () => {
    const units = ['capyctl-server.service', 'capyctl-host.service'];
    for (const unit of units) {
      expect(directives(unit).ExecStart).toMatch(
        /^\/usr\/bin\/node \/opt\/capyctl\/bin\/capyctl\.js start (server|host) --file \/etc\/capyctl\/(server|host)\.yaml$/,
      );
      writeFileSync(
        join(scratch, unit),
        readFileSync(join(dir, unit), 'utf8').replace('ExecStart=/usr/bin/node ', `ExecStart=${process.execPath} `),
      );
    }
    const verify = spawnSync('systemd-analyze', ['verify', '--man=no', ...units.map((u) => join(scratch, u))], {
      encoding: 'utf8',
    });
    expect(verify.stderr).toBe('');
    expect(verify.status).toBe(0);
  });

  it('verify catches a broken unit, so its silence means something', () => {
    copyFileSync(join(dir, 'capyctl-server.service'), join(scratch, 'broken.service'));
    writeFileSync(
      join(scratch, 'broken.service'),
      readFileSync(join(scratch, 'broken.service'), 'utf8').replace('KillMode=mixed', 'KillMode=mixd'),
    );
    expect(
      spawnSync('systemd-analyze', ['verify', '--man=no', join(scratch, 'broken.service')], { encoding: 'utf8' })
        .stderr,
    ).toMatch(/kill mode/);
  });

  for (const kind of ['server', 'host'] as const) {
    it(`capyctl-${kind}: restarts on failure, stops with SIGTERM to capyctl alone, and waits longer than a stop may take`, () => {
      const unit = directives(`capyctl-${kind}.service`);
      expect(unit).toMatchObject({
        Restart: 'on-failure',
        KillSignal: 'SIGTERM',
        KillMode: 'mixed',
        User: 'capyctl',
        WorkingDirectory: '/var/lib/capyctl',
        EnvironmentFile: `/etc/capyctl/${kind}.env`,
      });
      const env = envFile(`${kind}.env`);
      expectKnownVariables(env);
      if (unit.Environment) expectKnownVariables(Object.fromEntries([unit.Environment.split('=')]));
      const text = readFileSync(join(dir, `${kind}.yaml`), 'utf8');
      loadSettings(kind satisfies DocumentKind, { text, env });
      expect(Number(/^(\d+)s$/.exec(unit.TimeoutStopSec!)![1]) * SECOND).toBeGreaterThan(
        longestStopMs(kind, text, env),
      );
    });
  }

  it('the server needs no more than its environment file gives: the database and the admin token', () => {
    expect(Object.keys(envFile('server.env'))).toEqual(expect.arrayContaining(['DATABASE_URL', 'CAPYCTL_ADMIN_TOKEN']));
    expect(
      loadSettings('host', { text: readFileSync(join(dir, 'host.yaml'), 'utf8'), env: envFile('host.env') }).server
        .token,
    ).toBe('change-me-to-the-host-token');
  });
});

describe('deploy/helm', () => {
  const chart = join(DEPLOY, 'helm', 'capyctl');
  let helm: string;
  // A fresh clone builds helm from its Go module here, once (about a minute).
  beforeAll(async () => {
    helm = await deployTool('helm.sh');
  }, 300_000);
  const values = [
    '--set',
    'secrets.adminToken=admin-secret',
    '--set',
    'secrets.databaseUrl=postgres://capyctl@db:5432/capyctl',
    '--set',
    'secrets.hostTokens.gpu-a=capy_host_a',
  ];
  const METRICS_TOKEN = 'metrics-0123456789abcdef';

  /** `helm template capy` of the chart with these values and `--set`s, as parsed documents. */
  const render = (...sets: string[]): any[] =>
    YAML.parseAllDocuments(execFileSync(helm, ['template', 'capy', chart, ...values, ...sets], { encoding: 'utf8' }))
      .map((d) => d.toJS())
      .filter(Boolean);
  const sets = (...pairs: string[]) => pairs.flatMap((pair) => ['--set', pair]);
  const refused = (...sets: string[]) => spawnSync(helm, ['template', 'capy', chart, ...sets], { encoding: 'utf8' });

  /**
   * Every secret a workload's pods can read, as `<Secret>/<key>`: from its containers' environment
   * (one key, or a whole Secret through envFrom) and its volumes (a whole Secret, or the items
   * listed). A whole Secret the chart renders counts as each of its keys; one it does not, as `/*`.
   */
  function secretsReadBy(workload: any, docs: any[]): string[] {
    const rendered = new Map<string, string[]>(
      docs.filter((d) => d.kind === 'Secret').map((s) => [s.metadata.name, Object.keys(s.stringData ?? {})]),
    );
    const whole = (name: string) => (rendered.get(name) ?? ['*']).map((key) => `${name}/${key}`);
    const fromVolume = (secret: { secretName?: string; name?: string; items?: { key: string }[] }) => {
      const name = (secret.secretName ?? secret.name)!;
      return secret.items ? secret.items.map((i) => `${name}/${i.key}`) : whole(name);
    };
    const pod = workload.spec.template.spec;
    const containers = [...(pod.initContainers ?? []), ...pod.containers];
    return [
      ...containers.flatMap((c: any) => [
        ...(c.env ?? [])
          .map((e: any) => e.valueFrom?.secretKeyRef)
          .filter(Boolean)
          .map((ref: any) => `${ref.name}/${ref.key}`),
        ...(c.envFrom ?? []).filter((e: any) => e.secretRef).flatMap((e: any) => whole(e.secretRef.name)),
      ]),
      ...(pod.volumes ?? []).flatMap((v: any) => [
        ...(v.secret ? fromVolume(v.secret) : []),
        ...(v.projected?.sources ?? []).filter((s: any) => s.secret).flatMap((s: any) => fromVolume(s.secret)),
      ]),
    ].sort();
  }
  const workloads = (docs: any[]) => docs.filter((d) => ['Deployment', 'DaemonSet', 'Job'].includes(d.kind));

  it('passes helm lint, the ServiceMonitor and the metrics token included', () => {
    expect(
      execFileSync(
        helm,
        [
          'lint',
          '--strict',
          chart,
          ...values,
          ...sets(`metrics.token=${METRICS_TOKEN}`, 'metrics.serviceMonitor.enabled=true'),
        ],
        { encoding: 'utf8' },
      ),
    ).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  it('refuses to render without the admin token and the database URL', () => {
    const render = refused();
    expect(render.status).not.toBe(0);
    expect(render.stderr).toMatch(/secrets.adminToken \(or secrets.existingSecret\) is required/);
  });

  it('renders a server (Deployment, Service, its Secret, ConfigMap) and a host agent on each GPU node, whose documents loadSettings takes', () => {
    const docs = render();
    const byKind = (kind: string) => docs.filter((d) => d.kind === kind);
    expect(docs.map((d) => d.kind).sort()).toEqual([
      'ConfigMap',
      'DaemonSet',
      'Deployment',
      'Job',
      'Secret',
      'Secret',
      'Service',
    ]);
    const secrets = new Map<string, any>(byKind('Secret').map((s) => [s.metadata.name, s]));
    const [config] = byKind('ConfigMap');
    const [server] = byKind('Deployment');
    const [host] = byKind('DaemonSet');
    const [job] = byKind('Job');

    // The server's two secrets come from its Secret, not from plain values.
    const serverContainer = server.spec.template.spec.containers[0];
    expect(
      serverContainer.env
        .filter((v: any) => v.valueFrom?.secretKeyRef)
        .map((v: any) => [v.name, v.valueFrom.secretKeyRef.key]),
    ).toEqual([
      ['DATABASE_URL', 'database-url'],
      ['CAPYCTL_ADMIN_TOKEN', 'admin-token'],
    ]);
    for (const ref of secretsReadBy(server, docs)) {
      const [name, key] = ref.split('/');
      expect(Object.keys(secrets.get(name!)?.stringData ?? {}), ref).toContain(key);
    }
    expectKnownVariables(Object.fromEntries(serverContainer.env.map((v: any) => [v.name, v.value ?? ''])));
    expect(serverContainer.args).toEqual(['start', 'server', '--file', '/etc/capyctl/server.yaml']);
    expect(server.spec).toMatchObject({ replicas: 1, strategy: { type: 'Recreate' } });
    const serverDoc = config.data['server.yaml'];
    expect(server.spec.template.spec.terminationGracePeriodSeconds * SECOND).toBeGreaterThan(
      longestStopMs('server', serverDoc, {}),
    );
    expect(loadSettings('server', { text: serverDoc, env: {} }).listen).toEqual({
      inference: '0.0.0.0:8080',
      management: '0.0.0.0:7443',
    });

    // The host agent: GPU nodes only, its node's token, the server reaching it on the node's address.
    const pod = host.spec.template.spec;
    expect(pod.nodeSelector).toEqual({ 'nvidia.com/gpu.present': 'true', 'kubernetes.io/hostname': 'gpu-a' });
    expect(pod.tolerations).toContainEqual({ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' });
    expect(pod.hostNetwork).toBe(true);
    const hostContainer = pod.containers[0];
    expect(hostContainer.resources.limits['nvidia.com/gpu']).toBe(1);
    expect([...hostContainer.command, ...hostContainer.args]).toEqual([
      'capyctl',
      'start',
      'host',
      '--file',
      '/etc/capyctl/host.yaml',
    ]);
    const [tokenRef] = secretsReadBy(host, docs);
    const [tokenSecret, tokenKey] = tokenRef!.split('/');
    expect(secrets.get(tokenSecret!).stringData[tokenKey!]).toBe('capy_host_a');
    // The variables the agent reads its token and its ingress address from, as its pod sets them.
    expect(hostContainer.env).toContainEqual({
      name: 'CAPYCTL_SET__SERVER__TOKEN',
      valueFrom: { secretKeyRef: { name: tokenSecret, key: tokenKey } },
    });
    expect(hostContainer.env).toContainEqual({ name: 'CAPYCTL_SET__INGRESS__URL', value: 'http://$(NODE_IP):7080' });
    const hostEnv: Env = {
      CAPYCTL_SET__SERVER__TOKEN: 'capy_host_a',
      CAPYCTL_SET__INGRESS__URL: 'http://10.0.0.7:7080',
    };
    // NODE_IP is Kubernetes's, for the $(NODE_IP) in the ingress URL.
    expectKnownVariables(
      Object.fromEntries(
        hostContainer.env.filter((v: any) => v.name !== 'NODE_IP').map((v: any) => [v.name, v.value ?? '']),
      ),
    );
    const hostDoc = config.data['host.yaml'];
    const settings = loadSettings('host', { text: hostDoc, env: hostEnv });
    expect(settings.server.url).toBe('http://capy-capyctl-server:7443');
    expect(pod.terminationGracePeriodSeconds * SECOND).toBeGreaterThan(longestStopMs('host', hostDoc, hostEnv));
    expect(hostContainer.volumeMounts.find((m: any) => m.name === 'data').mountPath).toBe(settings.data_dir);

    expect(createdSearchAttributes(job.spec.template.spec.containers[0].command.join(' '))).toEqual(
      expectedSearchAttributes,
    );
  });

  it('gives each pod only its own secrets: the admin token and the database URL to the server alone, each node its own host token', () => {
    const docs = render(
      ...sets(
        'secrets.hostTokens.gpu-b=capy_host_b',
        'secrets.existingHostSecrets.gpu-c=gpu-c-token',
        `metrics.token=${METRICS_TOKEN}`,
      ),
    );
    const reads = Object.fromEntries(
      workloads(docs).map((w) => [`${w.kind} ${w.metadata.name}`, secretsReadBy(w, docs)]),
    );
    expect(reads).toEqual({
      'Deployment capy-capyctl-server': [
        'capy-capyctl-metrics/metrics-token',
        'capy-capyctl-server/admin-token',
        'capy-capyctl-server/database-url',
      ],
      'DaemonSet capy-capyctl-host-gpu-a': ['capy-capyctl-host-gpu-a/host-token'],
      'DaemonSet capy-capyctl-host-gpu-b': ['capy-capyctl-host-gpu-b/host-token'],
      'DaemonSet capy-capyctl-host-gpu-c': ['gpu-c-token/host-token'],
      'Job capy-capyctl-search-attributes': [],
    });
    // Each node's agent runs on that node alone, so its token is the one it registers with.
    for (const node of ['gpu-a', 'gpu-b', 'gpu-c']) {
      const agent = docs.find((d) => d.kind === 'DaemonSet' && d.metadata.name === `capy-capyctl-host-${node}`);
      expect(agent.spec.template.spec.nodeSelector['kubernetes.io/hostname']).toBe(node);
    }
    const secrets = docs.filter((d) => d.kind === 'Secret');
    expect(Object.fromEntries(secrets.map((s) => [s.metadata.name, s.stringData]))).toEqual({
      'capy-capyctl-server': { 'admin-token': 'admin-secret', 'database-url': 'postgres://capyctl@db:5432/capyctl' },
      'capy-capyctl-metrics': { 'metrics-token': METRICS_TOKEN },
      'capy-capyctl-host-gpu-a': { 'host-token': 'capy_host_a' },
      'capy-capyctl-host-gpu-b': { 'host-token': 'capy_host_b' },
    });

    const twice = refused(...values, ...sets('secrets.existingHostSecrets.gpu-a=gpu-a-token'));
    expect(twice.status).not.toBe(0);
    expect(twice.stderr).toMatch(
      /node gpu-a has a token in both secrets.hostTokens and secrets.existingHostSecrets: give one/,
    );
  });

  it("probes the server's liveness on the management port it is given", () => {
    const docs = render(...sets('server.service.managementPort=9443'));
    const server = docs.find((d) => d.kind === 'Deployment');
    const container = server.spec.template.spec.containers[0];
    expect(container.livenessProbe.exec.command).toEqual(['capyctl', 'list', 'hosts', '--server', '127.0.0.1:9443']);
    expect(container.ports).toContainEqual({ name: 'management', containerPort: 9443 });
    expect(container.readinessProbe.tcpSocket.port).toBe('management');
    const serverDoc = docs.find((d) => d.kind === 'ConfigMap').data['server.yaml'];
    expect(loadSettings('server', { text: serverDoc, env: {} }).listen.management).toBe('0.0.0.0:9443');
  });

  it('gives the server the metrics token from the Secret the chart makes of it, or from one made otherwise', () => {
    const metricsEnv = (docs: any[]) =>
      docs
        .find((d) => d.kind === 'Deployment')
        .spec.template.spec.containers[0].env.find((e: any) => e.name === 'CAPYCTL_SET__METRICS__TOKEN');
    expect(metricsEnv(render())).toBeUndefined();

    const made = render(...sets(`metrics.token=${METRICS_TOKEN}`));
    expect(metricsEnv(made).valueFrom.secretKeyRef).toEqual({ name: 'capy-capyctl-metrics', key: 'metrics-token' });
    const serverDoc = made.find((d) => d.kind === 'ConfigMap').data['server.yaml'];
    const env = { CAPYCTL_SET__METRICS__TOKEN: METRICS_TOKEN };
    expectKnownVariables(env);
    expect(loadSettings('server', { text: serverDoc, env }).metrics.token).toBe(METRICS_TOKEN);

    const existing = render(...sets('metrics.existingSecret=prometheus-capyctl', 'metrics.existingSecretKey=token'));
    expect(metricsEnv(existing).valueFrom.secretKeyRef).toEqual({ name: 'prometheus-capyctl', key: 'token' });
    expect(
      existing
        .filter((d) => d.kind === 'Secret')
        .map((s) => s.metadata.name)
        .sort(),
    ).toEqual(['capy-capyctl-host-gpu-a', 'capy-capyctl-server']);
  });

  it('marks the server pods for scraping, and renders a ServiceMonitor with the metrics token when asked', () => {
    const plain = render();
    expect(plain.find((d) => d.kind === 'Deployment').spec.template.metadata.annotations).toMatchObject({
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': '7443',
      'prometheus.io/path': '/metrics',
    });
    expect(plain.map((d) => d.kind)).not.toContain('ServiceMonitor');

    const tokenless = refused(...values, ...sets('metrics.serviceMonitor.enabled=true'));
    expect(tokenless.status).not.toBe(0);
    expect(tokenless.stderr).toMatch(
      /metrics.serviceMonitor.enabled needs a metrics token: set metrics.token or metrics.existingSecret/,
    );

    const docs = render(
      ...sets(
        'metrics.serviceMonitor.enabled=true',
        'metrics.serviceMonitor.labels.release=prometheus',
        'metrics.existingSecret=prometheus-capyctl',
      ),
    );
    const monitor = docs.find((d) => d.kind === 'ServiceMonitor');
    const service = docs.find((d) => d.kind === 'Service');
    expect(monitor.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(monitor.metadata.labels.release).toBe('prometheus');
    expect(service.metadata.labels).toMatchObject(monitor.spec.selector.matchLabels);
    expect(monitor.spec.endpoints).toEqual([
      {
        port: 'management',
        path: '/metrics',
        interval: '30s',
        authorization: { type: 'Bearer', credentials: { name: 'prometheus-capyctl', key: 'metrics-token' } },
      },
    ]);
    expect(service.spec.ports.map((p: any) => p.name)).toContain('management');
  });

  it('renders two servers, each with its pod name as its server ID, rolled one at a time', () => {
    const server = render(...sets('server.replicas=2')).find((d) => d?.kind === 'Deployment');
    expect(server.spec).toMatchObject({ replicas: 2, strategy: { type: 'RollingUpdate' } });
    expect(server.spec.template.spec.containers[0].env).toContainEqual({
      name: 'CAPYCTL_SERVER_ID',
      valueFrom: { fieldRef: { fieldPath: 'metadata.name' } },
    });
  });
});

describe('README "Running it on several machines"', () => {
  it('names only files that exist', () => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    const start = readme.indexOf('## Running it on several machines');
    expect(start).toBeGreaterThan(0);
    const section = readme.slice(start, readme.indexOf('\n## ', start + 1));
    const named = [...section.matchAll(/`(deploy\/[\w./-]+)`/g)].map((m) => m[1]!);
    expect(named.length).toBeGreaterThan(4);
    expect(named.filter((path) => !existsSync(join(REPO, path)))).toEqual([]);
  });

  it('gives no document whose engines run `npx capyctl`, which finds capyctl only inside its checkout', () => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    const documents = [...readme.matchAll(/```(?:yaml|sh)\n([\s\S]*?)```/g)].map((m) => m[1]!);
    const engines = documents.flatMap((d) => [...d.matchAll(/command: \[([^\]]*)\]/g)].map((m) => m[1]!));
    expect(engines.length).toBeGreaterThan(1);
    expect(engines.filter((command) => /\bnpx\b/.test(command))).toEqual([]);
  });
});
