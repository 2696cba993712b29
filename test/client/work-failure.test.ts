/**
 * Failing leader work (issue 8 item 1): a failure or defect ends the term (released with handover,
 * then a backoff before competing again), or restarts the work on a schedule first; a revocation is
 * not a failure. TestClock on the Memory backend.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Logger, LogLevel, Ref, Schedule } from "effect"
import type { Term } from "simba"
import { advance, eventsOf, leading, makeClients, settle } from "./helpers.js"

/** Work that records (time, token) of each start, then fails (or dies) at once. */
const failing = (runs: Ref.Ref<ReadonlyArray<{ at: number; token: bigint }>>, die = false) => (term: Term.Term) =>
  Clock.currentTimeMillis.pipe(
    Effect.flatMap((at) => Ref.update(runs, (all) => [...all, { at, token: term.token }])),
    Effect.zipRight(die ? Effect.die("boom") : Effect.fail("db down"))
  )

const gaps = (runs: ReadonlyArray<{ at: number }>) => runs.slice(1).map((r, i) => r.at - runs[i]!.at)

describe("failing leader work", () => {
  it.scoped("steps down: the other client takes over at once, the failing one competes again after the backoff", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a, b] = clients as [typeof clients[0], typeof clients[0]]
      const runs = yield* Ref.make<ReadonlyArray<{ at: number; token: bigint }>>([])
      const fiberA = yield* Effect.fork(a.client.runWhileLeader("job", failing(runs)))
      yield* advance("100 millis")
      const bStarted = yield* Ref.make<ReadonlyArray<bigint>>([])
      const fiberB = yield* Effect.fork(
        b.client.runWhileLeader("job", (term) => Effect.zipRight(Ref.update(bStarted, (t) => [...t, term.token]), Effect.never))
      )
      yield* settle
      // A won first and failed; B (a candidate) was elected on the released hint, with a larger token.
      expect((yield* Ref.get(runs)).length).toBe(1)
      expect((yield* eventsOf(a.events, "Revoked")).map((r) => r.event.reason)).toEqual(["STEPPED_DOWN"])
      yield* advance("500 millis")
      expect(yield* leading(b.client, "job")).toBe(true)
      expect((yield* Ref.get(bStarted))[0]).toBeGreaterThan((yield* Ref.get(runs))[0]!.token)
      const statusA = (yield* a.client.snapshot).elections.find((e) => e.name === "job")!.status
      expect(statusA).toBe("COOLDOWN")
      // After the 1 s backoff A is a candidate again: when B goes, A leads (and fails) again.
      yield* advance("600 millis")
      expect((yield* a.client.snapshot).elections.find((e) => e.name === "job")!.status).toBe("CANDIDATE")
      yield* Fiber.interrupt(fiberB)
      yield* settle
      expect((yield* Ref.get(runs)).length).toBe(2)
      yield* Fiber.interrupt(fiberA)
    }))

  it.scoped("handover: the failing work's finalizers have run before the other client's work starts", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a, b] = clients as [typeof clients[0], typeof clients[0]]
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const note = (line: string) => Ref.update(log, (all) => [...all, line])
      // A's work fails, and its finalizer takes 300 ms (closing a connection, flushing a buffer).
      const workA = () =>
        Effect.acquireRelease(note("a starts"), () => Effect.zipRight(Effect.sleep("300 millis"), note("a cleaned up"))).pipe(
          Effect.zipRight(Effect.sleep("200 millis")),
          Effect.zipRight(Effect.fail("db down")),
          Effect.scoped
        )
      yield* Effect.fork(a.client.runWhileLeader("job", workA))
      yield* advance("100 millis")
      yield* Effect.fork(b.client.runWhileLeader("job", () => Effect.zipRight(note("b starts"), Effect.never)))
      yield* advance("1 second", "10 millis")
      expect(yield* Ref.get(log)).toEqual(["a starts", "a cleaned up", "b starts"])
      const revokedA = (yield* eventsOf(a.events, "Revoked"))[0]!
      const electedB = (yield* eventsOf(b.events, "Elected"))[0]!
      expect(revokedA.event.reason).toBe("STEPPED_DOWN")
      expect(electedB.at).toBeGreaterThanOrEqual(revokedA.at)
    }))

  it.scoped("the backoff doubles per consecutive failure up to max; a failure (or defect) after resetAfter starts over", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(1)
      const { client } = clients[0]!
      const runs = yield* Ref.make<ReadonlyArray<{ at: number; token: bigint }>>([])
      const failAfter = yield* Ref.make(0)
      const work = (term: Term.Term) =>
        Effect.flatMap(Ref.get(failAfter), (millis) => Effect.zipRight(Effect.sleep(millis), failing(runs, true)(term)))
      yield* Effect.fork(client.runWhileLeader("job", work, { backoff: { initial: "1 second", max: "3 seconds", resetAfter: "5 seconds" } }))
      yield* advance("9.5 seconds")
      // Elected at once; then 1 s, 2 s, 3 s (capped), 3 s later.
      expect(gaps(yield* Ref.get(runs))).toEqual([1000, 2000, 3000, 3000])
      const tokens = (yield* Ref.get(runs)).map((r) => r.token)
      expect([...tokens].sort((x, y) => (x < y ? -1 : 1))).toEqual(tokens)
      // A term that runs 5 s before dying resets the count: the next cooldown is 1 s again.
      yield* Ref.set(failAfter, 5000)
      yield* Ref.set(runs, [])
      yield* advance("20 seconds")
      const late = yield* Ref.get(runs)
      // Recorded when each term's work dies, 5 s after its election; each cooldown is 1 s again.
      expect(gaps(late)).toEqual([6000, 6000])
    }))

  it.scoped("onFailure restart: the work restarts on the same term as the schedule allows, then the term steps down", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(1)
      const { client, events } = clients[0]!
      const runs = yield* Ref.make<ReadonlyArray<{ at: number; token: bigint }>>([])
      yield* Effect.fork(client.runWhileLeader("job", failing(runs), {
        onFailure: { restart: Schedule.spaced("200 millis").pipe(Schedule.compose(Schedule.recurs(2))) }
      }))
      yield* advance("500 millis")
      const first = yield* Ref.get(runs)
      // One run and two restarts 200 ms apart, all in one term; then the step-down.
      expect(first.length).toBe(3)
      expect(new Set(first.map((r) => r.token)).size).toBe(1)
      expect(gaps(first)).toEqual([200, 200])
      expect((yield* eventsOf(events, "Revoked")).map((r) => r.event.reason)).toEqual(["STEPPED_DOWN"])
      // After the 1 s backoff a new term, whose restarts count afresh.
      yield* advance("1.5 seconds")
      const all = yield* Ref.get(runs)
      expect(all.length).toBe(6)
      expect(all[3]!.token).toBeGreaterThan(all[0]!.token)
      expect(new Set(all.slice(3).map((r) => r.token)).size).toBe(1)
    }))

  it.scoped("onFailure restart: one \"restarting\" Warning per restart, none for the failure the exhausted schedule gives up on", () =>
    Effect.gen(function*() {
      const restarting = yield* Ref.make<ReadonlyArray<string>>([])
      const collector = Logger.make(({ logLevel, message }) => {
        const text = Array.isArray(message) ? message.join(" ") : String(message)
        if (text.includes("restarting it on this leader")) Effect.runSync(Ref.update(restarting, (all) => [...all, logLevel.label]))
      })
      const runs = yield* Ref.make<ReadonlyArray<{ at: number; token: bigint }>>([])
      yield* Effect.gen(function*() {
        const { clients } = yield* makeClients(1)
        const { client, events } = clients[0]!
        yield* Effect.fork(client.runWhileLeader("job", failing(runs), {
          onFailure: { restart: Schedule.spaced("200 millis").pipe(Schedule.compose(Schedule.recurs(2))) }
        }))
        yield* advance("500 millis")
        expect((yield* eventsOf(events, "Revoked")).map((r) => r.event.reason)).toEqual(["STEPPED_DOWN"])
      }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, collector)), Logger.withMinimumLogLevel(LogLevel.All))
      // Three runs of one term: two restarts, two lines; the third failure ends the term unannounced.
      const starts = yield* Ref.get(runs)
      expect(starts.length).toBe(3)
      expect(yield* Ref.get(restarting)).toEqual(Array.from({ length: starts.length - 1 }, () => "WARN"))
    }))

  it.scoped("work that succeeds keeps the term; a revocation (DEADLINE_PASSED) is not a failure: no backoff", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(1)
      const c = clients[0]!
      const starts = yield* Ref.make(0)
      // The work fails only once its term has ended (as `ensureValid` would): not its own failure.
      yield* Effect.fork(c.client.runWhileLeader("job", (term) =>
        Ref.update(starts, (n) => n + 1).pipe(
          Effect.zipRight(term.revoked),
          Effect.zipRight(Effect.fail("term over")),
          Effect.uninterruptible
        )))
      yield* Effect.fork(c.client.runWhileLeader("done", () => Effect.void))
      yield* advance("500 millis")
      expect(yield* leading(c.client, "job")).toBe(true)
      yield* c.faults.pause()
      yield* advance("4 seconds", "10 millis")
      expect((yield* eventsOf(c.events, "Revoked")).map((r) => r.event.reason)).toContain("DEADLINE_PASSED")
      yield* c.faults.heal
      // A new session; both elections compete at once (CANDIDATE, never COOLDOWN), and win again.
      yield* advance("3 seconds", "10 millis")
      const statuses = (yield* eventsOf(c.events, "StatusChanged")).map((r) => r.event.status)
      expect(statuses).not.toContain("COOLDOWN")
      expect(yield* leading(c.client, "job")).toBe(true)
      expect(yield* leading(c.client, "done")).toBe(true)
      expect(yield* Ref.get(starts)).toBe(2)
    }))

  it.scoped("partition work: a failing partition is given up alone and competed for after the backoff; restart likewise", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(1)
      const { client, events } = clients[0]!
      const runs = yield* Ref.make<ReadonlyArray<{ partition: number; at: number; token: bigint }>>([])
      const work = (partition: number, term: Term.Term) =>
        Clock.currentTimeMillis.pipe(
          Effect.flatMap((at) => Ref.update(runs, (all) => [...all, { partition, at, token: term.token }])),
          Effect.zipRight(partition === 1 ? Effect.fail("bad partition") : Effect.never)
        )
      yield* Effect.fork(client.partitionGroup("grp", 3, work))
      yield* advance("2.5 seconds")
      const all = yield* Ref.get(runs)
      const ofOne = all.filter((r) => r.partition === 1)
      // Partition 1: elected at once, then after 1 s, then after 2 s more; 0 and 2 run once, untouched.
      expect(gaps(ofOne)).toEqual([1000])
      expect(all.filter((r) => r.partition !== 1).length).toBe(2)
      const revoked = yield* eventsOf(events, "Revoked")
      expect(revoked.map((r) => [r.event.name, r.event.reason])).toEqual([["grp.1", "STEPPED_DOWN"], ["grp.1", "STEPPED_DOWN"]])
      yield* advance("1 second")
      expect(gaps((yield* Ref.get(runs)).filter((r) => r.partition === 1))).toEqual([1000, 2000])

      const restarts = yield* Ref.make<ReadonlyArray<{ partition: number; at: number; token: bigint }>>([])
      const work2 = (partition: number, term: Term.Term) =>
        Ref.update(restarts, (all) => [...all, { partition, at: 0, token: term.token }]).pipe(
          Effect.zipRight(partition === 0 ? Effect.die("bad partition") : Effect.never)
        )
      yield* Effect.fork(client.partitionGroup("grp2", 2, work2, { onFailure: { restart: Schedule.recurs(3) } }))
      yield* advance("200 millis")
      const ofZero = (yield* Ref.get(restarts)).filter((r) => r.partition === 0)
      expect(ofZero.length).toBe(4)
      expect(new Set(ofZero.map((r) => r.token)).size).toBe(1)
      expect((yield* eventsOf(events, "Revoked")).filter((r) => r.event.name === "grp2.0").length).toBe(1)
    }))
})
