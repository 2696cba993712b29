/**
 * Lock caching between clients on the real servers: a client that takes one name again and again
 * with `keep` never starves another that waits for it. Told by the store (`wanted`, one node), the
 * holder gives the lease up as its running body ends; with the message lost (filtered out here) or
 * never sent (per-slot mode), it gives it up once the lease was granted `max(keep, renewInterval)`
 * ago, and the store's FIFO queue hands it to the waiter.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Ref, Schedule, Stream } from "effect"
import { LeaseBackend, Simba } from "simba"
import { RedisBackend } from "simba/redis"
import { clientTiming, modes, uniqueName } from "./RedisServers.js"

const keep = 300
/** The client timing's renew interval: a third of the lease duration (its default). */
const renewInterval = Duration.toMillis(Duration.decode(clientTiming.leaseDuration)) / 3

for (const mode of modes) {
  describe(`Redis lock caching between clients, ${mode.label}`, () => {
    const client = (hearWanted: boolean) =>
      Effect.gen(function*() {
        const backend = yield* RedisBackend.make(mode.options)
        return yield* Simba.make(clientTiming).pipe(
          Effect.provideService(
            LeaseBackend.LeaseBackend,
            hearWanted ? backend : { ...backend, hints: Stream.filter(backend.hints, (hint) => hint._tag !== "Wanted") }
          )
        )
      })

    for (const hearWanted of mode.routeBySlot ? [false] : [true, false]) {
      const how = hearWanted ? "told by the store" : "without the store's message"
      it.scopedLive(`a client taking the name again and again does not starve a waiter (${how})`, () =>
        Effect.gen(function*() {
          const name = uniqueName("cached")
          const [a, b] = [yield* client(hearWanted), yield* client(hearWanted)]
          const bodies = yield* Ref.make(0)
          const tokens = yield* Ref.make<ReadonlyArray<bigint>>([])
          const body = (token: bigint) =>
            Effect.zipRight(Ref.update(tokens, (all) => [...all, token]), Effect.zipRight(Ref.update(bodies, (n) => n + 1), Effect.sleep("20 millis")))
          const looping = yield* Effect.fork(Effect.forever(a.withLock(name, (term) => body(term.token), { keep: `${keep} millis` })))
          yield* Ref.get(bodies).pipe(Effect.repeat({ until: (n) => n >= 3, schedule: Schedule.spaced("5 millis") }), Effect.timeout("5 seconds"))
          const asked = yield* Ref.get(bodies)
          const askedAt = yield* Clock.currentTimeMillis
          const got = yield* b.withLock(name, (term) => Effect.map(Ref.get(bodies), (n) => ({ token: term.token, n })))
          const waited = (yield* Clock.currentTimeMillis) - askedAt
          yield* Fiber.interrupt(looping)
          // Above every token the caching client's bodies had.
          expect(got.token).toBeGreaterThan((yield* Ref.get(tokens)).reduce((x, y) => (y > x ? y : x), 0n))
          if (hearWanted) {
            // The running body ends, and the next goes to the waiter.
            expect(got.n - asked).toBeLessThanOrEqual(2)
          } else {
            // The lease, granted before b asked, is cached again for at most max(keep, renewInterval)
            // after its grant; then a body (20 ms) and the hand-off; 1 s of room for a loaded machine.
            expect(waited).toBeLessThan(Math.max(keep, renewInterval) + 20 + 1_000)
          }
        }), 20_000)
    }
  })
}
