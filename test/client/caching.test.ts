/**
 * Lock caching on the client (`keep`): the same name taken again and again runs its bodies without a
 * round trip, each with its own term and a higher token; another client that asks is queued, the
 * holder is told (`Wanted`) and gives the lease up as soon as no body of its own runs; `keep`
 * passing releases it; a body's failure and interruption reach the caller as without caching.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Option } from "effect"
import { MemoryBackend } from "simba"
import { advance, makeClient, settle } from "./helpers.js"

const acquiresOf = (calls: Effect.Effect<ReadonlyArray<{ readonly operation: string }>>) =>
  Effect.map(calls, (all) => all.filter((c) => c.operation === "acquire").length)
const releasesOf = (calls: Effect.Effect<ReadonlyArray<{ readonly operation: string }>>) =>
  Effect.map(calls, (all) => all.filter((c) => c.operation === "release").length)

describe("lock caching", () => {
  it.scoped("keep: one acquire for many bodies, each with its own higher token; released once keep passes", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const a = yield* makeClient(backend)
      const tokens: Array<bigint> = []
      for (let i = 0; i < 20; i++) {
        tokens.push(yield* a.client.withLock("c", (term) => Effect.succeed(term.token), { keep: "1 second" }))
      }
      expect(yield* acquiresOf(a.calls)).toBe(1)
      expect(yield* releasesOf(a.calls)).toBe(0)
      for (let i = 1; i < tokens.length; i++) expect(tokens[i]!).toBeGreaterThan(tokens[i - 1]!)
      // The snapshot shows the cached lease, held with its block's last token.
      const cached = (yield* a.client.snapshot).cached
      expect(cached.map((c) => c.name)).toEqual(["c"])
      expect(cached[0]!.token).toBeGreaterThanOrEqual(tokens[tokens.length - 1]!)
      yield* advance("1100 millis")
      expect(yield* releasesOf(a.calls)).toBe(1)
      expect((yield* a.client.snapshot).cached).toEqual([])
      // Another client is now granted a token above every token of the block.
      const b = yield* makeClient(backend)
      const next = yield* b.client.withLock("c", (term) => Effect.succeed(term.token))
      expect(next).toBeGreaterThan(tokens[tokens.length - 1]!)
    }))

  it.scoped("the client default lockKeep caches every lock; a lock's own keep 0 turns it off", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const a = yield* makeClient(backend, { leaseDuration: "3 seconds", lockKeep: "1 second" })
      for (let i = 0; i < 5; i++) yield* a.client.withLock("d", Effect.void)
      expect(yield* acquiresOf(a.calls)).toBe(1)
      yield* a.client.withLock("e", Effect.void, { keep: 0 })
      yield* settle
      expect(yield* releasesOf(a.calls)).toBe(1)
    }))

  it.scoped("another client asking: queued, the holder is told and hands the lease over when its body ends", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const [a, b] = [yield* makeClient(backend), yield* makeClient(backend)]
      const first = yield* a.client.withLock("w", (term) => Effect.succeed(term.token), { keep: "2 seconds" })
      // Cached, no body runs: b's acquire is refused, a hears it wanted and releases at once.
      const other = yield* Effect.fork(b.client.withLock("w", (term) => Effect.succeed(term.token)))
      yield* advance("200 millis", "10 millis")
      expect(yield* Fiber.join(other)).toBeGreaterThan(first)
      // A body running when the lease is wanted: the lease goes when it ends, not cached again.
      const gate = yield* Deferred.make<void>()
      const holding = yield* Effect.fork(a.client.withLock("w", Deferred.await(gate), { keep: "2 seconds" }))
      yield* advance("200 millis", "10 millis")
      const waiting = yield* Effect.fork(b.client.withLock("w", Effect.succeed("b ran")))
      yield* advance("200 millis", "10 millis")
      expect(waiting.unsafePoll()).toBeNull()
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holding)
      yield* advance("200 millis", "10 millis")
      expect(yield* Fiber.join(waiting)).toBe("b ran")
    }))

  it.scoped("a try-lock from another client finds a cached lease held", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const [a, b] = [yield* makeClient(backend), yield* makeClient(backend)]
      yield* a.client.withLock("t", Effect.void, { keep: "1 second" })
      expect(yield* b.client.tryWithLock("t", Effect.succeed("b"))).toEqual(Option.none())
    }))

  it.scoped("a body's failure and interruption reach the caller as without keep; the lease stays usable", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const a = yield* makeClient(backend)
      const failed = yield* Effect.exit(a.client.withLock("f", Effect.fail("boom"), { keep: "1 second" }))
      expect(failed).toEqual(Exit.fail("boom"))
      const body = yield* Effect.fork(a.client.withLock("f", Effect.never, { keep: "1 second" }))
      yield* settle
      yield* Fiber.interrupt(body)
      expect(yield* a.client.withLock("f", Effect.succeed("ok"), { keep: "1 second" })).toBe("ok")
      expect(yield* acquiresOf(a.calls)).toBe(1)
    }))

  it.scoped("awaitRelease asks for the release itself: nothing is cached", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const a = yield* makeClient(backend)
      yield* a.client.withLock("r", Effect.void, { keep: "1 second", awaitRelease: true })
      expect(yield* releasesOf(a.calls)).toBe(1)
    }))
})
