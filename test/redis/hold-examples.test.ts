/**
 * The semaphore and read-write lock examples run to completion on the local Redis and check what
 * they promise: at most 2 jobs at once across 3 worker processes; no torn read of a cache refreshed
 * under the write lock. Each runs as `node --import tsx file.ts` in its own process group (the
 * semaphore example starts its workers the same way), killed if it overruns.
 */
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { runNode } from "../readme/snippets.js"

const root = fileURLToPath(new URL("../..", import.meta.url))
const run = (file: string) => runNode(["--import", "tsx", join(root, "examples", file)], { cwd: root, millis: 60_000 })

describe("semaphore and read-write lock examples (Redis)", () => {
  it("redis-semaphore.ts: 3 processes, 12 jobs, at most 2 at once", async () => {
    const result = await run("redis-semaphore.ts")
    const output = `exit ${String(result.code)}\n${result.stdout}\n${result.stderr}`
    expect(result.code, output).toBe(0)
    expect(result.stdout, output).toMatch(/at most 2 jobs ran at once/)
    expect(result.stdout.match(/job \d starts/g) ?? [], output).toHaveLength(12)
  }, 90_000)

  it("redis-rw-cache.ts: readers under the read lock never see a refresh half done", async () => {
    const result = await run("redis-rw-cache.ts")
    const output = `exit ${String(result.code)}\n${result.stdout}\n${result.stderr}`
    expect(result.code, output).toBe(0)
    expect(result.stdout, output).toMatch(/torn reads: 0/)
    expect(result.stdout.match(/refreshed to version/g) ?? [], output).toHaveLength(5)
  }, 90_000)
})
