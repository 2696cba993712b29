// Preloaded with `node --import`: records every module specifier the program resolves (ESM resolve
// hook, which sees `import` and `import()` even of a package that is not installed) and, at exit,
// every CommonJS module in the cache (a driver loaded through `require`). Writes both to
// `$SIMBA_LOAD_LOG` for the packaging test.
import { appendFileSync } from "node:fs"
import { createRequire, register } from "node:module"

const log = process.env.SIMBA_LOAD_LOG
if (!log) throw new Error("SIMBA_LOAD_LOG is not set")
register("./record-hooks.mjs", import.meta.url, { data: { log } })
const require = createRequire(import.meta.url)
process.on("exit", () => {
  appendFileSync(log, Object.keys(require.cache).map((file) => `require ${file}\n`).join(""))
})
