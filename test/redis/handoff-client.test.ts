/**
 * The FIFO hand-off seen from the clients, on the real servers: a client waiting in `withLock` gets the
 * lock from the holder's release without sending another acquire (one node: the release script grants
 * it and the `Granted` hint tells the client), or with one more acquire after the `released:<sid>`
 * reservation (routeBySlot, cluster). Its first wait on a name asks twice: refused, and once more when
 * its backend starts hearing the lease's channel (the backend test "a backend hears a lease's channel
 * while one of its sessions waits" shows that a later wait does not). Either way the waiter's token is above the holder's.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Ref, Schedule } from "effect"
import { LeaseBackend, Simba } from "simba"
import { RedisBackend } from "simba/redis"
import { clientTiming, modes, uniqueName } from "./RedisServers.js"

for (const mode of modes) {
  describe(`Redis hand-off between clients, ${mode.label}`, () => {
    /** A client whose backend counts its acquire calls. */
    const counted = Effect.gen(function*() {
      const backend = yield* RedisBackend.make(mode.options)
      const acquires = yield* Ref.make(0)
      const client = yield* Simba.make(clientTiming).pipe(
        Effect.provideService(LeaseBackend.LeaseBackend, {
          ...backend,
          acquire: (sessionId, name) => Effect.zipRight(Ref.update(acquires, (n) => n + 1), backend.acquire(sessionId, name))
        })
      )
      return { client, acquires }
    })

    it.scopedLive("a waiting withLock gets the lock from the holder's release, with a larger token", () =>
      Effect.gen(function*() {
        const name = uniqueName("handoff")
        const holder = yield* counted
        const waiter = yield* counted
        const held = yield* Deferred.make<bigint>()
        const release = yield* Deferred.make<void>()
        const holding = yield* Effect.fork(holder.client.withLock(name, (term) =>
          Effect.zipRight(Deferred.succeed(held, term.token), Deferred.await(release))))
        const first = yield* Deferred.await(held)
        const waiting = yield* Effect.fork(waiter.client.withLock(name, (term) => Effect.succeed(term.token)))
        // The waiter has asked and been queued, and asked once more when its backend started hearing
        // the lease's channel (a release in between would have gone unheard); then it waits.
        yield* Ref.get(waiter.acquires).pipe(
          Effect.repeat({ until: (n) => n >= 2, schedule: Schedule.spaced("5 millis") }),
          Effect.timeout("5 seconds"),
          Effect.zipRight(Effect.sleep("100 millis"))
        )
        expect(yield* Ref.get(waiter.acquires)).toBe(2)
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holding)
        const second = yield* Fiber.join(waiting).pipe(Effect.timeout("5 seconds"))
        expect(second).toBeGreaterThan(first)
        // One node: granted by the release itself; with routeBySlot: one more acquire takes the reservation.
        expect(yield* Ref.get(waiter.acquires)).toBe(mode.routeBySlot ? 3 : 2)
      }))
  })
}
