/**
 * The engine's timers: one sleeping fiber per client, not one per timer (a fiber per waiting
 * candidate cost ~6 KB of heap each). The armed timers sit in a min-heap on (`at`, key); the fiber
 * sleeps (`Effect.sleep`, so `TestClock` drives it) until the earliest, queues `Timer { key, id }`
 * for every due one in that order, and sleeps again until the next.
 *
 * `Disarm` and re-`Arm` of a key only replace its entry in `armed`: the heap drops a replaced entry
 * when it reaches the top (lazy deletion), or all of them at once when they outnumber the live ones.
 * Only an `Arm` earlier than the fiber's wake-up replaces the fiber (interrupting the old one).
 *
 * On Effect's live `Clock` (not `TestClock`, nor a clock of the application's own) the sleeper is a
 * task of that clock's own scheduler (where its `sleep` puts a fiber's wake-up: the event loop's
 * timeouts) rather than a fiber: the same heap and the same deliveries, but an idle client's wake-up
 * (a renewal a second) costs one callback, not a fiber's resumption, clock reads and a turn of
 * Effect's scheduler, and replacing it is a cancel.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import type * as FiberId from "effect/FiberId"
import type * as Scope from "effect/Scope"
import { interruptSignalNow } from "./interrupt.js"

/** One `Arm`: live while `armed` maps its key to this very entry. */
export interface Armed {
  readonly key: string
  readonly id: number
  /** Monotonic millis, as the engine's `now`. */
  readonly at: number
}

/** The fiber that sleeps until `until`, then delivers what is due. */
export interface Sleeper {
  /**
   * Also while it delivers: it has woken and lets the loop run the steps it delivered before it looks
   * for its next wake-up, and every timer those steps arm (a renewal's call deadline) is at or after
   * this instant, so none of them replaces it.
   */
  until: number
  /** Set once forked (the loop forks it before it handles anything else). */
  fiber: Fiber.RuntimeFiber<void> | undefined
  /** On the live clock: cancels the task its scheduler holds instead of a fiber (undefined: none). */
  cancel: Clock.CancelToken | undefined
}

/** Effect's live clock and the scheduler its sleeps use (the event loop's timeouts). */
export interface LiveClock {
  readonly clock: Clock.Clock
  readonly scheduler: Clock.ClockScheduler
}

export interface Timers {
  /** Where the sleeping fiber lives (the client's fibers' scope). */
  readonly scope: Scope.Scope
  /** Queues `Timer { key, id }` for the loop. */
  readonly deliver: (key: string, id: number) => void
  /** The live entry of each armed key. */
  readonly armed: Map<string, Armed>
  /** A binary min-heap on (`at`, key) of live entries and replaced ones not dropped yet. */
  readonly heap: Array<Armed>
  /** The one sleeper (a fiber, or a task of the live clock), if anything is armed. */
  sleeper: Sleeper | undefined
  /** Effect's live clock, when the sleeper is a task of its scheduler (see above). */
  readonly live: LiveClock | undefined
}

/** The class of Effect's live clock (`Clock.make()` makes one); `TestClock` and others are not it. */
const liveClockPrototype: unknown = Object.getPrototypeOf(Clock.make())

/** The live clock's class has `scheduler()`, where its `sleep` schedules (not in the `Clock` interface). */
const isLiveClock = (clock: Clock.Clock): clock is Clock.Clock & { scheduler(): Effect.Effect<Clock.ClockScheduler> } =>
  Object.getPrototypeOf(clock) === liveClockPrototype && "scheduler" in clock && typeof clock.scheduler === "function"

/** `clock` (the loop fiber's) with its scheduler when it is Effect's live clock; else undefined. */
export const liveClock = (clock: Clock.Clock): Effect.Effect<LiveClock | undefined> =>
  isLiveClock(clock) ? Effect.map(clock.scheduler(), (scheduler) => ({ clock, scheduler })) : Effect.succeed(undefined)

/** On the live clock (`liveClock`) the sleeper is a task of its scheduler; without it, a fiber. */
export const make = (scope: Scope.Scope, deliver: (key: string, id: number) => void, live?: LiveClock): Timers => ({
  scope,
  deliver,
  armed: new Map(),
  heap: [],
  sleeper: undefined,
  live
})

const before = (a: Armed, b: Armed): boolean => a.at < b.at || (a.at === b.at && a.key < b.key)

const siftUp = (heap: Array<Armed>, from: number): void => {
  const item = heap[from]!
  let i = from
  while (i > 0) {
    const parent = (i - 1) >> 1
    if (!before(item, heap[parent]!)) break
    heap[i] = heap[parent]!
    i = parent
  }
  heap[i] = item
}

const siftDown = (heap: Array<Armed>, from: number): void => {
  const item = heap[from]!
  let i = from
  for (;;) {
    const left = 2 * i + 1
    if (left >= heap.length) break
    const right = left + 1
    const child = right < heap.length && before(heap[right]!, heap[left]!) ? right : left
    if (!before(heap[child]!, item)) break
    heap[i] = heap[child]!
    i = child
  }
  heap[i] = item
}

const popTop = (heap: Array<Armed>): void => {
  const last = heap.pop()
  if (last === undefined || heap.length === 0) return
  heap[0] = last
  siftDown(heap, 0)
}

const isLive = (timers: Timers, entry: Armed): boolean => timers.armed.get(entry.key) === entry

/** The earliest live entry, dropping the replaced ones above it. */
const earliest = (timers: Timers): Armed | undefined => {
  const heap = timers.heap
  while (heap.length > 0 && !isLive(timers, heap[0]!)) popTop(heap)
  return heap[0]
}

/** Rebuilds the heap from the live entries once replaced ones outnumber them (bounds its size). */
const compact = (timers: Timers): void => {
  const heap = timers.heap
  if (heap.length < 64 || heap.length <= 2 * timers.armed.size) return
  heap.length = 0
  for (const entry of timers.armed.values()) heap.push(entry)
  for (let i = (heap.length >> 1) - 1; i >= 0; i--) siftDown(heap, i)
}

/** Queues `Timer` for every live entry due by `upTo`, earliest first; they are no longer armed. */
const deliverDue = (timers: Timers, upTo: number): void => {
  for (let next = earliest(timers); next !== undefined && next.at <= upTo; next = earliest(timers)) {
    popTop(timers.heap)
    timers.armed.delete(next.key)
    timers.deliver(next.key, next.id)
  }
}

/**
 * Sleeps until `sleeper.until`, delivers what is due, and goes on with the next entry, while it is
 * still the client's sleeper. Due means by the instant it slept for, or by the clock if that is later:
 * what it slept for is delivered even if the clock reads a little earlier on waking, as a timer fiber
 * of its own would have been.
 */
const sleep = (timers: Timers, sleeper: Sleeper): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeNanos, (nanos) =>
    // Whole millis: TestClock cannot represent fractional instants as nanoseconds.
    Effect.zipRight(
      Effect.sleep(Duration.millis(Math.max(0, Math.ceil(sleeper.until - Number(nanos) / 1_000_000)))),
      Effect.flatMap(Clock.currentTimeNanos, (woke) => {
        if (timers.sleeper !== sleeper) return Effect.void
        deliverDue(timers, Math.max(sleeper.until, Number(woke) / 1_000_000))
        return Effect.zipRight(Effect.yieldNow(), Effect.suspend(() => sleepAgain(timers, sleeper)))
      })
    ))

/** After a delivery: sleeps until the next entry, if any is armed, while it is still the client's sleeper. */
const sleepAgain = (timers: Timers, sleeper: Sleeper): Effect.Effect<void> => {
  if (timers.sleeper !== sleeper) return Effect.void
  const next = earliest(timers)
  if (next === undefined) {
    timers.sleeper = undefined
    return Effect.void
  }
  sleeper.until = next.at
  return sleep(timers, sleeper)
}

/** The live clock's sleeper: a task of its scheduler at `sleeper.until`, on the monotonic clock the engine reads. */
const sleepLive = (timers: Timers, live: LiveClock, sleeper: Sleeper): void => {
  const delay = Math.max(0, Math.ceil(sleeper.until - Number(live.clock.unsafeCurrentTimeNanos()) / 1_000_000))
  sleeper.cancel = live.scheduler.unsafeSchedule(() => wakeLive(timers, live, sleeper), Duration.millis(delay))
}

/**
 * The live sleeper's task ran: delivers what is due and sleeps until the next entry. A timer the
 * delivered steps arm earlier than that (a renewal's call deadline) replaces the task, which costs a
 * cancel, so unlike the fiber it need not wait for those steps. Due means by the clock: a task can
 * run before its instant (the event loop counts timeouts from its cached time, which lags by the
 * length of the tick that scheduled it), and then delivers nothing and sleeps the rest, so no step
 * sees a timer before its instant (a session's deadline, checked against the step's `now`, has
 * passed when its timer is delivered).
 */
const wakeLive = (timers: Timers, live: LiveClock, sleeper: Sleeper): void => {
  if (timers.sleeper !== sleeper) return
  sleeper.cancel = undefined
  deliverDue(timers, Number(live.clock.unsafeCurrentTimeNanos()) / 1_000_000)
  if (timers.sleeper !== sleeper) return
  const next = earliest(timers)
  if (next === undefined) {
    timers.sleeper = undefined
    return
  }
  sleeper.until = next.at
  sleepLive(timers, live, sleeper)
}

/** Cancels the live sleeper's task (the client's scope closes); a sleeping fiber ends with the scope. */
export const stop = (timers: Timers): Effect.Effect<void> =>
  Effect.sync(() => {
    timers.sleeper?.cancel?.()
    timers.sleeper = undefined
  })

/** Cancels the timer armed under `key`, if any (the `Disarm` command). */
export const cancel = (timers: Timers, key: string): void => {
  timers.armed.delete(key)
  compact(timers)
}

/**
 * Delivers `Timer { key, id }` at `at`, replacing the timer armed under `key` (the `Arm` command), as
 * the loop fiber `by`. An Effect only when the sleeping fiber must be replaced by an earlier one.
 */
export const arm = (timers: Timers, key: string, id: number, at: number, by: FiberId.FiberId): Effect.Effect<void> | undefined => {
  const entry: Armed = { key, id, at }
  timers.armed.set(key, entry)
  timers.heap.push(entry)
  siftUp(timers.heap, timers.heap.length - 1)
  compact(timers)
  const current = timers.sleeper
  if (current !== undefined && current.until <= at) return undefined
  const sleeper: Sleeper = { until: at, fiber: undefined, cancel: undefined }
  if (timers.live !== undefined) {
    current?.cancel?.()
    timers.sleeper = sleeper
    sleepLive(timers, timers.live, sleeper)
    return undefined
  }
  if (current?.fiber !== undefined) interruptSignalNow(current.fiber, by)
  timers.sleeper = sleeper
  return Effect.map(Effect.forkIn(sleep(timers, sleeper), timers.scope), (fiber) => {
    sleeper.fiber = fiber
  })
}
