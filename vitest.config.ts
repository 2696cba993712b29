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
    pool: "forks"
  }
})
