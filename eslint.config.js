// The linter CI runs (`npm run lint`): typescript-eslint's recommended rules, and the rule the Temporal
// samples keep for workflow code, which runs in a deterministic sandbox where Node's built-ins do not exist.
import { builtinModules } from 'node:module';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const nodeBuiltins = builtinModules.flatMap((m) => [m, `node:${m}`]);

export default tseslint.config(
  { ignores: ['node_modules/', '.tools/', '.data/', '.cli/', 'coverage/', 'test-output/', 'deploy/helm/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      // A closure may read a variable assigned once later (the standalone's host, once it is up).
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // Control characters are matched on purpose: the NUL refusal and terminal escapes in the CLI's tests.
      'no-control-regex': 'off',
    },
  },
  {
    // Tests and benchmarks read JSON bodies and documents whose shape the assertion itself checks.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // Workflow code and the pure modules it imports are evaluated once per worker thread and shared by
    // every run (server/workflowBundle.ts): what a module holds at its top level must not change, or
    // one run's state would reach another. The SDK freezes what the modules export, but a frozen Map
    // or Set still takes entries, so those are declared read-only.
    files: ['workflows/**/*.ts', 'domain/**/*.ts', 'api/**/*.ts', 'engines/**/*.ts', 'settings/units.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        ...['Program >', 'Program > ExportNamedDeclaration >'].flatMap((top) => [
          {
            selector: `${top} VariableDeclaration[kind!='const']`,
            message: 'workflow modules are shared by every run: module-level bindings are const',
          },
          {
            selector: `${top} VariableDeclaration > VariableDeclarator:not([id.typeAnnotation.typeAnnotation.typeName.name=/^Readonly(Map|Set)$/]) > NewExpression.init[callee.name=/^(Weak)?(Map|Set)$/]`,
            message:
              'workflow modules are shared by every run: a module-level Map or Set is ReadonlyMap or ReadonlySet',
          },
        ]),
      ],
    },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: [
            ...nodeBuiltins,
            '@temporalio/activity',
            '@temporalio/worker',
            '@temporalio/client',
            'pg',
            'undici',
            'fastify',
            'pino',
          ],
          patterns: [
            {
              group: ['**/store/*', '**/gateway/*', '**/server/*', '**/hostAgent/*', '**/processes/*'],
              message: 'workflow code imports only @temporalio/workflow and pure modules',
            },
            {
              group: ['**/activities/*', '**/activities/**/*'],
              allowTypeImports: true,
              message: 'workflows take activities as types only (proxyActivities<typeof …>)',
            },
          ],
        },
      ],
    },
  },
);
