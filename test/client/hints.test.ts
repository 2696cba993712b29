/**
 * Hints reach the client's loop in the backend's own callback when the backend made its stream with
 * `LeaseBackend.makeHintHub`, and through the stream when a wrapper replaced it (a test kit delaying
 * or dropping hints): both wake a waiting lock at once on a release, without waiting for its retry.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option, Ref, Stream } from "effect"
import { LeaseBackend, MemoryBackend, Simba } from "simba"
import { settle } from "./helpers.js"

describe("hints", () => {
  it.scoped("a hint hub's stream carries a direct listener; a stream made from it does not", () =>
    Effect.gen(function*() {
      const hub = yield* LeaseBackend.makeHintHub()
      expect(LeaseBackend.listenerOf(hub.hints)).toBeDefined()
      expect(LeaseBackend.listenerOf(hub.hints.pipe(Stream.map((hint) => hint)))).toBeUndefined()
      const heard = yield* Ref.make<ReadonlyArray<string>>([])
      yield* LeaseBackend.listenerOf(hub.hints)!((hint) =>
        Effect.runSync(Ref.update(heard, (all) => [...all, hint._tag === "Released" ? hint.name : "?"]))
      )
      hub.emit(LeaseBackend.Hint.Released({ name: "a" }))
      hub.emit(LeaseBackend.Hint.Released({ name: "b" }))
      expect(yield* Ref.get(heard)).toEqual(["a", "b"])
    }))

  const direct = (backend: LeaseBackend.LeaseBackendService) => backend
  const wrapped = (backend: LeaseBackend.LeaseBackendService): LeaseBackend.LeaseBackendService => ({
    ...backend,
    hints: backend.hints.pipe(Stream.map((hint) => hint))
  })
  for (const [label, link] of [["in the backend's callback", direct], ["through a wrapped stream", wrapped]] as const) {
    it.scoped(`a release wakes the waiting lock at once, hints heard ${label}`, () =>
      Effect.gen(function*() {
        const backend = yield* MemoryBackend.make()
        const client = () =>
          Simba.make({ leaseDuration: "3 seconds" }).pipe(Effect.provideService(LeaseBackend.LeaseBackend, link(backend)))
        const holder = yield* client()
        const waiter = yield* client()
        yield* settle
        const release = yield* Deferred.make<void>()
        const holding = yield* Effect.fork(holder.withLock("woken", Deferred.await(release)))
        yield* settle
        const waiting = yield* Effect.fork(waiter.withLock("woken", Effect.void))
        yield* settle
        // Refused once; its next try is a retry period away (the clock does not move in this test).
        expect(Option.isNone(yield* Fiber.poll(waiting))).toBe(true)
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holding)
        yield* settle
        yield* Fiber.join(waiting)
      }))
  }
})
