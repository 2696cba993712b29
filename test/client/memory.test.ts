/**
 * A long-lived client keeps no heap per operation. Found by `npm run bench` ("heap kept per
 * withLock"): the shell's shutdown effect held an iterator over the completions map for the client's
 * whole life, and V8 keeps every table a map outgrows alive for a live iterator: ~325 bytes per call.
 * Real clock, in-memory backend; the threshold is far above the noise (a few bytes either way), and
 * 8,000 calls are enough to see ~325 bytes each; the time limit leaves room for a loaded machine.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { LeaseBackend, MemoryBackend, Simba } from "simba"

setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void
const heapUsed = () => {
  gc()
  gc()
  return process.memoryUsage().heapUsed
}

describe("memory", () => {
  it.live("a long-lived client keeps no heap per withLock", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const client = yield* Simba.make().pipe(Effect.provideService(LeaseBackend.LeaseBackend, backend))
      const run = (n: number) => Effect.repeatN(client.withLock("memory", Effect.void), n - 1)
      yield* run(2_000)
      const before = heapUsed()
      yield* run(8_000)
      const perCall = (heapUsed() - before) / 8_000
      expect(perCall).toBeLessThan(100)
    }).pipe(Effect.scoped), 120_000)
})
