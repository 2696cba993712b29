/**
 * Multi-name locks on the in-memory backend under `TestClock`: the rules every lock keeps (typed
 * errors, no re-entry, interruption, nothing of the body after it returns) and the accessors. The
 * store-level cases (all or none, no deadlock, a lost term, a timeout) are in the TCK
 * (`test/tck/MultiLockCases.ts`) and run on every backend.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Ref } from "effect"
import { InvalidLeaseNameError, LockReentryError, MemoryBackend, Simba } from "simba"
import { advance, makeClient, makeClients, settle } from "./helpers.js"

describe("withLocks / locks", () => {
  it.scoped("a bad name or a name listed twice fails at once, and nothing is taken", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a, b] = [clients[0]!.client, clients[1]!.client]
      const bad = yield* Effect.flip(a.withLocks(["ok", ""], Effect.void))
      expect(bad).toBeInstanceOf(InvalidLeaseNameError)
      const twice = yield* Effect.flip(a.withLocks(["x", "y", "x"], Effect.void))
      expect(twice).toBeInstanceOf(InvalidLeaseNameError)
      expect(twice.message).toContain("listed more than once")
      expect((yield* a.snapshot).elections).toEqual([])
      // Nothing was taken: b gets both at once.
      expect(yield* b.withLocks(["x", "y"], (terms) => Effect.succeed(terms.length), { timeout: 0 })).toBe(2)
    }))

  it.scoped("not re-entrant: a name of the set asked again inside the body fails with LockReentryError", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(1)
      const client = clients[0]!.client
      const inner = yield* client.withLocks(["p", "q"], Effect.flip(client.withLock("q", Effect.void)))
      expect(inner).toBeInstanceOf(LockReentryError)
      const nested = yield* client.withLock("q", Effect.flip(client.withLocks(["r", "q"], Effect.void)))
      expect(nested).toBeInstanceOf(LockReentryError)
      // Other names are fine inside, and the set is free once the body returned.
      expect(yield* client.withLocks(["p", "q"], client.withLock("r", Effect.succeed("nested")))).toBe("nested")
    }))

  it.scoped("the empty set runs the body with no terms", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(1)
      expect(yield* clients[0]!.client.withLocks([], (terms) => Effect.succeed(terms.length))).toBe(0)
    }))

  it.scoped("an interrupted caller stops the body first, then releases every name", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a, b] = [clients[0]!.client, clients[1]!.client]
      const ended = yield* Ref.make(false)
      const fiber = yield* Effect.fork(a.withLocks(["m", "n"], Effect.onInterrupt(Effect.never, () => Ref.set(ended, true))))
      yield* advance("1 second", "10 millis")
      expect((yield* a.snapshot).elections.map((e) => e.name).sort()).toEqual(["m", "n"])
      yield* Fiber.interrupt(fiber)
      expect(yield* Ref.get(ended)).toBe(true)
      const taken = yield* Effect.fork(b.withLocks(["n", "m"], (terms) => Effect.succeed(terms.map((t) => t.name))))
      yield* advance("2 seconds", "10 millis")
      expect(yield* Fiber.join(taken)).toEqual(["n", "m"])
    }))

  it.scoped("locks holds the set for its scope; the accessors use the Simba in context", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a, b] = [clients[0]!.client, clients[1]!.client]
      const inA = Layer.succeed(Simba.Simba, a)
      const names = yield* Effect.scoped(Effect.gen(function*() {
        const terms = yield* Simba.locks(["s", "t"]).pipe(Effect.provide(inA))
        const tried = yield* b.withLocks(["t"], Effect.void, { timeout: 0 }).pipe(Effect.exit)
        expect(Exit.isFailure(tried)).toBe(true)
        return terms.map((term) => term.name)
      }))
      expect(names).toEqual(["s", "t"])
      yield* settle
      const tokens = yield* Simba.withLocks(["t", "s"], (terms) => Effect.succeed(terms.map((t) => t.token))).pipe(
        Effect.provide(Layer.succeed(Simba.Simba, b))
      )
      expect(tokens).toHaveLength(2)
      for (const token of tokens) expect(token).toBeGreaterThan(0n)
    }))

  it.scoped("keep: a set taken again and again acquires each name once; every body's tokens rise", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const a = yield* makeClient(backend)
      const rounds: Array<ReadonlyArray<bigint>> = []
      for (let i = 0; i < 10; i++) {
        rounds.push(yield* a.client.withLocks(["k1", "k2"], (terms) => Effect.succeed(terms.map((t) => t.token)), { keep: "1 second" }))
      }
      const acquires = (yield* a.calls).filter((c) => c.operation === "acquire").length
      expect(acquires).toBe(2)
      for (let i = 1; i < rounds.length; i++) {
        expect(rounds[i]![0]!).toBeGreaterThan(rounds[i - 1]![0]!)
        expect(rounds[i]![1]!).toBeGreaterThan(rounds[i - 1]![1]!)
      }
      // Another client asking for one of them is served once a's cache goes.
      const b = yield* makeClient(backend)
      const next = yield* Effect.fork(b.client.withLock("k2", (term) => Effect.succeed(term.token)))
      yield* advance("1500 millis", "10 millis")
      expect(yield* Fiber.join(next)).toBeGreaterThan(rounds[9]![1]!)
    }))
})
