import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, TestClock, Tracer } from "effect"
import { LeaseBackend, MemoryBackend, Simba } from "simba"

describe("spans of backend calls", () => {
  it.scoped("an installed tracer gets a span simba.<operation> for every backend call", () =>
    Effect.gen(function*() {
      // The default tracer exports nothing, so the calls skip their spans under it: this is the case
      // where they must not be skipped.
      const native = yield* Effect.tracer
      const names: Array<string> = []
      const recording = Tracer.make({
        span: (name, parent, context, links, startTime, kind, options) => {
          names.push(name)
          return native.span(name, parent, context, links, startTime, kind, options)
        },
        context: native.context
      })
      yield* Effect.gen(function*() {
        const backend = yield* MemoryBackend.make()
        const client = yield* Simba.make({ leaseDuration: "3 seconds" }).pipe(
          Effect.provideService(LeaseBackend.LeaseBackend, backend)
        )
        const fiber = yield* Effect.fork(client.withLock("a", Effect.void))
        yield* TestClock.adjust(Duration.millis(10))
        yield* Fiber.join(fiber)
        yield* TestClock.adjust(Duration.millis(10))
      }).pipe(Effect.withTracer(recording))
      expect(names).toContain("simba.openSession")
      expect(names).toContain("simba.acquire")
      expect(names).toContain("simba.release")
    }))
})
