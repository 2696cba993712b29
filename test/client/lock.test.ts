import { describe, expect, it } from "@effect/vitest"
import { Clock, Deferred, Effect, Exit, Fiber, Option, Ref } from "effect"
import { ElectionAlreadyStartedError, LockLostError, LockReentryError, LockTimeoutError, Simba, type Term } from "simba"
import { advance, eventsOf, makeClients, settle } from "./helpers.js"

describe("withLock", () => {
  it.scoped("mutual exclusion across clients and fibers; tokens strictly increase in order of entry", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(3)
      const inside = yield* Ref.make(0)
      const overlaps = yield* Ref.make(0)
      const entries = yield* Ref.make<ReadonlyArray<bigint>>([])
      const counter = yield* Ref.make(0)
      const body = (token: bigint) =>
        Effect.gen(function*() {
          const now = yield* Ref.updateAndGet(inside, (n) => n + 1)
          if (now > 1) yield* Ref.update(overlaps, (n) => n + 1)
          yield* Ref.update(entries, (all) => [...all, token])
          const value = yield* Ref.get(counter)
          yield* Effect.sleep("20 millis")
          yield* Ref.set(counter, value + 1)
          yield* Ref.update(inside, (n) => n - 1)
        })
      const fibers = yield* Effect.forEach(
        clients.flatMap(({ client }) => [client, client, client]),
        (client) => Effect.fork(Effect.repeatN(client.withLock("counter", (term) => body(term.token)), 2))
      )
      yield* advance("8 seconds", "10 millis")
      yield* Effect.forEach(fibers, Fiber.join)
      expect(yield* Ref.get(overlaps)).toBe(0)
      expect(yield* Ref.get(counter)).toBe(27)
      const tokens = yield* Ref.get(entries)
      expect(tokens).toHaveLength(27)
      tokens.forEach((token, i) => {
        if (i > 0) expect(token).toBeGreaterThan(tokens[i - 1]!)
      })
    }))

  it.scoped("same-name calls in one client queue FIFO", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(1)
      const client = clients[0]!.client
      const order = yield* Ref.make<ReadonlyArray<number>>([])
      const fibers: Array<Fiber.RuntimeFiber<void, unknown>> = []
      for (let i = 1; i <= 5; i++) {
        fibers.push(yield* Effect.fork(client.withLock("fifo", Effect.zipRight(
          Ref.update(order, (all) => [...all, i]),
          Effect.sleep("10 millis")
        ))))
        yield* settle
      }
      yield* advance("2 seconds", "5 millis")
      yield* Effect.forEach(fibers, Fiber.join)
      expect(yield* Ref.get(order)).toEqual([1, 2, 3, 4, 5])
    }))

  it.scoped("timeout gives LockTimeoutError, and the timed-out acquisition never takes the lock later", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(3)
      const [a, b, c] = clients as [typeof clients[0], typeof clients[0], typeof clients[0]]
      const holder = yield* Effect.fork(a.client.withLock("busy", Effect.sleep("3 seconds")))
      yield* advance("100 millis")
      const waiter = yield* Effect.fork(b.client.withLock("busy", Effect.void, { timeout: "1 second" }))
      yield* advance("1100 millis")
      const exit = yield* Fiber.await(waiter)
      expect(Exit.isFailure(exit)).toBe(true)
      const error = yield* Effect.flip(exit)
      expect(error).toBeInstanceOf(LockTimeoutError)
      yield* advance("3 seconds")
      yield* Fiber.join(holder)
      // The lock is free for anyone else, and B never held it.
      const start = yield* Clock.currentTimeMillis
      const tokenC = yield* Effect.fork(c.client.withLock("busy", (term) => Effect.succeed(term.token)))
      yield* advance("100 millis")
      expect(yield* Fiber.join(tokenC)).toBeGreaterThan(0n)
      expect(yield* Clock.currentTimeMillis).toBeLessThan(start + 200)
      expect((yield* eventsOf(b.events, "Elected")).filter((r) => r.event.name === "busy")).toEqual([])
      expect((yield* b.client.snapshot).elections).toEqual([])
    }))

  it.scoped("the body is interrupted and withLock fails with LockLostError when the term is lost", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a] = clients as [typeof clients[0]]
      const interrupted = yield* Ref.make(false)
      const locked = yield* Effect.fork(a.client.withLock("lost", (term) =>
        Effect.never.pipe(
          Effect.onInterrupt(() => Ref.set(interrupted, true)),
          Effect.as(term.token)
        )))
      yield* advance("200 millis")
      yield* a.hang
      yield* advance("5 seconds", "20 millis")
      const exit = yield* Fiber.await(locked)
      const error = yield* Effect.flip(exit)
      expect(error).toBeInstanceOf(LockLostError)
      expect(error).toMatchObject({ _tag: "LockLostError", lease: "lost", reason: "DEADLINE_PASSED" })
      expect((error as LockLostError).token).toBeGreaterThan(0n)
      expect(yield* Ref.get(interrupted)).toBe(true)
    }))

  it.scoped("interrupting withLock stops the body (its cleanup included) before the lock is released", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a, b] = clients as [typeof clients[0], typeof clients[0]]
      const order = yield* Ref.make<ReadonlyArray<string>>([])
      const note = (what: string) => Ref.update(order, (all) => [...all, what])
      const entered = yield* Deferred.make<void>()
      const locked = yield* Effect.fork(a.client.withLock("cleanup", Effect.zipRight(
        Deferred.succeed(entered, undefined),
        Effect.never.pipe(Effect.onInterrupt(() => Effect.zipRight(Effect.sleep("1 second"), note("a cleaned up"))))
      )))
      yield* advance("100 millis")
      yield* Deferred.await(entered)
      const waiting = yield* Effect.fork(b.client.withLock("cleanup", note("b holds")))
      yield* advance("100 millis")
      const interrupting = yield* Effect.fork(Fiber.interrupt(locked))
      yield* advance("2 seconds", "10 millis")
      yield* Fiber.join(interrupting)
      yield* Fiber.join(waiting)
      expect(yield* Ref.get(order)).toEqual(["a cleaned up", "b holds"])
    }))

  it.scoped("lock(name) holds the lease until the scope closes", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a, b] = clients as [typeof clients[0], typeof clients[0]]
      const term = yield* a.client.lock("scoped")
      expect(yield* term.isValid).toBe(true)
      const other = yield* Effect.fork(b.client.withLock("scoped", (t) => Effect.succeed(t.token), { timeout: "2 seconds" }))
      yield* advance("2100 millis")
      expect(Exit.isFailure(yield* Fiber.await(other))).toBe(true)
      expect(yield* term.isValid).toBe(true)
    }))

  it.scoped("tryWithLock runs the body on a free lock, and gives None without running it on a held one", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a, b] = clients as [typeof clients[0], typeof clients[0]]
      expect(yield* a.client.tryWithLock("try", (term) => Effect.succeed(term.token))).toEqual(Option.some(1n))
      // Held by another fiber of a (this fiber holding it would be re-entry, see below).
      const holding = yield* Deferred.make<Term.Term>()
      yield* Effect.forkScoped(Effect.flatMap(a.client.lock("try"), (term) => Effect.zipRight(Deferred.succeed(holding, term), Effect.never)))
      const held = yield* Deferred.await(holding)
      const ran = yield* Ref.make(false)
      expect(yield* b.client.tryWithLock("try", Ref.set(ran, true))).toEqual(Option.none())
      // A lock this client holds (another fiber's) is not waited for either: the try does not queue.
      expect(yield* a.client.tryWithLock("try", Ref.set(ran, true)).pipe(Effect.fork, Effect.flatMap(Fiber.join)))
        .toEqual(Option.none())
      expect(yield* Ref.get(ran)).toBe(false)
      const timedOut = yield* Effect.flip(b.client.withLock("try", Effect.void, { timeout: 0 }))
      expect(timedOut).toBeInstanceOf(LockTimeoutError)
      expect(timedOut.message).toBe("lock try not acquired within 0")
      expect(yield* held.isValid).toBe(true)
      expect((yield* b.client.snapshot).elections).toEqual([])
    }))

  it.scoped("the Simba accessor tryWithLock works on the client in context", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(1)
      const result = yield* Simba.tryWithLock("accessor", Effect.succeed("done")).pipe(
        Effect.provideService(Simba.Simba, clients[0]!.client)
      )
      expect(result).toEqual(Option.some("done"))
    }))
})

describe("re-entrancy and the name space", () => {
  it.scoped("a nested withLock on the same name fails fast with LockReentryError instead of deadlocking", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(1)
      const client = clients[0]!.client
      const inner = yield* client.withLock("outer", Effect.flip(client.withLock("outer", Effect.void)))
      expect(inner).toBeInstanceOf(LockReentryError)
      expect(inner.message).toBe(
        "lock outer is already held by this fiber or a fiber it was forked from (locks are not re-entrant)"
      )
      // A fiber forked inside the body counts as the holder too; another name is fine.
      const forked = yield* client.withLock(
        "outer",
        Effect.fork(Effect.flip(client.withLock("outer", Effect.void))).pipe(Effect.flatMap(Fiber.join))
      )
      expect(forked._tag).toBe("LockReentryError")
      expect(yield* client.withLock("outer", client.withLock("other", Effect.succeed(2)))).toBe(2)
      // Held through lock(name) in a scope: the same.
      const scoped = yield* Effect.scoped(
        Effect.zipRight(client.lock("outer"), Effect.flip(client.withLock("outer", Effect.void, { timeout: 0 })))
      )
      expect(scoped._tag).toBe("LockReentryError")
      // After the scope the name is free for this fiber again.
      expect(yield* client.withLock("outer", Effect.succeed("again"))).toBe("again")
    }))

  it.scoped("holding a name on one client does not stop the fiber from waiting for it on another", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a, b] = clients as [typeof clients[0], typeof clients[0]]
      const result = yield* a.client.withLock(
        "two",
        Effect.flip(b.client.withLock("two", Effect.void, { timeout: "1 second" })).pipe(
          Effect.fork,
          Effect.tap(() => advance("1100 millis")),
          Effect.flatMap(Fiber.join)
        )
      )
      expect(result._tag).toBe("LockTimeoutError")
    }))

  it.scoped("locks and elections share one name space per client: the clash is ElectionAlreadyStartedError", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(1)
      const client = clients[0]!.client
      yield* Effect.forkScoped(client.runWhileLeader("dup", () => Effect.never))
      yield* advance("1 second")
      const error = yield* Effect.flip(client.withLock("dup", Effect.void))
      expect(error).toBeInstanceOf(ElectionAlreadyStartedError)
      expect(error.message).toBe(
        "an election named dup is already started on this client (locks and elections share one name space per client)"
      )
      const tried = yield* Effect.flip(client.tryWithLock("dup", Effect.void))
      expect(tried._tag).toBe("ElectionAlreadyStartedError")
    }))
})
