// Preload (`node --import tsx --import ./bench/built.mjs bench/run.ts`): the bench runs the built
// package (`dist/`, as `npm run build` emits it and users install it), not `src/` through tsx. tsx
// compiles with esbuild's keepNames, which wraps every named function in a `__name` call that gives
// it a property of its own: ~1 KB more heap per idle election and 3-10 % more CPU per lock than the
// code users run. The bench's own files stay TypeScript; every module of `src/` resolves to `dist/`.
import { register } from "node:module"

register("./built-hook.mjs", import.meta.url)
