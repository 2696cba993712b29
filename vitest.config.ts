import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

/** `simba` and its subpaths resolve to the sources, as `package.json`'s exports do to `dist/`. */
export const simbaAliases = [
  ["simba/redis", "Redis"],
  ["simba/postgres", "Postgres"],
  ["simba/mysql", "Mysql"],
  ["simba/zookeeper", "Zookeeper"],
  ["simba/memory", "Memory"],
  ["simba/test", "Test"],
  ["simba/http", "Http"],
  ["simba/fencing/sql", "fencing/FencedSql"],
  ["simba/fencing/redis", "fencing/FencedRedis"],
  ["simba/fencing/http", "fencing/FencedHttp"],
  ["simba/fencing", "fencing/Fencing"],
  ["simba", "index"]
].map(([specifier, module]) => ({
  find: new RegExp(`^${specifier}$`),
  replacement: fileURLToPath(new URL(`./src/${module}.ts`, import.meta.url))
}))

export default defineConfig({
  resolve: { alias: simbaAliases },
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 20_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Effect's log lines below Warning (the clients' lifecycle Info, Debug) are not printed, so a
    // failure is not buried in them; `TEST_LOGS=all` prints them. Tests that assert on logs capture
    // them with a logger of their own (no console), and other console output is kept.
    onConsoleLog: (log) =>
      process.env["TEST_LOGS"] !== "all" && /^timestamp=\S+ level=(TRACE|DEBUG|INFO) /m.test(log) ? false : undefined
  }
})
