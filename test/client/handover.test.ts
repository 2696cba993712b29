import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Option, Ref } from "effect"
import { advance, makeClients, settle } from "./helpers.js"

describe("handover", () => {
  it.scoped("stopping a leader whose work has a slow finalizer: the next leader starts only after it ran", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a, b] = clients as [typeof clients[0], typeof clients[0]]
      const finalizerDoneAt = yield* Ref.make<Option.Option<number>>(Option.none())
      const bStartedAt = yield* Ref.make<Option.Option<number>>(Option.none())
      const now = Clock.currentTimeMillis
      const runA = yield* a.client.runWhileLeader("job", () =>
        Effect.never.pipe(
          Effect.onInterrupt(() =>
            Effect.sleep("1500 millis").pipe(
              Effect.zipRight(Effect.flatMap(now, (t) => Ref.set(finalizerDoneAt, Option.some(t))))
            )
          )
        )).pipe(Effect.fork)
      yield* advance("200 millis")
      const runB = yield* b.client.runWhileLeader("job", () =>
        Effect.flatMap(now, (t) => Ref.set(bStartedAt, Option.some(t))).pipe(Effect.zipRight(Effect.never))).pipe(
          Effect.fork
        )
      yield* advance("200 millis")
      const snapshotA = yield* a.client.snapshot
      const deadlineAtStop = (yield* now) + Duration.toMillis(snapshotA.elections[0]!.remaining)
      // Interrupting runWhileLeader stops the election with the handover order.
      const stopping = yield* Fiber.interrupt(runA).pipe(Effect.fork)
      yield* settle
      expect(yield* Ref.get(bStartedAt)).toEqual(Option.none())
      yield* advance("3 seconds", "10 millis")
      yield* Fiber.join(stopping)
      const done = Option.getOrThrow(yield* Ref.get(finalizerDoneAt))
      const started = Option.getOrThrow(yield* Ref.get(bStartedAt))
      expect(started).toBeGreaterThanOrEqual(done)
      expect(started).toBeLessThanOrEqual(deadlineAtStop)
      yield* Fiber.interrupt(runB)
    }))

  it.scoped("work that ignores interruption delays handover by at most the term's remaining time", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a, b] = clients as [typeof clients[0], typeof clients[0]]
      const bStartedAt = yield* Ref.make<Option.Option<number>>(Option.none())
      const now = Clock.currentTimeMillis
      const election = yield* a.client.election("stubborn", {
        work: () => Effect.uninterruptible(Effect.sleep("1 minute"))
      })
      yield* advance("200 millis")
      yield* b.client.election("stubborn", {
        work: () => Effect.flatMap(now, (t) => Ref.set(bStartedAt, Option.some(t)))
      })
      yield* advance("200 millis")
      const term = Option.getOrThrow(yield* election.term)
      const stopAt = yield* now
      const limit = stopAt + Duration.toMillis(yield* term.remaining)
      const stopping = yield* Effect.fork(election.stop)
      yield* advance("5 seconds", "10 millis")
      yield* Fiber.join(stopping)
      const started = Option.getOrThrow(yield* Ref.get(bStartedAt))
      expect(started).toBeGreaterThan(stopAt)
      expect(started).toBeLessThanOrEqual(limit + 10)
      expect(yield* term.isValid).toBe(false)
    }))
})
