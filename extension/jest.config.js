/**
 * Jest runs the TypeScript sources directly (ts-jest) in jsdom.
 * JupyterLab packages ship ES modules, so the few we import in tests
 * (@jupyterlab/rendermime's MimeModel) are transpiled too.
 */
// Packages published as ES modules only, reached when the tests import JupyterLab.
const ESM_PACKAGES = [
  '@jupyterlab/',
  '@jupyter/',
  '@microsoft/fast-',
  '@codemirror/',
  '@lezer/',
  'exenv-es6',
  'lib0',
  'nanoid',
  'yjs',
  'y-protocols'
];

module.exports = {
  testEnvironment: 'jsdom',
  roots: ['<rootDir>/src'],
  setupFiles: ['<rootDir>/jest.setup.js'],
  // JupyterLab's UI packages import icons and styles; tests need neither.
  moduleNameMapper: { '\\.(svg|css)$': '<rootDir>/jest.asset-stub.js' },
  testMatch: ['**/__tests__/**/*.spec.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.test.json' }],
    '^.+\\.js$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.jest-js.json' }]
  },
  transformIgnorePatterns: [`/node_modules/(?!(${ESM_PACKAGES.join('|')}))`]
};
