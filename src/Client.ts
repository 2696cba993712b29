/**
 * Transitional: the shell moved to `internal/client.ts` and the public shapes to `Simba.ts`. This
 * module only keeps the old imports of `SimbaTest.ts`, `test/tck/ClientCases.ts` working until they
 * import from `Simba.ts`; then it goes.
 */
export { make } from "./internal/client.js"
export type {
  Election,
  ElectionError,
  ElectionOptions,
  LockError,
  LockOptions,
  SimbaClient,
  SimbaSnapshot
} from "./Simba.js"
