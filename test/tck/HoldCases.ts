/**
 * TCK, semaphores and read-write locks (`withPermits` / `permits`, `withReadLock` / `readLock`, the
 * write lock being `withLock`): never more than `limit` permits, readers together and a writer alone,
 * arrival order (a large request and a writer are not starved), typed conflicts of kind and limit,
 * holds that live and die with the session, rising tokens. Registered by `LeaseBackendSpec`; on a
 * store without holds (`tck.holds` false) one case checks they fail with `NotSupportedError`.
 */
import { expect } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import type { SimbaClient } from "../../src/Simba.js"
import * as SimbaTest from "../../src/SimbaTest.js"
import type { Term } from "../../src/Term.js"
import { awaitFiber, clientConfig, eventually, within } from "./ClientCases.js"
import * as LeaseName from "../../src/LeaseName.js"
import { acquireGranted, backend, expectHeldBy, heldLeases, open, type Tck, uniqueName } from "./TckHarness.js"

export const holdCases = (tck: Tck): void => {
  const L = tck.client.leaseDuration
  const R = tck.client.renewInterval
  const config = clientConfig(tck)
  const timeout = (millis: number) => tck.virtualTime ? 60_000 : 30_000 + millis

  if (!tck.holds) {
    tck.test("semaphores and read locks fail with NotSupportedError; write locks are plain locks", Effect.gen(function*() {
      expect((yield* backend).holds).toBe(false)
      const net = yield* SimbaTest.networkFromContext
      const name = yield* uniqueName("unsupported")
      const { client } = yield* SimbaTest.makeClient(net, config)
      const permits = yield* Effect.flip(client.withPermits(name, 1, Effect.void, { limit: 2 }))
      expect(permits._tag).toBe("NotSupportedError")
      const read = yield* Effect.flip(client.withReadLock(name, Effect.void))
      expect(read._tag).toBe("NotSupportedError")
      const written = yield* Effect.fork(client.withWriteLock(name, (term) => Effect.succeed(term.token)))
      expect(yield* awaitFiber(tck, "the write lock", written, within(tck, 2 * R))).toBeGreaterThan(0n)
    }), timeout(4 * R))
    return
  }

  tck.test("one hold name, two sessions (a request retried from its client's new session): one holder, the other refused until it ends", Effect.gen(function*() {
    const store = yield* backend
    const pool = yield* uniqueName("retried")
    const name = LeaseName.holdName({ pool, mode: "permits", weight: 1, limit: 3, id: "retried.1" })
    const [old, renewed, other] = [yield* open(tck), yield* open(tck), yield* open(tck)]
    const token = yield* acquireGranted(old, name)
    // The new session asks for the same hold: refused (never a second holder of one name), and a
    // later release of a permit to the pool does not grant it behind the first holder's back.
    expectHeldBy(yield* store.acquire(renewed, name))
    const otherName = LeaseName.holdName({ pool, mode: "permits", weight: 1, limit: 3, id: "other.1" })
    const otherToken = yield* acquireGranted(other, otherName)
    yield* store.release(other, otherName, otherToken)
    expectHeldBy(yield* store.acquire(renewed, name))
    expect((yield* heldLeases(tck, old)).map((lease) => [lease.name, lease.token])).toEqual([[name, token]])
    expect(yield* heldLeases(tck, renewed)).toEqual([])
    // Once the first session lets it go, the new one gets it, with a newer token.
    yield* store.closeSession(old)
    const again = yield* acquireGranted(renewed, name)
    expect(again).toBeGreaterThan(otherToken)
    expect((yield* heldLeases(tck, renewed)).map((lease) => lease.name)).toEqual([name])
  }), timeout(4 * R))

  // A waiter's `HeldBy` carries a token: a client adopts a grant pushed to it later only above the
  // tokens it has seen, so a waiter told nothing would give its grant back and lose its place. One
  // session holds `held` of a pool; another asks for `waiting` of it, is refused with a token at least
  // the holder's, and once the holder releases, is granted a token above it.
  const waiterIsToldAToken = (held: (pool: string) => string, waiting: (pool: string) => string) =>
    Effect.gen(function*() {
      const store = yield* backend
      const pool = yield* uniqueName("floor")
      const [holder, waiter] = [yield* open(tck), yield* open(tck)]
      const token = yield* acquireGranted(holder, held(pool))
      const floor = expectHeldBy(yield* store.acquire(waiter, waiting(pool))).token
      expect(floor).toBeDefined()
      expect(floor!).toBeGreaterThanOrEqual(token)
      yield* store.release(holder, held(pool), token)
      const granted = yield* eventually(
        tck,
        `the grant of ${waiting(pool)}`,
        Effect.map(store.acquire(waiter, waiting(pool)), (reply) => reply._tag === "Granted" ? Option.some(reply.token) : Option.none()),
        within(tck, 2 * R)
      )
      expect(granted).toBeGreaterThan(floor!)
    })

  const permit = (id: string) => (pool: string) => LeaseName.holdName({ pool, mode: "permits", weight: 1, limit: 1, id })

  tck.test(
    "a semaphore's waiter is told a token in its HeldBy: at least the grants before it, below its own grant",
    waiterIsToldAToken(permit("floor.a"), permit("floor.b")),
    timeout(4 * R)
  )

  tck.test(
    "a read-write lock's waiting writer is told a token in its HeldBy: at least the read holds before it, below its own grant",
    waiterIsToldAToken((pool) => LeaseName.holdName({ pool, mode: "read", weight: 1, limit: 0, id: "floor.r" }), (pool) => pool),
    timeout(4 * R)
  )

  /** Holds `scope` open on a fiber of its own until `release` closes it; resolves once `take` holds. */
  const holdOpen = (take: Effect.Effect<Term, unknown, Scope.Scope>) =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const taking = yield* Effect.fork(Scope.extend(take, scope))
      return { scope, taking, release: Scope.close(scope, Exit.void) }
    })

  tck.test("semaphore: never more than limit permits at once, all of them used, tokens rise grant by grant", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("sem")
    const clients = yield* SimbaTest.makeClients(net, 4, config)
    let held = 0
    let most = 0
    const tokens: Array<bigint> = []
    const rounds = tck.virtualTime ? 6 : 4
    const loops = yield* Effect.forEach(clients, (c, i) =>
      Effect.fork(Effect.forEach(Array.from({ length: rounds }), () =>
        c.client.withPermits(name, i === 3 ? 2 : 1, (term) =>
          Effect.gen(function*() {
            held += i === 3 ? 2 : 1
            most = Math.max(most, held)
            tokens.push(term.token)
            expect(term.name).toBe(name)
            yield* Effect.sleep(Duration.millis(20))
            held -= i === 3 ? 2 : 1
          }), { limit: 3 }), { discard: true })))
    yield* eventually(
      tck,
      "every client's rounds",
      Effect.map(Effect.forEach(loops, Fiber.poll), (polls) => polls.every(Option.isSome) ? Option.some(true) : Option.none()),
      within(tck, rounds * 4 * 2 * R)
    )
    for (const loop of loops) yield* awaitFiber(tck, "a client's rounds", loop, within(tck, 0))
    expect(most).toBeLessThanOrEqual(3)
    expect(most).toBeGreaterThanOrEqual(2)
    expect(tokens).toHaveLength(4 * rounds)
    expect(new Set(tokens).size).toBe(tokens.length)
  }), timeout(60 * R))

  tck.test("semaphore: arrival order: a 3-permit request is not passed by a later 1-permit one that would fit", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("fair")
    const [a, b, c] = yield* SimbaTest.makeClients(net, 3, config)
    const one = yield* holdOpen(a!.client.permits(name, 1, { limit: 3 }))
    const first = yield* awaitFiber(tck, "a's permit", one.taking, within(tck, 2 * R))
    const started: Array<string> = []
    const run = (who: string, client: SimbaClient, permits: number) =>
      Effect.fork(client.withPermits(name, permits, (term) =>
        Effect.sync(() => started.push(who)).pipe(Effect.zipRight(Effect.sleep(Duration.millis(50))), Effect.as(term.token)), { limit: 3 }))
    const big = yield* run("b", b!.client, 3)
    yield* tck.advance(Duration.millis(R / 2))
    const small = yield* run("c", c!.client, 1)
    yield* tck.advance(Duration.millis(R / 2))
    // Two permits are free, and c asks for one: it still waits behind b.
    expect(started).toEqual([])
    // A try on the same semaphore is refused too, while b waits.
    const tried = yield* Effect.either(c!.client.withPermits(name, 1, Effect.void, { limit: 3, timeout: 0 }))
    expect(Either.isLeft(tried) ? tried.left._tag : "ran").toBe("LockTimeoutError")
    yield* one.release
    const tokenB = yield* awaitFiber(tck, "b's three permits", big, within(tck, 3 * R))
    const tokenC = yield* awaitFiber(tck, "c's permit", small, within(tck, 3 * R))
    expect(started).toEqual(["b", "c"])
    expect(tokenB).toBeGreaterThan(first.token)
    expect(tokenC).toBeGreaterThan(tokenB)
  }), timeout(20 * R))

  tck.test("read-write: readers together, a writer alone, and a reader arriving after a waiting writer waits behind it", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("rw")
    const [a, b, c, d, e] = yield* SimbaTest.makeClients(net, 5, config)
    const readA = yield* holdOpen(a!.client.readLock(name))
    const readB = yield* holdOpen(b!.client.readLock(name))
    const termA = yield* awaitFiber(tck, "a's read lock", readA.taking, within(tck, 2 * R))
    const termB = yield* awaitFiber(tck, "b's read lock", readB.taking, within(tck, 2 * R))
    expect(termB.token).not.toBe(termA.token)
    const order: Array<string> = []
    const writer = yield* Effect.fork(c!.client.withWriteLock(name, (term) =>
      Effect.sync(() => order.push("write")).pipe(Effect.zipRight(Effect.sleep(Duration.millis(50))), Effect.as(term.token))))
    yield* tck.advance(Duration.millis(R / 2))
    // c's request waits on the store before d asks (a loaded machine can delay it past any fixed
    // pause): once a writer waits, a try for a read lock is refused.
    yield* eventually(
      tck,
      "c's write request queued",
      Effect.map(
        Effect.either(e!.client.withReadLock(name, Effect.void, { timeout: 0, awaitRelease: true })),
        (tried) => Either.isLeft(tried) && tried.left._tag === "LockTimeoutError" ? Option.some(true) : Option.none()
      ),
      within(tck, 3 * R)
    )
    const reader = yield* Effect.fork(d!.client.withReadLock(name, (term) => Effect.sync(() => order.push("read")).pipe(Effect.as(term.token))))
    yield* tck.advance(Duration.millis(R / 2))
    expect(order).toEqual([])
    yield* readA.release
    yield* tck.advance(Duration.millis(R / 2))
    expect(order).toEqual([])
    yield* readB.release
    const written = yield* awaitFiber(tck, "c's write lock", writer, within(tck, 3 * R))
    const read = yield* awaitFiber(tck, "d's read lock", reader, within(tck, 3 * R))
    expect(order).toEqual(["write", "read"])
    expect(written).toBeGreaterThan(termB.token > termA.token ? termB.token : termA.token)
    expect(read).toBeGreaterThan(written)
  }), timeout(20 * R))

  tck.test("kinds and limits: another limit, a lock on a semaphore, a semaphore on a lock fail with LockConflictError", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const [sem, locked] = yield* Effect.all([uniqueName("kind-sem"), uniqueName("kind-lock")])
    const [a, b] = yield* SimbaTest.makeClients(net, 2, config)
    // Its release is awaited: b asks for another limit once the store has forgotten the pool.
    const holding = yield* holdOpen(a!.client.permits(sem, 1, { limit: 3, awaitRelease: true }))
    yield* awaitFiber(tck, "a's permit", holding.taking, within(tck, 2 * R))
    const conflicts = yield* Effect.fork(Effect.all([
      Effect.flip(b!.client.withPermits(sem, 1, Effect.void, { limit: 5 })),
      Effect.flip(b!.client.withLock(sem, Effect.void)),
      Effect.flip(b!.client.withReadLock(sem, Effect.void))
    ]))
    const [limit, lock, read] = yield* awaitFiber(tck, "b's three requests", conflicts, within(tck, 3 * R))
    expect(limit._tag === "LockConflictError" ? [limit.lease, limit.held, limit.asked] : limit._tag)
      .toEqual([sem, "semaphore of 3 permits", "semaphore of 5 permits"])
    expect(lock._tag === "LockConflictError" ? [lock.held, lock.asked] : lock._tag).toEqual(["semaphore of 3 permits", "lock"])
    expect(read._tag === "LockConflictError" ? [read.held, read.asked] : read._tag).toEqual(["semaphore of 3 permits", "read-write lock"])
    const lockHeld = yield* holdOpen(a!.client.lock(locked))
    yield* awaitFiber(tck, "a's lock", lockHeld.taking, within(tck, 2 * R))
    const onLock = yield* Effect.fork(Effect.flip(b!.client.withPermits(locked, 1, Effect.void, { limit: 2 })))
    const refused = yield* awaitFiber(tck, "b's permits on a lock", onLock, within(tck, 2 * R))
    expect(refused._tag === "LockConflictError" ? [refused.held, refused.asked] : refused._tag).toEqual(["lock", "semaphore of 2 permits"])
    // Once nobody holds or waits, the name can be a semaphore of another limit.
    yield* holding.release
    const after = yield* Effect.fork(b!.client.withPermits(sem, 4, Effect.succeed("ran"), { limit: 4 }))
    expect(yield* awaitFiber(tck, "b's permits of another limit", after, within(tck, 3 * R))).toBe("ran")
  }), timeout(20 * R))

  tck.test("holds live and die with the session: a paused holder's permits come back when its session expires, its body interrupted", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("sem-lost")
    const [a, b] = yield* SimbaTest.makeClients(net, 2, config)
    let started = false
    const body = yield* Effect.fork(Effect.either(a!.client.withPermits(name, 2, Effect.zipRight(Effect.sync(() => {
      started = true
    }), Effect.never), { limit: 2 })))
    yield* eventually(tck, "a's body", Effect.sync(() => started ? Option.some(true) : Option.none()), within(tck, 2 * R))
    const waiting = yield* Effect.fork(b!.client.withPermits(name, 1, (term) => Effect.succeed(term.token), { limit: 2 }))
    yield* a!.faults.pause()
    yield* tck.advance(Duration.millis(L + R))
    const lost = yield* awaitFiber(tck, "a's body to end", body, within(tck, L + 2 * R))
    expect(Either.isLeft(lost) ? lost.left._tag : lost.right).toBe("LockLostError")
    const token = yield* awaitFiber(tck, "b's permit", waiting, within(tck, L + 4 * R))
    expect(token).toBeGreaterThan(0n)
    yield* a!.faults.resume
  }), timeout(8 * L))
}
