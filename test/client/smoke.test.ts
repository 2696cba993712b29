import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, TestClock, Duration } from "effect"
import { LeaseBackend, MemoryBackend, Simba } from "simba"

describe("smoke", () => {
  it.scoped("a lock and an election on the memory backend", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const client = yield* Simba.make({ leaseDuration: "3 seconds" }).pipe(
        Effect.provideService(LeaseBackend.LeaseBackend, backend)
      )
      const fiber = yield* Effect.fork(client.withLock("a", (term) => Effect.succeed(term.token)))
      yield* TestClock.adjust(Duration.millis(10))
      const token = yield* Fiber.join(fiber)
      expect(token).toBeGreaterThan(0n)
      const snap = yield* client.snapshot
      expect(snap.session.status).toBe("LIVE")
    }))
})
