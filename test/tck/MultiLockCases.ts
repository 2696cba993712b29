/**
 * TCK, multi-name locks (`withLocks` / `locks`) on the backend under test: all of the names or none,
 * the terms in the order asked for, fair hand-off per name, no deadlock between clients locking
 * overlapping sets in different orders, a lost term interrupting the body, a timeout leaving nothing
 * held. Registered by `LeaseBackendSpec`.
 */
import { expect } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as SimbaTest from "../../src/SimbaTest.js"
import { awaitFiber, clientConfig, eventually, within } from "./ClientCases.js"
import { backend, open, type Tck, uniqueName } from "./TckHarness.js"

export const multiLockCases = (tck: Tck): void => {
  const L = tck.client.leaseDuration
  const R = tck.client.renewInterval
  const config = clientConfig(tck)
  const timeout = (millis: number) => tck.virtualTime ? 60_000 : 30_000 + millis

  /**
   * Whether an outsider session is refused `name` right now: it releases what it is granted and
   * withdraws from the queue it joined when refused (a hand-off must not reach it later).
   */
  const heldOnStore = (observer: string, name: string) =>
    Effect.flatMap(backend, (b) =>
      Effect.flatMap(b.acquire(observer, name), (reply) =>
        reply._tag === "Granted"
          ? Effect.as(b.release(observer, name, reply.token), false)
          : Effect.as(b.withdraw(observer, name), true)))

  tck.test("all or none: the terms come in the order asked; a try on a set with one name held takes none", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const [x, y, z, w] = yield* Effect.all([uniqueName("mx"), uniqueName("my"), uniqueName("mz"), uniqueName("mw")])
    const [a, c] = yield* SimbaTest.makeClients(net, 2, config)
    const observer = yield* open(tck)
    const held = yield* Effect.fork(Effect.scoped(Effect.flatMap(a!.client.locks([z!, x!, y!]), (terms) =>
      Effect.gen(function*() {
        expect(terms.map((term) => term.name)).toEqual([z, x, y])
        for (const term of terms) expect(yield* term.isValid).toBe(true)
        expect(new Set(terms.map((term) => term.sessionId)).size).toBe(1)
        // c's try on {w, z}: z is a's, so c gets neither; w is free afterwards.
        const tried = yield* Effect.either(c!.client.withLocks([w!, z!], Effect.succeed("ran"), { timeout: 0 }))
        expect(Either.isLeft(tried) ? tried.left._tag : tried.right).toBe("LockTimeoutError")
        // The give-back of w travels after the try returned (as a release does).
        yield* eventually(tck, "w free", Effect.map(heldOnStore(observer, w!), (held) => held ? Option.none() : Option.some(true)), within(tck, R))
        for (const name of [x!, y!, z!]) expect(yield* heldOnStore(observer, name)).toBe(true)
        return terms.map((term) => term.token)
      }))))
    const tokens = yield* awaitFiber(tck, "a's three locks", held, within(tck, 4 * R))
    // Released together: c takes {x, z} with tokens above a's.
    const next = yield* Effect.fork(c!.client.withLocks([x!, z!], (terms) => Effect.succeed(terms.map((term) => term.token))))
    const [tokenX, tokenZ] = yield* awaitFiber(tck, "c's lock of x and z", next, within(tck, 4 * R))
    expect(tokenX).toBeGreaterThan(tokens[1]!)
    expect(tokenZ).toBeGreaterThan(tokens[0]!)
  }), timeout(12 * R))

  tck.test("no deadlock: three clients lock overlapping sets listed in different orders, never two holders of a name", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const [p, q, r] = yield* Effect.all([uniqueName("dp"), uniqueName("dq"), uniqueName("dr")])
    const clients = yield* SimbaTest.makeClients(net, 3, config)
    const sets = [[p!, q!, r!], [r!, q!, p!], [q!, p!]]
    const holders = new Map<string, number>()
    const violations: Array<string> = []
    const tokens = new Map<string, Array<bigint>>()
    const rounds = tck.virtualTime ? 20 : 6
    const loops = yield* Effect.forEach(clients, (c, i) =>
      Effect.fork(Effect.forEach(Array.from({ length: rounds }, (_, n) => n), () =>
        c.client.withLocks(sets[i]!, (terms) =>
          Effect.gen(function*() {
            for (const term of terms) {
              const holding = (holders.get(term.name) ?? 0) + 1
              holders.set(term.name, holding)
              if (holding > 1) violations.push(`${term.name} held twice (token ${term.token})`)
              tokens.set(term.name, [...(tokens.get(term.name) ?? []), term.token])
            }
            yield* Effect.yieldNow()
            yield* Effect.sleep(Duration.millis(1))
            for (const term of terms) holders.set(term.name, holders.get(term.name)! - 1)
          })), { discard: true })))
    yield* eventually(
      tck,
      "every client's rounds",
      Effect.map(Effect.forEach(loops, Fiber.poll), (polls) => polls.every(Option.isSome) ? Option.some(polls) : Option.none()),
      within(tck, 3 * rounds * 2 * R)
    )
    for (const [i, loop] of loops.entries()) {
      const exit = yield* Fiber.await(loop)
      expect(exit._tag, `client ${i}: ${String(exit)}`).toBe("Success")
    }
    expect(violations).toEqual([])
    for (const name of [p!, q!, r!]) {
      const taken = tokens.get(name)!
      expect(taken).toHaveLength(name === r ? 2 * rounds : 3 * rounds)
      for (let i = 1; i < taken.length; i++) expect(taken[i]!).toBeGreaterThan(taken[i - 1]!)
    }
  }), timeout(60 * R))

  tck.test("no deadlock: a set waiting for its first name and another holding a later name both finish", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    // p before q in the global order.
    const [p, q] = (yield* Effect.all([uniqueName("cp"), uniqueName("cq")])).sort()
    const [a, b, c] = yield* SimbaTest.makeClients(net, 3, config)
    const scope = yield* Scope.make()
    yield* awaitFiber(tck, "c's lock of p", yield* Effect.fork(Scope.extend(c!.client.lock(p!), scope)), within(tck, 2 * R))
    // a asks for {p, q}: p is c's, so a waits for p holding nothing.
    const setA = yield* Effect.fork(a!.client.withLocks([p!, q!], (terms) => Effect.succeed(terms.map((term) => term.token))))
    yield* tck.advance(Duration.millis(R / 2))
    // b asks for {q, p}, listed the other way round: taking them in that order, b would hold q and
    // wait for p, and a, granted p, would wait for q for ever.
    const setB = yield* Effect.fork(b!.client.withLocks([q!, p!], (terms) => Effect.succeed(terms.map((term) => term.token))))
    yield* tck.advance(Duration.millis(R / 2))
    yield* Scope.close(scope, Exit.void)
    const tokensA = yield* awaitFiber(tck, "a's set", setA, within(tck, 4 * R))
    const tokensB = yield* awaitFiber(tck, "b's set", setB, within(tck, 4 * R))
    // One after the other (which first is the store's queue's business: MySQL's waiters poll).
    expect(tokensB[1]).not.toBe(tokensA[0])
    expect(tokensB[0]).not.toBe(tokensA[1])
    expect(tokensB[1]! > tokensA[0]!).toBe(tokensB[0]! > tokensA[1]!)
  }), timeout(12 * R))

  tck.test("a term of the set lost interrupts the body with LockLostError; a timeout waiting leaves nothing held", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const [x, y] = yield* Effect.all([uniqueName("lx"), uniqueName("ly")])
    const [a, c] = yield* SimbaTest.makeClients(net, 2, config)
    const observer = yield* open(tck)
    // c holds y; a waits for {x, y} for a while and times out, naming y, holding nothing after.
    const holdY = yield* Effect.forkScoped(c!.client.lock(y!))
    yield* awaitFiber(tck, "c's lock of y", holdY, within(tck, 2 * R))
    const waited = yield* Effect.fork(Effect.either(a!.client.withLocks([x!, y!], Effect.succeed("ran"), { timeout: Duration.millis(R) })))
    const timedOut = yield* awaitFiber(tck, "a's wait for x and y", waited, within(tck, 3 * R))
    expect(Either.isLeft(timedOut) ? [timedOut.left._tag, "lease" in timedOut.left ? timedOut.left.lease : ""] : timedOut.right)
      .toEqual(["LockTimeoutError", y])
    expect(yield* eventually(tck, "x free again", Effect.map(heldOnStore(observer, x!), (held) => held ? Option.none() : Option.some(true)), within(tck, R)))
      .toBe(true)
    // a holds {x, w} and is paused past its lease: its body ends with LockLostError.
    const w = yield* uniqueName("lw")
    let started = false
    const body = yield* Effect.fork(Effect.either(a!.client.withLocks([w, x!], Effect.zipRight(Effect.sync(() => {
      started = true
    }), Effect.never))))
    yield* eventually(tck, "a's body to start", Effect.sync(() => started ? Option.some(true) : Option.none()), within(tck, 2 * R))
    yield* a!.faults.pause()
    yield* tck.advance(Duration.millis(L + R))
    const lost = yield* awaitFiber(tck, "a's body to be interrupted", body, within(tck, L + 2 * R))
    yield* a!.faults.resume
    expect(Either.isLeft(lost) ? lost.left._tag : lost.right).toBe("LockLostError")
    if (Either.isLeft(lost) && lost.left._tag === "LockLostError") expect([w, x]).toContain(lost.left.lease)
  }), timeout(6 * L))
}
