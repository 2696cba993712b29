/**
 * Leader-only schedules (issue 8 items 2 and 10): the first run waits for the schedule's first
 * recurrence (`immediate` for one at once); a cron job runs a tick missed before the election only
 * within `skipIfOlderThan`; the singleton and cron layers. TestClock on the Memory backend.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Clock, Cron, type Duration, Effect, ExecutionStrategy, Exit, Fiber, Layer, Option, Ref, Schedule, Scope, TestClock } from "effect"
import { InvalidLeaseNameError, Simba, type SimbaClient } from "simba"
import { advance, leading, makeClients, settle, type TestClient } from "./helpers.js"

const NIGHTLY = Cron.unsafeParse("0 3 * * *", "UTC")
/** 03:00:00 UTC on a fixed day: the tick of NIGHTLY. */
const TICK = Date.UTC(2026, 0, 15, 3, 0, 0)

/** Each run's virtual time and client. */
const recorder = Effect.map(Ref.make<ReadonlyArray<{ at: number; by: string }>>([]), (runs) => ({
  runs,
  record: (by: string) =>
    Effect.flatMap(Clock.currentTimeMillis, (at) => Ref.update(runs, (all) => [...all, { at, by }]))
}))

const withSimba = (client: SimbaClient) => Layer.succeed(Simba.Simba, client)

/** Builds `layer` in a scope of its own, closed by the returned effect. */
const buildIn = <E>(layer: Layer.Layer<never, E, Simba.Simba>, client: SimbaClient) =>
  Effect.gen(function*() {
    const scope = yield* Effect.flatMap(Effect.scope, (parent) => Scope.fork(parent, ExecutionStrategy.sequential))
    const exit = yield* Effect.exit(Layer.buildWithScope(Layer.provide(layer, withSimba(client)), scope))
    return { exit, close: Scope.close(scope, Exit.void) }
  })

describe("Simba.schedule: the first run", () => {
  for (const [label, schedule] of [["spaced", Schedule.spaced("1 second")], ["fixed", Schedule.fixed("1 second")]] as const) {
    it.scoped(`Schedule.${label}: the first run waits one interval after the election; immediate runs at once`, () =>
      Effect.gen(function*() {
        const { clients } = yield* makeClients(1)
        const { client } = clients[0]!
        const waits = yield* recorder
        const now = yield* recorder
        const t0 = yield* Clock.currentTimeMillis
        yield* Effect.fork(client.schedule("waits", schedule, () => waits.record("a")))
        yield* Effect.fork(client.schedule("now", schedule, () => now.record("a"), { immediate: true }))
        yield* settle
        expect(yield* leading(client, "waits")).toBe(true)
        yield* advance("2.5 seconds")
        expect((yield* Ref.get(waits.runs)).map((r) => r.at - t0)).toEqual([1000, 2000])
        expect((yield* Ref.get(now.runs)).map((r) => r.at - t0)).toEqual([0, 1000, 2000])
      }))
  }

  it.scoped("Schedule.cron: an election before the tick runs at the tick, not at the election", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(TICK - 10_000)
      const { clients } = yield* makeClients(1)
      const { runs, record } = yield* recorder
      yield* Effect.fork(clients[0]!.client.schedule("nightly", Schedule.cron(NIGHTLY), () => record("a")))
      yield* advance("9 seconds")
      expect(yield* leading(clients[0]!.client, "nightly")).toBe(true)
      expect(yield* Ref.get(runs)).toEqual([])
      yield* advance("5 seconds")
      expect((yield* Ref.get(runs)).map((r) => r.at)).toEqual([TICK])
    }))
})

describe("Simba.runCron / Simba.cron: ticks missed before the election", () => {
  const run = (c: TestClient, options: Omit<Simba.CronOptions<never, never>, "execute" | "name" | "cron">, record: (by: string) => Effect.Effect<void>, by: string) =>
    Effect.fork(Simba.runCron({ name: "nightly", cron: NIGHTLY, execute: record(by), ...options }).pipe(
      Effect.provideService(Simba.Simba, c.client)
    ))

  it.scoped("elected after the tick (no failover), default window: skipped, the next run is the next tick", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(TICK + 2_000)
      const { clients } = yield* makeClients(1)
      const { runs, record } = yield* recorder
      const everyMinute = Cron.unsafeParse("* * * * *", "UTC")
      yield* Effect.fork(Simba.runCron({ name: "minutely", cron: everyMinute, execute: record("a") }).pipe(
        Effect.provideService(Simba.Simba, clients[0]!.client)
      ))
      yield* advance("5 seconds")
      expect(yield* leading(clients[0]!.client, "minutely")).toBe(true)
      expect(yield* Ref.get(runs)).toEqual([])
      yield* advance("60 seconds", "1 second")
      expect((yield* Ref.get(runs)).map((r) => r.at)).toEqual([TICK + 60_000])
    }))

  /** A leads; at 02:59:59 it vanishes (calls hang, work stopped without releasing): B takes over after the tick. */
  const failover = (skipIfOlderThan: Duration.DurationInput) =>
    Effect.gen(function*() {
      yield* TestClock.setTime(TICK - 10_000)
      const { clients } = yield* makeClients(2)
      const [a, b] = clients as [TestClient, TestClient]
      const { runs, record } = yield* recorder
      const fiberA = yield* run(a, { skipIfOlderThan }, record, "a")
      yield* advance("500 millis")
      yield* run(b, { skipIfOlderThan }, record, "b")
      yield* advance("8500 millis")
      expect(yield* leading(a.client, "nightly")).toBe(true)
      yield* a.faults.pause()
      yield* Fiber.interruptFork(fiberA)
      yield* advance("15 seconds", "50 millis")
      expect(yield* leading(b.client, "nightly")).toBe(true)
      return yield* Ref.get(runs)
    })

  it.scoped("a failover across the tick, elected within skipIfOlderThan: the new leader runs the missed tick at once", () =>
    Effect.gen(function*() {
      const runs = yield* failover("10 seconds")
      expect(runs.map((r) => r.by)).toEqual(["b"])
      // Run when B was elected: a few seconds after the tick (A's lease had to expire first).
      expect(runs[0]!.at).toBeGreaterThan(TICK)
      expect(runs[0]!.at).toBeLessThanOrEqual(TICK + 10_000)
    }))

  it.scoped("a failover across the tick, elected after skipIfOlderThan: the missed tick is skipped", () =>
    Effect.gen(function*() {
      const runs = yield* failover("1 second")
      expect(runs).toEqual([])
    }))

  it.scoped("a leader that loses and regains the name never runs one tick twice", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(TICK - 5_000)
      const { clients } = yield* makeClients(1)
      const c = clients[0]!
      const { runs, record } = yield* recorder
      yield* run(c, { skipIfOlderThan: "1 minute" }, record, "a")
      yield* advance("7 seconds")
      expect((yield* Ref.get(runs)).map((r) => r.at)).toEqual([TICK])
      yield* c.faults.expireSession
      yield* advance("5 seconds")
      expect(yield* leading(c.client, "nightly")).toBe(true)
      expect((yield* Ref.get(runs)).map((r) => r.at)).toEqual([TICK])
    }))
})

describe("layers: Simba.singleton and Simba.cron", () => {
  it.scoped("Simba.singleton: one client runs it; when its layer's scope closes, the other takes over", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a, b] = clients as [TestClient, TestClient]
      const running = yield* Ref.make<ReadonlyArray<string>>([])
      const singleton = (by: string) =>
        Simba.singleton("indexer", Effect.acquireRelease(
          Ref.update(running, (all) => [...all, by]),
          () => Ref.update(running, (all) => all.filter((x) => x !== by))
        ).pipe(Effect.zipRight(Effect.never), Effect.scoped))
      const layerA = yield* buildIn(singleton("a"), a.client)
      yield* advance("200 millis")
      const layerB = yield* buildIn(singleton("b"), b.client)
      yield* advance("500 millis")
      expect(Exit.isSuccess(layerA.exit) && Exit.isSuccess(layerB.exit)).toBe(true)
      expect(yield* Ref.get(running)).toEqual(["a"])
      yield* layerA.close
      yield* settle
      expect(yield* Ref.get(running)).toEqual(["b"])
      yield* layerB.close
    }))

  it.scoped("Simba.singleton with onFailure: a failing singleton steps down and the other client takes over", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a, b] = clients as [TestClient, TestClient]
      const { runs, record } = yield* recorder
      const layerA = yield* buildIn(Simba.singleton("job", Effect.zipRight(record("a"), Effect.fail("db down"))), a.client)
      yield* advance("200 millis")
      const layerB = yield* buildIn(Simba.singleton("job", Effect.zipRight(record("b"), Effect.never)), b.client)
      yield* advance("500 millis")
      expect((yield* Ref.get(runs)).map((r) => r.by)).toEqual(["a", "b"])
      expect(yield* leading(b.client, "job")).toBe(true)
      yield* layerA.close
      yield* layerB.close
    }))

  it.scoped("a singleton or cron layer with a bad name fails to build with InvalidLeaseNameError", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(1)
      const failureOf = (exit: Exit.Exit<unknown, unknown>) =>
        Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      const bad = yield* buildIn(Simba.singleton("no spaces", Effect.never), clients[0]!.client)
      expect(failureOf(bad.exit)).toBeInstanceOf(InvalidLeaseNameError)
      const badCron = yield* buildIn(Simba.cron({ name: "", cron: NIGHTLY, execute: Effect.void }), clients[0]!.client)
      expect(failureOf(badCron.exit)).toBeInstanceOf(InvalidLeaseNameError)
    }))

  it.scoped("Simba.cron: runs the job at its tick on the leader only", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(TICK - 5_000)
      const { clients } = yield* makeClients(2)
      const [a, b] = clients as [TestClient, TestClient]
      const { runs, record } = yield* recorder
      const nightly = (by: string) => Simba.cron({ name: "nightly", cron: NIGHTLY, execute: record(by) })
      yield* buildIn(nightly("a"), a.client)
      yield* advance("200 millis")
      yield* buildIn(nightly("b"), b.client)
      yield* advance("7 seconds")
      expect(yield* Ref.get(runs)).toEqual([{ at: TICK, by: "a" }])
    }))
})
