import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.tap/**', 'bench/results/**', 'scripts/**', 'eslint.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { project: ['./tsconfig.lint.json', './web/tsconfig.json'], tsconfigRootDir: import.meta.dirname } },
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
      'no-restricted-imports': ['error', { patterns: [{ group: ['**/daemon/core/*', '**/daemon/auth/*', '**/daemon/store/*', '**/daemon/vcs/*'], message: 'Front ends talk to the daemon through daemon/rpc only.' }] }],
    },
  },
);
