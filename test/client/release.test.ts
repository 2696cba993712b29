/**
 * The release of a lock is off the caller's path: `withLock` returns once the body has exited and
 * the term is revoked, while the release travels; `awaitRelease` waits for the store's answer. Here
 * the store takes a second to answer a release (TestClock), so the two are told apart.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Option, TestClock } from "effect"
import { MemoryBackend } from "simba"
import { makeClient, settle } from "./helpers.js"

const slowReleases = Effect.map(MemoryBackend.make(), (backend) => ({
  ...backend,
  release: (sessionId: string, name: string, token: bigint) =>
    Effect.zipRight(Effect.sleep("1 second"), backend.release(sessionId, name, token))
}))

describe("the release of a lock", () => {
  it.scoped("withLock returns before the release lands: another client finds it held until then", () =>
    Effect.gen(function*() {
      const backend = yield* slowReleases
      const [a, b] = [yield* makeClient(backend), yield* makeClient(backend)]
      const locked = yield* Effect.fork(a.client.withLock("r", Effect.succeed("done")))
      yield* settle
      // Returned with the body's value while the release is still on its way.
      expect(yield* Fiber.join(locked)).toBe("done")
      expect(yield* b.client.tryWithLock("r", Effect.succeed("b"))).toEqual(Option.none())
      yield* TestClock.adjust("1100 millis")
      yield* settle
      expect(yield* b.client.tryWithLock("r", Effect.succeed("b"))).toEqual(Option.some("b"))
    }))

  it.scoped("awaitRelease: withLock returns once the store answered the release, and the lock is free then", () =>
    Effect.gen(function*() {
      const backend = yield* slowReleases
      const [a, b] = [yield* makeClient(backend), yield* makeClient(backend)]
      const locked = yield* Effect.fork(a.client.withLock("r", Effect.succeed("done"), { awaitRelease: true }))
      yield* settle
      expect(locked.unsafePoll()).toBeNull()
      yield* TestClock.adjust("900 millis")
      yield* settle
      expect(locked.unsafePoll()).toBeNull()
      yield* TestClock.adjust("200 millis")
      yield* settle
      expect(yield* Fiber.join(locked)).toBe("done")
      expect(yield* b.client.tryWithLock("r", Effect.succeed("b"))).toEqual(Option.some("b"))
    }))

  it.scoped("awaitRelease on lock's scope: closing the scope waits for the release", () =>
    Effect.gen(function*() {
      const backend = yield* slowReleases
      const [a, b] = [yield* makeClient(backend), yield* makeClient(backend)]
      const scoped = yield* Effect.fork(Effect.scoped(Effect.asVoid(a.client.lock("r", { awaitRelease: true }))))
      yield* settle
      expect(scoped.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1100 millis")
      yield* settle
      yield* Fiber.join(scoped)
      expect(yield* b.client.tryWithLock("r", Effect.succeed("b"))).toEqual(Option.some("b"))
    }))

  it.scoped("the same name taken again while its release travels: the second body waits for the release and gets a higher token", () =>
    Effect.gen(function*() {
      const backend = yield* slowReleases
      const a = yield* makeClient(backend)
      const first = yield* a.client.withLock("r", (term) => Effect.succeed(term.token))
      const returnedAt = yield* Clock.currentTimeMillis
      // The store still holds the first term's lease; an acquire now is answered with its token,
      // which the client must not adopt (the release in flight will free that very lease).
      const second = yield* Effect.fork(
        a.client.withLock("r", (term) => Effect.map(Clock.currentTimeMillis, (at) => ({ token: term.token, at })))
      )
      yield* settle
      expect(second.unsafePoll()).toBeNull()
      for (let i = 0; i < 30 && second.unsafePoll() === null; i++) {
        yield* TestClock.adjust("100 millis")
        yield* settle
      }
      const ran = yield* Fiber.join(second)
      expect(ran.token).toBeGreaterThan(first)
      // Not before the release landed (the store answers it 1 s after it was sent).
      expect(ran.at - returnedAt).toBeGreaterThanOrEqual(1000)
    }))
})
