/**
 * Closing many locks at once must not hold the event loop: each lock's stop is a round trip between
 * the closing fiber and the client's loop, all of it microtasks, so without a yield the 10,000 stops
 * of the renew10k bench ran as one chain of 3.5 s during which no timer fired and no socket was read
 * (renewals starved). Counted, not timed: how many event-loop turns (a `setImmediate` chain) happen
 * while the close runs; the old loop let none through.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import { LeaseBackend, MemoryBackend, Simba } from "simba"

describe("closing many locks at once", () => {
  it.scopedLive("lets the event loop turn while the stops run", () =>
    Effect.gen(function*() {
      const count = 1_000
      const backend = yield* MemoryBackend.make()
      const client = yield* Simba.make({ leaseDuration: "30 seconds", logLevel: "Error" }).pipe(
        Effect.provideService(LeaseBackend.LeaseBackend, backend),
        Effect.orDie
      )
      const holding = yield* Scope.make()
      yield* Effect.forEach(
        Array.from({ length: count }, (_, i) => `close-many-${i}`),
        (name) => client.lock(name),
        { concurrency: 100, discard: true }
      ).pipe(Scope.extend(holding))
      expect((yield* client.snapshot).elections.length).toBe(count)
      const turns = yield* Effect.sync(() => {
        const counter = { turns: 0, counting: true }
        const tick = () => {
          if (!counter.counting) return
          counter.turns++
          setImmediate(tick)
        }
        setImmediate(tick)
        return counter
      })
      yield* Scope.close(holding, Exit.void)
      turns.counting = false
      expect((yield* client.snapshot).elections.length).toBe(0)
      // The loop yields at least once per 128 events it takes in one chain; 1,000 stops take more.
      expect(turns.turns).toBeGreaterThanOrEqual(count / 256)
    }), 60_000)
})
