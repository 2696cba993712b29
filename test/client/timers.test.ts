/**
 * The engine's timers run on one sleeping fiber per client (`src/internal/timers.ts`; on Effect's
 * live clock a task of that clock's scheduler instead, the last describe). Before, each
 * `Arm` forked a fiber of its own: a client with N waiting candidates kept N sleeping fibers (~6 KB
 * of heap each). Checked here under TestClock: every armed timer fires once, at its instant, in
 * (instant, key) order; a disarmed or replaced one never fires; and the fibers do not grow with the
 * timers, nor with a client's waiting candidates.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Supervisor, TestClock } from "effect"
import { LeaseBackend, MemoryBackend } from "simba"
import * as Client from "../../src/internal/client.js"
import * as Mailbox from "../../src/internal/mailbox.js"
import * as Shell from "../../src/internal/shell.js"
import * as Timers from "../../src/internal/timers.js"
import { advance, config, settle } from "./helpers.js"

interface Fired {
  readonly key: string
  readonly id: number
  readonly at: number
}

/** Timers whose deliveries are recorded with the virtual time, their fibers tracked by `supervisor`. */
const recordingTimers = Effect.gen(function*() {
  const fired: Array<Fired> = []
  const scope = yield* Effect.scope
  const supervisor = yield* Supervisor.track
  const by = yield* Effect.fiberId
  // The TestClock: deliveries are stamped with its virtual time.
  const clock = yield* Effect.clock
  const timers = Timers.make(scope, (key, id) => {
    fired.push({ key, id, at: clock.unsafeCurrentTimeMillis() })
  })
  const arm = (key: string, id: number, at: number) =>
    Effect.supervised(Timers.arm(timers, key, id, at, by) ?? Effect.void, supervisor)
  const liveFibers = Effect.map(supervisor.value, (fibers) => fibers.length)
  // TestClock forks a fiber (a warning after 5 s of a test sleeping without moving the clock) on the
  // first sleep before any adjustment: moving it now keeps that fiber out of the counts.
  yield* TestClock.adjust(0)
  return { fired, timers, arm, liveFibers }
})

describe("timers", () => {
  it.scoped("a timer armed by the step a delivery woke is picked up by the same sleeper, not a new one", () =>
    Effect.gen(function*() {
      const scope = yield* Effect.scope
      const by = yield* Effect.fiberId
      const clock = yield* Effect.clock
      const fired: Array<Fired> = []
      // As the client: deliveries go to the loop's mailbox, and the loop fiber (woken by the offer)
      // runs the step, which for "renew" sends a call and arms its deadline one period later.
      const box = Mailbox.make<Fired>()
      const timers: Timers.Timers = Timers.make(scope, (key, id) => {
        Mailbox.offer(box, { key, id, at: clock.unsafeCurrentTimeMillis() })
      })
      const step = Effect.suspend(() => {
        const delivered = Mailbox.poll(box)
        fired.push(delivered)
        return delivered.key === "renew"
          ? Timers.arm(timers, "call:1", 2, delivered.at + 1000, by) ?? Effect.void
          : Effect.void
      })
      yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Mailbox.waitForItem(box), step)))
      yield* TestClock.adjust(0)
      yield* Timers.arm(timers, "deadline", 3, 3000, by) ?? Effect.void
      yield* Timers.arm(timers, "renew", 1, 1000, by) ?? Effect.void
      const sleeper = timers.sleeper
      yield* TestClock.adjust(1000)
      yield* settle
      expect(timers.sleeper).toBe(sleeper)
      expect(timers.sleeper?.until).toBe(2000)
      yield* TestClock.adjust(1000)
      yield* settle
      expect(fired.map((f) => [f.key, f.at])).toEqual([["renew", 1000], ["call:1", 2000]])
      expect(timers.sleeper).toBe(sleeper)
    }))

  it.scoped("many timers armed, disarmed and re-armed fire once each, in deadline order, on one fiber", () =>
    Effect.gen(function*() {
      const { arm, fired, liveFibers, timers } = yield* recordingTimers
      const stamp = yield* Clock.currentTimeMillis
      const expected = new Map<string, Fired>()
      let id = 1
      // 300 keys, deadlines 1..100 ms with many ties, armed out of order.
      for (let i = 0; i < 300; i++) {
        const key = `k${(i * 37) % 300}`
        const at = stamp + 1 + ((i * 53) % 100)
        const entry = { key, id: id++, at }
        yield* arm(key, entry.id, at)
        expected.set(key, entry)
      }
      // Every third disarmed: never fires.
      for (let i = 0; i < 300; i += 3) {
        Timers.cancel(timers, `k${i}`)
        expected.delete(`k${i}`)
      }
      // Every fifth (not disarmed) re-armed, alternately earlier and later: only the new one fires.
      for (let i = 1; i < 300; i += 5) {
        if (i % 3 === 0) continue
        const key = `k${i}`
        const at = expected.get(key)!.at + (i % 2 === 0 ? -1 : 7)
        const entry = { key, id: id++, at: Math.max(stamp, at) }
        yield* arm(key, entry.id, entry.at)
        expected.set(key, entry)
      }
      // An early timer armed last replaces the sleeping fiber.
      yield* arm("early", id, stamp)
      expected.set("early", { key: "early", id, at: stamp })
      yield* settle
      expect(yield* liveFibers).toBeLessThanOrEqual(1)

      // Stepping through the deadlines, at most one timer fiber is alive at any time.
      for (let t = 0; t <= 120; t += 1) {
        yield* TestClock.adjust("1 millis")
        yield* settle
        expect(yield* liveFibers).toBeLessThanOrEqual(1)
      }

      const order = (a: Fired, b: Fired) => a.at - b.at || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)
      // Each fires once, with its last id, at its instant (TestClock wakes a sleep at its deadline).
      expect(fired).toEqual([...expected.values()].sort(order))
      expect(timers.armed.size).toBe(0)
      expect(yield* liveFibers).toBe(0)
    }))

  it.scoped("a timer armed later than the sleeping fiber's wake-up forks nothing", () =>
    Effect.gen(function*() {
      const { arm, fired, liveFibers } = yield* recordingTimers
      const stamp = yield* Clock.currentTimeMillis
      yield* arm("first", 1, stamp + 10)
      for (let i = 0; i < 100; i++) {
        // `Timers.arm` returns an Effect only when it must replace the fiber.
        yield* arm(`later-${i}`, 2 + i, stamp + 20 + i)
      }
      yield* settle
      expect(yield* liveFibers).toBe(1)
      yield* TestClock.adjust("200 millis")
      yield* settle
      expect(fired.map((f) => f.key)).toEqual(["first", ...Array.from({ length: 100 }, (_, i) => `later-${i}`)])
      expect(yield* liveFibers).toBe(0)
    }))

  it.scoped("a client's fibers do not grow with its waiting candidates", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const make = (supervisor?: Supervisor.Supervisor<unknown>) => {
        const client = Client.makeWithShell(config).pipe(Effect.provideService(LeaseBackend.LeaseBackend, backend), Effect.orDie)
        return supervisor === undefined ? client : Effect.supervised(client, supervisor)
      }
      const leader = yield* make()
      const supervisor = yield* Supervisor.track
      const candidate = yield* make(supervisor)
      yield* advance("200 millis")

      /** Both clients start `count` more elections on the same names; returns the candidate's live fibers. */
      let started = 0
      const waiting = (count: number) =>
        Effect.gen(function*() {
          for (let i = started; i < started + count; i++) {
            yield* leader.client.election(`fibers-${i}`)
          }
          yield* advance("200 millis")
          for (let i = started; i < started + count; i++) {
            yield* candidate.client.election(`fibers-${i}`)
          }
          started += count
          yield* advance("500 millis")
          const snapshot = yield* candidate.client.snapshot
          expect(snapshot.elections.filter((e) => e.status === "CANDIDATE")).toHaveLength(started)
          // Each waiting candidate has a retry timer armed: the fibers below would include them.
          expect(Shell.sizes(candidate.shell).timers).toBeGreaterThanOrEqual(started)
          return (yield* supervisor.value).length
        })

      const withFew = yield* waiting(5)
      const withMany = yield* waiting(195)
      expect(withMany).toBe(withFew)
    }), 60_000)
})

describe("timers on Effect's live clock", () => {
  /** Monotonic millis, as the loop's `now` (the instants the engine arms timers at). */
  const monotonicNow = (clock: Clock.Clock) => Number(clock.unsafeCurrentTimeNanos()) / 1_000_000

  it.scoped("under TestClock the sleeper is a fiber (TestClock drives it)", () =>
    Effect.gen(function*() {
      expect(yield* Timers.liveClock(yield* Effect.clock)).toBeUndefined()
    }))

  it.scoped("a task that runs before its instant (the event loop's cached time lags) sleeps the rest, delivering nothing", () =>
    Effect.gen(function*() {
      // A clock and a scheduler driven by hand, in the shape of the live ones.
      let nowMillis = 0
      const clock: Clock.Clock = {
        [Clock.ClockTypeId]: Clock.ClockTypeId,
        unsafeCurrentTimeMillis: () => nowMillis,
        currentTimeMillis: Effect.sync(() => nowMillis),
        unsafeCurrentTimeNanos: () => BigInt(Math.round(nowMillis * 1_000_000)),
        currentTimeNanos: Effect.sync(() => BigInt(Math.round(nowMillis * 1_000_000))),
        sleep: () => Effect.void
      }
      const tasks: Array<{ readonly run: () => void; readonly millis: number }> = []
      const scheduler: Clock.ClockScheduler = {
        unsafeSchedule: (run, duration) => {
          tasks.push({ run, millis: Duration.toMillis(duration) })
          return () => true
        }
      }
      const fired: Array<Fired> = []
      const timers = Timers.make(yield* Effect.scope, (key, id) => {
        fired.push({ key, id, at: nowMillis })
      }, { clock, scheduler })
      Timers.arm(timers, "k", 1, 100, yield* Effect.fiberId)
      expect(tasks.map((t) => t.millis)).toEqual([100])
      nowMillis = 99.6
      tasks[0]!.run()
      expect(fired).toEqual([])
      expect(tasks.map((t) => t.millis)).toEqual([100, 1])
      nowMillis = 100.2
      tasks[1]!.run()
      expect(fired).toEqual([{ key: "k", id: 1, at: 100.2 }])
      expect(timers.sleeper).toBeUndefined()
    }))

  it.scopedLive("the sleeper is a task of the clock's scheduler, not a fiber: the same deliveries, in order, none early, none after stop", () =>
    Effect.gen(function*() {
      const scope = yield* Effect.scope
      const clock = yield* Effect.clock
      const supervisor = yield* Supervisor.track
      const by = yield* Effect.fiberId
      const fired: Array<Fired> = []
      const live = yield* Timers.liveClock(clock)
      expect(live?.clock).toBe(clock)
      const timers = Timers.make(scope, (key, id) => {
        fired.push({ key, id, at: monotonicNow(clock) })
      }, live)
      const arm = (key: string, id: number, at: number) => {
        // Never an Effect: replacing the sleeper is a cancel.
        expect(Timers.arm(timers, key, id, at, by)).toBeUndefined()
      }
      const start = monotonicNow(clock)
      yield* Effect.supervised(Effect.sync(() => {
        arm("b", 1, start + 60)
        arm("c", 2, start + 80)
        arm("a", 3, start + 30) // earlier: replaces the sleeper
        Timers.cancel(timers, "c")
        arm("b", 4, start + 45) // re-armed: only this one fires
      }), supervisor)
      expect(timers.sleeper?.fiber).toBeUndefined()
      expect(timers.sleeper?.until).toBe(start + 30)
      for (let waited = 0; fired.length < 2 && waited < 5000; waited += 10) yield* Effect.sleep("10 millis")
      yield* Effect.sleep("60 millis")
      expect(fired.map((f) => [f.key, f.id])).toEqual([["a", 3], ["b", 4]])
      // Never before its instant by the monotonic clock, though the event loop's timeouts count from
      // its cached time, which lags it (a task that runs early sleeps the rest).
      expect(fired[0]!.at).toBeGreaterThanOrEqual(start + 30)
      expect(fired[1]!.at).toBeGreaterThanOrEqual(start + 45)
      expect(timers.sleeper).toBeUndefined()
      expect(yield* supervisor.value).toHaveLength(0)

      // An arm earlier than the sleeper's wake-up replaces it: the new one fires first.
      const again = monotonicNow(clock)
      arm("late", 5, again + 60_000)
      arm("soon", 6, again + 20)
      for (let waited = 0; fired.length < 3 && waited < 5000; waited += 10) yield* Effect.sleep("10 millis")
      expect(fired.slice(2).map((f) => f.key)).toEqual(["soon"])
      // Stopped (the client's scope closed) right after an arm: the armed one never fires.
      arm("late", 7, monotonicNow(clock) + 50)
      yield* Timers.stop(timers)
      yield* Effect.sleep("300 millis")
      expect(fired.map((f) => f.key)).toEqual(["a", "b", "soon"])
    }))
})
