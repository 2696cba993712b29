/**
 * Regressions known from the JVM library's history (SPEC section 11), each its own named test, on the
 * in-memory backend under `TestClock`, with faults injected through `SimbaTest`.
 *
 * (The sixth, "the pub/sub channel the client listens on is the one the scripts publish on", belongs
 * to the Redis backend's own tests.)
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Fiber, Option, Ref, Schedule, Stream } from "effect"
import { LeaseBackend, LockTimeoutError, type SimbaClient, type SimbaEvent } from "simba"
import { SimbaTest } from "simba/test"
import type { LeaseBackendService } from "../src/LeaseBackend.js"

/** leaseDuration 3 s: renewInterval 1 s (also the call timeout), local validity 2.92 s per renewal. */
const config = { leaseDuration: "3 seconds" } as const
const L = 3_000
const R = 1_000

const now = Clock.currentTimeMillis

/** A session outside every client, straight on the store (no faults), living for the whole test. */
const outsider = (backend: LeaseBackendService) =>
  Effect.map(backend.openSession(Duration.minutes(30)), (opened) => opened.sessionId)

const grantedToken = (backend: LeaseBackendService, sessionId: string, name: string) =>
  Effect.map(backend.acquire(sessionId, name), (reply) => {
    if (reply._tag !== "Granted") expect.fail(`expected Granted, got ${reply._tag}`)
    return reply.token
  })

interface Timed {
  readonly at: number
  readonly event: SimbaEvent
}

const recordEvents = (client: SimbaClient) =>
  Effect.gen(function*() {
    const events = yield* Ref.make<ReadonlyArray<Timed>>([])
    yield* client.events.pipe(
      Stream.runForEach((event) => Effect.flatMap(now, (at) => Ref.update(events, (all) => [...all, { at, event }]))),
      Effect.forkScoped
    )
    yield* Effect.repeatN(Effect.yieldNow(), 50)
    return events
  })

const elected = (events: Ref.Ref<ReadonlyArray<Timed>>, name: string) =>
  Effect.map(Ref.get(events), (all) =>
    all.flatMap(({ event }) => event._tag === "Elected" && event.name === name ? [event.token] : []))

const callsOf = (client: SimbaTest.TestClient, operation: SimbaTest.Operation, after = -Infinity) =>
  Effect.map(client.calls, (calls) => calls.filter((call) => call.operation === operation && call.at > after))

/** For every term: `Elected`, then exactly one `Revoked` of its token, before the next `Elected`. */
const expectPaired = (events: ReadonlyArray<{ readonly event: SimbaEvent }>, name: string) => {
  let open: bigint | undefined
  for (const { event } of events) {
    if (event._tag === "Elected" && event.name === name) {
      expect(open).toBeUndefined()
      open = event.token
    } else if (event._tag === "Revoked" && event.name === name) {
      expect(event.token).toBe(open)
      open = undefined
    }
  }
}

describe("regressions", () => {
  describe("renewal must not shorten the lease", () => {
    it.scoped("renewal must not shorten the lease: slow renewal replies only ever move the deadline forward", () =>
      Effect.gen(function*() {
        const net = yield* SimbaTest.network
        const observer = yield* outsider(net.backend)
        const a = yield* SimbaTest.makeClient(net, config)
        const election = yield* a.client.election("x")
        yield* SimbaTest.advance("10 millis")
        const term = Option.getOrThrow(yield* election.term)
        // Reply latencies of successive renewals, all below the call timeout (one renew interval).
        const latencies = [0, 300, 700, 0, 900, 100, 500, 950, 0, 650]
        let lastLocal = -Infinity
        let lastBackend = -Infinity
        for (const latency of latencies) {
          yield* a.faults.slow(Duration.millis(latency), { only: "keepAlive" })
          for (let i = 0; i < R / 50; i++) {
            yield* SimbaTest.advance("50 millis")
            const t = yield* now
            expect(yield* term.isValid).toBe(true)
            const local = t + Duration.toMillis(yield* term.remaining)
            const reply = yield* net.backend.acquire(observer, "x")
            if (reply._tag !== "HeldBy" || reply.remaining === undefined) return expect.fail(`got ${reply._tag}`)
            const backendExpiry = t + Duration.toMillis(reply.remaining)
            // Neither the client's deadline nor the backend's expiry ever moves back ...
            expect(local).toBeGreaterThanOrEqual(lastLocal)
            expect(backendExpiry).toBeGreaterThanOrEqual(lastBackend)
            // ... and the client never believes in more lease than the backend grants.
            expect(local).toBeLessThan(backendExpiry)
            lastLocal = local
            lastBackend = backendExpiry
          }
        }
        expect(Option.isNone(yield* term.revokedReason)).toBe(true)
        expect(Option.getOrUndefined(yield* election.term)).toBe(term)
        expect((yield* callsOf(a, "keepAlive")).length).toBeGreaterThanOrEqual(latencies.length)
      }))

    it.scoped("renewal must not shorten the lease: a backend granting less makes renewals more frequent, never loses the term", () =>
      Effect.gen(function*() {
        const net = yield* SimbaTest.networkWith({ maxTtl: "2 seconds" })
        const a = yield* SimbaTest.makeClient(net, config)
        const events = yield* recordEvents(a.client)
        const election = yield* a.client.election("x")
        yield* SimbaTest.advance("10 millis")
        const term = Option.getOrThrow(yield* election.term)
        for (let i = 0; i < 40; i++) {
          yield* SimbaTest.advance("250 millis")
          expect(yield* term.isValid).toBe(true)
        }
        expect(Option.isNone(yield* term.revokedReason)).toBe(true)
        const shortened = (yield* Ref.get(events)).filter(({ event }) => event._tag === "SessionLeaseShortened")
        expect(shortened).toHaveLength(1)
        // 2 s granted: validity 1.93 s, renewed every third of it, about 15 times in 10 s.
        expect((yield* callsOf(a, "keepAlive")).length).toBeGreaterThanOrEqual(14)
      }))
  })

  describe("a failed renewal must revoke ownership at the deadline (no split brain)", () => {
    const faults = {
      "renewals fail": (c: SimbaTest.TestClient) => c.faults.fail({ only: "keepAlive" }),
      "renewal replies are lost": (c: SimbaTest.TestClient) => c.faults.drop({ only: "keepAlive" }),
      "the leader is partitioned": (c: SimbaTest.TestClient) => c.faults.partition,
      "the leader is paused": (c: SimbaTest.TestClient) => c.faults.pause()
    }
    for (const [label, inject] of Object.entries(faults)) {
      it.scoped(`a failed renewal must revoke ownership at the deadline, no split brain: ${label}`, () =>
        Effect.gen(function*() {
          const net = yield* SimbaTest.network
          const recorder = yield* SimbaTest.recorder
          const [a, b] = yield* SimbaTest.makeClients(net, 2, config)
          const work = (client: string) => recorder.track(client, () => Effect.never)
          const electionA = yield* a!.client.election("x", { work: work("a") })
          yield* SimbaTest.advance("10 millis")
          const term = Option.getOrThrow(yield* electionA.term)
          const electionB = yield* b!.client.election("x", { work: work("b") })
          yield* SimbaTest.advance("1500 millis")
          yield* inject(a!)
          const faultAt = yield* now
          const deadline = faultAt + Duration.toMillis(yield* term.remaining)
          expect(deadline - faultAt).toBeGreaterThan(R)

          // Valid up to the last millisecond before the deadline, revoked at it.
          yield* SimbaTest.advance(Duration.millis(deadline - faultAt - 1))
          expect(yield* term.isValid).toBe(true)
          expect(Option.isNone(yield* term.revokedReason)).toBe(true)
          yield* SimbaTest.advance("1 millis")
          expect(yield* term.isValid).toBe(false)
          expect(Option.getOrUndefined(yield* term.revokedReason)).toBe("DEADLINE_PASSED")
          // It kept trying to renew until then (halving backoff), in vain.
          expect((yield* callsOf(a!, "keepAlive", faultAt)).length).toBeGreaterThanOrEqual(2)

          yield* SimbaTest.advance(Duration.millis(2 * L))
          // The next term goes to whichever client's acquire lands first once the lease is free: b,
          // waiting, or a, whose acquires still work when only its renewals fail.
          const successors = [yield* electionA.term, yield* electionB.term].filter(Option.isSome).map((t) => t.value)
          expect(successors).toHaveLength(1)
          const successor = successors[0]!
          expect(successor.token).toBeGreaterThan(term.token)
          const intervals = yield* recorder.intervals
          const aInterval = intervals.find((i) => i.client === "a" && i.token === term.token)!
          expect(aInterval.end).toBe(deadline)
          const later = intervals.filter((i) => i.token > term.token)
          expect(later.length).toBeGreaterThanOrEqual(1)
          for (const interval of later) expect(interval.start).toBeGreaterThanOrEqual(deadline)
          expect(yield* recorder.violations).toEqual([])
          yield* a!.faults.heal
        }))
    }
  })

  describe("no duplicate timer or schedule chains survive stop", () => {
    it.scoped("no duplicate timer chains survive stop: retries end with the election, renewals stay one chain", () =>
      Effect.gen(function*() {
        const net = yield* SimbaTest.network
        const holder = yield* outsider(net.backend)
        yield* grantedToken(net.backend, holder, "x")
        const a = yield* SimbaTest.makeClient(net, config)
        // Start and stop the same (contended) election over and over.
        for (const wait of [700, 1300, 10, 2100, 450]) {
          const election = yield* a.client.election("x")
          yield* SimbaTest.advance(Duration.millis(wait))
          yield* election.stop
        }
        const stoppedAt = yield* now
        yield* SimbaTest.advance("10 seconds")
        expect(yield* callsOf(a, "acquire", stoppedAt)).toEqual([])
        // One renewal chain: exactly one keepAlive per renew interval.
        expect(yield* callsOf(a, "keepAlive", stoppedAt)).toHaveLength(10)
        // Still one chain after sessions were lost in every way while an election kept retrying: the
        // backend forgot them (found by a renewal or by an acquire), or the deadline passed.
        const contending = yield* a.client.election("x")
        for (const wait of [2000, 1700, 2300, 1100]) {
          yield* a.faults.expireSession
          yield* SimbaTest.advance(Duration.millis(wait))
        }
        yield* a.faults.fail({ only: "keepAlive" })
        yield* SimbaTest.advance("4 seconds")
        yield* a.faults.heal
        yield* SimbaTest.advance("3 seconds")
        yield* contending.stop
        expect((yield* a.sessions).length).toBeGreaterThanOrEqual(6)
        const since = yield* now
        yield* SimbaTest.advance("10 seconds")
        expect(yield* callsOf(a, "keepAlive", since)).toHaveLength(10)
        expect(yield* callsOf(a, "openSession", since)).toEqual([])
        expect(yield* callsOf(a, "acquire", since)).toEqual([])
      }))

    it.scoped("no duplicate schedule chains survive stop: a stopped schedule never runs again, a restarted one runs at its own rate", () =>
      Effect.gen(function*() {
        const net = yield* SimbaTest.network
        const a = yield* SimbaTest.makeClient(net, config)
        const runs: Array<{ readonly at: number; readonly token: bigint }> = []
        const task = (term: { readonly token: bigint }) =>
          Effect.flatMap(now, (at) => Effect.sync(() => runs.push({ at, token: term.token })))
        const every = Schedule.spaced("500 millis")
        // A run at each election, so the figures below count from the election itself.
        const first = yield* Effect.forkScoped(a.client.schedule("x", every, task, { immediate: true }))
        yield* SimbaTest.advance("2 seconds")
        yield* Fiber.interrupt(first)
        const stopped = runs.length
        expect(stopped).toBeGreaterThanOrEqual(4)
        yield* SimbaTest.advance("5 seconds")
        expect(runs).toHaveLength(stopped)

        const second = yield* Effect.forkScoped(a.client.schedule("x", every, task, { immediate: true }))
        yield* SimbaTest.advance("10 millis")
        const restartedAt = yield* now
        yield* SimbaTest.advance("4990 millis")
        const restarted = runs.slice(stopped)
        // One chain: a run every 500 ms, not two.
        expect(restarted.length).toBeGreaterThanOrEqual(10)
        expect(restarted.length).toBeLessThanOrEqual(11)
        for (let i = 1; i < restarted.length; i++) expect(restarted[i]!.at - restarted[i - 1]!.at).toBe(500)
        expect(restarted[0]!.at).toBeLessThanOrEqual(restartedAt)

        // Terms lost and won again while the schedule runs: each term has its own single chain, and
        // the chains of successive terms never interleave.
        const beforeLosses = runs.length
        yield* a.faults.expireSession
        yield* SimbaTest.advance("2 seconds")
        yield* a.faults.expireSession
        yield* SimbaTest.advance("3 seconds")
        const later = runs.slice(beforeLosses)
        const tokens = later.map((run) => run.token)
        // Two new terms, each above the one before the losses (which may or may not run once more
        // before the client notices: the released hint makes it renew, and so notice, at once).
        const tokenBefore = runs[beforeLosses - 1]!.token
        expect(new Set(tokens.filter((token) => token > tokenBefore)).size).toBe(2)
        expect(tokens.every((token) => token >= tokenBefore)).toBe(true)
        for (let i = 1; i < later.length; i++) {
          expect(later[i]!.token).toBeGreaterThanOrEqual(later[i - 1]!.token)
          if (later[i]!.token === later[i - 1]!.token) expect(later[i]!.at - later[i - 1]!.at).toBe(500)
        }
        yield* Fiber.interrupt(second)
        const final = runs.length
        yield* SimbaTest.advance("5 seconds")
        expect(runs).toHaveLength(final)
      }))

    it.scoped("no timer survives close: after close completes, no backend call, no event", () =>
      Effect.gen(function*() {
        const net = yield* SimbaTest.network
        const holder = yield* outsider(net.backend)
        yield* grantedToken(net.backend, holder, "contended")
        const a = yield* SimbaTest.makeClient(net, config)
        const events = yield* recordEvents(a.client)
        yield* a.client.election("x")
        yield* a.client.election("contended")
        yield* Effect.forkScoped(a.client.schedule("s", Schedule.spaced("300 millis"), () => Effect.void))
        yield* Effect.forkScoped(a.client.partitionGroup("g", 4, () => Effect.never))
        yield* SimbaTest.advance("2 seconds")
        yield* a.client.close
        yield* SimbaTest.advance("1 millis")
        const closedAt = yield* now
        const eventCount = (yield* Ref.get(events)).length
        yield* SimbaTest.advance("10 seconds")
        expect(yield* Effect.map(a.calls, (calls) => calls.filter((call) => call.at >= closedAt))).toEqual([])
        expect(yield* Ref.get(events)).toHaveLength(eventCount)
      }))
  })

  describe("no duplicate Elected under concurrent notifications", () => {
    it.scoped("no duplicate Elected under concurrent notifications: hints racing with retries and replies", () =>
      Effect.gen(function*() {
        const net = yield* SimbaTest.network
        const holder = yield* outsider(net.backend)
        const token = yield* grantedToken(net.backend, holder, "x")
        const a = yield* SimbaTest.makeClient(net, config)
        const events = yield* recordEvents(a.client)
        let starts = 0
        // Each acquire stays in flight for 400 ms, so hints land while one is pending.
        yield* a.faults.slow("400 millis", { only: "acquire" })
        const election = yield* a.client.election("x", {
          work: () => Effect.zipRight(Effect.sync(() => starts++), Effect.never)
        })
        const storm = (count: number, gap: number) =>
          Effect.forEach(Array.from({ length: count }), () =>
            Effect.zipRight(
              a.faults.notify(LeaseBackend.Hint.Released({ name: "x" })),
              SimbaTest.advance(Duration.millis(gap), { step: gap })
            ), { discard: true })
        yield* storm(30, 37)
        expect(yield* elected(events, "x")).toEqual([])
        // The lease is freed (a real hint) while spurious ones keep coming.
        yield* net.backend.release(holder, "x", token)
        yield* storm(20, 20)
        yield* SimbaTest.advance("2 seconds")
        const term = Option.getOrThrow(yield* election.term)
        expect(yield* elected(events, "x")).toEqual([term.token])
        expect(starts).toBe(1)
        // At most one acquire in flight: each sent after the previous one's reply came back.
        const acquires = (yield* callsOf(a, "acquire")).map((call) => call.at)
        for (let i = 1; i < acquires.length; i++) expect(acquires[i]! - acquires[i - 1]!).toBeGreaterThanOrEqual(400)

        // While it leads, notifications change nothing.
        const sent = acquires.length
        yield* storm(20, 50)
        expect(yield* callsOf(a, "acquire")).toHaveLength(sent)
        expect(yield* elected(events, "x")).toEqual([term.token])

        // Lost and won again under a storm: one Elected per term, paired with one Revoked.
        yield* a.faults.expireSession
        yield* storm(40, 25)
        yield* SimbaTest.advance("2 seconds")
        const tokens = yield* elected(events, "x")
        expect(tokens).toHaveLength(2)
        expect(tokens[1]!).toBeGreaterThan(tokens[0]!)
        expect(starts).toBe(2)
        expectPaired(yield* Ref.get(events), "x")
      }))

    it.scoped("no duplicate Elected under concurrent notifications: many candidates, one release, one winner", () =>
      Effect.gen(function*() {
        const net = yield* SimbaTest.network
        const holder = yield* outsider(net.backend)
        const token = yield* grantedToken(net.backend, holder, "x")
        const clients = yield* SimbaTest.makeClients(net, 6, config)
        const recorder = yield* SimbaTest.recorder
        for (const [i, c] of clients.entries()) yield* recorder.watch(`c${i}`, c.client)
        const elections = yield* Effect.forEach(clients, (c) => c.client.election("x"))
        yield* SimbaTest.advance("700 millis")
        // Everyone hears the release several times over, at the same instant.
        yield* net.backend.release(holder, "x", token)
        yield* Effect.forEach(clients, (c) =>
          Effect.forEach(Array.from({ length: 5 }), () => c.faults.notify(LeaseBackend.Hint.Released({ name: "x" }))))
        yield* SimbaTest.advance("3 seconds")
        const leaders = (yield* Effect.forEach(elections, (e) => e.term)).filter(Option.isSome)
        expect(leaders).toHaveLength(1)
        const intervals = yield* recorder.intervals
        expect(intervals).toHaveLength(1)
        expect(intervals[0]!.end).toBeUndefined()
        expect(yield* recorder.violations).toEqual([])
      }))
  })

  describe("a timed-out lock acquisition must not take the lock later", () => {
    it.scoped("a timed-out lock acquisition must not take the lock later: the lock was held until after the timeout", () =>
      Effect.gen(function*() {
        const net = yield* SimbaTest.network
        const holder = yield* outsider(net.backend)
        const token = yield* grantedToken(net.backend, holder, "x")
        const b = yield* SimbaTest.makeClient(net, config)
        const events = yield* recordEvents(b.client)
        let ran = false
        const waiting = yield* Effect.fork(
          b.client.withLock("x", Effect.sync(() => ran = true), { timeout: "2 seconds" })
        )
        yield* SimbaTest.advance("2 seconds")
        const exit = yield* Fiber.await(waiting)
        expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" && exit.cause.error).toBeInstanceOf(LockTimeoutError)
        const timedOutAt = yield* now
        // The holder lets go (with a hint) after the timeout.
        yield* net.backend.release(holder, "x", token)
        yield* SimbaTest.advance("5 seconds")
        expect(ran).toBe(false)
        expect(yield* elected(events, "x")).toEqual([])
        expect(yield* callsOf(b, "acquire", timedOutAt)).toEqual([])
        expect((yield* b.client.snapshot).elections).toEqual([])
        const other = yield* outsider(net.backend)
        expect(yield* grantedToken(net.backend, other, "x")).toBeGreaterThan(token)
      }))

    it.scoped("a timed-out lock acquisition must not take the lock later: its request reached the backend after the timeout", () =>
      Effect.gen(function*() {
        const net = yield* SimbaTest.network
        const observer = yield* outsider(net.backend)
        const b = yield* SimbaTest.makeClient(net, config)
        const events = yield* recordEvents(b.client)
        yield* SimbaTest.advance("10 millis")
        // b's acquire requests take 1.5 s to reach the backend; b gives up after 1.2 s.
        yield* b.faults.slow("1500 millis", { on: "request", only: "acquire" })
        let ran = false
        const waiting = yield* Effect.fork(
          b.client.withLock("x", Effect.sync(() => ran = true), { timeout: "1200 millis" })
        )
        yield* SimbaTest.advance("1200 millis")
        expect(Exit.isFailure(yield* Fiber.await(waiting))).toBe(true)
        // The request arrives: the backend grants the lease to b's session, which nobody wants any more.
        yield* SimbaTest.advance("310 millis")
        expect((yield* net.backend.acquire(observer, "x"))._tag).toBe("HeldBy")
        // b notices at its next renewal and gives it back.
        yield* SimbaTest.advance(Duration.millis(R + 10))
        expect(yield* grantedToken(net.backend, observer, "x")).toBeGreaterThan(0n)
        expect(ran).toBe(false)
        expect(yield* elected(events, "x")).toEqual([])
        expect((yield* callsOf(b, "release")).map((call) => call.name)).toContain("x")
      }))

    it.scoped("a timed-out lock acquisition must not take the lock later: the grant's reply was lost", () =>
      Effect.gen(function*() {
        const net = yield* SimbaTest.network
        const observer = yield* outsider(net.backend)
        const b = yield* SimbaTest.makeClient(net, config)
        const events = yield* recordEvents(b.client)
        yield* SimbaTest.advance("10 millis")
        yield* b.faults.drop({ only: "acquire" })
        let ran = false
        const waiting = yield* Effect.fork(
          b.client.withLock("x", Effect.sync(() => ran = true), { timeout: "1200 millis" })
        )
        yield* SimbaTest.advance("1200 millis")
        expect(Exit.isFailure(yield* Fiber.await(waiting))).toBe(true)
        yield* SimbaTest.advance(Duration.millis(2 * R))
        expect(yield* grantedToken(net.backend, observer, "x")).toBeGreaterThan(0n)
        expect(ran).toBe(false)
        expect(yield* elected(events, "x")).toEqual([])
      }))
  })
})
