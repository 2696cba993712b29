/**
 * The fault-injection kit (`SimbaTest`) itself, under `TestClock`: every fault does what it says to
 * the calls of one client and nothing else, the fenced store fences, the checker finds overlaps.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Deferred, Duration, Effect, Exit, Fiber, Option, Ref, Stream } from "effect"
import { BackendError, LeaseBackend, Term } from "simba"
import { SimbaTest } from "simba/test"
import type { Hint, LeaseBackendService } from "../src/LeaseBackend.js"

const config = { leaseDuration: "3 seconds" } as const
const ttl = Duration.seconds(10)

/** The leases `sessionId` holds, asked straight from the store (no faults). */
const held = (backend: LeaseBackendService, sessionId: string) =>
  Effect.map(backend.keepAlive(sessionId, ttl), (reply) => reply._tag === "Live" ? (reply.leases ?? []).map((l) => l.name) : [])

const pending = <A, E>(fiber: Fiber.Fiber<A, E>) => Effect.map(Fiber.poll(fiber), Option.isNone)

/** A link to a fresh store, with one session opened through it. */
const setup = Effect.gen(function*() {
  const net = yield* SimbaTest.network
  const link = yield* SimbaTest.faulty(net.backend)
  const session = (yield* link.backend.openSession(ttl)).sessionId
  return { net, link, session }
})

describe("SimbaTest faults", () => {
  it.scoped("pause holds requests; resume delivers them in order, even those whose caller gave up", () =>
    Effect.gen(function*() {
      const { link, net, session } = yield* setup
      yield* link.faults.pause()
      const first = yield* Effect.fork(link.backend.acquire(session, "a"))
      const second = yield* Effect.fork(link.backend.acquire(session, "b"))
      const impatient = yield* Effect.fork(Effect.timeout(link.backend.acquire(session, "c"), "1 second"))
      yield* SimbaTest.advance("2 seconds")
      expect(yield* pending(first)).toBe(true)
      expect(yield* pending(second)).toBe(true)
      expect(Exit.isFailure(yield* Fiber.await(impatient))).toBe(true) // TimeoutException
      expect(yield* held(net.backend, session)).toEqual([])

      yield* link.faults.resume
      // Delivered in the order sent, so tokens are granted a, b, c; "c" although nobody waits for it.
      expect(yield* held(net.backend, session)).toEqual(["a", "b", "c"])
      expect((yield* Fiber.join(first))._tag).toBe("Granted")
      expect((yield* Fiber.join(second))._tag).toBe("Granted")
      const calls = yield* link.calls
      expect(calls.map((c) => [c.operation, c.name, c.fault])).toEqual([
        ["openSession", undefined, undefined],
        ["acquire", "a", "paused"],
        ["acquire", "b", "paused"],
        ["acquire", "c", "paused"]
      ])
      // After resume, calls go straight through.
      expect((yield* link.backend.acquire(session, "d"))._tag).toBe("Granted")
    }))

  it.scoped("pause can be limited to some operations", () =>
    Effect.gen(function*() {
      const { link, session } = yield* setup
      yield* link.faults.pause({ only: ["acquire"] })
      const acquiring = yield* Effect.fork(link.backend.acquire(session, "a"))
      expect((yield* link.backend.keepAlive(session, ttl))._tag).toBe("Live")
      yield* SimbaTest.advance("1 second")
      expect(yield* pending(acquiring)).toBe(true)
      yield* link.faults.heal
      expect((yield* Fiber.join(acquiring))._tag).toBe("Granted")
    }))

  it.scoped("resume returns at once when held requests are also slowed (they arrive after their latency)", () =>
    Effect.gen(function*() {
      const { link, net, session } = yield* setup
      yield* link.faults.slow("300 millis", { on: "request" })
      yield* link.faults.pause()
      const call = yield* Effect.fork(link.backend.acquire(session, "a"))
      yield* SimbaTest.advance("1 second")
      yield* link.faults.resume // does not wait for the clock
      expect(yield* held(net.backend, session)).toEqual([])
      yield* SimbaTest.advance("300 millis")
      expect(yield* held(net.backend, session)).toEqual(["a"])
      expect((yield* Fiber.join(call))._tag).toBe("Granted")
    }))

  it.scoped("slow delays the reply (default) or the request, by Clock", () =>
    Effect.gen(function*() {
      const { link, net, session } = yield* setup
      yield* link.faults.slow("500 millis")
      const reply = yield* Effect.fork(link.backend.acquire(session, "a"))
      yield* SimbaTest.advance("1 millis")
      // The call took effect at once; only its reply is late.
      expect(yield* held(net.backend, session)).toEqual(["a"])
      yield* SimbaTest.advance("498 millis")
      expect(yield* pending(reply)).toBe(true)
      yield* SimbaTest.advance("1 millis")
      expect((yield* Fiber.join(reply))._tag).toBe("Granted")

      yield* link.faults.slow("500 millis", { on: "request", only: "acquire" })
      // The caller gives up after 100 ms; the request is on the wire and still arrives.
      const gaveUp = yield* Effect.fork(Effect.timeout(link.backend.acquire(session, "b"), "100 millis"))
      yield* SimbaTest.advance("499 millis")
      expect(Exit.isFailure(yield* Fiber.await(gaveUp))).toBe(true)
      expect(yield* held(net.backend, session)).toEqual(["a"])
      yield* SimbaTest.advance("1 millis")
      expect(yield* held(net.backend, session)).toEqual(["a", "b"])

      yield* link.faults.slow(0)
      const start = yield* Clock.currentTimeMillis
      expect((yield* link.backend.acquire(session, "c"))._tag).toBe("Granted")
      expect((yield* Clock.currentTimeMillis) - start).toBe(0)
      expect((yield* link.calls).map((c) => c.fault)).toEqual([undefined, "slowed", "slowed", undefined])
    }))

  it.scoped("fail answers BackendError at once; the backend never sees the call", () =>
    Effect.gen(function*() {
      const { link, net, session } = yield* setup
      yield* link.faults.fail({ only: "acquire" })
      const error = yield* Effect.flip(link.backend.acquire(session, "a"))
      expect(error).toBeInstanceOf(BackendError)
      expect([error.backend, error.operation]).toEqual(["memory", "acquire"])
      expect(yield* held(net.backend, session)).toEqual([])
      // Other operations are unaffected.
      expect((yield* link.backend.keepAlive(session, ttl))._tag).toBe("Live")
      yield* link.faults.heal
      expect((yield* link.backend.acquire(session, "a"))._tag).toBe("Granted")
    }))

  it.scoped("drop lets the call take effect and loses its reply", () =>
    Effect.gen(function*() {
      const { link, net, session } = yield* setup
      yield* link.faults.drop({ only: "acquire" })
      const call = yield* Effect.fork(Effect.timeout(link.backend.acquire(session, "a"), "1 second"))
      yield* SimbaTest.advance("1 second")
      expect(Exit.isFailure(yield* Fiber.await(call))).toBe(true)
      expect(yield* held(net.backend, session)).toEqual(["a"])
    }))

  it.scoped("partition loses requests, replies and hints until heal", () =>
    Effect.gen(function*() {
      const { link, net, session } = yield* setup
      const hints = yield* Ref.make<ReadonlyArray<Hint>>([])
      yield* Effect.forkScoped(Stream.runForEach(link.backend.hints, (hint) => Ref.update(hints, (all) => [...all, hint])))
      yield* Effect.repeatN(Effect.yieldNow(), 20)
      const other = (yield* net.backend.openSession(ttl)).sessionId
      const token = (yield* net.backend.acquire(other, "x")) as { readonly token: bigint }

      yield* link.faults.partition
      const lost = yield* Effect.fork(Effect.timeout(link.backend.acquire(session, "a"), "1 second"))
      yield* net.backend.release(other, "x", token.token)
      yield* SimbaTest.advance("2 seconds")
      expect(Exit.isFailure(yield* Fiber.await(lost))).toBe(true)
      expect(yield* held(net.backend, session)).toEqual([])
      expect(yield* Ref.get(hints)).toEqual([])

      yield* link.faults.heal
      yield* SimbaTest.advance("2 seconds")
      // The lost request stays lost; new calls and hints get through.
      expect(yield* held(net.backend, session)).toEqual([])
      expect((yield* link.backend.acquire(session, "x"))._tag).toBe("Granted")
      const again = (yield* net.backend.acquire(other, "y")) as { readonly token: bigint }
      yield* net.backend.release(other, "y", again.token)
      yield* Effect.repeatN(Effect.yieldNow(), 20)
      expect((yield* Ref.get(hints)).map((hint) => hint._tag === "Released" && hint.name)).toEqual(["y"])
      expect((yield* link.calls).map((c) => c.fault)).toEqual([undefined, "partitioned", undefined])
    }))

  it.scoped("expireSession ends a client's session: it revokes SESSION_EXPIRED, opens a new one, competes again", () =>
    Effect.gen(function*() {
      const net = yield* SimbaTest.network
      const a = yield* SimbaTest.makeClient(net, config)
      const election = yield* a.client.election("x")
      yield* SimbaTest.advance("10 millis")
      const first = Option.getOrThrow(yield* election.term)
      yield* a.faults.expireSession
      // The backend forgot it at once; the client learns at its next renewal (within a renew interval).
      expect((yield* net.backend.keepAlive(first.sessionId, ttl))._tag).toBe("Expired")
      yield* SimbaTest.advance("1 second")
      expect(Option.getOrUndefined(yield* first.revokedReason)).toBe("SESSION_EXPIRED")
      const second = Option.getOrThrow(yield* election.term)
      expect(second.token).toBeGreaterThan(first.token)
      expect(yield* a.sessions).toEqual([first.sessionId, second.sessionId])
    }))

  it.scoped("notify delivers a hint to one client only", () =>
    Effect.gen(function*() {
      const net = yield* SimbaTest.network
      const holder = (yield* net.backend.openSession(Duration.minutes(10))).sessionId
      yield* net.backend.acquire(holder, "x")
      const [a, b] = yield* SimbaTest.makeClients(net, 2, config)
      yield* a!.client.election("x")
      yield* b!.client.election("x")
      yield* SimbaTest.advance("10 millis")
      const acquires = (c: SimbaTest.TestClient) =>
        Effect.map(c.calls, (calls) => calls.filter((call) => call.operation === "acquire").length)
      const [beforeA, beforeB] = [yield* acquires(a!), yield* acquires(b!)]
      yield* a!.faults.notify(LeaseBackend.Hint.Released({ name: "x" }))
      yield* Effect.repeatN(Effect.yieldNow(), 20)
      // a tried again at once (no time passed); b did not hear anything.
      expect(yield* acquires(a!)).toBe(beforeA + 1)
      expect(yield* acquires(b!)).toBe(beforeB)
    }))

  it.scoped("a client left partitioned or paused still closes cleanly when its scope ends", () =>
    Effect.gen(function*() {
      const net = yield* SimbaTest.network
      const observer = (yield* net.backend.openSession(Duration.minutes(10))).sessionId
      yield* Effect.scoped(Effect.gen(function*() {
        const [a, b] = yield* SimbaTest.makeClients(net, 2, config)
        yield* a!.client.election("x")
        yield* b!.client.election("y")
        yield* SimbaTest.advance("10 millis")
        yield* a!.faults.partition
        yield* b!.faults.pause()
      }))
      // Both healed, then closed their sessions: the names are free again.
      expect((yield* net.backend.acquire(observer, "x"))._tag).toBe("Granted")
      expect((yield* net.backend.acquire(observer, "y"))._tag).toBe("Granted")
    }))

  it.scoped("wraps any backend, including a wrapped one", () =>
    Effect.gen(function*() {
      const net = yield* SimbaTest.network
      const inner = yield* SimbaTest.faulty(net.backend)
      const outer = SimbaTest.networkOver(inner.backend)
      const a = yield* SimbaTest.makeClient(outer, config)
      const election = yield* a.client.election("x")
      yield* SimbaTest.advance("10 millis")
      const term = Option.getOrThrow(yield* election.term)
      // The inner link's fault applies to the client on the outer one: renewals fail, the term ends.
      yield* inner.faults.fail({ only: "keepAlive" })
      yield* SimbaTest.advance("3 seconds")
      expect(Option.getOrUndefined(yield* term.revokedReason)).toBe("DEADLINE_PASSED")
      expect((yield* inner.calls).filter((c) => c.fault === "failed").length).toBeGreaterThan(1)
    }))

  it.scoped("advance moves TestClock by exactly the duration and lets chains of sleeps run in order", () =>
    Effect.gen(function*() {
      const start = yield* Clock.currentTimeMillis
      const ticks = yield* Ref.make<ReadonlyArray<number>>([])
      yield* Effect.forkScoped(
        Effect.forever(
          Effect.zipRight(
            Effect.sleep("100 millis"),
            Effect.flatMap(Clock.currentTimeMillis, (now) => Ref.update(ticks, (all) => [...all, now - start]))
          )
        )
      )
      yield* Effect.yieldNow()
      yield* SimbaTest.advance("1 second")
      expect((yield* Clock.currentTimeMillis) - start).toBe(1000)
      expect(yield* Ref.get(ticks)).toEqual([100, 200, 300, 400, 500, 600, 700, 800, 900, 1000])
    }))
})

describe("SimbaTest.FencedStore", () => {
  it.effect("accepts tokens at least as high as the highest seen, rejects the rest, records both", () =>
    Effect.gen(function*() {
      const store = yield* SimbaTest.FencedStore.make<string>()
      expect(yield* store.value).toEqual(Option.none())
      expect(yield* store.highest).toBe(0n)
      expect(yield* store.write(5n, "five", "a")).toBe(true)
      expect(yield* store.write(5n, "five again", "a")).toBe(true)
      expect(yield* store.write(4n, "four", "b")).toBe(false)
      expect(yield* store.write({ token: 7n }, "seven", "c")).toBe(true)
      const error = yield* Effect.flip(store.writeOrFail(6n, "six", "b"))
      expect(error._tag).toBe("StaleTokenError")
      expect([error.token, error.highest]).toEqual([6n, 7n])
      expect(yield* store.value).toEqual(Option.some("seven"))
      expect(yield* store.highest).toBe(7n)
      expect((yield* store.accepted).map((w) => [w.writer, w.token, w.value])).toEqual([
        ["a", 5n, "five"],
        ["a", 5n, "five again"],
        ["c", 7n, "seven"]
      ])
      expect((yield* store.rejected).map((w) => [w.writer, w.token, w.highestBefore])).toEqual([
        ["b", 4n, 5n],
        ["b", 6n, 7n]
      ])
      expect(yield* store.writes).toHaveLength(5)
    }))

  it.scoped("takes a Term as the fence", () =>
    Effect.gen(function*() {
      const net = yield* SimbaTest.network
      const [a, b] = yield* SimbaTest.makeClients(net, 2, config)
      const store = yield* SimbaTest.FencedStore.make<number>()
      const first = yield* Effect.fork(a!.client.withLock("x", (term) => Effect.as(store.write(term, 1), term)))
      yield* SimbaTest.advance("10 millis")
      const termA = yield* Fiber.join(first)
      const second = yield* Effect.fork(b!.client.withLock("x", (term) => store.write(term, 2)))
      yield* SimbaTest.advance("10 millis")
      expect(yield* Fiber.join(second)).toBe(true)
      expect(yield* store.write(termA, 3)).toBe(false)
      expect(yield* store.value).toEqual(Option.some(2))
    }))
})

const interval = (
  client: string,
  token: bigint,
  start: number,
  end: number | undefined,
  name = "x",
  hold?: SimbaTest.SharedHold
): SimbaTest.LeaderInterval => ({
  client,
  name,
  token,
  start,
  end,
  hold
})

describe("SimbaTest.checkNoOverlap", () => {
  it("accepts consecutive, touching terms with rising tokens, and repeated runs of one term", () => {
    expect(SimbaTest.checkNoOverlap([
      interval("a", 1n, 0, 10),
      interval("a", 1n, 5, 8), // another run of the same term
      interval("b", 2n, 10, 20), // touching: starts when the previous ended
      interval("a", 3n, 25, undefined),
      interval("b", 1n, 0, 100, "other name")
    ])).toEqual([])
  })

  it("finds overlapping terms, open terms followed by others, and tokens that do not rise", () => {
    const a = interval("a", 1n, 0, 10)
    const b = interval("b", 2n, 9, 20)
    const c = interval("c", 3n, 30, undefined)
    const d = interval("d", 4n, 40, 50)
    const e = interval("e", 2n, 60, 70)
    const found = SimbaTest.checkNoOverlap([a, b, c, d, e])
    expect(found.map((v) => v._tag === "OverLimit" ? [v._tag] : [v._tag, v.first.client, v.second.client])).toEqual([
      ["Overlap", "a", "b"],
      ["TokenNotIncreasing", "b", "e"],
      ["Overlap", "c", "d"],
      ["TokenNotIncreasing", "c", "e"],
      ["Overlap", "c", "e"],
      ["TokenNotIncreasing", "d", "e"]
    ])
    expect(SimbaTest.formatViolation(found[0]!)).toBe("x: a token 1 [0 ms, 10 ms) overlaps b token 2 [9 ms, 20 ms)")
  })

  it("lets read holds overlap one another and a semaphore's holds within its limit; not a writer, not over the limit", () => {
    const permits = (n: number) => ({ permits: n, limit: 3 })
    expect(SimbaTest.checkNoOverlap([
      interval("a", 1n, 0, 10, "sem", permits(2)),
      interval("b", 3n, 5, 15, "sem", permits(1)), // overlapping holders may start in either token order
      interval("c", 2n, 10, 20, "sem", permits(2)), // begins as a ends: 3 permits in all
      interval("r1", 4n, 0, 10, "rw", "read"),
      interval("r2", 5n, 2, 12, "rw", "read"),
      interval("w", 6n, 12, 20, "rw")
    ])).toEqual([])
    const found = SimbaTest.checkNoOverlap([
      interval("a", 1n, 0, 10, "sem", permits(2)),
      interval("b", 2n, 5, 15, "sem", permits(2)), // 4 of 3 permits from 5 ms
      interval("c", 2n, 20, 30, "sem", permits(1)), // after b ended, not above its token
      interval("r", 4n, 0, 10, "rw", "read"),
      interval("w", 5n, 5, 20, "rw") // a writer beside a reader
    ])
    expect(found.map((v) => v._tag === "OverLimit" ? [v._tag, v.name, v.at] : [v._tag, v.first.client, v.second.client])).toEqual([
      ["TokenNotIncreasing", "b", "c"],
      ["OverLimit", "sem", 5],
      ["Overlap", "r", "w"]
    ])
    expect(SimbaTest.formatViolation(found[1]!)).toBe(
      "sem: more than 3 permits held at 5 ms: a (2 of 3 permits) token 1 [0 ms, 10 ms), b (2 of 3 permits) token 2 [5 ms, 15 ms)"
    )
  })

  it("treats the same token on two clients as two terms", () => {
    const found = SimbaTest.checkNoOverlap([interval("a", 1n, 0, 10), interval("b", 1n, 20, 30)])
    expect(found.map((v) => v._tag)).toEqual(["TokenNotIncreasing"])
  })
})

describe("SimbaTest.recorder", () => {
  it.scoped("records leadership from work (track) and from events (watch), and finds no overlap", () =>
    Effect.gen(function*() {
      const net = yield* SimbaTest.network
      const fromWork = yield* SimbaTest.recorder
      const fromEvents = yield* SimbaTest.recorder
      const [a, b] = yield* SimbaTest.makeClients(net, 2, config)
      yield* fromEvents.watch("a", a!.client)
      yield* fromEvents.watch("b", b!.client)
      const work = () => Effect.never
      const electionA = yield* a!.client.election("x", { work: fromWork.track("a", work) })
      yield* SimbaTest.advance("10 millis")
      yield* b!.client.election("x", { work: fromWork.track("b", work) })
      yield* SimbaTest.advance("1 second")
      yield* electionA.stepDown("10 seconds")
      yield* SimbaTest.advance("1 second")
      // a stepped down and b took over: the same story from the work and from the events.
      const summary = (intervals: ReadonlyArray<SimbaTest.LeaderInterval>) =>
        intervals.map((i) => [i.client, i.token, i.start, i.end])
      const work1 = yield* fromWork.intervals
      const events1 = yield* fromEvents.intervals
      expect(summary(work1)).toEqual(summary(events1))
      expect(work1.map((i) => [i.client, i.token, i.end === undefined])).toEqual([["a", 1n, false], ["b", 2n, true]])
      expect(work1[0]!.end).toBeLessThanOrEqual(work1[1]!.start)
      expect(yield* fromWork.violations).toEqual([])
      yield* fromWork.assertNoOverlap
      yield* fromEvents.assertNoOverlap
      expect((yield* fromWork.current("x")).map((i) => i.client)).toEqual(["b"])
    }))

  it.scoped("records a semaphore's holds (track with permits) and read holds, with faults, within the limit", () =>
    Effect.gen(function*() {
      const net = yield* SimbaTest.network
      const recorder = yield* SimbaTest.recorder
      const clients = yield* SimbaTest.makeClients(net, 4, config)
      const body = () => Effect.sleep("300 millis")
      for (const [i, c] of clients.entries()) {
        const permits = i === 3 ? 2 : 1
        yield* Effect.forkScoped(Effect.forever(c.client.withPermits("jobs", permits, recorder.track(`c${i}`, body, { permits, limit: 3 }), { limit: 3 })))
        yield* Effect.forkScoped(Effect.forever(c.client.withReadLock("cache", recorder.track(`c${i}`, body, "read"))))
      }
      yield* SimbaTest.advance("3 seconds")
      yield* clients[0]!.faults.pause()
      yield* SimbaTest.advance("20 seconds")
      yield* clients[0]!.faults.resume
      yield* SimbaTest.advance("3 seconds")
      const recorded = yield* recorder.intervals
      // Holds overlapped (readers together, permits shared), and every client got its turns.
      expect(new Set(recorded.filter((i) => i.name === "jobs").map((i) => i.client)).size).toBe(4)
      expect(recorded.filter((i) => i.name === "cache" && i.hold === "read").length).toBeGreaterThan(8)
      yield* recorder.assertNoOverlap
      // The same runs read as plain locks overlap: the check is not vacuous.
      const asLocks = SimbaTest.checkNoOverlap(recorded.map((i) => ({ ...i, hold: undefined })))
      expect(asLocks.some((v) => v._tag === "Overlap" && v.name === "jobs")).toBe(true)
    }))

  it.scoped("assertNoOverlap fails with a readable LeadershipViolation", () =>
    Effect.gen(function*() {
      const recorder = yield* SimbaTest.recorder
      const fakeTerm = (token: bigint) =>
        Effect.map(Deferred.make<Term.RevokeReason>(), (revoked) =>
          Term.make({ name: "x", token, sessionId: `s${token}`, deadline: Effect.succeed(Infinity), revoked }))
      const t1 = yield* fakeTerm(1n)
      const t2 = yield* fakeTerm(2n)
      const first = yield* Effect.fork(recorder.track("a", () => Effect.sleep("1 second"))(t1))
      yield* SimbaTest.advance("500 millis")
      const second = yield* Effect.fork(recorder.track("b", () => Effect.sleep("1 second"))(t2))
      yield* SimbaTest.advance("2 seconds")
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      const error = yield* Effect.flip(recorder.assertNoOverlap)
      expect(error._tag).toBe("LeadershipViolation")
      expect(error.violations.map((v) => v._tag)).toEqual(["Overlap"])
      expect(error.message).toContain("x: a token 1 [0 ms, 1000 ms) overlaps b token 2 [500 ms, 1500 ms)")
    }))

  it.scoped("track ends an interval when the term is revoked, even if the work ignores it", () =>
    Effect.gen(function*() {
      const recorder = yield* SimbaTest.recorder
      const revoked = yield* Deferred.make<Term.RevokeReason>()
      const term = Term.make({ name: "x", token: 1n, sessionId: "s", deadline: Effect.succeed(Infinity), revoked })
      const work = yield* Effect.fork(recorder.track("a", () => Effect.uninterruptible(Effect.sleep("2 seconds")))(term))
      yield* SimbaTest.advance("500 millis")
      yield* Deferred.succeed(revoked, "TAKEN_OVER")
      yield* SimbaTest.advance("2 seconds")
      yield* Fiber.join(work)
      expect((yield* recorder.intervals).map((i) => [i.start, i.end])).toEqual([[0, 500]])
    }))
})

describe("SimbaTest chaos", () => {
  /** mulberry32: the faults below are a pure function of the seed, so a failure replays. */
  const random = (seed: number) => () => {
    seed = (seed + 0x6d2b79f5) >>> 0
    let t = seed
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const operations = ["keepAlive", "acquire", "release", "openSession"] as const

  for (const seed of [7, 42]) {
    it.scoped(`random faults on random clients never make two leaders (seed ${seed})`, () =>
      Effect.gen(function*() {
        const next = random(seed)
        const pick = <A>(list: ReadonlyArray<A>): A => list[Math.floor(next() * list.length)]!
        const net = yield* SimbaTest.network
        const recorder = yield* SimbaTest.recorder
        const clients = yield* SimbaTest.makeClients(net, 4, config)
        for (const [i, c] of clients.entries()) {
          for (const name of ["x", "y"]) yield* c.client.election(name, { work: recorder.track(`c${i}`, () => Effect.never) })
        }
        const trace: Array<string> = []
        for (let step = 0; step < 30; step++) {
          const target = Math.floor(next() * clients.length)
          const faults = clients[target]!.faults
          const only = next() < 0.5 ? undefined : pick(operations)
          const fault = pick(["pause", "resume", "slow request", "slow reply", "fail", "drop", "partition", "heal"])
          trace.push(`${step}: c${target} ${fault} ${only ?? "all"}`)
          switch (fault) {
            case "pause":
              yield* faults.pause({ only })
              break
            case "resume":
              yield* faults.resume
              break
            case "slow request":
              yield* faults.slow(Duration.millis(Math.floor(next() * 2500)), { on: "request", only })
              break
            case "slow reply":
              yield* faults.slow(Duration.millis(Math.floor(next() * 1500)), { only })
              break
            case "fail":
              yield* faults.fail({ only })
              break
            case "drop":
              yield* faults.drop({ only })
              break
            case "partition":
              yield* faults.partition
              break
            case "heal":
              yield* faults.heal
          }
          yield* SimbaTest.advance(Duration.millis(Math.floor(next() * 2000)))
          const violations = yield* recorder.violations
          expect(violations.map(SimbaTest.formatViolation), trace.join("\n")).toEqual([])
        }
        // Once every link is healed, each name has exactly one leader.
        yield* Effect.forEach(clients, (c) => c.faults.heal, { discard: true })
        yield* SimbaTest.advance("10 seconds")
        for (const name of ["x", "y"]) expect(yield* recorder.current(name), trace.join("\n")).toHaveLength(1)
        expect(yield* recorder.violations).toEqual([])
        // Every term of a name was a new token.
        const terms = (yield* recorder.intervals).filter((i) => i.name === "x").map((i) => i.token)
        expect(new Set(terms).size).toBe(terms.length)
      }), 60_000)
  }
})
