/**
 * TCK, client level: Simba clients (the shell and engine) on the backend under test, as the JVM
 * library's backend kit runs them: start, restart, guard, multi-contend, leader-only schedule, order
 * of events (`clientCases`, registered by `LeaseBackendSpec`), and fencing end to end (`clientFencing`,
 * registered by `FencingSpec`).
 *
 * Every case builds its clients with `SimbaTest.makeClient` over the backend in context, so faults
 * (pause, slow, expire) work the same on the in-memory backend under `TestClock` and on a real server
 * in real time. Timings come from `tck.client` (short leases for real servers); waits are bounded by
 * `eventually`, which advances `TestClock` or sleeps.
 */
import { expect } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { Election, SimbaClient } from "../../src/Simba.js"
import type { SimbaConfigInput } from "../../src/SimbaConfig.js"
import type { SimbaEvent } from "../../src/SimbaEvent.js"
import * as SimbaTest from "../../src/SimbaTest.js"
import type { Term } from "../../src/Term.js"
import { backend, expectHeldBy, open, type Tck, uniqueName } from "./TckHarness.js"

// ---------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------

/** The harness's client timing as a config input. */
export const clientConfig = (tck: Tck): SimbaConfigInput => ({
  leaseDuration: tck.client.leaseDuration,
  renewInterval: tck.client.renewInterval,
  drift: tck.client.drift,
  margin: tck.client.margin,
  retryJitter: tck.client.retryJitter,
  minBackoff: tck.client.minBackoff
})

/** A bound of `millis`, plus room for scheduling and round trips with real time. */
export const within = (tck: Tck, millis: number): Duration.Duration =>
  Duration.millis(Math.ceil(millis) + (tck.virtualTime ? 0 : 2_000))

/**
 * Checks `check` until it yields `Some`, letting time pass between checks (`TestClock` steps or real
 * sleeps); fails the test after `limit`.
 */
export const eventually = <A, E, R>(
  tck: Tck,
  what: string,
  check: Effect.Effect<Option.Option<A>, E, R>,
  limit: Duration.Duration
): Effect.Effect<A, E, R> =>
  Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    const step = Duration.millis(tck.virtualTime ? 50 : 20)
    while (true) {
      const found = yield* check
      if (Option.isSome(found)) return found.value
      const now = yield* Clock.currentTimeMillis
      if (now - start > Duration.toMillis(limit)) {
        return expect.fail(`${what}: not within ${Duration.format(limit)}`)
      }
      yield* tck.advance(step)
    }
  })

/** Waits for the election's current term. */
export const awaitTerm = (tck: Tck, election: Election, limit: Duration.Duration): Effect.Effect<Term> =>
  eventually(tck, `${election.name} to be led`, election.term, limit)

/** Waits for `fiber` to finish and returns its result (failing the test if it failed). */
export const awaitFiber = <A, E>(tck: Tck, what: string, fiber: Fiber.Fiber<A, E>, limit: Duration.Duration) =>
  Effect.flatMap(
    eventually(tck, what, Fiber.poll(fiber), limit),
    (exit) => Exit.isSuccess(exit) ? Effect.succeed(exit.value) : Effect.die(`${what} failed: ${String(exit.cause)}`)
  )

/** What the backend says about `name`: the holder's token as an outsider session sees it, or `undefined`. */
const heldToken = (observer: string, name: string) =>
  Effect.flatMap(backend, (b) => b.acquire(observer, name)).pipe(
    Effect.map((reply) => expectHeldBy(reply).token)
  )

export interface Timed {
  readonly at: number
  readonly event: SimbaEvent
}

/** Records a client's events from now on (the subscriber is running when this returns). */
export const recordEvents = (client: SimbaClient): Effect.Effect<Ref.Ref<ReadonlyArray<Timed>>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const events = yield* Ref.make<ReadonlyArray<Timed>>([])
    yield* client.events.pipe(
      Stream.runForEach((event) =>
        Effect.flatMap(Clock.currentTimeMillis, (at) => Ref.update(events, (all) => [...all, { at, event }]))
      ),
      Effect.forkScoped
    )
    yield* Effect.repeatN(Effect.yieldNow(), 50)
    return events
  })

const describeEvent = (event: SimbaEvent): string => {
  switch (event._tag) {
    case "StatusChanged":
      return `StatusChanged ${event.status}`
    case "Elected":
      return `Elected ${event.token}`
    case "Revoked":
      return `Revoked ${event.token} ${event.reason}`
    default:
      return event._tag
  }
}

const concerns = (event: SimbaEvent, name: string): boolean =>
  (event._tag === "StatusChanged" || event._tag === "Elected" || event._tag === "Revoked") && event.name === name

/** For every term: `Elected` then exactly one `Revoked` with its token, before the next `Elected`. */
const expectPaired = (events: ReadonlyArray<SimbaEvent>, name: string): void => {
  let open: bigint | undefined
  for (const event of events) {
    if (event._tag === "Elected" && event.name === name) {
      expect(open, `Elected ${event.token} while term ${open} is not revoked`).toBeUndefined()
      open = event.token
    } else if (event._tag === "Revoked" && event.name === name) {
      expect(event.token, `Revoked ${event.token} without its Elected`).toBe(open)
      open = undefined
    }
  }
}

const indexOf = (events: ReadonlyArray<SimbaEvent>, predicate: (event: SimbaEvent) => boolean): number => {
  const index = events.findIndex(predicate)
  expect(index, "expected event not found").toBeGreaterThanOrEqual(0)
  return index
}

// ---------------------------------------------------------------------------------------------------
// LeaseBackendSpec: client cases
// ---------------------------------------------------------------------------------------------------

export const clientCases = (tck: Tck): void => {
  const L = tck.client.leaseDuration
  const R = tck.client.renewInterval
  const config = clientConfig(tck)
  const timeout = (millis: number) => tck.virtualTime ? 60_000 : 30_000 + millis

  tck.test("start: a client leads a free name, and stop frees it", Effect.gen(function*() {
    const b = yield* backend
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("start")
    const { client } = yield* SimbaTest.makeClient(net, config)
    const election = yield* client.election(name)
    const term = yield* awaitTerm(tck, election, within(tck, 2 * R))
    expect(term.name).toBe(name)
    expect(term.token).toBeGreaterThan(0n)
    expect(yield* term.isValid).toBe(true)
    expect(yield* election.status).toBe("LEADER")
    const snapshot = yield* client.snapshot
    expect(snapshot.session.status).toBe("LIVE")
    expect(snapshot.session.id).toBe(term.sessionId)
    expect(snapshot.elections.filter((e) => e.name === name).map((e) => [e.kind, e.status, e.token])).toEqual([
      ["election", "LEADER", term.token]
    ])
    const observer = yield* open(tck)
    const held = yield* heldToken(observer, name)
    if (held !== undefined) expect(held).toBe(term.token)

    yield* election.stop
    expect(yield* election.status).toBe("STOPPED")
    expect(yield* term.isValid).toBe(false)
    expect(Option.getOrUndefined(yield* term.revokedReason)).toBe("STOPPED")
    expect((yield* client.snapshot).elections.filter((e) => e.name === name)).toEqual([])
    // The lease was released: an outsider gets it, with a larger token.
    const next = yield* eventually(
      tck,
      "the stopped leader's lease to be free",
      Effect.map(b.acquire(observer, name), (reply) => reply._tag === "Granted" ? Option.some(reply.token) : Option.none()),
      within(tck, R)
    )
    expect(next).toBeGreaterThan(term.token)
  }), timeout(4 * R))

  tck.test("restart: a stopped election starts again and wins a new term; old terms stay ended", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("restart")
    const { client } = yield* SimbaTest.makeClient(net, config)
    const terms: Array<Term> = []
    for (let round = 0; round < 3; round++) {
      const election = yield* client.election(name)
      const term = yield* awaitTerm(tck, election, within(tck, 2 * R))
      expect(yield* term.isValid).toBe(true)
      for (const old of terms) expect(yield* old.isValid).toBe(false)
      terms.push(term)
      yield* election.stop
      expect(yield* election.status).toBe("STOPPED")
    }
    expect(terms[1]!.token).toBeGreaterThan(terms[0]!.token)
    expect(terms[2]!.token).toBeGreaterThan(terms[1]!.token)
    expect(new Set(terms.map((term) => term.sessionId)).size).toBe(1)
    for (const term of terms) expect(Option.getOrUndefined(yield* term.revokedReason)).toBe("STOPPED")
  }), timeout(8 * R))

  tck.test("guard: the leader stays owner for several lease durations", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("guard")
    const [a, b] = yield* SimbaTest.makeClients(net, 2, config)
    const leading = yield* a!.client.election(name)
    const term = yield* awaitTerm(tck, leading, within(tck, 2 * R))
    const contender = yield* b!.client.election(name)
    const start = yield* Clock.currentTimeMillis
    while ((yield* Clock.currentTimeMillis) - start < 4 * L) {
      yield* tck.advance(Duration.millis(R / 2))
      expect(yield* term.isValid).toBe(true)
      expect(Option.map(yield* leading.term, (t) => t.token)).toEqual(Option.some(term.token))
      expect(Option.isNone(yield* contender.term)).toBe(true)
    }
    expect(Option.isNone(yield* term.revokedReason)).toBe(true)
    expect(yield* leading.status).toBe("LEADER")
    expect(yield* contender.status).toBe("CANDIDATE")
    expect(yield* a!.sessions).toHaveLength(1)
    const observer = yield* open(tck)
    const held = yield* heldToken(observer, name)
    if (held !== undefined) expect(held).toBe(term.token)
  }), timeout(6 * L))

  tck.test(
    "multi-contend: ten clients, never two owners, exactly one at the end, all agree who",
    Effect.gen(function*() {
      const net = yield* SimbaTest.networkFromContext
      const name = yield* uniqueName("contend")
      const recorder = yield* SimbaTest.recorder
      const clients = yield* SimbaTest.makeClients(net, 10, config)
      // The JVM kit's atomic counter: 1 while a leader's work runs, never more.
      let owners = 0
      let maxOwners = 0
      const work = () =>
        Effect.acquireRelease(
          Effect.sync(() => {
            owners++
            maxOwners = Math.max(maxOwners, owners)
          }),
          () => Effect.sync(() => owners--)
        ).pipe(Effect.zipRight(Effect.never), Effect.scoped)
      const elections = yield* Effect.forEach(clients, (c, i) =>
        c.client.election(name, { work: recorder.track(`client-${i}`, work) }))
      const leaderIndex = eventually(
        tck,
        "some client to lead",
        Effect.map(
          Effect.forEach(elections, (e) => e.term),
          (terms) => Option.fromNullable(terms.findIndex(Option.isSome)).pipe(Option.filter((i) => i >= 0))
        ),
        within(tck, L + 2 * R)
      )
      // Move the leadership around for the whole stretch: the leader steps down, or is paused past
      // its lease (its term ends at its local deadline; the others take over once the backend expires it).
      const start = yield* Clock.currentTimeMillis
      let rounds = 0
      while ((yield* Clock.currentTimeMillis) - start < Duration.toMillis(tck.contendFor)) {
        const leader = yield* leaderIndex
        yield* tck.advance(Duration.millis(L / 2))
        if (rounds % 2 === 0) {
          yield* elections[leader]!.stepDown(Duration.millis(R))
        } else {
          yield* clients[leader]!.faults.pause()
          yield* tck.advance(Duration.millis(L + R))
          yield* clients[leader]!.faults.resume
        }
        rounds++
      }
      // Let it settle, then look.
      yield* leaderIndex
      yield* tck.advance(Duration.millis(2 * L))
      const terms = yield* Effect.forEach(elections, (e) => e.term)
      const leaders = terms.flatMap((term, i) => Option.isSome(term) ? [i] : [])
      expect(leaders).toHaveLength(1)
      const leader = leaders[0]!
      const token = Option.getOrThrow(terms[leader]!).token
      expect(yield* Option.getOrThrow(terms[leader]!).isValid).toBe(true)
      // All agree: only the leader reports LEADER and a token; the backend names the leader's token.
      for (const [i, c] of clients.entries()) {
        const mine = (yield* c.client.snapshot).elections.filter((e) => e.name === name)
        expect(mine).toHaveLength(1)
        if (i === leader) expect([mine[0]!.status, mine[0]!.token]).toEqual(["LEADER", token])
        else {
          expect(["CANDIDATE", "COOLDOWN"]).toContain(mine[0]!.status)
          expect(mine[0]!.token).toBeUndefined()
        }
      }
      const observer = yield* open(tck)
      const held = yield* heldToken(observer, name)
      if (held !== undefined) expect(held).toBe(token)
      // Never two owners: the work counter, and the recorded intervals of every term.
      expect(maxOwners).toBe(1)
      expect(owners).toBe(1)
      expect(yield* recorder.violations).toEqual([])
      expect((yield* recorder.current(name)).map((i) => [i.client, i.token])).toEqual([[`client-${leader}`, token]])
      const distinct = new Set((yield* recorder.intervals).map((i) => i.token))
      expect(rounds).toBeGreaterThanOrEqual(2)
      expect(distinct.size).toBeGreaterThanOrEqual(rounds)
    }),
    timeout(Duration.toMillis(tck.contendFor) * 2 + 6 * L)
  )

  tck.test("schedule: a leader-only schedule runs on the leader only, and stops with it", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("schedule")
    const [a, b] = yield* SimbaTest.makeClients(net, 2, config)
    const every = Math.max(20, Math.round(R / 4))
    const runs: Array<{ readonly client: string; readonly token: bigint; readonly at: number }> = []
    const task = (client: string) => (term: Term) =>
      Effect.gen(function*() {
        runs.push({ client, token: term.token, at: yield* Clock.currentTimeMillis })
        // One failing run: it is logged and the next run still happens.
        if (client === "a" && runs.length === 2) return yield* Effect.fail("scheduled task failed on purpose")
      })
    const runsOf = (client: string) => runs.filter((run) => run.client === client)
    const scheduleA = yield* Effect.forkScoped(a!.client.schedule(name, Schedule.spaced(Duration.millis(every)), task("a")))
    yield* eventually(tck, "a's first run", Effect.sync(() => Option.fromNullable(runsOf("a")[0])), within(tck, 2 * R))
    const scheduleB = yield* Effect.forkScoped(b!.client.schedule(name, Schedule.spaced(Duration.millis(every)), task("b")))
    yield* tck.advance(Duration.millis(2 * L))
    const ranA = runsOf("a")
    expect(ranA.length).toBeGreaterThanOrEqual(Math.floor(L / every))
    expect(new Set(ranA.map((run) => run.token)).size).toBe(1)
    expect(runsOf("b")).toEqual([])

    // Stopping the schedule (interrupting it) stops the runs and hands the name over.
    yield* Fiber.interrupt(scheduleA)
    const stoppedAt = yield* Clock.currentTimeMillis
    const countA = runsOf("a").length
    yield* eventually(tck, "b's first run", Effect.sync(() => Option.fromNullable(runsOf("b")[0])), within(tck, 2 * R))
    yield* tck.advance(Duration.millis(L))
    expect(runsOf("a")).toHaveLength(countA)
    expect((yield* a!.client.snapshot).elections.filter((e) => e.name === name)).toEqual([])
    const ranB = runsOf("b")
    expect(ranB.length).toBeGreaterThanOrEqual(2)
    for (const run of ranB) {
      expect(run.token).toBeGreaterThan(ranA[0]!.token)
      expect(run.at).toBeGreaterThanOrEqual(stoppedAt)
    }
    yield* Fiber.interrupt(scheduleB)
    const countB = runsOf("b").length
    yield* tck.advance(Duration.millis(L))
    expect(runsOf("b")).toHaveLength(countB)
  }), timeout(6 * L))

  tck.test("try-lock: timeout 0 is one acquire round trip: a free lock is taken, a held one refused at once", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("trylock")
    const [a, b] = yield* SimbaTest.makeClients(net, 2, config)
    const acquiresOf = (client: SimbaTest.TestClient) =>
      Effect.map(client.calls, (calls) => calls.filter((c) => c.operation === "acquire" && c.name === name).length)
    // Free: `withLock` with timeout 0 takes it, however slow the round trip. An attempt whose call
    // failed or timed out (a loaded server) counts as not acquired: try again, a few times at most.
    let token: bigint | undefined
    let tries = 0
    while (token === undefined && tries < 5) {
      tries++
      const free = yield* Effect.fork(Effect.either(a!.client.withLock(name, (term) => Effect.succeed(term.token), { timeout: 0 })))
      const result = yield* awaitFiber(tck, "a try on a free lock", free, within(tck, 2 * R))
      if (result._tag === "Right") token = result.right
      else expect(result.left._tag).toBe("LockTimeoutError")
    }
    expect(token).toBeGreaterThan(0n)
    expect(yield* acquiresOf(a!)).toBe(tries)
    // Held by a: b's tries end after one acquire each, without the body, and leave nothing behind.
    const holding = yield* Effect.forkScoped(a!.client.lock(name))
    const held = yield* awaitFiber(tck, "a's lock", holding, within(tck, 2 * R))
    const refused = yield* Effect.fork(Effect.either(b!.client.withLock(name, Effect.succeed("ran"), { timeout: 0 })))
    const refusal = yield* awaitFiber(tck, "b's withLock try", refused, within(tck, 2 * R))
    expect(refusal._tag === "Left" ? refusal.left._tag : "Right").toBe("LockTimeoutError")
    const tried = yield* Effect.fork(b!.client.tryWithLock(name, Effect.succeed("ran")))
    expect(yield* awaitFiber(tck, "b's tryWithLock", tried, within(tck, 2 * R))).toEqual(Option.none())
    expect(yield* acquiresOf(b!)).toBe(2)
    expect((yield* b!.client.snapshot).elections.filter((e) => e.name === name)).toEqual([])
    expect(yield* held.isValid).toBe(true)
    // b makes no further attempt: a's lease stays a's for a renewal period and more.
    yield* tck.advance(Duration.millis(R))
    expect(yield* acquiresOf(b!)).toBe(2)
    expect(yield* held.isValid).toBe(true)
  }), timeout(6 * R))

  tck.test("back to back: a lock taken again right after withLock returned (its release still travelling) gets a higher token", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("again")
    const { client } = yield* SimbaTest.makeClient(net, config)
    // The release is not awaited, so each acquire may reach the store before the release before
    // it (a pool of connections): the store's answer must not hand the client the ended term again.
    const rounds = yield* Effect.fork(Effect.forEach([1, 2, 3, 4], () => client.withLock(name, (term) => Effect.succeed(term.token))))
    const tokens = yield* awaitFiber(tck, "four locks in a row", rounds, within(tck, 4 * 2 * R))
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]!).toBeGreaterThan(tokens[i - 1]!)
    // The last release lands: another client gets the lock with a token above all of them.
    const { client: other } = yield* SimbaTest.makeClient(net, config)
    const next = yield* Effect.fork(other.withLock(name, (term) => Effect.succeed(term.token)))
    expect(yield* awaitFiber(tck, "the other client's lock", next, within(tck, 2 * R))).toBeGreaterThan(tokens[3]!)
  }), timeout(12 * R))

  tck.test("keep: one client's bodies get rising tokens from one grant; another client's lock gets the lease, above them all", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("cached")
    const { calls, client } = yield* SimbaTest.makeClient(net, config)
    const keep = Duration.millis(2 * R)
    const rounds = yield* Effect.fork(
      Effect.forEach([1, 2, 3, 4, 5], () => client.withLock(name, (term) => Effect.succeed(term.token), { keep }))
    )
    const tokens = yield* awaitFiber(tck, "five cached locks in a row", rounds, within(tck, 5 * 2 * R))
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]!).toBeGreaterThan(tokens[i - 1]!)
    // A store that keeps blocks serves them all with one acquire; one that keeps none, one each (or
    // more: an acquire may meet the release before it still travelling).
    const acquires = (yield* calls).filter((c) => c.operation === "acquire" && c.name === name).length
    expect(acquires === 1 || acquires >= 5, `${acquires} acquires`).toBe(true)
    // Another client asking is served: told at once where the store can tell, else when keep passes.
    const { client: other } = yield* SimbaTest.makeClient(net, config)
    const next = yield* Effect.fork(other.withLock(name, (term) => Effect.succeed(term.token)))
    expect(yield* awaitFiber(tck, "the other client's lock", next, within(tck, 2 * R + 3 * R))).toBeGreaterThan(tokens[4]!)
  }), timeout(20 * R))

  tck.test("order of events: candidate, elected, leader, revoked, stopped; session opened first and ended last", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("events")
    const { client } = yield* SimbaTest.makeClient(net, config)
    const recorded = yield* recordEvents(client)
    const election = yield* client.election(name)
    const term = yield* awaitTerm(tck, election, within(tck, 2 * R))
    yield* election.stop
    yield* client.close
    const events = yield* eventually(
      tck,
      "SessionEnded",
      Effect.map(Ref.get(recorded), (all) => {
        const list = all.map((timed) => timed.event)
        return list.some((event) => event._tag === "SessionEnded") ? Option.some(list) : Option.none()
      }),
      within(tck, R)
    )
    expect(events.filter((event) => concerns(event, name)).map(describeEvent)).toEqual([
      "StatusChanged CANDIDATE",
      `Elected ${term.token}`,
      "StatusChanged LEADER",
      `Revoked ${term.token} STOPPED`,
      "StatusChanged STOPPED"
    ])
    const opened = indexOf(events, (e) => e._tag === "SessionOpened" && e.sessionId === term.sessionId)
    const elected = indexOf(events, (e) => e._tag === "Elected")
    const revoked = indexOf(events, (e) => e._tag === "Revoked")
    const ended = indexOf(events, (e) => e._tag === "SessionEnded")
    expect(opened).toBeLessThan(elected)
    expect(revoked).toBeLessThan(ended)
    expect(events[ended]).toMatchObject({ _tag: "SessionEnded", sessionId: term.sessionId, reason: "STOPPED" })
    expect(events.slice(ended + 1).filter((e) => e._tag !== "BackendFailed")).toEqual([])
  }), timeout(4 * R))

  tck.test("order of events across a lost session: revoked before the next elected, every term paired", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("events-lost")
    const a = yield* SimbaTest.makeClient(net, config)
    const recorded = yield* recordEvents(a.client)
    const election = yield* a.client.election(name, { work: () => Effect.never })
    const first = yield* awaitTerm(tck, election, within(tck, 2 * R))
    // The backend forgets the session: the next renewal answers Expired.
    yield* a.faults.expireSession
    const second = yield* eventually(
      tck,
      "a term of a new session",
      Effect.map(election.term, Option.filter((term) => term.token !== first.token)),
      within(tck, 3 * R)
    )
    expect(second.token).toBeGreaterThan(first.token)
    expect(second.sessionId).not.toBe(first.sessionId)
    expect(Option.getOrUndefined(yield* first.revokedReason)).toBe("SESSION_EXPIRED")
    const events = yield* eventually(
      tck,
      "the second Elected event",
      Effect.map(Ref.get(recorded), (all) => {
        const list = all.map((timed) => timed.event)
        return list.some((e) => e._tag === "Elected" && e.token === second.token) ? Option.some(list) : Option.none()
      }),
      within(tck, R)
    )
    const revoked = indexOf(events, (e) => e._tag === "Revoked" && e.token === first.token)
    const ended = indexOf(events, (e) => e._tag === "SessionEnded" && e.sessionId === first.sessionId)
    const reopened = indexOf(events, (e) => e._tag === "SessionOpened" && e.sessionId === second.sessionId)
    const elected = indexOf(events, (e) => e._tag === "Elected" && e.token === second.token)
    expect(events[revoked]).toMatchObject({ reason: "SESSION_EXPIRED" })
    expect(events[ended]).toMatchObject({ reason: "SESSION_EXPIRED" })
    expect(revoked).toBeLessThan(elected)
    expect(ended).toBeLessThan(reopened)
    expect(reopened).toBeLessThan(elected)
    expect(events.filter((event) => concerns(event, name)).map(describeEvent)).toEqual([
      "StatusChanged CANDIDATE",
      `Elected ${first.token}`,
      "StatusChanged LEADER",
      `Revoked ${first.token} SESSION_EXPIRED`,
      "StatusChanged CANDIDATE",
      `Elected ${second.token}`,
      "StatusChanged LEADER"
    ])
    expectPaired(events, name)
  }), timeout(6 * R))
}

// ---------------------------------------------------------------------------------------------------
// FencingSpec: client cases
// ---------------------------------------------------------------------------------------------------

export const clientFencing = (tck: Tck): void => {
  const L = tck.client.leaseDuration
  const R = tck.client.renewInterval
  const config = clientConfig(tck)
  const timeout = (millis: number) => tck.virtualTime ? 60_000 : 30_000 + millis

  /** Takes the lock `name` once and returns its token. */
  const lockToken = (client: SimbaClient, name: string) =>
    Effect.gen(function*() {
      const fiber = yield* Effect.fork(client.withLock(name, (term) => Effect.succeed(term.token)))
      return yield* awaitFiber(tck, `the lock ${name}`, fiber, within(tck, 2 * L))
    })

  tck.test(
    "tokens strictly increase across terms, clients, re-acquisitions and session close/reopen",
    Effect.gen(function*() {
      const net = yield* SimbaTest.networkFromContext
      const name = yield* uniqueName("tokens")
      const [a, b] = yield* SimbaTest.makeClients(net, 2, config)
      const tokens: Array<bigint> = []
      tokens.push(yield* lockToken(a!.client, name))
      tokens.push(yield* lockToken(a!.client, name)) // the same client again
      tokens.push(yield* lockToken(b!.client, name)) // another client
      tokens.push(yield* lockToken(a!.client, name))
      // The backend ends a's session: a opens a new one and wins the name again.
      const election = yield* a!.client.election(name)
      const before = yield* awaitTerm(tck, election, within(tck, 2 * R))
      tokens.push(before.token)
      yield* a!.faults.expireSession
      const after = yield* eventually(
        tck,
        "a term of a's new session",
        Effect.map(election.term, Option.filter((term) => term.sessionId !== before.sessionId)),
        within(tck, 3 * R)
      )
      tokens.push(after.token)
      yield* election.stop
      // a closes; a new client (a new session) takes the name.
      yield* a!.client.close
      const c = yield* SimbaTest.makeClient(net, config)
      tokens.push(yield* lockToken(c.client, name))
      tokens.push(yield* lockToken(b!.client, name))
      expect(tokens).toHaveLength(8)
      for (let i = 1; i < tokens.length; i++) expect(tokens[i]!).toBeGreaterThan(tokens[i - 1]!)
    }),
    timeout(8 * L)
  )

  tck.test("a renewal keeps the token", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("renewal")
    const a = yield* SimbaTest.makeClient(net, config)
    const election = yield* a.client.election(name)
    const term = yield* awaitTerm(tck, election, within(tck, 2 * R))
    const wonAt = yield* Clock.currentTimeMillis
    yield* tck.advance(Duration.millis(4 * R + R / 2))
    const renewals = (yield* a.calls).filter((call) => call.operation === "keepAlive" && call.at >= wonAt)
    expect(renewals.length).toBeGreaterThanOrEqual(3)
    expect(yield* term.isValid).toBe(true)
    expect(Option.getOrUndefined(yield* election.term)).toBe(term)
    expect((yield* a.client.snapshot).elections.find((e) => e.name === name)?.token).toBe(term.token)
    const observer = yield* open(tck)
    const held = yield* heldToken(observer, name)
    if (held !== undefined) expect(held).toBe(term.token)
  }), timeout(6 * R))

  tck.test("a late release of an old term cannot free another client's newer term", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("late-release")
    const [a, b] = yield* SimbaTest.makeClients(net, 2, config)
    const delay = L
    const leading = yield* a!.client.election(name)
    const old = yield* awaitTerm(tck, leading, within(tck, 2 * R))
    // a's releases travel slowly: each reaches the backend `delay` after it was sent.
    yield* a!.faults.slow(Duration.millis(delay), { on: "request", only: "release" })
    yield* leading.stop
    // Before any of them arrives, the backend ends a's session and b takes the name.
    yield* a!.faults.expireSession
    const contender = yield* b!.client.election(name)
    const newer = yield* awaitTerm(tck, contender, within(tck, 2 * R))
    const wonAt = yield* Clock.currentTimeMillis
    expect(newer.token).toBeGreaterThan(old.token)
    const releases = (yield* a!.calls).filter((call) => call.operation === "release" && call.name === name)
    expect(releases.length).toBeGreaterThanOrEqual(1)
    expect(releases[0]!.at + delay).toBeGreaterThan(wonAt)
    // The late releases (session a, old token) arrive now: no-ops.
    yield* tck.advance(Duration.millis(delay + 2 * R))
    expect(yield* newer.isValid).toBe(true)
    expect(Option.isNone(yield* newer.revokedReason)).toBe(true)
    expect(Option.getOrUndefined(yield* contender.term)).toBe(newer)
    const observer = yield* open(tck)
    const held = yield* heldToken(observer, name)
    if (held !== undefined) expect(held).toBe(newer.token)
  }), timeout(4 * L))

  tck.test("a late release of an old term cannot free the same client's newer term", Effect.gen(function*() {
    const net = yield* SimbaTest.networkFromContext
    const name = yield* uniqueName("late-release-same")
    const a = yield* SimbaTest.makeClient(net, config)
    const delay = 2 * R
    const first = yield* a.client.election(name)
    const old = yield* awaitTerm(tck, first, within(tck, 2 * R))
    yield* a.faults.slow(Duration.millis(delay), { on: "request", only: "release" })
    yield* first.stop
    // Started again at once: the backend still lists the old lease for this session, which the client
    // must not adopt again (it released that token); it waits for a new token.
    const second = yield* a.client.election(name)
    const newer = yield* awaitTerm(tck, second, within(tck, delay + 2 * R))
    const seenAt = yield* Clock.currentTimeMillis
    expect(newer.token).toBeGreaterThan(old.token)
    const releases = (yield* a.calls).filter((call) => call.operation === "release" && call.name === name)
    // At least one release of the old token was still on its way when the newer term was won.
    expect(releases.some((call) => call.at + delay > seenAt)).toBe(true)
    yield* tck.advance(Duration.millis(2 * delay + 2 * R))
    expect(yield* newer.isValid).toBe(true)
    expect(Option.isNone(yield* newer.revokedReason)).toBe(true)
    expect(Option.getOrUndefined(yield* second.term)).toBe(newer)
    const observer = yield* open(tck)
    const held = yield* heldToken(observer, name)
    if (held !== undefined) expect(held).toBe(newer.token)
  }), timeout(6 * L))

  tck.test(
    "a leader paused past its lease reads its term invalid and its late write is rejected by the fenced resource",
    Effect.gen(function*() {
      const net = yield* SimbaTest.networkFromContext
      const name = yield* uniqueName("fenced")
      const store = yield* SimbaTest.FencedStore.make<string>()
      const [a, b] = yield* SimbaTest.makeClients(net, 2, config)
      const termA = yield* a!.client.lock(name)
      expect(yield* store.write(termA, "a", "a")).toBe(true)
      // a's process pauses: its backend calls hang, it cannot renew.
      yield* a!.faults.pause()
      const writeB = yield* Effect.fork(
        b!.client.withLock(name, (term) => Effect.map(store.write(term, "b", "b"), (ok) => [ok, term.token] as const))
      )
      const [accepted, tokenB] = yield* awaitFiber(tck, "b's fenced write", writeB, within(tck, L + 3 * R))
      expect(accepted).toBe(true)
      expect(tokenB).toBeGreaterThan(termA.token)
      // a wakes up: its very first look says the term is over, and its write is refused anyway.
      expect(yield* termA.isValid).toBe(false)
      expect(yield* store.write(termA, "a, late", "a")).toBe(false)
      expect(yield* store.value).toEqual(Option.some("b"))
      expect((yield* store.rejected).map((w) => [w.writer, w.token, w.highestBefore])).toEqual([
        ["a", termA.token, tokenB]
      ])
      expect((yield* store.accepted).map((w) => w.token)).toEqual([termA.token, tokenB])
      yield* a!.faults.resume
    }),
    timeout(4 * L)
  )
}
