import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.tap/**', 'bench/results/**', 'scripts/**', 'eslint.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { project: ['./tsconfig.lint.json', './web/tsconfig.json'], tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // tap's t.test() returns a promise that tap itself awaits
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-floating-promises': 'off' },
  },
  {
    // Security: front ends reach the daemon only through its client, protocol and error modules.
    files: ['http/**/*.ts', 'mcp/**/*.ts', 'fuse/**/*.ts', 'cli/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                '**/daemon/core/*',
                '**/daemon/auth/*',
                '**/daemon/store/*',
                '**/daemon/vcs/*',
                '**/daemon/search/*',
                '**/daemon/service*',
                '**/daemon/service/*',
                '**/daemon/events*',
                '**/daemon/main*',
              ],
              message: 'Front ends talk to the daemon through daemon/rpc only.',
            },
          ],
        },
      ],
    },
  },
  {
    // Layers, one way: core (the tree, permissions, objects) knows nothing above it.
    files: ['daemon/core/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                '../rpc/*',
                '../service*',
                '../service/*',
                '../store/*',
                '../vcs/*',
                '../search/*',
                '../auth/*',
                '../events*',
                '../main*',
              ],
              message: 'daemon/core imports only daemon/core and daemon/errors.',
            },
          ],
        },
      ],
    },
  },
  {
    // vcs and search build on core; they may name the protocol's record types (type-only), nothing else above them.
    files: ['daemon/vcs/**/*.ts', 'daemon/search/**/*.ts'],
    rules: {
      'no-restricted-imports': 'off',
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['../rpc/protocol*'],
              allowTypeImports: true,
              message: "vcs and search may import the protocol's record types only (import type).",
            },
            {
              group: [
                '../rpc/*',
                '!../rpc/protocol*',
                '../service*',
                '../service/*',
                '../store/*',
                '../auth/*',
                '../events*',
                '../main*',
              ],
              message: 'vcs and search import only daemon/core, daemon/errors and protocol types.',
            },
          ],
        },
      ],
    },
  },
);
