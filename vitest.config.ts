import { readFileSync } from "node:fs"
import { availableParallelism } from "node:os"
import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

/** `simba` and its subpaths resolve to the sources, by tsconfig.json's `paths` (as `package.json`'s exports do to `dist/`). */
export const simbaPaths = (JSON.parse(readFileSync(new URL("./tsconfig.json", import.meta.url), "utf8")) as {
  readonly compilerOptions: { readonly paths: Record<string, ReadonlyArray<string>> }
}).compilerOptions.paths

export const simbaAliases = Object.entries(simbaPaths).map(([specifier, [path = ""]]) => ({
  find: new RegExp(`^${specifier}$`),
  replacement: fileURLToPath(new URL(path, import.meta.url))
}))

export default defineConfig({
  resolve: { alias: simbaAliases },
  test: {
    include: ["test/**/*.test.ts"],
    // Routines of a schema version in the making are installed afresh (see the file).
    globalSetup: ["test/support/freshSchemas.ts"],
    testTimeout: 20_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Most files wait on servers and timers, not the CPU: two files at a time even on two cores
    // (vitest's default there is one). Files that crash a server crash a private one of their own
    // (test/support), so no file disturbs another's server; each uses its own names and prefixes.
    poolOptions: { forks: { maxForks: Math.max(2, availableParallelism() - 1), minForks: 1 } },
    // Effect's log lines below Warning (the clients' lifecycle Info, Debug) are not printed, so a
    // failure is not buried in them; `TEST_LOGS=all` prints them. Tests that assert on logs capture
    // them with a logger of their own (no console), and other console output is kept.
    onConsoleLog: (log) =>
      process.env["TEST_LOGS"] !== "all" && /^timestamp=\S+ level=(TRACE|DEBUG|INFO) /m.test(log) ? false : undefined
  }
})
