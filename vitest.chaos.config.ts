import { defineConfig } from "vitest/config"
import { simbaAliases } from "./vitest.config.js"

// Long fault runs outside `npm test`: `npm run test:chaos` (files `test/**/*.chaos.ts`; none today: the
// ZooKeeper ensemble cases run in `npm test`, see test/zookeeper/ensemble.test.ts).
export default defineConfig({
  resolve: { alias: simbaAliases },
  test: {
    include: ["test/**/*.chaos.ts"],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    pool: "forks",
    passWithNoTests: true
  }
})
