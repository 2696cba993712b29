/**
 * Semaphores and read locks on the in-memory store under `TestClock`: the client's side (argument
 * checks, typed errors, re-entrancy, the term and the snapshot, no caching, interruption, a store
 * without holds). The store's rule (limit, arrival order, readers and writers, conflicts, sessions) is
 * in the TCK (`test/tck/HoldCases.ts`), on every store that grants holds.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Ref } from "effect"
import { InvalidLeaseNameError, InvalidLockRequestError, LockReentryError, MemoryBackend, NotSupportedError } from "simba"
import { advance, makeClient, makeClients, settle } from "./helpers.js"

describe("withPermits / withReadLock (client)", () => {
  it.scoped("bad arguments fail at once with typed errors, before anything reaches the store", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const { calls, client } = yield* makeClient(backend)
      const cases = [
        client.withPermits("jobs", 0, Effect.void, { limit: 3 }),
        client.withPermits("jobs", 4, Effect.void, { limit: 3 }),
        client.withPermits("jobs", 1, Effect.void, { limit: 0 }),
        client.withPermits("jobs", 1, Effect.void, { limit: 2.5 }),
        client.withPermits("jobs", 1.5, Effect.void, { limit: 3 })
      ]
      for (const request of cases) expect(yield* Effect.flip(request)).toBeInstanceOf(InvalidLockRequestError)
      expect(yield* Effect.flip(client.withPermits("bad name", 1, Effect.void, { limit: 3 }))).toBeInstanceOf(InvalidLeaseNameError)
      expect(yield* Effect.flip(client.withReadLock("", Effect.void))).toBeInstanceOf(InvalidLeaseNameError)
      expect((yield* calls).filter((c) => c.operation === "acquire")).toEqual([])
    }))

  it.scoped("not re-entrant: any lock of the name asked again inside a hold fails with LockReentryError", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const { client } = yield* makeClient(backend)
      const inner = yield* client.withPermits("jobs", 1, Effect.all([
        Effect.flip(client.withPermits("jobs", 1, Effect.void, { limit: 3 })),
        Effect.flip(client.withLock("jobs", Effect.void))
      ]), { limit: 3 })
      for (const error of inner) expect(error).toBeInstanceOf(LockReentryError)
      const inRead = yield* client.withReadLock("cache", Effect.flip(client.withWriteLock("cache", Effect.void)))
      expect(inRead).toBeInstanceOf(LockReentryError)
    }))

  it.scoped("the term names the semaphore; the snapshot lists the hold under its own name while held", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const { client } = yield* makeClient(backend)
      const seen = yield* client.withPermits("jobs", 2, (term) =>
        Effect.map(client.snapshot, (snapshot) => ({ name: term.name, held: snapshot.elections.map((e) => e.name) })), { limit: 3 })
      expect(seen.name).toBe("jobs")
      expect(seen.held).toHaveLength(1)
      expect(seen.held[0]).toMatch(/^jobs~p~2~3~[A-Za-z0-9.]+$/)
      yield* settle
      expect((yield* client.snapshot).elections).toEqual([])
    }))

  it.scoped("holds are never cached, whatever the client's lockKeep: the permit is free for another client at once", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const a = yield* makeClient(backend, { leaseDuration: "3 seconds", lockKeep: "2 seconds" })
      const b = yield* makeClient(backend)
      yield* a.client.withPermits("one", 1, Effect.void, { limit: 1 })
      yield* settle
      expect((yield* a.client.snapshot).cached).toEqual([])
      const tried = yield* b.client.withPermits("one", 1, Effect.succeed("ran"), { limit: 1, timeout: 0 })
      expect(tried).toBe("ran")
    }))

  it.scoped("an interrupted caller stops the body, then gives the permits back", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const a = yield* makeClient(backend)
      const b = yield* makeClient(backend)
      const stopped = yield* Ref.make(false)
      const fiber = yield* Effect.fork(a.client.withPermits("all", 2, Effect.onInterrupt(Effect.never, () => Ref.set(stopped, true)), { limit: 2 }))
      yield* advance("500 millis", "10 millis")
      yield* Fiber.interrupt(fiber)
      expect(yield* Ref.get(stopped)).toBe(true)
      const next = yield* Effect.fork(b.client.withPermits("all", 2, Effect.succeed("ran"), { limit: 2 }))
      yield* advance("1 second", "10 millis")
      expect(yield* Fiber.join(next)).toBe("ran")
    }))

  it.scoped("a waiting writer whose renewals fail keeps its place: the grant pushed while SUSPENDED is not given back, so the reader behind it still waits", () =>
    Effect.gen(function*() {
      const { clients: [a, b, c, d] } = yield* makeClients(4)
      const order: Array<string> = []
      const readersDone = yield* Deferred.make<void>()
      const readers = yield* Effect.all([a!, b!].map((x) =>
        Effect.fork(x.client.withReadLock("rw", Deferred.await(readersDone)))
      ))
      yield* advance("100 millis", "10 millis")
      const writer = yield* Effect.fork(c!.client.withWriteLock("rw", Effect.sync(() => order.push("write"))))
      yield* advance("100 millis", "10 millis")
      const reader = yield* Effect.fork(d!.client.withReadLock("rw", Effect.sync(() => order.push("read"))))
      yield* advance("100 millis", "10 millis")
      // c's renewals fail from now on: at its next renewal its session is SUSPENDED (not yet ended).
      yield* c!.faults.fail({ only: "keepAlive" })
      yield* advance("1200 millis", "10 millis")
      const suspended = (yield* Ref.get(c!.events)).filter((r) => r.event._tag === "SessionSuspended")
      expect(suspended).toHaveLength(1)
      // The readers leave: the store hands the write lock to c, its head waiter, by a push.
      yield* Deferred.succeed(readersDone, undefined)
      yield* Effect.forEach(readers, Fiber.join)
      yield* advance("50 millis", "10 millis")
      expect(order).toEqual([])
      expect((yield* c!.calls).filter((call) => call.operation === "release")).toEqual([])
      // Renewals get through again: the next one lists the lease, c adopts it, then d reads.
      yield* c!.faults.heal
      yield* advance("2 seconds", "10 millis")
      yield* Fiber.join(writer)
      yield* Fiber.join(reader)
      expect(order).toEqual(["write", "read"])
    }))

  it.scoped("a store without holds: NotSupportedError naming it; the write lock is the plain lock", () =>
    Effect.gen(function*() {
      const memory = yield* MemoryBackend.make()
      const { client } = yield* makeClient({ ...memory, holds: false })
      const permits = yield* Effect.flip(client.withPermits("jobs", 1, Effect.void, { limit: 2 }))
      expect(permits).toBeInstanceOf(NotSupportedError)
      expect(permits.message).toBe("the memory backend does not support semaphores yet")
      expect(yield* Effect.flip(client.withReadLock("jobs", Effect.void))).toBeInstanceOf(NotSupportedError)
      expect(yield* client.withWriteLock("jobs", (term) => Effect.succeed(term.token))).toBeGreaterThan(0n)
    }))
})
